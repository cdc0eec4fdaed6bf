/* A hinted batch of other threads' frees and a bin without room for it whole (superblock.c,
 * take_hinted and take_hinted_front). A refill takes batches from its inbox whole, from their
 * hints, when its bin has room for them. Two cases, each on a size class of its own.
 *
 * short: when the bin has blocks already and the next batch would not fit beside them (its
 * hint chained over several blocks, as for blocks under 150 bytes), the fill makes do with
 * fewer blocks than it asked for. It must not carve fresh blocks then, while free ones wait: a
 * first version did, which on remote-free with a short queue (2 pairs) held 0.8 MiB more than
 * before the change (4.9 against 4.1). Main's blocks are 64 bytes; 128 go in two batches of
 * 64; main frees 59 more and empties its bins with malloc_trim(0), so that S's free list holds
 * those 59 (60 when the C library freed one of its own there meanwhile); main's bin is then made
 * to ask for 61 at its next fill (it would after a few fills anyway). The next malloc's fill
 * takes the 59 or 60 from the free list, finds a batch of 64 that does not fit beside them (the
 * bin holds 122), and stops short of 61: S's bump pointer must not move, and none of the blocks
 * the bin got may be one main holds. The fill after takes a batch whole from its hints.
 *
 * front: a bin holds LD_BIN_BYTES / size blocks rounded down (14 of 1,152 bytes); a batch
 * closes at LD_BIN_BYTES rounded up (15). Such a batch was walked block by block, each block's
 * line last written on the freeing thread's core (two thirds of the blocks on remote-free's
 * 16 B-1 KiB mix). Now the fill takes as many as the bin has room for from the hint (one hint
 * block lists the whole batch), and the rest of the batch keeps a hint of its own, so the
 * fills after take it the same way: 30 blocks freed in two batches of 15; the first fill must
 * bring 14, all from a hint, carving nothing; then every block the thread freed must come back
 * from hints, none twice and none that main holds.
 *
 * Built against liblarder.a with the library's internal header, to set the cases up exactly:
 * main allocates blocks in its class's first superblock S, and as many more as empty its bin
 * (held); a second thread frees the first of them and exits (its batches go to main's inbox).
 * The validation walk passes after each. */
#include "alloc_util.h"
#include "internal.h"

#include <malloc.h>
#include <pthread.h>

#define MOST 600 /* blocks a case holds at most */

static void *blocks[MOST];
static int made, by_thread;

static void *free_some(void *arg) {
  (void)arg;
  for (int i = 0; i < by_thread; i++) free(blocks[i]);
  return NULL;
}

/* n blocks of `size`, and as many more as empty the bin of their class (the bin returned in
 * *bin_out); then a second thread frees the first `freed`. NULL: the blocks span superblocks,
 * the case is not set up. */
static sb_t *set_up(const char *name, size_t size, int n, int most, int freed, ld_bin_t **bin_out) {
  for (made = 0; made < n; made++) REQUIRE((blocks[made] = malloc(size)) != NULL);
  sb_t *sb = ld_sb_of(blocks[0]);
  ld_bin_t *bin = ld_heap_bin(ld_heap_tls, sb->size_class);
  const volatile uint32_t *count = &bin->count; /* read after every malloc */
  while (*count && made < most) REQUIRE((blocks[made++] = malloc(size)) != NULL); /* its leftovers, held */
  for (int i = 1; i < made; i++)
    if (ld_sb_of(blocks[i]) != sb) {
      printf("hint_room %s: the blocks span superblocks (S = %zu): case not set up, skipped\n", name, (size_t)ld_sb_size);
      for (int k = 0; k < made; k++) free(blocks[k]);
      return NULL;
    }
  CHECK_MSG(*count == 0, "%s: main's bin holds %u blocks: the case needs redoing", name, (unsigned)*count);
  by_thread = freed;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_some, NULL) == 0);
  pthread_join(t, NULL);
  *bin_out = bin;
  return sb;
}

/* p is none of the blocks main still holds, blocks[from, made) (the freed ones may come back,
 * or a block the C library freed meanwhile, such as a thread's bookkeeping) */
static bool not_held(const void *p, int from) {
  for (int i = from; i < made; i++)
    if (blocks[i] == p) return false;
  return true;
}

