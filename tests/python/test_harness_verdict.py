"""The verdict at a glance: geometric means over every series, wins/ties/losses with the noise
rule, the worst series, and the plot whose axis is not stretched by an outlier."""
import math

from larder_bench import plots, verdict
from larder_bench.report import build
from larder_bench.results import group


def _doc(series: dict, kinds: dict | None = None, metrics: dict | None = None) -> dict:
    """series: {name: {allocator: [(time, maxrss_kb), ...]}} -> a results document."""
    entries, runs = [], []
    for name, per_alloc in series.items():
        metric = (metrics or {}).get(name, "elapsed_s")
        entries.append({"series": name, "workload": name, "title": name, "kind": (kinds or {}).get(name, "compare"),
                        "metric": metric, "higher_is_better": metric.endswith("_per_s"), "axis": None,
                        "values": [None], "variants": [], "params": {}})
        for alloc, reps in per_alloc.items():
            for i, (t, rss) in enumerate(reps):
                runs.append({"series": name, "workload": name, "variant": "", "x": None, "allocator": alloc,
                             "repeat": i, "pass": "measure", "status": "ok", "wall_s": t + 0.01,
                             "maxrss_kb": rss, "figures": {metric: t}})
    allocs = []
    for per_alloc in series.values():
        allocs += [a for a in per_alloc if a not in allocs]
    return {"entries": entries, "runs": runs, "allocators": [{"name": a} for a in allocs], "problems": []}


def test_geomean_wins_ties_losses_and_worst():
    doc = _doc({
        # x: clearly faster (ranges apart), same memory
        "a": {"glibc": [(1.0, 1000), (1.02, 1000), (0.98, 1000)], "x": [(0.5, 1000), (0.51, 1000), (0.49, 1000)]},
        # x: clearly slower (x4), twice the memory
        "b": {"glibc": [(1.0, 1000), (1.01, 1000), (0.99, 1000)], "x": [(4.0, 2000), (4.1, 2000), (3.9, 2000)]},
        # x: 20% slower but the repeats overlap: a tie; 3% less memory: a tie
        "c": {"glibc": [(1.0, 1000), (0.7, 1000), (1.3, 1000)], "x": [(1.2, 970), (0.9, 970), (1.5, 970)]},
    })
    (v,) = verdict.verdicts(group(doc), "glibc")
    assert v.allocator == "x" and v.count("time") == 3
    assert math.isclose(v.geomean("time"), (0.5 * 4.0 * 1.2) ** (1 / 3), rel_tol=1e-9)
    assert math.isclose(v.geomean("rss"), (1 * 2 * 0.97) ** (1 / 3), rel_tol=1e-9)
    assert v.wtl("time") == (1, 1, 1)
    assert v.wtl("rss") == (0, 2, 1)
    assert v.worst("time") == ("b", 4.0) and v.worst("rss") == ("b", 2.0)
    hdr, rows = verdict.table(group(doc), "glibc")
    assert rows[0][:3] == ["glibc (baseline)", "3", "×1.00"]
    assert rows[1] == ["x", "3", "×1.34", "1 / 1 / 1", "b ×4.00", "×1.25", "0 / 2 / 1", "b ×2.00"]


def test_rates_are_inverted_and_non_time_series_use_their_time():
    doc = _doc({"r": {"glibc": [(100.0, 1000)], "x": [(200.0, 1000)]},          # a rate: twice the rate
                "f": {"glibc": [(3.0, 1000)], "x": [(6.0, 1000)]},              # compared by faults
                "k": {"glibc": [(1.0, 1000)], "x": [(9.0, 1000)]}},             # calibration: left out
               kinds={"k": "heap-leak-calib"}, metrics={"r": "ops_per_s", "f": "minflt"})
    (v,) = verdict.verdicts(group(doc), "glibc")
    pts = {p.series: p for p in v.points}
    assert set(pts) == {"r", "f"}
    assert math.isclose(pts["r"].time, 0.5) and pts["r"].time_cmp == -1
    # No time figure but the faults: the wall time (3.01 vs 6.01) stands for its time.
    assert pts["f"].time_figure == "wall_s" and math.isclose(pts["f"].time, 6.01 / 3.01)


def test_clip_range_keeps_the_bulk_and_leaves_outliers_out():
    vals = [0.9, 0.95, 1.0, 1.02, 1.1, 1.2, 0.85, 60.0]
    lo, hi = verdict.clip_range(vals)
    assert hi < 4 and lo > 0.25 and lo < 0.85 and hi > 1.2
    # Without an outlier every value fits.
    lo, hi = verdict.clip_range([0.5, 0.7, 1.0, 1.5, 2.5])
    assert lo < 0.5 and hi > 2.5


def test_plot_labels_an_outlier_instead_of_stretching_the_axis(tmp_path, monkeypatch):
    doc = _doc({f"s{i}": {"glibc": [(1.0, 1000)], "x": [(1.0 + i / 20, 1000 + 10 * i)]} for i in range(8)})
    doc2 = _doc({"big": {"glibc": [(1.0, 1000)], "x": [(50.0, 1000)]}})
    doc["entries"] += doc2["entries"]
    doc["runs"] += doc2["runs"]
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figs.append(fig) or path)
    path, outliers = plots.verdict_plot(group(doc), "glibc", tmp_path / "v.png")
    assert outliers == [("time", "x", "big", 50.0)]
    ax_time = figs[0].axes[0]
    assert ax_time.get_ylim()[1] < 4
    labels = [t.get_text() for t in ax_time.texts]
    assert "×50" in labels


def test_report_and_terminal_open_with_the_verdict(tmp_path):
    from larder_bench.report import terminal_summary
    doc = _doc({"a": {"glibc": [(1.0, 1000)], "x": [(0.5, 900)]}})
    md = build(doc, tmp_path, "glibc").markdown()
    assert md.index("## Verdict: each allocator against glibc") < md.index("## Environment")
    assert "| x | 1 | ×0.50 | 1 / 0 / 0 | a ×0.50 | ×0.90 | 1 / 0 / 0 | a ×0.90 |" in md
    text = terminal_summary(doc, "glibc")
    assert text.startswith("Verdict against glibc") and text.index("x ") < text.index("series  case")
