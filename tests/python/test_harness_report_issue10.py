"""The report cannot mislead (issue 10), checked on a stored results.json written by the
harness before the fix (tests/python/data/results_before_issue10.json: glibc, larder and
jemalloc; malloc-test, false-share and a sqlite trace replay; two malloc-test runs edited to
the invalid case the issue found, as the file's fixture_note says). Each test fails on the
report that harness wrote from the same file."""
import json
import shutil

import matplotlib
import pytest

from conftest import DATA
from larder_bench import plots, report
from larder_bench.results import group, load

matplotlib.use("Agg")
FIXTURE = DATA / "results_before_issue10.json"


@pytest.fixture()
def doc():
    return load(FIXTURE)


def test_fragmentation_is_compared_in_percentage_points_not_as_a_ratio(doc):
    # Before: "trace-replay threads=2 fragmentation_pct 1.44 ×21.34 ×46.94" (a heap 0.3 % larger
    # shown as 21 times worse).
    hdr, rows = report.summary_table(group(doc), "glibc")
    row = next(r for r in rows if r[0] == "trace-replay")
    others = row[4:]
    assert others and all(c.endswith(" pp") for c in others), row
    assert not any(c.startswith("×") for c in others)
    s = next(x for x in group(doc) if x.name == "trace-replay")
    hdr, rows = report._metric_table(s, "glibc")
    assert any("(pp)" in h for h in hdr) and not any(h.endswith("/ glibc") for h in hdr)
    glibc = s.cell("", 2, "glibc").metric.median
    larder = s.cell("", 2, "larder").metric.median
    assert rows[-1][hdr.index("larder − glibc (pp)")] == f"{larder - glibc:+.1f} pp"


def test_invalid_runs_are_flagged_and_left_out_of_medians(doc):
    # Before: the two clamped runs (net_s = 0) were medians' material and nothing was flagged.
    s = next(x for x in group(doc) if x.name == "malloc-test")
    c = s.cell("", 2, "larder")
    assert len(c.invalid) == 2 and c.ok == 1
    assert c.metric.n == 1 and c.metric.min > 0
    hdr, rows = report._metric_table(s, "glibc")
    assert "[2 invalid, left out]" in rows[-1][hdr.index("larder")]
    probs = report.failures(doc)
    line = next(p for p in probs if p.startswith("malloc-test threads=2 [larder]"))
    assert "INVALID" in line and "2 runs" in line and "null loop" in line


def test_false_sharing_contradiction_is_said_beside_the_table(doc, tmp_path):
    shutil.copy(FIXTURE, tmp_path / "results.json")
    md, _ = report.write(load(tmp_path), tmp_path, "glibc")
    text = md.read_text()
    assert "CONTRADICTS the source document: seed 000 §5.3" in text
    s = next(x for x in group(doc) if x.name == "false-share")
    note = report.false_share_contradictions(s)
    m, a = s.cell("malloc", 8, "glibc").metric.median, s.cell("aligned", 8, "glibc").metric.median
    assert (f"glibc ×{m / a:.2f}" in note) == (m / a < 1.2)


def test_overall_plot_never_mixes_kinds_of_figure(doc):
    # Before: fragmentation (a percentage) and times were bars on one axis. The verdict's time
    # panel holds only times: a series compared by another figure is represented by its time.
    from larder_bench import verdict
    pts = {p.series: p for v in verdict.verdicts(group(doc), "glibc") for p in v.points}
    assert pts["trace-replay"].time_figure == "time_s"
    assert pts["malloc-test"].time_figure == "net_s"
    assert all(p.time_figure.endswith("_s") for p in pts.values())


def _captured(monkeypatch):
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or path)
    return figs


