/* A thread freeing a large heap of its own in random order, and frees into superblocks the global
 * heap holds (heap.c, heap_release_own_frees; global.c, ld_global_free). Such a heap falls
 * below Hoard's emptiness threshold long before its superblocks are empty (they empty together).
 * Given away at once, as Hoard gives them (§3.1), nearly every superblock went to the global
 * heap while most of its blocks still lived, and each later free was a free into the global
 * heap under its lock (10^6 blocks of 256 bytes: 733,746 of the 10^6 frees, 83 ns a free where
 * jemalloc takes 20); before that, a remote free each (152 ns). Now the heap's own frees give
 * its empty superblocks back at once and its partly used ones at the purge's next pass, its
 * thread's exit or idle drain, or a validation.
 *
 *   random teardown   one thread allocates 200,000 blocks of 256 bytes (about 50 MB), shuffles
 *                     them, and frees half: no free goes into a superblock the heap gave away
 *                     (remote_frees), yet the class is below the threshold (the validation walk
 *                     then gives superblocks away: superblocks_to_global grows, and Hoard's
 *                     invariant holds: it returns 0); the purge delay is set long, so that no
 *                     pass lands in the half;
 *   global free       the other half is then freed: at least a tenth of those frees are of
 *                     blocks whose superblock the validation gave away (else the case tests
 *                     nothing), pushed under the global lock when a trylock gets it: at most one
 *                     remote batch for every 20 of them (the lock is only busy when the purge
 *                     thread holds it); every superblock comes back (bytes_in_use as before, but
 *                     for the purge thread's few hundred bytes) and the validation walk passes.
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
  alloc_shuffle(blocks, BLOCKS, 42);
  long corrupt = 0;
  REQUIRE(api.option_set("purge_delay_ms", "60000") == 0);
  larder_stats_t mid = alloc_stats(&api);
  for (int i = 0; i < BLOCKS / 2; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    free(blocks[i]);
  }
  larder_stats_t half = alloc_stats(&api);
  size_t own_given_away = half.remote_frees - mid.remote_frees;
  CHECK(api.validate() == 0); /* gives the partly used superblocks away, Hoard's invariant holds */
  larder_stats_t checked = alloc_stats(&api);
  size_t validation_gave = checked.superblocks_to_global - half.superblocks_to_global;
  for (int i = BLOCKS / 2; i < BLOCKS; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    free(blocks[i]);
  }
  larder_stats_t after = alloc_stats(&api);
  /* (printed only now: stdout's buffer is allocated at the first printf) */
  printf("global_free: half of %d blocks freed in random order: %zu frees into superblocks the heap had given away; "
         "the validation then gave %zu superblocks to the global heap\n",
         BLOCKS, own_given_away, validation_gave);
  size_t given_away = after.remote_frees - checked.remote_frees, batches = after.remote_batches - checked.remote_batches;
  printf("global_free: the other half: %zu of superblocks the heap had given away, %zu remote batches; in use %zu -> "
         "%zu bytes\n",
         given_away, batches, before.bytes_in_use, after.bytes_in_use);
  CHECK_MSG(own_given_away == 0, "%zu of the heap's own frees went into superblocks it had given away", own_given_away);
  CHECK_MSG(validation_gave > 0, "no superblock was due: the case did not happen");
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
