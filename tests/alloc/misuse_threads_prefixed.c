/* The prefixed API (larder_*) from several threads at once, with nothing else: the test that
 * ThreadSanitizer runs (scripts/test-sanitize.sh). The program never calls the standard names,
 * so linking liblarder.a does not pull in larder's malloc/free (wrappers.c) and the sanitizer
 * keeps its own malloc for itself and for libc; every larder call is then seen by TSan through
 * larder's own instrumented code, atomics and locks. (The other allocator tests call malloc,
 * which in a TSan build makes larder and TSan's interceptors both claim the standard names:
 * they crash inside the TSan runtime, which is no finding about larder.)
 *
 * Not a misuse of the API, but it belongs with the hardening tests; what it exercises, all at
 * the same time:
 *   - blocks handed from producer threads to consumer threads, which check their pattern and
 *     free them (remote frees), or realloc them first (a remote block grown and shrunk);
 *   - small, medium (~100 KiB) and large (~1-2 MiB) blocks, aligned ones and
 *     larder_malloc_shared ones;
 *   - producers that exit with blocks still in flight (their heaps are abandoned and reused by
 *     the next wave of threads);
 *   - a thread that reads the statistics (larder_stats_get), calls larder_trim and changes
 *     run-time options (larder_option_set: the purge's delay, the caches' bounds, the remote
 *     free's mark), which the purge thread and the other threads' slow paths read meanwhile,
 *     while the others work;
 *   - larder_validate at the end, which must find nothing.
 * Without TSan it is a quick stress test of the same (it is registered with the others).
 *
 * usage: alloc_misuse_threads_prefixed [blocks-per-producer [nostats]]   (default 20000)
 *   nostats: no observer thread (statistics and trim), so that what TSan reports is about the
 *            hand-over of blocks between threads alone. */
#include <pthread.h>
#include <sched.h>

#include "alloc_util.h"

#define PAIRS 3
#define RING 256
#define WAVES 3

typedef struct {
  _Atomic(void *) slot[RING];
  _Atomic(size_t) size[RING];
  atomic_long produced, consumed;
  atomic_int done;
} ring_t;

static ring_t rings[PAIRS];
static atomic_long bad, observer_rounds, option_refusals;
static atomic_long bad_kind[4]; /* failed or misaligned, damaged in flight, realloc, calloc */
static atomic_int stop_observer;
static long per_producer = 20000;

typedef struct {
  int pair, wave;
} prod_arg_t;

static size_t pick_size(uint64_t *s, size_t *align) {
  unsigned r = (unsigned)(alloc_rng(s) % 1000);
  *align = 0;
  if (r < 900) return 1 + alloc_rng(s) % 600;
  if (r < 960) {
    *align = (size_t)64 << (alloc_rng(s) % 7); /* 64 B .. 4 KiB */
    return 1 + alloc_rng(s) % 3000;
  }
  if (r < 995) return 60000 + alloc_rng(s) % 80000;
  return (1u << 20) + alloc_rng(s) % (1u << 20);
}

static void *producer(void *arg) {
  prod_arg_t *a = arg;
  ring_t *rg = &rings[a->pair];
  uint64_t s = (uint64_t)(a->pair * 31 + a->wave * 7 + 1);
  long n = per_producer / WAVES;
  for (long i = 0; i < n; i++) {
    size_t align, size = pick_size(&s, &align);
    void *p;
    if (align && (alloc_rng(&s) & 1)) {
      p = larder_malloc_shared(size);
      align = 64; /* whole cache lines */
    } else if (align) {
      p = larder_memalign(align, size);
    } else {
      p = larder_malloc(size);
    }
    if (!p || (align && ((uintptr_t)p % align))) {
      atomic_fetch_add(&bad, 1);
      atomic_fetch_add(&bad_kind[0], 1);
      continue;
    }
    size_t fill = size < 4096 ? size : 4096; /* the pattern covers the first 4 KiB */
    alloc_fill(p, fill);
    unsigned k = (unsigned)(atomic_load_explicit(&rg->produced, memory_order_relaxed) % RING);
    /* wait for the consumer to empty the slot */
    while (atomic_load_explicit(&rg->slot[k], memory_order_acquire) != NULL) sched_yield();
    atomic_store_explicit(&rg->size[k], fill, memory_order_relaxed);
    atomic_store_explicit(&rg->slot[k], p, memory_order_release);
    atomic_fetch_add_explicit(&rg->produced, 1, memory_order_relaxed);
    /* some memory of its own, freed locally */
    if ((i & 15) == 0) {
      void *own = larder_calloc(1 + i % 7, 24);
      if (!own) {
        atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&bad_kind[3], 1);
      }
      larder_free(own);
    }
  }
  return NULL; /* exits with its last blocks still in the ring */
}

