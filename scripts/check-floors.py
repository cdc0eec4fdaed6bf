#!/usr/bin/env python3
"""Checks that liblarder's source files call each other only downward ("floors").

    check-floors.py --table src/floors.txt INPUT...

INPUT is an object file, a static archive (its members are read in place) or a folder
(searched for *.o). The file-level call graph comes from the objects themselves, with nm:
for each object, the symbols it leaves undefined, and for each, the object of the set that
defines it as a global function (nm types T, W, i). So:
  - calls to anything outside the set (libc, pthread, the C++ runtime) are not edges;
  - references to another file's data (ld_options, ld_sb_size, a thread-local) are not calls;
  - taking another file's function's address counts as a call: it may be called through it.
An object x.c.o (CMake's name) or x.o stands for the source x.c.

The table (src/floors.txt) has one line per source file, `<file> <floor> [maintenance]`, `#`
starting a comment. The rules (docs/allocator.md "Floors", issue 15):
  (a) a file calls only files on its own floor or lower;
  (b) a file marked maintenance is called only from files on a strictly higher floor;
  (c) no circle of calls between files larger than two (the strongly connected components of
      the file graph have at most two files);
  (d) every object of the set has a line in the table (a new file is placed on a floor).
Each violation is printed as `caller.c -> callee.c (symbol)`.

Exit status: 0 all rules hold, 1 a rule is broken, 2 bad input (no objects, unreadable table,
nm missing or failing). Standard library only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

FUNC_TYPES = {"T", "W", "i"}  # global definitions of code (W: weak, i: GNU indirect function)
UNDEF_TYPES = {"U", "w", "v"}

# `nm -P -A`: "<file>: <name> <type> [<value> [<size>]]"; for an archive <file> is
# "<archive>[<member>]". Symbol names hold no spaces, so the file part is everything up to the
# last ": " followed by a name and a one-letter type.
NM_LINE = re.compile(r"^(?P<file>.*): (?P<name>\S+) (?P<type>\S)(?: \S*)*\s*$")
MEMBER = re.compile(r"^(?P<archive>.*)\[(?P<member>[^\[\]]+)\]$")


class InputError(Exception):
    pass


def source_name(obj: str) -> str:
    """alloc.c.o -> alloc.c; alloc.o -> alloc.c."""
    base = os.path.basename(obj)
    if base.endswith(".o"):
        base = base[:-2]
    if "." not in base:
        base += ".c"
    return base


def read_table(path: Path) -> tuple[dict[str, int], set[str]]:
    floors: dict[str, int] = {}
    maintenance: set[str] = set()
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InputError(f"cannot read the floors table {path}: {e.strerror}")
    for no, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"{path}:{no}"
        if len(parts) not in (2, 3):
            raise InputError(f"{where}: expected `<file> <floor> [maintenance]`, got {raw.strip()!r}")
        name, floor = parts[0], parts[1]
        if not re.fullmatch(r"-?\d+", floor):
            raise InputError(f"{where}: the floor of {name} must be an integer, got {floor!r}")
        if len(parts) == 3 and parts[2] != "maintenance":
            raise InputError(f"{where}: unknown mark {parts[2]!r} (the only mark is `maintenance`)")
        if name in floors:
            raise InputError(f"{where}: {name} is placed twice")
        floors[name] = int(floor)
        if len(parts) == 3:
            maintenance.add(name)
    if not floors:
        raise InputError(f"{path}: no file is placed on a floor")
    return floors, maintenance


def expand_inputs(inputs: list[str]) -> list[str]:
    out: list[str] = []
    for i in inputs:
        p = Path(i)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*.o") if f.is_file())
            if not found:
                raise InputError(f"no object files (*.o) under {i}")
            out += found
        elif p.is_file():
            out.append(str(p))
        else:
            raise InputError(f"{i}: no such file or folder")
    unique, seen = [], set()
    for f in out:  # the same file named twice (a folder and one of its objects) counts once
        real = os.path.realpath(f)
        if real not in seen:
            seen.add(real)
            unique.append(f)
    return unique


def read_symbols(nm: str, paths: list[str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per source file: the symbols it leaves undefined, and the global functions it defines."""
    try:
        cp = subprocess.run([nm, "-P", "-A", *paths], capture_output=True, text=True)
    except OSError as e:
        raise InputError(f"cannot run {nm}: {e.strerror}")
    if cp.returncode != 0:
        raise InputError(f"{nm} failed: {cp.stderr.strip()}")
    undefined: dict[str, set[str]] = defaultdict(set)
    defined: dict[str, set[str]] = defaultdict(set)
    origin: dict[str, str] = {}  # source name -> the object it came from
    lto: set[str] = set()
    for line in cp.stdout.splitlines():
        m = NM_LINE.match(line)
        if not m:
            continue
        f = m.group("file")
        mm = MEMBER.match(f)
        obj = mm.group("member") if mm else f
        if not obj.endswith(".o"):
            continue  # not an object (an archive's symbol index, a linker script)
        src = source_name(obj)
        prev = origin.setdefault(src, f)
        if prev != f:
            raise InputError(f"two objects stand for {src}: {prev} and {f} (give each once)")
        t, name = m.group("type"), m.group("name")
        if t in UNDEF_TYPES:
            undefined[src].add(name)
        elif t in FUNC_TYPES:
            defined[src].add(name)
        if name.startswith("__gnu_lto"):
            lto.add(src)
    if not origin:
        raise InputError("the inputs hold no object files")
    if lto:
        # GCC's slim LTO objects carry bytecode, not the calls nm could show.
        raise InputError(f"LTO objects ({', '.join(sorted(lto))}): build without -flto to read the calls")
    for src in origin:
        undefined.setdefault(src, set())
        defined.setdefault(src, set())
    return undefined, defined


