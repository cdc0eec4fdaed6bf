/* An option changed at run time (larder_option_set) is applied to every heap by the setter's
 * own call, not by the threads' next refills or flushes (src/maintain.c, larder_option_set;
 * src/heap.c, ld_heaps_options_apply). Hoard's f moves the boundaries of the fullness groups
 * that a heap's superblocks are filed in (seed 004 §3.1), so the heap files every superblock
 * again: work that grows with the superblocks it holds. Until 2026-11-28 each heap's next slow
 * path did it, on a malloc or free path. Built against liblarder.a with the internal header,
 * to read each heap's options epoch.
 *
 *   applied      8 threads hold 2 MiB of 64-byte blocks each (32 superblocks or more) and wait,
 *                live; main sets empty_fraction to 0.5 and then k to 8: when each call returns,
 *                every heap, the waiting threads' included, is filed under the new options
 *                (its epoch is the process's);
 *   still sound  the threads then free every block (a third of them by a neighbour) and the
 *                validation walk, which checks Hoard's invariant with the new f and K, passes;
 *                set back to the defaults, it passes again;
 *   given back   under f = 0.9, 8 threads each make 32 superblocks of blocks, free 40% of each
 *                superblock's and exit, their heaps parked with up to f/2 of their bytes free;
 *                main sets f back to 0.25: when the call returns, the validation walk finds
 *                every parked heap within the invariant again (each gave superblocks back, as
 *                a flush would; before 2026-11-28 a heap kept them until its next flush, which
 *                a parked heap never makes: 3 of 8 outside here, and one in a soak that changed
 *                options under load, bench/soak.c --options-every). */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

#define THREADS 8
#define BLOCKS 32768
#define SIZE 64

static pthread_barrier_t filled, changed;
static void **blocks[THREADS];
static atomic_long corrupt;

static void *worker(void *arg) {
  int id = (int)(uintptr_t)arg;
  blocks[id] = malloc(BLOCKS * sizeof(void *));
  REQUIRE(blocks[id]);
  for (int i = 0; i < BLOCKS; i++) {
    blocks[id][i] = malloc(SIZE);
    REQUIRE(blocks[id][i]);
    alloc_fill(blocks[id][i], SIZE);
  }
  pthread_barrier_wait(&filled);
  pthread_barrier_wait(&changed);
  /* every third block of the next thread's, the rest of its own */
  int next = (id + 1) % THREADS;
  for (int i = 0; i < BLOCKS; i++) {
    void **p = i % 3 == 0 ? &blocks[next][i] : &blocks[id][i];
    void *b = __atomic_exchange_n(p, NULL, __ATOMIC_ACQ_REL);
    if (!b) continue;
    if (alloc_check(b, SIZE) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
    free(b);
  }
  pthread_barrier_wait(&filled);
  for (int i = 0; i < BLOCKS; i++) { /* what the neighbour had not reached yet */
    void *b = __atomic_exchange_n(&blocks[id][i], NULL, __ATOMIC_ACQ_REL);
    if (b) free(b);
  }
  return NULL;
}

/* Heaps whose groups and thresholds are not yet the current options'. */
static int heaps_behind(size_t *heaps_seen) {
  unsigned epoch = atomic_load(&ld_options_epoch);
  int behind = 0;
  *heaps_seen = 0;
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap) {
    ++*heaps_seen;
    if (__atomic_load_n(&h->options_epoch, __ATOMIC_RELAXED) != epoch) behind++;
  }
  return behind;
}

static void set_and_check(const char *name, const char *value) {
  CHECK(larder_option_set(name, value) == 0);
  size_t seen;
  int behind = heaps_behind(&seen);
  printf("options_run_time: %s = %s: %d of %zu heaps not yet filed under it when the call returned\n", name, value,
         behind, seen);
  CHECK_MSG(behind == 0, "%d heaps left for their threads' next refill or flush to file again after %s = %s", behind,
            name, value);
}

/* The blocks each holder keeps, freed by main after the holder has exited. */
static void **kept[THREADS];

static void *holder(void *arg) {
  int id = (int)(uintptr_t)arg;
  void **mine = kept[id] = malloc(BLOCKS * sizeof(void *));
  REQUIRE(mine);
  for (int i = 0; i < BLOCKS; i++) {
    REQUIRE((mine[i] = malloc(SIZE)) != NULL);
    alloc_fill(mine[i], SIZE);
  }
  for (int i = 0; i < BLOCKS; i++) /* 40% of every superblock's blocks */
    if (i % 5 < 2) {
      free(mine[i]);
      mine[i] = NULL;
    }
  return NULL; /* the heap is parked with the rest in use */
}

static void given_back(void) {
  pthread_t t[THREADS];
  REQUIRE(larder_option_set("empty_fraction", "0.9") == 0);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, holder, (void *)(uintptr_t)i) == 0);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  CHECK(larder_validate() == 0);
  set_and_check("empty_fraction", "0.25");
  int violations = larder_validate();
  printf("options_run_time: f = 0.9 -> 0.25 with 8 parked heaps of 40%%-free superblocks: %d violation(s)\n", violations);
  CHECK_MSG(violations == 0, "heaps outside Hoard's invariant after the call returned");
  for (int t = 0; t < THREADS; t++) {
    for (int i = 0; i < BLOCKS; i++)
      if (kept[t][i]) {
        if (alloc_check(kept[t][i], SIZE) != (size_t)-1) atomic_fetch_add(&corrupt, 1);
        free(kept[t][i]);
      }
    free(kept[t]);
  }
  CHECK(larder_validate() == 0);
}

int main(void) {
  pthread_t t[THREADS];
  REQUIRE(pthread_barrier_init(&filled, NULL, THREADS + 1) == 0);
  REQUIRE(pthread_barrier_init(&changed, NULL, THREADS + 1) == 0);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  pthread_barrier_wait(&filled);
  set_and_check("empty_fraction", "0.5");
  set_and_check("k", "8");
  pthread_barrier_wait(&changed);
  pthread_barrier_wait(&filled);
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  CHECK(larder_validate() == 0);
  set_and_check("empty_fraction", "0.25");
  set_and_check("k", "4");
  CHECK(larder_validate() == 0);
  for (int i = 0; i < THREADS; i++) free(blocks[i]);
  given_back();
  CHECK_MSG(atomic_load(&corrupt) == 0, "%ld blocks lost their pattern", atomic_load(&corrupt));
  return check_done();
}
