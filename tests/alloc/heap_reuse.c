/* A new thread finds its heap in constant work, however many heaps the process has made
 * (heap.c, heap_new_locked): the heaps no thread uses are a stack, and the orphan heaps (made
 * by a thread after its exit hook ran) a queue looked at a few at a time. The first version
 * walked every heap ever made at each thread start, twice: a server that once ran 4,000
 * threads paid for 4,000 heaps at every new connection's thread. heaps_examined counts the
 * heaps looked at; the bound is 5 per thread (ORPHAN_CHECKS_MAX + 1).
 *
 *   many heaps     256 threads live at once, then gone: 256 idle heaps. 1,000 threads then
 *                  start one after another: at most 1 heap examined each (no orphans here;
 *                  the old walk looked at 256 or more), no new heap mapped (each took an
 *                  idle one), and the validation walk, which checks the idle stack against
 *                  the heaps not in use, passes.
 *   orphans        64 threads at once whose key destructor sets itself again in every round
 *                  and allocates, so that the last round makes a heap after the exit hook
 *                  ran; then 200 threads start one after another: at most 5 heaps examined
 *                  each, the queue's count checked by the validation walk.
 * Every block carries a pattern, checked before it is freed. */
#include <pthread.h>

#include "alloc_util.h"

#define MANY 256
#define AFTER 1000
#define ORPHAN_THREADS 64
#define AFTER_ORPHANS 200

static alloc_api_t api;
static atomic_long corrupt;
static pthread_barrier_t all_live;
static pthread_key_t again_key;

static void use_some(int n) {
  for (int i = 0; i < n; i++) {
    size_t size = (size_t)(16 << (i % 7));
    void *p = malloc(size);
    if (!p) { atomic_fetch_add(&corrupt, 1); continue; }
    alloc_fill(p, size);
    if (alloc_check(p, size) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
    free(p);
  }
}

static void *live_together(void *arg) {
  use_some(4);
  pthread_barrier_wait(&all_live);
  return arg;
}

static void *short_lived(void *arg) {
  use_some(4);
  return arg;
}

static void again(void *v) {
  free(v);
  use_some(2);
  void *p = malloc(32); /* set again: this destructor runs in every round, the last included */
  if (p) pthread_setspecific(again_key, p);
}

static void *with_destructor(void *arg) {
  use_some(2);
  pthread_setspecific(again_key, malloc(32));
  pthread_barrier_wait(&all_live); /* all started: they end, and make their orphans, together */
  return arg;
}

static void run(void *(*fn)(void *)) {
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, fn, NULL) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
}

static void check_many_heaps(void) {
  pthread_t t[MANY];
  REQUIRE(pthread_barrier_init(&all_live, NULL, MANY) == 0);
  for (int i = 0; i < MANY; i++) REQUIRE(pthread_create(&t[i], NULL, live_together, NULL) == 0);
  for (int i = 0; i < MANY; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  pthread_barrier_destroy(&all_live);
  larder_stats_t before = alloc_stats(&api);
  for (int i = 0; i < AFTER; i++) run(short_lived);
  larder_stats_t after = alloc_stats(&api);
  size_t examined = after.heaps_examined - before.heaps_examined;
  long mapped = (long)after.bytes_mapped - (long)before.bytes_mapped;
  printf("heap_reuse: %d heaps made, then %d threads: %zu heaps examined, mapped bytes %+ld\n", MANY, AFTER, examined,
         mapped);
  CHECK_MSG(examined >= AFTER, "heaps_examined counted %zu for %d new threads: not counted", examined, AFTER);
  CHECK_MSG(examined <= AFTER, "%zu heaps examined for %d threads with no orphan heap: more than one each", examined,
            AFTER);
  CHECK_MSG(mapped < 16 << 20, "mapped bytes grew by %ld: new threads made heaps instead of taking idle ones", mapped);
  CHECK(api.validate() == 0);
}

static void check_orphans(void) {
  REQUIRE(pthread_key_create(&again_key, again) == 0);
  pthread_t t[ORPHAN_THREADS];
  REQUIRE(pthread_barrier_init(&all_live, NULL, ORPHAN_THREADS) == 0);
  for (int i = 0; i < ORPHAN_THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, with_destructor, NULL) == 0);
  for (int i = 0; i < ORPHAN_THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  pthread_barrier_destroy(&all_live);
  CHECK(api.validate() == 0);
  larder_stats_t before = alloc_stats(&api);
  for (int i = 0; i < AFTER_ORPHANS; i++) run(short_lived);
  larder_stats_t after = alloc_stats(&api);
  size_t examined = after.heaps_examined - before.heaps_examined;
  printf("heap_reuse: %d threads that allocated after their exit hook, then %d threads: %zu heaps examined\n",
         ORPHAN_THREADS, AFTER_ORPHANS, examined);
  CHECK_MSG(examined <= 5 * AFTER_ORPHANS, "%zu heaps examined for %d threads: more than 5 each", examined,
            AFTER_ORPHANS);
  CHECK(api.validate() == 0);
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("heap_reuse: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  check_many_heaps();
  check_orphans();
  CHECK_MSG(atomic_load(&corrupt) == 0, "%ld blocks lost their pattern", atomic_load(&corrupt));
  return check_done();
}
