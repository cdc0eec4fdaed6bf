/* A refill looks at a bounded number of messages and pending superblocks (heap.c,
 * heap_process_pending_some). Threads that free blocks of another thread's superblocks send
 * each batch to the owner's inbox (and, when it is full and its lock busy, announce the
 * superblock on the owner's pending list: tests/alloc/inbox_unit.c makes that happen); the
 * owner's next refill used to walk the whole pending list, one cold header per superblock: a
 * loop over heap structures on an allocation path, bounded by nothing but the heap's size. Now
 * a fill takes at most 64 messages and looks at at most 64 pending superblocks, and leaves the
 * rest for the next fill, flush or purge.
 *
 *   long inbox         main allocates 360 superblocks' worth of 1 KiB blocks; nine threads each
 *                      free one block of 40 of them and exit (360 batches, else the case tests
 *                      nothing; side by side, 40 batches each, under the 64 after which a freer
 *                      helps an owner that has not looked). 256 fill main's inbox; a freer
 *                      whose batch finds it full reads 64 for main (a trylock, counted in
 *                      free_lock_acquisitions) and sends it there. main's next refill (its first
 *                      malloc of 48 bytes) takes 64 messages (refill_pending_examined, at most
 *                      128 per refill; read by another thread, since main's own call collects
 *                      them all), and leaves the rest (bytes_remote_pending); with the fill's
 *                      walk unbounded, up to 360 per refill. main's statistics then collect the
 *                      rest: bytes_remote_pending 0, bytes_in_use down by the freed blocks; the
 *                      validation walk passes.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#include <pthread.h>

#define PER_THREAD 40
#define FREERS 9
#define SUPERBLOCKS (FREERS * PER_THREAD)
#define PER_CALL 64 /* heap.c, PENDING_PER_CALL: messages, and as many superblocks */
#define SIZE 1024

static void *picked[SUPERBLOCKS];
static int npicked;
static alloc_api_t api;
static larder_stats_t seen_from_outside;

static pthread_barrier_t all_started, all_freed;

/* The freers run side by side and end together: a thread that ended leaves its heap to the
 * next new thread, and a freer that took it would go on counting its batches to main, and help
 * main after 64 of them. */
static void *free_some(void *arg) {
  int first = (int)(intptr_t)arg;
  pthread_barrier_wait(&all_started);
  for (int i = first; i < first + PER_THREAD; i++) free(picked[i]);
  pthread_barrier_wait(&all_freed);
  return NULL;
}

static void *read_stats(void *arg) {
  (void)arg;
  api.stats_get(&seen_from_outside);
  return NULL;
}

int main(void) {
  api = alloc_api();
  if (!api.stats_get || !api.validate || !api.option_get) {
    printf("pending_bound: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  uintptr_t sbs = (uintptr_t)api.option_get("superblock_size");
  REQUIRE(sbs >= 4096);
  size_t count = sbs / SIZE * (SUPERBLOCKS + 4);
  void **blocks = malloc(count * sizeof *blocks);
  REQUIRE(blocks != NULL);
  static uintptr_t seen[SUPERBLOCKS];
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    memset(blocks[i], 5, SIZE);
    uintptr_t sb = ((uintptr_t)blocks[i] - 1) & ~(sbs - 1);
    int known = 0; /* (a refill may straddle two superblocks: they come back in turns) */
    for (int k = 0; k < npicked && !known; k++) known = seen[k] == sb;
    if (!known && npicked < SUPERBLOCKS) { /* one block of each superblock */
      seen[npicked] = sb;
      picked[npicked++] = blocks[i];
      blocks[i] = NULL;
    }
  }
  REQUIRE(npicked == SUPERBLOCKS);
  larder_stats_t before = alloc_stats(&api);
  pthread_t t[FREERS], t3;
  pthread_barrier_init(&all_started, NULL, FREERS);
  pthread_barrier_init(&all_freed, NULL, FREERS);
  for (int i = 0; i < FREERS; i++) REQUIRE(pthread_create(&t[i], NULL, free_some, (void *)(intptr_t)(i * PER_THREAD)) == 0);
  for (int i = 0; i < FREERS; i++) pthread_join(t[i], NULL);
  void *volatile small = malloc(48); /* a class main never used: a refill */
  REQUIRE(small != NULL);
  REQUIRE(pthread_create(&t3, NULL, read_stats, NULL) == 0);
  pthread_join(t3, NULL);
  larder_stats_t after = alloc_stats(&api);
  size_t announced = after.remote_announcements - before.remote_announcements;
  size_t batches = after.remote_batches - before.remote_batches;
  size_t waiting = seen_from_outside.bytes_remote_pending / SIZE;
  size_t fills = seen_from_outside.refills - before.refills; /* (pthread_create may malloc too) */
  size_t looked = seen_from_outside.refill_pending_examined - before.refill_pending_examined;
  size_t helps = after.free_lock_acquisitions - before.free_lock_acquisitions;
  printf("pending_bound: %d superblocks freed into in %zu batches, %zu announced; main's next %zu fill(s) looked at %zu of them "
         "(%zu locks on the freers' paths, helps among them), %zu left unaccounted; after its statistics %zu bytes; "
         "in use %zu -> %zu\n",
         npicked, batches, announced, fills, looked, helps, waiting, after.bytes_remote_pending, before.bytes_in_use,
         after.bytes_in_use);
  CHECK_MSG(batches >= SUPERBLOCKS, "%zu batches: the case did not happen", batches);
  CHECK(fills >= 1);
  CHECK_MSG(looked <= 2 * PER_CALL * fills, "%zu messages and pending superblocks looked at by %zu fills", looked, fills);
  /* each help read PER_CALL messages at most (a loaded machine: main, blocked in pthread_join
   * for 100 ms, looks idle, and is helped more), so more than PER_CALL waited for the fill */
  if ((size_t)SUPERBLOCKS > (helps + 1) * PER_CALL)
    CHECK_MSG(looked >= PER_CALL, "the fills looked at %zu (%zu helps): the case did not happen", looked, helps);
  CHECK(after.bytes_remote_pending == 0);
  CHECK_MSG(after.bytes_in_use + (size_t)npicked * SIZE <= before.bytes_in_use + 4096, "in use %zu -> %zu",
            before.bytes_in_use, after.bytes_in_use);
  CHECK(api.validate() == 0);
  free(small);
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
  CHECK(api.validate() == 0);
  return check_done();
}
