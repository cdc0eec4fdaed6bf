/* Thread heaps: the superblocks a thread owns, Hoard's emptiness threshold, and the life of a
 * heap from a thread's first call to its exit.
 *
 * Hoard (seed 004 §3): each thread has its own heap; superblocks of one size class belong to
 * one heap at a time; a heap that falls below the emptiness threshold gives a superblock to the
 * global heap (global.c). The threshold keeps, for every heap and class,
 * (u >= a - K*S) or (u >= (1-f)*a), which bounds blowup to a constant factor (Hoard §4.1).
 *
 * The front end (cache.c) talks to a heap in batches only: ld_heap_fill moves free blocks
 * from the heap's superblocks into the thread's cache, ld_heap_return moves them back, and
 * Hoard's accounting (u, a, the threshold) is applied per batch. Frees by other threads arrive
 * as messages in the heap's inbox (a CAS per batch: internal.h, ld_message_t), or, when it is
 * full, on the superblocks' remote lists, where the first batch since the owner last looked
 * puts the superblock on the heap's pending list; a fill reads a bounded part of both,
 * whatever the number of superblocks the heap holds.
 *
 * The heap lock guards everything here. The owner takes it in its slow paths, uncontended;
 * another thread takes it with trylock to tidy an idle heap (ld_heap_tidy, from the purge) or
 * to collect frees for an idle owner (ld_heap_help_idle_owner). Lock order: the list of heaps,
 * heap locks, the large-span cache, the global heap, the segments.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The heap every thread starts with: its bins are empty (limit 0) and it owns nothing, so
 * the first malloc and free of a thread take the slow paths, which make the real heap. */
sb_t ld_sb_none;
/* Zero-initialised, so in .bss: an initialiser would put its 256 KB in the library's .data,
 * mapped from the file and partly faulted in by every process (about 200 KB of RSS before
 * main). Zero is what its fast paths need (bin_of sends every malloc to the empty bins[0], and
 * its table of owned superblocks is empty); ld_heap_empty_init sets the rest at start-up. */
heap_t ld_heap_empty;
/* The statistics read every heap's current superblocks: never a NULL one. */
static void heap_current_none(heap_t *heap) {
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) heap->current[c] = &ld_sb_none;
}
void ld_heap_empty_init(void) {
  heap_current_none(&ld_heap_empty);
  ld_heap_reset_deferred(&ld_heap_empty);
}
__thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec"))) = &ld_heap_empty;

static struct {
  ld_lock_t lock;            /* the list of heaps, and retired counters */
  heap_t *heaps;             /* every heap ever made; exited threads' are not live */
  heap_t *idle;              /* the heaps no thread uses, the last retired first (next_idle) */
  heap_t *orphans, *orphans_tail; /* live heaps made after their thread's exit hook (next_orphan) */
  size_t orphans_queued;
  ld_stats_t retired;        /* counters of heaps that were abandoned */
  _Atomic size_t live;
  _Atomic size_t parked_keeping; /* parked heaps that kept their current superblocks */
} heaps = {.lock = LD_LOCK_INIT};

/* Every heap made gets a ring id, its place in this table, which the marks of its slow frees
 * carry (internal.h, ld_ring_mark): an owner that finds a mark on its block looks in that one
 * heap's ring (cache.c, deferred_claim), a cost that no longer grows with the heaps. Two levels,
 * a page of ids mapped as the first heap of it is made. Ids run from 1; a heap made past
 * LD_RING_IDS - 1 (or when a page cannot be mapped) has none, and its slow frees go unmarked,
 * as with LARDER_REMOTE_FREE_CHECK=0. */
#define RING_IDS_PER_PAGE 512u
static heap_t **ring_pages[LD_RING_IDS / RING_IDS_PER_PAGE];
static unsigned ring_ids_given; /* heaps.lock */

static void ring_id_give(heap_t *heap) {
  unsigned id = ring_ids_given + 1;
  if (id >= LD_RING_IDS) return;
  heap_t **page = ring_pages[id / RING_IDS_PER_PAGE];
  if (!page) {
    void *mem;
    if (ld_os_map(RING_IDS_PER_PAGE * sizeof(heap_t *), &mem) != 0) return;
    page = mem;
    __atomic_store_n(&ring_pages[id / RING_IDS_PER_PAGE], page, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&page[id % RING_IDS_PER_PAGE], heap, __ATOMIC_RELEASE);
  ring_ids_given = id;
  heap->ring_id = (uint16_t)id;
}

heap_t *ld_heap_of_ring_id(unsigned id) {
  if (id == 0 || id >= LD_RING_IDS) return NULL;
  heap_t **page = __atomic_load_n(&ring_pages[id / RING_IDS_PER_PAGE], __ATOMIC_ACQUIRE);
  return page ? __atomic_load_n(&page[id % RING_IDS_PER_PAGE], __ATOMIC_ACQUIRE) : NULL;
}

/* At most this many parked heaps keep their classes' current superblocks (ld_heap_park): a
 * thread that ends while few others wait is followed by one that takes its heap at once (a
 * thread per task or connection), while the heaps of a wave of threads that ended together
 * wait, and what they kept is out of every other thread's reach until the purge; a thread
 * that takes one carves on in the kept superblocks instead of filling the global heap's. With
 * no limit, thread_churn (4,000 threads in waves of 16, the machine loaded) held up to 32.4
 * MiB, above its bound of 31.9; with two, 15.0-24.2 MiB (median 16.8) in 40 runs, against
 * 13.8-20.3 (15.4) when no heap kept them. larson-server's two chains need two for the
 * whole gain (one: 294 instructions per operation; two or more: 275; none: 317). */
#define PARKED_KEEP_CURRENT_MAX 2

/* A parked heap that kept its current superblocks stops counting: taken, or emptied. */
static void heap_unkeep(heap_t *heap) {
  if (!heap->kept_current) return;
  heap->kept_current = false;
  atomic_fetch_sub_explicit(&heaps.parked_keeping, 1, memory_order_relaxed);
}

ld_stats_t ld_stats_unowned;       /* events in threads without a heap, counted atomically */

/* Hysteresis (issue "server speed"): a heap that takes a superblock of a class within this
 * long after giving one of that class back earns more slack for it, so a producer/consumer
 * pair stops passing superblocks back and forth through the global heap. */
#define PINGPONG_WINDOW_NS 50000000u
#define BOOST_DECAY_NS     1000000000u
/* An owner that has made no slow-path call for this long, or that has not looked at half of
 * a whole superblock's worth of frees into it, is probably blocked (on a queue, a lock, a request):
 * the thread that frees into it collects them for it, so a producer that idles does not keep
 * every block its consumers freed (Hoard §2.2's P-fold blowup, which Hoard's locked free
 * avoids; tests/alloc/blowup_idle.c). */
#define HELP_IDLE_NS       100000000u
/* A fill looks at no more than this many superblocks (the bound every slow path keeps). */
#define FILL_MAX_SUPERBLOCKS 4

static void heap_lock(heap_t *heap) { ld_lock(&heap->lock); }
static void heap_unlock(heap_t *heap) { ld_unlock(&heap->lock); }

/* ---- the table of owned superblocks (read by the free fast path) ---- */

/* Every 64 KiB of the superblock has its slot (the fast path indexes by the block's address):
 * one slot for S up to 64 KiB, S / 64 KiB above. */
static void heap_own(heap_t *heap, sb_t *sb) {
  LD_OWNER_SET(heap->table_purged, false); /* (heap lock held, as by ld_heap_purge_parked_table) */
  for (uintptr_t a = (uintptr_t)sb; a < (uintptr_t)sb + ld_sb_size; a += (uintptr_t)1 << 16)
    LD_OWNER_SET(heap->owned[ld_owned_slot(a)], ld_owned_entry(heap, sb));
}
static void heap_disown(heap_t *heap, sb_t *sb) {
  for (uintptr_t a = (uintptr_t)sb; a < (uintptr_t)sb + ld_sb_size; a += (uintptr_t)1 << 16)
    if (heap->owned[ld_owned_slot(a)] == ld_owned_entry(heap, sb)) LD_OWNER_SET(heap->owned[ld_owned_slot(a)], 0);
}

/* ---- fullness groups ---- */

/* (1 - f) in 1/65536ths: the group boundaries are computed for every block a flush returns,
 * so without a floating-point multiply. Set at start and when f changes (maintain.c). */
static uint32_t keep_q16 = 49152;
void ld_heap_fraction_changed(void) { LD_OWNER_SET(keep_q16, (uint32_t)((1.0 - LD_OPTION(empty_fraction)) * 65536.0)); }

static inline int32_t class_release_blocks(uint32_t capacity) { return (int32_t)(((uint64_t)capacity * LD_READ(keep_q16)) >> 16); }

static int sb_group_of(const sb_t *sb) {
  int32_t used = sb->used, cap = (int32_t)sb->capacity, t = class_release_blocks(sb->capacity);
  if (used <= 0) return 0;
  if (used >= cap) return LD_GROUP_FULL;
  if (used <= t) return used <= t / 2 ? 1 : 2;
  return used <= t + (cap - t) / 2 ? 3 : 4;
}

static void heap_group_insert(heap_t *heap, sb_t *sb) {
  int g = sb_group_of(sb);
  unsigned c = sb->size_class;
  sb->group = (uint8_t)g;
  sb->prev = NULL;
  sb->next = heap->groups[c][g];
  if (sb->next) sb->next->prev = sb;
  heap->groups[c][g] = sb; /* move to front (Hoard §3.1): reuse what was freed last */
}

static void heap_group_remove(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class, g = sb->group;
  if (sb->prev) sb->prev->next = sb->next; else heap->groups[c][g] = sb->next;
  if (sb->next) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
  sb->group = LD_GROUP_NONE;
}

static inline bool sb_is_current(const heap_t *heap, const sb_t *sb) { return heap->current[sb->size_class] == sb; }

/* After sb's used count changed: a superblock in a group moves to the group it now belongs to. */
static void heap_regroup(heap_t *heap, sb_t *sb) {
  if (sb->group != LD_GROUP_NONE && sb_group_of(sb) != sb->group) {
    heap_group_remove(heap, sb);
    heap_group_insert(heap, sb);
  }
}

/* ---- Hoard's threshold ---- */

static int64_t heap_threshold(const heap_t *heap, unsigned c) {
  double f = LD_OPTION(empty_fraction);
  int64_t k = (int64_t)LD_OPTION(k) + heap->boost[c];
  int64_t by_k = heap->a[c] - k * ld_class_capacity_bytes[c];
  int64_t by_f = (int64_t)((1.0 - f) * (double)heap->a[c]);
  /* The invariant fails only when both hold: u < a - K*S and u < (1-f)*a (Hoard §3.1);
   * rounding by_f down keeps u == (1-f)*a on the legal side. */
  return by_k < by_f ? by_k : by_f;
}
/* Class c's boost, and the heap's sum with it (heap lock held; the caller recomputes the
 * threshold). */
static void heap_set_boost(heap_t *heap, unsigned c, unsigned boost) {
  heap->boost_total = (uint16_t)(heap->boost_total - heap->boost[c] + boost);
  heap->boost[c] = (uint8_t)boost;
}
/* After every change of a[c], boost[c] or the options (the validation walk checks it). */
static void heap_recompute_threshold(heap_t *heap, unsigned c) { heap->u_release[c] = heap_threshold(heap, c); }

static void heap_release_while_below(heap_t *heap, unsigned c);

/* f or K changed (larder_option_set): the group boundaries move with f, and a heap that the
 * new values leave outside Hoard's invariant gives superblocks back until it holds again, as
 * a flush would (a parked or idle thread's heap may see no flush for a long time; a soak that
 * changed the options under load found one 5 superblocks over: bench/soak.c --options-every). */
static void heap_options_changed(heap_t *heap) {
  heap->options_epoch = atomic_load_explicit(&ld_options_epoch, memory_order_relaxed);
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *all = NULL;
    for (int g = 0; g < LD_GROUP_COUNT; g++)
      while (heap->groups[c][g]) {
        sb_t *sb = heap->groups[c][g];
        heap_group_remove(heap, sb);
        sb->next = all;
        all = sb;
      }
    while (all) {
      sb_t *next = all->next;
      heap_group_insert(heap, all);
      all = next;
    }
    heap_recompute_threshold(heap, c);
    heap_release_while_below(heap, c);
  }
}

