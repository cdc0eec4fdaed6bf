/* A thread's cache of medium spans grows where its bound fails (cache.c, medium_cache_missed):
 * where half of 64 misses in a row are of as many chunks as a span the bound pushed out, the
 * bound doubles, up to medium_cache_max_kb, and the growth of all threads together stays
 * within 4 times that; the growth goes back whenever the cache is emptied.
 * Checked (larder only), with 64 KiB chunks and the default bounds (1 MiB, up to 4 MiB):
 *   1. nothing pushed out, nothing grows: 16 spans of 40 KiB (the bound: 16 chunks) freed and
 *      asked again are 16 hits; a miss then (100 KiB: two chunks) grows nothing; nor do 64
 *      misses of two chunks after 32 spans of one were pushed out;
 *   2. 48 spans of one chunk freed (32 pushed out) and asked again: 16 hits, then 32 misses
 *      that the spans pushed out would have served: the bound doubles (medium_cache_grows 1,
 *      medium_cache_extra 1 MiB), and of 40 spans of 40 KiB freed, 32 are kept (2 MiB);
 *   3. the same again: 4 MiB; past that nothing grows (2 growths, 3 MiB extra), and of 70
 *      spans of 100 KiB freed, 32 are kept (4 MiB); validation passes;
 *   4. malloc_trim empties the cache and gives the growth back;
 *   5. with medium_cache_max_kb=2048 (1 MiB more a thread; 8 MiB for all), 12 threads each
 *      push out and miss while all are alive: 8 grow (8 MiB extra), 4 cannot; once they have
 *      exited, nothing extra is left;
 *   6. a thread that grew and then makes no call: after 3 purge delays and a purge (malloc_trim
 *      in main, as medium_cache.c part 5 does) its spans and its growth are given back while
 *      it lives.
 * Under another allocator: skipped.
 *
 * usage: alloc_medium_cache_growth */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "alloc_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static alloc_api_t api;

static larder_stats_t stats(void) { return alloc_stats(&api); }

/* n blocks of `size` bytes, written at their ends, then all freed */
static void malloc_then_free(size_t n, size_t size) {
  void *blocks[128];
  REQUIRE(n <= 128);
  for (size_t i = 0; i < n; i++) {
    REQUIRE((blocks[i] = malloc(size)) != NULL);
    ((volatile char *)blocks[i])[0] = 1;
    ((volatile char *)blocks[i])[size - 1] = 1;
  }
  for (size_t i = 0; i < n; i++) free(blocks[i]);
}

/* 48 spans of one chunk freed into a bound of 16 (32 pushed out), then asked again: 16 hits,
 * then 32 misses, each of which a span pushed out would have served */
static void push_out_and_miss(void) {
  malloc_then_free(48, 40 * KiB);
  malloc_then_free(48, 40 * KiB);
}

/* ---- 5, 6: threads that grow ---- */
#define GROWERS 12
static pthread_barrier_t grown, checked;

static void *grow_and_wait(void *arg) {
  (void)arg;
  push_out_and_miss();
  pthread_barrier_wait(&grown);
  pthread_barrier_wait(&checked);
  return NULL;
}

static int ready_pipe[2], go_pipe[2];

static void *grow_and_idle(void *arg) {
  (void)arg;
  push_out_and_miss();
  malloc_then_free(30, 40 * KiB); /* (32 spans kept: the grown bound) */
  char c = 1;
  REQUIRE(write(ready_pipe[1], &c, 1) == 1);
  REQUIRE(read(go_pipe[0], &c, 1) == 1); /* no call to the allocator until main says */
  return NULL;
}

