#!/usr/bin/env python3
"""Builds the BTreeMap benchmark (src/lib.rs) against Rust's default allocator (the system
malloc), larder (the crate) and, when it builds from crates.io, mimalloc (the mimalloc crate),
then runs each N times interleaved and prints medians of wall time and peak RSS, with ratios
to the default allocator.

usage: rust/bench/run.py [--runs 5] [--mode local|handoff|both] [--keys 100000] [--rounds 2]
                         [--threads 4] [--target-dir DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build(target_dir):
    cmd = ["cargo", "build", "--release", "--target-dir", target_dir]
    with_mi = subprocess.run(cmd + ["--features", "mimalloc"], cwd=HERE)
    if with_mi.returncode == 0:
        return ["system", "larder", "mimalloc"]
    print("run.py: the mimalloc crate did not build; comparing larder with the default allocator only",
          file=sys.stderr)
    subprocess.run(cmd, cwd=HERE, check=True)
    return ["system", "larder"]


def run_once(exe, args):
    t0 = time.perf_counter()
    p = subprocess.Popen([exe] + args, stdout=subprocess.PIPE)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit("%s exited with status %d" % (exe, status))
    line = json.loads(out.decode().strip().splitlines()[-1])
    return wall, ru.ru_maxrss * 1024, line, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mode", default="both", choices=["local", "handoff", "both"])
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--target-dir", default=os.path.join(HERE, "target"))
    a = ap.parse_args()
    allocators = build(a.target_dir)
    modes = ["local", "handoff"] if a.mode == "both" else [a.mode]
    exe = {n: os.path.join(a.target_dir, "release", "btree-" + n) for n in allocators}
    res = {(m, n): [] for m in modes for n in allocators}
    for r in range(a.runs):
        for m in modes:
            # interleaved: every allocator once per round, in a rotating order
            order = allocators[r % len(allocators):] + allocators[:r % len(allocators)]
            for n in order:
                args = ["--mode", m, "--keys", str(a.keys), "--rounds", str(a.rounds),
                        "--threads", str(a.threads)]
                wall, rss, line, cpu = run_once(exe[n], args)
                res[(m, n)].append((wall, rss, line["checksum"], cpu))
                print("run %d %-8s %-9s %.3f s  cpu %.3f s  %.1f MiB" % (r + 1, m, n, wall, cpu, rss / 2**20),
                      flush=True)
    print()
    print("BTreeMap<String, Vec<u8>>: %d threads x %d keys x %d rounds, median of %d interleaved runs"
          % (a.threads, a.keys, a.rounds, a.runs))
    print("%-8s %-9s %9s %9s %9s %9s %12s %9s" % ("mode", "allocator", "time s", "time/sys", "cpu s",
                                                "cpu/sys", "peak RSS MiB", "RSS/sys"))
    summary = []
    for m in modes:
        base_t = statistics.median(x[0] for x in res[(m, "system")])
        base_r = statistics.median(x[1] for x in res[(m, "system")])
        base_c = statistics.median(x[3] for x in res[(m, "system")])
        for n in allocators:
            t = statistics.median(x[0] for x in res[(m, n)])
            rss = statistics.median(x[1] for x in res[(m, n)])
            cpu = statistics.median(x[3] for x in res[(m, n)])
            sums = {x[2] for x in res[(m, n)]}
            assert len(sums) == 1, "checksums differ between runs"
            print("%-8s %-9s %9.3f %9.2f %9.3f %9.2f %12.1f %9.2f" % (m, n, t, t / base_t, cpu, cpu / base_c,
                                                                 rss / 2**20, rss / base_r))
            summary.append({"mode": m, "allocator": n, "median_s": t, "time_ratio": t / base_t,
                            "median_cpu_s": cpu, "cpu_ratio": cpu / base_c,
                            "median_peak_rss": rss, "rss_ratio": rss / base_r,
                            "runs_s": [x[0] for x in res[(m, n)]], "runs_rss": [x[1] for x in res[(m, n)]],
                            "runs_cpu_s": [x[3] for x in res[(m, n)]]})
    print(json.dumps({"bench": "rust-btree", "threads": a.threads, "keys": a.keys,
                      "rounds": a.rounds, "runs": a.runs, "results": summary}))


if __name__ == "__main__":
    main()
