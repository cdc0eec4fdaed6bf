#!/bin/sh
# Real programs under LD_PRELOAD=liblarder-pool.so (tests/pool/tests.cmake): python3 doing
# allocation-heavy work with several threads, and sort over a generated file. Their outputs
# must equal the same programs' outputs without the library, and LARDER_POOL_STATS=1 must
# show the pool served them with a clean integrity check at exit.
# Usage: preload_programs.sh /path/to/liblarder-pool.so
set -u
lib=${1:?usage: preload_programs.sh /path/to/liblarder-pool.so}
[ -f "$lib" ] || { echo "no such library: $lib" >&2; exit 2; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

script='
import threading, json, random
def work(seed, out):
    r = random.Random(seed)
    d = {}
    for i in range(20000):
        k = r.randrange(3000)
        d[k] = [r.random() for _ in range(r.randrange(1, 40))] if r.random() < 0.7 else "x" * r.randrange(1, 5000)
        if r.random() < 0.3:
            d.pop(r.randrange(3000), None)
    out[seed] = len(json.dumps(sorted((k, len(v)) for k, v in d.items())))
out = {}
ts = [threading.Thread(target=work, args=(s, out)) for s in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
big = bytearray(20 * 1024 * 1024)
print(sorted(out.items()), len(big), sum(range(100000)))
'
# the interpreter itself, not a wrapper script (pyenv shims run bash first)
py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [ -n "$py" ] && [ -x "$py" ]; then
  "$py" -c "$script" >"$tmp/py.ref" || { echo "python3 failed without the library" >&2; exit 1; }
  LARDER_POOL_STATS=1 PYTHONMALLOC=malloc LD_PRELOAD="$lib" "$py" -c "$script" >"$tmp/py.out" 2>"$tmp/py.err"
  rc=$?
  if [ $rc -ne 0 ] || ! cmp -s "$tmp/py.ref" "$tmp/py.out"; then
    echo "python3 under the pool: exit $rc, output differs or missing" >&2; cat "$tmp/py.err" >&2; fail=1
  elif ! grep -q "liblarder-pool: areas [0-9]* .* check 0" "$tmp/py.err"; then
    echo "python3 under the pool: no clean statistics line" >&2; cat "$tmp/py.err" >&2; fail=1
  else
    echo "python3: ok: $(grep 'liblarder-pool:' "$tmp/py.err")"
  fi
else
  echo "python3 not found; skipping" >&2
fi

awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%d %s\n", int(rand() * 1e9), substr("abcdefghijklmnopqrstuvwxyz", 1 + int(rand() * 26)) }' >"$tmp/in.txt"
sort "$tmp/in.txt" >"$tmp/sort.ref" || exit 1
LARDER_POOL_STATS=1 LD_PRELOAD="$lib" sort -S 64M "$tmp/in.txt" >"$tmp/sort.out" 2>"$tmp/sort.err"
rc=$?
if [ $rc -ne 0 ] || ! cmp -s "$tmp/sort.ref" "$tmp/sort.out"; then
  echo "sort under the pool: exit $rc, output differs" >&2; cat "$tmp/sort.err" >&2; fail=1
elif ! grep -q "liblarder-pool: areas [0-9]* .* check 0" "$tmp/sort.err"; then
  echo "sort under the pool: no clean statistics line" >&2; cat "$tmp/sort.err" >&2; fail=1
else
  echo "sort: ok: $(grep 'liblarder-pool:' "$tmp/sort.err")"
fi

# a malformed tunable is reported and ignored, never fatal
LARDER_POOL_CHUNK=lots LD_PRELOAD="$lib" sort /dev/null 2>"$tmp/bad.err"
rc=$?
if [ $rc -ne 0 ] || ! grep -q "ignoring LARDER_POOL_CHUNK" "$tmp/bad.err"; then
  echo "bad LARDER_POOL_CHUNK: exit $rc, message missing" >&2; cat "$tmp/bad.err" >&2; fail=1
fi
exit $fail
