#!/usr/bin/env bash
# glibc's own malloc test programs (malloc/tst-*.c of the glibc source) under any allocator: the
# tests glibc's malloc must pass, built as ordinary programs against the installed glibc and run
# with each allocator preloaded.
#
# usage: scripts/glibc-malloc-tests.sh [--allocators LIST] [--tests "NAMES"] [--timeout S] [--build-only] [-h|--help]
#   --allocators LIST  comma-separated (default glibc,larder): glibc (nothing preloaded), larder and
#                      larder-hardened (build/lib/), jemalloc, tcmalloc, mimalloc (the Debian
#                      packages' libraries), or the path of any .so (named by its file name)
#   --tests "NAMES"    test names, space- or comma-separated (default: the 40 in TESTS in this script)
#   --timeout S        per test and allocator, in seconds (default 300); glibc's test driver also
#                      stops a test after its own limit (20 s, up to 100 s for some)
#   --build-only       build the tests, run nothing
#   e.g. GLIBC_SRC=~/src/glibc scripts/glibc-malloc-tests.sh --allocators glibc,larder,jemalloc
#
# The source: $GLIBC_SRC (an extracted tree or a checkout), else a shallow clone of the tag
# glibc-X.Y of the system's glibc into <build>/glibc-src (needs the network once). Its version
# must be the system's, as the tests are compiled against the installed headers and libc. Built
# into <build>/glibc-malloc-tests/: support/*.c into libsupport.a, malloc's dynarray, alloc_buffer
# and scratch_buffer helpers into libinternal.a, then the tests. One job at a time, each test
# under each allocator, LD_PRELOAD set on that command only; logs in logs/TEST.ALLOCATOR.log.
# The last column of the table names a known glibc-specific expectation of the test.
#
# Exit status: 0 when every failure under a non-glibc allocator also fails under glibc or is a
# known glibc-specific expectation; 1 otherwise; 2 for usage or build errors. Needs gcc, ar,
# timeout (and git for the clone); builds nothing of larder's: run `make build` first.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${LARDER_BUILD_DIR:-build}
bdir=$(realpath -m "$build")
URL=https://sourceware.org/git/glibc.git
shim=$PWD/scripts/glibc-malloc-tests   # the two files written for this script (not glibc's)
TESTS="mallocbug tst-alloc_buffer tst-calloc tst-dynarray tst-dynarray-at-fail tst-dynarray-fail
  tst-free-errno tst-interpose-nothread tst-interpose-thread tst-mallinfo2 tst-malloc
  tst-malloc-backtrace tst-malloc-check tst-malloc-fork-deadlock tst-malloc-stats-cancellation
  tst-malloc-tcache-leak tst-malloc-thread-exit tst-malloc-thread-fail tst-malloc-too-large
  tst-malloc-usable tst-malloc_info tst-mallocalign1 tst-mallocfork tst-mallocfork2 tst-mallocfork3
  tst-mallopt tst-memalign tst-obstack tst-posix_memalign tst-pvalloc tst-pvalloc-fortify tst-realloc
  tst-reallocarray tst-safe-linking tst-scratch_buffer tst-tcfree1 tst-tcfree2 tst-tcfree3 tst-trim1 tst-valloc"
# Left out: tst-compathooks-*, tst-mallocstate, tst-mtrace, tst-mxfast and tst-malloc-usable-tunables
# test glibc's removed hooks, libc_malloc_debug.so or its tunables; tst-interpose-static-* are static.

die() { echo "glibc-malloc-tests.sh: $1" >&2; exit "${2:-2}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

allocators=glibc,larder timeout_s=300 run=1
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --allocators) [ $# -ge 2 ] || die "--allocators needs a list"; allocators=$2; shift ;;
    --tests) [ $# -ge 2 ] || die "--tests needs names"; TESTS=${2//,/ }; shift ;;
    --timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--timeout needs a number of seconds"; timeout_s=$2; shift ;;
    --build-only) run=0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done
for tool in gcc ar timeout; do command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"; done

