/* Late tails: a kept medium span handed out again with old pages past half as far again as
 * its block is marked, not listed, and its owner lists it on the segments' list of tails later
 * (cache.c, medium_late_note; segment.c, ld_segment_list_late), while other threads may free
 * it, realloc it or have it handed to them. Whoever lists a span must never list one another
 * thread may hand out or grow: the purge would then give back pages of a live block.
 *
 * WORKERS threads each keep LIVE blocks of 17-63 KiB (one chunk: S = 64 KiB), numbered on every
 * page and at their last word, and ROUNDS times pick one at random and check it, then: free it
 * and take a new one (sizes at random, so that kept spans often reach past half as far again:
 * late tails), realloc it within its chunk, or swap it through a shared slot with another
 * thread, which checks it and frees it or grows or shrinks it in place and keeps it (a marked
 * span freed or resized by another thread than its owner). Every 256 rounds
 * a worker makes no call for 2 ms. Registered with LARDER_PURGE_DELAY_MS=1 and the purge
 * thread: the owners' trims list their late tails each millisecond, the purge lists idle
 * owners' and purges listed tails a millisecond later.
 * Checked (larder): no number lost, late tails were marked and tails purged (else the test
 * measures nothing), larder_validate() passes.
 * The larder_* API only, so that ThreadSanitizer runs it too (scripts/test-sanitize.sh): it
 * sees the owner's plain clear of its mark and the others' clears under the segment lock, or
 * reports them.
 *
 * usage: alloc_medium_late_tails_race */
#include <pthread.h>
#include <time.h>

#include "alloc_util.h"

#define KiB ((size_t)1 << 10)
#define WORKERS 3
#define LIVE 48
#define ROUNDS 20000
#define SLOTS 8
#define STRIDE 512 /* words: 4 KiB */

typedef struct {
  uint64_t *block;
  size_t size;
} numbered_t;

static _Atomic uint64_t next_number = 1;
static _Atomic long lost;
static _Atomic(numbered_t *) slots[SLOTS]; /* blocks handed between threads */

static uint64_t word_at(uint64_t v, size_t w) { return v * 0x9e3779b97f4a7c15ull ^ w; }

static void stamp(numbered_t *n) {
  uint64_t v = atomic_fetch_add(&next_number, 1);
  size_t words = n->size / sizeof(uint64_t);
  n->block[0] = v;
  for (size_t w = STRIDE; w < words; w += STRIDE) n->block[w] = word_at(v, w);
  n->block[words - 1] = word_at(v, words - 1);
}

/* Whether the first `size` bytes still carry the block's numbers. */
static int stamped(const numbered_t *n, size_t size) {
  size_t words = size / sizeof(uint64_t), all = n->size / sizeof(uint64_t);
  uint64_t v = n->block[0];
  for (size_t w = STRIDE; w < words; w += STRIDE)
    if (n->block[w] != word_at(v, w)) return 0;
  return v != 0 && (words < all || n->block[all - 1] == word_at(v, all - 1));
}

static size_t medium_size(uint64_t *rng) { return 17 * KiB + (size_t)(alloc_rng(rng) % (46 * KiB)); }

static void take(numbered_t *n, uint64_t *rng) {
  n->size = medium_size(rng);
  n->block = larder_malloc(n->size);
  REQUIRE(n->block != NULL);
  stamp(n);
}

static void release(numbered_t *n) {
  if (!stamped(n, n->size)) atomic_fetch_add(&lost, 1);
  larder_free(n->block);
  n->block = NULL;
}

static void idle_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void *worker(void *arg) {
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(uintptr_t)arg + 1;
  numbered_t live[LIVE];
  for (int i = 0; i < LIVE; i++) take(&live[i], &rng);
  for (int round = 0; round < ROUNDS; round++) {
    numbered_t *n = &live[alloc_rng(&rng) % LIVE];
    if (!stamped(n, n->size)) atomic_fetch_add(&lost, 1);
    unsigned action = (unsigned)(alloc_rng(&rng) % 8);
    if (action < 5) {
      release(n);
      take(n, &rng);
    } else if (action < 7) { /* realloc within the chunk: grown or shrunk in place */
      size_t size = medium_size(&rng), kept = size < n->size ? size : n->size;
      uint64_t *moved = larder_realloc(n->block, size);
      REQUIRE(moved != NULL);
      n->block = moved;
      if (!stamped(n, kept & ~(sizeof(uint64_t) - 1))) atomic_fetch_add(&lost, 1);
      n->size = size;
      stamp(n);
    } else { /* to another thread, which frees it; one of another thread's freed here */
      numbered_t *given = malloc(sizeof *given);
      REQUIRE(given != NULL);
      *given = *n;
      numbered_t *got = atomic_exchange(&slots[alloc_rng(&rng) % SLOTS], given);
      if (!got) {
        take(n, &rng);
      } else if (alloc_rng(&rng) % 2) {
        release(got);
        free(got);
        take(n, &rng);
      } else { /* kept here, grown or shrunk in place while its owner may list it */
        *n = *got;
        free(got);
        if (!stamped(n, n->size)) atomic_fetch_add(&lost, 1);
        size_t size = medium_size(&rng);
        uint64_t *moved = larder_realloc(n->block, size);
        REQUIRE(moved != NULL);
        n->block = moved;
        n->size = size;
        stamp(n);
      }
    }
    if (round % 256 == 255) idle_ms(2);
  }
  for (int i = 0; i < LIVE; i++) release(&live[i]);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  REQUIRE(api.option_get("purge_delay_ms") == 1);
  REQUIRE(api.option_get("purge_thread") == 1);
  larder_stats_t before = alloc_stats(&api);
  alloc_run_workers(WORKERS, worker);
  for (int i = 0; i < SLOTS; i++) {
    numbered_t *got = atomic_exchange(&slots[i], NULL);
    if (got) {
      release(got);
      free(got);
    }
  }
  larder_stats_t after = alloc_stats(&api);
  size_t late = after.medium_late_tails - before.medium_late_tails, purged = after.medium_tails_purged - before.medium_tails_purged;
  printf("medium_late_tails_race: %llu blocks, %ld numbers lost; %zu medium hits, %zu late tails, %zu bytes of tails "
         "purged\n",
         (unsigned long long)(next_number - 1), (long)lost, after.medium_cache_hits - before.medium_cache_hits, late, purged);
  CHECK_MSG(lost == 0, "%ld numbers lost", (long)lost);
  CHECK_MSG(late > 0, "no kept span was handed out with a late tail: the test measures nothing");
  CHECK_MSG(purged > 0, "no tail was purged: the test measures nothing");
  CHECK(api.validate() == 0);
  return check_done();
}
