/* The fit tier (LARDER_FIT_ABOVE, off by default): blocks above that size, up to the largest
 * class, come from a best-fit, coalescing allocator of the thread's heap instead of size
 * classes.
 *
 * Why: free memory of one size class serves only that class until a whole superblock empties,
 * so a small heap whose sizes shift holds more than its live bytes (docs/allocator.md, Known
 * limits: on the committed python trace, keeping each class's memory to itself costs 17.1%, and
 * larder measured 40.3% against glibc's 8.8%; with glibc's coalescing malloc serving blocks
 * above 1 KiB, 15.5%). Here a freed block merges with its free neighbours and serves a request
 * of any size it holds, as in Lever & Boreham's and glibc's best-fit heaps (seed 000).
 *
 * Layout. A region is one S-sized chunk of a segment (so free finds its header with a mask,
 * as a superblock's): the header (sb_t: magic, kind LD_KIND_FIT, owner, the remote stack), a
 * bitmap with one bit per 16-byte granule, set where a live block's user pointer is, then the
 * blocks, each a 16-byte header (the size of the block before it, valid while that one is free;
 * its own size and flags) and its bytes, and a last header that is always in use. A free block
 * is in one of the heap's bins (two-level, as TLSF's: exact to 512 B, then 8 per doubling),
 * linked through its first bytes, and its size is also in the next block's header (boundary
 * tags), so that a free merges with both neighbours in O(1).
 *
 * Ownership (Hoard §3): a region belongs to one heap, and only its owner, under the heap's
 * lock, changes its blocks and bins. Another thread's free never waits for a lock (seed 002):
 * it claims the block with a CAS on its header (in use, not yet claimed: two frees of one block
 * cannot both succeed), pushes it onto the region's remote stack (a CAS), and, when the stack
 * was empty, announces the region on the owner's pending list (a CAS). The owner collects at
 * most FIT_COLLECT_REGIONS announced regions at each of its fit mallocs; the purge collects the
 * rest for a thread that stopped calling. A region's stack is taken only by whoever took the
 * region off the pending list, so a region with a block on its stack is never wholly free.
 *
 * Every operation looks at a constant number of blocks: the request's own bin's first
 * FIT_PEEK (the smallest that fits), else the head of the next bin that holds any (two words of
 * bitmap); a free, its two neighbours.
 *
 * Memory back: a region that empties is kept while it is the heap's only empty one (a block
 * that comes and goes would otherwise take a region each time); the purge gives it up once it
 * has waited a purge delay (at once for a heap no thread uses), and every other empty region
 * goes to the global heap at once. There it waits a purge delay for any heap's next region
 * (newest first), then the purge gives it to the segments, which return its pages to the OS.
 * Regions are not made from other classes' empty superblocks, nor given to the segments at
 * once: a chunk that changes use keeps the pages of both uses resident (64 threads recycled 20
 * times: RSS x3.5). Free pages inside a region in use stay resident (not purged: glibc's heap
 * keeps them too) until the thread stops calling for a purge delay, or malloc_trim: then the
 * pages inside its free blocks go back (purge_free_pages).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <errno.h>
#include <string.h>

#define FIT_IN_USE    ((size_t)1)
#define FIT_PREV_FREE ((size_t)2)  /* the block before this one is free (its size: prev_size) */
#define FIT_REMOTE    ((size_t)4)  /* freed by another thread, waiting on its region's stack */
#define FIT_PURGED    ((size_t)8)  /* free, and its whole pages given back (purge_free_pages) */
#define FIT_FLAGS     ((size_t)15)
#define FIT_HEADER    ((size_t)16)
#define FIT_MIN       ((size_t)32) /* a header and the two links of a free block */
#define FIT_PEEK      8u           /* blocks of a bin looked at for the smallest that fits */
#define FIT_COLLECT_REGIONS 4u     /* announced regions a malloc collects */

typedef struct ld_fit_free_s {
  size_t prev_size;                /* the block before's size, while it is free */
  size_t head;                     /* this block's size | FIT_* (atomic: other threads' claims) */
  struct ld_fit_free_s *next, *prev; /* while free: its bin; while on a remote stack: next */
} fit_block_t;

