/* Thread heaps: the slow paths of small allocations and frees, Hoard's emptiness threshold,
 * and the life of a heap from a thread's first call to its exit.
 *
 * Hoard (seed 004 §3): each thread has its own heap; superblocks of one size class belong to
 * one heap at a time; a heap that falls below the emptiness threshold gives a superblock to the
 * global heap (global.c). The threshold keeps, for every heap and class,
 * (u >= a - K*S) or (u >= (1-f)*a), which bounds blowup to a constant factor (Hoard §4.1).
 *
 * What a heap's thread does without a lock: allocate from and free into the current
 * superblock of each class (alloc.c). Every other free, the thread's own included, goes on
 * the superblock's remote list with a CAS; the first such free since the owner last looked
 * puts the superblock on the heap's pending list (a CAS too). A refill takes the whole pending
 * list with one exchange and collects only the superblocks on it, so its cost is paid by the
 * frees that announced them, whatever the number of superblocks the heap holds.
 *
 * The heap lock guards the superblocks other than the current ones (their free lists, the
 * fullness groups, u and a). The owner takes it in its slow paths, uncontended; another
 * thread takes it with trylock to collect an idle owner's frees (help, below, and purge.c).
 * Lock order: heap locks, then the global heap's, then the segments'.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The heap every thread starts with: all its classes point at a superblock with no blocks,
 * so the first malloc of a thread falls to the slow path, which makes the real heap. */
sb_t ld_sb_none;
heap_t ld_heap_empty = {.current = {[0 ... LD_CLASS_COUNT] = &ld_sb_none}};
__thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec"))) = &ld_heap_empty;

static struct {
  pthread_mutex_t lock;      /* the list of heaps, and retired counters */
  heap_t *heaps;             /* every heap ever made; exited threads' are not live */
  ld_stats_t retired;        /* counters of heaps that were abandoned */
  _Atomic size_t live;
} heaps = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ld_stats_t stats_unowned;   /* events in threads without a heap, counted atomically */
static pthread_key_t heap_key;
static _Atomic int heap_key_made;
static __thread int thread_exit_ran;  /* larder's thread-exit hook has run in this thread */

/* Hysteresis (issue "server speed"): a heap that takes a superblock of a class within this
 * long after giving one of that class back earns more slack for it, so a producer/consumer
 * pair stops passing superblocks back and forth through the global heap. */
#define PINGPONG_WINDOW_NS 50000000u
#define BOOST_DECAY_NS     1000000000u
/* An owner that has not looked at its pending list for this many announcements (plus half the
 * superblocks it holds) is probably idle: the announcing thread collects for it. */
#define HELP_AFTER 64u

static void heap_lock(heap_t *heap) { pthread_mutex_lock(&heap->lock); }
static void heap_unlock(heap_t *heap) { pthread_mutex_unlock(&heap->lock); }

/* ---- fullness groups ---- */

static inline int32_t class_release_blocks(uint32_t capacity) {
  return (int32_t)((1.0 - ld_options.empty_fraction) * (double)capacity);
}

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
}

static inline bool sb_is_current(const heap_t *heap, const sb_t *sb) { return heap->current[sb->size_class] == sb; }

/* The one way heap->current[c] changes: the fast path's table follows it. */
static void heap_set_current(heap_t *heap, unsigned c, sb_t *sb) {
  sb_t *old = heap->current[c];
  if (old != &ld_sb_none && heap->current_tag[ld_current_slot(old)] == (uintptr_t)old + 1)
    heap->current_tag[ld_current_slot(old)] = 0;
  LD_OWNER_SET(heap->current[c], sb);
  if (sb != &ld_sb_none) heap->current_tag[ld_current_slot(sb)] = (uintptr_t)sb + 1;
}

/* ---- Hoard's threshold ---- */

static void heap_recompute_threshold(heap_t *heap, unsigned c) {
  double f = ld_options.empty_fraction;
  int64_t k = (int64_t)ld_options.k + heap->boost[c];
  int64_t by_k = heap->a[c] - k * ld_class_capacity_bytes[c];
  int64_t by_f = (int64_t)((1.0 - f) * (double)heap->a[c]);
  /* The invariant fails only when both hold: u < a - K*S and u < (1-f)*a (Hoard §3.1);
   * rounding by_f down keeps u == (1-f)*a on the legal side. */
  heap->u_release[c] = by_k < by_f ? by_k : by_f;
}

