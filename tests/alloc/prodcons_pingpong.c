/* No superblock ping-pong between producers and the global heap (issue 8, "Hysteresis" and
 * "Must hold": "The producer/consumer test moves at most a stated number of superblocks to the
 * global heap per million frees").
 *
 * Two producers allocate blocks of 64..512 B and write them; two consumers free them. Blocks go
 * in batches of 2048 (about 590 KiB, nine superblocks) through one bounded queue per consumer
 * (depth 4), each producer alternating between the consumers, so every free is remote and a
 * producer's superblocks empty a batch at a time while it keeps allocating. 2,000,000 frees in
 * all. Issue 8 measured 50,600 superblocks to the global heap (and 50,700 back) in 5 s of a
 * producer/consumer run. With the allocator at eba5c40 this test moves 340-790 per million frees
 * (batches of 256 or 512 move none, 1024 move 79, 4096 move 1219: the batch must be larger
 * than K = 4 superblocks for the emptiness threshold to fire).
 *
 * Bound (the brief's figure, stated here): superblocks_to_global per million frees <= 200, i.e.
 * fewer than one superblock per two batches freed (488 batches per million frees), where
 * today every batch sends one or two. Also checked: every block intact, every free counted as
 * remote, larder_validate() at the end (a run above the bound is repeated once: see main).
 * superblocks_from_global, madvise calls and frees per second are printed, not asserted.
 *
 * usage: alloc_prodcons_pingpong [blocks per producer] [batch] [queue depth] */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <pthread.h>

#define PRODUCERS 2
#define CONSUMERS 2
#define MAX_DEPTH 64
static long batch_len = 2048, depth = 4;

typedef struct batch_s { struct batch_s *next; int n; void **p; unsigned short *sz; } batch_t;

typedef struct queue_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  batch_t *q[MAX_DEPTH];
  int head, count, producers_left;
} queue_t;

static queue_t queues[CONSUMERS];
static batch_t *pool;
static batch_t *free_batches;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static long per_producer = 1000000;
static atomic_long corrupt, freed_total;

static batch_t *batch_get(void) {
  pthread_mutex_lock(&pool_mu);
  while (!free_batches) pthread_cond_wait(&pool_cv, &pool_mu);
  batch_t *b = free_batches;
  free_batches = b->next;
  pthread_mutex_unlock(&pool_mu);
  b->n = 0;
  return b;
}

static void batch_put(batch_t *b) {
  pthread_mutex_lock(&pool_mu);
  b->next = free_batches;
  free_batches = b;
  pthread_cond_signal(&pool_cv);
  pthread_mutex_unlock(&pool_mu);
}

static void enqueue(queue_t *q, batch_t *b) {
  pthread_mutex_lock(&q->mu);
  while (q->count == depth) pthread_cond_wait(&q->cv, &q->mu);
  q->q[(q->head + q->count) % depth] = b;
  q->count++;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

static void *producer(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t s = 1000 + (uint64_t)id;
  long sent = 0;
  int dest = (int)id % CONSUMERS;
  while (sent < per_producer) {
    batch_t *b = batch_get();
    while (b->n < batch_len && sent < per_producer) {
      size_t sz = 64 + (size_t)(alloc_rng(&s) % 449);
      unsigned char *p = malloc(sz);
      REQUIRE(p != NULL);
      p[0] = p[sz - 1] = (unsigned char)sz;
      b->p[b->n] = p;
      b->sz[b->n] = (unsigned short)sz;
      b->n++;
      sent++;
    }
    enqueue(&queues[dest], b);
    dest = (dest + 1) % CONSUMERS;
  }
  for (int c = 0; c < CONSUMERS; c++) {
    pthread_mutex_lock(&queues[c].mu);
    queues[c].producers_left--;
    pthread_cond_broadcast(&queues[c].cv);
    pthread_mutex_unlock(&queues[c].mu);
  }
  return NULL;
}

static void *consumer(void *arg) {
  queue_t *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && q->producers_left > 0) pthread_cond_wait(&q->cv, &q->mu);
    if (q->count == 0) { pthread_mutex_unlock(&q->mu); break; }
    batch_t *b = q->q[q->head];
    q->head = (q->head + 1) % depth;
    q->count--;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    long bad = 0;
    for (int i = 0; i < b->n; i++) {
      unsigned char *p = b->p[i];
      size_t sz = b->sz[i];
      bad += p[0] != (unsigned char)sz || p[sz - 1] != (unsigned char)sz;
      free(p);
    }
    atomic_fetch_add(&corrupt, bad);
    atomic_fetch_add(&freed_total, b->n);
    batch_put(b);
  }
  return NULL;
}

/* One run of the workload: every block checked and counted; returns the superblocks moved to
 * the global heap per million frees, or -1 when the allocator is not larder (no counters). */
