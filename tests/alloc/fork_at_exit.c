/* exit() while other threads fork (a server told to stop while its workers start child
 * processes). At exit glibc drops the atfork handlers a library registered (__cxa_finalize),
 * even between one fork's prepare handler and its parent and child handlers.
 *   - Until 2026-11-28 such a fork kept every lock larder's prepare handler took: its child
 *     waited for a heap lock, the forking thread for its child, and exit() for the stdio lock
 *     (7 hangs in 20 runs).
 *   - Until 2026-11-29 forks after that point took no lock: a child copied a lock or a list
 *     another thread held, and waited for ever in ld_segment_alloc or reported a false double
 *     free (19 of 200 exits). The round process itself ended, but the hung grandchild kept the
 *     test's output open, so CTest saw a timeout (UBSan build in CI). larder now registers its
 *     handlers for the process's whole life (os.c, ld_os_atfork_forever).
 *
 * Each round is a process of its own, in a process group of its own: three threads fork in a
 * loop (their children allocate, free and exit 0), three churn, and main calls exit() after a
 * few milliseconds. Every process of the round holds the write end of a pipe; a forking thread
 * writes a byte there when its child did not exit 0. The round passes when the round process
 * exits 0 and the pipe reaches end-of-file (every descendant gone) with no byte in it. A round
 * process that hangs ends as SIGALRM; descendants still alive after 10 s are reported and
 * killed with their group.
 *
 * usage: alloc_fork_at_exit [rounds] */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>

#include "alloc_util.h"

static int report_fd = -1;

static void *forker(void *arg) {
  for (;;) {
    void *volatile mine = malloc(200);
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 20; i++) {
        void *volatile block = malloc(3000 + (size_t)i * 4000);
        free(block);
      }
      _exit(0);
    }
    if (pid > 0) {
      int status = 0;
      if (waitpid(pid, &status, 0) == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char bad = 1;
        (void)!write(report_fd, &bad, 1);
      }
    }
    free(mine);
  }
  return arg;
}

static void *churner(void *arg) {
  void *slots[256] = {0};
  uint64_t seed = (uint64_t)(uintptr_t)arg;
  for (;;) {
    uint64_t r = alloc_rng(&seed);
    unsigned k = (unsigned)(r % 256);
    free(slots[k]);
    slots[k] = malloc((size_t)(r >> 16) % 90000 + 1);
  }
  return arg;
}

static void round_process(int round) {
  alarm(20);
  pthread_t thread;
  for (int i = 0; i < 3; i++) REQUIRE(pthread_create(&thread, NULL, forker, NULL) == 0);
  for (int i = 0; i < 3; i++) REQUIRE(pthread_create(&thread, NULL, churner, (void *)(uintptr_t)(i + 1)) == 0);
  usleep(20000 + (useconds_t)(round % 7) * 1000);
  exit(0);
}

/* Reads the pipe until every holder is gone: 0 clean, 1 a child failed, 2 still open. */
static int descendants_outcome(int fd) {
  int outcome = 0;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 10000);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return 2;
    char byte;
    ssize_t got = read(fd, &byte, 1);
    if (got == 0) return outcome;
    if (got > 0) outcome = 1;
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 12;
  REQUIRE(rounds > 0);
  int failed = 0;
  for (int round = 0; round < rounds; round++) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      setpgid(0, 0);
      close(fds[0]);
      report_fd = fds[1];
      round_process(round);
    }
    setpgid(pid, pid); /* (either side may run first) */
    close(fds[1]);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    int outcome = descendants_outcome(fds[0]);
    close(fds[0]);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && outcome == 0;
    if (!ok) {
      failed++;
      char description[80];
      alloc_describe_status(status, description, sizeof description);
      fprintf(stderr, "round %d: the round process %s; %s\n", round, description,
              outcome == 0   ? "its children exited 0"
              : outcome == 1 ? "a child of a forking thread did not exit 0"
                             : "a descendant was still alive 10 s later (killed)");
    }
    if (outcome == 2) kill(-pid, SIGKILL);
  }
  CHECK_MSG(failed == 0, "%d of %d rounds failed: exit() while threads forked", failed, rounds);
  printf("%d processes exited while 3 threads forked: %d rounds failed\n", rounds, failed);
  return check_done();
}
