/* malloc_trim(0) returns memory (DESIGN §1 "Returning memory": empty superblocks and cached
 * spans are given back with madvise, immediately on malloc_trim). A peak of 200 MiB of small
 * blocks (16..512 B, every byte written) is allocated and entirely freed, then malloc_trim(0)
 * is called.
 *
 * Bound: afterwards RSS must be within 10% of the peak's growth above the starting RSS, i.e.
 * at least 90% of the peak went back to the OS. Everything was freed, so every superblock is
 * empty; 10% leaves room for allocator metadata kept resident (a header page per 64 KiB
 * superblock would be 6%) but not for keeping the empty superblocks themselves.
 *
 * The pointer array lives in its own mapping, outside the allocator, and is unmapped before
 * the final reading.
 *
 * usage: alloc_trim [MiB] */
#include <malloc.h>
#include <sys/mman.h>

#include "alloc_util.h"

int main(int argc, char **argv) {
  long mib = argc > 1 ? atol(argv[1]) : 200;
  if (mib < 16 || mib > 4096) {
    fprintf(stderr, "usage: %s [MiB 16..4096]\n", argv[0]);
    return 2;
  }
  size_t target = (size_t)mib << 20;
  size_t cap = target / 16 + 1;
  void **ptrs = mmap(NULL, cap * sizeof *ptrs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(ptrs != MAP_FAILED);
  /* one warm-up block so that one-time allocator set-up is in the baseline */
  alloc_call(100);
  size_t rss0 = alloc_rss_bytes();

  uint64_t s = 5;
  size_t n = 0, total = 0;
  while (total < target && n < cap) {
    size_t sz = 16 + (size_t)(alloc_rng(&s) % 497);
    void *p = malloc(sz);
    REQUIRE(p != NULL);
    memset(p, 0x77, sz);
    ptrs[n++] = p;
    total += sz;
  }
  size_t rss_peak = alloc_rss_bytes();
  /* free in an order unrelated to allocation order, as a server's caches drain */
  for (size_t i = 0; i < n; i++) {
    size_t j = i + (size_t)(alloc_rng(&s) % (n - i));
    void *t = ptrs[i]; ptrs[i] = ptrs[j]; ptrs[j] = t;
  }
  for (size_t i = 0; i < n; i++) free(ptrs[i]);
  munmap(ptrs, cap * sizeof *ptrs);
  size_t rss_freed = alloc_rss_bytes();

  alloc_api_t api = alloc_api();
  larder_stats_t st0, st1;
  if (api.stats_get) api.stats_get(&st0);
  int rc = malloc_trim(0);
  size_t rss_trim = alloc_rss_bytes();
  if (api.stats_get) api.stats_get(&st1);

  size_t growth = rss_peak > rss0 ? rss_peak - rss0 : 0;
  size_t left = rss_trim > rss0 ? rss_trim - rss0 : 0;
  printf("trim: %zu blocks, %.1f MiB requested; RSS start %.1f, peak %.1f, after free %.1f, after "
         "malloc_trim(0)=%d %.1f MiB (%.1f%% of the growth left, bound 10%%)\n",
         n, ALLOC_MIB(total), ALLOC_MIB(rss0), ALLOC_MIB(rss_peak), ALLOC_MIB(rss_freed), rc,
         ALLOC_MIB(rss_trim), growth ? 100.0 * (double)left / (double)growth : 0.0);
  CHECK_MSG(growth >= total, "peak RSS grew only %.1f MiB for %.1f MiB written", ALLOC_MIB(growth),
            ALLOC_MIB(total));
  CHECK_MSG(left * 10 <= growth, "after malloc_trim(0) RSS is %.1f MiB above the start",
            ALLOC_MIB(left));
  if (api.stats_get) {
    printf("larder: madvise %zu calls %.1f MiB, munmap %zu calls %.1f MiB during the trim\n",
           st1.madvise_calls - st0.madvise_calls, ALLOC_MIB(st1.madvise_bytes - st0.madvise_bytes),
           st1.munmap_calls - st0.munmap_calls, ALLOC_MIB(st1.munmap_bytes - st0.munmap_bytes));
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  /* the allocator still works on the returned memory */
  void *again[1000];
  for (int i = 0; i < 1000; i++) { again[i] = malloc(200); REQUIRE(again[i]); memset(again[i], 1, 200); }
  for (int i = 0; i < 1000; i++) free(again[i]);
  return check_done();
}
