"""Every experiment the harness runs, as one data table (SUITES below).

An Entry is one series: a workload, its fixed flags, one swept flag (the axis), and
optional variants (extra flags and/or environment) that are crossed with the axis.
Each (variant, axis value) pair is a *case*; each case is run over the allocators,
repeats interleaved.  To add an experiment, add an Entry to the table.

Placeholders in string flag values and in `setup` commands: {build_dir}, {repo},
{out_dir} (this run's results folder).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .allocators import Profile
from .workloads import info


@dataclass(frozen=True)
class Variant:
    label: str
    params: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


PLAIN = (Variant(""),)


@dataclass(frozen=True)
class Entry:
    suite: str                 # "quick", "seeds", ...
    series: str                # unique name in its suite
    workload: str              # program in <build>/bin
    title: str                 # what it reproduces, citing the seed
    params: dict = field(default_factory=dict)   # flag -> value; True: bare flag; False/None: omitted
    axis: str | None = "--threads"               # swept flag (None: a single case)
    values: tuple | str = (1,)                   # axis values; "1..cpus" / "1..2cpus" are resolved per machine
    variants: tuple = PLAIN
    kind: str = "compare"      # how the report shows it: compare, speedup, scaling, threads-vs-processes,
                               # false-share, heap-leak, heap-leak-calib, blowup, sensitivity
    work: tuple = ()           # flags scaled by --scale (iterations, seconds, ...)
    allocators: tuple | None = None  # only these allocators (e.g. larder for its own tunables)
    metric: str | None = None        # override the workload's comparison figure
    higher_is_better: bool | None = None
    repeats: int | None = None       # default repeats for this entry (the seed's own count)
    timeout: float | None = None     # seconds per run; default from the command line
    setup: tuple = ()                # argv run once before the entry (e.g. make an input file)
    strace: str | None = None        # this entry's system-call pass (last, all, none); default: the command line's
    rss_plot: bool = False           # the report draws RSS over time for this series
    command: object | None = None    # any program as a workload (commands.Command): run instead of bin/<workload>
    trace_frag: bool = False         # record each run (liblarder-trace.so) and compute Hoard's A/U off-line (§5.4)

    @property
    def metric_name(self) -> str:
        return self.metric or info(self.workload).metric

    @property
    def higher_better(self) -> bool:
        if self.higher_is_better is not None:
            return self.higher_is_better
        return info(self.workload).higher_is_better

    @property
    def is_threads_axis(self) -> bool:
        return self.axis in ("--threads", "--workers", info(self.workload).threads_flag)


_S = "seeds"
_Q = "quick"
_LB = "Lever & Boreham (seed 000/001)"
_HOARD = "Hoard (seed 004)"
_ALIGN = (Variant("malloc"), Variant("aligned", {"--aligned": True}))
_F = tuple(Variant(f"f={f}", env={"LARDER_EMPTY_FRACTION": f}) for f in ("0.125", "0.25", "0.5"))

SUITES: list[Entry] = [
    # ---- quick: every workload at small parameters (2-5 minutes over all allocators) ----
    Entry(_Q, "malloc-test", "malloc-test", f"{_LB} benchmark 1, 512-byte pairs per thread",
          {"--size": 512, "--iterations": 10_000_000}, values=(1, 2), kind="scaling", work=("--iterations",)),
    Entry(_Q, "malloc-test-tvp", "malloc-test", f"{_LB} Table 1: two threads vs two processes",
          {"--size": 512, "--iterations": 10_000_000}, values=(2,), kind="threads-vs-processes",
          variants=(Variant("threads"), Variant("processes", {"--processes": True})), work=("--iterations",)),
    Entry(_Q, "heap-leak-calib", "heap-leak", f"{_LB} benchmark 2 predictor: one object, one thread, one round",
          {"--threads": 1, "--objects": 1, "--rounds": 1}, axis=None, kind="heap-leak-calib"),
    Entry(_Q, "heap-leak-t1", "heap-leak", f"{_LB} benchmark 2, one thread, 10,000 40-byte objects",
          {"--threads": 1, "--objects": 10000, "--size": 40}, axis="--rounds", values=(1, 2, 3, 4), kind="heap-leak"),
    Entry(_Q, "heap-leak-t3", "heap-leak", f"{_LB} benchmark 2, three threads",
          {"--threads": 3, "--objects": 10000, "--size": 40}, axis="--rounds", values=(1, 2, 3, 4), kind="heap-leak"),
    Entry(_Q, "false-share", "false-share", f"{_LB} benchmark 3, two threads, sizes around a cache line",
          {"--threads": 2, "--writes": 100_000_000}, axis="--size", values=(8, 24, 64), variants=_ALIGN,
          kind="false-share", work=("--writes",)),
    Entry(_Q, "active-false", "active-false", f"{_HOARD} active-false",
          {"--iterations": 10000, "--writes": 2000, "--size": 8}, values=(1, 2), kind="speedup", work=("--iterations",)),
    Entry(_Q, "passive-false", "passive-false", f"{_HOARD} passive-false",
          {"--iterations": 10000, "--writes": 2000, "--size": 8}, values=(1, 2), kind="speedup", work=("--iterations",)),
    Entry(_Q, "threadtest", "threadtest", f"{_HOARD} threadtest, 8-byte objects",
          {"--iterations": 30, "--objects": 100000, "--size": 8}, values=(1, 2), kind="speedup", work=("--iterations",)),
    Entry(_Q, "larson", "larson", f"{_HOARD} Larson server simulation",
          {"--seconds": 0.5, "--chunks": 1000, "--rounds": 2000, "--min-size": 10, "--max-size": 100},
          values=(1, 2), kind="speedup", work=("--seconds",)),
    Entry(_Q, "shbench", "shbench", f"{_HOARD} shbench, 8-100 bytes",
          {"--iterations": 2_000_000, "--min-size": 8, "--max-size": 100}, values=(1, 2), kind="speedup",
          work=("--iterations",)),
    Entry(_Q, "free-contention", "free-contention", "seed 002 free() contention, producer/consumer pairs",
          {"--seconds": 0.5, "--size": 64}, axis="--workers", values=(1, 2), kind="speedup", work=("--seconds",)),
    Entry(_Q, "blowup", "blowup", f"{_HOARD} blowup, round-robin producer-consumer",
          {"--blocks": 20000, "--size": 64, "--rounds": 5}, values=(4,), kind="blowup"),
    Entry(_Q, "trace-replay", "trace-replay",
          "seed 003 ch. 6: replay of a real recording (traces/python-threads.ltr.gz); fragmentation by method 4",
          {"--trace": "{repo}/traces/python-threads.ltr.gz", "--iterations": 1}, values=(1, 2, 4), kind="compare",
          metric="fragmentation_pct", higher_is_better=False, work=("--iterations",), rss_plot=True),
    Entry(_Q, "churn", "churn", "a live heap of 10,000 blocks of 256 B replaced at random, CPU per replacement",
          {"--live": 10000, "--min-size": 256, "--max-size": 256, "--ops": 200_000}, values=(1,), kind="compare",
          work=("--ops",), rss_plot=True),
    Entry(_Q, "server-mix", "server-mix", "a server's work phase (1 s, 2 threads, 1% large blocks), then 1 s idle: "
          "RSS over time and after idle", {"--threads": 2, "--seconds": 1, "--idle-seconds": 1, "--working-set": 2000},
          axis=None, kind="compare", work=("--seconds",), repeats=2, rss_plot=True),
    Entry(_Q, "idle-return", "idle-return", "an event loop builds 32 MiB of 16 B-1 KiB blocks, frees them and "
          "idles 3 s with no allocator calls (helpers never allocate): RSS after idle",
          {"--shape": "loop", "--threads": 2, "--heap-mb": 32, "--idle-ms": 3000}, axis=None, kind="compare",
          repeats=1, rss_plot=True),
    Entry(_Q, "remote-free", "remote-free", "producer mallocs 16 B-1 KiB, consumer on another core frees: CPU ns per "
          "block, waiting excluded", {"--seconds": 0.5}, axis="--pairs", values=(1,), kind="compare",
          work=("--seconds",)),
    Entry(_Q, "soak", "soak", "2 threads keep 5,000 blocks each (16 B-2 MiB, sparse writes, a third freed by the "
          "other thread, realloc, calloc, memalign) for 1 s, every block checked: the run fails on a wrong byte",
          {"--threads": 2, "--live": 5000, "--seconds": 1}, axis=None, kind="compare", work=("--seconds",),
          repeats=1),

    # ---- seeds: each experiment of the source documents with its series (seed parameters;
    #      shrink the work with --scale on a small machine) ----
    Entry(_S, "lb-series1", "malloc-test", f"{_LB} series one / Table 1: 2 threads vs 2 processes, 10M x 512 B",
          {"--size": 512, "--iterations": 10_000_000}, values=(2,), kind="threads-vs-processes",
          variants=(Variant("threads"), Variant("processes", {"--processes": True})),
          work=("--iterations",), repeats=3),
    Entry(_S, "lb-series2", "malloc-test", f"{_LB} series two / Figure 1: 1-5 threads past the CPU count, 10M x 8192 B each",
          {"--size": 8192, "--iterations": 10_000_000}, values=(1, 2, 3, 4, 5), kind="scaling",
          work=("--iterations",), repeats=5),
    Entry(_S, "lb-series3", "malloc-test", f"{_LB} series three / Figure 2: 16-48 threads, 10M x 4100 B each",
          {"--size": 4100, "--iterations": 10_000_000}, values=(16, 24, 32, 40, 48), kind="scaling",
          work=("--iterations",), repeats=1),
    Entry(_S, "lb-sizes", "malloc-test", f"{_LB} benchmark 1 over request sizes, 2 threads",
          {"--threads": 2, "--iterations": 10_000_000}, axis="--size", values=(16, 64, 512, 4100, 8192, 65536),
          kind="compare", work=("--iterations",), repeats=3),
    Entry(_S, "lb-bench2-calib", "heap-leak", f"{_LB} §5.2 predictor: one-object array, one thread, one round",
          {"--threads": 1, "--objects": 1, "--rounds": 1}, axis=None, kind="heap-leak-calib", repeats=5),
    Entry(_S, "lb-bench2-t1", "heap-leak", f"{_LB} §5.2 Figure 5: one thread, rounds 1-8",
          {"--threads": 1, "--objects": 10000, "--size": 40}, axis="--rounds", values=tuple(range(1, 9)),
          kind="heap-leak", repeats=5),
    Entry(_S, "lb-bench2-t3", "heap-leak", f"{_LB} §5.2 Figure 6: three threads, rounds 1-8",
          {"--threads": 3, "--objects": 10000, "--size": 40}, axis="--rounds", values=tuple(range(1, 9)),
          kind="heap-leak", repeats=5),
    Entry(_S, "lb-bench2-t7", "heap-leak", f"{_LB} §5.2 Figures 7-8: seven threads, rounds 1-8",
          {"--threads": 7, "--objects": 10000, "--size": 40}, axis="--rounds", values=tuple(range(1, 9)),
          kind="heap-leak", repeats=5),
] + [
    Entry(_S, f"lb-bench3-t{t}", "false-share", f"{_LB} §5.3 Figure {7 + t}: {t} threads, object sizes 3-52 B, 100M writes",
          {"--threads": t, "--writes": 100_000_000}, axis="--size", values=(3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 52),
          variants=_ALIGN, kind="false-share", work=("--writes",), repeats=3)
    for t in (2, 3, 4)
] + [
    Entry(_S, "seed002-free", "free-contention", "seed 002 test results: frees/s for 1, 2, 3, 4, 8 workers",
          {"--seconds": 10, "--size": 64}, axis="--workers", values=(1, 2, 3, 4, 8), kind="speedup",
          work=("--seconds",), repeats=3),
    Entry(_S, "hoard-threadtest", "threadtest", f"{_HOARD} Figure 3(a): threadtest speedup, 100,000 8-byte objects",
          {"--iterations": 100, "--objects": 100000, "--size": 8}, values="1..2cpus", kind="speedup",
          work=("--iterations",), repeats=3),
    Entry(_S, "hoard-shbench", "shbench", f"{_HOARD} Figure 3(b): shbench speedup, 50M blocks of 8-100 B",
          {"--iterations": 50_000_000, "--min-size": 8, "--max-size": 100}, values="1..2cpus", kind="speedup",
          work=("--iterations",), repeats=3),
    Entry(_S, "hoard-larson", "larson", f"{_HOARD} Figure 3(c): Larson speedup, 30 s, 10-100 B",
          {"--seconds": 30, "--chunks": 10000, "--min-size": 10, "--max-size": 100}, values="1..2cpus",
          kind="speedup", work=("--seconds",), repeats=3),
    Entry(_S, "hoard-active-false", "active-false", f"{_HOARD} Figure 4(a): active-false speedup",
          {"--size": 8}, values="1..2cpus", kind="speedup", work=("--iterations",), repeats=3,
          ),
    Entry(_S, "hoard-passive-false", "passive-false", f"{_HOARD} Figure 4(b): passive-false speedup",
          {"--size": 8}, values="1..2cpus", kind="speedup", work=("--iterations",), repeats=3),
    Entry(_S, "hoard-blowup", "blowup", f"{_HOARD} §2.2/§6 blowup: round-robin producer-consumer",
          {"--blocks": 100000, "--size": 64, "--rounds": 10}, values=(2, 4, 8), kind="blowup", repeats=3),
    Entry(_S, "thesis-trace", "trace-replay",
          "seed 003 Table 5-1 scenarios (1-12 threads, 5 runs each) on traces/python-threads.ltr.gz; "
          "fragmentation by method 4 (Tables 6-1, 6-4, 6-8, 6-11, 6-14)",
          {"--trace": "{repo}/traces/python-threads.ltr.gz", "--iterations": 10}, values=(1, 2, 4, 8, 12),
          kind="compare", metric="fragmentation_pct", higher_is_better=False, work=("--iterations",), repeats=5),
] + [
    Entry(_S, f"hoard-f-{w}", w, f"{_HOARD} §5.5 Tables 5-6: empty fraction f for {w} (larder's LARDER_EMPTY_FRACTION)",
          p, values="cpus", variants=_F, kind="sensitivity", work=wk, allocators=("larder",), repeats=3)
    for w, p, wk in [
        ("threadtest", {"--iterations": 100, "--objects": 100000, "--size": 8}, ("--iterations",)),
        ("shbench", {"--iterations": 50_000_000, "--min-size": 8, "--max-size": 100}, ("--iterations",)),
        ("larson", {"--seconds": 30, "--chunks": 10000, "--min-size": 10, "--max-size": 100}, ("--seconds",)),
    ]
]

# Hoard's fragmentation tables (seed 004 §5.4 Table 4, §5.5 Table 6), larder only: each run recorded
# by liblarder-trace.so and processed off-line by trace-frag, as Hoard did (harness/larder_bench/hoard.py).
# Hoard's parameters, with the work cut so that a trace stays a few hundred MB: threadtest's live
# set does not depend on its iterations, shbench's 10,000 slots per thread give about Hoard's
# 556 KB in use on two threads, Larson runs 0.5 s instead of 30.
_HF_RUNS = [
    ("threadtest", {"--iterations": 10, "--objects": 100000, "--size": 8}, ("--iterations",)),
    ("shbench", {"--iterations": 2_000_000, "--slots": 10000, "--min-size": 8, "--max-size": 100}, ("--iterations",)),
    ("larson", {"--seconds": 0.5, "--chunks": 10000, "--min-size": 10, "--max-size": 100}, ("--seconds",)),
]
_SB = (Variant("S=64K", env={"LARDER_SUPERBLOCK_SIZE": "65536"}), Variant("S=16K", env={"LARDER_SUPERBLOCK_SIZE": "16384"}))
SUITES += [
    Entry(_S, f"hoard-frag-{w}", w, f"{_HOARD} §5.4 Table 4: fragmentation A/U of {w} (recorded, processed off-line); "
          "larder's default superblock and its smallest, nearest Hoard's 8 KiB", p, values="cpus", variants=_SB,
          kind="hoard-frag", work=wk, allocators=("larder",), metric="hoard_fragmentation", higher_is_better=False,
          repeats=3, strace="none", trace_frag=True)
    for w, p, wk in _HF_RUNS
] + [
    Entry(_S, f"hoard-frag-f-{w}", w, f"{_HOARD} §5.5 Table 6: fragmentation A/U of {w} for empty fractions f = 1/8, "
          "1/4, 1/2 (LARDER_EMPTY_FRACTION) and 1..2×CPUs threads", p, values="1..2cpus", variants=_F,
          kind="hoard-frag-f", work=wk, allocators=("larder",), metric="hoard_fragmentation", higher_is_better=False,
          repeats=3, strace="none", trace_frag=True)
    for w, p, wk in _HF_RUNS
]

_SV = "server"
_LAT = "latency"
_TU = "tuning"
_TRACES = (("python-threads", "{repo}/traces/python-threads.ltr.gz"), ("sqlite", "{repo}/traces/sqlite.ltr.gz"))
SUITES += [
    # ---- server: long-running server shapes (live heaps, remote frees, memory over time) ----
    Entry(_SV, "churn-256", "churn", "churn: 10k-1M live 256-byte blocks, one thread, 2M random replacements",
          {"--min-size": 256, "--max-size": 256, "--ops": 2_000_000}, axis="--live", values=(10_000, 100_000, 1_000_000),
          kind="compare", work=("--ops",), repeats=3, rss_plot=True),
    Entry(_SV, "churn-small", "churn", "churn: 10k-1M live blocks of the 16 B-4 KiB mix, one thread",
          {"--mix": "small", "--ops": 2_000_000}, axis="--live", values=(10_000, 100_000, 1_000_000),
          kind="compare", work=("--ops",), repeats=3),
    Entry(_SV, "churn-realloc", "churn", "churn: 10k-1M live blocks of the 16 B-4 KiB mix, one thread, half the steps "
          "growing their block by 1-16 bytes with realloc (strings, vectors)",
          {"--mix": "small", "--ops": 2_000_000, "--realloc-share": 0.5}, axis="--live",
          values=(10_000, 100_000, 1_000_000), kind="compare", work=("--ops",), repeats=3),
    Entry(_SV, "drop-wait", "drop-wait", "a 1 GiB heap of 256-byte blocks dropped while a thread keeps growing "
          "its own: the worst malloc or free while the memory goes back (jitter of the machine included)",
          {"--seconds": 4}, axis="--workers", values=(1,), kind="compare", work=("--seconds",), repeats=5),
    Entry(_SV, "tail-latency", "tail-latency", "4 workers (twice this machine's cores) run a server's mix of calls "
          "through grow, thin and mixed phases, every call timed: the worst call, and the calls over 10 ms",
          {"--seconds": 5}, axis="--workers", values=(4,), kind="compare", work=("--seconds",), repeats=5),
    Entry(_SV, "churn-remote", "churn", "churn: 2 threads, a quarter of the frees done by the other thread, 256 B",
          {"--threads": 2, "--min-size": 256, "--max-size": 256, "--ops": 1_000_000, "--remote-share": 0.25},
          axis="--live", values=(10_000, 100_000, 1_000_000), kind="compare", work=("--ops",), repeats=3),
    Entry(_SV, "churn-medium", "churn", "medium blocks: 64 live blocks of 64 KiB-2 MiB, 20,000 replacements",
          {"--live": 64, "--min-size": 65536, "--max-size": 2_097_152, "--ops": 20_000}, values=(1,),
          kind="compare", work=("--ops",), repeats=3, rss_plot=True),
    Entry(_SV, "churn-medium-small", "churn", "medium blocks just above the largest class: 1,000 live blocks of "
          "20-60 KiB, 200,000 replacements per thread, each block written at its ends only",
          {"--live": 1000, "--min-size": 20_000, "--max-size": 60_000, "--ops": 200_000}, axis="--threads", values=(1, 2),
          kind="compare", work=("--ops",), repeats=3),
    Entry(_SV, "threadtest-buffers", "threadtest", f"{_HOARD} threadtest with buffers: 1,000 live objects of 4,000 "
          "bytes, allocated and freed in rounds (more of a mid-size class in flight than a 16 KiB cache holds)",
          {"--iterations": 2000, "--objects": 1000, "--size": 4000}, values=(1, 2), kind="speedup",
          work=("--iterations",), repeats=5),
    Entry(_SV, "churn-buffers", "churn", "a loop of one 5-25 MiB buffer, allocated and freed 2,000 times",
          {"--live": 1, "--min-size": 5_242_880, "--max-size": 26_214_400, "--ops": 2000}, values=(1,),
          kind="compare", work=("--ops",), repeats=3, rss_plot=True),
    Entry(_SV, "larson-server", "larson", "Larson as a server: 2 threads, 8-1000 B, 5000 blocks per chain, "
          "100 rounds per thread generation; operations per CPU-second (user+sys from wait4)",
          {"--threads": 2, "--min-size": 8, "--max-size": 1000, "--chunks": 5000, "--rounds": 100, "--seconds": 5},
          axis=None, kind="compare", metric="ops_per_cpu_s", higher_is_better=True, work=("--seconds",), repeats=3,
          rss_plot=True),
    Entry(_SV, "free-contention", "free-contention", "seed 002 free() contention, 1-8 producer/consumer pairs",
          {"--seconds": 2, "--size": 64}, axis="--workers", values=(1, 2, 4, 8), kind="speedup",
          work=("--seconds",), repeats=3),
    Entry(_SV, "shbench", "shbench", f"{_HOARD} shbench, 8-100 bytes", {"--iterations": 10_000_000, "--min-size": 8,
          "--max-size": 100}, values=(1, 2), kind="speedup", work=("--iterations",), repeats=3),
    Entry(_SV, "threadtest", "threadtest", f"{_HOARD} threadtest, 8-byte objects",
          {"--iterations": 50, "--objects": 100000, "--size": 8}, values=(1, 2), kind="speedup",
          work=("--iterations",), repeats=3),
    Entry(_SV, "server-mix", "server-mix", "a server's day: 20 s of work (1% blocks of 100 KiB-2 MiB, a quarter "
          "freed remotely), then 5 s idle; RSS over time, at 5 s, at the end of work, after idle",
          {"--seconds": 20, "--idle-seconds": 5, "--remote-share": 0.25}, values=(2, 4), kind="compare",
          work=("--seconds",), repeats=2, timeout=120, rss_plot=True),
    Entry(_SV, "idle-return", "idle-return", "issue 15's shapes: 200 MiB of 16 B-1 KiB blocks built, all freed "
          "(keep: all but 0.3% at random, scattered over the heap as a cache's survivors), then 11 s with no "
          "allocator calls; RSS after 1, 2, 5, 10 purge delays and after idle",
          {"--heap-mb": 200}, axis=None, variants=(
              Variant("loop", {"--shape": "loop", "--threads": 4}),
              Variant("pool", {"--shape": "pool", "--threads": 4}),
              Variant("fork", {"--shape": "fork", "--threads": 2, "--parent-mb": 64}),
              Variant("one-idle", {"--shape": "one-idle", "--threads": 2}),
              Variant("loop-keep", {"--shape": "loop", "--threads": 4, "--keep-fraction": 0.003}),
              Variant("pool-keep", {"--shape": "pool", "--threads": 4, "--keep-fraction": 0.003})),
          kind="compare", repeats=3, timeout=120, rss_plot=True),
    Entry(_SV, "thread-rest", "thread-rest", "200 threads with 64 KiB stacks each hold one block of K sizes "
          "(16 B-4 KiB) and wait, as a thread-per-connection server's idle connections: resident KiB per thread",
          {"--threads": 200}, axis="--classes", values=(1, 6, 30), kind="compare", repeats=3),
    Entry(_SV, "remote-free", "remote-free", "issue 17: producers pinned to one half of the CPUs malloc 16 B-1 KiB, "
          "consumers on the other half free; CPU ns per block (malloc + remote free), waiting excluded",
          {"--seconds": 3}, axis="--pairs", values=(1, 2, 4, 8), kind="compare", work=("--seconds",), repeats=3),
    Entry(_SV, "remote-free-fan-in", "remote-free", "P producers (on one half of the CPUs) hand every block to one "
          "consumer (on the other), which frees them all, as to a logging or completion thread: its frees go to P "
          "owners at once; CPU ns per block, waiting excluded",
          {"--seconds": 3, "--consumers": 1}, axis="--pairs", values=(8, 64), kind="compare", work=("--seconds",),
          repeats=3),
    Entry(_SV, "remote-free-fan-in-unpinned", "remote-free", "remote-free-fan-in with 64 producers and nothing "
          "pinned, as most programs run: the scheduler mixes the producers' turns, so the consumer's frees are "
          "scattered over every owner's superblocks; CPU ns per block, waiting excluded",
          {"--seconds": 3, "--consumers": 1, "--pairs": 64, "--pin": "off"}, axis=None, kind="compare",
          work=("--seconds",), repeats=3),
    Entry(_SV, "remote-free-medium", "remote-free", "remote-free with blocks of 16-256 KiB, as buffers an I/O "
          "thread fills and a worker frees: above the small classes, where a block crosses threads as a span; "
          "CPU ns per block, waiting excluded",
          {"--seconds": 3, "--min-size": 16384, "--max-size": 262144}, axis="--pairs", values=(1, 2),
          kind="compare", work=("--seconds",), repeats=3),
    Entry(_SV, "remote-free-touch", "remote-free", "remote-free whose consumers write each block before freeing "
          "it (untimed), as a worker that updates a request does: the freed block's line is the consumer's",
          {"--seconds": 3, "--touch": "write"}, axis="--pairs", values=(1, 2), kind="compare", work=("--seconds",),
          repeats=3),
    Entry(_SV, "soak", "soak", "a server's load at scale, every block checked: 4 or 16 threads keep 100,000 "
          "blocks in all (16 B-2 MiB, sparse writes, realloc, calloc, memalign, a third freed by another thread), "
          "short-lived threads come and go, an idle phase every 10 s, a fork and a malloc_trim every 5 s, for 30 s; "
          "the run fails on a wrong byte, a false bad-free report or a failed child",
          {"--seconds": 30, "--short-lived": 1, "--idle-every": 10, "--fork-every": 5, "--trim-every": 5}, axis=None,
          variants=(Variant("4-threads", {"--threads": 4, "--live": 25000}),
                    Variant("16-threads", {"--threads": 16, "--live": 6250})),
          kind="compare", work=("--seconds",), repeats=1, timeout=180),
] + [
    Entry(_SV, f"replay-{name}", "trace-replay", f"seed 003 ch. 6 replay of traces/{name}.ltr.gz, 1 and 2 threads; "
          "fragmentation by method 4", {"--trace": path, "--iterations": 2}, values=(1, 2), kind="compare",
          metric="fragmentation_pct", higher_is_better=False, work=("--iterations",), repeats=3, rss_plot=True)
    for name, path in _TRACES
] + [
    # ---- latency: per-operation latency percentiles, one thread, for any allocator or profile ----
    Entry(_LAT, f"latency-{name}", "latency", f"per-call latency replaying traces/{name}.ltr.gz in its merged order "
          "on one thread (malloc includes calloc and aligned allocations)", {"--trace": path}, axis=None,
          kind="latency", repeats=3)
    for name, path in _TRACES
] + [
    Entry(_LAT, "latency-synthetic", "latency", "per-call latency of the synthetic ramp/peak/plateau/teardown "
          "sequence (bench/latency, 1M operations, up to 64 MiB live)", {"--ops": 1_000_000}, axis=None,
          kind="latency", work=("--ops",), repeats=3),
] + [
    # ---- tuning: seed 003 §6.7-6.8 profiles over the committed traces ----
    Entry(_TU, f"tuning-{name}", "trace-replay", f"seed 003 §6.7-6.8 tuning profiles replaying traces/{name}.ltr.gz "
          "(Tables 6-17 to 6-25: time, peak heap, fragmentation, mmap and brk calls)",
          {"--trace": path, "--iterations": 2}, values=(1, 2, 4), kind="tuning", metric="time_s",
          higher_is_better=False, work=("--iterations",), repeats=3, strace="all", rss_plot=True)
    for name, path in _TRACES
]

# Profiles a suite adds to the allocators (seed 003 Table 6-17 and §6.8; the nearest settings
# for the others). A profile whose allocator is missing is skipped with it.
_GT = "GLIBC_TUNABLES"
SUITE_PROFILES: dict[str, list[Profile]] = {
    _TU: [
        Profile("glibc-cpu", "glibc", {
            _GT: "glibc.malloc.mxfast=80:glibc.malloc.trim_threshold=18446744073709551615:"
                 "glibc.malloc.mmap_max=0:glibc.malloc.top_pad=1073741824"},
                "seed 003 Table 6-17 CPUProfile: MXFAST 80, no trimming, no mmap, 1 GiB top pad "
                "(the thesis also disabled its driver's malloc_trim; trace-replay never calls it)"),
        Profile("glibc-memory", "glibc", {_GT: "glibc.malloc.trim_threshold=1:glibc.malloc.top_pad=0"},
                "seed 003 Table 6-17 MemoryProfile: trim threshold 1, top pad 0 (the thesis's driver also "
                "called malloc_trim, which trace-replay does not)"),
        Profile("tcmalloc-skip-mmap", "tcmalloc", {"TCMALLOC_SKIP_MMAP": "1"}, "seed 003 §6.8 SKIP_MMAP"),
        Profile("tcmalloc-skip-sbrk", "tcmalloc", {"TCMALLOC_SKIP_SBRK": "1"}, "seed 003 §6.8 SKIP_SBRK"),
        Profile("jemalloc-cpu", "jemalloc", {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
                "nearest to the CPUProfile: never give pages back"),
        Profile("jemalloc-memory", "jemalloc", {"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"},
                "nearest to the MemoryProfile: give freed pages back at once"),
        Profile("mimalloc-cpu", "mimalloc", {"MIMALLOC_EAGER_COMMIT": "1", "MIMALLOC_RESET_DELAY": "1000000"},
                "nearest to the CPUProfile: commit eagerly, (almost) never reset pages"),
        Profile("mimalloc-memory", "mimalloc", {"MIMALLOC_PAGE_RESET": "1", "MIMALLOC_RESET_DELAY": "0"},
                "nearest to the MemoryProfile: reset freed pages at once"),
        Profile("larder-cpu", "larder", {"LARDER_PURGE_DELAY_MS": "3600000", "LARDER_LARGE_CACHE_MB": "1024"},
                "nearest to the CPUProfile: keep empty memory and large spans"),
        Profile("larder-memory", "larder", {"LARDER_PURGE_DELAY_MS": "0", "LARDER_LARGE_CACHE_MB": "0"},
                "nearest to the MemoryProfile: return empty memory at once, cache no large spans"),
        Profile("larder-fit", "larder", {"LARDER_FIT_ABOVE": "128", "LARDER_MEDIUM_CACHE_KB": "0", "LARDER_GROW_PURGE_KB": "65536"},
                "small heaps whose sizes shift: blocks above 128 B from the fit tier (best fit with coalescing), no kept "
                "medium spans, growth over fragments gives back as much"),
    ],
}


def profiles_for(suite: str) -> list[Profile]:
    return list(SUITE_PROFILES.get(suite, []))


# Defaults of the work flags that an entry scales but does not set (docs/benchmarks.md).
WORK_DEFAULTS = {("active-false", "--iterations"): 10000, ("passive-false", "--iterations"): 10000}


class SuiteError(ValueError):
    pass


def suite_names() -> list[str]:
    seen: list[str] = []
    for e in SUITES:
        if e.suite not in seen:
            seen.append(e.suite)
    return seen


def resolve_values(values, cpus: int | None = None) -> tuple:
    """Axis values; "cpus", "1..cpus" and "1..2cpus" follow this machine's CPU count."""
    if not isinstance(values, str):
        return tuple(values)
    n = cpus or len(os.sched_getaffinity(0)) or 1
    if values == "cpus":
        return (max(n, 2),)
    if values == "1..cpus":
        return tuple(range(1, max(n, 2) + 1))
    if values == "1..2cpus":
        return tuple(range(1, 2 * n + 1))
    raise SuiteError(f"unknown axis value spec {values!r}")