int main(void) {
  api = alloc_api();
  if (!api.validate) {
    printf("medium_cache_growth: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  REQUIRE((size_t)api.option_get("superblock_size") == 64 * KiB); /* the sizes below are for 64 KiB chunks */
  REQUIRE(api.option_get("medium_cache_kb") == 1024 && api.option_get("medium_cache_max_kb") == 4096);
  /* no purge takes the spans while parts 1-5 count them */
  REQUIRE(api.option_set("purge_delay_ms", "5000") == 0);
  api.trim(0);

  /* 1: nothing pushed out */
  larder_stats_t before = stats();
  malloc_then_free(16, 40 * KiB);
  malloc_then_free(16, 40 * KiB);
  alloc_call(100 * KiB);
  api.trim(0);
  malloc_then_free(48, 40 * KiB);
  malloc_then_free(64, 100 * KiB);
  larder_stats_t after = stats();
  CHECK_MSG(after.medium_cache_hits - before.medium_cache_hits >= 16, "%zu hits",
            after.medium_cache_hits - before.medium_cache_hits);
  CHECK_MSG(after.medium_cache_grows == before.medium_cache_grows && after.medium_cache_extra == 0,
            "grew %zu times (%zu bytes) with nothing pushed out", after.medium_cache_grows - before.medium_cache_grows,
            after.medium_cache_extra);
  api.trim(0);

  /* 2: pushed out, then a miss */
  push_out_and_miss();
  after = stats();
  CHECK_MSG(after.medium_cache_grows - before.medium_cache_grows == 1 && after.medium_cache_extra == 1 * MiB,
            "grew %zu times, %zu bytes extra", after.medium_cache_grows - before.medium_cache_grows, after.medium_cache_extra);
  malloc_then_free(40, 40 * KiB);
  CHECK_MSG(stats().medium_bytes_cached == 2 * MiB, "%zu bytes kept under a 2 MiB bound", stats().medium_bytes_cached);

  /* 3: up to 4 MiB, and no further */
  push_out_and_miss(); /* 4 MiB */
  malloc_then_free(70, 100 * KiB);
  alloc_call(300 * KiB);
  push_out_and_miss();
  malloc_then_free(70, 100 * KiB);
  alloc_call(300 * KiB);
  after = stats();
  CHECK_MSG(after.medium_cache_grows - before.medium_cache_grows == 2 && after.medium_cache_extra == 3 * MiB,
            "grew %zu times, %zu bytes extra", after.medium_cache_grows - before.medium_cache_grows, after.medium_cache_extra);
  malloc_then_free(70, 100 * KiB);
  CHECK_MSG(stats().medium_bytes_cached == 4 * MiB, "%zu bytes kept under a 4 MiB bound", stats().medium_bytes_cached);
  CHECK(api.validate() == 0);

  /* 4: malloc_trim */
  api.trim(0);
  after = stats();
  CHECK_MSG(after.medium_bytes_cached == 0 && after.medium_cache_extra == 0, "after a trim: %zu bytes kept, %zu extra",
            after.medium_bytes_cached, after.medium_cache_extra);

  /* 5: the process's limit */
  REQUIRE(api.option_set("medium_cache_max_kb", "2048") == 0);
  REQUIRE(pthread_barrier_init(&grown, NULL, GROWERS + 1) == 0);
  REQUIRE(pthread_barrier_init(&checked, NULL, GROWERS + 1) == 0);
  before = stats();
  pthread_t t[GROWERS];
  for (int i = 0; i < GROWERS; i++) REQUIRE(pthread_create(&t[i], NULL, grow_and_wait, NULL) == 0);
  pthread_barrier_wait(&grown);
  after = stats();
  printf("medium_cache_growth: %d threads pushed out and missed: %zu grew, %zu KiB extra\n", GROWERS,
         after.medium_cache_grows - before.medium_cache_grows, after.medium_cache_extra / KiB);
  CHECK_MSG(after.medium_cache_grows - before.medium_cache_grows == 8 && after.medium_cache_extra == 8 * MiB,
            "%zu grew, %zu bytes extra", after.medium_cache_grows - before.medium_cache_grows, after.medium_cache_extra);
  pthread_barrier_wait(&checked);
  for (int i = 0; i < GROWERS; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  CHECK_MSG(stats().medium_cache_extra == 0, "%zu bytes extra after the threads exited", stats().medium_cache_extra);

  /* 6: a thread that grew, then stopped calling */
  REQUIRE(pipe(ready_pipe) == 0 && pipe(go_pipe) == 0);
  pthread_t idle;
  REQUIRE(pthread_create(&idle, NULL, grow_and_idle, NULL) == 0);
  char c;
  REQUIRE(read(ready_pipe[0], &c, 1) == 1);
  size_t idle_extra = stats().medium_cache_extra, idle_kept = stats().medium_bytes_cached;
  REQUIRE(api.option_set("purge_delay_ms", "100") == 0);
  alloc_sleep_ms(300);
  api.trim(0);
  after = stats();
  printf("medium_cache_growth: an idle thread kept %zu KiB under %zu KiB extra; after 3 purge delays and a purge, "
         "%zu and %zu\n", idle_kept / KiB, idle_extra / KiB, after.medium_bytes_cached / KiB, after.medium_cache_extra / KiB);
  CHECK(idle_extra == 1 * MiB && idle_kept == 2 * MiB);
  CHECK(after.medium_bytes_cached == 0 && after.medium_cache_extra == 0);
  REQUIRE(write(go_pipe[1], &c, 1) == 1);
  REQUIRE(pthread_join(idle, NULL) == 0);
  CHECK(api.validate() == 0);
  return check_done();
}
