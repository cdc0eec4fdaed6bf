/* The front end: each thread's bins of free blocks (one per size class) and its buffer of
 * frees for other heaps. Everything here belongs to the calling thread and takes no lock and
 * no atomic operation, except where a batch crosses to a heap: a fill or a return of half a
 * bin (heap.c, under the thread's own heap lock, uncontended) and the hand-over of a batch of
 * remote frees (one CAS on the superblock's remote list, and one more to announce it when it
 * is the first batch since the owner looked).
 *
 * Bounds (docs/allocator.md, "The front end"): a bin holds at most LD_BIN_SLOTS blocks and
 * about LD_BIN_BYTES bytes, or more where it cycles, the thread's bins together by at most
 * bin_growth_kb more (bin_grow); the remote buffer at most LD_REMOTE_SLOTS batches of
 * LD_REMOTE_BATCH blocks or LD_REMOTE_BATCH_BYTES. Both are emptied at thread exit and by
 * malloc_trim in the thread, and trimmed by the thread's own maintenance (ld_cache_trim,
 * once per purge delay from its slow paths): a bin that was not refilled since the last trim
 * gives back three quarters of what it holds, as jemalloc's tcache garbage collection does.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "os.h"

#include <errno.h>
#include <string.h>

/* A bin's first fill: FIRST_FILL blocks, or as many as FIRST_FILL_BYTES hold (at least one).
 * Carving a block writes its tag, which touches its page: a thread that holds one block of
 * 4 KiB had a first fill of two carve two pages, one of which it never used (a thread at rest
 * holding blocks of six sizes, 16 B-4 KiB: 17 of its pages resident, 3 of them blocks it never
 * had). The fill doubles at each refill, so a thread that uses the class goes on as before. */
#define FIRST_FILL 4
#define FIRST_FILL_BYTES 4096u
static unsigned most_fill(const ld_bin_t *bin) { return (bin->limit + 1u) / 2; }
/* ld_bin_t refilled's bits */
#define BIN_REFILLED 1u     /* refilled since the thread's last trim: the bin is in use */
#define BIN_FLUSHED_LAST 2u /* its last slow event was a flush, or a growth in its place */
#define BIN_CYCLED 4u       /* it grew since the last trim */
#define BIN_TURNED 8u       /* it turned (a flush after a refill, or the reverse) since the last trim */
static unsigned first_fill(const ld_bin_t *bin, unsigned c) {
  unsigned n = most_fill(bin) < FIRST_FILL ? most_fill(bin) : FIRST_FILL;
  uint32_t size = ld_class_size[c];
  if (size <= FIRST_FILL_BYTES / FIRST_FILL) return n; /* (no division for the common classes) */
  unsigned by_bytes = FIRST_FILL_BYTES / size;
  return by_bytes >= n ? n : by_bytes ? by_bytes : 1;
}

/* A bin is set up at its class's first refill (ld_cache_refill), so that a thread's heap
 * touches the pages of the bins it uses only: the 65 bins are 65 KiB, and setting them all up
 * at the thread's start made every thread resident in all of them (issue 17, peak RSS on
 * small programs: free-contention's 17 threads, 4.2 MB against 0.1's 3.2). A bin not set up
 * has limit 0 and holds nothing; the fast paths never reach one (malloc finds it empty, and
 * no superblock of its class is the heap's before a refill). Classes above the largest small
 * size never get one. The limits depend only on the size classes, fixed at start. */
static uint32_t bin_span(unsigned c) { return ld_class_shape[c].span; }
/* malloc's table from (size + 15) / 16 to the bins (the purge points it elsewhere for a while). */
static void bin_of_set(heap_t *heap) {
  unsigned learned = __atomic_load_n(&ld_classes_learned, __ATOMIC_ACQUIRE); /* (those the table has now, at least) */
  for (unsigned g = 0; g <= LD_SMALL_LIMIT / 16; g++)
    __atomic_store_n(&heap->bin_of[g], ld_bin_of_entry(ld_heap_bin_place(heap, ld_granule_class(g))), __ATOMIC_RELAXED);
  heap->classes_synced = learned;
}
/* (A purge may be turning the bins away meanwhile, writing the same entries: it then flushes
 * nothing, finding this thread in its bins or these stores over its own (bins_still_turned_away),
 * and the next slow path turns them back in full.) */
void ld_cache_classes_sync(heap_t *heap) { bin_of_set(heap); }
/* A bin's first limit: about LD_BIN_BYTES of blocks, at least LD_BIN_LEAST and at most
 * LD_BIN_SLOTS - 1 (internal.h). */
static uint32_t bin_first_limit(unsigned c) {
  uint32_t limit = LD_BIN_BYTES / ld_class_size[c];
  if (limit > LD_BIN_SLOTS - 1) limit = LD_BIN_SLOTS - 1;
  if (limit < LD_BIN_LEAST) limit = LD_BIN_LEAST;
  return limit;
}
/* Sets bin c's limit: the slots up to it hold the bin's address, the slot at it the end marker.
 * Every slot holds a block or the bin's own address, never NULL: the free fast path compares
 * the block it frees with the slot above the top (alloc.c, larder_free), and free(NULL) can
 * reach a bin (an empty entry of the table reads as class 0). (The range test before that
 * compare refuses NULL too; this keeps the compare safe on its own.) The bin holds no more than
 * the new limit; what it may hold past its first limit is counted in bins_grown_bytes (a bin
 * not set up, limit 0, had nothing past it). The owner, in its cache. */
static void bin_set_limit(heap_t *heap, unsigned c, uint32_t limit) {
  ld_bin_t *bin = ld_heap_bin(heap, c);
  uint32_t old = bin->limit, first = bin_first_limit(c);
  for (uint32_t i = old; i < limit; i++) bin->slots[i] = bin;
  bin->slots[limit] = LD_BIN_FULL;
  bin->limit = (uint16_t)limit;
  heap->bins_grown_bytes = heap->bins_grown_bytes + (size_t)(limit - first) * ld_class_size[c] -
                           (size_t)(old ? old - first : 0) * ld_class_size[c];
  if (bin->fill > most_fill(bin)) bin->fill = (uint8_t)most_fill(bin);
}
/* The bins set up (a limit given), as a set of classes (heap_t, bins_set_up): the walks of a
 * heap's bins look at those only, never at the pages of bins its thread did not use. */
static inline ld_class_set_t bins_set_up(const heap_t *heap) { return ld_class_words_read(&heap->bins_set_up); }
static void bin_setup(heap_t *heap, unsigned c) {
  if (!heap->bin_place[c]) { /* the class's first refill in this heap: the next place (one a class: at most LD_CLASS_COUNT) */
    /* (the statistics read the map from other threads: places_used last, with release) */
    unsigned place = heap->places_used;
    __atomic_store_n(&heap->place_class[place], (uint8_t)c, __ATOMIC_RELAXED);
    __atomic_store_n(&heap->bin_place[c], (uint8_t)(place + 1), __ATOMIC_RELAXED);
    __atomic_store_n(&heap->places_used, (uint8_t)(place + 1), __ATOMIC_RELEASE);
    bin_of_set(heap); /* (once a class in a heap's life) */
  }
  ld_bin_t *bin = ld_heap_bin(heap, c);
  bin->refilled = 0;
  bin->first = ld_class_shape[c].first;
  __atomic_store_n(&bin->span, bin_span(c), __ATOMIC_RELAXED); /* (a drain stores it too) */
  bin->divisor_magic = ld_class_shape[c].divisor_magic;
  bin_set_limit(heap, c, bin_first_limit(c));
  bin->fill = (uint8_t)first_fill(bin, c);
  ld_class_words_set(&heap->bins_set_up, bins_set_up(heap) | LD_CLASS_BIT(c)); /* (after the limit: the purge reads both) */
}
static inline bool bin_is_set_up(const ld_bin_t *bin) { return bin->limit != 0; }

/* ---- bins that grow where they cycle ----
 * A bin's first limit holds about 16 KiB of blocks: 16 of 1,000 bytes, 4 of 4,000, 3 from
 * 5,462 bytes up. A thread that keeps more than that of a class in flight (a loop that
 * allocates a few dozen buffers and frees them, Hoard's threadtest) moves half a bin between
 * the bin and its superblocks every few calls, and each refill and flush costs about 700
 * instructions of fixed work (the heap's lock, its inbox, Hoard's accounting, the deferred
 * frees' check): threadtest with 1,000 live blocks cost 250 instructions a malloc and free
 * at 1,000 bytes and 666 at 4,000, against tcmalloc's 86 and 89, whose per-thread lists
 * grow with use. So a bin that cycles (it turned twice since the thread's last trim: a flush
 * after a refill and a refill after a flush, bin_turns) doubles its limit, up to
 * LD_BIN_SLOTS - 1, within what the thread's bins may grow in all
 * (bin_growth_kb, 256 KiB by default: the per-thread constant of Hoard's bound grows by that,
 * docs/allocator.md). A full bin that grows takes the free without a flush. The thread's trim
 * (once per purge delay) halves the growth of a bin that did not grow since the last trim and
 * takes back that of a bin not refilled since; the thread's exit empties the bins and gives
 * their first limits back. The purge that empties an idle thread's bins leaves the limits
 * (the owner's, in its cache: nothing reads a limit outside it but the validation walk). */

/* Doubles bin c's limit, within LD_BIN_SLOTS - 1 and the thread's growth bound; false if it
 * cannot grow. */
static bool bin_grow(heap_t *heap, unsigned c) {
  ld_bin_t *bin = ld_heap_bin(heap, c);
  size_t size = ld_class_size[c], bound = LD_BIN_GROWTH_BYTES();
  size_t room = bound > heap->bins_grown_bytes ? bound - heap->bins_grown_bytes : 0;
  uint32_t limit = bin->limit, grown = 2 * limit;
  if (grown > LD_BIN_SLOTS - 1) grown = LD_BIN_SLOTS - 1;
  if ((size_t)(grown - limit) * size > room) grown = limit + (uint32_t)(room / size);
  if (grown <= limit) return false;
  bin_set_limit(heap, c, grown);
  bin->refilled |= BIN_CYCLED;
  LD_STAT_INC(heap, bin_growths);
  return true;
}

void ld_cache_init_bins(heap_t *heap) {
  /* A heap reused from an exited thread keeps the bins its earlier threads set up (emptied
   * at exit). */
  if (heap->bins_ready) return;
  ld_heap_reset_deferred(heap);
  bin_of_set(heap);
  /* Last, with release: the purge reads the deferred places and bins of a heap whose flag it
   * finds set (acquire: ld_cache_holds, ld_cache_drain_idle), and a new heap is listed, live,
   * before its thread gets here. Set first (until 2026-11-29), a purge that found the heap
   * idle (its last_slow_ns not yet set) could read the places still zero and settle a deferred
   * free at NULL (ThreadSanitizer, tests/alloc/idle_heaps_prefixed.c). */
  __atomic_store_n(&heap->bins_ready, 1, __ATOMIC_RELEASE);
}

int64_t ld_cache_bytes(const heap_t *heap) {
  int64_t bytes = 0;
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1) {
    unsigned c = ld_class_set_first(set_up);
    bytes += (int64_t)LD_READ(ld_heap_bin_const(heap, c)->count) * ld_class_size[c];
  }
  return bytes;
}

/* ---- remote frees ---- */

/* Writes the batch's hint into its first block (internal.h, ld_batch_hint_t): the chain runs
 * from the block appended last to the one appended first, and the hint lists the next `room`
 * blocks of the chain in the order they were appended (one copy). A longer batch goes on in
 * the first block listed, the next in the chain, which lists the `room` after it, and so on:
 * the owner waits for one line per `room` blocks instead of one per block. */
static void batch_hint_write(const ld_remote_slot_t *slot, const sb_t *sb) {
  unsigned room = ld_batch_hint_room(slot->block_size);
  if (!room) return;
  unsigned count = slot->count;
  for (unsigned first = 0;; first += room) { /* the hint block's place in the chain */
    ld_batch_hint_t *hint = (ld_batch_hint_t *)ld_batch_block(sb, slot->offsets[count - 1 - first]);
    unsigned left = count - first; /* this block and the ones after it */
    unsigned n = left - 1 < room ? left - 1 : room;
    const uint16_t *places = &slot->offsets[count - 1 - first - n];
    hint->count = (uint16_t)left;
    hint->last = slot->offsets[0];
    memcpy(hint->after_first, places, n * sizeof(uint16_t));
    /* the check from the slot's copy: read back from the block, it waited for the block's line,
     * which the stores above had only asked for (a consumer of 64 producers' blocks: 63% of
     * remote_send_at's samples on that loop) */
    hint->check = ld_batch_hint_sum((uint16_t)left, slot->offsets[0], places, n);
    if (left - 1 <= room) return;
  }
}

/* Sends k messages (batches of remote frees) to owner's inbox, their slots claimed with one
 * CAS (internal.h, ld_message_t). When the inbox has room for fewer, the freer reads it for
 * the owner (trylock) and tries again; a message still left goes the way every batch went
 * before: onto its superblock's remote list with a CAS, and the first batch since the owner
 * looked announces the superblock to its owner with a second (unless the owner allocates from
 * it). A superblock is read after its push only when the push announced it (else it may be
 * freed: internal.h). */
