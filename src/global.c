/* The global heap, Hoard's heap 0 (seed 004 §3): it receives superblocks that a heap's
 * emptiness threshold gives back and the superblocks of exited threads, and hands them to
 * heaps that run out.
 *
 * Empty superblocks wait here for a purge delay, on a list of their class, newest first, and
 * serve that class's next take before any other memory: then go back to the segments (the
 * purge, ld_global_release_empties), purged at once, as they have waited a delay already.
 * Sent back to the segments at once, as they were, an emptied superblock's chunk went to the
 * next superblock of any class, which kept the old one's pages resident past its own: threads
 * that come and go, each using a few blocks of many classes (a pool that recycles its
 * threads), held ever more pages until the purge (100 threads of 200 blocks of 16 B-3 KiB, 40
 * rounds: 52 -> 131 MiB, and 52 -> 58 MiB with the chunk's old pages purged, which cost a
 * superblock that empties and refills 15x its time in madvise and faults). A class whose list
 * is empty takes the newest empty superblock of the nearest class that has one before a new
 * chunk, so that no new page is touched while empty ones wait here.
 *
 * Superblocks with room wait in a list per class; full ones (from exited threads) in one list,
 * until frees into them reach the global heap's inbox or are announced on its pending list, as
 * for any heap. So taking a superblock looks at one list head, never at every superblock held.
 *
 * Free pages of partly used superblocks. A program that frees nearly all of a large heap in
 * random order and keeps a few blocks (a cache after a flush, the sessions that outlive a peak)
 * leaves most superblocks here with a block or two each, their pages resident: 256 MiB of
 * 16 B-1 KiB blocks with 0.3% kept, 77.5 MiB held for 0.8 MiB live, where glibc, jemalloc and
 * mimalloc kept 265-291 MiB. A superblock that has waited here a purge delay is looked at by
 * the purge: the units of its pages (ld_dormant_shift: a page, or S / 32) on which every
 * carved block is free are given back, and the blocks that start there become dormant (sb_t,
 * dormant): listed nowhere, counted, their tags gone with the page (now 17.6 MiB). Only a
 * sparse superblock is looked at (at most 1/LD_DORMANT_USED_MAX_INV used), and only half its
 * units or more go. Such a superblock waits on its class's dormant list, after the partly used
 * ones: a take that finds none of those wakes it (ld_sb_wake: the dormant blocks tagged and
 * listed again, their pages written back as any new superblock's are). Never taken again, as
 * at first, they cost the next peak what they no longer served (10% of 256 MiB kept: 306 ->
 * 419 MiB); woken, the next peak is as before. A free of a block that starts on a dormant unit
 * is a double free, caught by the mark where the tag is gone (ld_check_small_free). Each look
 * is O(S / 16) arithmetic and a walk of the free lists, made again only after frees reached
 * the superblock, within a budget of blocks per run (maintain.c).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <string.h>

typedef struct sb_list_s {
  sb_t *head;
  size_t count;
} sb_list_t;

/* Zero-initialised (in .bss, not .data): a 256 KB heap_t with an initialiser would be 256 KB of
 * the library file, mapped and partly faulted in by every process that loads it. */
heap_t ld_global_heap;

static struct {
  ld_lock_t lock;
  /* Hoard's u_0 by class, and a_0 by class in superblocks (S each); summed, the totals
   * (ld_global_stats) */
  int64_t class_u[LD_CLASS_COUNT];
  int64_t class_superblocks[LD_CLASS_COUNT];
  int64_t class_carved[LD_CLASS_COUNT]; /* bytes of their blocks carved, by class */
  sb_list_t by_class[LD_CLASS_COUNT];  /* superblocks with room */
  sb_list_t full;                      /* no room: waiting for frees */
  sb_list_t dormant[LD_CLASS_COUNT];   /* some of their pages given back: woken by a take */
  size_t dormant_bytes;                /* their units given back */
  sb_list_t empty[LD_CLASS_COUNT];     /* empty, newest first (next), oldest last (empty_oldest) */
  sb_t *empty_oldest[LD_CLASS_COUNT];
  ld_class_words_t empty_classes;      /* bit c: empty[c] holds one (written under the lock, read
                                          without it by ld_global_release_for_span's first look) */
  size_t taken_bytes;                  /* remote frees accounted for (statistics) */
  sb_t *pending_taken;                 /* taken from the pending list, not yet looked at */
  /* Empty regions of the fit tier (fit.c) that their heaps did not keep, newest first, oldest
   * last: the next heap that needs a region takes the newest (its pages resident, written by a
   * region's blocks as any region's are: a chunk that changed use kept the union of both uses'
   * pages resident); the purge gives those that waited a delay to the segments. */
  sb_list_t fit_regions;
  sb_t *fit_oldest;
  size_t fit_waiting;                  /* fit_regions.count, stored atomically: read without the lock */
} global = {.lock = LD_LOCK_INIT};

