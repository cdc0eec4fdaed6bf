/* false-share: Lever & Boreham's benchmark 3 (seed 000 §4.3, §5.3). The main thread allocates
 * n objects of k bytes one after another and passes one to each of n threads; each thread
 * writes one byte at the front and one at the back of its own object many times ("in case the
 * object overlaps cache lines"). If the allocator packed two objects into one cache line, the
 * line ping-pongs between CPUs and the run slows down. --aligned gives each object its own
 * cache lines, the cure the seed proposes (§6). */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PROG = "false-share";

static uint64_t opt_threads = 2;
static uint64_t opt_size = 8;
static uint64_t opt_writes = 100000000; /* seed 000 §5.3: "100 million times" */
static bool opt_aligned = false;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false,
     "threads, one object each (n)"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "object size in bytes (k)"},
    {"writes", 0, BENCH_OPT_U64, &opt_writes, 1, 1ull << 40, 0, 0, false,
     "front+back write pairs per thread"},
    {"aligned", 0, BENCH_OPT_FLAG, &opt_aligned, 0, 0, 0, 0, false,
     "allocate cache-line aligned objects (posix_memalign)"},
};

static const struct bench_prog prog = {
    "false-share",
    "n threads write the front and back of their own k-byte object (seed 000 benchmark 3)", opts,
    BENCH_NOPTS(opts)};

struct fs_worker {
  volatile unsigned char *obj;
  pthread_barrier_t *start;
  double begin, end; /* each worker's own clock readings: on a busy machine the main
                       * thread may not run again until the workers are done */
};

static void *fs_thread(void *arg) {
  struct fs_worker *w = arg;
  volatile unsigned char *front = w->obj;
  volatile unsigned char *back = w->obj + opt_size - 1;
  const uint64_t n = opt_writes;
  pthread_barrier_wait(w->start);
  w->begin = bench_now();
  for (uint64_t i = 0; i < n; i++) {
    *front = (unsigned char)i;
    *back = (unsigned char)i;
  }
  w->end = bench_now();
  return NULL;
}

/* Pairs of objects that touch a common cache line: how much false sharing the placement made
 * possible, so a slow run can be told apart from a noisy one. */
static uint64_t fs_shared_pairs(struct fs_worker *w, unsigned n, size_t line, size_t size) {
  uint64_t pairs = 0;
  for (unsigned a = 0; a < n; a++)
    for (unsigned b = a + 1; b < n; b++) {
      uintptr_t a0 = (uintptr_t)w[a].obj / line, a1 = ((uintptr_t)w[a].obj + size - 1) / line;
      uintptr_t b0 = (uintptr_t)w[b].obj / line, b1 = ((uintptr_t)w[b].obj + size - 1) / line;
      if (a0 <= b1 && b0 <= a1)
        pairs++;
    }
  return pairs;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned n = (unsigned)opt_threads;
  const size_t line = bench_cache_line();

  struct fs_worker *w = calloc(n, sizeof *w);
  pthread_t *th = calloc(n, sizeof *th);
  if (!w || !th)
    bench_die(PROG, "out of memory");
  pthread_barrier_t start;
  /* n workers and the main thread, which takes the start time. */
  if (pthread_barrier_init(&start, NULL, n + 1) != 0)
    bench_die(PROG, "cannot create a barrier");

  /* Allocated back to back by one thread, as the seed does: a packing allocator places them
   * next to each other. */
  size_t alloc_size = (size_t)opt_size;
  if (opt_aligned)
    alloc_size = (alloc_size + line - 1) / line * line;
  for (unsigned i = 0; i < n; i++) {
    void *p = NULL;
    if (opt_aligned) {
      int rc = posix_memalign(&p, line, alloc_size);
      if (rc != 0)
        bench_die(PROG, "posix_memalign(%zu, %zu) failed: %s", line, alloc_size, strerror(rc));
    } else {
      p = malloc(alloc_size);
      if (!p)
        bench_die(PROG, "malloc(%zu) returned NULL", alloc_size);
    }
    memset(p, 0, alloc_size);
    w[i].obj = p;
    w[i].start = &start;
  }
  uint64_t shared = fs_shared_pairs(w, n, line, (size_t)opt_size);

  for (unsigned i = 0; i < n; i++)
    bench_thread_start(PROG, &th[i], fs_thread, &w[i]);
  pthread_barrier_wait(&start);
  for (unsigned i = 0; i < n; i++)
    bench_thread_join(PROG, th[i]);
  double first = w[0].begin, last = w[0].end;
  for (unsigned i = 0; i < n; i++) {
    if (w[i].begin < first)
      first = w[i].begin;
    if (w[i].end > last)
      last = w[i].end;
  }
  double elapsed = last - first;

  printf("false-share: %u threads, %llu-byte %s objects, %llu writes each: %.6f s, %llu "
         "object pairs share a cache line\n",
         n, (unsigned long long)opt_size, opt_aligned ? "aligned" : "malloc'd",
         (unsigned long long)opt_writes, elapsed, (unsigned long long)shared);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "writes_per_s", (double)n * (double)opt_writes / (elapsed > 0 ? elapsed : 1e-9));
  bench_json_u64(&j, "shared_line_pairs", shared);
  bench_json_u64(&j, "cache_line_bytes", line);
  bench_json_end(&j);

  for (unsigned i = 0; i < n; i++)
    free((void *)w[i].obj);
  free(w);
  free(th);
  pthread_barrier_destroy(&start);
  return 0;
}
