"""Any program as a workload: `--command` and `[commands.NAME]` run a real program under every
allocator like a built-in workload, and bad specifications get a clear message."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from larder_bench import commands
from larder_bench.cli import main as cli_main


def _cli(*args, cwd=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return subprocess.run([sys.executable, "-m", "larder_bench", *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=cwd)


def _only_dir(root):
    (out,) = [p for p in root.iterdir() if p.is_dir()]
    return out


def test_command_over_two_allocators_writes_results_report_and_verdict(tmp_path, bench_build):
    if not shutil.which("sqlite3"):
        pytest.fail("sqlite3 is missing: scripts/install-deps.sh installs it")
    sql = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000) "
           "SELECT count(*), sum(length(printf('%.*c', x % 200, 'a'))) FROM c")
    r = _cli("run", "--command", f"sq=sqlite3 :memory: \"{sql}\"", "--allocators", "glibc,larder", "--repeats", "3",
             "--build-dir", str(bench_build), "--output-dir", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = _only_dir(tmp_path)
    doc = json.loads((out / "results.json").read_text())
    assert doc["suite"] == "commands"
    meas = [x for x in doc["runs"] if x["pass"] == "measure"]
    # Three interleaved repeats under each allocator: glibc, larder, glibc, larder, ...
    assert [x["allocator"] for x in meas] == ["glibc", "larder"] * 3
    assert all(x["series"] == "sq" and x["status"] == "ok" for x in meas), [x.get("message") for x in meas]
    for x in meas:
        # Measured from outside like a workload: wall, CPU, peak RSS, RSS over time, faults, switches.
        assert x["wall_s"] > 0 and x["maxrss_kb"] > 0 and x["minflt"] > 0 and "nvcsw" in x and "nivcsw" in x
        assert x["rss_series"] and x["rss_peak_kb"] > 0
        assert x["argv"][0] == "sqlite3" and x["exit_code"] == 0
    larder = [x for x in meas if x["allocator"] == "larder"]
    assert all("LD_PRELOAD" not in x.get("extra_env", {}) for x in larder)
    # The allocator's system calls, from the strace pass (installed by scripts/install-deps.sh).
    if shutil.which("strace"):
        st = [x for x in doc["runs"] if x["pass"] == "strace"]
        assert {x["allocator"] for x in st} == {"glibc", "larder"}
        assert all(x["status"] == "ok" and x["syscalls"]["mmap"] > 0 for x in st)
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert sum(1 for row in rows if row["series"] == "sq" and row["pass"] == "measure") == 6
    md = (out / "report.md").read_text()
    # The report opens with the verdict table (before the environment), the program is a series.
    assert md.index("## Verdict: each allocator against glibc") < md.index("## Environment")
    assert "| glibc (baseline) | 1 | ×1.00 |" in md
    assert [ln for ln in md.splitlines() if ln.startswith("| larder | 1 | ×")], md[:2000]
    assert "## sq: sqlite3 :memory:" in md and "Command `sqlite3 :memory:" in md
    assert "plots/verdict.png" in md and (out / "plots" / "verdict.png").is_file()
    assert (out / "plots" / "rss_time_sq.png").is_file()
    assert "Verdict: each allocator against glibc" in (out / "report.html").read_text()
    # The terminal summary opens with the verdict too.
    assert r.stdout.startswith("Verdict against glibc")
    assert r.stdout.splitlines()[4].startswith("larder ")


def test_a_failing_command_is_reported_and_left_out(tmp_path, bench_build):
    r = _cli("run", "--command", "ok=true", "--command", "bad=false", "--allocators", "glibc,larder",
             "--repeats", "2", "--strace", "none", "--build-dir", str(bench_build), "--output-dir", str(tmp_path),
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = _only_dir(tmp_path)
    doc = json.loads((out / "results.json").read_text())
    bad = [x for x in doc["runs"] if x["series"] == "bad"]
    assert bad and all(x["status"] == "exit" and x["exit_code"] == 1 for x in bad)
    md = (out / "report.md").read_text()
    assert "bad [glibc]: exit: exited with status 1" in md
    # No median from failed runs: the series' cells say FAILED.
    assert "| – | FAILED | FAILED |" in md


def test_config_commands_with_cwd_env_params_and_scale(tmp_path, bench_build):
    work = tmp_path / "data"
    work.mkdir()
    (work / "input.txt").write_text("b\na\nc\n" * 100)
    cfg = tmp_path / "bench.toml"
    cfg.write_text(f"""
[commands.sorter]
cmd = ["sort", "-u", "input.txt"]
cwd = "{work}"
env = {{ LC_ALL = "C" }}
check = "cat {{stdout}}"

