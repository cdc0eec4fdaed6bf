/* The statistics by size class (larder_class_stats_get, and the table and JSON member the
 * statistics print): where the small blocks' memory lies.
 *
 * 1. The classes: ascending block sizes, each what malloc_usable_size gives a malloc of that
 *    size.
 * 2. Every figure adds up: per class, in use + cached + free + never used is the superblocks'
 *    capacity; over the classes, the superblocks are bytes_held less the spans, the cached
 *    blocks bytes_cached less the medium spans kept, and the blocks in use bytes_in_use plus
 *    the remote frees not yet taken back (which a class cannot tell apart).
 * 3. 20,000 blocks of 100 bytes raise their class's bytes in use by exactly 20,000 x 112, and
 *    their superblocks by enough to hold them; freed in random order, the class is back to what
 *    it held in use, the rest cached (within the bin's bound) or free; the superblocks the walk
 *    then gives to the global heap move to its column.
 * 4. Another thread's blocks freed here: its class counts them in use while they wait to be taken
 *    back (bytes_remote_pending says how many bytes wait, over all classes); sent (malloc_trim
 *    sends this thread's buffer of frees) and taken by the owner's next refill, no longer.
 * 5. larder_stats_print_json carries the classes. The validation walk (which now checks each
 *    class's counts in every heap and in the global heap) passes after each step. */
#include "alloc_util.h"

#include <malloc.h>
#include <pthread.h>

static alloc_api_t api;
static larder_class_stats_t classes[128];
static size_t count;

static void take(void) {
  count = api.class_stats_get(classes, 128);
  REQUIRE(count > 0 && count <= 128);
}

static size_t class_of(size_t size) {
  for (size_t c = 0; c < count; c++)
    if (classes[c].block_size >= size) return c;
  REQUIRE(!"no class for the size");
  return 0;
}

/* 2. the sums, in a process whose other threads are quiet */
static void check_sums(const char *when) {
  larder_stats_t st;
  api.stats_get(&st);
  take();
  size_t superblocks = 0, in_use = 0, cached = 0;
  for (size_t c = 0; c < count; c++) {
    const larder_class_stats_t *k = &classes[c];
    size_t capacity = (k->superblocks + k->superblocks_global) * k->blocks_per_superblock * k->block_size;
    CHECK_MSG(k->bytes_in_use + k->bytes_cached + k->bytes_free + k->bytes_never_used == capacity,
              "%s: class %zu B: %zu in use + %zu cached + %zu free + %zu never used, capacity %zu", when, k->block_size,
              k->bytes_in_use, k->bytes_cached, k->bytes_free, k->bytes_never_used, capacity);
    superblocks += k->superblocks + k->superblocks_global;
    in_use += k->bytes_in_use;
    cached += k->bytes_cached;
  }
  size_t sb_size = (size_t)api.option_get("superblock_size");
  size_t spans = st.large_bytes_in_use + st.large_bytes_cached + st.medium_bytes_in_use + st.medium_bytes_cached;
  CHECK_MSG(superblocks * sb_size + spans == st.bytes_held, "%s: %zu superblocks of %zu B and %zu B of spans, %zu held", when,
            superblocks, sb_size, spans, st.bytes_held);
  CHECK_MSG(cached + st.medium_bytes_cached == st.bytes_cached, "%s: classes cache %zu B, statistics %zu (medium %zu)", when,
            cached, st.bytes_cached, st.medium_bytes_cached);
  if (st.medium_bytes_in_use == 0 && st.large_bytes_in_use == 0) /* (a medium block's bytes in use are its usable bytes) */
    CHECK_MSG(in_use == st.bytes_in_use + st.bytes_remote_pending, "%s: classes hold %zu B in use, statistics %zu + %zu pending",
              when, in_use, st.bytes_in_use, st.bytes_remote_pending);
  CHECK(api.validate() == 0);
}

enum { N = 20000, M = 3000 };
static void *blocks[N];
static void *volatile handed[M];

static void *allocate_remote(void *arg) {
  pthread_barrier_t *barrier = arg;
  pthread_barrier_wait(barrier); /* main took its figures */
  for (int i = 0; i < M; i++) REQUIRE((handed[i] = malloc(300)) != NULL);
  pthread_barrier_wait(barrier); /* main frees them */
  pthread_barrier_wait(barrier); /* main looked */
  alloc_call(300);               /* a refill of the class: takes its frees back */
  pthread_barrier_wait(barrier);
  pthread_barrier_wait(barrier); /* main looked again */
  return NULL;
}

