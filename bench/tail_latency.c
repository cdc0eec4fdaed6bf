/* tail-latency: W workers run a server's mix of calls for a while, every malloc and free timed,
 * and the rare long call is counted: a server's tail latency, which an allocator's shared locks
 * set when threads outnumber the cores (a thread that sleeps on a lock gets its core back only
 * after the others' time slices, and one preempted while it holds a lock keeps the others
 * waiting for it).
 *
 * Each worker keeps --slots slots of blocks: 90% of 1 B-1 KiB, 9% of 1-17 KiB, 0.8% of 16-316 KiB,
 * 0.2% of 0.3-3.3 MB. Every step picks a slot at random: a full one is freed (a quarter of them
 * handed to the next worker's mailbox of 256 places, to be freed there), an empty one gets a new
 * block; and the worker frees one block from a random place of its own mailbox. The load moves
 * through phases of --phase-s seconds: grow (every empty slot filled), thin (1 free in 200
 * skipped, 3 empty slots in 100 filled: the heap shrinks to a few blocks scattered through it),
 * mixed (as grow). The default, 4 workers, is twice the cores of the machine the figures in
 * docs/results.md come from; the machine's own scheduling jitter shows too: compare allocators
 * in the same runs, over repeats. Only the mallocs and frees are timed (two clock reads each).
 * RSS is read at the end of the work, every block live, and again once all are freed. */
#define _GNU_SOURCE
#include "common.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "tail-latency";

static uint64_t opt_workers = 4;
static double opt_seconds = 10;
static uint64_t opt_slots = 30000;
static double opt_phase_s = 2;
static uint64_t opt_seed = 1;

