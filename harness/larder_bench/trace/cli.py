"""`larder-bench trace ...`: record, stats, replay, synth, totext, tobin.

Registered in larder_bench/cli.py's COMMANDS as "larder_bench.trace.cli".
Exit status: 0 done, 2 bad command line, 3 an invalid trace file; `record` returns the
recorded command's own status.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import fmt, stats, synth

EXIT_USAGE = 2
EXIT_BAD_TRACE = 3


def _err(msg: str, code: int = EXIT_USAGE) -> int:
    print(f"larder-bench trace: {msg}", file=sys.stderr)
    return code


def _build_dir(args) -> Path:
    return Path(args.build_dir)


def _positive_list(text: str, what: str) -> tuple:
    vals = []
    for t in text.split(","):
        t = t.strip()
        if not t.isdigit() or int(t) < 1:
            raise ValueError(f"{what} {text!r}: expected positive integers separated by commas")
        vals.append(int(t))
    return tuple(vals)


# ---- record ----
def cmd_record(args) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        return _err("record: no command given (larder-bench trace record [-o FILE] -- CMD ...)")
    recorder = (_build_dir(args) / "lib" / "liblarder-trace.so").resolve()
    if not recorder.is_file():
        return _err(f"record: {recorder} not found; build it with `make build`")
    out = args.output
    gz = out.endswith(".gz")
    target = out[:-3] if gz else out
    if "%p" not in target and Path(target).exists():
        Path(target).unlink()
    started = time.time()
    env = dict(os.environ)
    env["LD_PRELOAD"] = str(recorder) + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["LARDER_TRACE_FILE"] = target
    env.pop("LARDER_TRACE_ROOT", None)  # a new recording has its own root (docs/traces.md)
    try:
        rc = subprocess.call(cmd, env=env)
    except OSError as e:
        return _err(f"record: cannot run {cmd[0]}: {e.strerror}", 127)
    made = sorted(Path(target).parent.glob(Path(target.replace("%p", "*")).name + "*")) \
        if "%p" in target else sorted(Path(target).parent.glob(Path(target).name + "*"))
    made = [p for p in made if not p.name.endswith(".gz") and p.stat().st_mtime >= started - 1]
    for p in made:
        try:
            t = fmt.load(p)
            desc = f"{t.records} calls, {len(t.threads())} threads, pid {t.header.pid}"
        except fmt.TraceError as e:
            desc = f"unreadable: {e}"
        if gz:
            with open(p, "rb") as src, gzip.open(str(p) + ".gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            p.unlink()
            p = Path(str(p) + ".gz")
        print(f"larder-bench trace: wrote {p} ({desc})", file=sys.stderr)
    if len(made) > 1:
        print(f"larder-bench trace: {len(made)} files, one per process image of the recorded tree "
              f"(`larder-bench trace stats FILE` lists them)", file=sys.stderr)
    if not made:
        print("larder-bench trace: the command made no trace (statically linked, or no allocation?)", file=sys.stderr)
    return rc


# ---- stats ----
def cmd_stats(args) -> int:
    try:
        t = fmt.load(args.file)
    except (fmt.TraceError, OSError) as e:
        return _err(str(e), EXIT_BAD_TRACE)
    s = stats.compute(t)
    if args.json:
        d = s.to_json()
        d["process_tree"] = [{"file": str(m.path), "pid": m.header.pid, "ppid": m.header.ppid,
                              "root_pid": m.header.root_pid, "exec_seq": m.header.exec_seq, "comm": m.header.comm}
                             for m in fmt.family(args.file)]
        print(json.dumps(d, indent=1))
    else:
        print(stats.text_report(s, args.file))
        tree = fmt.family_text(args.file)
        if tree:
            print("\n" + tree)
    if args.plot:
        base = Path(args.plot)
        base.parent.mkdir(parents=True, exist_ok=True)
        live = base.with_name(base.stem + "-live.png")
        hist = base.with_name(base.stem + "-sizes.png")
        stats.plot_live(s, live, Path(args.file).name)
        stats.plot_histogram(s, hist, f"{Path(args.file).name}: request sizes")
        print(f"plots: {live}, {hist}", file=sys.stderr)
    return 0


# ---- replay ----
def cmd_replay(args) -> int:
    from .. import allocators as A
    from ..common import allocators_from_args
    from .. import runner
    from . import replay
    trace = Path(args.file)
    try:
        fmt.load(trace)
    except (fmt.TraceError, OSError) as e:
        return _err(str(e), EXIT_BAD_TRACE)
    tree = fmt.family_text(trace)
    if tree:
        print(tree + "\nreplaying only this file's process.", file=sys.stderr)
    try:
        threads = _positive_list(args.threads, "--threads")
        if args.iterations < 1 or args.repeats < 1:
            raise ValueError("--iterations and --repeats must be at least 1")
        allocs = allocators_from_args(args)
        if args.allocators:
            allocs = A.select(allocs, [a.strip() for a in args.allocators.split(",") if a.strip()])
    except (ValueError, A.AllocatorError) as e:
        return _err(str(e))
    exe = _build_dir(args) / "bin" / "trace-replay"
    if not exe.is_file():
        return _err(f"{exe} not found; build it with `make build`")
    for a in allocs:
        if not a.found:
            print(f"larder-bench trace: skipping allocator {a.name}: {a.missing}", file=sys.stderr)
    if not any(a.found for a in allocs):
        return _err("no allocator found to run")
    out_dir = runner.new_results_dir(Path(args.output_dir))
    doc, md = replay.run(trace, allocs, _build_dir(args), out_dir, threads, args.iterations, args.mode,
                         args.repeats, args.timeout, args.strace, plots=not args.no_plots)
    print(md.read_text())
    bad = [r for r in doc["runs"] if r.get("status") != "ok"]
    for r in bad:
        print(f"larder-bench trace: {r['allocator']} x={r['x']}: {r.get('message')}", file=sys.stderr)
    print(f"results: {out_dir / 'results.json'}\nreport:  {md}", file=sys.stderr)
    return 0


# ---- synth ----
def cmd_synth(args) -> int:
    p = synth.SynthParams(allocations=args.allocations, size_dist=args.size_dist, size_mean=args.size_mean,
                          size_alpha=args.size_alpha, size_max=args.size_max, life_dist=args.life_dist,
                          life_mean=args.life_mean, life_alpha=args.life_alpha,
                          phases=tuple(x.strip() for x in args.phases.split(",") if x.strip()),
                          threads=args.threads, seed=args.seed, keep_live=args.keep_live)
    try:
        t = synth.generate(p)
    except ValueError as e:
        return _err(f"synth: {e}")
    t.write(args.output)
    print(f"larder-bench trace: wrote {args.output} ({t.records} calls, {len(t.threads())} threads)", file=sys.stderr)
    return 0


# ---- text form ----
def cmd_totext(args) -> int:
    try:
        t = fmt.load(args.file)
    except (fmt.TraceError, OSError) as e:
        return _err(str(e), EXIT_BAD_TRACE)
    text = fmt.to_text(t)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def cmd_tobin(args) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        t = fmt.from_text(text, args.file)
    except fmt.TraceError as e:
        return _err(str(e), EXIT_BAD_TRACE)
    except OSError as e:
        return _err(f"{args.file}: {e.strerror}", EXIT_BAD_TRACE)
    t.write(args.output)
    return 0


def register(sub) -> None:
    from ..common import add_allocator_options, default_build_dir
    p = sub.add_parser("trace", help="record, inspect, synthesise and replay allocation traces",
                       description="Allocation traces (docs/traces.md): record any program with "
                                   "liblarder-trace.so, show its statistics, make synthetic ones, and "
                                   "replay them over allocators as seed 003 does.")
    tsub = p.add_subparsers(dest="trace_command", metavar="TRACE_COMMAND")
    tsub.required = True

    r = tsub.add_parser("record", help="run a command under liblarder-trace.so",
                        description="Runs CMD with liblarder-trace.so preloaded. %%p in FILE is the pid; a "
                                    "forked child without %%p gets FILE.<pid>, an exec'd image FILE.exec<n>. "
                                    "A FILE ending in .gz is compressed after the run.")
    r.add_argument("-o", "--output", default="larder-trace.%p.ltr", help="trace file (default larder-trace.%%p.ltr)")
    r.add_argument("--build-dir", default=default_build_dir(), help="build folder with lib/liblarder-trace.so")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    r.set_defaults(func=cmd_record)

    s = tsub.add_parser("stats", help="call counts, size histogram, live bytes over time and its pattern")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="print the figures as JSON")
    s.add_argument("--plot", metavar="BASE.png", help="write BASE-live.png and BASE-sizes.png")
    s.set_defaults(func=cmd_stats)

    rp = tsub.add_parser("replay", help="replay a trace over allocators and report as seed 003 chapter 6",
                         description="Replays FILE with trace-replay over each allocator and thread count, "
                                     "repeats interleaved, plus one strace pass and one time-series run each.")
    rp.add_argument("file")
    rp.add_argument("--allocators", help="only these allocators, in this order (comma-separated)")
    rp.add_argument("--threads", default="1,2,4", help="thread counts (default 1,2,4; thesis mode)")
    rp.add_argument("--iterations", type=int, default=1, help="passes over the trace per thread (default 1)")
    rp.add_argument("--mode", choices=("thesis", "faithful"), default="thesis")
    rp.add_argument("--repeats", type=int, default=3, help="repeats per case (default 3)")
    rp.add_argument("--timeout", type=float, default=300.0, help="seconds per run (default 300)")
    rp.add_argument("--strace", choices=("last", "all", "none"), default="all",
                    help="system-call counting pass for every thread count (all), the largest (last) or none")
    rp.add_argument("--output-dir", default="results", help="results root (default ./results)")
    rp.add_argument("--no-plots", action="store_true", help="skip the time-series runs and plots")
    add_allocator_options(rp)
    rp.set_defaults(func=cmd_replay)

    sy = tsub.add_parser("synth", help="make a synthetic trace (seed 003 §5.1)")
    sy.add_argument("-o", "--output", required=True, help="trace file to write (.gz to compress)")
    sy.add_argument("--allocations", type=int, default=100_000)
    sy.add_argument("--size-dist", choices=synth.DISTS, default="pareto")
    sy.add_argument("--size-mean", type=float, default=64.0)
    sy.add_argument("--size-alpha", type=float, default=1.5, help="Pareto shape of the sizes")
    sy.add_argument("--size-max", type=int, default=1 << 20)
    sy.add_argument("--life-dist", choices=synth.DISTS, default="exponential")
    sy.add_argument("--life-mean", type=float, default=1000.0, help="mean lifetime in allocations")
    sy.add_argument("--life-alpha", type=float, default=1.5, help="Pareto shape of the lifetimes")
    sy.add_argument("--phases", default="ramp,peak,plateau",
                    help=f"comma-separated phases from {', '.join(synth.PHASES)}")
    sy.add_argument("--threads", type=int, default=1)
    sy.add_argument("--seed", type=int, default=1)
    sy.add_argument("--keep-live", action="store_true", help="do not free what is live at the end")
    sy.set_defaults(func=cmd_synth)

    tt = tsub.add_parser("totext", help="binary trace -> text (one line per record)")
    tt.add_argument("file")
    tt.add_argument("-o", "--output", help="text file (default stdout)")
    tt.set_defaults(func=cmd_totext)

    tb = tsub.add_parser("tobin", help="text trace -> binary")
    tb.add_argument("file", help="text file, or - for stdin")
    tb.add_argument("-o", "--output", required=True)
    tb.set_defaults(func=cmd_tobin)


def main(argv: list[str] | None = None) -> int:
    """Runs the trace subcommands alone (python -m larder_bench.trace.cli ...)."""
    p = argparse.ArgumentParser(prog="larder-bench")
    sub = p.add_subparsers(dest="command")
    sub.required = True
    register(sub)
    args = p.parse_args(["trace"] + (sys.argv[1:] if argv is None else argv))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