def _scaled(entry: Entry, scale: float) -> dict:
    params = dict(entry.params)
    if scale == 1.0:
        return params
    for flag in entry.work:
        base = params.get(flag, WORK_DEFAULTS.get((entry.workload, flag)))
        if base is None or isinstance(base, bool):
            continue
        if isinstance(base, (list, tuple)):
            # A list of inputs (a compiler's source files): the first share of them.
            params[flag] = type(base)(base[:max(1, int(round(len(base) * scale)))])
        elif isinstance(base, int):
            params[flag] = max(1, int(round(base * scale)))
        else:
            params[flag] = max(0.05, round(float(base) * scale, 3))
    return params


def select(suite: str, workloads: list[str] | None = None, threads: tuple | None = None,
           scale: float = 1.0, overrides: dict | None = None, cpus: int | None = None,
           table: list[Entry] | None = None) -> list[Entry]:
    """The entries of one suite, filtered by workload, with the thread list, the work
    scale and per-workload flag overrides applied; axis values resolved."""
    table = SUITES if table is None else table
    if suite not in {e.suite for e in table}:
        raise SuiteError(f"unknown suite {suite!r}; known: {', '.join(sorted({e.suite for e in table}))}")
    entries = [e for e in table if e.suite == suite]
    if workloads:
        known = {e.workload for e in entries} | {e.series for e in entries}
        unknown = [w for w in workloads if w not in known]
        if unknown:
            raise SuiteError(f"suite {suite!r} has no workload or series {', '.join(unknown)}; "
                             f"it has: {', '.join(sorted({e.workload for e in entries}))}")
        entries = [e for e in entries if e.workload in workloads or e.series in workloads]
    if scale <= 0:
        raise SuiteError("--scale must be positive")
    out = []
    for e in entries:
        params = _scaled(e, scale)
        for (w, flag), v in (overrides or {}).items():
            if w in (e.workload, e.series):
                params[flag] = v
        values = resolve_values(e.values, cpus)
        if threads and e.is_threads_axis and e.kind not in ("threads-vs-processes",):
            values = tuple(threads)
        out.append(replace(e, params=params, values=values))
    return out


