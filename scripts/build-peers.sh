#!/usr/bin/env bash
# The peers that Debian does not package, built from their sources: mimalloc 3, snmalloc and
# rpmalloc, the allocators issue 17 measures larder against beside Debian's jemalloc,
# tcmalloc and mimalloc 2. The harness finds each one built here as an allocator of its own
# (mimalloc3, snmalloc, rpmalloc: harness/larder_bench/allocators.py), so that `make bench`
# and `larder-bench run` compare against them without a config file.
#
# usage: scripts/build-peers.sh [-h|--help] [--force] [--cache DIR] [NAME...]
#   NAME      mimalloc3, snmalloc or rpmalloc (default: all three)
#   --force   build again a peer already built from the pinned package (otherwise left as it is)
#   --cache   where the downloaded source packages are kept (default <build>/peers/downloads);
#             a package already there is checked and used without the network
#
# The sources: each allocator's C or C++ sources as the crates.io package of its Rust binding
# bundles them (libmimalloc-sys, snmalloc-sys, rpmalloc-sys), at a pinned version whose SHA-256
# is checked before anything is unpacked. crates.io is reachable where GitHub may not be, and a
# published package never changes. Each library is built as its own project builds its
# LD_PRELOAD library (release flags, override of the malloc family) into <build>/peers/lib<NAME>.so,
# with <build>/peers/<NAME>.version naming what it was built from (the allocator's own version,
# read off its sources, and the package's, from the table below). The build folder is build/,
# or $LARDER_BUILD_DIR. Needs curl (unless cached), tar, cc, and for snmalloc c++ and cmake.
#
# Exit status: 0 every peer asked for is built; 1 one or more failed (each named, with the last
# lines of its log; the others are built); 2 bad usage or a missing tool.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

build=${LARDER_BUILD_DIR:-build}
out=$build/peers
cache=""
force=0
offline=0

# name | crate | version (as crates.io spells it) | sha256 of the .crate file
PEERS=(
  "mimalloc3|libmimalloc-sys|0.1.49|6a45a52f43e1c16f667ccfe4dd8c85b7f7c204fd5e3bf46c5b0db9a5c3c0b8e9"
  "snmalloc|snmalloc-sys|0.7.6|f09c93c55f9a2b8dab75738a83c771231c5f408af65b8657433fe5bc93cc76cb"
  "rpmalloc|rpmalloc-sys|0.2.3+b097fd0|8d4b7d5e225a53887ee57fcec492eaf114b8e290f7072d035adc6ddd6810b67b"
)
NAMES=(mimalloc3 snmalloc rpmalloc)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
fail_usage() { echo "build-peers.sh: $1 (try --help)" >&2; exit 2; }

want=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --force) force=1; shift ;;
    --cache) [ $# -ge 2 ] && [ -n "$2" ] || fail_usage "--cache needs a folder"; cache=$2; shift 2 ;;
    --cache=*) cache=${1#--cache=}; [ -n "$cache" ] || fail_usage "--cache needs a folder"; shift ;;
    -*) fail_usage "unknown option $1" ;;
    *)
      ok=0
      for n in "${NAMES[@]}"; do [ "$1" = "$n" ] && ok=1; done
      [ "$ok" = 1 ] || fail_usage "unknown peer '$1'; known: ${NAMES[*]}"
      want+=("$1"); shift ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=("${NAMES[@]}")
case "$cache" in
  "") cache=$out/downloads ;;
  /*) ;;
  *) cache=$caller/$cache ;; # (a folder named on the command line is the caller's)
esac

for tool in tar cc sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "build-peers.sh: $tool is missing" >&2; exit 2; }
done
mkdir -p "$out" "$cache"

# The .crate file of crate $1 version $2 in the cache, checked against $3; downloaded if absent.
fetch() {
  local crate=$1 version=$2 sum=$3 file="$cache/$1-$2.crate" got
  if [ ! -f "$file" ]; then
    if [ "$offline" = 1 ]; then
      echo "build-peers.sh: $crate $version not downloaded: an earlier download failed" >&2
      return 1
    fi
    if ! command -v curl >/dev/null 2>&1; then
      echo "build-peers.sh: curl is missing and $file is not there" >&2
      return 1
    fi
    # ('+' in a version is %2B in the download's address)
    # (a machine without the network fails at once or within the connect timeout, and the
    # other peers then do not try: make bench goes on without them)
    if ! curl -sSfL --connect-timeout 10 --retry 2 -m 120 -o "$file.part" \
         "https://static.crates.io/crates/$crate/$crate-${version//+/%2B}.crate"; then
      rm -f "$file.part"
      offline=1
      echo "build-peers.sh: cannot download $crate $version from static.crates.io" >&2
      return 1
    fi
    mv "$file.part" "$file"
  fi
  got=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "build-peers.sh: $file has SHA-256 $got, expected $sum; not used (delete it to download again)" >&2
    return 1
  fi
}

# mimalloc 3: one translation unit (src/static.c), the flags of its CMake build of the shared
# override library (MI_MALLOC_OVERRIDE, MI_SHARED_LIB, -fvisibility=hidden, initial-exec TLS).
build_mimalloc3() {
  local src=$1/c_src/mimalloc/v3 v
  v=$(sed -n 's/^#define MI_MALLOC_VERSION \([0-9]*\).*/\1/p' "$src/include/mimalloc.h")
  cc -O3 -DNDEBUG -DMI_MALLOC_OVERRIDE -DMI_SHARED_LIB -DMI_SHARED_LIB_EXPORT -DMI_BUILD_RELEASE \
    -fPIC -shared -fvisibility=hidden -ftls-model=initial-exec -fno-builtin-malloc -Wno-unknown-pragmas \
    -I"$src/include" "$src/src/static.c" -o "$2" -pthread
  echo "mimalloc $((v / 10000)).$((v / 100 % 100)).$((v % 100))" > "$3"
}

