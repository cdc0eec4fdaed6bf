#!/bin/sh
# Makes the publishable crate without touching this folder: copies the crate and liblarder's
# C sources and headers (into csrc/, where build.rs looks first) to a temporary folder and runs
# `cargo package` there, with any arguments given (for example --list or --no-verify). The
# verification build uses the vendored cc (rust/vendor), so no network is needed.
# The .crate lands in $CARGO_TARGET_DIR/package (default rust/larder/target/package).
# Publishing would be `cargo publish` from the same temporary folder.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$here/target}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/larder
mkdir -p "$pkg/csrc/src" "$pkg/csrc/include" "$pkg/.cargo"
cp -R "$here/Cargo.toml" "$here/Cargo.lock" "$here/build.rs" "$here/README.md" "$here/src" "$here/tests" "$pkg/"
cp -L "$here/LICENSE" "$pkg/LICENSE"
cp "$root"/src/*.c "$root"/src/*.h "$root"/src/*.cmake "$pkg/csrc/src/"
cp "$root"/include/*.h "$pkg/csrc/include/"
printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "%s"\n' \
  "$root/rust/vendor" >"$pkg/.cargo/config.toml"
cd "$pkg"
cargo package --offline --target-dir "$target" "$@"
