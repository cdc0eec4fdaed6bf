/* remote-free: what a free of a block another thread allocated costs, in CPU per block
 * (issue 17, "New workload: remote-free"). P producer/consumer pairs: each producer mallocs
 * blocks of random sizes in batches and hands them through a lock-free ring to its consumer,
 * which frees them, so every free is remote and the producer keeps allocating from the heap
 * the frees go back to. Where there are enough CPUs the producers run on one set of them and
 * the consumers on another (on 2 CPUs: producers on the first, consumers on the second), so
 * each free touches lines last written on another core, as in a server whose connection
 * threads hand requests to workers.
 *
 * The figures are CPU time, not wall time: each thread reads its own CPU clock
 * (CLOCK_THREAD_CPUTIME_ID) around each batch of mallocs and each batch of frees, so waiting
 * on the ring, the hand-off itself and the sizes' random draws are not counted, and a shared
 * machine does not decide them the way it decides wall time. The cost of the clock reads
 * themselves (measured in each thread before the run) is subtracted. Frees per second (wall)
 * is reported beside them.
 *
 * --consumers C (below the number of producers) makes the consumers fewer: each frees the blocks
 * of every C-th producer, and with C = 1 every producer hands its blocks to one thread (fan-in,
 * as to a logging or completion thread), whose frees then go to P owners at once. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "remote-free";

static const char *const pin_choices[] = {"auto", "off", NULL};
static const char *const touch_choices[] = {"none", "read", "write", NULL};

static uint64_t opt_pairs = 1;
static uint64_t opt_consumers = 0;
static uint64_t opt_min_size = 16;
static uint64_t opt_max_size = 1024;
static double opt_seconds = 5;
static uint64_t opt_blocks = 0;
static uint64_t opt_batch = 64;
static uint64_t opt_queue = 4096;
static const char *opt_pin = "auto";
static const char *opt_touch = "none";
static uint64_t opt_seed = 1;

static const struct bench_opt opts[] = {
    {"pairs", 'p', BENCH_OPT_U64, &opt_pairs, 1, 256, 0, 0, false,
     "producer/consumer pairs; with --consumers, the producers"},
    {"threads", 't', BENCH_OPT_U64, &opt_pairs, 1, 256, 0, 0, true, "same as --pairs"},
    {"consumers", 0, BENCH_OPT_U64, &opt_consumers, 0, 256, 0, 0, false,
     "consumer threads, each freeing the blocks of every C-th producer; 0 = one per producer (the "
     "pairs); 1 = fan-in: every producer hands its blocks to one thread"},
    {"min-size", 0, BENCH_OPT_U64, &opt_min_size, 1, 1ull << 30, 0, 0, false, "smallest block"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 1, 1ull << 30, 0, 0, false, "largest block"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false,
     "run time (ignored when --blocks is given)"},
    {"blocks", 0, BENCH_OPT_U64, &opt_blocks, 0, 1ull << 40, 0, 0, false,
     "blocks per producer; 0 = run for --seconds"},
    {"batch", 0, BENCH_OPT_U64, &opt_batch, 1, 65536, 0, 0, false,
     "mallocs per timed batch (and at most this many frees per timed batch)"},
    {"queue", 0, BENCH_OPT_U64, &opt_queue, 2, 1u << 22, 0, 0, false, "ring capacity per pair"},
    {"pin", 0, BENCH_OPT_CHOICE, &opt_pin, 0, 0, 0, 0, false,
     "auto: producers on one half of the CPUs, consumers on the other, when there are at least "
     "2; off: no pinning",
     NULL, pin_choices},
    {"touch", 0, BENCH_OPT_CHOICE, &opt_touch, 0, 0, 0, 0, false,
     "what the consumer does with each block's first byte before its timed frees: none; read "
     "(the line shared with the producer's core); write (the line the consumer's own), as a "
     "worker that reads or updates a request before freeing it",
     NULL, touch_choices},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
};

static const struct bench_prog prog = {
    "remote-free",
    "producers malloc, their consumers on other cores free: CPU ns per malloc and per remote "
    "free, waiting excluded (issue 17)",
    opts, BENCH_NOPTS(opts)};

struct rf_pair {
  struct bench_ring ring;
  _Alignas(64) atomic_bool producer_done;
  pthread_t prod;
  struct bench_rng rng;
  size_t *size;       /* producer's batch: sizes drawn, blocks made */
  unsigned char **blk;
  uint64_t mallocs, p_batches;
  double p_cpu_ns, p_overhead_ns;
  int failed;
};

