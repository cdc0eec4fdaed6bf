/* Who runs the purge (src/maintain.c, ld_maintain_poll_slow). A purge run walks every heap and
 * may make thousands of madvise calls after a drop: work that grows with the process. Where the
 * purge thread runs, a malloc or free that finds the deadline passed leaves the run to it (and
 * wakes it); only in a process without the thread does the call run it.
 *
 * The workload: 8 MiB of 256-byte blocks built and freed (their superblocks empty, to be given
 * back after a purge delay), then 1.2 s in which four threads (on two cores here) make calls
 * that take slow paths, one burst after another (2,000 mallocs and frees of 64 sizes): twelve
 * purge delays of 100 ms. A busy thread meets each deadline as the coarse clock passes it, and
 * a woken purge thread may wait for a core: calls then ran 2-5 of the ~14 runs before.
 *
 *   thread   (LARDER_PURGE_THREAD=1: the thread from the first allocation) purge_call_runs is 0,
 *            purge_thread_runs at least 2, and memory went back (bytes_purged > 0);
 *   none     (LARDER_PURGE_THREAD=0) purge_call_runs at least 2, and memory went back;
 *   switch   (LARDER_PURGE_THREAD=1, then larder_option_set at run time) as `thread`; then
 *            purge_thread set to 0: the thread ends (the process's thread count falls by one
 *            within 5 s: it finishes the run it is in), and over the workload again the calls
 *            run the purge (at least 2 runs) and the thread none; set to 1: the setter starts
 *            it again (purge_thread_starts grows by one when the call returns).
 * With the thread, exactly one thread of the process is named larder-purge (ps -L, top -H).
 * Under another allocator the workload runs and the larder checks are skipped.
 *
 * usage: alloc_purge_runner thread|none|switch */
#include "server_util.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define BLOCKS (8u << 20) / 256
#define CHURNERS 3 /* besides main: more busy threads than cores, so that a woken purge thread may wait */

static void *blocks[BLOCKS];
static atomic_uint bursts;

/* Bursts of slow-path calls, one after another, for 1.2 s; returns when main's and the
 * churners' are done. */
static void *churn(void *arg) {
  (void)arg;
  static _Thread_local void *mine[2000];
  double end = srv_now() + 1.2;
  while (srv_now() < end) {
    for (unsigned i = 0; i < 2000; i++) {
      mine[i] = malloc(16 + (i % 64) * 16);
      REQUIRE(mine[i] != NULL);
      *(volatile char *)mine[i] = 1;
    }
    for (unsigned i = 0; i < 2000; i++) free(mine[i]);
    atomic_fetch_add(&bursts, 1);
  }
  return NULL;
}

/* 8 MiB built and freed, then the bursts. */
static void workload(void) {
  for (unsigned i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(256);
    REQUIRE(blocks[i] != NULL);
    memset(blocks[i], 1, 256);
  }
  for (unsigned i = 0; i < BLOCKS; i++) free(blocks[i]);
  pthread_t threads[CHURNERS];
  for (int i = 0; i < CHURNERS; i++) REQUIRE(pthread_create(&threads[i], NULL, churn, NULL) == 0);
  churn(NULL);
  for (int i = 0; i < CHURNERS; i++) pthread_join(threads[i], NULL);
}

/* The process's threads (/proc/self/status), or -1. */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

/* The process's threads named `name` (/proc/self/task/<id>/comm), or -1. */
static int threads_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[96], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
    n += strcmp(comm, name) == 0;
  }
  closedir(d);
  return n;
}

