#!/usr/bin/env python3
"""Runs bench/latency over the real-time pool and general allocators, interleaved, and prints
medians with their spread (docs/pools.md "Measuring"; the pools section of docs/results.md).

For general allocators, profiles and any .so by path, with p99.9, tables with units and a CDF
plot, use the harness instead: `larder-bench run --suite latency` (docs/harness.md). This script
stays for the pool's own rows (--pool, --prefault), which are not an allocator to preload.

  bench/latency/run_latency.py --build-dir build [--repeats 5] [--ops N] [--live-bytes B]
                               [--trace FILE] [--json OUT]

Rows: the pool called directly (pages faulted on first use, and pre-faulted as a real-time
program would), liblarder-pool.so preloaded (the pool as a whole program's malloc, with its
lock and growth), glibc, larder (liblarder.so) and mimalloc, jemalloc, tcmalloc where
installed. Every figure is the median over the repeats; the spread is min..max. Exit 2 on bad
arguments, 1 when a run fails.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SYSTEM_LIBS = {
    "mimalloc": ["/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", "/usr/lib/aarch64-linux-gnu/libmimalloc.so.2"],
    "jemalloc": ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"],
    "tcmalloc": ["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4"],
}


def allocators(build):
    rows = [("pool", ["--pool"], None), ("pool-prefault", ["--pool", "--prefault"], None)]
    lib = os.path.join(build, "lib")
    pool_so = os.path.join(lib, "liblarder-pool.so")
    if os.path.exists(pool_so):
        rows.append(("larder-pool.so", [], pool_so))
    rows.append(("glibc", [], None))
    larder_so = os.path.join(lib, "liblarder.so")
    if os.path.exists(larder_so):
        rows.append(("larder", [], larder_so))
    for name, paths in SYSTEM_LIBS.items():
        for p in paths:
            if os.path.exists(p):
                rows.append((name, [], p))
                break
    return rows


def run_once(prog, extra, preload, common):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    proc = subprocess.run([prog] + common + extra, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("%s %s (LD_PRELOAD=%s) exited %d: %s" % (prog, " ".join(common + extra), preload,
                                                                     proc.returncode, proc.stderr.strip()))
    last = proc.stdout.strip().splitlines()[-1]
    return json.loads(last)


KEYS = ["malloc_p50_ns", "malloc_p99_ns", "malloc_p9999_ns", "malloc_max_ns", "malloc_mean_ns",
        "free_p50_ns", "free_p99_ns", "free_p9999_ns", "free_max_ns", "free_mean_ns",
        "alloc_free_s", "elapsed_s", "excess_pct", "peak_heap_bytes", "peak_live_bytes"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ops", type=int, default=1000000)
    ap.add_argument("--live-bytes", type=int, default=32 << 20)
    ap.add_argument("--trace")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    prog = os.path.join(args.build_dir, "bin", "latency")
    if not os.access(prog, os.X_OK):
        print("run_latency: %s not built" % prog, file=sys.stderr)
        return 2
    if args.repeats < 1:
        print("run_latency: --repeats must be at least 1", file=sys.stderr)
        return 2
    common = ["--trace", args.trace] if args.trace else ["--ops", str(args.ops), "--live-bytes", str(args.live_bytes)]
    rows = allocators(args.build_dir)
    runs = {name: [] for name, _, _ in rows}
    try:
        for r in range(args.repeats):
            for name, extra, preload in rows:  # interleaved, so drift hits every row alike
                runs[name].append(run_once(prog, extra, preload, common)["figures"])
                print("repeat %d/%d %s done" % (r + 1, args.repeats, name), file=sys.stderr)
    except RuntimeError as e:
        print("run_latency: %s" % e, file=sys.stderr)
        return 1
    med = {name: {k: statistics.median(f[k] for f in fs) for k in KEYS} for name, fs in runs.items()}
    spread = {name: {k: (min(f[k] for f in fs), max(f[k] for f in fs)) for k in KEYS} for name, fs in runs.items()}
    print("workload: %s; %d repeats, medians (min..max)" % (
        "trace " + args.trace if args.trace else "synthetic, %d ops, plateau %d B" % (args.ops, args.live_bytes),
        args.repeats))
    print()
    print("| allocator | malloc p50 | p99 | p99.99 | max | free p50 | p99 | p99.99 | max | malloc+free time | vs glibc | excess over peak live |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = med.get("glibc", {}).get("alloc_free_s")

    def ns(name, k):
        lo, hi = spread[name][k]
        return "%.0f (%.0f..%.0f)" % (med[name][k], lo, hi) if k.endswith("max_ns") or k.endswith("p9999_ns") \
            else "%.0f" % med[name][k]

    for name, _, _ in rows:
        m = med[name]
        ratio = "%.2f" % (m["alloc_free_s"] / base) if base else "-"
        frag = "%.1f%%" % m["excess_pct"] if name != "pool-prefault" else "(prefaulted)"
        lo, hi = spread[name]["alloc_free_s"]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.3f s (%.3f..%.3f) | %s | %s |" % (
            name, ns(name, "malloc_p50_ns"), ns(name, "malloc_p99_ns"), ns(name, "malloc_p9999_ns"),
            ns(name, "malloc_max_ns"), ns(name, "free_p50_ns"), ns(name, "free_p99_ns"),
            ns(name, "free_p9999_ns"), ns(name, "free_max_ns"), m["alloc_free_s"], lo, hi, ratio, frag))
    print()
    print("peak live %d B" % med["pool"]["peak_live_bytes"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"common": common, "runs": runs, "median": med}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
