/* The fragmentation bounds docs/pools.md states, for every size class up to 4 MiB:
 *  1. internal: a block served for n bytes has usable size n .. n + 31 (8-byte header,
 *     16-byte granules, 32-byte minimum block; the pool trims the block it finds, so the
 *     class width does not add to it);
 *  2. search: malloc(n) succeeds whenever some free block is at least class_ceil(bs) bytes,
 *     where bs is n's block size and class_ceil(bs) - bs < bs / 2^SL_LOG2 (the second-level
 *     spacing; 0 below 2^(SL_LOG2+4)); it also succeeds when the only free block is bs
 *     bytes exactly (the request's own list is looked at too). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

#define AREA_OVERHEAD 32 /* area header 16, alignment pad 8, sentinel 8 (docs/pools.md) */

static char *base_mem, *area_mem;
static size_t area_cap;

/* A pool whose only sizeable free block is exactly `block` bytes: the control area gets
 * the minimum buffer (one 32-byte block, which we take), the added area is sized exactly. */
static larder_pool_t *pool_with_block(size_t block) {
  larder_pool_t *p = larder_pool_create(base_mem, larder_pool_min_bytes());
  REQUIRE(p);
  REQUIRE(larder_pool_malloc(p, 1) != NULL); /* the first area's only block */
  REQUIRE(block + AREA_OVERHEAD <= area_cap);
  REQUIRE(larder_pool_add_area(p, area_mem, block + AREA_OVERHEAD) == 0);
  larder_pool_stats_t st;
  larder_pool_stats(p, &st);
  REQUIRE(st.free_blocks == 1 && st.largest_free == block - 8);
  return p;
}

int main(void) {
  base_mem = ptu_buffer(larder_pool_min_bytes());
  area_cap = (8u << 20) + 4096;
  area_mem = ptu_buffer(area_cap);
  int classes = 0, worst_int = 0;
  double worst_ratio = 0;
  size_t bad_int = 0, bad_search = 0, bad_exact = 0, bad_width = 0;
  /* Every class boundary, and a request on each side of it, up to 4 MiB. */
  for (size_t lo = 32; lo <= (4u << 20); ) {
    int fl, sl;
    ptu_class_of(lo, &fl, &sl);
    size_t step = lo < 512 ? 16 : ((size_t)1 << (63 - __builtin_clzll(lo) - LARDER_POOL_SL_LOG2));
    classes++;
    /* the requests whose blocks are the class's first size, one granule above it, its
     * middle and its last granule, plus the smallest request of all */
    size_t probes[6] = {lo - 8, lo - 8 + 1, lo + step / 2 - 8, lo + step - 8 - 15, lo + step - 8 - 1, 1};
    for (int k = 0; k < 6; k++) {
      size_t n = probes[k];
      size_t bs = ptu_block_size(n);
      size_t ceil = ptu_class_ceil(bs);
      if (ceil - bs >= (bs < 512 ? 1 : bs >> LARDER_POOL_SL_LOG2)) bad_width++;
      if (bs >= 512 && (double)(ceil - bs) / (double)bs > worst_ratio) worst_ratio = (double)(ceil - bs) / (double)bs;
      /* search bound: a pool whose free block is class_ceil(bs) serves it */
      larder_pool_t *p = pool_with_block(ceil);
      void *q = larder_pool_malloc(p, n);
      if (!q) bad_search++;
      else {
        size_t u = larder_pool_usable_size(p, q);
        if (u < n || u - n > 31) bad_int++;
        if ((int)(u - n) > worst_int) worst_int = (int)(u - n);
      }
      if (larder_pool_check(p)) bad_search++;
      /* exactly bs: served through the request's own list */
      p = pool_with_block(bs);
      q = larder_pool_malloc(p, n);
      if (!q) bad_exact++;
      else if (larder_pool_usable_size(p, q) - n > 31) bad_int++;
      if (larder_pool_check(p)) bad_exact++;
    }
    lo += step;
  }
  printf("%d classes probed: worst internal waste %d bytes, worst class width %.2f%% of the request's block\n",
         classes, worst_int, 100.0 * worst_ratio);
  CHECK_MSG(bad_int == 0, "%zu requests wasted more than 31 bytes", bad_int);
  CHECK_MSG(bad_search == 0, "%zu requests refused with a class_ceil block free", bad_search);
  CHECK_MSG(bad_exact == 0, "%zu requests refused with an exact-size block free", bad_exact);
  CHECK_MSG(bad_width == 0, "%zu classes wider than 1/2^SL_LOG2", bad_width);
  CHECK(worst_ratio < 1.0 / (1 << LARDER_POOL_SL_LOG2));
  CHECK(classes > 300);
  free(base_mem);
  free(area_mem);
  return check_done();
}
