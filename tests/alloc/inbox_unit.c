/* The inbox (src/internal.h, ld_message_t; src/superblock.c): the bounded ring of messages by
 * which a batch of remote frees reaches its superblock's owner with one atomic operation
 * (issue 17). Built against liblarder.a with the library's internal header, so that the ring
 * is tested on its own, and the path a batch takes when the inbox is full is made to happen.
 *
 *   order and bound   256 messages go in and come out in order with what was sent (head,
 *                     tail, count); the 257th push fails and changes nothing; one take makes
 *                     room for one push;
 *   wrap              70,000 passes of the ring's 256 slots, one message at a time and in
 *                     bursts: the 16-bit sequence numbers wrap (65,536) and nothing is lost or
 *                     repeated;
 *   many at once      a thread's outbox of small batches for one owner (cache.c) goes with one CAS:
 *                     16 messages pushed together into a ring with room for 5 put 5 (the
 *                     first 5, after what was there), the next try none; with room, all 16
 *                     come out in order;
 *   fork holes        a slot claimed and never written (a thread of the parent that a fork
 *                     left behind) stops the reader; ld_inbox_after_fork publishes it empty
 *                     (count 0) and the messages after it come through;
 *   many writers      four threads push 200,000 messages each (retrying when full) while one
 *                     reader takes them: every message arrives once, each writer's in its order;
 *   inbox full        main holds its own heap's lock while nine threads free one block of each
 *                     of 360 of its superblocks and exit: 256 batches fill main's inbox, and the
 *                     rest, whose freers cannot take the lock to help, go by the superblocks'
 *                     remote lists, announced (remote_inbox_full and remote_announcements at
 *                     least 104); once main lets go, its statistics count every block back
 *                     (bytes_remote_pending 0) and the validation walk passes;
 *   forwarded         a batch of two of main's blocks sent to another thread's inbox (as a
 *                     freer that read the owner just before the superblock changed hands
 *                     would): read there, it goes on to main by the superblock's remote list,
 *                     the validation walk passes, and main's mallocs hand both blocks out again.
 */
#include "alloc_util.h"
#include "internal.h"

#include <pthread.h>
#include <sched.h>

static heap_t ring_heap;   /* zeroed: an empty inbox, ready */
static heap_t writer_heap; /* main's pushes keep the head they saw here */
static _Alignas(65536) char fake_sb[65536];

static ld_block_t *block_at(unsigned i) { return (ld_block_t *)(fake_sb + 1024 + 16 * (i % 2048)); }

/* One batch (head..tail, count blocks of sb) as one message. */
static bool push_one(heap_t *owner, sb_t *sb, ld_block_t *head, ld_block_t *tail, unsigned count, heap_t *self) {
  ld_message_t m = {.head = head, .tail_offset = (uint32_t)((char *)tail - (char *)sb), .count = (uint16_t)count};
  return ld_inbox_push_many(owner, &m, 1, self) == 1;
}
static bool push(unsigned i, unsigned count) {
  return push_one(&ring_heap, (sb_t *)fake_sb, block_at(i), block_at(i + 1), count, &writer_heap);
}
static bool take_expect(unsigned i, unsigned count) {
  ld_message_t m;
  if (!ld_inbox_take(&ring_heap, &m)) return false;
  return m.head == block_at(i) && (char *)fake_sb + m.tail_offset == (char *)block_at(i + 1) && m.count == count;
}