void ld_global_lock(void) { ld_lock_shared(&global.lock); }
void ld_global_unlock(void) { ld_unlock(&global.lock); }
void ld_global_let_waiters_in(void) { ld_purge_let_waiters_in(&global.lock); }
void ld_global_reinit_lock(void) { ld_lock_reset(&global.lock); }

/* u_0 of sb's class, as n blocks of sb come into use (n < 0: freed). Global lock held. */
static void count_blocks(const sb_t *sb, int64_t n) { global.class_u[sb->size_class] += n * (int64_t)sb->block_size; }
/* a_0 and u_0 of sb's class, as sb comes (+1) or goes (-1) with its blocks in use. */
static void count_superblock(const sb_t *sb, int64_t sign) {
  global.class_superblocks[sb->size_class] += sign;
  global.class_carved[sb->size_class] += sign * (sb->bump - sb->data);
  count_blocks(sb, sign * sb->used);
}

static void list_push(sb_list_t *list, sb_t *sb) {
  sb->prev = NULL;
  sb->next = list->head;
  if (list->head) list->head->prev = sb;
  list->head = sb;
  list->count++;
}
static void list_remove(sb_list_t *list, sb_t *sb) {
  if (sb->prev) sb->prev->next = sb->next; else list->head = sb->next;
  if (sb->next) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
  list->count--;
}
/* The list sb belongs on by its fullness (or its dormant units), and the one it is on
 * (recorded in sb->group). */
static inline sb_list_t *list_for(const sb_t *sb) {
  return sb->dormant ? &global.dormant[sb->size_class] : sb->used >= (int32_t)sb->capacity ? &global.full : &global.by_class[sb->size_class];
}
static inline ld_class_set_t empty_classes(void) { return ld_class_words_read(&global.empty_classes); }
static inline sb_list_t *list_of(const sb_t *sb) {
  return sb->group == LD_GROUP_DORMANT ? &global.dormant[sb->size_class] : sb->group == LD_GROUP_FULL ? &global.full : &global.by_class[sb->size_class];
}
static void list_file(sb_t *sb) {
  sb->group = sb->dormant ? LD_GROUP_DORMANT : sb->used >= (int32_t)sb->capacity ? LD_GROUP_FULL : 0;
  list_push(list_for(sb), sb);
}

/* An empty superblock that no freer can still announce waits on its class's empty list
 * (above); it stays counted in a. */
static bool keep_if_empty(sb_t *sb) {
  if (sb->used != 0 || ld_sb_is_announced(sb)) return false;
  list_remove(list_of(sb), sb);
  unsigned c = sb->size_class;
  sb->group = LD_GROUP_EMPTY;
  sb->idle_since_ns = ld_os_now_coarse_ns();
  list_push(&global.empty[c], sb);
  if (!global.empty_oldest[c]) global.empty_oldest[c] = sb;
  ld_class_words_set(&global.empty_classes, empty_classes() | LD_CLASS_BIT(c));
  ld_due_note(sb->idle_since_ns); /* released by the purge after a delay */
  return true;
}
static void empty_remove(sb_t *sb) {
  /* (its dormant units, if any, are formatted over or go back with it) */
  global.dormant_bytes -= ld_dormant_units_bytes(sb->dormant);
  __atomic_store_n(&sb->dormant, 0, __ATOMIC_RELEASE);
  unsigned c = sb->size_class;
  if (global.empty_oldest[c] == sb) global.empty_oldest[c] = sb->prev;
  list_remove(&global.empty[c], sb);
  if (!global.empty[c].head) ld_class_words_set(&global.empty_classes, empty_classes() & ~LD_CLASS_BIT(c));
}
/* Out of the global heap, on its way back to the segments (global lock held)... */
static void give_back_detach(sb_t *sb) {
  empty_remove(sb);
  count_superblock(sb, -1); /* (empty) */
  sb->kind = LD_KIND_FREED;
}
/* ...and there: its pages, those its blocks were carved on (the segment adds those it found
 * resident). No lock needed: a detached superblock is no list's, and no free may reach it
 * (it is empty; a stray free finds kind FREED). */
