/* errno is the caller's: a call that succeeds leaves it as it was, whatever the allocator did
 * inside (mapping probes, mremap attempts that fail before one that works, purges, start-up,
 * the purge thread's start); a call that fails sets ENOMEM (or EINVAL for an alignment that
 * is not valid), and posix_memalign returns its error without touching errno (POSIX; glibc).
 *
 * Issue 16: after a successful malloc of 4 MiB or more errno read EEXIST (left by the probe of
 * an aligned address), and a glibc test that saves errno around posix_memalign in threads
 * failed on it.
 *
 * Sizes 16 B .. 64 MiB (each power of two and its neighbours), through malloc, calloc,
 * realloc (growing and shrinking, in place and moving), reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc, free, malloc_usable_size and malloc_trim; in the
 * main thread and in two more threads at once (a second thread starts larder's purge thread),
 * twice over so that freed spans are reused from the caches; then in two threads one after the
 * other, which take the heaps the first two left. Run with LARDER_PURGE_DELAY_MS=0
 * too (tests.cmake), so that frees purge and unmap at once. */
#include <malloc.h>
#include <pthread.h>

#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

#include "alloc_util.h"

/* A value no allocator call would produce by itself. */
#define SENTINEL 4242

static atomic_int failures;

#define KEPT(call, what, arg)                                                                          \
  do {                                                                                                 \
    errno = SENTINEL;                                                                                  \
    call;                                                                                              \
    int e_ = errno;                                                                                    \
    if (e_ != SENTINEL) {                                                                              \
      if (atomic_fetch_add(&failures, 1) < 20)                                                         \
        fprintf(stderr, "errno_kept: %s(%zu) changed errno to %d (%s)\n", what, (size_t)(arg), e_, strerror(e_)); \
      CHECK(e_ == SENTINEL);                                                                           \
    }                                                                                                  \
  } while (0)

static size_t sizes[96];
static size_t nsizes;

static void build_sizes(void) {
  for (size_t p = 16; p <= ((size_t)64 << 20); p *= 2) {
    sizes[nsizes++] = p - 1;
    sizes[nsizes++] = p;
    sizes[nsizes++] = p + 1;
  }
}

static void one_size(size_t n) {
  void *p = NULL, *q = NULL;
  KEPT(p = malloc(n), "malloc", n);
  REQUIRE(p != NULL);
  memset(p, 1, n < 4096 ? n : 4096);
  KEPT((void)malloc_usable_size(p), "malloc_usable_size", n);
  /* grow (in place, by mremap, or by moving) and shrink back */
  KEPT(q = realloc(p, n * 2 + 1), "realloc up", n);
  REQUIRE(q != NULL);
  p = q;
  KEPT(q = realloc(p, n / 2 + 1), "realloc down", n);
  REQUIRE(q != NULL);
  p = q;
  KEPT(q = reallocarray(p, 3, n / 3 + 1), "reallocarray", n);
  REQUIRE(q != NULL);
  KEPT(free(q), "free", n);

  KEPT(p = calloc(1, n), "calloc", n);
  REQUIRE(p != NULL);
  KEPT(free(p), "free(calloc)", n);

  const size_t aligns[] = {16, 64, 4096, (size_t)64 << 10, (size_t)1 << 20};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    size_t a = aligns[i];
    int rc = -1;
    KEPT(rc = posix_memalign(&p, a, n), "posix_memalign", n);
    REQUIRE(rc == 0);
    KEPT(free(p), "free(posix_memalign)", n);
    KEPT(p = aligned_alloc(a, n), "aligned_alloc", n);
    REQUIRE(p != NULL);
    KEPT(free(p), "free(aligned_alloc)", n);
    KEPT(p = memalign(a, n), "memalign", n);
    REQUIRE(p != NULL);
    KEPT(free(p), "free(memalign)", n);
  }
  KEPT(p = valloc(n), "valloc", n);
  REQUIRE(p != NULL);
  KEPT(free(p), "free(valloc)", n);
  KEPT(p = pvalloc(n), "pvalloc", n);
  REQUIRE(p != NULL);
  KEPT(free(p), "free(pvalloc)", n);
}

/* Failures: the documented error, or for posix_memalign the return value and errno alone. */
static void failures_set_errno(void) {
  errno = SENTINEL;
  void *p = malloc(SIZE_MAX);
  CHECK_MSG(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX): %p, errno %d", p, errno);
  errno = SENTINEL;
  p = calloc(SIZE_MAX / 2, 3);
  CHECK_MSG(p == NULL && errno == ENOMEM, "calloc overflow: %p, errno %d", p, errno);
  errno = SENTINEL;
  p = memalign((SIZE_MAX >> 1) + 2, 16); /* no power of two to round it up to */
  CHECK_MSG(p == NULL && errno == EINVAL, "memalign(2^63 + 1): %p, errno %d", p, errno);
  void *out = &out;
  errno = SENTINEL;
  int rc = posix_memalign(&out, 64, SIZE_MAX);
  CHECK_MSG(rc == ENOMEM && errno == SENTINEL && out == &out, "posix_memalign(64, SIZE_MAX) = %d, errno %d", rc, errno);
  errno = SENTINEL;
  rc = posix_memalign(&out, 24, 100);
  CHECK_MSG(rc == EINVAL && errno == SENTINEL && out == &out, "posix_memalign(24, 100) = %d, errno %d", rc, errno);
  p = malloc(100);
  REQUIRE(p != NULL);
  errno = SENTINEL;
  void *q = realloc(p, SIZE_MAX);
  CHECK_MSG(q == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX): %p, errno %d", q, errno);
  KEPT(q = realloc(p, 0), "realloc(p, 0)", 0); /* frees: a success */
  CHECK(q == NULL);
  KEPT(free(NULL), "free(NULL)", 0);
  KEPT((void)malloc_trim(0), "malloc_trim", 0);
}

static void *worker(void *arg) {
  (void)arg;
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < nsizes; i++) one_size(sizes[i]);
  failures_set_errno();
  return NULL;
}

int main(void) {
  build_sizes();
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < nsizes; i++) one_size(sizes[i]);
  failures_set_errno();
  pthread_t t[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&t[i], NULL, worker, NULL) == 0);
  for (size_t i = 0; i < nsizes; i++) one_size(sizes[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  /* Threads that take the heaps the two left (parked at their exit, taken whole by the next
   * thread): the slow paths reach errno through the heap (heap_t, errno_at), which must be the
   * new thread's, not the old one's */
  for (int i = 0; i < 2; i++) {
    REQUIRE(pthread_create(&t[i], NULL, worker, NULL) == 0);
    pthread_join(t[i], NULL);
  }
  KEPT((void)malloc_trim(0), "malloc_trim", 0);
  printf("errno_kept: %zu sizes 15 B .. 64 MiB + 1, 5 threads, %d calls changed errno, %s\n", nsizes,
         atomic_load(&failures), alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
