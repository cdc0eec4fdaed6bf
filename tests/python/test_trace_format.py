"""The trace format in Python (harness/larder_bench/trace): round trips, errors that name the
byte offset, statistics with known answers, synthetic traces, and the command line."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from larder_bench.trace import cli, fmt, stats, synth

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LARDER_BUILD_DIR", REPO / "build"))


def hand_made() -> fmt.Trace:
    """Every operation, an odd alignment, a saturated size, a dying thread's block."""
    R = fmt.Record
    op = fmt.OP_CODES
    a = [R(10, op["malloc"], 100, 0, 0, 0x1000), R(20, op["calloc"], 300, 0, 0, 0x2000),
         R(30, op["realloc"], 500, 0, 0x1000, 0x3000), R(40, op["posix_memalign"], 64, 6, 0, 0x4000),
         R(50, op["aligned_alloc"], 256, 8, 0, 0x5000), R(60, op["memalign"], 10, fmt.ALIGN_BAD, 0, 0),
         R(70, op["valloc"], 4096, 0, 0, 0x7000), R(80, op["pvalloc"], 1, 0, 0, 0x8000),
         R(90, op["reallocarray"], fmt.SIZE_MAX, 0, 0x2000, 0)]
    b = [R(35, fmt.FREE, 0, 0, 0x3000, 0), R(45, fmt.FREE, 0, 0, 0xdead0, 0), R(55, fmt.FREE, 0, 0, 0, 0)]
    c = [R(100, fmt.FREE, 0, 0, 0x4000, 0)]
    h = fmt.Header(pid=77, ppid=1, start_ns=123456789, proc_start=42, exec_seq=2, comm="hand")
    return fmt.Trace(h, [fmt.Block(501, 0, a, 95, 95), fmt.Block(502, 1, b, 60, 60), fmt.Block(503, 0xFFFFFFFF, c, 101, 101)])


def test_tsc_times_convert_through_the_block_points():
    t = hand_made()
    assert t.seconds()(50) == 50e-9
    t.header.flags = fmt.FLAG_TSC
    t.blocks[0].clock_ticks, t.blocks[0].clock_ns = 200, 100       # 2 ticks per ns up to tick 200
    t.blocks[1].clock_ticks, t.blocks[1].clock_ns = 600, 150       # then 8 ticks per ns
    t.blocks[2].clock_ticks, t.blocks[2].clock_ns = 700, 140       # goes backwards: ignored
    sec = t.seconds()
    assert sec(100) == pytest.approx(50e-9) and sec(400) == pytest.approx(125e-9)
    assert sec(800) == pytest.approx(175e-9)                       # past the last point: last slope


def test_binary_text_binary_is_identical(tmp_path):
    t = hand_made()
    data = t.to_bytes()
    back = fmt.from_text(fmt.to_text(fmt.parse(data))).to_bytes()
    assert back == data
    s = synth.generate(synth.SynthParams(allocations=3000, threads=3, seed=5))
    sd = s.to_bytes()
    assert fmt.from_text(fmt.to_text(fmt.parse(sd))).to_bytes() == sd


def test_round_trip_through_the_command_line(tmp_path):
    t = hand_made()
    t.write(tmp_path / "a.ltr")
    assert cli.main(["totext", str(tmp_path / "a.ltr"), "-o", str(tmp_path / "a.txt")]) == 0
    assert cli.main(["tobin", str(tmp_path / "a.txt"), "-o", str(tmp_path / "b.ltr")]) == 0
    assert (tmp_path / "a.ltr").read_bytes() == (tmp_path / "b.ltr").read_bytes()


