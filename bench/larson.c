/* larson: Larson and Krishnan's server simulation, written from Hoard's description of it
 * (seed 004 §5.2, Table 1): "threads are repeatedly spawned to allocate and free 10,000 blocks
 * ranging from 10 to 100 bytes in a random order. Further, a number of blocks are left to be
 * freed by a subsequent thread ('bleeding'). The benchmark runs for 30 seconds and then
 * reports the number of memory operations per second."
 *
 * Here each of T chains owns an array of `chunks` live blocks (filled by the main thread, so the
 * first generation already frees foreign blocks). A generation performs `rounds` steps, each
 * freeing the block in a random slot and allocating a new one of random size; then it starts
 * its successor, hands it the array with every block still live, and exits. The successor
 * frees what its predecessor allocated: the bleeding. Every malloc and every free counts as one
 * memory operation. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "larson";

static uint64_t opt_threads = 1;
static double opt_seconds = 30; /* seed 004 §5.2 */
static uint64_t opt_min_size = 10;
static uint64_t opt_max_size = 100;
static uint64_t opt_chunks = 10000;
static uint64_t opt_rounds = 10000;
static uint64_t opt_seed = 1;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false,
     "concurrent thread chains"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false, "run time"},
    {"min-size", 0, BENCH_OPT_U64, &opt_min_size, 1, 1u << 20, 0, 0, false, "smallest block"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 1, 1u << 20, 0, 0, false, "largest block"},
    {"chunks", 0, BENCH_OPT_U64, &opt_chunks, 1, 100000000, 0, 0, false,
     "live blocks per chain"},
    {"rounds", 0, BENCH_OPT_U64, &opt_rounds, 1, 1000000000000ull, 0, 0, false,
     "replacement steps per thread generation"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
};

static const struct bench_prog prog = {
    "larson",
    "server simulation: thread generations replace random blocks and bleed the rest to their "
    "successor (Hoard §5.2)",
    opts, BENCH_NOPTS(opts)};

/* One chain. Only one generation works on it at a time; every field is written before the
 * pthread_create that hands the chain on, which orders it for the successor. */
struct lar_chain {
  void **slots;
  struct bench_rng rng;
  pthread_t prev, last;
  bool has_prev;
  uint64_t ops, generations;
  double end;
  int failed;
};

static atomic_bool lar_stop;
static pthread_mutex_t lar_done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lar_done_cond = PTHREAD_COND_INITIALIZER;
static unsigned lar_done;

static size_t lar_size(struct bench_rng *r) {
  return (size_t)(opt_min_size + bench_rng_below(r, opt_max_size - opt_min_size + 1));
}

static void lar_finish(struct lar_chain *c) {
  c->end = bench_now();
  c->last = pthread_self();
  pthread_mutex_lock(&lar_done_lock);
  lar_done++;
  pthread_cond_signal(&lar_done_cond);
  pthread_mutex_unlock(&lar_done_lock);
}

static void *lar_thread(void *arg) {
  struct lar_chain *c = arg;
  if (c->has_prev)
    bench_thread_join(PROG, c->prev);
  c->generations++;
  void **slots = c->slots;
  uint64_t ops = 0;
  bool stopped = false;
  for (uint64_t k = 0; k < opt_rounds; k++) {
    /* Polling the flag every step would add a shared load to each operation. */
    if ((k & 63) == 0 && atomic_load_explicit(&lar_stop, memory_order_relaxed)) {
      stopped = true;
      break;
    }
    uint64_t i = bench_rng_below(&c->rng, opt_chunks);
    free(slots[i]);
    size_t sz = lar_size(&c->rng);
    unsigned char *p = malloc(sz);
    if (!p) {
      slots[i] = NULL;
      c->failed = 1;
      stopped = true;
      break;
    }
    p[0] = p[sz - 1] = (unsigned char)k;
    slots[i] = p;
    ops += 2;
  }
  c->ops += ops;
  if (stopped || atomic_load_explicit(&lar_stop, memory_order_relaxed)) {
    lar_finish(c);
    return NULL;
  }
  c->prev = pthread_self();
  c->has_prev = true;
  pthread_t next;
  int rc = pthread_create(&next, NULL, lar_thread, c);
  if (rc != 0) {
    /* Out of threads is a result of the machine, not of the allocator: stop this chain and
     * report it rather than hang the others. */
    c->failed = 2;
    c->has_prev = false;
    lar_finish(c);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  if (opt_max_size < opt_min_size)
    bench_usage_error(&prog, "--max-size (%llu) is below --min-size (%llu)",
                      (unsigned long long)opt_max_size, (unsigned long long)opt_min_size);
  const unsigned T = (unsigned)opt_threads;

  struct lar_chain *chains = calloc(T, sizeof *chains);
  if (!chains)
    bench_die(PROG, "out of memory");
  for (unsigned i = 0; i < T; i++) {
    struct lar_chain *c = &chains[i];
    bench_rng_seed(&c->rng, opt_seed, i);
    c->slots = malloc(opt_chunks * sizeof *c->slots);
    if (!c->slots)
      bench_die(PROG, "out of memory for the block arrays");
    for (uint64_t k = 0; k < opt_chunks; k++) {
      size_t sz = lar_size(&c->rng);
      c->slots[k] = malloc(sz);
      if (!c->slots[k])
        bench_die(PROG, "malloc(%zu) returned NULL", sz);
      memset(c->slots[k], 0, sz);
    }
  }

  double t0 = bench_now();
  for (unsigned i = 0; i < T; i++) {
    pthread_t th;
    bench_thread_start(PROG, &th, lar_thread, &chains[i]);
  }
  bench_sleep_seconds(opt_seconds);
  atomic_store(&lar_stop, true);

  pthread_mutex_lock(&lar_done_lock);
  while (lar_done < T)
    pthread_cond_wait(&lar_done_cond, &lar_done_lock);
  pthread_mutex_unlock(&lar_done_lock);
  uint64_t ops = 0, gens = 0;
  double last = t0;
  int failed = 0;
  for (unsigned i = 0; i < T; i++) {
    bench_thread_join(PROG, chains[i].last);
    ops += chains[i].ops;
    gens += chains[i].generations;
    if (chains[i].end > last)
      last = chains[i].end;
    if (chains[i].failed > failed)
      failed = chains[i].failed;
  }
  if (failed == 1)
    bench_die(PROG, "malloc returned NULL");
  if (failed == 2)
    bench_die(PROG, "could not create a thread for the next generation");
  double elapsed = last - t0;

  printf("larson: %u chains, %.3f s, %llu thread generations, %llu memory operations\n", T,
         elapsed, (unsigned long long)gens, (unsigned long long)ops);
  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "ops_per_s", (double)ops / (elapsed > 0 ? elapsed : 1e-9));
  bench_json_u64(&j, "ops", ops);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_u64(&j, "thread_generations", gens);
  bench_json_end(&j);

  for (unsigned i = 0; i < T; i++) {
    for (uint64_t k = 0; k < opt_chunks; k++)
      free(chains[i].slots[k]);
    free(chains[i].slots);
  }
  free(chains);
  return 0;
}
