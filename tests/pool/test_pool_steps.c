/* Constant time: built with src/pool.c compiled -DLARDER_POOL_COUNT_STEPS, every malloc,
 * memalign, realloc and free counts its basic steps (list operations, bitmap searches,
 * splits, merges). For pools holding 10, 10^3 and 10^5 blocks this drives each operation
 * through its longest path in the worst states we can build -- a free that merges with both
 * neighbours; a malloc whose second-level search misses, whose first-level search finds a
 * huge block to split; a malloc that misses everywhere, looks at its own list's head,
 * calls the growth callback and retries; a memalign that splits front and back -- and then
 * random traffic. The maximum step count of each operation must be the same at all three
 * sizes, and no random operation may exceed the scenario maxima. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

#ifndef LARDER_POOL_COUNT_STEPS
#error "this test needs src/pool.c and itself built with -DLARDER_POOL_COUNT_STEPS"
#endif

enum { OP_MALLOC, OP_FREE, OP_MEMALIGN, OP_REALLOC, OP_N };
static const char *op_names[OP_N] = {"malloc", "free", "memalign", "realloc"};

struct maxima { unsigned v[OP_N]; };

static void note(struct maxima *m, int op, larder_pool_t *p) {
  unsigned s = larder_pool_last_steps(p);
  if (s > m->v[op]) m->v[op] = s;
}

static char *grow_buf;
static size_t grow_len;
static int grow_calls;
static int grow_once(larder_pool_t *p, size_t bytes, void *user) {
  (void)user;
  if (bytes > grow_len) return -1;
  grow_calls++;
  return larder_pool_add_area(p, grow_buf, grow_len);
}

static size_t cycle_size(size_t i) { return 16 + (i * 37) % 600; }

/* A pool of N blocks, alternately 1024-byte holes and 32-byte used guards, and nothing
 * else free. A malloc(1032) needs a 1040-byte block: its good-fit search misses on both
 * levels, its own list's head (1024) is too small, the growth callback adds an area, the
 * search is repeated and the new area is split -- malloc's longest path. */
static unsigned grow_scenario(size_t nblocks) {
  size_t bytes = larder_pool_min_bytes() + (nblocks / 2 + 1) * (1024 + 32) + 4096;
  char *mem = ptu_buffer(bytes);
  grow_len = 1u << 20;
  grow_buf = ptu_buffer(grow_len);
  grow_calls = 0;
  larder_pool_t *p = larder_pool_create(mem, bytes);
  REQUIRE(p);
  void **holes = calloc(nblocks / 2 + 1, sizeof(void *));
  REQUIRE(holes);
  size_t nh = 0;
  while (nh < nblocks / 2) {
    void *h = larder_pool_malloc(p, 1016);
    if (!h) break;
    holes[nh++] = h;
    if (!larder_pool_malloc(p, 8)) break;
  }
  /* use up whatever is left at the end */
  larder_pool_stats_t st;
  for (;;) {
    larder_pool_stats(p, &st);
    if (st.free_blocks == 0) break;
    void *f = NULL;
    for (size_t s = st.largest_free; !f && s >= 8; s = s * 7 / 8) f = larder_pool_malloc(p, s);
    REQUIRE(f);
  }
  for (size_t i = 0; i < nh; i++) larder_pool_free(p, holes[i]);
  larder_pool_stats(p, &st);
  CHECK(st.free_blocks == nh && st.largest_free == 1016);
  larder_pool_set_grow(p, grow_once, NULL);
  void *g = larder_pool_malloc(p, 1032);
  unsigned steps = larder_pool_last_steps(p);
  CHECK(g != NULL && grow_calls == 1);
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats(p, &st);
  printf("%6zu blocks (%zu used, %zu free): malloc through the growth callback %u steps\n",
         nblocks, st.used_blocks, st.free_blocks, steps);
  free(holes);
  free(mem);
  free(grow_buf);
  return steps;
}

