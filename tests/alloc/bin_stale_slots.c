/* The slots above a bin's top never name a block its class has not carved.
 *
 * The free fast path takes a block equal to the slot just above its bin's top (the block malloc
 * popped last) without the check that the block was ever carved (src/alloc.c, larder_free). A
 * slot above the top keeps whatever it last held, so after a superblock emptied, went back to
 * the segments and came back formatted anew, a slot could name one of its blocks not carved
 * in its new life; a double free of that old pointer would then have put an uncarved block in
 * the bin, handed out twice later. So a fill whose uncarved range is not within the last one
 * turns such slots away (src/heap.c, bin_scrub_uncarved), and the validation walk checks that no
 * slot above any bin's top names an uncarved block.
 *
 * Here: rounds in which a thread allocates blocks of three classes (1,000, 4,000 and 100
 * bytes: superblocks of 64, 16 and 600 blocks), frees them all in random order and gives the
 * memory back at once (purge delay 0, malloc_trim), so that the next round carves superblocks
 * formatted anew over the chunks of the last round's, while its bins' slots above the top
 * still name that round's blocks. The walk runs after every few mallocs. Without the scrub it
 * fails within the first rounds (a slot names a block of a superblock carved anew). Then the
 * double free the scrub is for: a block popped last, freed by another thread, its superblock
 * emptied and carved anew, freed again by its first thread: reported (in a child). */
#include "alloc_util.h"

#include <malloc.h>
#include <stdbool.h>

#define ROUNDS 12
#define BLOCKS 3000

static void *blocks[BLOCKS];

static void *free_remote(void *p) {
  free(p);
  return NULL;
}

static int double_free_of_recarved(void) {
  /* (in the child) a block of 4,000 B, the last handed out, freed by another thread */
  void *keep[64];
  for (int i = 0; i < 64; i++) keep[i] = malloc(4000);
  void *p = malloc(4000);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, free_remote, p) == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 64; i++) free(keep[i]);
  malloc_trim(0); /* the superblocks empty, back to the segments, and carved anew below */
  for (int i = 0; i < 64; i++) keep[i] = malloc(4000);
  free(p); /* a double free (an invalid free, if its chunk is not a superblock now): reported */
  for (int i = 0; i < 64; i++) free(keep[i]);
  return 0; /* (not reported: the parent says so) */
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return double_free_of_recarved();
  alloc_api_t api = alloc_api();
  if (!api.validate) {
    printf("bin_stale_slots: not larder: skipped\n");
    return ALLOC_SKIP;
  }
  if (api.option_set) REQUIRE(api.option_set("purge_delay_ms", "0") == 0);
  static const size_t sizes[] = {1000, 4000, 100};
  uint64_t rng = 12345;
  int walks = 0, failed = 0;
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < BLOCKS; i++) {
      blocks[i] = malloc(sizes[i % 3]);
      REQUIRE(blocks[i] != NULL);
      memset(blocks[i], round, 16);
      if (i % 97 == 0) {
        walks++;
        failed += api.validate() != 0;
      }
    }
    for (int i = BLOCKS - 1; i > 0; i--) { /* random order */
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      int j = (int)((rng >> 33) % (uint64_t)(i + 1));
      void *t = blocks[i];
      blocks[i] = blocks[j];
      blocks[j] = t;
    }
    for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
    malloc_trim(0);
    walks++;
    failed += api.validate() != 0;
  }
  CHECK_MSG(failed == 0, "%d of %d validation walks failed", failed, walks);
  alloc_child_t r;
  char *args[] = {(char *)"--child", NULL};
  REQUIRE(alloc_run_self(args, NULL, 60, &r) == 0);
  bool reported = WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT &&
                  (strstr(r.err, "double free") || strstr(r.err, "invalid free"));
  CHECK_MSG(reported, "a double free of a block whose superblock was carved anew was not reported (status %d): %s",
            r.status, r.err);
  printf("bin_stale_slots: %d rounds, %d validation walks; the second free reported as: %.*s\n", ROUNDS, walks,
         (int)strcspn(r.err, "\n"), r.err);
  return check_done();
}
