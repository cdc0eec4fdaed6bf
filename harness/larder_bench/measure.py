"""Run one workload process and measure it from the outside.

Every run is a child reaped with os.wait4, whose rusage gives what every program
shares (DESIGN §2): wall, user, sys, peak RSS, minor faults, context switches.
The program's own figures come from the JSON object on its last stdout line.
A crash, a non-zero exit, missing JSON or a timeout becomes a status and a message;
it never raises.
"""
from __future__ import annotations

import json
import os
import hashlib
import shutil
import subprocess
import signal
import tempfile
import threading
import time
from pathlib import Path

SYSCALLS = ("mmap", "munmap", "brk", "mremap", "madvise")
_TAIL = 1500


def _tail(data: bytes, n: int = _TAIL) -> str:
    text = data.decode("utf-8", "replace")
    return text[-n:]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _spawn(argv: list[str], env: dict, out_fd: int, err_fd: int, report_fd: int | None) -> int:
    devnull = os.open(os.devnull, os.O_RDONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, out_fd, 1),
               (os.POSIX_SPAWN_DUP2, err_fd, 2)]
    if report_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, report_fd, 3))
    try:
        # setsid: its own process group, so a timeout kills forked workers too.
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
    finally:
        os.close(devnull)


_LAUNCHER: list = []  # [path or None, note]


