/* A user's program linked with an installed liblarder (through pkg-config or find_package):
 * its plain malloc/calloc/realloc/free must be served by larder, which larder's own statistics
 * show (bytes in use rise by at least what was asked for, and fall back when freed). */
#include <larder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000
static void *blocks[N]; /* global, so the compiler cannot drop the calls */

int main(void) {
  if (strcmp(larder_version(), LARDER_VERSION_STRING) != 0) {
    fprintf(stderr, "use_larder: library %s, header %s\n", larder_version(), LARDER_VERSION_STRING);
    return 1;
  }
  larder_stats_t before, during, after;
  larder_stats_get(&before);
  size_t asked = 0;
  for (int i = 0; i < N; i++) {
    size_t n = 24 + (size_t)(i % 100) * 16;
    blocks[i] = (i % 3 == 0) ? calloc(1, n) : malloc(n);
    if (!blocks[i]) return 1;
    memset(blocks[i], 7, n);
    if (i % 5 == 0) {
      blocks[i] = realloc(blocks[i], n * 2);
      if (!blocks[i]) return 1;
      n *= 2;
    }
    asked += n;
  }
  larder_stats_get(&during);
  /* every block is larder's: its usable size covers the request (larder_usable_size gives 0
   * for a pointer larder does not own) */
  for (int i = 0; i < N; i++) {
    size_t n = (24 + (size_t)(i % 100) * 16) * (i % 5 == 0 ? 2 : 1);
    if (larder_usable_size(blocks[i]) < n) {
      fprintf(stderr, "use_larder: block %d (%zu bytes) is not larder's\n", i, n);
      return 1;
    }
  }
  for (int i = 0; i < N; i++) free(blocks[i]);
  larder_stats_get(&after);

  size_t grew = during.bytes_in_use - before.bytes_in_use;
  printf("use_larder: liblarder %s; %d blocks, %zu bytes asked, larder's bytes_in_use +%zu, then %+lld "
         "after the frees; calls counted: %zu mallocs, %zu frees\n", larder_version(), N, asked, grew,
         (long long)after.bytes_in_use - (long long)during.bytes_in_use, during.mallocs - before.mallocs,
         after.frees - during.frees);
  if (during.bytes_in_use < before.bytes_in_use + asked) {
    fprintf(stderr, "use_larder: larder did not serve the program's malloc (bytes_in_use +%zu < %zu)\n",
            grew, asked);
    return 1;
  }
  /* the call counters are compiled out with -DLARDER_STATS=OFF; when they are on, they count */
  if (during.mallocs != 0 &&
      (during.mallocs - before.mallocs < N || after.frees - during.frees < N)) {
    fprintf(stderr, "use_larder: larder counted %zu mallocs and %zu frees, expected >= %d each\n",
            during.mallocs - before.mallocs, after.frees - during.frees, N);
    return 1;
  }
  return larder_validate() == 0 ? 0 : 1;
}
