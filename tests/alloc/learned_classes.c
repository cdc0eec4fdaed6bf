/* Size classes learned at run time (superblock.c, ld_class_learn; alloc.c, class_vote): one size
 * that dominates a class's refills becomes a class of its own where its blocks cost at least
 * 1/17 less memory.
 *
 * 1. 20,000 blocks of 1,032 bytes (sqlite's page cache asks for that size), each filled: the
 *    1,152-byte class gives way to a learned class of 1,040 bytes. classes_learned goes up by
 *    one; the class statistics list it, marked learned, in its place by size, with 62 blocks
 *    to a 64 KiB superblock; a new malloc(1032) is 1,040 bytes usable; most of the 20,000 lie in
 *    the learned class.
 * 2. Another thread, whose bins were set up before the learning, gets the learned class for
 *    1,032 bytes from its next slow path on (the blocks its bin of the old class held first), and frees half of the first thread's blocks
 *    (remote frees into both classes); aligned requests (64-byte alignment: the learned class is
 *    no multiple of 64) and calloc of the size are served right. Every block keeps its pattern
 *    until freed, and the validation walk passes.
 * 3. Sizes that would gain too little (1,100 bytes: 59 blocks of 1,104 to a superblock against 56
 *    of 1,152, under 1/17 less memory a block) and a mix of eight sizes at random (1,153 to
 *    1,280 bytes) learn nothing.
 * 4. learned_classes bounds them: set to one more than learned, two more dominating sizes
 *    (520 and 2,056 bytes) learn one; set to 0, none more. */
#include "alloc_util.h"

#include <malloc.h>
#include <pthread.h>

static alloc_api_t api;

enum { N = 20000 };
static void *blocks[N];

static size_t learned_now(void) { return alloc_stats(&api).classes_learned; }

/* n blocks in blocks[], of the sizes make gives, each filled with its pattern; release checks and frees them. */
static void hold(size_t n, size_t (*make)(size_t, uint64_t *), uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    size_t size = make(i, &seed);
    REQUIRE((blocks[i] = malloc(size)) != NULL);
    alloc_fill(blocks[i], size);
  }
}
static void release(size_t n, size_t (*make)(size_t, uint64_t *), uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    size_t size = make(i, &seed);
    CHECK_MSG(alloc_check(blocks[i], size) == (size_t)-1, "block %zu (%zu B) changed", i, size);
    free(blocks[i]);
    blocks[i] = NULL;
  }
}
static size_t size_1032(size_t i, uint64_t *s) { (void)i, (void)s; return 1032; }
static size_t size_1100(size_t i, uint64_t *s) { (void)i, (void)s; return 1100; }
static size_t size_520(size_t i, uint64_t *s) { (void)i, (void)s; return 520; }
static size_t size_2056(size_t i, uint64_t *s) { (void)i, (void)s; return 2056; }
static size_t size_mixed(size_t i, uint64_t *s) { (void)i; return 1153 + 16 * (size_t)(alloc_rng(s) % 8); }

/* The class statistics' entry of block size `size`, or NULL. */
static larder_class_stats_t classes[128];
static const larder_class_stats_t *class_sized(size_t size, size_t *count) {
  *count = api.class_stats_get(classes, 128);
  REQUIRE(*count > 0 && *count <= 128);
  for (size_t c = 0; c < *count; c++)
    if (classes[c].block_size == size) return &classes[c];
  return NULL;
}

static pthread_barrier_t barrier;
static void *other_thread(void *arg) {
  (void)arg;
  void *p = malloc(1032); /* before the learning: its bins are set up for the fixed classes */
  REQUIRE(p != NULL);
  CHECK_MSG(malloc_usable_size(p) == 1152, "malloc(1032) before the learning: %zu usable", malloc_usable_size(p));
  free(p);
  pthread_barrier_wait(&barrier);
  pthread_barrier_wait(&barrier); /* main learned the class */
  /* the blocks its bin of the old class holds come first; its next refill follows the table */
  void *kept[64];
  int first = -1;
  for (int i = 0; i < 64; i++) {
    REQUIRE((kept[i] = malloc(1032)) != NULL);
    size_t usable = malloc_usable_size(kept[i]);
    if (first < 0 && usable == 1040) first = i;
    CHECK_MSG(usable == (first < 0 ? 1152u : 1040u), "malloc(1032) %d after the learning: %zu usable", i, usable);
  }
  printf("learned_classes: another thread's malloc(1032) is 1,040 B usable from its call %d on\n", first);
  CHECK(first >= 0 && first < 32);
  for (int i = 0; i < 64; i++) free(kept[i]);
  for (size_t i = 0; i < N; i += 2) { /* half of main's blocks: remote frees */
    CHECK_MSG(alloc_check(blocks[i], 1032) == (size_t)-1, "block %zu changed", i);
    free(blocks[i]);
    blocks[i] = NULL;
  }
  return NULL;
}

