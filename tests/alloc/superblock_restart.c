/* A superblock all of whose carved blocks are free is carved again from its first block
 * (superblock.c, sb_restart_if_free): the refill does not walk its free list, a chain of loads
 * each waiting for the line before it (Hoard's threadtest: every superblock empties at each
 * round's end, then refills).
 *
 *   rounds        20,000 blocks of 48 bytes (15 superblocks) allocated, then freed in the
 *                 order made, 10 rounds: the refills of the later rounds restart superblocks
 *                 (superblocks_restarted grows), and a round's blocks come out at ascending
 *                 addresses, 48 bytes apart, for 97% of each round or more (a walked free list
 *                 gives them in the order the bins went back: 92%);
 *   kept          one block kept in every superblock: none of them restarts;
 *   double free   a block freed, its superblock restarted (every block free, then refilled),
 *                 freed again: reported with its address (a child, SIGABRT), never handed out
 *                 twice;
 *   every block keeps its pattern while it lives, and the validation walk passes.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wpragmas"

#define SIZE 48
#define BLOCKS 20000
#define ROUNDS 10

static void *blocks[BLOCKS];

static long corrupt;

/* Allocates n blocks, written; returns how many followed the one before at SIZE bytes up. */
static int allocate(int n) {
  int ascending = 0;
  for (int i = 0; i < n; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    alloc_fill(blocks[i], SIZE);
    if (i && (char *)blocks[i] == (char *)blocks[i - 1] + SIZE) ascending++;
  }
  return ascending;
}
static void release(int n, int keep_every) {
  for (int i = 0; i < n; i++) {
    if (alloc_check(blocks[i], SIZE) != (size_t)-1) corrupt++;
    if (keep_every && i % keep_every == 0) continue;
    free(blocks[i]);
  }
}

/* The child: every block of the class freed, half of them allocated again (superblocks
 * restarted one after another, the last one partly carved), then a second free of a block of
 * the first round that lies in the last block's superblock, the highest above it that was not
 * handed out again (with the restart: not carved again): it must be reported. Exit 3: no such block; 0: the free was not caught. */
static int child_double_free(void) {
  static void *first_round[BLOCKS];
  int n = BLOCKS;
  allocate(n);
  memcpy(first_round, blocks, sizeof(void *) * (size_t)n);
  release(n, 0);
  n = BLOCKS / 2;
  allocate(n);
  char *last = blocks[n - 1];
  uintptr_t sb_of_last = (uintptr_t)last & ~(uintptr_t)65535;
  void *victim = NULL;
  for (int i = 0; i < BLOCKS; i++) { /* the highest: past what the last fill carved */
    char *b = first_round[i];
    if (((uintptr_t)b & ~(uintptr_t)65535) != sb_of_last || b <= last || (victim && b < (char *)victim)) continue;
    int again = 0;
    for (int j = 0; j < n && !again; j++) again = blocks[j] == b;
    if (!again) victim = b;
  }
  if (!victim) return 3;
  fprintf(stderr, "victim %p\n", victim);
  free(victim);
  for (int i = 0; i < 16; i++) free(malloc(SIZE)); /* the deferred frees settle */
  release(n, 0);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return child_double_free();
  alloc_api_t api = alloc_api();
  if (!api.stats_get || !api.validate) {
    printf("superblock_restart: not larder, skipped\n");
    return ALLOC_SKIP;
  }

  larder_stats_t before = alloc_stats(&api);
  int ascending_late = 0, blocks_late = 0;
  for (int r = 0; r < ROUNDS; r++) {
    int ascending = allocate(BLOCKS);
    if (r >= 2) ascending_late += ascending, blocks_late += BLOCKS - 1;
    release(BLOCKS, 0);
  }
  larder_stats_t end = alloc_stats(&api);
  size_t restarted = end.superblocks_restarted - before.superblocks_restarted;
  printf("superblock_restart: %d rounds of %d blocks of %d B: %zu superblocks restarted; rounds 3-%d: %d of %d blocks "
         "at the address after the one before\n",
         ROUNDS, BLOCKS, SIZE, restarted, ROUNDS, ascending_late, blocks_late);
  CHECK(restarted >= (size_t)(ROUNDS - 2) * 5);
  CHECK(ascending_late * 100 >= blocks_late * 97);
  CHECK(api.validate() == 0);

  /* one block kept in every superblock (every 100th: a superblock holds about 1,360) */
  allocate(BLOCKS);
  release(BLOCKS, 100);
  before = alloc_stats(&api);
  int n = BLOCKS / 2;
  allocate(n);
  larder_stats_t later = alloc_stats(&api);
  printf("superblock_restart: a block kept in every superblock: %zu restarted\n",
         later.superblocks_restarted - before.superblocks_restarted);
  CHECK(later.superblocks_restarted == before.superblocks_restarted);
  release(n, 0);
  CHECK(api.validate() == 0);
  CHECK(corrupt == 0);

  /* a free of a block from before the restart */
  char *args[] = {(char *)"--child", NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, NULL, 20, &c) == 0);
  char how[96];
  alloc_describe_status(c.status, how, sizeof how);
  void *victim = NULL;
  sscanf(c.err, "victim %p", &victim);
  char victim_text[32] = "?";
  if (victim) snprintf(victim_text, sizeof victim_text, "%p", victim);
  const char *after = strchr(c.err, '\n');
  int aborted = WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGABRT;
  int named = victim && after && strstr(after, "larder:") && strstr(after, victim_text);
  CHECK_MSG(aborted && named, "double free after a restart: child ended with %s; wanted SIGABRT and a larder message "
            "naming %s:\n%s", how, victim_text, c.err);
  printf("superblock_restart: double free after a restart: %s", after ? after + 1 : c.err);
  return check_done();
}