static void *consumer(void *arg) {
  ring_t *rg = &rings[(intptr_t)arg];
  uint64_t s = (uint64_t)(intptr_t)arg + 99;
  unsigned k = 0;
  for (;;) {
    void *p = atomic_load_explicit(&rg->slot[k], memory_order_acquire);
    if (!p) {
      if (atomic_load(&rg->done) && atomic_load(&rg->consumed) == atomic_load(&rg->produced)) break;
      sched_yield();
      continue;
    }
    size_t fill = atomic_load_explicit(&rg->size[k], memory_order_relaxed);
    if (alloc_check(p, fill) != (size_t)-1) {
      atomic_fetch_add(&bad, 1);
      atomic_fetch_add(&bad_kind[1], 1);
    }
    atomic_store_explicit(&rg->slot[k], NULL, memory_order_release);
    if (alloc_rng(&s) % 8 == 0) {
      size_t grow = fill + 1 + alloc_rng(&s) % 2000;
      void *q = larder_realloc(p, grow);
      if (!q || alloc_check_as(q, p, fill, fill) != (size_t)-1) {
        atomic_fetch_add(&bad, 1);
        atomic_fetch_add(&bad_kind[2], 1);
      }
      p = q;
    }
    larder_free(p);
    atomic_fetch_add(&rg->consumed, 1);
    k = (k + 1) % RING;
  }
  return NULL;
}

/* Run-time options the observer changes in turn, every one back to its default by the end of
 * the list (so the second half restores what the first half set). */
static const char *const option_changes[][2] = {
    {"purge_delay_ms", "0"},     {"medium_cache_kb", "0"},    {"large_cache_mb", "0"},  {"remote_free_check", "0"},
    {"empty_fraction", "0.5"},   {"purge_delay_ms", "1000"},  {"medium_cache_kb", "1024"},
    {"large_cache_mb", "64"},    {"remote_free_check", "1"},  {"empty_fraction", "0.25"},
};
#define OPTION_CHANGES (sizeof option_changes / sizeof option_changes[0])

static void *observer(void *arg) {
  (void)arg;
  unsigned long changes = 0;
  while (!atomic_load(&stop_observer)) {
    larder_stats_t st;
    larder_stats_get(&st);
    long round = atomic_fetch_add(&observer_rounds, 1);
    if (round % 8 == 0) larder_trim(0);
    if (round % 4 == 2) {
      const char *const *change = option_changes[changes++ % OPTION_CHANGES];
      if (larder_option_set(change[0], change[1]) != 0) atomic_fetch_add(&option_refusals, 1);
    }
    usleep(2000);
  }
  /* (the defaults again, whatever the count) */
  while (changes % OPTION_CHANGES) {
    const char *const *change = option_changes[changes++ % OPTION_CHANGES];
    larder_option_set(change[0], change[1]);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) per_producer = atol(argv[1]);
  int with_observer = !(argc > 2 && strcmp(argv[2], "nostats") == 0);
  if (per_producer < WAVES || (argc > 2 && with_observer)) {
    fprintf(stderr, "usage: %s [blocks-per-producer >= %d [nostats]]\n", argv[0], WAVES);
    return 2;
  }
#if defined(LARDER_TEST_PRELOADED) || defined(LARDER_TEST_GLIBC)
  printf("misuse_threads_prefixed: skipped, the prefixed API is linked, never preloaded\n");
  return ALLOC_SKIP;
#else
  pthread_t cons[PAIRS], obs;
  if (with_observer) REQUIRE(pthread_create(&obs, NULL, observer, NULL) == 0);
  for (int i = 0; i < PAIRS; i++) REQUIRE(pthread_create(&cons[i], NULL, consumer, (void *)(intptr_t)i) == 0);
  prod_arg_t args[PAIRS];
  for (int w = 0; w < WAVES; w++) {
    pthread_t prod[PAIRS];
    for (int i = 0; i < PAIRS; i++) {
      args[i] = (prod_arg_t){i, w};
      REQUIRE(pthread_create(&prod[i], NULL, producer, &args[i]) == 0);
    }
    for (int i = 0; i < PAIRS; i++) pthread_join(prod[i], NULL);
  }
  for (int i = 0; i < PAIRS; i++) atomic_store(&rings[i].done, 1);
  for (int i = 0; i < PAIRS; i++) pthread_join(cons[i], NULL);
  atomic_store(&stop_observer, 1);
  if (with_observer) pthread_join(obs, NULL);
  long moved = 0;
  for (int i = 0; i < PAIRS; i++) moved += atomic_load(&rings[i].consumed);
  CHECK_MSG(atomic_load(&bad) == 0,
            "%ld bad blocks: %ld failed or misaligned, %ld damaged between threads, %ld lost in realloc, %ld calloc failed",
            atomic_load(&bad), atomic_load(&bad_kind[0]), atomic_load(&bad_kind[1]), atomic_load(&bad_kind[2]),
            atomic_load(&bad_kind[3]));
  CHECK_MSG(atomic_load(&option_refusals) == 0, "larder_option_set refused %ld run-time changes", atomic_load(&option_refusals));
  int v = larder_validate();
  CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  larder_stats_t st;
  larder_stats_get(&st);
  printf("misuse_threads_prefixed: %ld blocks passed between %d producer waves and %d consumers; "
         "%zu remote frees; %ld observer rounds\n",
         moved, WAVES, PAIRS, st.remote_frees, atomic_load(&observer_rounds));
  return check_done();
#endif
}