# Allocators: names[i] and their preload paths pre[i] ("" for glibc). Checked before any build.
libdir=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
names=() pre=()
for a in ${allocators//,/ }; do
  case $a in
    glibc) p= ;;
    larder|larder-hardened)
      p=$bdir/lib/lib$a.so
      [ -f "$p" ] || die "$a: $p not found: run 'make build' first" ;;
    jemalloc|tcmalloc|mimalloc)
      case $a in jemalloc) c="libjemalloc.so.2:libjemalloc2" ;;
                 tcmalloc) c="libtcmalloc.so.4:libgoogle-perftools4 libtcmalloc_minimal.so.4:libtcmalloc-minimal4" ;;
                 mimalloc) c="libmimalloc.so.2:libmimalloc2.0" ;; esac
      p=
      for lp in $c; do [ -f "$libdir/${lp%%:*}" ] && { p=$libdir/${lp%%:*}; break; }; done
      [ -n "$p" ] || die "$a: $libdir/${c%%:*} not found; install it with 'sudo apt-get install ${c%% *}'" ;;
    */*|*.so|*.so.*)
      [ -f "$a" ] || die "$a: no such file"
      p=$(realpath "$a") a=$(basename "$a") ;;
    *) die "unknown allocator '$a' (glibc, larder, larder-hardened, jemalloc, tcmalloc, mimalloc, or a path to a .so)" ;;
  esac
  names+=("$a") pre+=("$p")
done
[ ${#names[@]} -gt 0 ] || die "--allocators: empty list"

# The source tree, whose version must be the installed glibc's.
sysver=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '$1 == "glibc" {print $2}')
[ -n "$sysver" ] || die "the system C library is not glibc (getconf GNU_LIBC_VERSION)"
if [ -n "${GLIBC_SRC:-}" ]; then
  [ -d "$GLIBC_SRC" ] || die "GLIBC_SRC=$GLIBC_SRC is not a directory"
  src=$(realpath "$GLIBC_SRC")
else
  src=$bdir/glibc-src
  if [ ! -f "$src/version.h" ]; then
    [ -d "$build" ] || die "no build folder $build: run 'make build' first"
    rm -rf "$src"
    echo "glibc-malloc-tests.sh: cloning glibc-$sysver from $URL" >&2
    git clone --quiet --depth 1 --branch "glibc-$sysver" "$URL" "$src" ||
      { rm -rf "$src"; die "cannot clone $URL at glibc-$sysver; give a glibc $sysver source tree with GLIBC_SRC=DIR"; }
  fi
fi
for f in version.h malloc/tst-malloc.c support/test-driver.c; do
  [ -f "$src/$f" ] || die "$src is not a glibc source tree (no $f)"
done
srcver=$(sed -n 's/^#define VERSION "\(.*\)"/\1/p' "$src/version.h")
[ "$srcver" = "$sysver" ] || die "$src is glibc $srcver but the system's glibc is $sysver: the tests are built against the installed glibc; give a glibc-$sysver tree with GLIBC_SRC=DIR"

for t in $TESTS; do [ -f "$src/malloc/$t.c" ] || die "no test $t in $src/malloc"; done

out=$bdir/glibc-malloc-tests
blog=$out/build.log
# A different tree invalidates everything built from the previous one.
if [ "$(cat "$out/built-from" 2>/dev/null)" != "$src $srcver" ]; then rm -rf "$out"; fi
mkdir -p "$out/include" "$out/obj/support" "$out/obj/internal" "$out/bin" "$out/logs" "$out/run"
echo "$src $srcver" > "$out/built-from"

CF=(-std=gnu11 -D_GNU_SOURCE -I"$out/include" -I"$shim" -I"$src" -I"$src/support"
    # support_paths.c wants the paths of a glibc build; only their presence matters here
    "-DSRCDIR_PATH=\"$src\"" "-DOBJDIR_PATH=\"$out\"" "-DOBJDIR_ELF_LDSO_PATH=\"$(readelf -l /bin/sh | sed -n 's/.*interpreter: \(.*\)]/\1/p')\""
    '-DINSTDIR_PATH="/usr"' '-DLIBDIR_PATH="/usr/lib"' '-DBINDIR_PATH="/usr/bin"' '-DSBINDIR_PATH="/usr/sbin"'
    '-DSLIBDIR_PATH="/lib"' '-DROOTSBINDIR_PATH="/sbin"' '-DCOMPLOCALEDIR_PATH="/usr/lib/locale"' -DTIMEOUTFACTOR=1)

# libsupport.a (glibc's test driver and x* helpers) and libinternal.a (libc-internal helpers that
# the tests-internal tests call), compiled standalone. glibc-internal headers are copied, not
# put on the include path whole, because include/ wraps the system headers with internal ones.
build_libs() {
  local f b n=0 skipped=()
  for f in include/{libc-diag,array_length,intprops,libc-pointer-arith,alloc_buffer,scratch_buffer}.h \
           sysdeps/generic/malloc-size.h sysdeps/generic/malloc-alignment.h malloc/dynarray.h; do
    cp "$src/$f" "$out/include/" || die "$src has no $f"
  done
  f=$src/sysdeps/$(uname -m)/stackinfo.h
  [ -f "$f" ] || die "no $f (this script knows the layout of x86_64 and aarch64)"
  cp "$f" "$out/include/"
  : > "$blog"
  for f in "$src"/support/*.c; do
    b=$(basename "$f" .c)
    # support's own tests, programs with a main, the included test-driver, and DNS/container helpers
    case $b in tst-*|*container*|test-run-command|links-dso*|resolv*|check_*|support_format_*|test-driver|\
               support_quote_string_main|echo-*|true-*|shell-*|support_descriptors) continue ;; esac
    if gcc "${CF[@]}" -O1 -include limits.h -c "$f" -o "$out/obj/support/$b.o" >>"$blog" 2>&1; then n=$((n + 1))
    else rm -f "$out/obj/support/$b.o"; skipped+=("$b"); fi   # needs glibc internals; no malloc test uses it
  done
  [ -f "$out/obj/support/support_test_main.o" ] || { tail -20 "$blog" >&2; die "support/support_test_main.c does not build (all of it in $blog)"; }
  ar rcs "$out/libsupport.a" "$out"/obj/support/*.o
  echo "glibc-malloc-tests.sh: libsupport.a: $n files of support/; skipped (do not build standalone): ${skipped[*]:-none}" >&2
  for f in "$src"/malloc/{scratch_buffer,alloc_buffer,dynarray}_*.c; do
    gcc "${CF[@]}" -O2 -w -include "$shim/internal-shim.h" -c "$f" -o "$out/obj/internal/$(basename "$f" .c).o" >>"$blog" 2>&1 ||
      { tail -20 "$blog" >&2; die "$f does not build (all of it in $blog)"; }
  done
  # dynarray_at_failure.c prints glibc's message only under _LIBC, which the system headers refuse
  sed 's/^#ifdef _LIBC/#if 1/' "$src/malloc/dynarray_at_failure.c" > "$out/obj/internal/dynarray_at_failure.c"
  gcc "${CF[@]}" -O2 -w -I"$src/malloc" -include "$shim/internal-shim.h" -c "$out/obj/internal/dynarray_at_failure.c" \
    -o "$out/obj/internal/dynarray_at_failure.o" >>"$blog" 2>&1 || die "dynarray_at_failure.c does not build (see $blog)"
  ar rcs "$out/libinternal.a" "$out"/obj/internal/*.o
}
[ -f "$out/libsupport.a" ] && [ -f "$out/libinternal.a" ] || build_libs

# -fno-builtin so that gcc cannot drop or merge a malloc/free pair the test relies on;
# -DTEST_NO_MALLOPT as glibc's Makefile builds them.
for t in $TESTS; do
  [ -x "$out/bin/$t" ] && continue
  case $t in tst-interpose-nothread|tst-interpose-thread) aux=$src/malloc/tst-interpose-aux-${t#tst-interpose-}.c ;; *) aux= ;; esac
  if ! gcc "${CF[@]}" -O2 -DTEST_NO_MALLOPT -fno-builtin -w -include "$shim/internal-shim.h" -o "$out/bin/$t" \
       "$src/malloc/$t.c" $aux "$out/libinternal.a" "$out/libsupport.a" -lpthread -lrt >"$out/logs/$t.build.log" 2>&1; then
    echo "glibc-malloc-tests.sh: $t does not build standalone: skipped (see $out/logs/$t.build.log)" >&2
  fi
done
echo "glibc-malloc-tests.sh: tests of glibc $srcver ($src) in $out/bin" >&2
[ "$run" = 1 ] || exit 0

# ld.so only warns when it cannot preload a library, and the test would then measure glibc.
for i in "${!names[@]}"; do
  if [ -n "${pre[i]}" ] && env LD_PRELOAD="${pre[i]}" true 2>&1 | grep -q 'cannot be preloaded'; then
    die "${names[i]}: ld.so cannot preload ${pre[i]}"
  fi
done

# Failures that say nothing about the allocator: the test checks glibc's own internals or
# behaviour beyond the C standard and POSIX. note() is the table's last column; expected()
# whether this failure (test, status, log, allocator) is the one described.
note() {
  case $1 in
    tst-malloc-backtrace) echo "checks glibc's chunk header (size field before a block)" ;;
    tst-safe-linking) echo "checks glibc's free-list links (Safe-Linking)" ;;
    tst-malloc-thread-fail) echo "checks errno after posix_memalign (POSIX does not require it)" ;;
    tst-dynarray-fail) echo "line 277 assumes: when two sizes fail, every size fails" ;;
    tst-malloc-usable) echo "needs glibc's libc_malloc_debug.so (MALLOC_CHECK_=3)" ;;
    tst-mallocfork2) echo "larder: hangs in glibc's fork once its purge thread runs (passes with LARDER_PURGE_THREAD=0)" ;;
    tst-interpose-*) echo "defines its own malloc: the preloaded allocator is not exercised" ;;
  esac
}
expected() {
  case $1:$2 in
    tst-malloc-backtrace:*|tst-safe-linking:*|tst-malloc-thread-fail:*|tst-malloc-usable:*) return 0 ;;
    # larder's purge thread only: another allocator's hang is its own (jemalloc's prefork deadlocks)
    tst-mallocfork2:HANG) case $4 in larder*|liblarder*) return 0 ;; *) return 1 ;; esac ;;
    tst-dynarray-fail:FAIL)   # only the check at line 277, none before it
      grep -q 'tst-dynarray-fail\.c:277:' "$3" &&
        ! grep -E '\.c:[0-9]+: |unable to allocate' "$3" | grep -vq 'tst-dynarray-fail\.c:277:' ;;
    *) return 1 ;;
  esac
}

declare -A st
bad=()
printf '%-30s' test; printf ' %-15s' "${names[@]}"; printf ' %s\n' 'known glibc-specific expectation'
for t in $TESTS; do
  printf '%-30s' "$t"
  for i in "${!names[@]}"; do
    a=${names[i]} log=$out/logs/$t.${names[i]}.log
    if [ ! -x "$out/bin/$t" ]; then st[$t,$a]=skip; printf ' %-15s' skip; continue; fi
    t0=${EPOCHREALTIME//[.,]/}
    penv=() rc=0
    [ -z "${pre[i]}" ] || penv=("LD_PRELOAD=${pre[i]}")
    # SIGINT: glibc's test driver then kills the test's process group, which SIGTERM would leave behind
    (cd "$out/run" && timeout -s INT -k 10 "$timeout_s" env -u LD_PRELOAD "${penv[@]}" "$out/bin/$t") >"$log" 2>&1 || rc=$?
    dt=$(( (${EPOCHREALTIME//[.,]/} - t0) / 100000 ))
    if [ $rc = 0 ]; then s=pass
    elif [ $rc = 124 ] || [ $rc = 137 ] || grep -q '^Timed out: killed the child process' "$log"; then s=HANG
    else s=FAIL; fi
    st[$t,$a]=$s
    printf ' %-15s' "$s $((dt / 10)).$((dt % 10))s"
  done
  printf ' %s\n' "$(note "$t")"
  for a in "${names[@]}"; do
    s=${st[$t,$a]}
    case $s:${st[$t,glibc]:-} in pass:*|skip:*|*:FAIL|*:HANG) continue ;; esac
    [ "$a" = glibc ] || expected "$t" "$s" "$out/logs/$t.$a.log" "$a" || bad+=("$a: $t $s ($out/logs/$t.$a.log)")
  done
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'glibc-malloc-tests.sh: unexpected failures:\n' >&2; printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "glibc-malloc-tests.sh: no failure beyond glibc's own and the known glibc-specific ones (logs in $out/logs)" >&2
