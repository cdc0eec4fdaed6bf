/* LARDER_DEBUG=1 costs a constant factor, counted (issue "server speed"): every validation walks
 * O(superblocks), so the debug mode runs one only after as many refills as the heaps hold
 * superblocks (src/maintain.c, ld_maintain_debug_validate). Four threads churn a heap of about 20k
 * blocks, a quarter freed by another thread; the test asserts that validations ran, found
 * nothing, and numbered at most one per 256 refills, so the validation work per refill is
 * bounded whatever the heap size. Run with LARDER_DEBUG=1 (tests/alloc/core.cmake). */
#include "alloc_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#define THREADS 4
#define LIVE 5000
#define ROUNDS 200000

/* Each thread's inbox of blocks to free, under a mutex (the test's own locking, not larder's). */
static struct {
  pthread_mutex_t lock;
  void *items[64];
  int n;
} box[THREADS];

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
  void **slots = calloc(LIVE, sizeof *slots);
  REQUIRE(slots != NULL);
  for (int r = 0; r < ROUNDS; r++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int i = (int)(rng % LIVE);
    if (slots[i]) {
      int next = (id + 1) % THREADS;
      bool handed = false;
      if ((rng >> 40) % 4 == 0) { /* a quarter to the next thread, if its box has room */
        pthread_mutex_lock(&box[next].lock);
        if (box[next].n < 64) {
          box[next].items[box[next].n++] = slots[i];
          handed = true;
        }
        pthread_mutex_unlock(&box[next].lock);
      }
      if (!handed) free(slots[i]);
    }
    slots[i] = malloc(16 + (size_t)((rng >> 20) % 2000));
    REQUIRE(slots[i] != NULL);
    if ((r & 15) == 0) {
      void *mine[64];
      pthread_mutex_lock(&box[id].lock);
      int n = box[id].n;
      memcpy(mine, box[id].items, (size_t)n * sizeof mine[0]);
      box[id].n = 0;
      pthread_mutex_unlock(&box[id].lock);
      for (int k = 0; k < n; k++) free(mine[k]);
    }
  }
  for (int i = 0; i < LIVE; i++) free(slots[i]);
  free(slots);
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate) {
    printf("debug_cost: larder not loaded, skipped\n");
    return ALLOC_SKIP;
  }
  if (api.option_get && api.option_get("debug") != 1) {
    printf("debug_cost: run with LARDER_DEBUG=1\n");
    return ALLOC_SKIP;
  }
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_mutex_init(&box[t].lock, NULL);
  for (int t = 0; t < THREADS; t++) REQUIRE(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; t++)
    for (int k = 0; k < box[t].n; k++) free(box[t].items[k]);
  CHECK(api.validate() == 0);
  larder_stats_t st;
  api.stats_get(&st);
  printf("debug_cost: %zu refills, %zu validations (%.1f refills per validation), %zu superblocks held at the end\n",
         st.refills, st.validations, st.validations ? (double)st.refills / (double)st.validations : 0.0,
         st.bytes_held / 65536);
  CHECK_MSG(st.validations >= 2, "the debug mode ran %zu validations", st.validations);
  CHECK_MSG(st.validations <= st.refills / 256 + 2, "%zu validations for %zu refills: more than one per 256",
            st.validations, st.refills);
  return check_done();
}