static void check_order_and_bound(void) {
  for (unsigned i = 0; i < LD_INBOX_SLOTS; i++) CHECK(push(i, 1 + i % 64));
  CHECK_MSG(!push(999, 1), "a push into a full inbox succeeded");
  CHECK(ld_inbox_waiting(&ring_heap) == LD_INBOX_SLOTS);
  int bad = 0;
  for (unsigned i = 0; i < LD_INBOX_SLOTS; i++) bad += !take_expect(i, 1 + i % 64);
  CHECK_MSG(bad == 0, "%d of %d messages came out wrong", bad, LD_INBOX_SLOTS);
  ld_message_t m;
  CHECK(!ld_inbox_take(&ring_heap, &m));
  for (unsigned i = 0; i < LD_INBOX_SLOTS; i++) push(i, 1);
  CHECK(take_expect(0, 1));
  CHECK_MSG(push(7, 3), "one take made no room");
  CHECK(!push(8, 3));
  for (unsigned i = 1; i < LD_INBOX_SLOTS; i++) take_expect(i, 1);
  CHECK(take_expect(7, 3));
  CHECK(ld_inbox_waiting(&ring_heap) == 0);
}

static void check_wrap(void) {
  int bad = 0;
  unsigned next = 0, sent = 0;
  for (unsigned pass = 0; pass < 70000; pass++) {
    unsigned burst = pass % 7 == 0 ? LD_INBOX_SLOTS : 1 + pass % 5;
    for (unsigned k = 0; k < burst; k++, sent++) bad += !push(sent, 1 + sent % 64);
    for (unsigned k = 0; k < burst; k++, next++) bad += !take_expect(next, 1 + next % 64);
  }
  CHECK_MSG(bad == 0, "%d pushes or takes failed over %u messages", bad, sent);
  CHECK(ld_inbox_waiting(&ring_heap) == 0);
}

static void check_many_at_once(void) {
  ld_message_t batch[LD_OUTBOX];
  for (unsigned i = 0; i < LD_OUTBOX; i++) {
    batch[i].head = block_at(500 + i);
    batch[i].tail_offset = (uint32_t)((char *)block_at(501 + i) - fake_sb);
    batch[i].count = (uint16_t)(1 + i % 2);
  }
  for (unsigned i = 0; i < LD_INBOX_SLOTS - 5; i++) CHECK(push(i, 1));
  CHECK_MSG(ld_inbox_push_many(&ring_heap, batch, LD_OUTBOX, &writer_heap) == 5, "room for 5: not 5 put");
  CHECK_MSG(ld_inbox_push_many(&ring_heap, batch + 5, LD_OUTBOX - 5, &writer_heap) == 0, "a full inbox took more");
  int bad = 0;
  for (unsigned i = 0; i < LD_INBOX_SLOTS - 5; i++) bad += !take_expect(i, 1);
  for (unsigned i = 0; i < 5; i++) bad += !take_expect(500 + i, 1 + i % 2);
  CHECK(ld_inbox_push_many(&ring_heap, batch, LD_OUTBOX, &writer_heap) == LD_OUTBOX);
  for (unsigned i = 0; i < LD_OUTBOX; i++) bad += !take_expect(500 + i, 1 + i % 2);
  CHECK_MSG(bad == 0, "%d messages came out wrong", bad);
  CHECK(ld_inbox_waiting(&ring_heap) == 0);
}

static void check_fork_holes(void) {
  CHECK(push(1, 5));
  /* a writer that claimed the next slot and was never to write it */
  atomic_fetch_add(&ring_heap.inbox_tail, 1);
  CHECK(push(3, 6));
  CHECK(take_expect(1, 5));
  ld_message_t m;
  CHECK_MSG(!ld_inbox_take(&ring_heap, &m), "the reader went past a claimed, unwritten slot");
  ld_inbox_after_fork(&ring_heap);
  CHECK(ld_inbox_take(&ring_heap, &m) && m.count == 0);
  CHECK(take_expect(3, 6));
  CHECK(ld_inbox_waiting(&ring_heap) == 0);
}

