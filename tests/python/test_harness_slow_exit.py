"""The report names an allocator whose processes take much longer than the work they report
(report.slow_start_or_exit): larder's exit once waited 2 s for a purge thread that had never
started, and the quick suite's 1 s soak took 3.2 s under it while every figure of the run
looked normal."""
from larder_bench import report


def _run(alloc, wall, elapsed, series="soak", repeat=0, **kw):
    r = {"series": series, "workload": series, "variant": "", "axis": None, "x": None, "allocator": alloc,
         "repeat": repeat, "pass": "measure", "status": "ok", "wall_s": wall, "figures": {"elapsed_s": elapsed}}
    r.update(kw)
    return r


def _doc(runs):
    return {"runs": runs, "problems": []}


def test_a_slow_exit_is_named_with_its_figures():
    runs = [_run("glibc", 1.02, 1.00, repeat=i) for i in range(3)] + \
           [_run("larder", 3.17, 1.00, repeat=i) for i in range(3)]
    lines = report.slow_start_or_exit(_doc(runs))
    assert len(lines) == 1
    assert lines[0].startswith("soak [larder]: SLOW START OR EXIT: the process took 3.17 s for 1.00 s of work")
    assert "2.17 s outside it" in lines[0] and "against 0.02 s for glibc" in lines[0]
    assert lines[0] in report.failures(_doc(runs))


def test_no_line_within_a_second_or_within_half_the_work():
    # 0.9 s more than the best: within the bound; 1.5 s more on 10 s of work: under half of it
    short = [_run("glibc", 1.02, 1.0), _run("larder", 1.92, 1.0)]
    long = [_run("glibc", 10.1, 10.0, series="churn"), _run("larder", 11.6, 10.0, series="churn")]
    assert report.slow_start_or_exit(_doc(short + long)) == []


def test_runs_that_failed_or_carry_no_work_time_are_left_out():
    runs = [_run("glibc", 1.0, 1.0), _run("larder", 5.0, 1.0, status="crashed"),
            _run("larder", 5.0, None), _run("jemalloc", 5.0, 1.0, **{"pass": "strace"})]
    runs[2]["figures"] = {}
    assert report.slow_start_or_exit(_doc(runs)) == []


def test_cases_are_compared_apart():
    runs = [_run("glibc", 1.0, 1.0, axis="--threads", x=1), _run("larder", 1.0, 1.0, axis="--threads", x=1),
            _run("glibc", 1.0, 1.0, axis="--threads", x=2), _run("larder", 4.0, 1.0, axis="--threads", x=2)]
    lines = report.slow_start_or_exit(_doc(runs))
    assert len(lines) == 1 and lines[0].startswith("soak threads=2 [larder]")
