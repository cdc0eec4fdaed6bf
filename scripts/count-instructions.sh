#!/usr/bin/env bash
# Instructions per operation on larder's common paths, counted by callgrind: the figures
# docs/allocator.md and docs/results.md quote ("a malloc(32)+free pair is 67 instructions"),
# for any allocator. Instructions are deterministic where times on a shared machine are not.
#
# usage: scripts/count-instructions.sh [--misses] [LIB.so ...]
#   with no LIB: the build's liblarder.so; "glibc" stands for no LD_PRELOAD. The build folder
#   is build/, or $LARDER_BUILD_DIR.
#
# Each figure is the difference between two runs of one program that differ only in how much
# work they do, divided by the extra work, so start-up, thread creation and exit cancel out:
#   pair        malloc(32) then free, in a loop (1 M against 2 M pairs; the loop is included);
#   remote      a producer thread mallocs 200,000 blocks of 64 bytes, then a consumer thread
#               frees them all, rounds apart (barriers, no spinning): per block, the malloc and
#               the remote free (5 against 10 rounds);
#   threadtest  bench/threadtest, one thread, 100,000 objects of 8 bytes allocated then freed
#               (Hoard's threadtest: blocks move between bin and superblock), per pair (10
#               against 20 rounds);
#   tt-1000     the same with 20,000 objects of 1,000 bytes, whose bins hold 16 blocks and
#               move 8 at a time: the refills' and flushes' fixed work shows (10 against 20);
#   remote-mix  as remote, with sizes drawn from 16 B-1 KiB (remote-free's mix: 64 classes,
#               so the freer's batches are many and short).
#   medium      a medium block replaced in a loop: 8 kept, each free followed by a malloc of
#               20-48 KiB (20,000 bytes plus 0-7 pages), the thread's kept medium spans
#               serving them: a malloc and a free (100,000 against 200,000 replacements).
#   thread      a thread's whole life, as larson's threads live: started, it frees the 100
#               blocks of 16 B-1 KiB its predecessor left (another heap's, unless the same one
#               was reused), mallocs 100 of its own for its successor, and exits; one at a time
#               (200 against 400 threads; thread creation and exit in libc included);
#   fan-in      64 producer threads malloc 2,048 blocks of 16 B-1 KiB each, then wait while one
#               consumer frees them all, taking one block of each producer in turn (frees
#               scattered over 64 owners' superblocks, as remote-free-fan-in's consumer's are):
#               per block, the malloc and the remote free (2 against 4 rounds).
#
# --misses: instead of instructions, the data cache misses per operation of the same programs,
# simulated by cachegrind with this machine's cache sizes (one core: a line another core wrote
# counts as a hit if this core held it): the lines an operation brings into the first-level
# cache (D1, reads and writes), and into the last level (LL: from memory). What the common
# paths touch, counted where perf's samples can only be guessed from. The simulation ignores
# prefetches (a line asked for ahead, as a deferred free's block, counts as a miss where it is
# read) and does not tell a write miss, which rarely stalls a core, from a read miss.
# Needs valgrind (scripts/install-deps.sh installs it) and a C compiler; builds nothing of
# larder's: run `make build` first. Takes about 35 s per library here (--misses: about as long; up to a minute for jemalloc).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
  echo "count-instructions: valgrind is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "count-instructions: no C compiler ($cc)" >&2
  exit 2
fi
build=${LARDER_BUILD_DIR:-build}
threadtest=$build/bin/threadtest
if [ ! -x "$threadtest" ]; then
  echo "count-instructions: $threadtest is missing: run 'make build' first" >&2
  exit 2
fi
misses=0
if [ "${1:-}" = --misses ]; then
  misses=1
  shift
fi
case "${1:-}" in
-*)
  echo "count-instructions: unknown option: $1 (usage: scripts/count-instructions.sh [--misses] [LIB.so ...])" >&2
  exit 2
  ;;
