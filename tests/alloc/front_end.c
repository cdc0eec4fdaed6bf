/* The front end (issue 17, "Must hold"): per-thread bins of free blocks and batched remote
 * frees, checked through larder's statistics (counters, not timings).
 *
 *   bins bounded     a thread frees 20,000 blocks of one size at a time, for sizes across the
 *                    classes: what its bins hold (bytes_cached) never exceeds the stated bound
 *                    of one bin, 122 blocks and 16 KiB (three blocks for bigger classes), plus
 *                    its deferred free (one block);
 *   exit returns     a thread that exits with full bins and a buffer of remote frees leaves
 *                    nothing cached and nothing pending: bytes_cached and bytes_remote_pending
 *                    are back to what they were, bytes_in_use too; before its exit, with
 *                    batches open, its remote buffer validates (each slot, the bytes);
 *   idle batches     a thread that frees other threads' blocks and then stops calling, alive:
 *                    the purge sends its buffered batches (bytes_remote_pending falls to 0);
 *   bins under purge four threads churn in bursts with pauses longer than a purge delay of 1
 *                    ms, so the purge empties their bins over and over while they come and go:
 *                    every block keeps its pattern (no block handed out twice, none written by
 *                    the purge) and the heaps validate; emptied bins are counted;
 *   idle bins        a thread that frees its own blocks of many sizes in random order and then
 *                    stops calling, alive: the purge empties its bins (bytes_cached falls to a
 *                    tenth at most) and the superblocks their blocks kept go back (bytes_held
 *                    falls to an eighth at most; without the drain: 0.4 of it);
 *   remote batched   a consumer thread frees 200,000 blocks a producer allocated, at most
 *                    2,048 behind it: no lock is taken on its free path
 *                    (free_lock_acquisitions, which counts the trylock that helps an idle
 *                    owner, stays 0 with the producer busy) and the atomic operations of the
 *                    remote free path are one per batch (the CAS that claims a slot of the
 *                    owner's inbox: no batch found the inbox full, so none announced its
 *                    superblock with a second; before the inbox, 1.4-7.6% of them did, and
 *                    about half of the mixed sizes' batches) and batches hold at least 16
 *                    blocks on average; again with sizes that
 *                    cycle through 32 size classes (16 B to 1 KiB), where a buffer with one
 *                    batch per slot had its batches pushed out by each other (2 blocks a batch):
 *                    at least 20 blocks a batch (35.5 with the buffer's bound sending batches
 *                    round the buffer; 12.3 with 256 slots and the set's largest sent, 9.2-10.1
 *                    with 1,024 slots and the set's largest); there the producer waits on a
 *                    barrier, and a batch may find its inbox full with its lock busy: any
 *                    announcement follows such a batch;
 *   scattered        a consumer frees 200,000 blocks of 256 B (800 superblocks of a producer
 *                    that waits, alive) in a random order: at least 6 blocks a batch (8.6; 5.6
 *                    with 256 slots and a 256 KiB bound);
 *   deferred free    the block a thread freed last waits, unread, as its deferred free: it counts
 *                    as cached, not in use (a malloc and a free of a 16,000-byte block leave
 *                    bytes_in_use as it was, and count one malloc and one free); a thread's exit
 *                    returns it, and the purge returns it from a thread that stopped calling
 *                    (bytes_cached back to what it was before the thread's free, where the
 *                    block, the only one of its class, would otherwise stay);
 *   slow frees       a thread frees ten blocks main allocated, of ten classes (remote frees
 *                    into superblocks without a batch yet): at most 4 wait uncounted in its ring of
 *                    slow frees (remote_frees, read from main), some do (else the case tests
 *                    nothing); a thread's exit takes them all (remote_frees +10, bytes_in_use
 *                    down by the ten blocks), and so does the purge for a thread that stopped
 *                    calling, alive. Ten blocks of one superblock: all but the first join
 *                    its batch, yet the last 4 wait in the ring all the same (no free reads
 *                    the block's line as it goes), and the exit or the purge takes them;
 *   Hoard            larder_validate() (lists, counts, Hoard's invariant, the bins) after each.
 * Larder only: under another allocator the program says so and skips (77).
 *
 * usage: alloc_front_end */
