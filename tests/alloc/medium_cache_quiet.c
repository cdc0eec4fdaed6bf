/* A medium span a thread keeps goes back when the process then goes quiet, by the purge thread
 * alone (docs/allocator.md, "Medium and large objects": kept spans go back "when the thread
 * stops calling for a delay").
 *
 * The sequence that kept one for good before: a worker mallocs a 40 KiB block (a medium span),
 * then waits 5 purge delays without a call, long enough for the purge thread to run, find
 * nothing to do and set no deadline at all; then it frees the block, which the thread keeps
 * (such a free polls no maintenance: 15 in 16 do not), and blocks for ever. Nothing else in
 * the process calls the allocator. The purge thread must still come back for the span: checked
 * through medium_bytes_cached, read by the main thread (larder_stats_get runs no maintenance),
 * within 30 purge delays. validate() must pass after.
 *
 * The registration sets LARDER_PURGE_THREAD=1 (the purge thread from the first allocation: this
 * process maps far less than the default threshold) and LARDER_PURGE_DELAY_MS=250: long enough
 * for the main thread to see the span kept before the purge may take it, on a loaded machine.
 * Under another allocator: skipped.
 *
 * usage: alloc_medium_cache_quiet */
#include "server_util.h" /* first: it defines _GNU_SOURCE */

#include <pthread.h>

#define KiB ((size_t)1 << 10)
#define DELAY_MS 250

static int to_worker[2], from_worker[2];

static void send_byte(int fd) {
  char c = 1;
  REQUIRE(write(fd, &c, 1) == 1);
}
static void wait_byte(int fd) {
  char c;
  REQUIRE(read(fd, &c, 1) == 1);
}

static void *worker(void *arg) {
  (void)arg;
  unsigned char *p = malloc(40 * KiB);
  REQUIRE(p != NULL);
  memset(p, 0x5a, 40 * KiB);
  send_byte(from_worker[1]);
  wait_byte(to_worker[0]); /* the quiet spell: the purge runs and finds nothing to do */
  free(p);                 /* kept by this thread */
  send_byte(from_worker[1]);
  wait_byte(to_worker[0]); /* and no call after it */
  return NULL;
}

int main(void) {
  alloc_api_t api = alloc_api();
  if (!api.validate) {
    printf("medium_cache_quiet: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  REQUIRE(api.option_get("purge_delay_ms") == DELAY_MS);
  REQUIRE(api.option_get("purge_thread") == 1);
  REQUIRE(pipe(to_worker) == 0 && pipe(from_worker) == 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
  wait_byte(from_worker[0]);
  srv_sleep_ms(5 * DELAY_MS);
  larder_stats_t before = alloc_stats(&api);
  send_byte(to_worker[1]);
  wait_byte(from_worker[0]);
  larder_stats_t kept = alloc_stats(&api);
  CHECK_MSG(kept.medium_bytes_cached >= 64 * KiB && kept.medium_cache_hits == before.medium_cache_hits,
            "the freed span is kept: %zu bytes of kept spans", kept.medium_bytes_cached);
  long waited = 0;
  size_t cached = kept.medium_bytes_cached;
  while (cached > 0 && waited < 30 * DELAY_MS) {
    srv_sleep_ms(DELAY_MS / 2);
    waited += DELAY_MS / 2;
    cached = alloc_stats(&api).medium_bytes_cached;
  }
  larder_stats_t after = alloc_stats(&api);
  printf("medium_cache_quiet: %zu bytes kept after the free, %zu after %ld ms without a call (%zu purge "
         "thread runs meanwhile)\n",
         kept.medium_bytes_cached, cached, waited, after.purge_thread_runs - kept.purge_thread_runs);
  CHECK_MSG(cached == 0, "the kept span is still kept %ld ms (%ld purge delays) after the free", waited,
            waited / DELAY_MS);
  send_byte(to_worker[1]);
  REQUIRE(pthread_join(t, NULL) == 0);
  CHECK(api.validate() == 0);
  return check_done();
}