def test_legends_outside_the_data_and_integer_thread_ticks(doc, monkeypatch, tmp_path):
    figs = _captured(monkeypatch)
    series = {s.name: s for s in group(doc)}
    plots.axis_plot(series["malloc-test"], tmp_path / "a.png")
    plots.axis_plot(series["trace-replay"], tmp_path / "b.png")
    plots.axis_plot(series["false-share"], tmp_path / "c.png", logx=True)
    assert len(figs) == 3
    for fig in figs:
        fig.canvas.draw()
        ax = fig.axes[0]
        leg = ax.get_legend()
        assert leg is not None
        lb = leg.get_window_extent()
        axb = ax.get_window_extent()
        assert lb.x0 >= axb.x1 - 1, "the legend must sit outside the plotting area"
        assert ax.get_title() and ax.get_ylabel(), "title and axis say what is plotted"
    for fig in figs[:2]:   # thread axes
        ticks = fig.axes[0].get_xticks()
        assert all(float(t).is_integer() for t in ticks) and set(ticks) <= {1, 2}


def test_stored_results_still_load_and_report(doc, tmp_path):
    shutil.copy(FIXTURE, tmp_path / "results.json")
    md, ht = report.write(load(tmp_path), tmp_path, "glibc")
    assert md.is_file() and ht.is_file()
    assert json.loads(FIXTURE.read_text())["fixture_note"]


def _tuning_doc():
    """A tuning series as the runner writes it: glibc and a profile of it, one thread."""
    entry = {"series": "tuning-x", "workload": "trace-replay", "title": "t", "kind": "tuning", "metric": "time_s",
             "higher_is_better": False, "axis": "--threads", "values": [1], "params": {"--trace": "x.ltr"},
             "variants": [{"label": "", "params": {}, "env": {}}]}
    runs = []
    for a, t, frag, mmap, brk in (("glibc", 0.10, 9.0, 1, 4), ("glibc-cpu", 0.08, 9.5, 0, 4)):
        for rep in range(3):
            runs.append({"series": "tuning-x", "workload": "trace-replay", "variant": "", "axis": "--threads", "x": 1,
                         "allocator": a, "repeat": rep, "pass": "measure", "status": "ok",
                         "figures": {"time_s": t + rep * 0.001, "fragmentation_pct": frag,
                                     "peak_heap_rss_bytes": 6 << 20, "peak_live_bytes": 5 << 20}})
        runs.append({"series": "tuning-x", "workload": "trace-replay", "variant": "", "axis": "--threads", "x": 1,
                     "allocator": a, "repeat": 0, "pass": "strace", "status": "ok",
                     "syscalls": {"mmap": 50 + mmap, "munmap": 20, "brk": brk + 2, "mremap": 0, "madvise": 0},
                     "syscalls_alloc": {"mmap": mmap, "munmap": 0, "brk": brk, "mremap": 0, "madvise": 0}})
    return {"entries": [entry], "runs": runs, "problems": [], "suite": "tuning",
            "allocators": [{"name": "glibc", "found": True}, {"name": "glibc-cpu", "found": True, "profile_of": "glibc"}]}


def test_tuning_table_has_the_thesis_form_and_figures_beside_it(tmp_path):
    doc = _tuning_doc()
    s = group(doc)[0]
    (label, hdr, rows), = report.tuning_tables(s, {"glibc-cpu": "glibc"})
    assert label == "threads=1"
    row = dict(zip(hdr, rows[1]))
    assert row["allocator / profile"] == "glibc-cpu" and row["× own default"] == "×0.80"
    assert row["mmap (allocator's / all)"] == "0 / 50" and row["brk (allocator's / all)"] == "4 / 6"
    assert row["fragmentation"] == "9.50%"
    # seed 003 Tables 6-18..6-21, scenario 1: CPUProfile 2.04 s vs default 2.23 s, 6.68%, 18 mmap, 3 sbrk
    assert (row["thesis: time × default"], row["thesis: fragmentation"], row["thesis: mmap"], row["thesis: sbrk"]) == \
        ("×0.91", "6.68%", "18", "3")
    md, _ = report.write(doc, tmp_path, "glibc")
    assert "thesis: time × default" in md.read_text()