def test_recorded_trace_round_trip(tmp_path):
    """A real recording (the build's recorder on its test program), when the build is there."""
    rec, prog = BUILD / "lib" / "liblarder-trace.so", BUILD / "tests" / "trace_prog"
    if not rec.is_file() or not prog.is_file():
        pytest.skip(f"{rec} or {prog} not built")
    env = dict(os.environ, LD_PRELOAD=str(rec), LARDER_TRACE_FILE=str(tmp_path / "r.ltr"))
    subprocess.run([str(prog), "3", "2", "500"], env=env, check=True, capture_output=True)
    data = (tmp_path / "r.ltr").read_bytes()
    t = fmt.parse(data)
    assert t.records > 3 * 2 * 500
    assert fmt.from_text(fmt.to_text(t)).to_bytes() == data


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d[:40], "byte 40: truncated header"),
    (lambda d: d[:8] + b"\x05\x00" + d[10:], "byte 8: unsupported trace version 5"),
    (lambda d: b"NOTATRACE" + d[9:], "byte 0: not a larder trace"),
    (lambda d: d[:64 + 20], "byte 64: truncated block header"),
    (lambda d: d[:64] + b"XXXX" + d[68:], "byte 64: bad block magic"),
    (lambda d: d[:-5], "truncated block"),
    (lambda d: d[:64 + 32 + 32 + 30] + bytes([99]) + d[64 + 32 + 32 + 31:], "byte 158: unknown operation 99"),
])
def test_damaged_traces_name_the_offset(mutate, message):
    data = hand_made().to_bytes()
    with pytest.raises(fmt.TraceError, match=message):
        fmt.parse(mutate(data))


def test_gzip_is_read_and_bad_gzip_reported(tmp_path):
    data = hand_made().to_bytes()
    (tmp_path / "t.ltr.gz").write_bytes(gzip.compress(data))
    assert fmt.load(tmp_path / "t.ltr.gz").to_bytes() == data
    (tmp_path / "bad.gz").write_bytes(gzip.compress(data)[:-12])
    with pytest.raises(fmt.TraceError, match="gzip"):
        fmt.load(tmp_path / "bad.gz")


def test_stats_known_answers():
    s = stats.compute(hand_made())
    assert s.records == 13 and s.threads == 3
    assert s.calls["malloc"] == 1 and s.calls["free"] == 4 and s.calls["reallocarray"] == 1
    assert s.unknown_frees == 1 and s.null_frees == 1
    assert s.failed == 2                       # memalign with a bad alignment, the huge reallocarray
    # live: 100, +300=400, realloc 100->500: 800, free 500: 300, +64=364, +256=620, +4096=4716, +1=4717,
    # reallocarray failed (0x2000 stays), then free 0x4000: 4653
    assert s.peak_live == 4717
    assert s.end_live == 4653
    assert s.histogram[stats.bin_of(100)] == 1 and s.histogram[stats.bin_of(4096)] == 1
    assert stats.bin_label(0) == "1-16" and stats.bin_of(17) == 1 and stats.bin_of(1 << 30) == len(stats.BIN_EDGES)


def test_merge_is_by_time_and_keeps_each_threads_order():
    t = hand_made()
    order = [r.t for _, r in t.merged()]
    assert order == sorted(order)
    threads = [ti for ti, _ in t.merged()]
    assert threads[:4] == [0, 0, 0, 1]


@pytest.mark.parametrize("phases, pattern", [
    (("ramp",), "ramp"), (("plateau",), "plateau"), (("peak", "peak", "peak"), "peaks"), (("peak", "plateau"), "peak"),
])
def test_synthetic_phases_have_their_pattern(phases, pattern):
    t = synth.generate(synth.SynthParams(allocations=6000, size_dist="exponential", phases=phases, seed=3))
    assert stats.compute(t).pattern == pattern


def test_synth_distributions_and_threads():
    p = synth.SynthParams(allocations=20000, size_dist="exponential", size_mean=200, phases=("random",),
                          life_dist="pareto", life_mean=50, threads=4, seed=9)
    t = synth.generate(p)
    s = stats.compute(t)
    assert s.calls["malloc"] == 20000 and s.calls["free"] == 20000 and s.end_live == 0
    assert len(t.threads()) == 4
    assert 180 < s.bytes_requested / 20000 < 220    # the exponential mean, within 10%
    assert synth.generate(p).to_bytes() == t.to_bytes()   # the seed fixes the trace
    with pytest.raises(ValueError, match="unknown phase"):
        synth.generate(synth.SynthParams(phases=("wave",)))


