/* Local frees into non-current superblocks take no lock (issue 8, "Must hold": "Local frees
 * into non-current superblocks take no lock (a counter of lock acquisitions per free, or an
 * equivalent structural check)").
 *
 * One thread allocates 200,000 48-byte blocks (about 150 superblocks of 64 KiB) and frees them
 * in random order, so almost every free lands in a superblock other than the one the heap is
 * allocating from. Today such frees go to a deferred list flushed under the heap lock.
 * Check (deltas over the free phase): free_lock_acquisitions <= frees / 1000 (the brief's
 * figure; what is left is for moving superblocks between heaps, which may take a lock: at most
 * one per superblock, 150 here, against the bound of 200). A positive control keeps the test
 * from passing on a counter that is never incremented: the allocation phase must have counted
 * refills (the slow-path counters of the same change). larder_validate() at the end.
 *
 * usage: alloc_local_free_nolock [blocks] */
#include "server_util.h"

#define BLOCK 48

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  if (n < 10000) {
    fprintf(stderr, "usage: %s [blocks >= 10000]\n", argv[0]);
    return 2;
  }
  alloc_api_t api = alloc_api();
  larder_stats_t s0, s1, s2;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  memset(&s2, 0, sizeof s2);
  long *order = malloc((size_t)n * sizeof *order);
  void **p = malloc((size_t)n * sizeof *p);
  REQUIRE(order && p);
  uint64_t seed = 48;
  for (long i = 0; i < n; i++) order[i] = i;
  for (long i = n - 1; i > 0; i--) {
    long j = (long)(alloc_rng(&seed) % (uint64_t)(i + 1));
    long t = order[i]; order[i] = order[j]; order[j] = t;
  }
  if (api.stats_get) api.stats_get(&s0);
  for (long i = 0; i < n; i++) {
    p[i] = malloc(BLOCK);
    REQUIRE(p[i] != NULL);
    memset(p[i], (int)(i & 0xff), BLOCK);
  }
  if (api.stats_get) api.stats_get(&s1);
  long bad = 0;
  for (long k = 0; k < n; k++) {
    long i = order[k];
    bad += ((unsigned char *)p[i])[BLOCK - 1] != (unsigned char)(i & 0xff);
    free(p[i]);
  }
  if (api.stats_get) api.stats_get(&s2);
  CHECK(bad == 0);
  long locks = (long)(s2.free_lock_acquisitions - s1.free_lock_acquisitions);
  long frees = (long)(s2.frees - s1.frees);
  long refills = (long)(s1.refills - s0.refills);
  printf("local_free_nolock: %ld blocks of %d B freed in random order: %ld frees counted, "
         "%ld lock acquisitions on free paths (bound %ld = frees/1000), %zu superblocks to the "
         "global heap; %ld refills while allocating\n",
         n, BLOCK, frees, locks, n / 1000, s2.superblocks_to_global - s1.superblocks_to_global,
         refills);
  free(order);
  free(p);
  if (!api.validate) {
    printf("local_free_nolock: not larder: no counters; workload ran, checks skipped\n");
    return ALLOC_SKIP;
  }
  CHECK_MSG(frees >= n, "only %ld of %ld frees counted", frees, n);
  CHECK_MSG(refills > 0, "no refills counted while allocating %ld blocks: the slow-path counters "
            "are missing, so a zero lock count proves nothing", n);
  CHECK_MSG(locks <= n / 1000, "%ld locks taken by %ld local frees (%.3f per free; bound 1/1000)",
            locks, frees, frees ? (double)locks / (double)frees : 0.0);
  int v = api.validate();
  CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  return check_done();
}
