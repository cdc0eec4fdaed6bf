/* fork() from a SIGALRM handler in a single-threaded process, 1,000 times, while the main
 * flow allocates and frees (issue 12). POSIX lists fork as async-signal-safe, and glibc's own
 * malloc skips its fork locking when the process is single-threaded so that this works. An
 * allocator whose atfork prepare handler takes its locks deadlocks here the first time the
 * timer fires while the main flow holds one of them (the handler's fork waits for a lock the
 * interrupted code holds, forever).
 *
 * The work runs in a child of the test (so its timer and its signals are its own); the test
 * waits for it with a deadline and kills it after that, reporting a deadlock. The main flow
 * mallocs, reallocs and frees small, medium and large blocks (the large ones go through the
 * large-span cache and its lock), and calls malloc_trim now and then (heap, large and global
 * locks); the timer fires every 400 us; the handler forks, and the forked child _exits at once
 * (only async-signal-safe calls are allowed in it). The main flow reaps the children.
 * With "fork", the main flow also forks every 8 calls, so that the timer often interrupts a
 * fork in its atfork handlers, and the handler's fork runs inside the main flow's (glibc's
 * tst-mallocfork2): larder's prepare handler took its fork mutex a second time and the process
 * hung, every run.
 *
 * usage: alloc_misuse_fork_signal [forks [fork]]   (default 1000, the main flow does not fork) */
#include <malloc.h>
#include <stdbool.h>
#include <sys/time.h>
#include <time.h>

#include "alloc_util.h"

static volatile sig_atomic_t forks_done, fork_failures;
static volatile sig_atomic_t forks_wanted = 1000;

static void on_alarm(int sig) {
  (void)sig;
  if (forks_done >= forks_wanted) return;
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  if (pid < 0) fork_failures++;
  else forks_done++;
  errno = saved;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int work(int forks, bool main_forks) {
  forks_wanted = forks;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, NULL) != 0) return 3;
  struct itimerval it = {{0, 400}, {0, 400}};
  if (setitimer(ITIMER_REAL, &it, NULL) != 0) return 4;

  uint64_t s = 4242;
  enum { SLOTS = 128 };
  void *slot[SLOTS] = {0};
  size_t size[SLOTS] = {0};
  long ops = 0, reaped = 0, bad = 0, forked = 0;
  while (forks_done < forks_wanted || reaped < forks_done + forked) {
    if (main_forks && forks_done < forks_wanted && ops % 8 == 0) {
      pid_t pid = fork();
      if (pid == 0) _exit(0);
      if (pid < 0) return 7;
      forked++;
    }
    unsigned k = (unsigned)(alloc_rng(&s) % SLOTS);
    if (slot[k]) {
      if (alloc_check(slot[k], size[k]) != (size_t)-1) bad++;
      if (alloc_rng(&s) % 3 == 0) {
        size_t n = size[k] / 2 + 1;
        void *q = realloc(slot[k], n);
        if (q) {
          if (alloc_check_as(q, slot[k], size[k], n) != (size_t)-1) bad++;
          free(q);
        }
      } else {
        free(slot[k]);
      }
      slot[k] = NULL;
    } else {
      unsigned pick = (unsigned)(alloc_rng(&s) % 100);
      size[k] = pick < 80 ? 1 + alloc_rng(&s) % 1024 : pick < 95 ? 16384 + alloc_rng(&s) % 200000
                                                                   : (1u << 20) + alloc_rng(&s) % (3u << 20);
      slot[k] = malloc(size[k]);
      if (!slot[k]) return 5;
      alloc_fill(slot[k], size[k] < 4096 ? size[k] : 4096);
      if (size[k] > 4096) size[k] = 4096; /* only the first 4 KiB carry the pattern */
    }
    if ((++ops & 4095) == 0) malloc_trim(0);
    int st;
    while (waitpid(-1, &st, WNOHANG) > 0) {
      reaped++;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  for (int k = 0; k < SLOTS; k++) free(slot[k]);
  fprintf(stderr, "work: %d forks from the handler, %ld from the main flow, %ld calls in the main flow, %ld bad\n",
          (int)forks_done, forked, ops, bad);
  return bad ? 6 : fork_failures ? 7 : 0;
}

int main(int argc, char **argv) {
  int forks = argc > 1 ? atoi(argv[1]) : 1000;
  bool main_forks = argc > 2 && strcmp(argv[2], "fork") == 0;
  if (forks < 1 || (argc > 2 && !main_forks) || argc > 3) {
    fprintf(stderr, "usage: %s [forks >= 1 [fork]]\n", argv[0]);
    return 2;
  }
  const double deadline = 20.0; /* a clean run takes well under a second */
  double t0 = now_s();
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(work(forks, main_forks));
  int st = 0, done = 0;
  while (!done && now_s() - t0 < deadline) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    REQUIRE(r >= 0 || errno == EINTR);
    if (r == pid) done = 1;
    else usleep(10000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK_MSG(0, "the process that forks from its SIGALRM handler made no progress for %.0f s: deadlocked "
                 "(the handler's fork waits for a lock that the code it interrupted holds)", deadline);
    /* the handler's children, if any are left, belong to the killed process: init reaps them */
    return check_done();
  }
  char desc[80];
  alloc_describe_status(st, desc, sizeof desc);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forking process ended with %s (5: malloc failed, "
            "6: a block or a fork child was damaged, 7: fork failed)", desc);
  printf("fork_signal: %d forks from a SIGALRM handler%s in %.2f s: %s\n", forks,
         main_forks ? ", the main flow forking too" : "", now_s() - t0, desc);
  return check_done();
}
