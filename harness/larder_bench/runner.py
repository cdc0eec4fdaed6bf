"""Run suite entries over allocators and keep every raw run."""
from __future__ import annotations

import datetime as _dt
import os
import subprocess
from dataclasses import asdict
from pathlib import Path

import hashlib
import shlex

from . import commands, measure
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
    repo = commands.source_dir(build_dir)
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
                progress_stream=None, on_case_done=None, baseline: str | None = None) -> dict:
    """Run every case of every entry; return the results document (see docs/harness.md).
    baseline: whose output a command's check output is compared with (default: the most
    common output)."""
    build_dir = Path(build_dir)
    repo = commands.source_dir(build_dir)
    subst = {"build_dir": str(build_dir.resolve()), "repo": str(repo), "out_dir": str(Path(out_dir).resolve())}
    csubst = commands.base_subst(build_dir, out_dir)
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
        esubst = commands.entry_subst(e, csubst) if e.command is not None else None
        if not allocs:
            skip = f"{e.series}: none of its allocators ({', '.join(e.allocators or [])}) was found; skipped"
        elif e.command is not None:
            skip = _command_skip(e, esubst)
        elif not exe.is_file():
            skip = f"{e.series}: workload program {exe} not found (build it with `make build`); skipped"
        elif e.trace_frag:
            skip = _trace_frag_skip(build_dir, e)
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
        _trace_classes(doc, e, build_dir, subst, t_out)
        mpf = _mpf_flags(doc, e)
        checks: dict = {}
        for (variant, x), alloc, rep in interleave(cases, allocs, reps):
            if e.command is not None:
                rec = _run_command(e, alloc, variant.env, esubst, t_out, checks)
            else:
                argv = argv_for(e, variant, x, exe, subst) + mpf.get(alloc.name, [])
                env = alloc.child_env(extra=variant.env)
                if e.trace_frag:
                    rec = _run_recorded(argv, env, t_out, build_dir, Path(out_dir))
                else:
                    rec = measure.run_child(argv, env, t_out)
            rec.update(_run_keys(e, variant.label, x, alloc, rep, "measure", variant.env))
            why = invalid_reason(e.workload, rec.get("figures")) if rec["status"] == "ok" else None
            if why:
                rec["invalid"] = why
            doc["runs"].append(rec)
            label = f"{case_label(e, variant.label, x)} [{alloc.name}]"
            prog.step(label, rec["status"] if not why else "invalid", rec.get("message", "") or (why or ""),
                      rec.get("wall_s"))
        if checks:
            for r in compare_checks(checks, baseline):
                prog.note(f"  MISMATCH {r['series']} [{r['allocator']}] repeat {r['repeat']}: {r['message']}")
        smode = e.strace or strace_mode
        if smode != "none" and strace is not None:
            for variant, x in _strace_cases(e, cases, smode):
                for alloc in allocs:
                    if e.command is not None:
                        argv, env, run = _command_strace(e, alloc, variant.env, esubst, t_out * 4)
                    else:
                        argv = argv_for(e, variant, x, exe, subst)
                        env = alloc.child_env(extra=variant.env)
                        run = None
                    # strace slows a program down: allow it more time.
                    rec = measure.run_strace(argv, env, t_out * 4, strace, run=run)
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


# ---------------------------------------------------------------- any program (commands.py)

