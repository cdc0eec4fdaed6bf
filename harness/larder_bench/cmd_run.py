"""`larder-bench run`: run a suite over the allocators, write results and the report."""
from __future__ import annotations

import sys
from pathlib import Path

from . import allocators as A
from . import commands, measure, report, results, runner, suites
from .workloads import binary
from .common import add_allocator_options, allocators_from_args, config_path, error


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _threads(text: str) -> tuple:
    vals = []
    for t in _csv(text):
        if not t.isdigit() or int(t) < 1:
            raise ValueError(f"--threads {text!r}: expected positive integers separated by commas")
        vals.append(int(t))
    if not vals:
        raise ValueError("--threads: empty list")
    return tuple(vals)


def _overrides(items: list[str]) -> dict:
    out = {}
    for it in items:
        if ":" not in it or "=" not in it.split(":", 1)[1]:
            raise ValueError(f"--set {it!r}: expected WORKLOAD:--flag=VALUE")
        w, rest = it.split(":", 1)
        flag, val = rest.split("=", 1)
        if not flag.startswith("--"):
            raise ValueError(f"--set {it!r}: the flag must start with --")
        if val.lower() in ("true", "on"):
            v = True
        elif val.lower() in ("false", "off"):
            v = False
        else:
            v = val
        out[(w, flag)] = v
    return out


def _metrics(items: list[str]) -> dict:
    out = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"--metric {it!r}: expected WORKLOAD|SERIES=FIGURE")
        w, m = (x.strip() for x in it.split("=", 1))
        if not w or not m:
            raise ValueError(f"--metric {it!r}: expected WORKLOAD|SERIES=FIGURE")
        out[w] = m
    return out


def register(sub) -> None:
    p = sub.add_parser("run", help="run a suite and write results/<timestamp>/",
                       description="Run a suite of workloads over the allocators found (or named), "
                                   "repeats interleaved, and write results.json, results.csv and a report.")
    p.add_argument("--suite", help=f"suite to run: {', '.join(suites.suite_names())} (default quick; when commands "
                                   f"are given, only they run unless a suite is named too)")
    p.add_argument("--command", action="append", default=[], metavar="'NAME=CMD ARGS...'",
                   help="run any program as a workload under every allocator, as series NAME (quote the whole "
                        "spec; repeatable; more options, servers and output checks with [commands.NAME] in --config)")
    p.add_argument("--workloads", help="only these workloads or series (comma-separated)")
    p.add_argument("--threads", help="thread counts for thread-swept series, e.g. 1,2,4,8")
    p.add_argument("--repeats", type=int, help="repeats per case (default: the entry's own, else 5)")
    p.add_argument("--allocators", help="only these allocators, in this order (comma-separated)")
    p.add_argument("--baseline", help="allocator the ratios are taken against (default glibc)")
    p.add_argument("--output-dir", default="results", help="results root (default ./results)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run before it is killed (default 120)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply each entry's work flags (iterations, writes, seconds) by this factor")
    p.add_argument("--strace", choices=("last", "all", "none"), default="last",
                   help="system-call counting pass: the largest case of each series (last), every case, or none")
    p.add_argument("--set", action="append", default=[], metavar="WORKLOAD|SERIES:--FLAG=VALUE",
                   help="override a flag in every entry of that workload, or in one series by its name (repeatable)")
    p.add_argument("--metric", action="append", default=[], metavar="WORKLOAD|SERIES=FIGURE",
                   help="compare this series (or every series of a workload) by another figure, e.g. "
                        "larson=ops_per_cpu_s (ops over user+sys CPU seconds measured by wait4); repeatable")
    p.add_argument("--rss-interval", type=float, default=measure.RSS_INTERVAL_MS, metavar="MS",
                   help=f"sample every run's resident set this often (default {measure.RSS_INTERVAL_MS:g} ms; 0: off)")
    p.add_argument("--no-suite-profiles", action="store_true",
                   help="leave out the profiles a suite adds (the tuning suite's seed 003 profiles)")
    p.add_argument("--fail-on-error", action="store_true",
                   help="exit with status 3 when any run failed (default: report it and exit 0)")
    add_allocator_options(p)
    p.set_defaults(func=main)


