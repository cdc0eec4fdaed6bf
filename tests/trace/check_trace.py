#!/usr/bin/env python3
"""Checks of liblarder-trace.so and trace-replay on real recordings (registered by
tests/trace/tests.cmake; each check is one CTest test).

trace_prog counts its own calls and peak live bytes. glibc adds a few calls of its own to
any threaded program (each pthread_create callocs the new thread's DTV, 288 bytes here, and
thread exit frees NULL twice); the checks measure those from a run of the same program with
no work (rounds = 0) instead of assuming them, so the equalities below are exact:
  replay ops  = program ops  + (baseline replay ops - baseline program ops)
  replay peak = program peak + bytes the baseline trace leaves live (the DTVs)
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "harness"))
from larder_bench.trace import fmt  # noqa: E402
from larder_bench.trace import stats as trace_stats  # noqa: E402

failures = 0


def check(cond: bool, what: str) -> None:
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}", file=sys.stderr)
    else:
        print(f"ok: {what}")


def record(args, out: Path, prog_args: list[str], **extra) -> str:
    env = dict(os.environ, LARDER_TRACE_FILE=str(out), LD_PRELOAD=args.recorder, **extra)
    r = subprocess.run([args.prog, *prog_args], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"trace_prog under the recorder failed ({r.returncode}): {r.stderr}")
    return r.stdout


def prog_figures(stdout: str) -> dict:
    f = stdout.split()
    return {"ops": int(f[1]), "peak": int(f[3]), "checksum": int(f[5])}


def replay(args, trace: Path, *flags: str, expect: int = 0) -> tuple[dict | None, subprocess.CompletedProcess]:
    r = subprocess.run([args.replay, str(trace), *flags], capture_output=True, text=True, timeout=60)
    check(r.returncode == expect, f"trace-replay {' '.join(flags)} exits {expect} (got {r.returncode}: {r.stderr.strip()})")
    if r.returncode != 0:
        return None, r
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def t_record_replay(args, tmp: Path) -> None:
    work = prog_figures(record(args, tmp / "w.ltr", ["4", "3", "2000"]))
    base = prog_figures(record(args, tmp / "b.ltr", ["4", "0", "2000"]))
    jw, _ = replay(args, tmp / "w.ltr")
    jb, _ = replay(args, tmp / "b.ltr")
    fw, fb = jw["figures"], jb["figures"]
    libc_ops = fb["ops"] - base["ops"]
    check(0 <= libc_ops <= 4 * 4, f"libc's own calls in a 4-thread program are few ({libc_ops})")
    check(fw["ops"] == work["ops"] + libc_ops,
          f"replay ops {fw['ops']} == program ops {work['ops']} + libc's {libc_ops}")
    check(fw["peak_live_bytes"] == work["peak"] + fb["trace_end_live_bytes"],
          f"replay peak live {fw['peak_live_bytes']} == program peak {work['peak']} + libc's live {fb['trace_end_live_bytes']}")
    check(fw["trace_peak_live_bytes"] == fw["peak_live_bytes"], "one-thread replay peak equals the trace's merged-order peak")
    check(fw["unknown_frees"] == 0 and fw["alloc_of_live"] == fw["overlaps_resolved"],
          "no unknown frees, no address allocated twice (but for a preempted realloc's overlap, resolved)")
    check(fw["peak_heap_rss_bytes"] >= fw["peak_live_bytes"] * 0.9, "heap RSS is real: the replay writes its blocks")
    check(fw["fragmentation_pct"] == round((fw["peak_heap_rss_bytes"] / fw["peak_live_bytes"] - 1) * 100, 4)
          or abs(fw["fragmentation_pct"] - (fw["peak_heap_rss_bytes"] / fw["peak_live_bytes"] - 1) * 100) < 1e-3,
          "fragmentation (method 4) is peak heap / peak live - 1")
    j2, _ = replay(args, tmp / "w.ltr", "-t", "2", "--iterations", "3")
    check(j2["figures"]["ops"] == 6 * fw["ops"], "2 threads x 3 iterations replay 6 times the calls")
    check(j2["params"] == {"trace": str(tmp / "w.ltr"), "mode": "thesis", "threads": 2, "iterations": 3, "rss": True,
                           "rss_method": "statm"}, "params name every effective parameter")
    js, _ = replay(args, tmp / "w.ltr", "--rss-method", "smaps")
    gap = abs(js["figures"]["peak_heap_rss_bytes"] - fw["peak_heap_rss_bytes"])
    check(js["params"]["rss_method"] == "smaps" and gap <= 512 * 1024,
          f"the cheap statm reading matches smaps read at every sample (peak heap differs by {gap} bytes)")
    check(abs(fw["rss_method_gap_bytes"]) <= 512 * 1024, f"end-of-run statm vs smaps gap {fw['rss_method_gap_bytes']} bytes")


def t_faithful(args, tmp: Path) -> None:
    record(args, tmp / "w.ltr", ["3", "2", "1000"])
    jt, _ = replay(args, tmp / "w.ltr")
    jf, _ = replay(args, tmp / "w.ltr", "--mode", "faithful", "--iterations", "2")
    check(jf["params"]["threads"] == jf["figures"]["recorded_threads"], "faithful mode uses one thread per recorded thread")
    check(jf["figures"]["recorded_threads"] == 4, "main + 3 workers recorded")
    check(jf["figures"]["ops"] == 2 * jt["figures"]["ops"], "faithful mode replays every call")
    check(jf["figures"]["replay_failures"] == 0, "no replay failures")
    replay(args, tmp / "w.ltr", "--mode", "faithful", "-t", "2", expect=2)


def t_unchanged_output(args, tmp: Path) -> None:
    plain = subprocess.run([args.prog, "3", "2", "3000"], capture_output=True, text=True, timeout=60)
    traced = record(args, tmp / "u.ltr", ["3", "2", "3000"])
    check(plain.returncode == 0 and plain.stdout == traced, f"same output with and without the recorder: {plain.stdout.strip()!r}")


def t_fork_exec(args, tmp: Path) -> None:
    env = dict(os.environ, LARDER_TRACE_FILE=str(tmp / "t.%p.ltr"), LD_PRELOAD=args.recorder)
    r = subprocess.run([args.fork_exec], env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"fork_exec runs under the recorder ({r.stderr.strip()})")
    files = sorted(tmp.glob("t.*"))
    check(len(files) == 3, f"three files: parent, child, exec'd image ({[f.name for f in files]})")
    sizes = {}
    for f in files:
        t = fmt.load(f)
        sizes[f.name] = ({r.size for _, r in t.merged()} & {1111, 2222, 3333}, t.header.exec_seq, t.header.pid)
    exec1 = [n for n in sizes if n.endswith(".exec1")]
    check(len(exec1) == 1 and sizes[exec1[0]][0] == {3333} and sizes[exec1[0]][1] == 1,
          "the exec'd image starts <file>.exec1 and records only its own calls")
    parent = exec1[0][:-len(".exec1")] if exec1 else ""
    check(parent in sizes and sizes[parent][0] == {1111}, "the parent's file has its calls up to the exec (flushed before exec)")
    child = [n for n in sizes if n != parent and not n.endswith(".exec1")]
    check(len(child) == 1 and sizes[child[0]][0] == {2222}, "the child has its own file, flushed at _exit, without the parent's records")


def t_clock_and_env(args, tmp: Path) -> None:
    """Both clocks give the same merged trace; bad settings are reported, never fatal."""
    cs = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    tsc = cs.is_file() and cs.read_text().strip() == "tsc" and os.uname().machine == "x86_64"
    work = prog_figures(record(args, tmp / "d.ltr", ["3", "2", "800"]))
    check(bool(fmt.load(tmp / "d.ltr").header.flags & fmt.FLAG_TSC) == tsc, f"TSC clock used exactly when the kernel uses it ({tsc})")
    record(args, tmp / "n.ltr", ["3", "2", "800"], LARDER_TRACE_CLOCK="ns")
    tn = fmt.load(tmp / "n.ltr")
    check(tn.header.flags & fmt.FLAG_TSC == 0, "LARDER_TRACE_CLOCK=ns records nanoseconds")
    secs = [tn.seconds()(r.t) for _, r in tn.merged()]
    check(secs == sorted(secs) and 0 <= secs[-1] < 60, "ns times are ordered and plausible")
    jd, _ = replay(args, tmp / "d.ltr")
    jn, _ = replay(args, tmp / "n.ltr")
    keys = ("ops", "records", "objects", "unknown_frees", "alloc_of_live", "recorded_failures", "recorded_threads")
    for name, j in (("tsc" if tsc else "default", jd), ("ns", jn)):
        same = j["figures"]["ops"] == jd["figures"]["ops"] and j["figures"]["unknown_frees"] == 0
        detail = ""
        if not same:   # a rare failure in CI under load: say what differed, per kind of call
            kinds = {f: dict(Counter(fmt.OPS[r.op] for _, r in fmt.load(f).merged())) for f in (tmp / "d.ltr", tmp / "n.ltr")}
            detail = (f"; program said {work['ops']} calls; default {dict((k, jd['figures'][k]) for k in keys)} "
                      f"{kinds[tmp / 'd.ltr']}; ns {dict((k, jn['figures'][k]) for k in keys)} {kinds[tmp / 'n.ltr']}")
        check(same, f"the same calls whichever clock ({name}){detail}")
    env = dict(os.environ, LD_PRELOAD=args.recorder, LARDER_TRACE_FILE=str(tmp / "b.ltr"), LARDER_TRACE_CLOCK="bogus")
    r = subprocess.run([args.prog, "2", "1", "100"], env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "LARDER_TRACE_CLOCK must be ns or tsc" in r.stderr and (tmp / "b.ltr").is_file(),
          "a bad LARDER_TRACE_CLOCK is reported and recording goes on")
    env["LARDER_TRACE_FILE"] = str(tmp / "no-such-dir" / "t.ltr")
    env.pop("LARDER_TRACE_CLOCK")
    r = subprocess.run([args.prog, "2", "1", "100"], env=env, capture_output=True, text=True, timeout=60)
    plain = subprocess.run([args.prog, "2", "1", "100"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "cannot create" in r.stderr and r.stdout == plain.stdout,
          "an unwritable trace file is reported and the program runs unchanged")


SPAWNER = """
import subprocess, threading
def work():
    return [str(i) * 5 for i in range(30000)]
