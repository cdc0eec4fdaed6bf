/* Thread churn: thousands of short-lived threads (default 4000, in waves of 16 running at
 * once). Each thread allocates and frees a burst of blocks, and leaves a few blocks behind in
 * a shared table, freeing the blocks that earlier (now dead) threads left in the slots it
 * takes. So memory is freed by threads other than its allocator, after its allocator exited.
 *
 * DESIGN §1 says an exited thread's memory is reused. If it were not, each of the 4000 dead
 * threads would strand at least one superblock (64 KiB) per size class it touched: hundreds of
 * MiB. The check: RSS growth over the run <= 2 x live bytes + 1 MiB per thread of a wave
 * (16 MiB at the default 16), where live bytes is what the table holds at the end (~8 MiB).
 *   - factor 2: Hoard's invariant keeps a heap's holdings a <= u / (1 - f) = 1.33 u at the
 *     default f = 1/4 (seed 004 §3.1), and size-class rounding adds up to ~20% internal
 *     fragmentation: 1.33 x 1.2 = 1.6, rounded up to 2;
 *   - 1 MiB per concurrent thread: the K x S = 256 KiB slack that Hoard allows each heap per
 *     size class, for the few classes each thread uses, plus libc's cached thread stacks.
 * Both terms are independent of the number of threads, which is what this test is about.
 *
 * larder's bytes_held counts whole superblocks, touched or not, and empty ones wait in the
 * global heap a purge delay (global.c), so it holds the most that the threads of one wave held
 * at once: each thread has its own superblock in every class it touches (about 30 here), so
 * when a loaded machine runs a wave's 16 threads side by side, they hold 16 x 30 x 64 KiB = 30
 * MiB that the next waves reuse (35-38 MiB held in 7 of 120 runs 4 at a time, 20-25 MiB
 * alone). Its bound: 2 x live bytes + wave x (the most classes one thread touched) x S.
 * A dead thread's stranded superblocks would still be 4,000 x 64 KiB = 250 MiB.
 *
 * usage: alloc_thread_churn [threads] [wave] */
#include <malloc.h>
#include <pthread.h>

#include "alloc_util.h"

#define NSLOT 4096
#define BURST 64
#define LEAVE 4

typedef struct slot_s { void *p; size_t size; } slot_t;

static slot_t table[NSLOT];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long corrupt;
static atomic_long most_classes; /* the most size classes one thread touched (bytes_held's bound) */

/* Block sizes tell classes apart: the distinct usable sizes among a thread's blocks. */
static void note_classes(const size_t *usable, int n) {
  long distinct = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = usable[j] == usable[i];
    distinct += !seen;
  }
  long most = atomic_load(&most_classes);
  while (distinct > most && !atomic_compare_exchange_weak(&most_classes, &most, distinct)) {}
}

static void check_block(void *p, size_t size, const char *what) {
  size_t bad = alloc_check(p, size);
  if (bad != (size_t)-1) {
    atomic_fetch_add(&corrupt, 1);
    fprintf(stderr, "%s block %p size %zu corrupted at %zu\n", what, p, size, bad);
  }
}

static void *churn_main(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 12345;
  void *burst[BURST];
  size_t bsize[BURST];
  size_t usable[BURST + LEAVE];
  for (int i = 0; i < BURST; i++) {
    bsize[i] = 1 + (size_t)(alloc_rng(&s) % 2048);
    burst[i] = malloc(bsize[i]);
    if (!burst[i]) { atomic_fetch_add(&corrupt, 1); return NULL; }
    alloc_fill(burst[i], bsize[i]);
    usable[i] = malloc_usable_size(burst[i]);
  }
  /* free in a scrambled order */
  for (int i = 0; i < BURST; i++) {
    int j = (int)((unsigned)(i * 37 + 11) % BURST);
    check_block(burst[j], bsize[j], "burst");
    free(burst[j]);
  }
  for (int i = 0; i < LEAVE; i++) {
    size_t size = 16 + (size_t)(alloc_rng(&s) % 4080);
    void *p = malloc(size);
    if (!p) { atomic_fetch_add(&corrupt, 1); return NULL; }
    alloc_fill(p, size);
    usable[BURST + i] = malloc_usable_size(p);
    unsigned k = (unsigned)(alloc_rng(&s) % NSLOT);
    pthread_mutex_lock(&table_mu);
    slot_t old = table[k];
    table[k].p = p;
    table[k].size = size;
    pthread_mutex_unlock(&table_mu);
    if (old.p) {
      check_block(old.p, old.size, "left");
      free(old.p);
    }
  }
  note_classes(usable, BURST + LEAVE);
  return NULL;
}

