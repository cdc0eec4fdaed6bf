/* The free pages of partly used superblocks go back to the OS (global.c, "Free pages of partly
 * used superblocks"), and a double free of a block on such a page is still reported.
 *
 * A program frees nearly all of a large heap in random order and keeps a few blocks: most
 * superblocks then hold a block or two each. Until 2026-11-29 their pages stayed resident
 * (256 MiB of 16 B-1 KiB blocks, 0.3% kept: 77.5 MiB held for 0.8 MiB live).
 *
 * Modes (each run by the test's registration):
 *   idle   one thread allocates HEAP MiB of 16 B-1 KiB blocks (every byte written), keeps 1 in
 *          300 at random, frees the rest in random order, then makes no call: within 3 purge
 *          delays + 1 s (the registration sets LARDER_PURGE_DELAY_MS=200; the purge thread
 *          starts at 16 MiB mapped) RSS falls to within 16 MiB of the RSS before the heap was
 *          built plus the live bytes, and larder's bytes_dormant is not 0. Then every kept block
 *          still holds its bytes and validate() passes; a second heap as large is built, which
 *          wakes dormant superblocks (bytes_dormant falls), and checked; both are freed, and
 *          after malloc_trim(0) larder holds at most 4 MiB; and it all runs again.
 *   trim   the same, with malloc_trim(0) instead of the idle wait: right after it.
 *   pool   POOL_THREADS threads each build and thin a share of HEAP MiB (the registration: 32),
 *          then wait, making no call, while the main thread reads RSS: within 4 purge delays + 1
 *          s it falls to within POOL_BOUND_MIB of the RSS before plus the live bytes. Each idle
 *          thread's heap gives its sparse superblocks, the current ones of its classes included,
 *          to the global heap, whose free pages then go back (heap.c, heap_give_empty_locked);
 *          until 2026-11-29 a heap kept them, every page resident (32 MiB over 4 threads:
 *          8.6-9.1 MiB above live after the wait, now 3.4-4.5; a header page and a live block's
 *          page of each superblock stay). Then the threads check and free what they kept.
 *   double-free, double-free-remote   (children, which must be stopped with "double free"):
 *          64 B blocks, one kept per superblock (its first), the rest freed, malloc_trim(0);
 *          then a block freed before the trim, on a page no longer resident (mincore), is
 *          freed again, by the main thread or by another thread. Its tag went with its page.
 * Under another allocator: idle and trim run and print their figures; the bounds are larder's.
 *
 * usage: alloc_free_pages_partly_used idle|trim|pool [MiB] | double-free | double-free-remote */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>

#define MiB ((size_t)1 << 20)
#define KEEP_ONE_IN 300

/* (no allocation: the idle wait makes no call) */
static size_t rss_bytes(void) { return srv_rss(); }

static void *array(size_t n, size_t size) {
  void *p = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return p;
}

typedef struct heap_s {
  size_t n, kept_count;
  void **p;
  uint32_t *size;
  unsigned char *kept;
} test_heap_t;

/* Builds the heap (every block filled with its pattern) and frees all but 1 in KEEP_ONE_IN, in
 * random order; returns the live bytes. */
static size_t build_and_thin(test_heap_t *h, size_t mib, uint64_t seed) {
  size_t bytes = 0;
  for (h->n = 0; bytes < mib * MiB; h->n++) {
    uint32_t size = 16 + (uint32_t)(alloc_rng(&seed) % 1009);
    h->size[h->n] = size;
    h->p[h->n] = malloc(size);
    REQUIRE(h->p[h->n] != NULL);
    alloc_fill(h->p[h->n], size);
    h->kept[h->n] = alloc_rng(&seed) % KEEP_ONE_IN == 0;
    bytes += size;
  }
  size_t *order = array(h->n, sizeof *order), live = 0;
  h->kept_count = 0;
  for (size_t i = 0; i < h->n; i++) order[i] = i;
  for (size_t i = h->n; i > 1; i--) {
    size_t j = alloc_rng(&seed) % i, t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < h->n; i++) {
    size_t k = order[i];
    if (h->kept[k]) {
      live += h->size[k];
      h->kept_count++;
    } else {
      free(h->p[k]);
      h->p[k] = NULL;
    }
  }
  munmap(order, h->n * sizeof *order);
  return live;
}

