#!/usr/bin/env python3
"""Checks that a library carries little initialised writable data.

    check-data-size.py [--max-bytes N] LIB...

LIB is a shared library or a static archive (whose members' sections are added up: linked into
a program, they land in its own .data, with the same cost).

Why: a library's initialised writable data (.data, .data.rel.ro, .got, ...) is mapped from its
file, private; the pages the dynamic linker relocates or the program reads are faulted in, each
read bringing its neighbours with it (the kernel maps up to 64 KiB around a read fault of a
file page), and they count in the resident set of every process that loads the library. A
zero-initialised object goes to .bss instead, where a page costs nothing until it is written.
liblarder once kept two 256 KB heap_t objects with initialisers (the empty heap's table of
pointers, the global heap's one flag) in .data: about 250 KB of RSS in every process before
main, and a library file 500 KB larger (docs/results.md, "The library's own footprint").

Each LIB's section headers are read with readelf; the sizes of its allocated, writable
PROGBITS sections (not .bss, which is NOBITS) are added up. Over the limit, the largest data
symbols (nm) are named. Exit status: 0 within the limit, 1 over it, 2 bad input (readelf
missing or failing, no such file). Standard library only.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys

DEFAULT_MAX = 16384

# readelf -S -W: "  [24] .data  PROGBITS  00000000000291c0 0281c0 07d6b8 00  WA  0   0 64"
SECTION = re.compile(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)")


def writable_sections(lib: str) -> list[tuple[str, int]]:
    out = subprocess.run(["readelf", "-S", "-W", lib], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or f"readelf failed on {lib}")
    found = []
    for line in out.stdout.splitlines():
        m = SECTION.match(line)
        if not m:
            continue
        name, kind, size, flags = m.group(1), m.group(2), int(m.group(3), 16), m.group(4)
        if kind == "PROGBITS" and "W" in flags and "A" in flags:
            found.append((name, size))
    return found


def largest_data_symbols(lib: str, count: int = 5) -> list[str]:
    if shutil.which("nm") is None:
        return []
    out = subprocess.run(["nm", "-S", "--size-sort", lib], capture_output=True, text=True)
    rows = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in ("d", "D"):
            rows.append((int(parts[1], 16), parts[3]))
    rows.sort(reverse=True)
    return [f"{name} ({size} bytes)" for size, name in rows[:count]]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX,
                        help=f"most initialised writable bytes allowed (default {DEFAULT_MAX})")
    parser.add_argument("libs", nargs="+", metavar="LIB")
    args = parser.parse_args(argv)
    if args.max_bytes < 0:
        print("check-data-size: --max-bytes must be 0 or more", file=sys.stderr)
        return 2
    if shutil.which("readelf") is None:
        print("check-data-size: readelf (binutils) is missing", file=sys.stderr)
        return 2
    status = 0
    for lib in args.libs:
        try:
            sections = writable_sections(lib)
        except (RuntimeError, OSError) as err:
            print(f"check-data-size: {lib}: {err}", file=sys.stderr)
            return 2
        total = sum(size for _, size in sections)
        detail = ", ".join(f"{name} {size}" for name, size in sections) or "none"
        if total > args.max_bytes:
            status = 1
            print(f"{lib}: {total} bytes of initialised writable data, more than {args.max_bytes} ({detail})")
            biggest = largest_data_symbols(lib)
            if biggest:
                print("  largest: " + ", ".join(biggest))
                print("  a zero-initialised object goes to .bss, which costs no page until written")
        else:
            print(f"{lib}: {total} bytes of initialised writable data, within {args.max_bytes} ({detail})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