static inline void heap_check_options(heap_t *heap) {
  if (heap->options_epoch != atomic_load_explicit(&ld_options_epoch, memory_order_relaxed)) heap_options_changed(heap);
}

void ld_heaps_options_apply(void) {
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap) {
    heap_lock(h);
    heap_check_options(h);
    heap_unlock(h);
  }
}

/* A superblock that may be given back (at most (1-f) full): the head of group 0, 1 or 2, else
 * (with_current) the current one. If u < (1-f)a one of them is, since the others are all above
 * (1-f). empty_only: an empty one (group 0, or the current one unused), else none. */
static sb_t *heap_find_releasable(heap_t *heap, unsigned c, bool with_current, bool empty_only) {
  int last = empty_only ? 0 : LD_GROUP_RELEASABLE_MAX;
  for (int g = 0; g <= last; g++)
    if (heap->groups[c][g]) return heap->groups[c][g];
  if (!with_current) return NULL;
  sb_t *sb = heap->current[c];
  if (sb != &ld_sb_none && sb->used <= (empty_only ? 0 : class_release_blocks(sb->capacity))) return sb;
  return NULL;
}

static void heap_add_superblock(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class;
  LD_OWNER_ADD(heap->a[c], ld_class_capacity_bytes[c]);
  LD_OWNER_ADD(heap->u[c], (int64_t)sb->used * sb->block_size);
  LD_OWNER_ADD(heap->carved[c], sb->bump - sb->data);
  LD_OWNER_ADD(heap->superblocks_held, 1);
  heap_own(heap, sb);
  heap_recompute_threshold(heap, c);
}

/* The heap's current superblock of a class is watched (superblock.c) by a fill that finds it
 * current and will leave it blocks (it serves at least that fill and the next): frees pushed
 * onto it then announce nothing, and are counted when the heap stops watching it, here, or
 * when a fill takes its remote list. Until then it is as any superblock of the heap: a push
 * announces it, and the pending list's look counts it. Both count through its remote_seen, so
 * a push is counted once whichever way it comes. Watching and unwatching are each a locked
 * instruction, which waits for every store before it to reach the cache: the program's writes
 * to the blocks it just got. A class whose superblock lasts a fill or two (threadtest of
 * 4,000 B blocks, 16 to a superblock, 35 to a fill) paid both on every superblock, 13% of its
 * CPU samples; one that serves many fills (small blocks) is watched for all but its first, as
 * before, so a consumer's batches pushed back onto a producer's current superblock when the
 * inbox is full announce it once, not once per look. */
static void heap_set_current(heap_t *heap, sb_t *sb) { LD_OWNER_SET(heap->current[sb->size_class], sb); }
static void heap_count_remote(heap_t *heap, sb_t *sb, int fresh) {
  if (!fresh) return;
  LD_OWNER_ADD(heap->u[sb->size_class], -((int64_t)fresh * sb->block_size));
  LD_STAT_ADD(heap, remote_taken_bytes, (size_t)fresh * sb->block_size);
}
/* sb is no longer the current superblock of its class (the caller files it somewhere). */
static void heap_unwatch_current(heap_t *heap, sb_t *sb) {
  LD_OWNER_SET(heap->current[sb->size_class], &ld_sb_none);
  if (ld_sb_is_watched(sb)) heap_count_remote(heap, sb, ld_sb_unwatch(sb));
}

/* Hands sb to the global heap. The caller holds the heap and global locks. Blocks of sb that
 * the thread's cache still holds stay counted in sb's used: the cache finds at its next
 * flush that sb has another owner and frees them as remote frees (cache.c). */
static void heap_give_to_global(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class;
  if (sb_is_current(heap, sb)) heap_unwatch_current(heap, sb);
  else heap_group_remove(heap, sb);
  heap_disown(heap, sb);
  LD_OWNER_ADD(heap->u[c], -((int64_t)sb->used * sb->block_size));
  LD_OWNER_ADD(heap->a[c], -(ld_class_capacity_bytes[c]));
  LD_OWNER_ADD(heap->carved[c], -(sb->bump - sb->data));
  LD_OWNER_ADD(heap->superblocks_held, (size_t)-1);
  heap_recompute_threshold(heap, c);
  ld_global_put_locked(sb);
}

/* A heap that freed a large share of the process's blocks gives thousands of superblocks to the
 * global heap at once, a cold header each, under the global lock: every so many the lock goes
 * to a thread that waits for it, as in the global heap's release (global.c). (After 1.5 GB was
 * freed the longest wait was the segment lock's, ld_segment_free's; with that one handed over
 * too, no lock wait passed 0.4 ms.) */
#define GIVES_PER_TURN 16u

/* Gives superblocks of class c to the global heap while the class is below Hoard's threshold
 * (empty_only: empty ones only; partly used ones, if the class stays below, are due: see
 * heap_release_own_frees). Heap lock held. */
static void heap_release_below(heap_t *heap, unsigned c, bool empty_only) {
  if (!empty_only) heap->release_due &= ~(LD_CLASS_BIT(c));
  if (heap->u[c] >= heap->u_release[c]) return;
  uint64_t now = LD_READ(heap->last_slow_ns); /* the owner's slow path read the clock (alloc.c); (the purge may store it: cache.c, remote_send_at) */
  if (heap->boost[c] && now - heap->last_take_ns[c] > BOOST_DECAY_NS) {
    heap_set_boost(heap, c, heap->boost[c] / 2u);
    heap_recompute_threshold(heap, c);
    if (heap->u[c] >= heap->u_release[c]) return;
  }
  /* (looked for under the heap's lock alone: a teardown's flushes, below the threshold with no
   * superblock empty yet, take no global lock) */
  sb_t *sb = heap_find_releasable(heap, c, true, empty_only);
  if (sb) {
    ld_global_lock();
    unsigned given = 0;
    do {
      heap_give_to_global(heap, sb);
      LD_STAT_INC(heap, superblocks_to_global);
      heap->last_release_ns[c] = now;
      heap->released_own = empty_only ? heap->released_own | LD_CLASS_BIT(c) : heap->released_own & ~LD_CLASS_BIT(c);
      heap_recompute_threshold(heap, c);
      /* a class that was due gives up to all its superblocks at once */
      if (++given % GIVES_PER_TURN == 0) ld_global_let_waiters_in();
    } while (heap->u[c] < heap->u_release[c] && (sb = heap_find_releasable(heap, c, true, empty_only)));
    ld_global_unlock();
  }
  if (empty_only && heap->u[c] < heap->u_release[c]) heap->release_due |= LD_CLASS_BIT(c);
}

static void heap_release_while_below(heap_t *heap, unsigned c) { heap_release_below(heap, c, false); }

static void heap_release_each(heap_t *heap, ld_class_set_t classes, bool empty_only) {
  while (classes) {
    unsigned c = ld_class_set_first(classes);
    classes &= classes - 1;
    heap_release_below(heap, c, empty_only);
  }
}

static void heap_release_classes(heap_t *heap, ld_class_set_t classes) { heap_release_each(heap, classes, false); }

/* The thread's own frees (a flush) took class c below Hoard's threshold: its empty superblocks
 * go to the global heap at once, its partly used ones at the purge's next pass over the heap
 * (once a purge delay: heap_give_empty_locked), the thread's exit or idle drain, or a
 * validation, whichever comes first; meanwhile the class is due (release_due). Given at once,
 * as Hoard gives them, a thread freeing a large heap in random order gave away nearly every
 * superblock while most of its blocks still lived (they fall below (1-f) together), and each
 * later free went to the global heap under its lock: 10^6 frees of 256 B in random order, 83 ns
 * a free, 733,746 of them into the global heap; 37 ns kept until the pass (jemalloc 20,
 * tcmalloc 25). Frees collected from other threads still apply the threshold at once, so
 * Hoard's producer/consumer bound is as before; the heap's own frees make no new memory
 * needed, so what is due only waits to be offered to other heaps, for at most a purge delay. */
static void heap_release_own_frees(heap_t *heap, ld_class_set_t classes) { heap_release_each(heap, classes, true); }

/* ---- pending frees ---- */

/* The inbox's messages, `most` at most (each a batch of up to LD_REMOTE_BATCH blocks): each
 * batch goes on its superblock's inbox list (the fill that reaches it prefetches its blocks
 * from its hint: superblock.c), or on to the superblock's new owner. */
