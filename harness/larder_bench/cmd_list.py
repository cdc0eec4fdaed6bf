"""`larder-bench list`: the workloads and allocators found, and what is missing."""
from __future__ import annotations

from . import allocators as A
from . import suites
from .common import add_allocator_options, allocators_from_args, error
from .workloads import WORKLOADS, binary


def register(sub) -> None:
    p = sub.add_parser("list", help="show workloads, allocators and suites, with what is missing")
    add_allocator_options(p)
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        allocs = allocators_from_args(args)
    except A.AllocatorError as e:
        return error(str(e))
    names = list(WORKLOADS)
    for e in suites.SUITES:
        if e.workload not in names:
            names.append(e.workload)
    print(f"Workloads (in {args.build_dir}/bin):")
    for n in names:
        exe = binary(args.build_dir, n)
        w = WORKLOADS.get(n)
        if exe.is_file():
            print(f"  {n:<16} found    {w.description if w else exe}")
        else:
            print(f"  {n:<16} MISSING  {exe} (build it with `make build`)")
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
