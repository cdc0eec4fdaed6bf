/* A thread's exit keeps part of its bins in its parked heap for the next thread (heap.c,
 * ld_heap_park; cache.c, ld_cache_drain_keeping_bins): up to half each bin's first limit, of
 * blocks of the class's current superblock, in at most two parked heaps. A thread that lives
 * for a hundred mallocs (larson's) then pops them instead of refilling, and its exit did not
 * link them back onto their superblock's list for those refills to walk.
 *
 *   kept       a thread mallocs 200 blocks of 96 B and frees them, and exits: bytes_cached
 *              and bytes_in_use are back to where they were before it (the kept blocks are
 *              the parked heap's free blocks, in no thread's cache), and the validation walk,
 *              which checks a parked heap's bins (its own blocks, within the bound), passes;
 *   reused     the next thread takes that heap (parked_heaps_taken + 1) and mallocs 8 blocks
 *              of 96 B: no refill (refills unchanged), the blocks from the kept bin, each
 *              written and checked;
 *   returned   a thread exits again keeping its bins, then malloc_trim(0): the purge gives the
 *              parked heap's superblocks to the global heap, its kept bins first; the walk
 *              passes and the heap's bytes leave bytes_held's superblocks of that class
 *              (larder_class_stats_get: no superblock of 96 B in any heap);
 *   churn      4 threads at a time, 400 in all, each freeing what its predecessor left and
 *              allocating 100 blocks of 16 B-1 KiB for its successor; the walk passes every
 *              50 threads, and at the end, after every block is freed and malloc_trim(0),
 *              bytes_in_use is within 64 KiB of where it started.
 * Larder only: under another allocator the program says so and skips (77). */
#include <malloc.h>
#include <pthread.h>

#include "alloc_util.h"

#define SIZE 96
#define BLOCKS 200

static alloc_api_t api;

static void *free_all(void *arg) {
  (void)arg;
  static void *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    alloc_fill(blocks[i], SIZE);
  }
  for (int i = 0; i < BLOCKS; i++) {
    REQUIRE(alloc_check(blocks[i], SIZE) == (size_t)-1);
    free(blocks[i]);
  }
  return NULL;
}

static larder_stats_t reused_before, reused_after;
static void *allocate_few(void *arg) {
  void **out = arg;
  reused_before = alloc_stats(&api);
  for (int i = 0; i < 8; i++) {
    out[i] = malloc(SIZE);
    REQUIRE(out[i] != NULL);
    alloc_fill(out[i], SIZE);
  }
  reused_after = alloc_stats(&api);
  return NULL;
}

static void *nothing(void *arg) { return arg; }

static void run_one(void *(*fn)(void *), void *arg) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fn, arg) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
}

/* ---- churn: chains of threads, each freeing its predecessor's blocks ---- */
#define CHAINS 4
#define GENERATIONS 100
#define CHAIN_BLOCKS 100
typedef struct chain_s {
  void *blocks[CHAIN_BLOCKS];
  size_t sizes[CHAIN_BLOCKS];
  uint64_t rng;
} chain_t;
static chain_t chains[CHAINS];
static long corrupt;

static void *generation(void *arg) {
  chain_t *ch = arg;
  for (int i = 0; i < CHAIN_BLOCKS; i++) {
    if (ch->blocks[i]) {
      if (alloc_check(ch->blocks[i], ch->sizes[i]) != (size_t)-1) __atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
      free(ch->blocks[i]);
    }
    ch->sizes[i] = 16 + alloc_rng(&ch->rng) % 1009;
    ch->blocks[i] = malloc(ch->sizes[i]);
    REQUIRE(ch->blocks[i] != NULL);
    alloc_fill(ch->blocks[i], ch->sizes[i]);
  }
  return NULL;
}

int main(void) {
  api = alloc_api();
  if (!api.stats_get || !api.validate || !api.class_stats_get) {
    printf("parked_bins: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  /* kept (after a first thread: pthread_create's own allocations in this thread come first) */
  run_one(nothing, NULL);
  larder_stats_t before = alloc_stats(&api);
  run_one(free_all, NULL);
  larder_stats_t after = alloc_stats(&api);
  printf("parked_bins: kept: cached %zu -> %zu bytes, in use %zu -> %zu\n", before.bytes_cached, after.bytes_cached,
         before.bytes_in_use, after.bytes_in_use);
  CHECK(after.bytes_cached == before.bytes_cached);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(api.validate() == 0);

  /* reused */
  void *few[8];
  run_one(allocate_few, few);
  printf("parked_bins: reused: parked heaps taken +%zu, refills +%zu for 8 mallocs\n",
         reused_after.parked_heaps_taken - reused_before.parked_heaps_taken, reused_after.refills - reused_before.refills);
  CHECK(reused_after.parked_heaps_taken == reused_before.parked_heaps_taken + 1);
  CHECK(reused_after.refills == reused_before.refills);
  for (int i = 0; i < 8; i++) {
    CHECK(alloc_check(few[i], SIZE) == (size_t)-1);
    free(few[i]);
  }
  CHECK(api.validate() == 0);

  /* returned */
  run_one(free_all, NULL);
  CHECK(api.validate() == 0);
  malloc_trim(0);
  CHECK(api.validate() == 0);
  larder_class_stats_t classes[128];
  size_t n = api.class_stats_get(classes, 128), superblocks = 0;
  for (size_t i = 0; i < n && i < 128; i++)
    if (classes[i].block_size == SIZE) superblocks = classes[i].superblocks;
  printf("parked_bins: returned: after malloc_trim(0), %zu superblocks of %d B in the heaps\n", superblocks, SIZE);
  CHECK(superblocks == 0);

  /* churn */
  larder_stats_t start = alloc_stats(&api);
  for (int c = 0; c < CHAINS; c++) chains[c].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(c + 1);
  for (int g = 0; g < GENERATIONS; g++) {
    pthread_t t[CHAINS];
    for (int c = 0; c < CHAINS; c++) REQUIRE(pthread_create(&t[c], NULL, generation, &chains[c]) == 0);
    for (int c = 0; c < CHAINS; c++) REQUIRE(pthread_join(t[c], NULL) == 0);
    if (g % (50 / CHAINS) == 0) CHECK(api.validate() == 0);
  }
  for (int c = 0; c < CHAINS; c++)
    for (int i = 0; i < CHAIN_BLOCKS; i++) {
      if (alloc_check(chains[c].blocks[i], chains[c].sizes[i]) != (size_t)-1) corrupt++;
      free(chains[c].blocks[i]);
    }
  malloc_trim(0);
  larder_stats_t end = alloc_stats(&api);
  printf("parked_bins: churn: %d threads, in use %zu -> %zu bytes, %zu parked heaps taken, %zu blocks corrupted\n",
         CHAINS * GENERATIONS, start.bytes_in_use, end.bytes_in_use, end.parked_heaps_taken - start.parked_heaps_taken,
         (size_t)corrupt);
  CHECK(corrupt == 0);
  CHECK(end.bytes_in_use <= start.bytes_in_use + 65536 && start.bytes_in_use <= end.bytes_in_use + 65536);
  CHECK(api.validate() == 0);
  return check_done();
}
