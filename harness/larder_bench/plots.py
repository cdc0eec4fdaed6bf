"""PNG plots of a results set (matplotlib, no display needed)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .results import Series  # noqa: E402
from .stats import ratio, speedup  # noqa: E402

_STYLE = {}
# Workloads whose memory over time tells a story (issue 10): every series of them gets an RSS plot.
RSS_STORY_WORKLOADS = ("server-mix", "trace-replay", "larson", "blowup", "churn")


def _color(alloc: str):
    if alloc not in _STYLE:
        _STYLE[alloc] = f"C{len(_STYLE) % 10}"
    return _STYLE[alloc]


def _xs(s: Series, variant) -> list:
    return [x for v, x in s.cases if v == variant]


def _variants(s: Series) -> list:
    out = []
    for v, _ in s.cases:
        if v not in out:
            out.append(v)
    return out


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def _legend(ax, **kw) -> None:
    """Outside the axes, on the right: a legend never covers data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7, **kw)


def _int_ticks(ax, xs) -> None:
    """Thread (and worker, round) axes: integer ticks at the measured values only."""
    vals = sorted({int(x) for x in xs if isinstance(x, (int, float))})
    if vals and len(vals) <= 16:
        ax.set_xticks(vals)
        ax.set_xticklabels([str(v) for v in vals])
    else:
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def metric_label(metric: str) -> str:
    """What a figure is, with its unit, for an axis."""
    special = {"minflt": "minor page faults", "blowup": "blowup (peak RSS / peak live; 1 = none)",
               "fragmentation_pct": "fragmentation: (peak heap / peak live − 1), %",
               "wall_s": "wall time (s)", "maxrss_kb": "peak RSS (KiB)"}
    if metric in special:
        return special[metric]
    if metric.endswith("_per_cpu_s"):
        return f"{metric[:-len('_per_cpu_s')]} per CPU-second (user+sys)"
    if metric.endswith("_per_s"):
        return f"{metric[:-len('_per_s')]} per second"
    if metric.endswith("_ns"):
        return f"{metric} (ns)"
    if metric.endswith("_s"):
        return f"{metric} (s)"
    if metric.endswith(("_kib", "_kb")):
        return f"{metric} (KiB)"
    if metric.endswith("_pct"):
        return f"{metric} (%)"
    return metric


def is_time_metric(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith(("_per_s", "_per_cpu_s"))


def is_rate_metric(metric: str) -> bool:
    return metric.endswith(("_per_s", "_per_cpu_s"))


def _errbar(ax, xs, cells, label, color, style="-o"):
    pts = [(x, c.metric) for x, c in zip(xs, cells) if c is not None and c.metric is not None]
    if not pts:
        return
    x = [p[0] for p in pts]
    y = [p[1].median for p in pts]
    lo = [p[1].median - p[1].min for p in pts]
    hi = [p[1].max - p[1].median for p in pts]
    ax.errorbar(x, y, yerr=[lo, hi], fmt=style, label=label, color=color, capsize=3, markersize=4)


def speedup_plot(s: Series, path: Path, cores: int | None = None) -> Path | None:
    v0 = _variants(s)[0]
    xs = _xs(s, v0)
    if len(xs) < 2 or 1 not in xs:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    hib = s.entry["higher_is_better"]
    for a in s.allocators:
        c1 = s.cell(v0, 1, a)
        b = c1.metric.median if c1 and c1.metric else None
        pts = []
        for x in xs:
            c = s.cell(v0, x, a)
            sp = speedup(b, c.metric.median if c and c.metric else None, hib)
            if sp is not None:
                pts.append((x, sp))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=a, color=_color(a), markersize=4)
    if cores:
        # More threads than cores cannot go faster than the cores allow.
        ax.plot(xs, [min(x, cores) for x in xs], ":", color="grey", label=f"ideal ({cores} cores)")
    else:
        ax.plot(xs, xs, ":", color="grey", label="ideal")
    _int_ticks(ax, xs)
    ax.set_xlabel(s.entry["axis"].lstrip("-"))
    ax.set_ylabel(f"speedup over 1 {s.entry['axis'].lstrip('-').rstrip('s')} (×)")
    ax.set_title(f"{s.name}: speedup, from the medians of {s.entry['metric']}", fontsize=10)
    _legend(ax)
    return _save(fig, path)


