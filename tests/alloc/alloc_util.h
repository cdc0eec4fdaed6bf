/* Shared helpers for the allocator tests (tests/alloc): access to the larder_* API in
 * every build variant, a small PRNG, address-derived fill patterns, RSS readings and a
 * child-process runner.
 *
 * Three ways a test binary runs:
 *   - linked against liblarder.a (default): larder_* are called directly;
 *   - LARDER_TEST_PRELOADED: built against libc only and run with LD_PRELOAD=liblarder.so;
 *     larder_* are looked up with dlsym and may be absent;
 *   - LARDER_TEST_GLIBC: built before the allocator exists, against glibc; every larder_*
 *     lookup fails and the larder-specific checks are skipped.
 */
#ifndef LARDER_ALLOC_UTIL_H
#define LARDER_ALLOC_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "larder.h"

/* CTest's SKIP_RETURN_CODE for every test in tests/alloc. */
#define ALLOC_SKIP 77

/* ---- the larder API, whichever way the allocator got into the process ---- */
typedef struct alloc_api_s {
  int (*validate)(void);
  void (*stats_get)(larder_stats_t *);
  int (*option_set)(const char *, const char *);
  double (*option_get)(const char *);
  int (*trim)(size_t);
  size_t (*class_stats_get)(larder_class_stats_t *, size_t);
} alloc_api_t;

#if defined(LARDER_TEST_PRELOADED) || defined(LARDER_TEST_GLIBC)
static inline alloc_api_t alloc_api(void) {
  alloc_api_t a;
  /* dlsym returns object pointers; the casts through void* are what POSIX prescribes */
  *(void **)&a.validate = dlsym(RTLD_DEFAULT, "larder_validate");
  *(void **)&a.stats_get = dlsym(RTLD_DEFAULT, "larder_stats_get");
  *(void **)&a.option_set = dlsym(RTLD_DEFAULT, "larder_option_set");
  *(void **)&a.option_get = dlsym(RTLD_DEFAULT, "larder_option_get");
  *(void **)&a.trim = dlsym(RTLD_DEFAULT, "larder_trim");
  *(void **)&a.class_stats_get = dlsym(RTLD_DEFAULT, "larder_class_stats_get");
  return a;
}
#else
static inline alloc_api_t alloc_api(void) {
  alloc_api_t a = {larder_validate, larder_stats_get, larder_option_set, larder_option_get,
                   larder_trim, larder_class_stats_get};
  return a;
}
#endif

/* larder's statistics now (zeroes where the call is absent: the caller checked api first). */
static inline larder_stats_t alloc_stats(const alloc_api_t *api) {
  larder_stats_t st;
  memset(&st, 0, sizeof st);
  api->stats_get(&st);
  return st;
}

/* True when the malloc in effect is larder's (linked or preloaded). */
static inline int alloc_is_larder(void) { return alloc_api().validate != NULL; }

/* ---- PRNG: xorshift64*, one state per thread, reproducible from a printed seed ---- */
static inline uint64_t alloc_rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* The n pointers in a random order (Fisher-Yates), reproducible from the seed: frees in an
 * order unrelated to the addresses, as a server's teardown makes them. */
static inline void alloc_shuffle(void **v, size_t n, uint64_t seed) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(alloc_rng(&seed) % (uint64_t)i);
    void *t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

/* Sizes 1 B .. 1 MiB skewed to small, the shape of real programs: 90% up to 512 B,
 * 9% up to 64 KiB, 1% up to 1 MiB. */
static inline size_t alloc_rand_size(uint64_t *s) {
  uint64_t r = alloc_rng(s);
  unsigned pick = (unsigned)(r % 100);
  uint64_t v = alloc_rng(s);
  if (pick < 90) return 1 + (size_t)(v % 512);
  if (pick < 99) return 1 + (size_t)(v % (64 * 1024));
  return 1 + (size_t)(v % (1024 * 1024));
}

/* ---- patterns: every byte depends on the block's address, size and offset, so a block
 * that overlaps another, or that the allocator scribbled on, is noticed at check time ---- */
static inline uint64_t alloc_pat_word(const void *p, size_t size, size_t i) {
  uint64_t x = ((uint64_t)(uintptr_t)p ^ ((uint64_t)size << 32)) + i * 0x9E3779B97F4A7C15ULL;
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ULL; x ^= x >> 29;
  return x;
}

/* Fills the whole block with its pattern. */
static inline void alloc_fill(void *p, size_t size) {
  unsigned char *b = (unsigned char *)p;
  size_t words = size / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w = alloc_pat_word(p, size, i);
    memcpy(b + i * 8, &w, 8);
  }
  uint64_t last = alloc_pat_word(p, size, words);
  for (size_t j = words * 8; j < size; j++) b[j] = (unsigned char)(last >> (8 * (j % 8)));
}

/* Checks a prefix of `len` bytes of a block that was filled as (orig, size). Returns the
 * offset of the first wrong byte (rounded down to 8 in the whole-word part), or (size_t)-1
 * when all is intact. */
