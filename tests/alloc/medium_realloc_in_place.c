/* realloc grows a medium block in place over the free chunks after it, whatever their kind
 * (allocator.md, "Medium and large objects": realloc grows a medium span in place when the
 * chunks after it are free). Since issue 15 a free run is dirty or clean and the two kinds lie
 * side by side uncoalesced (segment.c), so the chunks after a block may be a short dirty run
 * followed by a clean one: growing stops at neither.
 *
 * In the process's first segment: A (16 chunks: 1 MiB with its header, S = 64 KiB), then B (8
 * chunks) right after it, written and freed: a dirty run of 8 chunks, then the clean rest of
 * the segment. A grown to 30 chunks needs 14 more: 8 dirty and 6 clean. Checked (larder only):
 * realloc returns A itself, A's bytes are kept, larder_validate() == 0. Under another allocator
 * the workload runs and reports. Fails with a resize that looks at the first run alone (A moved,
 * 1 MiB copied).
 *
 * usage: alloc_medium_realloc_in_place */
#include "alloc_util.h"

#define KiB ((size_t)1 << 10)

int main(void) {
  alloc_api_t api = alloc_api();
  int larder = api.validate != NULL;
  size_t a_size = 1024 * KiB - 4 * KiB, b_size = 512 * KiB - 4 * KiB, grown = 30 * 64 * KiB - 4 * KiB;
  unsigned char *a = malloc(a_size), *b = malloc(b_size);
  REQUIRE(a != NULL && b != NULL);
  alloc_fill(a, a_size);
  memset(b, 0x5a, b_size);
  int adjacent = b == a + 1024 * KiB;
  /* B must go back to its segment, not wait in the thread's cache of medium spans (which takes
   * spans of up to half its bound: 512 KiB) */
  if (larder) REQUIRE(api.option_set("medium_cache_kb", "0") == 0);
  free(b);
  unsigned char *g = realloc(a, grown);
  REQUIRE(g != NULL);
  size_t bad = alloc_check_as(g, a, a_size, a_size); /* the first wrong byte, or (size_t)-1 */
  printf("medium_realloc_in_place: B %s A; grown %s; contents %s\n", adjacent ? "right after" : "not after",
         g == a ? "in place" : "by a move", bad == (size_t)-1 ? "kept" : "changed");
  CHECK_MSG(bad == (size_t)-1, "A's contents changed at byte %zu", bad);
  if (!larder) {
    free(g);
    return ALLOC_SKIP;
  }
  CHECK_MSG(adjacent, "B was not carved right after A: the test measures nothing");
  CHECK_MSG(g == a, "A moved to %p: the dirty run after it and the clean one after that were not taken together",
            (void *)g);
  CHECK(api.validate() == 0);
  free(g);
  return check_failures ? 1 : 0;
}
