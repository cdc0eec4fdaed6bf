/* larder never opens a file descriptor behind the program's back. A descriptor the allocator
 * opens, even for a moment, is one the program can see: open(2) and dup2(2) promise the lowest
 * free number, and a program that closes 0 and opens /dev/null expects 0 back; a fork child
 * gets a copy; a program at its descriptor limit fails its own open. Until 2026-11-28 the purge
 * thread read /proc/self/stat at every wake (is it the last thread?): a program that opened
 * /dev/null 4.1 million times while threads came and went got another number than the one it
 * had just closed 43 times, and CPython's test_selectors failed its dup2 with EBUSY.
 *
 * The test defines open, open64, openat and openat64, which every call in the process reaches
 * (liblarder.a's and liblarder.so's calls bind to the program's definitions first), and counts
 * the calls made by any thread but main. Main starts the purge thread (LARDER_PURGE_THREAD=1,
 * 64 MiB mapped and freed), then runs 60 short threads 15 ms apart: each exit wakes the purge
 * thread to ask whether it is now alone, every 10 ms for a second, so it wakes about 100 times.
 * No thread of the test opens anything; the count must stay 0. Under larder the purge thread
 * must have started and run. */
#include "alloc_util.h"

#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <time.h>

static pid_t main_tid;
static atomic_long foreign_opens;

static void note_open(const char *path) {
  if (main_tid && (pid_t)syscall(SYS_gettid) != main_tid) {
    if (atomic_fetch_add(&foreign_opens, 1) == 0) {
      /* (write, not stdio: this may run inside the allocator) */
      static const char msg[] = "no_descriptors: a thread other than main opened ";
      if (write(2, msg, sizeof msg - 1) < 0 || write(2, path, strlen(path)) < 0 || write(2, "\n", 1) < 0) {
      }
    }
  }
}

static int real_open(const char *name, int dirfd, const char *path, int flags, mode_t mode) {
  int (*at)(int, const char *, int, ...) = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, name);
  if (at) return at(dirfd, path, flags, mode);
  return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static mode_t open_mode(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  note_open(path);
  return real_open("openat", AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  note_open(path);
  return real_open("openat64", AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  note_open(path);
  return real_open("openat", dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = open_mode(flags, ap);
  va_end(ap);
  note_open(path);
  return real_open("openat64", dirfd, path, flags, mode);
}

static void *worker(void *arg) {
  (void)arg;
  void *p[64];
  for (int i = 0; i < 64; i++) p[i] = malloc(64 + (size_t)i * 16);
  for (int i = 0; i < 64; i++) free(p[i]);
  return NULL;
}

int main(void) {
  main_tid = (pid_t)syscall(SYS_gettid);
  enum { MIB = 64, THREADS = 60 };
  void *big[MIB];
  for (int i = 0; i < MIB; i++) {
    big[i] = malloc((size_t)1 << 20);
    REQUIRE(big[i] != NULL);
    memset(big[i], 1, (size_t)1 << 20);
  }
  for (int i = 0; i < MIB; i++) free(big[i]);
  alloc_call(32); /* an allocation slow path after the mapping: where the thread starts */
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
    pthread_join(t, NULL);
    alloc_sleep_ms(15);
  }
  long opens = atomic_load(&foreign_opens);
  CHECK_MSG(opens == 0, "%ld opens by threads other than main", opens);
  alloc_api_t api = alloc_api();
  if (api.stats_get) {
    larder_stats_t st = alloc_stats(&api);
    CHECK_MSG(st.purge_thread_starts >= 1, "the purge thread never started");
    CHECK_MSG(st.purge_thread_runs >= 1, "the purge thread never ran");
    printf("purge thread: %zu starts, %zu runs; opens by other threads: %ld\n", (size_t)st.purge_thread_starts,
           (size_t)st.purge_thread_runs, opens);
  }
  return check_done();
}
