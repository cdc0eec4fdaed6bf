/* Bins that grow where they cycle (src/cache.c, "bins that grow where they cycle"): a bin's
 * first limit holds about 16 KiB of blocks (4 of 4 KiB), and a thread that keeps more than
 * that of a class in flight moved half a bin to its superblocks and back every few calls. A
 * bin that turns twice (a flush after a refill and a refill after a flush) doubles its limit,
 * the thread's bins together by at most LARDER_BIN_GROWTH_KB (256 KiB).
 *
 * 1. A thread that mallocs 56 blocks of 4 KiB and frees them, 40 times: after the first
 *    rounds its bin holds what it frees, and each of the last 20 rounds makes one refill at
 *    most (the statistics' refills; the last 4 frees of a round wait among the deferred frees,
 *    not in the bin); with bin_growth_kb 0, the same rounds make a refill every other malloc
 *    or so (the check can fail: it is the library before the change).
 * 2. The bound: a thread that cycles 8 classes of 4-16 KiB at once never has more cached than
 *    their first limits, one deferred block each and 256 KiB, and the validation walk (which
 *    counts each bin's growth) passes.
 * 3. The trim gives the growth back: after the 4 KiB bin grew, the thread stops using that
 *    class for a few purge delays (its own trims run from its slow paths), and its next rounds
 *    of 64 refill every few mallocs again until the bin turns twice more.
 * 4. A thread's exit gives its bins their first limits back (the walk checks heaps that wait
 *    for a thread). */
#include "alloc_util.h"

#include <pthread.h>
#include <time.h>

/* 56 blocks, not 64: a round of 64 and the 4 deferred frees need 68 slots, exactly the limit
 * that bin_growth_kb (256 KiB of 4 KiB blocks, over a first limit of 4) lets the bin reach, and
 * how often such a round refills then turns on a block or two carved early: with a first fill
 * of one 4 KiB block instead of two, 22 refills in the last 20 rounds of 64, 21 of 60, none of
 * 56 or 48 (20 at each with a first fill of two). */
enum { N = 56, ROUNDS = 40 };
static alloc_api_t api;
static int stats_on = 1;

static size_t refills(void) {
  larder_stats_t st;
  api.stats_get(&st);
  return st.refills;
}

/* rounds of N mallocs of `size` and their frees; the refills of the last `counted` rounds */
static size_t cycle(size_t size, int rounds, int counted) {
  void *p[N];
  size_t before = 0;
  for (int r = 0; r < rounds; r++) {
    if (r == rounds - counted) before = refills();
    for (int i = 0; i < N; i++) {
      p[i] = malloc(size);
      REQUIRE(p[i] != NULL);
      ((char *)p[i])[0] = (char)i;
    }
    for (int i = 0; i < N; i++) free(p[i]);
  }
  return refills() - before;
}

static void *grows(void *arg) {
  (void)arg;
  return (void *)cycle(4000, ROUNDS, 20);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *trimmed(void *arg) {
  size_t *out = arg;
  out[0] = cycle(4000, ROUNDS, 20);
  /* other classes only, for 4 purge delays of 20 ms: a new class's first malloc takes the slow
   * path, where the thread's own maintenance runs once a delay (its trim) */
  for (int i = 0; i < 8; i++) {
    sleep_ms(12);
    alloc_call(16 + (size_t)i * 16);
  }
  out[1] = cycle(4000, 2, 2);
  return NULL;
}

static size_t max_cached;
static void *many(void *arg) {
  (void)arg;
  static const size_t sizes[] = {4000, 5000, 6000, 7000, 9000, 11000, 13000, 16000};
  void *p[8][N];
  for (int r = 0; r < 20; r++) {
    for (int k = 0; k < 8; k++)
      for (int i = 0; i < N; i++) REQUIRE((p[k][i] = malloc(sizes[k])) != NULL);
    for (int k = 0; k < 8; k++)
      for (int i = 0; i < N; i++) free(p[k][i]);
    larder_stats_t st;
    api.stats_get(&st);
    if (st.bytes_cached > max_cached) max_cached = st.bytes_cached;
  }
  return NULL;
}

static size_t run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  void *out;
  REQUIRE(pthread_create(&t, NULL, fn, arg) == 0);
  REQUIRE(pthread_join(t, &out) == 0);
  return (size_t)out;
}

int main(void) {
  if (!alloc_is_larder()) {
    printf("bin_growth: larder's bins and statistics only\n");
    return 77;
  }
  api = alloc_api();
  REQUIRE(api.stats_get && api.option_set && api.validate);

  /* 1. growth, and the library without it */
  REQUIRE(api.option_set("bin_growth_kb", "0") == 0);
  size_t fixed = run_thread(grows, NULL);
  REQUIRE(api.option_set("bin_growth_kb", "256") == 0);
  larder_stats_t st0, st1;
  api.stats_get(&st0);
  size_t grown = run_thread(grows, NULL);
  api.stats_get(&st1);
  printf("bin_growth: 20 rounds of %d mallocs and frees of 4,000 bytes: %zu refills with fixed bins, %zu with growth "
         "(%zu growths)\n",
         N, fixed, grown, st1.bin_growths - st0.bin_growths);
  if (fixed == 0) {
    stats_on = 0; /* a build without statistics counts no refill either way */
    printf("bin_growth: no statistics in this build: the refill counts are not checked\n");
  } else {
    CHECK_MSG(fixed >= 20 * N / 4, "fixed bins: %zu refills in 20 rounds of %d, expected a refill every few mallocs", fixed, N);
    CHECK_MSG(grown <= 20, "grown bins: %zu refills in the last 20 rounds of %d blocks", grown, N);
    CHECK(st1.bin_growths > st0.bin_growths);
  }
  CHECK(api.validate() == 0);

  /* 2. the bound, with 8 classes cycling */
  larder_stats_t base;
  api.stats_get(&base);
  run_thread(many, NULL);
  /* first limits: 4 blocks up to 4,096 B, 3 above (classes 4,096 to 16,384: at most 3 * 16 KiB
   * each); one deferred block per class; 256 KiB of growth */
  size_t bound = base.bytes_cached + 8 * (3 * 16384 + 16384) + 4 * 4096 + ((size_t)256 << 10);
  printf("bin_growth: 8 classes of 4-16 KB cycling: at most %zu bytes cached (bound %zu)\n", max_cached, bound);
  CHECK_MSG(max_cached <= bound, "%zu bytes cached, above %zu", max_cached, bound);
  CHECK(api.validate() == 0); /* (4.) the exited threads' heaps: their bins' growth given back */

  /* 3. the trim gives the growth back */
  if (stats_on) {
    REQUIRE(api.option_set("purge_delay_ms", "20") == 0);
    size_t counts[2];
    run_thread(trimmed, counts);
    REQUIRE(api.option_set("purge_delay_ms", "1000") == 0);
    printf("bin_growth: refills in the last 20 rounds %zu, in the 2 rounds after 4 purge delays away %zu\n", counts[0],
           counts[1]);
    CHECK_MSG(counts[0] <= 20, "%zu refills in the last 20 rounds", counts[0]);
    CHECK_MSG(counts[1] > 4, "%zu refills in 2 rounds after the class went unused for 4 purge delays: the growth was kept",
              counts[1]);
  }
  CHECK(api.validate() == 0);
  return check_done();
}
