/* The thread-exit hook (maintain.c, a pthread key's destructor) runs for every thread, whatever
 * the program does with its own keys. A program makes 40 keys, more than glibc's first 32,
 * whose values live in the thread's own block (keys from 32 on keep theirs in blocks glibc
 * allocates), then starts 300 threads one after another whose first call is
 * pthread_setspecific on its last key: the thread's first allocation happens inside that call
 * (glibc's second-level block). Each thread then allocates and frees 1,024 blocks of 1 KiB.
 * Every exited thread's heap must be taken by the next thread (parked_heaps_taken, at least
 * 299 less a few the purge may give away between two threads), and the program's own
 * destructor must run for every thread. Until 2026-11-29 larder made its key at the first
 * thread's heap, here the 41st: the second-level block larder's setspecific made from inside
 * the program's was replaced by the program's own, the hook never ran, and every thread's heap
 * was lost (2,000 threads: 633 MB). */
#include <pthread.h>

#include "alloc_util.h"

#define KEYS 40
#define THREADS 300

static pthread_key_t user_key;
static atomic_int destructor_runs;

static void user_destructor(void *value) {
  (void)value;
  atomic_fetch_add(&destructor_runs, 1);
}

static void *worker(void *arg) {
  (void)arg;
  pthread_setspecific(user_key, (void *)1); /* the thread's first allocation is in here */
  void *blocks[1024];
  for (int i = 0; i < 1024; i++) blocks[i] = malloc(1024);
  for (int i = 0; i < 1024; i++) free(blocks[i]);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  pthread_key_t key;
  for (int i = 0; i < KEYS - 1; i++) REQUIRE(pthread_key_create(&key, NULL) == 0);
  REQUIRE(pthread_key_create(&user_key, user_destructor) == 0);
  larder_stats_t before = api.stats_get ? alloc_stats(&api) : (larder_stats_t){0};
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
  }
  CHECK_MSG(atomic_load(&destructor_runs) == THREADS, "the program's destructor ran %d times for %d threads",
            atomic_load(&destructor_runs), THREADS);
  if (!api.stats_get) {
    printf("thread_exit_key: not larder, the heaps not checked\n");
    return check_done();
  }
  larder_stats_t after = alloc_stats(&api);
  size_t taken = after.parked_heaps_taken - before.parked_heaps_taken;
  size_t released = after.parked_heaps_released - before.parked_heaps_released;
  printf("thread_exit_key: user key %u, %d threads: %zu exited threads' heaps taken by the next, %zu given away "
         "by the purge\n",
         (unsigned)user_key, THREADS, taken, released);
  CHECK_MSG(taken + released >= THREADS - 1, "only %zu of %d exited threads' heaps were parked (taken %zu, given "
            "away %zu): the thread-exit hook did not run", taken + released, THREADS - 1, taken, released);
  CHECK(api.validate() == 0);
  return check_done();
}
