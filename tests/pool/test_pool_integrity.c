/* Integrity: long random op sequences (fixed seeds; sizes 1 B to 1 MiB, log-uniform;
 * alignments up to 4 KiB; malloc, memalign, realloc, free). After every op the pool's own
 * check passes, every live block still holds the bytes written into it, and every block that
 * malloc, memalign or realloc places is checked against every other live block's
 * [ptr, ptr + usable size): no two overlap. Every 256 ops the set of used blocks the walk
 * reports is compared with the set of live pointers. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

#define LIVE_MAX 256

struct live { unsigned char *p; size_t n; unsigned char tag; };
static struct live live[LIVE_MAX];

/* Writes the tag at the block's head, tail and a stripe, so a write by an overlapping block
 * or by the pool's own metadata shows. */
static void stamp(struct live *l) {
  size_t n = l->n;
  size_t head = n < 64 ? n : 64;
  memset(l->p, l->tag, head);
  if (n > 64) memset(l->p + n - 64 > l->p + 64 ? l->p + n - 64 : l->p + 64, l->tag, n - 64 < 64 ? n - 64 : 64);
  for (size_t off = 4096; off < n; off += 4096) l->p[off] = l->tag;
}

static int intact(const struct live *l) {
  size_t n = l->n;
  size_t head = n < 64 ? n : 64;
  for (size_t i = 0; i < head; i++) if (l->p[i] != l->tag) return 0;
  if (n > 64) {
    unsigned char *from = l->p + n - 64 > l->p + 64 ? l->p + n - 64 : l->p + 64;
    for (unsigned char *q = from; q < l->p + n; q++) if (*q != l->tag) return 0;
  }
  for (size_t off = 4096; off < n; off += 4096) if (l->p[off] != l->tag) return 0;
  return 1;
}

struct seen { size_t used; int missing; };
static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
  return x < y ? -1 : x > y;
}
static void *sorted_live[LIVE_MAX];
static size_t sorted_n;
static void walk_cb(void *ptr, size_t size, int used, void *user) {
  struct seen *s = user;
  (void)size;
  if (!used) return;
  s->used++;
  if (!bsearch(&ptr, sorted_live, sorted_n, sizeof(void *), cmp_ptr)) s->missing++;
}

/* The block just placed in slot k, with its usable size, overlaps no other live block. */
static int overlaps_other(larder_pool_t *p, int k) {
  uintptr_t a = (uintptr_t)live[k].p, a_end = a + larder_pool_usable_size(p, live[k].p);
  for (int i = 0; i < LIVE_MAX; i++) {
    if (i == k || !live[i].p) continue;
    uintptr_t b = (uintptr_t)live[i].p, b_end = b + larder_pool_usable_size(p, live[i].p);
    if (a < b_end && b < a_end) return 1;
  }
  return 0;
}

static int run(uint64_t seed, int ops, size_t pool_bytes) {
  ptu_seed(seed);
  void *mem = ptu_buffer(pool_bytes);
  larder_pool_t *p = larder_pool_create(mem, pool_bytes);
  REQUIRE(p);
  memset(live, 0, sizeof(live));
  int failures = 0, refused = 0;
  for (int op = 0; op < ops && failures < 5; op++) {
    int k = (int)ptu_below(LIVE_MAX);
    struct live *l = &live[k];
    size_t n = ptu_logsize(1, 1 << 20);
    int kind = (int)ptu_below(10);
    if (l->p && kind < 4) {
      if (!intact(l)) { failures++; fprintf(stderr, "seed %llu op %d: block %p damaged\n", (unsigned long long)seed, op, (void *)l->p); }
      larder_pool_free(p, l->p);
      l->p = NULL;
    } else if (l->p && kind < 6) {
      if (!intact(l)) { failures++; fprintf(stderr, "seed %llu op %d: block damaged before realloc\n", (unsigned long long)seed, op); }
      size_t keep = n < l->n ? n : l->n;
      unsigned char *q = larder_pool_realloc(p, l->p, n);
      if (q) {
        /* the first min(old, new) bytes survive: check the head stamp */
        size_t head = keep < 64 ? keep : 64;
        for (size_t i = 0; i < head; i++) if (q[i] != l->tag) { failures++; break; }
        l->p = q;
        l->n = n;
        stamp(l);
        if (larder_pool_usable_size(p, q) < n) failures++;
        if (overlaps_other(p, k)) { failures++; fprintf(stderr, "seed %llu op %d: realloc'd block overlaps another\n", (unsigned long long)seed, op); }
      } else {
        refused++;
      }
    } else if (!l->p) {
      size_t align = 0;
      if (kind >= 8) align = (size_t)1 << (4 + ptu_below(9)); /* 16 .. 4096 */
      unsigned char *q = align ? larder_pool_memalign(p, align, n) : larder_pool_malloc(p, n);
      if (!q) { refused++; continue; }
      if (align && ((uintptr_t)q & (align - 1))) { failures++; fprintf(stderr, "misaligned %p for %zu\n", (void *)q, align); }
      if (larder_pool_usable_size(p, q) < n) failures++;
      l->p = q;
      l->n = n;
      l->tag = (unsigned char)(op * 31 + 7);
      stamp(l);
      if (overlaps_other(p, k)) { failures++; fprintf(stderr, "seed %llu op %d: new block overlaps another\n", (unsigned long long)seed, op); }
    }
    int errs = larder_pool_check(p);
    if (errs) { failures++; fprintf(stderr, "seed %llu op %d: check found %d problems\n", (unsigned long long)seed, op, errs); }
    if (op % 256 == 255) {
      sorted_n = 0;
      for (int i = 0; i < LIVE_MAX; i++) if (live[i].p) sorted_live[sorted_n++] = live[i].p;
      qsort(sorted_live, sorted_n, sizeof(void *), cmp_ptr);
      for (size_t i = 1; i < sorted_n; i++) if (sorted_live[i] == sorted_live[i - 1]) failures++;
      struct seen s = {0, 0};
      larder_pool_walk(p, walk_cb, &s);
      if (s.used != sorted_n || s.missing) { failures++; fprintf(stderr, "walk: %zu used blocks, %zu live, %d unknown\n", s.used, sorted_n, s.missing); }
      for (size_t i = 0; i < LIVE_MAX; i++) if (live[i].p && !intact(&live[i])) failures++;
    }
  }
  for (int i = 0; i < LIVE_MAX; i++) if (live[i].p) larder_pool_free(p, live[i].p);
  larder_pool_stats_t st;
  larder_pool_stats(p, &st);
  if (larder_pool_check(p) || st.used_blocks || st.free_blocks != 1) failures++;
  printf("seed %llu: %d ops, %d refused (pool full), %d failures\n", (unsigned long long)seed, ops, refused, failures);
  free(mem);
  return failures;
}

int main(void) {
  /* A roomy pool (few refusals) and a tight one (many, so the pool runs near full). */
  CHECK(run(1, 200000, 96u << 20) == 0);
  CHECK(run(2, 200000, 96u << 20) == 0);
  CHECK(run(3, 200000, 24u << 20) == 0);
  CHECK(run(4, 200000, 8u << 20) == 0);
  return check_done();
}
