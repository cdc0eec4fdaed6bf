/* liblarder's allocation and free paths.
 *
 * The allocation path, from fast to slow:
 *   1. Fast path (larder_malloc, below): the thread's heap, reached through an initial-exec
 *      thread-local pointer, keeps a bin of free blocks per size class (a bounded array of
 *      pointers, cache.c); pop one, unless it is one of the deferred frees as well (a double
 *      free: the slow path reports it). The block's neighbours and its superblock are not read;
 *      the block's tag (set while it was free) is cleared. No lock, no atomic, no counter;
 *      two plain stores mark the thread as in its bins (bins_busy), so that the purge may
 *      empty the bins of a thread that stopped calling (cache.c, ld_cache_drain_idle).
 *   2. Refill (cache.c ld_cache_refill, heap.c ld_heap_fill): the bin is empty. Under the
 *      heap's own lock, read up to 64 messages of the inbox (batches of other threads' frees,
 *      each onto its superblock; a batch of one or two blocks, which the message names whole,
 *      into its class's bin, unread), then take half a bin of blocks from the superblock the class
 *      draws from: its free list, its batches from the inbox (whole, from their hints, their
 *      blocks unread, when the hints check out: superblock.c), its remote list (taken whole),
 *      untouched blocks (a superblock whose carved blocks are all on its free list is carved
 *      again from its first block, its list not walked);
 *      else switch to the fullest superblock of that class the heap holds (Hoard §3.1,
 *      fullness groups: the head of a list, no search). Hoard's accounting (u, a, the
 *      threshold) is applied per batch.
 *   3. Superblock from the global heap (global.c, ld_global_take): the heap holds none with
 *      room; under the global lock, the head of the global heap's list for this class.
 *   4. New superblock from a segment (segment.c, a free chunk), and a new segment from the OS.
 *   Sizes above the largest class are medium spans (runs of chunks in segments, up to 2 MiB)
 *   or large spans (a mapping each, with a cache of freed ones): large.c. A medium malloc
 *   first looks in the spans the thread kept, then in those other threads freed back to it
 *   (cache.c, "medium spans"; span_alloc, below).
 *   With LARDER_FIT_ABOVE set, sizes above it, up to three quarters of a superblock, come from
 *   the fit tier instead (fit.c: best fit with coalescing, under the heap's lock; fit_malloc):
 *   their bins are never filled, so every such malloc takes the slow path.
 *
 * The free path:
 *   1. Fast path (larder_free, below): the heap's table of the superblocks it owns, indexed by
 *      the block's superblock address, gives the block's class without reading any header;
 *      the block must lie in the class's range. One that is the block malloc took last from
 *      that bin (the slot above the bin's top still holds it: a temporary, or a run freed in
 *      reverse) goes straight back: its tag is checked and set, the count raised (no slot above
 *      the top names an uncarved block: heap.c, bin_scrub_uncarved). Any other block must lie
 *      where blocks have been handed out and start a block of that class (a multiply, no
 *      division). The block itself is not read: its line is prefetched and
 *      it joins the heap's 4 deferred frees (internal.h, heap_t deferred), in the place of the
 *      oldest, whose line has had 4 calls' time to arrive: it must not carry the free tag (a
 *      double free), gets it and goes in its bin. A free of a cold block thus never waits for
 *      its line (churn of 256 B blocks at 10^6 live: 81-96 ns per replacement with one
 *      deferred free, 61-66 with four; docs/results.md). One compare sends a deferred block
 *      whose word is its free tag or another thread's mark to the slow path (cache.c,
 *      deferred_claim). malloc's pop compares its block with the 4; a refill looks for free
 *      tags on them after its fill, a flush before and after; the purge's
 *      drain of an idle thread, the thread's exit and the process's settle them, so a double
 *      free is reported before the block could be handed out twice. The hardened build defers
 *      nothing.
 *   2. The bin is full: half of it, the oldest, goes back to the superblocks (cache.c,
 *      ld_heap_return), where u falls and Hoard's threshold may give a superblock to the
 *      global heap; or, if the bin cycles (it turned twice between refills and flushes since
 *      the thread's last trim), its limit doubles instead, within the thread's bin_growth_kb
 *      (cache.c, bin_grow). A thread's exit returns every bin under one lock (ld_heap_return_bins),
 *      but for part of each bin that two parked heaps keep for the next thread (heap.c,
 *      ld_heap_park).
 *   3. A block of another heap's superblock (free_slow): it waits in the thread's ring of 4
 *      slow frees (cache.c) while its line and its header's arrive, the ownership map looked
 *      up first (the pointer is larder's before anything of it is read) unless its
 *      superblock has a batch in the thread's buffer, which was checked as it opened. It is
 *      marked as it enters (two bytes of its tag word: a store, this call's last), and must
 *      still carry the mark as it leaves, so that a double free by two threads is caught in
 *      either order. The free
 *      it displaces goes on: into its superblock's batch (cache.c: 1,024 slots, 4-way
 *      set-associative, 512 KiB in all), after its own checks (block start, free tag),
 *      inline; else the header's checks, then a free into a superblock the global heap holds
 *      (global.c), or a new batch. A full batch is handed over with one CAS, as a message in
 *      the owner's inbox (internal.h, ld_message_t), which the owner reads at its next fill;
 *      a batch of at most 8 (frees scattered over a large heap, or over many owners' heaps)
 *      waits in its owner's outbox (64 of them, two places per owner) for 15 more to the same
 *      owner, the 16 sent with one CAS, and the owner's fill puts the blocks of a batch of one
 *      or two straight in its bins.
 *      A batch that finds the inbox full reads it for the owner (trylock) or, when the owner's
 *      lock is busy, goes onto its superblock's remote list (a second CAS announces it).
 *      No free waits for a lock (seed 002).
 *   4. Medium and large spans (a pointer a power of two past its header: free_span_start, then
 *      free_span with the span's kind read once): a medium span another thread allocated goes
 *      back to it (a CAS claims a slot of its ring of returned spans, which its next medium
 *      malloc takes), else is kept by this thread (cache.c) when its cache takes it; blocks of the
 *      fit tier (free_fit: the owner's under its heap's lock, another's onto its region's stack
 *      with no lock, fit.c); and pointers that are not larder's (reported).
 *
 * realloc: a small block of the thread's own that its class still serves is kept, found as the
 * free fast path finds a block (realloc_keeps), and one it no longer serves moves at once
 * (realloc_own_move); every other call takes realloc_slow (a small
 * block moves; a medium span grows over the free chunks after it; a large one onto a cached
 * span, by mremap in place, or to a new mapping).
 * Every slow path ends with a poll of the maintenance floor (maintain.c): when the purge's
 * deadline has passed it wakes the purge thread, or, in a process without one, runs the purge
 * there; never from below. (A medium call that the thread's kept
 * spans serve polls once in 16: span_poll_due.)
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* errno (issue 16). glibc documents errno for failures only, and keeps it across free since
 * 2.33; programs save it around malloc and expect it back. Below the entry points, mapping
 * probes, mremap attempts, thread checks and start-up may all set it on their way to a success,
 * so every slow path keeps the caller's value and gives it back when it succeeds; a failure
 * sets ENOMEM (or EINVAL, for a bad alignment). The fast paths call nothing that could set it. */
