/* The pool API's plain contracts: create, malloc/free/realloc/memalign results, walk,
 * stats, growth callback, and the locked wrapper under several threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

static void test_simple(void) {
  size_t bytes = 1 << 20;
  void *mem = ptu_buffer(bytes);
  larder_pool_t *p = larder_pool_create(mem, bytes);
  REQUIRE(p);
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats_t st0;
  larder_pool_stats(p, &st0);
  CHECK(st0.used_blocks == 0 && st0.free_blocks == 1 && st0.areas == 1);
  CHECK(st0.used + st0.free + st0.overhead == bytes);

  void *a = larder_pool_malloc(p, 100);
  void *b = larder_pool_malloc(p, 0);
  void *c = larder_pool_malloc(p, 5000);
  REQUIRE(a && b && c);
  CHECK(((uintptr_t)a & 15) == 0 && ((uintptr_t)b & 15) == 0 && ((uintptr_t)c & 15) == 0);
  CHECK(larder_pool_usable_size(p, a) >= 100);
  CHECK(larder_pool_usable_size(p, b) >= 1);
  CHECK(larder_pool_usable_size(p, c) >= 5000);
  CHECK(larder_pool_owns(p, a) && larder_pool_owns(p, c) && !larder_pool_owns(p, &bytes));
  memset(a, 0xa1, 100);
  memset(c, 0xc3, 5000);
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats_t st;
  larder_pool_stats(p, &st);
  CHECK(st.used_blocks == 3);
  CHECK(st.used + st.free + st.overhead == bytes);

  /* realloc keeps the contents while growing in place, by moving, and while shrinking */
  larder_pool_free(p, b);
  a = larder_pool_realloc(p, a, 3000);
  REQUIRE(a);
  int same = 1;
  for (int i = 0; i < 100; i++) same &= ((unsigned char *)a)[i] == 0xa1;
  CHECK(same);
  c = larder_pool_realloc(p, c, 200);
  REQUIRE(c);
  same = 1;
  for (int i = 0; i < 200; i++) same &= ((unsigned char *)c)[i] == 0xc3;
  CHECK(same);
  CHECK(larder_pool_check(p) == 0);
  void *d = larder_pool_realloc(p, NULL, 64);
  CHECK(d != NULL);
  CHECK(larder_pool_realloc(p, d, 0) == NULL);
  larder_pool_free(p, a);
  larder_pool_free(p, c);
  larder_pool_free(p, NULL);
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats(p, &st);
  CHECK(st.used_blocks == 0 && st.free_blocks == 1);
  CHECK(st.free == st0.free);

  /* memalign: every power of two up to 64 KiB */
  void *al[13];
  for (int i = 0; i < 13; i++) {
    size_t align = (size_t)16 << i;
    al[i] = larder_pool_memalign(p, align, 24 + (size_t)i * 40);
    REQUIRE(al[i]);
    CHECK(((uintptr_t)al[i] & (align - 1)) == 0);
    CHECK(larder_pool_usable_size(p, al[i]) >= 24 + (size_t)i * 40);
    CHECK(larder_pool_check(p) == 0);
  }
  for (int i = 0; i < 13; i++) larder_pool_free(p, al[i]);
  CHECK(larder_pool_check(p) == 0);
  errno = 0;
  CHECK(larder_pool_memalign(p, 48, 10) == NULL && errno == EINVAL);
  CHECK(larder_pool_memalign(p, 0, 10) == NULL);
  larder_pool_destroy(p);
  free(mem);
}

/* walk reports every block once, in address order inside an area, tiling the area */
struct walk_acc { size_t used, free, n; uintptr_t last; int ordered; };
static void walker(void *ptr, size_t size, int used, void *user) {
  struct walk_acc *w = user;
  if (w->n && (uintptr_t)ptr < w->last) w->ordered = 0;
  w->last = (uintptr_t)ptr;
  w->n++;
  if (used) w->used += size; else w->free += size;
}

