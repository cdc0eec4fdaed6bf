/* Objects above the largest size class.
 *
 * Medium spans (up to ld_medium_max, 2 MiB): runs of chunks carved from segments
 * (segment.c), so they cost no mmap, and freed ones coalesce with their free neighbours and
 * serve the next request of any similar size. realloc grows one in place when the chunks after
 * it are free.
 *
 * Large spans (above that, or aligned to more than S): each a mapping of its own. Freed ones go
 * to a small cache instead of back to the OS, so that a program that mallocs and frees large
 * buffers in a loop does not pay an mmap and a page fault per buffer; cached spans stay
 * resident until they have been idle for the purge delay (maintain.c), so the cache never purges
 * a span it is about to hand out. realloc grows one with mremap: in place when the address
 * space after it is free, else by moving its pages to a new mapping, never by copying.
 *
 * Every span starts with a header laid out like a superblock's, at an S-aligned address, so
 * free() finds it with the same mask (internal.h, ld_sb_of).
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#define LARGE_CACHE_MAX_SPANS 32
#define MEDIUM_MAX ((size_t)2 << 20)

size_t ld_medium_max = MEDIUM_MAX;

static struct {
  pthread_mutex_t lock;
  sb_t *head, *tail;      /* newest first */
  size_t count, bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic size_t large_in_use;
static _Atomic int64_t medium_unowned_bytes, medium_unowned_usable; /* threads without a heap */

/* Medium spans in use, their chunks' bytes and their usable bytes: in the calling thread's heap
 * (internal.h, heap_t), or shared for a thread without one. */
static void medium_count(int64_t bytes, int64_t usable) {
  heap_t *heap = ld_heap_tls;
  if (heap != &ld_heap_empty) {
    LD_OWNER_ADD(heap->medium_bytes, bytes);
    LD_OWNER_ADD(heap->medium_usable, usable);
  } else {
    atomic_fetch_add_explicit(&medium_unowned_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&medium_unowned_usable, usable, memory_order_relaxed);
  }
}
static _Atomic size_t cached_dirty; /* cached spans not yet purged: memory waiting for the purge */
/* For malloc_stats's "max mmap regions" and "max mmap bytes" (glibc's peaks of separately
 * mapped blocks, which large spans are): the spans in use now, and the highest figures seen. */
static _Atomic size_t large_spans, large_spans_peak, large_bytes_peak;

