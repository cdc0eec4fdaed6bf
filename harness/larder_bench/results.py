"""results.json / results.csv, and grouping raw runs into per-case summaries."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from .heapleak import Predictor, calibrate
from .measure import SYSCALLS
from .stats import Summary, summarize
from .workloads import invalid_reason

RESOURCES = ("wall_s", "user_s", "sys_s", "maxrss_kb", "minflt", "nvcsw", "nivcsw",
             "rss_peak_kb", "rss_mean_kb", "rss_final_kb")
_BASE_COLS = ["series", "workload", "kind", "variant", "axis", "x", "allocator", "repeat", "pass", "status",
              "message", "exit_code", "signal"] + list(RESOURCES) + ["majflt", "invalid"]


class ResultsError(ValueError):
    pass


def save(doc: dict, out_dir: Path) -> None:
    out_dir = Path(out_dir)
    tmp = out_dir / "results.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False))
    tmp.replace(out_dir / "results.json")
    write_csv(doc, out_dir / "results.csv")


def load(path: Path) -> dict:
    """A results.json, or the folder that holds one."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        doc = json.loads(p.read_text())
    except OSError as e:
        raise ResultsError(f"cannot read {p}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ResultsError(f"{p} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not isinstance(doc.get("entries"), list):
        raise ResultsError(f"{p} is not a larder-bench results file (no runs/entries)")
    return doc


def write_csv(doc: dict, path: Path) -> None:
    runs = doc["runs"]
    fig_keys: list[str] = []
    for r in runs:
        for k in (r.get("figures") or {}):
            if k not in fig_keys:
                fig_keys.append(k)
    cols = _BASE_COLS + [f"syscall.{s}" for s in SYSCALLS] + [f"syscall_alloc.{s}" for s in SYSCALLS] \
        + [f"fig.{k}" for k in fig_keys] + ["argv"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in runs:
            row = [r.get(c, "") for c in _BASE_COLS]
            sc = r.get("syscalls") or {}
            row += [sc.get(s, "") for s in SYSCALLS]
            sa = r.get("syscalls_alloc") or {}
            row += [sa.get(s, "") for s in SYSCALLS]
            figs = r.get("figures") or {}
            for k in fig_keys:
                v = figs.get(k, "")
                row.append(json.dumps(v) if isinstance(v, (list, dict)) else v)
            row.append(" ".join(r.get("argv", [])))
            w.writerow(row)


def metric_value(run: dict, metric: str):
    """The program's own figure when it reports one (heap-leak's minflt is its own
    getrusage), else the harness's measurement of the same name (wall_s, maxrss_kb, ...),
    else a figure derived from both (ops_per_cpu_s = ops / (user + sys) from wait4)."""
    figs = run.get("figures") or {}
    v = figs.get(metric)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if metric in RESOURCES:
        return run.get(metric)
    if metric == "ops_per_cpu_s":
        ops, cpu = figs.get("ops"), (run.get("user_s") or 0) + (run.get("sys_s") or 0)
        if isinstance(ops, (int, float)) and cpu > 0:
            return ops / cpu
    return None


def run_invalid(run: dict) -> str | None:
    """Why a run that exited cleanly is not a valid measurement (stored with the run by the
    runner; recomputed for results written before that)."""
    if run.get("status") != "ok":
        return None
    return run.get("invalid") or invalid_reason(run.get("workload", ""), run.get("figures"))


@dataclass
class Cell:
    """All runs of one allocator on one case."""
    metric: Summary | None = None
    resources: dict = field(default_factory=dict)   # name -> Summary
    figures: dict = field(default_factory=dict)      # numeric figure -> Summary
    syscalls: dict | None = None
    syscalls_alloc: dict | None = None                # the allocator's share (strace -k attribution)
    ok: int = 0
    failed: list = field(default_factory=list)       # failing run records
    invalid: list = field(default_factory=list)      # runs that exited 0 but are not valid (left out)
    runs: list = field(default_factory=list)


@dataclass
class Series:
    entry: dict
    allocators: list
    cases: list            # [(variant, x)] in run order
    cells: dict            # (variant, x, allocator) -> Cell

    @property
    def name(self) -> str:
        return self.entry["series"]

    def cell(self, variant, x, alloc) -> Cell | None:
        return self.cells.get((variant, _key(x), alloc))


def _key(x):
    return json.dumps(x)


def group(doc: dict) -> list[Series]:
    """Series in entry order; each allocator's runs of each case summarised."""
    out = []
    alloc_order = [a["name"] for a in doc.get("allocators", [])]
    for e in doc["entries"]:
        runs = [r for r in doc["runs"] if r.get("series") == e["series"]]
        metric = e["metric"]
        cases: list = []
        allocs: list = []
        cells: dict = {}
        raw: dict = {}
        for r in runs:
            case = (r.get("variant", ""), r.get("x"))
            if case not in cases:
                cases.append(case)
            if r["allocator"] not in allocs:
                allocs.append(r["allocator"])
            raw.setdefault((case[0], _key(case[1]), r["allocator"]), []).append(r)
        allocs.sort(key=lambda n: alloc_order.index(n) if n in alloc_order else len(alloc_order))
        for k, rs in raw.items():
            c = Cell(runs=rs)
            meas = [r for r in rs if r.get("pass", "measure") == "measure"]
            good = [r for r in meas if r.get("status") == "ok" and not run_invalid(r)]
            c.invalid = [r for r in meas if run_invalid(r)]
            c.ok = len(good)
            c.failed = [r for r in rs if r.get("status") != "ok"]
            c.metric = summarize(metric_value(r, metric) for r in good)
            for res in RESOURCES:
                s = summarize(r.get(res) for r in good)
                if s:
                    c.resources[res] = s
            names = {k2 for r in good for k2, v in (r.get("figures") or {}).items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for n in names:
                s = summarize(metric_value(r, n) for r in good)
                if s:
                    c.figures[n] = s
            tr = [r for r in rs if r.get("pass") == "strace" and r.get("status") == "ok"]
            if tr:
                c.syscalls = tr[0].get("syscalls")
                c.syscalls_alloc = tr[0].get("syscalls_alloc")
            cells[k] = c
        out.append(Series(entry=e, allocators=allocs, cases=cases, cells=cells))
    return out


def heap_leak_predictors(series: list[Series]) -> dict:
    """Recalibrated predictor per allocator (seed 000 §5.2), from this run's own
    single-thread measurements: the one-object calibration series gives a, and the
    single-thread heap-leak series over rounds gives b and c."""
    calib = [s for s in series if s.entry["kind"] == "heap-leak-calib"]
    single = [s for s in series if s.entry["kind"] == "heap-leak"
              and int(s.entry["params"].get("--threads", 1)) == 1 and s.entry.get("axis") == "--rounds"]
    out: dict[str, Predictor] = {}
    if not calib or not single:
        return out
    for alloc in single[0].allocators:
        one = None
        for v, x in calib[0].cases:
            c = calib[0].cell(v, x, alloc)
            if c and c.metric:
                one = c.metric.median
        by_round = {}
        for v, x in single[0].cases:
            c = single[0].cell(v, x, alloc)
            if c and c.metric:
                by_round[int(x)] = c.metric.median
        if one is not None and len(by_round) >= 2:
            out[alloc] = calibrate(one, by_round)
    return out