def call_graph(undefined, defined) -> dict[tuple[str, str], set[str]]:
    """(caller, callee) -> the callee's functions the caller references."""
    where: dict[str, list[str]] = defaultdict(list)
    for src, names in defined.items():
        for n in names:
            where[n].append(src)
    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    for src, names in undefined.items():
        for n in names:
            for callee in where.get(n, ()):
                if callee != src:
                    edges[(src, callee)].add(n)
    return edges


def components(nodes, edges) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def check(floors, maintenance, undefined, defined) -> tuple[list[str], str]:
    """The violation report (empty when every rule holds) and a one-line summary."""
    files = sorted(undefined)
    edges = call_graph(undefined, defined)
    report: list[str] = []

    unplaced = [f for f in files if f not in floors]
    if unplaced:
        report.append(f"(d) {len(unplaced)} file(s) of the library not in the floors table "
                      f"(place each on a floor):")
        report += [f"  {f}" for f in unplaced]

    upward, into_maint = [], []
    for (a, b), syms in sorted(edges.items()):
        if a not in floors or b not in floors:
            continue
        for s in sorted(syms):
            line = f"  {a} -> {b} ({s})  [floor {floors[a]} -> {floors[b]}]"
            if floors[a] < floors[b]:
                upward.append(line)
            if b in maintenance and floors[a] <= floors[b]:
                into_maint.append(line)
    if upward:
        report.append(f"(a) {len(upward)} upward call(s) (a file calls only its own floor or lower):")
        report += upward
    if into_maint:
        report.append(f"(b) {len(into_maint)} call(s) into maintenance from its own floor or below "
                      f"(maintenance is entered from above only):")
        report += into_maint

    for comp in components(files, edges):
        if len(comp) <= 2:
            continue
        inside = set(comp)
        report.append(f"(c) a circle of {len(comp)} files calling each other: {', '.join(comp)}")
        for (a, b), syms in sorted(edges.items()):
            if a in inside and b in inside:
                for s in sorted(syms):
                    report.append(f"  {a} -> {b} ({s})")

    used = {f for f in files if f in floors}
    summary = (f"{len(files)} files on {len({floors[f] for f in used})} floors, "
               f"{len(edges)} caller->callee file pairs")
    return report, summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", required=True, help="the floors table (src/floors.txt)")
    ap.add_argument("--nm", default=os.environ.get("NM", "nm"), help="nm to use (default: $NM or nm)")
    ap.add_argument("inputs", nargs="+", metavar="INPUT", help="object files, archives or folders")
    o = ap.parse_args(argv)
    try:
        if shutil.which(o.nm) is None and not os.path.isfile(o.nm):
            raise InputError(f"{o.nm} not found (binutils)")
        floors, maintenance = read_table(Path(o.table))
        undefined, defined = read_symbols(o.nm, expand_inputs(o.inputs))
    except InputError as e:
        print(f"check-floors: {e}", file=sys.stderr)
        return 2
    report, summary = check(floors, maintenance, undefined, defined)
    missing = sorted(set(floors) - set(undefined))
    if missing:
        print(f"check-floors: note: the table places {', '.join(missing)}, not in the objects given")
    if report:
        print(f"check-floors: {summary}; the floors of {o.table} do not hold:")
        print("\n".join(report))
        return 1
    print(f"check-floors: {summary}: every call goes to the same floor or lower, maintenance is "
          f"entered from above only, no circle of more than two files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
