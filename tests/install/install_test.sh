#!/bin/sh
# Installs the build into a temporary prefix and uses it as a user would:
#   a C program built with `pkg-config --cflags --libs larder`,
#   a CMake project with find_package(larder): larder::larder and larder::larder-static,
# each run and checked to be served by larder (tests/install/consumer/use_larder.c).
# usage: install_test.sh BUILD_DIR WORK_DIR VERSION SOVERSION CC GENERATOR
set -eu
build=$1 work=$2 version=$3 soversion=$4 cc=$5 generator=$6
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }
echo "installed into $prefix:"
(cd "$prefix" && find . \( -type f -o -type l \) | sort | sed 's/^/  /')

libdir=$(cd "$prefix" && ls -d lib*/liblarder.so.$version | head -1 | xargs dirname)
[ -n "$libdir" ] || fail "no liblarder.so.$version under $prefix/lib*"
for f in "$libdir/liblarder.so.$version" "$libdir/liblarder.so.$soversion" "$libdir/liblarder.so" \
         "$libdir/liblarder.a" "$libdir/pkgconfig/larder.pc" "$libdir/cmake/larder/larderConfig.cmake" \
         "$libdir/cmake/larder/larderConfigVersion.cmake" include/larder.h include/larder_pool.h \
         share/doc/larder/LICENSE; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
soname=$(readelf -d "$prefix/$libdir/liblarder.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "liblarder.so.$soversion" ] || fail "installed SONAME '$soname', expected liblarder.so.$soversion"
if readelf -d "$prefix/$libdir/liblarder.so.$version" | grep -q 'R\(UN\)\?PATH'; then
  fail "installed liblarder.so keeps a build RPATH"
fi

# ---- pkg-config
command -v pkg-config >/dev/null || fail "pkg-config is missing (scripts/install-deps.sh installs it)"
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
v=$(pkg-config --modversion larder) || fail "pkg-config does not find larder in $PKG_CONFIG_PATH"
[ "$v" = "$version" ] || fail "pkg-config --modversion larder: $v, expected $version"
[ "$(pkg-config --variable=prefix larder)" = "$prefix" ] \
  || fail "larder.pc's prefix is $(pkg-config --variable=prefix larder), not the install prefix $prefix"
pl=$(pkg-config --variable=libdir larder)
[ "$pl" = "$prefix/$libdir" ] || fail "larder.pc's libdir $pl is not $prefix/$libdir"
flags="$(pkg-config --cflags --libs larder)"
echo "pkg-config --cflags --libs larder: $flags"
# shellcheck disable=SC2086
"$cc" -o "$work/pc_prog" "$here/consumer/use_larder.c" $flags -Wl,-rpath,"$pl" \
  || fail "building with pkg-config's flags"
readelf -d "$work/pc_prog" | grep -q "NEEDED.*\[liblarder.so.$soversion\]" \
  || fail "pc_prog does not need liblarder.so.$soversion"
"$work/pc_prog" || fail "pc_prog (pkg-config build) failed"
unset PKG_CONFIG_PATH
pkg-config --static --libs "$prefix/$libdir/pkgconfig/larder.pc" | grep -q -- '-pthread' \
  || fail "pkg-config --static --libs larder lacks -pthread"

# ---- find_package(larder): the shared and the static imported targets
cmake -S "$here/consumer" -B "$work/cmake" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DLARDER_EXPECT_VERSION="$version" \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configuring the find_package(larder) project"; }
grep "larder $version from" "$work/cmake.log"
cmake --build "$work/cmake" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building it"; }
readelf -d "$work/cmake/use_shared" | grep -q "NEEDED.*\[liblarder.so.$soversion\]" \
  || fail "use_shared (larder::larder) does not need liblarder.so.$soversion"
if readelf -d "$work/cmake/use_static" | grep -q "NEEDED.*liblarder"; then
  fail "use_static (larder::larder-static) needs a shared liblarder"
fi
nm "$work/cmake/use_static" | grep -q ' T larder_malloc$' || fail "use_static does not contain larder"
"$work/cmake/use_shared" || fail "use_shared (larder::larder) failed"
"$work/cmake/use_static" || fail "use_static (larder::larder-static) failed"

# a staged install (DESTDIR, as distribution packages do) names the final prefix, not the stage
DESTDIR="$work/stage" cmake --install "$build" --prefix /opt/larder >"$work/stage.log" 2>&1 \
  || { cat "$work/stage.log"; fail "DESTDIR=... cmake --install --prefix /opt/larder"; }
grep -qx 'prefix=/opt/larder' "$work/stage/opt/larder/$libdir/pkgconfig/larder.pc" \
  || fail "the staged larder.pc does not say prefix=/opt/larder"

# a version that is not there is refused
if cmake -S "$here/consumer" -B "$work/cmake-bad" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
     -DCMAKE_PREFIX_PATH="$prefix" -DLARDER_EXPECT_VERSION=99.0.0 >"$work/cmake-bad.log" 2>&1; then
  fail "find_package(larder 99.0.0 EXACT) succeeded"
fi
rm -rf "$work"
echo "install: pkg-config and find_package(larder) builds link, run and are served by larder"
