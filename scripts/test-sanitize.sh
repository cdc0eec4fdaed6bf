#!/usr/bin/env bash
# The allocator's tests under sanitizers (issue 12), in build folders of their own, configured
# from the command line only (no CMakeLists.txt knows about sanitizers):
#
#   UBSan  -fsanitize=undefined -fno-sanitize-recover=all: every test labelled `alloc`, the
#          `.preload` ones included: gcc's libubsan intercepts no allocation function, so the
#          UBSan liblarder.so preloads into programs built against libc alone as the plain one
#          does (checked: the .preload runs and the real programs, alloc_preload_*, pass).
#   TSan   -fsanitize=thread: the tests whose threads call the prefixed API concurrently
#          (blocks handed between threads and freed remotely, threads exiting with blocks in
#          flight, statistics and trim from another thread), linked against the TSan
#          liblarder.a, and the ownership map's unit test (lock-free add/remove/lookup). TSan
#          sees larder's own atomics and locks, so it checks the synchronisation that hands a
#          block from one thread to another. The programs that call malloc are left out: in a TSan build both larder (linked or
#          preloaded) and TSan's interceptors define malloc, and they crash inside the TSan
#          runtime (CHECK failed in its allocator, SEGV at start), which says nothing about
#          larder. So TSan runs alloc_misuse_threads_prefixed, written for it: the larder_* API
#          from many threads and never the standard names; and alloc_medium_cache_idle_race,
#          the purge giving back idle threads' kept medium spans as they come back (the
#          owner's cache and the purge ordered by the busy mark alone); and
#          alloc_medium_late_tails_race, late tails listed while other threads free and grow
#          their blocks; and alloc_misuse_threads_prefixed.fit, the first with the fit tier
#          (src/fit.c) serving every block above 256 B. Suppressions, each with its
#          reason, are in tests/alloc/tsan.supp.
#
# usage: scripts/test-sanitize.sh [ubsan] [tsan]     (default: both)
# environment: BUILD_PREFIX (default build-sanitize: folders build-sanitize-ubsan and
#              build-sanitize-tsan), JOBS (default 2), SRC (default the repository).
# Exit status: non-zero when a build failed or any test failed. Budget: about 8 minutes on
# 2 cores for both (the builds are most of it).
set -u

SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD_PREFIX=${BUILD_PREFIX:-$SRC/build-sanitize}
JOBS=${JOBS:-2}
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(ubsan tsan)

# Tests run under TSan (ctest -R); .nostats leaves out the statistics thread, so that its
# reports are about the hand-over of blocks alone.
TSAN_TESTS='^alloc_(misuse_threads_prefixed|misuse_threads_prefixed\.nostats|misuse_threads_prefixed\.fit|addrmap_unit|medium_cache_idle_race|medium_late_tails_race)$'
# Left out of UBSan: nothing (a regular expression for ctest -E, when something must be).
UBSAN_EXCLUDE=${UBSAN_EXCLUDE:-}

status=0
summary=()

configure_build() { # dir flags
  local dir=$1 flags=$2
  mkdir -p "$dir"
  # no clang fuzzer in these folders: the fuzzers have their own sanitizers
  cmake -S "$SRC" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
        -DLARDER_CLANG=LARDER_CLANG-NOTFOUND >"$dir/sanitize-configure.log" 2>&1 || {
    echo "test-sanitize: configuring $dir failed (see $dir/sanitize-configure.log)" >&2; return 1; }
  cmake --build "$dir" -j "$JOBS" >"$dir/sanitize-build.log" 2>&1 || {
    echo "test-sanitize: building $dir failed (see $dir/sanitize-build.log)" >&2; tail -20 "$dir/sanitize-build.log" >&2; return 1; }
}

run_ctest() { # dir name args...
  local dir=$1 name=$2
  shift 2
  local t0=$SECONDS
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" "$@") >"$dir/sanitize-ctest.log" 2>&1
  local rc=$?
  local line
  line=$(grep -E "tests passed|No tests were found" "$dir/sanitize-ctest.log" | tail -1)
  summary+=("$name: ${line:-no summary} ($((SECONDS - t0)) s)")
  if [ $rc -ne 0 ]; then
    grep -E "^\s+[0-9]+ - " "$dir/sanitize-ctest.log" | sed "s/^/  $name failed: /" >&2
    # what each failed test printed (the first 25 lines after CTest's verdict): CI shows only
    # this script's output, and the log stays on the machine
    awk '/\*\*\*(Failed|Timeout|Exception)/ {n = 26} n > 0 {print "  | " $0; n--}' "$dir/sanitize-ctest.log" | head -150 >&2
    # what the sanitizers said, once per distinct report line
    grep -hE "runtime error:|WARNING: ThreadSanitizer:|SUMMARY: (Undefined|Thread)" "$dir/sanitize-ctest.log" | sort | uniq -c | sort -rn | head -20 >&2
  fi
  return $rc
}

for mode in "${modes[@]}"; do
  t0=$SECONDS
  case $mode in
    ubsan)
      dir=$BUILD_PREFIX-ubsan
      if configure_build "$dir" "-fsanitize=undefined -fno-sanitize-recover=all -g"; then
        summary+=("ubsan build: $((SECONDS - t0)) s")
        exclude=()
        [ -n "$UBSAN_EXCLUDE" ] && exclude=(-E "$UBSAN_EXCLUDE")
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest "$dir" ubsan -L alloc "${exclude[@]}" || status=1
      else
        status=1
      fi
      ;;
    tsan)
      dir=$BUILD_PREFIX-tsan
      if configure_build "$dir" "-fsanitize=thread -g"; then
        summary+=("tsan build: $((SECONDS - t0)) s")
        TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:suppressions=$SRC/tests/alloc/tsan.supp" \
          run_ctest "$dir" tsan -R "$TSAN_TESTS" || status=1
      else
        status=1
      fi
      ;;
    *) echo "usage: $0 [ubsan] [tsan]" >&2; exit 2 ;;
  esac
done

printf '%s\n' "${summary[@]}"
exit $status
