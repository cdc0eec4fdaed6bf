/* Scattered remote frees go straight into their owner's bins (heap.c, inbox_to_bin). A thread
 * that frees another thread's blocks one or two per superblock sends batches of one or two
 * blocks (churn-remote's shape at 10^6 live blocks: 1.3 a batch). The owner's refill reads
 * such a message and puts its blocks in their class's bin, reading neither them nor their
 * superblock's header, instead of delivering the batch to its superblock for a fill to read.
 *
 *   scattered   main allocates 64 superblocks of 64-byte blocks; another thread frees one
 *               block of each of 30 superblocks and two of each of 15 more (45 batches, fewer
 *               than the 64 after which a freer helps an owner that has not looked), and
 *               exits. main's next refill of any class takes them: all 60 blocks come in this
 *               way (remote_to_bins; the bin has room for them however full its last refill
 *               left it; tried up to 3 times, with other blocks, when the freer found main
 *               idle and read its inbox for it), and main's mallocs of 64 bytes
 *               get the freed blocks back, each once, intact, while the validation walk passes
 *               with them in the bin; the statistics count them as cached, not in use.
 *   all freed   after main frees everything, bytes_in_use is back where it started (within
 *               one superblock), and the walk passes.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#include <malloc.h>
#include <pthread.h>

#define SUPERBLOCKS 64
#define SIZE 64    /* a bin of 64-byte blocks holds 122: room for every freed block */
#define SINGLES 30 /* superblocks with one block freed by the other thread */
#define PAIRS 15   /* superblocks with two */
#define FREED (SINGLES + 2 * PAIRS)
#define ATTEMPTS 3

static void *blocks[SUPERBLOCKS * 1100];
static int nblocks;
static void *freed[FREED];

static void *free_scattered(void *arg) {
  (void)arg;
  for (int i = 0; i < FREED; i++) free(freed[i]);
  return NULL; /* the thread's exit sends every batch still open */
}