int main(void) {
  if (!alloc_is_larder()) {
    printf("class_stats: larder's statistics only\n");
    return ALLOC_SKIP;
  }
  api = alloc_api();
  REQUIRE(api.class_stats_get && api.stats_get && api.validate && api.option_get);

  /* 1. the classes */
  count = api.class_stats_get(NULL, 0);
  REQUIRE(count > 0 && count <= 128);
  take();
  for (size_t c = 0; c < count; c++) {
    CHECK(c == 0 || classes[c].block_size > classes[c - 1].block_size);
    CHECK(classes[c].blocks_per_superblock > 0);
    void *p = malloc(classes[c].block_size);
    REQUIRE(p != NULL);
    CHECK_MSG(malloc_usable_size(p) == classes[c].block_size, "malloc(%zu): %zu usable", classes[c].block_size,
              malloc_usable_size(p));
    free(p);
  }
  printf("class_stats: %zu classes, %zu to %zu bytes\n", count, classes[0].block_size, classes[count - 1].block_size);
  check_sums("at start");

  /* 3. 20,000 blocks of 100 bytes */
  size_t c = class_of(100);
  larder_class_stats_t before = classes[c];
  for (int i = 0; i < N; i++) REQUIRE((blocks[i] = malloc(100)) != NULL);
  take();
  larder_class_stats_t held = classes[c];
  size_t size = held.block_size, per = held.blocks_per_superblock;
  printf("class_stats: %d blocks of 100 B (class %zu B): in use %zu -> %zu B, superblocks %zu -> %zu (+%zu global)\n", N, size,
         before.bytes_in_use, held.bytes_in_use, before.superblocks, held.superblocks, held.superblocks_global);
  CHECK_MSG(held.bytes_in_use - before.bytes_in_use == (size_t)N * size, "in use grew by %zu, not %zu",
            held.bytes_in_use - before.bytes_in_use, (size_t)N * size);
  CHECK((held.superblocks + held.superblocks_global) * per * size >= held.bytes_in_use + held.bytes_cached);
  CHECK(held.superblocks + held.superblocks_global >= (N + per - 1) / per);
  check_sums("20,000 blocks held");
  uint64_t seed = 20261130;
  for (int i = N - 1; i > 0; i--) { /* shuffled */
    int j = (int)(alloc_rng(&seed) % (uint64_t)(i + 1));
    void *t = blocks[i];
    blocks[i] = blocks[j];
    blocks[j] = t;
  }
  for (int i = 0; i < N; i++) free(blocks[i]);
  take();
  larder_class_stats_t freed = classes[c];
  printf("class_stats: freed: in use %zu B, cached %zu, free %zu, never used %zu; superblocks %zu, global %zu\n",
         freed.bytes_in_use, freed.bytes_cached, freed.bytes_free, freed.bytes_never_used, freed.superblocks,
         freed.superblocks_global);
  CHECK_MSG(freed.bytes_in_use == before.bytes_in_use, "in use %zu after the frees, %zu before", freed.bytes_in_use,
            before.bytes_in_use);
  /* a bin's bound: 122 blocks, 256 KiB of growth, 4 deferred frees */
  CHECK_MSG(freed.bytes_cached <= 122 * size + ((size_t)256 << 10) + 4 * size, "%zu B cached", freed.bytes_cached);
  check_sums("20,000 blocks freed");
  /* the class was due to give its partly used superblocks back (Hoard's threshold after the
   * thread's own frees), which the validation walk just did: the global heap holds them now */
  take();
  printf("class_stats: after the walk: superblocks %zu, global %zu\n", classes[c].superblocks, classes[c].superblocks_global);
  CHECK_MSG(classes[c].superblocks_global > 0 && classes[c].superblocks + classes[c].superblocks_global == freed.superblocks +
            freed.superblocks_global, "superblocks %zu + %zu global, before the walk %zu + %zu", classes[c].superblocks,
            classes[c].superblocks_global, freed.superblocks, freed.superblocks_global);
  CHECK(classes[c].bytes_in_use == freed.bytes_in_use && classes[c].bytes_cached == freed.bytes_cached);

  /* 4. another thread's blocks, freed here */
  pthread_barrier_t barrier;
  REQUIRE(pthread_barrier_init(&barrier, NULL, 2) == 0);
  /* (the thread is made first: pthread_create callocs its DTV, 288-320 bytes, in this thread) */
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, allocate_remote, &barrier) == 0);
  take();
  size_t r = class_of(300);
  larder_class_stats_t remote_before = classes[r];
  pthread_barrier_wait(&barrier);
  pthread_barrier_wait(&barrier);
  for (int i = 0; i < M; i++) free(handed[i]);
  larder_stats_t st;
  api.stats_get(&st);
  take();
  size_t waiting = classes[r].bytes_in_use - remote_before.bytes_in_use;
  printf("class_stats: %d blocks of 300 B freed by main: class %zu B in use +%zu B, %zu B pending in all\n", M,
         classes[r].block_size, waiting, st.bytes_remote_pending);
  CHECK_MSG(waiting <= st.bytes_remote_pending, "%zu B still in use, %zu pending", waiting, st.bytes_remote_pending);
  check_sums("remote frees waiting");
  malloc_trim(0); /* main's buffer of frees for other threads, sent */
  pthread_barrier_wait(&barrier);
  pthread_barrier_wait(&barrier); /* its refill took them */
  api.stats_get(&st);
  take();
  waiting = classes[r].bytes_in_use - remote_before.bytes_in_use;
  printf("class_stats: sent, and the owner refilled: +%zu B in use, %zu B pending\n", waiting, st.bytes_remote_pending);
  CHECK_MSG(waiting <= st.bytes_remote_pending, "%zu B in use after the owner's refill, %zu pending", waiting, st.bytes_remote_pending);
  CHECK_MSG(waiting == 0, "%zu B of the frees not taken back by the owner's refill", waiting);
  check_sums("remote frees taken back");
  pthread_barrier_wait(&barrier);
  REQUIRE(pthread_join(t, NULL) == 0);
  check_sums("the thread gone");

  /* 5. the JSON */
  FILE *f = tmpfile();
  REQUIRE(f != NULL);
#if defined(LARDER_TEST_PRELOADED)
  void (*print_json)(int);
  *(void **)&print_json = dlsym(RTLD_DEFAULT, "larder_stats_print_json");
  REQUIRE(print_json != NULL);
#else
  void (*print_json)(int) = larder_stats_print_json;
#endif
  print_json(fileno(f));
  char text[65536];
  rewind(f);
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = 0;
  fclose(f);
  CHECK_MSG(strstr(text, ", \"classes\": [{\"block_size\": ") != NULL, "no classes in the JSON: %.200s", text);
  CHECK_MSG(len > 3 && strcmp(text + len - 3, "]}\n") == 0, "the JSON ends with \"%s\"", len > 3 ? text + len - 3 : text);
  return check_done();
}
