"""trace-replay --split-above B: blocks of more than B bytes come from the C library's own malloc,
the rest from the allocator under test (a what-if for issue 15: that allocator with a coalescing
tier above B). Checked under larder through its own statistics: the larger blocks never reach
it, reallocs across the split move their blocks, and every free goes back where its block came
from (larder stops the program at a free of a pointer it never handed out)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from larder_bench.trace import fmt

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LARDER_BUILD_DIR", REPO / "build")).resolve()
REPLAY = BUILD / "bin" / "trace-replay"
LARDER = BUILD / "lib" / "liblarder.so"
PEAK = 190 * 64 + 60 * 20000


def split_trace(tmp: Path) -> Path:
    """One thread: 200 blocks of 64 B, 50 of 20,000 B, 10 of the small ones grown to 20,000 B
    and 10 of the large ones shrunk to 64 B (reallocs across any split between), then all freed."""
    lines = ["larder-trace 1 pid=1 ppid=0 start_ns=0 proc_start=0 exec_seq=0 flags=0 root_pid=1 comm="]
    recs, t = [], 0

    def rec(op, size, ptr_in, ptr_out):
        nonlocal t
        t += 1
        recs.append(f"{t} {op} {size} 0 {ptr_in:#x} {ptr_out:#x}")

    small = [0x10000000 + 64 * i for i in range(200)]
    large = [0x20000000 + 0x10000 * i for i in range(50)]
    for a in small:
        rec("malloc", 64, 0, a)
    for a in large:
        rec("malloc", 20000, 0, a)
    grown = [0x30000000 + 0x10000 * i for i in range(10)]
    for a, b in zip(small[:10], grown):
        rec("realloc", 20000, a, b)
    shrunk = [0x40000000 + 64 * i for i in range(10)]
    for a, b in zip(large[:10], shrunk):
        rec("realloc", 64, a, b)
    for a in small[10:] + large[10:] + grown + shrunk:
        rec("free", 0, a, 0)
    lines.append(f"block 1 0 {len(recs)} 0 0")
    lines += recs
    out = tmp / "split.ltr"
    fmt.from_text("\n".join(lines) + "\n").write(out)
    return out


def replay(trace: Path, *flags: str, preload: Path | None = LARDER, expect: int = 0):
    if not REPLAY.is_file() or not LARDER.is_file():
        pytest.fail(f"{REPLAY} or {LARDER} missing: run `make build`")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["LARDER_STATS"] = "2"
    if preload:
        env["LD_PRELOAD"] = str(preload)
    r = subprocess.run([str(REPLAY), str(trace), "--no-rss", *flags], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == expect, r.stderr
    if expect:
        return r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    stats = [json.loads(l) for l in r.stderr.splitlines() if l.startswith('{"allocator"')]
    return out, (stats[-1] if stats else None)


def test_larger_blocks_come_from_libc(tmp_path):
    trace = split_trace(tmp_path)
    whole, whole_stats = replay(trace)
    split, split_stats = replay(trace, "--split-above", "4096")
    assert split["params"]["split_above"] == 4096 and "split_above" not in whole["params"]
    # the same live bytes either way, peaking once 10 small blocks have grown: 190 x 64 + 60 x 20,000
    assert whole["figures"]["peak_live_bytes"] == split["figures"]["peak_live_bytes"] == PEAK
    assert whole["figures"]["replay_failures"] == split["figures"]["replay_failures"] == 0
    # Without the split larder serves the 50 + 10 blocks of 20,000 B as medium spans; with it none.
    assert whole_stats["medium_allocs"] >= 60
    assert split_stats["medium_allocs"] == 0
    # The 10 shrunk blocks come back to larder (moved out of libc's), the 10 grown ones leave it.
    assert split_stats["mallocs"] <= whole_stats["mallocs"] - 50
    # A split above everything sends nothing to libc.
    _, none_stats = replay(trace, "--split-above", "100000")
    assert none_stats["medium_allocs"] == whole_stats["medium_allocs"]


def test_split_under_glibc_runs(tmp_path):
    out, stats = replay(split_trace(tmp_path), "--split-above", "4096", preload=None)
    assert stats is None and out["figures"]["peak_live_bytes"] == PEAK


@pytest.mark.parametrize("flags,message", [
    (["--split-above", "0"], "--split-above takes a size in bytes"),
    (["--split-above", "x"], "--split-above takes a size in bytes"),
    (["--split-above", "4096", "--usable"], "--split-above and --usable do not go together"),
])
def test_bad_split_flags(tmp_path, flags, message):
    assert message in replay(split_trace(tmp_path), *flags, expect=2)
