"""Hoard's fragmentation tables (seed 004 §5.4 Table 4, §5.5 Table 6): trace-frag's A and U on a
hand-made trace, and recorded runs of a workload turned into both tables."""
import json
import subprocess

import pytest

from larder_bench import allocators as A
from larder_bench import hoard, report, results, runner
from larder_bench.suites import Entry, Variant
from larder_bench.trace import fmt

# Two threads. Superblocks of 64 KiB at 0x10000000, 0x10010000, 0x10020000; one 20,000-byte
# block at 0x20000000 (above the 16 KiB small limit: counted as 5 pages, 20,480 bytes).
TRACE = """larder-trace 1 pid=1 ppid=0 start_ns=0 proc_start=0 exec_seq=0 flags=0 root_pid=1 comm=
block 11 0 5 0 0
1 malloc 100 0 0x0 0x10000010
2 malloc 100 0 0x0 0x10000080
5 free 0 0 0x10000010 0x0
6 free 0 0 0x10000080 0x0
8 free 0 0 0x20000000 0x0
block 12 1 3 0 0
3 malloc 100 0 0x0 0x10010010
4 malloc 20000 0 0x0 0x20000000
7 malloc 50 0 0x0 0x10020000
"""


@pytest.fixture(scope="module")
def trace_frag(bench_build):
    exe = bench_build / "bin" / "trace-frag"
    if not exe.is_file():
        pytest.fail(f"{exe} not built: run `make build`")
    return exe