/* Sets the current superblock's floor from the threshold; the owner's paths only, since its
 * fast path reads it. */
static void heap_set_release_mark(heap_t *heap, unsigned c) {
  heap_recompute_threshold(heap, c);
  sb_t *cur = heap->current[c];
  if (cur != &ld_sb_none) {
    int64_t mark = heap->u_release[c] - heap->u_other[c];
    int64_t floor = mark <= 0 ? 0 : (mark + cur->block_size - 1) / cur->block_size;
    cur->floor = floor > INT32_MAX ? INT32_MAX : (int32_t)floor;
  }
}

/* Hoard's u for class c: the current superblock's blocks and the others'. */
static inline int64_t heap_u(const heap_t *heap, unsigned c) {
  const sb_t *cur = __atomic_load_n(&heap->current[c], __ATOMIC_RELAXED);
  return __atomic_load_n(&heap->u_other[c], __ATOMIC_RELAXED) +
         (cur != &ld_sb_none ? (int64_t)__atomic_load_n(&cur->used, __ATOMIC_RELAXED) * cur->block_size : 0);
}

/* The same, for another thread's heap: its current superblock may change hands meanwhile, and
 * its memory may even have been given back, so it is read only if larder still owns it. */
static int64_t heap_u_other_thread(const heap_t *heap, unsigned c) {
  const sb_t *cur = __atomic_load_n(&heap->current[c], __ATOMIC_RELAXED);
  int64_t u = __atomic_load_n(&heap->u_other[c], __ATOMIC_RELAXED);
  if (cur && cur != &ld_sb_none && ld_addrmap_contains(cur))
    u += (int64_t)__atomic_load_n(&cur->used, __ATOMIC_RELAXED) * __atomic_load_n(&cur->block_size, __ATOMIC_RELAXED);
  return u;
}

/* The fraction f changed (larder_option_set): the group boundaries move with it. */
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
  }
}

/* A superblock that may be given back (at most (1-f) full): the head of group 0, 1 or 2, else
 * the current one. If u < (1-f)a one of them is, since the others are all above (1-f). */
static sb_t *heap_find_releasable(heap_t *heap, unsigned c, bool allow_current) {
  if (!allow_current) {
    /* A helper (another thread) gives away only an empty superblock that the owner has not
     * listed as having local frees: the owner can neither free into it (no block of it is
     * live) nor meet it again on its own list. */
    sb_t *sb = heap->groups[c][0];
    return sb && !sb->in_local_dirty ? sb : NULL;
  }
  for (int g = 0; g <= LD_GROUP_RELEASABLE_MAX; g++)
    if (heap->groups[c][g]) return heap->groups[c][g];
  sb_t *sb = heap->current[c];
  if (allow_current && sb != &ld_sb_none && sb->used <= class_release_blocks(sb->capacity)) return sb;
  return NULL;
}

static void heap_detach(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class;
  if (sb_is_current(heap, sb)) {
    heap_set_current(heap, c, &ld_sb_none);
  } else {
    heap_group_remove(heap, sb);
    LD_OWNER_ADD(heap->u_other[c], -((int64_t)sb->used * sb->block_size));
  }
  LD_OWNER_ADD(heap->a[c], -(ld_class_capacity_bytes[c]));
  LD_OWNER_ADD(heap->superblocks_held, (size_t)-1);
}

/* Hands sb to the global heap. The caller holds the heap and global locks. */
static void heap_give_to_global(heap_t *heap, sb_t *sb) {
  int n = ld_sb_collect_local(sb); /* owner paths; a helper only gives superblocks without */
  if (n && !sb_is_current(heap, sb)) LD_OWNER_ADD(heap->u_other[sb->size_class], -((int64_t)n * sb->block_size));
  heap_detach(heap, sb);
  ld_sb_collect(sb, false);
  ld_global_put_locked(sb);
}

/* Gives superblocks of class c to the global heap while the class is below Hoard's threshold.
 * allow_current: false when another thread does it for an idle heap, whose current superblocks
 * belong to that heap's fast paths. Heap lock held. */
