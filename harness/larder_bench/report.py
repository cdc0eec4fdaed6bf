"""The report: Markdown and HTML with tables per series, PNG plots, and a terminal summary.

Every number is a median over the interleaved repeats, shown with its min-max
spread, and every comparison is a ratio to the baseline allocator measured in the
same run (DESIGN §3).
"""
from __future__ import annotations

import html
import math
import statistics
from collections import Counter
from pathlib import Path

import shlex

from . import hoard, plots, thesis, verdict
from .heapleak import SEED_PREDICTOR
from .results import Series, group, heap_leak_predictors
from .stats import ratio, speedup

_UNITS = {"wall_s": "s", "user_s": "s", "sys_s": "s", "net_s": "s", "elapsed_s": "s"}


def fmt(v, metric: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "–"
    a = abs(v)
    if metric.endswith(("_kib", "_kb")):
        return f"{v / 1024:.1f} MiB" if a >= 1024 else f"{v:.0f} KiB"
    if metric.endswith("_ns"):
        return f"{v:.0f} ns" if a < 1000 else (f"{v / 1e3:.2f} µs" if a < 1e6 else f"{v / 1e6:.2f} ms")
    if (metric.endswith("_s") and not metric.endswith(("_per_s", "_per_cpu_s"))) or metric in _UNITS:
        if a < 1e-3:
            return f"{v * 1e6:.0f} µs"
        if a < 1:
            return f"{v * 1e3:.1f} ms"
        return f"{v:.3f} s"
    if a >= 1e6:
        return f"{v / 1e6:.2f} M"
    if a >= 1e4:
        return f"{v / 1e3:.1f} k"
    if a == int(a):
        return f"{int(v)}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def fmt_ratio(r) -> str:
    return "–" if r is None else f"×{r:.2f}"


def is_pct(metric: str) -> bool:
    """A percentage over something (fragmentation_pct = (heap/live − 1) × 100): compared by
    difference in percentage points, never as a ratio of two percentages."""
    return metric.endswith("_pct")


def compare_text(value, base, metric: str) -> str:
    """How one allocator's median compares with the baseline's: a ratio, or for a percentage
    the difference in percentage points."""
    if value is None or base is None:
        return "–"
    if is_pct(metric):
        return f"{value - base:+.1f} pp"
    return fmt_ratio(ratio(value, base))


def cell_text(summary, metric: str) -> str:
    if summary is None:
        return "–"
    if summary.n == 1:
        return fmt(summary.median, metric)
    return f"{fmt(summary.median, metric)} ({fmt(summary.min, metric)}–{fmt(summary.max, metric)})"


def case_name(s: Series, v, x) -> str:
    parts = []
    if v:
        parts.append(str(v))
    if s.entry.get("axis"):
        parts.append(f"{s.entry['axis'].lstrip('-')}={x}")
    return " ".join(parts) or "–"


# ---------------------------------------------------------------- document blocks

class Doc:
    def __init__(self):
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str):
        self.blocks.append(("h", level, text))

    def p(self, text: str):
        self.blocks.append(("p", text))

    def table(self, header: list, rows: list):
        self.blocks.append(("table", header, rows))

    def img(self, path: str, alt: str):
        self.blocks.append(("img", path, alt))

    def ul(self, items: list):
        self.blocks.append(("ul", items))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2] + "\n")
            elif b[0] == "p":
                out.append(b[1] + "\n")
            elif b[0] == "ul":
                out.append("\n".join(f"- {_md_cell(i)}" for i in b[1]) + "\n")
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1]})\n")
            elif b[0] == "table":
                hdr, rows = b[1], b[2]
                lines = ["| " + " | ".join(_md_cell(c) for c in hdr) + " |",
                         "|" + "|".join("---" for _ in hdr) + "|"]
                lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
                out.append("\n".join(lines) + "\n")
        return "\n".join(out)

    def html(self, title: str) -> str:
        out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
               "<style>body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
               "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #bbb;padding:2px 6px;"
               "text-align:right;font-size:90%}th{background:#eee}td:first-child{text-align:left}"
               "img{max-width:100%}.fail{color:#a00}</style></head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"<h{b[1]}>{html.escape(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                out.append(f"<p>{html.escape(b[1])}</p>")
            elif b[0] == "ul":
                out.append("<ul>" + "".join(f"<li>{html.escape(str(i))}</li>" for i in b[1]) + "</ul>")
            elif b[0] == "img":
                out.append(f"<p><img src='{html.escape(b[1])}' alt='{html.escape(b[2])}'></p>")
            elif b[0] == "table":
                out.append("<table><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in b[1]) + "</tr>")
                for r in b[2]:
                    out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
                out.append("</table>")
        out.append("</body></html>")
        return "\n".join(out)


def _md_cell(c) -> str:
    return str(c).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------- report sections

def _baseline(doc: dict, wanted: str | None) -> str | None:
    names = [a["name"] for a in doc.get("allocators", []) if a.get("found", True)]
    b = wanted or doc.get("baseline") or "glibc"
    return b if b in names else (names[0] if names else None)


def _metric_table(s: Series, base: str | None) -> tuple[list, list]:
    metric = s.entry["metric"]
    hdr = ["case"] + [f"{a}" for a in s.allocators]
    others = [a for a in s.allocators if a != base]
    if base in s.allocators and others:
        hdr += [f"{a} − {base} (pp)" if is_pct(metric) else f"{a} / {base}" for a in others]
    rows = []
    for v, x in s.cases:
        row = [case_name(s, v, x)]
        for a in s.allocators:
            c = s.cell(v, x, a)
            txt = cell_text(c.metric if c else None, metric)
            if c and c.failed and c.ok == 0 and not c.invalid:
                txt = "FAILED"
            elif c and c.failed:
                txt += f" [{len([r for r in c.failed if r.get('pass') == 'measure'])} failed]"
            if c and c.invalid:
                txt = ("INVALID" if c.ok == 0 else txt) + f" [{len(c.invalid)} invalid, left out]"
            row.append(txt)
        if base in s.allocators and others:
            bc = s.cell(v, x, base)
            bm = bc.metric.median if bc and bc.metric else None
            for a in others:
                c = s.cell(v, x, a)
                row.append(compare_text(c.metric.median if c and c.metric else None, bm, metric))
        rows.append(row)
    return hdr, rows


def _speedup_table(s: Series) -> tuple[list, list] | None:
    xs = [x for v, x in s.cases if v == s.cases[0][0]]
    if len(xs) < 2 or 1 not in xs:
        return None
    hib = s.entry["higher_is_better"]
    hdr = ["allocator"] + [f"{s.entry['axis'].lstrip('-')}={x}" for x in xs]
    rows = []
    for a in s.allocators:
        c1 = s.cell(s.cases[0][0], 1, a)
        b = c1.metric.median if c1 and c1.metric else None
        row = [a]
        for x in xs:
            c = s.cell(s.cases[0][0], x, a)
            row.append(fmt_ratio(speedup(b, c.metric.median if c and c.metric else None, hib)))
        rows.append(row)
    return hdr, rows


def _scaling_table(s: Series, cores: int) -> tuple[list, list] | None:
    """Per-thread work (Lever & Boreham series two/three): time(t)/time(1) against the
    ideal max(1, t/cores), the seed's "slope of m/n" (seed 000 §5.1)."""
    v0 = s.cases[0][0]
    xs = [x for v, x in s.cases if v == v0]
    base_x = min(xs)
    hdr = ["allocator"] + [f"{s.entry['axis'].lstrip('-')}={x}" for x in xs]
    rows = [[f"ideal on {cores} cores"] + [f"×{max(1.0, x / cores) / max(1.0, base_x / cores):.2f}" for x in xs]]
    for a in s.allocators:
        c1 = s.cell(v0, base_x, a)
        b = c1.metric.median if c1 and c1.metric else None
        row = [a]
        for x in xs:
            c = s.cell(v0, x, a)
            row.append(fmt_ratio(ratio(c.metric.median if c and c.metric else None, b)))
        rows.append(row)
    return hdr, rows


def _false_share_table(s: Series) -> tuple[list, list] | None:
    """Seed 000 §5.3: the penalty of sharing a line, as time(malloc'd) / time(aligned) per
    size, with the number of object pairs that shared a line."""
    labels = [v for v in dict.fromkeys(v for v, _ in s.cases)]
    if "malloc" not in labels or "aligned" not in labels:
        return None
    xs = [x for v, x in s.cases if v == "malloc"]
    hdr = ["allocator"] + [f"size={x}" for x in xs]
    rows = []
    for a in s.allocators:
        row = [f"{a}: malloc'd/aligned"]
        pairs = [f"{a}: shared-line pairs"]
        for x in xs:
            m, al = s.cell("malloc", x, a), s.cell("aligned", x, a)
            row.append(fmt_ratio(ratio(m.metric.median if m and m.metric else None,
                                       al.metric.median if al and al.metric else None)))
            sp = m.figures.get("shared_line_pairs") if m else None
            pairs.append(fmt(sp.median) if sp else "–")
        rows += [row, pairs]
    return hdr, rows


def false_share_contradictions(s: Series, limit: float = 1.2) -> str | None:
    """Seed 000 §5.3 found its largest penalty where small objects pack into one shared line
    (up to ×2 with two threads, ×4 with four). Where this run measures no penalty there
    (malloc'd/aligned below `limit` for objects under 32 bytes), the report says so."""
    xs = [x for v, x in s.cases if v == "malloc" and isinstance(x, (int, float)) and x < 32]
    found = []
    for x in xs:
        parts = []
        for a in s.allocators:
            m, al = s.cell("malloc", x, a), s.cell("aligned", x, a)
            r = ratio(m.metric.median if m and m.metric else None, al.metric.median if al and al.metric else None)
            if r is not None and r < limit:
                parts.append((a, r))
        if parts:
            found.append(f"size={x}: " + ", ".join(f"{a} ×{r:.2f}" for a, r in parts))
    if not found:
        return None
    t = s.entry["params"].get("--threads", "?")
    return (f"CONTRADICTS the source document: seed 000 §5.3 measured malloc'd objects smaller than a cache line "
            f"up to ×2 slower than aligned ones with two threads (×4 with four), because they share a line; on "
            f"this machine with {t} threads these show no such penalty (malloc'd/aligned below ×{limit}): "
            + "; ".join(found) + ". docs/results.md discusses why.")


def fmt_ns(v) -> str:
    if v is None:
        return "–"
    if v < 1000:
        return f"{v:.0f} ns"
    if v < 1e6:
        return f"{v / 1e3:.2f} µs"
    return f"{v / 1e6:.2f} ms"


LATENCY_OPS = ("malloc", "free", "realloc")
LATENCY_PCTS = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"), ("max", "max"))


def latency_table(s: Series) -> tuple[list, list] | None:
    """Per allocator and operation: p50, p99, p99.9, p99.99 and max (each the median over
    the repeats), with units."""
    v0 = s.cases[0][0]
    x = [xx for v, xx in s.cases if v == v0][-1]
    hdr = ["allocator", "operation", "calls"] + [label for _, label in LATENCY_PCTS] + ["mean"]
    rows = []
    for a in s.allocators:
        c = s.cell(v0, x, a)
        if not c or not c.figures:
            continue
        for op in LATENCY_OPS:
            if f"{op}_p50_ns" not in c.figures:
                continue
            g = lambda k: c.figures[k].median if k in c.figures else None  # noqa: E731
            rows.append([a, op, fmt(g(f"{op}_ops"))] + [fmt_ns(g(f"{op}_{k}_ns")) for k, _ in LATENCY_PCTS]
                        + [fmt_ns(g(f"{op}_mean_ns"))])
    return (hdr, rows) if rows else None


def tuning_tables(s: Series, profile_of: dict | None = None) -> list[tuple[str, list, list]]:
    """Seed 003 §6.7-6.8's tables in one per thread count: time (and its ratio to the profile's
    own allocator), peak heap, fragmentation and the allocator's own mmap, brk, munmap and
    madvise calls, one row per allocator or profile, with the thesis's figures beside the
    profiles it measured (thesis.py)."""
    profile_of = profile_of or {}
    out = []
    v0 = s.cases[0][0]
    for v, x in s.cases:
        if v != v0:
            continue
        hdr = ["allocator / profile", "time", "× own default", "peak heap RSS", "peak live", "fragmentation",
               "mmap (allocator's / all)", "brk (allocator's / all)", "munmap (allocator's / all)",
               "madvise (allocator's / all)", "thesis: time × default", "thesis: fragmentation",
               "thesis: mmap", "thesis: sbrk"]
        rows = []
        for a in s.allocators:
            c = s.cell(v, x, a)
            if c is None:
                continue
            f = c.figures
            g = lambda k: f[k] if k in f else None  # noqa: E731
            heap, live, frag, t = g("peak_heap_rss_bytes"), g("peak_live_bytes"), g("fragmentation_pct"), g("time_s")
            base = profile_of.get(a) or a
            bc = s.cell(v, x, base)
            bt = bc.figures.get("time_s") if bc else None
            rows.append([a, cell_text(t, "time_s") if t else "–",
                         fmt_ratio(ratio(t.median, bt.median)) if t and bt else "–",
                         f"{heap.median / 2**20:.2f} MiB" if heap else "–",
                         f"{live.median / 2**20:.2f} MiB" if live else "–",
                         f"{frag.median:.2f}%" if frag else "–",
                         _syscall_cell(c, "mmap"), _syscall_cell(c, "brk"), _syscall_cell(c, "munmap"),
                         _syscall_cell(c, "madvise")] + thesis.tuning_cells(a, x))
        out.append((f"{s.entry['axis'].lstrip('-')}={x}" if s.entry.get("axis") else "", hdr, rows))
    return out


def _heap_leak_table(s: Series, preds: dict) -> tuple[list, list] | None:
    """Seed 000 §5.2's reading of Figures 6-8: growth per round against the predictor's
    b·t, the offset above the lower bound, and the min-max spread relative to the minimum."""
    from .stats import linear_fit
    v0 = s.cases[0][0]
    xs = [x for v, x in s.cases if v == v0]
    t = int(s.entry["params"].get("--threads", 1))
    hdr = ["allocator", "faults/round measured", "faults/round predicted (b·t)",
           f"median − predictor at r={xs[-1]}", "spread (max−min)/min over rounds"]
    rows = []
    for a in s.allocators:
        pts = [(x, s.cell(v0, x, a)) for x in xs]
        pts = [(x, c.metric) for x, c in pts if c and c.metric]
        if len(pts) < 2:
            continue
        _, slope = linear_fit([float(x) for x, _ in pts], [m.median for _, m in pts])
        spreads = [(m.max - m.min) / m.min * 100 for _, m in pts if m.min > 0]
        p = preds.get(a)
        rows.append([a, f"{slope:.2f}", f"{p.b * t:.2f}" if p else "–",
                     f"{pts[-1][1].median - p(t, pts[-1][0]):+.0f}" if p else "–",
                     f"{min(spreads):.0f}%–{max(spreads):.0f}%" if spreads else "–"])
    return (hdr, rows) if rows else None


def _kib(summary) -> str:
    return f"{summary.median / 1024:.1f} MiB" if summary else "–"


def _syscall_cell(c, name: str) -> str:
    if not c.syscalls:
        return "–"
    if c.syscalls_alloc is not None:
        return f"{fmt(c.syscalls_alloc.get(name))} / {fmt(c.syscalls.get(name))}"
    return fmt(c.syscalls.get(name))


def _resource_table(s: Series) -> tuple[list, list]:
    hdr = ["case", "allocator", "wall", "user", "sys", "peak RSS", "mean RSS", "final RSS", "minor faults",
           "vol. cs", "invol. cs", "mmap", "munmap", "brk", "mremap", "madvise"]
    rows = []
    # The last axis value of each variant (where the system-call pass also ran).
    last = {}
    for v, x in s.cases:
        last[v] = x
    for v, x in last.items():
        for a in s.allocators:
            c = s.cell(v, x, a)
            if c is None:
                continue
            r = c.resources
            sc = c.syscalls or {}
            rows.append([case_name(s, v, x), a,
                         cell_text(r.get("wall_s"), "wall_s"), fmt(r["user_s"].median, "user_s") if "user_s" in r else "–",
                         fmt(r["sys_s"].median, "sys_s") if "sys_s" in r else "–",
                         _kib(r.get("maxrss_kb")), _kib(r.get("rss_mean_kb")), _kib(r.get("rss_final_kb")),
                         fmt(r["minflt"].median) if "minflt" in r else "–",
                         fmt(r["nvcsw"].median) if "nvcsw" in r else "–",
                         fmt(r["nivcsw"].median) if "nivcsw" in r else "–"]
                        + [_syscall_cell(c, k) for k in ("mmap", "munmap", "brk", "mremap", "madvise")])
    return hdr, rows


def _tvp_lines(s: Series) -> list[str]:
    out = []
    xs = {x for _, x in s.cases}
    for a in s.allocators:
        for x in sorted(xs):
            t = s.cell("threads", x, a)
            p = s.cell("processes", x, a)
            if t and p and t.metric and p.metric:
                out.append(f"{a}: {x} threads / {x} processes = {fmt_ratio(ratio(t.metric.median, p.metric.median))} "
                           f"({fmt(t.metric.median, s.entry['metric'])} vs {fmt(p.metric.median, s.entry['metric'])})")
    if out:
        out.append("seed 000 Tables 1-3: glibc 2.0 on 2 CPUs 26.05 s / 23.31 s = ×1.12; Solaris 2.6 ×9.0; "
                   "glibc 2.1 on 4 CPUs ×1.19")
    return out


def _case_label(r: dict) -> str:
    """A run's series, variant and axis value, as the Problems lines name them."""
    x = f" {r['axis'].lstrip('-')}={r['x']}" if r.get("axis") else ""
    v = f" {r['variant']}" if r.get("variant") else ""
    return f"{r['series']}{v}{x}"


def failures(doc: dict) -> list[str]:
    """One line per distinct problem (identical messages counted together)."""
    lines = [p["message"] for p in doc.get("problems", [])]
    cnt: Counter = Counter()
    order = []
    for r in doc["runs"]:
        if r.get("status") != "ok":
            key = f"{_case_label(r)} [{r['allocator']}]{' strace' if r.get('pass') == 'strace' else ''}: " \
                  f"{r['status']}: {r.get('message', '')}"
            if key not in cnt:
                order.append(key)
            cnt[key] += 1
    lines += [k + (f" (x{cnt[k]})" if cnt[k] > 1 else "") for k in order]
    from .results import run_invalid
    inv: Counter = Counter()
    inv_order = []
    for r in doc["runs"]:
        why = run_invalid(r)
        if why:
            key = f"{_case_label(r)} [{r['allocator']}]"
            if key not in inv:
                inv_order.append((key, why))
            inv[key] += 1
    lines += [f"{k}: INVALID, left out of the medians ({inv[k]} run{'s' if inv[k] > 1 else ''}): {why}"
              for k, why in inv_order]
    lines += slow_start_or_exit(doc)
    return lines


def slow_start_or_exit(doc: dict, least_s: float = 1.0) -> list[str]:
    """Allocators whose processes take much longer than the work they report (the workload's
    own elapsed_s): time spent starting or exiting, which a workload's figures do not show. One
    line per case where an allocator's median of (wall_s - elapsed_s) exceeds the smallest
    allocator's by more than least_s and is more than half the work: larder's exit waited 2 s
    for a purge thread that had never started (the quick suite's 1 s soak took 3.2 s), and no
    figure of the run showed it."""
    groups: dict = {}
    for r in doc["runs"]:
        f = r.get("figures") or {}
        if r.get("status") != "ok" or r.get("pass") != "measure" or r.get("wall_s") is None or \
                not isinstance(f.get("elapsed_s"), (int, float)):
            continue
        groups.setdefault(_case_label(r), {}).setdefault(r["allocator"], []).append((r["wall_s"], f["elapsed_s"]))
    lines = []
    for where, by_alloc in groups.items():
        med = {a: (statistics.median(w - e for w, e in v), statistics.median(e for _, e in v),
                   statistics.median(w for w, _ in v)) for a, v in by_alloc.items()}
        best = min(med, key=lambda a: med[a][0])
        for a, (over, work, wall) in med.items():
            if over - med[best][0] > least_s and over > 0.5 * work:
                lines.append(f"{where} [{a}]: SLOW START OR EXIT: the process took {wall:.2f} s for {work:.2f} s of "
                             f"work, {over:.2f} s outside it (median of {len(by_alloc[a])}), against {med[best][0]:.2f} s "
                             f"for {best}")
    return lines


def build(doc: dict, out_dir: Path, baseline: str | None = None) -> Doc:
    out_dir = Path(out_dir)
    series = group(doc)
    base = _baseline(doc, baseline)
    d = Doc()
    d.h(1, "larder-bench report")
    env = doc.get("environment", {})
    d.p(f"Suite {doc.get('suite', '?')}, started {doc.get('started', '?')}, finished {doc.get('finished', '?')}. "
        f"Command: {' '.join(doc.get('command', [])) or '?'}")
    if doc.get("interrupted"):
        d.p("INTERRUPTED: this report holds only the series that finished before the run was stopped.")
    plot_dir = out_dir / "plots"
    made = plots.make_all(series, base, plot_dir, heap_leak_predictors(series),
                          env.get("cores_usable") or env.get("cores"))
    overall = made.pop(None, [])
    vhdr, vrows = verdict.table(series, base)
    d.h(2, f"Verdict: each allocator against {base}")
    if len(vrows) > 1:
        d.table(vhdr, vrows)
        d.p(verdict.EXPLAIN)
    else:
        d.p(f"No allocator to compare with {base} in this run.")
    for p in overall:
        d.img(f"plots/{p.name}", p.stem)
    d.p(f"Every figure is a median over interleaved repeats (min–max in brackets); ratios are to the "
        f"baseline, {base}, measured in the same run. Load average at start/end: "
        f"{env.get('loadavg_start')} / {env.get('loadavg_end')} (a shared machine is noisy).")
    d.h(2, "Environment")
    d.table(["item", "value"], [[k, env.get(k)] for k in ("kernel", "cpu_model", "cores", "cores_usable", "glibc",
                                                           "git_commit", "build_dir")]
            + [[f"build: {k}", v] for k, v in (env.get("build_flags") or {}).items()])
    d.h(2, "Allocators")
    d.table(["name", "status", "path", "package", "version", "environment", "profile of"],
            [[a["name"], "found" if a.get("found", True) else f"MISSING: {a.get('missing')}", a.get("path") or "(none: glibc)",
              a.get("package") or "–", a.get("version") or "–",
              " ".join(f"{k}={v}" for k, v in (a.get("env") or {}).items()) or "–", a.get("profile_of") or "–"]
             for a in doc.get("allocators", [])])
    fl = failures(doc)
    d.h(2, f"Problems ({len(fl)})")
    if fl:
        d.p("Each failed or skipped run is recorded and the suite went on with the others; a failed run, and a "
            "command whose check output differed (mismatch), is left out of the medians.")
        d.ul(fl)
    else:
        d.p("None: every run exited 0 with its JSON result.")

    d.h(2, "Summary")
    d.p("Each series at its largest case: the baseline's median and every allocator's ratio to it; a "
        "percentage (fragmentation_pct = (heap/live − 1) × 100) is compared by its difference in percentage "
        "points (pp), never as a ratio of percentages.")
    hdr, rows = summary_table(series, base)
    d.table(hdr, rows)
    _hoard_section(d, series, plot_dir)

    preds = heap_leak_predictors(series)
    for s in series:
        e = s.entry
        d.h(2, f"{e['series']}: {e['title']}")
        if not s.cases:
            d.p("No runs (see Problems).")
            continue
        better = "higher is better" if e["higher_is_better"] else "lower is better"
        if e.get("command"):
            d.p(f"{_command_text(e)}. Figure {e['metric']} ({better}); ratios are allocator / {base}.")
        else:
            d.p(f"Workload {e['workload']}, flags {_flags(e)}; figure {e['metric']} ({better}); "
                f"ratios are allocator / {base}.")
        hdr, rows = _metric_table(s, base)
        d.table(hdr, rows)
        note = trace_classes_note(doc, e)
        if note:
            d.p(note)
        if (e.get("command") or {}).get("server"):
            st = server_table(s)
            if st:
                d.p("The server under each allocator: the client's time to send its load, the server's CPU (user+sys "
                    "from wait4), its peak RSS, its resident set when the load ended and after the idle phase "
                    "(/proc/PID/statm), medians.")
                d.table(*st)
        if (e.get("command") or {}).get("check"):
            n = sum(1 for r in doc["runs"] if r.get("series") == e["series"] and r.get("check"))
            bad = sum(1 for r in doc["runs"] if r.get("series") == e["series"] and r.get("status") == "mismatch")
            d.p(f"Check `{_show(e['command']['check'])}`: {n} outputs compared, "
                + (f"{bad} differed (MISMATCH, see Problems; left out of the medians)." if bad
                   else "all the same under every allocator."))
        if e["kind"] == "scaling" and e.get("axis") in ("--threads", "--workers") and len(s.cases) > 1:
            d.p("Time relative to the fewest threads. The work is per thread, so on a machine with "
                "c cores the ideal is flat up to c threads and then grows as t/c (seed 000 §5.1: "
                "\"a constant slope of m/n\").")
            d.table(*_scaling_table(s, int(env.get("cores_usable") or env.get("cores") or 1)))
        if e["kind"] == "false-share":
            ft = _false_share_table(s)
            if ft:
                d.p("Penalty of sharing: time with malloc'd objects over time with cache-line aligned ones "
                    "(seed 000 §5.3 found up to ×2 with two threads and ×4 with four).")
                d.table(*ft)
                note = false_share_contradictions(s)
                if note:
                    d.p(note)
        if e["kind"] == "latency":
            lt = latency_table(s)
            if lt:
                d.p("Latency of single calls, timed one by one with the CPU's timestamp counter (bench/latency); "
                    "each percentile is the median over the repeats. The CDF plot shows the whole distribution.")
                d.table(*lt)
        if e["kind"] == "tuning":
            d.p("Seed 003 §6.7-6.8 tables: each allocator and each tuning profile (an allocator plus environment "
                "settings, listed under Allocators) replaying the trace. System calls are the allocator's own / all, "
                "attributed by stack (see Resources). The thesis's columns are its Tables 6-18 to 6-25 for the same "
                "thread count (its LTE trace replayed 10,000 times: compare ratios and directions, not absolute "
                "times or counts; its counts include the whole program's calls).")
            pof = {a["name"]: a.get("profile_of") for a in doc.get("allocators", [])}
            for label, hdr, rows in tuning_tables(s, pof):
                d.p(f"{label}:")
                d.table(hdr, rows)
        if e["kind"] == "heap-leak" and preds:
            ht = _heap_leak_table(s, preds)
            if ht:
                d.table(*ht)
        if e["kind"] == "speedup" and e.get("axis") in ("--threads", "--workers"):
            st = _speedup_table(s)
            if st:
                d.p("Speedup: time(1)/time(t), or throughput(t)/throughput(1) for rates (DESIGN §3)."
                    + (" The work is per thread here, so the ideal is a flat time, not a speedup of t."
                       if e["kind"] == "scaling" else ""))
                d.table(*st)
        if e["kind"] == "threads-vs-processes":
            d.ul(_tvp_lines(s) or ["no complete threads/processes pair"])
        if e["kind"] == "heap-leak" and preds:
            t = int(e["params"].get("--threads", 1))
            items = []
            for a, pr in preds.items():
                items.append(f"{a}: recalibrated mpf_lower = {pr.a:.1f} + {pr.b:.2f}·t·r + {pr.c:.1f}·t "
                             f"(t={t}: {', '.join(f'r={x}: {pr(t, x):.0f}' for _, x in s.cases[:8])})")
            items.append(f"seed 000 §5.2 (1999 machine): {SEED_PREDICTOR.a} + {SEED_PREDICTOR.b}·t·r + "
                         f"{SEED_PREDICTOR.c}·t")
            d.ul(items)
        if e["kind"] == "heap-leak-calib" and preds:
            d.p("This series gives the predictor's constant a (seed 000 §5.2).")
        for p in made.get(e["series"], []):
            d.img(f"plots/{p.name}", p.stem)
        d.p("Resources at the largest case (medians). Peak RSS is ru_maxrss from wait4; mean and final RSS come "
            "from the launcher's samples of the program's resident set (time-weighted mean; the last sample). "
            "System calls from one run under strace -f -k: the allocator's calls / all calls (a call is the "
            "allocator's when a malloc-family function or the preloaded library is on its stack; the rest are the "
            "loader mapping libraries, thread stacks and the program's own mappings).")
        d.table(*_resource_table(s))
    return d


def _show(words) -> str:
    """A command line as written: words quoted only where a shell would need it (placeholders
    such as {port} are shown bare)."""
    import re
    return " ".join(w if re.fullmatch(r"[\w@%+=:,./{}-]+", w) else shlex.quote(w) for w in words)


def _command_text(e: dict) -> str:
    """How a command entry runs: its command line(s) as written, params, environment, folder."""
    c = e["command"]
    parts = []
    if c.get("server"):
        idle = c.get("idle")
        idle = e.get("params", {}).get(idle[1:-1], idle) if isinstance(idle, str) and idle.startswith("{") else idle
        parts.append(f"Server `{_show(c['server'])}` on {c.get('host', '127.0.0.1')} (a free port each run), "
                     f"driven by `{_show(c['argv'])}`, then idle {idle} s")
    else:
        parts.append(f"Command `{_show(c['argv'])}`")
    params = []
    for k, v in (e.get("params") or {}).items():
        params.append(f"{k} = {len(v)} items" if isinstance(v, (list, tuple)) and len(v) > 4 else f"{k} = {v}")
    if params:
        parts.append("with " + ", ".join(params))
    if c.get("env"):
        parts.append("environment " + " ".join(f"{k}={v}" for k, v in c["env"].items()))
    if c.get("cwd"):
        parts.append(f"in {c['cwd']}")
    return "; ".join(parts)


def server_table(s: Series) -> tuple[list, list] | None:
    hdr = ["allocator", "client time", "server CPU", "peak RSS", "RSS at end of load", "RSS after idle"]
    rows = []
    for v, x in s.cases:
        for a in s.allocators:
            c = s.cell(v, x, a)
            if c is None or c.ok == 0:
                continue
            f = c.figures
            rows.append([a, cell_text(f.get("client_wall_s"), "client_wall_s"),
                         cell_text(f.get("server_cpu_s"), "server_cpu_s"), _kib(c.resources.get("maxrss_kb")),
                         _kib(f.get("rss_end_of_load_kb")), _kib(f.get("rss_after_idle_kb"))])
    return (hdr, rows) if rows else None


def trace_classes_note(doc: dict, e: dict) -> str | None:
    """What the replayed trace's size classes alone cost it (runner._trace_classes; trace-frag), said
    beside a trace-replay series' fragmentation, so that an allocator's figure can be read against
    what segregation by size class makes any allocator pay on that trace."""
    if e.get("workload") != "trace-replay":
        return None
    figs = (doc.get("trace_classes") or {}).get((e.get("params") or {}).get("--trace"))
    if not figs or not figs.get("max_in_use_bytes"):
        return None
    pct = lambda ratio: f"+{(ratio - 1) * 100:.1f}%"  # noqa: E731
    rounding = figs["class_rounded_max_in_use_bytes"] / figs["max_in_use_bytes"]
    splits = sorted(((int(b), v) for b, v in (figs.get("coalesce_above") or {}).items()), reverse=True)
    coalesced = "; ".join(f"with every block above {b:,} B in one coalescing pool {pct(v)}" for b, v in splits)
    return (f"What this trace's size classes alone cost it (`trace-frag`, from the sizes only, the same for every "
            f"allocator; one thread, merged order): larder's classes round its peak of live bytes "
            f"({figs['max_in_use_bytes']:,} B) up by {pct(rounding)}; the sum of each class's own peak, what an "
            f"allocator needs that keeps each class's memory to that class, is {pct(figs['class_segregation'])}"
            + (f"; {coalesced}" if coalesced else "") + ". An allocator that moves empty superblocks or pages "
            "between classes can go below the second figure; one that coalesces free memory of all sizes (glibc) "
            "pays none of it (docs/harness.md, \"Size classes\").")


def _hoard_section(d: Doc, series: list[Series], plot_dir: Path) -> None:
    t4, t6 = hoard.table4(series), hoard.table6(series)
    if not t4 and not t6:
        return
    d.h(2, "Hoard's fragmentation (seed 004 §5.4 Table 4, §5.5 Table 6)")
    d.p(hoard.EXPLAIN)
    if t4:
        d.p("Table 4: fragmentation A/U and the programs' memory statistics (bytes; medians over the repeats, "
            "min–max in brackets), each workload followed by Hoard's published row.")
        d.table(*t4)
    if t6:
        d.p("Table 6: fragmentation A/U by empty fraction f (LARDER_EMPTY_FRACTION) and thread count, Hoard's "
            "14-processor figures below each workload.")
        d.table(*t6)
        p = plots.hoard_f_plot(series, plot_dir / "hoard_fragmentation_by_f.png")
        if p:
            d.img(f"plots/{p.name}", p.stem)


def _flags(e: dict) -> str:
    parts = []
    for k, v in e["params"].items():
        if v is True:
            parts.append(k)
        elif v not in (None, False):
            parts.append(f"{k} {v}")
    if e.get("axis"):
        parts.append(f"{e['axis']} {{{','.join(str(x) for x in e['values'])}}}")
    if len(e.get("variants", [])) > 1:
        parts.append("variants: " + ", ".join(v["label"] for v in e["variants"]))
    return " ".join(parts) or "(defaults)"


def summary_table(series: list[Series], base: str | None) -> tuple[list, list]:
    allocs: list[str] = []
    for s in series:
        for a in s.allocators:
            if a not in allocs:
                allocs.append(a)
    if base in allocs:
        allocs.remove(base)
        allocs.insert(0, base)
    hdr = ["series", "case", "figure", f"{base}"] + [f"{a}" for a in allocs if a != base]
    rows = []
    for s in series:
        if not s.cases:
            continue
        variants = list(dict.fromkeys(v for v, _ in s.cases))
        for v in (variants if s.entry["kind"] in ("sensitivity", "threads-vs-processes") else variants[:1]):
            xs = [x for vv, x in s.cases if vv == v]
            rows.append(_summary_row(s, v, xs[-1], base, allocs))
    return hdr, rows


def _summary_row(s: Series, v, x, base, allocs) -> list:
    metric = s.entry["metric"]
    bc = s.cell(v, x, base)
    bm = bc.metric.median if bc and bc.metric else None
    row = [s.name, case_name(s, v, x), metric + (" ↑" if s.entry["higher_is_better"] else " ↓"), fmt(bm, metric)]
    for a in allocs:
        if a == base:
            continue
        c = s.cell(v, x, a)
        if c is None:
            row.append("")
        elif c.metric is None:
            row.append("FAILED")
        elif bm is None:
            # No baseline in this series (e.g. larder's own tunables): the value itself.
            row.append(fmt(c.metric.median, metric))
        else:
            row.append(compare_text(c.metric.median, bm, metric))
    return row


def write(doc: dict, out_dir: Path, baseline: str | None = None) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    d = build(doc, out_dir, baseline)
    md = out_dir / "report.md"
    ht = out_dir / "report.html"
    md.write_text(d.markdown())
    ht.write_text(d.html("larder-bench report"))
    return md, ht


def _text_table(hdr: list, rows: list) -> list[str]:
    table = [hdr] + rows
    widths = [max(len(str(r[i])) if i < len(r) else 0 for r in table) for i in range(len(hdr))]
    lines = ["  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def terminal_summary(doc: dict, baseline: str | None = None) -> str:
    series = group(doc)
    base = _baseline(doc, baseline)
    lines = []
    vhdr, vrows = verdict.table(series, base)
    if len(vrows) > 1:
        lines.append(f"Verdict against {base} (geometric means of the ratios over every series; lower is better):")
        lines += _text_table(vhdr, vrows)
        lines.append("")
    hdr, rows = summary_table(series, base)
    lines += _text_table(hdr, rows)
    lines.append(f"(baseline column: {base}'s median; other columns: ratio to it, or for a percentage (_pct) the "
                 f"difference in percentage points; ↓ lower is better, ↑ higher is better)")
    fl = failures(doc)
    if fl:
        lines.append(f"{len(fl)} problem(s):")
        lines += [f"  {f}" for f in fl[:20]]
        if len(fl) > 20:
            lines.append(f"  ... and {len(fl) - 20} more in the report")
    return "\n".join(lines)