esac
libs=("$@")
[ ${#libs[@]} -eq 0 ] && libs=("$build/lib/liblarder.so")
for lib in "${libs[@]}"; do
  if [ "$lib" != glibc ] && [ ! -f "$lib" ]; then
    echo "count-instructions: no such library: $lib" >&2
    exit 2
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/pair.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  for (long i = 0; i < n; i++) {
    void *volatile p = malloc(32);
    free(p);
  }
  return 0;
}
EOF
cat > "$work/remote.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
enum { N = 200000 };
static void *blocks[N];
static size_t sizes[N];
static int rounds;
static pthread_barrier_t made, freed;
static void *producer(void *arg) {
  (void)arg;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < N; i++) blocks[i] = malloc(sizes[i]);
    pthread_barrier_wait(&made);
    pthread_barrier_wait(&freed);
  }
  return NULL;
}
static void *consumer(void *arg) {
  (void)arg;
  for (int r = 0; r < rounds; r++) {
    pthread_barrier_wait(&made);
    for (int i = 0; i < N; i++) free(blocks[i]);
    pthread_barrier_wait(&freed);
  }
  return NULL;
}
int main(int argc, char **argv) {
  rounds = atoi(argv[1]);
  /* argv[2] "mix": sizes 16-1024 from a fixed xorshift sequence; else 64 bytes each */
  unsigned long long x = 88172645463325252ull;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sizes[i] = argc > 2 ? 16 + x % 1009 : 64;
  }
  pthread_barrier_init(&made, NULL, 2);
  pthread_barrier_init(&freed, NULL, 2);
  pthread_t p, c;
  if (pthread_create(&p, NULL, producer, NULL) || pthread_create(&c, NULL, consumer, NULL)) return 1;
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  return 0;
}
EOF
cat > "$work/thread.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
enum { BLOCKS = 100 };
static void *left[BLOCKS];
static void *life(void *arg) {
  (void)arg;
  for (int i = 0; i < BLOCKS; i++) free(left[i]);
  for (int i = 0; i < BLOCKS; i++) left[i] = malloc(16 + (size_t)i * 10);
  return NULL;
}
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  for (int i = 0; i < BLOCKS; i++) left[i] = malloc(16 + (size_t)i * 10);
  for (int t = 0; t < n; t++) {
    pthread_t th;
    if (pthread_create(&th, NULL, life, NULL) || pthread_join(th, NULL)) return 1;
  }
  for (int i = 0; i < BLOCKS; i++) free(left[i]);
  return 0;
}
EOF
cat > "$work/fanin.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
enum { P = 64, M = 2048 };
static void *blocks[P][M];
static size_t sizes[P][M];
static int rounds;
static pthread_barrier_t made, freed;
static void *producer(void *arg) {
  int k = (int)(long)arg;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < M; i++) blocks[k][i] = malloc(sizes[k][i]);
    pthread_barrier_wait(&made);
    pthread_barrier_wait(&freed);
  }
  return NULL;
}
static void *consumer(void *arg) {
  (void)arg;
  for (int r = 0; r < rounds; r++) {
    pthread_barrier_wait(&made);
    for (int i = 0; i < M; i++)
      for (int k = 0; k < P; k++) free(blocks[k][i]);
    pthread_barrier_wait(&freed);
  }
  return NULL;
}
int main(int argc, char **argv) {
  rounds = atoi(argv[1]);
  unsigned long long x = 88172645463325252ull;
  for (int k = 0; k < P; k++)
    for (int i = 0; i < M; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      sizes[k][i] = 16 + x % 1009;
    }
  pthread_barrier_init(&made, NULL, P + 1);
  pthread_barrier_init(&freed, NULL, P + 1);
  pthread_t p[P], c;
  for (long k = 0; k < P; k++)
    if (pthread_create(&p[k], NULL, producer, (void *)k)) return 1;
  if (pthread_create(&c, NULL, consumer, NULL)) return 1;
  for (int k = 0; k < P; k++) pthread_join(p[k], NULL);
  pthread_join(c, NULL);
  return 0;
}
EOF
cat > "$work/medium.c" <<'EOF'
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  char *keep[8];
  for (int k = 0; k < 8; k++) keep[k] = malloc(20000 + (size_t)k * 4096);
  for (long i = 0; i < n; i++) {
    int k = (int)(i & 7);
    free(keep[k]);
    keep[k] = malloc(20000 + (size_t)((i * 7) & 7) * 4096);
    keep[k][0] = 1;
  }
  for (int k = 0; k < 8; k++) free(keep[k]);
  return 0;
}
EOF
"$cc" -O2 -o "$work/pair" "$work/pair.c"
"$cc" -O2 -o "$work/medium" "$work/medium.c"
"$cc" -O2 -pthread -o "$work/remote" "$work/remote.c"
"$cc" -O2 -pthread -o "$work/thread" "$work/thread.c"
"$cc" -O2 -pthread -o "$work/fanin" "$work/fanin.c"