static void heap_release_while_below(heap_t *heap, unsigned c, bool allow_current) {
  if (heap->options_epoch != atomic_load_explicit(&ld_options_epoch, memory_order_relaxed)) heap_options_changed(heap);
  if (heap_u(heap, c) >= heap->u_release[c]) return;
  uint64_t now = ld_os_now_ns();
  if (heap->boost[c] && now - heap->last_take_ns[c] > BOOST_DECAY_NS) {
    heap->boost[c] /= 2;
    heap_recompute_threshold(heap, c);
    if (heap_u(heap, c) >= heap->u_release[c]) return;
  }
  ld_global_lock();
  while (heap_u(heap, c) < heap->u_release[c]) {
    sb_t *sb = heap_find_releasable(heap, c, allow_current);
    if (!sb) break;
    heap_give_to_global(heap, sb);
    LD_STAT_INC(heap, superblocks_to_global);
    heap->last_release_ns[c] = now;
    heap_recompute_threshold(heap, c);
  }
  ld_global_unlock();
}

/* ---- pending frees ---- */

void ld_heap_announce(sb_t *sb) {
  heap_t *owner = atomic_load_explicit(&sb->owner, memory_order_acquire);
  sb_t *head = atomic_load_explicit(&owner->pending, memory_order_relaxed);
  do {
    sb->pending_next = head;
  } while (!atomic_compare_exchange_weak_explicit(&owner->pending, &head, sb, memory_order_release, memory_order_relaxed));
  atomic_fetch_add_explicit(&owner->pending_count, 1, memory_order_relaxed);
}

/* Collects the frees of every superblock on heap's pending list. mine: the caller is the
 * heap's thread, so it may collect into current superblocks too; a helper leaves those on
 * the list. Returns the classes whose u went down. Heap lock held. */
static uint64_t heap_process_pending(heap_t *heap, bool mine) {
  if (!atomic_load_explicit(&heap->pending, memory_order_relaxed)) return 0;
  sb_t *sb = atomic_exchange_explicit(&heap->pending, NULL, memory_order_acquire);
  atomic_store_explicit(&heap->pending_count, 0, memory_order_relaxed);
  uint64_t classes = 0;
  sb_t *keep = NULL;
  while (sb) {
    sb_t *next = sb->pending_next;
    if (atomic_load_explicit(&sb->owner, memory_order_acquire) != heap) {
      ld_heap_announce(sb); /* it changed hands after it was announced: tell its owner */
    } else if (!mine && sb_is_current(heap, sb)) {
      sb->pending_next = keep; /* the owner's fast path uses it: leave it announced */
      keep = sb;
    } else {
      unsigned c = sb->size_class;
      int n = ld_sb_collect(sb, true);
      /* The owner's local frees too: by the owner, or by a helper once they are all the
       * blocks left (the owner then frees nothing more into sb). */
      if (!sb_is_current(heap, sb) &&
          (mine || __atomic_load_n(&sb->local_count, __ATOMIC_ACQUIRE) == __atomic_load_n(&sb->used, __ATOMIC_RELAXED)))
        n += ld_sb_collect_local(sb);
      if (n && !sb_is_current(heap, sb)) {
        LD_OWNER_ADD(heap->u_other[c], -((int64_t)n * sb->block_size));
        if (sb_group_of(sb) != sb->group) {
          heap_group_remove(heap, sb);
          heap_group_insert(heap, sb);
        }
      }
      if (n) classes |= (uint64_t)1 << c;
    }
    sb = next;
  }
  while (keep) {
    sb_t *next = keep->pending_next;
    ld_heap_announce(keep);
    keep = next;
  }
  return classes;
}

static void heap_release_classes(heap_t *heap, uint64_t classes, bool mine);

/* Collects the owner's local frees into every superblock it listed. Owner only, heap lock
 * held. Entries whose superblock changed hands since are skipped. */
static uint64_t heap_process_local(heap_t *heap) {
  uint64_t classes = 0;
  for (unsigned i = 0; i < heap->local_dirty_count; i++) {
    sb_t *sb = heap->local_dirty[i];
    if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap) continue;
    sb->in_local_dirty = 0;
    int n = ld_sb_collect_local(sb);
    if (!n) continue;
    unsigned c = sb->size_class;
    if (!sb_is_current(heap, sb)) {
      LD_OWNER_ADD(heap->u_other[c], -((int64_t)n * sb->block_size));
      if (sb_group_of(sb) != sb->group) {
        heap_group_remove(heap, sb);
        heap_group_insert(heap, sb);
      }
    }
    classes |= (uint64_t)1 << c;
  }
  heap->local_dirty_count = 0;
  return classes;
}

