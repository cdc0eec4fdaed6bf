/* Frees into superblocks the global heap holds (global.c, ld_global_free). A thread that frees
 * a large heap of its own in random order shrinks below Hoard's emptiness threshold long before
 * its superblocks are empty, so its heap gives partly used superblocks to the global heap (Hoard
 * §3.1), and it then frees the rest of their blocks as a thread that no longer owns them. Those
 * frees went out as remote frees, each into one of thousands of superblocks: a batch of one
 * block each time, with its CAS and its announcement (10^6 blocks of 256 bytes: 721,399
 * batches for 733,377 such frees, 152 ns a free where jemalloc takes 26). Now such a block goes
 * straight onto its superblock's free list under the global lock, when the lock is free (a free
 * never waits for it: seed 002).
 *
 *   random teardown   one thread allocates 200,000 blocks of 256 bytes (about 50 MB), then
 *                     frees them in random order: at least a tenth of the frees are of blocks
 *                     whose superblock the heap gave away (remote_frees; else the case tests
 *                     nothing), at most one remote batch for every 20 of them (the lock is
 *                     only busy when the purge thread holds it), every superblock comes back
 *                     (bytes_in_use as before, but for the purge thread's few hundred bytes)
 *                     and the validation walk passes.
 * Every block carries a pattern, checked before it is freed. Larder only: under another
 * allocator the program says so and skips (77). */
#include "alloc_util.h"

#define BLOCKS 200000
#define SIZE 256

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate) {
    printf("global_free: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  void **blocks = malloc(BLOCKS * sizeof *blocks);
  REQUIRE(blocks != NULL);
  larder_stats_t before = alloc_stats(&api);
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    alloc_fill(blocks[i], SIZE);
  }
  uint64_t seed = 42;
  for (int i = BLOCKS - 1; i > 0; i--) {
    int j = (int)(alloc_rng(&seed) % (uint64_t)(i + 1));
    void *t = blocks[i];
    blocks[i] = blocks[j];
    blocks[j] = t;
  }
  long corrupt = 0;
  larder_stats_t mid = alloc_stats(&api);
  for (int i = 0; i < BLOCKS; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    free(blocks[i]);
  }
  larder_stats_t after = alloc_stats(&api);
  size_t given_away = after.remote_frees - mid.remote_frees, batches = after.remote_batches - mid.remote_batches;
  printf("global_free: %d blocks freed in random order: %zu of superblocks the heap had given away, %zu remote "
         "batches; in use %zu -> %zu bytes\n",
         BLOCKS, given_away, batches, before.bytes_in_use, after.bytes_in_use);
  CHECK_MSG(corrupt == 0, "%ld blocks lost their pattern", corrupt);
  CHECK_MSG(given_away >= BLOCKS / 10, "only %zu frees into superblocks given away: the case did not happen", given_away);
  CHECK_MSG(batches * 20 <= given_away, "%zu remote batches for %zu frees into the global heap's superblocks", batches,
            given_away);
  /* (the purge thread, started as the heap grew, allocated a few hundred bytes meanwhile) */
  CHECK(after.bytes_in_use <= before.bytes_in_use + 4096);
  CHECK(api.validate() == 0);
  free(blocks);
  return check_done();
}
