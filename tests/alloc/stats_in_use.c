/* The statistics count what the program holds (issue 15, "Honest figures"): after a program
 * frees everything, bytes_in_use is back within 64 KiB of what it was before, whether the
 * frees were the allocating thread's own or another thread's, and with the threads still
 * alive (their bins and remote buffers not emptied by an exit). Blocks waiting in threads'
 * bins are reported apart (bytes_cached), as are remote frees their owners have not looked
 * at yet (bytes_remote_pending); mallinfo2's uordblks and hblkhd add up to bytes_in_use.
 *
 * The first larder said 63 MB in use in a key-value server that held 2 MB after deleting its
 * data: blocks freed into superblocks the owner no longer allocated from were counted until a
 * refill visited them.
 *
 * usage: alloc_stats_in_use */
#include <malloc.h>
#include <pthread.h>

#include "alloc_util.h"

#define N 100000
#define SLACK (64 * 1024)

static alloc_api_t api;
static void **blocks;
static pthread_barrier_t built, freed, done;

static void build(void) {
  uint64_t s = 7;
  for (int i = 0; i < N; i++) {
    size_t size = i % 100 == 0 ? 20000 + (size_t)(alloc_rng(&s) % 100000) : 16 + (size_t)(alloc_rng(&s) % 2000);
    blocks[i] = malloc(size);
    REQUIRE(blocks[i] != NULL);
    memset(blocks[i], 1, size < 64 ? size : 64);
  }
}

static void free_all(void) {
  for (int i = 0; i < N; i++) free(blocks[i]);
}

static void report(const char *what, larder_stats_t before, larder_stats_t during, larder_stats_t after) {
  struct mallinfo2 mi = mallinfo2();
  printf("stats_in_use %-30s in use %zu -> %zu -> %zu bytes; cached %zu, remote pending %zu; mallinfo2 %zu\n", what,
         before.bytes_in_use, during.bytes_in_use, after.bytes_in_use, after.bytes_cached, after.bytes_remote_pending,
         mi.uordblks + mi.hblkhd);
  CHECK_MSG(during.bytes_in_use >= before.bytes_in_use + (size_t)N * 16, "%s: %zu in use with %d blocks live", what,
            during.bytes_in_use, N);
  CHECK_MSG(after.bytes_in_use <= before.bytes_in_use + SLACK, "%s: %zu bytes in use after freeing all, %zu before (bound +%d)",
            what, after.bytes_in_use, before.bytes_in_use, SLACK);
  size_t mi_total = mi.uordblks + mi.hblkhd;
  CHECK_MSG(mi_total <= after.bytes_in_use + SLACK && after.bytes_in_use <= mi_total + SLACK,
            "%s: mallinfo2 says %zu in use, larder_stats_get %zu", what, mi_total, after.bytes_in_use);
}

/* The other thread allocates; this one (or main) frees. */
static void *builder(void *arg) {
  (void)arg;
  build();
  pthread_barrier_wait(&built);
  pthread_barrier_wait(&freed); /* alive and idle while the figures are read */
  pthread_barrier_wait(&done);
  return NULL;
}

int main(void) {
  api = alloc_api();
  if (!api.stats_get) {
    printf("stats_in_use: not larder; nothing to check\n");
    return ALLOC_SKIP;
  }
  blocks = calloc(N, sizeof *blocks);
  REQUIRE(blocks != NULL);

  /* 1. the allocating thread frees its own blocks */
  larder_stats_t before = alloc_stats(&api);
  build();
  larder_stats_t during = alloc_stats(&api);
  free_all();
  report("own frees", before, during, alloc_stats(&api));

  /* 2. another thread allocated them; main frees them while that thread is alive and idle */
  pthread_barrier_init(&built, NULL, 2);
  pthread_barrier_init(&freed, NULL, 2);
  pthread_barrier_init(&done, NULL, 2);
  pthread_t t;
  before = alloc_stats(&api);
  REQUIRE(pthread_create(&t, NULL, builder, NULL) == 0);
  pthread_barrier_wait(&built);
  during = alloc_stats(&api);
  free_all();
  larder_stats_t after = alloc_stats(&api);
  report("remote frees, threads alive", before, during, after);
  CHECK_MSG(after.bytes_remote_pending > 0 || after.remote_frees > 0, "no remote free was counted");
  pthread_barrier_wait(&freed);
  pthread_barrier_wait(&done);
  pthread_join(t, NULL);
  free(blocks);
  return check_done();
}
