/* malloc in thread-exit destructors (DESIGN §1: works "in thread destructors"). An allocator
 * that tears down a thread's heap in its own pthread key destructor must still serve the
 * destructors that run after it, in any order, including further rounds of destructors
 * (a destructor that sets a key again is called again, up to PTHREAD_DESTRUCTOR_ITERATIONS).
 *
 * Each of 200 threads (in waves of 20) sets three keys:
 *   k_free   - its value was malloc'd by the thread; the destructor checks and frees it, then
 *              mallocs, fills and frees a few more blocks;
 *   k_again  - the destructor reallocates its value, and for the first rounds stores a new
 *              block in the key again, so it runs again in the next round;
 *   k_export - the destructor mallocs a block and hands it to the main thread, which checks
 *              and frees it after the thread is gone.
 * A fourth key is created only after the threads' first allocation, so its destructor comes
 * after any key the allocator made at its own start.
 *
 * Then 2000 more threads (in waves of 20) each set a key whose destructor sets it again every
 * time, so it runs in every one of the PTHREAD_DESTRUCTOR_ITERATIONS rounds, the last
 * included, and mallocs and frees each time. An allocator that gives a thread's memory back
 * from its own key destructor, and makes the thread a new heap when a later destructor
 * allocates, must not lose that heap when no round is left to give it back: RSS growth over
 * the 2000 threads must stay under 16 MiB (each thread touches ~50 KiB; one stranded 64 KiB
 * superblock per thread would be 125 MiB of address space and at least 8 MiB resident).
 *
 * Then hand-offs: two spawners start 400 threads each, 4 at a time. Each thread frees 32
 * blocks other threads made and leaves a key whose destructor, in every round, allocates 64
 * blocks and hands them to a shared stack, so that the last round's blocks live in a heap made
 * after the exit hook (an orphan, which a later thread start takes as it stands: larder's
 * orphan_heaps_taken) while a freer thread and the next threads free them from other threads,
 * during and after the takes. Every block's pattern is checked before its free, and the
 * validation walk passes at the end. */
#include <pthread.h>
#include <sched.h>

#include "alloc_util.h"

#define THREADS 200
#define WAVE 20

static pthread_key_t k_free, k_again, k_export, k_late;
static atomic_long bad, dtor_calls;
static void *exported[THREADS];
static size_t exported_size[THREADS];
static _Thread_local int my_id;

typedef struct again_s { int round; size_t size; } again_t;

static void dtor_free(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  if (alloc_check(v, 300) != (size_t)-1) atomic_fetch_add(&bad, 1);
  free(v);
  for (int i = 0; i < 8; i++) {
    size_t n = (size_t)(16 << (i % 6));
    void *p = malloc(n);
    if (!p) { atomic_fetch_add(&bad, 1); continue; }
    alloc_fill(p, n);
    if (alloc_check(p, n) != (size_t)-1) atomic_fetch_add(&bad, 1);
    free(p);
  }
}

static void dtor_again(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  again_t *a = v;
  int round = a->round;
  again_t *b = realloc(a, sizeof *a + 1000 * (size_t)(round + 1));
  if (!b) { atomic_fetch_add(&bad, 1); return; }
  if (b->round != round) atomic_fetch_add(&bad, 1);
  if (round < 2) {
    b->round = round + 1;
    pthread_setspecific(k_again, b);  /* runs this destructor again in the next round */
  } else {
    free(b);
  }
}

static void dtor_export(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  int id = (int)(intptr_t)v - 1;
  size_t n = 100 + (size_t)id * 13;
  void *p = malloc(n);
  if (!p) { atomic_fetch_add(&bad, 1); return; }
  alloc_fill(p, n);
  exported[id] = p;
  exported_size[id] = n;
}

static void dtor_late(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  void *p = malloc(4000);
  if (!p) { atomic_fetch_add(&bad, 1); }
  free(p);
  free(v);
}

static pthread_key_t k_every;
static atomic_long every_calls;