def test_cli_errors(tmp_path, capsys):
    (tmp_path / "junk.ltr").write_bytes(b"hello")
    assert cli.main(["stats", str(tmp_path / "junk.ltr")]) == cli.EXIT_BAD_TRACE
    assert "byte 0" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("larder-trace 1 pid=1 ppid=0 start_ns=0 proc_start=0 exec_seq=0\nblock 1 0 1 0 0\n5 munge 1 0 0x0 0x1\n")
    assert cli.main(["tobin", str(tmp_path / "bad.txt"), "-o", str(tmp_path / "x.ltr")]) == cli.EXIT_BAD_TRACE
    assert "line 3: unknown operation" in capsys.readouterr().err
    assert cli.main(["synth", "-o", str(tmp_path / "s.ltr"), "--phases", "wave"]) == cli.EXIT_USAGE
    r = subprocess.run([sys.executable, "-m", "larder_bench.trace.cli", "synth"], capture_output=True, text=True)
    assert r.returncode == 2 and "required" in r.stderr


def test_phases_by_quarter():
    t = synth.generate(synth.SynthParams(allocations=8000, size_dist="exponential",
                                         phases=("ramp", "plateau", "plateau", "peak"), seed=4))
    s = stats.compute(t)
    assert s.pattern_figures["phases"][0] == "ramp"
    assert s.pattern_figures["phases"][3] == "fall"
    assert stats.phases([0, 1, 2, 3, 4, 5, 6, 7], 7, parts=2) == ["ramp", "ramp"]
    assert stats.phases([5, 5, 5, 5, 5, 1, 5, 5], 5, parts=2) == ["plateau", "peaks"]


def _member(path, pid, ppid, root, exec_seq=0, comm="prog"):
    t = fmt.Trace(fmt.Header(pid=pid, ppid=ppid, proc_start=1000 + pid, exec_seq=exec_seq, comm=comm, root_pid=root),
                  [fmt.Block(1, 0, [fmt.Record(1, 1, 64, 0, 0, 0x1000)])])
    t.write(path)


def test_family_lists_every_file_of_one_recorded_tree(tmp_path):
    """Issue 10: stats/replay on one file of a process tree name the tree's other files (the
    header's root_pid), and files of another recording in the same folder are not listed."""
    _member(tmp_path / "t.ltr", 100, 1, 100, comm="sh")
    _member(tmp_path / "t.ltr.101", 101, 100, 100, comm="sh")
    _member(tmp_path / "t.ltr.101.exec1", 101, 100, 100, exec_seq=1, comm="ls")
    _member(tmp_path / "t.ltr.102.gz", 102, 100, 100, comm="wc")
    _member(tmp_path / "other.ltr", 200, 1, 200)
    (tmp_path / "notes.txt").write_text("not a trace")
    fam = fmt.family(tmp_path / "t.ltr.101.exec1")
    assert [m.path.name for m in fam] == ["t.ltr", "t.ltr.101", "t.ltr.101.exec1", "t.ltr.102.gz"]
    text = fmt.family_text(tmp_path / "t.ltr.101.exec1")
    assert "root pid 100" in text and "4 files" in text and "* t.ltr.101.exec1: pid 101 (ls), child of 100" in text
    assert fmt.family_text(tmp_path / "other.ltr") == ""
    # root_pid survives the text form
    t = fmt.load(tmp_path / "t.ltr.101")
    assert fmt.from_text(fmt.to_text(t)).header.root_pid == 100
    # the command line prints it
    r = subprocess.run([sys.executable, "-m", "larder_bench", "trace", "stats", str(tmp_path / "t.ltr")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "process tree:" in r.stdout and "t.ltr.102.gz" in r.stdout
