/* fork while other threads allocate and free (DESIGN §1: works after fork in the child, with
 * atfork handlers). Four worker threads hammer malloc/free/realloc (with cross-thread frees)
 * while the main thread forks 50 times. Each child allocates and frees, starts threads of its
 * own that do the same, checks every pattern and exits 0. A lock held by a worker at the
 * moment of fork and not reset in the child would hang the child: each child runs under
 * alarm(), so a hang shows as SIGALRM instead of a stuck test, and the parent has its own
 * alarm too.
 *
 * usage: alloc_fork_threads [forks] */
#include <pthread.h>

#include "alloc_util.h"

#define WORKERS 4
#define WSLOTS 256

static atomic_int stop;
static atomic_long worker_corrupt;
/* one slot per worker through which blocks pass to the next worker (cross-thread frees) */
static _Atomic(void *) pass[WORKERS];

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t s = (uint64_t)id * 7777 + 3;
  void *slot[WSLOTS] = {0};
  size_t size[WSLOTS] = {0};
  long ops = 0;
  while (!atomic_load(&stop)) {
    /* a short pause now and then leaves the children some of the 2 cores */
    if ((++ops & 1023) == 0) usleep(200);
    unsigned k = (unsigned)(alloc_rng(&s) % WSLOTS);
    if (slot[k]) {
      if (alloc_check(slot[k], size[k]) != (size_t)-1) atomic_fetch_add(&worker_corrupt, 1);
      if (alloc_rng(&s) % 4 == 0) {
        /* a 64-byte block carries no pattern; just hand it over to be freed elsewhere */
        free(slot[k]);
        void *m = malloc(64);
        if (m) {
          void *old = atomic_exchange(&pass[(id + 1) % WORKERS], m);
          free(old);
        }
      } else {
        free(slot[k]);
      }
      slot[k] = NULL;
    } else {
      /* up to 64 KiB: the point is many calls in flight at fork time, not filling memory */
      size[k] = 1 + (size_t)(alloc_rng(&s) % (alloc_rng(&s) % 4 == 0 ? 65536 : 512));
      slot[k] = malloc(size[k]);
      if (slot[k]) alloc_fill(slot[k], size[k]);
    }
    void *mine = atomic_exchange(&pass[id], NULL);
    free(mine);
  }
  for (int k = 0; k < WSLOTS; k++) free(slot[k]);
  return NULL;
}

static void *child_thread(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg;
  long bad = 0;
  for (int i = 0; i < 400; i++) {
    size_t n = alloc_rand_size(&s);
    void *p = malloc(n);
    if (!p) return (void *)1;
    alloc_fill(p, n);
    void *q = realloc(p, n + 100);
    if (!q) return (void *)1;
    bad += alloc_check_as(q, p, n, n) != (size_t)-1;
    free(q);
  }
  return (void *)(intptr_t)(bad != 0);
}

/* What a child does: allocate in the forking thread, then in threads of its own. */
static int child_work(int round) {
  alarm(20);
  uint64_t s = (uint64_t)round + 99;
  void *keep[500];
  size_t ks[500];
  for (int i = 0; i < 500; i++) {
    ks[i] = alloc_rand_size(&s);
    keep[i] = malloc(ks[i]);
    if (!keep[i]) return 3;
    alloc_fill(keep[i], ks[i]);
  }
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    if (pthread_create(&t[i], NULL, child_thread, (void *)(uintptr_t)(round * 3 + i + 1)) != 0) return 4;
  int rc = 0;
  for (int i = 0; i < 3; i++) {
    void *r;
    pthread_join(t[i], &r);
    if (r) rc = 5;
  }
  for (int i = 0; i < 500; i++) {
    if (alloc_check(keep[i], ks[i]) != (size_t)-1) rc = 6;
    free(keep[i]);
  }
  return rc;
}

int main(int argc, char **argv) {
  int forks = argc > 1 ? atoi(argv[1]) : 50;
  if (forks < 1) {
    fprintf(stderr, "usage: %s [forks >= 1]\n", argv[0]);
    return 2;
  }
  alarm(240);
  pthread_t w[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    REQUIRE(pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i) == 0);

  int ok = 0;
  for (int r = 0; r < forks; r++) {
    /* let the workers get going, so that fork lands in the middle of their calls */
    usleep(2000);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child_work(r));
    int st;
    while (waitpid(pid, &st, 0) < 0) REQUIRE(errno == EINTR);
    char desc[80];
    alloc_describe_status(st, desc, sizeof desc);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "fork %d: child ended with %s (SIGALRM means it hung; 3-6: allocation error)", r, desc);
    ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
  for (int i = 0; i < WORKERS; i++) free(atomic_exchange(&pass[i], NULL));
  CHECK(atomic_load(&worker_corrupt) == 0);

  alloc_api_t api = alloc_api();
  if (api.validate) {
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  printf("fork_threads: %d/%d children exited 0 while %d threads allocated\n", ok, forks, WORKERS);
  return check_done();
}
