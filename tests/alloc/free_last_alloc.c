/* A free of the block malloc handed out last (a temporary, freed before the next malloc: the
 * commonest pattern there is) goes straight into its bin, its tag read at once, instead of
 * waiting among the deferred frees (src/alloc.c, larder_free): so the next malloc of its size
 * hands the same block out again, warm in the cache, as glibc's, jemalloc's and mimalloc's do.
 *
 * For sizes across the small classes: after a few pairs, malloc, free and malloc of one size
 * return the same address, 1,000 times in a row; then two blocks are freed in the order they
 * were handed out (the first not the last handed out: deferred). The statistics count every
 * free and every malloc (mallocs and frees each up by exactly those made, bytes in use back
 * where they were), and the validation walk passes. A double free after such a free is
 * reported: bad_free.c (double-hot, double-hot-late, double-hot-remote, double-hot-batch). */
#include "alloc_util.h"

int main(void) {
  static const size_t sizes[] = {16, 24, 32, 48, 100, 256, 1000, 4000, 9000, 16384};
  alloc_api_t api = alloc_api();
  int larder = alloc_is_larder();
  int reused_all = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    void *keep[8];
    for (int i = 0; i < 8; i++) keep[i] = malloc(n); /* the bin refilled: the mallocs below are fast */
    int same = 0;
    larder_stats_t before, after;
    if (api.stats_get) api.stats_get(&before);
    for (int i = 0; i < 1000; i++) {
      char *p = malloc(n);
      REQUIRE(p != NULL);
      /* both ends written, but not a 16-byte block's bytes 8-15: the word the free's one-compare
       * tag check reads (internal.h, ld_tag_settles), whose top two bytes, written so, looked
       * like the free tag's under 1 key in 128 (its byte 6 0x00 or 0xff) on 4 of the 1,000
       * pairs, which then took the slow path (correctly, and the block waited among the
       * deferred frees): the test failed 1 run in about 200 */
      p[0] = p[n > 16 ? n - 1 : 7] = (char)i;
      free(p);
      char *q = malloc(n);
      REQUIRE(q != NULL);
      same += q == p;
      q[0] = 1;
      free(q);
    }
    /* a block freed that is not the last handed out (deferred), then the last */
    char *a = malloc(n), *b = malloc(n);
    REQUIRE(a && b);
    free(a);
    free(b);
    if (api.stats_get) {
      api.stats_get(&after);
      CHECK_MSG(after.mallocs - before.mallocs == 2002 && after.frees - before.frees == 2002,
                "%zu B: 2,002 mallocs and frees counted as %zu and %zu", n, (size_t)(after.mallocs - before.mallocs),
                (size_t)(after.frees - before.frees));
      CHECK_MSG(after.bytes_in_use == before.bytes_in_use, "%zu B: bytes in use %zu before the pairs, %zu after", n,
                (size_t)before.bytes_in_use, (size_t)after.bytes_in_use);
    }
    /* larder and glibc hand the block back; a peer need not */
    if (larder) CHECK_MSG(same == 1000, "%zu B: malloc after free returned the freed block %d times of 1,000", n, same);
    reused_all += same == 1000;
    for (int i = 0; i < 8; i++) free(keep[i]);
  }
  if (api.validate) CHECK(api.validate() == 0);
  printf("free_last_alloc: %d of %zu sizes handed the freed block back 1,000 times in 1,000\n", reused_all,
         sizeof sizes / sizeof sizes[0]);
  return check_done();
}
