/* realloc and reallocarray semantics.
 *
 * - realloc(NULL, n) behaves as malloc(n);
 * - growing and shrinking keep the common prefix, across every pair of sizes in a ladder that
 *   crosses small classes, the small/large split and large spans;
 * - realloc(p, 0) follows glibc: it frees p and returns NULL (glibc's REALLOC_ZERO_BYTES_FREES);
 *   with larder we also see the block leave bytes_in_use;
 * - a realloc or reallocarray that fails (huge size, count*size overflow) returns NULL with
 *   errno ENOMEM and leaves the old block valid and unchanged. */
#include <malloc.h>

/* The overflowing products below are the point of the test. */
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

#include "alloc_util.h"

static const size_t ladder[] = {1, 8, 16, 17, 24, 100, 256, 1000, 4096, 5000, 16384, 32767,
                                32768, 32769, 65536, 100000, 262144, 1 << 20, 3 << 20, 9 << 20};
#define NLADDER (sizeof ladder / sizeof ladder[0])

int main(void) {
  alloc_api_t api = alloc_api();

  /* realloc(NULL, n) allocates. */
  void *p = realloc(NULL, 100);
  REQUIRE(p != NULL);
  alloc_fill(p, 100);
  CHECK(malloc_usable_size(p) >= 100);
  free(p);

  /* Every pair (from, to): the prefix survives, the tail is writable. */
  for (size_t i = 0; i < NLADDER; i++) {
    for (size_t j = 0; j < NLADDER; j++) {
      size_t from = ladder[i], to = ladder[j];
      void *a = malloc(from);
      REQUIRE(a != NULL);
      alloc_fill(a, from);
      void *b = realloc(a, to);
      CHECK_MSG(b != NULL, "realloc(%zu -> %zu) returned NULL", from, to);
      if (!b) { free(a); continue; }
      CHECK_MSG((uintptr_t)b % 16 == 0, "realloc(%zu -> %zu) = %p misaligned", from, to, b);
      size_t keep = from < to ? from : to;
      size_t bad = alloc_check_as(b, a, from, keep);
      CHECK_MSG(bad == (size_t)-1, "realloc(%zu -> %zu): prefix differs at %zu", from, to, bad);
      CHECK_MSG(malloc_usable_size(b) >= to, "realloc(%zu -> %zu): usable %zu", from, to,
                malloc_usable_size(b));
      memset(b, 0x5A, to);
      free(b);
    }
  }

  /* A chain of growth steps, as a vector that doubles, then shrinking back. */
  {
    size_t n = 16;
    unsigned char *v = malloc(n);
    REQUIRE(v != NULL);
    for (size_t k = 0; k < n; k++) v[k] = (unsigned char)(k * 7);
    while (n < (8u << 20)) {
      size_t m = n * 2;
      unsigned char *w = realloc(v, m);
      REQUIRE(w != NULL);
      for (size_t k = 0; k < n; k++)
        if (w[k] != (unsigned char)(k * 7)) { CHECK_MSG(0, "growth to %zu lost byte %zu", m, k); break; }
      for (size_t k = n; k < m; k++) w[k] = (unsigned char)(k * 7);
      v = w;
      n = m;
    }
    while (n > 8) {
      n /= 3;
      unsigned char *w = realloc(v, n);
      REQUIRE(w != NULL);
      for (size_t k = 0; k < n; k++)
        if (w[k] != (unsigned char)(k * 7)) { CHECK_MSG(0, "shrink to %zu lost byte %zu", n, k); break; }
      v = w;
    }
    free(v);
  }

  /* Blocks from the aligned entry points can be reallocated like any other. */
  {
    const size_t aligns[] = {32, 64, 256, 4096, 65536};
    const size_t sizes[] = {10, 100, 5000, 40000, 300000};
    for (size_t i = 0; i < 5; i++)
      for (size_t j = 0; j < 5; j++) {
        void *a = NULL;
        REQUIRE(posix_memalign(&a, aligns[i], sizes[j]) == 0);
        alloc_fill(a, sizes[j]);
        const size_t to[] = {sizes[j] / 2 + 1, sizes[j] * 3};
        for (int k = 0; k < 2; k++) {
          void *b = realloc(a, to[k]);
          REQUIRE(b != NULL);
          size_t keep = to[k] < sizes[j] ? to[k] : sizes[j];
          size_t bad = alloc_check_as(b, a, sizes[j], keep);
          CHECK_MSG(bad == (size_t)-1, "realloc of a %zu-aligned %zu-byte block to %zu: byte %zu differs",
                    aligns[i], sizes[j], to[k], bad);
          CHECK(malloc_usable_size(b) >= to[k]);
          free(b);
          if (k == 0) {
            REQUIRE(posix_memalign(&a, aligns[i], sizes[j]) == 0);
            alloc_fill(a, sizes[j]);
          }
        }
      }
  }

  /* realloc(p, 0) frees and returns NULL, as glibc does. */
  {
    larder_stats_t before, after;
    void *q = malloc(200000);
    REQUIRE(q != NULL);
    if (api.stats_get) api.stats_get(&before);
    errno = 0;
    void *r = realloc(q, 0);
    CHECK_MSG(r == NULL, "realloc(p, 0) returned %p; glibc frees and returns NULL", r);
    if (r) free(r);
    if (api.stats_get) {
      api.stats_get(&after);
      CHECK_MSG(after.bytes_in_use + 200000 <= before.bytes_in_use,
                "realloc(p, 0) did not free: bytes_in_use %zu -> %zu", before.bytes_in_use,
                after.bytes_in_use);
    }
    /* realloc(NULL, 0) is malloc(0): a unique, freeable pointer (glibc). */
    void *z1 = realloc(NULL, 0), *z2 = realloc(NULL, 0);
    CHECK(z1 != NULL && z2 != NULL && z1 != z2);
    free(z1);
    free(z2);
  }

  /* Failure leaves the old block alone. */
  {
    void *q = malloc(1000);
    REQUIRE(q != NULL);
    alloc_fill(q, 1000);
    const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, SIZE_MAX / 2 + 1,
                           (size_t)PTRDIFF_MAX + 1, (size_t)1 << 50};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
      errno = 0;
      void *r = realloc(q, huge[i]);
      CHECK_MSG(r == NULL && errno == ENOMEM, "realloc(p, %zu) = %p errno %d", huge[i], r, errno);
      if (r) { q = r; continue; }
      CHECK_MSG(alloc_check(q, 1000) == (size_t)-1, "failed realloc(%zu) changed the block", huge[i]);
    }
    /* reallocarray: count*size overflows size_t. */
    errno = 0;
    void *r = reallocarray(q, SIZE_MAX / 8 + 2, 8);
    CHECK_MSG(r == NULL && errno == ENOMEM, "reallocarray overflow = %p errno %d", r, errno);
    errno = 0;
    r = reallocarray(q, (size_t)1 << 33, (size_t)1 << 33);
    CHECK_MSG(r == NULL && errno == ENOMEM, "reallocarray 2^33*2^33 = %p errno %d", r, errno);
    CHECK(alloc_check(q, 1000) == (size_t)-1);
    /* reallocarray that fits behaves as realloc. */
    r = reallocarray(q, 250, 8);
    REQUIRE(r != NULL);
    CHECK(alloc_check_as(r, q, 1000, 1000) == (size_t)-1);
    free(r);
    r = reallocarray(NULL, 3, 5);
    CHECK(r != NULL && malloc_usable_size(r) >= 15);
    free(r);
  }

  printf("api_realloc: %zu x %zu size pairs, %s\n", NLADDER, NLADDER,
         alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
