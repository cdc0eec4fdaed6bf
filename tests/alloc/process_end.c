/* A process ends as it would without larder (DESIGN, "Behaviour every caller may rely on"):
 * larder's purge thread never keeps a process alive nor changes how it ends.
 *
 * Each case runs in a child (this program re-executed) that first makes the purge thread
 * start (64 MiB mapped, freed; LARDER_PURGE_THREAD_MB is 16 by default) and lets a worker
 * thread allocate and end, then:
 *   pthread-exit  main calls pthread_exit: the process must end with status 0 within a second
 *                 (with the first purge thread, whose process never ended, the test suite of
 *                 a widely used interpreter waited 5 minutes for such a child);
 *   sigterm       the same, and the parent sends SIGTERM as soon as main has called
 *                 pthread_exit, while the purge thread sleeps: the process must end within a
 *                 second (killed by the signal, or exit 0 if it had already ended);
 *   fork-child    main forks after the purge thread started; the fork child allocates, frees
 *                 and calls pthread_exit: it must end with status 0 within a second;
 *   vfork         main runs /bin/true with vfork+exec while the purge thread runs, then
 *                 allocates on: the child and the process end normally;
 *   dlclose       liblarder.so loaded with dlopen as a plugin (LARDER_TEST_LIB names it), its
 *                 purge thread started through its prefixed API, then dlclose'd: the library
 *                 stays loaded (-z nodelete: its fork handlers live as long as the process),
 *                 a fork after the dlclose runs its handlers, and the process ends normally
 *                 (its destructor stops the purge thread at exit). Skipped when
 *                 LARDER_TEST_LIB is not set.
 * Under larder the child also checks that the purge thread did run (purge_thread_starts).
 *
 * usage: alloc_process_end [case]   (no argument: every case) */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "alloc_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
  (void)arg;
  void *p[256];
  for (int i = 0; i < 256; i++) p[i] = malloc(100 + (size_t)i);
  for (int i = 0; i < 256; i++) free(p[i]);
  return NULL;
}

/* Maps 64 MiB through the allocator and frees it, and runs one allocating thread. */
static int warm_up(void) {
  enum { N = 64 };
  void *big[N];
  for (int i = 0; i < N; i++) {
    big[i] = malloc((size_t)1 << 20);
    if (!big[i]) return 10;
    memset(big[i], 1, (size_t)1 << 20);
  }
  for (int i = 0; i < N; i++) free(big[i]);
  void *small = malloc(32); /* an allocation after the mapping: where the thread starts */
  free(small);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 11;
  pthread_join(t, NULL);
  alloc_api_t api = alloc_api();
  if (api.stats_get) {
    larder_stats_t st;
    api.stats_get(&st);
    if (st.purge_thread_starts == 0) {
      fprintf(stderr, "the purge thread did not start after 64 MiB\n");
      return 12;
    }
  }
  return 0;
}

/* Tells the parent (fd 3, a pipe) the time main leaves, then leaves. */
static void leave_main(void) {
  char line[64];
  int n = snprintf(line, sizeof line, "%.6f\n", now_s());
  if (write(3, line, (size_t)n) != n) _exit(13);
  close(3);
  pthread_exit(NULL);
}

