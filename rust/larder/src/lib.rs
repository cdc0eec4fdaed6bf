//! # larder
//!
//! liblarder is a Hoard-style malloc for long-lived multithreaded
//! servers: per-thread heaps, superblocks owned by one heap at a time, a global heap that
//! bounds blowup, frees from other threads that never wait for a lock, and empty memory
//! given back to the OS after a delay. This crate compiles its C sources (with the `cc`
//! crate; nothing prebuilt) and offers it as a Rust global allocator:
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: larder::Larder = larder::Larder;
//!
//! fn main() {
//!     let v: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
//!     let s = larder::stats();
//!     println!("{} strings; larder holds {} bytes, {} in use", v.len(), s.bytes_held, s.bytes_in_use);
//! }
//! ```
//!
//! [`Larder`] calls only liblarder's prefixed functions (`larder_malloc`, `larder_memalign`,
//! `larder_calloc`, `larder_realloc`, `larder_free`), so C code in the same program keeps
//! the C library's malloc unless the `override` feature is on, which also compiles in
//! liblarder's standard names (malloc, free, ..., operator new and delete).
//!
//! Besides the allocator: [`stats`] (liblarder's statistics), [`validate`] (a full
//! consistency walk), [`version`], [`trim`], [`usable_size`], [`option_set`] and
//! [`option_get`] (tunables, also read from `LARDER_*` environment variables at start).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{CStr, CString};
use std::ptr;

mod stats_gen {
    include!(concat!(env!("OUT_DIR"), "/stats.rs"));
}
pub use stats_gen::Stats;

/// The raw C API of liblarder (`larder.h`), for what the safe functions do not cover.
pub mod ffi {
    use std::os::raw::{c_char, c_double, c_int, c_void};

    extern "C" {
        pub fn larder_version() -> *const c_char;
        pub fn larder_malloc(size: usize) -> *mut c_void;
        pub fn larder_calloc(count: usize, size: usize) -> *mut c_void;
        pub fn larder_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
        pub fn larder_free(ptr: *mut c_void);
        pub fn larder_memalign(alignment: usize, size: usize) -> *mut c_void;
        pub fn larder_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;
        pub fn larder_posix_memalign(out: *mut *mut c_void, alignment: usize, size: usize) -> c_int;
        pub fn larder_usable_size(ptr: *const c_void) -> usize;
        pub fn larder_malloc_shared(size: usize) -> *mut c_void;
        pub fn larder_trim(pad: usize) -> c_int;
        pub fn larder_option_set(name: *const c_char, value: *const c_char) -> c_int;
        pub fn larder_option_get(name: *const c_char) -> c_double;
        pub fn larder_stats_get(out: *mut super::Stats);
        pub fn larder_stats_print(fd: c_int);
        pub fn larder_stats_print_json(fd: c_int);
        pub fn larder_validate() -> c_int;
    }
}

/// Every block liblarder returns is aligned to at least this many bytes (larder.h's
/// 16-byte minimum); larger alignments go through `larder_memalign`.
pub const MIN_ALIGN: usize = 16;

/// liblarder as a [`GlobalAlloc`]:
/// `#[global_allocator] static GLOBAL: larder::Larder = larder::Larder;`
///
/// | GlobalAlloc | alignment ≤ 16 | larger alignment |
/// |---|---|---|
/// | `alloc` | `larder_malloc` | `larder_memalign` |
/// | `alloc_zeroed` | `larder_calloc` | `larder_memalign`, then zeroed |
/// | `realloc` | `larder_realloc` | `larder_memalign`, copy, `larder_free` |
/// | `dealloc` | `larder_free` | `larder_free` |
///
/// liblarder has no sized free: it finds a block's size class from its superblock header in
/// O(1), so `dealloc` does not pass the layout on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Larder;

#[inline]
fn plain(align: usize) -> bool {
    align <= MIN_ALIGN
}

unsafe impl GlobalAlloc for Larder {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align()) {
            ffi::larder_malloc(layout.size()) as *mut u8
        } else {
            ffi::larder_memalign(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align()) {
            ffi::larder_calloc(1, layout.size()) as *mut u8
        } else {
            let p = ffi::larder_memalign(layout.align(), layout.size()) as *mut u8;
            if !p.is_null() {
                ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        ffi::larder_free(ptr as *mut _)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(layout.align()) {
            return ffi::larder_realloc(ptr as *mut _, new_size) as *mut u8;
        }
        let p = ffi::larder_memalign(layout.align(), new_size) as *mut u8;
        if !p.is_null() {
            ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
            ffi::larder_free(ptr as *mut _);
        }
        p
    }
}

/// liblarder's statistics now: calls, bytes in use, held and mapped, superblock moves,
/// large objects, OS calls (see [`Stats`]). Counters are per thread and merged here, so
/// counting never slows the allocation paths down.
pub fn stats() -> Stats {
    let mut s = Stats::default();
    unsafe { ffi::larder_stats_get(&mut s) };
    s
}

/// Prints liblarder's statistics table (or JSON) to a file descriptor, for example 2.
pub fn stats_print(fd: i32, json: bool) {
    unsafe {
        if json {
            ffi::larder_stats_print_json(fd)
        } else {
            ffi::larder_stats_print(fd)
        }
    }
}

/// Walks every heap and superblock and checks every list, counter and Hoard's invariant.
/// `Err(n)`: n violations, each described on stderr. Safe at any time from any thread.
pub fn validate() -> Result<(), usize> {
    match unsafe { ffi::larder_validate() } {
        0 => Ok(()),
        n => Err(n as usize),
    }
}

/// The version of the compiled liblarder, for example "0.1.0" (the crate's version).
pub fn version() -> &'static str {
    unsafe { CStr::from_ptr(ffi::larder_version()) }.to_str().unwrap_or("?")
}