void ld_heap_free_local_slow(heap_t *heap, sb_t *sb, int32_t n) {
  if (!sb->in_local_dirty) {
    if (heap->local_dirty_count == LD_LOCAL_DIRTY_MAX) {
      /* One uncontended lock of its own heap per LD_LOCAL_DIRTY_MAX superblocks touched. */
      heap_lock(heap);
      LD_STAT_INC(heap, free_lock_acquisitions);
      heap_release_classes(heap, heap_process_local(heap), true);
      heap_unlock(heap);
    }
    if (sb->local_count > 0 && atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap) {
      sb->in_local_dirty = 1;
      heap->local_dirty[heap->local_dirty_count++] = sb;
    }
  }
  if (n >= __atomic_load_n(&sb->used, __ATOMIC_RELAXED) && atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap) {
    /* Every block of sb is free again. Announce it on the heap's own pending list, so that the
     * next refill, or the purge if this thread goes idle, finds it without a scan. */
    uintptr_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed);
    while (!(old & LD_REMOTE_ANNOUNCED)) {
      if (atomic_compare_exchange_weak_explicit(&sb->remote, &old, old | LD_REMOTE_ANNOUNCED, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        ld_heap_announce(sb);
        break;
      }
    }
    uint64_t now = ld_os_now_coarse_ns();
    ld_purge_note_free_memory(now);
    ld_purge_check(now);
  }
}

/* After collecting: Hoard's threshold for every class whose u went down. */
static void heap_release_classes(heap_t *heap, uint64_t classes, bool mine) {
  while (classes) {
    unsigned c = (unsigned)__builtin_ctzll(classes);
    classes &= classes - 1;
    heap_release_while_below(heap, c, mine);
    if (mine) heap_set_release_mark(heap, c);
  }
}

void ld_heap_free_other(heap_t *self, sb_t *sb, ld_block_t *b) {
  if (!ld_sb_push_remote(sb, b)) return;
  ld_heap_announce(sb);
  /* An owner that never allocates again would keep these frees: the purge collects them once
   * the delay has passed, if nobody did before. */
  uint64_t now = ld_os_now_coarse_ns();
  ld_purge_note_free_memory(now);
  ld_purge_check(now);
  heap_t *owner = atomic_load_explicit(&sb->owner, memory_order_relaxed);
  if (owner == self || owner->is_global) return; /* the owner collects at its next refill */
  /* The owner has not looked at its list for a while: it may be idle (blocked on a queue, a
   * lock, a request). Without help, every block other threads free would stay with it, a
   * P-fold blowup (Hoard §2.2) that Hoard's locked free avoids. */
  unsigned pending = atomic_load_explicit(&owner->pending_count, memory_order_relaxed);
  if (pending < HELP_AFTER + __atomic_load_n(&owner->superblocks_held, __ATOMIC_RELAXED) / 2) return;
  if (!__atomic_load_n(&owner->live, __ATOMIC_RELAXED) || pthread_mutex_trylock(&owner->lock) != 0) return;
  if (self != &ld_heap_empty) LD_STAT_INC(self, free_lock_acquisitions);
  heap_release_classes(owner, heap_process_pending(owner, false), false);
  pthread_mutex_unlock(&owner->lock);
}

void ld_heap_free_slow(heap_t *heap, unsigned cls) {
  heap_lock(heap);
  LD_STAT_INC(heap, free_lock_acquisitions);
  heap_release_while_below(heap, cls, true);
  heap_set_release_mark(heap, cls);
  heap_unlock(heap);
}

/* ---- refill: the current superblock of a class has no free block ---- */

/* A class-c superblock to allocate from: the fullest that still has a good share of its
 * blocks free (groups 3, 2, 1: Hoard §3.1 allocates from nearly-full superblocks to keep
 * the others emptying). A superblock of group 4 has less than f/2 of its blocks free: a refill
 * there yields a few blocks, and the next refill follows at once (a random-replacement heap
 * at steady state has every superblock there). So while the class has less than f/2 of its
 * bytes free, it grows by a superblock instead (NULL here); Hoard's invariant still holds,
 * since u then stays above (1-f)a. Empty superblocks (group 0) come before growing. */
