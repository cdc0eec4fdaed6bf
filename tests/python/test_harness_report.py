"""The report, CSV and plots are rebuilt from a stored results.json
(tests/python/data/results_small.json: a real quick-suite subset, glibc and jemalloc)."""
import csv
import json
import shutil

from conftest import DATA

from larder_bench import cli, report, results


def _copy(tmp_path):
    d = tmp_path / "res"
    d.mkdir()
    shutil.copy(DATA / "results_small.json", d / "results.json")
    return d


def test_report_from_stored_results(tmp_path):
    d = _copy(tmp_path)
    doc = results.load(d)
    md, ht = report.write(doc, d, "glibc")
    text = md.read_text()
    series = [e["series"] for e in doc["entries"]]
    # A table per series, with the allocators as columns and the ratio column.
    for s in series:
        assert f"## {s}: " in text
    assert "| jemalloc / glibc |" in text
    # Medians with their spread, e.g. "206 (204–207)".
    assert "–" in text and "(" in text
    # The heap-leak predictor, recalibrated per allocator next to the seed's.
    assert "recalibrated mpf_lower" in text and "14.0 + 1.1·t·r + 127.6·t" in text
    # System-call counts from the strace pass.
    assert "| mmap | munmap | brk | mremap | madvise |" in text
    # Plots: the verdict's ratios per series, speedup, false-sharing sweep, heap-leak, blowup.
    plots = {p.name for p in (d / "plots").glob("*.png")}
    for name in ("verdict.png", "speedup_threadtest.png", "false_share_false-share.png",
                 "heap_leak_heap-leak-t1.png", "heap_leak_heap-leak-t3.png", "blowup_blowup.png"):
        assert name in plots, plots
        assert (d / "plots" / name).stat().st_size > 5000
        assert f"plots/{name}" in text
    assert ht.read_text().startswith("<!DOCTYPE html>")
    assert "<table>" in ht.read_text()


def test_report_medians_match_the_raw_runs(tmp_path):
    doc = results.load(_copy(tmp_path))
    # Recompute one median by hand from the raw runs and find it in the summary table.
    runs = [r for r in doc["runs"] if r["series"] == "heap-leak-t3" and r["x"] == 4
            and r["allocator"] == "glibc" and r["pass"] == "measure" and r["status"] == "ok"]
    vals = sorted(r["figures"]["minflt"] for r in runs)
    med = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    hdr, rows = report.summary_table(results.group(doc), "glibc")
    row = next(r for r in rows if r[0] == "heap-leak-t3")
    assert row[3] == report.fmt(med, "minflt")
    jm = [r["figures"]["minflt"] for r in doc["runs"] if r["series"] == "heap-leak-t3" and r["x"] == 4
          and r["allocator"] == "jemalloc" and r["pass"] == "measure"]
    jmed = sorted(jm)[len(jm) // 2] if len(jm) % 2 else sum(sorted(jm)[len(jm) // 2 - 1:len(jm) // 2 + 1]) / 2
    assert row[4] == f"×{jmed / med:.2f}"


def test_csv_has_every_run(tmp_path):
    d = _copy(tmp_path)
    doc = results.load(d)
    results.write_csv(doc, d / "results.csv")
    with open(d / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(doc["runs"])
    assert {"wall_s", "maxrss_kb", "minflt", "nvcsw", "nivcsw", "syscall.mmap", "fig.minflt"} <= set(rows[0])


def test_report_command(tmp_path, capsys):
    d = _copy(tmp_path)
    assert cli.main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert "heap-leak-t1" in out and "jemalloc" in out
    assert (d / "report.md").is_file() and (d / "report.html").is_file()


def test_report_command_bad_input(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nothing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "results.json").write_text(json.dumps({"x": 1}))
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "not a larder-bench results file" in capsys.readouterr().err
    d = _copy(tmp_path)
    assert cli.main(["report", str(d), "--baseline", "nope"]) == 2
