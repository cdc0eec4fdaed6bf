/* An exited thread's heap is parked (maintain.c, thread_exit; heap.c, ld_heap_park): its empty
 * superblocks go to the global heap, and the heap keeps the rest for the next new thread,
 * which takes it whole; a parked heap that no thread takes within a purge delay gives
 * everything to the global heap, and malloc_trim(0) does so at once.
 *
 *   taken whole      thread A allocates 20,000 blocks and exits; thread B, started next,
 *                    frees them all. B took A's heap, so its frees are its own, not remote,
 *                    and parked_heaps_taken counts it. At most 1% may be remote: A's
 *                    superblocks are full but for each class's last one, which the parked
 *                    heap keeps as that class's current superblock (none are remote here).
 *                    Before parking, A's superblocks all went to the global heap and each of
 *                    B's frees was a remote one; until the current superblocks stayed, a
 *                    class's last one went too when below (1-f/2) full (2,910 frees remote).
 *   validated        larder_validate() checks a parked heap's lists, counts and Hoard's
 *                    invariant (it runs while one is parked).
 *   trim             a parked heap is emptied by malloc_trim(0) at once.
 *   released         with a 50 ms purge delay and no new thread, the purge thread empties a
 *                    parked heap within a few delays (parked_heaps_released counts it); its
 *                    blocks, all still live, are then freed by main, and nothing stays in use.
 * The last two keep every block live: a heap whose blocks are mostly free keeps little when
 * parked (checked by tests/alloc/thread_churn_rss.c).
 * Every block carries a pattern, checked when it is freed. */
#include <malloc.h>
#include <pthread.h>
#include <time.h>

#include "alloc_util.h"

#define BLOCKS 20000

static void *blocks[BLOCKS];
static size_t sizes[BLOCKS];
static alloc_api_t api;
static atomic_long corrupt;

static void check_and_free(size_t i) {
  if (!blocks[i]) return;
  if (alloc_check(blocks[i], sizes[i]) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
  free(blocks[i]);
  blocks[i] = NULL;
}

/* Allocates BLOCKS blocks of 16..512 B and exits with all of them live. */
static void *allocator_thread(void *arg) {
  (void)arg;
  uint64_t s = 17;
  for (size_t i = 0; i < BLOCKS; i++) {
    sizes[i] = 16 + (size_t)(alloc_rng(&s) % 497);
    blocks[i] = malloc(sizes[i]);
    if (!blocks[i]) { atomic_fetch_add(&corrupt, 1); return NULL; }
    alloc_fill(blocks[i], sizes[i]);
  }
  return NULL;
}

static void *freeing_thread(void *arg) {
  (void)arg;
  for (size_t i = 0; i < BLOCKS; i++) check_and_free(i);
  return NULL;
}

static void run(void *(*fn)(void *), void *arg) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fn, arg) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
}

static void check_taken_whole(void) {
  run(allocator_thread, NULL);
  larder_stats_t parked = alloc_stats(&api);
  CHECK_MSG(api.validate() == 0, "larder_validate() failed with a parked heap");
  run(freeing_thread, NULL);
  larder_stats_t after = alloc_stats(&api);
  size_t taken = after.parked_heaps_taken - parked.parked_heaps_taken;
  size_t remote = after.remote_frees - parked.remote_frees;
  printf("parked_heap: taken whole: %zu heap(s) taken, %zu of %d frees remote, in use %zu -> %zu bytes\n", taken,
         remote, BLOCKS, parked.bytes_in_use, after.bytes_in_use);
  CHECK_MSG(taken >= 1, "the new thread did not take the exited thread's heap");
  CHECK_MSG(remote * 100 <= BLOCKS, "%zu frees of the exited thread's blocks were remote: its heap was not taken whole", remote);
  CHECK(after.bytes_in_use + 1000000 <= parked.bytes_in_use);
  CHECK(api.validate() == 0);
}

static void check_trim(void) {
  run(allocator_thread, NULL);
  larder_stats_t parked = alloc_stats(&api);
  malloc_trim(0);
  larder_stats_t after = alloc_stats(&api);
  printf("parked_heap: trim: %zu parked heap(s) emptied\n", after.parked_heaps_released - parked.parked_heaps_released);
  CHECK_MSG(after.parked_heaps_released > parked.parked_heaps_released, "malloc_trim(0) left a parked heap as it was");
  for (size_t i = 0; i < BLOCKS; i++) check_and_free(i);
  CHECK(api.validate() == 0);
}

static void check_released(void) {
  if (api.option_set("purge_delay_ms", "50") != 0 || api.option_set("purge_thread", "1") != 0) {
    CHECK_MSG(0, "could not set purge_delay_ms and purge_thread");
    return;
  }
  alloc_call(200000); /* a slow path: the purge thread starts */
  larder_stats_t start = alloc_stats(&api);
  run(allocator_thread, NULL);
  larder_stats_t parked = alloc_stats(&api), now = parked;
  int waited_ms = 0;
  while (now.parked_heaps_released == start.parked_heaps_released && waited_ms < 2000) {
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL); /* main makes no call: only the purge thread can do it */
    waited_ms += 10;
    now = alloc_stats(&api);
  }
  printf("parked_heap: released after %d ms (delay 50 ms); held %zu -> %zu bytes\n", waited_ms, parked.bytes_held,
         now.bytes_held);
  CHECK_MSG(now.parked_heaps_released > start.parked_heaps_released, "no purge emptied the parked heap in 2 s");
  for (size_t i = 0; i < BLOCKS; i++) check_and_free(i);
  larder_stats_t end = alloc_stats(&api);
  printf("parked_heap: in use %zu bytes at start, %zu at the end\n", start.bytes_in_use, end.bytes_in_use);
  CHECK(end.bytes_in_use <= start.bytes_in_use + 65536);
  CHECK(api.validate() == 0);
  api.option_set("purge_delay_ms", "1000");
  api.option_set("purge_thread", "2");
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("parked_heap: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  check_taken_whole();
  check_trim();
  check_released();
  CHECK_MSG(atomic_load(&corrupt) == 0, "%ld blocks lost their pattern", atomic_load(&corrupt));
  return check_done();
}