static sb_t *heap_fullest(heap_t *heap, unsigned c) {
  static const int order[] = {3, 2, 1, 0};
  sb_t *sb = NULL;
  for (unsigned i = 0; i < sizeof order / sizeof order[0] && !sb; i++) sb = heap->groups[c][order[i]];
  if (!sb) {
    sb = heap->groups[c][4];
    int64_t free_bytes = heap->a[c] - heap_u(heap, c);
    int64_t slack = (int64_t)(ld_options.empty_fraction / 2 * (double)heap->a[c]);
    if (slack < ld_class_capacity_bytes[c]) slack = ld_class_capacity_bytes[c];
    if (sb && free_bytes < slack) sb = NULL;
  }
  if (sb) heap_group_remove(heap, sb);
  return sb;
}

void *ld_heap_refill(heap_t *heap, unsigned cls) {
  ld_debug_validate_maybe(heap);
  heap_lock(heap);
  LD_STAT_INC(heap, refills);
  if (heap->options_epoch != atomic_load_explicit(&ld_options_epoch, memory_order_relaxed)) heap_options_changed(heap);
  uint64_t classes = heap_process_pending(heap, true);
  sb_t *sb = heap->current[cls];
  if (sb != &ld_sb_none) {
    LD_STAT_INC(heap, superblocks_examined);
    if (!sb->free_list) ld_sb_carve(sb);
    if (!sb->free_list) { /* full: it waits in group 5 until frees into it come back */
      heap_set_current(heap, cls, &ld_sb_none);
      heap_group_insert(heap, sb);
      LD_OWNER_ADD(heap->u_other[cls], (int64_t)sb->used * sb->block_size);
      sb = &ld_sb_none;
    }
  }
  if (sb == &ld_sb_none) {
    sb = heap_fullest(heap, cls);
    /* The groups see local frees only once they are collected: collect them when the groups
     * offer nothing, so the cost is paid once per many refills and by the frees themselves. */
    if (!sb && heap->local_dirty_count) {
      classes |= heap_process_local(heap);
      sb = heap_fullest(heap, cls);
    }
    if (sb) {
      LD_STAT_INC(heap, superblocks_examined);
      int64_t counted = sb->used; /* what u_other holds for it, local frees included */
      ld_sb_collect_local(sb);
      LD_OWNER_ADD(heap->u_other[cls], -(counted * sb->block_size));
      if (!sb->free_list) ld_sb_carve(sb);
    }
  }
  uint64_t now = 0;
  if (!sb) {
    sb = ld_global_take(heap, cls);
    if (!sb) {
      heap_unlock(heap);
      errno = ENOMEM;
      return NULL;
    }
    LD_OWNER_ADD(heap->a[cls], ld_class_capacity_bytes[cls]);
    LD_OWNER_ADD(heap->superblocks_held, 1);
    if (!sb->free_list) ld_sb_carve(sb);
    now = ld_os_now_ns();
    /* One give-and-take is one event: the release it answers is used up. */
    if (heap->last_release_ns[cls] && now - heap->last_release_ns[cls] < PINGPONG_WINDOW_NS) {
      if (heap->boost[cls] < LD_BOOST_MAX)
        heap->boost[cls] = (uint8_t)(heap->boost[cls] * 2 + 1 > LD_BOOST_MAX ? LD_BOOST_MAX : heap->boost[cls] * 2 + 1);
      heap->last_release_ns[cls] = 0;
    }
    heap->last_take_ns[cls] = now;
  }
  heap_set_current(heap, cls, sb);
  ld_block_t *b = ld_sb_pop(sb);
  /* Collected frees lowered u: the threshold may have been crossed (a release may take the
   * current superblock; the next malloc then refills again). */
  heap_release_classes(heap, classes | ((uint64_t)1 << cls), true);
  heap_unlock(heap);
  uint64_t coarse = ld_os_now_coarse_ns();
  LD_OWNER_SET(heap->last_refill_ns, coarse);
  ld_purge_check(coarse);
  return b;
}

/* ---- maintenance by any thread (purge.c) ---- */

void ld_heap_collect_pending(heap_t *heap) {
  if (heap == &ld_heap_empty) return;
  heap_lock(heap);
  heap_release_classes(heap, heap_process_local(heap) | heap_process_pending(heap, true), true);
  heap_unlock(heap);
}

/* Empties a superblock's pages in place, for an idle heap: no block of it is live, and the
 * owner only touches it again under this lock, in a refill that finds it uncarved. */
