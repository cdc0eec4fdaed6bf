#!/bin/sh
# The Rust crate is ready to publish: rust/larder/package.sh makes the .crate (with liblarder's
# C sources in csrc/) and cargo verifies that it builds on its own; then its file list is checked.
# usage: cargo_package.sh CRATE_DIR TARGET_DIR
set -eu
crate=$1 target=$2
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    PATH=${CARGO_HOME:-$HOME/.cargo}/bin:$PATH
  else
    echo "FAIL: cargo is missing; scripts/install-deps.sh installs it (make test runs it first)."
    exit 1
  fi
fi
rm -rf "$target/package"
CARGO_TARGET_DIR=$target sh "$crate/package.sh" --color never
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$crate/Cargo.toml" | head -1)
file=$target/package/larder-$version.crate
[ -f "$file" ] || { echo "FAIL: no $file"; exit 1; }
list=$(tar tzf "$file")
for f in Cargo.toml build.rs src/lib.rs README.md LICENSE csrc/src/sources.cmake csrc/src/library.cmake \
         csrc/src/wrappers.c csrc/src/version.c csrc/include/larder.h; do
  echo "$list" | grep -qx "larder-$version/$f" || { echo "FAIL: $f is not in $file"; exit 1; }
done
for c in $(sed -n '/^set(LARDER_CORE_SOURCES/,/)/p' "$crate/../../src/sources.cmake" | sed 's/#.*//' | grep -o '[A-Za-z0-9_]*\.c'); do
  echo "$list" | grep -qx "larder-$version/csrc/src/$c" || { echo "FAIL: core source $c is not in $file"; exit 1; }
done
if echo "$list" | grep -q '\.cargo/'; then echo "FAIL: the package carries .cargo/"; exit 1; fi
echo "$file: $(echo "$list" | wc -l) files; built on its own by cargo's verification"
