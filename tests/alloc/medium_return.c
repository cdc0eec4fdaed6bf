/* A medium span freed by another thread goes back to the thread that allocated it (cache.c,
 * "medium spans"), put in a slot of its ring of returned spans without a lock, and that thread's
 * next medium mallocs take it; the purge gives back what an idle or exited owner leaves there.
 * Checked (larder only):
 *   1. an owner thread mallocs 4 blocks of 40 KiB, the main thread frees them: they count in
 *      medium_bytes_cached (4 chunks), larder_validate() passes (its check of the ring puts
 *      the spans back), and the owner's next 4 mallocs of 40 KiB are the same 4 blocks, 4 hits;
 *   2. with medium_cache_kb=256 (4 chunks), 8 spans freed by main: 4 go to the owner, 4 stay
 *      in main's own cache; the owner's 8 mallocs take exactly its 4, main's 4 take main's;
 *      and with the owner's cache full of 4 spans it freed itself, main's frees of its other 4
 *      still go to it (the ring's bound is its own): its next 8 mallocs are 8 hits;
 *   2c. the ring's count: with medium_cache_kb=65536 (the bound in chunks no limit here), main
 *      frees 70 of the owner's spans: 64 go to its ring (its slots), 6 stay in main's cache;
 *      the owner's 70 mallocs take the 64, main's 6 take its 6;
 *   3. an owner that exited: main's frees of its spans wait on its parked heap's stack, and a
 *      trim gives them back (medium_bytes_cached as at the start);
 *   4. an owner that makes no call at all: the purge thread alone gives them back, within 40
 *      purge delays;
 *   5. a producer mallocs 6,000 blocks of 16-256 KiB, stamps them and hands them one at a time
 *      (a ring of one: the hits do not hang on how the two threads are scheduled; with 64 they
 *      ran 9-42% on a loaded machine) to a consumer that checks and frees them: no stamp lost,
 *      validation passes, at least a tenth of the producer's medium mallocs are hits (about 75%
 *      here; none before: the consumer kept every span), and after both exit and a trim
 *      nothing medium is in use or kept;
 *   6. part 5 again with the producer forking every 50 blocks while the consumer returns its
 *      spans (a fork may catch a push between its claim of a slot and its write: the child
 *      marks such a slot empty, cache.c ld_cache_medium_after_fork; the window is a few
 *      instructions, so most runs never hit it): each child validates, takes and frees 40
 *      medium blocks, validates again and trims; every child exits 0.
 * The registration sets LARDER_PURGE_THREAD=1 (this process maps less than the default
 * threshold) and LARDER_PURGE_DELAY_MS=2000, so that no purge takes an owner's spans while
 * parts 1-3 look at them; part 4 sets 100 ms. Under another allocator: skipped.
 *
 * usage: alloc_medium_return */
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc_util.h"

#define KiB ((size_t)1 << 10)
#define SPANS 72

static alloc_api_t api;
static size_t chunk;

static larder_stats_t stats(void) { return alloc_stats(&api); }

/* ---- an owner thread, told what to do through a pipe; no allocator call while it waits ---- */
enum { DO_MALLOC, DO_FREE, DO_EXIT };
typedef struct {
  int cmd[2], done[2];
  int op, n;
  void *block[SPANS];
} owner_t;

static void send_int(int fd, int v) { REQUIRE(write(fd, &v, sizeof v) == (ssize_t)sizeof v); }
static int recv_int(int fd) {
  int v;
  REQUIRE(read(fd, &v, sizeof v) == (ssize_t)sizeof v);
  return v;
}

static void *owner_main(void *arg) {
  owner_t *o = arg;
  for (;;) {
    int op = recv_int(o->cmd[0]);
    if (op == DO_EXIT) break;
    for (int i = 0; i < o->n; i++) {
      if (op == DO_MALLOC) {
        REQUIRE((o->block[i] = malloc(40 * KiB)) != NULL);
        memset(o->block[i], 0x5a, 40 * KiB);
      } else {
        free(o->block[i]);
      }
    }
    send_int(o->done[1], 1);
  }
  return NULL;
}

static void owner_start(owner_t *o, pthread_t *t) {
  REQUIRE(pipe(o->cmd) == 0 && pipe(o->done) == 0);
  REQUIRE(pthread_create(t, NULL, owner_main, o) == 0);
}
static void owner_do(owner_t *o, int op, int n) {
  o->n = n;
  send_int(o->cmd[1], op);
  REQUIRE(recv_int(o->done[0]) == 1);
}
static void owner_stop(owner_t *o, pthread_t t) {
  send_int(o->cmd[1], DO_EXIT);
  REQUIRE(pthread_join(t, NULL) == 0);
  close(o->cmd[0]), close(o->cmd[1]), close(o->done[0]), close(o->done[1]);
}

