/* Error contracts (DESIGN §1: out of memory and size overflow give NULL with errno ENOMEM,
 * never a crash):
 * - sizes near SIZE_MAX, and sizes beyond any address space, through every entry point;
 * - posix_memalign returns EINVAL for an alignment that is not a power of two multiple of
 *   sizeof(void *) (0, 1, 2, 3, 4, 12, 24, 48, ...), and ENOMEM for a huge size;
 * - an absurd alignment either fails with ENOMEM/EINVAL or is honoured, never crashes;
 * - a size the machine could never back fails, under the kernel's overcommit heuristic. */
#include <malloc.h>
#include <sys/sysinfo.h>

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

  /* More than the machine could ever back (4 x RAM + swap), yet within the address space:
   * under the kernel's default overcommit heuristic (or strict accounting) the mapping is
   * refused, so malloc, calloc, memalign and realloc give NULL and ENOMEM, as glibc's do.
   * larder maps large spans without MAP_NORESERVE for this (os.c, ld_os_map_committed);
   * before, malloc(2^45) succeeded and left 256 MiB of its ownership map resident. */
  {
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = -1;
    if (f) {
      if (fscanf(f, "%d", &mode) != 1) mode = -1;
      fclose(f);
    }
    struct sysinfo si;
    if ((mode == 0 || mode == 2) && sysinfo(&si) == 0) {
      size_t backing = ((size_t)si.totalram + (size_t)si.totalswap) * si.mem_unit;
      size_t n = (size_t)1 << 36;
      while (n < 4 * backing && n < ((size_t)1 << 46)) n <<= 1;
      if (n >= 4 * backing) {
        EXPECT_ENOMEM(malloc(n), "malloc(4 x RAM+swap)", n);
        EXPECT_ENOMEM(calloc(1, n), "calloc(4 x RAM+swap)", n);
        EXPECT_ENOMEM(memalign((size_t)1 << 20, n), "memalign(1 MiB, 4 x RAM+swap)", n);
        char *p = malloc((size_t)8 << 20);
        REQUIRE(p != NULL);
        memset(p, 0x3c, (size_t)8 << 20);
        errno = 0;
        void *q = realloc(p, n);
        CHECK_MSG(q == NULL && errno == ENOMEM, "realloc(8 MiB -> %zu) = %p, errno %d", n, q, errno);
        if (q) p = q;
        else CHECK(p[0] == 0x3c && p[((size_t)8 << 20) - 1] == 0x3c);
        free(p);
      }
    }
  }

  printf("api_errors: %zu huge sizes x 11 entry points, %s\n", NHUGE,
         alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
