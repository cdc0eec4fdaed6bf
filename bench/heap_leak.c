/* heap-leak: Lever & Boreham's benchmark 2 (seed 000 §4.2, §5.2), a simplified Larson test
 * that tries to make the allocator orphan memory. The main thread allocates t arrays of n
 * fixed-size objects; each array goes to a fresh thread that replaces a random subset of the
 * objects one at a time, then creates the next thread, hands it the array and exits ("a
 * round"). With t chains running at once, threads free storage another thread allocated while
 * the heap is contended: the two conditions the seed names for heap leakage. Live storage stays
 * between t*n and t*(n-1) objects, so a perfect allocator takes the same number of minor faults
 * on every run; the seed compares the count with its lower-bound predictor. */
#define _GNU_SOURCE
#include "common.h"
#include "heap_leak_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PROG = "heap-leak";

static uint64_t opt_threads = 1;
static uint64_t opt_objects = 10000; /* seed 000 §5.2 */
static uint64_t opt_rounds = 8;      /* seed 000 §5.2 varies 1..8 */
static uint64_t opt_size = 40;       /* seed 000 §5.2 */
static uint64_t opt_replacements = UINT64_MAX; /* sentinel: same as --objects */
static uint64_t opt_seed = 1;
static double opt_mpf_a = HEAP_LEAK_MPF_A;
static double opt_mpf_b = HEAP_LEAK_MPF_B;
static double opt_mpf_c = HEAP_LEAK_MPF_C;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 256, 0, 0, false,
     "concurrent thread chains (t)"},
    {"objects", 0, BENCH_OPT_U64, &opt_objects, 1, 100000000, 0, 0, false,
     "objects per array (n)"},
    {"rounds", 0, BENCH_OPT_U64, &opt_rounds, 1, 1000000, 0, 0, false,
     "thread generations per chain (r)"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "object size in bytes"},
    {"replacements", 0, BENCH_OPT_U64, &opt_replacements, 0, 1000000000, 0, 0, false,
     "random replacements per thread per round", "--objects"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
    {"mpf-a", 0, BENCH_OPT_REAL, &opt_mpf_a, 0, 0, -1e15, 1e15, false, "predictor constant a"},
    {"mpf-b", 0, BENCH_OPT_REAL, &opt_mpf_b, 0, 0, -1e15, 1e15, false,
     "predictor faults per thread per round b"},
    {"mpf-c", 0, BENCH_OPT_REAL, &opt_mpf_c, 0, 0, -1e15, 1e15, false,
     "predictor faults per thread c"},
};

static const struct bench_prog prog = {
    "heap-leak",
    "t chains of r thread generations replace random objects; minor faults vs mpf_lower = a + "
    "b*t*r + c*t (seed 000 benchmark 2)",
    opts, BENCH_NOPTS(opts)};

/* One chain: the array and the thread currently working on it. Only one generation of a chain
 * runs at a time, so the fields need no lock: each is written before the pthread_create that
 * publishes it to the next generation. */
struct hl_chain {
  void **objs;
  unsigned round;  /* generation now running, 0-based */
  pthread_t prev;  /* the generation that created this one, to be joined */
  pthread_t last;  /* the final generation, joined by main */
  struct bench_rng rng;
};

static struct hl_chain *hl_chains;
static pthread_barrier_t hl_round_barrier;
static uint64_t *hl_per_round;
static uint64_t hl_faults_before;

static pthread_mutex_t hl_done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hl_done_cond = PTHREAD_COND_INITIALIZER;
static unsigned hl_done;

static void *hl_alloc(void) {
  void *p = malloc((size_t)opt_size);
  if (!p)
    bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
  memset(p, 0xA5, (size_t)opt_size); /* the pages an object sits on must really be there */
  return p;
}