#define INBOX_GROUP 16u
/* A batch of one or two blocks goes straight into its class's bin when the owner reads its
 * inbox at a fill (to_bins) and the bin has room. Such batches are what scattered remote frees
 * send (churn-remote, 2 threads, 10^6 live blocks of 256 B: 1.3 blocks a batch; larson 1.8):
 * the message names both blocks, so neither they nor their superblock's header are read here,
 * where a delivery wrote the header and a link and the fill then read the batch's first block
 * (a line from the freer's core each; 16% of churn-remote's time at 10^6 waited on that read).
 * The superblock must be the heap's now (its table, as the free fast path asks). The blocks
 * stay counted in u and the superblock's used, as every cached block is, and carry the free
 * tag, which their freer wrote. (Hardened bins hold sealed blocks: not there.) Heap lock held,
 * by the owner in its bins. */
static bool inbox_to_bin(heap_t *heap, const ld_message_t *m) {
#ifdef LARDER_HARDENED
  (void)heap, (void)m;
  return false;
#else
  unsigned k = m->count;
  if (k == 0 || k > 2) return false;
  uintptr_t sb = (uintptr_t)ld_sb_of(m->head);
  uintptr_t owned_class = ld_heap_owned_class(heap, sb, sb);
  if (owned_class >= LD_OWNED_NONE) return false; /* not the heap's now */
  unsigned cls = ld_heap_place_class(heap, owned_class >> LD_OWNED_CLASS_SHIFT);
  ld_bin_t *bin = ld_heap_owned_bin(heap, owned_class);
  if (bin->count + k > bin->limit) return false; /* full (or not set up: limit 0) */
  bin->slots[bin->count] = m->head;
  if (k == 2) bin->slots[bin->count + 1] = ld_message_tail(m);
  LD_OWNER_SET(bin->count, bin->count + k);
  LD_STAT_ADD(heap, blocks_refilled, k); /* came into the bin (ld_stats_t: the mallocs' sum) */
  LD_STAT_ADD(heap, remote_taken_bytes, (size_t)k * ld_class_size[cls]);
  LD_STAT_ADD(heap, remote_to_bins, k);
  return true;
#endif
}
static ld_class_set_t heap_process_inbox(heap_t *heap, uint32_t most, uint32_t *taken, bool to_bins) {
  ld_class_set_t classes = 0;
  uint32_t n = 0;
  for (;;) {
    /* A group of messages is taken first and the lines of each batch's first and last blocks
     * (last written by the freer's core; a put writes them when another batch is there before
     * it, and the fill reads the first) asked for together, not waited for in turn. */
    ld_message_t group[INBOX_GROUP];
    unsigned k = 0, got = 0;
    for (; k < INBOX_GROUP && n + k < most && ld_inbox_take(heap, &group[got]); k++) {
      if (to_bins && inbox_to_bin(heap, &group[got])) continue;
      ld_prefetch_for_write(group[got].head);
      ld_prefetch_for_write(ld_message_tail(&group[got]));
      got++;
    }
    n += k;
    for (unsigned i = 0; i < got; i++) {
      sb_t *sb = ld_sb_deliver_message(heap, &group[i]);
      if (!sb) continue;
      heap_count_remote(heap, sb, group[i].count);
      heap_regroup(heap, sb);
      classes |= LD_CLASS_BIT(sb->size_class);
    }
    if (k < INBOX_GROUP) break;
  }
  *taken = n;
  return classes;
}

/* The inbox's messages (above), then the frees announced on heap's pending list (batches
 * that found the inbox full): each superblock's remote count leaves u (the blocks stay on its
 * remote list until a fill takes them, with no walk). Heap lock held. Returns the classes
 * whose u went down. The list, taken whole with one exchange, may hold as many superblocks
 * as the heap has (a consumer that frees into every superblock of its producer), each a cold
 * header: a fill, a flush or a freer's help looks at PENDING_PER_CALL of them and leaves the
 * rest in pending_taken for the next. That keeps pace with a producer's frees coming back (a
 * fill brings at most 61 blocks, and each remote batch announces at most one superblock); a
 * burst waits at most until the purge's tidy, which, like the statistics and a thread's exit,
 * looks at all (heap reuse, on a new thread's first call, looks at PENDING_PER_CALL). A
 * superblock waiting there stays announced, so it is neither given back to the segments nor
 * announced again (which would rewrite its link). The inbox's
 * messages and the pending list's superblocks are looked at `most` of each at most. */
#define PENDING_PER_CALL 64u
static LD_NOINLINE ld_class_set_t heap_process_pending_found(heap_t *heap, uint32_t most, uint32_t *looked, bool to_bins);
/* Every fill and flush asks; most find nothing waiting, which three loads tell without the
 * call (the call with its saved registers was 44 instructions). */
static inline ld_class_set_t heap_process_pending_some(heap_t *heap, uint32_t most, uint32_t *looked, bool to_bins) {
  if (LD_LIKELY(!heap->pending_taken && !atomic_load_explicit(&heap->pending, memory_order_relaxed) &&
                !ld_inbox_next(heap))) {
    if (looked) *looked = 0;
    return 0;
  }
  return heap_process_pending_found(heap, most, looked, to_bins);
}
static LD_NOINLINE ld_class_set_t heap_process_pending_found(heap_t *heap, uint32_t most, uint32_t *looked, bool to_bins) {
  sb_t *sb = heap->pending_taken;
  uint32_t messages = 0;
  ld_class_set_t classes = ld_inbox_next(heap) ? heap_process_inbox(heap, most < LD_INBOX_SLOTS ? most : LD_INBOX_SLOTS, &messages, to_bins) : 0;
  uint32_t n = 0;
  for (; n < most; n++) {
    if (!sb && !(sb = ld_sb_pending_take(heap))) break;
    sb_t *next = sb->pending_next;
    if (atomic_load_explicit(&sb->owner, memory_order_acquire) != heap) {
      ld_sb_announce(sb); /* it changed hands after it was announced: tell its owner */
    } else {
      int got = ld_sb_account_remote(sb, true);
      if (got) {
        heap_count_remote(heap, sb, got);
        heap_regroup(heap, sb);
        classes |= LD_CLASS_BIT(sb->size_class);
      }
    }
    sb = next;
  }
  heap->pending_taken = sb;
  if (looked) *looked = messages + n;
  return classes;
}
static ld_class_set_t heap_process_pending(heap_t *heap) { return heap_process_pending_some(heap, UINT32_MAX, NULL, false); }

/* ---- fill: the thread's cache of class cls is empty ---- */

/* A class-c superblock to allocate from: the fullest that still has a good share of its
 * blocks free (groups 3, 2, 1: Hoard §3.1 allocates from nearly-full superblocks to keep
 * the others emptying). A superblock of group 4 has less than f/2 of its blocks free: a fill
 * there yields a few blocks, and the next fill follows at once (a random-replacement heap
 * at steady state has every superblock there). So while the class has less than f/2 of its
 * bytes free, it grows by a superblock instead (NULL here); Hoard's invariant still holds,
 * since u then stays above (1-f)a. Empty superblocks (group 0) come before growing. */
static sb_t *heap_fullest(heap_t *heap, unsigned c) {
  static const int order[] = {3, 2, 1, 0};
  sb_t *sb = NULL;
  for (unsigned i = 0; i < sizeof order / sizeof order[0] && !sb; i++) sb = heap->groups[c][order[i]];
  if (!sb) {
    sb = heap->groups[c][4];
    int64_t free_bytes = heap->a[c] - heap->u[c];
    int64_t slack = (int64_t)(LD_OPTION(empty_fraction) / 2 * (double)heap->a[c]);
    if (slack < ld_class_capacity_bytes[c]) slack = ld_class_capacity_bytes[c];
    if (sb && free_bytes < slack) sb = NULL;
  }
  if (sb) heap_group_remove(heap, sb);
  return sb;
}

/* A superblock from the global heap (or a new one) becomes the heap's; hysteresis. */
static sb_t *heap_take_from_global(heap_t *heap, unsigned cls) {
  sb_t *sb = ld_global_take(heap, cls);
  if (!sb) return NULL;
  heap_add_superblock(heap, sb);
  uint64_t now = LD_READ(heap->last_slow_ns);
  /* One give-and-take is one event: the release it answers is used up. */
  if (heap->last_release_ns[cls] && now - heap->last_release_ns[cls] < PINGPONG_WINDOW_NS) {
    /* doubled (plus one), within the class's most (what its own frees emptied may earn more
     * than what other threads' frees did: internal.h) and what the heap's budget has left */
    unsigned most = ld_class_set_has(heap->released_own, cls) ? LD_BOOST_MAX : LD_BOOST_MAX_COLLECTED;
    unsigned boost = heap->boost[cls], grown = 2u * boost + 1u, left = LD_BOOST_BUDGET - heap->boost_total;
    if (grown > most) grown = most;
    if (grown < boost) grown = boost; /* (earned under the other most: kept until it decays) */
    if (grown > boost + left) grown = boost + left;
    heap_set_boost(heap, cls, grown);
    heap->last_release_ns[cls] = 0;
    heap_recompute_threshold(heap, cls);
  }
  heap->last_take_ns[cls] = now;
  return sb;
}

/* The free fast path takes a block equal to the slot above its bin's top (the block malloc
 * popped last) without the uncarved check (alloc.c, larder_free), so no slot above the top may
 * point into the uncarved blocks of the class's current superblock. Within one superblock's
 * life the uncarved range only shrinks, so no slot can come to point into it; a range that is
 * not within the last one (a new current superblock, or one formatted anew, whose blocks a
 * pointer from its earlier life may name) has every slot above the top turned to the bin's
 * own address, which no free equals. Those slots hold nothing the fast paths want: the fill has
 * just set the top, so the slot above it holds no block malloc popped last. All of them, not
 * only those that point into the range: a store per slot, which the compiler makes two slots a
 * store, against a load, a compare and a branch (a class that takes a new superblock at every
 * refill: threadtest of 1,000 B blocks, 159.9 -> 155.7 instructions a pair). At most
 * LD_BIN_SLOTS slots, only as a class changes superblocks. Owner, under its lock. */
static LD_NOINLINE void bin_scrub_uncarved(ld_bin_t *bin) {
  for (uint32_t i = bin->count; i < bin->limit; i++) bin->slots[i] = bin;
}

