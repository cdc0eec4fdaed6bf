#!/usr/bin/env bash
# liblarder against glibc and mimalloc, as the allocator issue asks: malloc-test with 10M
# malloc/free pairs per thread of 16, 64, 512 and 4100 bytes (seed 001's sizes) at 1, 2 and 8
# threads, and seed 002's producer/consumer test at 1, 2, 4 and 8 workers; 5 interleaved
# repeats each, medians with min-max, peak RSS from wait4. Run `make build venv` first.
# usage: scripts/bench-allocator.sh [results-dir] [allocators]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/allocator}
allocators=${2:-glibc,mimalloc,larder}
bench=".venv/bin/larder-bench"
[ -x "$bench" ] || { echo "bench-allocator: run 'make build venv' first" >&2; exit 2; }
for size in 16 64 512 4100; do
  "$bench" run --workloads malloc-test --threads 1,2,8 --allocators "$allocators" --repeats 5 \
    --set malloc-test:--size=$size --set malloc-test:--iterations=10000000 --strace none \
    --output-dir "$out/malloc-test-$size"
done
"$bench" run --workloads free-contention --threads 1,2,4,8 --allocators "$allocators" --repeats 5 \
  --strace none --output-dir "$out/free-contention"
echo "bench-allocator: reports under $out/*/*/report.md"