/// Gives every free page back to the OS now; true if memory was released.
pub fn trim() -> bool {
    unsafe { ffi::larder_trim(0) != 0 }
}

/// The usable size of a block that liblarder allocated (at least the size asked for).
///
/// # Safety
/// `ptr` must have come from liblarder (for example through [`Larder`]) and not be freed.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    ffi::larder_usable_size(ptr as *const _)
}

/// Sets a tunable by its name without the `LARDER_` prefix, e.g. `("purge_delay_ms", "0")`.
/// `Err(())` for an unknown name or malformed value (liblarder says which on stderr).
pub fn option_set(name: &str, value: &str) -> Result<(), ()> {
    let (n, v) = match (CString::new(name), CString::new(value)) {
        (Ok(n), Ok(v)) => (n, v),
        _ => return Err(()),
    };
    if unsafe { ffi::larder_option_set(n.as_ptr(), v.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(())
    }
}

/// The current value of a tunable, or `None` for an unknown name.
pub fn option_get(name: &str) -> Option<f64> {
    let n = CString::new(name).ok()?;
    let v = unsafe { ffi::larder_option_get(n.as_ptr()) };
    if v == -1.0 {
        None
    } else {
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    //! Unit tests: Larder called directly (the test harness itself runs on the system
    //! allocator here; tests/global_alloc.rs installs Larder as the global allocator).
    use super::*;
    use std::sync::Mutex;

    // The tests read liblarder's process-wide statistics: one at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn version_is_the_crate_version() {
        let _serial = serial();
        assert_eq!(version(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn stats_struct_has_every_field() {
        let _serial = serial();
        assert_eq!(std::mem::size_of::<Stats>(), Stats::FIELDS.len() * std::mem::size_of::<usize>());
        assert!(Stats::FIELDS.contains(&"bytes_in_use"));
        assert_eq!(stats().values().len(), Stats::FIELDS.len());
    }

    #[test]
    fn alignments_and_sizes() {
        let _serial = serial();
        let sizes = [1usize, 7, 16, 24, 100, 1000, 5000, 16384, 70_000, 1 << 20, 3 << 20];
        let mut align = 1;
        while align <= 1 << 16 {
            for &size in &sizes {
                let l = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = Larder.alloc(l);
                    assert!(!p.is_null(), "alloc {:?}", l);
                    assert_eq!(p as usize % align.max(MIN_ALIGN), 0, "alignment of {:?}", l);
                    assert!(usable_size(p) >= size, "usable size of {:?}", l);
                    ptr::write_bytes(p, 0xa5, size);
                    Larder.dealloc(p, l);
                }
            }
            align *= 2;
        }
    }

    #[test]
    fn zeroed_even_when_reused() {
        let _serial = serial();
        for &(size, align) in &[(64usize, 8usize), (4000, 16), (200, 64), (10_000, 4096), (2 << 20, 8)] {
            let l = Layout::from_size_align(size, align).unwrap();
            unsafe {
                for _ in 0..3 {
                    let p = Larder.alloc(l);
                    ptr::write_bytes(p, 0xff, size);
                    Larder.dealloc(p, l);
                    let z = Larder.alloc_zeroed(l);
                    assert_eq!(z as usize % align, 0);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0), "{:?}", l);
                    Larder.dealloc(z, l);
                }
            }
        }
    }

    #[test]
    fn realloc_keeps_contents() {
        let _serial = serial();
        for &align in &[8usize, 16, 64, 4096] {
            let mut size = 8;
            let mut l = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let mut p = Larder.alloc(l);
                for i in 0..size {
                    *p.add(i) = i as u8;
                }
                for &next in &[100usize, 5000, 70_000, 1 << 21, 300, 8] {
                    p = Larder.realloc(p, l, next);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0);
                    for i in 0..size.min(next) {
                        assert_eq!(*p.add(i), i as u8, "byte {} after realloc {} -> {}", i, size, next);
                    }
                    for i in 0..next {
                        *p.add(i) = i as u8;
                    }
                    size = next;
                    l = Layout::from_size_align(size, align).unwrap();
                }
                Larder.dealloc(p, l);
            }
        }
    }

    #[test]
    fn stats_see_direct_allocations() {
        let _serial = serial();
        let before = stats();
        let l = Layout::from_size_align(256, 8).unwrap();
        let ptrs: Vec<*mut u8> = (0..1000).map(|_| unsafe { Larder.alloc(l) }).collect();
        let during = stats();
        for p in ptrs {
            unsafe { Larder.dealloc(p, l) };
        }
        // An absolute bound: frees that larder has not collected yet only make it larger.
        assert!(during.bytes_in_use >= 1000 * 256,
                "bytes_in_use {} -> {}", before.bytes_in_use, during.bytes_in_use);
        if cfg!(feature = "stats") {
            assert!(during.mallocs >= before.mallocs + 1000);
        }
        assert_eq!(validate(), Ok(()));
    }

    #[test]
    fn options() {
        let _serial = serial();
        assert!(option_get("no_such_option").is_none());
        assert!(option_set("no_such_option", "1").is_err());
        let k = option_get("k").expect("the K tunable");
        assert!(option_set("k", "4").is_ok());
        assert_eq!(option_get("k"), Some(4.0));
        option_set("k", &format!("{}", k)).unwrap();
    }
}
