/* active-false and passive-false: Hoard's false-sharing microbenchmarks (seed 004 §5.3, Table 1),
 * written from their description. Each thread repeatedly allocates one small object, writes
 * every byte of it a number of times, and frees it. Allocation is rare next to the writes, so
 * the run measures cache-line ping-pong, not allocator contention: an allocator that hands
 * pieces of one cache line to different threads ("actively induces false sharing") does not
 * scale. passive-false (built from this file with HF_PASSIVE) first allocates one object per
 * thread in the main thread and gives one to each thread, which frees it at once; an allocator
 * that lets each thread reuse the piece it freed then "passively induces" false sharing.
 * The total number of objects is fixed and divided among the threads, so
 * speedup(t) = elapsed(1) / elapsed(t). */
#define _GNU_SOURCE
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HF_PASSIVE
#define HF_PASSIVE 0
#endif

#if HF_PASSIVE
static const char *const PROG = "passive-false";
#else
static const char *const PROG = "active-false";
#endif

static uint64_t opt_threads = 1;
static uint64_t opt_size = 8;
static uint64_t opt_iterations = 10000;
static uint64_t opt_writes = 10000;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "threads"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "object size in bytes"},
    {"iterations", 0, BENCH_OPT_U64, &opt_iterations, 1, 1ull << 40, 0, 0, false,
     "objects allocated in all, divided among the threads"},
    {"writes", 0, BENCH_OPT_U64, &opt_writes, 1, 1ull << 40, 0, 0, false,
     "passes writing every byte of each object"},
};

static const struct bench_prog prog = {
#if HF_PASSIVE
    "passive-false",
    "threads free an object from a shared cache line, then allocate/write/free small objects "
    "(Hoard §5.3)",
#else
    "active-false", "threads allocate, write and free small objects (Hoard §5.3)",
#endif
    opts, BENCH_NOPTS(opts)};

struct hf_worker {
  uint64_t objects;
  void *given; /* passive-false: the object from main's cache line, freed at once */
  pthread_barrier_t *start;
  double begin, end; /* each worker's own clock readings: on a busy machine the main
                       * thread may not run again until the workers are done */
  int failed;
};

static void *hf_thread(void *arg) {
  struct hf_worker *w = arg;
  const size_t size = (size_t)opt_size;
  const uint64_t writes = opt_writes;
  if (w->given)
    free(w->given);
  pthread_barrier_wait(w->start);
  w->begin = bench_now();
  for (uint64_t i = 0; i < w->objects; i++) {
    volatile unsigned char *p = malloc(size);
    if (!p) {
      w->failed = 1;
      break;
    }
    for (uint64_t k = 0; k < writes; k++)
      for (size_t b = 0; b < size; b++)
        p[b]++;
    free((void *)p);
  }
  w->end = bench_now();
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned T = (unsigned)opt_threads;

  struct hf_worker *w = calloc(T, sizeof *w);
  pthread_t *th = calloc(T, sizeof *th);
  if (!w || !th)
    bench_die(PROG, "out of memory");
  pthread_barrier_t start;
  if (pthread_barrier_init(&start, NULL, T + 1) != 0)
    bench_die(PROG, "cannot create a barrier");

  for (unsigned i = 0; i < T; i++) {
    w[i].objects = opt_iterations / T + (i < opt_iterations % T ? 1 : 0);
    w[i].start = &start;
#if HF_PASSIVE
    /* Back to back from one thread: with a packing allocator these share cache lines. */
    w[i].given = malloc((size_t)opt_size);
    if (!w[i].given)
      bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
    memset(w[i].given, 0, (size_t)opt_size);
#endif
  }

  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &th[i], hf_thread, &w[i]);
  pthread_barrier_wait(&start);
  for (unsigned i = 0; i < T; i++)
    bench_thread_join(PROG, th[i]);
  double first = w[0].begin, last = w[0].end;
  for (unsigned i = 0; i < T; i++) {
    if (w[i].begin < first)
      first = w[i].begin;
    if (w[i].failed)
      bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
    if (w[i].end > last)
      last = w[i].end;
  }
  double elapsed = last - first;
  printf("%s: %u threads, %llu objects of %llu bytes, %llu writes each: %.6f s\n", PROG, T,
         (unsigned long long)opt_iterations, (unsigned long long)opt_size,
         (unsigned long long)opt_writes, elapsed);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_end(&j);

  free(w);
  free(th);
  pthread_barrier_destroy(&start);
  return 0;
}
