/* A free block's link overwritten after free into a cycle stops the program when a fill walks
 * the list, naming a block of the cycle; malloc never hands a block out twice. The write
 * leaves the block's free tag alone (only the first word, where the default build keeps the
 * link), so the tag check passes: what stops it is the walk's count (superblock.c,
 * ld_sb_take_blocks: a list longer than the superblock's free blocks), the same one that
 * catches a block two threads freed at once. That count stops a walk only when the fill asks
 * for more blocks than the list holds: here the class's first fill after the trim asks for 4
 * and the list holds 3 (a list longer than a fill would go round the cycle unseen; the
 * hardened build's checked links stop that too).
 *
 * Each case runs in a child (this program re-executed). The child allocates three blocks of a
 * class nothing else uses, frees two, empties its bins onto the superblock's free list with
 * malloc_trim(0), writes the link, and allocates 64 blocks of the class; it exits 3 if one
 * came out twice (the cycle was followed), 0 if none stopped it. The parent wants SIGABRT and a
 * larder message naming the address of one of the two freed blocks.
 *   self  - the freed block's link points at itself;
 *   back  - the link of the block deeper in the list points at the one in front of it.
 * The hardened build checks links itself (hardened_uaf.c); this is the default build's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>

#include "alloc_util.h"

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wpragmas"

#define SIZE 200
#define TRIES 64

static int child(const char *mode) {
  void *keep = malloc(SIZE); /* keeps the superblock from emptying at the trim */
  char *a = malloc(SIZE), *b = malloc(SIZE);
  if (!keep || !a || !b) return 2;
  fprintf(stderr, "blocks %p %p\n", (void *)a, (void *)b);
  free(a);
  free(b);
  malloc_trim(0);
  if (strcmp(mode, "self") == 0) {
    *(void **)a = a;
    *(void **)b = b;
  } else {
    *(void **)a = b;
    *(void **)b = a;
  }
  void *got[TRIES];
  for (int i = 0; i < TRIES; i++) {
    got[i] = malloc(SIZE);
    for (int j = 0; j < i; j++)
      if (got[j] == got[i]) {
        fprintf(stderr, "malloc returned %p twice\n", got[i]);
        return 3;
      }
  }
  return 0;
}

static void run_case(const char *mode) {
  char *args[] = {(char *)"--child", (char *)mode, NULL};
  alloc_child_t c;
  if (alloc_run_self(args, NULL, 20, &c) != 0) {
    CHECK_MSG(0, "%s: could not run the child", mode);
    return;
  }
  char how[96];
  alloc_describe_status(c.status, how, sizeof how);
  void *a = NULL, *b = NULL;
  sscanf(c.err, "blocks %p %p", &a, &b);
  char a_text[32] = "?", b_text[32] = "?";
  if (a) snprintf(a_text, sizeof a_text, "%p", a);
  if (b) snprintf(b_text, sizeof b_text, "%p", b);
  int aborted = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT;
  /* the first line names both blocks: the message must name one again after it */
  const char *after = strchr(c.err, '\n');
  int named = a && b && after && strstr(after, "larder:") && (strstr(after, a_text) || strstr(after, b_text));
  CHECK_MSG(aborted && named, "%s: child ended with %s; wanted SIGABRT and a larder message naming %s or %s:\n%s", mode,
            how, a_text, b_text, c.err);
  printf("free_list_cycle: %s: %s\n", mode, after ? after + 1 : c.err);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (!alloc_is_larder()) {
    printf("free_list_cycle: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  run_case("self");
  run_case("back");
  return check_done();
}
