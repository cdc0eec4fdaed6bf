/* The fit tier (LARDER_FIT_ABOVE, src/fit.c): blocks above the option's size, up to three
 * quarters of a superblock, come from a best-fit, coalescing allocator of the thread's heap.
 * Registered with LARDER_FIT_ABOVE=1024 (and LARDER_DEBUG=1 once). Checks:
 *   - the tier serves the sizes it should, and the classes the rest (the statistics' fit_allocs),
 *     and follows the option's changes at run time;
 *   - a freed block serves a request of another size (best fit), and neighbours merge: a
 *     region whose blocks are all freed serves one block of most of its size;
 *   - server scale: 20,000 live blocks of 1-48 KiB, freed in random order and replaced, each
 *     filled and checked, the validation walk passing, every block 16-aligned with its usable
 *     size at least the request;
 *   - other threads' frees (no lock: they wait on their regions' stacks) come back to the owner,
 *     by its next malloc and by the purge for an owner that stopped calling; the statistics'
 *     bytes in use fall to zero and the regions go back;
 *   - realloc keeps the bytes, calloc zeroes a reused block;
 *   - malloc_trim, and 8 purge delays without a call, give back the pages inside free blocks of
 *     regions still in use;
 *   - bad frees stop the program naming the address: double, interior, remote double, a
 *     remote free and then the owner's, and the owner's and another thread's at once (race). */
#include <malloc.h>
#include <sys/mman.h>

#include "alloc_util.h"

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

static alloc_api_t api;

static size_t superblock_size(void) { return (size_t)api.option_get("superblock_size"); }

static void *must(size_t n) {
  void *p = malloc(n);
  REQUIRE(p != NULL);
  return p;
}

/* ---- sizes go where the option says ---- */
static void check_routing(void) {
  larder_stats_t a = alloc_stats(&api);
  void *small = must(1024), *fit = must(1025), *top = must(superblock_size() / 4 * 3);
  larder_stats_t b = alloc_stats(&api);
  CHECK_MSG(b.fit_allocs - a.fit_allocs == 2, "fit_allocs rose by %zu for 1025 B and 3/4 of S (1024 B is a class's)",
            b.fit_allocs - a.fit_allocs);
  CHECK(malloc_usable_size(fit) >= 1025 && malloc_usable_size(fit) < 1025 + 64);
  CHECK(malloc_usable_size(top) >= superblock_size() / 4 * 3);
  CHECK(((uintptr_t)fit & 15) == 0 && ((uintptr_t)top & 15) == 0);
  free(small);
  free(fit);
  free(top);
  larder_stats_t c = alloc_stats(&api);
  CHECK_MSG(c.fit_bytes_in_use == 0, "fit bytes in use %zu after every fit block was freed", c.fit_bytes_in_use);
}

/* The option changes at run time (last: blocks of the classes' bins filled meanwhile stay). Off,
 * a 2,000-byte block is a class's; on again, a 3,000-byte one is the tier's (the 2,000-byte
 * class's bin, filled while the tier was off, serves that size until it empties). */
static void check_option_change(void) {
  larder_stats_t c = alloc_stats(&api);
  CHECK(api.option_set("fit_above", "0") == 0);
  void *off = must(2000);
  larder_stats_t d = alloc_stats(&api);
  CHECK(api.option_set("fit_above", "1024") == 0);
  void *on = must(3000);
  larder_stats_t e = alloc_stats(&api);
  CHECK_MSG(d.fit_allocs == c.fit_allocs && e.fit_allocs == c.fit_allocs + 1, "fit_allocs %zu, %zu, %zu: the option's change was not followed",
            c.fit_allocs, d.fit_allocs, e.fit_allocs);
  CHECK(api.option_set("fit_above", "20000") != 0); /* above the largest class: refused */
  free(off);
  free(on);
}

/* ---- best fit and merging ---- */
static void check_best_fit(void) {
  /* three blocks side by side; the first freed serves a smaller request of another size */
  char *a = must(8000), *b = must(1500), *c = must(8000);
  free(a);
  char *d = must(6000);
  CHECK_MSG(d == a, "a 6,000-byte request took %p, not the freed 8,000-byte block %p", (void *)d, (void *)a);
  free(d);
  free(b);
  free(c);
  /* 40 blocks of 1,200 B from one region (a fresh thread's heap is not used here: the main
   * thread's may hold others, so the region is read from the blocks' addresses) */
  size_t s = superblock_size();
  void *blocks[40];
  for (int i = 0; i < 40; i++) blocks[i] = must(1200);
  uintptr_t region = (uintptr_t)blocks[39] & ~(s - 1);
  alloc_shuffle(blocks, 40, 7);
  for (int i = 0; i < 40; i++) free(blocks[i]);
  CHECK(api.validate() == 0);
  /* merged back: one block of most of the region fits in it again */
  void *big = must(s / 2 + s / 8);
  CHECK_MSG(((uintptr_t)big & ~(s - 1)) == region || alloc_stats(&api).fit_regions <= 2,
            "after 40 blocks were freed, a block of 5/8 of S needed a new region (%zu regions)", alloc_stats(&api).fit_regions);
  free(big);
}

