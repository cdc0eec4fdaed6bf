/* Statistics read while threads start (found by the TSan run of misuse_threads_prefixed:
 * "SEGV on unknown address 0x50" in heap_u, under larder_stats_get). Not a misuse of the API,
 * a crash the hardening work found; it lives with the hardening tests.
 *
 * A heap made for a new thread is linked into the list of heaps (under the heaps lock) before
 * its current superblocks are set (after that lock is released): a statistics reader that
 * walks the list in between finds current[c] == NULL and dereferences it. Any program that
 * calls mallinfo2(), malloc_stats() or larder_stats_get() while threads start can crash.
 *
 * Each round runs in a child process: an observer thread calls mallinfo2() in a loop while 300
 * threads start, each allocating once (so 300 new heaps are made) and waiting on a barrier; the
 * parent checks that every child exits 0. 40 rounds (about a second); with the core at
 * 86484d9 3 or 4 rounds in 20 die of SIGSEGV, in ld_heaps_stats.
 *
 * usage: alloc_misuse_stats_during_start [rounds] */
#include <malloc.h>
#include <pthread.h>

#include "alloc_util.h"

#define THREADS 300

static pthread_barrier_t barrier;
static atomic_int stop;

static void *starter(void *arg) {
  (void)arg;
  void *volatile p = malloc(32);
  pthread_barrier_wait(&barrier);
  free(p);
  return NULL;
}

static void *observer(void *arg) {
  (void)arg;
  long n = 0;
  while (!atomic_load(&stop)) {
    struct mallinfo2 mi = mallinfo2();
    n += mi.arena != (size_t)-1;
  }
  return (void *)n;
}

static int round_child(void) {
  pthread_t obs, t[THREADS];
  if (pthread_barrier_init(&barrier, NULL, THREADS + 1) != 0) return 3;
  if (pthread_create(&obs, NULL, observer, NULL) != 0) return 4;
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&t[i], NULL, starter, NULL) != 0) return 5;
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(obs, NULL);
  return 0;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  if (rounds < 1) {
    fprintf(stderr, "usage: %s [rounds >= 1]\n", argv[0]);
    return 2;
  }
  alarm(120);
  int crashed = 0, other = 0;
  for (int r = 0; r < rounds; r++) {
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(30);
      _exit(round_child());
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) REQUIRE(errno == EINTR);
    if (WIFSIGNALED(st)) crashed++;
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) other++;
    if (r == 0 || !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      char desc[80];
      alloc_describe_status(st, desc, sizeof desc);
      printf("stats_during_start round %d: %s\n", r, desc);
    }
  }
  CHECK_MSG(crashed == 0, "%d of %d rounds died of a signal while mallinfo2() ran as %d threads started", crashed,
            rounds, THREADS);
  CHECK_MSG(other == 0, "%d of %d rounds failed to start their threads", other, rounds);
  printf("stats_during_start: %d rounds of %d starting threads with statistics read throughout: %d crashed\n",
         rounds, THREADS, crashed);
  return check_done();
}
