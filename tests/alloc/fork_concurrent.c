/* Forks from several threads at once (a server whose worker threads each start a child
 * process: Node.js's child_process.spawnSync in worker threads, a thread pool running
 * posix_spawn or system()). glibc runs the atfork prepare handlers of concurrent forks at the
 * same time; larder's must neither deadlock nor let one fork's state leak into another's.
 * Until 2026-11-28 a second fork's prepare cleared a flag the first fork's parent handler
 * needed, and every later fork spun in fork_prepare for ever (8 threads x 200 forks: a hang in
 * 3 runs of 3).
 *
 * Two shapes: every forking thread allocates (larder takes its locks for each fork), and one
 * allocating thread forks beside threads that never allocate (larder skips its locks when one
 * thread allocates: it must still serve both). Every child allocates, frees and exits 0; a
 * hang in parent or child ends as SIGALRM.
 *
 * usage: alloc_fork_concurrent [forks per thread] */
#include <pthread.h>
#include <stdbool.h>

#include "alloc_util.h"

#define THREADS 6

static int forks_per_thread = 60;
static atomic_int child_failures, fork_failures;
static _Atomic(void *) pass; /* a block handed between threads: frees by other threads too */

static void fork_once(bool allocate) {
  void *mine = allocate ? malloc(48) : NULL;
  pid_t pid = fork();
  if (pid < 0) {
    atomic_fetch_add(&fork_failures, 1);
    free(mine);
    return;
  }
  if (pid == 0) {
    alarm(30);
    void *blocks[64];
    for (int i = 0; i < 64; i++) blocks[i] = malloc(16 + (size_t)i * 40);
    for (int i = 0; i < 64; i++) free(blocks[i]);
    free(mine);
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    atomic_fetch_add(&child_failures, 1);
  if (mine) free(atomic_exchange(&pass, mine));
}

static void *allocating_forker(void *arg) {
  (void)arg;
  for (int i = 0; i < forks_per_thread; i++) fork_once(true);
  return NULL;
}

/* A thread that never calls malloc itself (its fork and waitpid allocate nothing). */
static void *quiet_forker(void *arg) {
  (void)arg;
  for (int i = 0; i < forks_per_thread; i++) fork_once(false);
  return NULL;
}

static void run(const char *shape, void *(*first)(void *), void *(*others)(void *)) {
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) REQUIRE(pthread_create(&threads[i], NULL, i == 0 ? first : others, NULL) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  free(atomic_exchange(&pass, NULL));
  CHECK_MSG(atomic_load(&child_failures) == 0, "%s: %d children failed", shape, atomic_load(&child_failures));
  CHECK_MSG(atomic_load(&fork_failures) == 0, "%s: %d forks failed", shape, atomic_load(&fork_failures));
  printf("%s: %d threads x %d forks, all children exited 0\n", shape, THREADS, forks_per_thread);
  atomic_store(&child_failures, 0);
  atomic_store(&fork_failures, 0);
}

int main(int argc, char **argv) {
  if (argc > 1) forks_per_thread = atoi(argv[1]);
  REQUIRE(forks_per_thread > 0);
  alarm(100); /* a hang fails the test with SIGALRM instead of reaching CTest's timeout */
  run("every thread allocates", allocating_forker, allocating_forker);
  run("one allocating thread among quiet ones", allocating_forker, quiet_forker);
  return check_done();
}
