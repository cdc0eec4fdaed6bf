/* Memory goes back when the program idles, in every process shape, with larder's default
 * settings (issue 15, "Must hold": "the single-threaded shape, at a test's size (64 MiB), is
 * back within 16 MiB of its live bytes within 3 purge delays with no calls").
 *
 * Shapes (the first argument):
 *   loop   one thread allocates 64 MiB of 16-1024 B blocks (every page written) while two
 *          helper threads exist but never allocate (they block on a condition variable), frees
 *          them all, then sleeps: no allocation call at all. The first larder kept 215 MiB of
 *          such a heap for ever: its purge thread started only once a second thread allocated.
 *   fork   the same in a worker process forked from a parent that has already started larder's
 *          purge thread: the worker must get its own (a fork copies no thread).
 * RSS is read from /proc/self/statm without allocating, every 50 ms, from the last free on;
 * "live" is the RSS before the heap is built. Bound: live + 16 MiB within 3 purge delays
 * (the registration sets LARDER_PURGE_DELAY_MS=200, nothing else) plus 200 ms for the
 * thread's wake-up. Under another allocator the figures are printed; the bound is asserted
 * only with LARDER_TEST_ASSERT_ANY=1 (glibc gives the heap back at once in the loop shape:
 * its trim of the heap top; jemalloc, tcmalloc and mimalloc keep it by default).
 *
 * usage: alloc_idle_return_shapes loop|fork [MiB] */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <pthread.h>
#include <sys/mman.h>

#define MiB ((size_t)1 << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *helper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Builds `mib` MiB, frees it, idles; returns 0 when RSS came back in time (or is not
 * asserted), 1 otherwise. */
static int shape(const char *name, size_t mib) {
  alloc_api_t api = alloc_api();
  double delay_ms = api.option_get ? api.option_get("purge_delay_ms") : 200;
  size_t n = mib * MiB / 520; /* mean block 520 B */
  void **p = mmap(NULL, n * sizeof *p, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  srv_touch(p, n * sizeof *p, 0);
  size_t live = srv_rss();
  uint64_t s = 42;
  for (size_t i = 0; i < n; i++) {
    size_t size = 16 + (size_t)(alloc_rng(&s) % 1009);
    p[i] = malloc(size);
    REQUIRE(p[i] != NULL);
    memset(p[i], 1, size);
  }
  size_t peak = srv_rss();
  for (size_t i = 0; i < n; i++) free(p[i]);
  double t0 = srv_now(), deadline_ms = 3 * delay_ms + 200;
  size_t bound = live + 16 * MiB, rss = srv_rss();
  double reached = -1;
  /* No allocation from here on: only a background thread can give memory back. */
  for (double t = 0; t <= deadline_ms + 2000; t = (srv_now() - t0) * 1000) {
    rss = srv_rss();
    if (rss <= bound) {
      reached = t;
      break;
    }
    srv_sleep_ms(50);
  }
  printf("idle_return_shapes %s: %zu MiB in %zu blocks; RSS live %.1f MiB, peak %.1f, back to %.1f MiB after %.0f ms "
         "(bound live + 16 MiB within 3 x %.0f + 200 ms = %.0f ms)\n",
         name, mib, n, live / (double)MiB, peak / (double)MiB, rss / (double)MiB, reached, delay_ms, deadline_ms);
  if (api.stats_get) {
    larder_stats_t st;
    api.stats_get(&st);
    printf("idle_return_shapes %s: larder purge thread starts %zu, runs %zu, bytes purged %.1f MiB, in use %zu B\n", name,
           st.purge_thread_starts, st.purge_thread_runs, st.bytes_purged / (double)MiB, st.bytes_in_use);
  }
  munmap(p, n * sizeof *p);
  if (!alloc_is_larder() && !srv_assert_any()) return 0;
  return reached < 0 || reached > deadline_ms;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "loop";
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 64;
  if ((strcmp(mode, "loop") && strcmp(mode, "fork")) || mib < 1 || mib > 4096) {
    fprintf(stderr, "usage: %s loop|fork [MiB 1..4096]\n", argv[0]);
    return 2;
  }
  pthread_t h[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&h[i], NULL, helper, NULL) == 0);
  int failed;
  if (strcmp(mode, "fork") == 0) {
    /* The parent starts larder's purge thread (it maps more than LARDER_PURGE_THREAD_MB),
     * then forks the worker. */
    void *big = malloc(32 * MiB);
    REQUIRE(big != NULL);
    memset(big, 1, 32 * MiB);
    free(big);
    void *small = malloc(64);
    free(small);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(shape("fork (worker process)", mib));
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  } else {
    failed = shape("loop", mib);
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < 2; i++) pthread_join(h[i], NULL);
  CHECK_MSG(!failed, "%s: RSS did not come back within live + 16 MiB in 3 purge delays", mode);
  return check_done();
}
