"""Run suite entries over allocators and keep every raw run."""
from __future__ import annotations

import datetime as _dt
import os
import subprocess
from dataclasses import asdict
from pathlib import Path

from . import measure
from .allocators import Allocator
from .progress import Progress
from .stats import interleave
from .suites import Entry, argv_for, format_setup
from .workloads import binary, invalid_reason

SCHEMA = 1
DEFAULT_REPEATS = 5  # quick suite: five interleaved repeats give a usable median on a noisy machine


def case_label(entry: Entry, variant_label: str, axis_value) -> str:
    parts = [entry.series]
    if variant_label:
        parts.append(variant_label)
    if entry.axis is not None:
        parts.append(f"{entry.axis.lstrip('-')}={axis_value}")
    return " ".join(parts)


def entry_json(entry: Entry) -> dict:
    d = asdict(entry)
    d["variants"] = [asdict(v) for v in entry.variants]
    d["values"] = list(entry.values)
    d["metric"] = entry.metric_name
    d["higher_is_better"] = entry.higher_better
    d["setup"] = list(entry.setup)
    d["work"] = list(entry.work)
    d["allocators"] = list(entry.allocators) if entry.allocators else None
    return d


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _build_flags(build_dir: Path) -> dict:
    cache = build_dir / "CMakeCache.txt"
    keep = ("CMAKE_BUILD_TYPE", "CMAKE_C_COMPILER", "CMAKE_C_FLAGS", "CMAKE_C_FLAGS_RELEASE",
            "CMAKE_CXX_FLAGS", "CMAKE_CXX_FLAGS_RELEASE", "LARDER_STATS", "CMAKE_GENERATOR")
    out = {}
    try:
        for line in cache.read_text().splitlines():
            if "=" not in line or line.startswith(("#", "//")):
                continue
            key, val = line.split("=", 1)
            name = key.split(":", 1)[0]
            if name in keep or name.startswith("LARDER_"):
                out[name] = val
    except OSError:
        return {"error": f"{cache} not readable"}
    return out


def _git_commit(path: Path) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment(build_dir: Path) -> dict:
    from .allocators import glibc_version
    u = os.uname()
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    repo = build_dir.resolve().parent
    spawner, note = measure.launcher()
    return {
        "launcher": spawner, "launcher_note": note or None,
        "kernel": f"{u.sysname} {u.release}", "machine": u.machine, "hostname": u.nodename,
        "cpu_model": _cpu_model(), "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)),
        "glibc": glibc_version(), "loadavg_start": load,
        "build_dir": str(build_dir.resolve()), "build_flags": _build_flags(build_dir),
        "git_commit": _git_commit(repo),
    }


def new_results_dir(root: Path) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = root / stamp
    n = 1
    while out.exists():
        n += 1
        out = root / f"{stamp}-{n}"
    out.mkdir(parents=True)
    return out