int main(int argc, char **argv) {
  long nthreads = argc > 1 ? atol(argv[1]) : 4000;
  long wave = argc > 2 ? atol(argv[2]) : 16;
  if (nthreads < 1 || wave < 1 || wave > 1024) {
    fprintf(stderr, "usage: %s [threads >= 1] [wave 1..1024]\n", argv[0]);
    return 2;
  }
  pthread_t *tids = malloc((size_t)wave * sizeof *tids);
  REQUIRE(tids != NULL);
  /* a thread attribute with a small stack keeps libc's stack cache out of the picture */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  size_t rss0 = alloc_rss_bytes();

  long started = 0;
  while (started < nthreads) {
    long n = nthreads - started < wave ? nthreads - started : wave;
    for (long i = 0; i < n; i++) {
      int rc = pthread_create(&tids[i], &attr, churn_main, (void *)(uintptr_t)(started + i + 1));
      REQUIRE(rc == 0);
    }
    for (long i = 0; i < n; i++) pthread_join(tids[i], NULL);
    started += n;
  }

  size_t live = 0, nlive = 0;
  for (int k = 0; k < NSLOT; k++)
    if (table[k].p) { live += table[k].size; nlive++; }
  size_t rss1 = alloc_rss_bytes();
  size_t growth = rss1 > rss0 ? rss1 - rss0 : 0;
  size_t bound = 2 * live + ((size_t)wave << 20);
  printf("thread_churn: %ld threads in waves of %ld: live %zu blocks %.1f MiB, RSS %.1f -> %.1f "
         "MiB (growth %.1f MiB, bound %.1f MiB)\n",
         nthreads, wave, nlive, ALLOC_MIB(live), ALLOC_MIB(rss0), ALLOC_MIB(rss1),
         ALLOC_MIB(growth), ALLOC_MIB(bound));
  CHECK(atomic_load(&corrupt) == 0);
  CHECK_MSG(growth <= bound, "RSS grew %.1f MiB for %.1f MiB live", ALLOC_MIB(growth), ALLOC_MIB(live));

  alloc_api_t api = alloc_api();
  if (api.validate) {
    larder_stats_t st;
    api.stats_get(&st);
    printf("larder: bytes_in_use %.1f MiB, bytes_held %.1f MiB, mapped %.1f MiB\n",
           ALLOC_MIB(st.bytes_in_use),
           ALLOC_MIB(st.bytes_held), ALLOC_MIB(st.bytes_mapped));
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
    /* larder's own accounting, independent of when pages are purged */
    size_t held_bound = 2 * live + (size_t)wave * (size_t)atomic_load(&most_classes) * (size_t)api.option_get("superblock_size");
    printf("larder: bytes_held bound %.1f MiB (at most %ld classes per thread)\n", ALLOC_MIB(held_bound), atomic_load(&most_classes));
    CHECK_MSG(st.bytes_held <= held_bound, "bytes_held %.1f MiB above the bound", ALLOC_MIB(st.bytes_held));
  }
  for (int k = 0; k < NSLOT; k++)
    if (table[k].p) { check_block(table[k].p, table[k].size, "final"); free(table[k].p); }
  CHECK(atomic_load(&corrupt) == 0);
  free(tids);
  return check_done();
}