static void measure(size_t nblocks, struct maxima *worst, struct maxima *random_max) {
  size_t bytes = nblocks * 700 + (8u << 20);
  char *mem = ptu_buffer(bytes);
  larder_pool_t *p = larder_pool_create(mem, bytes);
  REQUIRE(p);
  void **blk = calloc(nblocks, sizeof(void *));
  REQUIRE(blk);
  memset(worst, 0, sizeof(*worst));
  memset(random_max, 0, sizeof(*random_max));

  /* N blocks of many sizes; free every other one: N/2 free blocks spread over many lists. */
  for (size_t i = 0; i < nblocks; i++) {
    blk[i] = larder_pool_malloc(p, cycle_size(i));
    REQUIRE(blk[i]);
    note(worst, OP_MALLOC, p);
  }
  for (size_t i = 0; i < nblocks; i += 2) {
    larder_pool_free(p, blk[i]);
    note(worst, OP_FREE, p);
    blk[i] = NULL;
  }
  /* Mallocs too big for any hole: the second-level search misses, the first-level bitmap
   * leads to the big tail block, which is split. */
  void *big[32];
  for (int i = 0; i < 32; i++) {
    big[i] = larder_pool_malloc(p, 5000 + (size_t)i * 8);
    REQUIRE(big[i]);
    note(worst, OP_MALLOC, p);
  }
  /* memalign from the tail at an awkward offset: front split and back split. */
  void *al[16];
  for (int i = 0; i < 16; i++) {
    al[i] = larder_pool_memalign(p, 4096, 100 + (size_t)i * 16);
    REQUIRE(al[i]);
    note(worst, OP_MEMALIGN, p);
  }
  /* realloc in place: grow into the free successor and split what is left; shrink and merge
   * the cut-off tail with a free successor. */
  for (int i = 0; i < 32; i += 2) {
    larder_pool_free(p, big[i + 1]);
    big[i + 1] = NULL;
    void *q = larder_pool_realloc(p, big[i], 7000);
    REQUIRE(q == big[i]);
    note(worst, OP_REALLOC, p);
    q = larder_pool_realloc(p, big[i], 600);
    REQUIRE(q == big[i]);
    note(worst, OP_REALLOC, p);
  }
  CHECK(larder_pool_check(p) == 0);
  /* Frees: release the odd survivors, each between two free neighbours now. */
  for (int i = 0; i < 16; i++) { larder_pool_free(p, al[i]); note(worst, OP_FREE, p); }
  for (int i = 0; i < 32; i++) if (big[i]) { larder_pool_free(p, big[i]); note(worst, OP_FREE, p); }
  for (size_t i = 1; i < nblocks; i += 2) { larder_pool_free(p, blk[i]); note(worst, OP_FREE, p); blk[i] = NULL; }
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats_t st;

  /* Random traffic over N live slots (a few rounds over the pool's population). */
  ptu_seed(nblocks);
  size_t rounds = nblocks < 1000 ? 20000 : 4 * nblocks;
  for (size_t r = 0; r < rounds; r++) {
    size_t k = ptu_below(nblocks);
    if (blk[k]) {
      if (ptu_below(4) == 0) {
        void *q = larder_pool_realloc(p, blk[k], ptu_logsize(1, 600));
        if (q == blk[k]) note(random_max, OP_REALLOC, p); /* in place: one operation */
        if (q) blk[k] = q;
      } else {
        larder_pool_free(p, blk[k]);
        note(random_max, OP_FREE, p);
        blk[k] = NULL;
      }
    } else if (ptu_below(8) == 0) {
      blk[k] = larder_pool_memalign(p, (size_t)32 << ptu_below(7), ptu_logsize(1, 600));
      if (blk[k]) note(random_max, OP_MEMALIGN, p);
    } else {
      blk[k] = larder_pool_malloc(p, ptu_logsize(1, 600));
      if (blk[k]) note(random_max, OP_MALLOC, p);
    }
  }
  CHECK(larder_pool_check(p) == 0);
  larder_pool_stats(p, &st);
  printf("%6zu blocks (%zu used, %zu free now): worst steps", nblocks, st.used_blocks, st.free_blocks);
  for (int o = 0; o < OP_N; o++) printf(" %s=%u", op_names[o], worst->v[o]);
  printf("; random max");
  for (int o = 0; o < OP_N; o++) printf(" %s=%u", op_names[o], random_max->v[o]);
  printf("\n");
  free(blk);
  free(mem);
}

int main(void) {
  size_t sizes[3] = {10, 1000, 100000};
  struct maxima w[3], r[3];
  for (int i = 0; i < 3; i++) {
    measure(sizes[i], &w[i], &r[i]);
    unsigned g = grow_scenario(sizes[i]);
    if (g > w[i].v[OP_MALLOC]) w[i].v[OP_MALLOC] = g;
  }
  for (int o = 0; o < OP_N; o++) {
    CHECK_MSG(w[0].v[o] > 0, "%s never measured", op_names[o]);
    CHECK_MSG(w[0].v[o] == w[1].v[o] && w[1].v[o] == w[2].v[o], "%s: worst %u / %u / %u steps",
              op_names[o], w[0].v[o], w[1].v[o], w[2].v[o]);
    for (int i = 0; i < 3; i++)
      CHECK_MSG(r[i].v[o] <= w[i].v[o], "%s: random op took %u steps, more than the worst case %u",
                op_names[o], r[i].v[o], w[i].v[o]);
  }
  return check_done();
}
