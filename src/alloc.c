/* liblarder's allocation and free paths.
 *
 * The allocation path, from fast to slow:
 *   1. Fast path (larder_malloc, below): the thread's heap, reached through an initial-exec
 *      thread-local pointer, keeps one "current" superblock per size class; pop the head of its
 *      LIFO free list and return it. No lock, no atomic, no heap counter.
 *   2. Refill (heap.c, ld_heap_refill): the current superblock is out of blocks. Collect the
 *      superblocks on the heap's pending list (those into which frees were announced, found
 *      without a scan), carve untouched blocks from the current one, else file it as full and
 *      switch to the fullest superblock of that class the heap holds (Hoard §3.1, fullness
 *      groups: the head of a list, no search).
 *   3. Superblock from the global heap (global.c, ld_global_take): the heap holds none with
 *      room; under the global lock, the head of the global heap's list for this class.
 *   4. New superblock from a segment (segment.c, a free chunk), and a new segment from the OS.
 *   Sizes above the largest class are medium spans (runs of chunks in segments, up to 2 MiB)
 *   or large spans (a mapping each, with a cache of freed ones): large.c.
 *
 * The free path: a block of the calling thread's current superblock for its class goes on
 * its free list; a block of any other superblock the thread owns goes on that superblock's
 * local list, a plain push, collected at the next refill (both in larder_free, below). A block
 * of another thread's superblock is pushed on its remote list with a CAS, and the first such
 * free since the owner last looked puts the superblock on the owner's pending list (free_slow,
 * heap.c ld_heap_free_other). No free waits for a lock (seed 002). A free that takes the class
 * below Hoard's emptiness threshold may give a superblock to the global heap.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* errno (issue 16). glibc documents errno for failures only, and keeps it across free since
 * 2.33; programs save it around malloc and expect it back. Below the entry points, mapping
 * probes, mremap attempts, thread checks and start-up may all set it on their way to a success,
 * so every slow path keeps the caller's value and gives it back when it succeeds; a failure
 * sets ENOMEM (or EINVAL, for a bad alignment). The fast paths call nothing that could set it. */
static inline void *api_result(void *p, int saved) {
  errno = p ? saved : ENOMEM;
  return p;
}

static LD_NOINLINE void *malloc_slow(heap_t *heap, size_t size);
static LD_NOINLINE void free_slow(void *p);
static void free_slow_checked(void *p);
static heap_t *thread_heap(void);

void *larder_malloc(size_t size) {
  heap_t *heap = ld_heap_tls;
  if (LD_LIKELY(size <= LD_SMALL_LIMIT)) {
    unsigned cls = ld_size_class(size);
    sb_t *sb = heap->current[cls];
    if (LD_LIKELY(sb->free_list != NULL)) {
      void *p = ld_sb_pop(sb);
      LD_STAT_INC(heap, mallocs); /* last: an atomic store, which the compiler does not move */
      return p;
    }
  }
  return malloc_slow(heap, size);
}

static LD_NOINLINE void free_not_current(heap_t *heap, sb_t *sb, ld_block_t *b);

/* Invalid and double frees are caught on the push paths because it is cheap: the offset must
 * fall on a carved block boundary (the owner alone may read bump), and a free block carries a
 * tag that live blocks never do. One branch: the three tests are combined without jumps. */
static inline bool owned_block_is_bad(const sb_t *sb, const ld_block_t *b) {
  uintptr_t offset = (uintptr_t)b - (uintptr_t)sb->data;
  uintptr_t index = (offset * sb->reciprocal) >> 40;
  return (offset >= (uintptr_t)(sb->bump - sb->data)) | (index * sb->block_size != offset) | ld_block_is_free(b);
}

void larder_free(void *p) {
  if (LD_UNLIKELY(p == NULL)) return;
  sb_t *sb = ld_sb_of(p);
  heap_t *heap = ld_heap_tls;
  ld_block_t *b = p;
  /* One of the thread's current superblocks? Answered from the heap alone: no header is read
   * before the pointer is known to be larder's. */
  if (LD_LIKELY(heap->current_tag[ld_current_slot(sb)] == (uintptr_t)sb + 1)) {
    if (LD_UNLIKELY(owned_block_is_bad(sb, b))) {
      free_slow(p);
      return;
    }
    ld_set_next(b, sb->free_list);
    b->tag = ld_tag(b);
    sb->free_list = b;
    /* floor: the used count below which the class falls under Hoard's threshold */
    int32_t used = sb->used - 1;
    int32_t floor = sb->floor;
    LD_OWNER_SET(sb->used, used);
    LD_STAT_INC(heap, frees);
    if (LD_UNLIKELY(used < floor)) ld_heap_free_slow(heap, sb->size_class);
    return;
  }
  free_not_current(heap, sb, b);
}

