"""Summary statistics, ratios, speedups and the run order.

Kept free of I/O so that every rule the report relies on can be unit-tested
(DESIGN §3: a timing is a median of repeated runs with its spread, and a
comparison is a ratio measured in the same run of the harness).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    n: int

    @property
    def spread(self) -> float:
        """(max - min) / median: the relative width of the repeats."""
        if self.median == 0:
            return 0.0
        return (self.max - self.min) / abs(self.median)


def median(values: Sequence[float]) -> float:
    """The middle value; the mean of the two middle values for an even count."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("median of no values")
    mid = len(vals) // 2
    if len(vals) % 2:
        return vals[mid]
    return (vals[mid - 1] + vals[mid]) / 2.0


def summarize(values: Iterable[float]) -> Summary | None:
    """Median, min and max of the finite values, or None when there are none."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return None
    return Summary(median=median(vals), min=min(vals), max=max(vals), n=len(vals))


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing or the baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline


def speedup(base: float | None, value: float | None, higher_is_better: bool) -> float | None:
    """DESIGN §3: time(1)/time(t) for a time, throughput(t)/throughput(1) for a rate."""
    if higher_is_better:
        return ratio(value, base)
    return ratio(base, value)


def interleave(cases: Sequence, allocators: Sequence, repeats: int) -> list[tuple]:
    """Run order: for each case, repeat the allocators round-robin (A B C A B C ...),
    so that slow drift of a shared, noisy machine hits every allocator alike."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    order = []
    for case in cases:
        for rep in range(repeats):
            for alloc in allocators:
                order.append((case, alloc, rep))
    return order


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares line y = intercept + slope * x; returns (intercept, slope)."""
    if len(xs) != len(ys) or not xs:
        raise ValueError("linear_fit needs equally many x and y values, at least one")
    n = len(xs)
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        # One distinct x: no slope can be measured, the line is flat through the mean.
        return my, 0.0
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    return my - slope * mx, slope
