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
            r = subprocess.run([cc, "-O2", "-o", str(tmp), str(src)], capture_output=True, text=True, timeout=120)
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
    for tok in text.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    if text.startswith("error="):
        out["error"] = text[len("error="):].strip()
    return out


def run_child(argv: list[str], env: dict, timeout: float, use_launcher: bool = True) -> dict:
    """Run argv; return a record with status ok|timeout|signal|exit|no-json|preload-failed|spawn-failed."""
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
                cmd = [spawner] + (["--preload", pre] if pre else []) + list(argv)
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
