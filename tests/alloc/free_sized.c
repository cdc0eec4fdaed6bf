/* C23's free_sized and free_aligned_sized (glibc 2.43), and the size a C++ sized delete states.
 *
 * A program built against a C library that has them calls free_sized; under LD_PRELOAD it must
 * reach larder's, not the C library's free of a block the C library never made. The test finds
 * them as a program would (linked: larder_free_sized; preloaded: the dynamic symbol, which
 * glibc before 2.43 lacks, so only larder can provide it).
 *
 *   - every kind of block (small, medium, large; aligned to 16 B .. 64 KiB) freed with its size
 *     goes back: the same number of frees as blocks, nothing in use after, the heap valid;
 *   - with LARDER_DEBUG=1 (a child), a stated size larger than the block, or an alignment the
 *     block lacks, is reported with the block's address and stops the program (SIGABRT), through
 *     free_sized, free_aligned_sized and the C++ sized delete (_ZdlPvm);
 *   - the same calls with a size the block holds go through under LARDER_DEBUG=1.
 *
 * usage: alloc_free_sized [case]   (a case: one child's misuse) */
#include "alloc_util.h"

typedef void (*free_sized_fn)(void *, size_t);
typedef void (*free_aligned_sized_fn)(void *, size_t, size_t);

#if defined(LARDER_TEST_PRELOADED) || defined(LARDER_TEST_GLIBC)
static free_sized_fn find_free_sized(void) { return (free_sized_fn)dlsym(RTLD_DEFAULT, "free_sized"); }
static free_aligned_sized_fn find_free_aligned_sized(void) {
  return (free_aligned_sized_fn)dlsym(RTLD_DEFAULT, "free_aligned_sized");
}
static free_sized_fn find_sized_delete(void) { return (free_sized_fn)dlsym(RTLD_DEFAULT, "_ZdlPvm"); }
#else
extern void _ZdlPvm(void *, size_t);
static free_sized_fn find_free_sized(void) { return larder_free_sized; }
static free_aligned_sized_fn find_free_aligned_sized(void) { return larder_free_aligned_sized; }
static free_sized_fn find_sized_delete(void) { return _ZdlPvm; }
#endif

/* One misuse, in a child with LARDER_DEBUG=1: says the address, then makes the call. */
static int misuse(const char *what) {
  free_sized_fn fs = find_free_sized();
  free_aligned_sized_fn fas = find_free_aligned_sized();
  free_sized_fn sized_delete = find_sized_delete();
  if (!fs || !fas || !sized_delete) return 2;
  if (!strcmp(what, "size")) {
    char *p = malloc(100);
    alloc_announce(p);
    fs(p, 4096);
  } else if (!strcmp(what, "size-large")) {
    char *p = malloc(3 << 20);
    alloc_announce(p);
    fs(p, 4u << 20);
  } else if (!strcmp(what, "alignment")) {
    char *p = NULL;
    for (int i = 0; i < 64 && (!p || ((uintptr_t)p & 4095) == 0); i++) p = malloc(48); /* not 4 KiB-aligned */
    alloc_announce(p);
    fas(p, 4096, 48);
  } else if (!strcmp(what, "alignment-odd")) {
    char *p = aligned_alloc(64, 64);
    alloc_announce(p);
    fas(p, 48, 64);
  } else if (!strcmp(what, "delete")) {
    char *p = malloc(24); /* deleted as a 64-byte object */
    alloc_announce(p);
    sized_delete(p, 64);
  } else if (!strcmp(what, "right")) {
    /* stated sizes that the blocks hold: no report */
    for (size_t n = 1; n < (1u << 22); n = n * 3 + 1) {
      fs(malloc(n), n);
      sized_delete(malloc(n), n);
      fas(aligned_alloc(256, (n + 255) & ~(size_t)255), 256, (n + 255) & ~(size_t)255);
    }
    return 0;
  } else {
    return 3;
  }
  return 4; /* (not stopped) */
}

static void expect_stop(const char *what, const char *message) {
  char *args[] = {(char *)what, NULL};
  char *env[] = {(char *)"LARDER_DEBUG=1", NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, env, 30, &c) == 0);
  char status[96];
  alloc_describe_status(c.status, status, sizeof status);
  CHECK_MSG(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT, "%s: %s, stderr: %s", what, status, c.err);
  CHECK_MSG(alloc_report_names_announced(c.err, message),
            "%s: the report should say \"%s\" and the announced address: %s", what, message, c.err);
}

int main(int argc, char **argv) {
  if (argc > 1) return misuse(argv[1]);
  free_sized_fn fs = find_free_sized();
  free_aligned_sized_fn fas = find_free_aligned_sized();
  alloc_api_t api = alloc_api();
  if (!fs || !fas || !api.stats_get) {
    printf("free_sized: not in this C library, and larder is not in the process: skipped\n");
    return ALLOC_SKIP;
  }
  larder_stats_t before = alloc_stats(&api);
  size_t blocks = 0;
  for (int round = 0; round < 4; round++) {
    for (size_t n = 1; n < (8u << 20); n = n * 2 + 7, blocks++) {
      char *p = malloc(n);
      REQUIRE(p != NULL);
      memset(p, 0x5a, n);
      fs(p, n);
    }
    for (size_t al = 16; al <= 65536; al *= 4)
      for (size_t n = al; n < (4u << 20); n = n * 5, blocks++) {
        char *p = aligned_alloc(al, n);
        REQUIRE(p != NULL && ((uintptr_t)p & (al - 1)) == 0);
        fas(p, al, n);
      }
  }
  fs(NULL, 0);
  fas(NULL, 64, 0);
  larder_stats_t after = alloc_stats(&api);
  CHECK_MSG(after.frees - before.frees >= blocks, "%zu frees for %zu blocks", (size_t)(after.frees - before.frees),
            blocks);
  CHECK(api.validate() == 0);
  printf("free_sized: %zu blocks freed with their sizes\n", blocks);

  expect_stop("size", "invalid free (free_sized or a sized delete: 4096 bytes stated, the block holds");
  expect_stop("size-large", "invalid free (free_sized or a sized delete: 4194304 bytes stated");
  expect_stop("alignment", "invalid free (free_aligned_sized or an aligned delete: alignment 4096 stated");
  expect_stop("alignment-odd", "invalid free (free_aligned_sized or an aligned delete: alignment 48 stated");
  expect_stop("delete", "invalid free (free_sized or a sized delete: 64 bytes stated, the block holds");
  char *args[] = {(char *)"right", NULL};
  char *env[] = {(char *)"LARDER_DEBUG=1", NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, env, 60, &c) == 0);
  CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "right sizes under LARDER_DEBUG=1: %s", c.err);
  return check_done();
}