#include <pthread.h>
#include <time.h>
#include <stdbool.h>

#include "alloc_util.h"

#define BIN_SLOTS 122    /* LD_BIN_SLOTS - 1 (src/internal.h) */
#define BIN_BYTES 16384  /* LD_BIN_BYTES */
#define BIN_GROWTH 262144 /* LARDER_BIN_GROWTH_KB's default: what a thread's bins may grow by in all */

static alloc_api_t api;

/* ---- bins bounded ---- */
static size_t max_cached_seen;
static size_t bin_bound(size_t size) {
  size_t blocks = BIN_BYTES / size;
  if (blocks > BIN_SLOTS) blocks = BIN_SLOTS;
  if (blocks < 3) blocks = 3; /* LD_BIN_LEAST */
  return blocks * size;
}

static void *bins_worker(void *arg) {
  size_t size = *(size_t *)arg;
  enum { N = 20000 };
  void **p = malloc(N * sizeof *p);
  if (!p) return (void *)1;
  size_t base = alloc_stats(&api).bytes_cached;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) p[i] = malloc(size);
    for (int i = 0; i < N; i++) {
      free(p[i]);
      if (i % 997 == 0) {
        size_t c = alloc_stats(&api).bytes_cached;
        if (c > base && c - base > max_cached_seen) max_cached_seen = c - base;
      }
    }
  }
  free(p);
  return NULL;
}

static void check_bins(void) {
  static const size_t sizes[] = {16, 48, 256, 1000, 3000, 8192, 16384};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t size = sizes[k];
    max_cached_seen = 0;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, bins_worker, (void *)&size) == 0);
    pthread_join(t, NULL);
    /* the class holding `size` may be up to 12.5% larger; the pointer array is another class;
     * the thread's deferred free (the block it freed last, not yet in its bin) one block; and
     * a bin that cycles (these rounds of mallocs and frees) grows, the thread's bins together
     * by at most BIN_GROWTH, none past BIN_SLOTS blocks */
    size_t cls = size + size / 8, grown = BIN_GROWTH;
    if (grown > BIN_SLOTS * cls - bin_bound(cls)) grown = BIN_SLOTS * cls - bin_bound(cls);
    size_t bound = bin_bound(cls) + grown + cls +
                   bin_bound(20000 * sizeof(void *) > 16384 ? 16384 : 20000 * sizeof(void *));
    printf("front_end: %5zu-byte blocks: at most %zu bytes cached by the freeing thread (bound %zu)\n", size,
           max_cached_seen, bound);
    CHECK_MSG(max_cached_seen <= bound, "size %zu: %zu bytes cached, above the bins' bound %zu", size, max_cached_seen, bound);
    CHECK(api.validate() == 0);
  }
}

/* ---- exit returns everything ---- */
static void **handed;
enum { HANDED = 5000 };

static void *exit_worker(void *arg) {
  (void)arg;
  void *own[500];
  for (int i = 0; i < 500; i++) own[i] = malloc(16 + (size_t)(i % 64) * 16);
  for (int i = 0; i < 500; i++) free(own[i]);      /* its bins fill */
  for (int i = 0; i < HANDED; i += 2) free(handed[i]); /* remote frees, some still buffered */
  larder_stats_t st = alloc_stats(&api);
  printf("front_end: before exit the thread holds %zu bytes cached, %zu bytes of remote frees pending\n",
         st.bytes_cached, st.bytes_remote_pending);
  CHECK(api.validate() == 0); /* its remote buffer with batches open (each slot, the bytes) */
  return (void *)(uintptr_t)(st.bytes_cached != 0 && st.bytes_remote_pending != 0);
}