def axis_plot(s: Series, path: Path, logx: bool = False) -> Path | None:
    """The comparison figure against the swept flag, one line per allocator (and variant)."""
    variants = _variants(s)
    if all(len(_xs(s, v)) < 2 for v in variants):
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    styles = ["-o", "--s", ":^", "-.d"]
    for i, v in enumerate(variants):
        xs = _xs(s, v)
        for a in s.allocators:
            label = f"{a} {v}".strip()
            _errbar(ax, xs, [s.cell(v, x, a) for x in xs], label, _color(a), styles[i % len(styles)])
    if logx:
        ax.set_xscale("log", base=2)
    elif s.entry.get("axis") in ("--threads", "--workers", "--rounds", "-t"):
        _int_ticks(ax, [x for v in variants for x in _xs(s, v)])
    ax.set_xlabel(s.entry["axis"].lstrip("-") if s.entry.get("axis") else "")
    ax.set_ylabel(metric_label(s.entry["metric"]))
    better = "higher is better" if s.entry.get("higher_is_better") else "lower is better"
    ax.set_title(f"{s.name}: {s.entry['metric']} ({better}); median, bars min–max", fontsize=10)
    _legend(ax)
    return _save(fig, path)


def heap_leak_plot(s: Series, preds: dict, path: Path) -> Path | None:
    v0 = _variants(s)[0]
    xs = _xs(s, v0)
    if not xs:
        return None
    t = int(s.entry["params"].get("--threads", 1))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for a in s.allocators:
        _errbar(ax, xs, [s.cell(v0, x, a) for x in xs], a, _color(a))
        p = preds.get(a)
        if p is not None:
            ax.plot(xs, [p(t, x) for x in xs], "--", color=_color(a), alpha=0.6, label=f"{a} predictor")
    ax.set_xlabel("rounds")
    ax.set_ylabel("minor page faults (whole process)")
    ax.set_title(f"{s.name}: minor faults by round, {t} thread(s); dashed: recalibrated lower bound", fontsize=10)
    _int_ticks(ax, xs)
    _legend(ax)
    return _save(fig, path)


def blowup_plot(s: Series, path: Path) -> Path | None:
    v0 = _variants(s)[0]
    xs = _xs(s, v0)
    if not xs or not s.allocators:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    width = 0.8 / max(len(s.allocators), 1)
    for i, a in enumerate(s.allocators):
        vals, lo, hi = [], [], []
        for x in xs:
            c = s.cell(v0, x, a)
            m = c.metric if c else None
            vals.append(m.median if m else 0)
            lo.append(m.median - m.min if m else 0)
            hi.append(m.max - m.median if m else 0)
        pos = [j + i * width for j in range(len(xs))]
        ax.bar(pos, vals, width, yerr=[lo, hi], label=a, color=_color(a), capsize=2)
    ax.set_xticks([j + width * (len(s.allocators) - 1) / 2 for j in range(len(xs))])
    ax.set_xticklabels([f"{s.entry['axis'].lstrip('-')}={x}" for x in xs])
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_ylabel(metric_label(s.entry["metric"]))
    ax.set_title(f"{s.name}: blowup (1 = ideal); median, bars min–max", fontsize=10)
    _legend(ax)
    return _save(fig, path)


