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


def last_line(text: str) -> str:
    """The last non-blank line of text, stripped ("" if none)."""
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


class Child:
    """One started program (through the launcher when there is one), reaped later.

    run_child starts one and waits for it; run_server starts the server, drives it with a
    client, and stops it. stdout goes to stdout_path when given (the check command reads it),
    else to a temporary file; both are parsed the same way."""

    def __init__(self, argv: list[str], env: dict, rss_ms: float | None = None, use_launcher: bool = True,
                 cwd: str | None = None, stdout_path: str | None = None, watch_group: bool = False):
        rss_ms = RSS_INTERVAL_MS if rss_ms is None else rss_ms
        self.watch_group = watch_group
        self.left_running: list = []    # watch_group: what else was in the group when it ended or was killed
        self.own: set = set()           # the launcher and the program itself (not "left running")
        self.rss_ms = rss_ms
        self.rec: dict = {"argv": list(argv), "status": "ok", "message": ""}
        self.argv = list(argv)
        if "/" not in argv[0] and shutil.which(argv[0]):
            self.argv = [shutil.which(argv[0])] + list(argv[1:])
        self.spawner, _ = launcher() if use_launcher else (None, "")
        self.out = open(stdout_path, "w+b") if stdout_path else tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.rep = tempfile.TemporaryFile()
        self.pid = None
        self.status = None
        self.ru = None
        self.timed_out = False
        self.start = time.perf_counter()
        self.wall = None
        try:
            if self.spawner:
                env = dict(env)
                pre = env.pop("LD_PRELOAD", None)
                cmd = [self.spawner] + (["--preload", pre] if pre else []) + \
                    (["--rss-ms", f"{rss_ms:g}"] if rss_ms and rss_ms > 0 else []) + \
                    (["--cwd", str(cwd)] if cwd else []) + self.argv
                self.pid = _spawn(cmd, env, self.out.fileno(), self.err.fileno(), self.rep.fileno())
            else:
                cmd = self.argv if not cwd else ["/bin/sh", "-c", 'cd "$0" && exec "$@"', str(cwd)] + self.argv
                self.pid = _spawn(cmd, env, self.out.fileno(), self.err.fileno(), None)
        except OSError as e:
            self.rec.update(status="spawn-failed", message=f"cannot start {argv[0]}: {e.strerror or e}")
            self.close()

    @property
    def started(self) -> bool:
        return self.pid is not None

    def poll(self) -> bool:
        """True once the program has ended (it is then reaped)."""
        if self.status is not None:
            return True
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self._reaped(status, ru)
        return True

    def _reaped(self, status, ru) -> None:
        self.status, self.ru = status, ru
        self.wall = time.perf_counter() - self.start
        if self.watch_group and not self.left_running:
            self._note_group()
        # Forked workers (malloc-test --processes, a server's children) are reaped by the program
        # itself; if it died early they may still run: take the whole group down.
        kill_group(self.pid)

    def wait(self, timeout: float) -> None:
        """Wait for the end; past `timeout` seconds the whole process group is killed."""
        if self.status is not None:
            return
        reaped = threading.Event()
        lock = threading.Lock()

        def _kill():
            with lock:
                if reaped.is_set():
                    return
                self.timed_out = True
                if self.watch_group:
                    self._note_group()
                kill_group(self.pid)

        timer = threading.Timer(max(timeout, 0.0), _kill)
        timer.daemon = True
        timer.start()
        try:
            _, status, ru = os.wait4(self.pid, 0)
        except BaseException:
            # Interrupted (Ctrl-C): do not leave the program running on a shared machine.
            timer.cancel()
            self.kill()
            raise
        with lock:
            reaped.set()
        timer.cancel()
        self._reaped(status, ru)

    def _note_group(self) -> None:
        own = self.own | {self.pid}
        self.left_running = [(p, _cmdline(p)) for p in group_members(self.pid) if p not in own]

    def kill(self) -> None:
        """Kill the process group and reap the program (used on errors and interrupts)."""
        if self.pid is None or self.status is not None:
            return
        kill_group(self.pid)
        try:
            _, status, ru = os.wait4(self.pid, 0)
            self._reaped(status, ru)
        except ChildProcessError:
            pass

    def close(self) -> None:
        for f in (self.out, self.err, self.rep):
            try:
                f.close()
            except OSError:
                pass

    def result(self, timeout: float, expect_json: bool = True) -> dict:
        """The record (see run_child) once the program has been reaped."""
        rec = self.rec
        if not self.started:
            return rec
        try:
            self.out.seek(0)
            self.err.seek(0)
            self.rep.seek(0)
            stdout = self.out.read()
            stderr = self.err.read()
            report = _parse_report(self.rep.read().decode("ascii", "replace").strip()) if self.spawner else {}
        finally:
            self.close()
        return _record(rec, self.argv, self.status, self.ru, self.wall, report, stdout, stderr, self.timed_out,
                       timeout, expect_json, self.rss_ms)