static void check_exit(void) {
  handed = malloc(HANDED * sizeof *handed);
  REQUIRE(handed != NULL);
  for (int i = 0; i < HANDED; i++) handed[i] = malloc(40);
  larder_stats_t before = alloc_stats(&api);
  pthread_t t;
  void *had_some;
  REQUIRE(pthread_create(&t, NULL, exit_worker, NULL) == 0);
  pthread_join(t, &had_some);
  larder_stats_t after = alloc_stats(&api);
  printf("front_end: after exit: cached %zu -> %zu bytes, remote pending %zu -> %zu, in use %zu -> %zu\n",
         before.bytes_cached, after.bytes_cached, before.bytes_remote_pending, after.bytes_remote_pending,
         before.bytes_in_use, after.bytes_in_use);
  CHECK_MSG(had_some != NULL, "the thread had nothing cached or buffered: the check would prove nothing");
  CHECK(after.bytes_cached <= before.bytes_cached);
  CHECK(after.bytes_remote_pending == 0);
  /* half the handed blocks (40 B, class 48) were freed */
  size_t freed = (HANDED / 2) * 48;
  CHECK_MSG(after.bytes_in_use + freed <= before.bytes_in_use + 4096,
            "in use %zu before, %zu after freeing %zu bytes", before.bytes_in_use, after.bytes_in_use, freed);
  for (int i = 1; i < HANDED; i += 2) free(handed[i]);
  free(handed);
  CHECK(api.validate() == 0);
}

/* A purge thread that runs from the first slow path, with a short delay (ms), for the checks
 * of what it does for idle threads; purge_default puts the defaults back. */
static bool purge_quick(const char *delay_ms) {
  if (!api.option_set || api.option_set("purge_delay_ms", delay_ms) != 0 || api.option_set("purge_thread", "1") != 0) {
    CHECK_MSG(0, "could not set purge_delay_ms and purge_thread");
    return false;
  }
  void *big = malloc(200000); /* a slow path: the purge thread starts */
  free(big);
  return true;
}
static void purge_default(void) {
  api.option_set("purge_delay_ms", "1000");
  api.option_set("purge_thread", "2");
}

/* ---- the purge sends an idle thread's batches ---- */
static pthread_barrier_t idle_freed, idle_done;

static void *idle_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < HANDED; i += 2) free(handed[i]); /* remote frees; the tail stays buffered */
  pthread_barrier_wait(&idle_freed);
  pthread_barrier_wait(&idle_done); /* alive, and no call at all */
  return NULL;
}

/* Runs worker, which does its work, waits at idle_freed and then makes no call until
 * idle_done: the statistics when it has gone idle and ten purge delays of 100 ms later. */
static void watch_idle_thread(void *(*worker)(void *), larder_stats_t *during, larder_stats_t *after) {
  pthread_barrier_init(&idle_freed, NULL, 2);
  pthread_barrier_init(&idle_done, NULL, 2);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
  pthread_barrier_wait(&idle_freed);
  *during = alloc_stats(&api);
  struct timespec ts = {1, 0}; /* no call from either thread */
  nanosleep(&ts, NULL);
  *after = alloc_stats(&api);
  pthread_barrier_wait(&idle_done);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&idle_freed);
  pthread_barrier_destroy(&idle_done);
}

static void check_idle_batches(void) {
  if (!purge_quick("100")) return;
  handed = malloc(HANDED * sizeof *handed);
  REQUIRE(handed != NULL);
  for (int i = 0; i < HANDED; i++) handed[i] = malloc(40);
  larder_stats_t during, after;
  watch_idle_thread(idle_worker, &during, &after);
  printf("front_end: an idle thread's buffered remote frees: %zu bytes pending, %zu after 10 purge delays "
         "(purge thread runs %zu)\n",
         during.bytes_remote_pending, after.bytes_remote_pending, after.purge_thread_runs);
  CHECK_MSG(during.bytes_remote_pending > 0, "nothing was buffered: the check would prove nothing");
  CHECK_MSG(after.bytes_remote_pending == 0, "%zu bytes of remote frees still pending in an idle thread's buffer",
            after.bytes_remote_pending);
  for (int i = 1; i < HANDED; i += 2) free(handed[i]);
  free(handed);
  purge_default();
  CHECK(api.validate() == 0);
}

/* ---- the purge empties an idle thread's bins ---- */
enum { IDLE_BLOCKS = 20000 };

