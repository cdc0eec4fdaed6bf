/* Memory goes back to the OS when the program goes idle (issue 9, "Must hold": "After a peak of
 * 256 MiB over 4 threads and all frees (half by other threads), RSS falls to live + 16 MiB
 * within three purge delays, with the threads alive and idle, and again after they exit; after
 * malloc_trim(0), live + 2 MiB"). Issue 9 measured, today: 89 MiB after 3 s idle, 81 MiB after
 * the threads exit, 18 MiB after malloc_trim(0).
 *
 * Four threads each allocate 64 MiB of mixed sizes (95% of blocks 16 B-1 KiB, 5% 1-256 KiB,
 * uniform within one of 8 octaves; every page written), then each frees its own even-numbered
 * blocks and the odd-numbered blocks of the previous thread, so half of all blocks are freed
 * by a thread other than the one that allocated them. Then the threads block on a condition
 * variable.
 *
 * "live" is the RSS measured before the peak, with the four threads started (each has made one
 * malloc/free) and every array the test keeps already written; the test keeps nothing else.
 * Checks, with D = the purge delay (larder_option_get("purge_delay_ms"); the registrations set
 * LARDER_PURGE_DELAY_MS=200), RSS read from /proc/self/statm every 50 ms without allocating:
 *   1. threads alive and idle: RSS <= live + 16 MiB within 3 D + 1 s of the last free;
 *   2. threads joined: RSS <= live + 16 MiB within 3 D + 1 s of the join;
 *   3. malloc_trim(0): RSS <= live + 2 MiB right after it.
 * Mode "thread" (LARDER_PURGE_THREAD=1): the process makes no allocation call at all while it
 * waits, so only a background purge thread can give memory back. Mode "calls" (no purge
 * thread): the main thread makes one malloc/free pair every 50 ms, the "deadline checked from
 * any allocation call" path. larder_validate() at the end.
 *
 * Under another allocator the workload runs and the figures are printed; the bounds are
 * asserted only with LARDER_TEST_ASSERT_ANY=1. On the build machine glibc 2.36 meets all three
 * in mode "thread" (16.9 / 3.4 / 3.4 MiB against bounds 18.5 / 18.5 / 4.5 MiB); jemalloc 5.3
 * with MALLOC_CONF=background_thread:true,dirty_decay_ms:200,muzzy_decay_ms:0 meets 1 and 2
 * (in 350 ms; its malloc_trim is glibc's and does nothing for it); larder at eba5c40 meets
 * none (RSS 80 / 75 / 24 MiB, live 2.6 MiB).
 *
 * usage: alloc_idle_return thread|calls [MiB per thread] */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>

#define THREADS 4
#define MiB ((size_t)1 << 20)
#define POLL_MS 50.0

typedef struct worker_s {
  pthread_t t;
  int id;
  long n;        /* blocks */
  uint32_t *sz;  /* sizes, decided before the baseline */
  void **p;      /* mmap'd, written before the baseline */
} worker_t;

static worker_t w[THREADS];
static pthread_barrier_t b_ready, b_go, b_allocated, b_free, b_freed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int exit_now;
static atomic_long corrupt;

static uint32_t pick_size(uint64_t *s) {
  if (alloc_rng(s) % 100 < 95) return 16 + (uint32_t)(alloc_rng(s) % 1009);
  /* one of the 8 octaves from 1 KiB to 256 KiB, uniform within it */
  uint32_t lo = 1024u << (alloc_rng(s) % 8);
  return lo + (uint32_t)(alloc_rng(s) % (lo + 1));
}

static void free_half(worker_t *x, int parity) {
  long bad = 0;
  for (long i = parity; i < x->n; i += 2) {
    unsigned char *q = x->p[i];
    bad += q[0] != (unsigned char)i || q[x->sz[i] - 1] != (unsigned char)i;
    free(q);
  }
  atomic_fetch_add(&corrupt, bad);
}