static inline void *api_result_at(int *err, void *p, int saved) {
  *err = p ? saved : ENOMEM;
  return p;
}
static inline void *api_result(void *p, int saved) { return api_result_at(&errno, p, saved); }
/* The calling thread's errno, through its heap where it has one (heap_t, errno_at: a load, not
 * a call), for the slow paths that run most (malloc_slow, free_span). */
static inline int *errno_of(const heap_t *heap) { return LD_LIKELY(heap != &ld_heap_empty) ? heap->errno_at : &errno; }

static LD_NOINLINE void *malloc_slow(size_t size);
static LD_NOINLINE void free_slow(void *p, heap_t *heap);
#ifndef LARDER_HARDENED
static LD_NOINLINE void free_deferred_slow(heap_t *heap, void *p, ld_bin_t *bin);
#endif

/* The block on top of the bin of granule g ((size + 15) / 16), or NULL when it is empty. The
 * bin is reached through bin_of, which a purge that turns an idle thread's bins away points at
 * an empty one (cache.c); the thread is marked as in its bins meanwhile. (malloc, calloc, and
 * aligned requests: aligned_fast.)
 * A block that is a deferred free as well is a double free (free(a), free(b), free(a): a
 * went in the bin at the second free and was deferred again at the third). Handed out here,
 * its tag would be cleared before the deferred free's check, and a would be handed out twice;
 * NULL instead, and the slow path settles the deferred frees, which reports it. */
static inline ld_block_t *bin_pop(heap_t *heap, size_t g) {
  LD_BUSY_INC(heap);
  atomic_signal_fence(memory_order_seq_cst);
  ld_bin_t *bin = ld_bin_of_bin(heap, LD_FAST_READ(heap->bin_of[g]));
  uintptr_t n = bin->count;
  ld_block_t *b = NULL;
  if (LD_LIKELY(n != 0)) {
    b = bin->slots[n - 1];
#ifndef LARDER_HARDENED
    if (LD_UNLIKELY(ld_heap_deferred_is(heap, b))) {
      atomic_signal_fence(memory_order_seq_cst);
      LD_BUSY_DEC(heap);
      return NULL;
    }
#endif
    LD_OWNER_DEC32(bin->count);
    ld_bin_check(b);
    b->tag = 0;
  }
  atomic_signal_fence(memory_order_seq_cst);
  LD_BUSY_DEC(heap);
  return b;
}

LD_ALIGNED_HOT void *larder_malloc(size_t size) {
  if (LD_LIKELY(size <= LD_SMALL_LIMIT)) {
    ld_block_t *b = bin_pop(ld_heap_tls, (size + 15) >> 4);
    if (LD_LIKELY(b != NULL)) return b;
  }
  return malloc_slow(size);
}

/* One test per check, each to a slow path, which repeats them to name the fault exactly. A
 * NULL pointer, or one larder never handed out, finds no entry in the table. The block itself
 * is not read: its line is prefetched, and it waits among the heap's deferred frees
 * (internal.h, heap_t deferred) in the place of the oldest, freed 4 calls before, whose line
 * has had that time to arrive: that one is checked for the free tag and goes in its bin. */
LD_ALIGNED_HOT void larder_free(void *p) {
  heap_t *heap = ld_heap_tls;
  uintptr_t sb = (uintptr_t)p & ld_sb_mask;
  /* The table first, outside the bins: a free of another thread's block (the table has no
   * entry) then stores nothing here on its way to the slow path. The table is not the drain's
   * to change while this thread is in its bins, and a superblock a drain gave away meanwhile
   * has its class's bin turned away (span 0) until this thread's next slow path. */
  uintptr_t owned_class = ld_heap_owned_class(heap, (uintptr_t)p, sb);
  if (LD_LIKELY(owned_class < LD_OWNED_NONE)) {
    LD_BUSY_INC(heap);
    atomic_signal_fence(memory_order_seq_cst);
    ld_bin_t *bin = ld_heap_owned_bin(heap, owned_class);
    uint32_t offset = (uint32_t)((uintptr_t)p - sb) - bin->first;
#ifdef LARDER_HARDENED
    /* Hardened: no free is deferred. The block is sealed (its link written) as it is
     * freed, so that a write through a dangling pointer is found when the link is next read. */
    ld_block_t *b = p;
    void **slot = &bin->slots[bin->count];
    if (LD_LIKELY(*slot != LD_BIN_FULL && offset < LD_FAST_READ(bin->span) && (uint64_t)offset * bin->divisor_magic < bin->divisor_magic &&
                  !ld_bin_uncarved(bin, p) && b->tag != ld_tag(b))) {
      b->tag = ld_tag(b);
      ld_bin_seal(b);
      *slot = b;
      LD_OWNER_INC32(bin->count);
      LD_STAT_INC(heap, frees_cached);
      atomic_signal_fence(memory_order_seq_cst);
      LD_BUSY_DEC(heap);
      return;
    }
#else
    /* In the class's range first: a bin turned away (span 0) is the purge's to empty, and its
     * count and slots are not read (ThreadSanitizer). */
    if (LD_LIKELY(offset < LD_FAST_READ(bin->span))) {
      /* A block freed back onto the bin that malloc took it from, before the bin's next push or
       * pop: a temporary freed before the next malloc of its size, or a run freed in the
       * reverse order of its mallocs. A pop leaves its slot as it was, so the slot above the
       * bin's top still holds the block (slots are never NULL: cache.c, bin_setup), and the
       * block started a block of this class when it was handed out (the table says its
       * superblock is the heap's, of this class). Its line is in the cache: its tag is read now,
       * and the block goes back in its place, not among the deferred frees (a malloc(32) and
       * free pair: 92 -> 74 instructions). A double free is caught as below: the tag is the
       * free tag, or the block is also a deferred free (then malloc's pop and the settle report
       * it). No slot above the top points into the class's uncarved blocks (heap.c,
       * bin_scrub_uncarved: a superblock that came back formatted anew may have left one
       * there), so this block needs no uncarved check: 74 -> 70 instructions. */
      ld_block_t *top = bin->slots[bin->count];
      if (p == top) {
        uintptr_t tag = ld_tag(top);
        if (LD_LIKELY(ld_tag_settles(top->tag, tag))) {
          top->tag = tag;
          LD_OWNER_INC32(bin->count);
          LD_STAT_INC(heap, frees_cached);
          atomic_signal_fence(memory_order_seq_cst);
          LD_BUSY_DEC(heap);
          return;
        }
      }
      /* carved, and the start of a block of the class */
      if (LD_LIKELY(!ld_bin_uncarved(bin, p) &&
                    (uint64_t)offset * bin->divisor_magic < bin->divisor_magic)) {
        ld_prefetch_for_write(p);
        uintptr_t at = heap->deferred_at;
        ld_deferred_t *entry = (ld_deferred_t *)((char *)heap->deferred + at);
        ld_block_t *q = entry->block;
        ld_bin_t *q_bin = entry->bin;
        /* (q's bin full: the slot holds LD_BIN_FULL, and q is not read) */
        uintptr_t q_tag = ld_tag(q);
        if (LD_LIKELY(q_bin->slots[q_bin->count] != LD_BIN_FULL && ld_tag_settles(q->tag, q_tag))) {
          q->tag = q_tag;
          ld_bin_seal(q);
          /* (the count read again, not its slot's address kept across the checks: one
           * register fewer, and no register saved and restored, 2 instructions a free; the
           * compiler barrier keeps GCC from reusing the first read) */
          atomic_signal_fence(memory_order_seq_cst);
          q_bin->slots[q_bin->count] = q;
          LD_OWNER_INC32(q_bin->count);
          LD_OWNER_SET(entry->block, p);
          LD_OWNER_SET(entry->bin, bin);
          LD_OWNER_SET(heap->deferred_at, (at + sizeof(ld_deferred_t)) % sizeof heap->deferred);
          LD_STAT_INC(heap, frees_cached);
          atomic_signal_fence(memory_order_seq_cst);
          LD_BUSY_DEC(heap);
          return;
        }
        LD_BUSY_DEC(heap);
        free_deferred_slow(heap, p, bin);
        return;
      }
    }
#endif
    LD_BUSY_DEC(heap);
  }
  free_slow(p, heap); /* the thread's heap, read once */
}

