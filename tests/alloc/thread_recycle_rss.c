/* A pool that recycles its threads keeps its memory flat: 64 threads at once each allocate 200
 * blocks of 16 B-3 KiB (about 37 size classes, a few blocks of each), wait for the others,
 * free them all and exit; 20 rounds of that, the next round's threads taking the heaps the last
 * ones parked. RSS after the last round must stay within 1.3x RSS after the first.
 *
 * Each round frees every block, so every superblock empties and goes to the global heap. Sent
 * back to the segments at once, an emptied superblock's chunk went to the next superblock of
 * any class, which kept the old one's pages resident past its own, and each chunk came to hold
 * the union of the pages all its superblocks had touched: RSS grew round after round until the
 * purge (34 -> 77-79 MiB here, 2.3x; 1,000 threads: 498 -> 1,158 MiB in 8 rounds). Empty
 * superblocks now wait in the global heap for their own class (global.c): 34 -> 36-37 MiB.
 *
 * usage: alloc_thread_recycle_rss [threads [rounds [bound]]] */
#include <pthread.h>

#include "alloc_util.h"

#define BLOCKS 200

static pthread_barrier_t all_allocated;
static atomic_long corrupt;

static void *worker(void *arg) {
  size_t salt = (size_t)(uintptr_t)arg;
  void *blocks[BLOCKS];
  size_t sizes[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    sizes[i] = 16 + ((size_t)i * 37 + salt) % 3000;
    blocks[i] = malloc(sizes[i]);
    if (!blocks[i]) {
      atomic_fetch_add(&corrupt, 1);
      sizes[i] = 0;
      continue;
    }
    alloc_fill(blocks[i], sizes[i] < 64 ? sizes[i] : 64); /* a header each: most pages of a block untouched */
  }
  pthread_barrier_wait(&all_allocated);
  for (int i = 0; i < BLOCKS; i++) {
    if (!blocks[i]) continue;
    if (alloc_check(blocks[i], sizes[i] < 64 ? sizes[i] : 64) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
    free(blocks[i]);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 64;
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  double bound = argc > 3 ? atof(argv[3]) : 1.3;
  if (threads < 1 || threads > 4096 || rounds < 2 || !(bound >= 1.0)) {
    fprintf(stderr, "usage: %s [threads 1..4096] [rounds >= 2] [bound >= 1]\n", argv[0]);
    return 2;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t *tids = malloc((size_t)threads * sizeof *tids);
  REQUIRE(tids != NULL);
  size_t first = 0, last = 0;
  for (int r = 0; r < rounds; r++) {
    REQUIRE(pthread_barrier_init(&all_allocated, NULL, (unsigned)threads) == 0);
    for (int i = 0; i < threads; i++)
      REQUIRE(pthread_create(&tids[i], &attr, worker, (void *)(uintptr_t)(r * 7 + i)) == 0);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&all_allocated);
    last = alloc_rss_bytes();
    if (r == 0) first = last;
  }
  free(tids);
  double ratio = (double)last / (double)first;
  printf("thread_recycle_rss: %s: %d threads x %d blocks, %d rounds: RSS %.1f MiB after the first, %.1f MiB after the "
         "last: x%.3f (bound x%.2f)\n",
         alloc_is_larder() ? "larder" : "not larder", threads, BLOCKS, rounds, ALLOC_MIB(first), ALLOC_MIB(last), ratio,
         bound);
  CHECK(atomic_load(&corrupt) == 0);
  if (!alloc_is_larder()) {
    printf("thread_recycle_rss: not larder: figure only, no bound checked\n");
    return check_failures ? check_done() : ALLOC_SKIP;
  }
  CHECK_MSG(ratio <= bound, "RSS grew x%.3f over %d rounds of %d threads (bound x%.2f)", ratio, rounds, threads, bound);
  alloc_api_t api = alloc_api();
  if (api.validate) CHECK(api.validate() == 0);
  return check_done();
}
