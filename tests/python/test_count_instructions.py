"""scripts/count-instructions.sh: the instruction counts the docs quote, for any allocator."""
import os
import shutil
import subprocess

import pytest

from conftest import REPO, build_dir

SCRIPT = REPO / "scripts" / "count-instructions.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LARDER_BUILD_DIR=str(build_dir()))
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300)


def test_missing_library_is_refused(bench_build):
    r = run(str(bench_build / "lib" / "no-such-allocator.so"))
    assert r.returncode == 2
    assert "no such library" in r.stderr


def test_counts_larder(bench_build):
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: scripts/install-deps.sh installs it (make test runs it)")
    r = run()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].split() == ["library", "pair", "remote", "threadtest", "tt-1000", "remote-mix", "medium", "thread",
                                "fan-in"]
    pair, remote, threadtest, tt_1000, remote_mix, medium, thread, fan_in = (float(x) for x in lines[1].split()[1:])
    # A malloc(32)+free pair, loop included, takes tens of instructions on larder's fast paths
    # (70 at this writing); a malloc and its remote free, or a pair that goes through the
    # superblocks (threadtest), takes more; bins of 1,000-byte blocks move 8 blocks at a time,
    # so their refills and flushes cost more per pair than 8-byte ones (61 at a time).
    assert 20 <= pair <= 150
    assert remote > pair and threadtest > pair
    assert tt_1000 > threadtest and remote_mix > pair
    # a medium block's malloc and free go through the slow paths and the kept spans (about 400)
    assert medium > pair
    # a thread's life: libc's thread start and exit, 100 frees and 100 mallocs, the heap taken
    # and parked (about 20,600 at this writing; glibc alone about 16,600)
    assert thread > 200 * pair
    # a malloc and its remote free, the frees scattered over 64 owners (about 780 at this
    # writing: the buffer's batches stay at a block or two; rpmalloc 81)
    assert fan_in > remote


def test_failed_run_says_so(bench_build, tmp_path):
    """A library whose programs fail under valgrind is reported as failed, not as 0.0."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: scripts/install-deps.sh installs it (make test runs it)")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "abort.c"
    src.write_text("#include <stdlib.h>\n__attribute__((constructor)) static void die(void) { abort(); }\n")
    lib = tmp_path / "libabort.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    r = run(str(lib))
    assert r.returncode == 0, r.stderr
    row = r.stdout.strip().splitlines()[1].split()
    assert row[1:] == ["failed"] * 8, r.stdout
    # the cache misses' table says so too, under a line that names what it counts
    r = run("--misses", str(lib))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("data cache misses per operation, D1/LL"), r.stdout
    assert lines[1].split()[-1] == "fan-in"
    assert lines[2].split()[1:] == ["failed"] * 8, r.stdout


def test_misses_counts_cache_lines(bench_build):
    """--misses: a pair brings no line into the first-level cache (it touches the lines the loop
    touched before it); a remote free brings some (the producer's 200,000 blocks, 12.8 MB, pushed
    the consumer's lines out of the simulated cache between rounds), and so does a free scattered
    over 64 owners."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: scripts/install-deps.sh installs it (make test runs it)")
    r = run("--misses")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[1].split() == ["library", "pair", "remote", "threadtest", "tt-1000", "remote-mix", "medium", "thread",
                                "fan-in"]
    cells = [tuple(float(v) for v in cell.split("/")) for cell in lines[2].split()[1:]]
    assert all(len(c) == 2 and c[0] >= 0 and c[1] >= 0 for c in cells), lines[2]
    pair, remote, fan_in = cells[0][0], cells[1][0], cells[7][0]
    assert pair < 1
    assert remote > pair and fan_in > pair


def test_unknown_option_is_refused(bench_build):
    r = run("--bogus")
    assert r.returncode == 2
    assert "unknown option: --bogus" in r.stderr