t = threading.Thread(target=work)
t.start()
for _ in range(3):
    subprocess.run(["true"])
work()
t.join()
"""


def t_vfork_exec(args, tmp: Path) -> None:
    """Python's subprocess execs from a vfork child, on the parent's memory, while the parent's
    other thread keeps allocating: the child must not touch the parent's buffers."""
    env = dict(os.environ, LARDER_TRACE_FILE=str(tmp / "s.%p.ltr"), LD_PRELOAD=args.recorder, PYTHONMALLOC="malloc")
    r = subprocess.run([sys.executable, "-S", "-c", SPAWNER], env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"threads + subprocess run under the recorder ({r.stderr.strip()[:200]})")
    main = max(tmp.glob("s.*.ltr"), key=lambda p: p.stat().st_size)
    j, _ = replay(args, main)
    f = j["figures"]
    check(f["recorded_threads"] >= 2 and f["records"] > 60000, f"the parent's trace has both threads ({f['records']} calls)")
    check(f["unknown_frees"] == 0 and f["alloc_of_live"] == f["overlaps_resolved"],
          f"no lost or doubled records around vfork+exec (unknown frees {f['unknown_frees']}, alloc of live {f['alloc_of_live']})")


TREE_SCENARIOS = {
    # scenario: (argv after the program, tags recorded by the root, tags by other processes, files)
    "fork-exec": (["fork-exec"], {1, 4}, {2, 3}, 3),
    "fork-exit": (["fork-exit"], {1, 3}, {2}, 2),
    "vfork-exec": (["vfork-exec"], {1, 3}, {2}, 2),
    "spawn": (["spawn"], {1, 4}, {2, 3}, 3),
    "raw-exec": (["raw-exec"], {1, 3}, {2}, 3),
}