def kill_group(pgid: int) -> None:
    """SIGKILL to a process group the harness made (each child is started with setsid)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _record(rec, argv, status, ru, wall, report, stdout, stderr, timed_out, timeout, expect_json, rss_ms) -> dict:
    rec.update(wall_s=wall, user_s=ru.ru_utime, sys_s=ru.ru_stime, maxrss_kb=ru.ru_maxrss,
               minflt=ru.ru_minflt, majflt=ru.ru_majflt, nvcsw=ru.ru_nvcsw, nivcsw=ru.ru_nivcsw,
               rusage_source="direct")
    if "error" in report and not timed_out:
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
    last_err = last_line(err_text)
    full_err = stderr.decode("utf-8", "replace")
    first_err = next((ln.strip() for ln in full_err.splitlines() if ln.strip()), "")

    if timed_out:
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
        line = last_line(out_text)
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
            if expect_json:
                rec.update(status="no-json",
                           message=f"exited 0 but its last stdout line is not a JSON result: {line[:120]!r}")
                rec["stdout"] = _tail(stdout)
            else:
                # Any program (--command): its output is its own; the harness measures it from outside.
                rec["figures"] = {}
                if out_text.strip():
                    rec["stdout"] = _tail(stdout, 400)
        else:
            rec["figures"] = obj["figures"]
            rec["reported_params"] = obj.get("params", {})
    else:
        rec["stdout"] = _tail(stdout, 400)
    return rec


def run_child(argv: list[str], env: dict, timeout: float, use_launcher: bool = True,
              rss_ms: float | None = None, cwd: str | None = None, expect_json: bool = True,
              stdout_path: str | None = None) -> dict:
    """Run argv; return a record with status ok|timeout|signal|exit|no-json|preload-failed|spawn-failed.

    With the launcher, the program's resident set is sampled every rss_ms milliseconds
    (default RSS_INTERVAL_MS) into rec["rss_series"] = [[t_s, KiB], ...]. expect_json=False
    (any program): a last stdout line that is not a JSON result is not a failure."""
    c = Child(argv, env, rss_ms, use_launcher, cwd, stdout_path)
    if not c.started:
        return c.rec
    c.wait(timeout)
    return c.result(timeout, expect_json)


# ---------------------------------------------------------------- servers

def free_port(host: str) -> int:
    """A TCP port nobody listens on at host (the kernel's choice); the server is given it."""
    import socket
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _accepts(host: str, port: int) -> bool:
    import socket
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _proc_stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, pgid, state) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2:].split()
    try:
        return int(fields[1]), int(fields[2]), fields[0]
    except (IndexError, ValueError):
        return None


def _all_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def group_members(pgid: int) -> list[int]:
    """Processes still running in a process group (the harness gives every program its own);
    zombies are dead already, whoever reaps them."""
    out = []
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st and st[1] == pgid and st[2] not in ("Z", "X"):
            out.append(pid)
    return out


def _children(pid: int) -> list[int]:
    return [p for p in _all_pids() if (_proc_stat(p) or (None,))[0] == pid]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def _statm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return None


def _leaf(pid: int, depth: int) -> int | None:
    """The program under the launcher (depth 1), or under the launcher and strace (depth 2)."""
    for _ in range(depth if pid is not None else 0):
        kids = _children(pid)
        if not kids:
            return None
        pid = kids[0]
    return pid


