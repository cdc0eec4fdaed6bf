"""Server entries: the server starts under each allocator on a loopback port, a client drives
it, the server is measured and stopped, and nothing the harness started is left running."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from larder_bench import measure


def _cli(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return subprocess.run([sys.executable, "-m", "larder_bench", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=cwd)


def _running(pattern: str) -> list[int]:
    """Live processes whose command line contains pattern (zombies are dead)."""
    out = []
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            cmd = open(f"/proc/{n}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            state = open(f"/proc/{n}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if pattern in cmd and state not in "ZX":
            out.append(int(n))
    return out


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_memcached_on_loopback_is_measured_and_stopped(tmp_path, bench_build):
    if not (shutil.which("memcached") and shutil.which("memcaslap")):
        pytest.fail("memcached and memcaslap (libmemcached-tools) are missing: scripts/install-deps.sh installs them")
    cfg = tmp_path / "bench.toml"
    cfg.write_text("""
[commands.kv]
server = "memcached -u {user} -l {host} -p {port} -U 0 -t 2"
cmd = "memcaslap -s {host}:{port} -x 5000 -T 1 -c 4"
idle = 0.5
""")
    before = set(_running("memcached"))
    r = _cli("run", "--config", str(cfg), "--allocators", "glibc,larder", "--repeats", "2",
             "--build-dir", str(bench_build), "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (out,) = list((tmp_path / "out").iterdir())
    doc = json.loads((out / "results.json").read_text())
    meas = [x for x in doc["runs"] if x["pass"] == "measure"]
    assert len(meas) == 4 and all(x["status"] == "ok" for x in meas), [x.get("message") for x in meas]
    ports = set()
    for x in meas:
        f = x["figures"]
        ports.add(f["port"])
        # Measured: the client's time, the server's CPU, RSS over time and after the idle phase.
        assert f["client_wall_s"] > 0 and f["server_cpu_s"] > 0
        assert f["rss_after_idle_kb"] > 0 and f["rss_end_of_load_kb"] > 0 and f["idle_s"] == 0.5
        assert x["rss_series"] and x["maxrss_kb"] > 0
        # The server ran the whole time: startup, the load, then at least the idle phase.
        assert x["wall_s"] >= f["client_wall_s"] + 0.5
        assert x["client"]["status"] == "ok" and "Ops: 5000" in x["client"]["stdout"]
        assert x["argv"][:2] == ["memcached", "-u"] and "127.0.0.1" in x["argv"]
        assert not x.get("left_running")
    # Under strace too (the allocator's system calls), stopped the same way.
    if shutil.which("strace"):
        st = [x for x in doc["runs"] if x["pass"] == "strace"]
        assert len(st) == 2 and all(x["status"] == "ok" and x["syscalls"]["mmap"] > 0 for x in st), \
            [x.get("message") for x in st]
        ports |= {x["figures"]["port"] for x in st}
    # Stopped: no memcached of ours is running and no port it used still accepts connections.
    assert set(_running("memcached")) <= before
    assert not any(_accepts(p) for p in ports)
    md = (out / "report.md").read_text()
    assert "| allocator | client time | server CPU | peak RSS | RSS at end of load | RSS after idle |" in md
    assert "plots/rss_time_kv.png" in md


STUBBORN_SERVER = r"""
import os, signal, socket, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)      # ignores the polite request to stop
pid = os.fork()
if pid == 0:                                       # a worker process of its own
    time.sleep(600)
    os._exit(0)
open(sys.argv[2], "w").write(str(pid))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b"hello\n")
    c.close()
"""

CLIENT = "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); print(s.recv(16))"


def test_a_server_that_will_not_stop_is_killed_with_everything_it_started(tmp_path):
    srv = tmp_path / "server.py"
    srv.write_text(STUBBORN_SERVER)
    pidfile = tmp_path / "worker.pid"
    port = measure.free_port("127.0.0.1")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    t0 = time.monotonic()
    rec = measure.run_server([sys.executable, str(srv), str(port), str(pidfile)],
                             [sys.executable, "-c", CLIENT, str(port)], env, env, 60, host="127.0.0.1", port=port,
                             idle_s=0.2, stop_timeout=1.0)
    assert time.monotonic() - t0 < 30
    assert rec["status"] == "timeout"
    assert "did not stop within 1 s of SIGTERM and was killed" in rec["message"]
    assert rec["client"]["status"] == "ok" and "hello" in rec["client"]["stdout"]
    worker = int(pidfile.read_text())
    assert worker in rec.get("left_running", []), rec
    assert "were still running after it stopped and were killed" in rec["message"]
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{worker}") or \
        open(f"/proc/{worker}/stat").read().rsplit(")", 1)[1].split()[0] in "ZX"
    assert not _accepts(port)


def test_a_server_that_exits_at_once_is_reported(tmp_path):
    port = measure.free_port("127.0.0.1")
    env = dict(os.environ)
    rec = measure.run_server([sys.executable, "-c", "import sys; sys.exit(4)"], ["true"], env, env, 30,
                             host="127.0.0.1", port=port)
    assert rec["status"] == "exit"
    assert f"the server ended before it accepted connections on 127.0.0.1:{port}" in rec["message"]
    assert "exited with status 4" in rec["message"]
    assert "client" not in rec
