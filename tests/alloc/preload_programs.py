#!/usr/bin/env python3
"""Real programs under LD_PRELOAD=liblarder.so print the same output as without it.

usage: preload_programs.py --lib liblarder.so --work DIR [--cxx-program PATH] CASE
  CASE  python  python3 (this interpreter) with PYTHONMALLOC=malloc, an allocation-heavy
                script with threads
        cxx     the C++ program tests/alloc/preload_cxx_program.cpp (containers, std::thread,
                alignas(64) and alignas(4096) new)
        sort    sort(1) on a generated 400,000-line input, with --parallel=2
        gcc     gcc -O2 compiling a generated C file: the object files must be identical and
                the linked programs must print the same

Each case runs the program twice, plain and with LD_PRELOAD, and compares exit status and
stdout (and the files the program writes). The preloaded run also sets LD_DEBUG=files with
LD_DEBUG_OUTPUT, and the dynamic loader's log of every process started (gcc runs cc1, as,
collect2, ld) must show liblarder.so initialised: LD_PRELOAD of a path that cannot be loaded
only warns, so without this check a broken preload would pass unnoticed. (Larder's own
LARDER_STATS report cannot serve: sort closes stderr before exit.)

Exit: 0 same output, 1 different (or larder not active), 2 bad arguments, 77 the tool is
not installed (CTest SKIP_RETURN_CODE).
"""
import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys

SKIP = 77

PY_SCRIPT = r'''
import hashlib, json, threading, collections

def work(seed, out):
    h = hashlib.sha256()
    d = {}
    for i in range(25000):
        k = "key-%d-%s" % ((i * 7919 + seed) % 9001, "x" * (i % 23))
        v = d.setdefault(k, [])
        v.append(i)
        if len(v) > 8:
            del v[:4]
        if i % 1000 == 0:
            blob = json.dumps({"i": i, "keys": sorted(d)[:50], "b": [bytes(range(i % 256))]}, default=list)
            h.update(blob.encode())
    c = collections.Counter(len(k) for k in d)
    s = sorted(d.items())
    for k, v in s[::97]:
        h.update(k.encode())
        h.update(repr(v).encode())
    h.update(repr(sorted(c.items())).encode())
    big = [bytearray(n % 5000) for n in range(3000)]
    h.update(str(sum(len(b) for b in big)).encode())
    out[seed] = h.hexdigest()

for rnd in range(2):
    out = {}
    ts = [threading.Thread(target=work, args=(rnd * 10 + t, out)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
    for k in sorted(out):
        print(rnd, k, out[k])
'''


def run(cmd, env, cwd, stdin_path=None):
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    try:
        return subprocess.run(cmd, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=600)
    finally:
        if stdin_path:
            stdin.close()


def digest(data):
    return "%d bytes, sha256 %s" % (len(data), hashlib.sha256(data).hexdigest()[:16])


class Case:
    def __init__(self, lib, work):
        self.lib = lib
        self.work = work
        self.failures = []

    def env(self, preload):
        e = dict(os.environ)
        e.pop("LD_PRELOAD", None)
        e["LC_ALL"] = "C"
        e["PYTHONHASHSEED"] = "0"
        for k in list(e):
            if k.startswith("LARDER_"):
                del e[k]
        if preload:
            e["LD_PRELOAD"] = self.lib
        return e

    def loader_log(self, clear):
        """The LD_DEBUG_OUTPUT files (one per process) of the last preloaded run."""
        d = os.path.join(self.work, "lddebug")
        os.makedirs(d, exist_ok=True)
        names = sorted(os.listdir(d))
        if clear:
            for n in names:
                os.unlink(os.path.join(d, n))
            return os.path.join(d, "log"), []
        return None, [open(os.path.join(d, n), errors="replace").read() for n in names]

    def both(self, name, cmd, extra_env=None, stdin_path=None, outputs=()):
        """Runs cmd plain and preloaded; compares status, stdout and the files in outputs."""
        results = []
        for preload in (False, True):
            env = self.env(preload)
            env.update(extra_env or {})
            if preload:
                env["LD_DEBUG"] = "files"
                env["LD_DEBUG_OUTPUT"] = self.loader_log(clear=True)[0]
            for f in outputs:
                p = os.path.join(self.work, f)
                if os.path.exists(p):
                    os.unlink(p)
            r = run(cmd, env, self.work, stdin_path)
            files = {}
            for f in outputs:
                p = os.path.join(self.work, f)
                files[f] = open(p, "rb").read() if os.path.exists(p) else None
            results.append((r, files))
        (plain, pf), (pre, lf) = results
        tag = "%s: " % name
        print("%splain exit %d, stdout %s" % (tag, plain.returncode, digest(plain.stdout)))
        print("%spreloaded exit %d, stdout %s" % (tag, pre.returncode, digest(pre.stdout)))
        if plain.returncode != 0:
            self.failures.append(tag + "fails without preload too (exit %d): %s"
                                 % (plain.returncode, plain.stderr.decode(errors="replace")[-2000:]))
        if pre.returncode != plain.returncode:
            self.failures.append(tag + "exit %d preloaded, %d plain; stderr: %s"
                                 % (pre.returncode, plain.returncode,
                                    pre.stderr.decode(errors="replace")[-2000:]))
        if pre.stdout != plain.stdout:
            self.failures.append(tag + "stdout differs")
            a = plain.stdout.decode(errors="replace").splitlines()
            b = pre.stdout.decode(errors="replace").splitlines()
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    self.failures.append("  first difference at line %d:\n    plain:     %s\n    preloaded: %s"
                                         % (i + 1, x[:200], y[:200]))
                    break
        for f in outputs:
            if pf[f] is None or lf[f] is None:
                self.failures.append(tag + "%s was not written (plain %s, preloaded %s)"
                                     % (f, pf[f] is not None, lf[f] is not None))
            elif pf[f] != lf[f]:
                self.failures.append(tag + "%s differs: plain %s, preloaded %s"
                                     % (f, digest(pf[f]), digest(lf[f])))
            else:
                print("%s%s identical (%s)" % (tag, f, digest(pf[f])))
        logs = self.loader_log(clear=False)[1]
        init = "calling init: " + self.lib
        active = sum(1 for log in logs if init in log)
        print("%sliblarder.so initialised in %d of %d process(es) of the preloaded run"
              % (tag, active, len(logs)))
        if not logs or active != len(logs):
            self.failures.append(tag + "liblarder.so was not loaded in every process (%d of %d); "
                                 "stderr: %s" % (active, len(logs),
                                                 pre.stderr.decode(errors="replace")[-1000:]))
        return plain, pre


