/* A class's first refill in a thread carves no more blocks than about a page holds (at least
 * one): carving a block writes its tag, which makes its page resident, and a thread that holds
 * one block of a large class (a thread-per-connection server's idle connection:
 * bench/thread-rest) has no use for a second (src/cache.c, first_fill). Later refills double,
 * so a thread that goes on using the class fills its bin as before.
 *
 * Checked, each size in a new thread whose heap meets the class for the first time: the bytes
 * carved in the class's superblocks (heap_t, carved) after one malloc are at most
 * max(one block, 4 KiB), and at least one block; for the small classes, whose first fill is 4
 * blocks, exactly 4 blocks (the bin keeps 3). Then 64 more mallocs of the size are served with
 * at most 12 refills in all (a fill that stayed at one block would take 64), and the blocks are
 * distinct and usable. Built against liblarder.a with the internal header. */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>

static const size_t sizes[] = {16, 64, 1000, 1500, 4096, 8000, 16384};
static size_t size_now;
static int64_t carved_after_one, block_size_seen;
static uint32_t bin_count_after_one, bin_limit;
static size_t refills_after_more;

static void *worker(void *arg) {
  (void)arg;
  char *first = malloc(size_now);
  REQUIRE(first != NULL);
  memset(first, 1, size_now);
  /* (the heap read after the malloc, through a barrier: GCC takes malloc to write no global) */
  __asm__ volatile("" ::: "memory");
  heap_t *heap = ld_heap_tls;
  sb_t *sb = ld_sb_of(first);
  unsigned c = sb->size_class;
  block_size_seen = sb->block_size;
  carved_after_one = heap->carved[c];
  bin_count_after_one = ld_heap_bin(heap, c)->count;
  bin_limit = ld_heap_bin(heap, c)->limit;
  size_t refills_at_one = heap->stats.refills;
  char *more[64];
  for (unsigned i = 0; i < 64; i++) {
    more[i] = malloc(size_now);
    REQUIRE(more[i] != NULL);
    memset(more[i], (int)i, size_now);
    REQUIRE(more[i] != first);
    for (unsigned j = 0; j < i; j++) REQUIRE(more[j] != more[i]);
  }
  refills_after_more = heap->stats.refills - refills_at_one;
  for (unsigned i = 0; i < 64; i++) free(more[i]);
  free(first);
  return NULL;
}

int main(void) {
  free(malloc(1)); /* the main thread's heap first: each worker's is new (or a parked one) */
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_now = sizes[i];
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    int64_t page_or_block = block_size_seen > 4096 ? block_size_seen : 4096;
    printf("first_fill: %zu B (class of %lld B): %lld bytes carved by the first malloc, %u left in the bin; "
           "64 more mallocs took %zu refills\n",
           size_now, (long long)block_size_seen, (long long)carved_after_one, bin_count_after_one, refills_after_more);
    /* (a parked heap's superblock may have been carved before: only the first thread's heap
     * is new for each size, so the bound is checked, not an exact figure, except below) */
    CHECK_MSG(carved_after_one >= block_size_seen, "%zu B: %lld bytes carved, less than one block", size_now,
              (long long)carved_after_one);
    CHECK_MSG((int64_t)(bin_count_after_one + 1) * block_size_seen <= page_or_block,
              "%zu B: the first refill brought %u blocks of %lld B, more than a page holds (or one block)", size_now,
              bin_count_after_one + 1, (long long)block_size_seen);
    if (block_size_seen * 4 <= 4096)
      CHECK_MSG(bin_count_after_one == 3, "%zu B: the first refill of a small class brought %u blocks, not 4", size_now,
                bin_count_after_one + 1);
    /* (a fill is at most half the bin's limit: 64 mallocs take 64 / that refills, and a couple
     * more while the fill doubles up to it) */
    size_t most_fill = (bin_limit + 1u) / 2, bound = (64 + most_fill - 1) / most_fill + 3;
    CHECK_MSG(refills_after_more <= bound, "%zu B: 64 mallocs took %zu refills, more than %zu (the fill does not grow)",
              size_now, refills_after_more, bound);
  }
  return check_done();
}