unsigned ld_heap_fill(heap_t *heap, unsigned cls, unsigned want) {
  ld_bin_t *bin = ld_heap_bin(heap, cls);
  heap_lock(heap);
  LD_STAT_INC(heap, refills);
  heap_check_options(heap);
  LD_OWNER_ADD(heap->looks, 1);
  uint32_t looked;
  /* (the owner, in its bins: batches of one or two go straight into them, inbox_to_bin) */
  ld_class_set_t classes = heap_process_pending_some(heap, PENDING_PER_CALL, &looked, true);
  LD_STAT_ADD(heap, refill_pending_examined, looked);
  unsigned arrived = bin->count; /* (the bin was empty: ld_cache_refill) */
  unsigned n = 0;
  want = arrived < want ? want - arrived : 0;
  for (int examined = 0; n < want && examined < FILL_MAX_SUPERBLOCKS; examined++) {
    sb_t *sb = heap->current[cls];
    /* (a superblock the fill turns to becomes current unwatched, if the take leaves it
     * anything; a later fill watches it if it will still have blocks after its take:
     * heap_set_current) */
    bool fresh = false;
    if (sb == &ld_sb_none) {
      sb = heap_fullest(heap, cls);
      if (!sb) sb = heap_take_from_global(heap, cls);
      if (!sb) break;
      fresh = true;
    } else if ((int64_t)sb->capacity - sb->used > (int64_t)(want - n) && !ld_sb_is_watched(sb)) {
      ld_sb_watch(sb);
      LD_STAT_INC(heap, superblocks_watched);
    }
    LD_STAT_INC(heap, superblocks_examined);
    int32_t before = sb->used;
    char *bump = sb->bump;
    ld_take_counts_t took = {0, 0, 0, false, false};
    n += ld_sb_take_blocks(sb, bin->slots + bin->count + n, want - n, bin->limit - bin->count - n, &took);
    LD_OWNER_ADD(heap->carved[cls], sb->bump - bump);
    LD_STAT_ADD(heap, remote_hinted, took.hinted);
    LD_STAT_ADD(heap, remote_hint_taken, took.hint_taken);
    if (took.restarted) LD_STAT_INC(heap, superblocks_restarted);
    LD_OWNER_ADD(heap->u[cls], (int64_t)(sb->used - before) * sb->block_size);
    if (took.remote_accounted) LD_STAT_ADD(heap, remote_taken_bytes, (size_t)took.remote_accounted * sb->block_size);
    if (n < want && !took.short_of_room) { /* sb has nothing left: it waits in its group until frees come back */
      if (!fresh) heap_unwatch_current(heap, sb);
      heap_group_insert(heap, sb);
      classes |= LD_CLASS_BIT(cls); /* frees counted as it stopped being watched lower u */
    } else if (fresh) {
      heap_set_current(heap, sb);
    }
    if (took.short_of_room) break; /* sb has more, in a batch the bin had no room for */
  }
  /* The count and the counter change together under the lock, which the statistics take: a
   * merge never sees the blocks both in the bin and not yet refilled (ld_heaps_stats). */
  LD_OWNER_SET(bin->count, bin->count + n);
  LD_STAT_ADD(heap, blocks_refilled, n);
  /* Collected frees lowered u: the threshold may have been crossed. */
  heap_release_classes(heap, classes);
  /* Only the current superblock may be partly carved (take_blocks returns less than asked
   * only when a superblock is exhausted, carving included): its uncarved blocks are the free
   * fast path's to refuse. */
  sb_t *cur = heap->current[cls];
  uintptr_t start = 0, len = 0;
  if (cur != &ld_sb_none) {
    start = (uintptr_t)cur->bump;
    len = (uintptr_t)(cur->data + (size_t)cur->capacity * cur->block_size) - start;
  }
  bool moved = len && (start < bin->uncarved_start || start + len > bin->uncarved_start + bin->uncarved_len);
  LD_OWNER_SET(bin->uncarved_start, start);
  LD_OWNER_SET(bin->uncarved_len, len);
  if (moved) bin_scrub_uncarved(bin);
  heap_unlock(heap);
  if (n + arrived == 0) errno = ENOMEM;
  return n + arrived;
}

/* ---- return: blocks from the thread's cache go back to their superblocks ---- */

/* ld_heap_return's work, heap lock held: returns the classes whose u fell. */
#define FLUSH_LOOKAHEAD 8u
static ld_class_set_t heap_return_locked(heap_t *heap, ld_bin_t *bin, void **blocks, unsigned n, unsigned *foreign_out) {
  unsigned foreign = 0;
  ld_class_set_t classes = 0;
  /* With the counter below, under the lock (as in ld_heap_fill). */
  LD_OWNER_SET(bin->count, bin->count - n);
  LD_STAT_INC(heap, flushes);
  /* A bin holds one class, and its blocks often come in runs of one superblock (a thread that
   * frees what it allocated): u falls once, and a superblock is regrouped once per run. */
  unsigned cls = ld_heap_bin_class(heap, bin);
  /* A run's blocks are linked to each other as they come, each in front of the one before
   * (the order one push at a time would give), and the chain goes on the superblock's free
   * list once, with its count: the inner loop stores one link a block and leaves the
   * superblock's list head and count alone until the run ends (a load, a mask, a compare and
   * a store a block; the mask is copied, as the stores could alias the global). */
  const uintptr_t mask = ld_sb_mask;
  for (unsigned i = 0; i < n;) {
    /* Blocks freed in random order over a large heap come one superblock each, whose header is
     * a cold line: fetched a few runs ahead (10^6 frees of 256 B in random order, one thread,
     * 8 alternating runs: 37.8 -> 34.4 ns a free; threadtest +0.1 instructions a pair). */
    if (i + FLUSH_LOOKAHEAD < n) __builtin_prefetch(ld_sb_of_masked(blocks[i + FLUSH_LOOKAHEAD], mask), 1);
    ld_block_t *b = blocks[i++];
    sb_t *sb = ld_sb_of_masked(b, mask);
    /* within a run the owner is known: it changes only under this lock */
    if (LD_UNLIKELY(atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap)) {
      blocks[foreign++] = b; /* its superblock was given away while the block was cached */
      continue;
    }
    ld_block_t *head = b, *tail = b;
    unsigned first = i - 1;
    ld_set_next(b, NULL);
    void **at = &blocks[i], **end = &blocks[n];
    for (; at < end; at++) {
      ld_block_t *next_block = *at; /* read once: the link stored below could alias blocks[] */
      if (ld_sb_of_masked(next_block, mask) != sb) break;
      ld_set_next(next_block, head);
      head = next_block;
    }
    i = (unsigned)(at - blocks);
    ld_sb_put_chain(sb, head, tail, (int32_t)(i - first));
    heap_regroup(heap, sb);
  }
  if (foreign < n) { /* a run went back */
    LD_OWNER_ADD(heap->u[cls], -(int64_t)(n - foreign) * ld_class_size[cls]);
    classes |= LD_CLASS_BIT(cls);
  }
  LD_STAT_ADD(heap, blocks_flushed, n); /* foreign ones too: they left the bin */
  *foreign_out = foreign;
  return classes;
}

void ld_heap_return(heap_t *heap, ld_bin_t *bin, void **blocks, unsigned n, unsigned *foreign_out) {
  heap_lock(heap);
  heap_check_options(heap);
  ld_class_set_t own = heap_return_locked(heap, bin, blocks, n, foreign_out);
  LD_OWNER_ADD(heap->looks, 1);
  ld_class_set_t collected = heap_process_pending_some(heap, PENDING_PER_CALL, NULL, false);
  heap_release_classes(heap, collected);
  heap_release_own_frees(heap, own & ~collected);
  heap_unlock(heap);
}

void ld_heap_reset_deferred(heap_t *heap) {
  for (unsigned i = 0; i < LD_DEFERRED; i++) {
    ld_block_t *sink = &heap->deferred_sinks[i];
    sink->tag = 0;
    LD_OWNER_SET(heap->deferred[i].block, sink);
    LD_OWNER_SET(heap->deferred[i].bin, &heap->deferred_sink_bin);
  }
  heap->deferred_sink_bin.count = 0;
}

void ld_heap_settle_deferred(heap_t *heap, unsigned place, ld_block_t *block, ld_bin_t *bin) {
  ld_deferred_t *entry = &heap->deferred[place];
  ld_bin_t *old_bin = entry->bin;
  ld_block_t *old = entry->block;
  if (!block) { /* the place's stand-in, its tag 0 again (cache.c, deferred_check) */
    block = &heap->deferred_sinks[place];
    block->tag = 0;
    bin = &heap->deferred_sink_bin;
  }
  heap_lock(heap);
  old_bin->slots[old_bin->count] = old;
  LD_OWNER_SET(old_bin->count, old_bin->count + 1);
  LD_OWNER_SET(entry->block, block);
  LD_OWNER_SET(entry->bin, bin);
  heap_unlock(heap);
}

/* Every bin's blocks back to their superblocks but those whose superblock is another heap's now,
 * left at the front of the bin (ld_heap_return_bins' caller sends them). Heap lock held;
 * returns the classes whose u fell. */
static ld_class_set_t heap_bins_return_locked(heap_t *heap) {
  ld_class_set_t classes = 0;
  for (ld_class_set_t set_up = ld_class_words_read(&heap->bins_set_up); set_up; set_up &= set_up - 1) { /* (the others are empty) */
    ld_bin_t *bin = ld_heap_bin(heap, ld_class_set_first(set_up));
    unsigned foreign;
    if (!bin->count) continue;
    classes |= heap_return_locked(heap, bin, bin->slots, bin->count, &foreign);
    LD_OWNER_SET(bin->count, foreign);
  }
  return classes;
}

void ld_heap_return_bins(heap_t *heap) {
  heap_lock(heap);
  heap_check_options(heap);
  ld_class_set_t classes = heap_bins_return_locked(heap);
  LD_OWNER_ADD(heap->looks, 1);
  classes |= heap_process_pending(heap) | heap->release_due; /* (each bit cleared as released) */
  heap_release_classes(heap, classes);
  heap_unlock(heap);
}

/* ---- maintenance by any thread (maintain.c) ---- */

/* Counts the frees pushed onto the heap's current superblocks (watched: not announced);
 * returns the classes whose u fell. Heap lock held. */
static ld_class_set_t heap_count_current(heap_t *heap) {
  ld_class_set_t classes = 0;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *cur = heap->current[c];
    if (cur == &ld_sb_none) continue;
    int fresh = ld_sb_account_remote(cur, false);
    if (fresh) heap_count_remote(heap, cur, fresh), classes |= LD_CLASS_BIT(c);
  }
  return classes;
}

void ld_heap_collect_pending(heap_t *heap) {
  if (heap == &ld_heap_empty) return;
  heap_lock(heap);
  heap_release_classes(heap, heap_process_pending(heap) | heap_count_current(heap));
  heap_unlock(heap);
}


/* Whether fullness group g (1 to 3; sb_group_of) of a class of `capacity` blocks can hold a
 * sparse superblock (ld_sb_sparse): its fewest blocks used are sparse. Group 1 always; groups 2
 * and 3 only when Hoard's f moves their bounds below a quarter (f above 1/2, above 3/4). */