def verdict_plot(series: list[Series], base: str | None, path: Path) -> tuple[Path | None, list]:
    """The verdict's ratios per series (verdict.py): time and peak RSS of every allocator over the
    baseline, one column per series, a dashed line at each allocator's geometric mean. The axis
    holds the bulk of the values (verdict.clip_range); a value beyond it is drawn at the edge as
    a triangle and labelled with its ratio, rather than stretching the axis for everyone.
    Returns the path and the labelled outliers [(panel, allocator, series, ratio)]."""
    import math
    from . import verdict as V
    vs = V.verdicts(series, base)
    names: list[str] = []
    for v in vs:
        for p in v.points:
            if p.series not in names:
                names.append(p.series)
    if not vs or not names:
        return None, []
    fig, axes = plt.subplots(2, 1, figsize=(max(7.5, 0.55 * len(names) + 3), 7.5), sharex=True)
    outliers = []
    k = len(vs)
    for ax, what, title in ((axes[0], "time", f"time relative to {base} (time for the same work; lower is better)"),
                            (axes[1], "rss", f"peak RSS relative to {base} (lower is better)")):
        vals = [getattr(p, what) for v in vs for p in v.points if getattr(p, what)]
        lo, hi = V.clip_range(vals)
        ax.set_yscale("log", base=2)
        ax.set_ylim(lo, hi)
        ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        for i, v in enumerate(vs):
            off = (i - (k - 1) / 2) * min(0.6 / k, 0.2)
            xs, ys = [], []
            for p in v.points:
                r = getattr(p, what)
                if not r:
                    continue
                x = names.index(p.series) + off
                if lo <= r <= hi:
                    xs.append(x)
                    ys.append(r)
                    continue
                edge = hi if r > hi else lo
                ax.plot([x], [edge], "^" if r > hi else "v", color=_color(v.allocator), markersize=7,
                        clip_on=False)
                # The label runs into the plot from the edge, vertically, so neighbours never overlap.
                ax.annotate(f"×{r:.3g}", (x, edge), xytext=(0, -8 if r > hi else 8), textcoords="offset points",
                            fontsize=7, color=_color(v.allocator), rotation=90, ha="center",
                            va="top" if r > hi else "bottom", annotation_clip=False)
                outliers.append((what, v.allocator, p.series, r))
            ax.plot(xs, ys, "o", color=_color(v.allocator), markersize=5, label=v.allocator)
            g = v.geomean(what)
            if g:
                ax.axhline(g, color=_color(v.allocator), linestyle="--", linewidth=0.8, alpha=0.7)
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
        nice = [1 / 16, 1 / 8, 1 / 4, 1 / 3, 0.5, 2 / 3, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 3, 4, 8, 16, 32]
        ticks = [t for t in nice if lo <= t <= hi]
        if len(ticks) > 9:
            ticks = [t for t in ticks if t in (1 / 16, 1 / 8, 1 / 4, 0.5, 1.0, 2, 4, 8, 16, 32)]
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"×{y:.3g}"))
        ax.set_title(title + "; dashed: geometric mean; ▲▼ beyond the axis, labelled", fontsize=9)
        ax.set_ylabel(f"ratio to {base} (log scale)")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    axes[1].set_xticks(range(len(names)))
    axes[1].set_xticklabels(names, rotation=40, ha="right", fontsize=8)
    axes[1].set_xlim(-0.6, len(names) - 0.4)
    _legend(axes[0])
    if not math.isfinite(axes[0].get_ylim()[0]):
        plt.close(fig)
        return None, outliers
    return _save(fig, path), outliers


