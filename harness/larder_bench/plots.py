"""PNG plots of a results set (matplotlib, no display needed)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .results import Series  # noqa: E402
from .stats import ratio, speedup  # noqa: E402

_STYLE = {}


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
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


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
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(s.entry["axis"].lstrip("-"))
    ax.set_ylabel("speedup over 1 thread")
    ax.set_title(f"{s.name}: speedup")
    ax.legend(fontsize=8)
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
    ax.set_xlabel(s.entry["axis"].lstrip("-") if s.entry.get("axis") else "")
    ax.set_ylabel(s.entry["metric"])
    ax.set_title(s.name)
    ax.legend(fontsize=7)
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
    ax.set_title(f"{s.name}: {t} thread(s); dashed: recalibrated lower bound", fontsize=10)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7)
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
    ax.set_ylabel(s.entry["metric"])
    ax.set_title(f"{s.name}: blowup (1 = ideal)")
    ax.legend(fontsize=7)
    return _save(fig, path)


def time_rss_plot(series: list[Series], base: str | None, path: Path) -> Path | None:
    """Every series at its largest case: figure and peak RSS as ratios to the baseline."""
    rows = []
    allocs: list[str] = []
    for s in series:
        if not s.cases or s.entry["kind"] == "sensitivity":
            continue
        v0 = s.cases[0][0]
        x = _xs(s, v0)[-1]
        bc = s.cell(v0, x, base)
        if bc is None or bc.metric is None:
            continue
        r_m, r_rss = {}, {}
        for a in s.allocators:
            c = s.cell(v0, x, a)
            if c is None or c.metric is None:
                continue
            m = ratio(c.metric.median, bc.metric.median)
            # Shown as "time relative to baseline": a rate is inverted so lower is better everywhere.
            if m is not None and s.entry["higher_is_better"] and m != 0:
                m = 1 / m
            r_m[a] = m
            if "maxrss_kb" in c.resources and "maxrss_kb" in bc.resources:
                r_rss[a] = ratio(c.resources["maxrss_kb"].median, bc.resources["maxrss_kb"].median)
            if a not in allocs:
                allocs.append(a)
        rows.append((s.name, r_m, r_rss))
    if not rows or not allocs:
        return None
    fig, axes = plt.subplots(2, 1, figsize=(max(7, len(rows) * 0.8), 7), sharex=True)
    width = 0.8 / len(allocs)
    for k, (ax, title) in enumerate(zip(axes, [f"time (or 1/throughput) relative to {base}",
                                              f"peak RSS relative to {base}"])):
        for i, a in enumerate(allocs):
            vals = [(r[1 + k].get(a) or 0) for r in rows]
            ax.bar([j + i * width for j in range(len(rows))], vals, width, label=a, color=_color(a))
        ax.axhline(1.0, color="grey", linestyle=":")
        ax.set_title(title)
        ax.set_yscale("log", base=2)
    axes[1].set_xticks([j + width * (len(allocs) - 1) / 2 for j in range(len(rows))])
    axes[1].set_xticklabels([r[0] for r in rows], rotation=40, ha="right", fontsize=8)
    axes[0].legend(fontsize=7, ncol=min(len(allocs), 6))
    return _save(fig, path)


def make_all(series: list[Series], base: str | None, plot_dir: Path, preds: dict, cores: int | None = None) -> dict:
    """Plots per series name; key None holds the overall ones."""
    plot_dir = Path(plot_dir)
    made: dict = {None: []}
    p = time_rss_plot(series, base, plot_dir / "time_rss_by_allocator.png")
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
        elif kind in ("scaling", "compare"):
            out.append(axis_plot(s, plot_dir / f"{name}.png", logx=s.entry.get("axis") == "--size"))
        made[s.name] = [p for p in out if p is not None]
    return made