static void *worker(void *arg) {
  worker_t *x = arg;
  alloc_call(16); /* this thread's heap exists before the baseline */
  pthread_barrier_wait(&b_ready);
  pthread_barrier_wait(&b_go);
  for (long i = 0; i < x->n; i++) {
    unsigned char *q = malloc(x->sz[i]);
    REQUIRE(q != NULL);
    srv_touch(q, x->sz[i], (unsigned char)i);
    x->p[i] = q;
  }
  pthread_barrier_wait(&b_allocated);
  pthread_barrier_wait(&b_free);
  free_half(x, 0);                               /* own even blocks */
  free_half(&w[(x->id + THREADS - 1) % THREADS], 1); /* the previous thread's odd blocks */
  pthread_barrier_wait(&b_freed);
  pthread_mutex_lock(&mu);
  while (!exit_now) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Polls RSS every 50 ms until it is <= bound or the deadline passes; in "calls" mode makes one
 * malloc/free pair per poll. Returns the time taken (ms), or -1; *last gets the last reading. */
static double wait_for(size_t bound, double deadline_ms, int calls, size_t *last, size_t *trace,
                       int *ntrace) {
  double t0 = srv_now();
  *ntrace = 0;
  for (;;) {
    double el = (srv_now() - t0) * 1000.0;
    size_t r = srv_rss();
    *last = r;
    if (*ntrace < 64) trace[(*ntrace)++] = r;
    if (r <= bound) return el;
    if (el > deadline_ms) return -1;
    srv_sleep_ms(POLL_MS);
    if (calls) {
      /* calls == 2: a size past the small classes, whose path checks the purge deadline */
      volatile unsigned char *q = malloc(calls == 2 ? 100000 : 64);
      REQUIRE(q != NULL);
      q[0] = 1;
      free((void *)q);
    }
  }
}

static void print_trace(const char *what, const size_t *trace, int n) {
  printf("idle_return: RSS every 50 ms %s (MiB):", what);
  for (int i = 0; i < n; i++) printf(" %.0f", ALLOC_MIB(trace[i]));
  printf("\n");
}

int main(int argc, char **argv) {
  int calls = argc > 1 && strcmp(argv[1], "calls") == 0 ? 1 : argc > 1 && strcmp(argv[1], "slowcalls") == 0 ? 2 : 0;
  if (argc < 2 || (!calls && strcmp(argv[1], "thread") != 0)) {
    fprintf(stderr, "usage: %s thread|calls|slowcalls [MiB per thread]\n", argv[0]);
    return 2;
  }
  long mib = argc > 2 ? atol(argv[2]) : 64;
  if (mib < 4 || mib > 4096) {
    fprintf(stderr, "usage: %s thread|calls [MiB per thread 4..4096]\n", argv[0]);
    return 2;
  }
  alloc_api_t api = alloc_api();
  int larder = api.validate != NULL, asserting = larder || srv_assert_any();
  double delay_ms = 200;
  if (larder && api.option_get) delay_ms = api.option_get("purge_delay_ms");
  else if (getenv("LARDER_PURGE_DELAY_MS")) delay_ms = atof(getenv("LARDER_PURGE_DELAY_MS"));
  double deadline_ms = 3 * delay_ms + 1000;
  printf("idle_return: mode %s, %d threads x %ld MiB, purge delay %.0f ms, deadline %.0f ms\n",
         calls == 2 ? "slowcalls (a 100 KB malloc/free every 50 ms)"
         : calls ? "calls (a 64 B malloc/free every 50 ms)" : "thread (no calls)",
         THREADS, mib, delay_ms, deadline_ms);
  fflush(stdout);

  /* Sizes and pointer arrays first, all written, so they are in the baseline. */
  size_t total = 0;
  for (int t = 0; t < THREADS; t++) {
    uint64_t s = 77 + (uint64_t)t;
    size_t want = (size_t)mib * MiB, got = 0;
    long cap = (long)(want / 16) + 1, n = 0;
    w[t].sz = mmap(NULL, (size_t)cap * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(w[t].sz != MAP_FAILED);
    while (got < want && n < cap) { w[t].sz[n] = pick_size(&s); got += w[t].sz[n++]; }
    w[t].n = n;
    w[t].id = t;
    w[t].p = mmap(NULL, (size_t)n * sizeof(void *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(w[t].p != MAP_FAILED);
    memset(w[t].p, 0, (size_t)n * sizeof(void *));
    total += got;
  }
  pthread_barrier_init(&b_ready, NULL, THREADS + 1);
  pthread_barrier_init(&b_go, NULL, THREADS + 1);
  pthread_barrier_init(&b_allocated, NULL, THREADS + 1);
  pthread_barrier_init(&b_free, NULL, THREADS + 1);
  pthread_barrier_init(&b_freed, NULL, THREADS + 1);
  for (int t = 0; t < THREADS; t++) REQUIRE(pthread_create(&w[t].t, NULL, worker, &w[t]) == 0);
  pthread_barrier_wait(&b_ready);
  size_t live = srv_rss();
  pthread_barrier_wait(&b_go);
  pthread_barrier_wait(&b_allocated);
  size_t peak = srv_rss();
  pthread_barrier_wait(&b_free);
  pthread_barrier_wait(&b_freed);
  size_t after_free = srv_rss();

  size_t bound16 = live + 16 * MiB, bound2 = live + 2 * MiB;
  size_t trace[64], last_idle, last_exit;
  int ntrace;
  double t_idle = wait_for(bound16, deadline_ms, calls, &last_idle, trace, &ntrace);
  larder_stats_t st;
  memset(&st, 0, sizeof st);
  if (larder) api.stats_get(&st);
  printf("idle_return: %.1f MiB allocated in %ld blocks; RSS live %.1f MiB, peak %.1f MiB, right "
         "after the frees %.1f MiB\n", ALLOC_MIB(total),
         w[0].n + w[1].n + w[2].n + w[3].n, ALLOC_MIB(live), ALLOC_MIB(peak), ALLOC_MIB(after_free));
  print_trace("threads alive and idle", trace, ntrace);
  printf("idle_return: threads idle: RSS %.1f MiB (bound live + 16 MiB = %.1f) %s\n",
         ALLOC_MIB(last_idle), ALLOC_MIB(bound16),
         t_idle >= 0 ? "reached" : "NOT reached within the deadline");
  if (t_idle >= 0) printf("idle_return: reached after %.0f ms\n", t_idle);
  if (larder)
    printf("idle_return: larder: bytes_in_use %.1f MiB, bytes_held %.1f MiB, bytes_free_dirty "
           "%.1f MiB, bytes_purged %.1f MiB, bytes_dormant %.1f MiB, purge runs %zu by the thread (%.1f MiB), %zu "
           "in calls\n",
           ALLOC_MIB(st.bytes_in_use), ALLOC_MIB(st.bytes_held), ALLOC_MIB(st.bytes_free_dirty),
           ALLOC_MIB(st.bytes_purged), ALLOC_MIB(st.bytes_dormant), st.purge_thread_runs, ALLOC_MIB(st.purge_thread_bytes),
           st.purge_call_runs);

  pthread_mutex_lock(&mu);
  exit_now = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int t = 0; t < THREADS; t++) pthread_join(w[t].t, NULL);
  double t_exit = wait_for(bound16, deadline_ms, calls, &last_exit, trace, &ntrace);
  print_trace("after the threads exit", trace, ntrace);
  printf("idle_return: threads exited: RSS %.1f MiB (bound %.1f) %s", ALLOC_MIB(last_exit),
         ALLOC_MIB(bound16), t_exit >= 0 ? "reached" : "NOT reached within the deadline\n");
  if (t_exit >= 0) printf(" after %.0f ms\n", t_exit);
  int rc = malloc_trim(0);
  size_t after_trim = srv_rss();
  printf("idle_return: malloc_trim(0) = %d: RSS %.1f MiB (bound live + 2 MiB = %.1f)\n", rc,
         ALLOC_MIB(after_trim), ALLOC_MIB(bound2));

  int v = larder ? api.validate() : 0;
  CHECK(atomic_load(&corrupt) == 0);
  CHECK_MSG(peak >= live + (size_t)mib * MiB * THREADS * 8 / 10,
            "the peak (%.1f MiB over live) is not the memory written", ALLOC_MIB(peak - live));
  if (larder) CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  if (asserting) {
    CHECK_MSG(t_idle >= 0, "threads alive and idle: RSS %.1f MiB is above live + 16 MiB (%.1f) "
              "%.0f ms after the frees (3 purge delays + 1 s)", ALLOC_MIB(last_idle),
              ALLOC_MIB(bound16), deadline_ms);
    CHECK_MSG(t_exit >= 0, "after the threads exit: RSS %.1f MiB is above live + 16 MiB (%.1f) "
              "%.0f ms after the join", ALLOC_MIB(last_exit), ALLOC_MIB(bound16), deadline_ms);
    CHECK_MSG(after_trim <= bound2, "after malloc_trim(0): RSS %.1f MiB is above live + 2 MiB "
              "(%.1f)", ALLOC_MIB(after_trim), ALLOC_MIB(bound2));
  } else {
    printf("idle_return: not larder: figures printed, checks skipped\n");
    return check_failures ? check_done() : ALLOC_SKIP;
  }
  return check_done();
}
