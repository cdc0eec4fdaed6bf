"""The `mimalloc-bench` suite: the benchmark programs of mimalloc-bench
(https://github.com/daanx/mimalloc-bench), the set allocator authors compare on, run with its
own arguments (its bench.sh) under every allocator, as command entries (commands.py).

Its programs are not ours and not in Debian: scripts/mimalloc-bench.sh clones the project (or
takes a checkout), builds the programs that need no further download into
<build>/mimalloc-bench/, and runs this suite. Without them each series is skipped, saying so.

Most are compared by wall time, as bench.sh does. Those that run for a fixed time and print
their throughput (larson, xmalloc-test, rptest, glibc-thread) are compared by the "relative
time" bench.sh derives from that figure (lower is better). "N" series use as many threads as
the harness may use CPUs (bench.sh's $procs).
"""
from __future__ import annotations

import os

from ..commands import Command, Figure, entry

SUITE = "mimalloc-bench"
HINT = "build mimalloc-bench's programs with scripts/mimalloc-bench.sh (it clones github.com/daanx/mimalloc-bench)"
PROCS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_DIR = "{build_dir}/mimalloc-bench"

# bench.sh's own conversions of a printed rate into a time
LARSON = Figure("relative_time_s", r"relative time: ([0-9.]+)s")
XMALLOC = Figure("relative_time_s", r"rtime: ([0-9.]+)")
RPTEST = Figure("relative_time_s", r"([0-9]+) memory ops/CPU second", scale=2e6, invert=True)
GLIBC_THREAD = Figure("relative_time_s", r"^\s*([0-9.]+) iterations", scale=1e9, invert=True)

# name, program, arguments, figure (None: wall time), what it is (bench/README.md's words, shortened)
_PROGRAMS = [
    ("cfrac", "cfrac", ["17545186520507317056371138836327483792789528"], None,
     "continued-fraction factorisation: many small short-lived bignums, one thread"),
    ("espresso", "espresso", [f"{_DIR}/largest.espresso"], None,
     "a logic minimiser (SPEC-like): mixed sizes, one thread"),
    ("barnes", "barnes-run", [], None,
     "a Barnes-Hut n-body simulation: few allocations (the allocator barely matters)"),
    ("alloc-test1", "alloc-test", ["1"], None,
     "random sizes up to 1 KiB in random order over a large array of live blocks, one thread"),
    ("alloc-testN", "alloc-test", [str(PROCS)], None,
     "the same in one thread per CPU, each with its own array"),
    ("larsonN", "larson", ["5", "8", "1000", "5000", "100", "4141", str(PROCS)], LARSON,
     "Larson's server simulation: blocks freed by other threads (relative time from its throughput)"),
    ("larsonN-sized", "larson-sized", ["5", "8", "1000", "5000", "100", "4141", str(PROCS)], LARSON,
     "the same with C++ sized deletes"),
    ("xmalloc-testN", "xmalloc-test", ["-w", str(PROCS), "-t", "5", "-s", "64"], XMALLOC,
     "producers allocate, consumers free (Lever and Boreham's xmalloc; relative time from its rate)"),
    ("cache-thrash1", "cache-thrash", ["1", "1000", "1", "2000000", str(PROCS)], None,
     "active false sharing (Hoard's benchmark), one thread"),
    ("cache-thrashN", "cache-thrash", [str(PROCS), "1000", "1", "2000000", str(PROCS)], None,
     "active false sharing, one thread per CPU"),
    ("cache-scratch1", "cache-scratch", ["1", "1000", "1", "2000000", str(PROCS)], None,
     "passive false sharing (Hoard's benchmark), one thread"),
    ("cache-scratchN", "cache-scratch", [str(PROCS), "1000", "1", "2000000", str(PROCS)], None,
     "passive false sharing, one thread per CPU"),
    ("malloc-large", "malloc-large", [], None,
     "5-25 MiB buffers replaced at random, each zeroed"),
    ("mstressN", "mstress", [str(PROCS), "50", "25"], None,
     "mimalloc's stress test: blocks of every size passed between threads"),
    ("mleak10", "mleak", ["5"], None, "threads that leak a little as they come and go"),
    ("mleak100", "mleak", ["50"], None, "the same, ten times longer"),
    ("rptestN", "rptest", [str(PROCS), "0", "1", "2", "500", "1000", "100", "8", "16000"], RPTEST,
     "rpmalloc's benchmark: random sizes 8 B-16 KB, aligned requests, cross-thread frees "
     "(relative time from its operations per CPU-second)"),
    ("glibc-simple", "glibc-simple", [], None,
     "glibc's bench-malloc-simple: runs of 25-1,600 blocks of 16-64 B allocated then freed"),
    ("glibc-thread", "glibc-thread", [str(PROCS)], GLIBC_THREAD,
     "glibc's bench-malloc-thread: one thread per CPU (relative time from its iterations)"),
]

PROGRAMS = [
    entry(name, Command((f"{_DIR}/{prog}", *args), cwd=_DIR, figure=figure, hint=HINT),
          suite=SUITE, title=f"mimalloc-bench {name}: {what}", rss_plot=False)
    for name, prog, args, figure, what in _PROGRAMS
]