static void dtor_every(void *v) {
  atomic_fetch_add(&every_calls, 1);
  /* 48 KiB in 100 small blocks: enough to need superblocks of several classes */
  void *p[100];
  for (int i = 0; i < 100; i++) {
    p[i] = malloc(16 + (size_t)i * 8);
    if (!p[i]) { atomic_fetch_add(&bad, 1); continue; }
    memset(p[i], 0x3C, 16 + (size_t)i * 8);
  }
  for (int i = 0; i < 100; i++) free(p[i]);
  pthread_setspecific(k_every, v);  /* again: this destructor runs in every round */
}

static void *body_every(void *arg) {
  void *p = malloc(10);
  free(p);
  pthread_setspecific(k_every, arg);
  return NULL;
}

static pthread_once_t late_once = PTHREAD_ONCE_INIT;
static void make_late_key(void) { pthread_key_create(&k_late, dtor_late); }

static void *body(void *arg) {
  my_id = (int)(intptr_t)arg;
  void *v = malloc(300);
  if (!v) { atomic_fetch_add(&bad, 1); return NULL; }
  alloc_fill(v, 300);
  pthread_setspecific(k_free, v);
  again_t *a = malloc(sizeof *a);
  if (!a) { atomic_fetch_add(&bad, 1); return NULL; }
  a->round = 0;
  pthread_setspecific(k_again, a);
  pthread_setspecific(k_export, (void *)(intptr_t)(my_id + 1));
  pthread_once(&late_once, make_late_key);
  pthread_setspecific(k_late, malloc(50));
  return NULL;
}

/* ---- phase 3: hand-offs ---- */
#define HAND_SPAWNERS 2
#define HAND_THREADS 400 /* per spawner */
#define HAND_WAVE 4
#define HAND_BLOCKS 64
#define HAND_CAP 4096
static pthread_key_t k_hand;
static pthread_mutex_t hand_lock = PTHREAD_MUTEX_INITIALIZER;
static void *hand_stack[HAND_CAP];
static size_t hand_size[HAND_CAP], hand_n;
static atomic_int hand_stop;
static atomic_long hand_freed;

static void hand_push(void *p, size_t n) {
  pthread_mutex_lock(&hand_lock);
  int kept = hand_n < HAND_CAP;
  if (kept) hand_stack[hand_n] = p, hand_size[hand_n++] = n;
  pthread_mutex_unlock(&hand_lock);
  if (!kept) free(p);
}

static int hand_pop_free(void) {
  pthread_mutex_lock(&hand_lock);
  void *p = NULL;
  size_t n = 0;
  if (hand_n) p = hand_stack[--hand_n], n = hand_size[hand_n];
  pthread_mutex_unlock(&hand_lock);
  if (!p) return 0;
  if (alloc_check(p, n) != (size_t)-1) atomic_fetch_add(&bad, 1);
  free(p);
  atomic_fetch_add(&hand_freed, 1);
  return 1;
}

static void dtor_hand(void *v) {
  free(v);
  for (int i = 0; i < HAND_BLOCKS; i++) {
    size_t n = 16 + (size_t)((i * 37) % 1000);
    void *p = malloc(n);
    if (!p) { atomic_fetch_add(&bad, 1); continue; }
    alloc_fill(p, n);
    hand_push(p, n);
  }
  pthread_setspecific(k_hand, malloc(24)); /* again: every round, the last included */
}

static void *body_hand(void *arg) {
  for (int i = 0; i < 32; i++) hand_pop_free();
  pthread_setspecific(k_hand, malloc(24));
  return arg;
}

static void *hand_spawner(void *arg) {
  pthread_t t[HAND_WAVE];
  for (int w = 0; w < HAND_THREADS; w += HAND_WAVE) {
    for (int i = 0; i < HAND_WAVE; i++) REQUIRE(pthread_create(&t[i], NULL, body_hand, NULL) == 0);
    for (int i = 0; i < HAND_WAVE; i++) pthread_join(t[i], NULL);
  }
  return arg;
}

static void *hand_freer(void *arg) {
  while (!atomic_load(&hand_stop))
    if (!hand_pop_free()) sched_yield();
  return arg;
}