/* A consumer frees what producers index, index + C, index + 2C, ... hand it. */
struct rf_consumer {
  pthread_t thread;
  unsigned index;
  void **got; /* the batch taken from a ring */
  _Alignas(64) uint64_t frees, c_batches;
  double c_cpu_ns, c_overhead_ns, c_end;
};

static struct rf_pair *rf_pairs;
static unsigned rf_npairs, rf_nconsumers;

static pthread_barrier_t rf_start;
static atomic_bool rf_stop;
static bool rf_pinned;
static cpu_set_t rf_prod_set, rf_cons_set;
static double rf_t0;

static double rf_thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int rf_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* What two back-to-back reads of the thread clock count: the median of many pairs, so a
 * preemption in the middle of one does not inflate it. Subtracted once per timed batch. */
static double rf_clock_overhead(void) {
  enum { N = 301 };
  double d[N];
  for (int i = 0; i < N; i++) {
    double a = rf_thread_ns();
    double b = rf_thread_ns();
    d[i] = b - a;
  }
  qsort(d, N, sizeof d[0], rf_cmp);
  return d[N / 2];
}

static void rf_pin(const cpu_set_t *set) {
  if (!rf_pinned)
    return;
  int rc = pthread_setaffinity_np(pthread_self(), sizeof *set, set);
  if (rc != 0)
    bench_die(PROG, "pthread_setaffinity_np failed: %s", strerror(rc));
}