static void *idle_bins_worker(void *arg) {
  (void)arg;
  void **blocks = malloc(IDLE_BLOCKS * sizeof *blocks);
  if (!blocks) return NULL;
  for (int i = 0; i < IDLE_BLOCKS; i++) blocks[i] = malloc(16 + (size_t)(i % 32) * 32); /* 16 B - 1 KiB */
  unsigned x = 12345;
  for (int i = IDLE_BLOCKS - 1; i > 0; i--) { /* random order: the bins' blocks from many superblocks */
    x = x * 1103515245u + 12345u;
    int j = (int)((x >> 8) % (unsigned)(i + 1));
    void *t = blocks[i];
    blocks[i] = blocks[j];
    blocks[j] = t;
  }
  for (int i = 0; i < IDLE_BLOCKS; i++) free(blocks[i]);
  free(blocks);
  pthread_barrier_wait(&idle_freed);
  pthread_barrier_wait(&idle_done); /* alive, and no call at all */
  return NULL;
}

static void check_idle_bins(void) {
  if (!purge_quick("100")) return;
  larder_stats_t during, after;
  watch_idle_thread(idle_bins_worker, &during, &after);
  printf("front_end: an idle thread's bins: %zu bytes cached, %zu after 10 purge delays; superblocks and spans "
         "held %zu -> %zu bytes; bins emptied %zu times\n",
         during.bytes_cached, after.bytes_cached, during.bytes_held, after.bytes_held,
         after.idle_bins_emptied - during.idle_bins_emptied);
  CHECK_MSG(during.bytes_cached >= 32 * 1024, "only %zu bytes cached: the check would prove nothing", during.bytes_cached);
  CHECK_MSG(after.bytes_cached <= during.bytes_cached / 10, "%zu bytes still cached in an idle thread's bins",
            after.bytes_cached);
  CHECK_MSG(after.bytes_held <= during.bytes_held / 8, "held %zu -> %zu bytes: the bins' superblocks were not given back",
            during.bytes_held, after.bytes_held);
  purge_default();
  CHECK(api.validate() == 0);
}

/* ---- the purge empties bins while their threads come and go ---- */
enum { RACE_THREADS = 4, RACE_SLOTS = 512 };
static atomic_int race_bad;

static void *race_worker(void *arg) {
  uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(uintptr_t)arg + 1;
  void *slot[RACE_SLOTS] = {0};
  size_t size[RACE_SLOTS] = {0};
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    int burst = 1 + (int)(alloc_rng(&s) % 2000);
    for (int i = 0; i < burst; i++) {
      int k = (int)(alloc_rng(&s) % RACE_SLOTS);
      if (slot[k]) {
        if (alloc_check_as(slot[k], slot[k], size[k], size[k]) != (size_t)-1) atomic_fetch_add(&race_bad, 1);
        free(slot[k]);
      }
      size[k] = 1 + (size_t)(alloc_rng(&s) % 1024);
      slot[k] = malloc(size[k]);
      if (slot[k]) alloc_fill(slot[k], size[k]);
    }
    /* idle for 0-5 purge delays, no call at all */
    struct timespec pause = {0, (long)(alloc_rng(&s) % 5000000)};
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 1500000000L);
  for (int k = 0; k < RACE_SLOTS; k++)
    if (slot[k]) {
      if (alloc_check_as(slot[k], slot[k], size[k], size[k]) != (size_t)-1) atomic_fetch_add(&race_bad, 1);
      free(slot[k]);
    }
  return api.validate() == 0 ? NULL : (void *)1;
}

static void check_bins_under_purge(void) {
  if (!purge_quick("1")) return;
  larder_stats_t before = alloc_stats(&api);
  pthread_t t[RACE_THREADS];
  for (int i = 0; i < RACE_THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, race_worker, (void *)(uintptr_t)(i + 1)) == 0);
  int invalid = 0;
  for (int i = 0; i < RACE_THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    invalid += r != NULL;
  }
  larder_stats_t after = alloc_stats(&api);
  size_t emptied = after.idle_bins_emptied - before.idle_bins_emptied;
  printf("front_end: bins emptied by the purge while 4 threads came and went: %zu times (%zu purge thread runs), "
         "%d corrupted blocks, %d heaps that failed validation\n",
         emptied, after.purge_thread_runs - before.purge_thread_runs, atomic_load(&race_bad), invalid);
  CHECK_MSG(atomic_load(&race_bad) == 0, "%d blocks lost their pattern", atomic_load(&race_bad));
  CHECK_MSG(invalid == 0, "%d threads' heaps failed validation", invalid);
  CHECK_MSG(emptied >= 20, "bins emptied %zu times: the check would prove little", emptied);
  purge_default();
  CHECK(api.validate() == 0);
}