def run_server(server: list[str], client: list[str], env: dict, client_env: dict, timeout: float, *,
               host: str, port: int, idle_s: float = 0.0, ready_timeout: float = 30.0,
               stop_signal: str = "TERM", stop_timeout: float = 10.0, cwd: str | None = None,
               client_stdout: str | None = None, rss_ms: float | None = None, depth: int = 1) -> dict:
    """A server entry: start `server` (under the allocator: env carries LD_PRELOAD), wait until
    it accepts connections on host:port, run `client` (no preload: it is the load, not the
    program measured) to its end, let the server idle idle_s seconds and read its resident set,
    then stop it with stop_signal (SIGKILL to its group after stop_timeout seconds).

    The record is the server's: wall, CPU, peak RSS, RSS over time, faults from wait4 and the
    launcher; figures client_wall_s (what server series are compared by), server_cpu_s,
    rss_end_of_load_kb, rss_after_idle_kb, and the client's own record under "client". Only
    processes the harness started are signalled: the server (found as the launcher's child,
    or strace's child at depth 2) and the process groups the harness created. A server that
    ends after stop_signal by it, or with status 0, has stopped cleanly."""
    stop_sig = getattr(signal, f"SIG{stop_signal}")
    srv = Child(server, env, rss_ms, True, cwd, watch_group=True)
    if not srv.started:
        return srv.rec
    deadline = time.monotonic() + ready_timeout
    ready = False
    while time.monotonic() < deadline:
        if srv.poll():
            break
        if _accepts(host, port):
            ready = True
            break
        time.sleep(0.05)
    figures: dict = {"port": port}
    client_rec = None
    problem = None
    if not ready:
        if srv.status is None:
            srv.kill()
            rec = srv.result(ready_timeout, expect_json=False)
            rec.update(status="timeout", message=f"the server did not accept connections on {host}:{port} "
                                                  f"within {ready_timeout:g} s and was killed")
            return _server_done(rec, srv, figures, None)
        rec = srv.result(timeout, expect_json=False)
        if rec["status"] == "ok":
            rec.update(status="exit", message=f"the server exited (status 0) before it accepted connections on "
                                              f"{host}:{port}")
        else:
            rec["message"] = f"the server ended before it accepted connections on {host}:{port}: {rec['message']}"
        return _server_done(rec, srv, figures, None)
    pid = _leaf(srv.pid, depth)
    srv.own = {p for p in (_leaf(srv.pid, d) for d in range(1, depth + 1)) if p}
    try:
        client_rec = run_child(client, client_env, timeout, rss_ms=0, cwd=cwd, expect_json=False,
                               stdout_path=client_stdout)
        figures.update(client_wall_s=client_rec.get("wall_s"), client_user_s=client_rec.get("user_s"),
                       client_sys_s=client_rec.get("sys_s"))
        if client_rec["status"] != "ok":
            problem = ("client-failed", f"the client {os.path.basename(client[0])} failed: {client_rec['message']}")
        figures["rss_end_of_load_kb"] = _statm_kib(pid) if pid else None
        end = time.monotonic() + idle_s
        while time.monotonic() < end and not srv.poll():
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        if srv.status is not None:
            if problem is None:
                problem = ("exit", "the server ended before the harness stopped it")
        else:
            figures["rss_after_idle_kb"] = _statm_kib(pid) if pid else None
            figures["idle_s"] = idle_s
            target = _leaf(srv.pid, depth)
            if target is not None:
                try:
                    os.kill(target, stop_sig)
                except ProcessLookupError:
                    pass
            # Give it stop_timeout seconds to stop, then the group is killed.
            srv.wait(stop_timeout)
    except BaseException:
        srv.kill()
        raise
    rec = srv.result(stop_timeout, expect_json=False)
    st = srv.status
    clean = st is not None and ((os.WIFSIGNALED(st) and os.WTERMSIG(st) == stop_sig)
                                or (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0))
    if srv.timed_out:
        rec.update(status="timeout", message=f"the server did not stop within {stop_timeout:g} s of SIG{stop_signal} "
                                             f"and was killed")
    elif clean and problem is None:
        rec.update(status="ok", message="")
        rec.pop("signal", None)
    elif problem is not None:
        rec.update(status=problem[0], message=problem[1] + (f" ({rec['message']})" if rec.get("message") else ""))
    elif rec["status"] == "ok":
        rec.update(status="exit", message="the server stopped with an unexpected status")
    else:
        rec["message"] = f"after SIG{stop_signal}: {rec['message']}"
    user, sys_ = rec.get("user_s"), rec.get("sys_s")
    if user is not None and sys_ is not None:
        figures["server_cpu_s"] = user + sys_
    return _server_done(rec, srv, figures, client_rec)


def _server_done(rec: dict, srv: Child, figures: dict, client_rec: dict | None) -> dict:
    rec["figures"] = {k: v for k, v in figures.items() if v is not None}
    if client_rec is not None:
        rec["client"] = {k: client_rec.get(k) for k in ("argv", "status", "message", "wall_s", "user_s", "sys_s",
                                                          "exit_code", "stdout", "stderr") if client_rec.get(k) is not None}
    # Nothing the harness started may outlive the run: what was still in the server's process
    # group when the server ended has been killed with the group; say so.
    left = srv.left_running
    if left:
        names = ", ".join(f"{p} ({c[:60]})" for p, c in left)
        rec["left_running"] = [p for p, _ in left]
        if rec["status"] == "ok":
            rec["status"] = "left-running"
        rec["message"] = (rec.get("message") + "; " if rec.get("message") else "") + \
            f"processes of the server's group were still running after it stopped and were killed: {names}"
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


def run_strace(argv: list[str], env: dict, timeout: float, strace: str = "strace", run=None) -> dict:
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
        if run is None:
            rec = run_child(cmd + ["--"] + list(argv), env, timeout, rss_ms=0)
        else:
            # A command entry's own way of running (its cwd; a server with its client).
            rec = run(cmd + ["--"] + list(argv), env)
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