/* ---- layout ---- */

static inline size_t bitmap_bytes(void) { return ld_sb_size >> 7; } /* a bit per 16 bytes */
static inline size_t data_offset(void) { return LD_SB_HEADER + bitmap_bytes(); }
/* the bytes of blocks: the first block spans them all in an empty region */
static inline size_t region_span(void) { return ld_sb_size - FIT_HEADER - data_offset(); }
static inline _Atomic uint64_t *region_bitmap(sb_t *r) { return (_Atomic uint64_t *)((char *)r + LD_SB_HEADER); }
static inline fit_block_t *region_first(sb_t *r) { return (fit_block_t *)((char *)r + data_offset()); }
static inline fit_block_t *region_last(sb_t *r) { return (fit_block_t *)((char *)r + ld_sb_size - FIT_HEADER); }

static inline size_t head_load(const fit_block_t *b) { return __atomic_load_n(&b->head, __ATOMIC_RELAXED); }
static inline void head_store(fit_block_t *b, size_t v) { __atomic_store_n(&b->head, v, __ATOMIC_RELAXED); }
static inline size_t block_size(const fit_block_t *b) { return head_load(b) & ~FIT_FLAGS; }
static inline fit_block_t *block_at(void *p, size_t offset) { return (fit_block_t *)((char *)p + offset); }
static inline fit_block_t *block_of(const void *user) { return (fit_block_t *)((char *)user - FIT_HEADER); }
static inline void *user_of(fit_block_t *b) { return (char *)b + FIT_HEADER; }

static inline size_t granule_of(const sb_t *r, const void *user) { return (size_t)((const char *)user - (const char *)r) >> 4; }
static inline bool bit_get(sb_t *r, size_t g) {
  return (atomic_load_explicit(&region_bitmap(r)[g >> 6], memory_order_relaxed) >> (g & 63)) & 1;
}
/* Set and cleared by the owner only, under its lock, and read by any freer: a load and a store,
 * no locked read-modify-write (two of a pair's seven). */
static inline void bit_set(sb_t *r, size_t g) {
  _Atomic uint64_t *w = &region_bitmap(r)[g >> 6];
  atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) | (uint64_t)1 << (g & 63), memory_order_relaxed);
}
static inline void bit_clear(sb_t *r, size_t g) {
  _Atomic uint64_t *w = &region_bitmap(r)[g >> 6];
  atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) & ~((uint64_t)1 << (g & 63)), memory_order_relaxed);
}

/* ---- bins: exact (16-byte steps) below 512 B, then 8 per doubling ---- */

static inline unsigned bin_of(size_t size) {
  size_t g = size >> 4;
  if (g < 32) return (unsigned)g;
  unsigned top = 63u - (unsigned)__builtin_clzll(g);
  return 32u + (top - 5u) * 8u + (unsigned)((g >> (top - 3u)) & 7u);
}
_Static_assert(32 + (16 - 5) * 8 + 7 < LD_FIT_BINS, "a bin for a block as large as a 1 MiB superblock (2^16 granules)");

static void bin_insert(ld_fit_heap_t *f, fit_block_t *b, size_t size) {
  unsigned i = bin_of(size);
  b->prev = NULL;
  b->next = f->bins[i];
  if (b->next) b->next->prev = b;
  f->bins[i] = b;
  f->nonempty[i >> 6] |= (uint64_t)1 << (i & 63);
}