/* ---- remote frees batched ---- */
/* The 64-byte run keeps its two threads in step: at most LOCKSTEP blocks (32 batches) are in
 * flight, so the producer calls malloc, and reads its inbox at its fills, all the time, and
 * never stops calling for as long as 64 batches (after which its freer would help it). With
 * the ring as deep as the run, the producer could finish early and leave (a parked heap, its
 * inbox read by nobody but helpers), and a helper that found its lock held by a thread
 * descheduled in a slow path (a loaded machine) sent batches the other way: 1,837 of 3,149
 * once, beside another test. The mixed sizes use the whole array (below). */
enum { REMOTE_N = 200000 };
#define RING REMOTE_N
#define LOCKSTEP 2048
static void *_Atomic ring[RING];

static bool remote_mixed; /* sizes through 32 classes, else 64 bytes */
static size_t remote_size(long i) {
  if (!remote_mixed) return 64;
  long k = i % 32; /* 16..128 by 16, then 144..1024 by the classes' steps */
  return k < 8 ? (size_t)(16 * (k + 1)) : (size_t)(128 << ((k - 8) / 8)) + (size_t)((k - 8) % 8 + 1) * (size_t)(16 << ((k - 8) / 8));
}

static void *producer(void *arg) {
  (void)arg;
  for (long i = 0; i < REMOTE_N; i++) {
    void *p = malloc(remote_size(i));
    while (atomic_load(&ring[i % LOCKSTEP]) != NULL) {}
    atomic_store(&ring[i % LOCKSTEP], p);
  }
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (long i = 0; i < REMOTE_N; i++) {
    void *p;
    while ((p = atomic_load(&ring[i % LOCKSTEP])) == NULL) {}
    atomic_store(&ring[i % LOCKSTEP], NULL);
    free(p);
  }
  return NULL;
}

/* Held, then freed (the mixed sizes, and the scattered frees below): the producer allocates
 * held_n blocks, then waits (alive, so that its superblocks stay its own) while the consumer
 * frees them all, in the order allocated or in a random one, so that what the buffer sees
 * does not depend on how the two threads were scheduled. */
static long held_n;
static size_t held_size;   /* 0: remote_size(i) */
static bool held_shuffled; /* freed in a random order */
static pthread_barrier_t held_made, held_freed;
static void *held_producer(void *arg) {
  (void)arg;
  for (long i = 0; i < held_n; i++) atomic_store(&ring[i], malloc(held_size ? held_size : remote_size(i)));
  pthread_barrier_wait(&held_made);
  pthread_barrier_wait(&held_freed);
  return NULL;
}
static void *held_consumer(void *arg) {
  (void)arg;
  pthread_barrier_wait(&held_made);
  uint64_t seed = 0x5ca77e4ed5eedull;
  for (long i = held_n - 1; held_shuffled && i > 0; i--) { /* Fisher-Yates, then the frees in that order */
    long j = (long)(alloc_rng(&seed) % (uint64_t)(i + 1));
    void *t = atomic_load(&ring[i]);
    atomic_store(&ring[i], atomic_load(&ring[j]));
    atomic_store(&ring[j], t);
  }
  for (long i = 0; i < held_n; i++) free(atomic_exchange(&ring[i], NULL));
  pthread_barrier_wait(&held_freed);
  return NULL;
}
static void run_held(long n, size_t size, bool shuffled) {
  held_n = n, held_size = size, held_shuffled = shuffled;
  pthread_t p, c;
  REQUIRE(pthread_barrier_init(&held_made, NULL, 2) == 0 && pthread_barrier_init(&held_freed, NULL, 2) == 0);
  REQUIRE(pthread_create(&p, NULL, held_producer, NULL) == 0);
  REQUIRE(pthread_create(&c, NULL, held_consumer, NULL) == 0);
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  pthread_barrier_destroy(&held_made);
  pthread_barrier_destroy(&held_freed);
}

/* Scattered: the producer holds SCATTER_N blocks of 256 B (about 800 superblocks); the
 * consumer frees them in a random order, so that its frees land on every superblock in turn
 * and no batch fills by itself: its buffer's bounds decide what goes. */