/* ---------------------------------------------------------------------------------------- */
/* Slow paths                                                                                 */

/* A pointer whose header is not in memory larder owns: reported, never read through. */
static LD_NORETURN LD_NOINLINE void not_owned(const char *call, const void *p) {
  bool released = ld_addrmap_state((const char *)p - 1) == LD_ADDR_RELEASED;
  if (call[0] == 'r')
    ld_fatal_bad_free(released ? "realloc of a block already freed and unmapped (use after free or double free)"
                               : "realloc of a pointer larder did not allocate", p);
  ld_fatal_bad_free(released ? "double free (or free of a block already unmapped)"
                             : "invalid free (not a block from larder)", p);
}

/* The calling thread's heap, made on its first call; NULL (errno ENOMEM) if it cannot be. */
static heap_t *thread_heap(void) {
  heap_t *heap = ld_heap_tls;
  if (heap == &ld_heap_empty && !(heap = ld_maintain_thread_heap())) errno = ENOMEM;
  return heap;
}

static LD_NOINLINE void *malloc_class_reclaimed(heap_t *heap, unsigned cls);

/* Which size a class's refills were for (the malloc that found the bin empty): a
 * majority vote (Boyer and Moore's) per class over rounds of LD_VOTE_ROUND calls; a size that
 * ends a round with at least half the round's votes held at least three quarters of its calls,
 * and the class is asked to learn it (superblock.c, ld_class_learn). Only a class of which the
 * heap holds LD_VOTE_SUPERBLOCKS superblocks or more votes: a learned class saves at most an
 * eighth of its memory and costs each heap that uses it a partly used superblock of its own,
 * and the slow path sees the size that found the bin empty, which is the program's mix only
 * where the class is in heavy use (a pool whose threads allocated the same few sizes each
 * round, about one refill per class and round, learned 7 classes from those alone:
 * tests/alloc/thread_recycle_rss.c, RSS x1.17 -> x1.34 over 20 rounds). A class whose size is
 * exact for the request (every class up to 256 bytes) has nothing to learn and is not counted. */
#define LD_VOTE_ROUND 16
#define LD_VOTE_SUPERBLOCKS 8
static inline void class_vote(heap_t *heap, unsigned cls, size_t g) {
  /* (a read as the statistics read it: the purge may give the heap's superblocks away meanwhile) */
  if (ld_class_size[cls] == g * 16 || LD_READ(heap->a[cls]) < LD_VOTE_SUPERBLOCKS * ld_class_capacity_bytes[cls] ||
      LD_READ(ld_classes_learned) >= LD_LEARNED_CLASSES_MAX())
    return;
  __typeof__(heap->class_vote[0]) *vote = &heap->class_vote[cls];
  if (vote->granule == g) vote->votes++;
  else if (vote->votes == 0) vote->granule = (uint16_t)g, vote->votes = 1;
  else vote->votes--;
  if (++vote->calls < LD_VOTE_ROUND) return;
  if (vote->votes >= LD_VOTE_ROUND / 2 && !LD_READ(ld_granule_no_gain[vote->granule])) ld_class_learn(vote->granule);
  vote->calls = vote->votes = 0;
}

/* A small block of class cls from the thread's bin, refilled when empty; g, the request's
 * granule, votes for a learned class at a refill (0: no vote). */
static void *malloc_class(heap_t *heap, unsigned cls, size_t g) {
  ld_bin_t *bin = ld_heap_bin(heap, cls);
  ld_cache_enter(heap);
  /* before a refill (they may be this class's blocks), and before the heap takes a superblock
   * whose block may wait in the ring: it would then reach the fast path unchecked */
  ld_cache_settle_slow_frees(heap);
  if (bin->count) {
    /* bin_pop found the top block among the deferred frees (a double free: settling them
     * reports it, its tag being the free tag); they stay otherwise, as they stay at a refill
     * (which looks for free tags on them after its fill, cache.c): settled here, they would
     * refill the bin a few blocks at a time, and a malloc and free pair went slow every 5 */
    if (ld_heap_deferred_is(heap, bin->slots[bin->count - 1])) ld_cache_settle_deferred(heap);
    ld_block_t *b = bin->slots[bin->count - 1];
    LD_OWNER_SET(bin->count, bin->count - 1);
    ld_bin_check(b);
    b->tag = 0;
    ld_cache_leave(heap);
    return b;
  }
  ld_maintain_debug_validate(heap);
  /* (the bins of the classes learned since their last refill: malloc's table follows them) */
  if (LD_UNLIKELY(heap->classes_synced != LD_READ(ld_classes_learned))) ld_cache_classes_sync(heap);
  if (g) class_vote(heap, cls, g);
  uint64_t now = ld_os_now_coarse_ns();
  LD_OWNER_SET(heap->last_slow_ns, now);
  void *p = ld_cache_refill(heap, cls);
  ld_cache_leave(heap);
  if (LD_UNLIKELY(!p)) p = malloc_class_reclaimed(heap, cls);
  ld_maintain_poll(heap, now, true);
  return p;
}

/* Out of memory: once more, the caches emptied (maintain.c, ld_maintain_reclaim), or NULL. The
 * refill keeps one call site, malloc_class's, where it is inlined (called from here too, it
 * was not: 4 instructions a pair more at 1,000 bytes, where a refill takes 8 blocks). */
static LD_NOINLINE void *malloc_class_reclaimed(heap_t *heap, unsigned cls) {
  static __thread bool retrying;
  if (retrying || !ld_maintain_reclaim(heap)) return NULL;
  retrying = true;
  void *p = malloc_class(heap, cls, 0);
  retrying = false;
  return p;
}

/* ld_large_alloc, tried once more with the caches emptied when the OS refuses the memory (as
 * malloc_class_reclaimed). */
static void *large_alloc(heap_t *heap, size_t size, size_t alignment, size_t *dirty) {
  /* (heap: a medium span another thread frees goes back to this one, cache.c "medium spans") */
  void *p = ld_large_alloc(size, alignment, dirty, heap);
  if (LD_UNLIKELY(!p) && ld_maintain_reclaim(heap)) p = ld_large_alloc(size, alignment, dirty, heap);
  return p;
}

/* A medium or large span for malloc (size above the largest class): a medium span the thread
 * kept (cache.c) when one fits (*kept), else from large.c. *dirty as ld_large_alloc's. */