static void messages_send(heap_t *heap, heap_t *owner, const ld_message_t *messages, unsigned k, uint64_t now) {
  heap_t *self = heap == &ld_heap_empty ? NULL : heap; /* (the empty heap is every thread's) */
  unsigned done = ld_inbox_push_many(owner, messages, k, self);
  if (self && done) LD_STAT_INC(heap, remote_sends);
  if (done < k && ld_heap_help_full_inbox(heap, owner)) {
    unsigned more = ld_inbox_push_many(owner, messages + done, k - done, self);
    if (self && more) LD_STAT_INC(heap, remote_sends);
    done += more;
  }
  for (unsigned i = done; i < k; i++) {
    const ld_message_t *m = &messages[i];
    sb_t *sb = ld_sb_of(m->head);
    if (self) LD_STAT_INC(heap, remote_inbox_full);
    if (ld_sb_push_remote_batch(sb, m->head, ld_message_tail(m), m->count)) {
      ld_sb_announce(sb);
      if (self) LD_STAT_INC(heap, remote_announcements);
      ld_due_note(now); /* the owner collects at its next fill; if it idles, the purge does */
    }
  }
}

/* Outbox i's batches go (heap_t, outboxes), up to LD_OUTBOX for one CAS. */
static void outbox_send(heap_t *heap, unsigned i, uint64_t now) {
  ld_outbox_t *box = &heap->outboxes[i];
  messages_send(heap, box->owner, box->messages, box->count, now);
  LD_OWNER_SET(box->count, 0);
  LD_OWNER_SET(heap->outbox_bytes, heap->outbox_bytes - box->bytes);
  box->bytes = 0;
  LD_OWNER_SET(heap->outbox_open, heap->outbox_open & ~((uint64_t)1 << i));
  ld_heap_help_idle_owner(heap, box->owner, now);
}
static void outbox_send_all(heap_t *heap, uint64_t now) {
  for (uint64_t open = heap->outbox_open; open; open &= open - 1) outbox_send(heap, (unsigned)__builtin_ctzll(open), now);
}

/* The message for slot's batch, written field by field where it is kept: built on the stack
 * and copied into the outbox whole, its 16-byte load waited for the stores before it, the
 * marks and hints on lines from the other core (churn-remote at 10^6: 47% of remote_send_at's
 * samples; store forwarding cannot serve one load from three stores). */
static inline void message_fill(ld_message_t *m, const ld_remote_slot_t *slot, const sb_t *sb) {
  m->head = slot->head;
  m->tail_offset = (uint32_t)((char *)slot->tail - (char *)sb);
  m->count = (uint16_t)slot->count;
}

/* Hands slot's batch to its superblock's owner: one message (messages_send), or a place in the
 * outbox for a batch of one or two. Either way it helps an owner that seems idle. now: the
 * coarse clock, read once by a caller that sends many. */
static void remote_send_at(heap_t *heap, sb_t *sb, ld_remote_slot_t *slot, uint64_t now) {
  batch_hint_write(slot, sb);
  uint32_t bytes = slot->count * slot->block_size;
  /* The owner read when the batch opened; sb's header is not read here (after the push sb may
   * be freed: internal.h). A superblock that changed hands since, or changes hands in flight,
   * has its message forwarded by that owner (heap.c): while the batch holds blocks of sb they
   * count as used, so sb stays a superblock of its class. */
  heap_t *owner = slot->owner;
  bool staged = heap != &ld_heap_empty && slot->count <= LD_STAGED_MAX;
  unsigned o = 0; /* (staged) its outbox */
  if (staged) {
    /* A small batch (frees scattered over a large heap: churn-remote at 10^6 live blocks sent
     * 1.3 blocks a batch) waits in its owner's outbox for others to the same owner, and
     * LD_OUTBOX of them go with one CAS (a CAS a batch was 6% of that run's time: it waits
     * for this core's stores to the blocks freed before it, each a line from another core).
     * Their owner's fill puts batches of one or two straight in its bins (heap.c,
     * inbox_to_bin). The owner's outbox, else an empty one of its set, else the fuller of
     * the set's goes first. */
    o = ld_outbox_set(owner);
    const ld_outbox_t *first = &heap->outboxes[o], *second = first + 1;
    if (second->count && second->owner == owner) {
      o++;
    } else if (first->count && first->owner != owner) {
      if (second->count > first->count || !second->count) o++;
      if (heap->outboxes[o].count) outbox_send(heap, o, now);
    }
    ld_outbox_t *box = &heap->outboxes[o];
    if (!heap->outbox_open && atomic_load_explicit(&ld_due_ns, memory_order_relaxed) == UINT64_MAX)
      ld_due_note(now); /* sent by the purge if the thread idles */
    message_fill(&box->messages[box->count], slot, sb);
    box->owner = owner;
    LD_OWNER_SET(box->count, box->count + 1);
    box->bytes += bytes;
    LD_OWNER_SET(heap->outbox_bytes, heap->outbox_bytes + bytes);
    LD_OWNER_SET(heap->outbox_open, heap->outbox_open | (uint64_t)1 << o);
  } else {
    ld_message_t m;
    message_fill(&m, slot, sb);
    messages_send(heap, owner, &m, 1, now);
  }
  /* Counted per batch (the statistics add the bytes still in the buffer: heap.c), also for a
   * thread without a heap and for the purge sending an idle owner's blocks (send_foreign):
   * their owners count the bytes as they take them, and without these the statistics' pending
   * bytes went below zero, which hid other threads' pending frees (bytes_in_use too high until
   * their owners took them). */
  ld_stat_add(heap, offsetof(ld_stats_t, remote_sent_bytes), bytes);
  if (heap != &ld_heap_empty) {
    LD_STAT_INC(heap, remote_batches);
    LD_OWNER_SET(heap->remote_bytes, heap->remote_bytes - bytes);
    unsigned i = (unsigned)(slot - heap->remote);
    LD_OWNER_SET(heap->remote_sb[i], NULL); /* (read outside the buffer's protocol: ld_cache_batch_slot) */
    heap->remote_open[i / 64] &= ~((uint64_t)1 << (i % 64));
  }
  slot->head = slot->tail = NULL;
  slot->count = 0;
  if (LD_READ(heap->remote_busy)) LD_OWNER_SET(heap->last_slow_ns, now); /* the owner at work: not idle */
  if (staged) {
    /* (all at once past the bound: at most LD_OUTBOXES sends, for that many bytes) */
    if (heap->outbox_bytes > LD_OUTBOX_PENDING_BYTES) {
      outbox_send_all(heap, now);
    } else if (heap->outboxes[o].count == LD_OUTBOX) {
      outbox_send(heap, o, now);
    }
    return;
  }
  /* An owner that stopped calling (blocked on a queue) is helped by its freers, batch by
   * batch, rather than keeping everything they free until the purge (Hoard §2.2). */
  ld_heap_help_idle_owner(heap, owner, now);
}
static void remote_send(heap_t *heap, sb_t *sb, ld_remote_slot_t *slot) {
  remote_send_at(heap, sb, slot, ld_os_now_coarse_ns());
}
/* Every batch in heap's buffer goes, the slots found from remote_open. */
static void remote_send_open(heap_t *heap) {
  uint64_t now = ld_os_now_coarse_ns();
  for (unsigned word = 0; word < LD_REMOTE_SLOTS / 64; word++)
    for (uint64_t bits = heap->remote_open[word]; bits; bits &= bits - 1) {
      unsigned i = word * 64 + (unsigned)__builtin_ctzll(bits);
      remote_send_at(heap, heap->remote_sb[i], &heap->remote[i], now);
    }
  outbox_send_all(heap, now);
}

/* b joins the batch of slot i (b's superblock's, which has room; the caller sets the tail of a
 * new batch). */
static inline void batch_append(heap_t *heap, unsigned i, const sb_t *sb, ld_block_t *b) {
  ld_remote_slot_t *slot = &heap->remote[i];
  ld_set_next(b, slot->head);
  slot->offsets[slot->count] = ld_batch_offset(sb, b);
  slot->head = b;
  heap->remote_last[i] = ++heap->remote_appends;
  slot->count++;
  LD_OWNER_SET(heap->remote_bytes, heap->remote_bytes + sb->block_size);
}

/* The first slot holding a batch at or after `from`, round the buffer; the buffer holds one. At
 * most LD_REMOTE_SLOTS / 64 + 1 words are read. */
static unsigned next_open_slot(const heap_t *heap, unsigned from) {
  from %= LD_REMOTE_SLOTS;
  unsigned word = from / 64;
  uint64_t bits = heap->remote_open[word] & (~(uint64_t)0 << (from % 64));
  for (unsigned k = 0; !bits && k < LD_REMOTE_SLOTS / 64; k++) {
    word = (word + 1) % (LD_REMOTE_SLOTS / 64);
    bits = heap->remote_open[word];
  }
  return word * 64 + (unsigned)__builtin_ctzll(bits);
}

/* Adds b (tagged) to the batch of its superblock when the common case below does not: sb has
 * no batch in its set yet, or the batch or the buffer reaches its bound. true: a batch went. */
static LD_NOINLINE bool remote_append(heap_t *heap, sb_t *sb, ld_block_t *b) {
  if (heap == &ld_heap_empty) { /* no heap could be made: a batch of one */
    ld_remote_slot_t one = {.head = b, .tail = b, .owner = atomic_load_explicit(&sb->owner, memory_order_relaxed),
                            .block_size = sb->block_size, .count = 1, .offsets = {ld_batch_offset(sb, b)}};
    ld_set_next(b, NULL);
    remote_send(heap, sb, &one);
    return true;
  }
  /* sb's slot in its set; else an empty one; else the batch appended to longest ago goes: a
   * thread's frees move on from a superblock when its owner's refills do, and the batches they
   * leave behind stop growing (evicting the largest instead pushed out the growing ones) */
  unsigned set = ld_remote_set(sb), i = LD_REMOTE_SLOTS, victim = set;
  /* (a way holds a batch exactly when its bit in remote_open is set: the slots are not read) */
  const uint64_t open = heap->remote_open[set / 64] >> (set % 64);
  _Static_assert(LD_REMOTE_WAYS <= 64 && 64 % LD_REMOTE_WAYS == 0, "a set's bits in one word of remote_open");
  for (unsigned w = 0; w < LD_REMOTE_WAYS; w++) {
    if (heap->remote_sb[set + w] == sb) {
      i = set + w;
      break;
    }
    if (((open >> (victim - set)) & 1) &&
        (!((open >> w) & 1) || (int32_t)(heap->remote_last[set + w] - heap->remote_last[victim]) < 0))
      victim = set + w;
  }
  bool sent = false;
  if (i == LD_REMOTE_SLOTS) {
    i = victim;
    if (heap->remote[i].count) remote_send(heap, heap->remote_sb[i], &heap->remote[i]), sent = true;
    LD_OWNER_SET(heap->remote_sb[i], sb);
    heap->remote_open[i / 64] |= (uint64_t)1 << (i % 64);
  }
  ld_remote_slot_t *slot = &heap->remote[i];
  /* sent by the purge if the thread idles: make sure a purge is due (a clock read only then) */
  if (!heap->remote_bytes && atomic_load_explicit(&ld_due_ns, memory_order_relaxed) == UINT64_MAX)
    ld_due_note(ld_os_now_coarse_ns());
  if (!slot->count) {
    slot->tail = b;
    slot->owner = atomic_load_explicit(&sb->owner, memory_order_relaxed);
    slot->block_size = sb->block_size;
    slot->size_class = sb->size_class;
    /* the batch's blocks are all of sb's size: its two bounds are one count */
    uint32_t by_bytes = (LD_REMOTE_BATCH_BYTES + sb->block_size - 1) / sb->block_size;
    slot->full = by_bytes < LD_REMOTE_BATCH ? by_bytes : LD_REMOTE_BATCH;
  }
  batch_append(heap, i, sb, b);
  if (slot->count >= slot->full) {
    remote_send(heap, sb, slot), sent = true;
  } else if (heap->remote_bytes > LD_REMOTE_PENDING_BYTES) {
    /* the buffer holds enough: the next open batch from the cursor goes, round the buffer, so
     * that each waits a whole turn and grows meanwhile. (The largest of the free's own set,
     * before: with 256 sets a set mostly holds one batch, the one just appended to, and a
     * consumer of 64 classes at once sent 3.1 blocks a batch, against 8.2 with 64 sets.) */
    unsigned next = next_open_slot(heap, heap->remote_cursor);
    heap->remote_cursor = next + 1;
    remote_send(heap, heap->remote_sb[next], &heap->remote[next]), sent = true;
  }
  return sent;
}

/* The remote buffer is the owner's, but the purge may send the batches of a thread that
 * stopped calling (ld_cache_send_idle_batches). The two meet as in Dekker's algorithm with an
 * asymmetric fence: the owner marks itself busy with plain stores (no atomic operation, no
 * fence: a few instructions on a path that is already slow), and the purge, which is rare,
 * pays for the fence on both sides with membarrier() (os.c). If the owner finds the purge at
 * work, it waits the few microseconds the purge takes to send at most LD_REMOTE_SLOTS batches. */
static LD_NOINLINE void remote_wait_for_purge(heap_t *heap) {
  for (;;) {
    LD_OWNER_SET(heap->remote_busy, 0);
    while (__atomic_load_n(&heap->remote_draining, __ATOMIC_ACQUIRE)) ld_os_yield();
    LD_OWNER_SET(heap->remote_busy, 1);
    atomic_signal_fence(memory_order_seq_cst);
    if (!__atomic_load_n(&heap->remote_draining, __ATOMIC_ACQUIRE)) return;
  }
}
static inline void remote_enter(heap_t *heap) {
  LD_OWNER_SET(heap->remote_busy, 1);
  atomic_signal_fence(memory_order_seq_cst); /* the purge's membarrier makes this a fence */
  if (LD_UNLIKELY(__atomic_load_n(&heap->remote_draining, __ATOMIC_ACQUIRE))) remote_wait_for_purge(heap);
}
static void remote_leave(heap_t *heap) {
  atomic_signal_fence(memory_order_seq_cst);
  __atomic_store_n(&heap->remote_busy, 0, __ATOMIC_RELEASE);
}

