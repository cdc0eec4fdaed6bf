/* Every class's bin holds at least LD_BIN_LEAST (3) blocks (src/internal.h), so that a malloc
 * and a free of the same block, again and again, stay on the fast paths: the free keeps the
 * block as the heap's deferred free (alloc.c) and the bin must still have one to hand out. With
 * bins of 1 or 2 blocks (the classes above 5,461 B before), a refill brought 1 block, which
 * the free then kept deferred, and every malloc of such a size found its bin empty.
 *
 * For every small class, its largest size: after a few malloc+free pairs, the bin's limit is
 * at least 3, and after each free of 100 more pairs the bin still holds a block for the next
 * malloc (the fast path's test). Built against liblarder.a with the internal header, to read
 * the thread's bins. The validation walk passes at the end. */
#include "alloc_util.h"
#include "internal.h"

int main(void) {
  alloc_call(1); /* the thread's heap and bins */
  int classes = 0, failed_empty = 0;
  for (unsigned c = 0; c < LD_CLASS_FIXED + ld_classes_learned && ld_class_size[c] <= ld_small_max; c++) {
    size_t size = ld_class_size[c];
    for (int i = 0; i < 4; i++) {
      char *volatile p = malloc(size);
      REQUIRE(p != NULL);
      p[0] = 1;
      free(p);
    }
    const ld_bin_t *bin = ld_heap_bin(ld_heap_tls, c);
    CHECK_MSG(bin->limit >= LD_BIN_LEAST, "class %u (%zu B): a bin of %u blocks", c, size, (unsigned)bin->limit);
    int empty = 0;
    for (int i = 0; i < 100; i++) {
      char *volatile p = malloc(size);
      REQUIRE(p != NULL);
      p[0] = 1;
      free(p);
      empty += bin->count == 0;
    }
    CHECK_MSG(empty == 0, "class %u (%zu B): the bin was empty after %d of 100 frees", c, size, empty);
    failed_empty += empty != 0;
    classes++;
  }
  printf("bin_least: %d classes, every bin at least %d blocks; bins left empty by a free: %d classes\n", classes,
         LD_BIN_LEAST, failed_empty);
  CHECK(larder_validate() == 0);
  return check_done();
}