enum { SCATTER_N = 200000, SCATTER_SIZE = 256, SCATTER_LEAST = 6 };
static void check_remote_scattered(void) {
  larder_stats_t before = alloc_stats(&api);
  run_held(SCATTER_N, SCATTER_SIZE, true);
  larder_stats_t after = alloc_stats(&api);
  size_t frees = after.remote_frees - before.remote_frees;
  size_t batches = after.remote_batches - before.remote_batches;
  printf("front_end: scattered: %zu remote frees in %zu batches (%.1f blocks each)\n", frees, batches,
         batches ? (double)frees / batches : 0);
  CHECK_MSG(frees >= SCATTER_N, "only %zu remote frees counted of %d", frees, SCATTER_N);
  CHECK_MSG(batches > 0 && frees / batches >= SCATTER_LEAST, "batches of %.1f blocks on average (bound %d)",
            batches ? (double)frees / batches : 0, SCATTER_LEAST);
  CHECK(api.validate() == 0);
}

static void check_remote(bool mixed) {
  remote_mixed = mixed;
  larder_stats_t before = alloc_stats(&api);
  if (mixed) {
    run_held(REMOTE_N, 0, false);
  } else {
    pthread_t p, c;
    REQUIRE(pthread_create(&p, NULL, producer, NULL) == 0);
    REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
  }
  larder_stats_t after = alloc_stats(&api);
  size_t frees = after.remote_frees - before.remote_frees;
  size_t batches = after.remote_batches - before.remote_batches;
  size_t announcements = after.remote_announcements - before.remote_announcements;
  size_t locks = after.free_lock_acquisitions - before.free_lock_acquisitions;
  printf("front_end: %s: %zu remote frees in %zu batches (%.1f blocks each), %zu found the inbox full, %zu announcements: "
         "%.4f atomic operations per free; %zu locks on free paths\n",
         mixed ? "32 classes" : "64 bytes", frees, batches, batches ? (double)frees / batches : 0,
         (size_t)(after.remote_inbox_full - before.remote_inbox_full), announcements,
         frees ? (double)(batches + announcements) / frees : 0, locks);
  CHECK_MSG(frees >= REMOTE_N, "only %zu remote frees counted of %d", frees, REMOTE_N);
  size_t least = mixed ? 20 : 16;
  CHECK_MSG(batches > 0 && frees / batches >= least, "batches of %.1f blocks on average (bound %zu)",
            batches ? (double)frees / batches : 0, least);
  /* One atomic operation per batch: every batch went by its owner's inbox, which an owner that
   * keeps calling reads at its fills. A batch finds it full only when the owner stopped
   * calling (the mixed run's waits on a barrier) and a helper found its lock busy (a thread
   * descheduled inside a slow path, on a loaded machine); such a batch goes by the
   * superblock's remote list, and announces it with a second CAS if it is the first since the
   * owner looked. */
  size_t inbox_full = after.remote_inbox_full - before.remote_inbox_full;
  if (!mixed)
    CHECK_MSG(announcements == 0 && inbox_full == 0, "%zu batches found the inbox full, %zu announced: %.3f atomic operations per batch",
              inbox_full, announcements, batches ? (double)(batches + announcements) / batches : 0);
  CHECK_MSG(announcements <= inbox_full, "%zu batches announced, %zu found the inbox full", announcements, inbox_full);
  /* The only lock near a remote free is the trylock that helps an owner that stopped calling
   * (never a wait); with the producer busy it fires only when the scheduler stalls it for
   * 100 ms (2 cores shared with other work): a few percent of the batches at most. */
  /* (the mixed run's owner waits on a barrier: helping it is by design) */
  CHECK_MSG(mixed || locks * 20 <= batches, "%zu locks taken on free paths with the owner busy (%zu batches)", locks, batches);
  CHECK(api.validate() == 0);
}

