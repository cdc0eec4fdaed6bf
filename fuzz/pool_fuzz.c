/* libFuzzer target for the real-time pool: the input is a sequence of 4-byte operations
 * (malloc, memalign, realloc, free, add an area, usable_size) on a pool over three fixed
 * buffers. After every operation larder_pool_check must pass and every live block must still
 * hold the bytes written into it; any failure aborts, which libFuzzer reports with the input.
 * Built by fuzz/CMakeLists.txt with clang -fsanitize=fuzzer,address,undefined; replay_main.c
 * replays a corpus through the same function without libFuzzer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larder_pool.h"

#define PF_SLOTS 64
#define PF_MAIN (1u << 20)
#define PF_EXTRA (256u << 10)

static _Alignas(4096) unsigned char pf_main[PF_MAIN];
static _Alignas(4096) unsigned char pf_extra[2][PF_EXTRA];

struct pf_slot { unsigned char *p; size_t n; unsigned char tag; };

static void pf_fail(const char *what, size_t op) {
  fprintf(stderr, "pool_fuzz: %s after operation %zu\n", what, op);
  abort();
}

static void pf_stamp(struct pf_slot *s) {
  size_t k = s->n < 32 ? s->n : 32;
  memset(s->p, s->tag, k);
  memset(s->p + s->n - k, s->tag, k);
}

static int pf_intact(const struct pf_slot *s) {
  size_t k = s->n < 32 ? s->n : 32;
  for (size_t i = 0; i < k; i++)
    if (s->p[i] != s->tag || s->p[s->n - 1 - i] != s->tag) return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  larder_pool_t *pool = larder_pool_create(pf_main, sizeof(pf_main));
  if (!pool) pf_fail("create refused a valid buffer", 0);
  struct pf_slot slots[PF_SLOTS];
  memset(slots, 0, sizeof(slots));
  int extra_added = 0;
  size_t nops = size / 4;
  for (size_t op = 0; op < nops; op++) {
    const uint8_t *c = data + op * 4;
    struct pf_slot *s = &slots[c[1] % PF_SLOTS];
    unsigned exp = c[2] & 15u;
    size_t n = ((((size_t)c[2] << 8) | c[3]) % ((size_t)1 << (exp + 4))) + 1; /* 1 .. 512 KiB */
    switch (c[0] % 10) {
      case 0: case 1: case 2:
        if (!s->p) {
          s->p = larder_pool_malloc(pool, n);
          if (s->p) {
            if (((uintptr_t)s->p & 15) || larder_pool_usable_size(pool, s->p) < n) pf_fail("bad malloc block", op);
            s->n = n;
            s->tag = (unsigned char)(op * 13 + 1);
            pf_stamp(s);
          }
        }
        break;
      case 3:
        if (!s->p) {
          size_t align = (size_t)16 << (c[3] % 9); /* 16 .. 4096 */
          s->p = larder_pool_memalign(pool, align, n);
          if (s->p) {
            if (((uintptr_t)s->p & (align - 1)) || larder_pool_usable_size(pool, s->p) < n) pf_fail("bad memalign block", op);
            s->n = n;
            s->tag = (unsigned char)(op * 13 + 1);
            pf_stamp(s);
          }
        }
        break;
      case 4: case 5:
        if (s->p) {
          if (!pf_intact(s)) pf_fail("block damaged before realloc", op);
          unsigned char *q = larder_pool_realloc(pool, s->p, n);
          if (q) {
            size_t keep = n < s->n ? n : s->n;
            size_t k = keep < 32 ? keep : 32;
            for (size_t i = 0; i < k; i++) if (q[i] != s->tag) pf_fail("realloc lost the contents", op);
            if (larder_pool_usable_size(pool, q) < n) pf_fail("realloc block too small", op);
            s->p = q;
            s->n = n;
            pf_stamp(s);
          }
        }
        break;
      case 6: case 7: case 8:
        if (s->p) {
          if (!pf_intact(s)) pf_fail("block damaged before free", op);
          larder_pool_free(pool, s->p);
          s->p = NULL;
        }
        break;
      case 9:
        if (extra_added < 2) {
          /* an area of some size inside the next extra buffer */
          size_t bytes = 64 + ((((size_t)c[2] << 8) | c[3]) * 16) % (PF_EXTRA - 64);
          if (larder_pool_add_area(pool, pf_extra[extra_added], bytes) != 0) pf_fail("add_area refused a valid area", op);
          extra_added++;
        }
        break;
    }
    if (larder_pool_check(pool) != 0) pf_fail("larder_pool_check failed", op);
  }
  for (int i = 0; i < PF_SLOTS; i++) {
    if (slots[i].p) {
      if (!pf_intact(&slots[i])) pf_fail("block damaged at the end", nops);
      larder_pool_free(pool, slots[i].p);
    }
  }
  larder_pool_stats_t st;
  larder_pool_stats(pool, &st);
  if (larder_pool_check(pool) != 0 || st.used_blocks != 0 || st.free_blocks != st.areas)
    pf_fail("pool not back to one free block per area", nops);
  larder_pool_destroy(pool);
  return 0;
}