/* The purge's side, for an owner that stopped calling: marks the purge at work and fences the
 * owner. 1: the owner is out (what remote_enter guards is the purge's until remote_drain_end);
 * 0: the owner is in; -1: the kernel cannot fence other threads (the owner's own calls must do
 * the work). remote_drain_end follows in every case. */
static int remote_drain_begin(heap_t *heap) {
  __atomic_store_n(&heap->remote_draining, 1, __ATOMIC_SEQ_CST);
  if (ld_os_fence_all_threads() != 0) return -1;
  return !__atomic_load_n(&heap->remote_busy, __ATOMIC_ACQUIRE);
}
static void remote_drain_end(heap_t *heap) { __atomic_store_n(&heap->remote_draining, 0, __ATOMIC_RELEASE); }

LD_NOINLINE bool ld_cache_append_and_leave(heap_t *heap, sb_t *sb, void *b) {
  bool sent = remote_append(heap, sb, b);
  remote_leave(heap);
  return sent;
}

bool ld_cache_free_remote(heap_t *heap, sb_t *sb, ld_block_t *b) {
  if (heap == &ld_heap_empty) {
    ld_stat_count(heap, offsetof(ld_stats_t, remote_frees));
    return remote_append(heap, sb, b);
  }
  LD_STAT_INC(heap, remote_frees);
  remote_enter(heap);
  return ld_cache_append_and_leave(heap, sb, b);
}

/* The common remote free: sb's batch is in its set (one line of remote_sb read, or the slot
 * the ring remembered) and stays under its bounds and the buffer's; the block joins it with a
 * dozen stores to the thread's own lines and no call. A superblock with a batch here was
 * checked when the batch opened (the ownership map, its header's magic and kind: free_slow),
 * and stays a small superblock of its class while the batch holds blocks of it, which count as
 * used: so the block's own checks are all that is left, and the ownership map, a header line
 * and a call are saved (callgrind: 135 -> ~100 instructions per remote free). The caller is in
 * the buffer (remote_busy set, no purge at work on it: remote_enter), so the tags read here
 * are not being cleared by a purge sending an idle thread's batches.
 * Every call it makes is its last (the checks' reports never return; a batch that must go is
 * the caller's to finish): so it needs no register saved, where one call in the middle cost 8
 * instructions on every remote free. */
static inline int join_held(heap_t *heap, sb_t *sb, void *p, unsigned i, ld_block_t *mark, bool claimed) {
  if (i >= LD_REMOTE_SLOTS || heap->remote_sb[i] != sb) { /* the ring's hint is stale */
    i = ld_cache_batch_slot(heap, sb);
    if (i == LD_REMOTE_SLOTS) {
      if (mark) ld_ring_mark(mark, heap->ring_id);
      remote_leave(heap);
      return LD_JOIN_NONE;
    }
  }
  ld_block_t *b = p;
  if (claimed)
    ld_check_claimed_free(sb, p);
  else
    ld_check_small_free(sb, p); /* (p has left the ring: alloc.c, free_deferring) */
  b->tag = ld_tag(b);
  LD_STAT_INC(heap, remote_frees);
  ld_remote_slot_t *slot = &heap->remote[i];
  uint32_t size = sb->block_size;
  if (LD_LIKELY(slot->count + 1 < slot->full && heap->remote_bytes + size <= LD_REMOTE_PENDING_BYTES)) {
    batch_append(heap, i, sb, b); /* a batch in the set has a tail already */
    if (mark) ld_ring_mark(mark, heap->ring_id);
    remote_leave(heap);
    return LD_JOIN_DONE;
  }
  if (mark) ld_ring_mark(mark, heap->ring_id);
  return LD_JOIN_APPEND;
}
/* (each of the two entries has its own copy, so that free_deferring's, its one caller, is
 * inlined there: a call cost 7 instructions a remote free) */
int ld_cache_join_held(heap_t *heap, sb_t *sb, void *p, unsigned slot, void *mark) {
  return join_held(heap, sb, p, slot & ~LD_SLOW_FREE_TAGGED, mark, slot & LD_SLOW_FREE_TAGGED);
}
int ld_cache_free_remote_batched(heap_t *heap, sb_t *sb, void *p) {
  if (heap == &ld_heap_empty) return LD_JOIN_NONE; /* its buffer is never used: remote_append */
  remote_enter(heap);
  return join_held(heap, sb, p, LD_REMOTE_SLOTS, NULL, false);
}

static void remote_send_all(heap_t *heap) {
  if (!LD_READ(heap->remote_bytes) && !LD_READ(heap->outbox_open)) return; /* (outside the buffer: a look) */
  remote_enter(heap);
  remote_send_open(heap);
  remote_leave(heap);
}

/* The thread's own buffer (a validation walk, maintain.c): each slot open in remote_open
 * exactly when it names a superblock and holds blocks, and remote_bytes their sum. */
static void medium_cache_validate(heap_t *heap, int *violations);
static void medium_cache_empty_and_leave(heap_t *heap);
static void medium_late_list(heap_t *heap, unsigned n);
static bool medium_returned_holds(const heap_t *heap);
void ld_cache_validate(heap_t *heap, int *violations) {
  if (heap == &ld_heap_empty) return;
  remote_enter(heap);
  uint64_t bytes = 0;
  for (unsigned i = 0; i < LD_REMOTE_SLOTS; i++) {
    bool open = (heap->remote_open[i / 64] >> (i % 64)) & 1;
    const sb_t *sb = heap->remote_sb[i];
    if (open != (sb != NULL) || open != (heap->remote[i].count != 0)) {
      ld_message("larder: validate: heap %p: remote slot %u is%s open, names %p, holds %u blocks\n", (void *)heap, i,
                 open ? "" : " not", (const void *)sb, heap->remote[i].count);
      (*violations)++;
    }
    if (sb) bytes += (uint64_t)heap->remote[i].count * sb->block_size;
  }
  if (bytes != heap->remote_bytes) {
    ld_message("larder: validate: heap %p: remote buffer holds %llu bytes, counted %u\n", (void *)heap,
               (unsigned long long)bytes, heap->remote_bytes);
    (*violations)++;
  }
  /* The bins' limits: from the first limit up to LD_BIN_SLOTS - 1, their growth counted */
  size_t grown = 0;
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1) {
    unsigned c = ld_class_set_first(set_up);
    uint32_t limit = ld_heap_bin(heap, c)->limit, first = bin_first_limit(c);
    if (limit < first || limit > LD_BIN_SLOTS - 1) {
      ld_message("larder: validate: heap %p: bin of class %u has limit %u (first %u, at most %d)\n", (void *)heap, c, limit,
                 first, LD_BIN_SLOTS - 1);
      (*violations)++;
    }
    grown += (size_t)(limit - first) * ld_class_size[c];
  }
  if (grown != heap->bins_grown_bytes) {
    ld_message("larder: validate: heap %p: bins grew by %zu bytes, counted %zu\n", (void *)heap, grown, heap->bins_grown_bytes);
    (*violations)++;
  }
  /* the outboxes marked open only (the others' pages may never have been touched) */
  uint64_t outbox_bytes = 0;
  for (uint64_t open = heap->outbox_open; open; open &= open - 1) {
    unsigned i = (unsigned)__builtin_ctzll(open);
    const ld_outbox_t *box = &heap->outboxes[i];
    uint64_t box_bytes = 0;
    for (unsigned m = 0; m < box->count && m < LD_OUTBOX; m++)
      box_bytes += (uint64_t)box->messages[m].count * ld_sb_of(box->messages[m].head)->block_size;
    if (!box->count || box->count > LD_OUTBOX || !box->owner || ld_outbox_set(box->owner) != (i & ~1u) || box_bytes != box->bytes) {
      ld_message("larder: validate: heap %p: outbox %u is open with %u messages for heap %p, %llu bytes, counted %u\n",
                 (void *)heap, i, box->count, (void *)box->owner, (unsigned long long)box_bytes, box->bytes);
      (*violations)++;
    }
    outbox_bytes += box->bytes;
  }
  if (outbox_bytes != heap->outbox_bytes) {
    ld_message("larder: validate: heap %p: outboxes hold %llu bytes, counted %u\n", (void *)heap,
               (unsigned long long)outbox_bytes, heap->outbox_bytes);
    (*violations)++;
  }
  remote_leave(heap);
  medium_cache_validate(heap, violations);
}

static bool slow_frees_waiting(const heap_t *heap);
static void *take_slow_free(heap_t *heap);
static void settle_slow_free(heap_t *heap, void *p, bool by_purge);

bool ld_cache_send_idle_batches(heap_t *heap) {
  if (!LD_READ(heap->remote_bytes) && !LD_READ(heap->outbox_open) && !slow_frees_waiting(heap)) return true;
  int out = remote_drain_begin(heap); /* (-1: no fence; the batches wait for their owner) */
  if (out == 1) {
    for (void *p; (p = take_slow_free(heap));) settle_slow_free(heap, p, true);
    remote_send_open(heap);
  }
  remote_drain_end(heap);
  return out != 0;
}

/* ---- bins ---- */

/* Blocks of superblocks given away while cached (ld_heap_return and ld_heap_return_bins leave
 * them) go to their new owners, as any free would (they are tagged already). by_purge: the
 * purge sends them for an idle owner, in batches of one, without the owner's buffer. */
static void send_foreign(heap_t *heap, void **blocks, unsigned n, bool by_purge) {
  /* those of superblocks the global heap holds go straight back, where its lock is free */
  unsigned kept = 0;
  for (unsigned i = 0; i < n; i++)
    if (!ld_global_free(ld_sb_of(blocks[i]), blocks[i])) blocks[kept++] = blocks[i];
  n = kept;
  if (!n) return;
  if (by_purge) {
    for (unsigned i = 0; i < n; i++) remote_append(&ld_heap_empty, ld_sb_of(blocks[i]), blocks[i]);
    return;
  }
  remote_enter(heap);
  for (unsigned i = 0; i < n; i++) remote_append(heap, ld_sb_of(blocks[i]), blocks[i]);
  remote_leave(heap);
}

/* ---- slow frees (heap_t, slow_frees) ---- */

static void settle_deferred(heap_t *heap, bool by_purge);

static bool slow_frees_waiting(const heap_t *heap) {
  /* one test, not one per slot: every refill and flush asks (4 branches were 34 instructions) */
  uintptr_t any = 0;
  for (unsigned i = 0; i < LD_SLOW_FREES; i++) any |= (uintptr_t)LD_READ(heap->slow_frees[i]);
  return any != 0;
}

/* A slow free leaves the ring. One marked as it came (tagged: alloc.c, free_deferring) must
 * still carry the mark, over six bytes that are not its free tag's: else it was free already
 * when this free came, or its owner wrote its tag since (freed it again, or handed it out),
 * or the program wrote it after its free; sending it on would give the owner a block that is
 * free already or that the program holds. The claimed word goes over the mark before the
 * block's slot is let go (the callers store the slot after, with release order): an owner
 * that meets the mark as it settles a deferred free of the block looks for it in every ring,
 * and must find either the slot or this word (cache.c, deferred_claim). The claimed word
 * never equals the free tag (their top two bytes differ), so the checks that follow, those of
 * any slow free, pass, and every way on writes the free tag over it. */
static inline void slow_free_leaves(void *p, unsigned tagged) {
  if (!tagged) return;
  if (LD_UNLIKELY(!ld_ring_marked(p))) ld_fatal_bad_free("double free (or write after free)", p);
  __atomic_store_n(&((ld_block_t *)p)->tag, ld_ring_claimed_word(p), __ATOMIC_RELAXED);
}

/* One slow free out of the ring (NULL: none), under the remote buffer's protocol: the owner's
 * remote_busy or the purge's remote_draining. */
static void *take_slow_free(heap_t *heap) {
  for (unsigned i = 0; i < LD_SLOW_FREES; i++) {
    void *p = heap->slow_frees[i];
    if (p) {
      slow_free_leaves(p, heap->slow_free_slots[i] & LD_SLOW_FREE_TAGGED);
      __atomic_store_n(&heap->slow_frees[i], NULL, __ATOMIC_RELEASE);
      return p;
    }
  }
  return NULL;
}

void *ld_cache_defer_slow_free(heap_t *heap, void *p, unsigned slot, unsigned *old_slot) {
  remote_enter(heap);
  void **ring = heap->slow_frees;
  for (unsigned i = 0; i < LD_SLOW_FREES; i++)
    if (LD_UNLIKELY(ring[i] == p)) ld_fatal_bad_free("double free", p);
  unsigned i = heap->slow_free_next++ % LD_SLOW_FREES;
  void *old = ring[i];
  unsigned old_entry = heap->slow_free_slots[i];
  if (old) slow_free_leaves(old, old_entry & LD_SLOW_FREE_TAGGED);
  __atomic_store_n(&ring[i], p, __ATOMIC_RELEASE);
  *old_slot = old_entry; /* (LD_SLOW_FREE_TAGGED kept: the caller knows the claimed word is there) */
  heap->slow_free_slots[i] = (uint16_t)slot;
  if (!old) { /* else the caller joins old to its batch, still in the buffer, and marks p */
    if (slot & LD_SLOW_FREE_TAGGED) ld_ring_mark(p, heap->ring_id);
    remote_leave(heap);
  }
  return old;
}