def _rep_run(cell):
    """The run whose figure is the median one (the plotted example of its case)."""
    runs = [r for r in cell.runs if r.get("pass", "measure") == "measure" and r.get("status") == "ok"
            and r.get("rss_series")]
    if not runs:
        return None
    runs.sort(key=lambda r: r.get("rss_peak_kb") or 0)
    return runs[len(runs) // 2]


def rss_time_plot(s: Series, path: Path) -> Path | None:
    """RSS over time of one run per allocator (the run of median peak) at each variant's
    largest case, sampled by the launcher."""
    variants = _variants(s)
    cases = [(v, _xs(s, v)[-1]) for v in variants]
    fig, axes = plt.subplots(len(cases), 1, figsize=(7.5, 3.2 * len(cases)), squeeze=False)
    drew = False
    for ax, (v, x) in zip(axes[:, 0], cases):
        for a in s.allocators:
            c = s.cell(v, x, a)
            r = _rep_run(c) if c else None
            if r is None:
                continue
            ts = [p[0] for p in r["rss_series"]]
            ks = [p[1] / 1024 for p in r["rss_series"]]
            ax.plot(ts, ks, "-", label=a, color=_color(a), linewidth=1.2)
            drew = True
        case = " ".join(p for p in (str(v) if v else "", f"{s.entry['axis'].lstrip('-')}={x}" if s.entry.get("axis") else "") if p)
        ax.set_title(f"{s.name} {case}: resident set over time (one run each, the median peak)", fontsize=10)
        ax.set_xlabel("time since start (s)")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        _legend(ax)
    if not drew:
        plt.close(fig)
        return None
    return _save(fig, path)


def latency_cdf_plot(s: Series, path: Path) -> Path | None:
    """Latency distribution per allocator and operation (the median-run's quantiles): x the
    latency on a log scale, y the share of calls at most that slow, on a "nines" scale."""
    import math
    v0 = s.cases[0][0]
    x = _xs(s, v0)[-1]
    ops = [op for op in ("malloc", "free", "realloc")
           if any((r.get("figures") or {}).get(f"{op}_cdf_ns") for a in s.allocators
                  for r in (s.cell(v0, x, a).runs if s.cell(v0, x, a) else []))]
    if not ops:
        return None
    fig, axes = plt.subplots(1, len(ops), figsize=(4.8 * len(ops) + 1.5, 4), squeeze=False)
    for i, (ax, op) in enumerate(zip(axes[0], ops)):
        for a in s.allocators:
            c = s.cell(v0, x, a)
            runs = [r for r in (c.runs if c else []) if r.get("status") == "ok" and (r.get("figures") or {}).get(f"{op}_cdf_ns")]
            if not runs:
                continue
            runs.sort(key=lambda r: r["figures"].get(f"{op}_p99_ns") or 0)
            pts = [(ns, q) for q, ns in runs[len(runs) // 2]["figures"][f"{op}_cdf_ns"] if ns > 0 and q < 1]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [-math.log10(1 - p[1]) for p in pts], "-o", markersize=2,
                    label=a, color=_color(a))
        ax.set_xscale("log")
        ticks = [0, 1, 2, 3, 4, 5, 6]
        ax.set_yticks(ticks)
        ax.set_yticklabels(["0", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"])
        ax.set_xlabel(f"{op} latency (ns, log scale)")
        if i == 0:
            ax.set_ylabel("share of calls at most this slow")
        ax.set_title(f"{s.name}: {op} latency CDF (median run)", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    fig.subplots_adjust(wspace=0.35)
    _legend(axes[0][-1])
    return _save(fig, path)


def hoard_f_plot(series: list[Series], path: Path) -> Path | None:
    """Seed 004 Table 6 as a plot: fragmentation A/U over the empty fraction f, one line per
    thread count (median, bars min-max), one panel per workload, Hoard's 14-CPU figures dashed."""
    from .hoard import TABLE6, table6_data
    fs_series = [s for s in series if s.entry.get("kind") == "hoard-frag-f" and s.cases]
    if not fs_series:
        return None
    fig, axes = plt.subplots(1, len(fs_series), figsize=(4.2 * len(fs_series) + 1.5, 3.8), squeeze=False)
    drew = False
    for ax, s in zip(axes[0], fs_series):
        data = table6_data(s)
        for i, x in enumerate(sorted(data)):
            pts = sorted(data[x].items())
            if not pts:
                continue
            ax.errorbar([f for f, _ in pts], [m.median for _, m in pts],
                        yerr=[[m.median - m.min for _, m in pts], [m.max - m.median for _, m in pts]],
                        fmt="-o", markersize=4, capsize=3, color=f"C{i % 10}", label=f"{x} thread{'s' if x != 1 else ''}")
            drew = True
        h = TABLE6.get(s.entry["workload"])
        if h:
            ax.plot(list(h), list(h.values()), "--s", color="grey", markersize=4, label="Hoard, 14 CPUs")
        ax.set_xscale("log", base=2)
        ax.set_xticks([0.125, 0.25, 0.5])
        ax.set_xticklabels(["1/8", "1/4", "1/2"])
        ax.set_xlabel("empty fraction f (LARDER_EMPTY_FRACTION)")
        ax.set_ylabel("fragmentation A/U (max allocated / max in use)")
        ax.set_ylim(bottom=1.0)
        ax.set_title(f"{s.entry['workload']}: A/U by f (lower is better)", fontsize=10)
    _legend(axes[0][-1])
    if not drew:
        plt.close(fig)
        return None
    fig.subplots_adjust(wspace=0.35)
    return _save(fig, path)


def make_all(series: list[Series], base: str | None, plot_dir: Path, preds: dict, cores: int | None = None) -> dict:
    """Plots per series name; key None holds the overall ones."""
    plot_dir = Path(plot_dir)
    made: dict = {None: []}
    p, _ = verdict_plot(series, base, plot_dir / "verdict.png")
    if p:
        made[None].append(p)
    for s in series:
        if not s.cases:
            continue
        kind = s.entry["kind"]
        name = s.name.replace("/", "_")
        out = []
        if kind == "speedup" and s.entry.get("axis") in ("--threads", "--workers"):
            out.append(speedup_plot(s, plot_dir / f"speedup_{name}.png", cores))
            out.append(axis_plot(s, plot_dir / f"{name}.png"))
        elif kind == "false-share":
            out.append(axis_plot(s, plot_dir / f"false_share_{name}.png"))
        elif kind == "heap-leak":
            out.append(heap_leak_plot(s, preds, plot_dir / f"heap_leak_{name}.png"))
        elif kind == "blowup":
            out.append(blowup_plot(s, plot_dir / f"blowup_{name}.png"))
        elif kind in ("scaling", "compare", "tuning"):
            out.append(axis_plot(s, plot_dir / f"{name}.png", logx=s.entry.get("axis") in ("--size", "--live")))
        elif kind == "latency":
            out.append(latency_cdf_plot(s, plot_dir / f"latency_cdf_{name}.png"))
        if s.entry.get("rss_plot") or s.entry.get("workload") in RSS_STORY_WORKLOADS:
            out.append(rss_time_plot(s, plot_dir / f"rss_time_{name}.png"))
        made[s.name] = [p for p in out if p is not None]
    return made
