/* Growth over fragments (LARDER_GROW_PURGE_KB, src/segment.c): a run of clean chunks handed
 * out while free dirty runs wait that none fits gives back as much of the oldest, within the
 * option's budget; with the option at 0 (the default) nothing is given back.
 *
 * With the medium cache off (the registrations set LARDER_MEDIUM_CACHE_KB=0), 40 medium blocks
 * of 40,000 B (a chunk each) are written and every other one freed: 20 dirty runs of one
 * chunk, apart. A block of 1,500,000 B (23 chunks) fits none of them and takes clean chunks:
 * the statistics' bytes_free_dirty must fall by at least 19 chunks and bytes_purged rise as
 * much when the option is on (65536: 64 MiB), and neither move when it is 0. The option's
 * budget: at 128 KiB, two chunks at most go. */
#include "alloc_util.h"

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.option_get) {
    printf("grow_purge: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  if (api.option_get("medium_cache_kb") != 0) {
    printf("grow_purge: skipped, run with LARDER_MEDIUM_CACHE_KB=0 (CTest does)\n");
    return ALLOC_SKIP;
  }
  double budget_kb = api.option_get("grow_purge_kb");
  size_t chunk = (size_t)api.option_get("superblock_size");
  enum { N = 40 };
  static char *v[N];
  for (int i = 0; i < N; i++) {
    v[i] = malloc(40000);
    REQUIRE(v[i] != NULL);
    memset(v[i], 0x5a, 40000);
  }
  for (int i = 0; i < N; i += 2) free(v[i]);
  larder_stats_t before = alloc_stats(&api);
  char *big = malloc(1500000);
  REQUIRE(big != NULL);
  memset(big, 0x11, 1500000);
  larder_stats_t after = alloc_stats(&api);
  size_t dirty_fall = before.bytes_free_dirty > after.bytes_free_dirty ? before.bytes_free_dirty - after.bytes_free_dirty : 0;
  size_t purged = after.bytes_purged - before.bytes_purged;
  printf("grow_purge: grow_purge_kb %.0f: dirty %zu -> %zu KiB, purged %zu KiB as 1,500,000 B came from clean chunks\n", budget_kb,
         before.bytes_free_dirty >> 10, after.bytes_free_dirty >> 10, purged >> 10);
  CHECK_MSG(before.bytes_free_dirty >= 19 * chunk, "only %zu KiB dirty after 20 medium blocks were freed", before.bytes_free_dirty >> 10);
  if (budget_kb >= 65536) {
    CHECK_MSG(dirty_fall >= 19 * chunk && purged >= 19 * chunk, "dirty fell by %zu KiB, %zu KiB purged: the growth kept the fragments",
              dirty_fall >> 10, purged >> 10);
  } else if (budget_kb > 0) {
    size_t most = ((size_t)budget_kb << 10) + chunk;
    CHECK_MSG(purged > 0 && purged <= most, "%zu KiB purged with a budget of %.0f KiB", purged >> 10, budget_kb);
  } else {
    CHECK_MSG(purged == 0 && dirty_fall == 0, "the option is off, yet %zu KiB were purged", purged >> 10);
  }
  for (int i = 1; i < N; i += 2) {
    size_t bad = 0;
    for (int k = 0; k < 40000; k += 509) bad += v[i][k] != 0x5a;
    CHECK_MSG(bad == 0, "block %d changed", i);
    free(v[i]);
  }
  free(big);
  CHECK(api.validate() == 0);
  return check_done();
}