/* A slow free taken outside free_slow: by its owner, in its bins (its exit, malloc_trim,
 * realloc, its statistics, the process's exit), or by the purge for an idle owner (by_purge:
 * neither its bins nor its buffer are touched; the block goes back in a batch of one). Each of
 * free_slow's checks is made here, the lines having arrived. Spans never wait in the ring
 * (free_slow), so a span's header here means a bad pointer. */
static void settle_slow_free(heap_t *heap, void *p, bool by_purge) {
  if (!ld_addrmap_contains_header(p))
    ld_fatal_bad_free(ld_addrmap_state((const char *)p - 1) == LD_ADDR_RELEASED ? "double free (or free of a block already unmapped)"
                                                                                  : "invalid free (not a block from larder)", p);
  sb_t *sb = ld_sb_of(p);
  if (sb->magic != LD_SB_MAGIC) ld_fatal_bad_free("invalid free (not a block from larder)", p);
  if (sb->kind != LD_KIND_SMALL)
    ld_fatal_bad_free(ld_kind_not_live(sb->kind) ? "double free" : "invalid free (not the start of a block)", p);
  ld_block_t *b = p;
  if (!by_purge && atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap) {
    if ((char *)b >= LD_READ(sb->bump)) ld_fatal_bad_free("invalid free (block was never allocated)", b);
    settle_deferred(heap, false); /* it may be b (the table lost b's superblock since): tagged first */
    ld_check_small_free(sb, b);
    b->tag = ld_tag(b);
    ld_cache_free_owned(heap, sb, b);
    return;
  }
  ld_check_small_free(sb, b);
  b->tag = ld_tag(b);
  ld_stat_count(by_purge ? &ld_heap_empty : heap, offsetof(ld_stats_t, remote_frees));
  void *one[1] = {b};
  send_foreign(heap, one, 1, by_purge);
}

/* The owner's: in its bins. One at a time under the remote buffer's protocol, which
 * send_foreign leaves between them. */
static void settle_slow_frees(heap_t *heap) {
  if (!slow_frees_waiting(heap)) return;
  for (;;) {
    remote_enter(heap);
    void *p = take_slow_free(heap);
    remote_leave(heap);
    if (!p) return;
    settle_slow_free(heap, p, false);
  }
}
void ld_cache_settle_slow_frees(heap_t *heap) { settle_slow_frees(heap); }

/* Returns the n oldest blocks of bin cls to their superblocks. by_purge: the purge does it
 * for an idle owner (ld_cache_drain_idle), which must not touch the owner's remote buffer. */
static void bin_flush_blocks(heap_t *heap, unsigned cls, unsigned n, bool by_purge);
static void bin_flush(heap_t *heap, unsigned cls, unsigned n) { bin_flush_blocks(heap, cls, n, false); }
static void deferred_check(const heap_t *heap);
/* Whether bin c cycles, told at a turn (a flush after a refill, or the reverse): the second
 * turn since the thread's last trim. One turn is a change of phase (a program that builds a
 * structure and frees it); a bin that turns twice is refilled with blocks it flushed, or
 * flushes blocks it was refilled with. */
static bool bin_turns(ld_bin_t *bin) {
  bool again = bin->refilled & BIN_TURNED;
  bin->refilled |= BIN_TURNED;
  return again;
}
/* A full bin c makes room for a free: it grows if it cycles (bin_turns, bin_grow), else its
 * older half goes back. Not by the purge, which empties an idle thread's bins and leaves
 * their limits alone. */
static void bin_make_room(heap_t *heap, unsigned c, bool by_purge) {
  ld_bin_t *bin = ld_heap_bin(heap, c);
  if (!by_purge) {
    bool turn = (bin->refilled & (BIN_REFILLED | BIN_FLUSHED_LAST)) == BIN_REFILLED;
    bin->refilled |= BIN_FLUSHED_LAST;
    if (turn && bin_turns(bin) && bin_grow(heap, c)) return;
  }
  bin_flush_blocks(heap, c, (bin->count + 1u) / 2, by_purge);
}
static void bin_flush_blocks(heap_t *heap, unsigned cls, unsigned n, bool by_purge) {
  ld_bin_t *bin = ld_heap_bin(heap, cls);
  if (n > bin->count) n = bin->count;
  if (!n) return;
  /* (the purge's: the deferred frees were settled first, or they are none of this bin's) */
  if (!by_purge) deferred_check(heap);
  void *out[LD_BIN_SLOTS];
  memcpy(out, bin->slots, n * sizeof(void *));
  memmove(bin->slots, bin->slots + n, (bin->count - n) * sizeof(void *));
  unsigned foreign;
  ld_heap_return(heap, bin, out, n, &foreign); /* lowers bin->count */
  /* and after: the heap took its inbox's batches, where another thread's free of a deferred
   * block may have tagged it */
  if (!by_purge) deferred_check(heap);
  send_foreign(heap, out, foreign, by_purge);
}

void *ld_cache_refill(heap_t *heap, unsigned cls) {
  ld_bin_t *bin = ld_heap_bin(heap, cls);
  if (LD_UNLIKELY(!bin_is_set_up(bin))) {
    bin_setup(heap, cls);
    bin = ld_heap_bin(heap, cls); /* (the sentinel's until then) */
  }
  /* The fast path found the bin empty: `fill` blocks come in, twice as many next time, up to
   * half of what the bin may hold. */
  /* emptied since its last flush: a turn, and it grows if it cycles (bin_turns, bin_grow) */
  if ((bin->refilled & BIN_FLUSHED_LAST) && bin_turns(bin)) bin_grow(heap, cls);
  unsigned n = ld_heap_fill(heap, cls, bin->fill); /* sets bin->count to n */
  /* Before a block is handed out: the fill may have taken a deferred block (free tag on it:
   * it is a double free) from its superblock's list, or from a batch of another thread's
   * frees (the fill reads the inbox first, and takes whole batches unread), where that
   * thread's free of the same block tagged it (double_free_random, a busy thread: about 1 run
   * in 100 when looked for before the fill). */
  deferred_check(heap);
  if (!n) return NULL;
  bin->refilled = (uint8_t)((bin->refilled & (BIN_CYCLED | BIN_TURNED)) | BIN_REFILLED);
  if (bin->fill < most_fill(bin)) bin->fill = (uint8_t)(2u * bin->fill < most_fill(bin) ? 2u * bin->fill : most_fill(bin));
  n--;
  ld_block_t *b = bin->slots[n];
  LD_OWNER_SET(bin->count, n);
  ld_bin_check(b);
  b->tag = 0;
  return b;
}

bool ld_cache_free_owned(heap_t *heap, sb_t *sb, ld_block_t *b) {
  ld_bin_t *bin = ld_heap_bin(heap, sb->size_class);
  bool full = bin->count >= bin->limit;
  if (full) bin_make_room(heap, sb->size_class, false);
  ld_bin_seal(b);
  bin->slots[bin->count] = b;
  LD_OWNER_SET(bin->count, bin->count + 1);
  LD_STAT_INC(heap, frees_cached);
  return full;
}

/* Whether a free is deferred (heap_t, deferred). */
static bool deferred_waiting(const heap_t *heap) {
  bool any = false;
  for (unsigned i = 0; i < LD_DEFERRED; i++) any |= ld_heap_deferred_holds(heap, i);
  return any;
}

/* Before blocks move between the bins and the superblocks (a refill, a flush, a settle): a
 * deferred free of a block that was free already when its free came (its free tag is there:
 * it is in a bin or on its superblock's list) is reported now, before that block could be
 * handed out by a refill, here or in another heap the superblock goes to, while it waits. */
static void deferred_check(const heap_t *heap) {
  /* One branch for the four (a flush runs it twice): an empty place's stand-in has tag 0, which
   * is neither word for it (the key is odd, an address is not). */
  uintptr_t key = ld_free_key;
  bool bad = false;
  for (unsigned i = 0; i < LD_DEFERRED; i++) {
    const ld_block_t *b = heap->deferred[i].block;
    uintptr_t x = b->tag ^ key ^ (uintptr_t)b; /* 0: the free tag; LD_MARK_FLIP: the claimed word */
    bad |= (x == 0) | (x == LD_MARK_FLIP);
  }
  if (LD_UNLIKELY(bad))
    for (unsigned i = 0; i < LD_DEFERRED; i++) {
      const ld_block_t *b = heap->deferred[i].block;
      if (ld_block_is_free(b) || b->tag == ld_ring_claimed_word(b)) ld_fatal_bad_free("double free", b);
    }
}

/* Whether p waits in the ring of slow frees of the heap its mark names (internal.h,
 * ld_ring_mark): four slots read, however many heaps there are (a walk of every heap's ring
 * before). Without a lock: heaps are never unmapped; a ring's slot is filled before its block's
 * id and mark are written, and emptied, with release order, after its claimed word. The id of a
 * word that only looks like a mark (the program's data) names any heap or none: p is in no
 * ring then, or in the ring of a thread that frees it too, which is the double free. */
static bool slow_free_waits_at_marker(const ld_block_t *p) {
  const heap_t *h = ld_heap_of_ring_id(ld_ring_mark_id(p));
  if (!h) return false;
  /* (counted as no one thread's: the purge settles an idle thread's deferred frees too) */
  ld_stat_count(&ld_heap_empty, offsetof(ld_stats_t, mark_rings_examined));
  for (unsigned i = 0; i < LD_SLOW_FREES; i++)
    if (__atomic_load_n(&h->slow_frees[i], __ATOMIC_ACQUIRE) == p) return true;
  return false;
}

/* The owner writes the free tag of b, its own block freed on the fast path (deferred) or a slow
 * one, after a last look at its word. The free tag, or a slow free's claimed word
 * (slow_free_leaves), is a double free. A mark means another thread's free of b waits in its
 * ring, one of the two being a double free; or it is the program's data, which matches a mark
 * in 1 word of 65,536. Both check the word and then write it, and must not both go on
 * (double_free_random, a busy thread: about 1 run in 100 with four deferred frees, when the
 * owner wrote over a mark): so a marked word sends the owner to the ring of the heap the mark
 * names. There it finds b, a double free (a free fills its slot, then writes its id and marks);
 * or it does not, and then that free has left its ring and its claimed word is there (it
 * writes the word, then empties its slot), or there was none. The id may be a later marker's
 * than the mark read (both free b: a double free), never an earlier one's. A free that marks b
 * after that finds the owner's free tag over its mark as it leaves. */
static void deferred_claim(ld_block_t *b) {
  uintptr_t tag = ld_tag(b), w = __atomic_load_n(&b->tag, __ATOMIC_RELAXED);
  if (((w ^ tag) >> 48) == 0xffff) {
    if (slow_free_waits_at_marker(b)) ld_fatal_bad_free("double free", b);
    w = __atomic_load_n(&b->tag, __ATOMIC_RELAXED);
  }
  if (w == tag || w == ld_ring_claimed_word(b)) ld_fatal_bad_free("double free", b);
  __atomic_store_n(&b->tag, tag, __ATOMIC_RELAXED);
}
void ld_cache_claim_own(ld_block_t *b) { deferred_claim(b); }

/* The deferred free at place into its bin (by the owner, or by the purge for an idle owner),
 * and block (of bin) in its place, or its stand-in (NULL). Its tag is read here, where the free
 * fast path did not wait for its line. Returns whether its bin was full (flushed). */
static bool settle_deferred_at(heap_t *heap, unsigned place, ld_block_t *block, ld_bin_t *block_bin, bool by_purge) {
  ld_block_t *b = heap->deferred[place].block;
  ld_bin_t *bin = heap->deferred[place].bin;
  if (ld_block_is_free(b)) ld_fatal_bad_free("double free", b);
  unsigned cls = ld_heap_bin_class(heap, bin);
  bool full = bin->count >= bin->limit;
  /* (before b's tag: the flush looks for free tags on the deferred frees, b among them) */
  if (full) bin_make_room(heap, cls, by_purge);
  deferred_claim(b);
  ld_bin_seal(b);
  ld_heap_settle_deferred(heap, place, block, block_bin);
  return full;
}

/* Every deferred free into its bin, oldest first, and the stand-ins made ready again. */
static void settle_deferred(heap_t *heap, bool by_purge) {
  if (!deferred_waiting(heap)) return;
  deferred_check(heap);
  for (unsigned k = 0; k < LD_DEFERRED; k++) {
    unsigned place = (ld_heap_deferred_oldest(heap) + k) % LD_DEFERRED;
    if (ld_heap_deferred_holds(heap, place)) settle_deferred_at(heap, place, NULL, NULL, by_purge);
  }
  ld_heap_reset_deferred(heap);
}
void ld_cache_settle_deferred(heap_t *heap) { settle_deferred(heap, false); }

bool ld_cache_defer(heap_t *heap, void *p, ld_bin_t *bin) {
  unsigned place = ld_heap_deferred_oldest(heap);
  /* p's tag first: a double free of p is reported before p waits */
  if (ld_block_is_free((ld_block_t *)p)) ld_fatal_bad_free("double free", p);
  bool flushed = false;
  if (ld_heap_deferred_holds(heap, place)) {
    flushed = settle_deferred_at(heap, place, p, bin, false);
  } else {
    ld_deferred_t *entry = &heap->deferred[place];
    LD_OWNER_SET(entry->block, (ld_block_t *)p);
    LD_OWNER_SET(entry->bin, bin);
  }
  LD_OWNER_SET(heap->deferred_at, (uintptr_t)((place + 1) % LD_DEFERRED) * sizeof(ld_deferred_t));
  return flushed;
}

void ld_cache_settle_deferred_now(heap_t *heap) {
  if (!deferred_waiting(heap) && !slow_frees_waiting(heap)) return;
  ld_cache_enter(heap);
  settle_slow_frees(heap);
  settle_deferred(heap, false);
  ld_cache_leave(heap);
}