def _command_skip(e: Entry, subst: dict) -> str | None:
    miss = commands.missing_programs(e, subst)
    if miss:
        return commands.unknown_program_message(e, miss) + "; skipped"
    work = Path(subst["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    if e.command.cwd:
        cwd = Path(commands.expand([e.command.cwd], subst)[0])
        if not cwd.is_dir():
            if str(cwd.resolve()).startswith(subst["out_dir"] + os.sep):
                cwd.mkdir(parents=True, exist_ok=True)
            else:
                return f"{e.series}: working directory {cwd} does not exist; skipped"
    return None


def _cwd(e: Entry, subst: dict) -> str | None:
    return commands.expand([e.command.cwd], subst)[0] if e.command.cwd else None


def _client_env(c) -> dict:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(c.env)
    return env


def _run_command(e: Entry, alloc: Allocator, extra_env: dict, subst: dict, timeout: float, checks: dict) -> dict:
    """One measured run of a command entry (and its check), under one allocator."""
    c = e.command
    env = alloc.child_env(extra={**c.env, **extra_env})
    cwd = _cwd(e, subst)
    stdout = str(Path(subst["work_dir"]) / "stdout.txt")
    if c.is_server:
        port = measure.free_port(c.host)
        s = dict(subst, host=c.host, port=port)
        rec = measure.run_server(commands.expand(c.server, s), commands.expand(c.argv, s), env, _client_env(c),
                                 timeout, host=c.host, port=port, idle_s=commands.scaled_idle(e, s),
                                 ready_timeout=c.ready_timeout, stop_signal=c.stop_signal,
                                 stop_timeout=c.stop_timeout, cwd=cwd, client_stdout=stdout)
    else:
        s = subst
        rec = measure.run_child(commands.expand(c.argv, s), env, timeout, cwd=cwd, expect_json=False,
                                stdout_path=stdout)
    if c.figure is not None and rec["status"] == "ok":
        _read_figure(c.figure, rec, stdout)
    if c.check and rec["status"] == "ok":
        _run_check(e, rec, dict(s, stdout=stdout), cwd, timeout, checks)
    return rec


def _read_figure(figure, rec: dict, stdout: str) -> None:
    """The command's comparison figure from its output (commands.Figure); a run whose output
    lacks it is a failed run, as a workload's without its JSON line is."""
    try:
        text = Path(stdout).read_text(errors="replace")
    except OSError:
        text = ""
    v = figure.read(text)
    if v is None:
        rec.update(status="no-figure", message=f"exited 0 but its output has no {figure.name} "
                                               f"(pattern {figure.pattern!r}); last line: "
                                               f"{measure.last_line(text)[:120]!r}")
        return
    rec.setdefault("figures", {})[figure.name] = v


# Kept of each check's output to say where two outputs differ (the digest compares them whole).
_CHECK_KEEP = 1 << 20


def _run_check(e: Entry, rec: dict, subst: dict, cwd: str | None, timeout: float, checks: dict) -> None:
    c = e.command
    argv = commands.expand(c.check, subst)
    out = Path(subst["work_dir"]) / "check.txt"
    r = measure.run_child(argv, _client_env(c), timeout, rss_ms=0, cwd=cwd, expect_json=False,
                          stdout_path=str(out))
    if r["status"] != "ok":
        rec.update(status="check-failed", message=f"the check command {shlex.join(argv)} failed: {r['message']}")
        return
    data = out.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    rec["check"] = {"argv": argv, "sha256": digest, "bytes": len(data)}
    checks[id(rec)] = (rec, digest, data[:_CHECK_KEEP])


def _first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.decode("utf-8", "replace").splitlines(), b.decode("utf-8", "replace").splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "(no line)"
        y = lb[i] if i < len(lb) else "(no line)"
        if x != y:
            return f"line {i + 1}: {x[:80]!r} instead of {y[:80]!r}"
    return f"{len(a)} bytes instead of {len(b)}"


def compare_checks(checks: dict, baseline: str | None) -> list[dict]:
    """A command's check output must be the same under every allocator. The reference is the
    output the baseline's runs gave most often (else the most common one); every run whose
    output differs becomes status `mismatch`, is left out of the medians and is reported.
    Returns the runs marked."""
    items = list(checks.values())
    checks.clear()
    if not items:
        return []
    from collections import Counter
    base = [d for r, d, _ in items if r["allocator"] == baseline]
    ref = Counter(base or [d for _, d, _ in items]).most_common(1)[0][0]
    ref_data = next(data for r, d, data in items if d == ref)
    who = f"{baseline}'s" if base else "the most common output"
    marked = []
    for r, d, data in items:
        if d != ref:
            r.update(status="mismatch", message=f"check output differs from {who}: {_first_difference(data, ref_data)}")
            marked.append(r)
    return marked


def _command_strace(e: Entry, alloc: Allocator, extra_env: dict, subst: dict, timeout: float):
    """argv, env and how to run a command entry under strace (only the server of a server entry)."""
    c = e.command
    env = alloc.child_env(extra={**c.env, **extra_env})
    cwd = _cwd(e, subst)
    if not c.is_server:
        return (commands.expand(c.argv, subst), env,
                lambda cmd, env2: measure.run_child(cmd, env2, timeout, rss_ms=0, cwd=cwd, expect_json=False))
    port = measure.free_port(c.host)
    s = dict(subst, host=c.host, port=port)
    client = commands.expand(c.argv, s)

    def run(cmd, env2):
        return measure.run_server(cmd, client, env2, _client_env(c), timeout, host=c.host, port=port,
                                  idle_s=0.0, ready_timeout=c.ready_timeout * 4, stop_signal=c.stop_signal,
                                  stop_timeout=c.stop_timeout, cwd=cwd, rss_ms=0, depth=2)
    return commands.expand(c.server, s), env, run


# ---------------------------------------------------------------- what size classes cost a replayed trace

# Splits above which trace-frag's what-if puts every block in one coalescing pool (docs/harness.md).
TRACE_CLASS_SPLITS = (4096, 1024)


def _trace_classes(doc: dict, e: Entry, build_dir: Path, subst: dict, timeout: float) -> None:
    """For a trace-replay series, what the trace's size classes alone cost it (trace-frag, off-line,
    from the sizes only: the same for every allocator), once per trace, into doc["trace_classes"]
    under the entry's --trace value: the report says it beside the fragmentation table."""
    trace = e.params.get("--trace")
    if e.workload != "trace-replay" or not isinstance(trace, str) or trace in doc.get("trace_classes", {}):
        return
    exe = build_dir / "bin" / "trace-frag"
    if not exe.is_file():
        doc["problems"].append({"series": e.series, "allocator": None,
                                "message": f"{exe} not found: the trace's size-class figures are left out"})
        return
    path = trace.format(**subst)
    figs: dict = {}
    for split in (None,) + TRACE_CLASS_SPLITS:
        argv = [str(exe.resolve()), path] + (["--coalesce-above", str(split)] if split else [])
        r = measure.run_child(argv, dict(os.environ), timeout, rss_ms=0)
        if r["status"] != "ok":
            doc["problems"].append({"series": e.series, "allocator": None,
                                    "message": f"trace-frag on {path} failed: {r.get('message', '')}; "
                                               "the trace's size-class figures are left out"})
            return
        f = r["figures"]
        if split is None:
            figs = {"max_in_use_bytes": f["max_in_use_bytes"],
                    "class_rounded_max_in_use_bytes": f["class_rounded_max_in_use_bytes"],
                    "class_segregation": f["class_segregation"], "coalesce_above": {}}
        else:
            figs["coalesce_above"][str(split)] = f["class_segregation"]
    doc.setdefault("trace_classes", {})[trace] = figs


# ---------------------------------------------------------------- Hoard's fragmentation (seed 004 §5.4)

def _trace_frag_skip(build_dir: Path, e: Entry) -> str | None:
    need = [build_dir / "lib" / "liblarder-trace.so", build_dir / "bin" / "trace-frag"]
    miss = [str(p) for p in need if not p.is_file()]
    if miss:
        return f"{e.series}: {', '.join(miss)} not found (build them with `make build`); skipped"
    return None


def _run_recorded(argv: list[str], env: dict, timeout: float, build_dir: Path, out_dir: Path) -> dict:
    """A run recorded by liblarder-trace.so (preloaded in front of the allocator, so it sees the
    addresses the allocator returns), its trace processed off-line by trace-frag into Hoard's
    figures, which join the run's own as hoard_*. The trace is deleted afterwards."""
    env = dict(env)
    tracer = str((build_dir / "lib" / "liblarder-trace.so").resolve())
    env["LD_PRELOAD"] = tracer + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    tmp = out_dir / "traces-tmp"
    tmp.mkdir(exist_ok=True)
    trace = tmp / f"run-{os.getpid()}.ltr"
    env["LARDER_TRACE_FILE"] = str(trace)
    try:
        rec = measure.run_child(argv, env, timeout)
        if rec["status"] != "ok":
            return rec
        sb = env.get("LARDER_SUPERBLOCK_SIZE", "65536")
        fr = measure.run_child([str((build_dir / "bin" / "trace-frag").resolve()), str(trace), "--superblock", sb],
                               dict(os.environ), timeout * 4, rss_ms=0)
        if fr["status"] != "ok":
            rec.update(status="trace-failed", message=f"trace-frag on the recorded trace failed: {fr['message']}")
            return rec
        rec["figures"].update({f"hoard_{k}": v for k, v in fr["figures"].items()})
        rec["trace_frag_params"] = fr.get("reported_params", {})
        return rec
    finally:
        for p in tmp.glob(trace.name + "*"):
            p.unlink(missing_ok=True)
        try:
            tmp.rmdir()
        except OSError:
            pass
