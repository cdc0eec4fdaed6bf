#!/bin/sh
# Makes the publishable crate: copies liblarder's C sources and headers into csrc/ (where
# build.rs looks first), runs `cargo package` with any arguments given (for example --list
# or --no-verify), and removes csrc/ again. Publishing would be `cargo publish` the same way.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -rf "$here/csrc"
mkdir -p "$here/csrc/src" "$here/csrc/include"
trap 'rm -rf "$here/csrc"' EXIT
cp "$root"/src/*.c "$root"/src/*.h "$root"/src/*.cmake "$here/csrc/src/"
cp "$root"/include/*.h "$here/csrc/include/"
cd "$here"
cargo package --allow-dirty "$@"