/* Bin c's limit lowered to `limit` (bin_grow's growth given back), its oldest blocks past it
 * flushed first. In the cache. */
static void bin_shrink(heap_t *heap, unsigned c, uint32_t limit) {
  ld_bin_t *bin = ld_heap_bin(heap, c);
  if (bin->count > limit) bin_flush(heap, c, bin->count - limit);
  bin_set_limit(heap, c, limit);
}

void ld_cache_trim(heap_t *heap) {
  if (LD_READ(heap->medium_late_count)) { /* the tails of spans it handed out since its last trim */
    remote_enter(heap);
    medium_late_list(heap, heap->medium_late_count);
    remote_leave(heap);
  }
  /* spans returned by other threads count as kept: they stay while the owner uses the cache (and
   * so does a grown bound, with or without spans) */
  if (LD_READ(heap->medium_cached) || medium_returned_holds(heap) || atomic_load_explicit(&heap->medium_extra, memory_order_relaxed)) {
    remote_enter(heap);
    if (heap->medium_cache_used) {
      heap->medium_cache_used = false;
      remote_leave(heap);
    } else {
      medium_cache_empty_and_leave(heap);
      ld_cache_medium_drain_returned(heap);
    }
  }
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1) {
    unsigned c = ld_class_set_first(set_up);
    ld_bin_t *bin = ld_heap_bin(heap, c);
    uint32_t first = bin_first_limit(c);
    if (!(bin->refilled & BIN_REFILLED)) {
      /* three quarters go back, and what a grown bin holds past its first limit: one flush */
      uint32_t keep = bin->count - (bin->count * 3u + 3u) / 4;
      if (keep > first) keep = first;
      if (bin->count > keep) bin_flush(heap, c, bin->count - keep);
      if (bin->fill > first_fill(bin, c)) bin->fill = (uint8_t)(bin->fill / 2 > first_fill(bin, c) ? bin->fill / 2 : first_fill(bin, c));
      if (bin->limit > first) bin_set_limit(heap, c, first); /* its growth back */
    } else if (!(bin->refilled & BIN_CYCLED) && bin->limit > first) {
      bin_shrink(heap, c, first + (bin->limit - first) / 2); /* in use, but no longer cycling */
    }
    bin->refilled &= BIN_FLUSHED_LAST;
  }
  remote_send_all(heap);
}

/* ---- medium spans ----
 *
 * A medium span (above the largest class, up to 2 MiB: whole chunks of a segment) costs the
 * segment lock at its malloc and again at its free, and bookkeeping under it (fits, splits,
 * coalescing, the bounds of resident pages): about 900 instructions a malloc+free pair, and
 * under threads a contended lock (issue 17: 20-60 KiB churn ran at 0.28x tcmalloc's
 * operations per CPU-second at one thread, 0.086x at two). A thread keeps the medium spans it
 * frees, up to LD_MEDIUM_CACHE_SPANS (64) of them and its bound of chunks, medium_cache_kb
 * grown up to medium_cache_max_kb where the bound fails (medium_cache_missed) (a span of more
 * than half of that goes back at once: with a quarter, a 256 KiB block, whose header makes it
 * five chunks, was never kept, and passed between threads it crossed the segment lock twice,
 * 2.8x the CPU a block), and its next medium malloc takes one that has
 * exactly the chunks it needs (medium_cache_choose), as jemalloc's and tcmalloc's thread caches
 * serve their larger classes. A kept span stays in use for its segment, so nothing of
 * segment.c changes; it is handed out again where its segment would have left it off the list
 * of tails (its old pages reach at most half as far again as the new block; the new bound is
 * written with ld_segment_retouch) or, when no kept span of its chunks is, marked for late
 * listing (medium_late_note); a span on that list is kept, taken off it, only by an owner
 * whose kept spans served 32 mallocs (ld_cache_medium_free). The oldest goes back when the
 * cache is full; all go back at thread
 * exit and malloc_trim, when a delay passes without the owner taking one (ld_cache_trim), and
 * when the thread stops calling (the purge, ld_cache_medium_drain_idle). The cache is the
 * owner's: it marks itself in its remote buffer around it (remote_enter), so that the purge
 * empties the cache of an idle thread only while the thread is out of it, as it sends the
 * thread's batches (the two meet as in Dekker's algorithm, the purge's membarrier the fence).
 * No lock and no atomic operation: the heap's lock taken and given back, two locked
 * instructions that waited for every store before them to reach the cache, cost churn of
 * fixed 32 KiB blocks, which writes each block's ends before the next free, a quarter of its
 * CPU (50-59 -> 38-42 ns a replacement).
 *
 * A span another thread frees goes back to the thread that allocated it (its owner, set as it
 * is handed out: large.c, span_init), as a small block goes back to its superblock's owner
 * (Hoard §3): put in a slot of the owner's ring of returned spans (heap_t, medium_returned)
 * with one CAS, no lock, with its chunks and how far its old pages reach, and taken, into the
 * cache, by the owner's next medium malloc, which reads the slots (four to a line) and no span
 * header: a stack linked through the headers made that a chain of loads of lines the freer's
 * core held, a fifth of a producer's CPU (remote-free of 16-256 KiB blocks, one pair: 0.71-0.85x
 * the CPU a block with the ring). Kept by the freer instead, a span freed by a consumer that
 * never allocates sat in its cache until pushed out to the segments, and its producer took a
 * new one there: every block of a producer/consumer pair of 16-256 KiB buffers crossed the
 * segment lock twice, contended (remote-free at those sizes: 1,480 CPU ns a block, tcmalloc
 * 210). The ring holds no more than the owner's cache bound (grown or not) in chunks, and 64
 * spans, besides what the cache holds (medium_return; a freer that finds it full keeps the
 * span itself); an owner that stopped calling or exited has it emptied by the purge
 * (ld_cache_medium_drain_idle, ld_cache_medium_drain_returned), which the push that finds the
 * ring empty makes due. */

/* Takes slot i out of the cache (the newer ones move down). In the cache (remote_enter). */
static sb_t *medium_cache_remove(heap_t *heap, unsigned i) {
  sb_t *span = heap->medium_cache[i].span;
  uint32_t bytes = heap->medium_cache[i].bytes;
  unsigned n = heap->medium_cached;
  for (; i + 1 < n; i++) heap->medium_cache[i] = heap->medium_cache[i + 1];
  heap->medium_cache[n - 1].span = NULL;
  LD_OWNER_SET(heap->medium_cached, n - 1);
  LD_OWNER_SET(heap->medium_cached_bytes, heap->medium_cached_bytes - (int64_t)bytes);
  return span;
}

/* A heap's medium traffic is heavy once its kept spans served this many mallocs; the bytes its
 * hits fault are averaged over as many (medium_cache_take_fit). Before, it hands out no span
 * with old pages past the rule and gives listed spans back to their segments. */
#define MEDIUM_HITS_WINDOW 32u
static inline bool medium_heavy(const heap_t *heap) { return heap->medium_hits >= MEDIUM_HITS_WINDOW; }

/* medium_cache_choose's last resort: of the kept spans of `bytes` bytes of chunks, the one whose
 * old pages reach least; -1: none. */
static LD_NOINLINE int medium_cache_choose_late(const heap_t *heap, uint32_t bytes) {
  int least = -1;
  uint32_t least_reach = UINT32_MAX;
  for (unsigned i = heap->medium_cached; i-- > 0;) {
    const ld_medium_kept_t *k = &heap->medium_cache[i];
    if (k->bytes == bytes && k->reach < least_reach) {
      least = (int)i;
      least_reach = k->reach;
    }
  }
  return least;
}

/* The kept span for a block that touches `touch` bytes, of the chunks it needs: of those whose
 * old pages reach at most half as far again (segment.c's tails), the newest whose resident
 * pages may cover the block (it faults none it need not), else the one that reaches furthest;
 * and when none does, the one whose old pages reach least (*late: its tail is to be listed
 * late, medium_late_note), unless the hits lately faulted pages. The spans other threads
 * returned are looked at only after that (taken first, they cost remote-free of 16-256 KiB
 * blocks 1.07-1.16x the CPU a block). -1: none. (A choice of the best among all by new pages,
 * then old ones, cost 190 instructions a malloc for the same hits.) In the cache. */
static int medium_cache_choose(const heap_t *heap, size_t touch, bool *late) {
  uint32_t bytes = (uint32_t)ld_round_up(touch, ld_sb_size), most = (uint32_t)(touch + touch / 2);
  int best = -1;
  uint32_t best_reach = 0;
  for (unsigned i = heap->medium_cached; i-- > 0;) {
    const ld_medium_kept_t *k = &heap->medium_cache[i];
    if (k->bytes != bytes || k->reach > most) continue;
    if (k->reach >= touch) return (int)i;
    if (k->reach >= best_reach) {
      best = (int)i;
      best_reach = k->reach;
    }
  }
  if (LD_LIKELY(best >= 0)) return best;
  /* While the hits fault pages, spans whose old pages reach far are kept for the larger
   * requests that would otherwise fault: taken for small ones, at 20,000 live blocks of 20-60
   * KiB they made the hits fault twice the bytes, 1.4-1.6x the CPU and 1.2-1.4x the RSS. Where
   * the hits fault nothing, every kept span's old pages cover what any request touches. And
   * not before 32 hits: a program with a few medium blocks keeps the rule (the sqlite trace's
   * one late hit among its 9 medium mallocs cost it 1.6 points of fragmentation). */
  if (!medium_heavy(heap) || heap->medium_hit_faults > LD_LATE_FAULTS_MAX) return -1;
  *late = true;
  return medium_cache_choose_late(heap, bytes);
}

/* The spans of the list of late tails, from the oldest, n of them: each still marked and still
 * this heap's goes on the segments' list of tails (segment.c, ld_segment_list_late), one lock
 * for all. The owner in its cache, or the purge for an owner out of it. */
static void medium_late_list(heap_t *heap, unsigned n) {
  unsigned count = heap->medium_late_count;
  if (!n) return;
  ld_segment_list_late((void *const *)heap->medium_late, n, heap);
  memmove(heap->medium_late, heap->medium_late + n, (count - n) * sizeof heap->medium_late[0]);
  LD_OWNER_SET(heap->medium_late_count, count - n);
}

/* A kept span handed out again with old pages past half as far again as its block (only while
 * the hits fault almost nothing: medium_cache_choose): rather than the segment lock to list it
 * (which its segment would have done, ld_segment_alloc), it is marked, and listed late, with
 * the others, by the owner's trim, exit or malloc_trim, by the purge when the owner stops
 * calling, or when the list is full (the older half). Most blocks of a churn are freed
 * before: 20-60 KiB churn that writes each block's ends took 44% of its blocks from the
 * segments, under their lock, for the want of such a span (docs/results.md). The owner in its
 * cache. */
static LD_NOINLINE void medium_late_note(heap_t *heap, sb_t *span) {
  if (heap->medium_late_count == LD_MEDIUM_LATE) {
    /* the entries the owner's frees emptied go; if most are still there, the older half is
     * listed (with the listing, a free of such a span took the segment lock and gave it back to
     * its segment: 20-60 KiB churn, 1,000 live blocks, 1.18x the CPU) */
    unsigned n = 0;
    for (unsigned i = 0; i < LD_MEDIUM_LATE; i++)
      if (heap->medium_late[i]) heap->medium_late[n++] = heap->medium_late[i];
    LD_OWNER_SET(heap->medium_late_count, n);
    if (n > LD_MEDIUM_LATE / 4 * 3) medium_late_list(heap, n / 2);
  }
  ld_segment_mark_excess(span, heap->medium_late_count);
  heap->medium_late[heap->medium_late_count] = span;
  LD_OWNER_SET(heap->medium_late_count, heap->medium_late_count + 1);
  LD_STAT_INC(heap, medium_late_tails);
}

/* The growth of a thread's cache bound. A producer of 16-256 KiB buffers that a consumer frees
 * takes them back from its returned spans in bursts, more than 1 MiB holds, and
 * pushes the oldest out to the segments, from which its next malloc of another size then takes
 * one under the segment lock: at one pair, 40% of its mallocs were hits, and 60% of the CPU a
 * block went to the segments (remote-free-medium: 600 ns a block, tcmalloc 200). A fixed
 * 4 MiB bound (and 64 spans: 16 bound the count first) served 86% and cost 0.62-0.67x the CPU,
 * but it would hold 4 MiB in every thread of a server whose threads pass few medium blocks
 * (server-mix at 4 threads: 4% more peak RSS). So the bound grows only where it fails (by
 * the spans it pushes out: medium_cache_missed), doubling up to medium_cache_max_kb, and the
 * growth of all threads together stays within 4 times that (MEDIUM_EXTRA_TOTAL), so that a
 * server of many threads holds at most that much more (tcmalloc's thread caches share one
 * budget the same way). Up to 8 MiB, the pair ran at 0.52x the CPU but with 1 MiB more peak
 * RSS (median of 5); up to 4 MiB, 0.58x and the same RSS. The ring of returned spans grows
 * with the cache (medium_returned_extra). The growth is given back whenever the cache is
 * emptied:
 * at the trim after a purge delay in which the thread took no kept span, at its exit, at
 * malloc_trim, and by the purge when the thread stops calling. The spans a cache keeps stay
 * those of half medium_cache_kb at most (ld_cache_medium_free). */
#define MEDIUM_EXTRA_TOTAL 4
static _Atomic(size_t) medium_extra_total; /* the heaps' medium_extra, summed */

size_t ld_cache_medium_extra(void) { return atomic_load_explicit(&medium_extra_total, memory_order_relaxed); }

