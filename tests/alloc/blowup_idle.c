/* Blowup when the allocating threads go idle (Hoard §2.2 and the O(U + P) bound of §4,
 * seed 004). Sixteen threads take turns: thread i allocates 32 MiB of 256-byte blocks, hands
 * them to the main thread and then waits, alive but idle, until the end; the main thread frees
 * them all before the next thread starts. The program never needs more than 32 MiB (U), but
 * memory freed by main into an idle thread's superblocks is useful only if it becomes
 * available to the next thread. In Hoard a free updates the owner heap's u at once and the
 * emptiness threshold moves the superblocks to the global heap; an allocator that waits for
 * the owner to collect remote frees keeps each idle thread's 32 MiB: 16 x 32 = 512 MiB, a
 * P-fold blowup of the kind Hoard was designed to rule out; one that keeps a fixed share of
 * each idle thread's memory still grows as U x P.
 *
 * Check: the RSS growth after the P turns is at most 2 U + P x 1 MiB (80 MiB by default).
 * Hoard's bound is U / (1 - f) + P*K*S per size class in use: 1.33 U + 16 x 4 x 64 KiB for
 * the one small class here. The factor 2 covers 1.33 plus page granularity; 1 MiB per thread
 * is four times the K*S slack and also covers each turn's 512 KiB pointer array (a large
 * span). What is per thread must not depend on U. malloc_trim is not called: Hoard needs no
 * help to reuse memory.
 *
 * usage: alloc_blowup_idle [threads] [MiB per thread] */
#include <pthread.h>

#include "alloc_util.h"

#define BLOCK 256

static long nthreads = 16, mib = 32;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void **handed;
static size_t nhanded;
static int ready, finish;

static void *turn(void *arg) {
  (void)arg;
  size_t n = ((size_t)mib << 20) / BLOCK;
  void **p = malloc(n * sizeof *p);
  if (!p) return (void *)1;
  for (size_t i = 0; i < n; i++) {
    p[i] = malloc(BLOCK);
    if (!p[i]) return (void *)1;
    memset(p[i], (int)(i & 0xff), BLOCK);
  }
  pthread_mutex_lock(&mu);
  handed = p;
  nhanded = n;
  ready = 1;
  pthread_cond_broadcast(&cv);
  while (!finish) pthread_cond_wait(&cv, &mu);  /* alive and idle until the end */
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) nthreads = atol(argv[1]);
  if (argc > 2) mib = atol(argv[2]);
  if (nthreads < 1 || nthreads > 256 || mib < 1 || mib > 1024) {
    fprintf(stderr, "usage: %s [threads 1..256] [MiB 1..1024]\n", argv[0]);
    return 2;
  }
  pthread_t *t = calloc((size_t)nthreads, sizeof *t);
  REQUIRE(t != NULL);
  alloc_call(100);
  size_t rss0 = alloc_rss_bytes(), peak = 0;
  long bad = 0;
  for (long i = 0; i < nthreads; i++) {
    REQUIRE(pthread_create(&t[i], NULL, turn, NULL) == 0);
    pthread_mutex_lock(&mu);
    while (!ready) pthread_cond_wait(&cv, &mu);
    ready = 0;
    void **p = handed;
    size_t n = nhanded;
    pthread_mutex_unlock(&mu);
    size_t r = alloc_rss_bytes();
    if (r > peak) peak = r;
    for (size_t k = 0; k < n; k++) {
      bad += ((unsigned char *)p[k])[BLOCK - 1] != (unsigned char)(k & 0xff);
      free(p[k]);
    }
    free(p);
  }
  size_t rss1 = alloc_rss_bytes();
  size_t growth = rss1 > rss0 ? rss1 - rss0 : 0;
  size_t bound = 2 * ((size_t)mib << 20) + ((size_t)nthreads << 20);
  printf("blowup_idle: %ld threads x %ld MiB, each idle after its turn: RSS %.1f MiB at start, "
         "peak seen %.1f, at the end %.1f (growth %.1f MiB, bound %.1f MiB)\n",
         nthreads, mib, ALLOC_MIB(rss0), ALLOC_MIB(peak), ALLOC_MIB(rss1), ALLOC_MIB(growth),
         ALLOC_MIB(bound));
  CHECK(bad == 0);
  CHECK_MSG(growth <= bound, "RSS grew %.1f MiB for %ld MiB needed at any time", ALLOC_MIB(growth), mib);
  alloc_api_t api = alloc_api();
  if (api.validate) {
    larder_stats_t st;
    api.stats_get(&st);
    printf("larder: bytes_in_use %.1f MiB (all was freed), bytes_held %.1f MiB\n",
           ALLOC_MIB(st.bytes_in_use), ALLOC_MIB(st.bytes_held));
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  pthread_mutex_lock(&mu);
  finish = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (long i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  free(t);
  return check_done();
}
