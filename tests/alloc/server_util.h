/* Helpers shared by the server-scale tests (tests/alloc/server.cmake): readings that do not
 * allocate (so polling RSS while the process "makes no calls" really makes none), minor
 * faults, and the rule for running the allocator-independent checks under another allocator.
 *
 * Every test here runs its workload under any allocator and prints its figures. The
 * larder-specific assertions need larder's statistics; under glibc (LARDER_TEST_GLIBC) or a
 * preloaded foreign allocator they are skipped and the test exits 77. With
 * LARDER_TEST_ASSERT_ANY=1 in the environment the allocator-independent bounds (RSS, page
 * faults) are asserted under any allocator too: that is how the bounds were checked to be
 * reachable by glibc, jemalloc or mimalloc (LD_PRELOAD of the foreign library into the
 * *_libc build). */
#ifndef LARDER_SERVER_UTIL_H
#define LARDER_SERVER_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* before any system header, as alloc_util.h needs */
#endif
#include <sys/resource.h>
#include <time.h>

#include "alloc_util.h"

/* RSS and VmSize in bytes from /proc/self/statm with read(2) on a stack buffer. */
static inline size_t srv_statm(size_t *vsize) {
  char buf[128];
  if (vsize) *vsize = 0;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long vs = 0, rs = 0;
  char *e;
  vs = strtoull(buf, &e, 10);
  rs = strtoull(e, NULL, 10);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (vsize) *vsize = (size_t)vs * page;
  return (size_t)rs * page;
}

static inline size_t srv_rss(void) { return srv_statm(NULL); }

static inline long srv_minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static inline double srv_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void srv_sleep_ms(double ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000) * 1e6);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* True when the allocator-independent bounds are to be asserted whatever the allocator. */
static inline int srv_assert_any(void) {
  const char *e = getenv("LARDER_TEST_ASSERT_ANY");
  return e && *e && strcmp(e, "0") != 0;
}

/* Touches one byte in every page of [p, p+n) and the last byte. */
static inline void srv_touch(void *p, size_t n, unsigned char v) {
  unsigned char *b = (unsigned char *)p;
  if (n == 0) return;
  for (size_t o = 0; o < n; o += 4096) b[o] = v;
  b[n - 1] = v;
}

#endif