int main(void) {
  if (!alloc_is_larder()) {
    printf("learned_classes: larder's classes only\n");
    return ALLOC_SKIP;
  }
  api = alloc_api();
  REQUIRE(api.class_stats_get && api.stats_get && api.validate && api.option_set && api.option_get);
  if (api.option_get("learned_classes") < 2 || api.option_get("superblock_size") != 65536) {
    printf("learned_classes: needs learned_classes >= 2 and 64 KiB superblocks\n");
    return ALLOC_SKIP;
  }
  size_t start = learned_now(), count;
  CHECK(class_sized(1040, &count) == NULL);
  pthread_t t;
  REQUIRE(pthread_barrier_init(&barrier, NULL, 2) == 0);
  REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0);
  pthread_barrier_wait(&barrier);

  /* 1. 20,000 blocks of 1,032 bytes */
  hold(N, size_1032, 0);
  CHECK_MSG(learned_now() == start + 1, "%zu classes learned, %zu before", learned_now(), start);
  const larder_class_stats_t *k = class_sized(1040, &count);
  CHECK(k != NULL);
  if (k) {
    printf("learned_classes: 1,032 B learned: class of %zu B, %zu blocks a superblock, %zu superblocks, %zu B in use\n",
           k->block_size, k->blocks_per_superblock, k->superblocks + k->superblocks_global, k->bytes_in_use);
    CHECK(k->learned == 1 && k->blocks_per_superblock == 62);
    CHECK_MSG(k->bytes_in_use >= (size_t)N / 2 * 1040, "the learned class holds %zu B of the 20,000 blocks", k->bytes_in_use);
    CHECK(k > classes && k[-1].block_size == 1024 && !k[-1].learned && k[1].block_size == 1152);
  }
  for (size_t c = 1; c < count; c++) CHECK(classes[c].block_size > classes[c - 1].block_size);
  void *p = malloc(1032);
  REQUIRE(p != NULL);
  CHECK_MSG(malloc_usable_size(p) == 1040, "malloc(1032) after the learning: %zu usable", malloc_usable_size(p));
  free(p);
  CHECK(api.validate() == 0);

  /* 2. another thread; aligned and zeroed requests */
  pthread_barrier_wait(&barrier);
  REQUIRE(pthread_join(t, NULL) == 0);
  void *aligned;
  REQUIRE(posix_memalign(&aligned, 64, 1032) == 0);
  CHECK(((uintptr_t)aligned & 63) == 0 && malloc_usable_size(aligned) >= 1032);
  alloc_fill(aligned, 1032);
  unsigned char *zeroed = calloc(1, 1032);
  REQUIRE(zeroed != NULL);
  size_t nonzero = 0;
  for (size_t i = 0; i < 1032; i++) nonzero += zeroed[i] != 0;
  CHECK_MSG(nonzero == 0, "calloc(1, 1032): %zu bytes not zero", nonzero);
  CHECK(alloc_check(aligned, 1032) == (size_t)-1);
  free(aligned);
  free(zeroed);
  for (size_t i = 1; i < N; i += 2) {
    CHECK_MSG(alloc_check(blocks[i], 1032) == (size_t)-1, "block %zu changed", i);
    free(blocks[i]);
  }
  CHECK(api.validate() == 0);

  /* 3. too little to gain, and no size dominating */
  size_t before = learned_now();
  hold(N, size_1100, 0);
  release(N, size_1100, 0);
  hold(N, size_mixed, 20261130);
  release(N, size_mixed, 20261130);
  CHECK_MSG(learned_now() == before, "1,100 B and a mix of sizes learned %zu classes", learned_now() - before);
  CHECK(class_sized(1104, &count) == NULL);

  /* 4. the option's bound */
  before = learned_now();
  char value[16];
  snprintf(value, sizeof value, "%zu", before + 1);
  REQUIRE(api.option_set("learned_classes", value) == 0);
  hold(N, size_520, 0);
  release(N, size_520, 0);
  hold(N / 2, size_2056, 0);
  release(N / 2, size_2056, 0);
  printf("learned_classes: with learned_classes %s: %zu learned (528 B: %s, 2,064 B: %s)\n", value, learned_now(),
         class_sized(528, &count) ? "yes" : "no", class_sized(2064, &count) ? "yes" : "no");
  CHECK_MSG(learned_now() == before + 1, "%zu classes learned, the bound %zu", learned_now(), before + 1);
  CHECK(class_sized(528, &count) != NULL && class_sized(2064, &count) == NULL);
  REQUIRE(api.option_set("learned_classes", "0") == 0);
  hold(N / 2, size_2056, 0);
  release(N / 2, size_2056, 0);
  CHECK(learned_now() == before + 1 && class_sized(2064, &count) == NULL);
  CHECK(api.validate() == 0);
  return check_done();
}
