"""What a trace holds: call counts (seed 003 Table 5-2), the size histogram (Figure 5-8),
live bytes over time (Figure 5-7) and which of the three patterns of §5.2 (ramp, peak,
plateau; after Wilson et al.) it follows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import fmt

# Histogram bins: up to 16 bytes, then powers of two to 1 MiB, then the rest.
BIN_EDGES = [16 << k for k in range(17)]          # 16 .. 1 MiB


def bin_label(i: int) -> str:
    if i == 0:
        return "1-16"
    if i < len(BIN_EDGES):
        return f"{BIN_EDGES[i - 1] + 1}-{BIN_EDGES[i]}"
    return f">{BIN_EDGES[-1]}"


def bin_of(size: int) -> int:
    for i, edge in enumerate(BIN_EDGES):
        if size <= edge:
            return i
    return len(BIN_EDGES)


@dataclass
class Stats:
    records: int = 0
    threads: int = 0
    duration_s: float = 0.0
    calls: dict = field(default_factory=dict)        # op name -> count
    bytes_requested: int = 0
    histogram: list = field(default_factory=lambda: [0] * (len(BIN_EDGES) + 1))
    peak_live: int = 0
    peak_live_t: float = 0.0
    end_live: int = 0
    unknown_frees: int = 0
    alloc_of_live: int = 0
    overlaps_resolved: int = 0
    null_frees: int = 0
    failed: int = 0
    series: list = field(default_factory=list)      # (t_s, live bytes), at most ~2000 points
    pattern: str = ""
    pattern_figures: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "records": self.records, "threads": self.threads, "duration_s": self.duration_s,
            "calls": self.calls, "bytes_requested": self.bytes_requested,
            "histogram": {bin_label(i): n for i, n in enumerate(self.histogram)},
            "peak_live_bytes": self.peak_live, "peak_live_at_s": self.peak_live_t,
            "end_live_bytes": self.end_live, "unknown_frees": self.unknown_frees,
            "alloc_of_live": self.alloc_of_live, "overlaps_resolved": self.overlaps_resolved,
            "null_frees": self.null_frees, "failed_calls": self.failed,
            "pattern": self.pattern, "pattern_figures": self.pattern_figures,
        }


def compute(trace: fmt.Trace, max_points: int = 2000) -> Stats:
    """One pass over the merged trace: live bytes are counted from requested sizes (§5.5)."""
    s = Stats()
    merged = trace.merged()
    s.records = len(merged)
    s.threads = len(trace.threads())
    s.calls = {name: 0 for name in fmt.OPS.values()}
    live_of: dict[int, tuple[int, int]] = {}    # address -> (size, allocating thread)
    # An address allocated again while live: both objects hold it, and its next free takes
    # the freeing thread's own newer one, else the older (trace-format.md, as trace_read.c).
    shadow: dict[int, tuple[int, int]] = {}
    live = 0
    points = []
    sec = trace.seconds()
    for ti, r in merged:
        s.calls[fmt.OPS[r.op]] += 1
        if r.op == fmt.FREE or r.op in fmt.REALLOCS:
            if r.addr_in:
                old = live_of.get(r.addr_in)
                if old is None:
                    s.unknown_frees += 1
                elif r.op in fmt.REALLOCS and not r.addr_out and r.size > 0:
                    pass                              # a failed realloc leaves the block alone
                elif r.addr_in in shadow:
                    older = shadow.pop(r.addr_in)
                    if old[1] == ti:
                        live_of[r.addr_in] = older    # the newer went; the older holds it again
                    else:
                        old = older
                    live -= old[0]
                    s.overlaps_resolved += 1
                else:
                    del live_of[r.addr_in]
                    live -= old[0]
            elif r.op == fmt.FREE:
                s.null_frees += 1
        if r.op != fmt.FREE:
            if r.addr_out:
                holder = live_of.get(r.addr_out)
                if holder is not None:
                    s.alloc_of_live += 1
                    shadow.setdefault(r.addr_out, holder)
                live_of[r.addr_out] = (r.size, ti)
                live += r.size
                s.bytes_requested += r.size
                s.histogram[bin_of(r.size)] += 1
            elif not (r.op in fmt.REALLOCS and r.size == 0):
                s.failed += 1
        if live > s.peak_live:
            s.peak_live = live
            s.peak_live_t = sec(r.t)
        points.append((sec(r.t), live))
    s.end_live = live
    s.duration_s = points[-1][0] if points else 0.0
    step = max(1, len(points) // max_points)
    s.series = points[::step]
    if points and s.series[-1] != points[-1]:
        s.series.append(points[-1])
    s.pattern, s.pattern_figures = classify(points)
    return s


def _resample(points: list, n: int) -> list[float]:
    """Live bytes at n evenly spaced times (the value in force at each time)."""
    if not points:
        return []
    t0, t1 = points[0][0], points[-1][0]
    if t1 <= t0:
        return [points[-1][1]] * n
    out, j = [], 0
    for k in range(n):
        t = t0 + (t1 - t0) * k / (n - 1)
        while j + 1 < len(points) and points[j + 1][0] <= t:
            j += 1
        out.append(points[j][1])
    return out


def phases(ys: list[float], peak: float, parts: int = 4) -> list[str]:
    """Names each quarter of the run: ramp (live rises by a fifth of the peak or more), fall
    (drops as much), plateau (stays within 15% of the peak), peaks (swings and comes back)."""
    out = []
    n = len(ys)
    for k in range(parts):
        seg = ys[k * n // parts:(k + 1) * n // parts] or ys[-1:]
        rise = (seg[-1] - seg[0]) / peak
        spread = (max(seg) - min(seg)) / peak
        out.append("ramp" if rise >= 0.2 else "fall" if rise <= -0.2 else "plateau" if spread <= 0.15 else "peaks")
    return out


def classify(points: list, n: int = 200) -> tuple[str, dict]:
    """Names the pattern of live bytes over time (seed 003 §5.2):
    ramp     - data accumulate: 90% of the peak is reached late and most of it is still live near
               the end (at 95% of the run, so that frees at exit do not hide a ramp);
    plateau  - memory is taken early (80% of the peak in the first quarter) and held most of the run;
    peaks    - several rises to above 60% of the peak, each falling back below 30%;
    peak     - one rise that is freed again: little live at the end, and the peak is brief;
    mixed    - none of these alone.
    The figures are returned so that a reader can judge the naming."""
    ys = _resample(points, n)
    peak = max(ys) if ys else 0
    if peak <= 0:
        return "empty", {}
    t90 = next(i for i, y in enumerate(ys) if y >= 0.9 * peak) / (n - 1)
    t80 = next(i for i, y in enumerate(ys) if y >= 0.8 * peak) / (n - 1)
    end = ys[int(0.95 * (n - 1))] / peak
    high = sum(1 for y in ys if y >= 0.75 * peak) / n
    cycles, armed = 0, True
    for y in ys:
        if armed and y >= 0.6 * peak:
            cycles += 1
            armed = False
        elif not armed and y < 0.3 * peak:
            armed = True
    figures = {"phases": phases(ys, peak),
               "time_to_80pct_of_peak": round(t80, 3), "time_to_90pct_of_peak": round(t90, 3),
               "live_at_95pct_over_peak": round(end, 3),
               "time_above_75pct": round(high, 3), "rises_above_60pct": cycles}
    if cycles >= 2:
        name = "peaks"
    elif t80 <= 0.25 and high >= 0.6:
        name = "plateau"
    elif t90 >= 0.5 and end >= 0.75:
        name = "ramp"
    elif end <= 0.3 and high <= 0.4:
        name = "peak"
    else:
        name = "mixed"
    return name, figures


def text_report(s: Stats, name: str) -> str:
    lines = [f"trace {name}: {s.records} calls from {s.threads} threads over {s.duration_s:.3f} s"]
    lines.append("")
    lines.append("calls (seed 003 Table 5-2):")
    for op, n in s.calls.items():
        if n:
            lines.append(f"  {op:<15} {n:>12}")
    if s.null_frees:
        lines.append(f"  (free(NULL): {s.null_frees})")
    if s.unknown_frees:
        lines.append(f"  frees of addresses never allocated in the trace: {s.unknown_frees}")
    if s.alloc_of_live:
        lines.append(f"  allocations of an address still live: {s.alloc_of_live} "
                     f"({s.overlaps_resolved} resolved when both objects were freed)")
    if s.failed:
        lines.append(f"  calls that returned NULL: {s.failed}")
    total = sum(s.histogram) or 1
    lines.append("")
    lines.append("request sizes (seed 003 Figure 5-8):")
    width = max(s.histogram) or 1
    for i, n in enumerate(s.histogram):
        if n:
            bar = "#" * max(1, round(40 * n / width))
            lines.append(f"  {bin_label(i):>16} B {n:>10} {100 * n / total:6.2f}%  {bar}")
    lines.append("")
    lines.append(f"live bytes: peak {s.peak_live} at {s.peak_live_t:.3f} s, {s.end_live} still live at the end")
    figs = ", ".join(f"{k} {v}" for k, v in s.pattern_figures.items())
    lines.append(f"pattern (seed 003 §5.2): {s.pattern} ({figs})")
    return "\n".join(lines)


def plot_live(s: Stats, path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.step([t for t, _ in s.series], [v / 1024 for _, v in s.series], where="post")
    ax.set_xlabel("time since start of recording (s)")
    ax.set_ylabel("live KiB (requested sizes)")
    ph = s.pattern_figures.get("phases", [])
    ax.set_title(f"{title}: {s.pattern}" + (f" ({' / '.join(ph)} by quarter)" if ph else ""))
    if s.series and ph:
        t0, t1 = s.series[0][0], s.series[-1][0]
        for k in range(1, len(ph)):
            ax.axvline(t0 + (t1 - t0) * k / len(ph), color="grey", lw=0.5, ls=":")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_histogram(s: Stats, path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    idx = [i for i, n in enumerate(s.histogram) if n]
    total = sum(s.histogram) or 1
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(range(len(idx)), [100 * s.histogram[i] / total for i in idx])
    ax.set_xticks(range(len(idx)))
    ax.set_xticklabels([bin_label(i) for i in idx], rotation=45, ha="right")
    ax.set_ylabel("% of allocations")
    ax.set_xlabel("request size (bytes)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