static inline __attribute__((always_inline)) void *span_alloc(heap_t *heap, size_t size, size_t *dirty, bool *kept) {
  void *p = ld_cache_medium_alloc(heap, size);
  *kept = p != NULL;
  if (p) {
    *dirty = ld_sb_of(p)->usable;
    return p;
  }
  /* Empty superblocks wait in the global heap for their class (global.c); a medium span that
   * the segments' dirty memory cannot cover takes theirs first: on sqlite's trace, whose few
   * medium spans came while empty superblocks waited, 19.0% -> 17.7% fragmentation. */
  if (size <= ld_medium_max && ld_segment_dirty_bytes() < size) ld_global_release_for_span(size);
  return large_alloc(heap, size, LD_MIN_ALIGN, dirty);
}

/* A medium call served by the thread's kept spans polls the maintenance floor once in
 * LD_SPAN_POLL_EVERY (the clock read and the checks were 84 of the ~770 instructions of such a
 * malloc and free): its thread is marked busy at least that often. */
#define LD_SPAN_POLL_EVERY 16u
static inline bool span_poll_due(heap_t *heap, bool kept) {
  return !kept || ++heap->span_calls % LD_SPAN_POLL_EVERY == 0;
}

/* The fit tier serves this request size (LARDER_FIT_ABOVE set, and the size above it and within
 * a region's three quarters). */
static inline bool fit_serves(size_t size) {
  size_t fit_above = LD_FIT_ABOVE();
  return LD_UNLIKELY(fit_above != 0) && size > fit_above && size <= LD_FIT_MAX();
}

/* A block of the fit tier (fit.c; LARDER_FIT_ABOVE): its bins are never filled for these sizes,
 * so every such malloc comes here. */
static LD_NOINLINE void *fit_malloc(heap_t *heap, size_t size) {
  void *p = ld_fit_alloc(heap, size);
  if (LD_UNLIKELY(!p) && ld_maintain_reclaim(heap)) p = ld_fit_alloc(heap, size);
  if (span_poll_due(heap, true)) { /* once in 16, as a kept span's call (the clock and the poll were 80 of ~700 instructions a pair) */
    uint64_t now = ld_os_now_coarse_ns();
    LD_OWNER_SET(heap->last_slow_ns, now);
    ld_maintain_poll(heap, now, true);
  }
  return p;
}

static LD_NOINLINE void *malloc_slow(size_t size) {
  heap_t *heap = ld_heap_tls;
  int *err = errno_of(heap), saved = *err;
  if (!ld_request_ok(size, 0)) return api_result_at(err, NULL, saved);
  if (LD_UNLIKELY(heap == &ld_heap_empty) && !(heap = thread_heap())) return api_result_at(err, NULL, saved);
  if (fit_serves(size)) return api_result_at(err, fit_malloc(heap, size), saved);
  if (size <= ld_small_max) {
    size_t g = (size + 15) >> 4;
    return api_result_at(err, malloc_class(heap, ld_granule_class(g), g), saved);
  }
  size_t dirty;
  bool kept;
  void *p = span_alloc(heap, size, &dirty, &kept);
  if (p) LD_STAT_INC(heap, large_allocs); /* medium spans included; medium_allocs counts those */
  if (span_poll_due(heap, kept)) {
    uint64_t now = ld_os_now_coarse_ns();
    LD_OWNER_SET(heap->last_slow_ns, now); /* the thread is not idle: its medium cache stays */
    ld_maintain_poll(heap, now, true);
  }
  return api_result_at(err, p, saved);
}

/* Every free the fast path did not take: a full bin, a block of another heap's superblock
 * (or of one of the thread's own that the table does not list), medium and large spans, and
 * pointers that are not larder's. Every check is made again here, to name the fault. The
 * common case, a small block of another heap's superblock whose batch is open in the thread's
 * buffer, is free_slow itself; the next, a block of another heap's superblock with no batch
 * yet, runs straight through free_checked; the others leave that for functions of their own,
 * so that neither saves registers for them.
 *
 * errno: from the checks on, nothing makes a system call that could set it, except the
 * maintenance poll (the purge), which keeps errno itself, the making of a thread's heap and
 * the freeing of spans, kept below. The rest takes locks, reads clocks through the vDSO and
 * moves superblocks between lists (alloc_errno_kept checks free's errno on every path). */

/* The kind is read once: another thread's free of the same span (a double free) may retire it
 * at any moment, and a second read that then found it freed sent a medium span down the large
 * path, which unmapped its chunks in the middle of their segment while the other free kept it
 * (bad_free medium-double-race: a SIGSEGV at the next malloc, about 1 run in 1,500 under load).
 * Each path claims the span with one CAS of its kind, which the second free fails and reports. */
static LD_NORETURN LD_NOINLINE void free_span_bad(uint8_t kind, void *p) {
  if (ld_kind_not_live(kind)) ld_fatal_bad_free("double free", p);
  ld_fatal_bad_free("invalid free (not the start of a block)", p);
}

static LD_NOINLINE void free_span(heap_t *heap, sb_t *sb, void *p, uint8_t kind) {
  /* (kind: the caller's one read; one test on the way: which fault it was is the report's to
   * say) */
  if (LD_UNLIKELY((kind != LD_KIND_LARGE && kind != LD_KIND_MEDIUM) || p != sb->data)) free_span_bad(kind, p);
  ld_stat_count(heap, offsetof(ld_stats_t, frees_other));
  int *err = errno_of(heap), saved = *err; /* munmap, madvise and mremap must not show through free */
  bool by_cache = false;
  if (kind == LD_KIND_MEDIUM) {
    by_cache = ld_cache_medium_free(heap, sb);
    if (!by_cache) ld_medium_free(sb);
  } else {
    ld_large_free(sb);
  }
  if (heap != &ld_heap_empty && span_poll_due(heap, by_cache)) {
    uint64_t now = ld_os_now_coarse_ns();
    LD_OWNER_SET(heap->last_slow_ns, now);
    ld_maintain_poll(heap, now, false);
  }
  *err = saved;
}

static LD_NOINLINE void free_remote_sent(heap_t *heap) { ld_maintain_poll(heap, ld_os_now_coarse_ns(), false); }

/* A checked small block that is the thread's own, or freed by a thread without a heap yet.
 * claimed: it left the thread's ring of slow frees marked, and carries the claimed word that
 * its leaving wrote (cache.c, slow_free_leaves), checked there. */
static LD_NOINLINE void free_small_own(heap_t *heap, sb_t *sb, ld_block_t *b, bool claimed) {
  /* A thread that only frees gets a heap too: its batches of remote frees and its counters
   * are its own (shared ones would serialise every consumer thread on one cache line). */
  if (heap == &ld_heap_empty) {
    int saved = errno; /* start-up and a failure to make the heap set it */
    if (!(heap = ld_maintain_thread_heap())) heap = &ld_heap_empty;
    errno = saved;
  }
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap) {
    b->tag = ld_tag(b);
    if (ld_cache_free_remote(heap, sb, b) && heap != &ld_heap_empty) free_remote_sent(heap);
    return;
  }
  /* Only the owner may read bump: beyond it, the block was never handed out. (Atomically: a
   * purge that drains this thread's bins meanwhile may give sb to the global heap, and its next
   * owner carve; bump only grows while b is live, so either value judges b alike.) */
  if ((char *)b >= LD_READ(sb->bump)) ld_fatal_bad_free("invalid free (block was never allocated)", b);
  ld_bin_t *bin = ld_heap_bin(heap, sb->size_class);
  ld_cache_enter(heap);
  ld_cache_settle_deferred(heap); /* a double free of the deferred block is caught there */
  if (claimed) b->tag = ld_tag(b);
  else ld_cache_claim_own(b);
  if (bin->count < bin->limit) {
    ld_cache_free_owned(heap, sb, b);
    ld_cache_leave(heap);
  } else { /* half the bin goes back: a slow path */
    uint64_t now = ld_os_now_coarse_ns();
    LD_OWNER_SET(heap->last_slow_ns, now);
    ld_cache_free_owned(heap, sb, b);
    ld_cache_leave(heap);
    ld_maintain_poll(heap, now, false);
  }
}

