/* Out of memory, really: with the address space limited (RLIMIT_AS, 64 MiB above what the
 * process maps at start), 4 threads allocate mixed sizes (16 B-2 KiB, 4-200 KiB, 1 MiB; a
 * seventh by calloc) until calls fail, write each block they get, free everything, and go
 * again. Every failed call must return NULL with errno ENOMEM (the OS's mmap failing inside a
 * refill, a new segment, a span or a thread's first heap, never a crash or another errno); the
 * limit must have been reached; the blocks got must be intact when freed; under larder the
 * validation walk must pass afterwards; and with the limit lifted a 100 MiB block must come.
 * The impossible sizes' ENOMEM is tested in api_errors.c and realloc_impossible.c. */
#include <pthread.h>
#include <sys/resource.h>

#include "alloc_util.h"

#define THREADS 4
#define BLOCKS 100000
#define ROUNDS 2

static atomic_long failed_calls, wrong_errno, got_blocks, damaged;

static void *worker(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
  void **blocks = calloc(BLOCKS, sizeof *blocks);
  size_t *sizes = calloc(BLOCKS, sizeof *sizes);
  if (!blocks || !sizes) { /* the limit may already bite: counted as a failed call */
    atomic_fetch_add(&failed_calls, 1);
    free(blocks);
    free(sizes);
    return NULL;
  }
  for (int round = 0; round < ROUNDS; round++) {
    long n = 0;
    for (long i = 0; i < BLOCKS; i++) {
      uint64_t r = alloc_rng(&s);
      size_t size = r % 100 < 95 ? 16 + r % 2000 : r % 100 < 99 ? 4096 + r % 200000 : (size_t)1 << 20;
      errno = 0;
      void *p = r % 7 == 0 ? calloc(1, size) : malloc(size);
      if (!p) {
        atomic_fetch_add(&failed_calls, 1);
        if (errno != ENOMEM) atomic_fetch_add(&wrong_errno, 1);
        continue;
      }
      alloc_fill(p, size < 256 ? size : 256);
      blocks[n] = p;
      sizes[n++] = size < 256 ? size : 256;
    }
    atomic_fetch_add(&got_blocks, n);
    for (long i = 0; i < n; i++) {
      if (alloc_check(blocks[i], sizes[i]) != (size_t)-1) atomic_fetch_add(&damaged, 1);
      free(blocks[i]);
    }
  }
  free(blocks);
  free(sizes);
  return NULL;
}

int main(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  REQUIRE(f != NULL);
  unsigned long pages = 0;
  REQUIRE(fscanf(f, "%lu", &pages) == 1);
  fclose(f);
  struct rlimit old, limit;
  REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
  limit = old;
  limit.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)64 << 20);
  if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < limit.rlim_cur) limit.rlim_cur = old.rlim_cur;
  REQUIRE(setrlimit(RLIMIT_AS, &limit) == 0);

  pthread_t tids[THREADS];
  int started = 0;
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&tids[started], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0) started++;
  for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);

  alloc_api_t api = alloc_api();
  int violations = api.validate ? api.validate() : 0;
  REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
  errno = 0;
  void *big = malloc((size_t)100 << 20);
  int big_errno = errno;
  printf("out_of_memory: %d of %d threads started under a limit of %.0f MiB; %ld blocks got, %ld calls failed "
         "(%ld with errno other than ENOMEM), %ld damaged; validation %d; 100 MiB after the limit is lifted: %s\n",
         started, THREADS, ALLOC_MIB(limit.rlim_cur), (long)got_blocks, (long)failed_calls, (long)wrong_errno,
         (long)damaged, violations, big ? "ok" : "NULL");
  CHECK_MSG(started >= 1, "no thread could start under the limit");
  CHECK_MSG(failed_calls > 0, "the limit was never reached: the test tried nothing");
  CHECK_MSG(got_blocks > 0, "no allocation succeeded under the limit");
  CHECK(wrong_errno == 0);
  CHECK(damaged == 0);
  CHECK_MSG(violations == 0, "larder_validate found %d violation(s) after running out of memory", violations);
  CHECK_MSG(big != NULL, "malloc(100 MiB) failed after the limit was lifted (errno %d)", big_errno);
  free(big);
  return check_done();
}