static int in_set(void *p, void *const *set, int n) {
  for (int i = 0; i < n; i++)
    if (set[i] == p) return 1;
  return 0;
}

/* The owner's next n mallocs: how many of them are among set[0..m). */
static int owner_mallocs_from(owner_t *o, int n, void *const *set, int m) {
  owner_do(o, DO_MALLOC, n);
  int same = 0;
  for (int i = 0; i < n; i++) same += in_set(o->block[i], set, m);
  return same;
}

/* ---- 5: producer and consumer ---- */
#define BLOCKS 6000
#define RING 1 /* blocks on their way to the consumer at most (see the top) */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  unsigned char *block[RING];
  size_t size[RING];
  unsigned head, tail;
  int done;
} ring = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0, 0};
static int stamp_failures;
static larder_stats_t producer_before, producer_after;
static int fork_every, forks, fork_failures; /* part 6 */

/* A child of the producer: its ring as the fork left it must check out and serve. */
static void fork_check(void) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);
    int bad = api.validate() != 0;
    uint64_t rng = 0x51ed27u;
    for (int i = 0; i < 40 && !bad; i++) {
      size_t size = 16 * KiB + alloc_rng(&rng) % (240 * KiB + 1);
      unsigned char *b = malloc(size);
      if (!b) bad = 1;
      else alloc_stamp_ends(b, size), bad |= !alloc_stamped_ends(b, size), free(b);
    }
    bad |= api.validate() != 0;
    api.trim(0);
    bad |= api.validate() != 0;
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  forks++;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fork_failures++;
}