/* The thread follows larder_option_set("purge_thread", ...) at run time. */
static void switch_off_and_on(const alloc_api_t *api) {
  int before = thread_count();
  REQUIRE(api->option_set("purge_thread", "0") == 0);
  int after = before;
  for (int i = 0; i < 500 && (after = thread_count()) >= before; i++) srv_sleep_ms(10);
  printf("purge_runner switch: purge_thread 0: %d threads before, %d after\n", before, after);
  CHECK_MSG(before > 0 && after == before - 1, "the purge thread did not end: %d threads before, %d after", before, after);
  CHECK_MSG(threads_named("larder-purge") == 0, "%d threads named larder-purge after purge_thread 0",
            threads_named("larder-purge"));
  larder_stats_t off = alloc_stats(api);
  workload();
  larder_stats_t st = alloc_stats(api);
  printf("purge_runner switch: with purge_thread 0, purge runs by calls %zu, by the thread %zu\n",
         st.purge_call_runs - off.purge_call_runs, st.purge_thread_runs - off.purge_thread_runs);
  CHECK_MSG(st.purge_thread_runs == off.purge_thread_runs, "the purge thread ran %zu times after it was switched off",
            st.purge_thread_runs - off.purge_thread_runs);
  CHECK_MSG(st.purge_call_runs >= off.purge_call_runs + 2, "calls ran the purge %zu times without the thread",
            st.purge_call_runs - off.purge_call_runs);
  REQUIRE(api->option_set("purge_thread", "1") == 0);
  larder_stats_t on = alloc_stats(api);
  CHECK_MSG(on.purge_thread_starts == st.purge_thread_starts + 1, "purge_thread 1 started %zu threads",
            on.purge_thread_starts - st.purge_thread_starts);
  /* (the workload's threads, joined, may still be listed for a moment: the kernel wakes the
   * joiner before it takes the thread off /proc/self/task; seen once under a loaded make test,
   * 3 threads for 2) */
  int again = thread_count();
  for (int i = 0; i < 500 && again != after + 1; i++) {
    srv_sleep_ms(10);
    again = thread_count();
  }
  CHECK_MSG(again == after + 1, "%d threads after purge_thread 1, %d before", again, after);
  int named = 0; /* (the new thread names itself as it starts) */
  for (int i = 0; i < 500 && (named = threads_named("larder-purge")) == 0; i++) srv_sleep_ms(2);
  CHECK_MSG(named == 1, "%d threads named larder-purge after purge_thread 1", named);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "thread") != 0 && strcmp(argv[1], "none") != 0 && strcmp(argv[1], "switch") != 0)) {
    fprintf(stderr, "usage: %s thread|none|switch\n", argv[0]);
    return 2;
  }
  bool thread = strcmp(argv[1], "none") != 0;
  alloc_api_t api = alloc_api();
  workload();
  if (!api.stats_get) {
    printf("purge_runner: %u bursts (not larder: nothing checked)\n", atomic_load(&bursts));
    return check_done();
  }
  larder_stats_t st;
  api.stats_get(&st);
  printf("purge_runner %s: %u bursts; purge runs by calls %zu, by the thread %zu; %zu bytes purged\n", argv[1],
         atomic_load(&bursts), st.purge_call_runs, st.purge_thread_runs, st.bytes_purged);
  if (thread) {
    CHECK_MSG(st.purge_call_runs == 0, "%zu purge runs made inside malloc or free calls beside the purge thread",
              st.purge_call_runs);
    CHECK_MSG(st.purge_thread_runs >= 2, "the purge thread ran %zu times in twelve purge delays", st.purge_thread_runs);
    /* named, so that a user who lists the process's threads knows the one it did not start */
    CHECK_MSG(threads_named("larder-purge") == 1, "%d threads named larder-purge", threads_named("larder-purge"));
  } else {
    CHECK_MSG(st.purge_thread_runs == 0, "a purge thread ran with LARDER_PURGE_THREAD=0");
    CHECK_MSG(st.purge_call_runs >= 2, "calls ran the purge %zu times in twelve purge delays, with no purge thread",
              st.purge_call_runs);
  }
  CHECK_MSG(st.bytes_purged > 0, "nothing given back");
  if (strcmp(argv[1], "switch") == 0) switch_off_and_on(&api);
  CHECK(api.validate() == 0);
  return check_done();
}