static void give_back_to_segments(sb_t *sb) {
  ld_segment_free(sb, 1, ld_round_up((size_t)(sb->bump - (char *)sb), ld_os_page_size()));
}
static void give_back(sb_t *sb) {
  give_back_detach(sb);
  give_back_to_segments(sb);
}
/* The class nearest cls in block size (the smallest ratio of the two sizes) with an empty
 * superblock waiting, or -1; the larger of two as near. Among the fixed classes the nearest
 * index is the nearest size (eight classes a doubling); where a learned class is involved, a
 * look at each class that has one, at most LD_CLASS_COUNT (their indices are not in size
 * order). */
static int empty_class_near(unsigned cls) {
  ld_class_set_t set = empty_classes();
  uint64_t fixed = (uint64_t)set;
  _Static_assert(LD_CLASS_FIXED == 64, "the fixed classes are the set's first word, in size order");
  if (cls < LD_CLASS_FIXED && !(uint64_t)(set >> 64)) { /* no learned class waits: by index, two bit scans */
    uint64_t above = fixed & (~(uint64_t)0 << cls), below = fixed & ~(~(uint64_t)0 << cls);
    int up = above ? __builtin_ctzll(above) : -1, down = below ? 63 - __builtin_clzll(below) : -1;
    if (up < 0) return down;
    if (down < 0) return up;
    return (unsigned)up - cls <= cls - (unsigned)down ? up : down;
  }
  int near = -1;
  uint64_t near_big = 0, near_small = 1; /* the nearest ratio so far, big / small */
  uint32_t size = ld_class_size[cls];
  for (ld_class_set_t classes = set; classes; classes &= classes - 1) {
    unsigned c = ld_class_set_first(classes);
    uint64_t big = ld_class_size[c] > size ? ld_class_size[c] : size, small = ld_class_size[c] > size ? size : ld_class_size[c];
    if (near < 0 || big * near_small < near_big * small || (big * near_small == near_big * small && ld_class_size[c] > size))
      near = (int)c, near_big = big, near_small = small;
  }
  return near;
}

void ld_global_put_locked(sb_t *sb) {
  atomic_store_explicit(&sb->owner, &ld_global_heap, memory_order_release);
  /* looked at for free pages once it has waited a delay here */
  sb->idle_since_ns = ld_os_now_coarse_ns();
  sb->scanned_used = -1;
  ld_due_note(sb->idle_since_ns);
  count_superblock(sb, 1);
  list_file(sb);
  keep_if_empty(sb);
}

/* sb gained free blocks: onto the empty list if it is empty now, else onto the list its
 * fullness calls for. Global lock held. */
static void refile_after_frees(sb_t *sb) {
  if (sb->scanned_used >= 0) { /* looked at for free pages before: again at a run a delay from now */
    sb->scanned_used = -1;
    ld_due_note(ld_os_now_coarse_ns());
  }
  if (!keep_if_empty(sb) && list_for(sb) != list_of(sb)) {
    list_remove(list_of(sb), sb);
    list_file(sb);
  }
}

bool ld_global_free(sb_t *sb, ld_block_t *b) {
  /* read without the lock first: most callers' superblocks are another heap's */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != &ld_global_heap || !ld_trylock(&global.lock))
    return false;
  /* (a superblock given back to the segments keeps the global heap as its owner: kind says) */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != &ld_global_heap || sb->kind != LD_KIND_SMALL) {
    ld_global_unlock();
    return false;
  }
  /* (the global heap holds sb: its lock guards bump, and the dormant units) */
  if ((char *)b >= sb->bump) ld_fatal_bad_free("invalid free (block was never allocated)", b);
  if (ld_sb_in_dormant(sb, b)) ld_fatal_bad_free("double free", b);
  ld_set_next(b, sb->free_list);
  sb->free_list = b;
  sb->used--;
  count_blocks(sb, -1);
  refile_after_frees(sb);
  ld_global_unlock();
  return true;
}