def with_metrics(entries: list[Entry], metrics: dict) -> list[Entry]:
    """--metric WORKLOAD|SERIES=FIGURE: compare those series by another figure. A rate
    (*_per_s, *_per_cpu_s) is higher-is-better, anything else lower-is-better."""
    out = []
    for e in entries:
        m = metrics.get(e.series) or metrics.get(e.workload)
        if m:
            hib = m.endswith(("_per_s", "_per_cpu_s")) or m.startswith("ops_per")
            e = replace(e, metric=m, higher_is_better=hib)
        out.append(e)
    return out


def argv_for(entry: Entry, variant: Variant, axis_value, binary: str | Path, subst: dict) -> list[str]:
    params = dict(entry.params)
    params.update(variant.params)
    if entry.axis is not None:
        params[entry.axis] = axis_value
    argv = [str(binary)]
    for flag, v in params.items():
        if v is None or v is False:
            continue
        if v is True:
            argv.append(flag)
        else:
            argv += [flag, str(v).format(**subst) if isinstance(v, str) else str(v)]
    return argv


def format_setup(entry: Entry, subst: dict) -> list[str]:
    return [str(a).format(**subst) for a in entry.setup]


# ---- programs: real programs under every allocator (harness/larder_bench/programs/) ----
from .programs import PROGRAMS  # noqa: E402  (imports Entry from here)
from .programs.mimalloc_bench import PROGRAMS as MIMALLOC_BENCH  # noqa: E402

SUITES += PROGRAMS + MIMALLOC_BENCH
