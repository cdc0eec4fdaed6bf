/* A fork, or malloc_trim, that finds a purge run under way: the run stops at its next step and
 * its hand-overs stop yielding, so the waiter gets the purge next (maintain.c,
 * ld_purge_waiters). Before, a fork's prepare handler waited for the whole run, whose
 * hand-overs each yielded the core: beside four busy threads on 2 cores a fork took up to
 * 1.4 s (glibc's longest 32 ms) and malloc_trim up to 2.8 s.
 *
 * Two threads thin and refill heaps of 16 B-8 KiB blocks (each thinning leaves hundreds of
 * empty superblocks for the purge thread to give back, with a hand-over every few), while the
 * main thread forks again and again: each child allocates, frees and exits 0. The test asserts
 * what the purge statistics count, not a time: runs were cut for the forks
 * (purge_runs_cut > 0), every child exited 0, and the work the cut runs left was done later
 * (after the threads stop, within 3 purge delays with no call, larder holds what is live plus
 * a little). Then malloc_trim calls meet the purge thread's runs the same way.
 *
 * usage: fork_during_purge [seconds, the most the forks go on looking for a cut run] */
#define _GNU_SOURCE
#include "../check.h"
#include "alloc_util.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 2
#define BLOCKS 40000

static atomic_int stop;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *churn(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(uintptr_t)arg + 1;
  unsigned char **blocks = calloc(BLOCKS, sizeof *blocks);
  REQUIRE(blocks);
  while (!atomic_load(&stop)) {
    for (unsigned i = 0; i < BLOCKS; i++) { /* refill */
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      size_t n = 16 + s % 8176;
      blocks[i] = malloc(n);
      REQUIRE(blocks[i]);
      blocks[i][0] = blocks[i][n - 1] = (unsigned char)i;
    }
    for (unsigned i = 0; i < BLOCKS; i++) { /* thin: 1 in 50 kept a moment longer */
      if (i % 50) {
        free(blocks[i]);
        blocks[i] = NULL;
      }
    }
    for (unsigned i = 0; i < BLOCKS; i += 50) free(blocks[i]);
    usleep(2000); /* the purge thread's delay passes while the heap is thin */
  }
  free(blocks);
  return NULL;
}

static int fork_child_work(void) {
  void *v[64];
  for (int i = 0; i < 64; i++)
    if (!(v[i] = malloc(16 + (size_t)i * 97))) return 3;
  for (int i = 0; i < 64; i++) free(v[i]);
  return 0;
}

int main(int argc, char **argv) {
  double most_s = argc > 1 ? atof(argv[1]) : 20;
  alloc_api_t api = alloc_api();
  if (!api.stats_get) return ALLOC_SKIP; /* larder's purge statistics */
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);

  /* Forks until a few have cut a run (most runs the forks meet are cut: a run ending just as
   * a fork comes is not), or the time is up. */
  larder_stats_t st;
  int forks = 0, bad_children = 0;
  double start = now_s();
  do {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(fork_child_work());
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad_children++;
    forks++;
    st = alloc_stats(&api);
  } while (st.purge_runs_cut < 3 && now_s() - start < most_s);
  printf("forks %d in %.1f s: purge runs %zu by the thread, %zu cut for a fork\n", forks, now_s() - start,
         st.purge_thread_runs, st.purge_runs_cut);
  CHECK_MSG(st.purge_thread_runs > 0, "the purge thread never ran");
  CHECK_MSG(st.purge_runs_cut >= 3, "only %zu purge runs were cut in %d forks: forks waited for whole runs",
            st.purge_runs_cut, forks);
  CHECK_MSG(bad_children == 0, "%d of %d fork children failed", bad_children, forks);

  /* malloc_trim beside the purge thread: each trim is counted as waiting through its own run,
   * and the thread's runs it meets are cut too; every trim returns. */
  size_t cut_before = st.purge_runs_cut;
  for (int i = 0; i < 200; i++) {
    malloc_trim(0);
    usleep(1000);
  }
  st = alloc_stats(&api);
  printf("after 200 trims: %zu runs cut in all (%zu during the trims)\n", st.purge_runs_cut,
         st.purge_runs_cut - cut_before);

  atomic_store(&stop, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK(api.validate() == 0);

  /* What the cut runs left is done by the next ones: with no call, within 3 purge delays. */
  long delay_ms = 100;
  const char *env = getenv("LARDER_PURGE_DELAY_MS");
  if (env) delay_ms = atol(env);
  usleep((useconds_t)(3 * delay_ms + 500) * 1000);
  st = alloc_stats(&api);
  printf("idle: %.1f MiB held, %.1f MiB in use, %.1f MiB free and resident\n", st.bytes_held / 1048576.0,
         st.bytes_in_use / 1048576.0, st.bytes_free_dirty / 1048576.0);
  CHECK_MSG(st.bytes_free_dirty <= 16u << 20, "%.1f MiB of free memory still resident after the idle",
            st.bytes_free_dirty / 1048576.0);
  return check_done();
}
