/* Remote frees racing thread exit. 2000 short-lived producer threads (8 at a time) each
 * allocate 200 blocks, hand them to 4 long-lived consumer threads and exit at once, so the
 * consumers free blocks into superblocks whose owner heap is being given up, or has just gone
 * to the global heap and is being taken by the next producer, all at the same time. Consumers
 * realloc one block in four before freeing it (a realloc of a block another thread owns).
 * Every block carries a pattern checked by the consumer; at the end, with larder,
 * larder_validate() must find nothing wrong and nothing may be left in use.
 *
 * usage: alloc_remote_exit [producers] */
#include <pthread.h>
#include <sched.h>

#include "alloc_util.h"

#define CONSUMERS 4
#define PER 200
#define WAVE 8
#define QCAP 8192

typedef struct item_s { void *p; size_t size; } item_t;
typedef struct queue_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  item_t items[QCAP];
  int n;
  int done;
} queue_t;

static queue_t queues[CONSUMERS];
static atomic_long corrupt, freed;

static void *producer(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  for (int i = 0; i < PER; i++) {
    size_t n = alloc_rng(&s) % 16 == 0 ? 1 + (size_t)(alloc_rng(&s) % 100000) : 1 + (size_t)(alloc_rng(&s) % 700);
    void *p = malloc(n);
    if (!p) { atomic_fetch_add(&corrupt, 1); continue; }
    alloc_fill(p, n);
    queue_t *q = &queues[alloc_rng(&s) % CONSUMERS];
    pthread_mutex_lock(&q->mu);
    while (q->n == QCAP) {
      pthread_mutex_unlock(&q->mu);
      sched_yield();
      pthread_mutex_lock(&q->mu);
    }
    q->items[q->n].p = p;
    q->items[q->n].size = n;
    q->n++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
  }
  return NULL;  /* exit at once: the consumers are still freeing this thread's blocks */
}

static void *consumer(void *arg) {
  queue_t *q = arg;
  item_t *got = malloc(QCAP * sizeof *got);
  if (!got) { atomic_fetch_add(&corrupt, 1); return NULL; }
  uint64_t s = (uint64_t)(uintptr_t)arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (q->n == 0 && !q->done) pthread_cond_wait(&q->cv, &q->mu);
    int n = q->n;
    int done = q->done;
    memcpy(got, q->items, (size_t)n * sizeof *got);
    q->n = 0;
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < n; i++) {
      void *p = got[i].p;
      size_t size = got[i].size;
      if (alloc_check(p, size) != (size_t)-1) {
        atomic_fetch_add(&corrupt, 1);
        fprintf(stderr, "block %p size %zu corrupted before free\n", p, size);
      }
      if (alloc_rng(&s) % 4 == 0) {
        size_t ns = alloc_rng(&s) % 2 ? size / 2 + 1 : size + 300;
        void *r = realloc(p, ns);
        if (!r) { atomic_fetch_add(&corrupt, 1); continue; }
        size_t keep = ns < size ? ns : size;
        if (alloc_check_as(r, p, size, keep) != (size_t)-1) {
          atomic_fetch_add(&corrupt, 1);
          fprintf(stderr, "realloc %zu -> %zu of another thread's block lost data\n", size, ns);
        }
        p = r;
      }
      free(p);
      atomic_fetch_add(&freed, 1);
    }
    if (done && n == 0) break;
  }
  free(got);
  return NULL;
}

int main(int argc, char **argv) {
  long producers = argc > 1 ? atol(argv[1]) : 2000;
  if (producers < WAVE) {
    fprintf(stderr, "usage: %s [producers >= %d]\n", argv[0], WAVE);
    return 2;
  }
  alloc_api_t api = alloc_api();
  larder_stats_t st0;
  if (api.stats_get) api.stats_get(&st0);
  pthread_t ct[CONSUMERS], pt[WAVE];
  for (int i = 0; i < CONSUMERS; i++) {
    pthread_mutex_init(&queues[i].mu, NULL);
    pthread_cond_init(&queues[i].cv, NULL);
    REQUIRE(pthread_create(&ct[i], NULL, consumer, &queues[i]) == 0);
  }
  for (long w = 0; w < producers; w += WAVE) {
    for (int i = 0; i < WAVE; i++)
      REQUIRE(pthread_create(&pt[i], NULL, producer, (void *)(uintptr_t)(w + i + 1)) == 0);
    for (int i = 0; i < WAVE; i++) pthread_join(pt[i], NULL);
  }
  for (int i = 0; i < CONSUMERS; i++) {
    pthread_mutex_lock(&queues[i].mu);
    queues[i].done = 1;
    pthread_cond_signal(&queues[i].cv);
    pthread_mutex_unlock(&queues[i].mu);
  }
  for (int i = 0; i < CONSUMERS; i++) pthread_join(ct[i], NULL);
  long want = producers / WAVE * WAVE * PER;
  printf("remote_exit: %ld producer threads x %d blocks freed by %d consumers: %ld freed, %ld "
         "corrupt\n", producers / WAVE * WAVE, PER, CONSUMERS, atomic_load(&freed), atomic_load(&corrupt));
  CHECK(atomic_load(&corrupt) == 0);
  CHECK(atomic_load(&freed) == want);
  if (api.validate) {
    larder_stats_t st;
    api.stats_get(&st);
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
    printf("larder: bytes_in_use %zu before, %zu after; to_global %zu, from_global %zu\n",
           st0.bytes_in_use, st.bytes_in_use, st.superblocks_to_global, st.superblocks_from_global);
  }
  return check_done();
}