static const struct bench_opt opts[] = {
    {"workers", 'w', BENCH_OPT_U64, &opt_workers, 1, 1024, 0, 0, false, "worker threads"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false, "length of the timed phase"},
    {"slots", 0, BENCH_OPT_U64, &opt_slots, 1, 100000000, 0, 0, false, "slots of blocks per worker"},
    {"phase-s", 0, BENCH_OPT_REAL, &opt_phase_s, 0, 0, 0.01, 3600, false, "length of each phase (grow, thin, mixed)"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
};

static const struct bench_prog prog = {
    "tail-latency", "workers run a server's mix of calls, every call timed: the rare long call", opts,
    BENCH_NOPTS(opts)};

#define MAILBOX 256

struct tl_worker {
  pthread_t th;
  unsigned id;
  struct bench_rng rng;
  _Atomic(void *) mailbox[MAILBOX];
  uint32_t *hist;
  uint64_t calls, over_1ms, over_10ms, over_100ms, worst_malloc_ns, worst_free_ns;
};

static struct tl_worker *tl_workers;
static double tl_start;
static pthread_barrier_t tl_work_done, tl_rss_read; /* the workers stop together; main reads RSS; they free */

static uint64_t tl_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void tl_count(struct tl_worker *w, uint64_t d, uint64_t *worst) {
  w->calls++;
  bench_hist_add(w->hist, d);
  if (d > 1000000u) w->over_1ms++;
  if (d > 10000000u) w->over_10ms++;
  if (d > 100000000u) w->over_100ms++;
  if (d > *worst) *worst = d;
}

static void tl_free(struct tl_worker *w, void *p) {
  uint64_t a = tl_ns();
  free(p);
  tl_count(w, tl_ns() - a, &w->worst_free_ns);
}

static size_t tl_size(struct bench_rng *r) {
  uint64_t k = bench_rng_below(r, 1000);
  if (k < 900) return 1 + (size_t)bench_rng_below(r, 1024);
  if (k < 990) return 1024 + (size_t)bench_rng_below(r, 16384);
  if (k < 998) return 16384 + (size_t)bench_rng_below(r, 300000);
  return 300000 + (size_t)bench_rng_below(r, 3000000);
}

static void *tl_work(void *arg) {
  struct tl_worker *w = arg;
  void **slots = calloc(opt_slots, sizeof *slots);
  if (!slots) bench_die(PROG, "out of memory for %llu slots", (unsigned long long)opt_slots);
  struct tl_worker *next = &tl_workers[(w->id + 1) % opt_workers];
  double end = tl_start + opt_seconds;
  int phase = 0; /* 0 grow, 1 thin, 2 mixed */
  for (uint64_t step = 0;; step++) {
    if ((step & 255) == 0) {
      double now = bench_now();
      if (now >= end) break;
      phase = (int)((now - tl_start) / opt_phase_s) % 3;
    }
    uint64_t k = bench_rng_below(&w->rng, opt_slots);
    if (slots[k]) {
      if (phase == 1 && bench_rng_below(&w->rng, 200) == 0) {
        /* kept through the thinning */
      } else if (bench_rng_below(&w->rng, 4) == 0) {
        void *old = atomic_exchange_explicit(&next->mailbox[bench_rng_below(&w->rng, MAILBOX)], slots[k],
                                             memory_order_acq_rel);
        if (old) tl_free(w, old);
        slots[k] = NULL;
      } else {
        tl_free(w, slots[k]);
        slots[k] = NULL;
      }
    }
    if (!slots[k] && (phase != 1 || bench_rng_below(&w->rng, 100) < 3)) {
      size_t n = tl_size(&w->rng);
      uint64_t a = tl_ns();
      void *p = malloc(n);
      tl_count(w, tl_ns() - a, &w->worst_malloc_ns);
      if (!p) bench_die(PROG, "malloc(%zu) failed", n);
      memset(p, 1, n < 256 ? n : 256);
      slots[k] = p;
    }
    void *m = atomic_exchange_explicit(&w->mailbox[bench_rng_below(&w->rng, MAILBOX)], NULL, memory_order_acq_rel);
    if (m) tl_free(w, m);
  }
  pthread_barrier_wait(&tl_work_done);
  pthread_barrier_wait(&tl_rss_read);
  for (uint64_t k = 0; k < opt_slots; k++) free(slots[k]);
  free(slots);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  tl_workers = calloc(opt_workers, sizeof *tl_workers);
  if (!tl_workers) bench_die(PROG, "out of memory");
  tl_start = bench_now();
  for (unsigned i = 0; i < opt_workers; i++) {
    struct tl_worker *w = &tl_workers[i];
    w->id = i;
    bench_rng_seed(&w->rng, opt_seed, i);
    w->hist = bench_hist_new(PROG);
  }
  if (pthread_barrier_init(&tl_work_done, NULL, (unsigned)opt_workers + 1) != 0 ||
      pthread_barrier_init(&tl_rss_read, NULL, (unsigned)opt_workers + 1) != 0)
    bench_die(PROG, "cannot make a barrier");
  for (unsigned i = 0; i < opt_workers; i++) bench_thread_start(PROG, &tl_workers[i].th, tl_work, &tl_workers[i]);
  pthread_barrier_wait(&tl_work_done);
  double wall = bench_now() - tl_start;
  uint64_t rss_end_work = bench_rss_bytes(); /* every worker's blocks still live */
  pthread_barrier_wait(&tl_rss_read);
  for (unsigned i = 0; i < opt_workers; i++) bench_thread_join(PROG, tl_workers[i].th);
  for (unsigned i = 0; i < opt_workers; i++)
    for (unsigned j = 0; j < MAILBOX; j++) free(atomic_load(&tl_workers[i].mailbox[j]));
  uint64_t rss_after_free = bench_rss_bytes();

  uint64_t calls = 0, over_1ms = 0, over_10ms = 0, over_100ms = 0, worst_malloc = 0, worst_free = 0;
  for (unsigned i = 0; i < opt_workers; i++) {
    struct tl_worker *w = &tl_workers[i];
    calls += w->calls;
    over_1ms += w->over_1ms;
    over_10ms += w->over_10ms;
    over_100ms += w->over_100ms;
    if (w->worst_malloc_ns > worst_malloc) worst_malloc = w->worst_malloc_ns;
    if (w->worst_free_ns > worst_free) worst_free = w->worst_free_ns;
    if (i) bench_hist_merge(tl_workers[0].hist, w->hist);
  }
  /* the 99.9th, 99.99th and 99.999th percentiles, to the microsecond */
  const uint32_t *hist = tl_workers[0].hist;
  double at[3] = {bench_hist_quantile_us(hist, calls, 0.999), bench_hist_quantile_us(hist, calls, 0.9999),
                  bench_hist_quantile_us(hist, calls, 0.99999)};
  uint64_t worst = worst_malloc > worst_free ? worst_malloc : worst_free;
  printf("tail-latency: %llu workers, %llu calls in %.2f s: worst %.1f ms (malloc %.1f, free %.1f), %llu over 1 ms, "
         "%llu over 10 ms, %llu over 100 ms, p99.9 %.0f us, p99.99 %.0f us, p99.999 %.0f us\n",
         (unsigned long long)opt_workers, (unsigned long long)calls, wall, (double)worst / 1e6,
         (double)worst_malloc / 1e6, (double)worst_free / 1e6, (unsigned long long)over_1ms,
         (unsigned long long)over_10ms, (unsigned long long)over_100ms, at[0], at[1], at[2]);
  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_u64(&j, "calls", calls);
  bench_json_real(&j, "calls_per_s", (double)calls / wall);
  bench_json_real(&j, "worst_call_us", (double)worst / 1e3);
  bench_json_real(&j, "worst_malloc_us", (double)worst_malloc / 1e3);
  bench_json_real(&j, "worst_free_us", (double)worst_free / 1e3);
  bench_json_u64(&j, "calls_over_1ms", over_1ms);
  bench_json_u64(&j, "calls_over_10ms", over_10ms);
  bench_json_u64(&j, "calls_over_100ms", over_100ms);
  bench_json_real(&j, "p999_call_us", at[0]);
  bench_json_real(&j, "p9999_call_us", at[1]);
  bench_json_real(&j, "p99999_call_us", at[2]);
  bench_json_real(&j, "rss_end_work_kib", (double)rss_end_work / 1024.0);
  bench_json_real(&j, "rss_after_free_kib", (double)rss_after_free / 1024.0);
  bench_json_end(&j);
  for (unsigned i = 0; i < opt_workers; i++) free(tl_workers[i].hist);
  free(tl_workers);
  return 0;
}
