/* The purge's emptying of idle threads' bins (cache.c, ld_cache_drain_idle) when threads
 * pause and resume around purge runs of a short delay.
 *
 * Four threads churn 4,096 slots of 1-512 bytes in bursts of up to 2,000 replacements, each
 * followed by a pause of 0-5 ms with no call (so the purge, at LARDER_PURGE_DELAY_MS=1, finds
 * them idle and empties their bins over and over), for 3 seconds; every block is filled with
 * a pattern of its slot and checked before its free. Main first churns 20,000 blocks each of
 * 520, 648 and 776 bytes (under learned classes it learns three), and with TRIM set calls
 * malloc_trim(0) before the threads start.
 *
 * The race it found (2026-11-30, docs/results.md): a drain could empty a bin that the owner
 * was about to pop. The owner turns its bins back in a slow path (after a drain, or to follow
 * a learned class) while a new drain turns them away; the drain's fence takes microseconds, the
 * owner left its slow path meanwhile, and its stores landed after the drain's, so the drain saw
 * the owner out of its bins with malloc's table pointing into them again. A bin's count went to
 * -1, or a block was handed out twice ("free block written after free", a slot's pattern
 * changed): 2-19 of 60-100 runs, two copies at once on 2 cores. The drain now checks that its
 * turn away still holds (bins_still_turned_away): 0 of 440.
 *
 * usage: alloc_idle_drain_stress [max_size]   (exit 0: no block lost its pattern) */
#include "alloc_util.h"

#include <malloc.h>
#include <pthread.h>

enum { SLOTS = 4096, THREADS = 4 };
static size_t max_size = 512;
static atomic_int corrupt;

static void *worker(void *arg) {
  uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(uintptr_t)arg + 1;
  unsigned char **slot = calloc(SLOTS, sizeof *slot);
  size_t *size = calloc(SLOTS, sizeof *size);
  REQUIRE(slot && size);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    int burst = 1 + (int)(alloc_rng(&s) % 2000);
    for (int i = 0; i < burst; i++) {
      int k = (int)(alloc_rng(&s) % SLOTS);
      if (slot[k]) {
        for (size_t j = 0; j < size[k]; j++)
          if (slot[k][j] != (unsigned char)(k + j)) {
            atomic_fetch_add(&corrupt, 1);
            break;
          }
        free(slot[k]);
      }
      size[k] = 1 + (size_t)(alloc_rng(&s) % max_size);
      slot[k] = malloc(size[k]);
      REQUIRE(slot[k] != NULL);
      for (size_t j = 0; j < size[k]; j++) slot[k][j] = (unsigned char)(k + j);
    }
    struct timespec pause = {0, (long)(alloc_rng(&s) % 5000000)};
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 3000000000L);
  for (int k = 0; k < SLOTS; k++) free(slot[k]);
  free(slot);
  free(size);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) max_size = (size_t)atol(argv[1]);
  REQUIRE(max_size >= 1 && max_size <= 65536);
  static void *blocks[20000];
  const size_t sizes[] = {520, 648, 776};
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < 20000; i++) REQUIRE((blocks[i] = malloc(sizes[r])) != NULL);
    for (int i = 0; i < 20000; i++) free(blocks[i]);
  }
  if (getenv("TRIM")) malloc_trim(0);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  printf("idle_drain_stress: %d blocks lost their pattern\n", atomic_load(&corrupt));
  CHECK(atomic_load(&corrupt) == 0);
  return check_done();
}
