"""Issue 10 measurements on real (tiny) runs: RSS over time for every run, latency
percentiles as a harness workload, tuning profiles that take effect, system calls split
into the allocator's and the program's, and the command line's messages."""
import os
import subprocess
import sys

import pytest

from larder_bench import allocators as A
from larder_bench import measure, report, runner, suites
from larder_bench.results import group
from larder_bench.suites import Entry

LB = [sys.executable, "-m", "larder_bench"]


def _run(entries, allocs, build, out, strace="none", repeats=1):
    return runner.run_entries(entries, allocs, build, out, repeats=repeats, strace_mode=strace, timeout=60)


def test_rss_series_is_stored_for_every_run_and_plotted(tmp_path, bench_build, monkeypatch):
    monkeypatch.setattr(measure, "RSS_INTERVAL_MS", 5.0)
    e = Entry("t", "leak", "heap-leak", "x", {"--objects": 20000, "--rounds": 3, "--size": 4000}, values=(1,),
              rss_plot=True)
    doc = _run([e], [A.Allocator("glibc", None)], bench_build, tmp_path)
    r = doc["runs"][0]
    assert r["status"] == "ok" and r["rusage_source"] == "launcher"
    ts = [t for t, _ in r["rss_series"]]
    assert len(ts) >= 2 and ts == sorted(ts) and r["rss_interval_ms"] == 5.0
    assert r["rss_peak_kb"] == max(k for _, k in r["rss_series"]) and r["rss_final_kb"] == r["rss_series"][-1][1]
    assert min(k for _, k in r["rss_series"]) <= r["rss_mean_kb"] <= r["rss_peak_kb"]
    # ru_maxrss is the kernel's exact peak; the sampled peak can only miss a short spike
    assert r["rss_peak_kb"] <= r["maxrss_kb"] * 1.05
    doc.update(suite="t", baseline="glibc")
    md, _ = report.write(doc, tmp_path, "glibc")
    assert (tmp_path / "plots" / "rss_time_leak.png").is_file()
    text = md.read_text()
    assert "rss_time_leak.png" in text and "mean RSS" in text and "final RSS" in text


def test_rss_sampling_can_be_turned_off(tmp_path, bench_build):
    rec = measure.run_child([str(bench_build / "bin" / "heap-leak"), "--objects", "10", "--rounds", "1"],
                            dict(os.environ), 30, rss_ms=0)
    assert rec["status"] == "ok" and "rss_series" not in rec


def test_latency_percentiles_for_any_allocator_are_monotone_with_units(tmp_path, bench_build):
    if not (bench_build / "bin" / "latency").is_file():
        pytest.fail("bench/latency is part of the build")
    e = Entry("t", "lat", "latency", "x", {"--ops": 20000, "--live-bytes": 1 << 20}, axis=None, kind="latency")
    larder = bench_build / "lib" / "liblarder.so"
    allocs = [A.Allocator("glibc", None)] + ([A.Allocator("larder", str(larder))] if larder.is_file() else [])
    doc = _run([e], allocs, bench_build, tmp_path)
    for r in doc["runs"]:
        assert r["status"] == "ok", r.get("message")
        f = r["figures"]
        for op in ("malloc", "free"):
            chain = [f[f"{op}_{k}_ns"] for k in ("p50", "p99", "p999", "p9999", "max")]
            assert chain == sorted(chain) and chain[0] > 0, (op, chain)
            qs = [q for q, _ in f[f"{op}_cdf_ns"]]
            ns = [v for _, v in f[f"{op}_cdf_ns"]]
            assert qs == sorted(qs) and ns == sorted(ns) and qs[-1] == 1 and ns[-1] == f[f"{op}_max_ns"]
    doc.update(suite="t", baseline="glibc")
    md, _ = report.write(doc, tmp_path, "glibc")
    text = md.read_text()
    assert "| allocator | operation | calls | p50 | p99 | p99.9 | p99.99 | max | mean |" in text
    assert " ns |" in text
    assert (tmp_path / "plots" / "latency_cdf_lat.png").is_file()


