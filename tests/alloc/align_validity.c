/* Which alignments each aligned entry point accepts, and what it does with the others.
 *
 * aligned_alloc: C17 (DR 460) makes an alignment the implementation does not support an
 *   error; glibc 2.38 and later return NULL with EINVAL for every alignment that is not a
 *   power of two, 0 included (malloc.c aligned_alloc; glibc's tst-aligned-alloc.c asks
 *   aligned_alloc(65, 64) and aligned_alloc(0, 64) to fail). A power of two too large to
 *   serve (2^63) is NULL with ENOMEM.
 * memalign: glibc's behaviour, measured on glibc 2.36 (docs/hardening.md): an alignment that
 *   is not a power of two is rounded up to the next one (memalign(65, 64) is 128-aligned), 0
 *   serves as 1, one above 2^63 (no power of two to round to) is EINVAL, 2^63 is ENOMEM.
 * posix_memalign: EINVAL returned for anything but a power of two multiple of sizeof(void *),
 *   ENOMEM for 2^63, errno untouched either way, *out untouched on failure.
 *
 * Built against glibc itself (LARDER_TEST_GLIBC) the aligned_alloc checks apply from glibc
 * 2.38 on; glibc 2.36 still accepts any alignment there. */
#include <gnu/libc-version.h>
#include <malloc.h>

#include "alloc_util.h"

#define SENTINEL 4242

static void want_einval(void *p, int e, const char *call, size_t a) {
  CHECK_MSG(p == NULL && e == EINVAL, "%s(%zu, 64) = %p, errno %d: want NULL, EINVAL", call, a, p, e);
  free(p);
}

int main(void) {
  int c17 = 1;
  if (!alloc_is_larder()) {
    int major = 0, minor = 0;
    sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
    c17 = major > 2 || (major == 2 && minor >= 38);
  }
  const size_t not_pow2[] = {0, 3, 12, 24, 65, 100, 4097, 65535, 3 << 12, (SIZE_MAX >> 1) + 3, SIZE_MAX};
  int n_aligned_alloc = 0;
  for (size_t i = 0; i < sizeof not_pow2 / sizeof not_pow2[0]; i++) {
    size_t a = not_pow2[i];
    if (c17) {
      errno = SENTINEL;
      void *p = aligned_alloc(a, 64);
      want_einval(p, errno, "aligned_alloc", a);
      n_aligned_alloc++;
    }
    void *out = &out;
    errno = SENTINEL;
    int rc = posix_memalign(&out, a, 64);
    CHECK_MSG(rc == EINVAL && errno == SENTINEL && out == &out, "posix_memalign(%zu, 64) = %d, errno %d", a, rc, errno);
  }

  /* Powers of two from 1 to 1 MiB: aligned_alloc serves them all, at least 16-aligned. */
  for (size_t a = 1; a <= ((size_t)1 << 20); a *= 2) {
    errno = SENTINEL;
    void *p = aligned_alloc(a, 64);
    CHECK_MSG(p != NULL && errno == SENTINEL, "aligned_alloc(%zu, 64) = %p, errno %d", a, p, errno);
    if (p) CHECK_MSG((uintptr_t)p % a == 0, "aligned_alloc(%zu, 64) = %p misaligned", a, p);
    free(p);
  }

  /* memalign rounds up: the result is aligned to the next power of two. */
  const size_t round_up[][2] = {{0, 1}, {3, 4}, {24, 32}, {65, 128}, {100, 128}, {4097, 8192}, {65535, 65536},
                                {(3 << 16) + 1, 1 << 18}};
  for (size_t i = 0; i < sizeof round_up / sizeof round_up[0]; i++) {
    errno = SENTINEL;
    void *p = memalign(round_up[i][0], 64);
    CHECK_MSG(p != NULL && errno == SENTINEL, "memalign(%zu, 64) = %p, errno %d", round_up[i][0], p, errno);
    if (p) CHECK_MSG((uintptr_t)p % round_up[i][1] == 0, "memalign(%zu, 64) = %p: not %zu-aligned", round_up[i][0], p,
                     round_up[i][1]);
    if (p) CHECK_MSG(malloc_usable_size(p) >= 64, "memalign(%zu, 64): usable %zu", round_up[i][0], malloc_usable_size(p));
    free(p);
  }
  errno = SENTINEL;
  void *p = memalign((SIZE_MAX >> 1) + 2, 64);
  CHECK_MSG(p == NULL && errno == EINVAL, "memalign(2^63 + 1, 64) = %p, errno %d: want NULL, EINVAL", p, errno);
  p = memalign(SIZE_MAX, 64);
  CHECK_MSG(p == NULL && errno == EINVAL, "memalign(SIZE_MAX, 64) = %p, errno %d: want NULL, EINVAL", p, errno);

  /* 2^63, a power of two no machine can honour: ENOMEM from every entry point. */
  size_t top = (SIZE_MAX >> 1) + 1;
  errno = SENTINEL;
  p = aligned_alloc(top, 64);
  CHECK_MSG(p == NULL && errno == ENOMEM, "aligned_alloc(2^63, 64) = %p, errno %d: want NULL, ENOMEM", p, errno);
  errno = SENTINEL;
  p = memalign(top, 64);
  CHECK_MSG(p == NULL && errno == ENOMEM, "memalign(2^63, 64) = %p, errno %d: want NULL, ENOMEM", p, errno);
  void *out = &out;
  errno = SENTINEL;
  int rc = posix_memalign(&out, top, 64);
  CHECK_MSG(rc == ENOMEM && errno == SENTINEL && out == &out, "posix_memalign(2^63, 64) = %d, errno %d", rc, errno);

  printf("align_validity: %d aligned_alloc refusals, %s (%s)\n", n_aligned_alloc,
         alloc_is_larder() ? "larder" : "glibc", gnu_get_libc_version());
  return check_done();
}
