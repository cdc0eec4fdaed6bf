"""The `mimalloc-bench` suite: mimalloc-bench's programs with its bench.sh arguments, compared by
wall time or, for the fixed-time ones, by the relative time bench.sh derives from their output;
skipped with a hint to scripts/mimalloc-bench.sh when they are not built."""
from larder_bench import commands, runner, suites
from larder_bench.programs import mimalloc_bench


def test_the_suite_lists_bench_sh_programs_and_their_figures():
    entries = suites.select("mimalloc-bench")
    names = [e.series for e in entries]
    assert len(names) == 19 and names[:3] == ["cfrac", "espresso", "barnes"]
    by_figure = {e.series for e in entries if e.metric_name == "relative_time_s"}
    assert by_figure == {"larsonN", "larsonN-sized", "xmalloc-testN", "rptestN", "glibc-thread"}
    assert all(e.metric_name == "wall_s" for e in entries if e.series not in by_figure)
    assert all(not e.higher_better and e.kind == "program" for e in entries)
    larson = next(e for e in entries if e.series == "larsonN")
    assert larson.command.argv[1:] == ("5", "8", "1000", "5000", "100", "4141", str(mimalloc_bench.PROCS))
    # bench.sh's conversions: larson's own relative time, rptest's 2e6 / operations per CPU-second
    assert larson.command.figure.read("Throughput = 59457144 operations per second, relative time: 16.819s.") == 16.819
    rptest = next(e for e in entries if e.series == "rptestN")
    assert rptest.command.figure.read("crt 2 threads ...........2000000 memory ops/CPU second (12MiB peak)") == 1.0


def test_programs_not_built_are_skipped_with_how_to_build_them(tmp_path):
    (tmp_path / "CMakeCache.txt").write_text("")
    e = next(e for e in suites.select("mimalloc-bench") if e.series == "cfrac")
    subst = commands.entry_subst(e, commands.base_subst(tmp_path, tmp_path / "out"))
    msg = runner._command_skip(e, subst)
    assert msg is not None and msg.startswith("cfrac: unknown program ")
    assert f"{tmp_path.resolve()}/mimalloc-bench/cfrac" in msg
    assert "scripts/mimalloc-bench.sh" in msg and msg.endswith("; skipped")