enum { WRITERS = 4, PER_WRITER = 200000 };
static heap_t heaps[WRITERS]; /* each writer's, for the head it saw */
static void *writer(void *arg) {
  unsigned w = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < PER_WRITER; i++) {
    /* the writer and its sequence number, in the head's place (nothing reads through it) */
    ld_block_t *head = (ld_block_t *)(((uintptr_t)w << 40) | ((uintptr_t)i << 4));
    while (!push_one(&ring_heap, (sb_t *)fake_sb, head, block_at(0), 1, &heaps[w])) sched_yield();
  }
  return NULL;
}
static void check_many_writers(void) {
  pthread_t t[WRITERS];
  for (unsigned w = 0; w < WRITERS; w++) REQUIRE(pthread_create(&t[w], NULL, writer, (void *)(uintptr_t)w) == 0);
  unsigned expect[WRITERS] = {0};
  unsigned got = 0, bad = 0;
  while (got < WRITERS * PER_WRITER) {
    ld_message_t m;
    if (!ld_inbox_take(&ring_heap, &m)) continue;
    uintptr_t v = (uintptr_t)m.head;
    unsigned w = (unsigned)(v >> 40), i = (unsigned)((v & (((uintptr_t)1 << 40) - 1)) >> 4);
    if (w >= WRITERS || i != expect[w] || m.count != 1) bad++;
    else expect[w]++;
    got++;
  }
  for (unsigned w = 0; w < WRITERS; w++) pthread_join(t[w], NULL);
  printf("inbox_unit: %u messages from %d writers, %u out of order or wrong\n", got, WRITERS, bad);
  CHECK(bad == 0);
  CHECK(ld_inbox_waiting(&ring_heap) == 0);
}

/* ---- a full inbox whose owner cannot be helped ---- */
#define FREERS 9
#define PER_FREER 40
#define SUPERBLOCKS (FREERS * PER_FREER)
#define SIZE 1024
static void *picked[SUPERBLOCKS];
static pthread_barrier_t start;
static void *free_some(void *arg) {
  int first = (int)(intptr_t)arg;
  pthread_barrier_wait(&start);
  for (int i = first; i < first + PER_FREER; i++) free(picked[i]);
  return NULL; /* its exit sends its batches */
}
static void check_inbox_full(void) {
  alloc_api_t api = alloc_api();
  size_t sbs = ld_sb_size;
  size_t count = sbs / SIZE * (SUPERBLOCKS + 4);
  void **blocks = malloc(count * sizeof *blocks);
  REQUIRE(blocks != NULL);
  static uintptr_t seen[SUPERBLOCKS];
  int npicked = 0;
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(SIZE);
    REQUIRE(blocks[i] != NULL);
    uintptr_t sb = ((uintptr_t)blocks[i] - 1) & ~(sbs - 1);
    int known = 0;
    for (int k = 0; k < npicked && !known; k++) known = seen[k] == sb;
    if (!known && npicked < SUPERBLOCKS) {
      seen[npicked] = sb;
      picked[npicked++] = blocks[i];
      blocks[i] = NULL;
    }
  }
  REQUIRE(npicked == SUPERBLOCKS);
  larder_stats_t before = alloc_stats(&api);
  pthread_t t[FREERS];
  REQUIRE(pthread_barrier_init(&start, NULL, FREERS + 1) == 0);
  for (int i = 0; i < FREERS; i++) REQUIRE(pthread_create(&t[i], NULL, free_some, (void *)(intptr_t)(i * PER_FREER)) == 0);
  heap_t *mine = ld_heap_tls;
  /* no malloc or free by main until it lets go (the test runs with a long purge delay: a purge
   * run in an exiting freer that judged main idle would wait for this lock: hardening.cmake) */
  ld_lock(&mine->lock);
  pthread_barrier_wait(&start);
  for (int i = 0; i < FREERS; i++) pthread_join(t[i], NULL);
  uint32_t waiting = ld_inbox_waiting(mine);
  ld_unlock(&mine->lock);
  larder_stats_t after = alloc_stats(&api);
  size_t full = after.remote_inbox_full - before.remote_inbox_full;
  size_t announced = after.remote_announcements - before.remote_announcements;
  printf("inbox_unit: %d batches for a locked owner: %u waited in its inbox, %zu found it full, %zu announced; "
         "%zu bytes pending after its statistics\n",
         SUPERBLOCKS, waiting, full, announced, after.bytes_remote_pending);
  CHECK(waiting == LD_INBOX_SLOTS);
  CHECK_MSG(full >= SUPERBLOCKS - LD_INBOX_SLOTS && announced >= SUPERBLOCKS - LD_INBOX_SLOTS,
            "%zu found the inbox full, %zu announced: the case did not happen", full, announced);
  CHECK(after.bytes_remote_pending == 0);
  CHECK_MSG(after.bytes_in_use + (size_t)SUPERBLOCKS * SIZE <= before.bytes_in_use + 4096, "in use %zu -> %zu",
            before.bytes_in_use, after.bytes_in_use);
  CHECK(api.validate() == 0);
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
  CHECK(api.validate() == 0);
}