#ifndef LARDER_HARDENED
/* The free fast path's block p (bin's class, range checked) when the oldest deferred free
 * cannot go in its bin there: its bin is full, it carries the free tag (a double free) or a
 * slow free's mark (internal.h, ld_tag_settles). p
 * is checked, its line read here, the oldest settled (flushing its bin if full), and p
 * deferred in its place (cache.c, ld_cache_defer). */
static LD_NOINLINE void free_deferred_slow(heap_t *heap, void *p, ld_bin_t *bin) {
  ld_cache_enter(heap);
  bool flushed = ld_cache_defer(heap, p, bin);
  LD_STAT_INC(heap, frees_cached);
  uint64_t now = flushed ? ld_os_now_coarse_ns() : 0;
  if (flushed) LD_OWNER_SET(heap->last_slow_ns, now);
  ld_cache_leave(heap);
  if (flushed) ld_maintain_poll(heap, now, false);
}

#endif

/* free_checked past the ownership map's look (p's header is larder's). */
static LD_NOINLINE void free_mapped(heap_t *heap, sb_t *sb, void *p, bool claimed);

/* free_checked for a pointer a power of two past its header (free_slow): a span's start goes
 * straight to free_span with the kind read here, once; anything else (a small block that lies
 * there, the fit tier's, a fault) to free_mapped. One function where a medium free went through
 * three (free_checked, free_mapped, free_span): a medium malloc and free pair, 392.6 -> 368.6
 * instructions (scripts/count-instructions.sh). */
static LD_NOINLINE void free_span_start(heap_t *heap, sb_t *sb, void *p) {
  if (LD_UNLIKELY(!ld_addrmap_contains_header(p))) not_owned("free", p);
  if (LD_LIKELY(sb->magic == LD_SB_MAGIC)) {
    uint8_t kind = __atomic_load_n(&sb->kind, __ATOMIC_RELAXED);
    if (LD_LIKELY(kind == LD_KIND_MEDIUM || kind == LD_KIND_LARGE)) {
      free_span(heap, sb, p, kind);
      return;
    }
  }
  free_mapped(heap, sb, p, false);
}

/* free_slow past its first look: everything checked from the ownership map on. */
static LD_NOINLINE void free_checked(heap_t *heap, sb_t *sb, void *p, bool claimed) {
  if (LD_UNLIKELY(!ld_addrmap_contains_header(p))) not_owned("free", p);
  free_mapped(heap, sb, p, claimed);
}

/* A block of the fit tier: the thread's own under its heap's lock, another's onto its region's
 * stack (fit.c). */
static LD_NOINLINE void free_fit(heap_t *heap, sb_t *sb, void *p) {
  ld_fit_free(heap, sb, p);
  if (heap != &ld_heap_empty && span_poll_due(heap, true)) { /* (once in 16, as fit_malloc) */
    int saved = errno; /* (the purge keeps it too; the clock is the vDSO's) */
    uint64_t now = ld_os_now_coarse_ns();
    LD_OWNER_SET(heap->last_slow_ns, now);
    ld_maintain_poll(heap, now, false);
    errno = saved;
  }
}

static LD_NOINLINE void free_mapped(heap_t *heap, sb_t *sb, void *p, bool claimed) {
  if (sb->magic != LD_SB_MAGIC) ld_fatal_bad_free("invalid free (not a block from larder)", p);
  /* The kind read once: a span another thread frees or resizes meanwhile changes it, and two
   * reads could send p down two paths' halves (free_span, which claims spans with a CAS) */
  uint8_t kind = __atomic_load_n(&sb->kind, __ATOMIC_RELAXED);
  if (LD_UNLIKELY(kind == LD_KIND_FIT)) {
    free_fit(heap, sb, p);
    return;
  }
  if (LD_UNLIKELY(kind != LD_KIND_SMALL)) {
    free_span(heap, sb, p, kind);
    return;
  }
  ld_check_small_free(sb, p);
  ld_block_t *b = p;
  if (LD_UNLIKELY(heap == &ld_heap_empty || atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap)) {
    free_small_own(heap, sb, b, claimed);
    return;
  }
  b->tag = ld_tag(b);
  /* a superblock the global heap holds: onto its free list, if the global lock is free */
  if (ld_global_free(sb, b)) {
    ld_stat_count(heap, offsetof(ld_stats_t, remote_frees));
    return;
  }
  if (ld_cache_free_remote(heap, sb, b)) free_remote_sent(ld_heap_tls);
}

/* A remote free whose batch must go (full, or the buffer at its bound): checked, tagged and
 * counted by ld_cache_free_remote_batched already. */
static LD_NOINLINE void free_remote_append(heap_t *heap, sb_t *sb, void *p) {
  if (ld_cache_append_and_leave(heap, sb, p)) free_remote_sent(heap);
}

/* A remote free past the ring, after its join (ld_cache_join_held): joined its batch open in
 * the thread's buffer (inline), the batch full (appended and sent), or none (free_checked
 * opens one, or frees into a superblock the global heap holds). */
static inline void free_joined(heap_t *heap, sb_t *sb, void *p, int joined, bool claimed) {
  if (LD_LIKELY(joined == LD_JOIN_DONE)) return;
  if (joined == LD_JOIN_APPEND) {
    free_remote_append(heap, sb, p);
    return;
  }
  free_checked(heap, sb, p, claimed);
}

#ifndef LARDER_HARDENED
/* Every slow free of a small block waits in the thread's ring of slow frees while its line and
 * its superblock's header arrive, and the free LD_SLOW_FREES before it is taken instead
 * (internal.h, heap_t): a remote free writes the block, and reads its tag for a double free,
 * a line last written on the owner's core (free-contention: 61% of free_slow's samples on that
 * read when the block joined its batch at once). A pointer whose superblock has no batch in
 * the thread's buffer (which was checked as it opened) is looked up in the ownership map first,
 * so that one that is not larder's is reported at once; spans, which start at a power of two
 * from their header, are freed at once, never kept waiting. A function of its own, so that
 * free_slow saves no registers. */
