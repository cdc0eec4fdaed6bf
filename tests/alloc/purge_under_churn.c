/* Free memory that churn keeps touching is still given back (issue 15, "Flat under mixed load":
 * a mixed load kept 195 MB of free memory dirty, never purged, for minutes).
 *
 * Three medium blocks of 16 chunks (1 MiB with their headers, at S = 64 KiB) are written and
 * freed: they coalesce into one free run of dirty chunks, in the process's first segment (4 MiB)
 * where the blocks were carved side by side. Then one 1 MiB block (17 chunks) is allocated,
 * written at its first byte and freed, over and over, for 15 purge delays: each allocation takes
 * the front of that run and each free coalesces it back. When a free run took the time of its
 * newest part, the run was always new and the 2 MiB the churn never uses stayed dirty for as
 * long as the churn lasted (this test failed: 3 MiB dirty at the end). Now the purge also gives
 * back, once per window of a purge delay, the least dirty memory held at any moment of that
 * window (segment.c), and a purged run is clean and stays apart from the dirty one the loop
 * reuses.
 *
 * Checked (larder only; under another allocator the workload runs and prints):
 *   bytes_free_dirty (larder_stats) >= 3 MiB after the three frees (else the test measures
 *   nothing) and <= 1.5 MiB after the churn (the churned block's 17 chunks are 1.06 MiB);
 *   larder_validate() == 0.
 * Registered with LARDER_PURGE_DELAY_MS=100; the loop lasts 1.5 s, fifteen windows, so that a
 * machine that runs the test late still sees several (the bound needs one).
 *
 * usage: alloc_purge_under_churn */
#include "server_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define BLOCKS 3

static size_t dirty_bytes(alloc_api_t *api) {
  if (!api->stats_get) return 0;
  larder_stats_t st;
  api->stats_get(&st);
  return st.bytes_free_dirty;
}

int main(void) {
  alloc_api_t api = alloc_api();
  int larder = api.validate != NULL;
  alloc_call(100);

  void *p[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    p[i] = malloc(MiB - 4 * KiB); /* with its 256-byte header: 16 chunks of 64 KiB */
    REQUIRE(p[i] != NULL);
    srv_touch(p[i], MiB - 4 * KiB, (unsigned char)i);
  }
  for (int i = 0; i < BLOCKS; i++) free(p[i]);
  size_t dirty_freed = dirty_bytes(&api);

  double t0 = srv_now();
  long rounds = 0;
  while (srv_now() - t0 < 1.5) {
    unsigned char *q = malloc(MiB);
    REQUIRE(q != NULL);
    q[0] = (unsigned char)rounds;
    __asm__ volatile("" : : "r"(q) : "memory");
    free(q);
    rounds++;
  }
  size_t dirty_end = dirty_bytes(&api);
  printf("purge_under_churn: %zu KiB of free memory dirty after the frees, %zu KiB after %ld rounds of "
         "churn over 1.5 s; RSS %zu KiB\n",
         dirty_freed >> 10, dirty_end >> 10, rounds, srv_rss() >> 10);
  if (!larder) return ALLOC_SKIP;

  CHECK_MSG(dirty_freed >= 3 * MiB, "only %zu KiB dirty after freeing 3 MiB written: the test measures nothing",
            dirty_freed >> 10);
  CHECK_MSG(dirty_end <= 3 * MiB / 2, "%zu KiB of free memory still dirty after 15 purge delays of churn: the part "
            "of the run the churn never uses was not purged", dirty_end >> 10);
  CHECK(api.validate() == 0);
  return check_failures ? 1 : 0;
}
