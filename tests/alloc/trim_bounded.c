/* malloc_trim gives back what was free when it was called, not what other threads free while
 * it runs (src/segment.c, ld_segment_purge; src/global.c, ld_global_release_empties). Its
 * loops let waiting threads in between purges; when every purge was answered with a new free
 * the loops went on: under bench/soak.c's load (4 workers, 7 GB, --trim-every 1) one
 * malloc_trim took 284 s. A count, not a time: built against liblarder.a with the internal
 * header, the test calls the purge with `all` and a start time it chose, as malloc_trim does
 * with its own, and looks at what is left dirty.
 *
 *   before    medium span A is freed (a dirty free run), then B, with the clock read between
 *             them; the purge of everything as of that reading purges A and leaves B dirty,
 *             to the byte;
 *   after     a purge as of now purges B as well: nothing is left dirty;
 *   superblocks  the same for empty superblocks in the global heap: those that emptied
 *             before the reading are given back, those after stay until a purge as of now. */
#include "alloc_util.h"
#include "internal.h"
#include "os.h"

#define SPAN (256 * 1024) /* a medium span: 64 KiB chunks, five with its header's */

static void settle_clock(void) {
  /* frees are stamped by the coarse clock, a few ms behind the precise one */
  ld_os_sleep_ms(30);
}

static void medium_spans(void) {
  /* no span kept by the thread: a free goes to the segments at once */
  double cache_kb = larder_option_get("medium_cache_kb");
  REQUIRE(larder_option_set("medium_cache_kb", "0") == 0);
  char *a = malloc(SPAN), *spacer = malloc(SPAN), *b = malloc(SPAN), *spacer2 = malloc(SPAN);
  REQUIRE(a && spacer && b && spacer2);
  memset(a, 1, SPAN);
  memset(b, 2, SPAN);
  /* anything dirty from start-up goes first */
  ld_segment_purge(ld_os_now_ns(), true);
  size_t base = ld_segment_dirty_bytes();
  CHECK_MSG(base == 0, "%zu bytes dirty before the test", base);
  free(a);
  size_t after_a = ld_segment_dirty_bytes();
  CHECK_MSG(after_a >= SPAN, "A's free left %zu bytes dirty, expected at least %d", after_a, SPAN);
  settle_clock();
  uint64_t between = ld_os_now_ns();
  settle_clock();
  free(b);
  size_t both = ld_segment_dirty_bytes();
  CHECK_MSG(both >= after_a + SPAN, "A and B left %zu bytes dirty, A alone %zu", both, after_a);
  ld_segment_purge(between, true);
  size_t left = ld_segment_dirty_bytes();
  CHECK_MSG(left == both - after_a, "a purge of what was free at the reading left %zu bytes dirty, expected B's %zu", left,
            both - after_a);
  ld_segment_purge(ld_os_now_ns(), true);
  CHECK_MSG(ld_segment_dirty_bytes() == 0, "a purge as of now left %zu bytes dirty", ld_segment_dirty_bytes());
  free(spacer);
  free(spacer2);
  char value[32];
  snprintf(value, sizeof value, "%.17g", cache_kb);
  CHECK(larder_option_set("medium_cache_kb", value) == 0);
}

/* Superblocks that emptied go to the global heap's lists, stamped; the purge gives them to
 * the segments. Two classes, so that the second's superblocks are not the first's again. */
#define A_SIZE 1000
#define B_SIZE 2000
#define A_COUNT 2048
#define B_COUNT 1024
static void empty_superblocks(void) {
  static void *a[A_COUNT], *b[B_COUNT];
  for (int i = 0; i < A_COUNT; i++) REQUIRE((a[i] = malloc(A_SIZE)) != NULL);
  for (int i = 0; i < B_COUNT; i++) REQUIRE((b[i] = malloc(B_SIZE)) != NULL);
  ld_global_release_empties(ld_os_now_ns(), true); /* start-up's, if any */
  for (int i = 0; i < A_COUNT; i++) free(a[i]);
  settle_clock();
  uint64_t between = ld_os_now_ns();
  settle_clock();
  for (int i = 0; i < B_COUNT; i++) free(b[i]);
  size_t first = ld_global_release_empties(between, true);
  size_t second = ld_global_release_empties(ld_os_now_ns(), true);
  CHECK_MSG(first > 0, "no superblock that emptied before the reading was given back");
  CHECK_MSG(second > 0, "the purge as of the reading gave back the superblocks that emptied after it (%zu bytes)", first);
}

int main(void) {
  medium_spans();
  empty_superblocks();
  return check_done();
}