/* ---- the deferred free ---- */
enum { DEFERRED_SIZE = 16000 }; /* a class whose bin holds one block: the thread's only one */
static pthread_barrier_t deferred_started, deferred_go, deferred_freed, deferred_done;
static void *deferred_worker(void *arg) {
  bool idle = arg != NULL;
  pthread_barrier_wait(&deferred_started);
  pthread_barrier_wait(&deferred_go); /* main has read the statistics before */
  void *volatile p = malloc(DEFERRED_SIZE); /* volatile: the pair is not optimised away */
  if (p) memset(p, 7, DEFERRED_SIZE);
  free(p);
  if (idle) {
    pthread_barrier_wait(&deferred_freed);
    pthread_barrier_wait(&deferred_done); /* alive, and no call at all */
  }
  return NULL;
}

static void check_deferred(void) {
  larder_stats_t before = alloc_stats(&api);
  void *volatile p = malloc(DEFERRED_SIZE);
  REQUIRE(p != NULL);
  memset(p, 1, DEFERRED_SIZE);
  free(p);
  larder_stats_t after = alloc_stats(&api);
  printf("front_end: a malloc and free of %d bytes: in use %zu -> %zu, cached %zu -> %zu, mallocs +%zu, frees +%zu\n",
         DEFERRED_SIZE, before.bytes_in_use, after.bytes_in_use, before.bytes_cached, after.bytes_cached,
         after.mallocs - before.mallocs, after.frees - before.frees);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.mallocs - before.mallocs == 1 && after.frees - before.frees == 1);

  /* a thread that exits after its last free */
  pthread_barrier_init(&deferred_started, NULL, 2);
  pthread_barrier_init(&deferred_go, NULL, 2);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, deferred_worker, NULL) == 0);
  pthread_barrier_wait(&deferred_started);
  before = alloc_stats(&api);
  pthread_barrier_wait(&deferred_go);
  pthread_join(t, NULL);
  after = alloc_stats(&api);
  printf("front_end: a thread's last free, then its exit: cached %zu -> %zu, in use %zu -> %zu\n", before.bytes_cached,
         after.bytes_cached, before.bytes_in_use, after.bytes_in_use);
  CHECK(after.bytes_cached == before.bytes_cached && after.bytes_in_use == before.bytes_in_use);
  pthread_barrier_destroy(&deferred_started);

  /* a thread that stops calling after its last free */
  if (!purge_quick("100")) return;
  pthread_barrier_init(&deferred_started, NULL, 2);
  pthread_barrier_init(&deferred_freed, NULL, 2);
  pthread_barrier_init(&deferred_done, NULL, 2);
  REQUIRE(pthread_create(&t, NULL, deferred_worker, (void *)1) == 0);
  pthread_barrier_wait(&deferred_started);
  /* main's own bins and deferred free emptied first: the purge may empty them too, at any
   * moment, as main stops calling */
  if (api.trim) api.trim(0);
  before = alloc_stats(&api);
  pthread_barrier_wait(&deferred_go);
  pthread_barrier_wait(&deferred_freed);
  larder_stats_t during = alloc_stats(&api);
  struct timespec ts = {1, 0}; /* 10 purge delays, no call from either thread */
  nanosleep(&ts, NULL);
  after = alloc_stats(&api);
  pthread_barrier_wait(&deferred_done);
  pthread_join(t, NULL);
  printf("front_end: an idle thread's last free: cached %zu before it, %zu after it, %zu after 10 purge delays\n",
         before.bytes_cached, during.bytes_cached, after.bytes_cached);
  CHECK(during.bytes_cached >= before.bytes_cached + DEFERRED_SIZE);
  CHECK(after.bytes_cached == before.bytes_cached);
  CHECK(api.validate() == 0);
  pthread_barrier_destroy(&deferred_started);
  pthread_barrier_destroy(&deferred_go);
  pthread_barrier_destroy(&deferred_freed);
  pthread_barrier_destroy(&deferred_done);
  purge_default();
}

/* ---- the ring of slow frees ---- */
enum { SLOW_BLOCKS = 10, SLOW_BOUND = 4 };
static void *slow_blocks[SLOW_BLOCKS];
static pthread_barrier_t slow_freed, slow_done;
static void *slow_worker(void *arg) {
  for (int i = 0; i < SLOW_BLOCKS; i++) free(slow_blocks[i]);
  if (arg) {
    pthread_barrier_wait(&slow_freed);
    pthread_barrier_wait(&slow_done); /* alive, and no call at all */
  }
  return NULL;
}

