/* Allocation before main and after it (DESIGN §1: "Works before main"): a constructor
 * allocates blocks that main checks and frees; blocks allocated in main are freed by an
 * atexit handler, which also allocates, as do destructor functions that run after it, while
 * libc and the allocator are shutting down. A crash or a corrupted block shows as a non-zero
 * exit or a signal. */
#include "alloc_util.h"

static void *early[64];
static size_t early_size[64];
static void *late[64];
static int late_bad;

__attribute__((constructor(101))) static void early_alloc(void) {
  for (int i = 0; i < 64; i++) {
    early_size[i] = (size_t)1 << (i % 21);  /* 1 B .. 1 MiB */
    early[i] = malloc(early_size[i]);
    if (early[i]) alloc_fill(early[i], early_size[i]);
  }
}

static void at_exit_free(void) {
  for (int i = 0; i < 64; i++) {
    if (late[i] && alloc_check(late[i], 100 + (size_t)i) != (size_t)-1) late_bad++;
    free(late[i]);
  }
  void *p = malloc(5000);
  if (p) memset(p, 1, 5000);
  free(p);
  if (late_bad) {
    fprintf(stderr, "early_late: %d late blocks corrupted\n", late_bad);
    _exit(1);
  }
}

__attribute__((destructor)) static void last_words(void) {
  char *s = strdup("after main");
  void *big = malloc(3 << 20);
  if (!s || !big) _exit(3);
  memset(big, 2, 3 << 20);
  free(big);
  free(s);
}

int main(void) {
  for (int i = 0; i < 64; i++) {
    REQUIRE(early[i] != NULL);
    size_t bad = alloc_check(early[i], early_size[i]);
    CHECK_MSG(bad == (size_t)-1, "block %d from the constructor corrupted at %zu", i, bad);
    free(early[i]);
  }
  for (int i = 0; i < 64; i++) {
    late[i] = malloc(100 + (size_t)i);
    REQUIRE(late[i] != NULL);
    alloc_fill(late[i], 100 + (size_t)i);
  }
  REQUIRE(atexit(at_exit_free) == 0);
  printf("early_late: 64 blocks from a constructor intact; atexit and destructor allocations follow\n");
  return check_done();
}