static void check_kept_and_free(test_heap_t *h) {
  size_t bad = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (!h->p[i]) continue;
    if (alloc_check(h->p[i], h->size[i]) != (size_t)-1) bad++;
    free(h->p[i]);
    h->p[i] = NULL;
  }
  CHECK_MSG(bad == 0, "%zu kept blocks lost their bytes", bad);
}

static int heap_mode(bool idle, size_t mib) {
  alloc_api_t api = alloc_api();
  bool larder = api.validate != NULL;
  double delay_ms = larder ? api.option_get("purge_delay_ms") : 200;
  size_t most = mib * MiB / 16 + 1;
  test_heap_t h = {0, 0, array(most, sizeof(void *)), array(most, sizeof(uint32_t)), array(most, 1)};
  for (int round = 0; round < 2; round++) {
    size_t before = rss_bytes();
    size_t live = build_and_thin(&h, mib, 42 + (uint64_t)round);
    size_t peak = 0, after = 0;
    double waited = 0;
    if (idle) {
      /* no call at all while RSS is read */
      for (; waited <= 3 * delay_ms + 1000; waited += 50) {
        after = rss_bytes();
        if (after > peak) peak = after;
        if (after <= before + live + 16 * MiB) break;
        srv_sleep_ms(50);
      }
    } else {
      peak = rss_bytes();
      malloc_trim(0);
      after = rss_bytes();
    }
    larder_stats_t st = larder ? alloc_stats(&api) : (larder_stats_t){0};
    printf("free_pages_partly_used %s round %d: %zu blocks, %zu kept (%.1f MiB live); RSS %.1f MiB before, %.1f "
           "after the frees, %.1f after %s; dormant %.1f MiB, held %.1f MiB\n",
           idle ? "idle" : "trim", round, h.n, h.kept_count, live / (double)MiB, before / (double)MiB,
           peak / (double)MiB, after / (double)MiB, idle ? "the idle wait" : "malloc_trim(0)",
           st.bytes_dormant / (double)MiB, st.bytes_held / (double)MiB);
    if (larder) {
      CHECK_MSG(after <= before + live + 16 * MiB, "round %d: RSS %.1f MiB, more than %.1f MiB before + %.1f live + 16",
                round, after / (double)MiB, before / (double)MiB, live / (double)MiB);
      CHECK_MSG(st.bytes_dormant > 0, "round %d: no page of a partly used superblock was given back", round);
      CHECK(api.validate() == 0);
    }
    /* A second heap as large: the heaps take the superblocks with dormant units and wake them
     * (their blocks listed again, their pages written back), so it costs no more new memory
     * than it would have; every block of both is checked. */
    test_heap_t second = {0, 0, array(most, sizeof(void *)), array(most, sizeof(uint32_t)), array(most, 1)};
    size_t bytes = 0;
    uint64_t seed = 7 + (uint64_t)round;
    for (; bytes < mib * MiB; second.n++) {
      second.size[second.n] = 16 + (uint32_t)(alloc_rng(&seed) % 1009);
      REQUIRE((second.p[second.n] = malloc(second.size[second.n])) != NULL);
      alloc_fill(second.p[second.n], second.size[second.n]);
      bytes += second.size[second.n];
    }
    size_t again = rss_bytes();
    larder_stats_t woken = larder ? alloc_stats(&api) : (larder_stats_t){0};
    printf("free_pages_partly_used %s round %d: a second heap of %zu blocks: RSS %.1f MiB (first peak %.1f), dormant "
           "%.1f MiB\n", idle ? "idle" : "trim", round, second.n, again / (double)MiB, peak / (double)MiB,
           woken.bytes_dormant / (double)MiB);
    if (larder) {
      CHECK_MSG(woken.bytes_dormant < st.bytes_dormant, "round %d: the second heap woke no superblock", round);
      CHECK(api.validate() == 0);
    }
    check_kept_and_free(&second);
    munmap(second.p, most * sizeof(void *));
    munmap(second.size, most * sizeof(uint32_t));
    munmap(second.kept, most);
    check_kept_and_free(&h);
    if (larder) {
      malloc_trim(0);
      st = alloc_stats(&api);
      /* (what the C library holds may keep a superblock, dormant units and all) */
      CHECK_MSG(st.bytes_held <= 4 * MiB && st.bytes_dormant <= st.bytes_held,
                "round %d: %zu bytes held (%zu dormant, %zu in use) after every block was freed and a trim", round,
                st.bytes_held, st.bytes_dormant, st.bytes_in_use);
      CHECK(api.validate() == 0);
    }
  }
  return check_done();
}

