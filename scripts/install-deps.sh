#!/usr/bin/env bash
# Installs the Debian packages larder's build, tests and benchmarks use, when they are missing.
# Needs root (or sudo) and apt-get; elsewhere it lists what is missing and leaves it to the user.
set -euo pipefail

# build and tests: compilers, clang's libFuzzer runtime, strace for the syscall-count pass,
# sqlite3 as a real program to trace, pkg-config for the install test; benchmarks: the
# allocators larder is compared with, and the real programs of the `programs` suite (python3,
# sqlite3 and clang above; memcached driven by libmemcached-tools' memcslap load generator;
# valgrind for scripts/count-instructions.sh; curl to download the peers built from source,
# scripts/build-peers.sh).
packages=(cmake ninja-build make gcc g++ clang libclang-rt-14-dev strace python3-venv sqlite3
          pkg-config libmimalloc2.0 libjemalloc2 libgoogle-perftools4 memcached libmemcached-tools
          valgrind curl ca-certificates)

# The Rust crate's tests (rust/larder) need cargo. A rustup toolchain in ~/.cargo/bin counts;
# without one, Debian's cargo (and rustc) is installed.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
  echo "install-deps: cargo is missing (the Rust crate's tests need it); adding Debian's cargo"
  packages+=(cargo)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here; please install: ${missing[*]}" >&2
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-deps: not root; please install: ${missing[*]}" >&2; exit 0; fi
fi
echo "install-deps: installing ${missing[*]}"
# A server package (memcached) starts its system service when installed; the harness starts
# its own copy on a free loopback port and needs no daemon left running. Debian's way to say
# "start no service" is a policy-rc.d that exits 101 (invoke-rc.d(8)); one is put in place for
# the install only, and only when the machine has none of its own.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 755 "$policy" && own_policy=1
  trap '[ -n "$own_policy" ] && $sudo rm -f "$policy"' EXIT
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
