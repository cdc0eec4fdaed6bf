/* Memory is always served (seed 003 §4.4): a request is refused only when no free block
 * can hold it under the documented rule (docs/pools.md): malloc(n) fails only if
 *   - no free block is at least class_ceil(bs) bytes (bs = n's block size), and
 *   - no free block of bs's own list is at least bs bytes at the head of that list;
 * in particular a pool that holds a free block of exactly bs bytes on a list of one size,
 * or any free block at least class_ceil(bs), always serves n. The test fills pools with
 * several size mixes, frees in patterns (every other, every third, runs, random halves),
 * refills, and after every refusal walks the free blocks to confirm the rule. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

#define MAXB 200000

static void *blocks[MAXB];
static size_t nb;

struct fit { size_t need_ceil, bs; int ceil_fit, exact_small_class; };
static void fit_cb(void *ptr, size_t usable, int used, void *user) {
  (void)ptr;
  struct fit *f = user;
  if (used) return;
  size_t block = usable + 8;
  if (block >= f->need_ceil) f->ceil_fit = 1;
  /* below 512 bytes each list holds one size: an exact or larger block there is found */
  if (f->bs < 512 && block >= f->bs) f->exact_small_class = 1;
}

static size_t refusals, bad;

/* malloc(n) or, on refusal, verify the refusal was allowed. */
static void *try_malloc(larder_pool_t *p, size_t n) {
  void *q = larder_pool_malloc(p, n);
  if (q) return q;
  refusals++;
  struct fit f = {ptu_class_ceil(ptu_block_size(n)), ptu_block_size(n), 0, 0};
  larder_pool_walk(p, fit_cb, &f);
  if (f.ceil_fit || f.exact_small_class) {
    bad++;
    fprintf(stderr, "malloc(%zu) refused although a free block of %zu+ bytes exists\n", n, f.need_ceil);
  }
  return NULL;
}

static size_t fill(larder_pool_t *p, size_t (*size_of)(size_t)) {
  size_t got = 0;
  while (nb < MAXB) {
    void *q = try_malloc(p, size_of(nb));
    if (!q) break;
    blocks[nb++] = q;
    got++;
  }
  return got;
}

static size_t fixed_size = 100;
static size_t size_fixed(size_t i) { (void)i; return fixed_size; }
static size_t size_mixed(size_t i) { return 1 + (i * 7919) % 3000; }
static size_t size_random(size_t i) { (void)i; return ptu_logsize(1, 64 << 10); }

static void compact(void) {
  size_t j = 0;
  for (size_t i = 0; i < nb; i++) if (blocks[i]) blocks[j++] = blocks[i];
  nb = j;
}

static void run(const char *name, size_t pool_bytes, size_t (*size_of)(size_t)) {
  char *mem = ptu_buffer(pool_bytes);
  larder_pool_t *p = larder_pool_create(mem, pool_bytes);
  REQUIRE(p);
  nb = 0;
  refusals = 0;
  size_t first = fill(p, size_of);
  /* The pool is full for this mix. Patterns: */
  for (int pattern = 0; pattern < 5; pattern++) {
    for (size_t i = 0; i < nb; i++) {
      int drop = pattern == 0 ? (i % 2 == 0)
               : pattern == 1 ? (i % 3 == 1)
               : pattern == 2 ? ((i / 16) % 2 == 0)        /* runs of 16: coalesced holes */
               : pattern == 3 ? (ptu_below(2) == 0)
               : (i % 5 != 0);
      if (drop) { larder_pool_free(p, blocks[i]); blocks[i] = NULL; }
    }
    compact();
    CHECK(larder_pool_check(p) == 0);
    /* the same sizes again: the freed blocks of exactly these sizes must be reused */
    size_t again = fill(p, size_of);
    CHECK(larder_pool_check(p) == 0);
    /* then a bigger size, then a tiny one, until refused */
    fixed_size = 5000;
    fill(p, size_fixed);
    fixed_size = 1;
    fill(p, size_fixed);
    fixed_size = 100;
    CHECK(larder_pool_check(p) == 0);
    if (pattern == 0) CHECK_MSG(again > 0, "%s: nothing refilled after freeing half", name);
  }
  /* Free everything: one block again, and a request for almost all of it succeeds. */
  for (size_t i = 0; i < nb; i++) larder_pool_free(p, blocks[i]);
  nb = 0;
  larder_pool_stats_t st;
  larder_pool_stats(p, &st);
  CHECK(st.free_blocks == 1 && st.used_blocks == 0);
  void *all = larder_pool_malloc(p, st.largest_free);
  CHECK_MSG(all != NULL, "%s: the whole empty pool (%zu bytes) was refused", name, st.largest_free);
  printf("%s: %zu blocks at first fill, %zu refusals checked\n", name, first, refusals);
  free(mem);
}

int main(void) {
  ptu_seed(42);
  run("fixed 100 B", 4u << 20, size_fixed);
  run("mixed 1..3000 B", 8u << 20, size_mixed);
  run("random 1 B..64 KiB", 16u << 20, size_random);
  fixed_size = 100;
  CHECK_MSG(bad == 0, "%zu refusals broke the rule", bad);
  return check_done();
}