/* ---- server scale: random sizes, random order, checked contents ---- */
static void check_scale(unsigned live, unsigned rounds) {
  /* (the test's own arrays from the OS: of the tier's sizes, they would count in its figures) */
  void **v = mmap(NULL, live * sizeof *v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  size_t *sz = mmap(NULL, live * sizeof *sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(v != MAP_FAILED && sz != MAP_FAILED);
  uint64_t seed = 42;
  size_t max = superblock_size() / 4 * 3;
  for (unsigned i = 0; i < live; i++) {
    sz[i] = 1025 + alloc_rng(&seed) % (alloc_rng(&seed) % 4 == 0 ? max - 1025 : 4096);
    v[i] = must(sz[i]);
    CHECK(((uintptr_t)v[i] & 15) == 0 && malloc_usable_size(v[i]) >= sz[i]);
    alloc_fill(v[i], sz[i]);
  }
  size_t bad = 0;
  for (unsigned r = 0; r < rounds; r++) {
    for (unsigned k = 0; k < live / 2; k++) {
      unsigned i = (unsigned)(alloc_rng(&seed) % live);
      bad += alloc_check(v[i], sz[i]) != (size_t)-1;
      free(v[i]);
      sz[i] = 1025 + alloc_rng(&seed) % (alloc_rng(&seed) % 4 == 0 ? max - 1025 : 4096);
      v[i] = must(sz[i]);
      alloc_fill(v[i], sz[i]);
    }
    CHECK_MSG(api.validate() == 0, "validation failed after round %u", r);
  }
  larder_stats_t st = alloc_stats(&api);
  size_t want = 0;
  for (unsigned i = 0; i < live; i++) want += malloc_usable_size(v[i]);
  CHECK_MSG(st.fit_bytes_in_use == want, "fit bytes in use %zu, the live blocks' usable sizes sum to %zu", st.fit_bytes_in_use, want);
  /* within a quarter of the live bytes, regions included (size classes would hold more) */
  CHECK_MSG((double)st.fit_regions * (double)superblock_size() < 1.25 * (double)want + 4.0 * (double)superblock_size(),
            "%zu regions for %zu live bytes", st.fit_regions, want);
  for (unsigned i = 0; i < live; i++) {
    bad += alloc_check(v[i], sz[i]) != (size_t)-1;
    free(v[i]);
  }
  CHECK_MSG(bad == 0, "%zu blocks lost their contents", bad);
  st = alloc_stats(&api);
  CHECK_MSG(st.fit_bytes_in_use == 0 && st.fit_regions <= 1, "after every free: %zu bytes in use, %zu regions kept",
            st.fit_bytes_in_use, st.fit_regions);
  CHECK(api.validate() == 0);
  printf("fit_tier scale: %u live blocks of 1-%zu KiB, %u rounds: contents kept, regions at the end %zu\n", live, max >> 10,
         rounds, st.fit_regions);
  munmap(v, live * sizeof *v);
  munmap(sz, live * sizeof *sz);
}

/* ---- other threads' frees ---- */
#define HANDED 5000
static void *handed[HANDED];
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t step_cond = PTHREAD_COND_INITIALIZER;
static int step;

static void step_to(int s) {
  pthread_mutex_lock(&step_lock);
  step = s;
  pthread_cond_broadcast(&step_cond);
  pthread_mutex_unlock(&step_lock);
}
static void step_wait(int s) {
  pthread_mutex_lock(&step_lock);
  while (step < s) pthread_cond_wait(&step_cond, &step_lock);
  pthread_mutex_unlock(&step_lock);
}

/* The owner: allocates, hands the blocks over, then (collect_by_malloc) mallocs once more
 * after the frees, or stops calling until told to exit. */
static int collect_by_malloc;
static void *owner_thread(void *arg) {
  (void)arg;
  uint64_t seed = 9;
  for (int i = 0; i < HANDED; i++) {
    handed[i] = must(1100 + alloc_rng(&seed) % 6000);
    memset(handed[i], 0x5a, 1100);
  }
  step_to(1);
  step_wait(2);
  if (collect_by_malloc) {
    void *p = must(2000); /* collects the frees (at most 4 regions a malloc) */
    for (int i = 0; i < 4096 && alloc_stats(&api).bytes_remote_pending; i++) {
      free(p);
      p = must(2000);
    }
    free(p);
    CHECK(api.validate() == 0);
  }
  step_to(3);
  step_wait(4);
  return NULL;
}

static void *freer_thread(void *arg) {
  (void)arg;
  step_wait(1);
  for (int i = 0; i < HANDED; i++) free(handed[i]);
  return NULL;
}

static void check_remote(int by_malloc) {
  collect_by_malloc = by_malloc;
  step = 0;
  larder_stats_t before = alloc_stats(&api);
  pthread_t o, f;
  REQUIRE(pthread_create(&o, NULL, owner_thread, NULL) == 0);
  REQUIRE(pthread_create(&f, NULL, freer_thread, NULL) == 0);
  REQUIRE(pthread_join(f, NULL) == 0);
  larder_stats_t mid = alloc_stats(&api);
  CHECK_MSG(mid.fit_allocs - before.fit_allocs >= HANDED, "the owner's blocks were not the tier's");
  step_to(2);
  step_wait(3);
  if (!by_malloc) { /* the owner makes no call: malloc_trim's purge collects for it */
    CHECK(api.trim(0) >= 0);
  }
  larder_stats_t after = alloc_stats(&api);
  CHECK_MSG(after.fit_bytes_in_use <= before.fit_bytes_in_use + 4096 && after.bytes_remote_pending == 0,
            "%s: fit bytes in use %zu (before %zu), remote pending %zu", by_malloc ? "owner's malloc" : "purge",
            after.fit_bytes_in_use, before.fit_bytes_in_use, after.bytes_remote_pending);
  if (!by_malloc)
    CHECK_MSG(after.fit_regions <= before.fit_regions + 1, "the purge left %zu regions (before: %zu)", after.fit_regions,
              before.fit_regions);
  step_to(4);
  REQUIRE(pthread_join(o, NULL) == 0);
  CHECK(api.validate() == 0);
  printf("fit_tier remote: %d blocks freed by another thread, collected by the %s\n", HANDED, by_malloc ? "owner's malloc" : "purge");
}

/* ---- pages inside free blocks go back at malloc_trim (and for a thread that stops calling) ---- */
static void check_free_pages(int idle) {
  enum { N = 2000 };
  static char *v[N];
  for (int i = 0; i < N; i++) {
    v[i] = must(12000);
    memset(v[i], 0x3c, 12000); /* every page resident */
  }
  /* every other block freed: the regions stay partly used, their free blocks kept apart */
  for (int i = 0; i < N; i += 2) free(v[i]);
  size_t before = alloc_rss_bytes();
  if (idle) { /* no call at all for 8 purge delays of 100 ms: the purge thread's runs */
    CHECK(api.option_set("purge_delay_ms", "100") == 0);
    alloc_sleep_ms(800);
  } else {
    CHECK(api.trim(0) >= 0);
  }
  size_t after = alloc_rss_bytes();
  if (idle) CHECK(api.option_set("purge_delay_ms", "1000") == 0);
  size_t freed = (size_t)N / 2 * 12000;
  CHECK_MSG(before > after && before - after >= freed / 2, "%s gave back %zu KiB of the %zu KiB freed inside regions in use",
            idle ? "idling" : "malloc_trim", before > after ? (before - after) >> 10 : 0, freed >> 10);
  /* the blocks still live keep their bytes; the purged ones serve mallocs again, zero or not */
  size_t bad = 0;
  for (int i = 1; i < N; i += 2)
    for (int k = 0; k < 12000; k += 997) bad += v[i][k] != 0x3c;
  CHECK_MSG(bad == 0, "%zu bytes of live blocks changed by the purge", bad);
  for (int i = 0; i < N; i += 2) {
    v[i] = must(12000);
    memset(v[i], 0x3c, 12000);
  }
  CHECK(api.validate() == 0);
  for (int i = 0; i < N; i++) free(v[i]);
  printf("fit_tier free pages: %s gave back %zu KiB of %zu KiB freed inside regions in use\n", idle ? "8 idle delays" : "malloc_trim",
         before > after ? (before - after) >> 10 : 0, freed >> 10);
}

/* ---- realloc and calloc ---- */
static void check_realloc_calloc(void) {
  char *p = must(1500);
  for (int i = 0; i < 1500; i++) p[i] = (char)i;
  p = realloc(p, 9000);
  REQUIRE(p);
  int same = 1;
  for (int i = 0; i < 1500; i++) same &= p[i] == (char)i;
  p = realloc(p, 30000);
  REQUIRE(p);
  for (int i = 0; i < 1500; i++) same &= p[i] == (char)i;
  p = realloc(p, 1100);
  REQUIRE(p);
  for (int i = 0; i < 1100; i++) same &= p[i] == (char)i;
  CHECK_MSG(same, "realloc lost bytes");
  free(p);
  /* a block filled and freed, then calloc of its size: zero throughout */
  unsigned char *q = must(5000);
  memset(q, 0xab, malloc_usable_size(q));
  free(q);
  unsigned char *z = calloc(1, 5000);
  REQUIRE(z);
  /* every usable byte (calloc clears them all), read through a pointer whose object size the
   * compiler does not know (UBSan's object-size check holds a read to the 5,000 asked for) */
  unsigned char *volatile launder = z;
  const unsigned char *all = launder;
  size_t nonzero = 0;
  for (size_t i = 0; i < malloc_usable_size(z); i++) nonzero += all[i] != 0;
  CHECK_MSG(nonzero == 0, "calloc handed back %zu non-zero bytes", nonzero);
  free(z);
}

/* ---- bad frees, each in a child ---- */
static void *free_arg(void *p) {
  free(p);
  return NULL;
}
/* race: the owner and another thread free p at once, both let go by one flag */
static atomic_int race_go;
static void *free_at_go(void *p) {
  while (!atomic_load(&race_go)) {
  }
  free(p);
  return NULL;
}
static int child(const char *mode) {
  char *p = must(3000);
  char *keep = must(3000); /* so that p's region stays */
  (void)keep;
  if (strcmp(mode, "double") == 0) {
    free(p);
    alloc_announce(p);
    free(p);
  } else if (strcmp(mode, "interior") == 0) {
    alloc_announce(p + 32);
    free(p + 32);
  } else if (strcmp(mode, "remote-double") == 0) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_arg, p) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    alloc_announce(p);
    REQUIRE(pthread_create(&t, NULL, free_arg, p) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
  } else if (strcmp(mode, "remote-then-owner") == 0) {
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_arg, p) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    alloc_announce(p);
    free(p); /* still on its region's stack: the owner's free finds it claimed */
  } else if (strcmp(mode, "race") == 0) {
    /* one of the two claims the block (a CAS of its header); the other finds it claimed or
     * already merged into a free neighbour: reported, as a double or as an invalid free */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_at_go, p) == 0);
    alloc_announce(p);
    atomic_store(&race_go, 1);
    free(p);
    REQUIRE(pthread_join(t, NULL) == 0);
  } else if (strcmp(mode, "realloc-after-free") == 0) {
    free(p);
    alloc_announce(p);
    p = realloc(p, 5000);
  }
  return 0;
}