static LD_NOINLINE void free_deferring(heap_t *heap, sb_t *sb, void *p, uintptr_t offset) {
  /* (offset: p's from sb, not a power of two, free_slow's) */
  /* The header's line is asked for first (a prefetch never faults: p need not be larder's):
   * a block whose superblock has no batch here reads it as it leaves the ring (its checks, its
   * owner for a new batch; a consumer of 64 producers' blocks has 4,096 superblocks for the
   * buffer's 1,024 slots) */
  __builtin_prefetch(sb);
  unsigned slot = ld_cache_batch_slot(heap, sb);
  /* No batch here: p's class from the ownership map, a byte among many (addrmap.h,
   * ld_addrmap_small_class), not from the header, which is waited for only as p leaves the
   * ring (the fan-in of 64 producers, unpinned: the header's read was a third of this
   * function's samples) */
  int class_plus_one = 0;
  if (slot == LD_REMOTE_SLOTS && LD_UNLIKELY((class_plus_one = ld_addrmap_small_class(p)) < 0)) not_owned("free", p);
  /* The block is marked as it enters: two bytes, the top of its tag word, are written, the
   * rest kept. As it leaves (cache.c, slow_free_leaves) the
   * mark must still be there, and the rest must not be the free tag's: a block already free in
   * its owner's bin or superblock when it came (a double free, the owner's first) is caught
   * even if the owner has handed it out meanwhile (the owner's pop clears the word), and one
   * the owner frees again while it waits (the other's first) is caught though the owner's
   * deferred free finds no tag and puts it in the owner's bin. Before the mark is written,
   * the class tells that p starts a block (from its batch's slot, or else from its
   * superblock's header), so that no live block is written through a bad pointer. The store
   * waits for nothing, but holds the stores behind it until the block's line comes from the
   * core that last wrote it: so it is the last of this call's, made as the thread leaves its
   * remote buffer (within which no purge takes the ring's frees), after the join of the free
   * p displaces (remote-free's consumer: 18.5 -> 17.4 ns a free; written two slow frees later,
   * when the prefetch has brought the line, 16.6, but a free and a malloc of the block by its
   * owner in between then went unseen: double_free_random, 48 runs in 1,200).
   * LARDER_REMOTE_FREE_CHECK=0 leaves the mark out. */
  const ld_class_shape_t *shape = NULL; /* p's class, when known: then p must start a block */
  if (__atomic_load_n(&ld_remote_free_mark, __ATOMIC_RELAXED) && heap->ring_id) {
    if (slot != LD_REMOTE_SLOTS) shape = &ld_class_shape[heap->remote[slot].size_class];
    else if (class_plus_one && class_plus_one <= LD_CLASS_COUNT) shape = &ld_class_shape[class_plus_one - 1];
  }
  if (LD_LIKELY(shape && ld_shape_block_start(shape, offset))) {
    slot |= LD_SLOW_FREE_TAGGED;
  } else if (shape || (slot == LD_REMOTE_SLOTS && !class_plus_one)) {
    /* Known already not to start a block (of its class, or a span's, which starts a power of
     * two past its header): reported now, by the full checks, rather than as it leaves the
     * ring, when a program that exits with _exit or crashes first never hears of it. */
    free_mapped(heap, sb, p, false);
    return;
  }
  ld_prefetch_for_write(p);
  /* p waits with its batch's slot; the one it displaces comes out with its own, the thread
   * still in its remote buffer, so that the join neither looks for the slot nor enters again */
  void *mark = slot & LD_SLOW_FREE_TAGGED ? p : NULL;
  p = ld_cache_defer_slow_free(heap, p, slot, &slot);
  if (!p) return;
  sb = ld_sb_of(p);
  bool claimed = slot & LD_SLOW_FREE_TAGGED;
  free_joined(heap, sb, p, ld_cache_join_held(heap, sb, p, slot, mark), claimed);
}
#endif

/* Every free the fast path did not take. Through the ring (free_deferring), except in the
 * hardened build, which defers nothing, and for a thread without a heap, which has no ring. */
static LD_NOINLINE void free_slow(void *p, heap_t *heap) {
  if (p == NULL) return;
  sb_t *sb = ld_sb_of(p);
  /* A span's start first: it has no batch to look for and never waits in the ring (the
   * buffer's four ways were 17 of a medium free's ~250 instructions, the call through
   * free_deferring 5 more). A small block that lies a power of two past its header is freed at
   * once the same way, whether its superblock has a batch open or not. */
  uintptr_t offset = (uintptr_t)p - (uintptr_t)sb;
  if (LD_UNLIKELY(!(offset & (offset - 1)))) {
    free_span_start(heap, sb, p);
    return;
  }
#ifndef LARDER_HARDENED
  if (LD_LIKELY(heap != &ld_heap_empty)) {
    free_deferring(heap, sb, p, offset);
    return;
  }
#endif
  free_joined(heap, sb, p, ld_cache_free_remote_batched(heap, sb, p), false);
}

/* ---------------------------------------------------------------------------------------- */
/* The rest of the interface, built on the two paths above.                                   */

size_t larder_usable_size(const void *p) {
  if (!p || !ld_addrmap_contains_header(p)) return 0;
  sb_t *sb = ld_sb_of(p);
  if (sb->magic != LD_SB_MAGIC) return 0;
  if (sb->kind == LD_KIND_SMALL) return sb->block_size;
  if (sb->kind == LD_KIND_LARGE || sb->kind == LD_KIND_MEDIUM) return sb->usable;
  if (sb->kind == LD_KIND_FIT) return ld_fit_usable(sb, p);
  return 0;
}

/* C23's free_sized and free_aligned_sized, and C++'s sized and aligned deletes (wrappers.c):
 * the size and alignment the program states are a promise larder does not need (a block's
 * class comes from its address), so the call is free's. A broken promise is undefined
 * behaviour (C23 7.24.3.4-5: the size must be the one requested, the alignment aligned_alloc's)
 * and usually a bug, a delete through the wrong type: with LARDER_DEBUG=1, and always in the
 * hardened build, what the block contradicts is reported as an invalid free is, and the
 * program stops: a size larger than the block, an alignment that is not a power of two or
 * that the address does not have. (A size smaller than the one requested is not caught:
 * larder keeps no requested size.) A pointer that is not larder's is left to free's checks. */
#ifdef LARDER_HARDENED
#define LD_STATED_CHECKS 1
#else
#define LD_STATED_CHECKS (LD_OPTION(debug) != 0)
#endif
static LD_NOINLINE void free_stated_check(const void *p, size_t alignment, size_t size, const char *call) {
  size_t usable = larder_usable_size(p); /* (0: NULL, or not larder's) */
  if (!usable) return;
  char what[160];
  if (size > usable) {
    snprintf(what, sizeof what, "invalid free (%s: %zu bytes stated, the block holds %zu)", call, size, usable);
    ld_fatal_bad_free(what, p);
  }
  if (alignment && ((alignment & (alignment - 1)) || ((uintptr_t)p & (alignment - 1)))) {
    snprintf(what, sizeof what, "invalid free (%s: alignment %zu stated, which the block lacks)", call, alignment);
    ld_fatal_bad_free(what, p);
  }
}

void larder_free_sized(void *p, size_t size) {
  if (LD_UNLIKELY(LD_STATED_CHECKS)) free_stated_check(p, 0, size, "free_sized or a sized delete");
  larder_free(p);
}

void larder_free_aligned_sized(void *p, size_t alignment, size_t size) {
  if (LD_UNLIKELY(LD_STATED_CHECKS)) free_stated_check(p, alignment, size, "free_aligned_sized or an aligned delete");
  larder_free(p);
}

static int mul_overflows(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }

/* Zeroes the first g granules (16 bytes each) of a block of at least that size. Up to 8
 * granules as straight stores, where a call to memset cost more than the malloc did
 * (calloc(1, 64): 133 instructions a pair with the call); above, memset. */
