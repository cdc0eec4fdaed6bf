"""A bad workload flag, a missing .so, crashing allocators, a timeout and a missing program:
each is recorded with a clear message in the report, and the other runs go on."""
from pathlib import Path

from conftest import CRASH_CTOR, CRASH_MALLOC, FAKE_ALLOC, build_so

from larder_bench import allocators as A
from larder_bench import report, results, runner
from larder_bench.suites import Entry


def test_failures_are_reported_and_the_suite_goes_on(tmp_path, bench_build, cc):
    crash = build_so(cc, tmp_path, "crashmalloc", CRASH_MALLOC)
    ctor = build_so(cc, tmp_path, "crashctor", CRASH_CTOR)
    allocs = [A.Allocator("glibc", None), A.parse_spec(f"crash={crash}"), A.parse_spec(f"ctor={ctor}"),
              A.parse_spec("ghost=/nonexistent/libghost.so")]
    entries = [
        Entry("t", "good", "heap-leak", "a run that works", {"--objects": 100, "--rounds": 1}, values=(1,)),
        Entry("t", "badflag", "heap-leak", "an unknown flag", {"--no-such-flag": 1}, values=(1,)),
        Entry("t", "slow", "larson", "longer than its timeout", {"--seconds": 30}, values=(1,), timeout=0.5),
        Entry("t", "noprog", "no-such-program", "a program that was never built", {}, values=(1,)),
    ]
    out = tmp_path / "out"
    out.mkdir()
    doc = runner.run_entries(entries, allocs, bench_build, out, repeats=2, strace_mode="none")
    results.save(doc, out)
    md, ht = report.write(doc, out, "glibc")
    text = md.read_text()

    runs = doc["runs"]
    by = lambda series, alloc: [r for r in runs if r["series"] == series and r["allocator"] == alloc]
    # The good entry ran on glibc, twice, and gave its figures.
    assert [r["status"] for r in by("good", "glibc")] == ["ok", "ok"]
    assert by("good", "glibc")[0]["figures"]["minflt"] > 0
    # Interleaved: glibc, crash, ctor, glibc, crash, ctor (ghost is not run at all).
    assert [r["allocator"] for r in runs if r["series"] == "good"] == ["glibc", "crash", "ctor"] * 2
    # A crashing malloc and a crashing constructor: killed by SIGABRT, recorded.
    for name in ("crash", "ctor"):
        rs = by("good", name)
        assert rs and all(r["status"] == "signal" and "SIGABRT" in r["message"] for r in rs)
    assert "good threads=1 [crash]: signal: killed by SIGABRT (6) (x2)" in text
    # The bad flag: exit 2 with the program's own first stderr line.
    bad = by("badflag", "glibc")[0]
    assert bad["status"] == "exit" and bad["exit_code"] == 2
    assert "bad command line" in bad["message"] and "--no-such-flag" in bad["message"]
    assert "badflag threads=1 [glibc]: exit: exited with status 2 (bad command line)" in text
    # The timeout: killed after 0.5 s, well before its 30 s.
    slow = by("slow", "glibc")
    assert all(r["status"] == "timeout" and r["wall_s"] < 10 for r in slow)
    assert "timed out after 0.5 s and was killed" in text
    # The missing library and the missing program are problems, not crashes of the harness.
    assert "allocator ghost skipped" in text and "/nonexistent/libghost.so not found" in text
    assert not any(r["allocator"] == "ghost" for r in runs)
    assert "noprog: workload program" in text and "not found" in text
    # Everything is in the HTML too, and the summary table marks the failures.
    html = ht.read_text()
    assert "killed by SIGABRT" in html and "timed out after 0.5 s" in html
    assert "FAILED" in report.terminal_summary(doc, "glibc")


def test_preload_that_cannot_load_is_not_measured_as_glibc(tmp_path, bench_build, cc):
    # ld.so ignores an unloadable preload and runs with glibc; the harness must say so.
    # An allocator library built for another machine (its ELF e_machine patched): it defines
    # malloc and free, so it is accepted, but ld.so cannot preload it and runs glibc instead.
    lib = build_so(cc, tmp_path, "fake", FAKE_ALLOC)
    data = bytearray(lib.read_bytes())
    data[18:20] = (0xB7).to_bytes(2, "little")  # EM_AARCH64
    bogus = tmp_path / "libotherarch.so"
    bogus.write_bytes(bytes(data))
    allocs = [A.parse_spec(f"broken={bogus}")]
    assert allocs[0].found
    entries = [Entry("t", "good", "heap-leak", "x", {"--objects": 10, "--rounds": 1}, values=(1,))]
    doc = runner.run_entries(entries, allocs, bench_build, tmp_path, repeats=1, strace_mode="none")
    r = doc["runs"][0]
    assert r["status"] == "preload-failed" and "cannot be preloaded" in r["message"]
