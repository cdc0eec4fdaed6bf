/* threadtest: Hoard's scalability microbenchmark (seed 004 §5.2, Table 1), written from its
 * description: "t threads do nothing but repeatedly allocate and deallocate 100,000/t 8-byte
 * objects (the threads do not synchronize or share objects)". The total work is fixed and
 * divided among the threads, so speedup(t) = elapsed(1) / elapsed(t). The default of 100
 * rounds matches Table 4's ~10 million objects requested. */
#define _GNU_SOURCE
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const PROG = "threadtest";

static uint64_t opt_threads = 1;
static uint64_t opt_iterations = 100;
static uint64_t opt_objects = 100000;
static uint64_t opt_size = 8;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "threads"},
    {"iterations", 0, BENCH_OPT_U64, &opt_iterations, 1, 1000000000, 0, 0, false,
     "allocate-all/free-all rounds"},
    {"objects", 0, BENCH_OPT_U64, &opt_objects, 1, 1000000000, 0, 0, false,
     "objects per round, divided among the threads"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "object size in bytes"},
};

static const struct bench_prog prog = {
    "threadtest", "t threads repeatedly allocate then free objects/t objects (Hoard §5.2)", opts,
    BENCH_NOPTS(opts)};

struct tt_worker {
  uint64_t objects;
  void **slots; /* allocated before the clock starts */
  pthread_barrier_t *start;
  double begin, end;
  int failed;
};

static void *tt_thread(void *arg) {
  struct tt_worker *w = arg;
  const size_t size = (size_t)opt_size;
  const uint64_t n = w->objects;
  void **a = w->slots;
  pthread_barrier_wait(w->start);
  w->begin = bench_now();
  for (uint64_t it = 0; it < opt_iterations && !w->failed; it++) {
    for (uint64_t k = 0; k < n; k++) {
      unsigned char *p = malloc(size);
      if (!p) {
        /* free what this round got, then report */
        for (uint64_t m = 0; m < k; m++)
          free(a[m]);
        w->failed = 1;
        goto out;
      }
      p[0] = (unsigned char)k; /* an object is used, not just reserved */
      a[k] = p;
    }
    for (uint64_t k = 0; k < n; k++)
      free(a[k]);
  }
out:
  w->end = bench_now();
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned T = (unsigned)opt_threads;
  struct tt_worker *w = calloc(T, sizeof *w);
  pthread_t *th = calloc(T, sizeof *th);
  if (!w || !th)
    bench_die(PROG, "out of memory");
  pthread_barrier_t start;
  if (pthread_barrier_init(&start, NULL, T) != 0)
    bench_die(PROG, "cannot create a barrier");
  for (unsigned i = 0; i < T; i++) {
    w[i].objects = opt_objects / T + (i < opt_objects % T ? 1 : 0);
    w[i].slots = calloc(w[i].objects ? w[i].objects : 1, sizeof(void *));
    if (!w[i].slots)
      bench_die(PROG, "out of memory for the object arrays");
    w[i].start = &start;
  }
  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &th[i], tt_thread, &w[i]);
  for (unsigned i = 0; i < T; i++)
    bench_thread_join(PROG, th[i]);
  double first = w[0].begin, last = w[0].end;
  for (unsigned i = 0; i < T; i++) {
    if (w[i].failed)
      bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
    if (w[i].begin < first)
      first = w[i].begin;
    if (w[i].end > last)
      last = w[i].end;
  }
  double elapsed = last - first;
  double ops = 2.0 * (double)opt_objects * (double)opt_iterations;
  printf("threadtest: %u threads, %llu rounds of %llu objects of %llu bytes: %.6f s\n", T,
         (unsigned long long)opt_iterations, (unsigned long long)opt_objects,
         (unsigned long long)opt_size, elapsed);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "ops_per_s", ops / (elapsed > 0 ? elapsed : 1e-9));
  bench_json_end(&j);

  for (unsigned i = 0; i < T; i++)
    free(w[i].slots);
  free(w);
  free(th);
  pthread_barrier_destroy(&start);
  return 0;
}
