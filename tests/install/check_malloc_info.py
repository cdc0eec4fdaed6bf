#!/usr/bin/env python3
"""Runs a program that writes malloc_info(0, fp) to a file and checks the file: well-formed
XML in glibc's shape (<malloc version="1"> with <total>, <system>, <aspace> elements whose
sizes are integers, and a <heap nr="0"> whose <sizes> list the free small blocks by class, as
many as the total "rest" count says) and larder's own <larder> element with figures that fit the program's
allocations (about 1000 small blocks and 14 MiB of large ones live when it was written).

usage: check_malloc_info.py --version 0.1.0 [--preload liblarder.so] -- PROGRAM
"""
import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True)
    ap.add_argument("--preload")
    ap.add_argument("program", nargs="+")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.preload:
        env["LD_PRELOAD"] = a.preload
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "malloc_info.xml")
        r = subprocess.run(a.program + [out], env=env, capture_output=True, text=True, timeout=60)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode != 0:
            print("FAIL: program exited %d" % r.returncode)
            return 1
        text = open(out).read()
    print(text, end="")
    failures = []
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        print("FAIL: not well-formed XML: %s" % e)
        return 1
    if root.tag != "malloc" or root.get("version") != "1":
        failures.append("root is <%s version=%r>, expected <malloc version=\"1\">"
                        % (root.tag, root.get("version")))
    sizes = {}
    for el in root:
        if el.tag in ("total", "system", "aspace"):
            try:
                sizes[(el.tag, el.get("type"))] = int(el.get("size"))
                if el.get("count") is not None:
                    int(el.get("count"))
            except (TypeError, ValueError):
                failures.append("<%s type=%r> has a non-integer size or count" % (el.tag, el.get("type")))
    for key in [("total", "fast"), ("total", "rest"), ("total", "mmap"), ("system", "current"),
                ("aspace", "total")]:
        if key not in sizes:
            failures.append("no <%s type=\"%s\"> element" % key)
    # <heap nr="0">: larder's heaps as one arena, whose <sizes> are the free small blocks by class
    heap = root.find("heap")
    if heap is None or heap.get("nr") != "0" or heap.find("sizes") is None:
        failures.append("no <heap nr=\"0\"> with <sizes>")
    else:
        counted, last_to = 0, 0
        for el in heap.find("sizes"):
            try:
                lo, hi, total, count = (int(el.get(k)) for k in ("from", "to", "total", "count"))
            except (TypeError, ValueError):
                failures.append("<size> with a non-integer field: %r" % el.attrib)
                continue
            if not (last_to < lo <= hi and count > 0 and total == count * hi):
                failures.append("<size from=%d to=%d total=%d count=%d>: expected ascending classes, "
                                "total = count x block size" % (lo, hi, total, count))
            counted += count
            last_to = hi
        rest = root.find("total[@type='rest']")
        if rest is None or rest.get("count") is None or int(rest.get("count")) != counted:
            failures.append("<total type=\"rest\"> count %r, the sizes count %d"
                            % (None if rest is None else rest.get("count"), counted))
        # the program freed 1,000 of its 2,000 small blocks before the call
        if counted < 1000:
            failures.append("%d free blocks listed, below the 1,000 the program freed" % counted)
    ld = root.find("larder")
    if ld is None:
        failures.append("no <larder> element")
    else:
        if ld.get("version") != a.version:
            failures.append("<larder version=%r>, expected %r" % (ld.get("version"), a.version))
        n = {k: int(v) for k, v in ld.attrib.items() if k != "version"}
        large = sum((2 + i) << 20 for i in range(4))
        if n["in_use"] < large:
            failures.append("in_use %d is below the %d bytes of large blocks live" % (n["in_use"], large))
        if not n["in_use"] <= n["held"] <= n["mapped"]:
            failures.append("expected in_use <= held <= mapped, got %d, %d, %d"
                            % (n["in_use"], n["held"], n["mapped"]))
        if sizes.get(("system", "current")) != n["held"]:
            failures.append("<system type=\"current\"> differs from held")
        # mallocs is 0 only when the call counters are compiled out (-DLARDER_STATS=OFF).
        if n["mallocs"] and n["mallocs"] < 2004:
            failures.append("mallocs %d is below the program's 2004" % n["mallocs"])
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("malloc_info: well-formed, glibc's shape, larder's figures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