# What count() runs and sums: callgrind's instructions, or with --misses cachegrind's data cache
# misses "D1 LL", reads and writes together (its events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw).
if [ $misses = 0 ]; then
  tool=(--tool=callgrind --callgrind-out-file="$work/cg.%p")
  summed='{s += $2} END {print s}'
else
  tool=(--tool=cachegrind --cache-sim=yes --cachegrind-out-file="$work/cg.%p")
  summed='{d1 += $6 + $9; ll += $7 + $10} END {print d1, ll}'
fi
# The counts of one run of "$@" under lib $1, all processes summed.
count() {
  local lib=$1; shift
  rm -f "$work"/cg.*
  local preload=()
  [ "$lib" != glibc ] && preload=(env "LD_PRELOAD=$(readlink -f "$lib")")
  valgrind "${tool[@]}" --trace-children=yes "${preload[@]}" "$@" >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; exit 1; }
  grep -h '^summary:' "$work"/cg.* | awk "$summed"
}
# (counts of the larger run - of the smaller) / extra operations, one decimal each, joined with
# "/" ("failed" when either run failed: count printed its log and nothing on stdout; snmalloc,
# for one, cannot start under valgrind)
per_op() {
  if [ -z "$1" ] || [ -z "$2" ]; then echo failed; return; fi
  awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {
    k = split(a, x, " "); split(b, y, " ")
    for (i = 1; i <= k; i++) { v = (y[i] - x[i]) / n; if (v < 0 && v > -0.05) v = 0; printf "%s%.1f", (i > 1 ? "/" : ""), v }
  }'
}

[ $misses = 1 ] && echo "data cache misses per operation, D1/LL (cachegrind's simulation of this machine's caches)"
printf '%-40s %10s %10s %12s %10s %12s %10s %10s %10s\n' library pair remote threadtest tt-1000 remote-mix medium thread fan-in
for lib in "${libs[@]}"; do
  pair=$(per_op "$(count "$lib" "$work/pair" 1000000)" "$(count "$lib" "$work/pair" 2000000)" 1000000)
  remote=$(per_op "$(count "$lib" "$work/remote" 5)" "$(count "$lib" "$work/remote" 10)" 1000000)
  tt=$(per_op "$(count "$lib" "$threadtest" -t 1 --iterations 10 --objects 100000 --size 8)" \
              "$(count "$lib" "$threadtest" -t 1 --iterations 20 --objects 100000 --size 8)" 1000000)
  tt1k=$(per_op "$(count "$lib" "$threadtest" -t 1 --iterations 10 --objects 20000 --size 1000)" \
                "$(count "$lib" "$threadtest" -t 1 --iterations 20 --objects 20000 --size 1000)" 200000)
  mix=$(per_op "$(count "$lib" "$work/remote" 5 mix)" "$(count "$lib" "$work/remote" 10 mix)" 1000000)
  medium=$(per_op "$(count "$lib" "$work/medium" 100000)" "$(count "$lib" "$work/medium" 200000)" 100000)
  thread=$(per_op "$(count "$lib" "$work/thread" 200)" "$(count "$lib" "$work/thread" 400)" 200)
  fanin=$(per_op "$(count "$lib" "$work/fanin" 2)" "$(count "$lib" "$work/fanin" 4)" $((2 * 64 * 2048)))
  printf '%-40s %10s %10s %12s %10s %12s %10s %10s %10s\n' "$lib" "$pair" "$remote" "$tt" "$tt1k" "$mix" "$medium" "$thread" "$fanin"
done