def test_trace_frag_computes_hoards_max_allocated_and_in_use(tmp_path, trace_frag):
    path = tmp_path / "t.ltr"
    fmt.from_text(TRACE).write(path)
    r = subprocess.run([str(trace_frag), str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)["figures"]
    # U peaks at 100 + 100 + 100 + 20,000 = 20,300 (after t=4, in merged time order).
    assert f["max_in_use_bytes"] == 20300
    # A peaks then too: two superblocks with live blocks + the large block's 5 pages.
    assert f["max_allocated_bytes"] == 2 * 65536 + 20480 == f["allocated_at_max_in_use_bytes"]
    assert f["fragmentation"] == pytest.approx(151552 / 20300, abs=1e-4)
    # Page granularity: 0x10000000's page (shared by two blocks), 0x10010000's, and 5 pages.
    assert f["max_allocated_pages_bytes"] == 7 * 4096
    assert f["objects"] == 5 and f["total_requested_bytes"] == 20350 and f["average_size"] == pytest.approx(4070)
    assert f["threads"] == 2 and f["end_in_use_bytes"] == 150
    # A smaller superblock: 16 KiB each (and a small limit of 4 KiB makes the 20,000 B block large still).
    r = subprocess.run([str(trace_frag), str(path), "--superblock", "16384"], capture_output=True, text=True)
    assert json.loads(r.stdout)["figures"]["max_allocated_bytes"] == 2 * 16384 + 20480


# One thread: three blocks of 20 B live, freed, then three of 50 B (class by class), then one of
# 140 B. The classes peak at different times.
CLASS_TRACE = """larder-trace 1 pid=1 ppid=0 start_ns=0 proc_start=0 exec_seq=0 flags=0 root_pid=1 comm=
block 11 0 13 0 0
1 malloc 20 0 0x0 0x10000000
2 malloc 20 0 0x0 0x10000020
3 malloc 20 0 0x0 0x10000040
4 free 0 0 0x10000000 0x0
5 free 0 0 0x10000020 0x0
6 free 0 0 0x10000040 0x0
7 malloc 50 0 0x0 0x10010000
8 malloc 50 0 0x0 0x10010040
9 malloc 50 0 0x0 0x10010080
10 free 0 0 0x10010000 0x0
11 free 0 0 0x10010040 0x0
12 free 0 0 0x10010080 0x0
13 malloc 140 0 0x0 0x10020000
"""


def test_trace_frag_class_figures(tmp_path, trace_frag):
    """Segregation by size class (issue 15): the sum of each class's own peak against the peak of
    all live bytes, for larder's classes and for a coalescing pool above a size."""
    path = tmp_path / "c.ltr"
    fmt.from_text(CLASS_TRACE).write(path)

    def figures(*args):
        r = subprocess.run([str(trace_frag), str(path), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    out = figures()
    f = out["figures"]
    assert out["params"]["classes_per_doubling"] == 8 and out["params"]["coalesce_above"] == 0
    assert f["max_in_use_bytes"] == 150
    # 20 B in the 32 B class, 50 B in the 64 B class, 140 B in the 144 B class (16-byte steps
    # between 128 and 256 at 8 classes a doubling). The rounded sum peaks at 3 x 64; the
    # classes' own peaks add up to 3 x 32 + 3 x 64 + 144.
    assert f["class_rounded_max_in_use_bytes"] == 192
    assert f["class_peaks_sum_bytes"] == 96 + 192 + 144
    assert f["class_segregation"] == pytest.approx(432 / 150, abs=1e-4)
    # Two classes a doubling: 140 B rounds to 192.
    f = figures("--classes-per-doubling", "2")["figures"]
    assert f["class_rounded_max_in_use_bytes"] == 192 and f["class_peaks_sum_bytes"] == 96 + 192 + 192
    # Everything above 16 B in one coalescing pool, 16-byte steps and a 16-byte header each:
    # 3 x 48, then 3 x 80, then 160. The pool's peak is all it needs.
    f = figures("--coalesce-above", "16")["figures"]
    assert f["class_peaks_sum_bytes"] == 3 * 80
    assert f["class_segregation"] == pytest.approx(240 / 150, abs=1e-4)
    # Above 100 B only: the 32 and 64 B classes stay apart, 140 B joins the pool as 160.
    assert figures("--coalesce-above", "100")["figures"]["class_peaks_sum_bytes"] == 96 + 192 + 160


@pytest.mark.parametrize("args,code,message", [
    (["--classes-per-doubling", "0"], 2, "--classes-per-doubling must be from 1 to 64"),
    (["--classes-per-doubling", "65"], 2, "--classes-per-doubling must be from 1 to 64"),
    (["--coalesce-above", "8"], 2, "--coalesce-above must be at least 16"),
    (["--superblock", "1000"], 2, "--superblock must be a power of two"),
    (["--page", "x"], 2, "--page takes a positive integer"),
    (["--bogus"], 2, "unknown flag --bogus"),
])
def test_trace_frag_rejects_bad_flags(tmp_path, trace_frag, args, code, message):
    path = tmp_path / "t.ltr"
    fmt.from_text(TRACE).write(path)
    r = subprocess.run([str(trace_frag), str(path), *args], capture_output=True, text=True)
    assert r.returncode == code and message in r.stderr, r.stderr


def test_trace_frag_unreadable_trace(tmp_path, trace_frag):
    bad = tmp_path / "bad.ltr"
    bad.write_bytes(b"not a trace at all")
    r = subprocess.run([str(trace_frag), str(bad)], capture_output=True, text=True)
    assert r.returncode == 3 and "not a larder trace" in r.stderr


def test_recorded_runs_give_table_4_and_table_6(tmp_path, bench_build):
    larder = [a for a in A.detect(bench_build) if a.name == "larder"]
    assert larder and larder[0].found
    tt = {"--iterations": 2, "--objects": 5000, "--size": 8}
    entries = [
        Entry("t", "frag-tt", "threadtest", "Table 4", tt, values=(2,),
              variants=(Variant("S=64K", env={"LARDER_SUPERBLOCK_SIZE": "65536"}),
                        Variant("S=16K", env={"LARDER_SUPERBLOCK_SIZE": "16384"})),
              kind="hoard-frag", metric="hoard_fragmentation", allocators=("larder",), strace="none", trace_frag=True),
        Entry("t", "frag-f-tt", "threadtest", "Table 6", tt, values=(1, 2),
              variants=tuple(Variant(f"f={f}", env={"LARDER_EMPTY_FRACTION": f}) for f in ("0.125", "0.5")),
              kind="hoard-frag-f", metric="hoard_fragmentation", allocators=("larder",), strace="none",
              trace_frag=True),
    ]
    out = tmp_path / "out"
    out.mkdir()
    doc = runner.run_entries(entries, larder, bench_build, out, repeats=2, strace_mode="none")
    runs = doc["runs"]
    assert len(runs) == 2 * 2 + 2 * 2 * 2 and all(r["status"] == "ok" for r in runs), [r.get("message") for r in runs]
    for r in runs:
        f = r["figures"]
        # threadtest divides its 5,000 8-byte objects among the threads: all live at the peak.
        assert f["hoard_max_in_use_bytes"] >= 5000 * 8
        assert f["hoard_max_allocated_bytes"] >= f["hoard_max_in_use_bytes"] and f["hoard_fragmentation"] >= 1
        assert f["hoard_objects"] >= 2 * 5000 and f["elapsed_s"] > 0 and f["hoard_threads"] == r["x"] + 1
        assert "LARDER_TRACE_FILE" not in r.get("extra_env", {})
    sb = {r["variant"]: r["trace_frag_params"]["superblock"] for r in runs if r["series"] == "frag-tt"}
    assert sb == {"S=64K": 65536, "S=16K": 16384}
    # The traces were processed and deleted.
    assert not (out / "traces-tmp").exists()
    results.save(doc, out)
    md = report.write(doc, out, "glibc")[0].read_text()
    assert "## Hoard's fragmentation (seed 004 §5.4 Table 4, §5.5 Table 6)" in md
    assert "| threadtest (larder) | 2 | 64 KiB |" in md and "| threadtest (larder) | 2 | 16 KiB |" in md
    assert "| threadtest: Hoard, seed 004 (14 CPUs, S = 8 KiB) | 14 | 8 KiB | 1.24 | 1,068,864 | 1,324,848 |" in md
    assert "| workload | threads | f = 1/8 | f = 1/2 |" in md
    assert "| threadtest: Hoard, seed 004 (14 CPUs, S = 8 KiB) | 14 | 1.22 | 1.22 |" in md
    assert (out / "plots" / "hoard_fragmentation_by_f.png").stat().st_size > 5000
    t6 = hoard.table6_data(next(s for s in results.group(doc) if s.name == "frag-f-tt"))
    assert set(t6) == {1, 2} and set(t6[1]) == {0.125, 0.5}


def test_replay_series_says_what_the_traces_size_classes_cost(tmp_path, bench_build):
    """A trace-replay series: the runner runs trace-frag once on its trace (the same for every
    allocator) and the report says the size-class figures beside the fragmentation table."""
    larder = [a for a in A.detect(bench_build) if a.name == "larder"]
    assert larder and larder[0].found
    path = tmp_path / "c.ltr"
    fmt.from_text(CLASS_TRACE).write(path)
    entries = [Entry("t", "replay-c", "trace-replay", "a hand-made trace", {"--trace": str(path), "--iterations": 1},
                     values=(1,), kind="compare", metric="fragmentation_pct", higher_is_better=False,
                     allocators=("larder",), strace="none")]
    out = tmp_path / "out"
    out.mkdir()
    doc = runner.run_entries(entries, larder, bench_build, out, repeats=2, strace_mode="none")
    assert all(r["status"] == "ok" for r in doc["runs"]), [r.get("message") for r in doc["runs"]]
    figs = doc["trace_classes"][str(path)]
    # CLASS_TRACE's figures (test_trace_frag_class_figures): 150 B live at the peak, 192 rounded,
    # 432 for the classes apart; nothing above 1,024 or 4,096 B, so the pools change nothing.
    assert figs["max_in_use_bytes"] == 150 and figs["class_rounded_max_in_use_bytes"] == 192
    assert figs["class_segregation"] == pytest.approx(432 / 150, abs=1e-4)
    assert figs["coalesce_above"] == {"4096": figs["class_segregation"], "1024": figs["class_segregation"]}
    results.save(doc, out)
    md = report.write(results.load(out), out, "glibc")[0].read_text()
    assert "What this trace's size classes alone cost it" in md
    assert "up by +28.0%" in md and "is +188.0%" in md and "above 4,096 B in one coalescing pool +188.0%" in md
    # A series of another workload gets no such note.
    assert report.trace_classes_note(doc, {"workload": "churn", "params": {}}) is None
