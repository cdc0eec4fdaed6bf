/* Batch hints cover whole batches (internal.h, ld_batch_hint_t). A thread that frees another
 * thread's blocks hands them over in batches of up to 64, chained through the blocks; the
 * owner that takes them back would wait for each block's line, last written on the freer's
 * core, before it learns the next address. So each batch carries what its freer knew, the
 * blocks' places, in the blocks themselves, and the owner's refill prefetches them all before
 * it walks the chain (superblock.c, remote_prefetch). A block has room for the places of a few
 * others only (22 in a 64-byte block); a longer batch goes on in the first block listed.
 *
 *   whole batches  main allocates 4,096 blocks of 64 bytes; another thread frees them in the
 *                  order they came, and exits (its batches all go); main allocates them again.
 *                  Its refills take the remote lists and prefetch at least 3/4 of the blocks
 *                  freed (remote_hinted against remote_frees); with one block's room per
 *                  batch, 23 of each 64 (36%); with the first batch's hint only (no
 *                  next_batch: the batches of a remote list are found through their first
 *                  blocks' hints), 256 of 4,096. The blocks come back intact (no hint is
 *                  written over a block in use) and the validation walk passes. A batch from
 *                  the inbox is taken whole from its hints, its other blocks unread
 *                  (superblock.c, take_hinted): at least 3/4 of the freed blocks main gets
 *                  back come so (remote_hint_taken against the addresses seen again; the
 *                  rest of main's blocks are carved where its current superblock left off).
 *   hints overwritten  the same again, but main writes over bytes 16-63 of every block after
 *                  the other thread freed it (a write after free that leaves each block's
 *                  link and tag alone, and every batch's hint broken): no batch is taken from
 *                  its hints (remote_hint_taken does not move), the refills walk the chains
 *                  instead, and still every block comes out once and the walk passes.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#include <pthread.h>

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wpragmas"

#define COUNT 4096
#define SIZE 64

static void *blocks[COUNT];
static void *kept[COUNT]; /* one block of each superblock, so that none empties */
static void *old[COUNT];  /* the blocks freed, sorted: which of main's new ones come back */

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return (x > y) - (x < y);
}

static void *free_all(void *arg) {
  (void)arg;
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate || !api.option_get) {
    printf("remote_hints: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  uintptr_t sbs = (uintptr_t)api.option_get("superblock_size");
  REQUIRE(sbs >= 4096);
  int nkept = 0;
  for (int i = 0; i < COUNT; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    memset(blocks[i], 0x5a, SIZE);
    uintptr_t sb = ((uintptr_t)blocks[i] - 1) & ~(sbs - 1);
    int known = 0;
    for (int k = 0; k < nkept && !known; k++) known = (((uintptr_t)kept[k] - 1) & ~(sbs - 1)) == sb;
    if (!known) kept[nkept++] = blocks[i], blocks[i] = malloc(SIZE);
  }
  for (int corrupt = 0; corrupt <= 1; corrupt++) {
    const char *name = corrupt ? "hints overwritten" : "whole batches";
    memcpy(old, blocks, sizeof old);
    qsort(old, COUNT, sizeof old[0], by_address);
    larder_stats_t before = alloc_stats(&api);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_all, NULL) == 0);
    pthread_join(t, NULL);
    larder_stats_t freed = alloc_stats(&api);
    if (corrupt) /* after free, deliberately: every byte but the link and the tag */
      for (int i = 0; i < COUNT; i++) memset((char *)blocks[i] + 16, 0xa5, SIZE - 16);
    for (int i = 0; i < COUNT; i++) {
      blocks[i] = malloc(SIZE);
      REQUIRE(blocks[i] != NULL);
      memset(blocks[i], i & 0xff, SIZE);
    }
    larder_stats_t after = alloc_stats(&api);
    size_t back = 0; /* main's new blocks that are blocks the other thread freed */
    for (int i = 0; i < COUNT; i++) back += bsearch(&blocks[i], old, COUNT, sizeof old[0], by_address) != NULL;
    size_t remote = freed.remote_frees - before.remote_frees;
    size_t hinted = after.remote_hinted - before.remote_hinted;
    size_t taken = after.remote_hint_taken - before.remote_hint_taken;
    printf("remote_hints: %s: %zu blocks freed by another thread in %zu batches, %zu of them malloc'd again; "
           "main's refills prefetched %zu from hints, took %zu in whole batches from their hints\n",
           name, remote, freed.remote_batches - before.remote_batches, back, hinted, taken);
    CHECK_MSG(remote >= COUNT, "%s: %zu remote frees: the case did not happen", name, remote);
    CHECK_MSG(back * 2 >= COUNT, "%s: %zu of main's %d new blocks were freed ones", name, back, COUNT);
    if (!corrupt) {
      CHECK_MSG(hinted * 4 >= back * 3, "%zu of %zu blocks prefetched from hints", hinted, back);
      CHECK_MSG(taken * 4 >= back * 3, "%zu of %zu blocks taken from hints", taken, back);
    } else {
      CHECK_MSG(taken == 0, "%zu blocks taken from hints a write after free had changed", taken);
    }
    for (int i = 0; i < COUNT; i++) { /* a block handed out twice would carry a later index */
      unsigned char *p = blocks[i];
      for (int k = 0; k < SIZE; k++)
        if (p[k] != (unsigned char)(i & 0xff)) {
          CHECK_MSG(0, "%s: block %d (%p) changed at byte %d", name, i, (void *)p, k);
          break;
        }
    }
  }
  CHECK(api.validate() == 0);
  for (int i = 0; i < COUNT; i++) free(blocks[i]);
  for (int k = 0; k < nkept; k++) free(kept[k]);
  CHECK(api.validate() == 0);
  return check_done();
}
