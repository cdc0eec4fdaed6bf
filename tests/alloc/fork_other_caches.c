/* A forked child gets back what the parent's other threads held in their caches (issue 15:
 * memory back in every process shape, pre-forked workers among them). A fork copies one
 * thread; the others' heaps come along with their bins, their batches of remote frees and their
 * kept medium spans, and no thread of the child will ever use them. The child's own calls must
 * give them back, as they would for threads that went idle.
 *
 * The parent: main mallocs 4,000 blocks of 100 B; 4 workers each keep 16 medium spans of 60
 * KiB (written), fill their bins with 300 blocks of 100 B, free 1,000 of main's blocks (remote
 * frees: batches in their buffers), then block. main forks. The child calls malloc and free (its
 * own slow paths poll the maintenance floor) for at most 30 purge delays, until:
 *   - the kept medium spans are the child's own at most (64 KiB; the workers kept 4 MiB);
 *   - no remote free waits unseen (bytes_remote_pending 0);
 *   - the purge emptied the 4 workers' bins (idle_bins_emptied);
 * then validate() passes. The registration sets LARDER_PURGE_DELAY_MS=100; the purge thread
 * stays off (this process maps less than its threshold), so only the child's calls act. The
 * parent runs with a delay of a minute until the fork, and the child sets 100 ms again: on a
 * loaded machine the workers could wait at the barrier longer than 100 ms, and a purge run in
 * the parent then emptied their caches before the fork (at_fork's REQUIRE failed).
 * Under another allocator: skipped.
 *
 * usage: alloc_fork_other_caches */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <pthread.h>
#include <stdbool.h>
#include <sys/wait.h>

#define KiB ((size_t)1 << 10)
#define WORKERS 4
#define MAIN_BLOCKS (WORKERS * 1000)
#define DELAY_MS 100

static void *main_blocks[MAIN_BLOCKS];
static pthread_barrier_t filled, released;

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  void *medium[16], *small[300];
  for (int i = 0; i < 16; i++) {
    medium[i] = malloc(60 * KiB);
    REQUIRE(medium[i] != NULL);
    memset(medium[i], id + 1, 60 * KiB);
  }
  for (int i = 0; i < 300; i++) REQUIRE((small[i] = malloc(100)) != NULL);
  for (int i = 0; i < 16; i++) free(medium[i]);
  for (int i = 0; i < 300; i++) free(small[i]);
  for (int i = id * 1000; i < (id + 1) * 1000; i++) free(main_blocks[i]);
  pthread_barrier_wait(&filled);
  pthread_barrier_wait(&released); /* blocked, in the parent, while the child runs */
  return NULL;
}

/* The child: calls until the other threads' caches are given back, or 30 purge delays pass. */
static int child(alloc_api_t *api, larder_stats_t at_fork) {
  larder_stats_t now = at_fork;
  long waited = 0;
  bool back = false;
  while (!back && waited <= 30 * DELAY_MS) {
    for (int i = 0; i < 32; i++) { /* medium calls served by a kept span poll once in 16 */
      void *volatile m = malloc(30000);
      free(m);
      void *volatile s = malloc(100);
      free(s);
    }
    now = alloc_stats(api);
    back = now.medium_bytes_cached <= 64 * KiB && now.bytes_remote_pending == 0 &&
           now.idle_bins_emptied - at_fork.idle_bins_emptied >= WORKERS;
    if (!back) {
      srv_sleep_ms(DELAY_MS / 4);
      waited += DELAY_MS / 4;
    }
  }
  printf("fork_other_caches: child after %ld ms: kept medium spans %zu bytes (%zu at the fork), remote frees "
         "unseen %zu bytes (%zu), bins emptied %zu\n",
         waited, now.medium_bytes_cached, at_fork.medium_bytes_cached, now.bytes_remote_pending,
         at_fork.bytes_remote_pending, now.idle_bins_emptied - at_fork.idle_bins_emptied);
  CHECK_MSG(now.medium_bytes_cached <= 64 * KiB, "the child still keeps %zu bytes of medium spans of threads it "
            "does not have, %ld ms (%ld purge delays) after the fork", now.medium_bytes_cached, waited,
            waited / DELAY_MS);
  CHECK_MSG(now.bytes_remote_pending == 0, "%zu bytes of remote frees never reached their owner in the child",
            now.bytes_remote_pending);
  CHECK_MSG(now.idle_bins_emptied - at_fork.idle_bins_emptied >= WORKERS,
            "the bins of %zu of the %d threads the child does not have were emptied",
            now.idle_bins_emptied - at_fork.idle_bins_emptied, WORKERS);
  CHECK(api->validate() == 0);
  return check_done();
}

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.validate) {
    printf("fork_other_caches: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  REQUIRE(api.option_get("purge_delay_ms") == DELAY_MS);
  REQUIRE(api.option_set("purge_delay_ms", "60000") == 0);
  setvbuf(stdout, NULL, _IONBF, 0); /* the child ends with _exit */
  for (int i = 0; i < MAIN_BLOCKS; i++) REQUIRE((main_blocks[i] = malloc(100)) != NULL);
  REQUIRE(pthread_barrier_init(&filled, NULL, WORKERS + 1) == 0);
  REQUIRE(pthread_barrier_init(&released, NULL, WORKERS + 1) == 0);
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
  pthread_barrier_wait(&filled);
  larder_stats_t at_fork = alloc_stats(&api);
  printf("fork_other_caches: at the fork: kept medium spans %zu bytes, remote frees unseen %zu bytes, cached %zu\n",
         at_fork.medium_bytes_cached, at_fork.bytes_remote_pending, at_fork.bytes_cached);
  /* the workers' caches hold what the test is about (else it measures nothing) */
  REQUIRE(at_fork.medium_bytes_cached >= WORKERS * 512 * KiB);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    REQUIRE(api.option_set("purge_delay_ms", "100") == 0);
    _exit(child(&api, at_fork));
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %d)", status);
  pthread_barrier_wait(&released);
  for (int i = 0; i < WORKERS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  CHECK(api.validate() == 0);
  return check_done();
}