/* A pointer whose header is not in memory larder owns: reported, never read through. */
static LD_NORETURN LD_NOINLINE void not_owned(const char *call, const void *p) {
  bool released = ld_addrmap_state((const char *)p - 1) == LD_ADDR_RELEASED;
  if (call[0] == 'r')
    ld_fatal_bad_free(released ? "realloc of a block already freed and unmapped (use after free or double free)"
                               : "realloc of a pointer larder did not allocate", p);
  ld_fatal_bad_free(released ? "double free (or free of a block already unmapped)"
                             : "invalid free (not a block from larder)", p);
}

/* A block of any superblock but the calling thread's current one for its class (or a pointer
 * that is not larder's, or one of its current superblocks whose table slot another holds). */
static LD_NOINLINE void free_not_current(heap_t *heap, sb_t *sb, ld_block_t *b) {
  if (LD_UNLIKELY(!ld_addrmap_contains_header(b))) not_owned("free", b);
  if (sb->size_class < LD_CLASS_COUNT && heap->current[sb->size_class] == sb) { /* a slot collision */
    free_slow(b);
    return;
  }
  if (LD_LIKELY(atomic_load_explicit(&sb->owner, memory_order_relaxed) == heap)) {
    /* One of the thread's other superblocks: a plain push on its local list, no atomic (a
     * locked instruction would wait for the block's cache line, often not cached here). The
     * tag check is a load whose branch is predicted: it does not hold the free up. */
    if (LD_UNLIKELY(owned_block_is_bad(sb, b))) {
      free_slow(b);
      return;
    }
    ld_set_next(b, sb->local_free);
    b->tag = ld_tag(b);
    if (!sb->local_free) sb->local_tail = b;
    sb->local_free = b;
    int32_t n = sb->local_count + 1;
    __atomic_store_n(&sb->local_count, n, __ATOMIC_RELEASE); /* a helper may take the list: ld_heap_tidy */
    LD_STAT_INC(heap, frees);
    /* not yet on the heap's list of superblocks with local frees, or now wholly free */
    if (LD_UNLIKELY(!sb->in_local_dirty | (n >= __atomic_load_n(&sb->used, __ATOMIC_RELAXED))))
      ld_heap_free_local_slow(heap, sb, n);
    return;
  }
  free_slow(b);
}

/* ---------------------------------------------------------------------------------------- */
/* Slow paths                                                                                 */

static LD_NOINLINE void *malloc_slow(heap_t *heap, size_t size) {
  int saved = errno;
  if (!ld_request_ok(size, 0)) return api_result(NULL, saved);
  if (heap == &ld_heap_empty && !(heap = thread_heap())) return api_result(NULL, saved);
  if (size > ld_small_max) {
    size_t dirty;
    void *p = ld_large_alloc(size, LD_MIN_ALIGN, &dirty);
    if (p) {
      LD_STAT_INC(heap, large_allocs); /* medium spans included; medium_allocs counts those */
      LD_STAT_INC(heap, mallocs);
    }
    return api_result(p, saved);
  }
  void *p = ld_heap_refill(heap, ld_size_class(size));
  if (p) LD_STAT_INC(heap, mallocs);
  return api_result(p, saved);
}

/* The calling thread's heap, made on its first call; NULL (errno ENOMEM) if it cannot be. */
static heap_t *thread_heap(void) {
  heap_t *heap = ld_heap_tls;
  if (heap == &ld_heap_empty && !(heap = ld_heap_for_thread())) errno = ENOMEM;
  return heap;
}

/* A small block of class cls, for aligned requests that need a particular class. */
static void *malloc_class(unsigned cls) {
  heap_t *heap = thread_heap();
  if (!heap) return NULL;
  sb_t *sb = heap->current[cls];
  if (sb->free_list) {
    LD_STAT_INC(heap, mallocs);
    return ld_sb_pop(sb);
  }
  void *p = ld_heap_refill(heap, cls);
  if (p) LD_STAT_INC(heap, mallocs);
  return p;
}

/* Every free that is not into the calling thread's current superblock of that class: large
 * spans, invalid pointers, and blocks of any other superblock, its own included, which go on
 * the superblock's remote list. Also entered from the fast path when a check failed there, so
 * every check is repeated here to name the fault exactly. */
static LD_NOINLINE void free_slow(void *p) {
  int saved = errno; /* munmap, madvise and the purge below must not show through free */
  free_slow_checked(p);
  errno = saved;
}