static inline void zero_granules(void *p, size_t g) {
  char *c = p;
  switch (g) {
  case 8: memset(c + 112, 0, 16); /* fall through */
  case 7: memset(c + 96, 0, 16);  /* fall through */
  case 6: memset(c + 80, 0, 16);  /* fall through */
  case 5: memset(c + 64, 0, 16);  /* fall through */
  case 4: memset(c + 48, 0, 16);  /* fall through */
  case 3: memset(c + 32, 0, 16);  /* fall through */
  case 2: memset(c + 16, 0, 16);  /* fall through */
  case 1:
  case 0: memset(c, 0, 16); break;
  default: memset(c, 0, g << 4);
  }
}

static LD_NOINLINE void *calloc_slow(size_t count, size_t size);

/* calloc clears the whole usable size (malloc_usable_size), not the request alone, as glibc,
 * jemalloc, tcmalloc and mimalloc do: the program may use every usable byte, and a buffer
 * written out at its usable size must not carry an earlier block's bytes past the request
 * (calloc(3, 100) in a 320-byte class handed back 20 bytes of its last user's data). */

/* A small calloc pops its block as malloc does (no errno to save: nothing below can set it),
 * and clears its class's size: the request's granules up to 128 bytes, where every granule
 * count is a class. */
void *larder_calloc(size_t count, size_t size) {
  size_t bytes;
  if (LD_LIKELY(!mul_overflows(count, size, &bytes) && bytes <= LD_SMALL_LIMIT)) {
    size_t g = (bytes + 15) >> 4;
    ld_block_t *b = bin_pop(ld_heap_tls, g);
    if (LD_LIKELY(b != NULL)) {
      zero_granules(b, ld_class_size[ld_granule_class(g)] >> 4);
      return b;
    }
  }
  return calloc_slow(count, size);
}

static LD_NOINLINE void *calloc_slow(size_t count, size_t size) {
  size_t bytes;
  int saved = errno;
  if (mul_overflows(count, size, &bytes) || !ld_request_ok(bytes, 0)) return api_result(NULL, saved);
  if (fit_serves(bytes)) {
    heap_t *heap = thread_heap();
    void *p = heap ? fit_malloc(heap, bytes) : NULL;
    if (p) memset(p, 0, ld_fit_usable(ld_sb_of(p), p)); /* (a region's memory may be reused) */
    return api_result(p, saved);
  }
  if (bytes > ld_small_max) {
    heap_t *heap = thread_heap();
    if (!heap) return api_result(NULL, saved);
    size_t dirty;
    bool kept;
    void *p = span_alloc(heap, bytes, &dirty, &kept);
    if (p) {
      size_t usable = ld_sb_of(p)->usable; /* pages past `dirty` read as zero already */
      memset(p, 0, dirty < usable ? dirty : usable);
    }
    return api_result(p, saved);
  }
  void *p = malloc_slow(bytes);
  if (p) memset(p, 0, ld_class_size[ld_size_class(bytes)]);
  return p;
}

/* The same memory is kept when the new size still belongs to it: within the block, and not
 * so much smaller that keeping it would waste more than half. A medium or large block is
 * resized in place where it can be (free chunks after a medium span, mremap for a large one),
 * and a large one grows by moving its pages, never by copying them. NULL: the old block is
 * as it was, as C requires. */
