/* calloc's zeroes hold where a purge fails. A purged (clean) run of a segment is taken to read
 * zero, so a calloc from it clears nothing; but madvise refuses to purge locked pages (mlock,
 * mlockall: EINVAL), and may be denied outright (a seccomp filter, an emulator: EPERM). A run
 * so refused was filed clean all the same: under mlockall, calloc(1536000) after a free and
 * malloc_trim returned 14 bytes of an earlier block. ld_os_purge now replaces locked pages with
 * new zero ones; a purge that cannot be made leaves the run dirty (which calloc clears) and ends
 * the purge's loops, which must not meet the same run for ever.
 *
 *   locked  each block is mlocked before its free (needs RLIMIT_MEMLOCK: a block that cannot
 *           be locked is skipped; none at all: the test is skipped)
 *   denied  the test's own madvise (which larder's calls reach first, as in no_descriptors.c)
 *           fails every MADV_DONTNEED with EPERM, and counts them
 *
 * For each size (medium spans of 200 KiB to 1.9 MiB, and a 3 MiB large one), three times:
 * malloc, fill with 0xab, (lock,) free (LARDER_MEDIUM_CACHE_KB=0: the span goes back to its
 * segment), malloc_trim(0), which must return, then calloc of the same size: every byte 0. A
 * small block keeps the segment in use, so that it is not unmapped.
 *
 * usage: alloc_purge_failed locked|denied */
#include "alloc_util.h"

#include <malloc.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static int deny;
static atomic_long denied;

int madvise(void *addr, size_t len, int advice) {
  if (deny && advice == MADV_DONTNEED) {
    atomic_fetch_add(&denied, 1);
    errno = EPERM;
    return -1;
  }
  return (int)syscall(SYS_madvise, addr, len, advice);
}

static size_t nonzero(const unsigned char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += p[i] != 0;
  return k;
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "locked") && strcmp(argv[1], "denied"))) {
    fprintf(stderr, "usage: %s locked|denied\n", argv[0]);
    return 2;
  }
  bool lock = strcmp(argv[1], "locked") == 0;
  deny = !lock;
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
      if (lock && mlock(p, n) != 0) {
        free(p);
        continue;
      }
      tried++;
      free(p);
      malloc_trim(0);
      unsigned char *q = calloc(1, n);
      REQUIRE(q != NULL);
      size_t bad = nonzero(q, n);
      CHECK_MSG(bad == 0, "%s: calloc(%zu) after a free and malloc_trim: %zu bytes not zero (%s)", argv[1], n, bad,
                q == p ? "the same address" : "another address");
      memset(q, 0xcd, n);
      free(q);
    }
  free(keep);
  malloc_trim(0);
  if (!tried) {
    printf("purge_failed locked: mlock refused every block (RLIMIT_MEMLOCK): skipped\n");
    return ALLOC_SKIP;
  }
  alloc_api_t api = alloc_api();
  if (api.validate) {
    CHECK(api.validate() == 0);
    if (deny) CHECK_MSG(atomic_load(&denied) > 0, "no purge was tried");
  }
  printf("purge_failed %s: %d blocks freed and called back; %ld purges denied\n", argv[1], tried, atomic_load(&denied));
  return check_done();
}
