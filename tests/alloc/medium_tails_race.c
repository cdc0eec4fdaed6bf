/* The purge gives back medium spans' tails while other threads grow, shrink and free those
 * spans (segment.c, "tails"): no byte of a block is lost. A span on the list of tails grows
 * into its tail only after ld_segment_resize took it off under the segment lock, so a purge
 * under way finishes first.
 *
 * 3 threads each keep 200 blocks of 17-137 KiB (1 to 3 chunks, S = 64 KiB) and, 30,000 times,
 * realloc a random one to a new random size, check the bytes it kept (every 512th and the
 * last), fill it again, and now and then free it. Registered with LARDER_PURGE_DELAY_MS=1, so
 * that the purge thread purges tails all the while (larder: medium_tails_purged > 0 is
 * checked, or the test measures nothing). On a loaded machine the purge thread may not get a
 * core within the 30,000 rounds (1 run in 4 beside two busy loops): the threads go on, for
 * at most 20 s more, until main sees a tail purged. Under another allocator it runs and
 * checks the bytes only.
 *
 * usage: alloc_medium_tails_race */
#include "alloc_util.h"

#include <pthread.h>

#define THREADS 3
#define BLOCKS 200
#define ROUNDS 30000

static _Atomic long damaged;
static atomic_int enough; /* the threads may stop after ROUNDS: main saw a tail purged, or gave up */

static void *worker(void *arg) {
  uint64_t seed = 7919 * (uint64_t)(uintptr_t)arg + 1;
  unsigned char *p[BLOCKS] = {0};
  size_t size[BLOCKS] = {0};
  unsigned char tag[BLOCKS] = {0};
  for (long k = 0; k < ROUNDS || !atomic_load(&enough); k++) {
    unsigned i = (unsigned)(alloc_rng(&seed) % BLOCKS);
    size_t n = 17 * 1024 + (size_t)(alloc_rng(&seed) % (120 * 1024));
    if (p[i]) {
      size_t keep = size[i] < n ? size[i] : n;
      unsigned char *q = realloc(p[i], n);
      REQUIRE(q != NULL);
      long bad = 0;
      for (size_t o = 0; o < keep; o += 512) bad += q[o] != tag[i];
      bad += q[keep - 1] != tag[i];
      if (bad) atomic_fetch_add(&damaged, bad);
      p[i] = q;
    } else {
      p[i] = malloc(n);
      REQUIRE(p[i] != NULL);
      tag[i] = (unsigned char)(alloc_rng(&seed) | 1);
    }
    memset(p[i], tag[i], n);
    size[i] = n;
    if (alloc_rng(&seed) % 16 == 0) {
      free(p[i]);
      p[i] = NULL;
    }
  }
  for (unsigned i = 0; i < BLOCKS; i++) free(p[i]);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
  /* (larder: the threads go on until a tail was purged, for at most 20 s) */
  for (int waited_ms = 0; api.stats_get && waited_ms < 20000 && alloc_stats(&api).medium_tails_purged == 0; waited_ms += 10)
    usleep(10000);
  atomic_store(&enough, 1);
  for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  size_t purged = api.stats_get ? alloc_stats(&api).medium_tails_purged : 0;
  printf("medium_tails_race: %d threads x at least %d reallocs of 17-137 KiB blocks: %ld sampled bytes changed, "
         "%zu bytes of tails purged meanwhile\n", THREADS, ROUNDS, atomic_load(&damaged), purged);
  CHECK(atomic_load(&damaged) == 0);
  if (api.validate) {
    CHECK_MSG(purged > 0, "no tail was purged: the test measures nothing (LARDER_PURGE_DELAY_MS=1?)");
    CHECK(api.validate() == 0);
  }
  return check_done();
}
