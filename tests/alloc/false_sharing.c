/* Allocator-induced false sharing (Hoard §2.1 and §3.3, seed 004; DESIGN §1 "False sharing":
 * a superblock belongs to one heap at a time, and freed blocks go back to their owner
 * superblock).
 *   active  - 8 threads allocate 2000 small blocks each (8..64 B) at the same time, all alive
 *             until all are done: no 64-byte cache line may hold blocks of two threads;
 *   passive - thread A allocates 2000 blocks and keeps every other one, thread B frees the rest
 *             and then allocates 2000 blocks of the same sizes: none of B's blocks may share a
 *             cache line with a block A still holds (B must not reuse A's freed pieces).
 *   shared  - larder_malloc_shared blocks from several threads never share a line with any
 *             other block.
 * glibc's per-thread cache hands the freed pieces to the freeing thread, so the passive case
 * fails there by design; the test asserts all three only for larder and reports glibc's
 * figures. */
#include <pthread.h>
#include <sched.h>

#include "alloc_util.h"

#define NT 8
#define PER 2000
#define LINE 64

typedef struct rec_s { uintptr_t line; int owner; } rec_t;

static void *blk[NT][PER];
static atomic_int go, finished;

static size_t size_of(int t, int i) { return 8 + (size_t)((t * 7 + i * 3) % 57); }

static void *active_thread(void *arg) {
  int t = (int)(intptr_t)arg;
  while (!atomic_load(&go)) sched_yield();
  for (int i = 0; i < PER; i++) blk[t][i] = malloc(size_of(t, i));
  /* stay alive until all have allocated: an exited thread's partly used superblocks rightly
   * go to the next thread, which is not false sharing between running threads */
  atomic_fetch_add(&finished, 1);
  while (atomic_load(&finished) < NT) sched_yield();
  return NULL;
}

static int cmp_rec(const void *a, const void *b) {
  const rec_t *x = a, *y = b;
  return x->line < y->line ? -1 : x->line > y->line;
}

/* Counts the cache lines touched by blocks of more than one owner. */
static long shared_lines(rec_t *r, size_t n) {
  qsort(r, n, sizeof *r, cmp_rec);
  long shared = 0;
  for (size_t i = 1; i < n; i++)
    if (r[i].line == r[i - 1].line && r[i].owner != r[i - 1].owner) {
      shared++;
      while (i + 1 < n && r[i + 1].line == r[i].line) i++;
    }
  return shared;
}

/* Adds a record for every line [p, p+size) touches. */
static size_t add_lines(rec_t *r, size_t n, const void *p, size_t size, int owner) {
  for (uintptr_t l = (uintptr_t)p / LINE; l <= ((uintptr_t)p + size - 1) / LINE; l++) {
    r[n].line = l;
    r[n].owner = owner;
    n++;
  }
  return n;
}

/* ---- passive ---- */
static void *a_keep[PER], *a_give[PER];
static void *b_new[PER];

static void *thread_b(void *arg) {
  (void)arg;
  for (int i = 0; i < PER / 2; i++) free(a_give[i]);
  for (int i = 0; i < PER; i++) b_new[i] = malloc(size_of(1, i));
  return NULL;
}

static void *thread_a(void *arg) {
  (void)arg;
  for (int i = 0; i < PER; i++) {
    void *p = malloc(size_of(1, i));
    if (i & 1) a_give[i / 2] = p; else a_keep[i / 2] = p;
  }
  pthread_t b;
  if (pthread_create(&b, NULL, thread_b, NULL) != 0) return (void *)1;
  pthread_join(b, NULL);
  return NULL;
}

/* ---- shared ---- */
static void *shared_blk[4][200];
static void *plain_blk[4][200];
typedef void *(*shared_fn)(size_t);
static shared_fn get_shared(void) {
#if defined(LARDER_TEST_PRELOADED) || defined(LARDER_TEST_GLIBC)
  shared_fn f;
  *(void **)&f = dlsym(RTLD_DEFAULT, "larder_malloc_shared");
  return f;
#else
  return larder_malloc_shared;
#endif
}
static void *shared_thread(void *arg) {
  int t = (int)(intptr_t)arg;
  shared_fn f = get_shared();
  for (int i = 0; i < 200; i++) {
    shared_blk[t][i] = f(8 + (size_t)(i % 100));
    plain_blk[t][i] = malloc(8 + (size_t)(i % 50));
  }
  return NULL;
}

int main(void) {
  int larder = alloc_is_larder();
  size_t cap = (size_t)NT * PER * 4;
  rec_t *r = malloc(cap * sizeof *r);
  REQUIRE(r != NULL);

  /* active */
  pthread_t t[NT];
  for (int i = 0; i < NT; i++) REQUIRE(pthread_create(&t[i], NULL, active_thread, (void *)(intptr_t)i) == 0);
  atomic_store(&go, 1);
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  size_t n = 0;
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < PER; j++) {
      REQUIRE(blk[i][j] != NULL);
      n = add_lines(r, n, blk[i][j], size_of(i, j), i);
    }
  long active = shared_lines(r, n);
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < PER; j++) free(blk[i][j]);

  /* passive */
  pthread_t a;
  REQUIRE(pthread_create(&a, NULL, thread_a, NULL) == 0);
  void *ra;
  pthread_join(a, &ra);
  REQUIRE(ra == NULL);
  n = 0;
  for (int i = 0; i < PER / 2; i++) n = add_lines(r, n, a_keep[i], size_of(1, 2 * i), 0);
  for (int i = 0; i < PER; i++) n = add_lines(r, n, b_new[i], size_of(1, i), 1);
  long passive = shared_lines(r, n);
  for (int i = 0; i < PER / 2; i++) free(a_keep[i]);
  for (int i = 0; i < PER; i++) free(b_new[i]);

  /* shared */
  long shared = -1;
  if (get_shared()) {
    for (int i = 0; i < 4; i++) REQUIRE(pthread_create(&t[i], NULL, shared_thread, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    n = 0;
    int owner = 0;
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 200; j++) {
        REQUIRE(shared_blk[i][j] && plain_blk[i][j]);
        /* every block its own owner: any line holding two blocks counts */
        n = add_lines(r, n, shared_blk[i][j], 8 + (size_t)(j % 100), owner++);
      }
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 200; j++) n = add_lines(r, n, plain_blk[i][j], 8 + (size_t)(j % 50), -1 - i);
    /* lines shared only among plain blocks of one thread are fine: count lines that hold a
     * shared block and anything else */
    qsort(r, n, sizeof *r, cmp_rec);
    shared = 0;
    for (size_t i = 1; i < n; i++)
      if (r[i].line == r[i - 1].line && (r[i].owner >= 0 || r[i - 1].owner >= 0) && r[i].owner != r[i - 1].owner)
        shared++;
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 200; j++) { free(shared_blk[i][j]); free(plain_blk[i][j]); }
  }

  printf("false_sharing (%s): active: %ld cache lines shared between threads; passive: %ld lines "
         "of thread B's new blocks shared with A's live ones; larder_malloc_shared: %ld lines shared%s\n",
         larder ? "larder" : "glibc", active, passive, shared, shared < 0 ? " (not available)" : "");
  free(r);
  if (!larder) return ALLOC_SKIP;
  CHECK_MSG(active == 0, "active false sharing: %ld lines", active);
  CHECK_MSG(passive == 0, "passive false sharing: %ld lines", passive);
  CHECK_MSG(shared == 0, "larder_malloc_shared blocks share %ld lines", shared);
  return check_done();
}