static inline size_t alloc_check_as(const void *p, const void *orig, size_t size, size_t len) {
  const unsigned char *b = (const unsigned char *)p;
  size_t words = size / 8;
  for (size_t i = 0; i < words && i * 8 < len; i++) {
    uint64_t w = alloc_pat_word(orig, size, i);
    size_t n = len - i * 8 < 8 ? len - i * 8 : 8;
    if (memcmp(b + i * 8, &w, n) != 0) return i * 8;
  }
  uint64_t last = alloc_pat_word(orig, size, words);
  for (size_t j = words * 8; j < size && j < len; j++)
    if (b[j] != (unsigned char)(last >> (8 * (j % 8)))) return j;
  return (size_t)-1;
}

static inline size_t alloc_check(const void *p, size_t size) {
  return alloc_check_as(p, p, size, size);
}

/* A block stamped at its first, middle and last byte (from its address and size), for tests
 * that write little of large blocks: a stamp lost means another block overlapped it. */
static inline void alloc_stamp_ends(unsigned char *b, size_t size) {
  unsigned char v = (unsigned char)((uintptr_t)b >> 12 ^ size);
  b[0] = v;
  b[size / 2] = (unsigned char)(v + 1);
  b[size - 1] = (unsigned char)(v + 2);
}
static inline int alloc_stamped_ends(const unsigned char *b, size_t size) {
  unsigned char v = (unsigned char)((uintptr_t)b >> 12 ^ size);
  return b[0] == v && b[size / 2] == (unsigned char)(v + 1) && b[size - 1] == (unsigned char)(v + 2);
}

/* ---- memory readings ---- */
static inline size_t alloc_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long vsz = 0, rss = 0;
  if (!f) return 0;
  if (fscanf(f, "%lu %lu", &vsz, &rss) != 2) rss = 0;
  fclose(f);
  return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

#define ALLOC_MIB(x) ((double)(x) / (1024.0 * 1024.0))

/* ---- child processes ---- */
typedef struct alloc_child_s {
  int status;        /* waitpid status */
  char err[8192];    /* the child's stderr, NUL-terminated, truncated */
} alloc_child_t;

/* Runs this same program again (/proc/self/exe) with argv[1..] = args and extra
 * environment entries `env` (NULL-terminated, may be NULL), capturing stderr. The rest of
 * the environment, LD_PRELOAD included, is inherited. Returns 0, or -1 when the child
 * could not be started. `timeout_s` bounds the child's life with alarm(). */
static inline int alloc_run_self(char *const args[], char *const env[], unsigned timeout_s,
                                 alloc_child_t *out) {
  int fds[2];
  memset(out, 0, sizeof *out);
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)"self";
    for (int i = 0; args && args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    for (int i = 0; env && env[i]; i++) putenv(env[i]);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    alarm(timeout_s);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fds[0], out->err + len, sizeof out->err - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == sizeof out->err - 1) {  /* keep draining so the child never blocks */
      char sink[512];
      while (read(fds[0], sink, sizeof sink) > 0) {}
      break;
    }
  }
  out->err[len] = 0;
  close(fds[0]);
  while (waitpid(pid, &out->status, 0) < 0)
    if (errno != EINTR) return -1;
  return 0;
}

/* malloc(size) and its free, made for what they do to the allocator (a thread's heap made, a
 * slow path's poll): a compiler removes free(malloc(size)) whole (GCC 12 at -O2 does). */
static inline void alloc_call(size_t size) {
  void *volatile p = malloc(size);
  REQUIRE(p != NULL);
  free(p);
}

/* Sleeps ms milliseconds, whatever signals interrupt it. */
static inline void alloc_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* n threads, each running worker((void *)(uintptr_t)(i + 1)) for i < n, all joined. */
static inline void alloc_run_workers(unsigned n, void *(*worker)(void *)) {
  pthread_t t[64];
  REQUIRE(n <= 64);
  for (unsigned i = 0; i < n; i++) REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
  for (unsigned i = 0; i < n; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
}

/* A child of alloc_run_self says which address its misuse names, "addr=0x...\n" on stderr, just
 * before it makes the mistake, so the parent can look for that address in what follows. One
 * write, unbuffered, so that nothing of it is lost when the child is stopped. */
static inline void alloc_announce(const void *p) {
  char line[64];
  int n = snprintf(line, sizeof line, "addr=%p\n", p);
  if (write(2, line, (size_t)n) < 0) _exit(90);
}

/* True when, after a child's announcement (alloc_announce), larder's report ("larder: ...")
 * says `message` and names the announced address. */
static inline int alloc_report_names_announced(const char *err, const char *message) {
  const char *line = strstr(err, "addr=");
  char hex[40] = "";
  if (!line || sscanf(line + 5, "%39s", hex) != 1) return 0;
  const char *report = strstr(line, "larder: ");
  return report && strstr(report, message) && strstr(report, hex);
}

static inline void alloc_describe_status(int status, char *buf, size_t n) {
  if (WIFEXITED(status)) snprintf(buf, n, "exit %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status)) snprintf(buf, n, "signal %d (%s)", WTERMSIG(status),
                                         strsignal(WTERMSIG(status)));
  else snprintf(buf, n, "status 0x%x", status);
}

#endif