/* Collects the frees announced on superblocks the global heap holds; each entry was paid for
 * by the free that announced it. Global lock held. At most `most` are looked at: a take (a
 * refill) looks at GLOBAL_PENDING_PER_TAKE, the purge's tidy at all; the rest wait in
 * pending_taken, still announced (heap.c, heap_process_pending_some, says why). */
#define GLOBAL_PENDING_PER_TAKE 64u
static void global_tidy_locked(uint32_t most) {
  ld_message_t m;
  for (uint32_t n = 0; n < most && n < LD_INBOX_SLOTS && ld_inbox_take(&ld_global_heap, &m); n++) {
    sb_t *sb = ld_sb_deliver_message(&ld_global_heap, &m);
    if (!sb) continue;
    count_blocks(sb, -(int64_t)m.count);
    global.taken_bytes += (size_t)m.count * sb->block_size;
    refile_after_frees(sb);
  }
  sb_t *sb = global.pending_taken;
  for (uint32_t n = 0; n < most; n++) {
    if (!sb && !(sb = ld_sb_pending_take(&ld_global_heap))) break;
    sb_t *next = sb->pending_next;
    if (atomic_load_explicit(&sb->owner, memory_order_acquire) != &ld_global_heap) {
      ld_sb_announce(sb); /* it changed hands after it was announced: tell its owner */
    } else {
      int got = ld_sb_account_remote(sb, true);
      count_blocks(sb, -(int64_t)got);
      global.taken_bytes += (size_t)got * sb->block_size;
      refile_after_frees(sb);
    }
    sb = next;
  }
  global.pending_taken = sb;
}

bool ld_global_try_tidy(uint32_t most) {
  if (!ld_trylock(&global.lock)) return false;
  global_tidy_locked(most);
  ld_global_unlock();
  return true;
}

void ld_global_tidy(void) {
  ld_global_lock();
  global_tidy_locked(UINT32_MAX);
  ld_global_unlock();
}

static void region_remove(sb_t *r);

sb_t *ld_global_take(heap_t *heap, unsigned cls) {
  ld_global_lock();
  global_tidy_locked(GLOBAL_PENDING_PER_TAKE);
  sb_t *sb = global.by_class[cls].head;
  if (sb) {
    list_remove(&global.by_class[cls], sb);
    count_superblock(sb, -1);
  } else if ((sb = global.dormant[cls].head)) {
    /* its dormant blocks listed again (their pages come back as they are written) */
    list_remove(&global.dormant[cls], sb);
    global.dormant_bytes -= ld_dormant_units_bytes(sb->dormant);
    ld_sb_wake(sb);
    count_superblock(sb, -1);
  } else {
    /* an empty one of this class (its pages as they were), else of the nearest class */
    int c = empty_class_near(cls);
    if (c >= 0) {
      sb = global.empty[c].head;
      empty_remove(sb);
      count_superblock(sb, -1); /* (empty, under its old class) */
      ld_sb_format(sb, cls); /* carved again from its start, over the pages it has */
    } else if ((sb = global.fit_oldest)) {
      /* an empty region of the fit tier, its pages resident: before a chunk of the segments */
      region_remove(sb);
      ld_sb_format(sb, cls);
    }
  }
  if (sb) {
    sb->group = LD_GROUP_NONE;
    atomic_store_explicit(&sb->owner, heap, memory_order_release);
    LD_STAT_INC(heap, superblocks_from_global);
  }
  ld_global_unlock();
  LD_STAT_INC(heap, superblocks_examined);
  if (sb) return sb;
  bool clean;
  /* its pages are touched only as its blocks are carved: its bound when freed adds those */
  sb = ld_segment_alloc(1, ld_os_page_size(), 0, &clean);
  if (!sb) return NULL;
  (void)clean;
  ld_sb_format(sb, cls);
  atomic_store_explicit(&sb->owner, heap, memory_order_release);
  return sb;
}

void ld_global_put_region(sb_t *r) {
  ld_global_lock();
  r->idle_since_ns = ld_os_now_coarse_ns();
  list_push(&global.fit_regions, r);
  __atomic_store_n(&global.fit_waiting, global.fit_regions.count, __ATOMIC_RELAXED);
  if (!global.fit_oldest) global.fit_oldest = r;
  ld_due_note(r->idle_since_ns);
  ld_global_unlock();
}

