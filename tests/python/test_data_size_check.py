"""scripts/check-data-size.py on small shared libraries compiled here: a big initialised object
fails the check and is named, the same object zero-initialised (.bss) passes, bad input is
refused."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check-data-size.py"


@pytest.fixture(scope="module", autouse=True)
def _tools():
    for tool in ("readelf", "nm", "cc"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed by the data-size check")


def shared_lib(tmp: Path, name: str, text: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(text)
    lib = tmp / f"lib{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    return lib


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


# A heap-like object: a large table and one pointer member with an initialiser, as liblarder's
# empty heap had.
BIG_INITIALISED = """
struct heap { char table[200000]; void *self; };
struct heap big_heap = {.self = &big_heap};
void *get(void) { return &big_heap; }
"""
BIG_ZERO = """
struct heap { char table[200000]; void *self; };
struct heap big_heap;
void *get(void) { return &big_heap; }
"""


def test_big_initialised_object_fails_and_is_named(tmp_path):
    lib = shared_lib(tmp_path, "bigdata", BIG_INITIALISED)
    out = run(lib)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "more than 16384" in out.stdout
    assert "big_heap" in out.stdout


def test_zero_initialised_object_passes(tmp_path):
    lib = shared_lib(tmp_path, "bigbss", BIG_ZERO)
    out = run(lib)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "within 16384" in out.stdout


def test_limit_is_a_flag(tmp_path):
    lib = shared_lib(tmp_path, "small", "int counter = 7; int get(void) { return counter; }\n")
    assert run(lib).returncode == 0
    assert run("--max-bytes", "0", lib).returncode == 1


def test_bad_input(tmp_path):
    out = run(tmp_path / "missing.so")
    assert out.returncode == 2
    assert "missing.so" in out.stderr
    assert run("--max-bytes", "-1", tmp_path / "missing.so").returncode == 2
