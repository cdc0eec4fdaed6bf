"""trace-replay --usable: fragmentation split into the allocator's rounding (internal: peak
malloc_usable_size bytes over peak live) and the rest (external: peak heap over peak usable),
on traces whose every block has one size, so the internal figure has a known answer. The fixed
classes' answer: these runs set LARDER_LEARNED_CLASSES=0, as a one-size trace is what teaches
larder a class of its own (checked apart, test_learned_class_lowers_the_rounding)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from larder_bench.trace import synth

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LARDER_BUILD_DIR", REPO / "build")).resolve()
REPLAY = BUILD / "bin" / "trace-replay"
LARDER = BUILD / "lib" / "liblarder.so"


def one_size_trace(tmp: Path, size: int, threads: int = 1, phases: tuple = ("ramp",)) -> Path:
    p = synth.SynthParams(allocations=3000, size_dist="fixed", size_mean=size, phases=phases,
                          threads=threads, seed=3)
    out = tmp / f"fixed{size}-t{threads}.ltr"
    synth.generate(p).write(out)
    return out


def replay(trace: Path, *flags: str, preload: Path | None = LARDER, expect: int = 0, learned: bool = False) -> dict | None:
    if not REPLAY.is_file() or not LARDER.is_file():
        pytest.fail(f"{REPLAY} or {LARDER} missing: run `make build`")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["LARDER_LEARNED_CLASSES"] = "8" if learned else "0"
    if preload:
        env["LD_PRELOAD"] = str(preload)
    r = subprocess.run([str(REPLAY), str(trace), *flags], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == expect, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["figures"] if expect == 0 else None


def class_of(size: int) -> int:
    """larder's class for a small size (superblock.c): 16-byte steps to 128, then 8 a doubling."""
    sizes = list(range(16, 129, 16))
    base = 128
    while base < 16384:
        sizes += [base + step * base // 8 for step in range(1, 9)]
        base *= 2
    return next(s for s in sizes if s >= size)


@pytest.mark.parametrize("size", [1032, 4368, 64])
def test_internal_fragmentation_is_larders_rounding(tmp_path, size):
    f = replay(one_size_trace(tmp_path, size), "--usable")
    assert f["peak_live_bytes"] == 3000 * size  # a ramp: nothing freed before the end
    assert f["peak_usable_bytes"] == 3000 * class_of(size)
    # two peaks of 1,500 blocks, each freed at its end: frees count down as well
    f = replay(one_size_trace(tmp_path, size, phases=("peak", "peak")), "--usable", "--iterations", "2")
    assert f["peak_live_bytes"] == 1500 * size
    assert f["peak_usable_bytes"] == 1500 * class_of(size)
    assert f["fragmentation_internal_pct"] == pytest.approx((class_of(size) / size - 1) * 100, abs=1e-3)
    # the two parts multiply to method 4 (peak heap / peak live)
    assert (1 + f["fragmentation_internal_pct"] / 100) * (1 + f["fragmentation_external_pct"] / 100) == \
        pytest.approx(1 + f["fragmentation_pct"] / 100, rel=1e-3)


def test_counted_across_threads_and_passes(tmp_path):
    trace = one_size_trace(tmp_path, 1032, threads=2)
    # thesis mode, 2 threads x 2 passes: each thread holds the whole trace's blocks at its peak
    f = replay(trace, "--usable", "-t", "2", "--iterations", "2")
    assert f["peak_usable_bytes"] <= 2 * 3000 * 1152
    assert f["peak_usable_bytes"] >= 3000 * 1152
    # faithful mode: the recorded threads on one exact shared counter; one thread may start its
    # final frees while the other still allocates, so the peak is whatever the run reached, and
    # with one size usable is live x 1152/1032 at every moment (the two counters' additions may
    # interleave differently by a block or two)
    f = replay(trace, "--usable", "--mode", "faithful")
    assert abs(f["peak_usable_bytes"] - f["peak_live_bytes"] // 1032 * 1152) <= 2 * 1152


def test_learned_class_lowers_the_rounding(tmp_path):
    # 3,000 blocks of 1,032 B: once the heap holds 8 superblocks of the 1,152-byte class, the
    # size is learned as a class of 1,040 B, which serves the rest
    f = replay(one_size_trace(tmp_path, 1032), "--usable", learned=True)
    assert 3000 * 1040 <= f["peak_usable_bytes"] < 3000 * 1152
    assert f["peak_usable_bytes"] <= 600 * 1152 + 2400 * 1040


def test_other_allocators_report_their_own_rounding(tmp_path):
    f = replay(one_size_trace(tmp_path, 1032), "--usable", preload=None)
    # glibc: a chunk of the size plus its 8-byte header in 16-byte steps (1040), less the
    # header: exactly the size, where larder's class is 1152
    assert f["peak_usable_bytes"] == 3000 * 1032


def test_without_the_flag_no_usable_figures_and_bad_use_is_refused(tmp_path):
    trace = one_size_trace(tmp_path, 64)
    f = replay(trace)
    assert "peak_usable_bytes" not in f and "fragmentation_internal_pct" not in f
    f = replay(trace, "--usable", "--no-rss")
    assert "fragmentation_internal_pct" in f and "fragmentation_external_pct" not in f
    replay(trace, "--usable=yes", expect=2)


def test_trace_replay_reports_the_split(tmp_path):
    """`larder-bench trace replay` puts the split in its report and results.json."""
    import sys
    trace = one_size_trace(tmp_path, 1032)
    r = subprocess.run([sys.executable, "-m", "larder_bench", "trace", "replay", str(trace), "--threads", "1",
                        "--repeats", "1", "--allocators", "glibc,larder", "--strace", "none",
                        "--build-dir", str(BUILD), "--output-dir", str(tmp_path / "res")],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "LARDER_LEARNED_CLASSES": "0"})
    assert r.returncode == 0, r.stderr
    assert "Where the fragmentation lies" in r.stdout
    split = r.stdout[r.stdout.index("Where the fragmentation lies"):]
    row = next(line for line in split.splitlines() if line.startswith("| larder |"))
    assert "| 11.63% |" in row  # 1152 / 1032 - 1
    doc = json.loads(next((tmp_path / "res").rglob("results.json")).read_text())
    got = {u["allocator"]: u["figures"]["peak_usable_bytes"] for u in doc["usable"]}
    assert got == {"glibc": 3000 * 1032, "larder": 3000 * 1152}
