#!/bin/sh
# cargo test for the Rust crate (rust/larder): its unit tests, a multithreaded program with
# larder as its global allocator, and the override feature. cargo comes from the distribution's package (installed by
# scripts/install-deps.sh, which `make test` runs first) or from rustup's ~/.cargo/bin.
# usage: cargo_test.sh CRATE_DIR TARGET_DIR
set -eu
crate=$1 target=$2
cargo=$(command -v cargo || true)
[ -z "$cargo" ] && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] && cargo=${CARGO_HOME:-$HOME/.cargo}/bin/cargo
if [ -z "$cargo" ]; then
  echo "FAIL: cargo is missing, so the Rust crate cannot be tested."
  echo "      scripts/install-deps.sh installs it (Debian's cargo package); make test runs it first."
  exit 1
fi
echo "$("$cargo" --version) ($cargo)"
# In the crate's folder, so that its .cargo/config.toml points cargo at the vendored cc:
# no network is needed, and the lock file's versions are used as they are.
cd "$crate"
"$cargo" test --offline --locked --target-dir "$target" --color never
# and with the override feature, which makes the C names (malloc, free, ...) larder's too
exec "$cargo" test --offline --locked --target-dir "$target" --color never --features override --test override
