/* The purge gives back the medium spans an idle thread keeps while the thread may come back at
 * any moment (cache.c, "medium spans"): the cache is its owner's without a lock, and the purge
 * takes it only while the owner is out of it (ld_cache_medium_drain_idle, the remote buffer's
 * busy mark and membarrier, as for the thread's batches of remote frees).
 *
 * WORKERS threads, ROUNDS rounds each: malloc 1-8 blocks of 17-200 KiB, write the block's own
 * number at its start, middle and end, check every number, free them in a random order, then
 * make no call for 0-2 ms. The purge delay is 1 ms, so the purge thread often finds a worker
 * idle with spans kept, and now and then just as it comes back. Each worker also keeps 4 blocks
 * live across rounds, one replaced a round, checked each round. Every 64th round is a wave:
 * 48 blocks of 40 KiB freed into the cache's bound of 16 and asked again, so that the bound
 * grows (cache.c, medium_cache_missed) and the purge gives the growth back as the worker idles.
 * Checked (larder): no number lost (two live blocks never share memory, and no span is handed
 * out while the purge gives it back), the purge gave back idle workers' kept spans
 * (idle_medium_emptied grew), the bounds grew (medium_cache_grows), larder_validate() passes,
 * and after the workers exit and a trim nothing medium is kept, nor any growth left.
 * The larder_* API only, never the standard names, so that ThreadSanitizer runs it too
 * (scripts/test-sanitize.sh; see misuse_threads_prefixed.c): it sees the owner's accesses and the
 * purge's ordered by the busy mark's release and acquire, or reports them, however rarely the
 * two meet in time (a drain that ignored the mark lost no number in 10,000 drains here).
 *
 * usage: alloc_medium_cache_idle_race */
#include <pthread.h>
#include <time.h>

#include "alloc_util.h"

#define KiB ((size_t)1 << 10)
#define WORKERS 2
#define ROUNDS 3000
#define BURST 8
#define KEPT 4

typedef struct {
  uint64_t *block;
  size_t size;
} numbered_t;

static _Atomic uint64_t next_number = 1;
static _Atomic long lost;

static void number(numbered_t *n, size_t size) {
  n->size = size;
  n->block = larder_malloc(size);
  REQUIRE(n->block != NULL);
  uint64_t v = atomic_fetch_add(&next_number, 1);
  size_t words = size / sizeof(uint64_t);
  n->block[0] = v;
  n->block[words / 2] = ~v;
  n->block[words - 1] = v * 3;
}

static int numbered(const numbered_t *n) {
  size_t words = n->size / sizeof(uint64_t);
  uint64_t v = n->block[0];
  return v != 0 && n->block[words / 2] == ~v && n->block[words - 1] == v * 3;
}

static void release(numbered_t *n) {
  if (!numbered(n)) atomic_fetch_add(&lost, 1);
  larder_free(n->block);
  n->block = NULL;
}

static size_t medium_size(uint64_t *rng) { return 17 * KiB + (size_t)(alloc_rng(rng) % (183 * KiB)); }

static void idle_us(long us) {
  struct timespec ts = {0, us * 1000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#define WAVE 48
static void wave(uint64_t *rng) {
  numbered_t w[WAVE];
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < WAVE; i++) number(&w[i], 40 * KiB - (size_t)(alloc_rng(rng) % 64) * 8);
    for (int i = 0; i < WAVE; i++) release(&w[i]);
  }
}

static void *worker(void *arg) {
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(uintptr_t)arg + 1;
  numbered_t kept[KEPT], burst[BURST];
  for (int i = 0; i < KEPT; i++) number(&kept[i], medium_size(&rng));
  for (int round = 0; round < ROUNDS; round++) {
    int n = 1 + (int)(alloc_rng(&rng) % BURST);
    for (int i = 0; i < n; i++) number(&burst[i], medium_size(&rng));
    for (int i = 0; i < KEPT; i++)
      if (!numbered(&kept[i])) atomic_fetch_add(&lost, 1);
    for (int i = n; i > 1; i--) { /* a random order */
      int j = (int)(alloc_rng(&rng) % (uint64_t)i);
      numbered_t t = burst[i - 1];
      burst[i - 1] = burst[j];
      burst[j] = t;
    }
    for (int i = 0; i < n; i++) release(&burst[i]);
    int k = round % KEPT;
    release(&kept[k]);
    number(&kept[k], medium_size(&rng));
    if (round % 64 == 63) wave(&rng);
    idle_us(900 + (long)(alloc_rng(&rng) % 300));
  }
  for (int i = 0; i < KEPT; i++) release(&kept[i]);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  REQUIRE(api.option_get("purge_delay_ms") == 1);
  REQUIRE(api.option_get("purge_thread") == 1);
  larder_stats_t before = alloc_stats(&api);
  alloc_run_workers(WORKERS, worker);
  CHECK_MSG(lost == 0, "%ld numbers lost", (long)lost);
  larder_stats_t after = alloc_stats(&api);
  printf("medium_cache_idle_race: %llu blocks, %ld numbers lost; %zu medium hits, %zu idle caches given back by "
         "the purge (%zu purge thread runs)\n",
         (unsigned long long)(next_number - 1), (long)lost, after.medium_cache_hits - before.medium_cache_hits,
         after.idle_medium_emptied - before.idle_medium_emptied, after.purge_thread_runs - before.purge_thread_runs);
  CHECK_MSG(after.idle_medium_emptied > before.idle_medium_emptied, "the purge gave back no idle worker's kept spans");
  CHECK_MSG(after.medium_cache_grows > before.medium_cache_grows, "no worker's bound grew");
  CHECK(api.validate() == 0);
  api.trim(0);
  CHECK_MSG(alloc_stats(&api).medium_bytes_cached == before.medium_bytes_cached, "%zu bytes of medium spans kept at the end",
            alloc_stats(&api).medium_bytes_cached);
  CHECK_MSG(alloc_stats(&api).medium_cache_extra == 0, "%zu bytes of growth left", alloc_stats(&api).medium_cache_extra);
  return check_done();
}