def _entries(args, threads, overrides) -> tuple[list, str]:
    """The suite's entries and the commands (--command, [commands] in the config), selected by
    --workloads and scaled; a name used twice is an error."""
    cli = [commands.parse_spec(s) for s in args.command]
    cfg = config_path(args)
    conf = commands.load_config(cfg) if cfg else []
    source = {id(e): "--command" for e in cli}
    source.update({id(e): f"config {cfg}" for e in conf})
    commands.check_unique(cli + conf, source)
    suite = args.suite or (None if cli or conf else "quick")
    wanted = _csv(args.workloads) if args.workloads else None
    cmd_names = {e.series for e in cli + conf}
    entries = []
    if suite is not None:
        names = [w for w in wanted if w not in cmd_names] if wanted else None
        if wanted and not names:
            entries = []
        else:
            entries = suites.select(suite, names, threads, args.scale, overrides)
        source.update({id(e): f"suite {suite}" for e in entries})
    elif wanted:
        unknown = [w for w in wanted if w not in cmd_names]
        if unknown:
            raise suites.SuiteError(f"no command named {', '.join(unknown)}; the commands are: {', '.join(sorted(cmd_names))}")
    chosen = [e for e in cli + conf if not wanted or e.series in wanted]
    if chosen:
        chosen = suites.select(commands.COMMANDS_SUITE, None, None, args.scale, overrides, table=chosen)
        source.update({id(e): "--command" if e.series in {c.series for c in cli} else f"config {cfg}" for e in chosen})
    commands.check_unique(entries + chosen, source)
    commands.validate(chosen, Path(args.build_dir))
    label = suite if not chosen else ("commands" if suite is None else f"{suite} + commands")
    return entries + chosen, label


def main(args) -> int:
    try:
        threads = _threads(args.threads) if args.threads else None
        overrides = _overrides(args.set)
        if args.repeats is not None and args.repeats < 1:
            raise ValueError("--repeats must be at least 1")
        if args.timeout <= 0:
            raise ValueError("--timeout must be positive")
        entries, suite_label = _entries(args, threads, overrides)
        if not entries:
            raise suites.SuiteError("nothing selected to run")
        entries = suites.with_metrics(entries, _metrics(args.metric))
        if args.rss_interval < 0:
            raise ValueError("--rss-interval must be 0 (off) or positive")
        measure.RSS_INTERVAL_MS = args.rss_interval
        allocs = allocators_from_args(args, [] if args.no_suite_profiles or not args.suite
                                      else suites.profiles_for(args.suite))
        allocs = A.select(allocs, _csv(args.allocators) if args.allocators else None)
    except (ValueError, A.AllocatorError, suites.SuiteError, commands.CommandError) as e:
        return error(str(e))
    build = Path(args.build_dir)
    programs = [e for e in entries if e.command is None]
    if programs and not any(binary(build, e.workload).is_file() for e in programs):
        where = "does not exist" if not build.is_dir() else "holds none of this suite's programs"
        return error(f"nothing to run: build folder {build} {where} (bin/{entries[0].workload if entries else '...'}, ...). "
                     f"Build first: `make build`, or `cmake -S . -B {build} -G Ninja -DCMAKE_BUILD_TYPE=Release && "
                     f"cmake --build {build}`; or name another build with --build-dir")
    found = [a for a in allocs if a.found]
    for a in allocs:
        if not a.found:
            print(f"larder-bench: skipping allocator {a.name}: {a.missing}", file=sys.stderr)
    if not found:
        return error("no allocator found to run")
    names = [a.name for a in found]
    if args.baseline and args.baseline not in names:
        return error(f"--baseline {args.baseline}: not among the allocators run ({', '.join(names)})")
    baseline = args.baseline or ("glibc" if "glibc" in names else names[0])

    out_dir = runner.new_results_dir(Path(args.output_dir))
    print(f"larder-bench: suite {suite_label}, {len(entries)} series, allocators {', '.join(names)}; "
          f"writing {out_dir}", file=sys.stderr)
    meta = {"suite": suite_label, "command": ["larder-bench"] + sys.argv[1:], "baseline": baseline,
            "repeats": args.repeats, "scale": args.scale, "rss_interval_ms": args.rss_interval}

    saved = []

    def checkpoint(doc):
        doc.update(meta)
        results.save(doc, out_dir)
        saved[:] = [doc]

    try:
        doc = runner.run_entries(entries, allocs, build, out_dir, repeats=args.repeats, timeout=args.timeout,
                                 strace_mode=args.strace, on_case_done=checkpoint, baseline=baseline)
    except KeyboardInterrupt:
        if saved:
            saved[0]["interrupted"] = True
            results.save(saved[0], out_dir)
            report.write(saved[0], out_dir, baseline)
            print(f"\nlarder-bench: interrupted; the series finished so far are in {out_dir}", file=sys.stderr)
        raise
    doc.update(meta)
    results.save(doc, out_dir)
    md, ht = report.write(doc, out_dir, baseline)
    print(report.terminal_summary(doc, baseline))
    print(f"\nresults: {out_dir / 'results.json'}, {out_dir / 'results.csv'}\nreport:  {md}\n         {ht}")
    failed = any(r.get("status") != "ok" for r in doc["runs"]) or bool(doc["problems"])
    return 3 if (failed and args.fail_on_error) else 0
