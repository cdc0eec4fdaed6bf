/* Small batches of remote frees go to their owners grouped per owner (cache.c, outboxes). A
 * thread that frees for many owners at once (a logging or completion thread freeing what a pool
 * of workers allocated) leaves batches of a few blocks each, one per superblock; they wait in an
 * outbox per owner and go LD_OUTBOX to a CAS. One outbox for every owner was sent whenever the
 * owner changed: with the owners' superblocks interleaved in memory, one CAS a batch.
 *
 *   interleaved   OWNERS (2) threads take turns to open superblocks of 64-byte blocks, so that
 *                 their superblocks alternate in memory, SUPERBLOCKS each; a freer thread frees
 *                 one block of each superblock and exits (its exit sends every batch, in the
 *                 buffer's order, which is the superblocks' order): remote_sends (each a CAS
 *                 that claims inbox slots) is at most a quarter of remote_batches, and the
 *                 validation walk passes;
 *   all freed     once the owners free the rest, bytes_in_use is back within 64 KiB of where
 *                 it started, and the walk passes.
 * Larder only: under another allocator the program says so and skips (77). */
#include "alloc_util.h"

#include <pthread.h>

#define OWNERS 2 /* (two ways to a set of outboxes: never more owners than places) */
#define SUPERBLOCKS 32 /* per owner */
#define SIZE 64
#define MAX_BLOCKS 400000

static alloc_api_t api;
static uintptr_t sb_size;
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;
static int turn;                                 /* whose turn to open a superblock */
static void *kept[OWNERS][SUPERBLOCKS];          /* a block of each superblock, freed remotely */
static pthread_barrier_t freed;

/* Whether a block of superblock sb was kept before (else it is noted); under turn_lock's turns. */
static uintptr_t seen[OWNERS * SUPERBLOCKS];
static int nseen;
static int sb_seen(uintptr_t sb) {
  for (int i = 0; i < nseen; i++)
    if (seen[i] == sb) return 1;
  seen[nseen++] = sb;
  return 0;
}

static void wait_turn(int me, int round) {
  pthread_mutex_lock(&turn_lock);
  while (turn != round * OWNERS + me) pthread_cond_wait(&turn_cond, &turn_lock);
  pthread_mutex_unlock(&turn_lock);
}
static void pass_turn(void) {
  pthread_mutex_lock(&turn_lock);
  turn++;
  pthread_cond_broadcast(&turn_cond);
  pthread_mutex_unlock(&turn_lock);
}

static void *owner(void *arg) {
  int me = (int)(intptr_t)arg;
  void **blocks = malloc(MAX_BLOCKS * sizeof(void *));
  REQUIRE(blocks != NULL);
  size_t n = 0;
  for (int round = 0; round < SUPERBLOCKS; round++) {
    wait_turn(me, round);
    /* mallocs until one comes from a superblock no owner had before: the next it opened */
    for (;;) {
      REQUIRE(n < MAX_BLOCKS);
      void *p = malloc(SIZE);
      REQUIRE(p != NULL);
      memset(p, me, SIZE);
      if (!sb_seen((uintptr_t)p & ~(sb_size - 1))) {
        kept[me][round] = p; /* (the freer frees it) */
        break;
      }
      blocks[n++] = p;
    }
    pass_turn();
  }
  pthread_barrier_wait(&freed);
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  free(blocks);
  return NULL;
}

static void *freer(void *arg) {
  (void)arg;
  for (int round = 0; round < SUPERBLOCKS; round++)
    for (int o = 0; o < OWNERS; o++) free(kept[o][round]);
  return NULL; /* its exit sends every batch still open */
}

int main(void) {
  api = alloc_api();
  if (!api.stats_get || !api.validate || !api.option_get) {
    printf("remote_per_owner: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  sb_size = (uintptr_t)api.option_get("superblock_size");
  REQUIRE(sb_size >= 4096);
  REQUIRE(pthread_barrier_init(&freed, NULL, OWNERS + 1) == 0);
  larder_stats_t start = alloc_stats(&api);
  pthread_t owners[OWNERS], f;
  for (int i = 0; i < OWNERS; i++) REQUIRE(pthread_create(&owners[i], NULL, owner, (void *)(intptr_t)i) == 0);
  pthread_mutex_lock(&turn_lock);
  while (turn < OWNERS * SUPERBLOCKS) pthread_cond_wait(&turn_cond, &turn_lock);
  pthread_mutex_unlock(&turn_lock);
  /* the premise: in address order (the buffer's), the owner changes often */
  uintptr_t sbs[OWNERS * SUPERBLOCKS];
  int owner_of[OWNERS * SUPERBLOCKS], n = 0;
  for (int o = 0; o < OWNERS; o++)
    for (int round = 0; round < SUPERBLOCKS; round++) {
      int at = n++;
      uintptr_t sb = (uintptr_t)kept[o][round] & ~(sb_size - 1);
      while (at > 0 && sbs[at - 1] > sb) sbs[at] = sbs[at - 1], owner_of[at] = owner_of[at - 1], at--;
      sbs[at] = sb, owner_of[at] = o;
    }
  int changes = 0;
  for (int i = 1; i < n; i++) changes += owner_of[i] != owner_of[i - 1];
  printf("remote_per_owner: in address order the owner changes %d times in %d superblocks\n", changes, n);
  /* (one outbox for all owners sends about once per change: the check below tells the two
   * apart only when that is more than a quarter of the batches) */
  REQUIRE(changes >= n / 4);

  larder_stats_t before = alloc_stats(&api);
  REQUIRE(pthread_create(&f, NULL, freer, NULL) == 0);
  pthread_join(f, NULL);
  larder_stats_t after = alloc_stats(&api);
  size_t batches = after.remote_batches - before.remote_batches;
  size_t sends = after.remote_sends - before.remote_sends;
  printf("remote_per_owner: %d blocks of %d owners' interleaved superblocks freed by one thread: %zu batches, "
         "%zu sends (one CAS each)\n", OWNERS * SUPERBLOCKS, OWNERS, batches, sends);
  CHECK_MSG(batches >= OWNERS * SUPERBLOCKS / 2, "%zu batches for %d superblocks: the frees were not scattered",
            batches, OWNERS * SUPERBLOCKS);
  CHECK_MSG(sends >= 1 && sends * 4 <= batches, "%zu sends for %zu batches: not grouped per owner", sends, batches);
  CHECK(api.validate() == 0);
  pthread_barrier_wait(&freed);
  for (int i = 0; i < OWNERS; i++) pthread_join(owners[i], NULL);
  larder_stats_t end = alloc_stats(&api);
  printf("remote_per_owner: bytes in use %zu at the start, %zu once everything is freed\n", start.bytes_in_use,
         end.bytes_in_use);
  CHECK_MSG(end.bytes_in_use <= start.bytes_in_use + 65536, "bytes_in_use %zu once everything is freed, %zu before",
            end.bytes_in_use, start.bytes_in_use);
  CHECK(api.validate() == 0);
  return check_done();
}
