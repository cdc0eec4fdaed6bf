"""`larder-bench list`: the workloads and allocators found, and what is missing."""
from __future__ import annotations

from pathlib import Path

from . import allocators as A
from . import commands, suites
from .common import add_allocator_options, allocators_from_args, config_path, error
from .workloads import WORKLOADS, binary


def register(sub) -> None:
    p = sub.add_parser("list", help="show workloads, allocators and suites, with what is missing")
    add_allocator_options(p)
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        allocs = allocators_from_args(args)
        cfg = config_path(args)
        user = commands.load_config(cfg) if cfg else []
    except (A.AllocatorError, commands.CommandError) as e:
        return error(str(e))
    names = list(WORKLOADS)
    for e in suites.SUITES:
        if e.workload not in names and e.command is None:
            names.append(e.workload)
    print(f"Workloads (in {args.build_dir}/bin):")
    for n in names:
        exe = binary(args.build_dir, n)
        w = WORKLOADS.get(n)
        if exe.is_file():
            print(f"  {n:<16} found    {w.description if w else exe}")
        else:
            print(f"  {n:<16} MISSING  {exe} (build it with `make build`)")
    print("Programs (the programs suite's, and [commands] of the config file):")
    base = commands.base_subst(Path(args.build_dir))
    for e in [e for e in suites.SUITES if e.command is not None] + user:
        miss = commands.missing_programs(e, commands.entry_subst(e, base))
        what = " + ".join(Path(w[0]).name for w in (e.command.server, e.command.argv) if w)
        if miss:
            hint = f" (install: sudo apt-get install {e.command.package})" if e.command.package else ""
            print(f"  {e.series:<16} MISSING  {', '.join(miss)}{hint}")
        else:
            print(f"  {e.series:<16} found    {what}")
    print("Allocators:")
    for a in allocs:
        if a.found:
            ver = f" {a.package} {a.version}" if a.package and a.version else (f" {a.version}" if a.version else "")
            env = " " + " ".join(f"{k}={v}" for k, v in a.env.items()) if a.env else ""
            prof = f" (profile of {a.profile_of})" if a.profile_of else ""
            print(f"  {a.name:<12} found    {a.path or '(no preload)'}{ver}{env}{prof}")
        else:
            print(f"  {a.name:<12} MISSING  {a.missing}")
    print("Suites:")
    for s in suites.suite_names():
        es = [e for e in suites.SUITES if e.suite == s]
        print(f"  {s:<8} {len(es)} series: {', '.join(e.series for e in es)}")
        profs = suites.profiles_for(s)
        if profs:
            print(f"           profiles: {', '.join(p.name for p in profs)}")
    return 0