/* liblarder.so as a plugin: started, used, its purge thread running, unloaded. */
static int dlclose_case(void) {
  const char *lib = getenv("LARDER_TEST_LIB");
  if (!lib) return 0;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
    return 20;
  }
  void *(*lmalloc)(size_t) = (void *(*)(size_t))dlsym(h, "larder_malloc");
  void (*lfree)(void *) = (void (*)(void *))dlsym(h, "larder_free");
  int (*lset)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(h, "larder_option_set");
  void (*lstats)(larder_stats_t *) = (void (*)(larder_stats_t *))dlsym(h, "larder_stats_get");
  if (!lmalloc || !lfree || !lset || !lstats) return 21;
  lset("purge_thread", "1");
  lset("purge_delay_ms", "50");
  void *p[64];
  for (int i = 0; i < 64; i++) memset(p[i] = lmalloc((size_t)1 << 20), 1, (size_t)1 << 20);
  for (int i = 0; i < 64; i++) lfree(p[i]);
  lfree(lmalloc(32));
  larder_stats_t st;
  lstats(&st);
  if (st.purge_thread_starts == 0) {
    fprintf(stderr, "the plugin's purge thread did not start\n");
    return 22;
  }
  if (dlclose(h) != 0) return 23;
  if (!dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
    fprintf(stderr, "liblarder.so was unloaded by dlclose: its fork handlers would be left dangling\n");
    return 24;
  }
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL); /* the purge thread runs on */
  pid_t pid = fork();   /* runs the plugin's fork handlers */
  if (pid < 0) return 25;
  if (pid == 0) _exit(lmalloc(64) ? 0 : 1);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 26;
  return 0;
}

static int child(const char *mode) {
  if (strcmp(mode, "dlclose") == 0) {
    int rc = dlclose_case();
    if (rc) return rc;
    leave_main();
  }
  int rc = warm_up();
  if (rc) return rc;
  if (strcmp(mode, "fork-child") == 0) {
    pid_t pid = fork();
    if (pid < 0) return 14;
    if (pid > 0) {
      close(3); /* only the fork child reports */
      int status;
      waitpid(pid, &status, 0);
      return 0;
    }
    void *p[1000];
    for (int i = 0; i < 1000; i++) p[i] = malloc(4096);
    for (int i = 0; i < 1000; i++) free(p[i]);
  } else if (strcmp(mode, "vfork") == 0) {
    pid_t pid = vfork();
    if (pid == 0) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(127);
    }
    if (pid < 0) return 15;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 16;
    void *p = malloc(100000);
    free(p);
  }
  leave_main();
  return 0;
}

/* Runs one case; returns 1 when it held. */
static int run_case(const char *mode) {
  int err[2], report[2];
  if (pipe(err) != 0 || pipe(report) != 0) return 0;
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    dup2(err[1], 2);
    if (report[1] != 3) dup2(report[1], 3);
    int fds[4] = {err[0], err[1], report[0], report[1]};
    for (int i = 0; i < 4; i++)
      if (fds[i] > 3) close(fds[i]);
    alarm(20);
    execl("/proc/self/exe", "self", mode, (char *)NULL);
    _exit(127);
  }
  close(err[1]);
  close(report[1]);
  char line[64] = {0};
  ssize_t n = read(report[0], line, sizeof line - 1);
  double left = n > 0 ? atof(line) : 0;
  if (n > 0 && strcmp(mode, "sigterm") == 0) kill(pid, SIGTERM);
  /* A process that outlives its program is killed after 5 s (it would never end). */
  int status = 0;
  bool killed = false;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (now_s() - left > 5.0 && n > 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  double ended = now_s();
  char errbuf[2048] = {0};
  ssize_t e = read(err[0], errbuf, sizeof errbuf - 1);
  (void)e;
  close(err[0]);
  close(report[0]);
  char how[96];
  alloc_describe_status(status, how, sizeof how);
  int ok;
  if (strcmp(mode, "sigterm") == 0)
    ok = n > 0 && ((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
  else
    ok = n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  double took = n > 0 ? ended - left : -1;
  printf("process_end %-13s %-28s ended %.3f s after main left\n", mode, how, took);
  CHECK_MSG(ok && !killed, "%s: %s%s; stderr: %s", mode, how, killed ? " (still running 5 s after main left: killed)" : "", errbuf);
  CHECK_MSG(n <= 0 || took < 1.0, "%s: the process ended %.3f s after main called pthread_exit (bound 1 s)", mode, took);
  return ok;
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"pthread-exit", "sigterm", "fork-child", "vfork", "dlclose"};
  if (argc > 1 && strcmp(argv[0], "self") == 0) return child(argv[1]);
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (argc < 2 || strcmp(argv[1], modes[i]) == 0) run_case(modes[i]);
  return check_done();
}