static void *producer(void *arg) {
  (void)arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  producer_before = stats();
  for (int n = 0; n < BLOCKS; n++) {
    size_t size = 16 * KiB + alloc_rng(&rng) % (240 * KiB + 1);
    unsigned char *b = malloc(size);
    REQUIRE(b != NULL);
    alloc_stamp_ends(b, size);
    pthread_mutex_lock(&ring.lock);
    while (ring.tail - ring.head == RING) pthread_cond_wait(&ring.changed, &ring.lock);
    ring.block[ring.tail % RING] = b;
    ring.size[ring.tail % RING] = size;
    ring.tail++;
    pthread_cond_broadcast(&ring.changed);
    pthread_mutex_unlock(&ring.lock);
    if (fork_every && n % fork_every == fork_every - 1) fork_check();
  }
  producer_after = stats(); /* (the consumer's frees hit nothing: it never mallocs medium) */
  pthread_mutex_lock(&ring.lock);
  ring.done = 1;
  pthread_cond_broadcast(&ring.changed);
  pthread_mutex_unlock(&ring.lock);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&ring.lock);
    while (ring.head == ring.tail && !ring.done) pthread_cond_wait(&ring.changed, &ring.lock);
    if (ring.head == ring.tail) {
      pthread_mutex_unlock(&ring.lock);
      return NULL;
    }
    unsigned char *b = ring.block[ring.head % RING];
    size_t size = ring.size[ring.head % RING];
    ring.head++;
    pthread_cond_broadcast(&ring.changed);
    pthread_mutex_unlock(&ring.lock);
    if (!alloc_stamped_ends(b, size)) __atomic_fetch_add(&stamp_failures, 1, __ATOMIC_RELAXED);
    free(b);
  }
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("medium_return: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  chunk = (size_t)api.option_get("superblock_size");
  REQUIRE(chunk == 64 * KiB); /* 40 KiB blocks take one chunk each */
  REQUIRE(api.option_get("medium_cache_kb") == 1024);
  alloc_call(1); /* main's heap, before anything is counted */
  api.trim(0);
  /* (what the process holds before the test: the UBSan build's runtime holds a medium block) */
  larder_stats_t start = stats();

  /* 1: returned, validated, taken again */
  owner_t o;
  pthread_t t;
  owner_start(&o, &t);
  owner_do(&o, DO_MALLOC, 4);
  void *first[SPANS];
  memcpy(first, o.block, sizeof first);
  larder_stats_t before = stats();
  for (int i = 0; i < 4; i++) free(first[i]);
  larder_stats_t returned = stats();
  CHECK_MSG(returned.medium_bytes_cached == before.medium_bytes_cached + 4 * chunk, "kept %zu bytes, before %zu",
            returned.medium_bytes_cached, before.medium_bytes_cached);
  CHECK(api.validate() == 0);
  CHECK(stats().medium_bytes_cached == returned.medium_bytes_cached); /* the walk put them back */
  int same = owner_mallocs_from(&o, 4, first, 4);
  larder_stats_t taken = stats();
  CHECK_MSG(same == 4, "the owner's 4 mallocs took %d of its 4 returned spans", same);
  CHECK_MSG(taken.medium_cache_hits == returned.medium_cache_hits + 4, "%zu hits",
            taken.medium_cache_hits - returned.medium_cache_hits);
  CHECK(taken.medium_bytes_cached == before.medium_bytes_cached);
  owner_do(&o, DO_FREE, 4); /* its own: kept in its cache */
  api.trim(0);

  /* 2: the bound: the owner's ring takes what its cache's bound leaves, main keeps the rest */
  REQUIRE(api.option_set("medium_cache_kb", "256") == 0);
  owner_do(&o, DO_MALLOC, 8); /* (its cache went at the trim: its thread's own maintenance) */
  memcpy(first, o.block, sizeof first);
  api.trim(0);
  before = stats();
  for (int i = 0; i < 8; i++) free(first[i]);
  returned = stats();
  CHECK_MSG(returned.medium_bytes_cached == before.medium_bytes_cached + 8 * chunk, "kept %zu bytes, before %zu",
            returned.medium_bytes_cached, before.medium_bytes_cached);
  same = owner_mallocs_from(&o, 8, first, 8);
  taken = stats();
  CHECK_MSG(same == 4, "the owner's 8 mallocs took %d spans freed by main, expected the 4 returned", same);
  CHECK_MSG(taken.medium_cache_hits == returned.medium_cache_hits + 4, "%zu hits",
            taken.medium_cache_hits - returned.medium_cache_hits);
  void *mine[4];
  for (int i = 0; i < 4; i++) REQUIRE((mine[i] = malloc(40 * KiB)) != NULL);
  larder_stats_t main_taken = stats();
  same = 0;
  for (int i = 0; i < 4; i++) same += in_set(mine[i], first, 8) && !in_set(mine[i], o.block, 8);
  CHECK_MSG(same == 4, "main's 4 mallocs took %d of the 4 spans it kept", same);
  CHECK(main_taken.medium_cache_hits == taken.medium_cache_hits + 4);
  for (int i = 0; i < 4; i++) free(mine[i]);
  owner_do(&o, DO_FREE, 8);
  api.trim(0);

  /* 2b: the ring's bound is its own: an owner whose cache is full of its own spans still takes
   * its spans back (until 2026-11-30 the cache's 4 chunks left the stack no room, main kept all
   * 4, and the owner's 8 mallocs made 4 hits) */
  owner_do(&o, DO_MALLOC, 8);
  memcpy(first, o.block, sizeof first);
  owner_do(&o, DO_FREE, 4); /* its own 4: its cache is full */
  for (int i = 4; i < 8; i++) free(first[i]);
  returned = stats();
  same = owner_mallocs_from(&o, 8, first, 8);
  taken = stats();
  CHECK_MSG(same == 8 && taken.medium_cache_hits == returned.medium_cache_hits + 8,
            "the owner's 8 mallocs took %d of its 8 spans, %zu hits (its 4 kept and the 4 main returned)", same,
            taken.medium_cache_hits - returned.medium_cache_hits);
  owner_do(&o, DO_FREE, 8);
  api.trim(0);

  /* 2c: the ring's slots bound it where its chunks do not */
  REQUIRE(api.option_set("medium_cache_kb", "65536") == 0);
  owner_do(&o, DO_MALLOC, 70);
  memcpy(first, o.block, sizeof first);
  for (int i = 0; i < 70; i++) free(first[i]);
  returned = stats();
  CHECK(api.validate() == 0);
  same = owner_mallocs_from(&o, 70, first, 70);
  taken = stats();
  CHECK_MSG(same == 64 && taken.medium_cache_hits == returned.medium_cache_hits + 64,
            "the owner's 70 mallocs took %d spans main freed, %zu hits; expected its ring's 64", same,
            taken.medium_cache_hits - returned.medium_cache_hits);
  void *kept_by_main[6];
  same = 0;
  for (int i = 0; i < 6; i++) {
    REQUIRE((kept_by_main[i] = malloc(40 * KiB)) != NULL);
    same += in_set(kept_by_main[i], first, 70) && !in_set(kept_by_main[i], o.block, 70);
  }
  CHECK_MSG(same == 6, "main's 6 mallocs took %d of the 6 spans the owner's full ring left it", same);
  for (int i = 0; i < 6; i++) free(kept_by_main[i]);
  owner_do(&o, DO_FREE, 70);
  REQUIRE(api.option_set("medium_cache_kb", "1024") == 0);
  api.trim(0);

  /* 3: an owner that exited */
  owner_do(&o, DO_MALLOC, 4);
  memcpy(first, o.block, sizeof first);
  owner_stop(&o, t);
  before = stats();
  for (int i = 0; i < 4; i++) free(first[i]);
  returned = stats();
  CHECK_MSG(returned.medium_bytes_cached == before.medium_bytes_cached + 4 * chunk, "kept %zu bytes, before %zu",
            returned.medium_bytes_cached, before.medium_bytes_cached);
  CHECK(api.validate() == 0);
  api.trim(0);
  larder_stats_t trimmed = stats();
  CHECK_MSG(trimmed.medium_bytes_cached == start.medium_bytes_cached, "after the trim, %zu bytes kept, %zu at the start",
            trimmed.medium_bytes_cached, start.medium_bytes_cached);

  /* 4: an owner that makes no call: the purge thread alone */
  REQUIRE(api.option_set("purge_delay_ms", "100") == 0);
  owner_start(&o, &t);
  owner_do(&o, DO_MALLOC, 4);
  for (int i = 0; i < 4; i++) free(o.block[i]);
  size_t kept = stats().medium_bytes_cached;
  int waited = 0;
  while (stats().medium_bytes_cached != start.medium_bytes_cached && waited < 40) alloc_sleep_ms(100), waited++;
  larder_stats_t purged = stats();
  CHECK_MSG(purged.medium_bytes_cached == start.medium_bytes_cached, "%zu bytes still kept (%zu after the frees) after %d purge delays",
            purged.medium_bytes_cached, kept, waited);
  printf("medium_return: an idle owner's returned spans went back after %d of 40 purge delays\n", waited);
  CHECK(api.validate() == 0);
  owner_stop(&o, t);
  REQUIRE(api.option_set("purge_delay_ms", "2000") == 0);

  /* 5: producer and consumer */
  pthread_t p, c;
  REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0);
  REQUIRE(pthread_create(&p, NULL, producer, NULL) == 0);
  REQUIRE(pthread_join(p, NULL) == 0);
  REQUIRE(pthread_join(c, NULL) == 0);
  size_t mallocs = producer_after.medium_allocs - producer_before.medium_allocs;
  size_t hits = producer_after.medium_cache_hits - producer_before.medium_cache_hits;
  printf("medium_return: producer/consumer: %zu of %zu medium mallocs hit (%.1f%%), %d stamps lost\n", hits, mallocs,
         100.0 * (double)hits / (double)mallocs, stamp_failures);
  CHECK(stamp_failures == 0);
  CHECK_MSG(hits * 10 >= mallocs, "%zu hits in %zu medium mallocs", hits, mallocs);
  CHECK(api.validate() == 0);
  api.trim(0);
  larder_stats_t end = stats();
  CHECK_MSG(end.medium_bytes_in_use == start.medium_bytes_in_use && end.medium_bytes_cached == start.medium_bytes_cached,
            "medium in use %zu, kept %zu; at the start %zu, %zu", end.medium_bytes_in_use, end.medium_bytes_cached,
            start.medium_bytes_in_use, start.medium_bytes_cached);

  /* 6: forks while the consumer returns the producer's spans */
  fork_every = 50;
  ring.head = ring.tail = 0;
  ring.done = 0;
  REQUIRE(pthread_create(&c, NULL, consumer, NULL) == 0);
  REQUIRE(pthread_create(&p, NULL, producer, NULL) == 0);
  REQUIRE(pthread_join(p, NULL) == 0);
  REQUIRE(pthread_join(c, NULL) == 0);
  printf("medium_return: %d forks while spans were returned, %d children failed\n", forks, fork_failures);
  CHECK(forks == BLOCKS / 50 && fork_failures == 0);
  CHECK(stamp_failures == 0);
  CHECK(api.validate() == 0);
  return check_done();
}
