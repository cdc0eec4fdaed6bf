/* The hardened build (-DLARDER_HARDENED=ON, docs/hardening.md) stops a use-after-free write
 * that forges a free-list link (issue 12): the program frees a block, writes through the
 * dangling pointer the address it would like malloc to return (a static buffer here, as an
 * exploit would aim at a function pointer), and allocates twice from that size class. In the
 * default build the second allocation returns the forged address; in the hardened build the
 * link is stored encoded with a per-process secret and checked on every pop, so the forged
 * link decodes to garbage and larder stops the program with a message.
 *
 * Each case runs in a child (this program re-executed); the parent checks that the child died
 * of SIGABRT with a larder message saying what was found, and that no allocation returned the
 * forged address (the child exits 3 if one did: the attack worked).
 *   first-word  - the forged pointer over the first 8 bytes of the freed block;
 *   whole       - the forged pointer in every 8 bytes of the freed block (whatever word the
 *                 hardened layout keeps its link in);
 *   remote      - the block is freed by another thread (remote free list), then forged;
 *   wild        - the forged link points at an unmapped page: a check that reads the forged
 *                 block to validate it faults there; the link must be validated before any
 *                 read through it (SIGSEGV fails the case).
 * Registered only when a larder_hardened target exists (tests/alloc/hardening.cmake). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <pthread.h>
#include <sys/mman.h>

#include "alloc_util.h"

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wpragmas"

#define SIZE 64

static _Alignas(64) char target[4096];

static void *free_in_thread(void *p) {
  free(p);
  return NULL;
}

static int child(const char *mode) {
  void *keep[8];
  for (int i = 0; i < 8; i++) keep[i] = malloc(SIZE); /* the superblock stays in use */
  char *p = malloc(SIZE);
  if (!p) return 90;
  memset(p, 1, SIZE);
  if (strcmp(mode, "remote") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, free_in_thread, p) != 0) return 91;
    pthread_join(t, NULL);
  } else {
    free(p);
  }
  uintptr_t forged = (uintptr_t)(target + 1024);
  if (strcmp(mode, "wild") == 0) { /* a page that was mapped and is not any more */
    void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 92;
    munmap(m, 1 << 20);
    forged = (uintptr_t)m + (1 << 19);
  }
  fprintf(stderr, "freed=%p forged=%p\n", (void *)p, (void *)forged);
  if (strcmp(mode, "whole") == 0) {
    for (size_t off = 0; off + 8 <= SIZE; off += 8) memcpy(p + off, &forged, 8);
  } else {
    memcpy(p, &forged, 8); /* the use-after-free write */
  }
  /* Allocate from the class until the free list (local, or the remote one collected into it)
   * has been walked past the forged link. */
  for (int i = 0; i < 64; i++) {
    char *q = malloc(SIZE);
    if ((uintptr_t)q == forged) {
      fprintf(stderr, "allocation %d returned the forged address %p: the attack worked\n", i, (void *)q);
      return 3;
    }
  }
  for (int i = 0; i < 8; i++) free(keep[i]);
  fprintf(stderr, "no allocation returned the forged address, and nothing was reported\n");
  return 4;
}

static void run_case(const char *mode) {
  char *args[] = {(char *)"--child", (char *)mode, NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, NULL, 20, &c) == 0);
  char desc[80];
  alloc_describe_status(c.status, desc, sizeof desc);
  char low[sizeof c.err];
  size_t i = 0;
  for (; c.err[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)c.err[i]);
  low[i] = 0;
  int aborted = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT;
  int attacked = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3;
  int said = strstr(low, "larder") && (strstr(low, "corrupt") || strstr(low, "free list") || strstr(low, "use after free"));
  CHECK_MSG(aborted && said && !attacked, "%s: child %s%s; stderr: %s", mode, desc,
            attacked ? " (the forged address was handed out)" : "", c.err);
  const char *msg = strstr(c.err, "larder:");
  char first[200] = "";
  sscanf(msg ? msg : c.err, "%199[^\n]", first);
  printf("hardened_uaf %-10s %-22s %s\n", mode, desc, first);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (!alloc_is_larder()) {
    printf("hardened_uaf: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  run_case("first-word");
  run_case("whole");
  run_case("remote");
  run_case("wild");
  return check_done();
}
