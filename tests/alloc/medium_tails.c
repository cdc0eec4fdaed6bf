/* A long-lived medium block keeps no old page resident past its end (segment.c, large.c:
 * "medium spans' tails").
 *
 * A medium span is whole chunks (S = 64 KiB): a 20 KiB block in a chunk a 60 KiB block left
 * resident kept the 40 KiB behind it resident for its whole life, and random sizes of 16-64 KiB
 * held 1.6x their live bytes in RSS (jemalloc 1.3x, glibc 1.07x). Now a span whose tail may
 * hold more than half its own pages is listed when handed out, and the purge gives back the
 * tail of each listed span still alive after the purge delay; a span taken again at the size it
 * had is not listed (each free run knows how far its resident pages reach). Purging at once,
 * as the span was handed out, cost 5x the CPU of fast medium churn. Checked (larder only; the
 * purge is run by larder_trim where a step needs it now):
 *   1. 60 KiB written and freed, then 20 KiB (above the largest class, 16 KiB) in the same
 *      chunk: nothing purged as it is handed out; after a trim no page is resident past the
 *      block's last page (mincore), and medium_tails_purged grew by exactly the pages past it;
 *   2. that block freed and 20 KiB asked again: not listed (a trim purges nothing of it);
 *   3. a block grown by realloc in place and written: a 20 KiB block in its chunk afterwards
 *      has those pages purged by a trim;
 *   4. a medium block's usable size ends at its request's last page, not at its chunk's end
 *      (17 KiB gave 63.75 KiB: a program sizing its buffers by malloc_usable_size would fill
 *      and count 3.75 times what it asked for), grows with realloc in place, and is what
 *      bytes_in_use counts (the chunks' rest is held, not in use);
 *   5. at scale: 3,000 live blocks of 20-64 KiB, every page written, replaced at random 30,000
 *      times with a purge delay of 10 s: no tail purged (fast churn pays nothing); then, with a
 *      delay of 100 ms and no call for 1.5 s (the purge thread sleeps up to 1 s before it
 *      sees the new delay), RSS <= 1.3 x live + 16 MiB (1.42x before the tails were purged),
 *      and larder_validate() == 0 (which checks every free run's bound).
 * Under another allocator the churn runs and prints its RSS.
 *
 * usage: alloc_medium_tails */
#include "server_util.h"

#include <malloc.h>
#include <sys/mman.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define LIVE 3000
#define REPLACEMENTS 30000

static size_t page;

static size_t round_page(size_t n) { return (n + page - 1) & ~(page - 1); }

/* Resident pages of [from, to), both page-aligned. */
static size_t resident_pages(uintptr_t from, uintptr_t to) {
  if (to <= from) return 0;
  size_t n = (to - from) / page, r = 0;
  unsigned char *vec = calloc(n, 1);
  REQUIRE(vec != NULL);
  REQUIRE(mincore((void *)from, to - from, vec) == 0);
  for (size_t i = 0; i < n; i++) r += vec[i] & 1;
  free(vec);
  return r;
}

/* Resident pages of p's chunk past its first `size` bytes (rounded to a page). */
static size_t tail_resident(const void *p, size_t size, size_t chunk) {
  uintptr_t span = (uintptr_t)p & ~(uintptr_t)(chunk - 1);
  return resident_pages(round_page((uintptr_t)p + size), span + chunk);
}

static size_t tails_purged(const alloc_api_t *api) { return alloc_stats(api).medium_tails_purged; }