def case_python(c, args):
    script = os.path.join(c.work, "alloc_heavy.py")
    with open(script, "w") as f:
        f.write(PY_SCRIPT)
    c.both("python", [sys.executable, script], extra_env={"PYTHONMALLOC": "malloc"})


def case_cxx(c, args):
    if not args.cxx_program or not os.access(args.cxx_program, os.X_OK):
        print("error: --cxx-program must name the built preload_cxx_program", file=sys.stderr)
        return 2
    c.both("cxx", [args.cxx_program])


def case_sort(c, args):
    sort = shutil.which("sort")
    if not sort:
        print("sort is not installed: skipped")
        return SKIP
    rng = random.Random(2024)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 12)))
             for _ in range(5000)]
    inp = os.path.join(c.work, "sort_input.txt")
    with open(inp, "w") as f:
        for i in range(400000):
            f.write("%s %d %s\n" % (rng.choice(words), rng.randint(0, 10 ** 9), rng.choice(words) * rng.randint(1, 4)))
    c.both("sort", [sort, "--parallel=2", "-S", "32M", "-k1,1", "-k2,2n"], stdin_path=inp)
    c.both("sort -u", [sort, "-u", "-o", "sorted_u.txt", inp], outputs=("sorted_u.txt",))


def gen_c_source(path, nfuncs=150):
    rng = random.Random(77)
    with open(path, "w") as f:
        f.write("#include <stdio.h>\n#include <string.h>\n\n")
        for i in range(nfuncs):
            a, b, k = rng.randint(1, 1000), rng.randint(1, 1000), rng.randint(2, 9)
            f.write("static unsigned long f%d(unsigned long x) {\n" % i)
            f.write("  unsigned long acc = %d;\n  char buf[64];\n" % a)
            f.write("  for (int i = 0; i < %d; i++) {\n" % (k + 3))
            f.write("    acc = acc * %d + (x ^ (unsigned long)i) %% %d;\n" % (b, k * 13 + 1))
            f.write("    switch (acc %% %d) {\n" % k)
            for j in range(k):
                f.write("      case %d: acc += %d; break;\n" % (j, rng.randint(0, 99)))
            f.write("    }\n  }\n")
            f.write("  snprintf(buf, sizeof buf, \"%%lu-%d\", acc);\n" % i)
            f.write("  return acc + strlen(buf);\n}\n\n")
        f.write("int main(void) {\n  unsigned long s = 0;\n")
        for i in range(nfuncs):
            f.write("  s = s * 31 + f%d(s + %d);\n" % (i, i))
            if i % 50 == 49:
                f.write("  printf(\"%%d %%lu\\n\", %d, s);\n" % i)
        f.write("  printf(\"total %lu\\n\", s);\n  return 0;\n}\n")


def case_gcc(c, args):
    gcc = shutil.which("gcc")
    if not gcc:
        print("gcc is not installed: skipped")
        return SKIP
    src = os.path.join(c.work, "gen.c")
    gen_c_source(src)
    # -frandom-seed: gcc may otherwise put random names into the object (e.g. for LTO/anonymous
    # namespaces); the comparison must see only what the allocator could change.
    c.both("gcc -c", [gcc, "-O2", "-g", "-frandom-seed=larder", "-c", "gen.c", "-o", "gen.o"],
           outputs=("gen.o",))
    c.both("gcc link", [gcc, "-O1", "-frandom-seed=larder", "gen.c", "-o", "gen_prog"],
           outputs=("gen_prog",))
    prog = os.path.join(c.work, "gen_prog")
    if os.path.exists(prog):
        # the compiled program itself, without any preload: what the compiler produced must run
        r = run([prog], c.env(False), c.work)
        print("gcc: compiled program exit %d, stdout %s" % (r.returncode, digest(r.stdout)))
        if r.returncode != 0 or b"total" not in r.stdout:
            c.failures.append("gcc: the compiled program failed (exit %d)" % r.returncode)


CASES = {"python": case_python, "cxx": case_cxx, "sort": case_sort, "gcc": case_gcc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to liblarder.so")
    ap.add_argument("--work", required=True, help="scratch directory (created)")
    ap.add_argument("--cxx-program", help="the built preload_cxx_program (case cxx)")
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    if not os.path.isfile(args.lib):
        print("error: --lib %s: no such file" % args.lib, file=sys.stderr)
        return 2
    args.lib = os.path.abspath(args.lib)
    if args.cxx_program:
        args.cxx_program = os.path.abspath(args.cxx_program)
    work = os.path.join(os.path.abspath(args.work), args.case)
    os.makedirs(work, exist_ok=True)
    c = Case(args.lib, work)
    rc = CASES[args.case](c, args)
    if rc:
        return rc
    for f in c.failures:
        print("FAIL " + f)
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
