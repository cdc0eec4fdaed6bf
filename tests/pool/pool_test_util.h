/* Helpers shared by the pool tests: a seeded generator, aligned buffers, and the size-class
 * arithmetic docs/pools.md states (computed here from the documented rule, independently
 * of src/pool.c). */
#ifndef POOL_TEST_UTIL_H
#define POOL_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "larder_pool.h"

static uint64_t ptu_state = 88172645463325252ull;
static inline void ptu_seed(uint64_t s) { ptu_state = s * 2654435761u + 1; }
static inline uint64_t ptu_rand(void) {
  ptu_state ^= ptu_state << 13;
  ptu_state ^= ptu_state >> 7;
  ptu_state ^= ptu_state << 17;
  return ptu_state;
}
static inline size_t ptu_below(size_t n) { return n ? (size_t)(ptu_rand() % n) : 0; }
/* log-uniform in [lo, hi] */
static inline size_t ptu_logsize(size_t lo, size_t hi) {
  int bits = 0;
  while (((size_t)1 << bits) < hi) bits++;
  for (;;) {
    int b = (int)ptu_below((size_t)bits + 1);
    size_t v = ((size_t)1 << b) + ptu_below((size_t)1 << b);
    if (v >= lo && v <= hi) return v;
  }
}

static inline void *ptu_buffer(size_t bytes) {
  void *p = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
  if (!p) abort();
  return p;
}

/* Block bytes a request needs: 8-byte header, 16-byte granules, at least 32 (docs/pools.md). */
static inline size_t ptu_block_size(size_t n) {
  size_t b = (n + 8 + 15) & ~(size_t)15;
  return b < 32 ? 32 : b;
}
/* Smallest size of the first list the good-fit search looks at for a block of bs bytes:
 * exact below 2^(SL_LOG2+4), else rounded up to the second-level spacing
 * 2^(floor(log2 bs) - SL_LOG2). */
static inline size_t ptu_class_ceil(size_t bs) {
  if (bs < ((size_t)1 << (LARDER_POOL_SL_LOG2 + 4))) return bs;
  int t = 63 - __builtin_clzll((unsigned long long)bs);
  size_t step = (size_t)1 << (t - LARDER_POOL_SL_LOG2);
  return (bs + step - 1) & ~(step - 1);
}
/* The list a block of bs bytes is kept on (first level, second level). */
static inline void ptu_class_of(size_t bs, int *fl, int *sl) {
  if (bs < ((size_t)1 << (LARDER_POOL_SL_LOG2 + 4))) {
    *fl = 0;
    *sl = (int)(bs >> 4);
  } else {
    int t = 63 - __builtin_clzll((unsigned long long)bs);
    *fl = t - (LARDER_POOL_SL_LOG2 + 4) + 1;
    *sl = (int)((bs >> (t - LARDER_POOL_SL_LOG2)) - ((size_t)1 << LARDER_POOL_SL_LOG2));
  }
}

#endif