def launcher() -> tuple[str | None, str]:
    """The compiled larder-spawn (see spawn.c), built once per source version with cc.

    Without it (no C compiler) runs are spawned directly and peak RSS includes the
    harness's own, which the note says."""
    if _LAUNCHER:
        return _LAUNCHER[0], _LAUNCHER[1]
    src = Path(__file__).with_name("spawn.c")
    path, note = None, ""
    try:
        digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "larder-bench"
        try:
            cache.mkdir(parents=True, exist_ok=True)
            if not os.access(cache, os.W_OK):
                raise PermissionError(str(cache))
        except OSError:
            # A read-only home (some CI): a private folder under the temp dir instead.
            cache = Path(tempfile.gettempdir()) / f"larder-bench-{os.getuid()}"
            cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        exe = cache / f"larder-spawn-{digest}"
        if not exe.is_file():
            cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
            if cc is None:
                raise OSError("no C compiler (cc) found")
            tmp = cache / f".larder-spawn-{digest}.{os.getpid()}"
            r = subprocess.run([cc, "-O2", "-pthread", "-o", str(tmp), str(src)], capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                raise OSError(f"cc failed: {r.stderr.strip()[:300]}")
            tmp.replace(exe)
        path = str(exe)
    except (OSError, subprocess.TimeoutExpired) as e:
        note = (f"larder-spawn could not be built ({e}); runs are spawned directly from the harness, "
                f"so peak RSS includes the harness's own (Linux keeps ru_maxrss across exec)")
    _LAUNCHER[:] = [path, note]
    return path, note


def _parse_report(text: str) -> dict:
    out = {}
    lines = text.splitlines()
    for tok in (lines[0].split() if lines else []):
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    if text.startswith("error="):
        out["error"] = lines[0][len("error="):].strip()
    for line in lines[1:]:
        if line.startswith("rss"):
            series = []
            for tok in line.split()[1:]:
                t, _, kib = tok.partition(":")
                try:
                    series.append([round(float(t), 3), int(kib)])
                except ValueError:
                    continue
            out["rss_series"] = series
    return out


# Resident-set sampling interval for every run (ms; 0 turns it off). The CLI sets it.
RSS_INTERVAL_MS = 20.0


def rss_summary(series: list) -> dict:
    """Peak, time-weighted mean and final RSS of a sampled series (KiB)."""
    if not series:
        return {}
    peak = max(k for _, k in series)
    if len(series) == 1:
        mean = float(series[0][1])
    else:
        area = sum((t1 - t0) * k0 for (t0, k0), (t1, _) in zip(series, series[1:]))
        span = series[-1][0] - series[0][0]
        mean = area / span if span > 0 else float(series[-1][1])
    return {"rss_peak_kb": peak, "rss_mean_kb": round(mean, 1), "rss_final_kb": series[-1][1],
            "rss_samples": len(series)}


def run_child(argv: list[str], env: dict, timeout: float, use_launcher: bool = True,
              rss_ms: float | None = None) -> dict:
    """Run argv; return a record with status ok|timeout|signal|exit|no-json|preload-failed|spawn-failed.

    With the launcher, the program's resident set is sampled every rss_ms milliseconds
    (default RSS_INTERVAL_MS) into rec["rss_series"] = [[t_s, KiB], ...]."""
    rss_ms = RSS_INTERVAL_MS if rss_ms is None else rss_ms
    rec: dict = {"argv": list(argv), "status": "ok", "message": ""}
    if "/" not in argv[0] and shutil.which(argv[0]):
        argv = [shutil.which(argv[0])] + list(argv[1:])
    spawner, _ = launcher() if use_launcher else (None, "")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as rep:
        start = time.perf_counter()
        try:
            if spawner:
                env = dict(env)
                pre = env.pop("LD_PRELOAD", None)
                cmd = [spawner] + (["--preload", pre] if pre else []) + \
                    (["--rss-ms", f"{rss_ms:g}"] if rss_ms and rss_ms > 0 else []) + list(argv)
                pid = _spawn(cmd, env, out.fileno(), err.fileno(), rep.fileno())
            else:
                pid = _spawn(list(argv), env, out.fileno(), err.fileno(), None)
        except OSError as e:
            rec.update(status="spawn-failed", message=f"cannot start {argv[0]}: {e.strerror or e}")
            return rec
        timed_out = threading.Event()
        reaped = threading.Event()
        lock = threading.Lock()

        def _kill():
            with lock:
                if reaped.is_set():
                    return
                timed_out.set()
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        timer = threading.Timer(timeout, _kill)
        timer.daemon = True
        timer.start()
        try:
            _, status, ru = os.wait4(pid, 0)
        except BaseException:
            # Interrupted (Ctrl-C): do not leave the workload running on a shared machine.
            timer.cancel()
            try:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            raise
        wall = time.perf_counter() - start
        with lock:
            reaped.set()
        timer.cancel()
        # Forked workers (malloc-test --processes) are reaped by the workload itself; if it
        # died early they may still run: take the whole group down.
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out.seek(0)
        err.seek(0)
        rep.seek(0)
        stdout = out.read()
        stderr = err.read()
        report = _parse_report(rep.read().decode("ascii", "replace").strip()) if spawner else {}

    rec.update(wall_s=wall, user_s=ru.ru_utime, sys_s=ru.ru_stime, maxrss_kb=ru.ru_maxrss,
               minflt=ru.ru_minflt, majflt=ru.ru_majflt, nvcsw=ru.ru_nvcsw, nivcsw=ru.ru_nivcsw,
               rusage_source="direct")
    if "error" in report and not timed_out.is_set():
        rec.update(status="spawn-failed", message=f"cannot start {argv[0]}: {report['error']}")
        return rec
    if "status" in report:
        # The workload's own rusage, reaped by the launcher (spawn.c says why).
        status = int(report["status"])
        rec.update(wall_s=float(report["wall"]), user_s=float(report["utime"]), sys_s=float(report["stime"]),
                   maxrss_kb=int(report["maxrss"]), minflt=int(report["minflt"]), majflt=int(report["majflt"]),
                   nvcsw=int(report["nvcsw"]), nivcsw=int(report["nivcsw"]), rusage_source="launcher")
        if report.get("rss_series"):
            rec["rss_series"] = report["rss_series"]
            rec["rss_interval_ms"] = rss_ms
            rec.update(rss_summary(report["rss_series"]))
    err_text = _tail(stderr)
    if err_text.strip():
        rec["stderr"] = err_text
    out_text = stdout.decode("utf-8", "replace")
    last_err = _last_line(err_text)
    full_err = stderr.decode("utf-8", "replace")
    first_err = next((ln.strip() for ln in full_err.splitlines() if ln.strip()), "")

    if timed_out.is_set():
        rec.update(status="timeout", message=f"timed out after {timeout:g} s and was killed")
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        rec.update(status="signal", signal=sig,
                   message=f"killed by {_signame(sig)} ({sig})" + (f": {last_err}" if last_err else ""))
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
        code = os.WEXITSTATUS(status)
        what = {2: "bad command line", 1: "runtime failure"}.get(code, "failure")
        rec.update(status="exit", exit_code=code,
                   message=f"exited with status {code} ({what})" + (f": {first_err}" if first_err else ""))
    else:
        rec["exit_code"] = 0
    if "cannot be preloaded" in err_text and rec["status"] in ("ok", "no-json"):
        # ld.so ignores a preload it cannot load and runs with glibc: the figures would be glibc's.
        line = next(ln for ln in err_text.splitlines() if "cannot be preloaded" in ln)
        rec.update(status="preload-failed", message=line.strip())
    if rec["status"] == "ok":
        line = _last_line(out_text)
        try:
            obj = json.loads(line)
            if isinstance(obj, dict) and "figures" not in obj:
                # A flat result line ({"name", "params", figure: value, ...}): the figures are
                # every other key.
                obj = {"params": obj.get("params", {}),
                       "figures": {k: v for k, v in obj.items() if k not in ("name", "params")}}
            if not isinstance(obj, dict) or not isinstance(obj.get("figures"), dict):
                raise ValueError("no figures object")
        except ValueError:
            rec.update(status="no-json",
                       message=f"exited 0 but its last stdout line is not a JSON result: {line[:120]!r}")
            rec["stdout"] = _tail(stdout)
        else:
            rec["figures"] = obj["figures"]
            rec["reported_params"] = obj.get("params", {})
    else:
        rec["stdout"] = _tail(stdout, 400)
    return rec


def strace_available() -> str | None:
    return shutil.which("strace")


def parse_strace_summary(text: str) -> dict:
    """Counts from `strace -c` output: {syscall: calls}."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[-1] == "total" or parts[0].startswith(("%", "-")):
            continue
        try:
            float(parts[0])
            calls = int(parts[3])
        except ValueError:
            continue
        counts[parts[-1]] = counts.get(parts[-1], 0) + calls
    return counts


# Entry points of the malloc family: a mapping call with one of them (or the preloaded
# library) on its stack is the allocator's; any other is the program's or the loader's.
MALLOC_SYMBOLS = {
    "malloc", "__libc_malloc", "calloc", "__libc_calloc", "realloc", "__libc_realloc", "free", "__libc_free",
    "cfree", "posix_memalign", "__posix_memalign", "memalign", "__libc_memalign", "aligned_alloc", "valloc",
    "__libc_valloc", "pvalloc", "__libc_pvalloc", "reallocarray", "__libc_reallocarray", "malloc_trim",
    "__malloc_trim", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
}
_STACK_SUPPORT: list = []


def strace_stacks(strace: str) -> bool:
    """Does this strace print stacks (-k, needs libunwind or libdw)?"""
    if not _STACK_SUPPORT:
        try:
            r = subprocess.run([strace, "-f", "-k", "-e", "trace=brk", "-o", os.devnull, "true"],
                               capture_output=True, timeout=30)
            _STACK_SUPPORT.append(r.returncode == 0)
        except (OSError, subprocess.TimeoutExpired):
            _STACK_SUPPORT.append(False)
    return _STACK_SUPPORT[0]


def _frame_is_allocator(frame: str, libs: set) -> bool:
    # " > /usr/lib/x86_64-linux-gnu/libc.so.6(malloc+0x99) [0x989c9]"
    body = frame.strip()[1:].strip()
    path, _, rest = body.partition("(")
    if os.path.basename(path) in libs:
        return True
    sym = rest.split(")", 1)[0].split("+", 1)[0]
    return sym in MALLOC_SYMBOLS


def parse_strace_stacks(lines, libs: set) -> tuple[dict, dict]:
    """Counts from `strace -f -k` output: (all calls, the allocator's calls) per system call.
    A call is counted when it completes (a plain line, or "<... NAME resumed>"); the stack
    lines that follow it decide whose it is."""
    import re
    total: dict[str, int] = {}
    alloc: dict[str, int] = {}
    call_re = re.compile(r"^\d+\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()")
    current = None
    is_alloc = False

    def close():
        if current is not None and is_alloc:
            alloc[current] = alloc.get(current, 0) + 1

    for line in lines:
        if line.startswith(" > "):
            if current is not None and not is_alloc and _frame_is_allocator(line, libs):
                is_alloc = True
            continue
        m = call_re.match(line)
        if not m:
            continue
        if line.rstrip().endswith("<unfinished ...>"):
            continue
        close()
        current = m.group(1) or m.group(2)
        is_alloc = False
        total[current] = total.get(current, 0) + 1
    close()
    return total, alloc


def run_strace(argv: list[str], env: dict, timeout: float, strace: str = "strace") -> dict:
    """A separate pass under strace counting the memory-mapping system calls.

    With stacks (strace -k) every call is attributed: the allocator's when a malloc-family
    entry point or the preloaded library is on its stack, else the program's own (the
    loader mapping libraries, thread stacks, the replayer's tables). Without -k support,
    totals only (strace -c). LD_PRELOAD is handed to the traced program with -E so
    strace itself is not run on the allocator under test."""
    env = dict(env)
    preload = env.pop("LD_PRELOAD", None)
    stacks = strace_stacks(strace)
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "strace.txt"
        cmd = [strace, "-f", "-o", str(out), "-e", "trace=" + ",".join(SYSCALLS)]
        cmd += ["-k"] if stacks else ["-c"]
        if preload:
            cmd += ["-E", f"LD_PRELOAD={preload}"]
        rec = run_child(cmd + ["--"] + list(argv), env, timeout, rss_ms=0)
        alloc_counts = None
        if not out.exists():
            text_ok = False
            counts = {}
        elif stacks:
            libs = set()
            for lib in (preload or "").split(":"):
                if lib:
                    libs |= {os.path.basename(lib), os.path.basename(os.path.realpath(lib))}
            with open(out, errors="replace") as f:
                counts, alloc_counts = parse_strace_stacks(f, libs)
            text_ok = out.stat().st_size > 0
        else:
            text = out.read_text()
            counts = parse_strace_summary(text)
            text_ok = bool(text.strip())
    rec["argv"] = list(argv)
    rec["syscalls"] = {name: counts.get(name, 0) for name in SYSCALLS}
    if alloc_counts is not None:
        rec["syscalls_alloc"] = {name: alloc_counts.get(name, 0) for name in SYSCALLS}
        rec["syscalls_program"] = {name: counts.get(name, 0) - alloc_counts.get(name, 0) for name in SYSCALLS}
        rec["strace_attribution"] = "stack"
    else:
        rec["strace_attribution"] = "none"
    if rec["status"] == "ok" and not text_ok:
        rec.update(status="no-json", message="strace wrote no output")
    return rec