static bool group_may_hold_sparse(int g, uint32_t capacity) {
  int32_t t = class_release_blocks(capacity);
  int32_t fewest = g == 1 ? 1 : g == 2 ? t / 2 + 1 : t + 1;
  return (uint64_t)fewest * LD_DORMANT_USED_MAX_INV <= capacity;
}

/* Collects the heap's pending frees and gives its empty superblocks to the global heap (and
 * from there to the segments, to be purged by age): Hoard's K slack is for bursts. No block of
 * an empty superblock is live or cached, so nothing of the owner's refers to it.
 * A heap whose thread has idled a purge delay (idle: the purge emptied its bins first) gives
 * its sparse superblocks too, the current ones included: kept by the heap (Hoard's K slack, a
 * class's current superblock), they held every page however few blocks lived on them, where
 * the global heap gives back the pages whose blocks are all free (global.c): a pool of 4
 * threads that kept 0.3% of a 200 MiB heap idled at 23.6 MiB, now 13.7 (idle-return
 * pool-keep; one thread 15.7 -> 11.1). The thread's next refill of the class takes one back,
 * the fullest first, as from any other heap's release; its blocks still cached (a drain that
 * found the thread busy) go back as a freed superblock's do (foreign: cache.c). Heap lock
 * held. */
static void heap_give_empty_locked(heap_t *heap, bool idle) {
  heap_check_options(heap);
  heap_release_classes(heap, heap_process_pending(heap) | heap_count_current(heap) | heap->release_due);
  unsigned given = 0;
  ld_global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    if (!heap->a[c]) continue; /* holds nothing of that class */
    while (heap->groups[c][0]) {
      heap_give_to_global(heap, heap->groups[c][0]);
      LD_STAT_INC(heap, superblocks_to_global); /* under the heap's lock, as its owner counts it */
      if (++given % GIVES_PER_TURN == 0) ld_global_let_waiters_in();
    }
    sb_t *cur = heap->current[c];
    if (cur != &ld_sb_none && (cur->used == 0 || (idle && ld_sb_sparse(cur)))) {
      heap_give_to_global(heap, cur);
      LD_STAT_INC(heap, superblocks_to_global);
    }
    for (int g = 1; idle && g <= 3 && group_may_hold_sparse(g, ld_class_capacity[c]); g++)
      for (sb_t *sb = heap->groups[c][g], *next; sb; sb = next) {
        next = sb->next;
        if (!ld_sb_sparse(sb)) continue;
        heap_give_to_global(heap, sb);
        LD_STAT_INC(heap, superblocks_to_global);
        if (++given % GIVES_PER_TURN == 0) ld_global_let_waiters_in();
      }
    /* (no threshold to recompute: every change of a[c] or boost[c] recomputes it, and
     * heap_check_options above any option's; once per class here was a third of this walk's
     * cost at each thread's exit, with 60 classes held) */
  }
  ld_global_unlock();
}

static void heap_give_all_locked(heap_t *heap);

bool ld_heap_tidy(heap_t *heap, bool mine, bool idle) {
  if (mine) heap_lock(heap);
  else if (!ld_trylock(&heap->lock)) return false;
  /* once a purge delay (maintain.c); not while its thread's exit runs (ld_heap_exit_begin:
   * its park gives away what it need not keep, under this lock) */
  if (__atomic_load_n(&heap->live, __ATOMIC_RELAXED)) {
    if (!heap->exiting) heap_give_empty_locked(heap, idle);
  }
  /* a heap no thread uses: batches sent to it after its thread left (their freers read the
   * owner just before) are counted, or forwarded to their superblocks' owners now, not when
   * a new thread takes the heap; a parked heap's classes whose u fell meet Hoard's threshold
   * again (the validation walk checks parked heaps) */
  /* A parked heap's kept bins (ld_heap_park) go back to their superblocks before anything gives
   * one away here or in its release, so that no kept block's superblock leaves the heap under it
   * (they hold its own blocks only: cache.c, bin_keep_current; one that is not, which the
   * validation walk reports, stays in its bin for the next thread's flush). */
  else heap_release_classes(heap, heap_process_pending(heap) | heap_bins_return_locked(heap));
  heap_unlock(heap);
  return true;
}

bool ld_heap_release_parked(heap_t *heap) {
  if (!ld_trylock(&heap->lock)) return false;
  /* live is read under the heap's lock: a new thread that took the heap meanwhile finds it
   * either whole or emptied, under the same lock (ld_heap_new) */
  if (!__atomic_load_n(&heap->live, __ATOMIC_ACQUIRE) && heap->superblocks_held) {
    heap_bins_return_locked(heap); /* (its kept bins: ld_heap_tidy) */
    heap_give_all_locked(heap);
    LD_STAT_INC(heap, parked_heaps_released);
  }
  heap_unlock(heap);
  return true;
}

bool ld_heap_purge_parked_table(heap_t *heap) {
  if (!ld_trylock(&heap->lock)) return false;
  /* Its table of owned superblocks (LD_OWNED_SLOTS entries, 128 KiB) is all zero once the heap
   * holds nothing, but the pages its superblocks' addresses touched stay resident: with 1,000
   * parked heaps, whose threads took superblocks at addresses all over the segments, 80 MiB
   * after the purge had given every superblock back. A zero page reads as the empty table. */
  if (!__atomic_load_n(&heap->live, __ATOMIC_ACQUIRE) && !heap->superblocks_held && !heap->table_purged) {
    size_t page = ld_os_page_size();
    uintptr_t from = ld_round_up((uintptr_t)&heap->owned[0], page), to = (uintptr_t)&heap->owned[LD_OWNED_SLOTS] & ~(page - 1);
    if (to > from) ld_os_purge((void *)from, to - from);
    LD_OWNER_SET(heap->table_purged, true);
  }
  heap_unlock(heap);
  return true;
}

/* A freer that keeps sending to one owner looks at the owner's line (live, looks,
 * last_slow_ns: written on the owner's core) once in HELP_LOOK_EVERY batches, not at every
 * one (remote-free: 1.2% of its time on that read); an idle owner is helped that many
 * batches later at most. */
#define HELP_LOOK_EVERY 8u
_Static_assert(LD_HELP_AFTER_BATCHES % HELP_LOOK_EVERY == 0, "a stuck owner is seen at a look");
void ld_heap_help_idle_owner(heap_t *self, heap_t *owner, uint64_t now) {
  /* Heaps are never unmapped: owner may have given the superblock away since, never gone. */
  if (!owner || owner == self || owner == &ld_global_heap) return;
  if (self != &ld_heap_empty) {
    if (self->help_owner == owner) {
      if (++self->help_batches % HELP_LOOK_EVERY) return;
    } else {
      self->help_owner = owner;
      self->help_looks = UINT64_MAX; /* (reset at the look below) */
      self->help_batches = 0;
    }
  }
  if (!__atomic_load_n(&owner->live, __ATOMIC_RELAXED)) return;
  uint64_t looks = __atomic_load_n(&owner->looks, __ATOMIC_RELAXED);
  bool stuck = false;
  if (self != &ld_heap_empty) {
    if (self->help_looks != looks) { /* the owner looked since: its batches count from here */
      self->help_looks = looks;
      self->help_batches = 0;
    }
    stuck = self->help_batches >= LD_HELP_AFTER_BATCHES;
  }
  if (!stuck && now - __atomic_load_n(&owner->last_slow_ns, __ATOMIC_RELAXED) < HELP_IDLE_NS) return;
  if (self != &ld_heap_empty) self->help_batches = 0;
  if (!ld_trylock(&owner->lock)) return;
  if (self != &ld_heap_empty) LD_STAT_INC(self, free_lock_acquisitions);
  /* The whole inbox (a constant: LD_INBOX_SLOTS messages): a freer that sends full batches
   * helps once per LD_HELP_AFTER_BATCHES of them, and reading 64 at a time left an idle
   * owner's inbox nearly full, 4 MiB of freed blocks kept from Hoard's threshold (blowup_idle:
   * 16 idle threads grew RSS by 87 MiB against 46). */
  heap_release_classes(owner, heap_process_pending_some(owner, LD_INBOX_SLOTS, NULL, false));
  ld_unlock(&owner->lock);
}

bool ld_heap_help_full_inbox(heap_t *self, heap_t *owner) {
  if (owner == &ld_global_heap) {
    if (!ld_global_try_tidy(PENDING_PER_CALL)) return false;
  } else {
    if (!ld_trylock(&owner->lock)) return false;
    heap_release_classes(owner, heap_process_pending_some(owner, PENDING_PER_CALL, NULL, false));
    ld_unlock(&owner->lock);
  }
  if (self != &ld_heap_empty) LD_STAT_INC(self, free_lock_acquisitions);
  return true;
}

/* ---- heap lifecycle ---- */

heap_t *ld_heaps_first(void) { return __atomic_load_n(&heaps.heaps, __ATOMIC_ACQUIRE); }
size_t ld_heaps_live_count(void) { return atomic_load_explicit(&heaps.live, memory_order_relaxed); }

/* Whether a thread that allocated may still run: the thread of some live heap (not retired by
 * its exit hook) exists, as tgkill tells, self_tid's aside. The question the purge thread asks
 * to know whether it is the process's last thread (maintain.c), without a file descriptor: a
 * descriptor it opened, even for a moment, could be the number the program's own open or dup2
 * expects (the lowest free one), be copied into a fork child, or be the one over the program's
 * limit. A thread that exits without the hook (a raw exit system call) reads as gone; the main
 * thread only through a heap it took before its hook ran, never an orphan heap of its
 * destructors: after pthread_exit it is a zombie until the process ends, which tgkill cannot
 * tell from a running thread. A thread that never allocated is not seen; the purge thread then
 * ends early, and the next allocation slow path starts it again. Walks the heaps (at most once
 * per wake of the purge thread) until it finds a thread. */
static bool heap_thread_alive(heap_t *h, int self_tid, int leader) {
  if (!__atomic_load_n(&h->live, __ATOMIC_ACQUIRE)) return false;
  int tid = __atomic_load_n(&h->thread_tid, __ATOMIC_RELAXED);
  if (tid == 0 || tid == self_tid) return false;
  if (tid == leader && __atomic_load_n(&h->orphan_tid, __ATOMIC_RELAXED) == tid) return false;
  return ld_os_thread_alive(tid);
}

