"""scripts/check-floors.py on small object files compiled here: each rule of the floors
(docs/allocator.md "Floors") fails when broken, and a clean layout passes."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check-floors.py"


@pytest.fixture(scope="module", autouse=True)
def _nm():
    if shutil.which("nm") is None:
        pytest.fail("nm (binutils) is needed by the floors check")


def build(cc: str, tmp: Path, sources: dict[str, str]) -> list[Path]:
    """Compiles each x.c to x.c.o (CMake's naming) with the library's PIC flags."""
    objs = []
    for name, text in sources.items():
        src = tmp / name
        src.write_text(text)
        obj = tmp / f"{name}.o"
        subprocess.run([cc, "-c", "-O2", "-fPIC", "-o", str(obj), str(src)], check=True)
        objs.append(obj)
    return objs


def run(table: str, tmp: Path, inputs) -> subprocess.CompletedProcess:
    t = tmp / "floors.txt"
    t.write_text(table)
    return subprocess.run([sys.executable, str(SCRIPT), "--table", str(t), *map(str, inputs)],
                          capture_output=True, text=True)


# top -> mid -> low, low reads a variable of top's (data, not a call), everyone calls libc.
CLEAN = {
    "top.c": "#include <stdio.h>\nint mid_fn(int);\nint top_counter;\n"
             "int top_fn(int x) { printf(\"%d\", x); return mid_fn(x) + 1; }\n",
    "mid.c": "#include <stdlib.h>\nint low_fn(int);\nint mid_fn(int x) { free(malloc(4)); return low_fn(x) * 2; }\n",
    "low.c": "#include <string.h>\nextern int top_counter;\n"
             "int low_fn(int x) { return x + top_counter + (int)strlen(\"ab\"); }\n",
}
CLEAN_TABLE = "# a comment\ntop.c 2\nmid.c 1   # trailing comment\n\nlow.c 0\n"


def test_a_clean_layout_passes_and_data_references_are_not_calls(cc, tmp_path):
    r = run(CLEAN_TABLE, tmp_path, build(cc, tmp_path, CLEAN))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 files on 3 floors, 2 caller->callee file pairs" in r.stdout


def test_archives_and_folders_read_like_objects(cc, tmp_path):
    objs = build(cc, tmp_path, CLEAN)
    lib = tmp_path / "libx.a"
    subprocess.run(["ar", "rcs", str(lib), *map(str, objs)], check=True)
    r = run(CLEAN_TABLE, tmp_path, [lib])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 files" in r.stdout
    d = tmp_path / "objs"
    d.mkdir()
    for o in objs:
        shutil.copy(o, d / o.name)
    r = run(CLEAN_TABLE, tmp_path, [d])
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_upward_call_fails(cc, tmp_path):
    src = dict(CLEAN)
    src["low.c"] = "int top_fn(int);\nint low_fn(int x) { return x ? top_fn(x - 1) : 0; }\n"
    r = run(CLEAN_TABLE, tmp_path, build(cc, tmp_path, src))
    assert r.returncode == 1
    assert "low.c -> top.c (top_fn)" in r.stdout
    assert "(a) 1 upward call" in r.stdout


def test_a_call_into_maintenance_from_its_own_floor_or_below_fails(cc, tmp_path):
    src = {
        "api.c": "int maint_run(void); int core_fn(void);\n"
                 "int api_fn(void) { return maint_run() + core_fn(); }\n",
        "maint.c": "int core_fn(void);\nint maint_run(void) { return core_fn(); }\n",
        "peer.c": "int maint_run(void);\nint peer_fn(void) { return maint_run(); }\n",
        "core.c": "int core_fn(void) { return 1; }\n",
    }
    objs = build(cc, tmp_path, src)
    # peer.c shares maintenance's floor: rule (a) allows it, rule (b) does not.
    table = "api.c 3\nmaint.c 2 maintenance\npeer.c 2\ncore.c 0\n"
    r = run(table, tmp_path, objs)
    assert r.returncode == 1
    assert "peer.c -> maint.c (maint_run)" in r.stdout
    assert "(b) 1 call(s) into maintenance" in r.stdout
    assert "api.c -> maint.c" not in r.stdout  # from above: allowed
    assert "(a)" not in r.stdout
    # From above only, it holds.
    r = run("api.c 3\nmaint.c 2 maintenance\npeer.c 3\ncore.c 0\n", tmp_path, objs)
    assert r.returncode == 0, r.stdout


def test_a_circle_of_three_fails_and_of_two_passes(cc, tmp_path):
    three = {
        "a.c": "int b_fn(int);\nint a_fn(int x) { return x ? b_fn(x - 1) : 0; }\n",
        "b.c": "int c_fn(int);\nint b_fn(int x) { return x ? c_fn(x - 1) : 1; }\n",
        "c.c": "int a_fn(int);\nint c_fn(int x) { return x ? a_fn(x - 1) : 2; }\n",
    }
    r = run("a.c 0\nb.c 0\nc.c 0\n", tmp_path, build(cc, tmp_path, three))
    assert r.returncode == 1
    assert "(c) a circle of 3 files calling each other: a.c, b.c, c.c" in r.stdout
    for edge in ("a.c -> b.c (b_fn)", "b.c -> c.c (c_fn)", "c.c -> a.c (a_fn)"):
        assert edge in r.stdout
    assert "(a)" not in r.stdout and "(b)" not in r.stdout
    two = {
        "a.c": "int b_fn(int);\nint a_fn(int x) { return x ? b_fn(x - 1) : 0; }\n",
        "b.c": "int a_fn(int);\nint b_fn(int x) { return x ? a_fn(x - 1) : 1; }\n",
    }
    sub = tmp_path / "two"
    sub.mkdir()
    r = run("a.c 0\nb.c 0\n", sub, build(cc, sub, two))
    assert r.returncode == 0, r.stdout


def test_a_file_missing_from_the_table_fails(cc, tmp_path):
    src = dict(CLEAN)
    src["new.c"] = "int low_fn(int);\nint new_fn(int x) { return low_fn(x); }\n"
    r = run(CLEAN_TABLE, tmp_path, build(cc, tmp_path, src))
    assert r.returncode == 1
    assert "(d) 1 file(s) of the library not in the floors table" in r.stdout
    assert "\n  new.c\n" in r.stdout + "\n"


def test_a_table_entry_without_an_object_is_only_a_note(cc, tmp_path):
    r = run(CLEAN_TABLE + "gone.c 1 maintenance\n", tmp_path, build(cc, tmp_path, CLEAN))
    assert r.returncode == 0, r.stdout
    assert "note: the table places gone.c" in r.stdout


@pytest.mark.parametrize("table,why", [
    ("top.c two\n", "must be an integer"),
    ("top.c 2 maintenace\n", "unknown mark"),
    ("top.c\n", "expected `<file> <floor> [maintenance]`"),
    ("top.c 2\ntop.c 1\n", "placed twice"),
    ("# nothing\n", "no file is placed"),
])
def test_a_bad_table_is_refused_with_status_2(cc, tmp_path, table, why):
    r = run(table, tmp_path, build(cc, tmp_path, CLEAN))
    assert r.returncode == 2
    assert why in r.stderr


def test_bad_inputs_are_refused_with_status_2(cc, tmp_path):
    r = run(CLEAN_TABLE, tmp_path, [tmp_path / "missing.o"])
    assert r.returncode == 2 and "no such file or folder" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(CLEAN_TABLE, tmp_path, [empty])
    assert r.returncode == 2 and "no object files" in r.stderr
    objs = build(cc, tmp_path, CLEAN)
    r = run(CLEAN_TABLE, tmp_path, [*objs, objs[0]])  # the same file twice counts once
    assert r.returncode == 0, r.stdout + r.stderr
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(objs[0], other / objs[0].name)
    r = run(CLEAN_TABLE, tmp_path, [*objs, other / objs[0].name])
    assert r.returncode == 2 and "two objects stand for top.c" in r.stderr
