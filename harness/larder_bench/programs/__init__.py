"""The `programs` suite: real programs from Debian packages (scripts/install-deps.sh installs
them), each run under every allocator as a command entry (commands.py).

An allocator's users ask "which allocator for my program?"; allocator authors answer with
real programs (a compiler, an interpreter, a database, a server under load), as seed 003
measured allocators on a real application's behaviour rather than on microbenchmarks. Each
program's output is checked to be the same under every allocator. `--scale` shrinks the work
(`make test` runs it at 0.02); the full scale is what docs/results.md reports.
"""
from __future__ import annotations

from pathlib import Path

from ..commands import Command, entry

HERE = Path(__file__).resolve().parent
_REPO = HERE.parents[2]
SUITE = "programs"


def _sources() -> list[str]:
    """The C sources of this repository (the allocator, the workloads, the tracer): the
    compiler's input, a real program's code. Sorted, so a scaled run compiles the same files."""
    files = []
    for d in ("src", "bench", "tracer"):
        files += sorted(str(p) for p in (_REPO / d).glob("*.c"))
    return files


PROGRAMS = [
    entry("python", Command(
        ("python3", "-S", "-s", str(_REPO / "traces" / "python_workload.py"), "{batches}"),
        env={"PYTHONMALLOC": "malloc"}, check=("cat", "{stdout}"), package="python3"),
        suite=SUITE, params={"batches": 250}, work=("batches",), timeout=300,
        title="interpreter: CPython 3 running a threaded message server (traces/python_workload.py: four "
              "threads decode JSON requests, build replies, keep a session cache, append to a log); "
              "PYTHONMALLOC=malloc so every object is a malloc"),
    entry("sqlite", Command(
        ("sqlite3", "-cmd", ".parameter set @rows {rows}", ":memory:", f".read {HERE / 'sqlite.sql'}"),
        check=("cat", "{stdout}"), package="sqlite3"),
        suite=SUITE, params={"rows": 200_000}, work=("rows",), timeout=300,
        title="database: sqlite3 with an in-memory shop (orders, lines, customers): inserts, indexes, joins, "
              "window functions, JSON building, updates, deletes, VACUUM (programs/sqlite.sql)"),
    entry("clang", Command(
        ("clang", "-O2", "-g", "-c", "-I{repo}/include", "-I{repo}/src", "-I{repo}/bench", "-I{repo}/tracer",
         "{files}"), cwd="{work_dir}", check=("sh", "-c", "cat *.o | sha256sum"), package="clang"),
        suite=SUITE, params={"files": _sources()}, work=("files",), timeout=600,
        title="compiler: clang -O2 -g compiling this repository's C sources (src/, bench/, tracer/) in one "
              "process; the object files must be the same under every allocator"),
    entry("memcached", Command(
        ("memcaslap", "-s", "{host}:{port}", "-x", "{ops}", "-T", "2", "-c", "32"),
        server=("memcached", "-u", "{user}", "-l", "{host}", "-p", "{port}", "-U", "0", "-t", "2", "-m", "1024"),
        idle="{idle}", package="memcached libmemcached-tools"),
        suite=SUITE, params={"ops": 500_000, "idle": 5.0}, work=("ops", "idle"), timeout=300,
        title="server: memcached (2 threads) on loopback under libmemcached's memaslap load generator "
              "(2 threads, 32 connections, 90% gets, 10% sets of about 1 KiB), then idle; compared by the "
              "client's time, with the server's CPU, RSS over time and RSS after the idle phase"),
]