bool ld_heaps_thread_alive(int self_tid) {
  /* The heap found last is looked at first: the walk is one heap while that thread runs (the
   * main thread's heap, the first made, is the list's last; one caller: the purge thread). */
  static heap_t *found_last;
  int leader = ld_os_process_id();
  if (found_last && heap_thread_alive(found_last, self_tid, leader)) return true;
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap)
    if (h != found_last && heap_thread_alive(h, self_tid, leader)) {
      found_last = h;
      return true;
    }
  return false;
}

/* A thread start looks at this many orphan heaps at most: the number of heaps it looks at is
 * bounded by a constant, however many heaps there are (the first version walked them all). The
 * first orphan it finds whose thread is gone becomes the new thread's heap, as it stands (see
 * heap_new_locked); until 2026-11-28 each such orphan was given to the global heap there,
 * whole, work that grew with what it held. */
#define ORPHAN_CHECKS_MAX 4

static void orphan_enqueue(heap_t *heap) {
  heap->orphan_queued = true;
  heap->next_orphan = NULL;
  if (heaps.orphans_tail) heaps.orphans_tail->next_orphan = heap;
  else heaps.orphans = heap;
  heaps.orphans_tail = heap;
  heaps.orphans_queued++;
}

static heap_t *orphan_dequeue(void) {
  heap_t *heap = heaps.orphans;
  heaps.orphans = heap->next_orphan;
  if (!heaps.orphans) heaps.orphans_tail = NULL;
  heaps.orphans_queued--;
  heap->orphan_queued = false;
  return heap;
}

/* A heap for a new thread: an orphan whose thread is gone, an exited thread's, or a new one.
 * Heaps are never unmapped, and there are never more than the most threads that lived at once.
 * heaps.lock held. *examined counts the heaps looked at: at most ORPHAN_CHECKS_MAX + 1.
 * *adopted: the heap is such an orphan, live, with whatever its thread left in it. */
static heap_t *heap_new_locked(bool after_exit_hook, size_t *examined, bool *adopted) {
  /* A heap made by a thread after its exit hook had run (a destructor that allocated in the
   * last round) has no hook left to give it up. Once the kernel says that thread is gone, a
   * new thread takes it as it stands, bins, deferred frees and buffers included, as its thread
   * would have gone on with it: the work is the same whatever the heap holds. (Giving it to the
   * global heap here moved every superblock it held; leaving it to the purge let 2,000 such
   * heaps wait with their memory, +408 MiB in tests/alloc/tls_dtor.c.) Until a thread takes it,
   * it is a live heap whose thread idles: the purge empties its bins and gives its empty
   * superblocks away. A few of the queue's heaps are looked at per thread start, oldest first;
   * those whose threads still run, and dead ones after the first, go to its end. A queued heap
   * that was parked since (a later round of destructors ran the hook) is no orphan now and
   * leaves the queue. */
  *adopted = false;
  heap_t *heap = NULL;
  size_t checks = heaps.orphans_queued < ORPHAN_CHECKS_MAX ? heaps.orphans_queued : ORPHAN_CHECKS_MAX;
  for (size_t i = 0; i < checks; i++) {
    heap_t *h = orphan_dequeue();
    ++*examined;
    if (!h->live || !h->orphan_tid) continue;
    if (!heap && !ld_os_thread_alive(h->orphan_tid)) {
      /* (bins_busy: its thread ended inside a fast path, cancelled from a signal handler: the
       * bins may be half changed, and the heap stays unused, out of the queue) */
      if (LD_READ(h->bins_busy)) __atomic_store_n(&h->orphan_tid, 0, __ATOMIC_RELAXED);
      else heap = h;
      continue;
    }
    orphan_enqueue(h);
  }
  if (heap) {
    *adopted = true;
  } else if ((heap = heaps.idle)) {
    heaps.idle = heap->next_idle;
    heap->next_idle = NULL;
    ++*examined;
  } else {
    void *mem;
    size_t bytes = (sizeof(heap_t) + ld_os_page_size() - 1) & ~(ld_os_page_size() - 1);
    if (ld_os_map(bytes, &mem) != 0) return NULL;
    heap = mem;
    ld_lock_reset(&heap->lock);
    heap_current_none(heap);
    heap->next_heap = heaps.heaps;
    ring_id_give(heap);
    __atomic_store_n(&heaps.heaps, heap, __ATOMIC_RELEASE); /* the purge walks without the lock */
  }
  int tid = ld_os_thread_id();
  __atomic_store_n(&heap->thread_tid, tid, __ATOMIC_RELAXED);
  __atomic_store_n(&heap->orphan_tid, after_exit_hook ? tid : 0, __ATOMIC_RELAXED); /* (read by the purge thread) */
  if (heap->orphan_tid && !heap->orphan_queued) orphan_enqueue(heap);
  /* not idle from the moment it is live (the purge empties idle heaps' bins and gives their
   * sparse superblocks away): a heap taken by a new thread is that thread's at once */
  LD_OWNER_SET(heap->last_slow_ns, ld_os_now_coarse_ns());
  __atomic_store_n(&heap->live, 1, __ATOMIC_RELEASE);
  return heap;
}

heap_t *ld_heap_new(bool after_exit_hook) {
  size_t examined = 0;
  ld_lock(&heaps.lock);
  bool adopted;
  heap_t *heap = heap_new_locked(after_exit_hook, &examined, &adopted);
  ld_unlock(&heaps.lock);
  if (!heap) return NULL;
  heap_lock(heap);
  LD_STAT_ADD(heap, heaps_examined, examined);
  /* A reused heap's pending list may hold superblocks announced after its last owner left:
   * its own (a parked heap's) are counted, the others forwarded to their owners; as many as a
   * fill looks at (this is the new thread's first malloc or free), the rest at its fills, or at
   * the purge's tidy, which looks at all. */
  heap_process_pending_some(heap, PENDING_PER_CALL, NULL, false);
  LD_OWNER_SET(heap->last_slow_ns, ld_os_now_coarse_ns()); /* (not idle: the purge leaves its bins) */
  if (adopted) {
    /* an orphan whose thread is gone (heap_new_locked): live already, and counted so */
    LD_STAT_INC(heap, orphan_heaps_taken);
    heap_unlock(heap);
    return heap;
  }
  heap_unkeep(heap); /* taken: whatever it kept is a live thread's again */
  if (heap->superblocks_held) {
    /* A parked heap (ld_heap_park): the new thread takes it whole, its superblocks, counts and
     * thresholds as its last owner left them (an option changed since was applied by
     * larder_option_set's walk, ld_heaps_options_apply). */
    LD_STAT_INC(heap, parked_heaps_taken);
    heap_unlock(heap);
    atomic_fetch_add_explicit(&heaps.live, 1, memory_order_relaxed);
    return heap;
  }
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) {
    LD_OWNER_SET(heap->current[c], &ld_sb_none);
    LD_OWNER_SET(heap->u[c], 0);
    LD_OWNER_SET(heap->a[c], 0);
    LD_OWNER_SET(heap->carved[c], 0);
    heap->boost[c] = 0;
    heap->last_release_ns[c] = heap->last_take_ns[c] = 0;
  }
  heap->boost_total = 0;
  heap->released_own = 0;
  /* The table of owned superblocks is empty: every superblock left it when it was given away
   * (the validation walk checks heaps that wait for a thread). */
  /* No superblock in any group and a = 0: the thresholds are 0, as the options say now. */
  heap->options_epoch = atomic_load_explicit(&ld_options_epoch, memory_order_relaxed);
  memset(heap->u_release, 0, sizeof heap->u_release);
  heap_unlock(heap);
  atomic_fetch_add_explicit(&heaps.live, 1, memory_order_relaxed);
  return heap;
}

void ld_stats_add(ld_stats_t *dst, const ld_stats_t *src) {
  /* Other threads' counters are read while they run: each is a word, read once, so the sum is
   * a snapshot that may lag by a few operations, never torn. */
  size_t *d = (size_t *)dst;
  const size_t *s = (const size_t *)src;
  for (size_t i = 0; i < sizeof(ld_stats_t) / sizeof(size_t); i++) d[i] += __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

/* Everything the heap holds goes to the global heap, where other threads reuse it (DESIGN
 * §1). Heap lock held; the caller has emptied the heap's cache and remote buffer. */
static void heap_give_all_locked(heap_t *heap) {
  heap_process_pending(heap);
  unsigned given = 0;
  ld_global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *sb = heap->current[c];
    if (sb != &ld_sb_none) heap_give_to_global(heap, sb);
    for (int g = 0; g < LD_GROUP_COUNT; g++)
      while ((sb = heap->groups[c][g])) {
        heap_give_to_global(heap, sb);
        if (++given % GIVES_PER_TURN == 0) ld_global_let_waiters_in();
      }
  }
  ld_global_unlock();
  heap_process_pending(heap); /* announced meanwhile: forwarded to the global heap */
  heap_unkeep(heap);
}

/* The heap's thread is gone: its counters join the retired ones and the heap waits for the
 * next new thread. Heap lock and heaps.lock held. */
static void heap_retire_locked(heap_t *heap) {
#ifdef LARDER_STATS
  ld_stats_add(&heaps.retired, &heap->stats);
  for (size_t i = 0; i < sizeof heap->stats / sizeof(size_t); i++) LD_OWNER_SET(((size_t *)&heap->stats)[i], 0);
#endif
  __atomic_store_n(&heap->orphan_tid, 0, __ATOMIC_RELAXED); /* if queued as an orphan, it leaves the queue when next looked at */
  __atomic_store_n(&heap->thread_tid, 0, __ATOMIC_RELAXED);
  atomic_fetch_sub_explicit(&heaps.live, 1, memory_order_relaxed);
  __atomic_store_n(&heap->live, 0, __ATOMIC_RELEASE);
  heap->next_idle = heaps.idle;
  heaps.idle = heap;
}

/* The bytes in use below which a parked heap gives class c's emptiest superblocks away. */
static int64_t heap_parked_keep(const heap_t *heap, unsigned c) {
  return heap->a[c] - (int64_t)(LD_OPTION(empty_fraction) / 2 * (double)heap->a[c]);
}

/* A place among the PARKED_KEEP_CURRENT_MAX parked heaps that keep their current superblocks
 * and bins, taken by an exiting thread before it empties its cache (maintain.c, thread_exit),
 * so that it knows whether to keep its bins; ld_heap_park gives it back if the heap ends up
 * holding nothing. */
bool ld_heap_keep_reserve(void) {
  size_t n = atomic_load_explicit(&heaps.parked_keeping, memory_order_relaxed);
  while (n < PARKED_KEEP_CURRENT_MAX)
    if (atomic_compare_exchange_weak_explicit(&heaps.parked_keeping, &n, n + 1, memory_order_relaxed, memory_order_relaxed))
      return true;
  return false;
}

