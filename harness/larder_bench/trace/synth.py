"""Synthetic traces (seed 003 §5.1): sizes and lifetimes drawn from distributions, arranged
in the phases real programs show (§5.2: ramp, peak, plateau).

The thesis warns that random traces lose the regularities real programs have; they are for
exercising the replayer and allocators on controlled shapes, next to real recordings.

Each phase receives an equal share of the allocations:
  random   - every object lives for a lifetime drawn from the lifetime distribution;
  ramp     - objects accumulate: none is freed before the end of the trace;
  peak     - objects pile up through the phase and are all freed at its end;
  plateau  - the phase's objects are taken in its first tenth, then each new allocation
             replaces a live one at random, so live bytes stay level.
Time advances by 100 ns per call, and by 1 ns per free when a peak phase ends or the
program exits (those frees come in a burst). Allocations go round-robin to `threads` threads; an
object is freed by the thread that allocated it. Objects still live at the end are freed
unless keep_live is set.
"""
from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from . import fmt

PHASES = ("random", "ramp", "peak", "plateau")
DISTS = ("exponential", "pareto", "fixed")


@dataclass
class SynthParams:
    allocations: int = 100_000
    size_dist: str = "pareto"
    size_mean: float = 64.0         # exponential mean; pareto: the minimum xm is derived from it
    size_alpha: float = 1.5         # pareto shape (> 1 for a finite mean)
    size_max: int = 1 << 20
    life_dist: str = "exponential"
    life_mean: float = 1000.0       # in allocations
    life_alpha: float = 1.5
    phases: tuple = ("ramp", "peak", "plateau")
    threads: int = 1
    seed: int = 1
    keep_live: bool = False


def _draw(rng: random.Random, dist: str, mean: float, alpha: float) -> float:
    if dist == "fixed":
        return mean
    if dist == "exponential":
        return rng.expovariate(1.0 / mean)
    if dist == "pareto":
        xm = mean * (alpha - 1) / alpha if alpha > 1 else mean
        return xm * rng.paretovariate(alpha)
    raise ValueError(f"unknown distribution {dist!r}; known: {', '.join(DISTS)}")


def check(p: SynthParams) -> None:
    if p.allocations < 1:
        raise ValueError("allocations must be at least 1")
    if p.threads < 1 or p.threads > 1024:
        raise ValueError("threads must be 1..1024")
    for d in (p.size_dist, p.life_dist):
        if d not in DISTS:
            raise ValueError(f"unknown distribution {d!r}; known: {', '.join(DISTS)}")
    if p.size_mean <= 0 or p.life_mean <= 0:
        raise ValueError("means must be positive")
    if p.size_alpha <= 0 or p.life_alpha <= 0:
        raise ValueError("pareto shapes must be positive")
    if not p.phases:
        raise ValueError("at least one phase")
    for ph in p.phases:
        if ph not in PHASES:
            raise ValueError(f"unknown phase {ph!r}; known: {', '.join(PHASES)}")


def generate(p: SynthParams) -> fmt.Trace:
    check(p)
    rng = random.Random(p.seed)
    per_thread: list[list[fmt.Record]] = [[] for _ in range(p.threads)]
    t = 0
    next_id = 0
    live: dict[int, tuple[int, int]] = {}      # id -> (thread, size)
    deaths: list[tuple[int, int]] = []          # (death step, id) for timed lifetimes
    step = 0

    def addr(i: int) -> int:
        return 0x100000 + 64 * i

    def emit(thread: int, rec: fmt.Record) -> None:
        per_thread[thread].append(rec)

    def free(i: int, dt: int = 100) -> None:
        nonlocal t
        thread, _ = live.pop(i)
        t += dt
        emit(thread, fmt.Record(t, fmt.FREE, 0, 0, addr(i), 0))

    def alloc() -> int:
        nonlocal t, next_id
        i = next_id
        next_id += 1
        size = max(1, min(p.size_max, int(math.ceil(_draw(rng, p.size_dist, p.size_mean, p.size_alpha)))))
        thread = i % p.threads
        t += 100
        emit(thread, fmt.Record(t, fmt.OP_CODES["malloc"], size, 0, 0, addr(i)))
        live[i] = (thread, size)
        return i

    share = [p.allocations // len(p.phases)] * len(p.phases)
    share[-1] += p.allocations - sum(share)
    for phase, n in zip(p.phases, share):
        phase_ids: list[int] = []
        for k in range(n):
            step += 1
            while deaths and deaths[0][0] <= step:
                _, i = heapq.heappop(deaths)
                if i in live:
                    free(i)
            if phase == "plateau" and k >= max(1, n // 10) and phase_ids:
                j = rng.randrange(len(phase_ids))
                if phase_ids[j] in live:
                    free(phase_ids[j])
                phase_ids[j] = alloc()
                continue
            i = alloc()
            if phase == "random":
                life = max(1, int(_draw(rng, p.life_dist, p.life_mean, p.life_alpha)))
                heapq.heappush(deaths, (step + life, i))
            else:
                phase_ids.append(i)
        if phase == "peak":
            for i in phase_ids:
                if i in live:
                    free(i, 1)          # a peak falls at once: 1 ns per free
    if not p.keep_live:
        for i in list(live):
            free(i, 1)                  # the program's exit

    blocks = []
    for thread, recs in enumerate(per_thread):
        for at in range(0, len(recs), 4096):
            chunk = recs[at:at + 4096]
            blocks.append(fmt.Block(tid=1000 + thread, thread_seq=thread, records=chunk,
                                    clock_ticks=chunk[-1].t, clock_ns=chunk[-1].t))
    blocks.sort(key=lambda b: b.records[0].t)
    header = fmt.Header(pid=0, ppid=0, start_ns=0, proc_start=0, exec_seq=0, comm="synth")
    return fmt.Trace(header, blocks)
