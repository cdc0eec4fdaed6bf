/* A fill that stops short of a whole batch carves nothing (superblock.c, take_hinted and
 * ld_sb_take_blocks). A refill takes batches of other threads' frees from its inbox whole, from
 * their hints, when its bin has room for the whole batch; when it has blocks already and the
 * next batch would not fit, the fill makes do with fewer blocks than it asked for. It must not
 * carve fresh blocks then, while free ones wait: a first version did, which on remote-free with
 * a short queue (2 pairs) held 0.8 MiB more than before the change (4.9 against 4.1).
 *
 * Built against liblarder.a with the library's internal header, to set the case up exactly:
 * main allocates 400 blocks of 64 bytes, and as many more as its bin still holds (its class's
 * first superblock, S, partly carved, and the bin empty); a
 * second thread frees 128 of them and exits (two batches of 64, sent to main's inbox); main
 * frees 59 more and empties its bins with malloc_trim(0), so that S's free list holds those 59
 * (60 when the C library freed one of its own there meanwhile); main's bin is then made to ask
 * for 61 at its next fill (it would after a few fills anyway). The next malloc's fill takes the
 * 59 or 60 from the free list, finds a batch of 64 that does not fit beside them (the bin holds
 * 122), and stops short of 61: S's bump pointer must not move, and none of the
 * blocks the bin got may be one main holds. The fill after takes a batch whole from its hints
 * (remote_hint_taken), and the validation walk passes. */
#include "alloc_util.h"
#include "internal.h"

#include <malloc.h>
#include <pthread.h>

#define SIZE 64
#define MADE 400
#define MOST (MADE + 128) /* and as many more as empty main's bin */
#define BY_THREAD 128 /* two batches of LD_REMOTE_BATCH */
#define BY_MAIN 59

static void *blocks[MOST];
static int made;

static void *free_some(void *arg) {
  (void)arg;
  for (int i = 0; i < BY_THREAD; i++) free(blocks[i]);
  return NULL;
}

/* p is none of the blocks main still holds (the freed ones, or a block the C library freed
 * meanwhile, such as a thread's bookkeeping) */
static bool not_held(const void *p) {
  for (int i = BY_THREAD + BY_MAIN; i < made; i++)
    if (blocks[i] == p) return false;
  return true;
}

int main(void) {
  alloc_api_t api = alloc_api();
  for (made = 0; made < MADE; made++) REQUIRE((blocks[made] = malloc(SIZE)) != NULL);
  sb_t *sb = ld_sb_of(blocks[0]);
  heap_t *heap = ld_heap_tls;
  unsigned cls = sb->size_class;
  ld_bin_t *bin = &heap->bins[cls];
  while (bin->count && made < MOST) REQUIRE((blocks[made++] = malloc(SIZE)) != NULL); /* its leftovers, held */
  for (int i = 1; i < made; i++)
    if (ld_sb_of(blocks[i]) != sb) {
      printf("hint_room: the blocks span superblocks (S = %zu): case not set up, skipped\n", (size_t)ld_sb_size);
      return ALLOC_SKIP;
    }
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_some, NULL) == 0);
  pthread_join(t, NULL);
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
  printf("hint_room: the fill brought %u blocks (asked for 61; %d freed by main and malloc_trim'd, batches of 64 "
         "waiting); S's bump pointer moved %td bytes\n",
         got, BY_MAIN, sb->bump - bump);
  CHECK_MSG(sb->bump == bump, "the fill carved %td bytes while freed blocks waited", sb->bump - bump);
  CHECK_MSG(not_held(p), "malloc returned %p, a block main holds", p);
  for (unsigned i = 0; i < bin->count; i++)
    CHECK_MSG(not_held(bin->slots[i]), "the bin holds %p, a block main holds", bin->slots[i]);

  /* the next fill: the bin is empty again, and a batch of 64 fits whole */
  void *more[128];
  for (unsigned i = 0; i < got - 1 + 64; i++) REQUIRE((more[i] = malloc(SIZE)) != NULL);
  larder_stats_t after = alloc_stats(&api);
  size_t taken = after.remote_hint_taken - before.remote_hint_taken;
  printf("hint_room: %zu blocks taken whole from hints by the fills after\n", taken);
  CHECK_MSG(taken >= 64, "%zu blocks taken from hints (a batch of 64 was waiting)", taken);
  CHECK(api.validate && api.validate() == 0);
  free(p);
  for (unsigned i = 0; i < got - 1 + 64; i++) free(more[i]);
  for (int i = BY_THREAD + BY_MAIN; i < made; i++) free(blocks[i]);
  CHECK(api.validate() == 0);
  return check_done();
}