/* The thread's exit hook is under way: from here to its park, no tidy by another thread gives
 * away a superblock of the heap (ld_heap_tidy). The exit's drain reads the current superblock of
 * each class without this lock to choose the blocks its bins keep (cache.c, bin_keep_current),
 * which must stay the heap's: an idle tidy gave a sparse current superblock away meanwhile, and
 * its blocks were kept by a parked heap that no longer owned them (ThreadSanitizer,
 * misuse_threads_prefixed at a purge delay of 0). A tidy that began before holds the lock
 * until it is done, so the drain reads what it left. */
void ld_heap_exit_begin(heap_t *heap) {
  heap_lock(heap);
  heap->exiting = true;
  heap_unlock(heap);
}

bool ld_heap_park(heap_t *heap, bool keeping) {
  ld_lock(&heaps.lock);
  heap_lock(heap);
  heap->exiting = false;
  heap_give_empty_locked(heap, false);
  /* Hoard's threshold without the K slack, and with half its f: a class keeps no more than
   * f/2 of its bytes free (u >= (1-f/2)a; Hoard §3.1 allows f plus K superblocks). The slack
   * is for a thread's bursts; a parked heap has none, and the next thread may use other
   * classes, while the global heap would pool the free blocks for every thread. With the K
   * slack kept, 1,000 short-lived threads in waves of 16 held 23 MiB for 8 MiB live instead
   * of 16; with f, larson's peak RSS was 1.05x the emptied heaps' (f/2: 1.02x, as fast).
   * While fewer than PARKED_KEEP_CURRENT_MAX parked heaps keep theirs, the current superblock
   * of each class stays, whatever its fullness (Hoard's K >= 1 covers it): the next thread,
   * which takes the heap whole, draws from it again. Given away, it came back from the global
   * heap at that thread's first fill of the class: larson-server's threads, which live for
   * about 100 mallocs, moved 15 superblocks each way per thread (319 -> 279 instructions per
   * operation, alternating callgrind runs; docs/results.md). A heap no thread takes is
   * emptied by the purge after a delay (ld_heap_release_parked) and by malloc_trim at once.
   * Such a heap (keeping: its place taken, ld_heap_keep_reserve) keeps its bins too, up to half
   * their first limits (cache.c, bin_keep_current): the next thread's first mallocs
   * pop them instead of refilling, and its exit did not link them back onto their superblocks'
   * lists, for that thread's refills to walk (larson-server's threads, about 100 mallocs each
   * in some 50 classes: a refill every 3.5 mallocs). They are the heap's free blocks, in no
   * thread's cache: the statistics count them neither in use nor cached (ld_heaps_stats), and
   * Hoard's bound grows by them, a constant (at most half of each class's first bin, in at most
   * PARKED_KEEP_CURRENT_MAX heaps). A bin keeps only blocks of its class's current superblock,
   * which nothing here gives away, so no kept block's superblock leaves the heap. The bins are
   * not touched here: the thread is out of them, and the purge may be emptying them (cache.c,
   * ld_cache_drain_idle; a return of bins here raced its flushes, whose counts it took before
   * this lock: a bin's count went to -1). */
  ld_global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *sb;
    if (!heap->a[c]) continue; /* (holds nothing of that class: the threshold's floating point
                                  for all 73 classes was 250 instructions of every thread's exit) */
    while (heap->u[c] < heap_parked_keep(heap, c) && (sb = heap_find_releasable(heap, c, !keeping, false))) {
      heap_give_to_global(heap, sb);
      LD_STAT_INC(heap, superblocks_to_global);
    }
  }
  ld_global_unlock();
  heap_retire_locked(heap);
  bool holds = heap->superblocks_held != 0;
  if (holds && keeping) heap->kept_current = true;
  else if (keeping) atomic_fetch_sub_explicit(&heaps.parked_keeping, 1, memory_order_relaxed); /* (its bins are empty: it holds nothing) */
  heap_unlock(heap);
  ld_unlock(&heaps.lock);
  return holds;
}

/* ---- fork ---- */
void ld_heaps_lock_all(void) {
  ld_lock(&heaps.lock);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) ld_lock(&h->lock);
}
void ld_heaps_unlock_all(bool reinit) {
  size_t keeping = 0;
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) {
    if (reinit) {
      keeping += h->kept_current;
      ld_lock_reset(&h->lock);
      ld_inbox_after_fork(h);
      /* A fork child: the parent's orphans stay as the parent's other threads' heaps stay,
       * unused (their threads may have been anywhere in a call when the parent forked), not
       * taken by the child's new threads (heap_new_locked). */
      h->orphan_tid = 0;
      h->orphan_queued = false;
      h->exiting = false; /* (a thread of the parent's that was exiting: its heap stays unused) */
      h->next_orphan = NULL;
      /* the forking thread's heap is the child's one thread's (a new id); the others' threads
       * are not in this process */
      h->thread_tid = h == ld_heap_tls ? ld_os_thread_id() : 0;
    } else {
      ld_unlock(&h->lock);
    }
  }
  if (reinit) {
    heaps.orphans = heaps.orphans_tail = NULL;
    heaps.orphans_queued = 0;
    /* the places among the keeping parked heaps that the parent's exiting threads had taken
     * before their park (ld_heap_keep_reserve, outside these locks) are no one's here */
    atomic_store_explicit(&heaps.parked_keeping, keeping, memory_order_relaxed);
    ld_lock_reset(&heaps.lock);
  } else {
    ld_unlock(&heaps.lock);
  }
}

/* ---- statistics ---- */

/* Sums every heap's counters and figures. u counts the blocks in caches as in use (they are
 * the front end's); the caller takes `cached` out to report what the program holds. */
void ld_heaps_stats(ld_stats_t *out, ld_heap_figures_t *figures, ld_class_figures_t *classes) {
  memset(out, 0, sizeof *out);
  memset(figures, 0, sizeof *figures);
  ld_lock(&heaps.lock);
  ld_stats_add(out, &heaps.retired);
  ld_stats_add(out, &ld_stats_unowned);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) {
    /* Under the heap's lock: a thread that refills or flushes its cache (at its exit, say)
     * changes a bin's count and its counter together, and malloc's count is derived from both
     * (stats.c). A merge without the lock counted the blocks of a flush twice for a moment (the
     * Rust crate's test saw mallocs go back by hundreds while an earlier test's thread exited). */
    heap_lock(h);
    ld_stats_add(out, &h->stats);
    /* the buffer's blocks are sent as far as the statistics go (a batch is counted as it goes) */
    out->remote_sent_bytes += LD_READ(h->remote_bytes);
    ld_fit_figures(h, &figures->fit_in_use, &figures->fit_regions);
    figures->medium_bytes += LD_READ(h->medium_bytes);
    figures->medium_usable += LD_READ(h->medium_usable);
    /* (the medium cache is the owner's without a lock: cache.c, "medium spans") */
    figures->medium_cached += LD_READ(h->medium_cached_bytes) + (int64_t)ld_heap_medium_returned_bytes(h);
    /* (live read under the heap's lock, which a new thread takes before it uses the heap) */
    bool parked = !__atomic_load_n(&h->live, __ATOMIC_ACQUIRE);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      int64_t u = LD_READ(h->u[c]), superblocks = LD_READ(h->a[c]) / ld_class_capacity_bytes[c];
      int64_t blocks = LD_READ(ld_heap_bin(h, c)->count);
      /* a parked heap's kept bins (ld_heap_park) are free blocks of its superblocks, in no
       * thread's cache: out of u, not cached (malloc's count still takes them out) */
      int64_t cached = parked ? 0 : blocks * ld_class_size[c];
      if (parked) u -= blocks * ld_class_size[c];
      figures->in_use += u;
      figures->held += superblocks * (int64_t)ld_sb_size;
      figures->cached_blocks += blocks;
      figures->cached += cached;
      if (classes) {
        classes->in_use[c] += u;
        classes->superblocks[c] += superblocks;
        classes->cached[c] += cached;
        classes->carved[c] += LD_READ(h->carved[c]);
      }
    }
    /* the deferred frees (internal.h), counted as cached: their class is their bin's. A range
     * check, not a compare with the stand-ins' bin: a heap whose bins are not set up yet has
     * NULL places (the statistics during start-up: misuse_stats_during_start) */
    for (unsigned i = 0; i < LD_DEFERRED; i++) {
      ld_bin_t *deferred_bin = LD_READ(h->deferred[i].bin);
      if (deferred_bin >= h->bins && deferred_bin < h->bins + __atomic_load_n(&h->places_used, __ATOMIC_ACQUIRE)) {
        unsigned c = ld_heap_bin_class(h, deferred_bin);
        figures->cached_blocks += 1;
        figures->cached += ld_class_size[c];
        if (classes) classes->cached[c] += ld_class_size[c];
      }
    }
    heap_unlock(h);
  }
  ld_unlock(&heaps.lock);
}

/* ---- validation ---- */

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

