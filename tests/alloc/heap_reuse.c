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
 *                  each, the queue's count checked by the validation walk; the orphans
 *                  left by then are taken (orphan_heaps_taken; the 64 threads' later
 *                  destructor rounds took those of the threads that ended before them).
 *   a large orphan   a thread's last destructor round allocates 16 MiB of 256-byte blocks
 *                  and keeps them; the next thread's start takes that orphan heap as it
 *                  stands (orphan_heaps_taken + 1), moving none of its 256 superblocks
 *                  (until 2026-11-28 it gave them all to the global heap, inside that
 *                  thread's first malloc), then frees every block as its own.
 *   fork           a thread's last destructor round leaves an orphan heap, and the process
 *                  forks before any thread starts: in the child a new thread leaves that orphan
 *                  alone (the parent's threads may have been anywhere in a call at the fork;
 *                  their heaps stay unused in the child), and the validation walk passes; in
 *                  the parent the next thread takes it.
 * Every block carries a pattern, checked before it is freed. */
#include <limits.h>
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
  size_t taken = after.orphan_heaps_taken - before.orphan_heaps_taken;
  printf("heap_reuse: %d threads that allocated after their exit hook, then %d threads: %zu heaps examined, "
         "%zu orphan heaps taken\n",
         ORPHAN_THREADS, AFTER_ORPHANS, examined, taken);
  CHECK_MSG(examined <= 5 * AFTER_ORPHANS, "%zu heaps examined for %d threads: more than 5 each", examined,
            AFTER_ORPHANS);
  /* (threads still in their destructors take the orphans of those gone before them: at least
   * the last one's is left for the 200) */
  CHECK_MSG(taken >= 1, "no orphan heap taken by %d new threads, after %d orphans' threads were gone", AFTER_ORPHANS,
            ORPHAN_THREADS);
  CHECK(api.validate() == 0);
}

#define LARGE_BLOCKS 65536
#define LARGE_SIZE 256
static void **large_blocks;
static pthread_key_t large_key;
static int large_round;

/* Every round sets the key again; the last one (PTHREAD_DESTRUCTOR_ITERATIONS) runs after the
 * exit hook ran in the round before, so its blocks go into a heap made after that hook. */
static void large_again(void *v) {
  free(v);
  if (++large_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(large_key, malloc(32));
    return;
  }
  for (int i = 0; i < LARGE_BLOCKS; i++) {
    large_blocks[i] = malloc(LARGE_SIZE);
    if (large_blocks[i]) alloc_fill(large_blocks[i], LARGE_SIZE);
  }
}

static void *large_orphan_maker(void *arg) {
  pthread_setspecific(large_key, malloc(32));
  return arg;
}

static larder_stats_t start_before, start_after;

static void *large_orphan_taker(void *arg) {
  start_before = alloc_stats(&api); /* no heap yet: this thread's first call is the malloc below */
  void *volatile p = malloc(LARGE_SIZE); /* volatile: a malloc and free of nothing may be left out */
  start_after = alloc_stats(&api);
  free(p);
  for (int i = 0; i < LARGE_BLOCKS; i++) {
    if (!large_blocks[i]) continue;
    if (alloc_check(large_blocks[i], LARGE_SIZE) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
    free(large_blocks[i]);
  }
  return arg;
}

static void check_large_orphan(void) {
  large_blocks = calloc(LARGE_BLOCKS, sizeof *large_blocks);
  REQUIRE(large_blocks);
  REQUIRE(pthread_key_create(&large_key, large_again) == 0); /* after larder's own key */
  run(large_orphan_maker);
  int made = 0;
  for (int i = 0; i < LARGE_BLOCKS; i++) made += large_blocks[i] != NULL;
  CHECK_MSG(made == LARGE_BLOCKS, "%d of %d blocks allocated in the last destructor round", made, LARGE_BLOCKS);
  larder_stats_t before = alloc_stats(&api);
  run(large_orphan_taker);
  larder_stats_t after = alloc_stats(&api);
  size_t taken = start_after.orphan_heaps_taken - start_before.orphan_heaps_taken;
  long to_global = (long)(start_after.superblocks_to_global - start_before.superblocks_to_global);
  long from_global = (long)(start_after.superblocks_from_global - start_before.superblocks_from_global);
  long in_use = (long)after.bytes_in_use - (long)before.bytes_in_use;
  printf("heap_reuse: a thread start after a 16 MiB orphan heap: %zu orphan heaps taken, superblocks to / from the "
         "global heap %ld / %ld; bytes in use %+ld after its blocks were freed\n",
         taken, to_global, from_global, in_use);
  CHECK_MSG(taken == 1, "the thread start took %zu orphan heaps, not the one whose thread was gone", taken);
  CHECK_MSG(to_global == 0 && from_global <= 1, "the thread start moved %ld superblocks to the global heap and %ld from it",
            to_global, from_global);
  CHECK_MSG(in_use < -(long)(LARGE_BLOCKS * LARGE_SIZE) * 9 / 10, "bytes in use fell by %ld, not by the 16 MiB freed",
            -in_use);
  CHECK(api.validate() == 0);
}

static void *one_malloc(void *arg) {
  void *volatile p = malloc(48);
  free(p);
  return arg;
}

static void check_fork_orphan(void) {
  large_round = 0;
  for (int i = 0; i < LARGE_BLOCKS; i++) large_blocks[i] = NULL;
  run(large_orphan_maker); /* an orphan holding 16 MiB, its thread gone */
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    larder_stats_t before = alloc_stats(&api);
    run(one_malloc);
    larder_stats_t after = alloc_stats(&api);
    int v = api.validate();
    _exit(after.orphan_heaps_taken != before.orphan_heaps_taken ? 3 : v != 0 ? 4 : 0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "fork child: status %d (3: a thread took the parent's orphan heap; 4: validation failed)", status);
  larder_stats_t before = alloc_stats(&api);
  run(one_malloc);
  larder_stats_t after = alloc_stats(&api);
  printf("heap_reuse: an orphan heap at a fork: left alone in the child, %zu taken in the parent\n",
         after.orphan_heaps_taken - before.orphan_heaps_taken);
  CHECK(after.orphan_heaps_taken - before.orphan_heaps_taken == 1);
  for (int i = 0; i < LARGE_BLOCKS; i++) {
    if (!large_blocks[i]) continue;
    if (alloc_check(large_blocks[i], LARGE_SIZE) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
    free(large_blocks[i]);
  }
  CHECK(api.validate() == 0);
  free(large_blocks);
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("heap_reuse: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  check_many_heaps();
  check_orphans();
  check_large_orphan();
  check_fork_orphan();
  CHECK_MSG(atomic_load(&corrupt) == 0, "%ld blocks lost their pattern", atomic_load(&corrupt));
  return check_done();
}
