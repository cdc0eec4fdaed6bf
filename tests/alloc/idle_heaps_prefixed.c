/* Idle threads' heaps worked on by the purge while other threads call, through the prefixed
 * API alone, so that ThreadSanitizer can run it (see misuse_threads_prefixed.c for why only
 * larder_* is called). It is not in scripts/test-sanitize.sh's TSan set: the purge's work on an
 * idle thread's bins, deferred frees and remote buffer is ordered against the owner's fast
 * paths by membarrier (os.c, ld_os_fence_all_threads: the owner's plain stores to its busy
 * marks, made visible to the purge by the kernel's barrier on every core), which TSan does not
 * model, and it reports each such access as a race. Run under TSan it found one real fault,
 * the flag that publishes a new heap's bins set before them (cache.c, ld_cache_init_bins).
 * What it exercises at once:
 *   - workers that build a heap of 16 B-1 KiB blocks, free all but 1 in 50 (a quarter of the
 *     frees by the next worker: remote), then idle: the purge thread empties their bins, sends
 *     their remote batches, gives their sparse superblocks (the current ones included) to the
 *     global heap and the free pages of those back (heap.c, heap_give_empty_locked; global.c);
 *   - the workers waking: their blocks checked and freed (some into superblocks the global
 *     heap now holds), their next mallocs taking superblocks back and waking dormant ones;
 *   - an observer that calls larder_trim, which cuts the purge thread's runs short
 *     (maintain.c, ld_purge_waiters), and reads the statistics;
 *   - larder_validate at the end, which must find nothing, and every kept block's bytes.
 * A quick stress of the same in the normal builds (registered with the others).
 *
 * usage: alloc_idle_heaps_prefixed [rounds]   (default 4) */
#include <pthread.h>
#include <time.h>

#include "alloc_util.h"

#define WORKERS 3
#define BLOCKS 20000
#define KEEP_ONE_IN 50
#define HANDED 256

static int rounds = 4;
static pthread_barrier_t built, idled;
static atomic_int observer_stop, bad_bytes;
/* each worker frees a quarter of its thinned blocks through the next one's mailbox */
static _Atomic(void *) mailbox[WORKERS][HANDED];

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t seed = 0x5eed + id;
  void **p = larder_malloc(BLOCKS * sizeof *p);
  uint32_t *size = larder_malloc(BLOCKS * sizeof *size);
  REQUIRE(p && size);
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < BLOCKS; i++) {
      size[i] = 16 + (uint32_t)(alloc_rng(&seed) % 1009);
      p[i] = larder_malloc(size[i]);
      REQUIRE(p[i] != NULL);
      alloc_fill(p[i], size[i]);
    }
    unsigned handed = 0;
    for (int i = 0; i < BLOCKS; i++) {
      if (i % KEEP_ONE_IN == 0) continue;
      if (alloc_rng(&seed) % 4 == 0 && handed < HANDED) {
        void *old = atomic_exchange(&mailbox[(id + 1) % WORKERS][handed++], p[i]);
        if (old) larder_free(old);
      } else {
        larder_free(p[i]);
      }
      p[i] = NULL;
    }
    pthread_barrier_wait(&built);
    for (unsigned k = 0; k < HANDED; k++) { /* the previous worker's, freed here: remote */
      void *q = atomic_exchange(&mailbox[id][k], NULL);
      if (q) larder_free(q);
    }
    alloc_sleep_ms(150); /* idle: several purge delays with no call */
    pthread_barrier_wait(&idled);
    for (int i = 0; i < BLOCKS; i += KEEP_ONE_IN) {
      if (alloc_check(p[i], size[i]) != (size_t)-1) atomic_fetch_add(&bad_bytes, 1);
      larder_free(p[i]);
      p[i] = NULL;
    }
  }
  larder_free(p);
  larder_free(size);
  return NULL;
}

static void *observer(void *arg) {
  (void)arg;
  while (!atomic_load(&observer_stop)) {
    larder_trim(0);
    larder_stats_t st;
    larder_stats_get(&st);
    alloc_sleep_ms(15);
  }
  return NULL;
}

int main(int argc, char **argv) {
#if defined(LARDER_TEST_PRELOADED) || defined(LARDER_TEST_GLIBC)
  (void)argc;
  (void)argv;
  printf("idle_heaps_prefixed: skipped, the prefixed API is linked, never preloaded\n");
  return ALLOC_SKIP;
#else
  if (argc > 1) rounds = atoi(argv[1]);
  REQUIRE(rounds > 0);
  REQUIRE(larder_option_set("purge_delay_ms", "20") == 0 && larder_option_set("purge_thread", "1") == 0);
  void *big = larder_malloc(300000); /* a slow path: the purge thread starts */
  larder_free(big);
  pthread_barrier_init(&built, NULL, WORKERS);
  pthread_barrier_init(&idled, NULL, WORKERS);
  pthread_t w[WORKERS], obs;
  REQUIRE(pthread_create(&obs, NULL, observer, NULL) == 0);
  for (unsigned i = 0; i < WORKERS; i++) REQUIRE(pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  for (unsigned i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
  atomic_store(&observer_stop, 1);
  pthread_join(obs, NULL);
  for (unsigned i = 0; i < WORKERS; i++)
    for (unsigned k = 0; k < HANDED; k++) {
      void *q = atomic_exchange(&mailbox[i][k], NULL);
      if (q) larder_free(q);
    }
  larder_stats_t st;
  larder_stats_get(&st);
  printf("idle_heaps_prefixed: %d rounds, %d workers: %zu superblocks to the global heap, %zu purge thread runs (%zu "
         "cut), %.1f MiB dormant at the end, %d kept blocks changed\n",
         rounds, WORKERS, st.superblocks_to_global, st.purge_thread_runs, st.purge_runs_cut,
         st.bytes_dormant / 1048576.0, atomic_load(&bad_bytes));
  CHECK_MSG(atomic_load(&bad_bytes) == 0, "%d kept blocks lost their bytes", atomic_load(&bad_bytes));
  CHECK_MSG(st.purge_thread_runs > 0, "the purge thread never ran");
  CHECK(larder_validate() == 0);
  return check_done();
#endif
}