/* The bytes of chunks heap's cache may keep. */
static inline size_t medium_cache_bound(const heap_t *heap) {
  return LD_MEDIUM_CACHE_BYTES() + atomic_load_explicit(&((heap_t *)heap)->medium_extra, memory_order_relaxed);
}

/* The bound doubles, within the thread's and the process's limits. The owner, in its cache (the
 * purge changes medium_extra only while the owner is out of it: a store here and one there
 * never meet). */
static void medium_cache_grow(heap_t *heap) {
  size_t base = LD_MEDIUM_CACHE_BYTES(), extra = atomic_load_explicit(&heap->medium_extra, memory_order_relaxed);
  size_t most = (size_t)LD_OPTION(medium_cache_max_kb) << 10;
  if (base == 0 || base + extra >= most) return;
  size_t add = base + extra < most - (base + extra) ? base + extra : most - (base + extra);
  size_t total = atomic_load_explicit(&medium_extra_total, memory_order_relaxed);
  do {
    if (total + add > most * MEDIUM_EXTRA_TOTAL) return;
  } while (!atomic_compare_exchange_weak_explicit(&medium_extra_total, &total, total + add, memory_order_relaxed,
                                                  memory_order_relaxed));
  atomic_store_explicit(&heap->medium_extra, extra + add, memory_order_relaxed);
  atomic_store_explicit(&heap->medium_returned_extra, extra + add, memory_order_relaxed);
  LD_STAT_INC(heap, medium_cache_grows);
}

/* What the bound fails is judged by the spans it pushes out, as ARC's ghost lists judge a cache
 * (Megiddo and Modha, 2003): each one's chunks are remembered, and a miss of as many chunks
 * is one that a larger bound would have served. Where half of 64 misses in a row are such, the
 * bound doubles. A bound that grew at any miss after spans were pushed out raised server-mix's
 * peak RSS at 2 threads by 10-22% (its blocks of 100 KiB-2 MiB come in 33 chunk counts, and
 * grown to 4 MiB, the kept spans served a fifth of its medium mallocs); by this rule it does
 * not grow there. */
#define MEDIUM_GHOST_MISSES 64
static void medium_cache_forget(heap_t *heap) {
  memset(heap->medium_ghosts, 0, sizeof heap->medium_ghosts);
  heap->medium_ghost_count = 0;
  heap->medium_misses = heap->medium_ghost_hits = 0;
}

static inline unsigned medium_ghost_slot(size_t bytes) {
  size_t chunks = (bytes + ld_sb_size - 1) >> ld_sb_shift;
  return chunks < LD_MEDIUM_GHOST_CHUNKS ? (unsigned)chunks - 1 : LD_MEDIUM_GHOST_CHUNKS - 1;
}

static void medium_cache_missed_locked(heap_t *heap, size_t size) {
  if (!heap->medium_ghost_count) return;
  uint8_t *ghost = &heap->medium_ghosts[medium_ghost_slot(ld_medium_touch(size))];
  if (*ghost) {
    (*ghost)--;
    heap->medium_ghost_count--;
    heap->medium_ghost_hits++;
  }
  if (heap->medium_ghost_hits >= MEDIUM_GHOST_MISSES / 2) {
    medium_cache_grow(heap);
    medium_cache_forget(heap);
  } else if (++heap->medium_misses >= MEDIUM_GHOST_MISSES) {
    medium_cache_forget(heap);
  }
}

/* A medium malloc of `size` bytes that no kept or returned span served (the owner's, out of
 * its cache: it enters, since the purge empties an idle thread's cache, ghosts and growth
 * while the owner is out). The misses count from the first span pushed out: those of a cache
 * that never filled say nothing of its bound. */
static LD_NOINLINE void medium_cache_missed(heap_t *heap, size_t size) {
  remote_enter(heap);
  medium_cache_missed_locked(heap, size);
  remote_leave(heap);
}

/* The cache emptied: its growth goes back to the process's budget. */
static void medium_cache_shrink(heap_t *heap) {
  size_t extra = atomic_load_explicit(&heap->medium_extra, memory_order_relaxed);
  if (!extra) return;
  atomic_store_explicit(&heap->medium_extra, 0, memory_order_relaxed);
  atomic_store_explicit(&heap->medium_returned_extra, 0, memory_order_relaxed);
  atomic_fetch_sub_explicit(&medium_extra_total, extra, memory_order_relaxed);
}

/* The chunks a heap's returned spans may hold: its cache's bound (a span is at most 2 MiB, so
 * no sum of LD_MEDIUM_RETURN_SLOTS of them nears the low half's wrap) */
static uint32_t medium_returned_room(size_t bound) {
  size_t room = bound >> ld_sb_shift;
  return room < UINT16_MAX ? (uint32_t)room : UINT16_MAX;
}

#define MEDIUM_RETURN_MASK (LD_MEDIUM_RETURN_SLOTS - 1u)
static inline uint32_t ring_position(uint64_t word) { return (uint32_t)(word >> 32); }
static inline uint32_t ring_chunks(uint64_t word) { return (uint32_t)word; }

/* Pushes span (`chunks` chunks, its old pages reaching `reach`) onto heap's ring of returned
 * spans, unless the ring is full or would then hold more than `most` chunks: false. One CAS
 * claims the slot; a release store of its seq publishes it (the span's retirement, by this
 * thread, goes with it). The reader's word is read again only when the one self saw last (any
 * older value makes the ring look fuller, never emptier) says there is no room, as the inbox's
 * writers do: read at every push, it was a line from the owner's core each time. self: the
 * pushing thread's heap, or NULL. */
static bool medium_returned_push(heap_t *heap, sb_t *span, uint32_t chunks, uint32_t reach, uint32_t most, heap_t *self) {
  bool seen = self && self->medium_seen_owner == heap;
  /* (taken before pushed, with acquire: the pushes a reader has taken are then seen in
   * `pushed`, which is never behind it) */
  uint64_t taken = seen ? self->medium_seen_taken : atomic_load_explicit(&heap->medium_returned_taken, memory_order_acquire);
  uint64_t pushed = atomic_load_explicit(&heap->medium_returned, memory_order_relaxed);
  for (;;) {
    if (ring_position(pushed) - ring_position(taken) >= LD_MEDIUM_RETURN_SLOTS ||
        ring_chunks(pushed) - ring_chunks(taken) + chunks > most) {
      if (!seen) return false;
      seen = false; /* once more with the reader's word as it is */
      taken = atomic_load_explicit(&heap->medium_returned_taken, memory_order_acquire);
      pushed = atomic_load_explicit(&heap->medium_returned, memory_order_relaxed);
      continue;
    }
    uint64_t next = ((uint64_t)(ring_position(pushed) + 1) << 32) | (uint32_t)(ring_chunks(pushed) + chunks);
    if (atomic_compare_exchange_weak_explicit(&heap->medium_returned, &pushed, next, memory_order_relaxed, memory_order_relaxed))
      break;
  }
  if (self && !seen) self->medium_seen_owner = heap, self->medium_seen_taken = taken;
  uint32_t position = ring_position(pushed);
  ld_medium_slot_t *slot = &heap->medium_returned_slots[position & MEDIUM_RETURN_MASK];
  slot->span_chunks = (uintptr_t)span | chunks;
  slot->reach = reach;
  atomic_store_explicit(&slot->seq, position + 1, memory_order_release);
  /* an owner that never calls again leaves them to the purge (the ring looked empty: it may
   * have been, with the reader's word as seen) */
  if (ring_chunks(pushed) == ring_chunks(taken) && atomic_load_explicit(&ld_due_ns, memory_order_relaxed) == UINT64_MAX)
    ld_due_note(ld_os_now_coarse_ns());
  return true;
}

/* Pushes span (retired, not on the list of tails, its old pages reaching `reach`) onto its
 * owner's ring of returned spans; false if the ring holds its bound already. The bound is the
 * ring's own, not shared with the owner's cache: a producer's cache full of spans of other sizes
 * then closed it, and its consumer kept the spans, pushed them out to the segments and
 * contended for the segment lock with the producer (remote-free-medium, one pair: 254 -> 183
 * CPU ns a block). */
static bool medium_return(heap_t *owner, sb_t *span, size_t reach, heap_t *self) {
  uint32_t room =
      medium_returned_room(LD_MEDIUM_CACHE_BYTES() + atomic_load_explicit(&owner->medium_returned_extra, memory_order_relaxed));
  return medium_returned_push(owner, span, (uint32_t)(span->map_bytes >> ld_sb_shift), (uint32_t)reach, room,
                              self == &ld_heap_empty ? NULL : self);
}

/* Whether heap's ring holds spans, published or not (any thread). */
static bool medium_returned_holds(const heap_t *heap) {
  heap_t *h = (heap_t *)heap;
  return ring_position(atomic_load_explicit(&h->medium_returned, memory_order_relaxed)) !=
         ring_position(atomic_load_explicit(&h->medium_returned_taken, memory_order_relaxed));
}

/* Whether heap's ring has a span published at its reader's position (any thread; the owner's
 * poll reads the slot, a line the freers write only as they publish). */
static inline bool medium_returned_waiting(const heap_t *heap) {
  heap_t *h = (heap_t *)heap;
  uint32_t position = ring_position(atomic_load_explicit(&h->medium_returned_taken, memory_order_relaxed));
  return atomic_load_explicit(&h->medium_returned_slots[position & MEDIUM_RETURN_MASK].seq, memory_order_relaxed) ==
         position + 1;
}

/* The returned spans published in order from the reader's position, into out[] (at most
 * LD_MEDIUM_RETURN_SLOTS); returns how many. Any thread (the owner, the purge, a validation):
 * readers claim what they read with one CAS, and one that loses it to another takes nothing.
 * No span's header is read. */
static unsigned medium_returned_take(heap_t *heap, ld_medium_kept_t *out) {
  uint64_t taken = atomic_load_explicit(&heap->medium_returned_taken, memory_order_acquire);
  uint32_t position = ring_position(taken), chunks = 0, read = 0;
  unsigned n = 0;
  /* (a slot is not written again before the reader's position passes it: what is read here
   * stays until the CAS below, which fails if another reader took it meanwhile) */
  for (; read < LD_MEDIUM_RETURN_SLOTS; read++, position++) {
    ld_medium_slot_t *slot = &heap->medium_returned_slots[position & MEDIUM_RETURN_MASK];
    if (atomic_load_explicit(&slot->seq, memory_order_acquire) != position + 1) break;
    uintptr_t span_chunks = slot->span_chunks, low = ld_sb_size - 1;
    if (!span_chunks) continue; /* (a fork's) */
    out[n++] = (ld_medium_kept_t){(sb_t *)(span_chunks & ~low), (uint32_t)((span_chunks & low) << ld_sb_shift), slot->reach};
    chunks += (uint32_t)(span_chunks & low);
  }
  if (!read) return 0;
  uint64_t next = ((uint64_t)position << 32) | (uint32_t)(ring_chunks(taken) + chunks);
  if (!atomic_compare_exchange_strong_explicit(&heap->medium_returned_taken, &taken, next, memory_order_acq_rel,
                                               memory_order_relaxed))
    return 0;
  return n;
}

static void medium_release_kept(const ld_medium_kept_t *spans, unsigned n) {
  for (unsigned i = 0; i < n; i++) ld_medium_release(spans[i].span);
}

void ld_cache_medium_after_fork(heap_t *heap) {
  uint64_t taken = atomic_load_explicit(&heap->medium_returned_taken, memory_order_relaxed);
  uint64_t pushed = atomic_load_explicit(&heap->medium_returned, memory_order_relaxed);
  uint32_t chunks = 0;
  for (uint32_t position = ring_position(taken); position != ring_position(pushed); position++) {
    ld_medium_slot_t *slot = &heap->medium_returned_slots[position & MEDIUM_RETURN_MASK];
    if (atomic_load_explicit(&slot->seq, memory_order_relaxed) == position + 1) {
      chunks += (uint32_t)(slot->span_chunks & (ld_sb_size - 1));
      continue;
    }
    /* claimed by a thread the child does not have, which had retired its span: the span stays
     * out of use in the child (as one that thread held between its retirement and its push) */
    slot->span_chunks = 0;
    atomic_store_explicit(&slot->seq, position + 1, memory_order_relaxed);
  }
  /* the chunks of the unwritten slots leave the count */
  atomic_store_explicit(&heap->medium_returned, ((uint64_t)ring_position(pushed) << 32) | (uint32_t)(ring_chunks(taken) + chunks),
                        memory_order_relaxed);
}

/* Whether the cache can keep a span of `bytes` more (its count and its bound), and the keeping
 * of one that it can. In the cache. */
static inline bool medium_cache_has_room(const heap_t *heap, size_t bytes, size_t bound) {
  return heap->medium_cached < LD_MEDIUM_CACHE_SPANS && (size_t)heap->medium_cached_bytes + bytes <= bound;
}
static inline void medium_cache_push(heap_t *heap, sb_t *span, uint32_t bytes, uint32_t reach) {
  unsigned n = heap->medium_cached;
  heap->medium_cache[n] = (ld_medium_kept_t){span, bytes, reach};
  LD_OWNER_SET(heap->medium_cached, n + 1);
  LD_OWNER_SET(heap->medium_cached_bytes, heap->medium_cached_bytes + (int64_t)bytes);
}
/* Keeps span (retired, `bytes` bytes of chunks, reaching `reach`) in the cache, the oldest
 * pushed out into old[] (at most LD_MEDIUM_CACHE_SPANS) to make room, each remembered as a
 * ghost; returns how many. In the cache. (Scalars, not an ld_medium_kept_t: a medium free that
 * built one on its stack for it ran 1.1x the CPU on 20-60 KiB churn. Its fields were stored as
 * 8, 4 and 4 bytes and copied with one 16-byte load, which store forwarding cannot serve: the
 * load waited for every older store to reach the cache, the program's cold ones included.) */