static int seen_before(void *const *list, int n, const void *p) {
  for (int i = 0; i < n; i++)
    if (list[i] == p) return 1;
  return 0;
}

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate || !api.option_get) {
    printf("remote_into_bins: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  uintptr_t sbs = (uintptr_t)api.option_get("superblock_size");
  REQUIRE(sbs >= 4096);
  larder_stats_t start = alloc_stats(&api);
  /* Blocks until 64 superblocks are seen; for each, the first blocks main got from it (two
   * per attempt, below). */
  void *first_of[SUPERBLOCKS][2 * ATTEMPTS];
  int nsb = 0, per[SUPERBLOCKS] = {0};
  uintptr_t sb_of[SUPERBLOCKS];
  while (nsb < SUPERBLOCKS || per[nsb - 1] < 2 * ATTEMPTS) {
    REQUIRE(nblocks < (int)(sizeof blocks / sizeof blocks[0]));
    void *p = malloc(SIZE);
    REQUIRE(p != NULL);
    memset(p, 0x5a, SIZE);
    blocks[nblocks++] = p;
    uintptr_t sb = (uintptr_t)p & ~(sbs - 1);
    int k = 0;
    while (k < nsb && sb_of[k] != sb) k++;
    if (k == nsb) {
      if (nsb == SUPERBLOCKS) continue;
      sb_of[nsb++] = sb;
    }
    if (per[k] < 2 * ATTEMPTS) first_of[k][per[k]++] = p;
  }
  /* A freer that finds its owner idle for 100 ms (a machine that paused it that long after
   * main's last slow path) reads main's inbox for it, and the batches go to their superblocks
   * instead (free_lock_acquisitions counts that help): the case did not happen, and is tried
   * again with other blocks. */
  static void *freed_before[ATTEMPTS * FREED];
  int nfreed_before = 0;
  larder_stats_t before, taken;
  void *volatile trigger = NULL;
  for (int attempt = 0;; attempt++) {
    int n = 0;
    for (int k = 0; k < SINGLES; k++) freed[n++] = first_of[k][2 * attempt];
    for (int k = SINGLES; k < SINGLES + PAIRS; k++) {
      freed[n++] = first_of[k][2 * attempt];
      freed[n++] = first_of[k][2 * attempt + 1];
    }
    REQUIRE(n == FREED);
    before = alloc_stats(&api);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_scattered, NULL) == 0);
    pthread_join(t, NULL);
    /* A refill of a class main has not used yet reads the inbox (not the statistics first:
     * they read every heap's inbox, and deliver its batches to their superblocks). */
    static const size_t trigger_size[ATTEMPTS] = {3000, 1600, 900}; /* classes not used before */
    trigger = malloc(trigger_size[attempt]);
    REQUIRE(trigger != NULL);
    taken = alloc_stats(&api);
    if (taken.free_lock_acquisitions == before.free_lock_acquisitions || attempt == ATTEMPTS - 1) break;
    printf("remote_into_bins: attempt %d: the freer helped main (it seemed idle), again\n", attempt + 1);
    free(trigger);
    malloc_trim(0); /* the bins empty again: room for the next attempt's blocks */
    memcpy(freed_before + nfreed_before, freed, sizeof freed);
    nfreed_before += FREED;
  }
  size_t batches = taken.remote_batches - before.remote_batches;
  size_t into_bins = taken.remote_to_bins - before.remote_to_bins;
  printf("remote_into_bins: scattered: %d blocks freed by another thread in %zu batches; %zu put straight in "
         "main's bins; cached %zu bytes, in use %zu\n",
         FREED, batches, into_bins, taken.bytes_cached, taken.bytes_in_use);
  CHECK_MSG(batches >= SINGLES + PAIRS, "%zu batches for %d superblocks: the frees were not scattered", batches,
            SINGLES + PAIRS);
  CHECK_MSG(into_bins == FREED, "%zu of %d blocks went straight into the bins", into_bins, FREED);
  CHECK_MSG(taken.bytes_cached >= into_bins * SIZE, "bytes_cached %zu below the %zu blocks put in the bins",
            taken.bytes_cached, into_bins);
  CHECK(api.validate() == 0);
  /* main's mallocs of SIZE get them back, each once */
  void *again[2 * FREED + 256];
  int got = 0, back = 0;
  for (; got < (int)(sizeof again / sizeof again[0]) && back < FREED; got++) {
    void *p = malloc(SIZE);
    REQUIRE(p != NULL);
    CHECK_MSG(!seen_before(again, got, p), "block %p handed out twice", p);
    again[got] = p;
    back += seen_before(freed, FREED, p);
    memset(p, got & 0xff, SIZE);
  }
  printf("remote_into_bins: %d of the %d freed blocks came back in %d mallocs\n", back, FREED, got);
  CHECK_MSG(back == FREED, "%d of %d freed blocks came back", back, FREED);
  for (int i = 0; i < got; i++) {
    const unsigned char *p = again[i];
    for (int k = 0; k < SIZE; k++)
      if (p[k] != (unsigned char)(i & 0xff)) {
        CHECK_MSG(0, "block %d (%p) changed at byte %d", i, (const void *)p, k);
        break;
      }
  }
  CHECK(api.validate() == 0);
  /* all freed: nothing left in use */
  for (int i = 0; i < got; i++) free(again[i]);
  for (int i = 0; i < nblocks; i++)
    if (!seen_before(freed, FREED, blocks[i]) && !seen_before(freed_before, nfreed_before, blocks[i])) free(blocks[i]);
  free(trigger);
  larder_stats_t end = alloc_stats(&api);
  printf("remote_into_bins: all freed: in use %zu bytes (%zu at the start)\n", end.bytes_in_use, start.bytes_in_use);
  CHECK_MSG(end.bytes_in_use <= start.bytes_in_use + sbs, "in use %zu after every free, %zu at the start",
            end.bytes_in_use, start.bytes_in_use);
  CHECK(api.validate() == 0);
  return check_done();
}
