"""The heap-leak (Lever & Boreham benchmark 2) lower-bound page-fault predictor.

Seed 000 §5.2 builds the predictor from single-thread runs:

    mpf_lower = a + b*t*r + c*t        (published: a = 14, b = 1.1, c = 127.6)

where t is the number of threads and r the number of rounds.  "A single thread,
single round run that allocates a one block array requires 14 page faults" gives
a; "each round requires an additional 1.1 pages per thread" is the slope of the
single-thread faults against rounds, b; and the pages for n objects per thread, c,
is what remains of the single-thread line at r = 0 once a is taken out.

The constants depend on the machine, the C library and the allocator (and the
whole-process fault count includes loading the program), so the harness
recalibrates them from this run's own single-thread measurements, per allocator,
exactly as the seed did for its machine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .stats import linear_fit

# Seed 000 §5.2, for reference next to the recalibrated values.
SEED_A, SEED_B, SEED_C = 14.0, 1.1, 127.6


@dataclass(frozen=True)
class Predictor:
    a: float
    b: float
    c: float

    def __call__(self, threads: float, rounds: float) -> float:
        return self.a + self.b * threads * rounds + self.c * threads


SEED_PREDICTOR = Predictor(SEED_A, SEED_B, SEED_C)


def calibrate(one_object_faults: float, faults_by_round: Mapping[int, float] | Sequence[tuple[int, float]]) -> Predictor:
    """Recalibrate (a, b, c) from single-thread runs.

    one_object_faults: minor faults of t=1, r=1 with a one-object array (gives a).
    faults_by_round: minor faults of t=1 runs with the full array, keyed by rounds r.
    A straight line through them gives b (its slope) and a + c (its value at r = 0).
    """
    items = sorted(faults_by_round.items() if isinstance(faults_by_round, Mapping) else faults_by_round)
    if len(items) < 2:
        raise ValueError("calibration needs single-thread runs at two or more round counts")
    if len({r for r, _ in items}) < 2:
        raise ValueError("calibration needs two or more distinct round counts")
    intercept, slope = linear_fit([float(r) for r, _ in items], [float(f) for _, f in items])
    a = float(one_object_faults)
    return Predictor(a=a, b=slope, c=intercept - a)
