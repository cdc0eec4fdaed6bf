/* Large objects: sizes above the largest size class, each in a span of whole pages mapped on
 * its own. The span starts with a header laid out like a superblock's, at an S-aligned
 * address, so free() finds it with the same mask (internal.h, ld_sb_of).
 *
 * Freed spans go to a small cache instead of back to the OS, so that a program that mallocs
 * and frees large buffers in a loop does not pay an mmap and a page fault per buffer. Spans
 * idle longer than the purge delay are purged; malloc_trim unmaps them all.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#define LARGE_CACHE_MAX_SPANS 32

static struct {
  pthread_mutex_t lock;
  sb_t *head, *tail;      /* newest first */
  size_t count, bytes;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic size_t large_in_use;

/* Spans carved from segments (block_size field set to 1) go back as empty superblocks;
 * spans of their own mapping are unmapped. */
static void span_release(sb_t *span) {
  if (span->block_size == 1) ld_segment_give_span(span->map_base, span->map_bytes / ld_sb_size);
  else ld_os_unmap(span->map_base, span->map_bytes);
}
/* When the oldest cached span that still holds pages went idle (0: none): lets the small
 * paths check for expired spans without taking the cache lock. */
static _Atomic uint64_t cache_oldest_resident_ns;

void ld_large_lock(void) { pthread_mutex_lock(&cache.lock); }
void ld_large_unlock(void) { pthread_mutex_unlock(&cache.lock); }

static void cache_remove(sb_t *span) {
  if (span->prev) span->prev->next = span->next; else cache.head = span->next;
  if (span->next) span->next->prev = span->prev; else cache.tail = span->prev;
  span->next = span->prev = NULL;
  cache.count--;
  cache.bytes -= span->map_bytes;
}

/* The smallest cached span that holds `need` bytes without wasting more than three quarters,
 * preferring one whose pages are still resident (no page faults to reuse it). */
static sb_t *cache_take(size_t need) {
  sb_t *best = NULL;
  for (sb_t *s = cache.head; s; s = s->next) {
    if (s->map_bytes < need || s->map_bytes / 4 > need) continue;
    if (!best || (best->purged && !s->purged) || (best->purged == s->purged && s->map_bytes < best->map_bytes)) best = s;
  }
  if (best) cache_remove(best);
  return best;
}

/* On a miss the cache does not fit what the program asks for now: spans smaller than the
 * request go back to the OS (it has outgrown them), and spans too big to serve it give their
 * pages back but stay mapped (a later large request reuses them with page faults but no mmap).
 * Otherwise they would stay resident beside the new span until the purge delay. */
static void cache_on_miss(size_t need) {
  size_t page = ld_os_page_size();
  sb_t *s = cache.head;
  while (s) {
    sb_t *next = s->next;
    if (s->map_bytes < need) {
      cache_remove(s);
      span_release(s);
    } else if (!s->purged) {
      if (s->map_bytes > page) ld_os_purge((char *)s + page, s->map_bytes - page);
      s->purged = 1;
    }
    s = next;
  }
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) & ~(to - 1); }

void *ld_large_alloc(size_t size, size_t align, bool *zeroed) {
  size_t page = ld_os_page_size();
  if (align < LD_MIN_ALIGN) align = LD_MIN_ALIGN;
  /* Anything this big can never be served; saying so early also keeps the sums below from
   * overflowing. */
  if (size > (SIZE_MAX >> 2) || align > (SIZE_MAX >> 2)) {
    errno = ENOMEM;
    return NULL;
  }
  sb_t *span = NULL;
  char *user;
  *zeroed = false;
  if (align < ld_sb_size) {
    size_t offset = round_up(LD_SB_HEADER, align);
    size_t need = round_up(offset + size, page);
    if (ld_options.large_cache_mb > 0) {
      ld_large_lock();
      span = cache_take(need);
      if (!span) cache_on_miss(need);
      ld_large_unlock();
    }
    if (!span) {
      void *base;
      size_t chunks = (need + ld_sb_size - 1) / ld_sb_size;
      uint32_t from_segment = 0;
      if (chunks <= LD_MEDIUM_MAX_CHUNKS && (base = ld_segment_take_span(chunks)) != NULL) {
        need = chunks * ld_sb_size; /* fresh segment memory: untouched pages cost nothing */
        from_segment = 1;
      } else if (ld_os_map_aligned(need, ld_sb_size, &base) != 0) {
        errno = ENOMEM;
        return NULL;
      }
      span = base;
      span->map_base = base;
      span->map_bytes = need;
      span->block_size = from_segment;
      *zeroed = true;
    } else {
      ld_stat_count(ld_heap_tls, offsetof(ld_stats_t, large_cache_hits));
    }
    user = (char *)span + offset;
  } else {
    /* Alignment of S or more: the header goes in the S-chunk just below the user pointer.
     * Such spans are not cached (their layout is particular to their alignment). */
    size_t total = round_up(align + size, page);
    void *base;
    if (ld_os_map_aligned(total, ld_sb_size, &base) != 0) {
      errno = ENOMEM;
      return NULL;
    }
    user = (char *)round_up((uintptr_t)base + ld_sb_size, align);
    span = (sb_t *)(user - ld_sb_size);
    span->map_base = base;
    span->map_bytes = total;
    span->block_size = 0;
    *zeroed = true;
  }
  span->magic = LD_SB_MAGIC;
  span->kind = LD_KIND_LARGE;
  span->data = user;
  span->usable = (size_t)((char *)span->map_base + span->map_bytes - user);
  span->size_class = LD_CLASS_LARGE;
  span->purged = 0;
  atomic_store_explicit(&span->owner, NULL, memory_order_relaxed);
  atomic_fetch_add_explicit(&large_in_use, span->map_bytes, memory_order_relaxed);
  return user;
}

