"""scripts/glibc-malloc-tests.sh: glibc's own malloc tests under any allocator. CI has no glibc
source (and no network to clone it), so these check what the script refuses, and why, before it
builds anything; docs/results.md (thirty-third session) has a full run."""
import os
import subprocess

from conftest import REPO, build_dir

SCRIPT = REPO / "scripts" / "glibc-malloc-tests.sh"


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, LARDER_BUILD_DIR=str(build_dir()))
    full_env.pop("GLIBC_SRC", None)
    full_env.update(env)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=full_env, timeout=120)


def system_glibc_version() -> str:
    out = subprocess.run(["getconf", "GNU_LIBC_VERSION"], capture_output=True, text=True).stdout.split()
    return out[1]


def fake_tree(root, version: str):
    for f in ("malloc/tst-malloc.c", "support/test-driver.c"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("/* not glibc */\n")
    (root / "version.h").write_text(f'#define RELEASE "release"\n#define VERSION "{version}"\n')
    return root


def test_help_prints_the_usage_and_builds_nothing(tmp_path):
    r = run("--help", LARDER_BUILD_DIR=str(tmp_path / "no-build"))
    assert r.returncode == 0
    assert "usage: scripts/glibc-malloc-tests.sh" in r.stdout and "--allocators LIST" in r.stdout
    assert not (tmp_path / "no-build").exists()


def test_bad_arguments_are_refused():
    assert "unknown allocator 'nosuch'" in run("--allocators", "glibc,nosuch").stderr
    r = run("--timeout", "soon")
    assert r.returncode == 2 and "--timeout needs a number" in r.stderr
    r = run("--allocators", "/nonexistent/libx.so")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_a_source_tree_must_be_glibc_and_the_systems_version(tmp_path):
    r = run("--allocators", "glibc", GLIBC_SRC=str(tmp_path / "missing"))
    assert r.returncode == 2 and "is not a directory" in r.stderr
    r = run("--allocators", "glibc", GLIBC_SRC=str(tmp_path))
    assert r.returncode == 2 and "is not a glibc source tree" in r.stderr
    other = fake_tree(tmp_path / "other", "1.0")
    r = run("--allocators", "glibc", GLIBC_SRC=str(other))
    assert r.returncode == 2 and f"is glibc 1.0 but the system's glibc is {system_glibc_version()}" in r.stderr


def test_a_tree_whose_support_library_does_not_build_is_reported(tmp_path):
    tree = fake_tree(tmp_path / "tree", system_glibc_version())
    for f in ("include", "sysdeps/generic", f"sysdeps/{os.uname().machine}"):
        (tree / f).mkdir(parents=True, exist_ok=True)
    r = run("--allocators", "glibc", "--tests", "tst-malloc", "--build-only", GLIBC_SRC=str(tree),
            LARDER_BUILD_DIR=str(tmp_path / "build"))
    assert r.returncode == 2
    assert "has no include/libc-diag.h" in r.stderr