def _tag_calls(t, tag: int) -> list:
    """The records of tag's sequence (tree_prog.c seq): sizes tag*1000+1..+200 and the frees
    and reallocs of the blocks they returned, in the file's order."""
    lo, hi = tag * 1000 + 1, tag * 1000 + 200
    mine: set = set()
    out = []
    for _, r in t.merged():
        if r.op in (fmt.OP_CODES["malloc"], fmt.OP_CODES["realloc"]) and lo <= r.size <= hi:
            if r.op == fmt.OP_CODES["realloc"] and r.addr_in not in mine:
                continue
            mine.discard(r.addr_in)
            mine.add(r.addr_out)
            out.append(r)
        elif r.op == fmt.FREE and r.addr_in in mine:
            mine.discard(r.addr_in)
            out.append(r)
    return out


def _check_sequence(calls: list, tag: int, where: str) -> None:
    want = []
    for i in range(1, 51):
        want += [(fmt.OP_CODES["malloc"], tag * 1000 + i), (fmt.FREE, None)]
    want += [(fmt.OP_CODES["malloc"], tag * 1000 + 100), (fmt.OP_CODES["realloc"], tag * 1000 + 200), (fmt.FREE, None)]
    got = [(r.op, r.size if r.op != fmt.FREE else None) for r in calls]
    ok = got == want
    if ok:  # every free releases the block the call before it returned
        for a, b in zip(calls, calls[1:]):
            if b.op in (fmt.FREE, fmt.OP_CODES["realloc"]) and b.addr_in != a.addr_out:
                ok = False
    check(ok, f"{where}: seq {tag} is there call by call ({len(got)} of {len(want)} calls, pointers matched)")


