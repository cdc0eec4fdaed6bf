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
 * after any key the allocator made at its own start. */
#include <pthread.h>

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
  alloc_api_t api = alloc_api();
  if (api.validate) {
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  return check_done();
}