static inline __attribute__((always_inline)) unsigned medium_cache_keep(heap_t *heap, sb_t *span, uint32_t bytes,
                                                                       uint32_t reach, size_t bound, sb_t **old) {
  unsigned n_old = 0;
  while (!medium_cache_has_room(heap, bytes, bound)) {
    uint8_t *ghost = &heap->medium_ghosts[medium_ghost_slot(heap->medium_cache[0].bytes)];
    if (*ghost < UINT8_MAX) {
      (*ghost)++;
      heap->medium_ghost_count++;
    }
    old[n_old++] = medium_cache_remove(heap, 0);
  }
  medium_cache_push(heap, span, bytes, reach);
  return n_old;
}

/* medium_cache_keep's case of a full cache, and the owner's leaving it: out of line, so
 * that the array of spans pushed out is not in every medium free's frame (216 bytes and six
 * registers saved). */
static LD_NOINLINE void medium_cache_keep_full_and_leave(heap_t *heap, sb_t *span, uint32_t bytes, uint32_t reach,
                                                         size_t bound) {
  sb_t *old[LD_MEDIUM_CACHE_SPANS];
  unsigned n_old = medium_cache_keep(heap, span, bytes, reach, bound, old);
  remote_leave(heap);
  for (unsigned i = 0; i < n_old; i++) ld_medium_release(old[i]); /* out of the cache */
}

/* The purge must come back for kept spans: a free that keeps one may poll nothing (alloc.c,
 * span_poll_due), and a purge run that found this thread idle with nothing kept set no deadline
 * at all, so a thread that then froze with spans kept held them for good (found in review: one
 * malloc, an idle spell, a free, no call after). While spans stay kept, every purge run that
 * finds the thread busy sets the next deadline itself (ld_cache_holds). A deadline already set
 * will do (that run finds the spans kept): the clock is read only when none is, 19 of the ~510
 * instructions of a malloc and free of 100 KB that the kept spans serve. */
static void medium_cache_note_first(bool first) {
  if (first && atomic_load_explicit(&ld_due_ns, memory_order_relaxed) == UINT64_MAX) ld_due_note(ld_os_now_coarse_ns());
}

/* The spans other threads returned, into the cache (owner only). */
static void medium_cache_take_returned(heap_t *heap) {
  ld_medium_kept_t returned[LD_MEDIUM_RETURN_SLOTS];
  unsigned n = medium_returned_take(heap, returned), n_out = 0;
  if (!n) return;
  size_t bound = medium_cache_bound(heap);
  sb_t *out = NULL; /* (spans pushed out, linked through their headers: this thread's now) */
  remote_enter(heap);
  bool first = heap->medium_cached == 0;
  for (unsigned r = 0; r < n; r++) {
    /* (its freer read its reach and cleared its mark, and gave it to its segment had it been
     * listed) */
    const ld_medium_kept_t *k = &returned[r];
    if (k->reach && k->bytes <= LD_MEDIUM_CACHE_BYTES() / 2) {
      sb_t *old[LD_MEDIUM_CACHE_SPANS];
      for (unsigned i = medium_cache_keep(heap, k->span, k->bytes, k->reach, bound, old); i-- > 0;) {
        old[i]->next = out;
        out = old[i];
      }
    } else { /* the bound changed */
      returned[n_out++] = *k;
    }
  }
  first = first && heap->medium_cached;
  remote_leave(heap);
  medium_release_kept(returned, n_out); /* out of the cache */
  while (out) {
    sb_t *next = out->next;
    ld_medium_release(out);
    out = next;
  }
  medium_cache_note_first(first);
}

/* A kept span for `size` bytes, or NULL. In the cache. */
static inline __attribute__((always_inline)) void *medium_cache_take_fit(heap_t *heap, size_t size) {
  size_t touch = ld_medium_touch(size);
  bool late = false;
  int i = medium_cache_choose(heap, touch, &late);
  if (i < 0) return NULL;
  uint32_t reach = heap->medium_cache[i].reach, bytes = heap->medium_cache[i].bytes;
  /* the bytes the hits fault, on average over each MEDIUM_HITS_WINDOW */
  if (touch > reach) heap->medium_faulted += (uint32_t)touch - reach;
  if (++heap->medium_hits % MEDIUM_HITS_WINDOW == 0) {
    heap->medium_hit_faults = heap->medium_faulted / MEDIUM_HITS_WINDOW;
    heap->medium_faulted = 0;
  }
  sb_t *span = medium_cache_remove(heap, (unsigned)i);
  void *p = ld_medium_reuse(span, bytes, reach, touch, heap);
  if (LD_UNLIKELY(late)) medium_late_note(heap, span);
  heap->medium_cache_used = true;
  LD_STAT_INC(heap, medium_cache_hits); /* (heap: a thread's own, which alone keeps spans) */
  return p;
}

static inline __attribute__((always_inline)) void *medium_cache_alloc_kept(heap_t *heap, size_t size) {
  if (!LD_READ(heap->medium_cached)) return NULL;
  remote_enter(heap);
  void *p = medium_cache_take_fit(heap, size);
  remote_leave(heap);
  return p;
}

/* None of the kept spans fits: the spans other threads returned join the cache, and one may. */
static LD_NOINLINE void *medium_cache_alloc_returned(heap_t *heap, size_t size) {
  medium_cache_take_returned(heap);
  return medium_cache_alloc_kept(heap, size);
}

void *ld_cache_medium_alloc(heap_t *heap, size_t size) {
  if (size > ld_medium_max) return NULL;
  void *p = medium_cache_alloc_kept(heap, size);
  if (p) return p;
  /* (the ring is not read by a thread whose own frees serve it) */
  if (medium_returned_waiting(heap) && (p = medium_cache_alloc_returned(heap, size)))
    return p;
  if (heap != &ld_heap_empty) medium_cache_missed(heap, size); /* (the segments serve it) */
  return NULL;
}

/* A retired span (not on the list of tails) that another thread allocated, or that a thread
 * without a heap frees: onto its owner's ring, or back to its segment when this thread has
 * no cache; false: the caller keeps it in this thread's cache. */
static LD_NOINLINE bool medium_free_other(heap_t *heap, sb_t *span, heap_t *owner, size_t reach) {
  if (owner != NULL && owner != &ld_heap_empty && medium_return(owner, span, reach, heap)) return true;
  if (heap != &ld_heap_empty) return false;
  ld_medium_release(span);
  return true;
}

bool ld_cache_medium_free(heap_t *heap, sb_t *span) {
  /* another thread's span goes back to it (a thread without a heap has none to keep it in) */
  heap_t *owner = atomic_load_explicit(&span->owner, memory_order_relaxed);
  bool other = LD_UNLIKELY(owner != heap);
  if (other && heap == &ld_heap_empty && (owner == NULL || owner == &ld_heap_empty)) return false;
  /* (the spans a cache keeps: up to half of medium_cache_kb, grown or not; grown, a cache kept
   * spans of up to 2 MiB, and churn-medium hit 3x as often, but ran no faster, and mapped
   * 216 MiB instead of 118 at its peak) */
  if (span->map_bytes > LD_MEDIUM_CACHE_BYTES() / 2) return false;
  size_t bound = medium_cache_bound(heap);
  ld_medium_retire(span);
  size_t reach = 0;
  if (other) { /* (unmarked, under the segment lock if it was marked) */
    reach = ld_segment_kept_reach(span, false, false, NULL);
    if (!reach) { /* on the list of tails: back to its segment, which takes it off */
      ld_medium_release(span);
      return true;
    }
    if (medium_free_other(heap, span, owner, reach)) return true;
  }
  remote_enter(heap);
  /* the owner clears the late mark itself, in its cache: no purge lists the span meanwhile */
  if (!other) {
    /* A span on the list of tails: kept, taken off the list, by a thread whose medium blocks are
     * many (its kept spans served 32): given back to its segment, it was listed again when the
     * segment handed it out, and never came back to the cache (20-60 KiB churn, 1,000 live
     * blocks: 70% of the mallocs served by kept spans instead of all, 1.2x the CPU). A
     * program with a few medium blocks gives it back, where its pages serve any request (the
     * sqlite trace: 19.0% fragmentation, kept 21.4%). */
    uint32_t slot;
    if (!(reach = ld_segment_kept_reach_own(span, medium_heavy(heap), &slot))) {
      remote_leave(heap);
      ld_medium_release(span); /* (on the list of tails) */
      return true;
    }
    /* its entry in the list of late tails, emptied (a slot moved since is left for the listing) */
    if (LD_UNLIKELY(slot < heap->medium_late_count) && heap->medium_late[slot] == span) heap->medium_late[slot] = NULL;
  }
  if (LD_UNLIKELY(!medium_cache_has_room(heap, span->map_bytes, bound))) {
    /* (not empty: no deadline to note) */
    medium_cache_keep_full_and_leave(heap, span, (uint32_t)span->map_bytes, (uint32_t)reach, bound);
    return true;
  }
  bool first = heap->medium_cached == 0;
  medium_cache_push(heap, span, (uint32_t)span->map_bytes, (uint32_t)reach);
  remote_leave(heap);
  medium_cache_note_first(first);
  return true;
}

/* Every kept span out of the cache, into spans[]; returns how many. In the cache. */
static unsigned medium_cache_empty(heap_t *heap, sb_t **spans) {
  unsigned n = 0;
  while (heap->medium_cached) spans[n++] = medium_cache_remove(heap, heap->medium_cached - 1);
  heap->medium_cache_used = false;
  medium_cache_forget(heap);
  medium_cache_shrink(heap);
  return n;
}

/* Every kept span back to its segment; the owner in its cache on entry, out of it on return. */
static void medium_cache_empty_and_leave(heap_t *heap) {
  sb_t *spans[LD_MEDIUM_CACHE_SPANS];
  unsigned n = medium_cache_empty(heap, spans);
  remote_leave(heap);
  for (unsigned i = 0; i < n; i++) ld_medium_release(spans[i]);
}

/* Whether heap's cache has anything a drain gives back: kept spans, late tails to list, a
 * grown bound (any thread). */
static bool medium_cache_holds_any(const heap_t *heap) {
  return LD_READ(heap->medium_cached) || LD_READ(heap->medium_late_count) ||
         atomic_load_explicit(&((heap_t *)heap)->medium_extra, memory_order_relaxed);
}

static void medium_cache_drain(heap_t *heap) {
  if (heap == &ld_heap_empty) return;
  ld_cache_medium_drain_returned(heap);
  if (!medium_cache_holds_any(heap)) return;
  remote_enter(heap);
  medium_late_list(heap, heap->medium_late_count);
  medium_cache_empty_and_leave(heap);
}

/* The purge, for a thread that stopped calling: as ld_cache_send_idle_batches, the purge marks
 * itself at work (remote_draining) and fences the owner, which is either out of its cache (its
 * busy mark clear: the spans are the purge's to take) or sees the mark as it enters and waits.
 * Without membarrier the kept spans wait for their owner's trim or exit. */
int ld_cache_medium_drain_idle(heap_t *heap) {
  ld_cache_medium_drain_returned(heap); /* (the ring is anyone's to take) */
  if (!medium_cache_holds_any(heap)) return 0;
  sb_t *spans[LD_MEDIUM_CACHE_SPANS];
  unsigned n = 0;
  int out = remote_drain_begin(heap);
  if (out == 1) {
    medium_late_list(heap, heap->medium_late_count); /* (its live spans' tails) */
    n = medium_cache_empty(heap, spans);
  }
  remote_drain_end(heap);
  for (unsigned i = 0; i < n; i++) ld_medium_release(spans[i]); /* the owner may go on meanwhile */
  return n ? 1 : out == 0 ? -1 : 0;
}

void ld_cache_medium_drain_returned(heap_t *heap) {
  ld_medium_kept_t returned[LD_MEDIUM_RETURN_SLOTS];
  medium_release_kept(returned, medium_returned_take(heap, returned));
}

/* Each kept span: a medium span freed (kind FREED) of whole chunks within the bound, the
 * count and bytes their sums. */
