/* shbench: MicroQuill's SmartHeap stress test as Hoard describes it (seed 004 §5.2, §5.4):
 * "each thread repeatedly allocates and frees a number of randomly-sized blocks in random
 * order, for a total of 50 million allocated blocks", sizes "randomly chosen from 8 to 100".
 * Written from that description only: each thread keeps `slots` slots and repeatedly picks a
 * random one; an empty slot gets a new block of random size, a full one is freed. Blocks are
 * therefore allocated and freed in random order, about half the slots stay live, and the mix
 * of many size classes is what made Hoard slower here. The allocation count is fixed and
 * divided among the threads, so speedup(t) = elapsed(1) / elapsed(t). */
#define _GNU_SOURCE
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const PROG = "shbench";

static uint64_t opt_threads = 1;
static uint64_t opt_iterations = 50000000; /* seed 004 §5.2: 50 million blocks */
static uint64_t opt_min_size = 8;
static uint64_t opt_max_size = 100;
static uint64_t opt_slots = 1000;
static uint64_t opt_seed = 1;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "threads"},
    {"iterations", 0, BENCH_OPT_U64, &opt_iterations, 1, 1ull << 40, 0, 0, false,
     "blocks allocated in all, divided among the threads"},
    {"min-size", 0, BENCH_OPT_U64, &opt_min_size, 1, 1u << 20, 0, 0, false, "smallest block"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 1, 1u << 20, 0, 0, false, "largest block"},
    {"slots", 0, BENCH_OPT_U64, &opt_slots, 1, 100000000, 0, 0, false,
     "live-block slots per thread"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
};

static const struct bench_prog prog = {
    "shbench", "threads allocate random-sized blocks and free them in random order (Hoard §5.2)",
    opts, BENCH_NOPTS(opts)};

struct sh_worker {
  uint64_t allocs;
  unsigned char **slots;
  struct bench_rng rng;
  pthread_barrier_t *start;
  double begin, end;
  uint64_t frees;
  int failed;
};

static void *sh_thread(void *arg) {
  struct sh_worker *w = arg;
  unsigned char **s = w->slots;
  const uint64_t nslots = opt_slots, span = opt_max_size - opt_min_size + 1;
  uint64_t done = 0, frees = 0;
  pthread_barrier_wait(w->start);
  w->begin = bench_now();
  while (done < w->allocs) {
    uint64_t i = bench_rng_below(&w->rng, nslots);
    if (s[i]) {
      free(s[i]);
      s[i] = NULL;
      frees++;
    } else {
      size_t sz = (size_t)(opt_min_size + bench_rng_below(&w->rng, span));
      unsigned char *p = malloc(sz);
      if (!p) {
        w->failed = 1;
        break;
      }
      p[0] = p[sz - 1] = (unsigned char)i;
      s[i] = p;
      done++;
    }
  }
  w->end = bench_now();
  w->frees = frees;
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  if (opt_max_size < opt_min_size)
    bench_usage_error(&prog, "--max-size (%llu) is below --min-size (%llu)",
                      (unsigned long long)opt_max_size, (unsigned long long)opt_min_size);
  const unsigned T = (unsigned)opt_threads;
  struct sh_worker *w = calloc(T, sizeof *w);
  pthread_t *th = calloc(T, sizeof *th);
  if (!w || !th)
    bench_die(PROG, "out of memory");
  pthread_barrier_t start;
  if (pthread_barrier_init(&start, NULL, T) != 0)
    bench_die(PROG, "cannot create a barrier");
  for (unsigned i = 0; i < T; i++) {
    w[i].allocs = opt_iterations / T + (i < opt_iterations % T ? 1 : 0);
    w[i].slots = calloc(opt_slots, sizeof *w[i].slots);
    if (!w[i].slots)
      bench_die(PROG, "out of memory for the slot arrays");
    bench_rng_seed(&w[i].rng, opt_seed, i);
    w[i].start = &start;
  }
  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &th[i], sh_thread, &w[i]);
  for (unsigned i = 0; i < T; i++)
    bench_thread_join(PROG, th[i]);

  double first = w[0].begin, last = w[0].end;
  uint64_t frees = 0;
  for (unsigned i = 0; i < T; i++) {
    if (w[i].failed)
      bench_die(PROG, "malloc returned NULL");
    if (w[i].begin < first)
      first = w[i].begin;
    if (w[i].end > last)
      last = w[i].end;
    frees += w[i].frees;
  }
  double elapsed = last - first;
  double ops = (double)opt_iterations + (double)frees;
  printf("shbench: %u threads, %llu blocks of %llu..%llu bytes: %.6f s\n", T,
         (unsigned long long)opt_iterations, (unsigned long long)opt_min_size,
         (unsigned long long)opt_max_size, elapsed);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "ops_per_s", ops / (elapsed > 0 ? elapsed : 1e-9));
  bench_json_end(&j);

  /* Blocks still live at the end are freed outside the timing. */
  for (unsigned i = 0; i < T; i++) {
    for (uint64_t k = 0; k < opt_slots; k++)
      free(w[i].slots[k]);
    free(w[i].slots);
  }
  free(w);
  free(th);
  pthread_barrier_destroy(&start);
  return 0;
}