static void sb_purge_in_place(sb_t *sb) {
  if (sb->bump == sb->data) return; /* never carved, or purged already */
  size_t page = ld_os_page_size();
  ld_os_purge((char *)sb + page, ld_sb_size - page);
  sb->free_list = NULL;
  sb->bump = sb->data;
  sb->purged = 1;
}

bool ld_heap_tidy(heap_t *heap, bool mine, bool all, uint64_t now) {
  bool more = false;
  if (mine) heap_lock(heap);
  else if (pthread_mutex_trylock(&heap->lock) != 0) return false;
  bool live = __atomic_load_n(&heap->live, __ATOMIC_RELAXED);
  uint64_t classes = (mine ? heap_process_local(heap) : 0) | heap_process_pending(heap, mine);
  if (live) {
    heap_release_classes(heap, classes, mine);
    /* Empty superblocks beyond the current ones go to the global heap (and from there to the
     * segments, to be purged by age): Hoard's K slack is for bursts, and this runs once the
     * purge delay has passed. A helper leaves those the owner may still list, and purges them
     * in place if the heap has been idle for the delay. */
    bool idle = all || now - __atomic_load_n(&heap->last_refill_ns, __ATOMIC_RELAXED) >= (uint64_t)ld_options.purge_delay_ms * 1000000u;
    ld_global_lock();
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      sb_t *sb = heap->groups[c][0];
      while (sb) {
        sb_t *next = sb->next;
        if (mine || !sb->in_local_dirty) {
          heap_give_to_global(heap, sb);
          LD_STAT_INC(heap, superblocks_to_global); /* under the heap's lock, as its owner counts it */
        }
        else if (idle) sb_purge_in_place(sb);
        else more = true; /* purge it once the heap has been idle for the delay */
        sb = next;
      }
      if (mine) heap_set_release_mark(heap, c);
      else heap_recompute_threshold(heap, c);
    }
    ld_global_unlock();
  }
  heap_unlock(heap);
  return !more;
}

/* ---- heap lifecycle ---- */

static void heap_abandon_locked(heap_t *heap);
static void heap_thread_exit(void *arg);

heap_t *ld_heaps_first(void) { return __atomic_load_n(&heaps.heaps, __ATOMIC_ACQUIRE); }
size_t ld_heaps_live_count(void) { return atomic_load_explicit(&heaps.live, memory_order_relaxed); }

/* A heap for a new thread: an exited thread's, or a new one. Heaps are never unmapped, and
 * there are never more than the most threads that lived at once. heaps.lock held. */
static heap_t *heap_new_locked(void) {
  /* A heap made by a thread after its exit hook had run (a destructor that allocated in the
   * last round) is given up once the kernel says that thread is gone. */
  for (heap_t *h = heaps.heaps; h; h = h->next_heap)
    if (h->live && h->orphan_tid && !ld_os_thread_alive(h->orphan_tid) && pthread_mutex_trylock(&h->lock) == 0) {
      heap_abandon_locked(h);
      pthread_mutex_unlock(&h->lock);
    }
  for (heap_t *h = heaps.heaps; h; h = h->next_heap)
    if (!__atomic_load_n(&h->live, __ATOMIC_RELAXED)) {
      h->orphan_tid = thread_exit_ran ? ld_os_thread_id() : 0;
      __atomic_store_n(&h->live, 1, __ATOMIC_RELAXED);
      return h;
    }
  void *mem;
  size_t bytes = (sizeof(heap_t) + ld_os_page_size() - 1) & ~(ld_os_page_size() - 1);
  if (ld_os_map(bytes, &mem) != 0) return NULL;
  heap_t *heap = mem;
  pthread_mutex_init(&heap->lock, NULL);
  /* The statistics read every heap's current superblocks: never a NULL one. */
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) heap->current[c] = &ld_sb_none;
  heap->orphan_tid = thread_exit_ran ? ld_os_thread_id() : 0;
  __atomic_store_n(&heap->live, 1, __ATOMIC_RELAXED);
  heap->next_heap = heaps.heaps;
  __atomic_store_n(&heaps.heaps, heap, __ATOMIC_RELEASE); /* the purge walks without the lock */
  return heap;
}

