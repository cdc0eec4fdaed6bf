"""The verdict at a glance: per allocator, over every series, the geometric mean of its time and
of its peak RSS against the baseline, its wins, ties and losses, and its worst series.

Each series counts once, at its largest case (the first variant's last axis value, as in the
report's summary), so a series with many cases does not outvote one with a single case:
- time: the series' own figure when it is a time, or a rate inverted (time for the same work);
  otherwise the program's own elapsed time (`elapsed_s`, `time_s`) or the wall time from wait4;
- peak RSS: ru_maxrss from wait4 (for a server entry, the server's).
Left out: the heap-leak calibration (a one-object run) and the recorded runs of Hoard's
fragmentation tables (the recorder's cost is in their times). A series without the baseline
(larder's own tunables) has nothing to compare with.

Win, tie or loss, per series: a tie when the two medians are within TIE (5%) of each other or
when the two allocators' min-max ranges over the repeats overlap (the difference is within the
noise this machine showed); otherwise a win when the allocator is lower, a loss when higher.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .results import Series
from .stats import Summary

TIE = 0.05
SKIP_KINDS = ("heap-leak-calib", "hoard-frag", "hoard-frag-f")
_TIME_FIGURES = ("elapsed_s", "time_s")


def _is_time(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith(("_per_s", "_per_cpu_s"))


def _is_rate(metric: str) -> bool:
    return metric.endswith(("_per_s", "_per_cpu_s"))


@dataclass
class Point:
    """One allocator on one series: ratios to the baseline (lower is better for both)."""
    series: str
    case: str
    time_figure: str
    time: float | None = None
    rss: float | None = None
    time_cmp: int | None = None   # -1 win, 0 tie, 1 loss
    rss_cmp: int | None = None


@dataclass
class Verdict:
    allocator: str
    points: list = field(default_factory=list)

    def _vals(self, what: str) -> list[tuple[str, float]]:
        return [(p.series, getattr(p, what)) for p in self.points if getattr(p, what) is not None]

    def geomean(self, what: str) -> float | None:
        vals = [v for _, v in self._vals(what) if v > 0]
        return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None

    def count(self, what: str) -> int:
        return len(self._vals(what))

    def wtl(self, what: str) -> tuple[int, int, int]:
        cmps = [getattr(p, f"{what}_cmp") for p in self.points if getattr(p, f"{what}_cmp") is not None]
        return cmps.count(-1), cmps.count(0), cmps.count(1)

    def worst(self, what: str) -> tuple[str, float] | None:
        vals = self._vals(what)
        return max(vals, key=lambda sv: sv[1]) if vals else None


def compare(a: Summary, b: Summary, r: float) -> int:
    """-1 (a better), 0 (tie), 1 (a worse) for two summaries of a lower-is-better quantity whose
    medians' ratio a/b is r: medians within TIE of each other, or overlapping min-max ranges,
    are a tie."""
    if abs(r - 1.0) <= TIE or (a.min <= b.max and b.min <= a.max):
        return 0
    return -1 if r < 1.0 else 1


def _time_summary(s: Series, cell) -> tuple[str, Summary | None, bool]:
    """(figure, summary, inverted) that stands for the time of this series."""
    m = s.entry["metric"]
    if _is_time(m) and cell.metric is not None:
        return m, cell.metric, False
    if _is_rate(m) and cell.metric is not None:
        return m, cell.metric, True
    for f in _TIME_FIGURES:
        if f in cell.figures:
            return f, cell.figures[f], False
    return "wall_s", cell.resources.get("wall_s"), False


def _inv(s: Summary) -> Summary:
    return Summary(median=1.0 / s.median, min=1.0 / s.max, max=1.0 / s.min, n=s.n) \
        if s.median and s.min and s.max else s


def _case(s: Series) -> tuple | None:
    if not s.cases:
        return None
    v0 = s.cases[0][0]
    xs = [x for v, x in s.cases if v == v0]
    return v0, xs[-1]


def verdicts(series: list[Series], base: str | None) -> list[Verdict]:
    """One Verdict per allocator other than the baseline, in the order they first appear."""
    out: dict[str, Verdict] = {}
    for s in series:
        if s.entry.get("kind") in SKIP_KINDS or base not in s.allocators:
            continue
        vc = _case(s)
        if vc is None:
            continue
        v, x = vc
        bc = s.cell(v, x, base)
        if bc is None or bc.ok == 0:
            continue
        parts = [str(v)] if v else []
        if s.entry.get("axis"):
            parts.append(f"{s.entry['axis'].lstrip('-')}={x}")
        case = " ".join(parts)
        for a in s.allocators:
            if a == base:
                continue
            c = s.cell(v, x, a)
            if c is None or c.ok == 0:
                continue
            fig, bt, inverted = _time_summary(s, bc)
            fig_a, at, _ = _time_summary(s, c)
            p = Point(s.name, case, fig)
            if fig_a == fig and bt is not None and at is not None and bt.median and at.median:
                if inverted:
                    bt, at = _inv(bt), _inv(at)
                p.time = at.median / bt.median
                p.time_cmp = compare(at, bt, p.time)
            br, ar = bc.resources.get("maxrss_kb"), c.resources.get("maxrss_kb")
            if br is not None and ar is not None and br.median:
                p.rss = ar.median / br.median
                p.rss_cmp = compare(ar, br, p.rss)
            out.setdefault(a, Verdict(a)).points.append(p)
    return list(out.values())


def _ratio(v: float | None) -> str:
    return "–" if v is None else f"×{v:.2f}"


def table(series: list[Series], base: str | None) -> tuple[list, list]:
    """The verdict table: one row per allocator, the baseline first."""
    vs = verdicts(series, base)
    n = max((v.count("time") for v in vs), default=0)
    hdr = ["allocator", "series", "time (geomean)", "time: wins / ties / losses", "slowest series",
           "peak RSS (geomean)", "RSS: wins / ties / losses", "largest-RSS series"]
    rows = [[f"{base} (baseline)", str(n), "×1.00", "–", "–", "×1.00", "–", "–"]]
    for v in vs:
        wt, wr = v.worst("time"), v.worst("rss")
        rows.append([v.allocator, str(v.count("time")), _ratio(v.geomean("time")), "%d / %d / %d" % v.wtl("time"),
                     f"{wt[0]} {_ratio(wt[1])}" if wt else "–", _ratio(v.geomean("rss")),
                     "%d / %d / %d" % v.wtl("rss"), f"{wr[0]} {_ratio(wr[1])}" if wr else "–"])
    return hdr, rows


EXPLAIN = ("Each series counts once, at its largest case: time is the series' own time (a rate inverted: time "
           "for the same work; for a series compared by another figure, the program's elapsed or wall time), "
           "peak RSS is ru_maxrss from wait4; both as the allocator's median over the baseline's, "
           "lower is better. A tie: medians within 5% or min–max ranges that overlap. The worst series is the "
           "one with the largest ratio.")


# ---------------------------------------------------------------- the plot's axis

def clip_range(values: list[float], floor: float = 1.25) -> tuple[float, float]:
    """y limits (as ratios) for a plot of ratios on a log axis that shows the bulk of the values
    without letting one far-out value squash the rest: Tukey's fences (1.5 interquartile ranges
    beyond the quartiles) on log ratios, but never closer than a factor 2 to the quartiles (a
    handful of close values would make everything else an outlier), widened to hold
    [1/floor, floor] and every value inside the fences. Values outside are drawn at the edge and
    labelled (plots.verdict_plot)."""
    logs = sorted(math.log2(v) for v in values if v and v > 0)
    lim = math.log2(floor)
    if not logs:
        return 1 / floor, floor
    q1, q3 = _quantile(logs, 0.25), _quantile(logs, 0.75)
    iqr = q3 - q1
    lo_f, hi_f = q1 - max(1.5 * iqr, 1.0), q3 + max(1.5 * iqr, 1.0)
    inside = [x for x in logs if lo_f <= x <= hi_f] or [0.0]
    lo = min(min(inside), -lim)
    hi = max(max(inside), lim)
    pad = (hi - lo) * 0.08
    return 2 ** (lo - pad), 2 ** (hi + pad)


def _quantile(xs: list[float], q: float) -> float:
    if len(xs) == 1:
        return xs[0]
    pos = q * (len(xs) - 1)
    i = int(pos)
    frac = pos - i
    return xs[i] + (xs[min(i + 1, len(xs) - 1)] - xs[i]) * frac