/* ---- a pool of threads that thin their heaps, then idle ---- */

#define POOL_THREADS 4
#define POOL_BOUND_MIB 6
typedef struct pool_thread_s {
  pthread_t tid;
  test_heap_t h;
  size_t mib, live;
  uint64_t seed;
  pthread_barrier_t *built, *checked;
} pool_thread_t;

static void *pool_thread(void *arg) {
  pool_thread_t *t = arg;
  t->live = build_and_thin(&t->h, t->mib, t->seed);
  pthread_barrier_wait(t->built);
  pthread_barrier_wait(t->checked); /* no call meanwhile: the idle */
  check_kept_and_free(&t->h);
  return NULL;
}

static int pool_mode(size_t mib) {
  alloc_api_t api = alloc_api();
  bool larder = api.validate != NULL;
  double delay_ms = larder ? api.option_get("purge_delay_ms") : 200;
  pthread_barrier_t built, checked;
  pthread_barrier_init(&built, NULL, POOL_THREADS + 1);
  pthread_barrier_init(&checked, NULL, POOL_THREADS + 1);
  static pool_thread_t t[POOL_THREADS];
  size_t share = mib / POOL_THREADS, most = share * MiB / 16 + 1;
  size_t before = rss_bytes();
  for (int i = 0; i < POOL_THREADS; i++) {
    t[i] = (pool_thread_t){.mib = share, .seed = 100 + (uint64_t)i, .built = &built, .checked = &checked};
    t[i].h = (test_heap_t){0, 0, array(most, sizeof(void *)), array(most, sizeof(uint32_t)), array(most, 1)};
    REQUIRE(pthread_create(&t[i].tid, NULL, pool_thread, &t[i]) == 0);
  }
  pthread_barrier_wait(&built);
  size_t live = 0, peak = rss_bytes(), after = 0;
  for (int i = 0; i < POOL_THREADS; i++) live += t[i].live;
  double waited = 0;
  for (; waited <= 4 * delay_ms + 1000; waited += 50) { /* the main thread makes no call either */
    after = rss_bytes();
    if (after <= before + live + POOL_BOUND_MIB * MiB) break;
    srv_sleep_ms(50);
  }
  larder_stats_t st = larder ? alloc_stats(&api) : (larder_stats_t){0};
  printf("free_pages_partly_used pool: %d threads, %.1f MiB live; RSS %.1f MiB before, %.1f after the frees, %.1f "
         "after %.0f ms idle; dormant %.1f MiB, held %.1f MiB\n",
         POOL_THREADS, live / (double)MiB, before / (double)MiB, peak / (double)MiB, after / (double)MiB, waited,
         st.bytes_dormant / (double)MiB, st.bytes_held / (double)MiB);
  if (larder)
    CHECK_MSG(after <= before + live + POOL_BOUND_MIB * MiB,
              "RSS %.1f MiB after the idle, more than %.1f MiB before + %.1f live + %d", after / (double)MiB,
              before / (double)MiB, live / (double)MiB, POOL_BOUND_MIB);
  pthread_barrier_wait(&checked);
  for (int i = 0; i < POOL_THREADS; i++) pthread_join(t[i].tid, NULL);
  if (larder) CHECK(api.validate() == 0);
  return check_done();
}