heap_t *ld_heap_for_thread(void) {
  ld_init_if_needed();
  if (!atomic_load_explicit(&heap_key_made, memory_order_acquire)) {
    pthread_mutex_lock(&heaps.lock);
    if (!atomic_load_explicit(&heap_key_made, memory_order_relaxed)) {
      pthread_key_create(&heap_key, heap_thread_exit);
      atomic_store_explicit(&heap_key_made, 1, memory_order_release);
    }
    pthread_mutex_unlock(&heaps.lock);
  }
  pthread_mutex_lock(&heaps.lock);
  heap_t *heap = heap_new_locked();
  pthread_mutex_unlock(&heaps.lock);
  if (!heap) return NULL;
  heap_lock(heap);
  /* A reused heap's pending list may hold superblocks announced after its last owner left;
   * they belong to the global heap now. */
  heap_process_pending(heap, true);
  memset(heap->current_tag, 0, sizeof heap->current_tag);
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) {
    LD_OWNER_SET(heap->current[c], &ld_sb_none);
    LD_OWNER_SET(heap->u_other[c], 0);
    LD_OWNER_SET(heap->a[c], 0);
    heap->boost[c] = 0;
    heap->last_release_ns[c] = heap->last_take_ns[c] = 0;
  }
  LD_OWNER_SET(heap->superblocks_held, 0);
  heap->local_dirty_count = 0;
  LD_OWNER_SET(heap->last_refill_ns, ld_os_now_coarse_ns());
  heap_options_changed(heap);
  heap_unlock(heap);
  atomic_fetch_add_explicit(&heaps.live, 1, memory_order_relaxed);
  ld_heap_tls = heap;
  /* May allocate (glibc's second-level key table), which now finds the heap. */
  pthread_setspecific(heap_key, heap);
  ld_purge_thread_start_if_enabled();
  return heap;
}

void ld_stats_add(ld_stats_t *dst, const ld_stats_t *src) {
  /* Other threads' counters are read while they run: each is a word, read once, so the sum is
   * a snapshot that may lag by a few operations, never torn. */
  size_t *d = (size_t *)dst;
  const size_t *s = (const size_t *)src;
  for (size_t i = 0; i < sizeof(ld_stats_t) / sizeof(size_t); i++) d[i] += __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

/* Thread exit: everything the heap holds goes to the global heap, where other threads reuse
 * it (DESIGN §1), and the heap itself waits for the next new thread. Heap lock held. */
static void heap_abandon_locked(heap_t *heap) {
  heap_process_local(heap);
  heap_process_pending(heap, true);
  ld_global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *sb = heap->current[c];
    if (sb != &ld_sb_none) heap_give_to_global(heap, sb);
    for (int g = 0; g < LD_GROUP_COUNT; g++)
      while ((sb = heap->groups[c][g])) heap_give_to_global(heap, sb);
  }
  ld_global_unlock();
  heap_process_pending(heap, true); /* announced meanwhile: forwarded to the global heap */
#ifdef LARDER_STATS
  ld_stats_add(&heaps.retired, &heap->stats);
  for (size_t i = 0; i < sizeof heap->stats / sizeof(size_t); i++) LD_OWNER_SET(((size_t *)&heap->stats)[i], 0);
#endif
  heap->orphan_tid = 0;
  atomic_fetch_sub_explicit(&heaps.live, 1, memory_order_relaxed);
  __atomic_store_n(&heap->live, 0, __ATOMIC_RELEASE);
}

static void heap_thread_exit(void *arg) {
  heap_t *heap = arg;
  thread_exit_ran = 1;
  if (!heap || heap == &ld_heap_empty) return;
  ld_heap_tls = &ld_heap_empty;
  pthread_mutex_lock(&heaps.lock);
  heap_lock(heap);
  heap_abandon_locked(heap);
  heap_unlock(heap);
  pthread_mutex_unlock(&heaps.lock);
  ld_purge_check(ld_os_now_ns());
}

/* ---- fork ---- */
void ld_heaps_lock_all(void) {
  pthread_mutex_lock(&heaps.lock);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) pthread_mutex_lock(&h->lock);
}
void ld_heaps_unlock_all(bool reinit) {
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) {
    if (reinit) pthread_mutex_init(&h->lock, NULL);
    else pthread_mutex_unlock(&h->lock);
  }
  if (reinit) pthread_mutex_init(&heaps.lock, NULL);
  else pthread_mutex_unlock(&heaps.lock);
}

/* ---- statistics ---- */

