//! Compiles liblarder's C sources with the `cc` crate (nothing prebuilt).
//!
//! The source list is read from liblarder's own `src/sources.cmake` (the allocator core) and
//! `src/library.cmake` (version), so the crate follows the C build when files are added or
//! split. `wrappers.c`, the file that defines the standard names (malloc, free, operator new,
//! ...), is left out unless the `override` feature asks for it.
//!
//! `larder_stats_t` is mapped to Rust here too: its fields are read from `larder.h`, and a C
//! file compiled into the library asserts (`_Static_assert`) that the layout is the one Rust
//! was given, so a field added in C cannot be silently misread.
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    // csrc/ in a packaged crate (package.sh), else the repository around rust/larder.
    let (src, inc) = if manifest.join("csrc/src/sources.cmake").is_file() {
        (manifest.join("csrc/src"), manifest.join("csrc/include"))
    } else {
        (manifest.join("../../src"), manifest.join("../../include"))
    };
    if !src.join("sources.cmake").is_file() {
        panic!(
            "larder: liblarder's C sources are not at {} (expected csrc/ in a packaged crate, \
             or the larder repository around rust/larder)",
            src.display()
        );
    }

    check_version(&inc.join("larder.h"));

    let mut files = cmake_list(&src.join("sources.cmake"), "LARDER_CORE_SOURCES");
    if src.join("library.cmake").is_file() {
        files.extend(cmake_list(&src.join("library.cmake"), "LARDER_LIBRARY_SOURCES"));
    }
    let mut seen = Vec::new();
    files.retain(|f| {
        let new = !seen.contains(f);
        seen.push(f.clone());
        new
    });
    let override_names = env::var_os("CARGO_FEATURE_OVERRIDE").is_some();
    if !override_names {
        files.retain(|f| f != "wrappers.c");
    }

    let fields = stats_fields(&inc.join("larder.h"));
    fs::write(out.join("stats.rs"), stats_rust(&fields)).unwrap();
    fs::write(out.join("larder_rs_stats_check.c"), stats_check_c(&fields)).unwrap();

    let mut build = cc::Build::new();
    for f in &files {
        build.file(src.join(f));
    }
    build
        .file(out.join("larder_rs_stats_check.c"))
        .include(&src)
        .include(&inc)
        .flag_if_supported("-std=gnu11")
        .flag("-fno-semantic-interposition")
        .flag("-ftls-model=initial-exec")
        .flag("-fexceptions")
        .flag_if_supported("-Wno-unused-parameter");
    if env::var_os("CARGO_FEATURE_STATS").is_some() {
        build.define("LARDER_STATS", "1");
    }
    if env::var_os("CARGO_FEATURE_DEBUG").is_some() {
        build.define("LARDER_DEBUG_BUILD", "1").opt_level(1).debug(true);
    } else {
        // An allocator compiled at -O0 (cargo's debug profile) would misrepresent it.
        build.define("NDEBUG", None).opt_level(3);
    }
    build.compile("larder");

    for f in &files {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }
    for dir in [&src, &inc] {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ext == "h" || ext == "cmake" {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:include={}", inc.display());
}

/// The file names in `set(NAME ...)` of a CMake list file (one per line, `#` comments).
fn cmake_list(path: &Path, name: &str) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    let start = text
        .find(&format!("set({}", name))
        .unwrap_or_else(|| panic!("{}: no set({} ...)", path.display(), name));
    let body = &text[start + 4 + name.len()..];
    let mut files = Vec::new();
    for line in body.lines() {
        let line = line.split('#').next().unwrap();
        let (line, done) = match line.find(')') {
            Some(i) => (&line[..i], true),
            None => (line, false),
        };
        files.extend(line.split_whitespace().map(|s| s.to_string()));
        if done {
            break;
        }
    }
    for f in &files {
        if !f.ends_with(".c") {
            panic!("{}: {} lists {}, not a .c file name", path.display(), name, f);
        }
    }
    files
}

