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
import shutil
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


def _spawn(argv: list[str], env: dict, out_fd: int, err_fd: int) -> int:
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        return os.posix_spawn(argv[0], argv, env, file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_DUP2, out_fd, 1),
            (os.POSIX_SPAWN_DUP2, err_fd, 2),
        ], setsid=True)  # own process group, so a timeout kills forked workers too
    finally:
        os.close(devnull)


def run_child(argv: list[str], env: dict, timeout: float) -> dict:
    """Run argv; return a record with status ok|timeout|signal|exit|no-json|preload-failed|spawn-failed."""
    rec: dict = {"argv": list(argv), "status": "ok", "message": ""}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            pid = _spawn(argv, env, out.fileno(), err.fileno())
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
        while True:
            try:
                _, status, ru = os.wait4(pid, 0)
                break
            except InterruptedError:
                continue
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
        stdout = out.read()
        stderr = err.read()

    rec.update(wall_s=wall, user_s=ru.ru_utime, sys_s=ru.ru_stime, maxrss_kb=ru.ru_maxrss,
               minflt=ru.ru_minflt, majflt=ru.ru_majflt, nvcsw=ru.ru_nvcsw, nivcsw=ru.ru_nivcsw)
    err_text = _tail(stderr)
    if err_text.strip():
        rec["stderr"] = err_text
    out_text = stdout.decode("utf-8", "replace")
    last_err = _last_line(err_text)

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
                   message=f"exited with status {code} ({what})" + (f": {last_err}" if last_err else ""))
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


def run_strace(argv: list[str], env: dict, timeout: float, strace: str = "strace") -> dict:
    """A separate pass under `strace -f -c` counting the memory-mapping system calls.

    LD_PRELOAD is handed to the traced program with -E so strace itself is not run
    on the allocator under test."""
    env = dict(env)
    preload = env.pop("LD_PRELOAD", None)
    with tempfile.TemporaryDirectory() as td:
        summary = Path(td) / "strace.txt"
        cmd = [strace, "-f", "-c", "-o", str(summary), "-e", "trace=" + ",".join(SYSCALLS)]
        if preload:
            cmd += ["-E", f"LD_PRELOAD={preload}"]
        rec = run_child(cmd + ["--"] + list(argv), env, timeout)
        text = summary.read_text() if summary.exists() else ""
    rec["argv"] = list(argv)
    counts = parse_strace_summary(text)
    rec["syscalls"] = {name: counts.get(name, 0) for name in SYSCALLS}
    if rec["status"] == "ok" and not text.strip():
        rec.update(status="no-json", message="strace wrote no summary")
    return rec