void ld_stat_count(heap_t *heap, size_t field_offset) {
#ifdef LARDER_STATS
  if (heap != &ld_heap_empty) LD_OWNER_ADD(*(size_t *)((char *)&heap->stats + field_offset), 1);
  else __atomic_fetch_add((size_t *)((char *)&stats_unowned + field_offset), 1, __ATOMIC_RELAXED);
#else
  (void)heap;
  (void)field_offset;
#endif
}

void ld_heaps_stats(ld_stats_t *out, int64_t *in_use, int64_t *held) {
  memset(out, 0, sizeof *out);
  *in_use = *held = 0;
  pthread_mutex_lock(&heaps.lock);
  ld_stats_add(out, &heaps.retired);
  ld_stats_add(out, &stats_unowned);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap) {
    ld_stats_add(out, &h->stats);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      *in_use += heap_u_other_thread(h, c);
      *held += __atomic_load_n(&h->a[c], __ATOMIC_RELAXED) / ld_class_capacity_bytes[c] * (int64_t)ld_sb_size;
    }
  }
  pthread_mutex_unlock(&heaps.lock);
}

/* ---- validation ---- */

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

static void heap_validate_locked(heap_t *heap, int *violations) {
  double f = ld_options.empty_fraction;
  size_t held = 0;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    int64_t k_slack = ((int64_t)ld_options.k + heap->boost[c]) * ld_class_capacity_bytes[c];
    int64_t u = 0, a = 0;
    sb_t *cur = heap->current[c];
    if (cur != &ld_sb_none) {
      ld_sb_validate(cur, heap, violations);
      if (cur->size_class != c) VIOLATION("heap %p: current superblock of class %u has class %u\n", (void *)heap, c, cur->size_class);
      a += ld_class_capacity_bytes[c];
      held++;
    }
    if (heap->boost[c] > LD_BOOST_MAX) VIOLATION("heap %p class %u: boost %u above %d\n", (void *)heap, c, heap->boost[c], LD_BOOST_MAX);
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
        held++;
        if (++n > (1u << 30)) break;
      }
    }
    if (u != heap->u_other[c])
      VIOLATION("heap %p class %u: u outside the current superblock is %lld, superblocks add up to %lld\n", (void *)heap, c,
                (long long)heap->u_other[c], (long long)u);
    if (a != heap->a[c]) VIOLATION("heap %p class %u: a is %lld, superblocks add up to %lld\n", (void *)heap, c, (long long)heap->a[c], (long long)a);
    int64_t hu = heap_u(heap, c);
    /* Hoard's invariant (seed 004 §3.1), per size class as its proof has it (§4.1), with K
     * raised by at most LD_BOOST_MAX for classes that ping-pong: the bound stays O(1). */
    if (!(hu >= heap->a[c] - k_slack || (double)hu >= (1.0 - f) * (double)heap->a[c]))
      VIOLATION("heap %p class %u: Hoard's invariant fails: u=%lld a=%lld K*S=%lld f=%.3f\n", (void *)heap, c,
                (long long)hu, (long long)heap->a[c], (long long)k_slack, f);
  }
  if (held != heap->superblocks_held) VIOLATION("heap %p: holds %zu superblocks, counted %zu\n", (void *)heap, held, heap->superblocks_held);
}

/* The calling thread's heap (brought up to date first, as its next slow path would) and every
 * abandoned heap: other live threads' heaps change under our feet without a lock, so they are
 * checked by their own threads. */
void ld_heap_validate(heap_t *mine, int *violations) {
  if (mine != &ld_heap_empty) {
    heap_lock(mine);
    heap_process_local(mine);
    heap_process_pending(mine, true);
    if (mine->options_epoch != atomic_load_explicit(&ld_options_epoch, memory_order_relaxed)) heap_options_changed(mine);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      heap_release_while_below(mine, c, true);
      heap_set_release_mark(mine, c);
    }
    heap_validate_locked(mine, violations);
    heap_unlock(mine);
  }
  pthread_mutex_lock(&heaps.lock);
  for (heap_t *h = heaps.heaps; h; h = h->next_heap)
    for (unsigned c = 0; c < LD_CLASS_COUNT && !h->live; c++)
      if (h->u_other[c] != 0 || h->a[c] != 0) VIOLATION("abandoned heap %p still holds memory in class %u\n", (void *)h, c);
  pthread_mutex_unlock(&heaps.lock);
}
