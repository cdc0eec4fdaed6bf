/* A free that finds a slow free's mark on its block looks in one ring, however many heaps there
 * are (src/cache.c, deferred_claim; src/internal.h, ld_ring_mark). A remote free marks the block
 * it keeps waiting (two bytes of its tag word) and writes its heap's ring id in the top two bytes
 * of the block's link word. An owner whose free of a block finds such a mark must know whether
 * that other free still waits (a double free by two threads); it looked in every heap's ring
 * before, a walk that grew with the heaps on a free path, reached whenever the program's own
 * data matched a mark (1 word in 65,536 at random). Built against liblarder.a with the internal
 * header, to write such words on purpose and to read ring ids.
 *
 *   one ring     with 64 threads' heaps alive, main frees 2,000 of its blocks whose data looks
 *                like a mark naming a helper's heap: each free looks in one ring
 *                (mark_rings_examined grows by 2,000 exactly: the walk gave 64 or more each),
 *                none is taken for a double free, and the blocks come back from malloc;
 *   no heap      the same data naming ring id 0 or one no heap has: no ring is looked in;
 *   ids          every heap has its own ring id, from 1;
 *   links        a free block whose link carries a ring id in its top two bytes (what a second
 *                free of a block on its owner's free list writes) is still followed to the
 *                right next block: every block of a superblock's free list comes back from
 *                malloc, once, and the validation walk passes. */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

#define HELPERS 64
#define BLOCKS 2000
#define SIZE 64

static pthread_barrier_t started, finish;
static uint16_t helper_ids[HELPERS];

static void *helper(void *arg) {
  void *volatile first = malloc(32); /* a heap of its own (volatile: the pair is not elided) */
  free(first);
  helper_ids[(uintptr_t)arg] = ld_heap_tls->ring_id;
  pthread_barrier_wait(&started);
  pthread_barrier_wait(&finish);
  return NULL;
}

/* Data that looks like a slow free's mark naming ring id `id`: the mark's two bytes on top of
 * the tag word, the rest not the free tag's, and the id on top of the link word. */
static void look_like_mark(void *p, uint16_t id) {
  uintptr_t words[2];
  words[0] = (uintptr_t)0x1234 | ((uintptr_t)id << 48);
  words[1] = (ld_tag(p) ^ 0x5a5a5a5aull) ^ LD_MARK_FLIP;
  memcpy(p, words, sizeof words);
  __asm__ volatile("" : : "r"(p) : "memory"); /* the stores are not dropped as dead before free */
}

static size_t rings_examined(void) {
  larder_stats_t st;
  larder_stats_get(&st);
  return st.mark_rings_examined;
}

/* Frees BLOCKS blocks dressed as marks naming `id` (ids[] when id is 0xffff), and returns how
 * many rings the frees looked in. */
static size_t free_marked(const uint16_t *ids, uint16_t id) {
  static void *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
  }
  size_t before = rings_examined();
  for (int i = 0; i < BLOCKS; i++) {
    look_like_mark(blocks[i], ids ? ids[i % HELPERS] : id);
    free(blocks[i]);
  }
  size_t examined = rings_examined() - before; /* (larder_stats_get settles the deferred frees) */
  for (int i = 0; i < BLOCKS; i++) {
    char *p = malloc(SIZE);
    REQUIRE(p != NULL);
    memset(p, 7, SIZE);
    blocks[i] = p;
  }
  for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
  return examined;
}

static int address_order(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* A superblock's free list whose links carry ring ids: every block comes back once. Half the
 * blocks stay live, so that no superblock empties (and none is given back meanwhile); the other
 * half, more than a bin holds, go back to their superblocks' free lists. */
static void links_with_ids(void) {
  enum { N = 4000 };
  static uintptr_t blocks[N];
  for (int i = 0; i < N; i++) REQUIRE((blocks[i] = (uintptr_t)malloc(SIZE)) != 0);
  for (int i = 0; i < N; i += 2) free((void *)blocks[i]);
  int listed = 0;
  for (int i = 0; i < N && !listed; i += 2) {
    sb_t *sb = ld_sb_of((void *)blocks[i]);
    for (ld_block_t *b = sb->free_list, *next; b && listed < N; b = next, listed++) {
      next = ld_next(b);
      uint16_t id = (uint16_t)(1 + listed % 7);
      memcpy((unsigned char *)&b->next + LD_LINK_TOP_BYTES, &id, sizeof id);
    }
  }
  CHECK_MSG(listed > 0, "none of the %d blocks freed is on a superblock's free list", N / 2);
  for (int i = 0; i < N; i += 2) {
    char *p = malloc(SIZE);
    REQUIRE(p != NULL);
    memset(p, 1, SIZE);
    blocks[i] = (uintptr_t)p;
  }
  qsort(blocks, N, sizeof blocks[0], address_order);
  int twice = 0;
  for (int i = 1; i < N; i++) twice += blocks[i] == blocks[i - 1];
  CHECK_MSG(twice == 0, "%d blocks handed out while live", twice);
  CHECK(larder_validate() == 0);
  for (int i = 0; i < N; i++) free((void *)blocks[i]);
  printf("mark_lookup: links: %d blocks of a free list carried a ring id in their links; %d mallocs, none "
         "handed out a live block\n", listed, N / 2);
}

int main(void) {
  void *volatile first = malloc(1);
  free(first);
  REQUIRE(pthread_barrier_init(&started, NULL, HELPERS + 1) == 0);
  REQUIRE(pthread_barrier_init(&finish, NULL, HELPERS + 1) == 0);
  pthread_t threads[HELPERS];
  for (uintptr_t i = 0; i < HELPERS; i++) REQUIRE(pthread_create(&threads[i], NULL, helper, (void *)i) == 0);
  pthread_barrier_wait(&started);

  uint16_t main_id = ld_heap_tls->ring_id;
  int distinct = main_id != 0;
  for (int i = 0; i < HELPERS; i++) {
    distinct += helper_ids[i] != 0 && helper_ids[i] != main_id;
    for (int j = 0; j < i; j++) distinct -= helper_ids[i] == helper_ids[j];
    CHECK_MSG(ld_heap_of_ring_id(helper_ids[i]) != NULL, "helper %d: ring id %u names no heap", i, helper_ids[i]);
  }
  CHECK_MSG(distinct == HELPERS + 1, "%d distinct ring ids for %d heaps", distinct, HELPERS + 1);

  size_t one = free_marked(helper_ids, 0);
  CHECK_MSG(one == BLOCKS, "%d frees of blocks that look marked looked in %zu rings (one each: %d)", BLOCKS, one, BLOCKS);
  size_t none = free_marked(NULL, 0) + free_marked(NULL, LD_RING_IDS - 1);
  CHECK_MSG(none == 0, "marks naming no heap: %zu rings looked in", none);
  printf("mark_lookup: %d heaps; %d marked frees looked in %zu rings; naming none, %zu\n", HELPERS + 1, BLOCKS, one,
         none);

  links_with_ids();

  pthread_barrier_wait(&finish);
  for (int i = 0; i < HELPERS; i++) pthread_join(threads[i], NULL);
  CHECK(larder_validate() == 0);
  return check_done();
}