static void raise_peak(_Atomic size_t *peak, size_t now) {
  size_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  while (now > seen && !atomic_compare_exchange_weak_explicit(peak, &seen, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void large_in_use_add(size_t bytes) {
  raise_peak(&large_bytes_peak, atomic_fetch_add_explicit(&large_in_use, bytes, memory_order_relaxed) + bytes);
}

static void large_in_use_sub(size_t bytes) { atomic_fetch_sub_explicit(&large_in_use, bytes, memory_order_relaxed); }

void ld_large_lock(void) { pthread_mutex_lock(&cache.lock); }
void ld_large_unlock(bool reinit) {
  if (reinit) pthread_mutex_init(&cache.lock, NULL);
  else pthread_mutex_unlock(&cache.lock);
}


/* Every mapping of a span goes through these two, so the ownership map knows it (addrmap.h). */
static int span_map(size_t bytes, void **out) {
  if (ld_os_map_committed(bytes, ld_sb_size, out) != 0) return ENOMEM;
  if (ld_addrmap_add(*out, bytes) != 0) {
    ld_os_unmap(*out, bytes);
    return ENOMEM;
  }
  return 0;
}
static void span_unmap(void *base, size_t bytes) {
  ld_addrmap_remove(base, bytes);
  ld_os_unmap(base, bytes);
}
static size_t chunks_for(size_t bytes) { return (bytes + ld_sb_size - 1) >> ld_sb_shift; }

static void cache_remove(sb_t *span) {
  if (span->prev) span->prev->next = span->next; else cache.head = span->next;
  if (span->next) span->next->prev = span->prev; else cache.tail = span->prev;
  span->next = span->prev = NULL;
  cache.count--;
  cache.bytes -= span->map_bytes;
  if (!span->purged) atomic_fetch_sub_explicit(&cached_dirty, span->map_bytes, memory_order_relaxed);
}

/* The smallest cached span that holds `need` bytes and no more than `most` (cache_take: it
 * wastes no more than three quarters), preferring one whose pages are still resident (no page
 * faults to reuse it). At most LARGE_CACHE_MAX_SPANS are looked at. */
static sb_t *cache_take_of(size_t need, size_t most, bool resident_only) {
  sb_t *best = NULL;
  for (sb_t *s = cache.head; s; s = s->next) {
    if (s->map_bytes < need || s->map_bytes > most || (resident_only && s->purged)) continue;
    if (!best || (best->purged && !s->purged) || (best->purged == s->purged && s->map_bytes < best->map_bytes)) best = s;
  }
  if (best) cache_remove(best);
  return best;
}
static sb_t *cache_take(size_t need) { return cache_take_of(need, need * 4 + 3, false); }

/* On a miss, the largest cached span smaller than `need` that still holds pages: grown with
 * mremap (span_grow), it faults only the pages it lacks, where a new mapping would fault them
 * all (a loop of 5-25 MiB buffers). */
static sb_t *cache_take_largest_below(size_t need) {
  sb_t *best = NULL;
  for (sb_t *s = cache.head; s; s = s->next)
    if (s->map_bytes < need && !s->purged && (!best || s->map_bytes > best->map_bytes)) best = s;
  if (best) cache_remove(best);
  return best;
}

/* Grows a cached span (its own mapping, S-aligned) to `need` bytes: in place when the address
 * space after it is free, else by moving its pages to a new mapping. NULL (the span unmapped)
 * if neither works. */
static sb_t *span_grow(sb_t *span, size_t need) {
  void *base = span, *out;
  size_t old_bytes = span->map_bytes;
  size_t had = ld_round_up(old_bytes, ld_sb_size), keep = ld_round_up(need, ld_sb_size);
  if (ld_os_remap(base, old_bytes, need, NULL, &out) == 0) {
    if (keep <= had || ld_addrmap_add((char *)base + had, keep - had) == 0) {
      span->map_bytes = need;
      return span;
    }
    ld_os_remap(base, need, old_bytes, NULL, &out);
  } else {
    void *dest;
    if (span_map(need, &dest) == 0) {
      /* The old range leaves the map before the move frees it: once it is free, another thread
       * may map a span there and add it, and a removal after that would clear its bits. */
      ld_addrmap_remove(base, old_bytes);
      if (ld_os_remap(base, old_bytes, need, dest, &out) == 0) {
        sb_t *moved = out;
        moved->map_bytes = need;
        return moved;
      }
      ld_addrmap_add(base, old_bytes);
      span_unmap(dest, need);
    }
  }
  span_unmap(base, old_bytes);
  return NULL;
}

/* A span's header as it is handed out, user its block, `usable` bytes long: stores only (a kept
 * span's header may be on a line the core of the thread that freed it holds, and a store waits
 * for nothing). */
static inline void span_set(sb_t *span, char *user, int kind, heap_t *owner, size_t usable) {
  span->magic = LD_SB_MAGIC;
  span->kind = (uint8_t)kind;
  span->data = user;
  span->usable = usable;
  span->size_class = LD_CLASS_LARGE;
  span->purged = 0;
  atomic_store_explicit(&span->owner, owner, memory_order_relaxed);
}
static void span_init(sb_t *span, char *user, int kind, heap_t *owner) {
  span_set(span, user, kind, owner, (size_t)((char *)span + span->map_bytes - user));
}

static void *medium_alloc(size_t offset, size_t size, size_t *dirty, heap_t *owner) {
  size_t chunks = chunks_for(offset + size);
  bool clean;
  /* the span uses nothing past its usable size: old pages there go once it has lived a purge
   * delay (segment.c, "tails") */
  size_t need = ld_round_up(offset + size, ld_os_page_size());
  sb_t *span = ld_segment_alloc(chunks, need, LD_SEGMENT_TAIL, &clean);
  if (!span) return NULL;
  span->map_bytes = chunks * ld_sb_size;
  span_init(span, (char *)span + offset, LD_KIND_MEDIUM, owner);
  /* usable to the request's last page, as a large span's: what the block may use is what it
   * keeps resident (a program that sizes its buffers by malloc_usable_size, as Redis's strings
   * do, would otherwise count and fill a 17 KiB block as 64 KiB) */
  span->usable = need - offset;
  medium_count((int64_t)span->map_bytes, (int64_t)span->usable);
  ld_stat_count(ld_heap_tls, offsetof(ld_stats_t, medium_allocs));
  *dirty = clean ? 0 : span->usable;
  return span->data;
}

void *ld_large_alloc(size_t size, size_t align, size_t *dirty, heap_t *owner) {
  size_t page = ld_os_page_size();
  if (align < LD_MIN_ALIGN) align = LD_MIN_ALIGN;
  /* size <= LD_REQUEST_MAX and align <= LD_ALIGN_MAX (checked where they entered, alloc.c):
   * none of the sums below can wrap. */
  *dirty = 0;
  if (size == 0) size = 1; /* a block of its own, even for malloc(0): usable size never 0 */
  sb_t *span = NULL;
  char *user;
  /* An alignment of S itself needs no mapping of its own: the block starts a chunk, the header
   * having the chunk below to itself, so a medium span (or a cached large one) serves it. */
  if (align <= ld_sb_size) {
    size_t offset = ld_round_up(LD_SB_HEADER, align);
    if (offset + size <= ld_medium_max) return medium_alloc(offset, size, dirty, owner);
    size_t need = ld_round_up(offset + size, page);
    sb_t *smaller = NULL;
    if (LD_OPTION(large_cache_mb) > 0) {
      ld_large_lock();
      span = cache_take(need);
      if (!span) smaller = cache_take_largest_below(need);
      ld_large_unlock(false);
    }
    if (span) {
      /* a purged span reads as zero past its header page */
      *dirty = !span->purged ? span->map_bytes - offset : offset < page ? page - offset : 0;
    } else if (smaller) {
      /* Grown by mremap: only the old mapping's bytes were used; the pages added read as zero.
       * calloc clears those alone (a 4 GiB calloc after an 8 MiB free cleared all 4 GiB: 3.7 s
       * and 4 GiB resident, where glibc touches nothing; issue 16, found by the API fuzzer). */
      size_t old_bytes = smaller->map_bytes;
      span = span_grow(smaller, need);
      if (span) *dirty = old_bytes - offset;
    }
    if (span) {
      ld_stat_count(ld_heap_tls, offsetof(ld_stats_t, large_cache_hits));
    } else {
      void *base;
      if (span_map(need, &base) != 0) {
        errno = ENOMEM;
        return NULL;
      }
      span = base;
      span->map_bytes = need;
    }
    user = (char *)span + offset;
  } else {
    /* Alignment above S: the header goes in the S-chunk just below the user pointer, in
     * a mapping of align + size from which the head below the header and the tail past the
     * block go back at once. Kept whole, the span's usable size ran to the mapping's end, up to
     * `align` bytes: realloc copied all of it (aligned_alloc(2^32, 4097) then realloc: 4 GiB
     * copied and resident; found by the API fuzzer), and the statistics counted it in use. */
    size_t total = ld_round_up(align + size, page);
    char *base;
    if (span_map(total, (void **)&base) != 0) {
      errno = ENOMEM;
      return NULL;
    }
    user = (char *)ld_round_up((uintptr_t)base + ld_sb_size, align);
    span = (sb_t *)(user - ld_sb_size);
    char *end = (char *)ld_round_up((uintptr_t)user + size, page);
    if ((char *)span > base) span_unmap(base, (size_t)((char *)span - base));
    if (end < base + total) {
      /* the map leaves only whole granules past the one holding the block's end */
      size_t keep = ld_round_up((size_t)(end - base), ld_sb_size), had = ld_round_up(total, ld_sb_size);
      if (keep < had) ld_addrmap_remove(base + keep, had - keep);
      ld_os_unmap(end, (size_t)(base + total - end));
    }
    /* from here an ordinary span, its header at the mapping's start */
    span->map_bytes = (size_t)(end - (char *)span);
  }
  span_init(span, user, LD_KIND_LARGE, NULL);
  large_in_use_add(span->map_bytes);
  raise_peak(&large_spans_peak, atomic_fetch_add_explicit(&large_spans, 1, memory_order_relaxed) + 1);
  return user;
}

/* A CAS even for the span's owner, though it is the medium free's dearest instruction: a
 * locked instruction waits for every store before it to reach the cache, and a program writes
 * the blocks it just got (20-60 KiB churn, each block's ends written: 64% of the CPU samples on
 * it; 0.73x the CPU with a load and a store instead). With the owner's load and store, a
 * double free by the owner and another thread at once passes both when the other's CAS comes
 * between them, and the owner's store, which may come any time later (a preemption), then
 * overwrites whatever the other thread's entry made of the span since: given back to its
 * segment, handed out. Tried (docs/results.md, fifty-first session), not kept. */
void ld_medium_retire(sb_t *span) {
  uint8_t kind = LD_KIND_MEDIUM;
  if (!__atomic_compare_exchange_n(&span->kind, &kind, LD_KIND_FREED, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ld_fatal_bad_free("double free", span->data);
  medium_count(-(int64_t)span->map_bytes, -(int64_t)span->usable);
}

void ld_medium_release(sb_t *span) {
  ld_segment_free(span, span->map_bytes >> ld_sb_shift, (size_t)(span->data - (char *)span) + span->usable);
}

size_t ld_medium_touch(size_t size) { return ld_round_up(LD_MEDIUM_OFFSET + size, ld_os_page_size()); }

void *ld_medium_reuse(sb_t *span, size_t bytes, size_t reach, size_t touch, heap_t *owner) {
  size_t offset = LD_MEDIUM_OFFSET;
  if (touch > reach) ld_segment_retouch(span, touch);
  span_set(span, (char *)span + offset, LD_KIND_MEDIUM, owner, touch - offset); /* (usable: as medium_alloc's) */
  /* (the owner is the calling thread's heap: medium_count's, without its look-up) */
  LD_OWNER_ADD(owner->medium_bytes, (int64_t)bytes);
  LD_OWNER_ADD(owner->medium_usable, (int64_t)(touch - offset));
  LD_STAT_INC(owner, medium_allocs);
  return (char *)span + offset;
}

void ld_medium_free(sb_t *span) {
  ld_medium_retire(span);
  ld_medium_release(span);
}

/* The CAS claims the span, as ld_medium_retire does a medium one: of two threads that free it at
 * once, one unmaps or caches it and the other is told of the double free (bad_free
 * large-double-race), where both read kind LARGE and both unmapped it, or linked it into the
 * cache twice. */
void ld_large_free(sb_t *span) {
  size_t bytes = span->map_bytes;
  uint8_t kind = LD_KIND_LARGE;
  if (!__atomic_compare_exchange_n(&span->kind, &kind, LD_KIND_LARGE_CACHED, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ld_fatal_bad_free("double free", span->data);
  large_in_use_sub(bytes);
  atomic_fetch_sub_explicit(&large_spans, 1, memory_order_relaxed);
  size_t limit = (size_t)LD_OPTION(large_cache_mb) << 20;
  /* A span no bigger than the medium limit (one cut for an alignment above S) could
   * never serve a large request: cached, it would only push out spans that can. */
  if (bytes > limit || bytes <= ld_medium_max) {
    span_unmap(span, bytes);
    return;
  }
  uint64_t now = ld_os_now_ns();
  ld_large_lock();
  span->idle_since_ns = now;
  span->purged = 0;
  span->prev = NULL;
  span->next = cache.head;
  if (cache.head) cache.head->prev = span; else cache.tail = span;
  cache.head = span;
  cache.count++;
  cache.bytes += bytes;
  atomic_fetch_add_explicit(&cached_dirty, bytes, memory_order_relaxed);
  while (cache.count > LARGE_CACHE_MAX_SPANS || cache.bytes > limit) { /* the oldest go first */
    sb_t *old = cache.tail;
    cache_remove(old);
    span_unmap(old, old->map_bytes);
  }
  ld_large_unlock(false);
  ld_due_note(now);
}

/* size <= LD_REQUEST_MAX (larder_realloc checks it first): offset + size cannot wrap, so an
 * impossible size never reads as a small one here (issue 16: a medium span "resized" to
 * SIZE_MAX shrank to 64 KiB and returned success). */
void *ld_large_realloc_in_place(sb_t *span, size_t size, int kind) {
  size_t offset = (size_t)(span->data - (char *)span);
  if (kind == LD_KIND_MEDIUM) {
    if (offset + size > ld_medium_max) return NULL;
    size_t chunks = span->map_bytes >> ld_sb_shift, want = chunks_for(offset + size);
    size_t need = ld_round_up(offset + size, ld_os_page_size());
    if (!ld_segment_resize(span, chunks, want, need)) return NULL;
    size_t bytes = want * ld_sb_size;
    medium_count((int64_t)bytes - (int64_t)span->map_bytes, (int64_t)(need - offset) - (int64_t)span->usable);
    span->map_bytes = bytes;
    span->usable = need - offset;
    return span->data;
  }
  if (kind != LD_KIND_LARGE || offset + size <= ld_medium_max) return NULL;
  size_t bytes = ld_round_up(offset + size, ld_os_page_size());
  void *out;
  size_t old_bytes = span->map_bytes;
  /* The map must never claim a range that is not mapped: a shrinking span leaves it first
   * (whole granules past the new end; the granule holding the end stays, with the header). */
  size_t keep = ld_round_up(bytes, ld_sb_size), had = ld_round_up(old_bytes, ld_sb_size);
  if (keep < had) ld_addrmap_remove((char *)span + keep, had - keep);
  if (ld_os_remap(span, old_bytes, bytes, NULL, &out) != 0) {
    if (keep < had) ld_addrmap_add((char *)span + keep, had - keep);
    return NULL;
  }
  if (keep > had && ld_addrmap_add((char *)span + had, keep - had) != 0) {
    ld_os_remap(span, bytes, old_bytes, NULL, &out); /* cannot own it: shrink back */
    return NULL;
  }
  if (bytes > span->map_bytes) large_in_use_add(bytes - span->map_bytes);
  else large_in_use_sub(span->map_bytes - bytes);
  span->map_bytes = bytes;
  span->usable = bytes - offset;
  return span->data;
}

/* Moves span's pages onto the start of dest, a mapping of dest_bytes (in the address map)
 * that the span then is, without copying (mremap MREMAP_FIXED); the span's header moves with
 * its first page, over whatever dest held there. NULL, dest unmapped and the span as it was,
 * if the kernel refuses. */
static void *span_move_onto(sb_t *span, void *dest, size_t dest_bytes) {
  size_t offset = (size_t)(span->data - (char *)span), old_bytes = span->map_bytes;
  void *old_base = span, *out;
  /* Out of the map before the move frees the old range (span_grow says why). */
  ld_addrmap_remove(old_base, old_bytes);
  if (ld_os_remap(old_base, old_bytes, old_bytes, dest, &out) != 0) {
    ld_addrmap_add(old_base, old_bytes);
    span_unmap(dest, dest_bytes);
    return NULL;
  }
  large_in_use_add(dest_bytes - old_bytes);
  sb_t *moved = out;
  moved->map_bytes = dest_bytes;
  moved->data = (char *)out + offset;
  moved->usable = dest_bytes - offset;
  return moved->data;
}

void *ld_large_realloc_cached(sb_t *span, size_t size, int kind) {
  size_t offset = (size_t)(span->data - (char *)span);
  if (kind != LD_KIND_LARGE || LD_OPTION(large_cache_mb) <= 0) return NULL;
  size_t bytes = ld_round_up(offset + size, ld_os_page_size());
  if (bytes <= span->map_bytes) return NULL;
  /* at most twice the new size: realloc gives back the tail of a span more than twice the
   * size it is asked for (alloc.c, realloc_block), which would then undo the reuse */
  ld_large_lock();
  sb_t *dest = cache_take_of(bytes, offset + 2 * size, true);
  ld_large_unlock(false);
  if (!dest) return NULL;
  /* (rare: should the kernel refuse, the cached span is unmapped and the block stays) */
  void *p = span_move_onto(span, dest, dest->map_bytes);
  if (p) ld_stat_count(ld_heap_tls, offsetof(ld_stats_t, large_cache_hits));
  return p;
}

void *ld_large_realloc_move(sb_t *span, size_t size, int kind) {
  size_t offset = (size_t)(span->data - (char *)span);
  if (kind != LD_KIND_LARGE || offset + size <= ld_medium_max) return NULL;
  size_t bytes = ld_round_up(offset + size, ld_os_page_size());
  if (bytes <= span->map_bytes) return NULL;
  void *dest;
  if (span_map(bytes, &dest) != 0) return NULL;
  return span_move_onto(span, dest, bytes);
}

/* Spans idle for the purge delay give their pages back (the header page stays, so the span
 * is reused at once); all: trim, every cached span is unmapped. */
size_t ld_large_purge(uint64_t now, bool all) {
  uint64_t delay = ld_purge_delay();
  size_t page = ld_os_page_size(), released = 0;
  ld_large_lock();
  if (all) {
    while (cache.tail) {
      sb_t *old = cache.tail;
      cache_remove(old);
      if (!old->purged) released += old->map_bytes;
      span_unmap(old, old->map_bytes);
    }
  } else {
    for (sb_t *s = cache.tail; s; s = s->prev) { /* oldest first */
      if (s->purged) continue;
      if (s->idle_since_ns + delay > now) break;
      /* (refused: locked pages, which keep their bytes; the span stays unpurged, and a calloc
       * from it clears it: segment.c, run_purge_and_file) */
      if (s->map_bytes > page && ld_os_purge((char *)s + page, s->map_bytes - page) != 0) continue;
      s->purged = 1;
      atomic_fetch_sub_explicit(&cached_dirty, s->map_bytes, memory_order_relaxed);
      released += s->map_bytes - page;
    }
  }
  ld_large_unlock(false);
  return released;
}

uint64_t ld_large_next_expiry(void) {
  uint64_t t = 0;
  ld_large_lock();
  for (sb_t *s = cache.tail; s; s = s->prev)
    if (!s->purged) {
      t = s->idle_since_ns + ld_purge_delay();
      break;
    }
  ld_large_unlock(false);
  return t;
}

size_t ld_large_bytes_in_use(void) { return atomic_load_explicit(&large_in_use, memory_order_relaxed); }
size_t ld_large_bytes_cached_dirty(void) { return atomic_load_explicit(&cached_dirty, memory_order_relaxed); }

void ld_large_peaks(size_t *spans_now, size_t *spans_peak, size_t *bytes_peak) {
  *spans_now = atomic_load_explicit(&large_spans, memory_order_relaxed);
  *spans_peak = atomic_load_explicit(&large_spans_peak, memory_order_relaxed);
  *bytes_peak = atomic_load_explicit(&large_bytes_peak, memory_order_relaxed);
}
void ld_medium_unowned(int64_t *bytes, int64_t *usable) {
  *bytes = atomic_load_explicit(&medium_unowned_bytes, memory_order_relaxed);
  *usable = atomic_load_explicit(&medium_unowned_usable, memory_order_relaxed);
}

size_t ld_large_bytes_cached(void) {
  ld_large_lock();
  size_t b = cache.bytes;
  ld_large_unlock(false);
  return b;
}