static void test_walk_and_areas(void) {
  size_t bytes = 64 << 10;
  char *mem = ptu_buffer(bytes);
  char *more = ptu_buffer(bytes);
  larder_pool_t *p = larder_pool_create(mem, bytes);
  REQUIRE(p);
  void *ptrs[20];
  for (int i = 0; i < 20; i++) ptrs[i] = larder_pool_malloc(p, 100 + (size_t)i * 10);
  for (int i = 0; i < 20; i += 3) larder_pool_free(p, ptrs[i]);
  struct walk_acc w = {0, 0, 0, 0, 1};
  larder_pool_walk(p, walker, &w);
  larder_pool_stats_t st;
  larder_pool_stats(p, &st);
  CHECK(w.ordered);
  CHECK(w.n == st.used_blocks + st.free_blocks);
  CHECK(w.used == st.used && w.free == st.free);

  /* a request larger than the first area is served from an added one */
  CHECK(larder_pool_malloc(p, 60 << 10) == NULL);
  CHECK(larder_pool_add_area(p, more, bytes) == 0);
  CHECK(larder_pool_add_area(p, more + 4096, 4096) == -1); /* overlaps */
  CHECK(larder_pool_add_area(p, more + bytes + 1, 4096) == -1); /* misaligned */
  CHECK(larder_pool_add_area(p, NULL, 4096) == -1);
  void *big = larder_pool_malloc(p, 60 << 10);
  CHECK(big != NULL && larder_pool_owns(p, big));
  CHECK((char *)big >= more && (char *)big < more + bytes);
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats(p, &st);
  CHECK(st.areas == 2);
  CHECK(st.used + st.free + st.overhead == 2 * bytes);
  free(mem);
  free(more);
}

/* growth callback: called once per failing request with a size that then fits */
struct grower { char *bufs[8]; int calls; size_t asked; };
static int grow_cb(larder_pool_t *p, size_t bytes, void *user) {
  struct grower *g = user;
  g->asked = bytes;
  if (g->calls >= 8) return -1;
  size_t sz = bytes < (256u << 10) ? (256u << 10) : bytes;
  g->bufs[g->calls] = ptu_buffer(sz);
  if (larder_pool_add_area(p, g->bufs[g->calls], sz) != 0) return -1;
  g->calls++;
  return 0;
}

static void test_grow(void) {
  size_t bytes = 16 << 10;
  void *mem = ptu_buffer(bytes);
  larder_pool_t *p = larder_pool_create(mem, bytes);
  REQUIRE(p);
  struct grower g;
  memset(&g, 0, sizeof(g));
  larder_pool_set_grow(p, grow_cb, &g);
  void *x = larder_pool_malloc(p, 100 << 10);
  CHECK(x != NULL && g.calls == 1 && g.asked >= (100u << 10));
  void *y = larder_pool_memalign(p, 4096, 1 << 20);
  CHECK(y != NULL && ((uintptr_t)y & 4095) == 0 && g.calls == 2);
  void *z = larder_pool_malloc(p, 1000);
  CHECK(z != NULL && g.calls == 2); /* fits in what is there */
  CHECK(larder_pool_check(p) == 0);
  g.calls = 8; /* the callback now refuses: malloc reports ENOMEM */
  errno = 0;
  CHECK(larder_pool_malloc(p, 8 << 20) == NULL && errno == ENOMEM);
  CHECK(larder_pool_check(p) == 0);
  for (int i = 0; i < 2; i++) free(g.bufs[i]);
  free(mem);
}

/* the locked wrapper: four threads share one pool */
static larder_pool_locked_t *shared;
static void *worker(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 7919 + 1;
  void *live[64] = {0};
  for (int i = 0; i < 20000; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    int k = (int)(s % 64);
    if (live[k]) {
      if (((unsigned char *)live[k])[0] != (unsigned char)k) return (void *)1;
      larder_pool_locked_free(shared, live[k]);
      live[k] = NULL;
    } else {
      live[k] = (s & 1) ? larder_pool_locked_malloc(shared, 16 + s % 2000)
                        : larder_pool_locked_memalign(shared, 64, 16 + s % 2000);
      if (!live[k]) return (void *)2;
      ((unsigned char *)live[k])[0] = (unsigned char)k;
    }
  }
  for (int k = 0; k < 64; k++) larder_pool_locked_free(shared, live[k]);
  return NULL;
}

static void test_locked(void) {
  size_t bytes = 4 << 20;
  void *mem = ptu_buffer(bytes);
  shared = larder_pool_locked_create(mem, bytes);
  REQUIRE(shared);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    CHECK(r == NULL);
  }
  CHECK(larder_pool_locked_check(shared) == 0);
  larder_pool_stats_t st;
  larder_pool_locked_stats(shared, &st);
  CHECK(st.used_blocks == 0 && st.free_blocks == 1);
  larder_pool_locked_destroy(shared);
  CHECK(larder_pool_locked_create(NULL, bytes) == NULL);
  free(mem);
}

int main(void) {
  test_simple();
  test_walk_and_areas();
  test_grow();
  test_locked();
  return check_done();
}
