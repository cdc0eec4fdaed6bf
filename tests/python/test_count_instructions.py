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
    assert lines[0].split() == ["library", "pair", "remote", "threadtest", "tt-1000", "remote-mix", "medium"]
    pair, remote, threadtest, tt_1000, remote_mix, medium = (float(x) for x in lines[1].split()[1:])
    # A malloc(32)+free pair, loop included, takes tens of instructions on larder's fast paths
    # (70 at this writing); a malloc and its remote free, or a pair that goes through the
    # superblocks (threadtest), takes more; bins of 1,000-byte blocks move 8 blocks at a time,
    # so their refills and flushes cost more per pair than 8-byte ones (61 at a time).
    assert 20 <= pair <= 150
    assert remote > pair and threadtest > pair
    assert tt_1000 > threadtest and remote_mix > pair
    # a medium block's malloc and free go through the slow paths and the kept spans (about 400)
    assert medium > pair