static void region_remove(sb_t *r) {
  if (global.fit_oldest == r) global.fit_oldest = r->prev;
  list_remove(&global.fit_regions, r);
  __atomic_store_n(&global.fit_waiting, global.fit_regions.count, __ATOMIC_RELAXED);
}

/* An empty region out of the global heap on its way back to the segments (global lock held),
 * as give_back_detach is for a superblock: given back whole, every page of it may have been
 * written. */
static void region_detach(sb_t *r) {
  region_remove(r);
  r->kind = LD_KIND_FREED;
  r->bump = (char *)r + ld_sb_size;
}

sb_t *ld_global_take_region(void) {
  if (!__atomic_load_n(&global.fit_waiting, __ATOMIC_RELAXED)) return NULL; /* a look first: none, the common case */
  ld_global_lock();
  sb_t *r = global.fit_regions.head;
  if (r) region_remove(r);
  ld_global_unlock();
  return r;
}

/* After a drop the purge gives back thousands of superblocks, each with a madvise (about 100
 * ms for 270 MiB here). It takes them off the global heap's lists RELEASES_PER_TURN at a time
 * and gives them to the segments (the madvise) after it lets go of the global lock, so that a
 * thread that waits for the global lock (a refill, a medium malloc) waits for list work alone:
 * with more runnable threads than cores, a purge thread preempted in the middle of 8 madvise
 * calls under the global lock held it 1-23 ms (tail-latency, 4 workers on 2 cores: 85-100 ms
 * of such holds in 5 s). */
#define RELEASES_PER_TURN 8u

size_t ld_global_release_empties(uint64_t now, bool all) {
  uint64_t age = all ? 0 : ld_purge_delay(); /* all: those empty when the call began (segment.c, ld_segment_purge) */
  size_t released = 0;
  for (;;) {
    sb_t *batch[RELEASES_PER_TURN];
    unsigned n = 0;
    ld_global_lock();
    for (ld_class_set_t classes = empty_classes(); classes && n < RELEASES_PER_TURN; classes &= classes - 1) {
      unsigned c = ld_class_set_first(classes);
      sb_t *sb;
      while (n < RELEASES_PER_TURN && (sb = global.empty_oldest[c]) && sb->idle_since_ns + age <= now) {
        give_back_detach(sb);
        batch[n++] = sb;
      }
    }
    sb_t *r;
    while (n < RELEASES_PER_TURN && (r = global.fit_oldest) && r->idle_since_ns + age <= now) {
      region_detach(r);
      batch[n++] = r;
    }
    ld_global_unlock();
    for (unsigned i = 0; i < n; i++) give_back_to_segments(batch[i]);
    released += (size_t)n * ld_sb_size;
    if (n < RELEASES_PER_TURN || ld_purge_cut(all)) break;
  }
  return released;
}

/* A look at a superblock costs its carved blocks (arithmetic) and a walk of its free lists: a
 * run stops once its looks have passed `budget` blocks (the rest wait for the next run), and
 * lets a thread that waits for the lock in after every SCANS_PER_TURN looks. */
#define SCANS_PER_TURN 8u

/* Superblocks of `list` that have waited a delay since they came or were last freed into
 * (scanned_used -1): looked at for free pages. A superblock given dormant units moves to the
 * dormant list. */
static size_t give_back_list(sb_list_t *list, uint64_t now, bool all, size_t *budget, unsigned *scans, bool *more) {
  uint64_t age = all ? 0 : ld_purge_delay();
  size_t bytes = 0;
  /* (after a turn the walk starts again from the head: a waiter may have taken the next one;
   * those looked at are passed over by their scanned_used) */
  for (sb_t *sb = list->head, *next; sb; sb = next) {
    next = sb->next;
    if (sb->scanned_used >= 0 || sb->idle_since_ns + age > now) continue;
    if (*budget < sb->capacity) {
      *more = true;
      break;
    }
    *budget -= sb->capacity;
    uint32_t before = sb->dormant;
    size_t got = ld_sb_give_back_free_pages(sb);
    bytes += got;
    if (sb->dormant != before) {
      global.dormant_bytes += ld_dormant_units_bytes(sb->dormant & ~before);
      if (list_of(sb) != list_for(sb)) {
        list_remove(list_of(sb), sb);
        list_file(sb);
      }
    }
    if (++*scans % SCANS_PER_TURN == 0) {
      if (!ld_purge_turn(&global.lock, all)) { /* a fork or trim waits: the rest next run */
        *more = true;
        break;
      }
      next = list->head;
    }
  }
  return bytes;
}

