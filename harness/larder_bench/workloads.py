"""What the harness knows about each workload program (docs/benchmarks.md).

metric: the JSON figure a comparison uses; higher_is_better: whether it is a rate.
A program not listed here can still be run by a suite entry: its metric defaults to
the wall time measured by the harness.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workload:
    name: str
    metric: str
    higher_is_better: bool
    threads_flag: str
    description: str


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("malloc-test", "net_s", False, "--threads",
             "Lever & Boreham benchmark 1: N malloc/free pairs per worker minus a null loop (seed 000 §4.1)"),
    Workload("heap-leak", "minflt", False, "--threads",
             "Lever & Boreham benchmark 2: thread rounds replacing objects, minor faults (seed 000 §4.2)"),
    Workload("false-share", "elapsed_s", False, "--threads",
             "Lever & Boreham benchmark 3: writes to front and back of k-byte objects (seed 000 §4.3)"),
    Workload("active-false", "elapsed_s", False, "--threads",
             "Hoard active-false: allocate, write, free a small object per thread (seed 004 §5.3)"),
    Workload("passive-false", "elapsed_s", False, "--threads",
             "Hoard passive-false: as active-false after freeing objects handed out by main (seed 004 §5.3)"),
    Workload("threadtest", "elapsed_s", False, "--threads",
             "Hoard threadtest: allocate then free objects/t per thread, nothing shared (seed 004 §5.2)"),
    Workload("larson", "ops_per_s", True, "--threads",
             "Larson & Krishnan server simulation with bleeding across thread generations (seed 004 §5.2)"),
    Workload("shbench", "elapsed_s", False, "--threads",
             "SmartHeap stress test: random sizes freed in random order (seed 004 §5.2)"),
    Workload("free-contention", "frees_per_s", True, "--workers",
             "Producer/consumer pairs, every free remote (seed 002)"),
    Workload("blowup", "blowup", False, "--threads",
             "Round-robin producer-consumer: RSS growth over peak live bytes (seed 004 §2.2, §6)"),
    Workload("trace-replay", "time_s", False, "--threads",
             "Replay of a recorded trace, seed 003's driver (docs/traces.md)"),
    Workload("churn", "ops_per_cpu_s", True, "--threads",
             "A large live heap replaced at random, CPU per replacement (a cache, an in-memory database)"),
    Workload("server-mix", "rss_after_idle_kib", False, "--threads",
             "A server's day: mostly small blocks, 1% of 100 KiB-2 MiB, then idle: RSS over time and after idle"),
    Workload("idle-return", "rss_after_idle_kib", False, "--threads",
             "Build a heap, free it, idle with no allocator calls: RSS after 1-10 purge delays, per process shape"),
    Workload("remote-free", "cpu_ns_per_block", False, "--pairs",
             "Producers malloc, consumers on other cores free: CPU per malloc and per remote free, waiting excluded"),
    Workload("soak", "ops_per_cpu_s", True, "--threads",
             "A server's load for a while, every block checked (sparse writes, realloc, calloc, memalign, "
             "remote frees): a wrong byte or a false bad-free report fails the run"),
    Workload("drop-wait", "worst_call_us", False, "--workers",
             "One thread drops a large heap while others keep allocating: the worst call and the tail, "
             "while the allocator gives the dropped memory back"),
    Workload("tail-latency", "worst_call_us", False, "--workers",
             "Workers run a server's mix of calls (more threads than cores by default), every call timed: "
             "the worst call and the calls over 1, 10 and 100 ms"),
    Workload("thread-rest", "kib_per_thread", False, "--threads",
             "N threads hold blocks of K sizes and wait (a thread-per-connection server's idle connections): "
             "resident set per thread"),
    Workload("latency", "malloc_p99_ns", False, "--threads",
             "Per-operation latency percentiles of malloc, free and realloc, one thread (bench/latency)"),
]}

# Figures a workload's run reports that make the run invalid: a function of the figures that
# returns why, or None. Invalid runs are flagged, left out of medians and counted.
def _malloc_test_invalid(fig: dict) -> str | None:
    null, timed = fig.get("null_loop_s"), fig.get("elapsed_s")
    if isinstance(null, (int, float)) and isinstance(timed, (int, float)) and null >= timed:
        return (f"the null loop ({null * 1e3:.3g} ms) took as long as the timed loop ({timed * 1e3:.3g} ms): "
                f"net_s would be clamped to zero")
    return None


INVALID = {"malloc-test": _malloc_test_invalid}


def invalid_reason(workload: str, figures: dict | None) -> str | None:
    f = INVALID.get(workload)
    return f(figures or {}) if f else None

WALL = "wall_s"  # the harness's own measurement, available for every program


def info(name: str) -> Workload:
    """Registry entry, or a wall-time default for a program the registry does not know."""
    w = WORKLOADS.get(name)
    if w is not None:
        return w
    return Workload(name, WALL, False, "--threads", f"{name} (timed by the harness)")


def binary(build_dir: str | Path, name: str) -> Path:
    return Path(build_dir) / "bin" / name
