/* calloc returns zeroed memory, every usable byte of it (malloc_usable_size, as glibc,
 * jemalloc, tcmalloc and mimalloc clear), also when the memory is reused: malloc, dirty every byte,
 * free, then calloc the same sizes (small classes, large spans and the large span cache all
 * hand back dirty memory unless calloc clears it; a cached span grown for a bigger calloc
 * is dirty in its old part only). calloc with count*size overflowing gives
 * NULL and ENOMEM; calloc(0, n) and calloc(n, 0) give unique freeable pointers. */
#include <malloc.h>

#include "alloc_util.h"

static const size_t sizes[] = {1, 15, 16, 48, 100, 512, 1000, 4096, 8000, 30000, 40000,
                               65536, 200000, 1 << 20, 5 << 20, 12 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define PER_SIZE 32

/* The bytes past the request are read through a pointer the compiler cannot follow back to the
 * call: it takes the request for the object's size (alloc_size), and UBSan's object-size check
 * would call the read of the usable bytes out of bounds, though malloc_usable_size gives them. */
static size_t count_nonzero(const void *p, size_t n) {
  const unsigned char *volatile laundered = p;
  const unsigned char *c = laundered;
  size_t nz = 0;
  for (size_t i = 0; i < n; i++) nz += c[i] != 0;
  return nz;
}

int main(void) {
  for (int round = 0; round < 3; round++) {
    for (size_t s = 0; s < NSIZES; s++) {
      size_t n = sizes[s] >= (1 << 20) ? 4 : PER_SIZE;
      void *blk[PER_SIZE];
      /* Dirty: every usable byte set, so reuse of any part of the block is visible. */
      for (size_t i = 0; i < n; i++) {
        blk[i] = malloc(sizes[s]);
        REQUIRE(blk[i] != NULL);
        memset(blk[i], 0xA5, malloc_usable_size(blk[i]));
      }
      for (size_t i = 0; i < n; i++) free(blk[i]);
      /* Same sizes again, now through calloc, in both argument orders. */
      for (size_t i = 0; i < n; i++) {
        blk[i] = (i & 1) ? calloc(sizes[s], 1) : calloc(1, sizes[s]);
        REQUIRE(blk[i] != NULL);
        size_t nz = count_nonzero(blk[i], malloc_usable_size(blk[i]));
        CHECK_MSG(nz == 0, "round %d: calloc(%zu) at %p has %zu non-zero bytes of %zu usable", round, sizes[s],
                  blk[i], nz, malloc_usable_size(blk[i]));
        memset(blk[i], 0x5A, malloc_usable_size(blk[i]));
      }
      for (size_t i = 0; i < n; i++) free(blk[i]);
    }
  }

  /* A calloc bigger than any freed block: larder grows a cached span with mremap, whose old
   * bytes are dirty and whose new pages are zero; both parts must read as zero. */
  {
    const size_t from[] = {(size_t)3 << 20, (size_t)5 << 20, (size_t)9 << 20};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) {
      char *volatile d = malloc(from[i]);
      REQUIRE(d != NULL);
      memset(d, 0xA5, malloc_usable_size(d));
      free(d);
      size_t n = from[i] * 3 + 12345;
      char *z = calloc(1, n);
      REQUIRE(z != NULL);
      size_t nz = count_nonzero(z, malloc_usable_size(z));
      CHECK_MSG(nz == 0, "calloc(%zu) after freeing %zu dirty bytes: %zu non-zero bytes", n, from[i], nz);
      free(z);
    }
  }

  /* Every size up to 288 bytes, from blocks dirtied to their last byte: a small calloc clears
   * whole 16-byte granules with straight stores up to 128 bytes (alloc.c, zero_granules), and
   * a wrong case would leave one granule dirty. The blocks stay live until all are checked. */
  {
    enum { TOP = 288, EACH = 4 };
    static void *blk[TOP + 1][EACH];
    for (size_t n = 0; n <= TOP; n++)
      for (int i = 0; i < EACH; i++) {
        blk[n][i] = malloc(n);
        REQUIRE(blk[n][i] != NULL);
        memset(blk[n][i], 0xA5, malloc_usable_size(blk[n][i]));
      }
    for (size_t n = 0; n <= TOP; n++)
      for (int i = 0; i < EACH; i++) free(blk[n][i]);
    for (size_t n = 0; n <= TOP; n++)
      for (int i = 0; i < EACH; i++) {
        blk[n][i] = (i & 1) ? calloc(n, 1) : calloc(1, n);
        REQUIRE(blk[n][i] != NULL);
        size_t nz = count_nonzero(blk[n][i], malloc_usable_size(blk[n][i]));
        CHECK_MSG(nz == 0, "calloc(%zu) at %p reused dirty: %zu non-zero bytes of %zu usable", n, blk[n][i], nz,
                  malloc_usable_size(blk[n][i]));
      }
    for (size_t n = 0; n <= TOP; n++)
      for (int i = 0; i < EACH; i++) free(blk[n][i]);
  }

  /* A count*size product that is not a size class of its own. */
  {
    unsigned *v = calloc(12345, sizeof *v);
    REQUIRE(v != NULL);
    CHECK(count_nonzero(v, malloc_usable_size(v)) == 0);
    free(v);
  }

  /* Overflow of count*size: NULL and ENOMEM. */
  {
    const size_t pairs[][2] = {{SIZE_MAX, 2}, {2, SIZE_MAX}, {SIZE_MAX / 2 + 1, 2},
                               {(size_t)1 << 32, (size_t)1 << 32}, {SIZE_MAX, SIZE_MAX},
                               {SIZE_MAX / 16 + 1, 16}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
      errno = 0;
      void *p = calloc(pairs[i][0], pairs[i][1]);
      CHECK_MSG(p == NULL && errno == ENOMEM, "calloc(%zu, %zu) = %p errno %d", pairs[i][0],
                pairs[i][1], p, errno);
      free(p);
    }
    /* No overflow, but far more than any address space. */
    errno = 0;
    void *p = calloc((size_t)1 << 25, (size_t)1 << 25);
    CHECK_MSG(p == NULL && errno == ENOMEM, "calloc(2^25, 2^25) = %p errno %d", p, errno);
    free(p);
  }

  /* Zero-sized requests are unique pointers (glibc; larder follows it). */
  {
    void *a = calloc(0, 10), *b = calloc(10, 0), *c = calloc(0, 0);
    CHECK(a != NULL && b != NULL && c != NULL);
    CHECK(a != b && b != c && a != c);
    free(a);
    free(b);
    free(c);
  }

  printf("api_calloc: %zu sizes x 3 rounds, %s\n", NSIZES, alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
