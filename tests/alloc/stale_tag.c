/* A live block never reads as free, whatever bytes were copied into it.
 *
 * A free block carries a tag (internal.h, ld_tag) that the next free of it finds: a double
 * free. Freed memory keeps its tags until it is written again, and a program copies such bytes
 * without knowing: memory handed out uncleared still holds an earlier block's tag (a medium span
 * over the chunk of an emptied superblock started where the superblock's first block did, its
 * bytes 8-15 that block's tag, until empty superblocks waited in the global heap and went back
 * purged), and realloc or the program's own copy (a struct copied with a field left unset)
 * carries them into a small block. That block's free must not look like a second free. With a
 * tag of the key alone (liblarder 0.2 until this test), the copied tag matched and the program
 * was stopped as a "double free"; the tag now includes the block's address, which a copy does
 * not carry along.
 *
 * Here the stale bytes are taken where they surely are: from a small block just freed (and
 * settled by the free after it), read as a program reads memory it did not write.
 *   copy     the freed block's first 16 bytes copied into another small block, which is freed;
 *   realloc  the same bytes copied into a small block, which realloc moves into a bigger class
 *            (copying them on), and the moved block is freed.
 * Each case runs 1,000 times over in a child (a false report kills it); the parent checks the
 * child's exit. Under larder the freed block's bytes 8-15 must have changed at its free (the
 * tag was written: else the case tests nothing). Under glibc it runs and passes. */
#include "alloc_util.h"

#include <stdbool.h>

#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuse-after-free"

#define ROUNDS 1000

static int run_case(const char *which) {
  bool realloc_case = strcmp(which, "realloc") == 0;
  long tagged = 0;
  for (int round = 0; round < ROUNDS; round++) {
    size_t size = 32 + (size_t)(round % 8) * 16; /* a few small classes */
    unsigned char *dest = malloc(size), *freed = malloc(size), *after = malloc(size);
    REQUIRE(dest && freed && after);
    memset(dest, 0x11, size);
    memset(freed, 0x22, size);
    memset(after, 0x33, size);
    free(freed);
    free(after); /* settles the free before it: its tag is written now (alloc.c, deferred free) */
    unsigned char stale[16];
    memcpy(stale, freed, sizeof stale); /* what that memory holds now, as a program may read it */
    for (int i = 8; i < 16; i++)
      if (stale[i] != 0x22) {
        tagged++;
        break;
      }
    memcpy(dest, stale, sizeof stale);
    if (realloc_case) {
      unsigned char *moved = realloc(dest, size * 4); /* another class: moved, the bytes copied */
      REQUIRE(moved != NULL);
      CHECK(memcmp(moved, stale, sizeof stale) == 0 && moved[16] == 0x11);
      dest = moved;
    }
    free(dest); /* reported as a double free when the copied tag matched */
  }
  printf("stale_tag: %s: in %ld of %d rounds the freed block's bytes 8-15 had changed at its free\n", which, tagged,
         ROUNDS);
  fprintf(stderr, "tagged %ld\n", tagged); /* for the parent */
  return check_done();
}

int main(int argc, char **argv) {
  if (argc > 1) return run_case(argv[1]);
  static const char *const cases[] = {"copy", "realloc"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    alloc_child_t child;
    char *args[] = {(char *)cases[i], NULL};
    REQUIRE(alloc_run_self(args, NULL, 60, &child) == 0);
    char status[64];
    alloc_describe_status(child.status, status, sizeof status);
    bool ok = WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0;
    CHECK_MSG(ok, "case %s: %s; its stderr: %s", cases[i], status, child.err);
    long tagged = -1;
    const char *line = strstr(child.err, "tagged ");
    if (line) tagged = atol(line + 7);
    printf("stale_tag: %s: %s, %ld of %d rounds copied a written tag\n", cases[i], status, tagged, ROUNDS);
    if (alloc_is_larder() && ok)
      CHECK_MSG(tagged == ROUNDS, "case %s: the freed block's tag was not written in every round (%ld of %d): the "
                "case no longer copies a tag", cases[i], tagged, ROUNDS);
  }
  return check_done();
}
