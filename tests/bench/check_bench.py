#!/usr/bin/env python3
"""Runs a larder-bench workload program and checks its contract (docs/benchmarks.md).

  check_bench.py run PROG NAME [checks...] [--preload LIB] -- ARGS...
      PROG runs with ARGS and must exit 0 with one JSON object on its last stdout line:
      {"name": NAME, "params": {...}, "figures": {...}}. Checks:
        --params k1,k2        these keys exist in params
        --figures k1,k2       these keys exist in figures (numbers, lists of numbers, or
                              lists of [x, y] pairs of numbers)
        --nullable k1,k2      these figures may be null (a figure the run was too short for)
        --param k=v           params[k] == v (v parsed as JSON)
        --figure k=v          figures[k] == v (numbers compared to 1e-9 relative)
        --positive k1,k2      figures[k] > 0
        --len k=n             figures[k] is a list of n numbers
        --expr "python expr"  true, with p = params and f = figures in scope, and preload
                              the --preload path (None without one)
  check_bench.py bad PROG [--preload LIB] -- ARGS1... [-- ARGS2... ...]
      PROG with each argument list must exit 2, print a usage message on stderr, and print no
      JSON result; then PROG --help must exit 0 with the usage on stdout.

--preload sets LD_PRELOAD for PROG only, so that this checker (python) does not itself run on
the allocator under test. Standard library only.
"""
import argparse
import json
import math
import os
import subprocess
import sys

TIMEOUT_S = 60


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(prog, args, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        # ld.so only warns and runs the program on libc when the library is missing: that
        # would pass a test that never ran the allocator.
        if not os.path.isfile(preload):
            fail("preload library %s does not exist (build it first)" % preload)
        env["LD_PRELOAD"] = preload
    cmd = [prog] + args
    try:
        cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %d s" % (" ".join(cmd), TIMEOUT_S))
    print("$ %s%s" % ("LD_PRELOAD=%s " % preload if preload else "", " ".join(cmd)))
    print(cp.stdout, end="")
    print(cp.stderr, end="", file=sys.stderr)
    if preload and "cannot be preloaded" in cp.stderr:
        fail("the dynamic loader did not preload %s" % preload)
    return cp


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_pair(v):
    return isinstance(v, list) and len(v) == 2 and all(is_number(x) for x in v)


def keys(s):
    return [k for k in s.split(",") if k]


def kv(s):
    if "=" not in s:
        fail("expected key=value, got %r" % s)
    k, v = s.split("=", 1)
    return k, json.loads(v)


def same(a, b):
    if is_number(a) and is_number(b):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


def check_run(o, args):
    cp = run(o.prog, args, o.preload)
    if cp.returncode != 0:
        fail("exit status %d, expected 0" % cp.returncode)
    lines = cp.stdout.rstrip("\n").split("\n")
    if not lines or not lines[-1].strip():
        fail("no output")
    try:
        doc = json.loads(lines[-1])
    except ValueError as e:
        fail("last stdout line is not JSON (%s): %r" % (e, lines[-1]))
    if not isinstance(doc, dict) or set(doc) != {"name", "params", "figures"}:
        fail("JSON must have exactly name, params, figures: %r" % doc)
    if doc["name"] != o.name:
        fail("name is %r, expected %r" % (doc["name"], o.name))
    p, f = doc["params"], doc["figures"]
    if not isinstance(p, dict) or not isinstance(f, dict):
        fail("params and figures must be objects")
    nullable = set(keys(o.nullable))
    for k, v in f.items():
        ok = is_number(v) or (isinstance(v, list) and (all(is_number(x) for x in v)
                                                       or all(is_pair(x) for x in v)))
        if v is None and k in nullable:
            ok = True
        if not ok:
            fail("figure %s is not a finite number or list of numbers or pairs: %r" % (k, v))
    for k in keys(o.params):
        if k not in p:
            fail("params lack %r: %r" % (k, p))
    for k in keys(o.figures):
        if k not in f:
            fail("figures lack %r: %r" % (k, f))
    for s in o.param:
        k, v = kv(s)
        if k not in p or not same(p[k], v):
            fail("params[%r] = %r, expected %r" % (k, p.get(k), v))
    for s in o.figure:
        k, v = kv(s)
        if k not in f or not same(f[k], v):
            fail("figures[%r] = %r, expected %r" % (k, f.get(k), v))
    for k in keys(o.positive):
        if k not in f or not is_number(f[k]) or f[k] <= 0:
            fail("figures[%r] = %r, expected > 0" % (k, f.get(k)))
    for s in o.len:
        k, n = kv(s)
        if k not in f or not isinstance(f[k], list) or len(f[k]) != n:
            fail("figures[%r] = %r, expected a list of %d" % (k, f.get(k), n))
    for e in o.expr:
        try:
            ok = eval(e, {"math": math}, {"p": p, "f": f, "preload": o.preload})
        except Exception as ex:  # a typo in a test must fail loudly, not pass
            fail("expression %r raised %r" % (e, ex))
        if not ok:
            fail("expression %r is false (params %r, figures %r)" % (e, p, f))
    print("ok: %s" % o.name)


def check_bad(o, args):
    cp = run(o.prog, args, o.preload)
    if cp.returncode != 2:
        fail("exit status %d for bad arguments %r, expected 2" % (cp.returncode, args))
    if "usage" not in cp.stderr.lower():
        fail("no usage message on stderr for %r" % (args,))
    for line in cp.stdout.splitlines():
        if line.lstrip().startswith("{"):
            fail("printed a result for bad arguments %r: %r" % (args, line))
    print("ok: bad arguments %r rejected with status 2" % (args,))


def split_groups(argv):
    groups, cur = [], []
    for a in argv:
        if a == "--":
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    groups.append(cur)
    return groups


def check_help(o):
    cp = run(o.prog, ["--help"], o.preload)
    if cp.returncode != 0:
        fail("--help exited %d, expected 0" % cp.returncode)
    if "usage" not in cp.stdout.lower():
        fail("--help printed no usage on stdout")
    print("ok: --help")


def main():
    groups = split_groups(sys.argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run", "bad"])
    ap.add_argument("prog")
    ap.add_argument("name", nargs="?")
    ap.add_argument("--preload")
    ap.add_argument("--params", default="")
    ap.add_argument("--figures", default="")
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--figure", action="append", default=[])
    ap.add_argument("--positive", default="")
    ap.add_argument("--nullable", default="")
    ap.add_argument("--len", action="append", default=[])
    ap.add_argument("--expr", action="append", default=[])
    o = ap.parse_args(groups[0])
    if o.mode == "run":
        if not o.name:
            fail("run needs the expected program name")
        if len(groups) != 2:
            fail("run takes one argument list after --")
        check_run(o, groups[1])
    else:
        if len(groups) < 2:
            fail("bad needs at least one argument list after --")
        for args in groups[1:]:
            check_bad(o, args)
        check_help(o)


if __name__ == "__main__":
    main()