/* ---- double free of a block on a page given back ---- */

static void *freer(void *arg) {
  free(arg);
  return NULL;
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static int double_free_mode(bool remote) {
  if (!alloc_is_larder()) return ALLOC_SKIP;
  alloc_api_t api = alloc_api();
  uintptr_t sb_size = (uintptr_t)api.option_get("superblock_size");
  enum { N = 40000 };
  static void *p[N];
  for (int i = 0; i < N; i++) {
    REQUIRE((p[i] = malloc(64)) != NULL);
    memset(p[i], 0x5a, 64);
  }
  /* keep the lowest block of each superblock (by address order); free the rest */
  static void *sorted[N];
  memcpy(sorted, p, sizeof sorted);
  qsort(sorted, N, sizeof sorted[0], by_address);
  static unsigned char keep[N];
  for (int i = 0; i < N; i++) {
    void **at = bsearch(&p[i], sorted, N, sizeof sorted[0], by_address);
    REQUIRE(at != NULL);
    keep[i] = at == sorted || (((uintptr_t)at[-1] ^ (uintptr_t)p[i]) & ~(sb_size - 1)) != 0;
  }
  for (int i = 0; i < N; i++)
    if (!keep[i]) free(p[i]);
  malloc_trim(0);
  long page = sysconf(_SC_PAGESIZE);
  for (int i = 0; i < N; i++) {
    if (keep[i]) continue;
    unsigned char resident = 1;
    uintptr_t at = (uintptr_t)p[i] & ~(uintptr_t)(page - 1);
    if (mincore((void *)at, (size_t)page, &resident) == 0 && !(resident & 1)) {
      alloc_announce(p[i]);
      if (remote) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, freer, p[i]) == 0);
        pthread_join(t, NULL);
        malloc_trim(0); /* (the other thread's free may wait in its batch: sent at its exit) */
      } else {
        free(p[i]);
      }
      return 0; /* not reached under larder */
    }
  }
  fprintf(stderr, "no page of a freed block was given back\n");
  return 3;
}

static int expect_double_free(const char *mode) {
  if (!alloc_is_larder()) return ALLOC_SKIP;
  char *args[] = {(char *)mode, NULL};
  alloc_child_t child;
  REQUIRE(alloc_run_self(args, NULL, 60, &child) == 0);
  char description[80];
  alloc_describe_status(child.status, description, sizeof description);
  printf("free_pages_partly_used %s: child %s; said: %s\n", mode, description, child.err);
  CHECK_MSG(WIFSIGNALED(child.status) && WTERMSIG(child.status) == SIGABRT &&
                alloc_report_names_announced(child.err, "double free"),
            "%s: a second free of a block on a page given back was not reported (child %s)", mode, description);
  return check_done();
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *mode = argc > 1 ? argv[1] : "trim";
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 64;
  if (strcmp(mode, "idle") == 0) return heap_mode(true, mib);
  if (strcmp(mode, "trim") == 0) return heap_mode(false, mib);
  if (strcmp(mode, "pool") == 0) return pool_mode(mib);
  if (strcmp(mode, "double-free") == 0) return double_free_mode(false);
  if (strcmp(mode, "double-free-remote") == 0) return double_free_mode(true);
  if (strcmp(mode, "expect-double-free") == 0) return expect_double_free("double-free");
  if (strcmp(mode, "expect-double-free-remote") == 0) return expect_double_free("double-free-remote");
  fprintf(stderr, "usage: %s idle|trim|pool [MiB] | expect-double-free | expect-double-free-remote\n", argv[0]);
  return 2;
}
