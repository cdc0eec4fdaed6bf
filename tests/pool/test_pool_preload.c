/* Runs with LD_PRELOAD=liblarder-pool.so (tests/pool/tests.cmake): the whole malloc family,
 * from several threads, is served by the pool library -- checked by the contract of each
 * call, by the pool's signature in malloc_usable_size (usable = block - 8, 16-byte granules)
 * and by mallinfo2's arena, which only the pool library fills this way. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void *worker(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 2654435761u + 1;
  void *live[128] = {0};
  size_t len[128] = {0};
  for (int i = 0; i < 100000; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    int k = (int)(s % 128);
    if (live[k]) {
      if (((unsigned char *)live[k])[len[k] - 1] != (unsigned char)k) return (void *)1;
      if (s & 8) {
        free(live[k]);
        live[k] = NULL;
        continue;
      }
      size_t n = 1 + (s >> 20) % 5000;
      live[k] = realloc(live[k], n);
      if (!live[k]) return (void *)2;
      len[k] = n;
    } else {
      len[k] = 1 + (s >> 20) % ((s & 16) ? 100 : 9000);
      live[k] = (s & 32) ? calloc(1, len[k]) : malloc(len[k]);
      if (!live[k]) return (void *)3;
      if ((uintptr_t)live[k] & 15) return (void *)4;
    }
    ((unsigned char *)live[k])[len[k] - 1] = (unsigned char)k;
  }
  for (int k = 0; k < 128; k++) free(live[k]);
  return NULL;
}

int main(void) {
  /* the pool's usable sizes: block = 16-rounded n + 8, at least 32; usable = block - 8 */
  for (size_t n = 1; n < 3000; n += 7) {
    void *p = malloc(n);
    REQUIRE(p);
    size_t want = ((n + 8 + 15) & ~(size_t)15) - 8;
    if (want < 24) want = 24;
    size_t got = malloc_usable_size(p);
    CHECK_MSG(got >= want && got <= want + 16, "malloc(%zu): usable %zu, pool would give %zu", n, got, want);
    free(p);
  }
  struct mallinfo2 mi = mallinfo2();
  CHECK_MSG(mi.arena >= (64u << 10) && mi.uordblks < mi.arena, "mallinfo2 arena %zu used %zu", mi.arena, mi.uordblks);

  /* calloc zeroes reused memory */
  unsigned char *d = malloc(4000);
  memset(d, 0xee, 4000);
  free(d);
  unsigned char *z = calloc(1000, 4);
  int zero = 1;
  for (int i = 0; i < 4000; i++) zero &= z[i] == 0;
  CHECK(zero);
  free(z);
  /* volatile: the compiler must not reason about these impossible sizes */
  volatile size_t half = SIZE_MAX / 2, near_max = SIZE_MAX - 4096;
  errno = 0;
  CHECK(calloc(half, 4) == NULL && errno == ENOMEM);
  CHECK(reallocarray(NULL, half, 4) == NULL);

  /* alignment calls */
  for (size_t a = 8; a <= (1u << 20); a <<= 1) {
    void *p = NULL;
    CHECK(posix_memalign(&p, a, 100) == 0 && p && ((uintptr_t)p & (a - 1)) == 0);
    free(p);
    p = aligned_alloc(a, 3 * a);
    CHECK(p && ((uintptr_t)p & (a - 1)) == 0);
    free(p);
    p = memalign(a, 10);
    CHECK(p && ((uintptr_t)p & (a - 1)) == 0);
    free(p);
  }
  void *p = NULL;
  CHECK(posix_memalign(&p, 24, 100) == EINVAL);
  p = valloc(10);
  CHECK(p && ((uintptr_t)p & 4095) == 0);
  free(p);
  p = pvalloc(5000);
  CHECK(p && ((uintptr_t)p & 4095) == 0 && malloc_usable_size(p) >= 8192);
  free(p);

  /* huge requests get their own mapping, zeroed, and realloc moves between the two kinds */
  char *h = malloc(10u << 20);
  REQUIRE(h);
  CHECK(malloc_usable_size(h) >= (10u << 20));
  h[0] = 1;
  h[(10u << 20) - 1] = 2;
  h = realloc(h, 12u << 20);
  REQUIRE(h);
  CHECK(h[0] == 1 && h[(10u << 20) - 1] == 2);
  h = realloc(h, 1000);
  REQUIRE(h);
  CHECK(h[0] == 1);
  h = realloc(h, 9u << 20);
  REQUIRE(h);
  CHECK(h[0] == 1);
  free(h);
  char *hz = calloc(1, 6u << 20);
  CHECK(hz && hz[12345] == 0);
  free(hz);
  CHECK(malloc(near_max) == NULL);

  /* a pool block and a mapping of its own, realloc'ed to impossible sizes: NULL, ENOMEM, the
   * block as it was; and errno left alone by calls that succeed (issue 16) */
  {
    char *blocks[2] = {malloc(3000), malloc(6u << 20)};
    const size_t sizes[2] = {3000, 6u << 20};
    for (int b = 0; b < 2; b++) {
      REQUIRE(blocks[b]);
      memset(blocks[b], 0x5c, sizes[b]);
      size_t usable = malloc_usable_size(blocks[b]);
      volatile size_t targets[] = {SIZE_MAX, SIZE_MAX - 100, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX};
      for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        errno = 0;
        CHECK_MSG(realloc(blocks[b], targets[k]) == NULL && errno == ENOMEM, "realloc(%zu -> %zu): errno %d", sizes[b],
                  (size_t)targets[k], errno);
      }
      CHECK(malloc_usable_size(blocks[b]) == usable);
      CHECK(blocks[b][0] == 0x5c && blocks[b][sizes[b] - 1] == 0x5c);
      errno = 4242;
      char *g = realloc(blocks[b], sizes[b] * 2);
      CHECK(g && errno == 4242 && g[0] == 0x5c);
      void *a = NULL;
      CHECK(posix_memalign(&a, 1u << 16, 5u << 20) == 0 && errno == 4242);
      free(a);
      free(g);
      CHECK(errno == 4242);
    }
  }

  /* threads share the pool under its lock */
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    CHECK_MSG(r == NULL, "worker %d failed with %p", i, r);
  }
  /* fork while another thread allocates: the child can allocate */
  pthread_create(&t[0], NULL, worker, (void *)(uintptr_t)9);
  pid_t pid = fork();
  if (pid == 0) {
    void *c = malloc(1000);
    free(c);
    _exit(c ? 0 : 1);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pthread_join(t[0], NULL);
  return check_done();
}
