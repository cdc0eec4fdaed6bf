"""`larder-bench trace replay`: a trace over several allocators, reported as the thesis does
(seed 003 chapter 6): per thread count, the peak sizes and fragmentation (Table 6-1), the
execution time (Table 6-2), the mmap/brk counts (Table 6-3) and live and heap memory over
time (Figure 6-1).

The runs go through the harness's own runner (repeats interleaved across allocators, a
strace pass for the system calls); one more run per allocator and thread count writes the
time series for the plots and is not timed. That run also counts malloc_usable_size
(trace-replay --usable), which splits fragmentation into the allocator's rounding of sizes
(internal) and everything else (external): a segregated-fit allocator cannot come closer to
glibc than its size classes allow.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from .. import measure, results, runner
from ..stats import summarize
from ..suites import Entry

# The thesis's figures (seed 003 Tables 6-1, 6-4, 6-8, 6-11, 6-14): fragmentation by method 4.
THESIS = {
    "ptmalloc2 (glibc)": {1: 6.46, 2: 6.47, 4: 6.49, 8: 6.62, 12: 6.61},
    "tcmalloc": {1: 11.01, 2: 11.49, 4: 10.86, 8: 10.52, 12: 10.38},
    "TLSF": {1: 9.29, 2: 9.29, 4: 9.30, 8: 9.29, 12: 9.30},
}

FRAG_KEYS = [("fragmentation_pct", "4: peak heap / peak live"),
             ("fragmentation_avg_pct", "1: average"),
             ("fragmentation_at_peak_live_pct", "2: at peak live"),
             ("fragmentation_at_peak_heap_pct", "3: at peak heap")]


def make_entry(trace: Path, threads: tuple, iterations: int, mode: str) -> Entry:
    params = {"--trace": str(trace.resolve()), "--iterations": iterations, "--mode": mode}
    axis = "--threads" if mode == "thesis" else None
    return Entry("trace", f"trace-replay {trace.name}", "trace-replay",
                 f"seed 003 chapter 6: replay of {trace.name}, {mode} mode, {iterations} iteration(s)",
                 params, axis=axis, values=threads if axis else (None,), kind="compare",
                 metric="fragmentation_pct", higher_is_better=False)


def timeseries(entry: Entry, allocs, build_dir: Path, out_dir: Path, timeout: float,
               usable: dict | None = None) -> dict:
    """One untimed run per (allocator, thread count) with --timeseries and --usable; returns
    the time series' paths, and puts each run's figures in `usable`."""
    exe = Path(build_dir) / "bin" / "trace-replay"
    out = {}
    for a in allocs:
        for x in entry.values:
            path = out_dir / f"timeseries-{a.name}-t{x or 'rec'}.csv"
            argv = [str(exe)] + [str(v) for kv in entry.params.items() for v in kv]
            if entry.axis:
                argv += [entry.axis, str(x)]
            argv += ["--timeseries", str(path), "--usable"]
            rec = measure.run_child(argv, a.child_env(), timeout)
            if rec["status"] == "ok" and path.is_file():
                out[(a.name, x)] = path
            if rec["status"] == "ok" and usable is not None and "fragmentation_internal_pct" in rec.get("figures", {}):
                usable[(a.name, x)] = rec["figures"]
    return out


def _median(runs: list[dict], key: str):
    vals = [r["figures"][key] for r in runs if key in r.get("figures", {})]
    return summarize(vals) if vals else None


def _kib(v) -> str:
    return f"{v / 1024:,.0f}"


def usable_table(usable: dict, x) -> list[str]:
    """Fragmentation split by malloc_usable_size, from the untimed time-series run."""
    rows = {a: f for (a, xx), f in usable.items() if xx == x}
    if not rows:
        return []
    lines = ["", "Where the fragmentation lies (the untimed time-series run, `trace-replay --usable`): "
             "internal is the allocator's rounding of the requested sizes (peak malloc_usable_size bytes "
             "over peak live), external the rest (peak heap over peak usable); (1 + internal) x "
             "(1 + external) = 1 + method 4:", "",
             "| | peak usable KiB | internal | external | method 4 |", "|---|---:|---:|---:|---:|"]
    for a, f in rows.items():
        lines.append(f"| {a} | {_kib(f['peak_usable_bytes'])} | {f['fragmentation_internal_pct']:.2f}% | "
                     f"{f.get('fragmentation_external_pct', 0):.2f}% | {f.get('fragmentation_pct', 0):.2f}% |")
    return lines


def tables(doc: dict, ts: dict, usable: dict | None = None) -> str:
    runs = [r for r in doc["runs"] if r.get("status") == "ok" and r.get("pass") == "measure"]
    straced = [r for r in doc["runs"] if r.get("status") == "ok" and r.get("pass") == "strace"]
    allocs = [a["name"] for a in doc["allocators"] if a["found"]]
    xs = sorted({r["x"] for r in runs}, key=lambda v: (v is None, v))
    lines = []
    for x in xs:
        label = f"{x} thread(s)" if x is not None else "recorded threads (faithful)"
        at = {a: [r for r in runs if r["x"] == x and r["allocator"] == a] for a in allocs}
        at = {a: rs for a, rs in at.items() if rs}
        if not at:
            continue
        live = max(_median(rs, "peak_live_bytes").median for rs in at.values())
        lines += [f"### {label}", "",
                  "Peak sizes and fragmentation (seed 003 Table 6-1 form; medians of the repeats; "
                  "fragmentation by the four definitions of §3.7.2, the fourth first):", "",
                  "Each row's own peak live bytes are given: with several threads the threads' peaks "
                  "overlap differently from run to run and allocator to allocator. (± half the range "
                  "over the repeats.)", "",
                  "| | peak KiB | live KiB | over live KiB | " + " | ".join(d for _, d in FRAG_KEYS) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(FRAG_KEYS),
                  f"| live memory (largest) | | {_kib(live)} | | " + " | " * (len(FRAG_KEYS) - 1) + " |"]
        for a, rs in at.items():
            heap = _median(rs, "peak_heap_rss_bytes")
            pl = _median(rs, "peak_live_bytes")
            fr = [_median(rs, k) for k, _ in FRAG_KEYS]
            cells = [f"{f.median:.2f}%" + (f" (±{(f.max - f.min) / 2:.2f})" if f.n > 1 and f.max != f.min else "")
                     if f else "-" for f in fr]
            lines.append(f"| {a} heap | {_kib(heap.median)} | {_kib(pl.median)} | {_kib(heap.median - pl.median)} | "
                         + " | ".join(cells) + " |")
        lines += ["", "Execution time (Table 6-2 form; CLOCK_MONOTONIC_RAW inside the replayer):", "",
                  "| | time s (median) | spread | difference to fastest s | % |", "|---|---:|---:|---:|---:|"]
        times = {a: _median(rs, "time_s") for a, rs in at.items()}
        best = min(t.median for t in times.values())
        for a, t in times.items():
            lines.append(f"| {a} | {t.median:.4f} | {t.spread * 100:.1f}% | {t.median - best:.4f} | "
                         f"{(t.median / best - 1) * 100:.1f}% |")
        sc = {a: next((r["syscalls"] for r in straced if r["x"] == x and r["allocator"] == a and "syscalls" in r), None)
              for a in at}
        sca = {a: next((r.get("syscalls_alloc") for r in straced if r["x"] == x and r["allocator"] == a
                        and "syscalls" in r), None) for a in at}
        if any(sc.values()):
            split = any(v is not None for v in sca.values())
            lines += ["", "System calls of one run (Table 6-3 form; " + (
                      "strace -f -k: the allocator's calls (a malloc-family function or the preloaded library on the "
                      "stack) / all calls, which include the loader, the replayer's tables and thread stacks):"
                      if split else "strace -f -c, whole process including loading the trace):"), "",
                      "| | mmap | munmap | brk | madvise | mremap |", "|---|---:|---:|---:|---:|---:|"]
            for a, c in sc.items():
                if c:
                    al = sca.get(a)
                    cell = (lambda k: f"{al.get(k, 0)} / {c.get(k, 0)}") if al is not None else (lambda k: f"{c.get(k, 0)}")
                    lines.append(f"| {a} | {cell('mmap')} | {cell('munmap')} | {cell('brk')} | "
                                 f"{cell('madvise')} | {cell('mremap')} |")
        lines += usable_table(usable or {}, x)
        plot = plot_timeseries(ts, x, doc.get("_out_dir"))
        if plot:
            lines += ["", f"![live and heap memory over time, {label}]({plot.name})"]
        lines.append("")
    lines += ["Thesis figures for comparison (seed 003, fragmentation by method 4, real LTE trace):", "",
              "| allocator | 1 thread | 2 threads | 4 threads | 8 threads | 12 threads |", "|---|---:|---:|---:|---:|---:|"]
    for a, f in THESIS.items():
        lines.append(f"| {a} | " + " | ".join(f"{f[t]:.2f}%" for t in (1, 2, 4, 8, 12)) + " |")
    return "\n".join(lines) + "\n"


def plot_timeseries(ts: dict, x, out_dir) -> Path | None:
    series = {a: p for (a, xx), p in ts.items() if xx == x}
    if not series or out_dir is None:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    live_drawn = False
    for a, path in series.items():
        with open(path) as f:
            rows = list(csv.DictReader(f))
        ops = [int(r["ops"]) for r in rows]
        ax.plot(ops, [int(r["heap_rss_bytes"]) / 1024 for r in rows], label=f"{a} heap RSS", lw=1)
        if not live_drawn:
            ax.plot(ops, [int(r["live_bytes"]) / 1024 for r in rows], "k--", label="live", lw=1.2)
            live_drawn = True
    ax.set_xlabel("calls replayed by the busiest replaying thread")
    ax.set_ylabel("KiB")
    ax.set_title(f"Memory usage over live memory ({x or 'faithful'} thread(s)), seed 003 Figure 6-1 form")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    out = Path(out_dir) / f"trace-memory-t{x or 'rec'}.png"
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out


def run(trace: Path, allocs, build_dir: Path, out_dir: Path, threads: tuple, iterations: int,
        mode: str, repeats: int, timeout: float, strace_mode: str, plots: bool = True) -> tuple[dict, Path]:
    entry = make_entry(trace, threads, iterations, mode)
    doc = runner.run_entries([entry], allocs, build_dir, out_dir, repeats=repeats, timeout=timeout,
                             strace_mode=strace_mode)
    found = [a for a in allocs if a.found]
    usable: dict = {}
    ts = timeseries(entry, found, build_dir, out_dir, timeout, usable) if plots else {}
    doc["usable"] = [{"allocator": a, "x": x, "figures": f} for (a, x), f in usable.items()]
    doc["suite"] = "trace"
    doc["command"] = ["larder-bench", "trace", "replay", str(trace)]
    results.save(doc, out_dir)
    doc["_out_dir"] = str(out_dir)
    md = out_dir / "trace-report.md"
    md.write_text(f"# Replay of {trace.name}\n\n" + tables(doc, ts, usable))
    doc.pop("_out_dir")
    return doc, md


def figures_json(doc: dict) -> str:
    """Medians per (allocator, threads): the figures a results page quotes."""
    runs = [r for r in doc["runs"] if r.get("status") == "ok" and r.get("pass") == "measure"]
    out = {}
    for r in runs:
        out.setdefault(f"{r['allocator']} t={r['x']}", []).append(r["figures"])
    med = {}
    for k, figs in out.items():
        med[k] = {key: summarize([f[key] for f in figs]).median
                  for key in ("fragmentation_pct", "peak_heap_rss_bytes", "peak_live_bytes", "time_s")}
    return json.dumps(med, indent=1)


def env_for_record(recorder: Path, out: str, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = str(recorder)
    env["LARDER_TRACE_FILE"] = out
    return env