size_t ld_global_give_back_free_pages(uint64_t now, bool all, size_t budget, bool *more) {
  unsigned scans = 0;
  size_t bytes = 0;
  ld_global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT && !*more; c++)
    bytes += give_back_list(&global.by_class[c], now, all, &budget, &scans, more);
  for (unsigned c = 0; c < LD_CLASS_COUNT && !*more; c++)
    bytes += give_back_list(&global.dormant[c], now, all, &budget, &scans, more);
  ld_global_unlock();
  return bytes;
}

size_t ld_global_dormant_bytes(void) {
  ld_global_lock();
  size_t bytes = global.dormant_bytes;
  ld_global_unlock();
  return bytes;
}

void ld_global_release_for_span(size_t bytes) {
  /* a relaxed look first: none, the common case */
  if (!empty_classes() && !__atomic_load_n(&global.fit_waiting, __ATOMIC_RELAXED)) return;
  ld_global_lock();
  size_t released = 0;
  /* at most bytes / S + 1 superblocks, each the oldest of the lowest class that has one (the
   * oldest of all would mean a look at every class's for each); then empty regions of the fit
   * tier, oldest first (sqlite's trace replayed twice: its second pass's medium spans took new
   * pages while the first's regions waited here) */
  for (ld_class_set_t classes; released < bytes && (classes = empty_classes());) {
    unsigned c = ld_class_set_first(classes);
    give_back(global.empty_oldest[c]);
    released += ld_sb_size;
  }
  for (; released < bytes && global.fit_oldest; released += ld_sb_size) {
    sb_t *r = global.fit_oldest;
    region_detach(r);
    give_back_to_segments(r);
  }
  ld_global_unlock();
}

uint64_t ld_global_next_expiry(void) {
  uint64_t first = UINT64_MAX;
  ld_global_lock();
  for (ld_class_set_t classes = empty_classes(); classes; classes &= classes - 1) {
    const sb_t *sb = global.empty_oldest[ld_class_set_first(classes)];
    if (sb->idle_since_ns < first) first = sb->idle_since_ns;
  }
  if (global.fit_oldest && global.fit_oldest->idle_since_ns < first) first = global.fit_oldest->idle_since_ns;
  ld_global_unlock();
  return first == UINT64_MAX ? 0 : first + ld_purge_delay();
}

void ld_global_stats(int64_t *in_use, int64_t *held, size_t *taken_bytes, ld_class_figures_t *classes) {
  ld_global_lock();
  *in_use = *held = 0;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    *in_use += global.class_u[c];
    *held += global.class_superblocks[c] * (int64_t)ld_sb_size;
    if (classes) {
      classes->in_use[c] += global.class_u[c];
      classes->superblocks[c] += global.class_superblocks[c];
      classes->carved[c] += global.class_carved[c];
    }
  }
  *taken_bytes = global.taken_bytes;
  *held += (int64_t)global.fit_regions.count * (int64_t)ld_sb_size; /* (empty regions of the fit tier) */
  ld_global_unlock();
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

/* kind: which list (LIST_ROOM: a class's superblocks with room, LIST_FULL, LIST_DORMANT: a
 * class's with dormant units); cls: its class (-1 for the full list) */
enum { LIST_ROOM, LIST_FULL, LIST_DORMANT };
static void list_validate(const sb_list_t *list, int kind, int cls, int64_t *class_u, int64_t *class_superblocks,
                          int64_t *class_carved, size_t *dormant, int *violations) {
  size_t n = 0;
  const sb_t *prev = NULL;
  for (sb_t *sb = list->head; sb; prev = sb, sb = sb->next) {
    if (sb->prev != prev) VIOLATION("global heap: broken back link at %p\n", (void *)sb);
    ld_sb_validate(sb, &ld_global_heap, violations);
    if (cls >= 0 && (sb->size_class != cls || sb->used >= (int32_t)sb->capacity))
      VIOLATION("global heap: superblock %p (class %u, %d used) filed under class %d\n", (void *)sb, sb->size_class, sb->used, cls);
    if (kind == LIST_FULL && sb->used < (int32_t)sb->capacity)
      VIOLATION("global heap: superblock %p on the full list has room\n", (void *)sb);
    if ((kind == LIST_DORMANT) != (sb->dormant != 0))
      VIOLATION("global heap: superblock %p with dormant units %#x on the wrong list\n", (void *)sb, sb->dormant);
    *dormant += ld_dormant_units_bytes(sb->dormant);
    if (sb->size_class < LD_CLASS_COUNT) {
      class_u[sb->size_class] += (int64_t)sb->used * sb->block_size;
      class_superblocks[sb->size_class]++;
      class_carved[sb->size_class] += sb->bump - sb->data;
    }
    if (++n > list->count) break;
  }
  if (n != list->count) VIOLATION("global heap: list count %zu, found %zu\n", list->count, n);
}