/* Called with the cache lock held. */
static void cache_purge_expired(uint64_t now, bool all) {
  uint64_t delay = (uint64_t)ld_options.purge_delay_ms * 1000000u;
  size_t page = ld_os_page_size();
  uint64_t oldest = 0;
  for (sb_t *s = cache.tail; s; s = s->prev) { /* oldest first */
    if (s->purged) continue;
    if (!all && now - s->idle_since_ns < delay) {
      oldest = s->idle_since_ns;
      break;
    }
    if (s->map_bytes > page) ld_os_purge((char *)s + page, s->map_bytes - page);
    s->purged = 1;
  }
  atomic_store_explicit(&cache_oldest_resident_ns, oldest, memory_order_relaxed);
}

void ld_large_free(sb_t *span) {
  ld_stat_count(ld_heap_tls, offsetof(ld_stats_t, frees));
  size_t bytes = span->map_bytes;
  atomic_fetch_sub_explicit(&large_in_use, bytes, memory_order_relaxed);
  size_t limit = (size_t)ld_options.large_cache_mb << 20;
  if ((void *)span != span->map_base || bytes > limit) {
    span->kind = LD_KIND_LARGE_CACHED; /* a header that survives (segment spans) reads as freed */
    span_release(span);
    return;
  }
  uint64_t now = ld_os_now_ns();
  ld_large_lock();
  span->kind = LD_KIND_LARGE_CACHED;
  span->idle_since_ns = now;
  span->purged = 0;
  span->prev = NULL;
  span->next = cache.head;
  if (cache.head) cache.head->prev = span; else cache.tail = span;
  cache.head = span;
  cache.count++;
  cache.bytes += bytes;
  while (cache.count > LARGE_CACHE_MAX_SPANS || cache.bytes > limit) {
    sb_t *old = cache.tail;
    cache_remove(old);
    span_release(old);
  }
  /* Resident budget: the span just freed, plus a quarter of the large bytes in use. Older
   * spans beyond it give their pages back now rather than after the purge delay, so the
   * cache saves mmap calls without holding a peak's worth of memory resident. */
  size_t budget = atomic_load_explicit(&large_in_use, memory_order_relaxed) / 4, resident = 0;
  size_t page = ld_os_page_size();
  for (sb_t *s = cache.head->next; s; s = s->next) {
    if (s->purged) continue;
    resident += s->map_bytes;
    if (resident > budget) {
      if (s->map_bytes > page) ld_os_purge((char *)s + page, s->map_bytes - page);
      s->purged = 1;
      resident -= s->map_bytes;
    }
  }
  cache_purge_expired(now, ld_options.purge_delay_ms == 0);
  ld_large_unlock();
}

int ld_large_trim(void) {
  ld_large_lock();
  int released = cache.count > 0;
  while (cache.tail) {
    sb_t *old = cache.tail;
    cache_remove(old);
    span_release(old);
  }
  ld_large_unlock();
  return released;
}

void ld_large_purge_expired(uint64_t now) {
  uint64_t oldest = atomic_load_explicit(&cache_oldest_resident_ns, memory_order_relaxed);
  if (!oldest || now - oldest < (uint64_t)ld_options.purge_delay_ms * 1000000u) return;
  ld_large_lock();
  cache_purge_expired(now, false);
  ld_large_unlock();
}

size_t ld_large_bytes_in_use(void) { return atomic_load_explicit(&large_in_use, memory_order_relaxed); }

size_t ld_large_bytes_cached(void) {
  ld_large_lock();
  size_t b = cache.bytes;
  ld_large_unlock();
  return b;
}