def _check_tree(tmp: Path, name: str, root_tags: set, child_tags: set, nfiles: int, root_name: str) -> None:
    files = sorted(p for p in tmp.iterdir() if p.name.startswith(root_name.split("%p")[0]))
    check(len(files) == nfiles, f"{name}: {nfiles} files, one per process image ({[f.name for f in files]})")
    traces = {}
    for f in files:
        try:
            traces[f] = fmt.load(f)
        except fmt.TraceError as e:
            check(False, f"{name}: {f.name} reads cleanly ({e})")
    roots = [f for f, t in traces.items() if t.header.pid == t.header.root_pid and t.header.exec_seq == 0]
    check(len(roots) == 1, f"{name}: one root file ({[f.name for f in roots]})")
    if not roots:
        return
    root = roots[0]
    rpid = traces[root].header.pid
    check(all(t.header.root_pid == rpid for t in traces.values()), f"{name}: every file names root pid {rpid}")
    if "%p" not in root_name:
        check(root.name == root_name, f"{name}: the root writes the name as given ({root.name})")
        for f, t in traces.items():
            if f != root:
                h = t.header
                want = f"{root_name}.{h.pid}" + (f".exec{h.exec_seq}" if h.exec_seq else "")
                check(f.name == want, f"{name}: a descendant's file is NAME.<pid>[.execN] ({f.name}, want {want})")
    for tag in sorted(root_tags | child_tags):
        holders = [f for f, t in traces.items() if _tag_calls(t, tag)]
        check(len(holders) == 1, f"{name}: seq {tag} in exactly one file ({[f.name for f in holders]})")
        if len(holders) != 1:
            continue
        f = holders[0]
        check((f == root) == (tag in root_tags), f"{name}: seq {tag} in the {'root' if tag in root_tags else 'child'}'s file ({f.name})")
        _check_sequence(_tag_calls(traces[f], tag), tag, f"{name} {f.name}")
    fam = fmt.family(root)
    check(sorted(m.path for m in fam) == sorted(traces), f"{name}: family() of the root lists the {len(traces)} files")
    child = next((f for f in traces if f != root), None)
    if child is not None and args_replay:
        r = subprocess.run([args_replay[0], str(child), "--no-rss"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and f"whose root is pid {rpid}" in r.stderr,
              f"{name}: trace-replay on {child.name} says it is one process of a tree rooted at {rpid}")


args_replay: list = []


def t_process_tree(args, tmp: Path) -> None:
    """Every process of a recorded tree writes its own complete file and nothing else, with
    a name without %p (the form that used to mix a fork+exec child into its parent's file)."""
    args_replay[:] = [args.replay]
    for name, (argv, root_tags, child_tags, nfiles) in TREE_SCENARIOS.items():
        for pattern in ("t.ltr", "t.%p.ltr"):
            d = tmp / f"{name}-{'p' if '%p' in pattern else 'plain'}"
            d.mkdir()
            env = dict(os.environ, LARDER_TRACE_FILE=str(d / pattern), LD_PRELOAD=args.recorder)
            env.pop("LARDER_TRACE_ROOT", None)
            r = subprocess.run([args.tree_prog, *argv], env=env, capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"{name}: tree_prog runs under the recorder ({r.returncode}: {r.stderr.strip()[:200]})")
            _check_tree(d, f"{name} ({pattern})", root_tags, child_tags, nfiles, pattern)
    # a shell pipeline: the shell, its forked children and the programs they exec
    d = tmp / "pipeline"
    d.mkdir()
    env = dict(os.environ, LARDER_TRACE_FILE=str(d / "t.ltr"), LD_PRELOAD=args.recorder)
    env.pop("LARDER_TRACE_ROOT", None)
    r = subprocess.run(["/bin/sh", "-c", f"{args.tree_prog} seq 5 | {args.tree_prog} seq 6; {args.tree_prog} seq 7"],
                       env=env, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"pipeline runs under the recorder ({r.stderr.strip()[:200]})")
    n = len(list(d.iterdir()))
    check(n >= 3, f"pipeline: the shell and at least two programs have files ({n})")
    _check_tree(d, "pipeline", set(), {5, 6, 7}, n, "t.ltr")


def t_bad_input(args, tmp: Path) -> None:
    record(args, tmp / "w.ltr", ["2", "1", "500"])
    good = (tmp / "w.ltr").read_bytes()
    for flags in (["--threads", "0"], ["--mode", "fast"], ["--iterations", "x"], ["--bogus"], [],
                  ["--rss-method", "proc"], ["--no-rss", "--timeseries", "x.csv"]):
        r = subprocess.run([args.replay, *( [str(tmp / "w.ltr")] if flags else []), *flags],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "usage:" in r.stderr, f"bad flags {flags} exit 2 with usage")
    missing = subprocess.run([args.replay, str(tmp / "none.ltr")], capture_output=True, text=True)
    check(missing.returncode == 3 and "none.ltr" in missing.stderr, "a missing file exits 3 naming it")
    # truncated in the middle of a record: the error names the offset of the block
    cut = len(good) - 7
    (tmp / "cut.ltr").write_bytes(good[:cut])
    _, r = replay(args, tmp / "cut.ltr", expect=3)
    tr = fmt.parse(good)
    off = 64
    for b in tr.blocks[:-1]:
        off += 32 + 32 * len(b.records)
    check(f"byte {off}: truncated block" in r.stderr, f"truncation names byte {off}: {r.stderr.strip()}")
    bad = bytearray(good); bad[8] = 9
    (tmp / "ver.ltr").write_bytes(bytes(bad))
    _, r = replay(args, tmp / "ver.ltr", expect=3)
    check("byte 8: unsupported trace version 9" in r.stderr, "a wrong version is named")
    bad = bytearray(good); bad[64 + 32 + 30] = 200
    (tmp / "op.ltr").write_bytes(bytes(bad))
    _, r = replay(args, tmp / "op.ltr", expect=3)
    check("byte 126: unknown operation 200" in r.stderr, f"an unknown operation is named: {r.stderr.strip()}")
    bad = bytearray(good); bad[64:68] = b"XXXX"
    (tmp / "blk.ltr").write_bytes(bytes(bad))
    _, r = replay(args, tmp / "blk.ltr", expect=3)
    check("byte 64: bad block magic" in r.stderr, "a corrupt block header is named")
    # a free of an address the trace never allocated is counted, not a crash
    tr.blocks.append(fmt.Block(tid=1, thread_seq=0, records=[fmt.Record(2**62, fmt.FREE, 0, 0, 0x12345670, 0)]))
    tr.write(tmp / "unknown.ltr")
    j, _ = replay(args, tmp / "unknown.ltr")
    j0, _ = replay(args, tmp / "w.ltr")
    check(j["figures"]["unknown_frees"] == 1 and j["figures"]["ops"] == j0["figures"]["ops"],
          "an unknown free is counted and skipped")
    # A moving realloc is stamped before its call; preempted, it can overlap another thread's
    # whole use of the new address (seen in CI): both objects are freed, none is unknown.
    R, MALLOC, REALLOC = fmt.Record, fmt.OP_CODES["malloc"], fmt.OP_CODES["realloc"]
    A, X, Y = 0x7000100, 0x7000200, 0x7000300
    tr.blocks = [
        fmt.Block(tid=11, thread_seq=0, records=[R(50, MALLOC, 100, 0, 0, A),
                                                  R(100, REALLOC, 200, 0, A, X)]),
        fmt.Block(tid=12, thread_seq=1, records=[R(400, fmt.FREE, 0, 0, X, 0)]),
        fmt.Block(tid=13, thread_seq=2, records=[R(200, MALLOC, 30, 0, 0, X),
                                                  R(300, REALLOC, 60, 0, X, Y),
                                                  R(500, fmt.FREE, 0, 0, Y, 0)])]
    tr.write(tmp / "overlap.ltr")
    j, _ = replay(args, tmp / "overlap.ltr")
    f = j["figures"]
    check((f["unknown_frees"], f["alloc_of_live"], f["overlaps_resolved"], f["trace_end_live_bytes"], f["ops"]) ==
          (0, 1, 1, 0, 6), f"a realloc overlapping another thread's use of its address is resolved: {f}")
    st = trace_stats.compute(fmt.load(tmp / "overlap.ltr"))
    check((st.unknown_frees, st.alloc_of_live, st.overlaps_resolved, st.end_live) == (0, 1, 1, 0),
          "the Python reader resolves it the same way")
    # gzip-compressed traces are read as they are
    (tmp / "w.ltr.gz").write_bytes(gzip.compress(good))
    jz, _ = replay(args, tmp / "w.ltr.gz")
    check(jz["figures"]["ops"] == j0["figures"]["ops"], "a .gz trace replays the same calls")
    (tmp / "bad.gz").write_bytes(gzip.compress(good)[:-20])
    _, r = replay(args, tmp / "bad.gz", expect=3)
    check("gzip" in r.stderr, "a truncated .gz is reported")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--recorder", required=True)
    p.add_argument("--replay", required=True)
    p.add_argument("--prog", required=True)
    p.add_argument("--fork-exec", required=True)
    p.add_argument("--tree-prog")
    p.add_argument("check", choices=["record-replay", "faithful", "unchanged-output", "fork-exec", "bad-input",
                                     "clock-and-env", "vfork-exec", "process-tree"])
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="larder-trace-") as td:
        globals()["t_" + args.check.replace("-", "_")](args, Path(td))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
