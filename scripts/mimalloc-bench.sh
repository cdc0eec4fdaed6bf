#!/usr/bin/env bash
# mimalloc-bench's benchmark programs under every allocator, through larder-bench: the set of
# programs allocator authors compare on (https://github.com/daanx/mimalloc-bench), with the
# arguments of its bench.sh, as the harness's `mimalloc-bench` suite
# (harness/larder_bench/programs/mimalloc_bench.py).
#
# usage: scripts/mimalloc-bench.sh [-h|--help] [--build-only] [larder-bench run options...]
#   e.g. scripts/mimalloc-bench.sh --repeats 3 --allocators glibc,larder,jemalloc,tcmalloc,mimalloc
#
# The source: $MIMALLOC_BENCH_SRC (a checkout), else a clone of the repository at a fixed
# revision (REV, below) into <build>/mimalloc-bench-src (needs the network once). The programs
# that need no further download are built into <build>/mimalloc-bench/ (sh6bench and sh8bench,
# whose sources bench.sh downloads, and the security tests are left out; so are the ones that
# are whole applications: lean, redis, rocksdb, z3, gs, lua, rbstress, spec). Then, unless
# --build-only, `larder-bench run --suite mimalloc-bench` with the other options. Needs cmake,
# a C and a C++ compiler, git for the clone, and `make build venv` first (liblarder and the
# harness).
set -euo pipefail
cd "$(dirname "$0")/.."

REV=ce5784f1cef3d48ddc931479e4899ffad5ab3943   # mimalloc-bench, 2026-07-15
URL=https://github.com/daanx/mimalloc-bench
build=${LARDER_BUILD_DIR:-build}
PROGRAMS=(cfrac espresso barnes alloc-test larson larson-sized xmalloc-test cache-thrash cache-scratch
          malloc-large mstress mleak rptest glibc-simple glibc-thread)

case "${1:-}" in
  -h|--help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0 ;;
esac
run=1
if [ "${1:-}" = --build-only ]; then run=0; shift; fi
for tool in cmake git c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "mimalloc-bench.sh: $tool is missing" >&2; exit 2; }
done
if [ ! -d "$build" ]; then
  echo "mimalloc-bench.sh: no build folder $build: run 'make build' first" >&2
  exit 2
fi

out=$build/mimalloc-bench

# The programs from a mimalloc-bench checkout $1, into $out.
build_programs() {
  local src=$1 rev tree=$build/mimalloc-bench-tree log=$build/mimalloc-bench-build.log
  if [ ! -f "$src/bench/CMakeLists.txt" ]; then
    echo "mimalloc-bench.sh: $src is not a mimalloc-bench checkout (no bench/CMakeLists.txt)" >&2
    exit 2
  fi
  rev=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
  [ "$rev" = "$REV" ] || echo "mimalloc-bench.sh: note: $src is at $rev; the suite's arguments are those of $REV" >&2
  # a copy of bench/ whose CMakeLists leaves out the targets with downloaded sources
  rm -rf "$tree"
  cp -r "$src/bench" "$tree"
  sed -i -e '/sh6bench\|sh8bench\|add_subdirectory(security)/s/^/# (left out by scripts\/mimalloc-bench.sh) /' \
    "$tree/CMakeLists.txt"
  if ! { cmake -S "$tree" -B "$build/mimalloc-bench-build" -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$build/mimalloc-bench-build" -j "$(nproc)" -- "${PROGRAMS[@]}"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "mimalloc-bench.sh: the build failed (all of it in $log)" >&2
    exit 1
  fi
  mkdir -p "$out"
  for p in "${PROGRAMS[@]}"; do cp "$build/mimalloc-bench-build/$p" "$out/$p"; done
  cp "$src/bench/espresso/largest.espresso" "$out/largest.espresso"
  cp "$src/bench/barnes/input" "$out/barnes.input"
  # barnes reads its parameters from standard input (bench.sh redirects it); exec keeps the process
  printf '%s\n' '#!/bin/sh' 'exec "$(dirname "$0")/barnes" < "$(dirname "$0")/barnes.input"' > "$out/barnes-run"
  chmod +x "$out/barnes-run"
  echo "$rev" > "$out/built-from"
  echo "mimalloc-bench.sh: ${#PROGRAMS[@]} programs of mimalloc-bench $rev in $out" >&2
}

if [ -n "${MIMALLOC_BENCH_SRC:-}" ]; then
  build_programs "$MIMALLOC_BENCH_SRC"
elif [ -d "$build/mimalloc-bench-src/.git" ] || [ ! -f "$out/built-from" ]; then
  src=$build/mimalloc-bench-src
  if [ ! -d "$src/.git" ]; then
    rm -rf "$src"
    if ! git clone --quiet "$URL" "$src" || ! git -C "$src" checkout --quiet "$REV"; then
      echo "mimalloc-bench.sh: cannot clone $URL at $REV; give a checkout with MIMALLOC_BENCH_SRC=DIR" >&2
      rm -rf "$src"
      exit 1
    fi
  fi
  build_programs "$src"
else
  echo "mimalloc-bench.sh: using the programs in $out (built from $(cat "$out/built-from"))" >&2
fi

[ "$run" = 1 ] || exit 0
if [ ! -x .venv/bin/larder-bench ]; then
  echo "mimalloc-bench.sh: the harness is not installed: run 'make build venv' first" >&2
  exit 2
fi
exec .venv/bin/larder-bench run --suite mimalloc-bench --build-dir "$build" "$@"