static void *realloc_block(void *p, size_t size) {
  if (LD_UNLIKELY(!ld_addrmap_contains_header(p))) not_owned("realloc", p);
  size_t usable = larder_usable_size(p);
  if (usable == 0) {
    sb_t *sb = ld_sb_of(p);
    if (sb->magic == LD_SB_MAGIC && ld_kind_not_live(sb->kind))
      ld_fatal_bad_free("realloc after free (use after free or double free)", p);
    if (sb->magic == LD_SB_MAGIC && sb->kind == LD_KIND_FIT)
      ld_fatal_bad_free("realloc after free (use after free or double free), or of a pointer that starts no block", p);
    ld_fatal_bad_free("realloc of a pointer larder did not allocate", p);
  }
  sb_t *sb = ld_sb_of(p);
  heap_t *heap = ld_heap_tls;
  if (sb->kind == LD_KIND_SMALL) {
    ld_cache_settle_deferred_now(heap); /* the thread's deferred free may be p: tagged first */
    if (ld_block_is_free((const ld_block_t *)p)) ld_fatal_bad_free("realloc after free (use after free or double free)", p);
  }
  /* Before any path looks at the size: an impossible one must not wrap in a sum below. */
  if (!ld_request_ok(size, 0)) return NULL;
  if (size <= usable && size >= usable / 2) return p;
  uint8_t kind = __atomic_load_n(&sb->kind, __ATOMIC_RELAXED);
  if ((kind == LD_KIND_MEDIUM || kind == LD_KIND_LARGE) && size > ld_small_max && p == sb->data) {
    /* The span is claimed (a CAS of its kind) while it is resized or moved: a free of it by
     * another thread meanwhile, or before (its CAS then won), is a double free, reported, where
     * it gave back chunks or a mapping whose size was changing (as free_span's reads of the
     * kind, found in bad_free medium-double-race). The header keeps the claim when it moves
     * with the span's first page, and the kind is given back where it now is. */
    if (!__atomic_compare_exchange_n(&sb->kind, &kind, LD_KIND_RESIZING, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      ld_fatal_bad_free("realloc of a block freed meanwhile (double free or use after free)", p);
    /* growing: a cached span with its pages first, else in place, else a new mapping */
    void *q = size > usable ? ld_large_realloc_cached(sb, size, kind) : NULL;
    if (!q) q = ld_large_realloc_in_place(sb, size, kind);
    if (!q && size > usable) q = ld_large_realloc_move(sb, size, kind);
    __atomic_store_n(&ld_sb_of(q ? q : p)->kind, kind, __ATOMIC_RELEASE);
    if (q) {
      if (heap != &ld_heap_empty) LD_STAT_INC(heap, reallocs);
      return q;
    }
  }
  void *q = larder_malloc(size);
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  larder_free(p);
  heap = ld_heap_tls;
  if (heap != &ld_heap_empty) LD_STAT_INC(heap, reallocs);
  return q;
}

/* realloc's common case, a small block of the thread's own that still fits its class (a
 * string or a vector that grows a little at a time), found as the free fast path finds a
 * block: the heap's table of owned superblocks gives the class, no header or ownership map is
 * read, and nothing of the thread's deferred frees needs settling (p itself is checked against
 * them, and its tag for a free block, so a realloc after free is still reported, by the slow
 * path). A loop of in-place reallocs: 154 -> 57 instructions a call, the loop included
 * (callgrind; mimalloc 3 84, tcmalloc 67, jemalloc 397). */
static inline bool realloc_keeps(heap_t *heap, void *p, size_t size, size_t *own_usable) {
  *own_usable = 0;
#ifdef LARDER_HARDENED
  (void)heap, (void)p, (void)size;
  return false; /* the hardened build checks every call in full */
#else
  uintptr_t sb = (uintptr_t)p & ld_sb_mask;
  uintptr_t owned_class = ld_heap_owned_class(heap, (uintptr_t)p, sb);
  if (owned_class >= LD_OWNED_NONE) return false;
  const ld_bin_t *bin = ld_heap_owned_bin(heap, owned_class);
  uint32_t offset = (uint32_t)((uintptr_t)p - sb) - bin->first;
  size_t usable = ld_class_size[ld_heap_place_class(heap, owned_class >> LD_OWNED_CLASS_SHIFT)];
  if (!(offset < LD_FAST_READ(bin->span) && (uint64_t)offset * bin->divisor_magic < bin->divisor_magic &&
        !ld_bin_uncarved(bin, p) && !ld_heap_deferred_is(heap, p) &&
        !ld_block_is_free((const ld_block_t *)p)))
    return false;
  if (size <= usable && size >= usable / 2) return true;
  *own_usable = usable; /* a live block of the thread's own: it moves (realloc_own_move) */
  return false;
#endif
}

/* A live small block of the thread's own that its class no longer serves moves: checked as
 * realloc_keeps checked it, so no ownership map, header or usable-size lookup is needed. */
static LD_NOINLINE void *realloc_own_move(void *p, size_t size, size_t usable) {
  void *q = larder_malloc(size); /* (NULL with ENOMEM, the old block as it was, as C requires) */
  if (!q) return NULL;
  memcpy(q, p, size < usable ? size : usable);
  larder_free(p);
  heap_t *heap = ld_heap_tls;
  if (heap != &ld_heap_empty) LD_STAT_INC(heap, reallocs);
  return q;
}

/* Every realloc of a block that realloc_keeps does not keep (a function of its own, so that
 * the kept case saves no registers). */
static LD_NOINLINE void *realloc_slow(void *p, size_t size) {
  int saved = errno;
  if (size == 0) { /* glibc's behaviour: free and return NULL, a success */
    larder_free(p);
    errno = saved;
    return NULL;
  }
  return api_result(realloc_block(p, size), saved);
}

void *larder_realloc(void *p, size_t size) {
  if (!p) return larder_malloc(size);
  heap_t *heap = ld_heap_tls;
  LD_BUSY_INC(heap); /* (as in free: the purge may be emptying an idle thread's bins) */
  atomic_signal_fence(memory_order_seq_cst);
  size_t own_usable;
  bool keeps = realloc_keeps(heap, p, size, &own_usable);
  atomic_signal_fence(memory_order_seq_cst);
  LD_BUSY_DEC(heap);
  if (LD_LIKELY(keeps)) return p;
  if (own_usable && size) return realloc_own_move(p, size, own_usable);
  return realloc_slow(p, size);
}

void *larder_reallocarray(void *p, size_t count, size_t size) {
  size_t bytes;
  if (mul_overflows(count, size, &bytes)) {
    errno = ENOMEM; /* glibc's: the old block stays */
    return NULL;
  }
  return larder_realloc(p, bytes);
}

/* alignment must be a power of two. Small requests use the first class whose block size is a
 * multiple of the alignment: superblocks place such classes' first block at an offset that is
 * a multiple too (heap.c, sb_data_offset), so every block is aligned. */
static inline unsigned aligned_class(size_t alignment, size_t size) {
  return ld_class_aligned[__builtin_ctzll(alignment)][ld_size_class(size < alignment ? alignment : size)];
}

/* A small aligned request (posix_memalign, aligned_alloc, C++'s aligned new) pops a block of
 * its class from the bin as malloc does, the bin reached through bin_of so that a purge that
 * turned the bins away sends the call to the slow path: 322 -> 123 instructions for
 * posix_memalign(64, 64) and free (tcmalloc 108, mimalloc 3 110, jemalloc 190). NULL: the slow
 * path's (an empty bin, no heap yet). */
static inline void *aligned_fast(unsigned cls) { return bin_pop(ld_heap_tls, ld_class_size[cls] >> 4); }

/* The small class of an aligned request (alignment a power of two), or LD_CLASS_LARGE. */
static inline unsigned aligned_small_class(size_t alignment, size_t size) {
  return size <= ld_small_max && alignment <= ld_small_max ? aligned_class(alignment, size) : LD_CLASS_LARGE;
}
/* The fast path for an alignment above LD_MIN_ALIGN, when it applies (posix_memalign's). */
static inline void *aligned_try_fast(size_t alignment, size_t size) {
  unsigned cls = aligned_small_class(alignment, size);
  return cls < LD_CLASS_COUNT ? aligned_fast(cls) : NULL;
}

static void *aligned_alloc_pow2(size_t alignment, size_t size) {
  if (alignment <= LD_MIN_ALIGN) return larder_malloc(size);
  unsigned cls = aligned_small_class(alignment, size);
  void *p = cls < LD_CLASS_COUNT ? aligned_fast(cls) : NULL;
  if (LD_LIKELY(p != NULL)) return p;
  int saved = errno;
  if (!ld_request_ok(size, alignment)) return api_result(NULL, saved);
  heap_t *heap = thread_heap();
  if (!heap) return api_result(NULL, saved);
  if (cls < LD_CLASS_COUNT) return api_result(malloc_class(heap, cls, 0), saved);
  /* A kept medium span's block starts where malloc's does, LD_SB_HEADER rounded past its
   * S-aligned start: aligned enough for any alignment that divides that (Rust's 64-byte
   * over-aligned vectors, cache-line buffers). */
  if (LD_MEDIUM_OFFSET % alignment == 0 && (p = ld_cache_medium_alloc(heap, size))) return api_result(p, saved);
  size_t dirty;
  return api_result(large_alloc(heap, size, alignment, &dirty), saved);
}

static size_t next_pow2(size_t x) {
  if (x <= 1) return 1;
  if (x > (SIZE_MAX >> 1) + 1) return 0;
  return (size_t)1 << (64 - __builtin_clzll((unsigned long long)(x - 1)));
}

/* memalign follows glibc (2.36 on this project's machine, and later ones): an alignment that
 * is not a power of two is rounded up to one, 0 serves as 1, and one above 2^63, which has no
 * power of two to round to, is EINVAL. A power of two that is too large is ENOMEM. */
void *larder_memalign(size_t alignment, size_t size) {
  size_t a = next_pow2(alignment);
  if (a == 0) {
    errno = EINVAL;
    return NULL;
  }
  return aligned_alloc_pow2(a, size);
}

/* C17 (DR 460) makes an alignment the implementation does not support an error, and glibc
 * 2.38 does so for every alignment that is not a power of two, 0 included (malloc.c,
 * aligned_alloc; tst-aligned-alloc.c): NULL with EINVAL, where memalign rounds up. */
void *larder_aligned_alloc(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1))) {
    errno = EINVAL;
    return NULL;
  }
  return aligned_alloc_pow2(alignment, size);
}

/* POSIX: the error is the return value, and errno is left as it was, failure or not. */
int larder_posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment % sizeof(void *)) return EINVAL;
  void *p = alignment > LD_MIN_ALIGN ? aligned_try_fast(alignment, size) : NULL;
  if (LD_LIKELY(p != NULL)) {
    *out = p;
    return 0;
  }
  int saved = errno;
  p = aligned_alloc_pow2(alignment, size);
  errno = saved;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

void *larder_malloc_shared(size_t size) {
  if (!ld_request_ok(size, 0)) { /* the rounding below could wrap */
    errno = ENOMEM;
    return NULL;
  }
  size_t rounded = (size + LD_CACHE_LINE - 1) & ~(size_t)(LD_CACHE_LINE - 1);
  return aligned_alloc_pow2(LD_CACHE_LINE, rounded ? rounded : LD_CACHE_LINE);
}

int larder_trim(size_t pad) {
  (void)pad; /* larder keeps no heap top to pad: every empty page is given back */
  int saved = errno;
  int released = ld_maintain_trim();
  errno = saved;
  return released;
}