static void rf_wait(unsigned *spins) {
  /* Waiting is not timed, but it must not take the CPU from the other thread when pairs share
   * CPUs: yield first, then sleep. */
  if (++*spins < 64) {
    sched_yield();
  } else {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

static void *rf_producer(void *arg) {
  struct rf_pair *c = arg;
  rf_pin(&rf_prod_set);
  const uint64_t B = opt_batch;
  size_t *size = c->size;
  unsigned char **blk = c->blk;
  c->p_overhead_ns = rf_clock_overhead();
  pthread_barrier_wait(&rf_start);
  const uint64_t quota = opt_blocks ? opt_blocks : UINT64_MAX;
  uint64_t made = 0;
  while (!c->failed && made < quota) {
    if (!opt_blocks && atomic_load_explicit(&rf_stop, memory_order_relaxed))
      break;
    uint64_t n = quota - made < B ? quota - made : B;
    for (uint64_t k = 0; k < n; k++)
      size[k] = (size_t)(opt_min_size + bench_rng_below(&c->rng, opt_max_size - opt_min_size + 1));
    double t0 = rf_thread_ns();
    for (uint64_t k = 0; k < n; k++)
      blk[k] = malloc(size[k]);
    double t1 = rf_thread_ns();
    c->p_cpu_ns += t1 - t0;
    c->p_batches++;
    for (uint64_t k = 0; k < n; k++) {
      if (!blk[k]) {
        c->failed = 1;
        for (uint64_t m = 0; m < n; m++)
          free(blk[m]);
        n = 0;
        break;
      }
      blk[k][0] = (unsigned char)k; /* the producer fills its message */
    }
    for (uint64_t k = 0; k < n; k++) {
      unsigned spins = 0;
      while (!bench_ring_push(&c->ring, blk[k]))
        rf_wait(&spins);
    }
    bench_ring_flush(&c->ring);
    made += n;
  }
  c->mallocs = made;
  bench_ring_flush(&c->ring);
  atomic_store_explicit(&c->producer_done, true, memory_order_release);
  return NULL;
}

static void *rf_consumer(void *arg) {
  struct rf_consumer *c = arg;
  rf_pin(&rf_cons_set);
  const uint64_t B = opt_batch;
  void **got = c->got;
  c->c_overhead_ns = rf_clock_overhead();
  const int touch = strcmp(opt_touch, "read") == 0 ? 1 : strcmp(opt_touch, "write") == 0 ? 2 : 0;
  pthread_barrier_wait(&rf_start);
  unsigned spins = 0;
  for (;;) {
    /* one batch from each of its producers' rings in turn; finished when every one of them was
     * found done before its ring was found empty */
    bool all_done = true;
    uint64_t took = 0;
    for (unsigned i = c->index; i < rf_npairs; i += rf_nconsumers) {
      struct rf_pair *q = &rf_pairs[i];
      bool done = atomic_load_explicit(&q->producer_done, memory_order_acquire);
      uint64_t n = bench_ring_take(&q->ring, got, B);
      if (n == 0) {
        all_done = all_done && done;
        continue;
      }
      all_done = false;
      took += n;
      /* untimed: the program's work on its request, not the allocator's */
      if (touch == 1)
        for (uint64_t k = 0; k < n; k++) (void)*(volatile unsigned char *)got[k];
      else if (touch == 2)
        for (uint64_t k = 0; k < n; k++) ((volatile unsigned char *)got[k])[0]++;
      double t0 = rf_thread_ns();
      for (uint64_t k = 0; k < n; k++)
        free(got[k]);
      double t1 = rf_thread_ns();
      c->c_cpu_ns += t1 - t0;
      c->c_batches++;
      c->frees += n;
    }
    if (took) {
      spins = 0;
    } else if (all_done) {
      break;
    } else {
      rf_wait(&spins);
    }
  }
  c->c_end = bench_now();
  return NULL;
}

/* "0-3,6" for a CPU set, into buf. */
static const char *rf_cpu_list(const cpu_set_t *set, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set))
      continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
      e++;
    int n = e == c ? snprintf(buf + len, cap - len, "%s%d", len ? "," : "", c)
                   : snprintf(buf + len, cap - len, "%s%d-%d", len ? "," : "", c, e);
    if (n < 0 || (size_t)n >= cap - len)
      break;
    len += (size_t)n;
    c = e;
  }
  return buf;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  if (opt_max_size < opt_min_size)
    bench_usage_error(&prog, "--max-size (%llu) is below --min-size (%llu)",
                      (unsigned long long)opt_max_size, (unsigned long long)opt_min_size);
  const unsigned P = (unsigned)opt_pairs;
  if (opt_consumers > opt_pairs)
    bench_usage_error(&prog, "--consumers (%llu) is above the number of producers, --pairs (%llu)",
                      (unsigned long long)opt_consumers, (unsigned long long)opt_pairs);
  const unsigned C = opt_consumers ? (unsigned)opt_consumers : P;

  /* The CPUs this process may run on, split in two halves. */
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    bench_die(PROG, "sched_getaffinity failed: %s", strerror(errno));
  int ncpu = CPU_COUNT(&allowed);
  rf_pinned = strcmp(opt_pin, "auto") == 0 && ncpu >= 2;
  CPU_ZERO(&rf_prod_set);
  CPU_ZERO(&rf_cons_set);
  if (rf_pinned) {
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) {
        if (seen < ncpu / 2)
          CPU_SET(c, &rf_prod_set);
        else
          CPU_SET(c, &rf_cons_set);
        seen++;
      }
  }

  struct rf_pair *pr = aligned_alloc(64, ((P * sizeof *pr + 63) / 64) * 64);
  struct rf_consumer *co = aligned_alloc(64, ((C * sizeof *co + 63) / 64) * 64);
  if (!pr || !co)
    bench_die(PROG, "out of memory");
  memset(pr, 0, P * sizeof *pr);
  memset(co, 0, C * sizeof *co);
  rf_pairs = pr;
  rf_npairs = P;
  rf_nconsumers = C;
  for (unsigned i = 0; i < P; i++) {
    atomic_init(&pr[i].producer_done, false);
    bench_rng_seed(&pr[i].rng, opt_seed, i);
    bench_ring_init(PROG, &pr[i].ring, opt_queue);
    /* The batch arrays are made here, so that a thread never starts without them (a consumer
     * that could not run would leave its producer waiting on a full ring). */
    pr[i].size = malloc(opt_batch * sizeof *pr[i].size);
    pr[i].blk = malloc(opt_batch * sizeof *pr[i].blk);
    if (!pr[i].size || !pr[i].blk)
      bench_die(PROG, "out of memory for the batches");
  }
  for (unsigned i = 0; i < C; i++) {
    co[i].index = i;
    co[i].got = malloc(opt_batch * sizeof *co[i].got);
    if (!co[i].got)
      bench_die(PROG, "out of memory for the batches");
  }
  pthread_barrier_init(&rf_start, NULL, P + C + 1);
  for (unsigned i = 0; i < P; i++) {
    if (i < C)
      bench_thread_start(PROG, &co[i].thread, rf_consumer, &co[i]);
    bench_thread_start(PROG, &pr[i].prod, rf_producer, &pr[i]);
  }
  double cpu0 = bench_cpu_seconds();
  rf_t0 = bench_now();
  pthread_barrier_wait(&rf_start);
  if (!opt_blocks) {
    bench_sleep_seconds(opt_seconds);
    atomic_store(&rf_stop, true);
  }
  uint64_t mallocs = 0, frees = 0, pb = 0, cb = 0;
  double p_ns = 0, c_ns = 0, end = rf_t0, overhead = 0;
  int failed = 0;
  /* The clock reads' own cost, once per batch, comes off (never below zero). */
  for (unsigned i = 0; i < P; i++) {
    bench_thread_join(PROG, pr[i].prod);
    struct rf_pair *c = &pr[i];
    failed |= c->failed;
    mallocs += c->mallocs;
    pb += c->p_batches;
    p_ns += fmax(0, c->p_cpu_ns - c->p_overhead_ns * (double)c->p_batches);
    overhead += c->p_overhead_ns / (2.0 * P);
  }
  for (unsigned i = 0; i < C; i++) {
    bench_thread_join(PROG, co[i].thread);
    struct rf_consumer *c = &co[i];
    frees += c->frees;
    cb += c->c_batches;
    c_ns += fmax(0, c->c_cpu_ns - c->c_overhead_ns * (double)c->c_batches);
    overhead += c->c_overhead_ns / (2.0 * C);
    if (c->c_end > end)
      end = c->c_end;
  }
  double cpu_s = bench_cpu_seconds() - cpu0;
  if (failed)
    bench_die(PROG, "malloc returned NULL");
  if (frees != mallocs)
    bench_die(PROG, "%llu blocks allocated but %llu freed", (unsigned long long)mallocs,
              (unsigned long long)frees);
  double elapsed = end - rf_t0;
  double per_malloc = mallocs ? p_ns / (double)mallocs : 0;
  double per_free = frees ? c_ns / (double)frees : 0;

  char pbuf[256], cbuf[256];
  const char *pl = rf_pinned ? rf_cpu_list(&rf_prod_set, pbuf, sizeof pbuf) : "any";
  const char *cl = rf_pinned ? rf_cpu_list(&rf_cons_set, cbuf, sizeof cbuf) : "any";
  printf("remote-free: %u producer(s), %u consumer(s), %llu blocks of %llu-%llu B, producers on CPUs %s, "
         "consumers on CPUs %s%s\n",
         P, C, (unsigned long long)frees, (unsigned long long)opt_min_size,
         (unsigned long long)opt_max_size, pl, cl,
         rf_pinned ? "" : (ncpu < 2 ? " (one CPU: not pinned)" : " (--pin off)"));
  printf("remote-free: CPU per block %.1f ns (malloc %.1f + remote free %.1f), clock read %.0f ns "
         "per batch subtracted; %.0f frees/s over %.3f s\n",
         per_malloc + per_free, per_malloc, per_free, overhead, (double)frees / elapsed,
         elapsed);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_string(&j, "producer_cpus", pl);
  bench_json_string(&j, "consumer_cpus", cl);
  bench_json_figures(&j);
  bench_json_real(&j, "cpu_ns_per_block", per_malloc + per_free);
  bench_json_real(&j, "producer_ns_per_malloc", per_malloc);
  bench_json_real(&j, "consumer_ns_per_free", per_free);
  bench_json_real(&j, "frees_per_s", elapsed > 0 ? (double)frees / elapsed : 0);
  bench_json_u64(&j, "mallocs", mallocs);
  bench_json_u64(&j, "frees", frees);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "producer_cpu_s", p_ns * 1e-9);
  bench_json_real(&j, "consumer_cpu_s", c_ns * 1e-9);
  bench_json_real(&j, "process_cpu_s", cpu_s);
  bench_json_u64(&j, "malloc_batches", pb);
  bench_json_u64(&j, "free_batches", cb);
  bench_json_real(&j, "clock_overhead_ns", overhead);
  bench_json_u64(&j, "pinned", rf_pinned);
  bench_json_u64(&j, "cpus", (uint64_t)ncpu);
  bench_json_end(&j);

  for (unsigned i = 0; i < P; i++) {
    bench_ring_destroy(&pr[i].ring);
    free(pr[i].size);
    free(pr[i].blk);
  }
  for (unsigned i = 0; i < C; i++)
    free(co[i].got);
  free(pr);
  free(co);
  return 0;
}