void ld_global_validate(int *violations) {
  ld_global_lock();
  { /* the fit tier's empty regions: newest first, each an empty region the global heap holds */
    size_t n = 0;
    const sb_t *last = NULL;
    for (const sb_t *r = global.fit_regions.head; r && n <= global.fit_regions.count; last = r, r = r->next, n++) {
      if (r->magic != LD_SB_MAGIC || r->kind != LD_KIND_FIT || r->used != 0 || atomic_load_explicit(&r->owner, memory_order_relaxed) != &ld_global_heap)
        VIOLATION("global heap: %p on the list of empty regions is not an empty region (kind %u, %d used)\n", (void *)r, r->kind, r->used);
      if (last && last->idle_since_ns < r->idle_since_ns) VIOLATION("global heap: the list of empty regions is out of order at %p\n", (void *)r);
    }
    if (n != global.fit_regions.count || last != global.fit_oldest)
      VIOLATION("global heap: %zu empty regions listed, %zu counted (oldest %p, last %p)\n", n, global.fit_regions.count,
                (void *)global.fit_oldest, (void *)last);
  }
  int64_t class_u[LD_CLASS_COUNT] = {0}, class_superblocks[LD_CLASS_COUNT] = {0}, class_carved[LD_CLASS_COUNT] = {0};
  size_t dormant = 0;
  for (int c = 0; c < LD_CLASS_COUNT; c++) {
    list_validate(&global.by_class[c], LIST_ROOM, c, class_u, class_superblocks, class_carved, &dormant, violations);
    size_t n = 0;
    const sb_t *last = NULL;
    for (const sb_t *sb = global.empty[c].head; sb && n <= global.empty[c].count; last = sb, sb = sb->next, n++) {
      if (sb->used != 0 || sb->size_class != c || sb->group != LD_GROUP_EMPTY)
        VIOLATION("global heap: superblock %p on class %d's empty list (class %u, %d used, group %u)\n", (void *)sb, c,
                  sb->size_class, sb->used, sb->group);
      if (last && last->idle_since_ns < sb->idle_since_ns)
        VIOLATION("global heap: class %d's empty list out of time order at %p\n", c, (void *)sb);
      class_superblocks[c]++;
      class_carved[c] += sb->bump - sb->data;
      dormant += ld_dormant_units_bytes(sb->dormant);
    }
    if (n != global.empty[c].count || last != global.empty_oldest[c] || !n != !ld_class_set_has(empty_classes(), (unsigned)c))
      VIOLATION("global heap: class %d's empty list: %zu found, count %zu, oldest %p (found %p)\n", c, n,
                global.empty[c].count, (void *)global.empty_oldest[c], (void *)last);
  }
  list_validate(&global.full, LIST_FULL, -1, class_u, class_superblocks, class_carved, &dormant, violations);
  for (int c = 0; c < LD_CLASS_COUNT; c++)
    list_validate(&global.dormant[c], LIST_DORMANT, c, class_u, class_superblocks, class_carved, &dormant, violations);
  if (dormant != global.dormant_bytes)
    VIOLATION("global heap: dormant units add up to %zu bytes, counted %zu\n", dormant, global.dormant_bytes);
  for (int c = 0; c < LD_CLASS_COUNT; c++)
    if (class_u[c] != global.class_u[c] || class_superblocks[c] != global.class_superblocks[c] ||
        class_carved[c] != global.class_carved[c])
      VIOLATION("global heap: class %d: u=%lld in %lld superblocks (%lld carved) counted, %lld in %lld (%lld) found\n", c,
                (long long)global.class_u[c], (long long)global.class_superblocks[c], (long long)global.class_carved[c],
                (long long)class_u[c], (long long)class_superblocks[c], (long long)class_carved[c]);
  ld_global_unlock();
}
