"""scripts/build-peers.sh and the harness's peers built from source (mimalloc3, snmalloc,
rpmalloc): what the script refuses before it downloads or builds anything, a cached package
that is not the pinned one, and where the harness finds what it built. One test builds
rpmalloc for real from crates.io (the smallest of the three, a few seconds) and skips when
crates.io cannot be reached."""
import os
import shutil
import subprocess
import urllib.request

import pytest

from conftest import FAKE_ALLOC, REPO, build_so
from larder_bench import allocators as A

SCRIPT = REPO / "scripts" / "build-peers.sh"
PEERS = ("mimalloc3", "snmalloc", "rpmalloc")


def run(build, *args: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, LARDER_BUILD_DIR=str(build))
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


def test_help_prints_the_usage_and_builds_nothing(tmp_path):
    r = run(tmp_path / "build", "--help")
    assert r.returncode == 0
    assert "usage: scripts/build-peers.sh" in r.stdout and "mimalloc3, snmalloc or rpmalloc" in r.stdout
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("args, message", [
    (["jemalloc"], "unknown peer 'jemalloc'; known: mimalloc3 snmalloc rpmalloc"),
    (["--verbose"], "unknown option --verbose"),
    (["--cache"], "--cache needs a folder"),
    (["--cache="], "--cache needs a folder"),
])
def test_bad_arguments_are_refused_before_anything_is_made(tmp_path, args, message):
    r = run(tmp_path / "build", *args)
    assert r.returncode == 2 and message in r.stderr
    assert not (tmp_path / "build").exists()


def test_a_cached_package_that_is_not_the_pinned_one_is_not_used(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "rpmalloc-sys-0.2.3+b097fd0.crate").write_bytes(b"not the package\n")
    # (a relative folder is the caller's, though the script works from the repository's root)
    r = run(tmp_path / "build", "--cache", "cache", "rpmalloc", cwd=tmp_path)
    assert r.returncode == 1
    assert f"{cache}/rpmalloc-sys-0.2.3+b097fd0.crate has SHA-256" in r.stderr
    assert "expected 8d4b7d5e225a53887ee57fcec492eaf114b8e290f7072d035adc6ddd6810b67b; not used" in r.stderr
    assert "not built: rpmalloc" in r.stderr
    peers = tmp_path / "build" / "peers"
    assert not (peers / "librpmalloc.so").exists() and not (peers / "rpmalloc-src").exists()


def test_without_the_network_the_first_download_fails_and_the_others_do_not_try(tmp_path):
    # a proxy on a closed port stands for a machine without the network: curl fails at once
    env = dict(os.environ, LARDER_BUILD_DIR=str(tmp_path / "build"), https_proxy="http://127.0.0.1:9",
               HTTPS_PROXY="http://127.0.0.1:9")
    r = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1
    assert "cannot download libmimalloc-sys 0.1.49 from static.crates.io" in r.stderr
    assert "snmalloc-sys 0.7.6 not downloaded: an earlier download failed" in r.stderr
    assert "not built: mimalloc3 snmalloc rpmalloc" in r.stderr
    assert not list((tmp_path / "build" / "peers").glob("*.so")) and not list((tmp_path / "build" / "peers").glob("*-src"))


def test_harness_names_missing_peers_and_the_command_that_builds_them(tmp_path):
    found = {a.name: a for a in A.detect(tmp_path)}
    for name in PEERS:
        assert not found[name].found
        assert f"peers/lib{name}.so not found" in found[name].missing and "make peers" in found[name].missing


def test_harness_finds_a_built_peer_with_what_it_was_built_from(tmp_path, cc):
    peers = tmp_path / "peers"
    peers.mkdir()
    shutil.copy(build_so(cc, tmp_path, "x", FAKE_ALLOC), peers / "libsnmalloc.so")
    (peers / "snmalloc.version").write_text("snmalloc (as bundled in snmalloc-sys 0.7.6)\n")
    found = {a.name: a for a in A.detect(tmp_path)}
    sn = found["snmalloc"]
    assert sn.found and sn.path == str((peers / "libsnmalloc.so").resolve())
    assert sn.version == "snmalloc (as bundled in snmalloc-sys 0.7.6)"
    assert A.select(A.detect(tmp_path), ["glibc", "snmalloc"])[1].name == "snmalloc"
    assert not found["mimalloc3"].found and not found["rpmalloc"].found


def _crates_io_reachable() -> bool:
    try:
        req = urllib.request.Request("https://static.crates.io/crates/rpmalloc-sys/rpmalloc-sys-0.2.3%2Bb097fd0.crate",
                                     method="HEAD")
        with urllib.request.urlopen(req, timeout=15) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_rpmalloc_is_built_from_crates_io_and_runs_a_program(tmp_path):
    if not _crates_io_reachable():
        pytest.skip("static.crates.io is not reachable")
    build = tmp_path / "build"
    r = run(build, "rpmalloc")
    assert r.returncode == 0, r.stderr
    lib = build / "peers" / "librpmalloc.so"
    assert "rpmalloc 1.4.3 (b097fd0, from rpmalloc-sys 0.2.3 on crates.io) -> " in r.stderr
    # its malloc is the one a preloaded program calls
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    assert " T malloc\n" in syms and " T free\n" in syms
    out = subprocess.run(["python3", "-c", "print(sum(len(str(i)) for i in range(100000)))"],
                         capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD=str(lib)), timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "488890"
    rp = {a.name: a for a in A.detect(build)}["rpmalloc"]
    assert rp.found and rp.version.startswith("rpmalloc 1.4.3")
    # built once: a second run leaves it as it is, --force builds it again
    again = run(build, "rpmalloc")
    assert again.returncode == 0 and "is built" in again.stderr
    assert "-> " in run(build, "--force", "rpmalloc").stderr
