/* A live block never reads as free, whatever memory it was copied from.
 *
 * A free block carries a tag (internal.h, ld_tag) that the next free of it finds: a double
 * free. Freed memory keeps its tags when it is handed out again uncleared, as a medium span
 * over the chunk of an emptied superblock is: the span's block starts where the superblock's
 * first block did, so its bytes 8-15 hold that block's old tag. A program that never writes
 * those bytes and then
 *   realloc  shrinks the medium block into a small one: realloc copies the bytes, old tag
 *            included, into the new block's tag word;
 *   copy     copies a record out of the buffer into a small block it mallocs (a struct copied
 *            with a field left unset);
 * must be able to free the small block. With a tag of the key alone (liblarder 0.2 until this
 * test), the copied tag matched and both frees stopped the program as a "double free"; the tag
 * now includes the block's address, which a copy does not carry along.
 *
 * Each case runs in a child (a false report kills it). The parent checks the child's exit and
 * that, under larder, some medium block did start where a small block had been freed (the case
 * reached reused memory; else it tests nothing). Under glibc it runs and passes. */
#include "alloc_util.h"

#include <stdbool.h>

#define SMALL_COUNT 20000 /* 64-byte blocks: about 20 superblocks of 64 KiB */
#define MEDIUM_SIZE 40000 /* a medium span (above the largest small class) */
#define ROUNDS 4
#define TRIES 64

static void *small_blocks[SMALL_COUNT];

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

/* A medium block whose bytes 8-15 are left as the memory had them. */
static char *medium_unset(void) {
  char *m = malloc(MEDIUM_SIZE);
  REQUIRE(m != NULL);
  memset(m, 0x11, 8);
  memset(m + 16, 0x22, MEDIUM_SIZE - 16);
  return m;
}

static int run_case(const char *which) {
  bool copy = strcmp(which, "copy") == 0;
  long reused = 0;
  for (int round = 0; round < ROUNDS; round++) {
    /* superblocks filled and emptied: their chunks go back to the segments, dirty */
    for (int i = 0; i < SMALL_COUNT; i++) {
      small_blocks[i] = malloc(64);
      REQUIRE(small_blocks[i] != NULL);
      memset(small_blocks[i], 0x33, 64);
    }
    for (int i = 0; i < SMALL_COUNT; i++) free(small_blocks[i]);
    qsort(small_blocks, SMALL_COUNT, sizeof small_blocks[0], cmp_ptr);
    for (int t = 0; t < TRIES; t++) {
      char *m = medium_unset();
      void *key = m;
      reused += bsearch(&key, small_blocks, SMALL_COUNT, sizeof small_blocks[0], cmp_ptr) != NULL;
      char *s;
      if (copy) {
        s = malloc(64);
        REQUIRE(s != NULL);
        memcpy(s, m, 64);
        free(m);
      } else {
        s = realloc(m, 100); /* moves into a small block, its first 100 bytes copied */
        REQUIRE(s != NULL);
      }
      CHECK(s[0] == 0x11 && s[16] == 0x22);
      free(s); /* reported as a double free when the copied tag matched */
    }
  }
  printf("stale_tag: %s: %ld of %d medium blocks started where a small block had been freed\n", which, reused,
         ROUNDS * TRIES);
  /* the parent reads this line: the case reached reused memory */
  fprintf(stderr, "reused %ld\n", reused);
  return check_done();
}

int main(int argc, char **argv) {
  if (argc > 1) return run_case(argv[1]);
  static const char *const cases[] = {"realloc", "copy"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    alloc_child_t child;
    char *args[] = {(char *)cases[i], NULL};
    REQUIRE(alloc_run_self(args, NULL, 60, &child) == 0);
    char status[64];
    alloc_describe_status(child.status, status, sizeof status);
    CHECK_MSG(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0, "case %s: %s; its stderr: %s", cases[i],
              status, child.err);
    long reused = -1;
    const char *line = strstr(child.err, "reused ");
    if (line) reused = atol(line + 7);
    printf("stale_tag: %s: %s, %ld medium blocks on reused memory\n", cases[i], status, reused);
    if (alloc_is_larder() && WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
      CHECK_MSG(reused > 0, "case %s: no medium block started where a small block had been freed: the case no longer "
                "reaches reused memory", cases[i]);
  }
  return check_done();
}
