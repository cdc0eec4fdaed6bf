"""The suite table: selection, thread lists, work scaling, overrides and argv building."""
import io

import pytest

from larder_bench import suites
from larder_bench.measure import parse_strace_summary
from larder_bench.progress import Progress
from larder_bench.suites import Entry, Variant


def test_every_workload_is_in_quick_and_series_names_are_unique():
    quick = {e.workload for e in suites.SUITES if e.suite == "quick"}
    assert {"malloc-test", "heap-leak", "false-share", "active-false", "passive-false", "threadtest",
            "larson", "shbench", "free-contention", "blowup"} <= quick
    for s in suites.suite_names():
        names = [e.series for e in suites.SUITES if e.suite == s]
        assert len(names) == len(set(names)), s


def test_seeds_suite_has_the_source_experiments():
    seeds = {e.series: e for e in suites.SUITES if e.suite == "seeds"}
    assert seeds["seed002-free"].values == (1, 2, 3, 4, 8)
    assert seeds["lb-bench2-t7"].values == tuple(range(1, 9))
    f = seeds["hoard-f-larson"]
    assert f.allocators == ("larder",)
    assert [v.env["LARDER_EMPTY_FRACTION"] for v in f.variants] == ["0.125", "0.25", "0.5"]


def test_select_filters_threads_scale_and_overrides():
    es = suites.select("quick", ["threadtest", "heap-leak-calib"], threads=(1, 2, 4), scale=0.5,
                       overrides={("threadtest", "--size"): "16"}, cpus=2)
    tt = next(e for e in es if e.workload == "threadtest")
    calib = next(e for e in es if e.kind == "heap-leak-calib")
    assert tt.values == (1, 2, 4)
    assert tt.params["--iterations"] == 15 and tt.params["--size"] == "16"
    assert calib.axis is None and calib.params["--threads"] == 1  # calibration stays single-threaded
    with pytest.raises(suites.SuiteError, match="no workload or series"):
        suites.select("quick", ["nope"])
    with pytest.raises(suites.SuiteError, match="unknown suite"):
        suites.select("nope")
    with pytest.raises(suites.SuiteError):
        suites.select("quick", scale=0)


def test_scale_keeps_work_positive_and_uses_documented_defaults():
    e = Entry("x", "s", "active-false", "t", {}, work=("--iterations",))
    (got,) = suites.select("x", scale=0.01, table=[e])
    assert got.params["--iterations"] == 100  # 10000 (docs/benchmarks.md default) x 0.01
    e = Entry("x", "s", "larson", "t", {"--seconds": 0.3}, work=("--seconds",))
    (got,) = suites.select("x", scale=0.0001, table=[e])
    assert got.params["--seconds"] == 0.05


def test_resolve_values_follows_the_cpu_count():
    assert suites.resolve_values("1..2cpus", cpus=2) == (1, 2, 3, 4)
    assert suites.resolve_values("cpus", cpus=8) == (8,)
    assert suites.resolve_values((1, 3)) == (1, 3)
    with pytest.raises(suites.SuiteError):
        suites.resolve_values("many")


def test_argv_for_flags_variants_and_placeholders():
    e = Entry("x", "s", "prog", "t", {"--in": "{out_dir}/trace.bin", "--verbose": True, "--off": False},
              axis="--threads")
    argv = suites.argv_for(e, Variant("al", {"--aligned": True}), 4, "/b/prog", {"out_dir": "/r"})
    assert argv == ["/b/prog", "--in", "/r/trace.bin", "--verbose", "--aligned", "--threads", "4"]


def test_parse_strace_summary():
    text = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.00    0.000060           3        20           mmap
 30.00    0.000030           6         5         1 munmap
 10.00    0.000010           5         2           brk
------ ----------- ----------- --------- --------- ----------------
100.00    0.000100           3        27         1 total
"""
    assert parse_strace_summary(text) == {"mmap": 20, "munmap": 5, "brk": 2}


def test_progress_prints_lines_when_not_a_tty():
    out = io.StringIO()
    p = Progress(3, out)
    p.step("a [glibc]", "ok", "", 0.5)
    p.step("b [larder]", "signal", "killed by SIGSEGV (11)", 0.1)
    p.finish()
    text = out.getvalue()
    assert "\r" not in text
    assert "1/3" in text and "a [glibc] 0.50s" in text
    assert "FAILED b [larder]: killed by SIGSEGV (11)" in text
