"""A command's check: its output must be the same under every allocator; a run whose output
differs is a mismatch, reported and left out of the medians."""
import json
import os
import subprocess
import sys

from conftest import build_so

from larder_bench import runner

# An "allocator" that serves every call from glibc but writes a line of its own to standard
# output when the program starts: the program's output differs under it, and only under it.
CHATTY_ALLOC = r"""
#include <stddef.h>
#include <unistd.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
__attribute__((constructor)) static void chatty(void) {
  static const char msg[] = "hello from a chatty allocator\n";
  write(1, msg, sizeof msg - 1);
}
"""


def _cli(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return subprocess.run([sys.executable, "-m", "larder_bench", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=cwd)


def test_check_catches_an_allocator_whose_output_differs(tmp_path, bench_build, cc):
    chatty = build_so(cc, tmp_path, "chatty", CHATTY_ALLOC)
    cfg = tmp_path / "bench.toml"
    cfg.write_text("""
[commands.count]
cmd = ["sqlite3", ":memory:", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 5000) SELECT count(*), sum(x) FROM c"]
check = "cat {stdout}"
""")
    r = _cli("run", "--config", str(cfg), "--allocator", f"chatty={chatty}", "--allocators", "glibc,larder,chatty",
             "--repeats", "2", "--strace", "none", "--build-dir", str(bench_build),
             "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (out,) = list((tmp_path / "out").iterdir())
    doc = json.loads((out / "results.json").read_text())
    runs = [x for x in doc["runs"] if x["pass"] == "measure"]
    by = {a: [x for x in runs if x["allocator"] == a] for a in ("glibc", "larder", "chatty")}
    # glibc and larder print the same; each run's check output is kept as a digest.
    assert all(x["status"] == "ok" for x in by["glibc"] + by["larder"])
    assert len({x["check"]["sha256"] for x in by["glibc"] + by["larder"]}) == 1
    # The chatty allocator's runs exited 0 but printed something else: mismatch, with where.
    for x in by["chatty"]:
        assert x["status"] == "mismatch" and x["exit_code"] == 0
        assert "check output differs from glibc's: line 1: 'hello from a chatty allocator' instead of '5000|12502500'" \
            in x["message"], x["message"]
    assert "MISMATCH count [chatty]" in r.stderr
    md = (out / "report.md").read_text()
    assert "count [chatty]: mismatch: check output differs from glibc's" in md
    assert "6 outputs compared, 2 differed (MISMATCH" in md
    # Left out of the medians: the chatty column has no figure.
    line = next(ln for ln in md.splitlines() if ln.startswith("| – |") and "FAILED" in ln)
    assert line.split("|")[4].strip() == "FAILED"


def _rec(alloc, status="ok"):
    return {"allocator": alloc, "status": status, "series": "s", "repeat": 0}


def test_reference_is_the_baseline_else_the_most_common_output():
    a, b, c, d = _rec("glibc"), _rec("larder"), _rec("x"), _rec("x")
    checks = {1: (a, "A", b"one\n"), 2: (b, "B", b"two\n"), 3: (c, "B", b"two\n"), 4: (d, "B", b"two\n")}
    marked = runner.compare_checks(dict(checks), "glibc")
    # The baseline decides even when it is outnumbered.
    assert [m["allocator"] for m in marked] == ["larder", "x", "x"]
    assert "differs from glibc's: line 1: 'two' instead of 'one'" in b["message"]
    a2, b2, c2 = _rec("glibc"), _rec("larder"), _rec("x")
    marked = runner.compare_checks({1: (a2, "A", b"1"), 2: (b2, "B", b"2"), 3: (c2, "B", b"2")}, "nobody")
    assert marked == [a2] and "differs from the most common output" in a2["message"]
