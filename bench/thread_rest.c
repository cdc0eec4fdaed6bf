/* thread-rest: what a thread costs while it waits (a thread-per-connection server's idle
 * connections). N threads with small stacks each allocate one block of each of K sizes from
 * 16 B to 4 KiB, write its first byte, and wait; the main thread reads the process's resident
 * set and address space before the threads start and while they all wait, and reports the
 * growth per thread, then lets them free their blocks and exit, and reads the resident set
 * again. A per-thread heap pays a bin, a superblock or a page of each size class per thread;
 * an arena allocator shares its arenas. docs/benchmarks.md. */
#define _GNU_SOURCE
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PROG = "thread-rest";

static uint64_t opt_threads = 200;
static uint64_t opt_classes = 6;
static uint64_t opt_stack_kib = 64;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 4096, 0, 0, false, "waiting threads"},
    {"classes", 0, BENCH_OPT_U64, &opt_classes, 1, 64, 0, 0, false,
     "blocks each thread holds, one of each of this many sizes, 16 B to 4 KiB on a log scale"},
    {"stack-kib", 0, BENCH_OPT_U64, &opt_stack_kib, 16, 8192, 0, 0, false, "each thread's stack, in KiB"},
};

static const struct bench_prog prog = {
    "thread-rest", "N threads each hold blocks of K sizes and wait: resident set and address space per thread",
    opts, BENCH_NOPTS(opts)};

static pthread_barrier_t rested, go;
/* The i-th of K sizes, spread evenly on a log scale from 16 B up to (not reaching) 4 KiB:
 * 6 sizes are 16, 40, 101, 256, 645 and 1,625 bytes. */
static size_t block_size(unsigned i) { return (size_t)(16.0 * exp2(8.0 * i / (double)opt_classes) + 0.5); }

static void *tr_thread(void *arg) {
  (void)arg;
  void *blocks[64];
  unsigned k = (unsigned)opt_classes;
  for (unsigned i = 0; i < k; i++) {
    blocks[i] = malloc(block_size(i));
    if (!blocks[i])
      bench_die(PROG, "malloc(%zu) returned NULL", block_size(i));
    *(volatile char *)blocks[i] = 1;
  }
  pthread_barrier_wait(&rested);
  pthread_barrier_wait(&go);
  for (unsigned i = 0; i < k; i++)
    free(blocks[i]);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned n = (unsigned)opt_threads;
  pthread_t *th = calloc(n, sizeof *th);
  if (!th)
    bench_die(PROG, "out of memory");
  if (pthread_barrier_init(&rested, NULL, n + 1) != 0 || pthread_barrier_init(&go, NULL, n + 1) != 0)
    bench_die(PROG, "cannot create a barrier");
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, (size_t)opt_stack_kib << 10) != 0)
    bench_die(PROG, "cannot set a stack of %llu KiB", (unsigned long long)opt_stack_kib);
  /* The main thread's own heap, and the allocator's start-up, before the first reading. */
  void *warm = malloc(64);
  if (!warm)
    bench_die(PROG, "malloc(64) returned NULL");
  free(warm);
  uint64_t size0, rss0, size1, rss1, size2, rss2;
  if (!bench_statm(&size0, &rss0))
    bench_die(PROG, "cannot read /proc/self/statm");
  double t0 = bench_now();
  for (unsigned i = 0; i < n; i++)
    if (pthread_create(&th[i], &attr, tr_thread, NULL) != 0)
      bench_die(PROG, "cannot start thread %u of %u", i + 1, n);
  pthread_barrier_wait(&rested);
  bench_statm(&size1, &rss1);
  double t1 = bench_now();
  pthread_barrier_wait(&go);
  for (unsigned i = 0; i < n; i++)
    bench_thread_join(PROG, th[i]);
  bench_statm(&size2, &rss2);

  double per_thread = ((double)rss1 - (double)rss0) / 1024.0 / n;
  double mapped_per_thread = ((double)size1 - (double)size0) / 1024.0 / n;
  printf("thread-rest: %u threads of %llu KiB stacks, blocks of %llu sizes each: %.1f KiB resident and %.1f KiB "
         "mapped per waiting thread; %llu KiB resident after they exit (%llu before they started)\n",
         n, (unsigned long long)opt_stack_kib, (unsigned long long)opt_classes, per_thread, mapped_per_thread,
         (unsigned long long)(rss2 >> 10), (unsigned long long)(rss0 >> 10));

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "kib_per_thread", per_thread);
  bench_json_real(&j, "mapped_kib_per_thread", mapped_per_thread);
  bench_json_u64(&j, "rss_before_kib", rss0 >> 10);
  bench_json_u64(&j, "rss_resting_kib", rss1 >> 10);
  bench_json_u64(&j, "rss_after_exit_kib", rss2 >> 10);
  bench_json_real(&j, "start_s", t1 - t0);
  bench_json_end(&j);
  pthread_attr_destroy(&attr);
  pthread_barrier_destroy(&rested);
  pthread_barrier_destroy(&go);
  free(th);
  return 0;
}