static void bin_remove(ld_fit_heap_t *f, fit_block_t *b, size_t size) {
  unsigned i = bin_of(size);
  if (b->prev) b->prev->next = b->next;
  else f->bins[i] = b->next;
  if (b->next) b->next->prev = b->prev;
  if (!f->bins[i]) f->nonempty[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

/* The smallest of a bin's first FIT_PEEK blocks of at least `need` bytes, or NULL. */
static fit_block_t *bin_peek(ld_fit_heap_t *f, unsigned i, size_t need) {
  fit_block_t *best = NULL;
  size_t best_size = SIZE_MAX;
  unsigned looked = 0;
  for (fit_block_t *b = f->bins[i]; b && looked < FIT_PEEK; b = b->next, looked++) {
    size_t s = block_size(b);
    if (s >= need && s < best_size) {
      best = b;
      best_size = s;
      if (s == need) break;
    }
  }
  return best;
}

/* A free block of at least `need` bytes: from need's own bin when one of its first blocks
 * fits, else from the next bin that holds any, every block of which fits. */
static fit_block_t *bin_find(ld_fit_heap_t *f, size_t need) {
  unsigned i = bin_of(need);
  fit_block_t *b = f->bins[i] ? bin_peek(f, i, need) : NULL;
  if (b) return b;
  for (unsigned w = (i + 1) >> 6; w < LD_FIT_BINS / 64; w++) {
    uint64_t bits = f->nonempty[w];
    if (w == (i + 1) >> 6) bits &= ~(uint64_t)0 << ((i + 1) & 63);
    if (bits) {
      unsigned j = w * 64 + (unsigned)__builtin_ctzll(bits);
      return bin_peek(f, j, need);
    }
  }
  return NULL;
}

/* ---- regions ---- */

static void region_list_remove(ld_fit_heap_t *f, sb_t *r) {
  if (r->prev) r->prev->next = r->next;
  else f->regions = r->next;
  if (r->next) r->next->prev = r->prev;
  r->next = r->prev = NULL;
}

/* A new region for heap, its one block free in its bin; NULL when the memory cannot be had. */
static sb_t *region_new(heap_t *heap) {
  sb_t *r = ld_global_take_region();
  bool clean = false;
  if (!r && !(r = ld_segment_alloc(1, ld_sb_size, 0, &clean))) return NULL;
  memset(r, 0, sizeof *r);
  if (!clean) memset((void *)region_bitmap(r), 0, bitmap_bytes());
  r->magic = LD_SB_MAGIC;
  r->kind = LD_KIND_FIT;
  r->size_class = LD_CLASS_LARGE; /* no class: the remote free path's shapes skip it */
  r->group = LD_GROUP_NONE;
  r->bump = (char *)r + ld_sb_size;
  r->map_bytes = ld_sb_size;
  atomic_store_explicit(&r->owner, heap, memory_order_release);
  fit_block_t *b = region_first(r), *last = region_last(r);
  head_store(b, region_span());
  last->prev_size = region_span();
  head_store(last, FIT_IN_USE | FIT_PREV_FREE);
  ld_fit_heap_t *f = &heap->fit;
  r->next = f->regions;
  if (r->next) r->next->prev = r;
  f->regions = r;
  LD_OWNER_SET(f->regions_held, f->regions_held + 1);
  bin_insert(f, b, region_span());
  return r;
}

/* An empty region out of the heap, to the global heap, where another heap's tier takes it or,
 * after a purge delay, the purge gives it to the segments. */
static void region_release(heap_t *heap, sb_t *r) {
  ld_fit_heap_t *f = &heap->fit;
  bin_remove(f, region_first(r), region_span());
  region_list_remove(f, r);
  LD_OWNER_SET(f->regions_held, f->regions_held - 1);
  if (f->empty_region == r) f->empty_region = NULL;
  atomic_store_explicit(&r->owner, &ld_global_heap, memory_order_relaxed);
  ld_global_put_region(r);
}

/* r's blocks are all free: kept if it is the heap's only empty region, else given back. */
static void region_emptied(heap_t *heap, sb_t *r) {
  ld_fit_heap_t *f = &heap->fit;
  if (f->empty_region && f->empty_region != r) {
    region_release(heap, r);
    return;
  }
  f->empty_region = r;
  f->empty_since_ns = ld_os_now_coarse_ns();
  ld_due_note(f->empty_since_ns); /* the purge gives it back a delay from now if it stays empty */
}

/* ---- blocks ---- */

/* b, claimed (not in use any more), goes back: merged with its free neighbours, into a bin. */
static void block_release(heap_t *heap, sb_t *r, fit_block_t *b) {
  ld_fit_heap_t *f = &heap->fit;
  size_t size = block_size(b);
  bit_clear(r, granule_of(r, user_of(b)));
  LD_OWNER_SET(f->in_use, f->in_use - (int64_t)(size - FIT_HEADER));
  r->used--;
  fit_block_t *start = b;
  size_t total = size;
  if (head_load(b) & FIT_PREV_FREE) {
    fit_block_t *before = (fit_block_t *)((char *)b - b->prev_size);
    size_t before_size = block_size(before);
    bin_remove(f, before, before_size);
    start = before;
    total += before_size;
  }
  fit_block_t *after = block_at(b, size);
  size_t after_head = head_load(after);
  if (!(after_head & FIT_IN_USE)) {
    size_t after_size = after_head & ~FIT_FLAGS;
    bin_remove(f, after, after_size);
    total += after_size;
  }
  head_store(start, total); /* the block before it is in use: merged otherwise */
  after = block_at(start, total);
  after->prev_size = total;
  /* atomically: `after` may be live, and claimed by another thread's free meanwhile */
  __atomic_fetch_or(&after->head, FIT_PREV_FREE, __ATOMIC_RELAXED);
  bin_insert(f, start, total);
  if (total == region_span()) region_emptied(heap, r);
}

/* Another thread's frees into the heap's regions: at most `most` announced regions' stacks,
 * every block on each (a region holds at most S / 32 blocks). Heap lock held. */
static void collect(heap_t *heap, unsigned most) {
  ld_fit_heap_t *f = &heap->fit;
  if (!f->pending_taken) {
    if (!atomic_load_explicit(&f->pending, memory_order_relaxed)) return;
    f->pending_taken = atomic_exchange_explicit(&f->pending, NULL, memory_order_acquire);
  }
  size_t taken = 0;
  for (unsigned n = 0; n < most && f->pending_taken; n++) {
    sb_t *r = f->pending_taken;
    /* read before the stack is taken: a freer that finds it empty afterwards announces r
     * again, writing this link */
    f->pending_taken = __atomic_load_n(&r->pending_next, __ATOMIC_ACQUIRE);
    fit_block_t *b = (fit_block_t *)(uintptr_t)atomic_exchange_explicit(&r->remote, 0, memory_order_acquire);
    LD_STAT_INC(heap, fit_regions_examined);
    while (b) {
      fit_block_t *next = b->next;
      size_t h = __atomic_fetch_and(&b->head, ~(FIT_IN_USE | FIT_REMOTE), __ATOMIC_RELAXED);
      taken += (h & ~FIT_FLAGS) - FIT_HEADER;
      block_release(heap, r, b);
      b = next;
    }
  }
  if (taken) ld_stat_add(heap, offsetof(ld_stats_t, fit_remote_taken_bytes), taken);
}

void *ld_fit_alloc(heap_t *heap, size_t size) {
  size_t need = ((size + 15) & ~(size_t)15) + FIT_HEADER;
  if (need < FIT_MIN) need = FIT_MIN;
  if (need > region_span()) return NULL; /* (sizes up to ld_small_max, S/4 at most, fit) */
  ld_fit_heap_t *f = &heap->fit;
  ld_lock(&heap->lock);
  collect(heap, FIT_COLLECT_REGIONS);
  fit_block_t *b = bin_find(f, need);
  if (!b) {
    if (!region_new(heap)) {
      ld_unlock(&heap->lock);
      return NULL;
    }
    b = bin_find(f, need);
  }
  sb_t *r = ld_sb_of(b);
  size_t have = block_size(b);
  bin_remove(f, b, have);
  if (r == f->empty_region) f->empty_region = NULL;
  if (have - need >= FIT_MIN) {
    head_store(b, need | FIT_IN_USE);
    fit_block_t *rest = block_at(b, need);
    head_store(rest, have - need);
    block_at(rest, have - need)->prev_size = have - need; /* (its FIT_PREV_FREE stays) */
    bin_insert(f, rest, have - need);
  } else {
    need = have;
    head_store(b, have | FIT_IN_USE);
    __atomic_fetch_and(&block_at(b, have)->head, ~FIT_PREV_FREE, __ATOMIC_RELAXED);
  }
  bit_set(r, granule_of(r, user_of(b)));
  LD_OWNER_SET(f->in_use, f->in_use + (int64_t)(need - FIT_HEADER));
  r->used++;
  LD_STAT_INC(heap, fit_allocs);
  ld_unlock(&heap->lock);
  return user_of(b);
}

/* A user pointer's offset in its region could start a block: 16-aligned, past the first block's
 * header, before the last header. */
static inline bool offset_may_start(uintptr_t offset) {
  return !(offset & 15) && offset >= data_offset() + FIT_HEADER && offset < ld_sb_size - FIT_HEADER;
}
/* A header of a block the program holds: in use, and not claimed by another thread's free. */
static inline bool head_live(size_t h) { return (h & FIT_IN_USE) && !(h & FIT_REMOTE); }

/* p is not a live block: a double free when a free block's header is there, else a pointer
 * that never started a block. */
static LD_NORETURN void bad_free(sb_t *r, void *p) {
  uintptr_t offset = (uintptr_t)p - (uintptr_t)r;
  if (offset_may_start(offset)) {
    size_t h = head_load(block_of(p));
    size_t size = h & ~FIT_FLAGS;
    if (!head_live(h) && size >= FIT_MIN && size <= ld_sb_size - offset) ld_fatal_bad_free("double free", p);
  }
  ld_fatal_bad_free("invalid free (not the start of a block)", p);
}

static inline bool is_live_start(sb_t *r, const void *p) {
  uintptr_t offset = (uintptr_t)p - (uintptr_t)r;
  return offset_may_start(offset) && bit_get(r, offset >> 4);
}

/* Claims b for this free: in use and not claimed by another free, and then `set` (FIT_REMOTE)
 * or `clear` (FIT_IN_USE) in one CAS; a lost race with another free of b is a double free. */
static void claim(sb_t *r, fit_block_t *b, size_t set, size_t clear) {
  size_t h = head_load(b);
  for (;;) {
    if (!head_live(h)) bad_free(r, user_of(b));
    if (__atomic_compare_exchange_n(&b->head, &h, (h | set) & ~clear, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
  }
}

void ld_fit_free(heap_t *heap, sb_t *r, void *p) {
  if (!is_live_start(r, p)) bad_free(r, p);
  fit_block_t *b = block_of(p);
  heap_t *owner = atomic_load_explicit(&r->owner, memory_order_acquire);
  if (owner == heap) { /* (nothing here makes a system call: errno stays) */
    ld_lock(&heap->lock);
    claim(r, b, 0, FIT_IN_USE);
    block_release(heap, r, b);
    LD_STAT_INC(heap, fit_frees);
    ld_unlock(&heap->lock);
    return;
  }
  /* another heap's: onto the region's stack, with no lock (seed 002) */
  claim(r, b, FIT_REMOTE, 0);
  size_t bytes = block_size(b) - FIT_HEADER;
  uint64_t old = atomic_load_explicit(&r->remote, memory_order_relaxed);
  do {
    b->next = (fit_block_t *)(uintptr_t)old;
  } while (!atomic_compare_exchange_weak_explicit(&r->remote, &old, (uint64_t)(uintptr_t)b, memory_order_release, memory_order_relaxed));
  ld_stat_count(heap, offsetof(ld_stats_t, remote_frees));
  ld_stat_add(heap, offsetof(ld_stats_t, fit_remote_bytes), bytes);
  if (old) return; /* announced already, and not yet collected */
  sb_t *head = atomic_load_explicit(&owner->fit.pending, memory_order_relaxed);
  do {
    __atomic_store_n(&r->pending_next, head, __ATOMIC_RELAXED);
  } while (!atomic_compare_exchange_weak_explicit(&owner->fit.pending, &head, r, memory_order_release, memory_order_relaxed));
  /* a purge within a delay collects it if the owner makes no fit malloc by then */
  uint64_t now = ld_os_now_coarse_ns();
  ld_due_note(now);
  /* An owner that stopped calling (alive but waiting, or gone) would keep every block sent to
   * it until that purge: one thread that frees what idle threads allocated, turn after turn,
   * then holds all of their memory at once (Hoard §4's P-fold blowup: blowup_idle, 16 idle
   * owners of 32 MiB each, 553 MiB held for 32 needed). So the freer that announces a region
   * collects for the owner, with a trylock (a free never waits for a lock, seed 002): as many
   * regions as a malloc would. At every announcement, not only past a time without calls: a
   * coarse clock of 4 ms said "busy" for a whole turn of frees that took less (blowup_idle under
   * load: 118 MiB). An announcement comes once per region between two collections. */
  if (ld_trylock(&owner->lock)) {
    collect(owner, FIT_COLLECT_REGIONS);
    ld_unlock(&owner->lock);
  }
}

size_t ld_fit_usable(sb_t *r, const void *p) {
  if (!is_live_start(r, p)) return 0;
  size_t h = head_load(block_of(p));
  return head_live(h) ? (h & ~FIT_FLAGS) - FIT_HEADER : 0;
}

/* The whole pages inside the heap's free blocks go back to the OS (a free block's first 32
 * bytes, its header and links, stay; the next block's header is past its end), each block once
 * (FIT_PURGED, which a malloc or a merge of the block clears). For a heap that stopped calling
 * and for malloc_trim: a region with one live block keeps only the pages its live blocks and
 * headers lie on, as a superblock's free pages go back in the global heap (global.c). The
 * pages read as zero when a block is handed out there again (calloc clears every block anyway).
 * Walks every free block of the heap: the purge's, never an allocation's. Heap lock held. */
static size_t purge_free_pages(heap_t *heap) {
  ld_fit_heap_t *f = &heap->fit;
  size_t page = ld_os_page_size(), bytes = 0;
  for (unsigned i = bin_of(2 * page); i < LD_FIT_BINS; i++) {
    for (fit_block_t *b = f->bins[i]; b; b = b->next) {
      size_t h = head_load(b);
      if (h & FIT_PURGED) continue;
      uintptr_t from = ld_round_up((uintptr_t)b + FIT_MIN, page), to = ((uintptr_t)b + (h & ~FIT_FLAGS)) & ~(page - 1);
      if (to <= from) continue;
      if (ld_os_purge((void *)from, to - from) == 0) bytes += to - from;
      head_store(b, h | FIT_PURGED);
    }
  }
  return bytes;
}

bool ld_fit_tidy(heap_t *heap, bool mine, bool idle, bool all) {
  ld_fit_heap_t *f = &heap->fit;
  if (!LD_READ(f->regions_held) && !atomic_load_explicit(&f->pending, memory_order_relaxed)) return true;
  if (mine) ld_lock(&heap->lock);
  else if (!ld_trylock(&heap->lock)) return false;
  collect(heap, UINT32_MAX);
  if (idle || all) {
    int saved = errno; /* (madvise: the purge keeps errno for the calls it runs inside) */
    purge_free_pages(heap);
    errno = saved;
  }
  if (f->empty_region) {
    /* a heap no thread uses (idle: parked) gives it up at once; the global heap keeps it a delay
     * more for another heap's tier */
    uint64_t now = ld_os_now_coarse_ns();
    if (idle || all || now - f->empty_since_ns >= ld_purge_delay()) region_release(heap, f->empty_region);
    else ld_due_note(f->empty_since_ns);
  }
  ld_unlock(&heap->lock);
  return true;
}

void ld_fit_figures(heap_t *heap, int64_t *in_use, int64_t *regions) {
  *in_use += LD_READ(heap->fit.in_use);
  *regions += LD_READ(heap->fit.regions_held);
}

/* ---- validation ---- */

#define FIT_CHECK(cond, ...)                                              \
  do {                                                                    \
    if (!(cond)) {                                                        \
      (*violations)++;                                                    \
      ld_message("larder: validate: fit tier: " __VA_ARGS__);             \
    }                                                                     \
  } while (0)

/* Every region of heap, block by block (sizes, boundary tags, merged neighbours, the bitmap,
 * the bins), and the heap's counters. Takes the heap's lock. */
void ld_fit_validate(heap_t *heap, int *violations) {
  ld_fit_heap_t *f = &heap->fit;
  if (!LD_READ(f->regions_held) && !f->regions) return;
  ld_lock(&heap->lock);
  int64_t regions = 0, in_use = 0, free_blocks = 0, empty = 0;
  for (sb_t *r = f->regions; r; r = r->next) {
    regions++;
    FIT_CHECK(r->magic == LD_SB_MAGIC && r->kind == LD_KIND_FIT, "region %p: bad header\n", (void *)r);
    FIT_CHECK(atomic_load_explicit(&r->owner, memory_order_relaxed) == heap, "region %p: another heap's\n", (void *)r);
    fit_block_t *b = region_first(r), *last = region_last(r);
    bool before_free = false;
    int32_t live = 0;
    while (b < last) {
      size_t h = head_load(b), size = h & ~FIT_FLAGS;
      if (size < FIT_MIN || (char *)b + size > (char *)last) {
        FIT_CHECK(0, "region %p: block %p has a bad size %zu\n", (void *)r, (void *)b, size);
        break;
      }
      FIT_CHECK(!(h & FIT_PREV_FREE) == !before_free, "block %p: says the block before is %s\n", (void *)b, before_free ? "in use" : "free");
      bool used = h & FIT_IN_USE;
      FIT_CHECK(used == bit_get(r, granule_of(r, user_of(b))), "block %p: bitmap disagrees\n", (void *)b);
      if (used) {
        live++;
        in_use += (int64_t)(size - FIT_HEADER);
      } else {
        FIT_CHECK(!before_free, "block %p: two free blocks side by side\n", (void *)b);
        FIT_CHECK(block_at(b, size)->prev_size == size, "block %p: the next block's prev_size is not its size\n", (void *)b);
        free_blocks++;
        if (size == region_span()) empty++;
      }
      before_free = !used;
      b = block_at(b, size);
    }
    FIT_CHECK(b == last && (head_load(last) & FIT_IN_USE), "region %p: blocks do not end at its last header\n", (void *)r);
    FIT_CHECK(live == r->used, "region %p: %d live blocks, its count says %d\n", (void *)r, live, r->used);
  }
  int64_t listed = 0;
  for (unsigned i = 0; i < LD_FIT_BINS; i++) {
    bool bit = (f->nonempty[i >> 6] >> (i & 63)) & 1;
    FIT_CHECK(bit == (f->bins[i] != NULL), "bin %u: its bit is %d\n", i, (int)bit);
    for (fit_block_t *b = f->bins[i], *prev = NULL; b; prev = b, b = b->next) {
      listed++;
      FIT_CHECK(!(head_load(b) & FIT_IN_USE) && bin_of(block_size(b)) == i && b->prev == prev, "bin %u: block %p misplaced\n", i,
                (void *)b);
      if (listed > free_blocks + 1) break; /* (a cycle) */
    }
  }
  FIT_CHECK(listed == free_blocks, "%lld free blocks in bins, %lld in regions\n", (long long)listed, (long long)free_blocks);
  FIT_CHECK(regions == f->regions_held, "%lld regions listed, %lld counted\n", (long long)regions, (long long)f->regions_held);
  FIT_CHECK(in_use == f->in_use, "%lld bytes live, %lld counted\n", (long long)in_use, (long long)f->in_use);
  FIT_CHECK(empty <= 1 && (empty == 1) == (f->empty_region != NULL), "%lld empty regions, one kept: %d\n", (long long)empty,
            f->empty_region != NULL);
  ld_unlock(&heap->lock);
}
