/* A heap's own frees and Hoard's threshold (heap.c, heap_release_own_frees). A thread that
 * frees most of a large heap of its own in random order takes each class far below Hoard's
 * emptiness threshold (Hoard §3.1) while its superblocks are still partly used: its empty
 * superblocks go to the global heap at once, its partly used ones are due, and go at the
 * purge's next pass over the heap, with no call from the thread.
 *
 *   due, then given   one thread allocates 200,000 blocks of 256 bytes (about 50 MB), shuffles
 *                     them, frees 90% and makes no more allocator calls but for the statistics:
 *                     during the frees no free goes into a superblock the heap gave away
 *                     (remote_frees), and within 30 purge delays (100 ms here, so a loaded
 *                     machine cannot make it flaky) the purge has given superblocks to the global
 *                     heap (superblocks_to_global grows by at least a tenth of what the heap held:
 *                     the 10% left live are spread over all of them); then the validation walk
 *                     passes (Hoard's invariant holds) and every block kept its pattern.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#include <time.h>

#define BLOCKS 200000
#define SIZE 256

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate || !api.option_set) {
    printf("own_frees_due: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  REQUIRE(api.option_set("purge_delay_ms", "100") == 0);
  void **blocks = malloc(BLOCKS * sizeof *blocks);
  REQUIRE(blocks != NULL);
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    alloc_fill(blocks[i], SIZE);
  }
  alloc_shuffle(blocks, BLOCKS, 7);
  long corrupt = 0;
  larder_stats_t start = alloc_stats(&api);
  int freed = BLOCKS - BLOCKS / 10;
  for (int i = 0; i < freed; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    free(blocks[i]);
  }
  larder_stats_t after_frees = alloc_stats(&api);
  size_t held = start.bytes_held / 65536; /* (at least: superblocks are 64 KiB by default) */
  size_t gave = 0;
  int waited_ms = 0;
  for (; waited_ms < 3000; waited_ms += 50) {
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    larder_stats_t now = alloc_stats(&api);
    gave = now.superblocks_to_global - after_frees.superblocks_to_global;
    if (gave >= held / 10) break;
  }
  size_t own_given_away = after_frees.remote_frees - start.remote_frees;
  printf("own_frees_due: %d of %d blocks freed in random order, %zu of them into superblocks the heap had given "
         "away; %zu superblocks (of about %zu held) given to the global heap after %d ms with no calls\n",
         freed, BLOCKS, own_given_away, gave, held, waited_ms);
  CHECK_MSG(own_given_away == 0, "%zu of the heap's own frees went into superblocks it had given away", own_given_away);
  CHECK_MSG(gave >= held / 10, "the purge gave %zu superblocks away, not the due ones (about %zu held)", gave, held);
  CHECK(api.validate() == 0);
  for (int i = freed; i < BLOCKS; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    free(blocks[i]);
  }
  CHECK_MSG(corrupt == 0, "%ld blocks lost their pattern", corrupt);
  CHECK(api.validate() == 0);
  free(blocks);
  return check_done();
}
