#!/bin/sh
# bench/latency keeps the workload contract (docs/benchmarks.md): a small run in each mode ends
# with one JSON line naming the program and carrying the latency and fragmentation figures, the
# pool passes its check, and bad flags exit 2. Usage: latency_smoke.sh /path/to/latency [trace]
set -u
prog=${1:?usage: latency_smoke.sh /path/to/latency [trace]}
trace=${2:-}
fail=0
check_json() {
  python3 -c '
import json, sys
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
f = d["figures"]
assert d["name"] == "latency", d["name"]
for k in ("malloc_p50_ns", "malloc_p99_ns", "malloc_p9999_ns", "malloc_max_ns", "free_p50_ns",
          "free_p9999_ns", "free_max_ns", "peak_live_bytes", "peak_heap_bytes", "fragmentation"):
    assert k in f and f[k] >= 0, k
assert f["malloc_p50_ns"] <= f["malloc_p99_ns"] <= f["malloc_p9999_ns"] <= f["malloc_max_ns"]
assert f["free_p50_ns"] <= f["free_p9999_ns"] <= f["free_max_ns"]
assert f["peak_live_bytes"] > 0 and f["refused"] == 0
assert f.get("pool_check", 0) == 0
' || { echo "latency $*: bad JSON line" >&2; fail=1; }
}
"$prog" --ops 20000 --live-bytes 1000000 | check_json malloc
"$prog" --pool --ops 20000 --live-bytes 1000000 | check_json pool
"$prog" --pool --prefault --ops 20000 --live-bytes 1000000 | check_json prefault
if [ -n "$trace" ] && [ -f "$trace" ]; then
  "$prog" --pool --trace "$trace" | check_json trace
fi
for bad in "--ops 5" "--bogus" "--prefault" "--ops" "--touch 2" "--trace /nonexistent/file"; do
  # shellcheck disable=SC2086
  "$prog" $bad >/dev/null 2>&1
  rc=$?
  want=2
  [ "$bad" = "--trace /nonexistent/file" ] && want=1
  if [ $rc -ne $want ]; then echo "latency $bad: exit $rc, wanted $want" >&2; fail=1; fi
done
exit $fail
