/* Large objects (DESIGN §1: page-multiple spans with a small cache of freed spans "so that
 * malloc/free of large buffers in a loop does not mmap every time"). 300 rounds of malloc of
 * a random 5..25 MiB buffer, written at every 64 KiB step with a value derived from its
 * address, and freed; two buffers are live at a time, so a span handed out twice would show.
 *
 * With larder, larder_stats_get must show that the span cache served most of them and that
 * mmap was rarely needed: large_cache_hits >= 50% of the rounds, mmap calls <= 25% of them.
 * (Each figure is a delta over the loop.)
 *
 * usage: alloc_large [rounds] */
#include "alloc_util.h"

#define STEP 65536

static void mark(unsigned char *p, size_t n) {
  for (size_t off = 0; off < n; off += STEP) p[off] = (unsigned char)(((uintptr_t)p >> 12) + off / STEP);
  p[n - 1] = 0xEE;
}

static size_t check_marks(const unsigned char *p, size_t n) {
  size_t bad = 0;
  for (size_t off = 0; off < n; off += STEP) bad += p[off] != (unsigned char)(((uintptr_t)p >> 12) + off / STEP);
  return bad + (p[n - 1] != 0xEE);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  if (rounds < 10) {
    fprintf(stderr, "usage: %s [rounds >= 10]\n", argv[0]);
    return 2;
  }
  alloc_api_t api = alloc_api();
  larder_stats_t st0, st1;
  if (api.stats_get) api.stats_get(&st0);
  uint64_t s = 77;
  unsigned char *live[2] = {NULL, NULL};
  size_t live_n[2] = {0, 0};
  for (int r = 0; r < rounds; r++) {
    int k = r & 1;
    if (live[k]) {
      size_t bad = check_marks(live[k], live_n[k]);
      CHECK_MSG(bad == 0, "round %d: buffer %p of %zu bytes has %zu wrong marks", r, (void *)live[k],
                live_n[k], bad);
      free(live[k]);
    }
    size_t n = ((size_t)5 << 20) + (size_t)(alloc_rng(&s) % ((size_t)20 << 20));
    live[k] = malloc(n);
    REQUIRE(live[k] != NULL);
    CHECK((uintptr_t)live[k] % 16 == 0);
    live_n[k] = n;
    mark(live[k], n);
  }
  for (int k = 0; k < 2; k++) {
    CHECK(check_marks(live[k], live_n[k]) == 0);
    free(live[k]);
  }
  if (!api.stats_get) {
    printf("large: %d rounds of 5-25 MiB ran; span-cache figures skipped (not larder)\n", rounds);
    return check_done();
  }
  api.stats_get(&st1);
  size_t allocs = st1.large_allocs - st0.large_allocs;
  size_t hits = st1.large_cache_hits - st0.large_cache_hits;
  size_t mmaps = st1.mmap_calls - st0.mmap_calls;
  printf("large: %d rounds of 5-25 MiB: large_allocs %zu, large_cache_hits %zu (%.0f%%), mmap_calls "
         "%zu, munmap_calls %zu, madvise_calls %zu\n",
         rounds, allocs, hits, allocs ? 100.0 * (double)hits / (double)allocs : 0.0, mmaps,
         st1.munmap_calls - st0.munmap_calls, st1.madvise_calls - st0.madvise_calls);
  CHECK_MSG(allocs >= (size_t)rounds, "large_allocs %zu < %d rounds", allocs, rounds);
  CHECK_MSG(hits * 2 >= (size_t)rounds, "span cache served %zu of %d", hits, rounds);
  CHECK_MSG(mmaps * 4 <= (size_t)rounds, "%zu mmap calls for %d rounds", mmaps, rounds);
  int v = api.validate();
  CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  return check_done();
}
