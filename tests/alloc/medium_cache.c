/* Each thread keeps the medium spans it frees and serves its next medium mallocs from them
 * without the segment lock (cache.c, "medium spans"), within a bound, and gives them back.
 * Checked (larder only):
 *   1. a 40 KiB block freed and asked again: the same span, counted as a hit; while kept it is
 *      in medium_bytes_cached and bytes_cached, not in bytes_in_use; larder_validate() == 0;
 *      memalign(64) takes a kept span too, memalign(4096) does not;
 *   2. a span whose old pages reach 60 KiB serves 50 KiB; for 20 KiB (40 KiB of old pages behind
 *      the block: segment.c's tails) a kept span within half as far again goes first, and
 *      without one it serves, marked (medium_late_tails), nothing purged at once, and a trim
 *      lists it and purges its tail; while the cache's hits fault pages, that span is kept for a
 *      larger request instead; a span left by a realloc that could not grow it in place is
 *      kept with its own bound (validation);
 *   3. bounds: medium_cache_kb of chunks (16 one-chunk spans) and at most 64 spans (with
 *      medium_cache_kb=8192, 64 of 70 one-chunk spans freed are kept); a span above half of the
 *      bound goes back at once; medium_cache_kb=0 keeps none (the bound's growth:
 *      medium_cache_growth.c);
 *   4. a thread's exit gives its kept spans back;
 *   5. a thread that stopped calling has them given back by the purge (run here by
 *      malloc_trim in main after 3 purge delays, so that the test does not wait on the purge
 *      thread's timing), while it still lives;
 *   6. a thread that keeps calling but takes no kept span for a purge delay gives them back
 *      (its own maintenance);
 *   7. 2 threads x 1,000 live blocks of 20-60 KiB, 40,000 replacements each, a quarter of the
 *      frees by the other thread: every block keeps its stamp until freed, validation passes,
 *      and most medium mallocs are hits; after every free, nothing medium is in use;
 *   8. 32 threads (more than the cores) keep 1 MiB each, written, and stop calling: after 3
 *      purge delays and a purge nothing is kept and RSS has fallen by at least 16 of the 20 MiB.
 * Under another allocator: skipped.
 *
 * usage: alloc_medium_cache */
#include <malloc.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "alloc_util.h"

#define KiB ((size_t)1 << 10)

static alloc_api_t api;

static larder_stats_t stats(void) { return alloc_stats(&api); }

/* ---- 4, 5: threads that keep spans ---- */
static int idle_pipe[2], ready_pipe[2];

