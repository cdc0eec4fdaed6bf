/* A fill watches its class's current superblock (a bit of the superblock's remote word, set and
 * cleared with a locked instruction each, so that other threads' frees pushed onto it announce
 * nothing) only when it will leave that superblock blocks (src/heap.c, heap_set_current). A
 * locked instruction waits for the program's stores before it, so a class whose fills use a
 * superblock up or more each time paid two of them on every superblock for nothing.
 *
 * Checked, each case in a new thread:
 *   first fill  right after the thread's first malloc of 256 B, the class's current superblock
 *               holds blocks and is not watched (it was, before: every superblock a fill turned
 *               to was watched at once).
 *   kept        3,000 more mallocs of 256 B (256 blocks to a superblock, refills of up to 32):
 *               a later fill that leaves the superblock blocks watches it: at least one watch
 *               counted, and the current superblock is watched.
 *   used up     threadtest's shape with 4,000 B blocks (16 to a superblock): 1,000 allocated,
 *               then all freed, 40 rounds. The bins cycle and grow until a fill wants more
 *               blocks than a superblock holds; from then on the fills use their superblocks up
 *               and watch none. superblocks_watched is at most a tenth of the superblocks the
 *               fills examined over the last 20 rounds (0 of 1,653; watching every superblock a
 *               fill turns to, as before: 1,140).
 *   remote      another thread frees half of the kept case's blocks while their superblocks,
 *               the current one among them, are the owner's; the owner's next mallocs take them
 *               back. The validation walk (Hoard's invariant, every list and counter) passes,
 *               and bytes_in_use is back where it started once all is freed.
 * Built against liblarder.a with the internal header. */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

#define KEPT 3000
#define ROUNDS 40
#define ROUND_BLOCKS 1000

static void *kept[KEPT];
static bool first_watched, first_current_holds;
static bool kept_watched;
static size_t kept_watches;
static size_t used_up_watches, used_up_examined, used_up_refills;

static void *small_worker(void *arg) {
  (void)arg;
  size_t watches_before = ld_heap_tls->stats.superblocks_watched;
  kept[0] = malloc(256);
  REQUIRE(kept[0] != NULL);
  __asm__ volatile("" ::: "memory"); /* (the heap read after the malloc) */
  heap_t *heap = ld_heap_tls;
  sb_t *sb = ld_sb_of(kept[0]);
  unsigned c = sb->size_class;
  sb_t *current = heap->current[c];
  first_current_holds = current != &ld_sb_none && current->used < (int32_t)current->capacity;
  first_watched = current != &ld_sb_none && ld_sb_is_watched(current);
  for (unsigned i = 1; i < KEPT; i++) {
    kept[i] = malloc(256);
    REQUIRE(kept[i] != NULL);
    memset(kept[i], (int)i, 256);
  }
  __asm__ volatile("" ::: "memory");
  current = heap->current[c];
  kept_watched = current != &ld_sb_none && ld_sb_is_watched(current);
  kept_watches = heap->stats.superblocks_watched - watches_before;
  return NULL;
}

static void *remote_freer(void *arg) {
  (void)arg;
  for (unsigned i = 0; i < KEPT; i += 2) free(kept[i]);
  return NULL;
}

static void *owner_after_remote(void *arg) {
  (void)arg;
  /* the owner's heap is parked with the blocks the freer did not free: this thread may take it,
   * and its mallocs then read the batches the freer sent (or another heap serves them) */
  for (unsigned i = 0; i < KEPT; i += 2) {
    kept[i] = malloc(256);
    REQUIRE(kept[i] != NULL);
  }
  for (unsigned i = 0; i < KEPT; i++) free(kept[i]);
  return NULL;
}

static void *used_up_worker(void *arg) {
  (void)arg;
  static char *blocks[ROUND_BLOCKS];
  heap_t *heap = NULL;
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned i = 0; i < ROUND_BLOCKS; i++) {
      blocks[i] = malloc(4000);
      REQUIRE(blocks[i] != NULL);
      blocks[i][0] = (char)r; /* an object is used, not just reserved (as threadtest's) */
    }
    __asm__ volatile("" ::: "memory");
    if (r == ROUNDS / 2) { /* counted over the second half: the bins have grown by then */
      heap = ld_heap_tls;
      used_up_watches = heap->stats.superblocks_watched;
      used_up_examined = heap->stats.superblocks_examined;
      used_up_refills = heap->stats.refills;
    }
    for (unsigned i = 0; i < ROUND_BLOCKS; i++) free(blocks[i]);
  }
  used_up_watches = heap->stats.superblocks_watched - used_up_watches;
  used_up_examined = heap->stats.superblocks_examined - used_up_examined;
  used_up_refills = heap->stats.refills - used_up_refills;
  return NULL;
}

static void run(void *(*fn)(void *)) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fn, NULL) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
}

int main(void) {
  free(malloc(1)); /* the main thread's heap first */
  larder_stats_t start;
  larder_stats_get(&start);

  run(small_worker);
  CHECK_MSG(first_current_holds, "the first fill left its superblock with no block to spare");
  CHECK_MSG(!first_watched, "the superblock the first fill left current is watched already");
  CHECK_MSG(kept_watches >= 1, "%zu watches over %d mallocs of one class", kept_watches, KEPT);
  CHECK_MSG(kept_watched, "the current superblock of a class that served many fills is not watched");

  run(remote_freer);
  CHECK(larder_validate() == 0);
  run(owner_after_remote);
  CHECK(larder_validate() == 0);

  run(used_up_worker);
  larder_stats_t end;
  larder_stats_get(&end); /* (before printf, whose first call allocates stdout's buffer) */
  printf("used up: %zu refills, %zu superblocks examined, %zu watched\n", used_up_refills, used_up_examined,
         used_up_watches);
  CHECK_MSG(used_up_examined > used_up_refills, "fills of 4,000 B blocks looked at %zu superblocks in %zu refills: "
            "the bins did not grow past a superblock", used_up_examined, used_up_refills);
  CHECK_MSG(used_up_watches * 10 <= used_up_examined, "%zu watches for %zu superblocks examined", used_up_watches,
            used_up_examined);
  CHECK(larder_validate() == 0);

  /* (what the threads' exits left in parked heaps' bins is cached, not in use) */
  CHECK_MSG(end.bytes_in_use <= start.bytes_in_use + 4096, "bytes in use %zu at the start, %zu at the end",
            start.bytes_in_use, end.bytes_in_use);
  return check_done();
}
