/* A heap's bins take their places in the order it meets their classes (src/internal.h,
 * heap_t bin_place), four to a page, so that a thread that uses a few sizes has a few pages of
 * bins: at their classes' places, six sizes spread over the classes put six pages of bins in
 * every resting thread (docs/results.md, fifty-first session).
 *
 * A new thread mallocs and frees blocks of six classes far apart, largest first: their bins
 * must hold places 0-5, in that order, within two pages of the bins' start, and each class's
 * bin is the one the free fast path's table and malloc's bin_of lead to (a block freed goes
 * back in that bin). A seventh class met later takes place 6. Then the validation walk, which
 * checks every class's place against the map back to its class. Built against liblarder.a
 * with the internal header. */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

static const size_t sizes[] = {8000, 3000, 1000, 200, 64, 16};

static void *worker(void *arg) {
  (void)arg;
  heap_t *heap = NULL;
  unsigned n = sizeof sizes / sizeof sizes[0];
  for (unsigned i = 0; i < n; i++) {
    char *volatile p = malloc(sizes[i]);
    REQUIRE(p != NULL);
    p[0] = 1;
    heap = ld_heap_tls;
    unsigned c = ld_size_class(sizes[i]);
    unsigned place = ld_heap_bin_place(heap, c);
    CHECK_MSG(place == i, "class %u (%zu B) met %u-th has its bin at place %u", c, sizes[i], i, place);
    const ld_bin_t *bin = ld_heap_bin(heap, c);
    CHECK_MSG((const char *)bin < (const char *)heap->bins + 2 * 4096, "class %u's bin lies %zu bytes into the heap", c,
              (size_t)((const char *)bin - (const char *)heap->bins));
    /* malloc's table leads there, and the free fast path's (the block goes back in that bin,
     * here or as the deferred free that a second block's free settles) */
    CHECK_MSG(heap->bin_of[(sizes[i] + 15) >> 4] == ld_bin_of_entry(place), "class %u: bin_of leads elsewhere", c);
    uint32_t before = bin->count;
    free(p);
    char *volatile q = malloc(sizes[i]);
    REQUIRE(q != NULL);
    free(q);
    CHECK_MSG(bin->count >= before, "class %u: its bin holds %u blocks after two frees, %u before", c, bin->count, before);
  }
  char *volatile p = malloc(500);
  REQUIRE(p != NULL);
  CHECK_MSG(ld_heap_bin_place(heap, ld_size_class(500)) == n, "a seventh class took place %u",
            ld_heap_bin_place(heap, ld_size_class(500)));
  free(p);
  CHECK_MSG(heap->places_used == n + 1, "%u places used, %u classes met", heap->places_used, n + 1);
  printf("bin_places: %u classes met, their bins at places 0-%u, %zu bytes of bins\n", n + 1, n,
         (size_t)(n + 1) * sizeof(ld_bin_t));
  CHECK(larder_validate() == 0);
  return NULL;
}

int main(void) {
  /* a thread of its own: a new heap, whose classes are met in this order */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  return check_done();
}