static void *hl_worker(void *arg) {
  struct hl_chain *c = arg;
  if (c->round > 0)
    bench_thread_join(PROG, c->prev); /* reap the previous generation, as a server would */

  for (uint64_t k = 0; k < opt_replacements; k++) {
    uint64_t i = bench_rng_below(&c->rng, opt_objects);
    free(c->objs[i]);
    c->objs[i] = hl_alloc();
  }

  /* All chains finish the round together so faults can be charged to rounds. */
  if (pthread_barrier_wait(&hl_round_barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
    uint64_t now = bench_minflt();
    hl_per_round[c->round] = now - hl_faults_before;
    hl_faults_before = now;
  }

  if (c->round + 1 < opt_rounds) {
    c->prev = pthread_self();
    c->round++;
    pthread_t next;
    bench_thread_start(PROG, &next, hl_worker, c);
  } else {
    c->last = pthread_self();
    pthread_mutex_lock(&hl_done_lock);
    hl_done++;
    pthread_cond_signal(&hl_done_cond);
    pthread_mutex_unlock(&hl_done_lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  if (opt_replacements == UINT64_MAX)
    opt_replacements = opt_objects;
  const unsigned t = (unsigned)opt_threads;

  /* Bookkeeping outside the workload comes from calloc before the first fault count, so it
   * is charged to the setup figure like the seed's fixed 14-fault start. */
  hl_chains = calloc(t, sizeof *hl_chains);
  hl_per_round = calloc(opt_rounds, sizeof *hl_per_round);
  if (!hl_chains || !hl_per_round)
    bench_die(PROG, "out of memory");
  if (pthread_barrier_init(&hl_round_barrier, NULL, t) != 0)
    bench_die(PROG, "cannot create a barrier for %u threads", t);

  for (unsigned i = 0; i < t; i++) {
    struct hl_chain *c = &hl_chains[i];
    c->objs = malloc(opt_objects * sizeof *c->objs);
    if (!c->objs)
      bench_die(PROG, "out of memory for the object array");
    for (uint64_t k = 0; k < opt_objects; k++)
      c->objs[k] = hl_alloc();
    bench_rng_seed(&c->rng, opt_seed, i);
  }

  uint64_t setup_faults = bench_minflt();
  hl_faults_before = setup_faults;
  double t0 = bench_now();
  for (unsigned i = 0; i < t; i++) {
    pthread_t th;
    bench_thread_start(PROG, &th, hl_worker, &hl_chains[i]);
  }
  pthread_mutex_lock(&hl_done_lock);
  while (hl_done < t)
    pthread_cond_wait(&hl_done_cond, &hl_done_lock);
  pthread_mutex_unlock(&hl_done_lock);
  for (unsigned i = 0; i < t; i++)
    bench_thread_join(PROG, hl_chains[i].last);
  double elapsed = bench_now() - t0;
  uint64_t total_faults = bench_minflt();

  double mpf = heap_leak_mpf_lower(opt_mpf_a, opt_mpf_b, opt_mpf_c, t, (unsigned long)opt_rounds);
  printf("heap-leak: %u thread(s), %llu round(s), %llu objects of %llu bytes: %llu minor "
         "faults, predicted lower bound %.1f\n",
         t, (unsigned long long)opt_rounds, (unsigned long long)opt_objects,
         (unsigned long long)opt_size, (unsigned long long)total_faults, mpf);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_u64(&j, "minflt", total_faults);
  bench_json_u64(&j, "minflt_setup", setup_faults);
  bench_json_u64_list(&j, "minflt_per_round", hl_per_round, (size_t)opt_rounds);
  bench_json_real(&j, "mpf_lower", mpf);
  bench_json_real(&j, "mpf_excess", (double)total_faults - mpf);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_end(&j);

  for (unsigned i = 0; i < t; i++) {
    for (uint64_t k = 0; k < opt_objects; k++)
      free(hl_chains[i].objs[k]);
    free(hl_chains[i].objs);
  }
  free(hl_chains);
  free(hl_per_round);
  pthread_barrier_destroy(&hl_round_barrier);
  return 0;
}
