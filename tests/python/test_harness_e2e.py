"""`larder-bench run` end to end on real workloads over glibc, and `larder-bench list`."""
import json
import os
import subprocess
import sys

from conftest import REPO


def _cli(*args, **kw):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return subprocess.run([sys.executable, "-m", "larder_bench", *args], capture_output=True, text=True,
                          env=env, timeout=120, **kw)


def test_run_two_tiny_workloads_over_glibc(tmp_path, bench_build):
    r = _cli("run", "--suite", "quick", "--workloads", "threadtest,heap-leak-calib", "--allocators", "glibc",
             "--repeats", "2", "--threads", "1,2", "--set", "threadtest:--iterations=3",
             "--build-dir", str(bench_build), "--output-dir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (out,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    doc = json.loads((out / "results.json").read_text())
    meas = [x for x in doc["runs"] if x["pass"] == "measure"]
    # threadtest at 1 and 2 threads plus the heap-leak calibration, two repeats each.
    assert len(meas) == 6 and all(x["status"] == "ok" for x in meas), (r.stderr[-3000:], [x.get("message") for x in meas])
    tt = [x for x in meas if x["series"] == "threadtest"]
    assert sorted(x["x"] for x in tt) == [1, 1, 2, 2]
    assert all(x["figures"]["elapsed_s"] > 0 and x["wall_s"] >= x["figures"]["elapsed_s"] for x in tt)
    assert all(x["maxrss_kb"] > 0 and x["minflt"] > 0 and x["rusage_source"] == "launcher" for x in meas)
    # Peak RSS is the workload's own, not the harness's (tens of MiB with matplotlib loaded).
    calib = [x for x in meas if x["series"] == "heap-leak-calib"]
    assert all(x["maxrss_kb"] < 16 * 1024 for x in calib), [x["maxrss_kb"] for x in calib]
    assert doc["environment"]["kernel"] and doc["environment"]["cores"] >= 1
    assert doc["allocators"][0]["name"] == "glibc"
    # The argv the harness ran carries the override and the thread count.
    assert "--iterations" in tt[0]["argv"] and tt[0]["argv"][tt[0]["argv"].index("--iterations") + 1] == "3"
    # strace pass (when strace is installed) at the largest case.
    if any(x["pass"] == "strace" for x in doc["runs"]):
        st = [x for x in doc["runs"] if x["pass"] == "strace" and x["series"] == "threadtest"]
        assert st and st[0]["x"] == 2 and st[0]["syscalls"]["mmap"] > 0
    for f in ("results.csv", "report.md", "report.html", "plots/speedup_threadtest.png"):
        assert (out / f).is_file(), f
    assert "threadtest" in r.stdout and "glibc" in r.stdout
    assert "[" in r.stderr and "/" in r.stderr  # the progress lines


def test_run_rejects_bad_options(tmp_path, bench_build):
    for args, msg in [(["--threads", "1,x"], "expected positive integers"),
                      (["--suite", "nope"], "unknown suite"),
                      (["--workloads", "nope"], "has no workload or series nope"),
                      (["--allocators", "nope"], "unknown allocator"),
                      (["--allocator", "bad"], "expected name=/path/lib.so"),
                      (["--set", "threadtest:iterations=3"], "must start with --"),
                      (["--baseline", "jemalloc", "--allocators", "glibc"], "not among the allocators")]:
        r = _cli("run", "--build-dir", str(bench_build), "--output-dir", str(tmp_path), *args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr, (args, r.stderr)


def test_list_shows_workloads_and_allocators(bench_build):
    r = _cli("list", "--build-dir", str(bench_build), cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "malloc-test" in r.stdout and "found" in r.stdout
    assert "glibc" in r.stdout and "Suites:" in r.stdout and "seeds" in r.stdout