/* ---- a message for a superblock its reader does not own ---- */
static pthread_barrier_t other_ready, other_done;
static heap_t *other_heap;
static void *other_thread(void *arg) {
  (void)arg;
  void *volatile p = malloc(64); /* a heap of its own */
  free(p);
  other_heap = ld_heap_tls;
  pthread_barrier_wait(&other_ready);
  pthread_barrier_wait(&other_done); /* alive, its heap its own, while main works */
  return NULL;
}
static void check_forwarded(void) {
  alloc_api_t api = alloc_api();
  char *a = malloc(64), *b = NULL;
  REQUIRE(a != NULL);
  sb_t *sb = ld_sb_of(a);
  for (int i = 0; i < 1000 && !b; i++) { /* a second block of the same superblock */
    char *q = malloc(64);
    if (q && ld_sb_of(q) == sb) b = q;
  }
  REQUIRE(b != NULL && atomic_load(&sb->owner) == ld_heap_tls);
  REQUIRE(pthread_barrier_init(&other_ready, NULL, 2) == 0 && pthread_barrier_init(&other_done, NULL, 2) == 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0);
  pthread_barrier_wait(&other_ready);
  /* a batch b -> a, as a freer's buffer makes one: linked, tagged */
  ld_block_t *ba = (ld_block_t *)a, *bb = (ld_block_t *)b;
  ld_set_next(ba, NULL);
  ba->tag = ld_tag(ba);
  ld_set_next(bb, ba);
  bb->tag = ld_tag(bb);
  CHECK(push_one(other_heap, sb, bb, ba, 2, NULL));
  /* The help takes the other heap's lock with a trylock, which the purge thread may hold for
   * a moment (its tidy of every heap, which may also read the message and forward it itself:
   * either way it comes back to main). A failed try is a busy lock, not the case under test. */
  bool helped = false;
  for (int i = 0; i < 2000 && !helped; i++)
    if (!(helped = ld_heap_help_full_inbox(&ld_heap_empty, other_heap))) sched_yield();
  CHECK_MSG(helped, "the other heap's lock was busy through 2,000 tries");
  CHECK_MSG(ld_inbox_waiting(other_heap) == 0, "the message is still in the other heap's inbox");
  CHECK(api.validate() == 0);
  bool got_a = false, got_b = false;
  for (int i = 0; i < 100000 && !(got_a && got_b); i++) {
    char *q = malloc(64);
    got_a |= q == a;
    got_b |= q == b;
  }
  printf("inbox_unit: a batch sent to a heap that does not own its superblock came back to main: %s\n",
         got_a && got_b ? "both blocks" : "not all");
  CHECK_MSG(got_a && got_b, "the forwarded blocks never came back (%d, %d)", got_a, got_b);
  CHECK(api.validate() == 0);
  pthread_barrier_wait(&other_done);
  pthread_join(t, NULL);
}

int main(void) {
  check_order_and_bound();
  check_wrap();
  check_many_at_once();
  check_fork_holes();
  check_many_writers();
  check_inbox_full();
  check_forwarded();
  return check_done();
}