@pytest.mark.skipif(measure.strace_available() is None, reason="strace is not installed")
def test_profile_setting_takes_effect_and_syscalls_are_split(tmp_path, bench_build):
    """glibc's mmap threshold through GLIBC_TUNABLES in a profile: by default glibc mmaps the
    first 256 KiB block and then raises its threshold above it (dynamic threshold); a fixed
    threshold of 128 KiB makes it mmap every one. The loader's mappings are not the
    allocator's."""
    prof = A.parse_profile("glibc-mmap4k=glibc GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072:glibc.malloc.mmap_max=65536")
    allocs = A.apply_profiles([A.Allocator("glibc", None)], [prof])
    e = Entry("t", "mt", "malloc-test", "x", {"--size": 262144, "--iterations": 300}, values=(1,))
    doc = _run([e], allocs, bench_build, tmp_path, strace="last")
    st = {r["allocator"]: r for r in doc["runs"] if r["pass"] == "strace"}
    assert st["glibc"]["status"] == "ok" and st["glibc-mmap4k"]["status"] == "ok"
    if st["glibc"].get("strace_attribution") != "stack":
        pytest.skip("this strace cannot print stacks (-k)")
    base, tuned = st["glibc"], st["glibc-mmap4k"]
    assert tuned["syscalls_alloc"]["mmap"] >= 300 > 10 >= base["syscalls_alloc"]["mmap"]
    assert tuned["syscalls_alloc"]["munmap"] >= 300
    # the program's own share (loader, thread stack) is the same whatever the tunable
    assert abs(tuned["syscalls_program"]["mmap"] - base["syscalls_program"]["mmap"]) <= 2
    assert base["syscalls"]["mmap"] > base["syscalls_alloc"]["mmap"]
    assert doc["allocators"][1]["profile_of"] == "glibc"
    assert tuned["argv"] == base["argv"]


def test_suites_of_issue_10_select_and_name_their_profiles():
    names = suites.suite_names()
    for s in ("server", "latency", "tuning"):
        assert s in names and suites.select(s)
    quick = {e.series for e in suites.select("quick")}
    assert {"churn", "server-mix"} <= quick
    server = {e.series: e for e in suites.select("server")}
    assert server["churn-256"].values == (10_000, 100_000, 1_000_000)
    assert server["larson-server"].metric_name == "ops_per_cpu_s" and server["larson-server"].higher_better
    assert server["free-contention"].values == (1, 2, 4, 8)
    assert server["server-mix"].values == (2, 4) and server["server-mix"].params["--seconds"] == 20
    profs = suites.profiles_for("tuning")
    assert {p.base for p in profs} == {"glibc", "tcmalloc", "jemalloc", "mimalloc", "larder"}
    assert all(e.strace == "all" and e.values == (1, 2, 4) for e in suites.select("tuning"))
    m = suites.with_metrics(suites.select("quick", ["larson"]), {"larson": "ops_per_cpu_s"})
    assert m[0].metric_name == "ops_per_cpu_s" and m[0].higher_better


def test_ops_per_cpu_second_is_derived_from_wait4_times():
    from larder_bench.results import metric_value
    run = {"figures": {"ops": 1000}, "user_s": 0.3, "sys_s": 0.2}
    assert metric_value(run, "ops_per_cpu_s") == pytest.approx(2000)
    assert metric_value({"figures": {"ops_per_cpu_s": 5}}, "ops_per_cpu_s") == 5


def test_run_with_nothing_built_says_how_to_build(tmp_path):
    r = subprocess.run(LB + ["run", "--build-dir", str(tmp_path / "nobuild"), "--output-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "make build" in r.stderr and "Traceback" not in r.stderr
    assert not any(tmp_path.iterdir()) or all(p.name == "nobuild" for p in tmp_path.iterdir())


def test_output_piped_into_head_ends_quietly(bench_build):
    p = subprocess.Popen(LB + ["list", "--build-dir", str(bench_build)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.stdout.close()  # like head -1
    err = p.stderr.read()
    p.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_missing_trace_file_gets_one_clear_line(tmp_path):
    r = subprocess.run(LB + ["trace", "stats", str(tmp_path / "none.ltr")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [f"larder-bench trace: {tmp_path / 'none.ltr'}: cannot read the trace: "
                                             f"no such file or directory"]


def test_missing_workload_program_is_skipped_with_a_message(tmp_path, bench_build):
    e = Entry("t", "not-yet", "no-such-workload", "x", {}, values=(1,))
    ok = Entry("t", "leak", "heap-leak", "x", {"--objects": 10, "--rounds": 1}, values=(1,))
    doc = _run([e, ok], [A.Allocator("glibc", None)], bench_build, tmp_path)
    assert any("no-such-workload not found" in p["message"] and "skipped" in p["message"] for p in doc["problems"])
    assert [r["series"] for r in doc["runs"]] == ["leak"] and doc["runs"][0]["status"] == "ok"