static void heap_validate_locked(heap_t *heap, int *violations) {
  double f = LD_OPTION(empty_fraction);
  size_t held = 0;
  unsigned boosts = 0;
  unsigned places = 0;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    int64_t k_slack = ((int64_t)LD_OPTION(k) + heap->boost[c]) * ld_class_capacity_bytes[c];
    /* (an option changed since this heap's last look is applied at its next; a heap that holds
     * nothing of the class has no threshold to keep) */
    if (heap->a[c] && heap->options_epoch == atomic_load_explicit(&ld_options_epoch, memory_order_relaxed) &&
        heap->u_release[c] != heap_threshold(heap, c))
      VIOLATION("heap %p class %u: threshold %lld, %lld by a, K and f\n", (void *)heap, c, (long long)heap->u_release[c],
                (long long)heap_threshold(heap, c));
    int64_t u = 0, a = 0, carved = 0;
    sb_t *cur = heap->current[c];
    if (cur != &ld_sb_none) {
      ld_sb_validate(cur, heap, violations);
      if (cur->size_class != c) VIOLATION("heap %p: current superblock of class %u has class %u\n", (void *)heap, c, cur->size_class);
      if (cur->group != LD_GROUP_NONE) VIOLATION("heap %p: current superblock %p is also in group %u\n", (void *)heap, (void *)cur, cur->group);
      u += (int64_t)cur->used * cur->block_size;
      a += ld_class_capacity_bytes[c];
      carved += cur->bump - cur->data;
      held++;
    }
    if (heap->boost[c] > LD_BOOST_MAX) VIOLATION("heap %p class %u: boost %u above %d\n", (void *)heap, c, heap->boost[c], LD_BOOST_MAX);
    boosts += heap->boost[c];
    for (int g = 0; g < LD_GROUP_COUNT; g++) {
      const sb_t *prev = NULL;
      size_t n = 0;
      for (sb_t *sb = heap->groups[c][g]; sb; prev = sb, sb = sb->next) {
        ld_sb_validate(sb, heap, violations);
        if (sb->prev != prev) VIOLATION("superblock %p: broken back link\n", (void *)sb);
        if (sb->size_class != c || sb->group != g) VIOLATION("superblock %p: filed under class %u group %d\n", (void *)sb, c, g);
        if (sb_group_of(sb) != g) VIOLATION("superblock %p: used %d does not belong in group %d\n", (void *)sb, sb->used, g);
        u += (int64_t)sb->used * sb->block_size;
        a += ld_class_capacity_bytes[c];
        carved += sb->bump - sb->data;
        held++;
        if (++n > (1u << 30)) break;
      }
    }
    if (u != heap->u[c])
      VIOLATION("heap %p class %u: u is %lld, superblocks add up to %lld\n", (void *)heap, c, (long long)heap->u[c], (long long)u);
    if (a != heap->a[c]) VIOLATION("heap %p class %u: a is %lld, superblocks add up to %lld\n", (void *)heap, c, (long long)heap->a[c], (long long)a);
    if (carved != heap->carved[c])
      VIOLATION("heap %p class %u: %lld bytes carved counted, superblocks add up to %lld\n", (void *)heap, c,
                (long long)heap->carved[c], (long long)carved);
    /* Every cached block is a free block start of its class; those of superblocks the heap
     * still owns are part of its u (a superblock given away while some of its blocks were
     * cached counts them in its new owner's u, until the bin's next flush sends them there). */
    int64_t cached_owned = 0;
    for (uint32_t i = 0; i < ld_heap_bin(heap, c)->count && i < LD_BIN_SLOTS; i++) {
      ld_block_t *b = ld_heap_bin(heap, c)->slots[i];
      sb_t *sb = ld_sb_of(b);
      if (!ld_addrmap_contains_header(b) || sb->magic != LD_SB_MAGIC || sb->size_class != c || !ld_sb_is_block_start(sb, b) ||
          !ld_block_is_free(b)) {
        VIOLATION("heap %p class %u: cached block %p is not a free block of its class\n", (void *)heap, c, (void *)b);
        continue;
      }
      if (atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap) cached_owned += sb->block_size;
    }
    if (cached_owned > heap->u[c])
      VIOLATION("heap %p class %u: %lld bytes cached but u is %lld\n", (void *)heap, c, (long long)cached_owned, (long long)heap->u[c]);
    const ld_bin_t *bin = ld_heap_bin_const(heap, c); /* (the sentinel's, for a class with no place) */
    if (bin->limit == 0 ? bin->count != 0 || bin->slots[0] != NULL /* not set up */
                        : bin->count > bin->limit || bin->slots[bin->limit] != LD_BIN_FULL)
      VIOLATION("heap %p class %u: %u blocks cached, limit %u, or its end mark lost\n", (void *)heap, c, bin->count, bin->limit);
    /* no slot above the top names an uncarved block (bin_scrub_uncarved: the free fast path
     * takes a block equal to the slot above the top without the uncarved check) */
    for (uint32_t i = bin->count; i < bin->limit && i < LD_BIN_SLOTS; i++)
      if (ld_bin_uncarved(bin, bin->slots[i]))
        VIOLATION("heap %p class %u: slot %u above the bin's top names uncarved block %p\n", (void *)heap, c, i, bin->slots[i]);
    bool set_up = ld_class_set_has(ld_class_words_read(&heap->bins_set_up), c);
    if (set_up != (bin->limit != 0))
      VIOLATION("heap %p class %u: bins_set_up says %s, limit %u\n", (void *)heap, c, set_up ? "set up" : "not", bin->limit);
    /* a bin's place: one for each class set up, in the order met, and only theirs */
    unsigned place = heap->bin_place[c];
    if (set_up != (place != 0) || (place && (place > heap->places_used || heap->place_class[place - 1] != c)))
      VIOLATION("heap %p class %u: its bin's place is %u (%u used; that place's class %u), set up: %d\n", (void *)heap, c, place,
                heap->places_used, place ? heap->place_class[place - 1] : 0, (int)set_up);
    places += place != 0;
    /* Hoard's invariant (seed 004 §3.1), per size class as its proof has it (§4.1), with K
     * raised for classes that ping-pong by at most LD_BOOST_MAX each and LD_BOOST_BUDGET in
     * all: the bound stays O(1). */
    if (!(heap->u[c] >= heap->a[c] - k_slack || (double)heap->u[c] >= (1.0 - f) * (double)heap->a[c]))
      VIOLATION("heap %p class %u: Hoard's invariant fails: u=%lld a=%lld K*S=%lld f=%.3f\n", (void *)heap, c,
                (long long)heap->u[c], (long long)heap->a[c], (long long)k_slack, f);
  }
  if (boosts != heap->boost_total || boosts > LD_BOOST_BUDGET)
    VIOLATION("heap %p: boosts sum to %u, counted %u, budget %d\n", (void *)heap, boosts, heap->boost_total, LD_BOOST_BUDGET);
  for (unsigned i = 0; i < LD_OWNED_SLOTS; i++) {
    uintptr_t e = heap->owned[i];
    if (!e) continue;
    sb_t *sb = (sb_t *)(e & ld_sb_mask);
    unsigned place = (unsigned)((e & ~ld_sb_mask) >> LD_OWNED_CLASS_SHIFT);
    unsigned cls = place < heap->places_used ? ld_heap_place_class(heap, place) : LD_CLASS_LARGE;
    if (((i - ld_owned_slot((uintptr_t)sb)) & (LD_OWNED_SLOTS - 1)) >= (ld_sb_size >> 16 ? ld_sb_size >> 16 : 1) ||
        !ld_addrmap_contains(sb) || sb->magic != LD_SB_MAGIC ||
        atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap || sb->size_class != cls)
      VIOLATION("heap %p: owned-table slot %u names %p, not a class-%u superblock of this heap\n", (void *)heap, i, (void *)sb, cls);
  }
  if (held != heap->superblocks_held) VIOLATION("heap %p: holds %zu superblocks, counted %zu\n", (void *)heap, held, heap->superblocks_held);
  if (places != heap->places_used) VIOLATION("heap %p: %u bins have places, %u counted\n", (void *)heap, places, heap->places_used);
  if (ld_inbox_waiting(heap) > LD_INBOX_SLOTS)
    VIOLATION("heap %p: inbox holds %u messages, more than its %d slots\n", (void *)heap, ld_inbox_waiting(heap), LD_INBOX_SLOTS);
}

/* The calling thread's heap (brought up to date first, as its next slow path would) and every
 * abandoned heap: other live threads' heaps are checked by their own threads. */
void ld_heap_validate(heap_t *mine, int *violations) {
  if (mine != &ld_heap_empty) {
    heap_lock(mine);
    heap_check_options(mine);
    heap_process_pending(mine);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      heap_recompute_threshold(mine, c);
      heap_release_while_below(mine, c);
    }
    heap_validate_locked(mine, violations);
    heap_unlock(mine);
  }
  ld_lock(&heaps.lock);
  /* The idle stack holds exactly the heaps no thread uses, and the orphan queue its count
   * (both change only under heaps.lock, with `live`). */
  size_t made = 0, not_live = 0, idle = 0, queued = 0;
  for (heap_t *h = heaps.heaps; h; h = h->next_heap, made++)
    if (!__atomic_load_n(&h->live, __ATOMIC_ACQUIRE)) not_live++;
  for (heap_t *h = heaps.idle; h && idle <= made; h = h->next_idle, idle++)
    if (__atomic_load_n(&h->live, __ATOMIC_ACQUIRE)) VIOLATION("heap %p is on the idle stack, but a thread uses it\n", (void *)h);
  if (idle != not_live) VIOLATION("idle stack holds %zu heaps, %zu are not in use\n", idle, not_live);
  for (heap_t *h = heaps.orphans; h && queued <= made; h = h->next_orphan, queued++)
    if (!h->orphan_queued) VIOLATION("heap %p is in the orphan queue unmarked\n", (void *)h);
  if (queued != heaps.orphans_queued) VIOLATION("orphan queue holds %zu heaps, counted %zu\n", queued, heaps.orphans_queued);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) {
    if (__atomic_load_n(&h->live, __ATOMIC_ACQUIRE)) continue;
    /* No thread runs in it (a new one takes heaps.lock first), but the purge may be giving
     * a parked heap's superblocks away (ld_heap_release_parked): read under its lock. */
    heap_lock(h);
    /* its thread's exit gave its bins their first limits back (cache.c, ld_cache_drain) */
    if (h->bins_grown_bytes) VIOLATION("heap %p waits for a thread with its bins grown by %zu bytes\n", (void *)h, h->bins_grown_bytes);
    if (h->superblocks_held) { /* parked */
      heap_validate_locked(h, violations);
      /* only a heap that kept its current superblocks keeps bins (ld_heap_park), its own
       * blocks only, within half their first limits (heap_validate_locked checked each block) */
      for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
        const ld_bin_t *bin = ld_heap_bin(h, c);
        if (bin->count && (!h->kept_current || bin->count > bin->limit / 2))
          VIOLATION("parked heap %p keeps %u blocks cached in class %u (limit %u, keeping %d)\n", (void *)h, bin->count, c,
                    bin->limit, (int)h->kept_current);
        for (uint32_t i = 0; i < bin->count; i++)
          if (atomic_load_explicit(&ld_sb_of(bin->slots[i])->owner, memory_order_relaxed) != h)
            VIOLATION("parked heap %p keeps block %p of another heap's superblock in class %u\n", (void *)h, bin->slots[i], c);
      }
      heap_unlock(h);
      continue;
    }
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++)
      if (h->u[c] != 0 || h->a[c] != 0) VIOLATION("abandoned heap %p still holds memory in class %u\n", (void *)h, c);
    for (unsigned i = 0; i < LD_OWNED_SLOTS; i++)
      if (h->owned[i]) {
        VIOLATION("abandoned heap %p still lists superblock %p as its own\n", (void *)h, (void *)h->owned[i]);
        break;
      }
    heap_unlock(h);
  }
  ld_unlock(&heaps.lock);
}