def run_entries(entries: list[Entry], allocators: list[Allocator], build_dir: Path, out_dir: Path,
                repeats: int | None = None, timeout: float = 120.0, strace_mode: str = "last",
                progress_stream=None, on_case_done=None) -> dict:
    """Run every case of every entry; return the results document (see docs/harness.md)."""
    build_dir = Path(build_dir)
    repo = build_dir.resolve().parent
    subst = {"build_dir": str(build_dir.resolve()), "repo": str(repo), "out_dir": str(Path(out_dir).resolve())}
    found = [a for a in allocators if a.found]
    doc = {
        "schema": SCHEMA,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment(build_dir),
        "allocators": [a.to_json() for a in allocators],
        "entries": [entry_json(e) for e in entries],
        "problems": [],
        "runs": [],
    }
    if doc["environment"].get("launcher_note"):
        doc["problems"].append({"series": None, "allocator": None, "message": doc["environment"]["launcher_note"]})
    for a in allocators:
        if not a.found:
            doc["problems"].append({"series": None, "allocator": a.name, "message": f"allocator {a.name} skipped: {a.missing}"})

    # Plan: cases per entry, allocators per case, and the total for the progress bar.
    plan = []
    for e in entries:
        allocs = [a for a in found if e.allocators is None or a.name in e.allocators]
        cases = [(v, x) for v in e.variants for x in (e.values if e.axis is not None else (None,))]
        reps = repeats or e.repeats or DEFAULT_REPEATS
        plan.append((e, allocs, cases, reps))
    total = 0
    for e, allocs, cases, reps in plan:
        total += len(cases) * len(allocs) * reps
        smode = e.strace or strace_mode
        if smode != "none":
            total += len(_strace_cases(e, cases, smode)) * len(allocs)
    prog = Progress(total, progress_stream)
    strace = measure.strace_available()
    if strace is not None and any((e.strace or strace_mode) != "none" for e in entries) \
            and not measure.strace_stacks(strace):
        doc["problems"].append({"series": None, "allocator": None,
                                "message": "this strace cannot print stacks (-k): system calls are counted in "
                                           "total only, not split into the allocator's and the program's"})
    if strace_mode != "none" and strace is None:
        doc["problems"].append({"series": None, "allocator": None,
                                "message": "strace not found: no system-call counts (install it with `sudo apt-get install strace`)"})

    for e, allocs, cases, reps in plan:
        exe = binary(build_dir, e.workload)
        skip = None
        if not allocs:
            skip = f"{e.series}: none of its allocators ({', '.join(e.allocators or [])}) was found; skipped"
        elif not exe.is_file():
            skip = f"{e.series}: workload program {exe} not found (build it with `make build`); skipped"
        if skip is None and e.setup:
            cmd = format_setup(e, subst)
            rec = measure.run_child(cmd, dict(os.environ), e.timeout or timeout)
            if rec["status"] != "ok" and rec["status"] != "no-json":
                skip = f"{e.series}: setup command {' '.join(cmd)} failed: {rec['message']}; skipped"
        if skip is not None:
            doc["problems"].append({"series": e.series, "allocator": None, "message": skip})
            prog.note(f"  SKIPPED {skip}")
            smode = e.strace or strace_mode
            n = len(cases) * len(allocs) * reps + (len(_strace_cases(e, cases, smode)) * len(allocs)
                                                   if smode != "none" else 0)
            for _ in range(n):
                prog.done += 1
            continue
        t_out = e.timeout or timeout
        mpf = _mpf_flags(doc, e)
        for (variant, x), alloc, rep in interleave(cases, allocs, reps):
            argv = argv_for(e, variant, x, exe, subst) + mpf.get(alloc.name, [])
            env = alloc.child_env(extra=variant.env)
            rec = measure.run_child(argv, env, t_out)
            rec.update(_run_keys(e, variant.label, x, alloc, rep, "measure", variant.env))
            why = invalid_reason(e.workload, rec.get("figures")) if rec["status"] == "ok" else None
            if why:
                rec["invalid"] = why
            doc["runs"].append(rec)
            label = f"{case_label(e, variant.label, x)} [{alloc.name}]"
            prog.step(label, rec["status"] if not why else "invalid", rec.get("message", "") or (why or ""),
                      rec.get("wall_s"))
        smode = e.strace or strace_mode
        if smode != "none" and strace is not None:
            for variant, x in _strace_cases(e, cases, smode):
                for alloc in allocs:
                    argv = argv_for(e, variant, x, exe, subst)
                    env = alloc.child_env(extra=variant.env)
                    # strace slows a program down: allow it more time.
                    rec = measure.run_strace(argv, env, t_out * 4, strace)
                    rec.update(_run_keys(e, variant.label, x, alloc, 0, "strace", variant.env))
                    doc["runs"].append(rec)
                    label = f"{case_label(e, variant.label, x)} [{alloc.name}] strace"
                    prog.step(label, rec["status"], rec.get("message", ""), rec.get("wall_s"))
        if on_case_done is not None:
            on_case_done(doc)
    prog.finish()
    try:
        doc["environment"]["loadavg_end"] = os.getloadavg()
    except OSError:
        pass
    doc["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return doc


def _mpf_flags(doc: dict, e: Entry) -> dict:
    """Seed 000 §5.2: the predictor is recalibrated from the single-thread runs and the
    multithread runs are compared against it; hand the recalibrated constants (per
    allocator) to heap-leak so its own mpf_lower/mpf_excess figures use them."""
    if e.kind != "heap-leak" or int(e.params.get("--threads", 1)) == 1 or "--mpf-a" in e.params:
        return {}
    from .results import group, heap_leak_predictors
    preds = heap_leak_predictors(group(doc))
    return {a: ["--mpf-a", f"{p.a:.3f}", "--mpf-b", f"{p.b:.4f}", "--mpf-c", f"{p.c:.3f}"] for a, p in preds.items()}


def _strace_cases(e: Entry, cases: list, mode: str) -> list:
    if mode == "all":
        return cases
    if mode == "last":
        # The largest axis value of each variant: one traced run per allocator is enough
        # to count calls, and tracing every point would double a suite's time.
        last = {}
        for v, x in cases:
            last[v.label] = (v, x)
        return list(last.values())
    return []


def _run_keys(e: Entry, variant: str, x, alloc: Allocator, rep: int, pass_: str, env: dict) -> dict:
    return {"series": e.series, "workload": e.workload, "kind": e.kind, "variant": variant,
            "axis": e.axis, "x": x, "allocator": alloc.name, "repeat": rep, "pass": pass_,
            "extra_env": dict(env)}
