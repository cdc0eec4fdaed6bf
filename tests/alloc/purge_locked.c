/* calloc's zeroes hold over locked memory. A purged (clean) run of a segment is taken to read
 * zero, so a calloc from it clears nothing; but madvise refuses to purge locked pages (mlock,
 * mlockall: EINVAL), and a run so refused was filed clean all the same: under mlockall,
 * calloc(1536000) after a free and malloc_trim returned 14 bytes of an earlier block.
 * ld_os_purge now replaces locked pages with new zero ones (and a purge it cannot make leaves
 * the run dirty, which calloc clears).
 *
 * For each size (medium spans of 200 KiB to 1.9 MiB, and a 3 MiB large one): malloc, fill with
 * 0xab, mlock the block, free it (LARDER_MEDIUM_CACHE_KB=0: the span goes back to its segment),
 * malloc_trim(0) (purges every free run), then calloc the same size: every byte must be 0, and
 * a plain malloc of it must still work. A small block keeps the segment in use, so that it is
 * not unmapped. mlock needs RLIMIT_MEMLOCK (8 MiB for a user by default): each block is locked
 * alone, and a refusal skips that size. */
#include <malloc.h>
#include <sys/mman.h>

#include "alloc_util.h"

static size_t nonzero(const unsigned char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += p[i] != 0;
  return k;
}

int main(void) {
  void *keep = malloc(100);
  REQUIRE(keep != NULL);
  const size_t sizes[] = {200 << 10, 700 << 10, 1536000, 1900 << 10, 3 << 20};
  int tried = 0;
  for (int round = 0; round < 3; round++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      unsigned char *p = malloc(n);
      REQUIRE(p != NULL);
      memset(p, 0xab, n);
      if (mlock(p, n) != 0) {
        free(p);
        continue;
      }
      tried++;
      free(p);
      malloc_trim(0);
      unsigned char *q = calloc(1, n);
      REQUIRE(q != NULL);
      size_t bad = nonzero(q, n);
      CHECK_MSG(bad == 0, "calloc(%zu) after a locked block's free and malloc_trim: %zu bytes not zero (%s)", n, bad,
                q == p ? "the same address" : "another address");
      memset(q, 0xcd, n);
      free(q);
    }
  free(keep);
  if (!tried) {
    printf("purge_locked: mlock refused every block (RLIMIT_MEMLOCK): skipped\n");
    return ALLOC_SKIP;
  }
  alloc_api_t api = alloc_api();
  if (api.validate) CHECK(api.validate() == 0);
  printf("purge_locked: %d locked blocks freed, purged and called back\n", tried);
  return check_done();
}