static void medium_cache_validate(heap_t *heap, int *violations) {
  remote_enter(heap);
  int64_t bytes = 0;
  if (heap->medium_cached > LD_MEDIUM_CACHE_SPANS) {
    ld_message("larder: validate: heap %p: %u medium spans kept, bound %u\n", (void *)heap, heap->medium_cached,
               LD_MEDIUM_CACHE_SPANS);
    (*violations)++;
  } else {
    for (unsigned i = 0; i < heap->medium_cached; i++) {
      const ld_medium_kept_t *k = &heap->medium_cache[i];
      const sb_t *span = k->span;
      if (span->magic != LD_SB_MAGIC || span->kind != LD_KIND_FREED || span->size_class != LD_CLASS_LARGE ||
          span->map_bytes == 0 || span->map_bytes % ld_sb_size || span->map_bytes > ld_medium_max ||
          k->bytes != span->map_bytes || k->reach == 0 || k->reach > k->bytes) {
        ld_message("larder: validate: heap %p: kept medium span %p is not a freed span of whole chunks (kind %u, %zu bytes, "
                   "kept as %u bytes reaching %u)\n",
                   (void *)heap, (const void *)span, span->kind, span->map_bytes, k->bytes, k->reach);
        (*violations)++;
      }
      bytes += (int64_t)span->map_bytes;
    }
  }
  if (bytes != heap->medium_cached_bytes) {
    ld_message("larder: validate: heap %p: kept medium spans hold %lld bytes, counted %lld\n", (void *)heap,
               (long long)bytes, (long long)heap->medium_cached_bytes);
    (*violations)++;
  }
  remote_leave(heap);
  /* The returned spans: taken (freers meanwhile push behind them), each checked, then pushed
   * back (those the ring has no room for meanwhile go to their segments). The count of chunks
   * is checked while no freer has a slot claimed and unwritten. */
  uint64_t pushed = atomic_load_explicit(&heap->medium_returned, memory_order_acquire);
  uint64_t taken = atomic_load_explicit(&heap->medium_returned_taken, memory_order_acquire);
  if (ring_position(pushed) - ring_position(taken) > LD_MEDIUM_RETURN_SLOTS) {
    ld_message("larder: validate: heap %p: %u returned medium spans, bound %u\n", (void *)heap,
               ring_position(pushed) - ring_position(taken), LD_MEDIUM_RETURN_SLOTS);
    (*violations)++;
    return;
  }
  ld_medium_kept_t returned[LD_MEDIUM_RETURN_SLOTS];
  unsigned n = medium_returned_take(heap, returned);
  uint32_t chunks = 0;
  for (unsigned i = 0; i < n; i++) {
    const ld_medium_kept_t *k = &returned[i];
    const sb_t *span = k->span;
    if (span->magic != LD_SB_MAGIC || span->kind != LD_KIND_FREED || span->size_class != LD_CLASS_LARGE ||
        span->map_bytes != k->bytes || span->map_bytes == 0 || span->map_bytes % ld_sb_size || span->map_bytes > ld_medium_max ||
        k->reach == 0 || k->reach > k->bytes || atomic_load_explicit(&span->owner, memory_order_relaxed) != heap) {
      ld_message("larder: validate: heap %p: returned medium span %p is not a freed span of its own (kind %u, %zu bytes, "
                 "returned as %u bytes reaching %u)\n",
                 (void *)heap, (const void *)span, span->kind, span->map_bytes, k->bytes, k->reach);
      (*violations)++;
    }
    chunks += k->bytes >> ld_sb_shift;
  }
  /* (no push, take or claim between the two reads and the take: the ring held just these) */
  uint64_t pushed_after = atomic_load_explicit(&heap->medium_returned, memory_order_acquire);
  if (pushed_after == pushed && ring_position(pushed) - ring_position(taken) == n &&
      ring_chunks(pushed) - ring_chunks(taken) != chunks) {
    ld_message("larder: validate: heap %p: returned medium spans hold %u chunks, counted %u\n", (void *)heap, chunks,
               ring_chunks(pushed) - ring_chunks(taken));
    (*violations)++;
  }
  for (unsigned i = 0; i < n; i++)
    if (!medium_return(heap, returned[i].span, returned[i].reach, NULL)) ld_medium_release(returned[i].span);
}

/* ---- the bins of a thread that stopped calling ----
 *
 * The blocks in an idle thread's bins keep their superblocks in use, all of them: after random
 * churn a bin's blocks come from as many superblocks as it has blocks (server-mix at 8
 * threads, idle: 2.2 MB of blocks kept 29.6 MB of superblocks). The purge empties them. The
 * fast paths take no lock and no atomic operation, so the two meet as the remote buffer's
 * owner and the purge do (above): the owner marks itself in bins_busy around everything that
 * touches its bins (a plain store at each end, on a line free writes anyway), the purge
 * sets bins_draining, turns the fast paths away from the bins (malloc's bin_of entries name
 * the heap's empty bin, free's span check fails), and fences every thread with
 * membarrier(). If the owner is then not marked, and the turn away still holds (the owner's
 * slow paths write the same entries: bins_still_turned_away), it is not in its bins and
 * cannot enter them: a fast path started after the fence finds the bins turned away and takes
 * its slow path, which waits in ld_cache_enter until the purge is done. Then the bins are flushed
 * (their blocks go back to their superblocks, where the purge's tidy gives empty ones back).
 * The owner turns its fast paths back itself, at its next slow path (its next malloc, or free
 * of a turned-away class, is one): it acquires the purge's writes through bins_draining first,
 * so even a CPU that reorders loads shows it the bins as the purge left them. */
static void bins_turn_back(heap_t *heap);

void ld_cache_wait_for_purge(heap_t *heap) {
  for (;;) {
    int state = __atomic_load_n(&heap->bins_draining, __ATOMIC_ACQUIRE);
    if (state == LD_BINS_IN_USE) return;
    /* Turned away: back, unless the purge takes them again first (then wait). The exchange
     * acquires the purge's writes to the bins; the purge may start again as soon as it is
     * done, but this thread is marked, so it will leave the bins alone and turn them away
     * again (this thread's next slow path turns them back). */
    if (state == LD_BINS_TURNED_AWAY &&
        __atomic_compare_exchange_n(&heap->bins_draining, &state, LD_BINS_IN_USE, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      bins_turn_back(heap);
      /* the thread's own frees made while its bins were turned away wait in the ring,
       * untagged: a second free of one would now take the fast path */
      settle_slow_frees(heap);
      return;
    }
    if (state != LD_BINS_DRAINING) continue;
    LD_BUSY_DEC(heap);
    while (__atomic_load_n(&heap->bins_draining, __ATOMIC_ACQUIRE) == LD_BINS_DRAINING) ld_os_yield();
    LD_BUSY_INC(heap);
    atomic_signal_fence(memory_order_seq_cst);
  }
}

static void bins_turn_away(heap_t *heap, ld_class_set_t classes) {
  for (unsigned g = 0; g <= LD_SMALL_LIMIT / 16; g++) __atomic_store_n(&heap->bin_of[g], ld_bin_of_entry(LD_CLASS_LARGE), __ATOMIC_RELAXED);
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++)
    if (ld_class_set_has(classes, c)) __atomic_store_n(&ld_heap_bin(heap, c)->span, 0, __ATOMIC_RELAXED);
}
/* Whether the turn away still holds, read once the owner was seen out of its bins after the
 * fence. The owner writes the same entries in its slow paths: it turns its bins back
 * (bins_turn_back) after a drain that its CAS back to in use let a new drain start, and
 * follows newly learned classes (ld_cache_classes_sync). A drain that turns them away
 * meanwhile may see the owner marked, or, the fence taking microseconds, already gone: then
 * the owner's stores may have landed after the drain's, and its next malloc pops the bin the
 * drain empties (tests/alloc/idle_drain_stress.c, LARDER_PURGE_DELAY_MS=1: a bin's count at
 * -1, or a block handed out twice, in 2-19% of runs). The owner's stores came before
 * its unmarking, which this thread read with acquire: they are seen here, and after them the
 * owner writes none until its next slow path, which waits for the drain. Not held: no drain
 * now (the owner's next slow path turns the bins back). */
static bool bins_still_turned_away(const heap_t *heap, ld_class_set_t classes) {
  uint16_t away = ld_bin_of_entry(LD_CLASS_LARGE);
  for (unsigned g = 0; g <= LD_SMALL_LIMIT / 16; g++)
    if (__atomic_load_n(&heap->bin_of[g], __ATOMIC_RELAXED) != away) return false;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++)
    if (ld_class_set_has(classes, c) && __atomic_load_n(&ld_heap_bin_const(heap, c)->span, __ATOMIC_RELAXED) != 0) return false;
  return true;
}
/* The owner's: its own fast paths read what it writes here in order. Every bin set up gets
 * its span back, not only those of bins_turned_classes: a drain that starts as soon as the
 * state is back in use rewrites that set meanwhile, and a class read from it half-written
 * would stay turned away (its frees slow) until a later drain named it again. */
static void bins_turn_back(heap_t *heap) {
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1) {
    unsigned c = ld_class_set_first(set_up);
    __atomic_store_n(&ld_heap_bin(heap, c)->span, bin_span(c), __ATOMIC_RELAXED);
  }
  bin_of_set(heap);
}

bool ld_cache_holds(const heap_t *heap) {
  if (LD_READ(heap->remote_bytes) || LD_READ(heap->outbox_open) || slow_frees_waiting(heap) || LD_READ(heap->medium_cached) ||
      LD_READ(heap->medium_late_count) || ld_heap_medium_returned_bytes(heap))
    return true;
  if (!__atomic_load_n(&heap->bins_ready, __ATOMIC_ACQUIRE)) return false;
  if (deferred_waiting(heap)) return true;
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1)
    if (LD_READ(ld_heap_bin_const(heap, ld_class_set_first(set_up))->count)) return true;
  return false;
}

/* Whether the bins turned away (classes) cover a free deferred now. Read once the owner was
 * seen out of its bins, with the bins turned away: from then on its slow paths wait, and its
 * fast path can defer a free only where one is deferred already. A free deferred between the
 * first look and the turn away (free_deferred_slow) would otherwise go into its bin from the
 * fast path of any bin not turned away while the purge settles it (thread_churn with a purge
 * delay of 0: "double free", about 1 run in 300). */
static bool drain_covers_deferred(const heap_t *heap, ld_class_set_t classes) {
  return !deferred_waiting(heap) || !(bins_set_up(heap) & ~classes);
}

int ld_cache_drain_idle(heap_t *heap) {
  if (!__atomic_load_n(&heap->bins_ready, __ATOMIC_ACQUIRE)) return 0;
  ld_class_set_t set_up = bins_set_up(heap), classes = 0; /* the bins set up; those holding blocks */
  for (ld_class_set_t left = set_up; left; left &= left - 1) {
    unsigned c = ld_class_set_first(left);
    if (LD_READ(ld_heap_bin(heap, c)->count)) classes |= LD_CLASS_BIT(c);
  }
  bool deferred = deferred_waiting(heap);
  if (!classes && !deferred) return 0;
  /* A deferred free goes to the bin of its class, which the free fast path of any class may
   * write: with one deferred, every bin is turned away (and only then does the purge touch
   * the deferred frees' places, below). */
  if (deferred) classes = set_up;
  /* From in use, or from turned away (the owner was in its bins last time and has not called
   * since): the owner may turn them back at this very moment, and one of the two wins. */
  int state = __atomic_load_n(&heap->bins_draining, __ATOMIC_ACQUIRE);
  if (state == LD_BINS_DRAINING ||
      !__atomic_compare_exchange_n(&heap->bins_draining, &state, LD_BINS_DRAINING, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    return -1;
  if (state == LD_BINS_TURNED_AWAY) classes |= ld_class_words_read(&heap->bins_turned_classes); /* still turned away */
  ld_class_words_set(&heap->bins_turned_classes, classes);
  bins_turn_away(heap, classes);
  int drained = -1;
  if (ld_os_fence_all_threads() == 0 && !__atomic_load_n(&heap->bins_busy, __ATOMIC_ACQUIRE) &&
      bins_still_turned_away(heap, classes) && drain_covers_deferred(heap, classes)) {
    /* The fast path of a bin not turned away may defer a free into an empty place at any
     * moment: the places are the purge's only when every bin is turned away. */
    if (!(set_up & ~classes)) settle_deferred(heap, true);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++)
      if (ld_class_set_has(classes, c)) bin_flush_blocks(heap, c, ld_heap_bin(heap, c)->count, true);
    drained = 1;
  }
  __atomic_store_n(&heap->bins_draining, LD_BINS_TURNED_AWAY, __ATOMIC_RELEASE);
  return drained;
}

/* At the exit of a thread whose heap will keep its bins (heap.c, ld_heap_park): bin c keeps up
 * to `keep` (half its first limit) of its newest blocks of the class's current superblock, which the park
 * keeps (so none of them is another heap's); the others go back. The slots are rearranged, those
 * going back first (bin_flush_blocks takes the front), each part in its order. (Inlined: called
 * apart, ld_cache_drain cost a thread's exit about 770 instructions more, callgrind.) */
static inline __attribute__((always_inline)) void bin_keep_current(heap_t *heap, unsigned c, unsigned keep) {
  ld_bin_t *bin = ld_heap_bin(heap, c);
  unsigned k = 0, going = 0, n = bin->count;
  const sb_t *current = heap->current[c];
  void *kept[LD_BIN_SLOTS];
  for (unsigned i = n; i-- > 0;) {
    void *b = bin->slots[i];
    if (k < keep && ld_sb_of(b) == current) kept[keep - 1 - k++] = b;
    else bin->slots[n - 1 - going++] = b;
  }
  if (!going) return;
  memmove(bin->slots, bin->slots + n - going, going * sizeof(void *));
  memcpy(bin->slots + going, kept + keep - k, k * sizeof(void *));
  bin_flush_blocks(heap, c, going, false);
}

void ld_cache_drain(heap_t *heap, bool keep_bins) {
  if (heap == &ld_heap_empty) return;
  settle_slow_frees(heap);
  settle_deferred(heap, false);
  if (!keep_bins) ld_heap_return_bins(heap);
  for (ld_class_set_t set_up = bins_set_up(heap); set_up; set_up &= set_up - 1) {
    unsigned c = ld_class_set_first(set_up);
    ld_bin_t *bin = ld_heap_bin(heap, c);
    uint32_t first = bin_first_limit(c);
    if (keep_bins) {
      bin_keep_current(heap, c, first / 2);
    } else {
      send_foreign(heap, bin->slots, bin->count, false);
      LD_OWNER_SET(bin->count, 0);
    }
    bin->refilled = 0;
    if (bin->limit != first) bin_set_limit(heap, c, first);
    bin->fill = (uint8_t)first_fill(bin, c); /* the next thread starts small */
  }
  remote_send_all(heap);
  medium_cache_drain(heap);
}