int main(void) {
  alloc_api_t api = alloc_api();
  int larder = api.validate != NULL;
  page = (size_t)sysconf(_SC_PAGESIZE);
  size_t chunk = larder && api.option_get ? (size_t)api.option_get("superblock_size") : 64 * KiB;
  size_t small = 20 * KiB, big = chunk - 4 * KiB;

  /* Steps 1-4 follow a span back through its segment: the thread does not keep it (its cache of
   * medium spans, which obeys the same rule, is tested in medium_cache.c). Step 5 keeps them. */
  if (larder) REQUIRE(api.option_set("medium_cache_kb", "0") == 0);
  if (larder) {
    /* 1: a 20 KiB block where a 60 KiB one was: its tail purged by the purge, not at once */
    unsigned char *a = malloc(big);
    REQUIRE(a != NULL);
    memset(a, 1, big);
    size_t offset = (size_t)((uintptr_t)a & (chunk - 1)), before = tails_purged(&api);
    free(a);
    unsigned char *b = malloc(small);
    REQUIRE(b != NULL);
    memset(b, 2, small);
    size_t at_once = tails_purged(&api) - before, tail_before = tail_resident(b, small, chunk);
    api.trim(0);
    size_t tail = tail_resident(b, small, chunk), purged = tails_purged(&api) - before;
    printf("medium_tails: 20 KiB after 60 KiB %s; %zu pages resident past it, %zu after a trim, %zu bytes purged\n",
           b == a ? "in the same chunk" : "elsewhere", tail_before, tail, purged);
    CHECK_MSG(b == a, "the 20 KiB block did not reuse the dirty chunk: the test measures nothing");
    CHECK_MSG(at_once == 0, "%zu bytes purged as the block was handed out", at_once);
    CHECK(tail == 0);
    CHECK_MSG(purged == round_page(offset + big) - round_page(offset + small), "purged %zu", purged);
    CHECK(b[small - 1] == 2); /* the block itself kept */

    /* 2: freed and taken again at its size: not listed */
    free(b);
    b = malloc(small);
    REQUIRE(b != NULL);
    memset(b, 3, small);
    before = tails_purged(&api);
    api.trim(0);
    CHECK_MSG(tails_purged(&api) == before, "a span reused at its own size purged %zu bytes", tails_purged(&api) - before);

    /* 3: grown in place by realloc and written: the pages it reached are followed */
    size_t grown = chunk / 2 + 8 * KiB;
    unsigned char *g = realloc(b, grown);
    REQUIRE(g != NULL);
    memset(g, 4, grown);
    before = tails_purged(&api);
    free(g);
    unsigned char *c = malloc(small);
    REQUIRE(c != NULL);
    api.trim(0);
    size_t tail_c = tail_resident(c, small, chunk);
    printf("medium_tails: realloc to %zu KiB %s; after it, 20 KiB with %zu pages resident past it, %zu bytes purged\n",
           grown / KiB, g == b ? "in place" : "moved", tail_c, tails_purged(&api) - before);
    CHECK_MSG(g == b && c == g, "realloc moved the block or the chunk was not reused: the test measures nothing");
    CHECK(tail_c == 0);
    CHECK(tails_purged(&api) - before == round_page(offset + grown) - round_page(offset + small));
    free(c);
  }

  if (larder) {
    /* 4: usable sizes */
    static const size_t sizes[] = {17 * 1024, 60 * 1024, 100 * 1024 + 1, 1024 * 1024 + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t in_use = alloc_stats(&api).bytes_in_use;
      void *m = malloc(sizes[k]);
      REQUIRE(m != NULL);
      size_t u = malloc_usable_size(m), grew = alloc_stats(&api).bytes_in_use - in_use;
      CHECK_MSG(u >= sizes[k] && u < sizes[k] + page, "malloc(%zu): usable %zu", sizes[k], u);
      CHECK_MSG(grew == u, "malloc(%zu): bytes_in_use grew by %zu, usable %zu", sizes[k], grew, u);
      void *r = realloc(m, sizes[k] + 2 * page);
      REQUIRE(r != NULL);
      size_t ur = malloc_usable_size(r);
      CHECK_MSG(ur >= sizes[k] + 2 * page && ur < sizes[k] + 3 * page, "realloc to %zu: usable %zu", sizes[k] + 2 * page, ur);
      free(r);
    }
  }

  /* 5: random sizes at scale, fast churn, then idle */
  if (larder) api.option_set("medium_cache_kb", "1024");
  if (larder) api.option_set("purge_delay_ms", "10000");
  size_t churn_before = larder ? tails_purged(&api) : 0;
  void **p = calloc(LIVE, sizeof *p);
  size_t *sz = calloc(LIVE, sizeof *sz);
  REQUIRE(p != NULL && sz != NULL);
  uint64_t seed = 15;
  size_t live = 0, worst = 0;
  for (long k = 0; k < LIVE + REPLACEMENTS; k++) {
    size_t i = k < LIVE ? (size_t)k : (size_t)(alloc_rng(&seed) % LIVE);
    if (p[i]) {
      free(p[i]);
      live -= sz[i];
    }
    sz[i] = small + (size_t)(alloc_rng(&seed) % (chunk - small + 1));
    p[i] = malloc(sz[i]);
    REQUIRE(p[i] != NULL);
    memset(p[i], (int)k, sz[i]);
    live += sz[i];
  }
  size_t rss_churn = srv_rss(), churn_purged = larder ? tails_purged(&api) - churn_before : 0;
  if (larder) CHECK(api.validate() == 0); /* the list of tails holds live spans only */
  if (larder) api.option_set("purge_delay_ms", "100");
  alloc_call(100 * KiB); /* a call after the change: the purge thread's next deadline */
  srv_sleep_ms(1500);
  size_t rss = srv_rss();
  size_t damaged = 0; /* the purge gave back no byte of a live block */
  for (size_t i = 0; i < LIVE; i++) {
    const unsigned char *b = p[i];
    unsigned char v = b[0];
    for (size_t o = 0; o < sz[i]; o += page / 2) damaged += b[o] != v;
    damaged += b[sz[i] - 1] != v;
  }
  CHECK_MSG(damaged == 0, "%zu sampled bytes of live blocks changed while idle", damaged);
  worst = rss > (size_t)(1.3 * (double)live) + 16 * MiB ? rss - (size_t)(1.3 * (double)live) - 16 * MiB : 0;
  printf("medium_tails: %d live blocks of 20-%zu KiB, %d replacements: live %.1f MiB, RSS %.1f MiB (%.2fx) after "
         "the churn (%zu bytes of tails purged), %.1f MiB (%.2fx) after 1.5 s without calls; bound 1.3x + 16 MiB\n",
         LIVE, chunk / KiB, REPLACEMENTS, ALLOC_MIB(live), ALLOC_MIB(rss_churn), (double)rss_churn / (double)live,
         churn_purged, ALLOC_MIB(rss), (double)rss / (double)live);
  if (larder) {
    CHECK_MSG(churn_purged == 0, "fast churn purged %zu bytes of tails", churn_purged);
    CHECK_MSG(worst == 0, "RSS over the bound by %.1f MiB", ALLOC_MIB(worst));
    CHECK(api.validate() == 0);
    api.option_set("purge_delay_ms", "1000");
  }
  for (size_t i = 0; i < LIVE; i++) free(p[i]);
  free(p);
  free(sz);
  if (!larder) return ALLOC_SKIP;
  return check_done();
}
