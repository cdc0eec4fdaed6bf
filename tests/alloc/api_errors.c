/* Error contracts (DESIGN §1: out of memory and size overflow give NULL with errno ENOMEM,
 * never a crash):
 * - sizes near SIZE_MAX, and sizes beyond any address space, through every entry point;
 * - posix_memalign returns EINVAL for an alignment that is not a power of two multiple of
 *   sizeof(void *) (0, 1, 2, 3, 4, 12, 24, 48, ...), and ENOMEM for a huge size;
 * - an absurd alignment either fails with ENOMEM/EINVAL or is honoured, never crashes. */
#include <malloc.h>

#include "alloc_util.h"

static const size_t huge[] = {SIZE_MAX,           SIZE_MAX - 1,       SIZE_MAX - 15,
                              SIZE_MAX - 4096,    SIZE_MAX - 65536,   SIZE_MAX - (1 << 20),
                              SIZE_MAX / 2 + 1,   (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1,
                              (size_t)1 << 50,    (size_t)1 << 48};
#define NHUGE (sizeof huge / sizeof huge[0])

#define EXPECT_ENOMEM(call, desc, arg)                                                        \
  do {                                                                                        \
    errno = 0;                                                                                \
    void *r_ = (call);                                                                        \
    CHECK_MSG(r_ == NULL && errno == ENOMEM, "%s(%zu) = %p, errno %d (want NULL, ENOMEM)",   \
              desc, (size_t)(arg), r_, errno);                                                \
    free(r_);                                                                                 \
  } while (0)

int main(void) {
  for (size_t i = 0; i < NHUGE; i++) {
    size_t n = huge[i];
    EXPECT_ENOMEM(malloc(n), "malloc", n);
    EXPECT_ENOMEM(calloc(1, n), "calloc(1, n)", n);
    EXPECT_ENOMEM(realloc(NULL, n), "realloc(NULL, n)", n);
    EXPECT_ENOMEM(reallocarray(NULL, 1, n), "reallocarray(NULL, 1, n)", n);
    EXPECT_ENOMEM(memalign(64, n), "memalign(64, n)", n);
    EXPECT_ENOMEM(memalign(65536, n), "memalign(65536, n)", n);
    EXPECT_ENOMEM(aligned_alloc(16, n), "aligned_alloc(16, n)", n);
    EXPECT_ENOMEM(aligned_alloc(4096, n), "aligned_alloc(4096, n)", n);
    EXPECT_ENOMEM(valloc(n), "valloc", n);
    EXPECT_ENOMEM(pvalloc(n), "pvalloc", n);
    void *p = (void *)0x1;
    int rc = posix_memalign(&p, 64, n);
    CHECK_MSG(rc == ENOMEM, "posix_memalign(64, %zu) = %d (want ENOMEM)", n, rc);
    if (rc == 0) free(p);
  }

  /* A failure must not poison the heap: ordinary requests still work afterwards. */
  {
    void *p = malloc(100), *q = malloc(1 << 20);
    CHECK(p != NULL && q != NULL);
    if (p) memset(p, 1, 100);
    if (q) memset(q, 1, 1 << 20);
    free(p);
    free(q);
  }

  /* posix_memalign: EINVAL for a bad alignment, and the size does not matter. */
  {
    const size_t bad[] = {0, 1, 2, 3, 4, 5, 12, 24, 48, 96, 100, 4097, 65535, 3 << 12,
                          SIZE_MAX, SIZE_MAX / 2 + 3};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      const size_t sz[] = {0, 1, 64, 100000};
      for (size_t j = 0; j < 4; j++) {
        void *p = NULL;
        int rc = posix_memalign(&p, bad[i], sz[j]);
        CHECK_MSG(rc == EINVAL, "posix_memalign(%zu, %zu) = %d (want EINVAL)", bad[i], sz[j], rc);
        if (rc == 0) free(p);
      }
    }
    /* The smallest valid one, sizeof(void *). */
    void *p = NULL;
    CHECK(posix_memalign(&p, sizeof(void *), 10) == 0 && p != NULL);
    free(p);
  }

  /* Absurd alignments: fail cleanly or honour them. */
  {
    const size_t aligns[] = {(size_t)1 << 30, (size_t)1 << 40, (size_t)1 << 62,
                             (size_t)1 << 63};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
      errno = 0;
      void *p = memalign(aligns[i], 16);
      if (p) {
        CHECK_MSG((uintptr_t)p % aligns[i] == 0, "memalign(%zu, 16) = %p misaligned", aligns[i], p);
        free(p);
      } else {
        CHECK_MSG(errno == ENOMEM || errno == EINVAL, "memalign(%zu, 16) failed with errno %d",
                  aligns[i], errno);
      }
      void *q = NULL;
      int rc = posix_memalign(&q, aligns[i], 16);
      if (rc == 0) {
        CHECK_MSG((uintptr_t)q % aligns[i] == 0, "posix_memalign(%zu, 16) = %p misaligned",
                  aligns[i], q);
        free(q);
      } else {
        CHECK_MSG(rc == ENOMEM || rc == EINVAL, "posix_memalign(%zu, 16) = %d", aligns[i], rc);
      }
    }
  }

  printf("api_errors: %zu huge sizes x 11 entry points, %s\n", NHUGE,
         alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