static void run_bad(const char *mode, const char *message) {
  char *args[] = {(char *)"--child", (char *)mode, NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, NULL, 20, &c) == 0);
  int aborted = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT;
  CHECK_MSG(aborted && alloc_report_names_announced(c.err, message), "%s: expected \"%s\" naming the address; got: %s", mode,
            message, c.err);
  printf("fit_tier bad free %-20s: %s\n", mode, aborted ? "stopped" : "NOT stopped");
}

int main(int argc, char **argv) {
  api = alloc_api();
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (!api.validate || !api.option_get) {
    printf("fit_tier: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  if (api.option_get("fit_above") != 1024) {
    printf("fit_tier: skipped, run with LARDER_FIT_ABOVE=1024 (CTest does)\n");
    return ALLOC_SKIP;
  }
  unsigned live = argc > 1 ? (unsigned)atoi(argv[1]) : 20000, rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 6;
  check_routing();
  check_best_fit();
  check_scale(live, rounds);
  check_remote(1);
  check_remote(0);
  check_realloc_calloc();
  check_free_pages(0);
  check_free_pages(1);
  check_option_change();
  run_bad("double", "double free");
  run_bad("interior", "invalid free");
  run_bad("remote-double", "double free");
  run_bad("remote-then-owner", "double free");
  run_bad("realloc-after-free", "realloc after free");
  run_bad("race", " free");
  CHECK(api.validate() == 0);
  return check_done();
}