# snmalloc: its own CMake project, the LD_PRELOAD shim target (libsnmallocshim.so), release.
build_snmalloc() {
  local src=$1/upstream dir=$1/build gen=()
  for tool in c++ cmake; do
    command -v "$tool" >/dev/null 2>&1 || { echo "build-peers.sh: snmalloc needs $tool" >&2; return 1; }
  done
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  cmake -S "$src" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_BUILD_TESTING=OFF
  cmake --build "$dir" -j "${JOBS:-2}" --target snmallocshim
  cp "$dir/libsnmallocshim.so" "$2"
  echo "snmalloc main" > "$3"
}

# rpmalloc: one file, with its own switches for a preloaded override of the malloc family.
build_rpmalloc() {
  local src=$1/rpmalloc/rpmalloc v
  v=$(head -1 "$1/rpmalloc/CHANGELOG" | tr -d '\r')
  cc -O3 -DNDEBUG -DENABLE_OVERRIDE=1 -DENABLE_PRELOAD=1 -fPIC -shared -fvisibility=hidden \
    -ftls-model=initial-exec -Wno-attributes -o "$2" "$src/rpmalloc.c" -pthread
  echo "rpmalloc $v" > "$3"
}

failed=()
for name in "${want[@]}"; do
  for entry in "${PEERS[@]}"; do
    IFS='|' read -r n crate version sum <<<"$entry"
    [ "$n" = "$name" ] || continue
    log=$out/$name-build.log
    work=$out/$name-src
    stamp="$crate $version $sum"
    if [ "$force" = 0 ] && [ -f "$out/lib$name.so" ] && [ "$(cat "$out/$name.built" 2>/dev/null)" = "$stamp" ]; then
      echo "build-peers.sh: $(cat "$out/$name.version") is built ($out/lib$name.so)" >&2
      continue
    fi
    if ! fetch "$crate" "$version" "$sum"; then failed+=("$name"); continue; fi
    rm -rf "$work" "$out/$name.built" && mkdir -p "$work"
    if ! tar xzf "$cache/$crate-$version.crate" -C "$work" --strip-components=1; then
      echo "build-peers.sh: cannot unpack $cache/$crate-$version.crate" >&2
      failed+=("$name"); continue
    fi
    # built beside its final name, moved there only once it loads in a program; its version
    # line says what from ("0.2.3+b097fd0": the package 0.2.3 of the allocator's commit b097fd0)
    if "build_$name" "$work" "$out/lib$name.so.new" "$out/$name.version.new" >"$log" 2>&1 &&
       LD_PRELOAD="$(readlink -f "$out/lib$name.so.new")" /bin/true >>"$log" 2>&1; then
      mv "$out/lib$name.so.new" "$out/lib$name.so"
      case "$version" in
        *+*) from="${version#*+}, from $crate ${version%%+*}" ;;
        *) from="from $crate $version" ;;
      esac
      echo "$(cat "$out/$name.version.new") ($from on crates.io)" > "$out/$name.version"
      rm -f "$out/$name.version.new"
      echo "$stamp" > "$out/$name.built"
      echo "build-peers.sh: $(cat "$out/$name.version") -> $out/lib$name.so" >&2
    else
      rm -f "$out/lib$name.so.new" "$out/$name.version.new"
      tail -20 "$log" >&2
      echo "build-peers.sh: $name failed to build (all of it in $log)" >&2
      failed+=("$name")
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "build-peers.sh: not built: ${failed[*]}" >&2
  exit 1
fi
