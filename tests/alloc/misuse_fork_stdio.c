/* Multithreaded fork while other threads hold stdio locks and allocate (issue 12).
 *
 * glibc's fork runs the atfork prepare handlers first, then takes stdio's list lock
 * (_IO_list_lock), then its own malloc locks: malloc last, because stdio calls malloc with its
 * locks held. An interposed allocator's prepare handler runs before the list lock, so the
 * order is inverted: the forking thread holds the allocator's locks and waits for stdio's list
 * lock, while a thread inside stdio holds a stdio lock and waits for the allocator's lock.
 *
 * Three patterns, each in a process of its own that forks 300 times from its main thread
 * while the other threads run; each fork child allocates, prints to stdout and exits. The
 * parent kills a process that makes no progress within the deadline and reports the deadlock.
 *   flock  - one thread: flockfile(stdout); malloc/free of small to large blocks;
 *            funlockfile(stdout). fork itself takes no FILE lock, so this must never hang.
 *   flush  - the flock thread, plus a thread calling fflush(NULL) in a loop: fflush(NULL) holds
 *            the list lock and waits for stdout's lock, which the flock thread holds while it
 *            waits for larder's lock, which the forking thread holds while it waits for the
 *            list lock: a cycle through three threads, which glibc's own malloc cannot form
 *            (it is locked after the list lock). This is the boundary.
 *   fopen  - one thread: fopen, fprintf (the buffer is malloc'd under the FILE's lock),
 *            fclose (list lock, then free), malloc/free, in a loop.
 * All three pass with glibc's malloc. Which ones pass with larder is what this test shows;
 * docs/hardening.md explains the fix (take stdio's list lock in larder's prepare handler,
 * before larder's own locks, as glibc's malloc is ordered).
 *
 * usage: alloc_misuse_fork_stdio [mode...]   (default: all three) */
#include <pthread.h>
#include <time.h>

#include "alloc_util.h"

static atomic_int stop;
static atomic_long progress;

static void churn(uint64_t *s, void **slot, int slots) {
  int k = (int)(alloc_rng(s) % (uint64_t)slots);
  free(slot[k]);
  unsigned pick = (unsigned)(alloc_rng(s) % 100);
  size_t n = pick < 70 ? 1 + alloc_rng(s) % 512 : pick < 95 ? 20000 + alloc_rng(s) % 100000 : (1u << 20) + alloc_rng(s) % (1u << 20);
  slot[k] = malloc(n);
  if (slot[k]) ((char *)slot[k])[0] = 1;
}

static void *flock_thread(void *arg) {
  (void)arg;
  uint64_t s = 11;
  void *slot[32] = {0};
  while (!atomic_load(&stop)) {
    flockfile(stdout);
    for (int i = 0; i < 8; i++) churn(&s, slot, 32);
    funlockfile(stdout);
    atomic_fetch_add(&progress, 1);
  }
  for (int k = 0; k < 32; k++) free(slot[k]);
  return NULL;
}

static void *flush_thread(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    fflush(NULL);
    atomic_fetch_add(&progress, 1);
  }
  return NULL;
}

static void *fopen_thread(void *arg) {
  (void)arg;
  uint64_t s = 13;
  void *slot[32] = {0};
  while (!atomic_load(&stop)) {
    FILE *f = fopen("/dev/null", "w");
    if (f) {
      fprintf(f, "%d %s\n", 42, "a line that fills the stream's malloc'd buffer");
      fclose(f);
    }
    churn(&s, slot, 32);
    atomic_fetch_add(&progress, 1);
  }
  for (int k = 0; k < 32; k++) free(slot[k]);
  return NULL;
}

static int forker(const char *mode) {
  pthread_t t[2];
  int n = 0;
  if (strcmp(mode, "flock") == 0 || strcmp(mode, "flush") == 0) pthread_create(&t[n++], NULL, flock_thread, NULL);
  if (strcmp(mode, "flush") == 0) pthread_create(&t[n++], NULL, flush_thread, NULL);
  if (strcmp(mode, "fopen") == 0) pthread_create(&t[n++], NULL, fopen_thread, NULL);
  if (n == 0) return 2;
  for (int r = 0; r < 300; r++) {
    usleep(300);
    pid_t pid = fork();
    if (pid < 0) return 3;
    if (pid == 0) {
      void *volatile p = malloc(100), *volatile q = malloc(200000);
      printf("child %d\n", r);
      fflush(stdout);
      free(p);
      free(q);
      _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
      if (errno != EINTR) return 4;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 5;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run(const char *mode) {
  const double deadline = 20.0; /* a clean run takes about a second */
  double t0 = now_s();
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    /* the fork children's output is not the test's */
    if (!freopen("/dev/null", "w", stdout)) _exit(6);
    _exit(forker(mode));
  }
  int st = 0, done = 0;
  while (!done && now_s() - t0 < deadline) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) done = 1;
    else usleep(10000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  char desc[80];
  alloc_describe_status(st, desc, sizeof desc);
  CHECK_MSG(done && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s", mode,
            done ? desc : "no progress within the deadline: deadlocked (fork waits for stdio's list lock while "
                          "holding the allocator's locks; a stdio thread waits for the allocator)");
  printf("fork_stdio %-6s %s in %.2f s\n", mode, done ? desc : "DEADLOCK", now_s() - t0);
}

int main(int argc, char **argv) {
  if (argc > 1) {
    for (int i = 1; i < argc; i++) run(argv[i]);
  } else {
    run("flock");
    run("flush");
    run("fopen");
  }
  return check_done();
}
