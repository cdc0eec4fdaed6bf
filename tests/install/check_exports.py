#!/usr/bin/env python3
"""liblarder.so exports the standard allocation names, the C++ operators and larder_*, and
nothing else; liblarder-pool.so exports the malloc family only. Also checks liblarder.so's
SONAME and the version on its file name.

This list is kept apart from src/exports.map on purpose: a name added to the map (or a
visibility change in a source) has to be added here too, knowingly.

usage: check_exports.py --lib liblarder.so [--pool-lib liblarder-pool.so]
                        --version 0.1.0 --soversion 0.1
"""
import argparse
import os
import re
import subprocess
import sys

# Every entry point of the C library's allocation interface that liblarder defines.
MALLOC_FAMILY = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "malloc_trim", "malloc_stats",
    "malloc_info", "mallopt", "mallinfo", "mallinfo2", "free_sized", "free_aligned_sized",
}
GLIBC_ALIASES = {"__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
                 "__libc_memalign", "__libc_valloc", "__libc_pvalloc"}
# operator new/delete in every form (Itanium ABI, 64-bit size_t).
CXX = {
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
}
# The public larder API that must be there (larder.h); other larder_* names are allowed.
LARDER_REQUIRED = {"larder_malloc", "larder_free", "larder_calloc", "larder_realloc",
                   "larder_memalign", "larder_aligned_alloc", "larder_posix_memalign",
                   "larder_usable_size", "larder_free_sized", "larder_free_aligned_sized",
                   "larder_stats_get", "larder_validate",
                   "larder_version", "larder_option_set", "larder_pool_create"}
LARDER_NAME = re.compile(r"^larder_[A-Za-z0-9_]+$")


def dynamic_symbols(lib):
    """Defined dynamic symbols, with their symbol version if any (readelf --dyn-syms)."""
    out = subprocess.run(["readelf", "--wide", "--dyn-syms", lib], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0].rstrip(":").isdigit() or f[6] == "UND" or f[3] in ("SECTION", "FILE"):
            continue
        if f[4] == "LOCAL":
            continue
        syms[f[7].split("@")[0]] = f[7]
    return syms


def readelf_dynamic(lib):
    return subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--pool-lib")
    ap.add_argument("--version", required=True)
    ap.add_argument("--soversion", required=True)
    a = ap.parse_args()
    failures = []

    syms = dynamic_symbols(a.lib)
    allowed = MALLOC_FAMILY | GLIBC_ALIASES | CXX
    unexpected = sorted(s for s in syms if s not in allowed and not LARDER_NAME.match(s))
    missing = sorted((MALLOC_FAMILY | CXX | LARDER_REQUIRED) - set(syms))
    versioned = sorted(v for v in syms.values() if "@" in v)
    print("%s: %d dynamic symbols (%d larder_*)" % (os.path.basename(a.lib), len(syms),
                                                    sum(1 for s in syms if LARDER_NAME.match(s))))
    if unexpected:
        failures.append("unexpected exported symbols: " + " ".join(unexpected))
    if missing:
        failures.append("missing exported symbols: " + " ".join(missing))
    if versioned:
        # A symbol version on malloc would stop it interposing on malloc@GLIBC_2.x under LD_PRELOAD.
        failures.append("symbols carry versions: " + " ".join(versioned))

    dyn = readelf_dynamic(a.lib)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    want_soname = "liblarder.so." + a.soversion
    if not m:
        failures.append("no SONAME in " + a.lib)
    elif m.group(1) != want_soname:
        failures.append("SONAME is %s, expected %s" % (m.group(1), want_soname))
    else:
        print("SONAME %s" % m.group(1))
    real = os.path.realpath(a.lib)
    if os.path.basename(real) != "liblarder.so." + a.version:
        failures.append("%s is not liblarder.so.%s" % (real, a.version))
    soname_link = os.path.join(os.path.dirname(real), want_soname)
    if not os.path.exists(soname_link) or os.path.realpath(soname_link) != real:
        failures.append("no %s link to %s" % (want_soname, real))

    if a.pool_lib:
        psyms = dynamic_symbols(a.pool_lib)
        unexpected = sorted(set(psyms) - MALLOC_FAMILY)
        missing = sorted({"malloc", "free", "calloc", "realloc"} - set(psyms))
        print("%s: %d dynamic symbols: %s" % (os.path.basename(a.pool_lib), len(psyms),
                                              " ".join(sorted(psyms))))
        if unexpected:
            failures.append("liblarder-pool.so: unexpected exported symbols: " + " ".join(unexpected))
        if missing:
            failures.append("liblarder-pool.so: missing exported symbols: " + " ".join(missing))

    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