/// The crate's version must be the one larder.h sets.
fn check_version(header: &Path) {
    let text = fs::read_to_string(header).unwrap();
    let part = |p: &str| -> String {
        let key = format!("#define LARDER_VERSION_{} ", p);
        let line = text
            .lines()
            .find(|l| l.starts_with(&key))
            .unwrap_or_else(|| panic!("{}: no LARDER_VERSION_{}", header.display(), p));
        line[key.len()..].trim().to_string()
    };
    let c = format!("{}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH"));
    let crate_version = env::var("CARGO_PKG_VERSION").unwrap();
    if c != crate_version {
        panic!(
            "larder: Cargo.toml says version {} but include/larder.h says {}; the version is set \
             in larder.h, so change Cargo.toml to match",
            crate_version, c
        );
    }
}

struct Field {
    name: String,
    doc: String,
}

/// The fields of `larder_stats_t`, all `size_t`, with their comments.
fn stats_fields(header: &Path) -> Vec<Field> {
    let text = fs::read_to_string(header).unwrap();
    let start = text
        .find("typedef struct larder_stats_s {")
        .expect("larder.h: no typedef struct larder_stats_s");
    let body = &text[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("} larder_stats_t;").expect("larder.h: no } larder_stats_t;")];
    let mut fields = Vec::new();
    let mut pending_doc = String::new();
    for raw in body.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let (code, comment) = match line.find("/*") {
            Some(i) => {
                let c = &line[i + 2..];
                let c = c.find("*/").map(|j| &c[..j]).unwrap_or(c);
                (line[..i].trim(), c.trim())
            }
            None => (line, ""),
        };
        if code.is_empty() {
            pending_doc = comment.to_string();
            continue;
        }
        if !code.starts_with("size_t ") || !code.ends_with(';') {
            panic!(
                "larder.h: larder_stats_t has a member that is not size_t: `{}`; \
                 rust/larder/build.rs maps size_t fields only and must learn this one",
                line
            );
        }
        let doc = if comment.is_empty() { pending_doc.clone() } else { comment.to_string() };
        for name in code["size_t ".len()..code.len() - 1].split(',') {
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                panic!("larder.h: cannot read the larder_stats_t field list near `{}`", line);
            }
            fields.push(Field { name: name.to_string(), doc: doc.clone() });
        }
    }
    if fields.is_empty() {
        panic!("larder.h: larder_stats_t has no fields");
    }
    fields
}

fn stats_rust(fields: &[Field]) -> String {
    let mut s = String::new();
    s.push_str(
        "/// liblarder's statistics (`larder_stats_t`): per-thread counters merged when asked for.\n\
         ///\n/// Generated by build.rs from `larder.h`, one `usize` per `size_t` field. The call\n\
         /// counters (`mallocs`, `frees`, ...) are zero when the `stats` feature is off.\n\
         #[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]\npub struct Stats {\n",
    );
    for f in fields {
        if !f.doc.is_empty() {
            writeln!(s, "    /// {}", f.doc.replace('\n', " ")).unwrap();
        }
        writeln!(s, "    pub {}: usize,", f.name).unwrap();
    }
    s.push_str("}\n\nimpl Stats {\n    /// The field names, in order, for printing.\n    pub const FIELDS: &'static [&'static str] = &[");
    for f in fields {
        write!(s, "\"{}\", ", f.name).unwrap();
    }
    s.push_str("];\n\n    /// The values in the order of `FIELDS`.\n    pub fn values(&self) -> Vec<usize> {\n        vec![");
    for f in fields {
        write!(s, "self.{}, ", f.name).unwrap();
    }
    s.push_str("]\n    }\n}\n");
    s
}

fn stats_check_c(fields: &[Field]) -> String {
    let mut s = String::from(
        "/* Generated by rust/larder/build.rs: larder_stats_t is laid out as the Rust Stats struct. */\n\
         #include <stddef.h>\n#include \"larder.h\"\n",
    );
    writeln!(
        s,
        "_Static_assert(sizeof(larder_stats_t) == {} * sizeof(size_t), \"larder_stats_t changed: rebuild the Rust mapping (build.rs)\");",
        fields.len()
    )
    .unwrap();
    for (i, f) in fields.iter().enumerate() {
        writeln!(
            s,
            "_Static_assert(offsetof(larder_stats_t, {}) == {} * sizeof(size_t), \"larder_stats_t.{} moved\");",
            f.name, i, f.name
        )
        .unwrap();
    }
    s.push_str("extern const int larder_rs_stats_checked;\nconst int larder_rs_stats_checked = 1;\n");
    s
}