/* The ten blocks freed by a thread that exits (idle false) or stops calling (idle true); of ten
 * classes (one_size 0) or all of one_size bytes, one after another from one superblock. */
static void check_slow_frees_once(bool idle, size_t one_size) {
  size_t bytes = 0;
  for (int i = 0; i < SLOW_BLOCKS; i++) { /* 16, 32, ... 160 bytes: one superblock each */
    size_t size = one_size ? one_size : 16 * (size_t)(i + 1);
    slow_blocks[i] = malloc(size);
    REQUIRE(slow_blocks[i] != NULL);
    memset(slow_blocks[i], 3, size);
    bytes += size;
  }
  if (idle && api.trim) api.trim(0); /* main's bins emptied first: the purge may empty them too */
  larder_stats_t before = alloc_stats(&api), during = before;
  pthread_barrier_init(&slow_freed, NULL, 2);
  pthread_barrier_init(&slow_done, NULL, 2);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, slow_worker, idle ? (void *)1 : NULL) == 0);
  if (idle) {
    pthread_barrier_wait(&slow_freed);
    during = alloc_stats(&api);
    struct timespec ts = {1, 0}; /* 10 purge delays, no call from either thread */
    nanosleep(&ts, NULL);
  }
  larder_stats_t after = alloc_stats(&api);
  if (idle) pthread_barrier_wait(&slow_done);
  pthread_join(t, NULL);
  if (!idle) after = alloc_stats(&api);
  size_t counted_during = during.remote_frees - before.remote_frees, counted = after.remote_frees - before.remote_frees;
  printf("front_end: %d remote frees (%s) by a thread that %s: %zu counted when it stopped, %zu after; in use %zu -> "
         "%zu\n",
         SLOW_BLOCKS, one_size ? "one class" : "ten classes", idle ? "stops calling" : "exits", counted_during, counted,
         before.bytes_in_use, after.bytes_in_use);
  if (idle && one_size) {
    /* the first opens its superblock's batch and the others join it; each waits in the ring
     * all the same (its line is not read as it is freed), and the last 4 are still there */
    uintptr_t sbs = (uintptr_t)api.option_get("superblock_size");
    bool one_superblock = true;
    for (int i = 1; i < SLOW_BLOCKS; i++)
      one_superblock &= (((uintptr_t)slow_blocks[i] - 1) & ~(sbs - 1)) == (((uintptr_t)slow_blocks[0] - 1) & ~(sbs - 1));
    if (one_superblock)
      CHECK_MSG(SLOW_BLOCKS - counted_during == SLOW_BOUND, "%zu of %d frees into one superblock waiting, not %d",
                SLOW_BLOCKS - counted_during, SLOW_BLOCKS, SLOW_BOUND);
  } else if (idle) {
    CHECK_MSG(SLOW_BLOCKS - counted_during <= SLOW_BOUND, "%zu of %d frees waiting", SLOW_BLOCKS - counted_during, SLOW_BLOCKS);
    CHECK_MSG(counted_during < SLOW_BLOCKS, "no free waited in the ring: the case tests nothing");
  }
  CHECK(counted == SLOW_BLOCKS);
  CHECK_MSG(after.bytes_in_use + bytes <= before.bytes_in_use + 4096, "in use %zu before, %zu after",
            before.bytes_in_use, after.bytes_in_use);
  CHECK(api.validate() == 0);
  pthread_barrier_destroy(&slow_freed);
  pthread_barrier_destroy(&slow_done);
}

static void check_slow_frees(void) {
  check_slow_frees_once(false, 0);
  check_slow_frees_once(false, 48);
  if (!purge_quick("100")) return;
  check_slow_frees_once(true, 0);
  check_slow_frees_once(true, 48);
  purge_default();
}

int main(void) {
  api = alloc_api();
  if (!api.stats_get || !api.validate) {
    printf("front_end: not larder; nothing to check\n");
    return ALLOC_SKIP;
  }
  check_bins();
  check_exit();
  check_idle_batches();
  check_idle_bins();
  check_bins_under_purge();
  check_deferred();
  check_slow_frees();
  check_remote(false);
  check_remote(true);
  check_remote_scattered();
  return check_done();
}