[commands.counter]
cmd = "seq {{n}}"
params = {{ n = 1000 }}
scale = ["n"]
""")
    r = _cli("run", "--config", str(cfg), "--allocators", "glibc,larder", "--repeats", "1", "--scale", "0.5",
             "--strace", "none", "--build-dir", str(bench_build), "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((_only_dir(tmp_path / "out") / "results.json").read_text())
    runs = {(x["series"], x["allocator"]): x for x in doc["runs"]}
    assert runs[("sorter", "larder")]["status"] == "ok" and runs[("sorter", "larder")]["check"]["bytes"] == 6
    # --scale multiplies the params listed in `scale`.
    assert runs[("counter", "glibc")]["argv"] == ["seq", "500"]
    # --workloads picks commands by name.
    r = _cli("run", "--config", str(cfg), "--workloads", "counter", "--allocators", "glibc", "--repeats", "1",
             "--strace", "none", "--build-dir", str(bench_build), "--output-dir", str(tmp_path / "o2"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((_only_dir(tmp_path / "o2") / "results.json").read_text())
    assert {x["series"] for x in doc["runs"]} == {"counter"}


@pytest.mark.parametrize("args,message", [
    (["--command", "x="], "empty command: give the program to run after x="),
    (["--command", "=true"], "empty name"),
    (["--command", "true"], "expected NAME=CMD ARGS..."),
    (["--command", "a b=true"], "expected NAME=CMD ARGS..."),
    (["--command", "x=no-such-program-larder-test --flag"],
     "x: unknown program 'no-such-program-larder-test' (not found on PATH or not executable)"),
    (["--command", "x=/nonexistent/prog"], "unknown program '/nonexistent/prog'"),
    (["--command", "a=true", "--command", "a=false"], "the name 'a' is used twice (--command and --command)"),
    (["--suite", "quick", "--command", "larson=true"], "the name 'larson' is used twice"),
    (["--command", "x/y=true"], "bad name 'x/y'"),
    (["--command", "x=true", "--workloads", "nope"], "no command named nope"),
])
def test_bad_command_specs_get_a_clear_message(tmp_path, bench_build, args, message, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc = cli_main(["run", *args, "--build-dir", str(bench_build), "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2, (args, err)
    assert message in err, (args, err)
    assert not any(tmp_path.iterdir()), "nothing may run on bad input"


@pytest.mark.parametrize("body,message", [
    ('[commands.a]\ncmd = ""\n', "commands.a: empty cmd"),
    ('[commands.a]\ncwd = "/tmp"\n', "commands.a: needs cmd"),
    ('[commands.a]\ncmd = "true"\nfrobnicate = 1\n', "unknown keys ['frobnicate']"),
    ('[commands.a]\ncmd = "true"\nenv = { LD_PRELOAD = "x.so" }\n', "env may not set LD_PRELOAD"),
    ('[commands.a]\ncmd = "true"\nserver = "true"\nhost = "10.0.0.1"\n', "host '10.0.0.1' is not a loopback address"),
    ('[commands.a]\ncmd = "true"\nidle = 3\n', "idle only apply to a server entry"),
    ('[commands.a]\ncmd = "true"\ntimeout = -1\n', "timeout must be a positive number"),
    ('[commands.a]\ncmd = "true"\nserver = "true"\nstop_signal = "KILL"\n', "not a signal a server can handle"),
    ('[commands.a]\ncmd = "true"\nscale = ["n"]\n', "scale must list names of params"),
    ('[commands]\na = 3\n', "commands.a: must be a table"),
    ('[commands.a]\ncmd = "true"\nfigure = { name = "ops", pattern = "[0-9]+ ops" }\n', "has no group"),
    ('[commands.a]\ncmd = "true"\nfigure = { name = "ops", pattern = "([0-9]+" }\n', "is not a regular expression"),
    ('[commands.a]\ncmd = "true"\nfigure = { name = "Ops/s", pattern = "([0-9]+)" }\n', "figure.name must be"),
    ('[commands.a]\ncmd = "true"\nfigure = { name = "ops", pattern = "([0-9]+)", unit = "s" }\n',
     "figure: unknown keys ['unit']"),
    ('[commands.a]\ncmd = "true"\nfigure = { name = "ops", pattern = "([0-9]+)", scale = 0 }\n',
     "figure.scale must be a positive number"),
    ('[commands.a]\ncmd = "true"\nfigure = "ops"\n', "figure must be a table with name and pattern"),
])
def test_bad_config_commands_get_a_clear_message(tmp_path, bench_build, body, message, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text(body)
    rc = cli_main(["run", "--config", str(cfg), "--build-dir", str(bench_build), "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2, (body, err)
    assert message in err, (body, err)
    assert not (tmp_path / "o").exists()


def test_a_command_compared_by_the_figure_it_prints(tmp_path, bench_build):
    # A benchmark that runs for a fixed time is compared by the rate it prints, not its wall time;
    # a run whose output lacks the figure is a failed run.
    cfg = tmp_path / "c.toml"
    cfg.write_text('''
[commands.rate]
cmd = ["sh", "-c", "echo warming up; echo 'Throughput = 2500 operations per second'"]
figure = { name = "ops_per_s", pattern = "Throughput = ([0-9]+) operations", higher_is_better = true }

[commands.inverse]
cmd = ["sh", "-c", "echo '200000 memory ops/CPU second'"]
figure = { name = "relative_time_s", pattern = "([0-9]+) memory ops", scale = 2e6, invert = true }

[commands.silent]
cmd = ["sh", "-c", "echo nothing to see"]
figure = { name = "ops_per_s", pattern = "Throughput = ([0-9]+)", higher_is_better = true }
''')
    r = _cli("run", "--config", str(cfg), "--allocators", "glibc,larder", "--repeats", "2", "--strace", "none",
             "--build-dir", str(bench_build), "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = _only_dir(tmp_path / "out")
    doc = json.loads((out / "results.json").read_text())
    runs = [x for x in doc["runs"] if x["pass"] == "measure"]
    rate = [x for x in runs if x["series"] == "rate"]
    assert len(rate) == 4 and all(x["status"] == "ok" and x["figures"]["ops_per_s"] == 2500 for x in rate)
    inverse = [x for x in runs if x["series"] == "inverse"]
    assert all(x["figures"]["relative_time_s"] == pytest.approx(10.0) for x in inverse)
    silent = [x for x in runs if x["series"] == "silent"]
    assert silent and all(x["status"] == "no-figure" and "has no ops_per_s" in x["message"] for x in silent)
    entries = {e["series"]: e for e in doc["entries"]}
    assert entries["rate"]["metric"] == "ops_per_s" and entries["rate"]["higher_is_better"] is True
    assert entries["inverse"]["metric"] == "relative_time_s" and entries["inverse"]["higher_is_better"] is False
    md = (out / "report.md").read_text()
    assert "ops_per_s ↑" in md and "silent [glibc]: no-figure" in md


def test_figure_reads_the_first_group_as_a_positive_number():
    f = commands.Figure("relative_time_s", r"rtime: ([0-9.]+)")
    assert f.read("setup\nrtime: 1.25, free/sec: 3 M\n") == 1.25
    assert f.read("rtime: 0\n") is None and f.read("no figure\n") is None
    g = commands.Figure("relative_time_s", r"^\s*([0-9.]+) iterations", scale=1e9, invert=True)
    assert g.read("  500000000 iterations\n") == pytest.approx(2.0)


def test_name_in_config_and_on_the_command_line_is_used_twice(tmp_path, bench_build, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[commands.a]\ncmd = "true"\n')
    rc = cli_main(["run", "--config", str(cfg), "--command", "a=true", "--build-dir", str(bench_build),
                   "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and f"the name 'a' is used twice (--command and config {cfg})" in err, err


def test_placeholders_lists_and_braces_left_alone():
    s = {"repo": "/r", "files": ["{repo}/a.c", "b.c"], "n": 3}
    assert commands.expand(["cc", "{files}", "-DN={n}", "awk", "{print $1}", "{unknown}"], s) == \
        ["cc", "/r/a.c", "b.c", "-DN=3", "awk", "{print $1}", "{unknown}"]


def test_repo_is_the_tree_a_build_folder_was_configured_from(tmp_path):
    """{repo} names the source tree: a build folder outside it (or a copy of one) keeps pointing
    at the tree through CMakeCache.txt (the traces of the replay series live there); without a
    cache, or when the cache names no folder, it is the build folder's parent."""
    tree = tmp_path / "src-tree"
    (tree / "traces").mkdir(parents=True)
    outside = tmp_path / "elsewhere" / "build"
    outside.mkdir(parents=True)
    (outside / "CMakeCache.txt").write_text(f"# cache\nCMAKE_HOME_DIRECTORY:INTERNAL={tree}\nX:BOOL=ON\n")
    assert commands.source_dir(outside) == tree.resolve()
    assert commands.base_subst(outside)["repo"] == str(tree.resolve())
    plain = tmp_path / "repo" / "build"
    plain.mkdir(parents=True)
    assert commands.source_dir(plain) == plain.parent.resolve()
    (plain / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={tmp_path / 'gone'}\n")
    assert commands.source_dir(plain) == plain.parent.resolve()