static void check_hand_offs(void) {
  alloc_api_t api = alloc_api();
  larder_stats_t before = api.stats_get ? alloc_stats(&api) : (larder_stats_t){0};
  REQUIRE(pthread_key_create(&k_hand, dtor_hand) == 0);
  pthread_t spawners[HAND_SPAWNERS], freer;
  REQUIRE(pthread_create(&freer, NULL, hand_freer, NULL) == 0);
  for (int i = 0; i < HAND_SPAWNERS; i++) REQUIRE(pthread_create(&spawners[i], NULL, hand_spawner, NULL) == 0);
  for (int i = 0; i < HAND_SPAWNERS; i++) pthread_join(spawners[i], NULL);
  atomic_store(&hand_stop, 1);
  pthread_join(freer, NULL);
  while (hand_pop_free()) {
  }
  size_t taken = 0;
  if (api.stats_get) {
    larder_stats_t after = alloc_stats(&api);
    taken = after.orphan_heaps_taken - before.orphan_heaps_taken;
  }
  printf("tls_dtor: hand-offs: %d threads whose destructors hand blocks to others, %ld blocks freed by "
         "other threads, %zu orphan heaps taken, %ld bad\n",
         HAND_SPAWNERS * HAND_THREADS, atomic_load(&hand_freed), taken, atomic_load(&bad));
  CHECK(atomic_load(&bad) == 0);
  CHECK(atomic_load(&hand_freed) > 0);
  if (api.stats_get) CHECK_MSG(taken > 0, "no orphan heap taken by %d new threads", HAND_SPAWNERS * HAND_THREADS);
}

int main(void) {
  REQUIRE(pthread_key_create(&k_free, dtor_free) == 0);
  REQUIRE(pthread_key_create(&k_again, dtor_again) == 0);
  REQUIRE(pthread_key_create(&k_export, dtor_export) == 0);
  pthread_t t[WAVE];
  for (int w = 0; w < THREADS; w += WAVE) {
    for (int i = 0; i < WAVE; i++)
      REQUIRE(pthread_create(&t[i], NULL, body, (void *)(intptr_t)(w + i)) == 0);
    for (int i = 0; i < WAVE; i++) pthread_join(t[i], NULL);
  }
  int missing = 0;
  for (int i = 0; i < THREADS; i++) {
    if (!exported[i]) { missing++; continue; }
    if (alloc_check(exported[i], exported_size[i]) != (size_t)-1) atomic_fetch_add(&bad, 1);
    free(exported[i]);
  }
  /* per thread: k_free once, k_again three rounds, k_export once, k_late once */
  long want = THREADS * 6L;
  printf("tls_dtor: %d threads, %ld destructor calls (want %ld), %ld bad, %d exports missing\n",
         THREADS, atomic_load(&dtor_calls), want, atomic_load(&bad), missing);
  CHECK(atomic_load(&bad) == 0);
  CHECK(missing == 0);
  CHECK(atomic_load(&dtor_calls) == want);
  /* phase 2: destructors that allocate in the last round */
  REQUIRE(pthread_key_create(&k_every, dtor_every) == 0);
  size_t rss0 = alloc_rss_bytes();
  for (int w = 0; w < 2000; w += WAVE) {
    for (int i = 0; i < WAVE; i++)
      REQUIRE(pthread_create(&t[i], NULL, body_every, (void *)(intptr_t)(w + i + 1)) == 0);
    for (int i = 0; i < WAVE; i++) pthread_join(t[i], NULL);
  }
  size_t rss1 = alloc_rss_bytes();
  size_t growth = rss1 > rss0 ? rss1 - rss0 : 0;
  printf("tls_dtor: 2000 threads allocating in every destructor round (%ld calls, %.1f per "
         "thread): RSS %.1f -> %.1f MiB (growth %.1f MiB, bound 16 MiB)\n",
         atomic_load(&every_calls), (double)atomic_load(&every_calls) / 2000.0, ALLOC_MIB(rss0),
         ALLOC_MIB(rss1), ALLOC_MIB(growth));
  CHECK(atomic_load(&bad) == 0);
  CHECK_MSG(growth <= ((size_t)16 << 20), "RSS grew %.1f MiB over 2000 threads", ALLOC_MIB(growth));

  check_hand_offs();

  alloc_api_t api = alloc_api();
  if (api.validate) {
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  return check_done();
}
