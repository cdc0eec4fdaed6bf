/* A fill takes the front of a batch too big for its bin from the batch's hint (superblock.c,
 * take_hinted_front). A bin holds LD_BIN_BYTES / size blocks, rounded down (14 of 1,152
 * bytes); a batch of other threads' frees closes at LD_BIN_BYTES, rounded up (15). Before, a
 * batch that did not fit the empty bin whole was walked
 * block by block, each block's line last written on the freeing thread's core (two thirds of
 * the blocks on remote-free's 16 B-1 KiB mix). Now the fill takes as many as the bin has room
 * for from the hint, and the rest of the batch keeps a hint of its own, so the fills after take
 * it the same way.
 *
 * Built against liblarder.a with the library's internal header: main allocates blocks of 1,152
 * bytes in one superblock S, and as many more as empty its bin; a second thread frees BY_THREAD of
 * them and exits (one batch, sent to main's inbox); main mallocs again. The first fill must
 * bring a bin's worth, all from the hint (remote_hint_taken), carving nothing; then every block
 * the thread freed must come back from hints, none of them twice and none that main holds, and
 * the validation walk passes. */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

#define SIZE 1100 /* the class of 1,152 bytes: a bin of 14, batches of 15 */
#define MADE 34 /* and as many more as empty main's bin */
#define MOST 56
#define BY_THREAD 30

static void *blocks[MOST];
static int made;

static void *free_some(void *arg) {
  (void)arg;
  for (int i = 0; i < BY_THREAD; i++) free(blocks[i]);
  return NULL;
}

static int freed_index(const void *p) {
  for (int i = 0; i < BY_THREAD; i++)
    if (blocks[i] == p) return i;
  return -1;
}

/* p is none of the blocks main still holds */
static bool not_held(const void *p) {
  for (int i = BY_THREAD; i < made; i++)
    if (blocks[i] == p) return false;
  return true;
}

int main(void) {
  alloc_api_t api = alloc_api();
  for (made = 0; made < MADE; made++) REQUIRE((blocks[made] = malloc(SIZE)) != NULL);
  sb_t *sb = ld_sb_of(blocks[0]);
  heap_t *heap = ld_heap_tls;
  ld_bin_t *bin = &heap->bins[sb->size_class];
  const volatile uint32_t *count = &bin->count; /* read after every malloc */
  while (*count && made < MOST) REQUIRE((blocks[made++] = malloc(SIZE)) != NULL); /* its leftovers, held */
  for (int i = 1; i < made; i++)
    if (ld_sb_of(blocks[i]) != sb) {
      printf("hint_front: the blocks span superblocks (S = %zu): case not set up, skipped\n", (size_t)ld_sb_size);
      return ALLOC_SKIP;
    }
  CHECK_MSG(*count == 0, "main's bin holds %u blocks: the case needs redoing", (unsigned)*count);
  CHECK_MSG(bin->limit < LD_REMOTE_BATCH && (LD_REMOTE_BATCH_BYTES + sb->block_size - 1) / sb->block_size > bin->limit,
            "the bin of %u-byte blocks holds %u, as many as a batch: the case needs redoing", sb->block_size,
            (unsigned)bin->limit);
  CHECK_MSG(ld_batch_hint_room(sb->block_size) >= LD_REMOTE_BATCH, "a hint of %u-byte blocks lists only %u",
            sb->block_size, ld_batch_hint_room(sb->block_size));
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_some, NULL) == 0);
  pthread_join(t, NULL);
  char *bump = sb->bump;
  larder_stats_t before = alloc_stats(&api);

  /* the first fill: the bin's room, from the front of a batch that does not fit it */
  void *got[BY_THREAD + LD_BIN_SLOTS];
  int n = 0;
  REQUIRE((got[n++] = malloc(SIZE)) != NULL);
  larder_stats_t first = alloc_stats(&api);
  size_t taken = first.remote_hint_taken - before.remote_hint_taken;
  unsigned filled = *count + 1;
  printf("hint_front: the first fill brought %u blocks, %zu of them from a batch's hint (batches of %u, a bin of %u)\n",
         filled, taken, (LD_REMOTE_BATCH_BYTES + sb->block_size - 1) / sb->block_size, (unsigned)bin->limit);
  CHECK_MSG(taken == filled && filled == bin->limit,
            "the first fill brought %u blocks, %zu from a hint: the bin's room (%u) from a batch's front expected",
            filled, taken, (unsigned)bin->limit);
  CHECK_MSG(sb->bump == bump, "the fill carved %td bytes while freed blocks waited", sb->bump - bump);
  CHECK(api.validate && api.validate() == 0);

  /* the rest: each freed block comes back once, from a hint (the rest of a batch keeps one) */
  bool seen[BY_THREAD] = {false};
  int back = 0;
  for (;;) {
    int k = freed_index(got[n - 1]);
    CHECK_MSG(not_held(got[n - 1]), "malloc returned %p, a block main holds", got[n - 1]);
    if (k >= 0) {
      CHECK_MSG(!seen[k], "block %p handed out twice", got[n - 1]);
      if (!seen[k]) back++;
      seen[k] = true;
    }
    if (back == BY_THREAD || n == (int)(sizeof got / sizeof got[0])) break;
    REQUIRE((got[n++] = malloc(SIZE)) != NULL);
  }
  larder_stats_t after = alloc_stats(&api);
  taken = after.remote_hint_taken - before.remote_hint_taken;
  printf("hint_front: %d of the %d blocks back in %d mallocs, %zu from hints\n", back, BY_THREAD, n, taken);
  CHECK_MSG(back == BY_THREAD, "only %d of the %d freed blocks came back", back, BY_THREAD);
  CHECK_MSG(taken == BY_THREAD, "%zu of %d blocks taken from hints: the rest of a batch was walked", taken, BY_THREAD);
  CHECK(api.validate() == 0);
  for (int i = 0; i < n; i++) free(got[i]);
  for (int i = BY_THREAD; i < made; i++) free(blocks[i]);
  CHECK(api.validate() == 0);
  return check_done();
}
