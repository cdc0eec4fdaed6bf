/* exit() while other threads fork (a server told to stop while its workers start child
 * processes). At exit glibc drops the atfork handlers of larder's library (__cxa_finalize),
 * even between one fork's prepare handler and its parent and child handlers. Until 2026-11-28
 * such a fork kept every lock larder's prepare handler took: its child waited for a heap
 * lock, the forking thread for its child, and exit() for the stdio lock (7 hangs in 20 runs).
 *
 * Each round is a process of its own: three threads fork in a loop (their children allocate),
 * two churn, and main calls exit() after a few milliseconds. A hang ends as SIGALRM.
 *
 * usage: alloc_fork_at_exit [rounds] */
#include <pthread.h>
#include <stdbool.h>

#include "alloc_util.h"

static void *forker(void *arg) {
  for (;;) {
    void *volatile mine = malloc(200);
    pid_t pid = fork();
    if (pid == 0) {
      void *volatile block = malloc(3000);
      free(block);
      _exit(0);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
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
    slots[k] = malloc((size_t)(r >> 16) % 9000 + 1);
  }
  return arg;
}

static void round_process(int round) {
  alarm(20);
  pthread_t thread;
  for (int i = 0; i < 3; i++) REQUIRE(pthread_create(&thread, NULL, forker, NULL) == 0);
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&thread, NULL, churner, (void *)(uintptr_t)(i + 1)) == 0);
  usleep(20000 + (useconds_t)(round % 5) * 1000);
  exit(0);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 12;
  REQUIRE(rounds > 0);
  int failed = 0;
  for (int round = 0; round < rounds; round++) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) round_process(round);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      failed++;
      char description[80];
      alloc_describe_status(status, description, sizeof description);
      fprintf(stderr, "round %d: %s\n", round, description);
    }
  }
  CHECK_MSG(failed == 0, "%d of %d processes did not exit cleanly while threads forked", failed, rounds);
  printf("%d processes exited while 3 threads forked: %d did not\n", rounds, failed);
  return check_done();
}
