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
    # Before: fragmentation (a percentage) and times were bars on one axis.
    rows, _ = plots.time_rss_rows(group(doc), "glibc")
    names = [r[0] for r in rows]
    assert "trace-replay" not in names and "malloc-test" in names


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