static void *keep_and_exit(void *arg) {
  (void)arg;
  void *p[4];
  for (int i = 0; i < 4; i++) REQUIRE((p[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 4; i++) free(p[i]);
  return NULL;
}

static void *keep_and_idle(void *arg) {
  (void)arg;
  void *p[4];
  for (int i = 0; i < 4; i++) REQUIRE((p[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 4; i++) free(p[i]);
  char c = 1;
  REQUIRE(write(ready_pipe[1], &c, 1) == 1);
  REQUIRE(read(idle_pipe[0], &c, 1) == 1); /* no call to the allocator until main says */
  return NULL;
}

/* ---- 8: many threads keep spans, then idle ---- */
#define MANY 32
static int many_ready[2], many_go[2];

static void *keep_full_and_idle(void *arg) {
  (void)arg;
  void *p[16];
  for (int i = 0; i < 16; i++) {
    REQUIRE((p[i] = malloc(40 * KiB)) != NULL);
    memset(p[i], 7, 40 * KiB);
  }
  for (int i = 0; i < 16; i++) free(p[i]);
  char c = 1;
  REQUIRE(write(many_ready[1], &c, 1) == 1);
  REQUIRE(read(many_go[0], &c, 1) == 1);
  return NULL;
}

/* ---- 7: churn with frees by the other thread ---- */
#define LIVE 1000
#define REPLACEMENTS 40000
typedef struct {
  unsigned char *block[LIVE];
  size_t size[LIVE];
  uint64_t rng;
  int failures;
} churner_t;
static churner_t churners[2];
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *handoff[2][64]; /* blocks for thread i to free */
static size_t handoff_size[2][64];
static int handoff_count[2];

static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

static void checked_free(churner_t *c, unsigned char *b, size_t size) {
  if (!alloc_stamped_ends(b, size)) c->failures++;
  free(b);
}

static void *churn(void *arg) {
  int me = (int)(intptr_t)arg, other = 1 - me;
  churner_t *c = &churners[me];
  c->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);
  for (int i = 0; i < LIVE; i++) {
    c->size[i] = 20000 + next_random(&c->rng) % 40001;
    REQUIRE((c->block[i] = malloc(c->size[i])) != NULL);
    alloc_stamp_ends(c->block[i], c->size[i]);
  }
  for (int n = 0; n < REPLACEMENTS; n++) {
    int i = (int)(next_random(&c->rng) % LIVE);
    if (next_random(&c->rng) % 4 == 0) { /* the other thread frees it */
      pthread_mutex_lock(&handoff_lock);
      if (handoff_count[other] < 64) {
        handoff[other][handoff_count[other]] = c->block[i];
        handoff_size[other][handoff_count[other]++] = c->size[i];
        c->block[i] = NULL;
      }
      pthread_mutex_unlock(&handoff_lock);
    }
    if (c->block[i]) checked_free(c, c->block[i], c->size[i]);
    c->size[i] = 20000 + next_random(&c->rng) % 40001;
    REQUIRE((c->block[i] = malloc(c->size[i])) != NULL);
    alloc_stamp_ends(c->block[i], c->size[i]);
    if (n % 16 == 0) {
      unsigned char *mine[64];
      size_t sizes[64];
      pthread_mutex_lock(&handoff_lock);
      int k = handoff_count[me];
      memcpy(mine, handoff[me], (size_t)k * sizeof mine[0]);
      memcpy(sizes, handoff_size[me], (size_t)k * sizeof sizes[0]);
      handoff_count[me] = 0;
      pthread_mutex_unlock(&handoff_lock);
      for (int j = 0; j < k; j++) checked_free(c, mine[j], sizes[j]);
    }
  }
  for (int i = 0; i < LIVE; i++) checked_free(c, c->block[i], c->size[i]);
  return NULL;
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("medium_cache: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  size_t chunk = (size_t)api.option_get("superblock_size");
  REQUIRE(chunk == 64 * KiB); /* the sizes below are chosen for 64 KiB chunks */
  REQUIRE(api.option_set("purge_delay_ms", "100") == 0);

  /* 1: freed and asked again */
  larder_stats_t before = stats();
  unsigned char *p = malloc(40 * KiB);
  REQUIRE(p != NULL);
  memset(p, 1, 40 * KiB);
  larder_stats_t live = stats();
  free(p);
  larder_stats_t kept = stats();
  CHECK_MSG(kept.medium_bytes_cached == chunk, "kept %zu bytes", kept.medium_bytes_cached);
  CHECK(kept.bytes_cached >= before.bytes_cached + chunk);
  size_t fell = live.bytes_in_use - kept.bytes_in_use; /* its usable size: to its last page */
  CHECK_MSG(fell >= 40 * KiB && fell < 44 * KiB, "bytes_in_use fell by %zu", fell);
  CHECK(api.validate() == 0);
  unsigned char *q = malloc(40 * KiB);
  larder_stats_t after = stats();
  CHECK_MSG(q == p, "40 KiB again: %p, kept %p", (void *)q, (void *)p);
  CHECK(after.medium_cache_hits == kept.medium_cache_hits + 1);
  CHECK(after.medium_bytes_cached == 0);
  CHECK(after.bytes_in_use == live.bytes_in_use);
  free(q);

  /* 1b: aligned requests: 64 bytes is served by a kept span (its block is 256 bytes past a
   * 64 KiB boundary), 4 KiB is not (it needs a block placed at a page) */
  p = malloc(40 * KiB);
  REQUIRE(p != NULL);
  free(p);
  unsigned char *aligned = memalign(64, 40 * KiB);
  CHECK_MSG(aligned == p && (uintptr_t)aligned % 64 == 0, "memalign(64): %p, kept %p", (void *)aligned, (void *)p);
  free(aligned);
  unsigned char *paged = memalign(4096, 40 * KiB);
  REQUIRE(paged != NULL);
  CHECK_MSG(paged != p && (uintptr_t)paged % 4096 == 0, "memalign(4096): %p, kept %p", (void *)paged, (void *)p);
  free(paged);
  CHECK(api.validate() == 0);
  api.trim(0);

  /* 2: old pages. A span whose old pages reach 60 KiB serves 50 KiB at once (within half as
   * far again); for 20 KiB a kept span within the rule is preferred (one that held 24 KiB), and
   * without one the 60 KiB span serves it, marked: nothing is purged then, and a trim lists it
   * on the segments' list of tails and purges its tail, the block kept whole. First 64 hits
   * that fault no page (the cache hands such spans out only then, and after 32 hits). */
  api.trim(0);
  for (int i = 0; i < 64; i++) {
    unsigned char *volatile m = malloc(60 * KiB);
    REQUIRE(m != NULL);
    memset(m, 1, 60 * KiB);
    free(m);
  }
  p = malloc(60 * KiB);
  REQUIRE(p != NULL);
  memset(p, 2, 60 * KiB);
  free(p);
  size_t late = stats().medium_late_tails, purged = stats().medium_tails_purged;
  unsigned char *fits = malloc(50 * KiB);
  CHECK_MSG(fits == p, "50 KiB did not take the kept span");
  CHECK(stats().medium_late_tails == late);
  q = malloc(24 * KiB);
  REQUIRE(q != NULL);
  memset(q, 2, 24 * KiB);
  free(fits);
  free(q);
  unsigned char *small = malloc(20 * KiB);
  CHECK_MSG(small == q && stats().medium_late_tails == late, "20 KiB did not take the span within the rule");
  unsigned char *small2 = malloc(20 * KiB);
  CHECK_MSG(small2 == p, "20 KiB did not take the only kept span");
  CHECK_MSG(stats().medium_late_tails == late + 1, "late tails %zu -> %zu", late, stats().medium_late_tails);
  memset(small2, 5, 20 * KiB);
  CHECK_MSG(stats().medium_tails_purged == purged, "%zu bytes purged as the span was handed out", stats().medium_tails_purged - purged);
  CHECK(api.validate() == 0);
  api.trim(0);
  size_t page = (size_t)sysconf(_SC_PAGESIZE), offset = (uintptr_t)p & (chunk - 1);
  size_t want = ((offset + 60 * KiB + page - 1) & ~(page - 1)) - ((offset + 20 * KiB + page - 1) & ~(page - 1));
  CHECK_MSG(stats().medium_tails_purged - purged == want, "a trim purged %zu bytes of the late tail, not %zu",
            stats().medium_tails_purged - purged, want);
  CHECK(small2[0] == 5 && small2[20 * KiB - 1] == 5);
  CHECK(api.validate() == 0);
  free(small);
  free(small2);
  api.trim(0);

  /* 2c: while the hits fault pages (64 blocks of 40 KiB, each in a kept span that held 20 KiB:
   * 20 KiB of new pages a hit), a span whose old pages reach 60 KiB is kept for a larger
   * request and 20 KiB goes elsewhere; after 64 hits that fault nothing, it serves 20 KiB */
  enum { FAULTING = 64 };
  void *low[FAULTING], *grown[FAULTING];
  for (int i = 0; i < FAULTING; i++) {
    REQUIRE((low[i] = malloc(20 * KiB)) != NULL);
    memset(low[i], 8, 20 * KiB);
  }
  for (int r = 0; r < FAULTING / 16; r++) { /* (16 at a time: the cache's bound) */
    for (int j = 0; j < 16; j++) free(low[r * 16 + j]);
    for (int j = 0; j < 16; j++) {
      REQUIRE((grown[r * 16 + j] = malloc(40 * KiB)) != NULL);
      memset(grown[r * 16 + j], 9, 40 * KiB);
    }
  }
  p = malloc(60 * KiB);
  REQUIRE(p != NULL);
  memset(p, 6, 60 * KiB);
  free(p);
  late = stats().medium_late_tails;
  small = malloc(20 * KiB);
  CHECK_MSG(small != p && stats().medium_late_tails == late, "the 60 KiB span served 20 KiB while the hits faulted");
  free(small);
  /* (volatile: a block only freed may be removed with its free by the compiler) */
  unsigned char *volatile held = malloc(20 * KiB); /* the span small left: within the rule */
  for (int i = 0; i < 64; i++) alloc_call(40 * KiB); /* the 60 KiB span: no page faulted */
  small2 = malloc(20 * KiB);
  CHECK_MSG(small2 == p && stats().medium_late_tails == late + 1,
            "the 60 KiB span did not serve 20 KiB once the hits faulted nothing");
  free(small2);
  free(held);
  for (int i = 0; i < FAULTING; i++) free(grown[i]);
  CHECK(api.validate() == 0);
  api.trim(0);

  /* 2b: a realloc that cannot grow a span in place (the next chunk is in use) moves the block;
   * the span it leaves is kept with its own bound, not the larger size asked for (it was: the
   * segment raised the bound before it knew the growth would fail) */
  p = malloc(40 * KiB);
  q = malloc(40 * KiB);
  REQUIRE(p != NULL && q != NULL);
  memset(p, 3, 40 * KiB);
  unsigned char *moved = realloc(p, 100 * KiB);
  REQUIRE(moved != NULL);
  CHECK_MSG(moved != p && q == p + chunk, "the block grew in place: the test measures nothing");
  CHECK(moved[40 * KiB - 1] == 3);
  CHECK_MSG(api.validate() == 0, "a span kept after a failed growth in place");
  free(moved);
  free(q);
  api.trim(0);

  /* 3: bounds */
  void *blocks[20];
  for (int i = 0; i < 20; i++) REQUIRE((blocks[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 20; i++) free(blocks[i]);
  CHECK_MSG(stats().medium_bytes_cached == 16 * chunk, "20 spans freed, %zu bytes kept", stats().medium_bytes_cached);
  CHECK(api.validate() == 0);
  api.trim(0);
  CHECK(stats().medium_bytes_cached == 0);
  p = malloc(600 * KiB); /* 10 chunks: above half of 1 MiB */
  REQUIRE(p != NULL);
  free(p);
  CHECK_MSG(stats().medium_bytes_cached == 0, "a 640 KiB span kept");
  REQUIRE(api.option_set("medium_cache_kb", "8192") == 0);
  void *many_blocks[70];
  for (int i = 0; i < 70; i++) REQUIRE((many_blocks[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 70; i++) free(many_blocks[i]);
  CHECK_MSG(stats().medium_bytes_cached == 64 * chunk, "70 spans freed under an 8 MiB bound, %zu bytes kept",
            stats().medium_bytes_cached);
  api.trim(0);
  REQUIRE(api.option_set("medium_cache_kb", "256") == 0);
  for (int i = 0; i < 12; i++) REQUIRE((blocks[i] = malloc(i % 2 ? 40 * KiB : 100 * KiB)) != NULL);
  for (int i = 0; i < 12; i++) free(blocks[i]);
  CHECK_MSG(stats().medium_bytes_cached == 4 * chunk, "bound 256 KiB: %zu bytes kept", stats().medium_bytes_cached);
  REQUIRE(api.option_set("medium_cache_kb", "0") == 0);
  before = stats();
  for (int i = 0; i < 4; i++) REQUIRE((blocks[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 4; i++) free(blocks[i]);
  for (int i = 0; i < 4; i++) REQUIRE((blocks[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 4; i++) free(blocks[i]);
  after = stats();
  /* the 4 spans kept under the old bound serve 4 mallocs; nothing new is kept */
  CHECK_MSG(after.medium_cache_hits - before.medium_cache_hits <= 4, "%zu hits with the cache off",
            after.medium_cache_hits - before.medium_cache_hits);
  CHECK(after.medium_bytes_cached <= before.medium_bytes_cached);
  REQUIRE(api.option_set("medium_cache_kb", "1024") == 0);
  api.trim(0);
  CHECK(stats().medium_bytes_cached == 0);

  /* 4: a thread's exit */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, keep_and_exit, NULL) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  CHECK_MSG(stats().medium_bytes_cached == 0, "an exited thread keeps %zu bytes", stats().medium_bytes_cached);

  /* 5: a thread that stopped calling */
  REQUIRE(pipe(idle_pipe) == 0 && pipe(ready_pipe) == 0);
  REQUIRE(pthread_create(&t, NULL, keep_and_idle, NULL) == 0);
  char c;
  REQUIRE(read(ready_pipe[0], &c, 1) == 1);
  size_t idle_kept = stats().medium_bytes_cached;
  alloc_sleep_ms(300);
  api.trim(0);
  size_t idle_after = stats().medium_bytes_cached;
  printf("medium_cache: an idle thread kept %zu KiB, %zu KiB after 3 purge delays and a purge\n", idle_kept / KiB,
         idle_after / KiB);
  CHECK(idle_kept == 4 * chunk);
  CHECK(idle_after == 0);
  REQUIRE(write(idle_pipe[1], &c, 1) == 1);
  REQUIRE(pthread_join(t, NULL) == 0);

  /* 6: the owner keeps calling, but takes no kept span */
  for (int i = 0; i < 4; i++) REQUIRE((blocks[i] = malloc(40 * KiB)) != NULL);
  for (int i = 0; i < 4; i++) free(blocks[i]);
  CHECK(stats().medium_bytes_cached == 4 * chunk);
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  uint64_t rng = 42;
  do { /* small blocks of many sizes: slow paths, each polling the maintenance */
    void *s[256];
    for (int i = 0; i < 256; i++) REQUIRE((s[i] = malloc(16 + next_random(&rng) % 4000)) != NULL);
    for (int i = 0; i < 256; i++) free(s[i]);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 350);
  CHECK_MSG(stats().medium_bytes_cached == 0, "unused for 3 purge delays, %zu bytes still kept",
            stats().medium_bytes_cached);

  /* 7: two threads churn medium blocks, freeing some of each other's */
  before = stats();
  pthread_t th[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 2; i++) REQUIRE(pthread_join(th[i], NULL) == 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < handoff_count[i]; j++) free(handoff[i][j]);
  after = stats();
  size_t mallocs = after.medium_allocs - before.medium_allocs, hits = after.medium_cache_hits - before.medium_cache_hits;
  printf("medium_cache: churn, %zu medium mallocs, %zu from kept spans (%.0f%%); damaged blocks %d, %d\n", mallocs,
         hits, 100.0 * (double)hits / (double)mallocs, churners[0].failures, churners[1].failures);
  CHECK(churners[0].failures == 0 && churners[1].failures == 0);
  CHECK_MSG(hits * 3 >= mallocs, "only %zu of %zu medium mallocs from kept spans", hits, mallocs);
  /* (the process's other medium blocks, if any, were there before: the UBSan runtime's) */
  CHECK_MSG(after.medium_bytes_in_use == before.medium_bytes_in_use, "%zu bytes of medium spans in use after every free, %zu before",
            after.medium_bytes_in_use, before.medium_bytes_in_use);
  CHECK(api.validate() == 0);

  /* 8: 32 threads keep 1 MiB each (16 spans of 40 KiB, written), then stop calling: the
   * purge gives it all back while they live (more threads than cores, as a pool's) */
  REQUIRE(pipe(many_ready) == 0 && pipe(many_go) == 0);
  api.trim(0);
  size_t rss_before = alloc_rss_bytes();
  /* A long delay while the threads start: on a loaded machine (the sanitizer builds, CI) the
   * first thread to keep its spans waited more than 100 ms for the last, and the purge took
   * its spans as an idle thread's before they were counted (kept 31 of 32 MiB). */
  REQUIRE(api.option_set("purge_delay_ms", "5000") == 0);
  pthread_t many[MANY];
  for (int i = 0; i < MANY; i++) REQUIRE(pthread_create(&many[i], NULL, keep_full_and_idle, NULL) == 0);
  for (int i = 0; i < MANY; i++) REQUIRE(read(many_ready[0], &c, 1) == 1);
  size_t many_kept = stats().medium_bytes_cached, rss_kept = alloc_rss_bytes();
  REQUIRE(api.option_set("purge_delay_ms", "100") == 0);
  alloc_sleep_ms(300);
  api.trim(0);
  size_t many_after = stats().medium_bytes_cached, rss_after = alloc_rss_bytes();
  printf("medium_cache: %d idle threads kept %zu KiB (RSS +%.1f MiB), %zu KiB after 3 purge delays and a purge "
         "(RSS +%.1f MiB)\n", MANY, many_kept / KiB, ((double)rss_kept - (double)rss_before) / (1 << 20), many_after / KiB,
         ((double)rss_after - (double)rss_before) / (1 << 20));
  CHECK_MSG(many_kept == (size_t)MANY * 16 * chunk, "kept %zu bytes", many_kept);
  CHECK(many_after == 0);
  /* 20 MiB of written spans were kept; all but the threads' stacks and heaps goes back */
  CHECK_MSG(rss_after + 16 * ((size_t)1 << 20) <= rss_kept, "RSS %zu -> %zu", rss_kept, rss_after);
  for (int i = 0; i < MANY; i++) REQUIRE(write(many_go[1], &c, 1) == 1);
  for (int i = 0; i < MANY; i++) REQUIRE(pthread_join(many[i], NULL) == 0);
  CHECK(api.validate() == 0);
  return check_done();
}
