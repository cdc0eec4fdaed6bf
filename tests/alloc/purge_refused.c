/* A purge the OS refuses leaves the memory as it was, and larder knows it. Where madvise is
 * denied (a seccomp filter, an emulator: EPERM or ENOSYS), a run whose purge failed was filed
 * clean, taken to read zero, and a calloc from it cleared nothing; and a loop that purges
 * until no run is old must not meet the same run again for ever (it is filed again as new).
 *
 * The test defines madvise, which larder's calls reach first (as in no_descriptors.c): every
 * MADV_DONTNEED fails with EPERM, and is counted. Then, with LARDER_MEDIUM_CACHE_KB=0: medium
 * and large blocks filled with 0xab, freed, malloc_trim(0) (which must return), calloc of the
 * same size: every byte 0. Under larder the purge must have been tried (and refused). */
#include "alloc_util.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static atomic_long refused;

int madvise(void *addr, size_t len, int advice) {
  if (advice == MADV_DONTNEED) {
    atomic_fetch_add(&refused, 1);
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

int main(void) {
  void *keep = malloc(100);
  REQUIRE(keep != NULL);
  const size_t sizes[] = {200 << 10, 700 << 10, 1536000, 1900 << 10, 3 << 20};
  for (int round = 0; round < 3; round++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      unsigned char *p = malloc(n);
      REQUIRE(p != NULL);
      memset(p, 0xab, n);
      free(p);
      malloc_trim(0);
      unsigned char *q = calloc(1, n);
      REQUIRE(q != NULL);
      size_t bad = nonzero(q, n);
      CHECK_MSG(bad == 0, "calloc(%zu) after a free and a refused purge: %zu bytes not zero (%s)", n, bad,
                q == p ? "the same address" : "another address");
      memset(q, 0xcd, n);
      free(q);
    }
  free(keep);
  malloc_trim(0);
  alloc_api_t api = alloc_api();
  if (api.validate) {
    CHECK(api.validate() == 0);
    CHECK_MSG(atomic_load(&refused) > 0, "no purge was tried");
  }
  printf("purge_refused: %ld purges refused\n", atomic_load(&refused));
  return check_done();
}