static bool check_short(alloc_api_t api) {
  enum { SIZE = 64, BY_THREAD = 128 /* two batches of LD_REMOTE_BATCH */, BY_MAIN = 59 };
  ld_bin_t *bin;
  sb_t *sb = set_up("short", SIZE, 400, 400 + 128, BY_THREAD, &bin);
  if (!sb) return false;
  for (int i = BY_THREAD; i < BY_THREAD + BY_MAIN; i++) free(blocks[i]);
  malloc_trim(0); /* main's bins back onto S's free list */

  CHECK_MSG(bin->count == 0, "main's bin holds %u blocks after malloc_trim", (unsigned)bin->count);
  CHECK_MSG(bin->limit == 122, "the bin of %d-byte blocks holds %u, not 122: the case needs redoing", SIZE,
            (unsigned)bin->limit);
  bin->fill = 61; /* what the fills ask for once a class is busy */
  char *bump = sb->bump;
  larder_stats_t before = alloc_stats(&api);

  void *p = malloc(SIZE);
  REQUIRE(p != NULL);
  unsigned got = bin->count + 1;
  CHECK_MSG(got >= BY_MAIN && got < 61, "the fill brought %u blocks: the case (a fill short of room) did not happen", got);
  printf("hint_room short: the fill brought %u blocks (asked for 61; %d freed by main and malloc_trim'd, batches of "
         "64 waiting); S's bump pointer moved %td bytes\n",
         got, BY_MAIN, sb->bump - bump);
  CHECK_MSG(sb->bump == bump, "the fill carved %td bytes while freed blocks waited", sb->bump - bump);
  CHECK_MSG(not_held(p, BY_THREAD + BY_MAIN), "malloc returned %p, a block main holds", p);
  for (unsigned i = 0; i < bin->count; i++)
    CHECK_MSG(not_held(bin->slots[i], BY_THREAD + BY_MAIN), "the bin holds %p, a block main holds", bin->slots[i]);

  /* the next fill: the bin is empty again, and a batch of 64 fits whole */
  void *more[128];
  for (unsigned i = 0; i < got - 1 + 64; i++) REQUIRE((more[i] = malloc(SIZE)) != NULL);
  larder_stats_t after = alloc_stats(&api);
  size_t taken = after.remote_hint_taken - before.remote_hint_taken;
  printf("hint_room short: %zu blocks taken whole from hints by the fills after\n", taken);
  CHECK_MSG(taken >= 64, "%zu blocks taken from hints (a batch of 64 was waiting)", taken);
  CHECK(api.validate && api.validate() == 0);
  free(p);
  for (unsigned i = 0; i < got - 1 + 64; i++) free(more[i]);
  for (int i = BY_THREAD + BY_MAIN; i < made; i++) free(blocks[i]);
  CHECK(api.validate() == 0);
  return true;
}

static bool check_front(alloc_api_t api) {
  enum { SIZE = 1100 /* the class of 1,152 bytes: a bin of 14, batches of 15 */, BY_THREAD = 30 };
  ld_bin_t *bin;
  sb_t *sb = set_up("front", SIZE, 34, 56, BY_THREAD, &bin);
  if (!sb) return false;
  unsigned batch = (LD_REMOTE_BATCH_BYTES + sb->block_size - 1) / sb->block_size;
  CHECK_MSG(bin->limit < batch && batch <= LD_REMOTE_BATCH,
            "the bin of %u-byte blocks holds %u, a batch %u: the case needs redoing", sb->block_size,
            (unsigned)bin->limit, batch);
  CHECK_MSG(ld_batch_hint_room(sb->block_size) >= LD_REMOTE_BATCH, "a hint of %u-byte blocks lists only %u",
            sb->block_size, ld_batch_hint_room(sb->block_size));
  char *bump = sb->bump;
  larder_stats_t before = alloc_stats(&api);

  /* the first fill: the bin's room, from the front of a batch that does not fit it */
  void *got[BY_THREAD + LD_BIN_SLOTS];
  int n = 0;
  REQUIRE((got[n++] = malloc(SIZE)) != NULL);
  larder_stats_t first = alloc_stats(&api);
  size_t taken = first.remote_hint_taken - before.remote_hint_taken;
  unsigned filled = bin->count + 1;
  printf("hint_room front: the first fill brought %u blocks, %zu of them from a batch's hint (batches of %u, a bin "
         "of %u)\n", filled, taken, batch, (unsigned)bin->limit);
  CHECK_MSG(taken == filled && filled == bin->limit,
            "the first fill brought %u blocks, %zu from a hint: the bin's room (%u) from a batch's front expected",
            filled, taken, (unsigned)bin->limit);
  CHECK_MSG(sb->bump == bump, "the fill carved %td bytes while freed blocks waited", sb->bump - bump);
  CHECK(api.validate && api.validate() == 0);

  /* the rest: each freed block comes back once, from a hint (the rest of a batch keeps one) */
  bool seen[BY_THREAD] = {false};
  int back = 0;
  for (;;) {
    void *p = got[n - 1];
    CHECK_MSG(not_held(p, BY_THREAD), "malloc returned %p, a block main holds", p);
    for (int k = 0; k < BY_THREAD; k++)
      if (blocks[k] == p) {
        CHECK_MSG(!seen[k], "block %p handed out twice", p);
        back += !seen[k];
        seen[k] = true;
      }
    if (back == BY_THREAD || n == (int)(sizeof got / sizeof got[0])) break;
    REQUIRE((got[n++] = malloc(SIZE)) != NULL);
  }
  larder_stats_t after = alloc_stats(&api);
  taken = after.remote_hint_taken - before.remote_hint_taken;
  printf("hint_room front: %d of the %d blocks back in %d mallocs, %zu from hints\n", back, BY_THREAD, n, taken);
  CHECK_MSG(back == BY_THREAD, "only %d of the %d freed blocks came back", back, BY_THREAD);
  CHECK_MSG(taken == BY_THREAD, "%zu of %d blocks taken from hints: the rest of a batch was walked", taken, BY_THREAD);
  CHECK(api.validate() == 0);
  for (int i = 0; i < n; i++) free(got[i]);
  for (int i = BY_THREAD; i < made; i++) free(blocks[i]);
  CHECK(api.validate() == 0);
  return true;
}

int main(void) {
  alloc_api_t api = alloc_api();
  bool ran = check_short(api);
  ran |= check_front(api);
  if (!ran) return ALLOC_SKIP;
  return check_done();
}