static void free_slow_checked(void *p) {
  if (LD_UNLIKELY(!ld_addrmap_contains_header(p))) not_owned("free", p);
  sb_t *sb = ld_sb_of(p);
  if (sb->magic != LD_SB_MAGIC) ld_fatal_bad_free("invalid free (not a block from larder)", p);
  if (sb->kind != LD_KIND_SMALL) {
    if (sb->kind == LD_KIND_LARGE_CACHED || sb->kind == LD_KIND_FREED) ld_fatal_bad_free("double free", p);
    if ((sb->kind != LD_KIND_LARGE && sb->kind != LD_KIND_MEDIUM) || p != sb->data)
      ld_fatal_bad_free("invalid free (not the start of a block)", p);
    ld_large_free(sb);
    return;
  }
  uintptr_t offset = (uintptr_t)p - (uintptr_t)sb->data;
  if ((uintptr_t)p < (uintptr_t)sb->data || ((offset * sb->reciprocal) >> 40) * sb->block_size != offset ||
      (uintptr_t)p >= (uintptr_t)sb->data + (uintptr_t)sb->capacity * sb->block_size)
    ld_fatal_bad_free("invalid free (not the start of a block)", p);
  ld_block_t *b = p;
  if (ld_block_is_free(b)) ld_fatal_bad_free("double free", p);
  heap_t *heap = ld_heap_tls;
  /* A thread that only frees gets a heap too, so that its counters are its own: shared
   * atomic counters would serialise every consumer thread on one cache line. */
  if (LD_UNLIKELY(heap == &ld_heap_empty) && !(heap = ld_heap_for_thread())) heap = &ld_heap_empty;
  /* Only the owner may read bump, and for its current superblock only: beyond it, the block
   * was never handed out. */
  if (heap->current[sb->size_class] == sb && (char *)p >= sb->bump)
    ld_fatal_bad_free("invalid free (block was never allocated)", p);
  ld_stat_count(heap, offsetof(ld_stats_t, frees));
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap) ld_stat_count(heap, offsetof(ld_stats_t, remote_frees));
  ld_heap_free_other(heap, sb, b);
}

/* ---------------------------------------------------------------------------------------- */
/* The rest of the interface, built on the two paths above.                                   */

size_t larder_usable_size(const void *p) {
  if (!p || !ld_addrmap_contains_header(p)) return 0;
  sb_t *sb = ld_sb_of(p);
  if (sb->magic != LD_SB_MAGIC) return 0;
  if (sb->kind == LD_KIND_SMALL) return sb->block_size;
  if (sb->kind == LD_KIND_LARGE || sb->kind == LD_KIND_MEDIUM) return sb->usable;
  return 0;
}

static int mul_overflows(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }

void *larder_calloc(size_t count, size_t size) {
  size_t bytes;
  int saved = errno;
  if (mul_overflows(count, size, &bytes) || !ld_request_ok(bytes, 0)) return api_result(NULL, saved);
  if (bytes > ld_small_max) {
    if (!thread_heap()) return api_result(NULL, saved);
    size_t dirty;
    void *p = ld_large_alloc(bytes, LD_MIN_ALIGN, &dirty);
    if (p) memset(p, 0, dirty < bytes ? dirty : bytes);
    return api_result(p, saved);
  }
  void *p = larder_malloc(bytes);
  if (p) memset(p, 0, bytes);
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
    if (sb->magic == LD_SB_MAGIC && (sb->kind == LD_KIND_LARGE_CACHED || sb->kind == LD_KIND_FREED))
      ld_fatal_bad_free("realloc after free (use after free or double free)", p);
    ld_fatal_bad_free("realloc of a pointer larder did not allocate", p);
  }
  /* Before any path looks at the size: an impossible one must not wrap in a sum below. */
  if (!ld_request_ok(size, 0)) return NULL;
  if (size <= usable && size >= usable / 2) return p;
  sb_t *sb = ld_sb_of(p);
  heap_t *heap = ld_heap_tls;
  if (sb->kind != LD_KIND_SMALL && size > ld_small_max && p == sb->data) {
    void *q = ld_large_realloc_in_place(sb, size);
    if (!q && size > usable) q = ld_large_realloc_move(sb, size);
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

void *larder_realloc(void *p, size_t size) {
  if (!p) return larder_malloc(size);
  int saved = errno;
  if (size == 0) { /* glibc's behaviour: free and return NULL, a success */
    larder_free(p);
    errno = saved;
    return NULL;
  }
  return api_result(realloc_block(p, size), saved);
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
static void *aligned_alloc_pow2(size_t alignment, size_t size) {
  if (alignment <= LD_MIN_ALIGN) return larder_malloc(size);
  int saved = errno;
  if (!ld_request_ok(size, alignment)) return api_result(NULL, saved);
  if (size <= ld_small_max && alignment <= ld_small_max) {
    size_t want = size < alignment ? alignment : size;
    for (unsigned cls = ld_size_class(want); cls < LD_CLASS_COUNT; cls++) {
      if (ld_class_size[cls] > ld_small_max) break;
      if (ld_class_size[cls] % alignment == 0) return api_result(malloc_class(cls), saved);
    }
  }
  if (!thread_heap()) return api_result(NULL, saved);
  size_t dirty;
  return api_result(ld_large_alloc(size, alignment, &dirty), saved);
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
  int saved = errno;
  void *p = aligned_alloc_pow2(alignment, size);
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
  int released = ld_purge_trim();
  errno = saved;
  return released;
}