static double run_round(alloc_api_t api) {
  for (int c = 0; c < CONSUMERS; c++) {
    queues[c].head = queues[c].count = 0;
    queues[c].producers_left = PRODUCERS;
  }
  atomic_store(&freed_total, 0);
  larder_stats_t s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  if (api.stats_get) api.stats_get(&s0);
  double t0 = srv_now();
  pthread_t pt[PRODUCERS], ct[CONSUMERS];
  for (int c = 0; c < CONSUMERS; c++) REQUIRE(pthread_create(&ct[c], NULL, consumer, &queues[c]) == 0);
  for (long p = 0; p < PRODUCERS; p++)
    REQUIRE(pthread_create(&pt[p], NULL, producer, (void *)(intptr_t)p) == 0);
  for (int p = 0; p < PRODUCERS; p++) pthread_join(pt[p], NULL);
  for (int c = 0; c < CONSUMERS; c++) pthread_join(ct[c], NULL);
  double el = srv_now() - t0;
  if (api.stats_get) api.stats_get(&s1);

  long frees = atomic_load(&freed_total);
  printf("prodcons_pingpong: %d producers x %ld blocks of 64..512 B, %d consumers: %ld frees in "
         "%.2f s (%.2f M frees/s, not asserted)\n", PRODUCERS, per_producer, CONSUMERS, frees, el,
         (double)frees / el / 1e6);
  CHECK(atomic_load(&corrupt) == 0);
  CHECK(frees == PRODUCERS * per_producer);
  if (!api.validate) {
    printf("prodcons_pingpong: not larder: no counters; workload ran, checks skipped\n");
    return -1;
  }
  double to_g = (double)(s1.superblocks_to_global - s0.superblocks_to_global);
  double from_g = (double)(s1.superblocks_from_global - s0.superblocks_from_global);
  double per_m = to_g * 1e6 / (double)frees;
  printf("prodcons_pingpong: superblocks to the global heap %.0f (%.1f per million frees, bound "
         "200), from it %.0f; madvise calls %zu; remote frees %zu\n", to_g, per_m, from_g,
         s1.madvise_calls - s0.madvise_calls, s1.remote_frees - s0.remote_frees);
  CHECK_MSG(s1.remote_frees - s0.remote_frees >= (size_t)frees, "remote frees %zu < %ld",
            s1.remote_frees - s0.remote_frees, frees);
  return per_m;
}

int main(int argc, char **argv) {
  if (argc > 1) per_producer = atol(argv[1]);
  if (argc > 2) batch_len = atol(argv[2]);
  if (argc > 3) depth = atol(argv[3]);
  if (per_producer < 10000 || batch_len < 1 || batch_len > 1000000 || depth < 1 || depth > MAX_DEPTH) {
    fprintf(stderr, "usage: %s [blocks per producer >= 10000] [batch] [queue depth 1..%d]\n",
            argv[0], MAX_DEPTH);
    return 2;
  }
  /* the batches are allocated once and recycled: the hand-off allocates nothing */
  long npool = CONSUMERS * depth + PRODUCERS + CONSUMERS + 4;
  pool = calloc((size_t)npool, sizeof *pool);
  REQUIRE(pool != NULL);
  for (long i = 0; i < npool; i++) {
    pool[i].p = malloc((size_t)batch_len * sizeof *pool[i].p);
    pool[i].sz = malloc((size_t)batch_len * sizeof *pool[i].sz);
    REQUIRE(pool[i].p && pool[i].sz);
    pool[i].next = free_batches;
    free_batches = &pool[i];
  }
  for (int c = 0; c < CONSUMERS; c++) {
    pthread_mutex_init(&queues[c].mu, NULL);
    pthread_cond_init(&queues[c].cv, NULL);
  }
  alloc_api_t api = alloc_api();
  /* The moves depend on how the four threads interleave (Hoard's hysteresis counts time), so
   * a machine busy with other work can push one run past the bound (205 once in a sanitizer
   * run beside other tests, where 60-155 is usual): a run above it is run once more, and the
   * bound holds if either is within it. The bug it guards against moved 340-790 every time. */
  double per_m = 0;
  for (int attempt = 1; attempt <= 2; attempt++) {
    per_m = run_round(api);
    if (per_m < 0) return check_failures ? check_done() : ALLOC_SKIP; /* not larder */
    if (per_m <= 200.0) break;
    if (attempt == 1) printf("prodcons_pingpong: above the bound once: running again\n");
  }
  CHECK_MSG(per_m <= 200.0, "%.1f superblocks moved to the global heap per million frees "
            "(bound 200, twice): superblocks ping-pong", per_m);
  int v = api.validate();
  CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  return check_done();
}
