/* malloc from many threads at start (DESIGN §1: works "with a program that calls malloc from
 * many threads at start"). The program is re-executed 10 times so each run is a fresh
 * process: 64 threads are created before the main thread allocates anything itself (beyond
 * what libc's pthread_create allocates for each thread's TLS vector), held at a
 * start line that involves no allocation (a spin on an atomic flag), then released together;
 * each calls malloc as its first action, so the allocator's one-time set-up and the creation
 * of each thread's heap race with each other. Every block gets a pattern and they stay live
 * until all threads have finished, so two threads given the same memory break a pattern.
 *
 * usage: alloc_thread_start [runs] */
#include <pthread.h>
#include <sched.h>

#include "alloc_util.h"

#define NT 64
#define PER 32

static atomic_int go;
static atomic_int arrived;
static void *blocks[NT][PER];
static size_t sizes[NT][PER];

static void *starter(void *arg) {
  int id = (int)(intptr_t)arg;
  atomic_fetch_add(&arrived, 1);
  /* yield while waiting: 64 spinners on 2 cores would starve the creating thread */
  while (!atomic_load_explicit(&go, memory_order_acquire)) sched_yield();
  for (int i = 0; i < PER; i++) {
    size_t n = (size_t)(16 + ((id * 131 + i * 17) % 700));
    void *p = malloc(n);
    blocks[id][i] = p;
    sizes[id][i] = n;
    if (p) alloc_fill(p, n);
  }
  return NULL;
}

static int one_run(void) {
  pthread_t t[NT];
  for (int i = 0; i < NT; i++)
    if (pthread_create(&t[i], NULL, starter, (void *)(intptr_t)i) != 0) return 10;
  while (atomic_load(&arrived) < NT) sched_yield();
  atomic_store_explicit(&go, 1, memory_order_release);
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  int rc = 0;
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < PER; j++) {
      if (!blocks[i][j]) { fprintf(stderr, "thread %d: malloc returned NULL\n", i); rc = 11; continue; }
      size_t bad = alloc_check(blocks[i][j], sizes[i][j]);
      if (bad != (size_t)-1) {
        fprintf(stderr, "thread %d block %d (%p) corrupted at %zu\n", i, j, blocks[i][j], bad);
        rc = 12;
      }
    }
  for (int i = 0; i < NT; i++)
    for (int j = 0; j < PER; j++) free(blocks[i][j]);
  alloc_api_t api = alloc_api();
  if (api.validate && api.validate() != 0) rc = 13;
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return one_run();
  int runs = argc > 1 ? atoi(argv[1]) : 10;
  if (runs < 1) {
    fprintf(stderr, "usage: %s [runs >= 1]\n", argv[0]);
    return 2;
  }
  for (int r = 0; r < runs; r++) {
    char *args[] = {(char *)"--child", NULL};
    alloc_child_t c;
    REQUIRE(alloc_run_self(args, NULL, 30, &c) == 0);
    char desc[80];
    alloc_describe_status(c.status, desc, sizeof desc);
    CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
              "run %d: %s (11 NULL, 12 overlap, 13 larder_validate): %s", r, desc, c.err);
  }
  printf("thread_start: %d fresh processes x %d threads racing to their first malloc\n", runs, NT);
  return check_done();
}
