/* larder real-time pools: two-level segregated fit over caller-given memory.
 *
 * The design is the thesis's TLSF (seed 003 §4.4): free blocks sit in segregated lists
 * indexed by a first level (power of two) and a second level (linear subdivisions of that
 * power of two); one bitmap word per level says which lists are non-empty, so a fitting
 * list is found with find-first-set and never by scanning (§4.4.1). Boundary tags give
 * immediate coalescing on free (§4.4.3). No loop in malloc, memalign, realloc or free
 * depends on the number of blocks; the only loops are in create/add_area/check/walk/stats.
 *
 * Block layout (every block address B is 8 mod 16, so that its payload B+8 is 16-aligned):
 *
 *   B+0        size | flags      size = bytes from B to the next block's header (16k, >= 32)
 *   B+8        payload           used: the caller's bytes, usable size = size - 8
 *              next_free, prev_free  (free blocks only: the segregated list links)
 *   B+size-8   B                 (free blocks only: the footer the next block reads to
 *                                 find its free predecessor -- the boundary tag)
 *
 * A used block therefore costs 8 bytes of header, like glibc's chunks. Each area starts
 * with a 16-byte area header and ends with an 8-byte sentinel header of size 0 that is
 * always "used", so coalescing never walks off an area.
 *
 * Flags: bit 0 this block is free, bit 1 the previous block is free, bit 2 is never set by
 * the pool (the preload library marks its own direct mappings with it), bit 3 unused.
 */
#include "larder_pool.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>

#if LARDER_POOL_SL_LOG2 < 1 || LARDER_POOL_SL_LOG2 > 6
#error "LARDER_POOL_SL_LOG2 must be 1..6 (the second-level bitmap is one 64-bit word)"
#endif

#define PL_ALIGN_LOG2 4
#define PL_ALIGN ((size_t)1 << PL_ALIGN_LOG2)
#define PL_SL_LOG2 LARDER_POOL_SL_LOG2
#define PL_SL_COUNT (1u << PL_SL_LOG2)
/* Sizes below PL_SMALL all go to first level 0, split linearly in steps of PL_ALIGN, so
 * every list there holds blocks of exactly one size. */
#define PL_FL_SHIFT (PL_SL_LOG2 + PL_ALIGN_LOG2)
#define PL_SMALL ((size_t)1 << PL_FL_SHIFT)
/* Blocks are smaller than 2^PL_FL_MAX_LOG2 bytes; bigger areas are used up to that size. */
#if SIZE_MAX > 0xffffffffu
#define PL_FL_MAX_LOG2 40
#else
#define PL_FL_MAX_LOG2 31
#endif
#define PL_FL_COUNT (PL_FL_MAX_LOG2 - PL_FL_SHIFT + 1)
#define PL_BLOCK_MAX (((size_t)1 << PL_FL_MAX_LOG2) - PL_ALIGN)

#define PL_HDR ((size_t)sizeof(size_t))          /* 8: the size word */
#define PL_MIN_BLOCK ((size_t)32)                 /* header, two links, footer */
#define PL_AREA_HDR ((size_t)16)
/* An area's own cost: its header, the 8 bytes that put the first block at 8 mod 16, and
 * the sentinel. */
#define PL_AREA_OVERHEAD (PL_AREA_HDR + 8 + PL_HDR)

#define PL_FREE ((size_t)1)
#define PL_PREV_FREE ((size_t)2)
#define PL_FOREIGN ((size_t)4)
#define PL_FLAGS ((size_t)15)

#define PL_MAGIC 0x6c64706f6f6c3031ull /* "ldpool01" */

typedef struct pl_block {
  size_t size_flags;
  struct pl_block *next_free;  /* payload starts here */
  struct pl_block *prev_free;
} pl_block;

typedef struct pl_area {
  struct pl_area *next;
  size_t bytes;                /* from the area header to just after the sentinel */
} pl_area;

struct larder_pool_s {
  uint64_t magic;
  uint64_t fl_bitmap;                     /* bit f: some list of first level f is non-empty */
  uint64_t sl_bitmap[PL_FL_COUNT];        /* bit s of word f: list (f, s) is non-empty */
  pl_block *heads[PL_FL_COUNT][PL_SL_COUNT];
  pl_area *areas;
  uintptr_t lo, hi;                       /* lowest area start, highest area end */
  size_t nareas;
  larder_pool_grow_t grow;
  void *grow_user;
  unsigned steps, last_steps;
};

/* The constant-time test counts the basic steps of every operation (tests/pool). */
#ifdef LARDER_POOL_COUNT_STEPS
#define STEP(p) ((p)->steps++)
#define STEPS_BEGIN(p) ((p)->steps = 0)
#define STEPS_END(p) ((p)->last_steps = (p)->steps)
#else
#define STEP(p) ((void)0)
#define STEPS_BEGIN(p) ((void)0)
#define STEPS_END(p) ((void)0)
#endif

#define PL_CONTROL_BYTES ((sizeof(struct larder_pool_s) + PL_ALIGN - 1) & ~(PL_ALIGN - 1))

/* ---------------------------------------------------------------- block helpers */

static inline size_t bl_size(const pl_block *b) { return b->size_flags & ~PL_FLAGS; }
static inline int bl_is_free(const pl_block *b) { return (b->size_flags & PL_FREE) != 0; }
static inline int bl_prev_is_free(const pl_block *b) { return (b->size_flags & PL_PREV_FREE) != 0; }
static inline pl_block *bl_next(const pl_block *b) { return (pl_block *)((char *)b + bl_size(b)); }
static inline void *bl_payload(pl_block *b) { return (char *)b + PL_HDR; }
static inline pl_block *bl_from_payload(const void *p) { return (pl_block *)((char *)p - PL_HDR); }
static inline pl_block **bl_footer(pl_block *b) { return (pl_block **)((char *)b + bl_size(b) - PL_HDR); }
static inline pl_block *bl_prev(const pl_block *b) { return *((pl_block *const *)b - 1); }

static inline void bl_set_size(pl_block *b, size_t size) {
  b->size_flags = size | (b->size_flags & PL_FLAGS);
}

/* A free block writes its own address into its last word and tells its successor, so the
 * successor can find it in O(1) when it is freed (boundary tags, seed 003 §4.4.1). */
static inline void bl_mark_free(pl_block *b) {
  b->size_flags |= PL_FREE;
  *bl_footer(b) = b;
  bl_next(b)->size_flags |= PL_PREV_FREE;
}

static inline void bl_mark_used(pl_block *b) {
  b->size_flags &= ~PL_FREE;
  bl_next(b)->size_flags &= ~PL_PREV_FREE;
}

static inline int pl_fls(size_t x) { return (int)(sizeof(size_t) * 8 - 1) - __builtin_clzl(x); }
static inline int pl_ffs64(uint64_t x) { return __builtin_ctzll(x); }

/* The list (fl, sl) whose sizes contain size. */
static inline void map_insert(size_t size, int *fl, int *sl) {
  if (size < PL_SMALL) {
    *fl = 0;
    *sl = (int)(size >> PL_ALIGN_LOG2);
  } else {
    int t = pl_fls(size);
    *sl = (int)((size >> (t - PL_SL_LOG2)) ^ PL_SL_COUNT);
    *fl = t - PL_FL_SHIFT + 1;
  }
}

/* The first list whose smallest size is at least size: every block on it or on any later
 * list fits, so the search never compares sizes (seed 003 §4.4.1, the "74 -> [80..87]"
 * example). Returns the rounded size through *size. */
static inline void map_search(size_t *size, int *fl, int *sl) {
  if (*size >= PL_SMALL) {
    size_t round = ((size_t)1 << (pl_fls(*size) - PL_SL_LOG2)) - 1;
    *size = (*size + round) & ~round;
  }
  map_insert(*size, fl, sl);
}

/* ---------------------------------------------------------------- lists and bitmaps */

static void list_insert(larder_pool_t *p, pl_block *b) {
  int fl, sl;
  map_insert(bl_size(b), &fl, &sl);
  pl_block *head = p->heads[fl][sl];
  b->next_free = head;
  b->prev_free = NULL;
  if (head) head->prev_free = b;
  p->heads[fl][sl] = b;
  p->sl_bitmap[fl] |= (uint64_t)1 << sl;
  p->fl_bitmap |= (uint64_t)1 << fl;
  STEP(p);
}

static void list_remove(larder_pool_t *p, pl_block *b) {
  int fl, sl;
  map_insert(bl_size(b), &fl, &sl);
  pl_block *next = b->next_free, *prev = b->prev_free;
  if (next) next->prev_free = prev;
  if (prev) {
    prev->next_free = next;
  } else {
    p->heads[fl][sl] = next;
    if (!next) {
      p->sl_bitmap[fl] &= ~((uint64_t)1 << sl);
      if (!p->sl_bitmap[fl]) p->fl_bitmap &= ~((uint64_t)1 << fl);
      STEP(p);
    }
  }
  STEP(p);
}

/* Two find-first-set operations reach the first non-empty list at or after (fl, sl). */
static pl_block *list_find(larder_pool_t *p, int fl, int sl) {
  STEP(p);
  if (fl >= PL_FL_COUNT) return NULL;
  uint64_t sl_map = p->sl_bitmap[fl] & (~(uint64_t)0 << sl);
  if (!sl_map) {
    STEP(p);
    if (fl + 1 >= PL_FL_COUNT) return NULL;
    uint64_t fl_map = p->fl_bitmap & (~(uint64_t)0 << (fl + 1));
    if (!fl_map) return NULL;
    fl = pl_ffs64(fl_map);
    sl_map = p->sl_bitmap[fl];
  }
  sl = pl_ffs64(sl_map);
  return p->heads[fl][sl];
}

/* A free block of at least bsize bytes, taken off its list, or NULL. The good-fit search
 * above may miss a block on the request's own list (its sizes straddle the request); the
 * head of that list is looked at as well, still O(1), so that a pool full of blocks of one
 * size can serve that size again (docs/pools.md states what is guaranteed). */
static pl_block *take_free(larder_pool_t *p, size_t bsize) {
  size_t rounded = bsize;
  int fl, sl;
  map_search(&rounded, &fl, &sl);
  pl_block *b = list_find(p, fl, sl);
  if (!b && bsize >= PL_SMALL) {
    STEP(p);
    map_insert(bsize, &fl, &sl);
    pl_block *h = p->heads[fl][sl];
    if (h && bl_size(h) >= bsize) b = h;
  }
  if (b) list_remove(p, b);
  return b;
}

/* Cuts b (free, off the lists) down to bsize bytes when the rest makes a block of its own,
 * gives the rest back, and marks b used. The remainder cannot have a free successor:
 * b was free, and free blocks never touch (immediate coalescing). */
static void use_block(larder_pool_t *p, pl_block *b, size_t bsize) {
  size_t size = bl_size(b);
  if (size - bsize >= PL_MIN_BLOCK) {
    pl_block *rest = (pl_block *)((char *)b + bsize);
    rest->size_flags = size - bsize;
    bl_set_size(b, bsize);
    bl_mark_free(rest);
    list_insert(p, rest);
    STEP(p);
  }
  bl_mark_used(b);
  STEP(p);
}

/* Frees b (used, its size word valid): merges with a free predecessor and successor. */
static void release_block(larder_pool_t *p, pl_block *b) {
  if (bl_prev_is_free(b)) {
    pl_block *prev = bl_prev(b);
    list_remove(p, prev);
    bl_set_size(prev, bl_size(prev) + bl_size(b));
    b = prev;
    STEP(p);
  }
  pl_block *next = bl_next(b);
  if (bl_is_free(next)) {
    list_remove(p, next);
    bl_set_size(b, bl_size(b) + bl_size(next));
    STEP(p);
  }
  bl_mark_free(b);
  list_insert(p, b);
}

/* Bytes of block for a request: header plus payload, 16-aligned, at least the minimum.
 * 0 when the request can never be satisfied. */
static inline size_t block_size_for(size_t req) {
  if (req > PL_BLOCK_MAX - PL_HDR - PL_ALIGN) return 0;
  size_t b = (req + PL_HDR + PL_ALIGN - 1) & ~(PL_ALIGN - 1);
  return b < PL_MIN_BLOCK ? PL_MIN_BLOCK : b;
}

/* ---------------------------------------------------------------- errors */

static void pl_write_hex(char *buf, size_t *n, uintptr_t v) {
  buf[(*n)++] = '0';
  buf[(*n)++] = 'x';
  int started = 0;
  for (int shift = (int)sizeof(v) * 8 - 4; shift >= 0; shift -= 4) {
    unsigned d = (unsigned)(v >> shift) & 15u;
    if (d || started || shift == 0) {
      buf[(*n)++] = "0123456789abcdef"[d];
      started = 1;
    }
  }
}

/* Stops the program naming the call, the address and the reason. No stdio: this may run
 * inside a preloaded malloc. */
static void pl_die(const char *what, const void *ptr, const char *why) {
  char buf[256];
  size_t n = 0;
  const char *parts[] = {"larder pool: ", what, " of "};
  for (size_t i = 0; i < 3; i++)
    for (const char *s = parts[i]; *s && n < 120; s++) buf[n++] = *s;
  pl_write_hex(buf, &n, (uintptr_t)ptr);
  buf[n++] = ':';
  buf[n++] = ' ';
  for (const char *s = why; *s && n < sizeof(buf) - 2; s++) buf[n++] = *s;
  buf[n++] = '\n';
  ssize_t w = write(2, buf, n);
  (void)w;
  abort();
}

/* The O(1) checks free and realloc make before trusting a pointer's header: it lies in the
 * pool's address range, is aligned, its block is used, its size is sane, and its successor
 * agrees that it is used. Returns its block or stops the program. */
static pl_block *checked_block(larder_pool_t *p, const void *ptr, const char *what) {
  uintptr_t a = (uintptr_t)ptr;
  STEP(p);
  if (a < p->lo + PL_AREA_HDR + 8 + PL_HDR || a >= p->hi) pl_die(what, ptr, "pointer not in the pool");
  if (a & (PL_ALIGN - 1)) pl_die(what, ptr, "misaligned pointer, not a pool block");
  pl_block *b = bl_from_payload(ptr);
  size_t sf = b->size_flags;
  if (sf & PL_FREE) pl_die(what, ptr, "block is already free (double free?)");
  size_t size = sf & ~PL_FLAGS;
  if ((sf & (PL_FOREIGN | 8)) || size < PL_MIN_BLOCK || size > p->hi - (uintptr_t)b)
    pl_die(what, ptr, "not a pool block (bad header)");
  pl_block *next = bl_next(b);
  if ((uintptr_t)next > p->hi - PL_HDR || (next->size_flags & PL_PREV_FREE))
    pl_die(what, ptr, "not a pool block (header disagrees with its neighbour)");
  return b;
}

/* ---------------------------------------------------------------- areas */

static int area_overlaps(const larder_pool_t *p, uintptr_t lo, uintptr_t hi) {
  /* the control structure is no area but must not be handed out either */
  if (lo < (uintptr_t)p + PL_CONTROL_BYTES && (uintptr_t)p < hi) return 1;
  for (const pl_area *a = p->areas; a; a = a->next) {
    uintptr_t alo = (uintptr_t)a, ahi = alo + a->bytes;
    if (lo < ahi && alo < hi) return 1;
  }
  return 0;
}

static int area_add(larder_pool_t *p, void *mem, size_t bytes) {
  uintptr_t lo = (uintptr_t)mem;
  if (!mem || (lo & (PL_ALIGN - 1))) return -1;
  bytes &= ~(PL_ALIGN - 1);
  /* Larger than the biggest block: use only what one block can span. */
  if (bytes > PL_BLOCK_MAX + PL_AREA_OVERHEAD) bytes = PL_BLOCK_MAX + PL_AREA_OVERHEAD;
  if (bytes < PL_AREA_OVERHEAD + PL_MIN_BLOCK) return -1;
  if (lo + bytes < lo) return -1;
  if (area_overlaps(p, lo, lo + bytes)) return -1;
  pl_area *area = (pl_area *)mem;
  area->bytes = bytes;
  area->next = p->areas;
  p->areas = area;
  p->nareas++;
  pl_block *b = (pl_block *)(lo + PL_AREA_HDR + 8);
  pl_block *sentinel = (pl_block *)(lo + bytes - PL_HDR);
  b->size_flags = (size_t)((uintptr_t)sentinel - (uintptr_t)b);
  sentinel->size_flags = 0;
  bl_mark_free(b);
  list_insert(p, b);
  if (p->lo == 0 || lo < p->lo) p->lo = lo;
  if (lo + bytes > p->hi) p->hi = lo + bytes;
  return 0;
}

static pl_block *area_first(pl_area *a) { return (pl_block *)((char *)a + PL_AREA_HDR + 8); }
static pl_block *area_sentinel(pl_area *a) { return (pl_block *)((char *)a + a->bytes - PL_HDR); }

/* ---------------------------------------------------------------- public API */

size_t larder_pool_min_bytes(void) { return PL_CONTROL_BYTES + PL_AREA_OVERHEAD + PL_MIN_BLOCK; }

larder_pool_t *larder_pool_create(void *mem, size_t bytes) {
  if (!mem || ((uintptr_t)mem & (PL_ALIGN - 1)) || bytes < larder_pool_min_bytes()) {
    errno = EINVAL;
    return NULL;
  }
  larder_pool_t *p = (larder_pool_t *)mem;
  memset(p, 0, sizeof(*p));
  p->magic = PL_MAGIC;
  if (area_add(p, (char *)mem + PL_CONTROL_BYTES, bytes - PL_CONTROL_BYTES) != 0) {
    p->magic = 0;
    errno = EINVAL;
    return NULL;
  }
  return p;
}

int larder_pool_add_area(larder_pool_t *pool, void *mem, size_t bytes) {
  if (!pool || pool->magic != PL_MAGIC || area_add(pool, mem, bytes) != 0) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

void larder_pool_destroy(larder_pool_t *pool) {
  if (pool) pool->magic = 0;
}

void larder_pool_set_grow(larder_pool_t *pool, larder_pool_grow_t grow, void *user) {
  pool->grow = grow;
  pool->grow_user = user;
}

/* The one slow path: ask the caller's growth callback for an area that holds bsize. */
static pl_block *take_or_grow(larder_pool_t *p, size_t bsize) {
  pl_block *b = take_free(p, bsize);
  if (!b && p->grow) {
    STEP(p);
    size_t want = bsize + PL_AREA_OVERHEAD;
    if (p->grow(p, want, p->grow_user) == 0) b = take_free(p, bsize);
  }
  return b;
}

void *larder_pool_malloc(larder_pool_t *pool, size_t size) {
  STEPS_BEGIN(pool);
  size_t bsize = block_size_for(size);
  pl_block *b = bsize ? take_or_grow(pool, bsize) : NULL;
  if (!b) {
    STEPS_END(pool);
    errno = ENOMEM;
    return NULL;
  }
  use_block(pool, b, bsize);
  STEPS_END(pool);
  return bl_payload(b);
}

/* Over-allocates by the alignment and gives the misaligned front back as a free block:
 * one search, at most two splits, O(1). */
void *larder_pool_memalign(larder_pool_t *pool, size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1))) {
    errno = EINVAL;
    return NULL;
  }
  if (alignment <= PL_ALIGN) return larder_pool_malloc(pool, size);
  STEPS_BEGIN(pool);
  size_t bsize = block_size_for(size);
  /* The front gap is 0 or at least PL_MIN_BLOCK, so at most alignment + 16 bytes. */
  size_t need = bsize + alignment + PL_ALIGN;
  pl_block *b = (bsize && alignment < PL_BLOCK_MAX && need < PL_BLOCK_MAX) ? take_or_grow(pool, need) : NULL;
  if (!b) {
    STEPS_END(pool);
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t payload = (uintptr_t)bl_payload(b);
  uintptr_t aligned = (payload + alignment - 1) & ~(uintptr_t)(alignment - 1);
  if (aligned != payload) {
    if (aligned - payload < PL_MIN_BLOCK) aligned += alignment;
    size_t gap = aligned - payload;
    pl_block *front = b;
    b = (pl_block *)((char *)b + gap);
    b->size_flags = (bl_size(front) - gap) | PL_PREV_FREE;
    bl_set_size(front, gap);
    bl_mark_free(front);
    list_insert(pool, front);
    STEP(pool);
  }
  use_block(pool, b, bsize);
  STEPS_END(pool);
  return bl_payload(b);
}

void larder_pool_free(larder_pool_t *pool, void *ptr) {
  if (!ptr) return;
  STEPS_BEGIN(pool);
  pl_block *b = checked_block(pool, ptr, "free");
  release_block(pool, b);
  STEPS_END(pool);
}

/* realloc(p, 0) frees p and returns NULL, as glibc does. Shrinking and growing into a free
 * successor happen in place; otherwise malloc, copy, free. */
void *larder_pool_realloc(larder_pool_t *pool, void *ptr, size_t size) {
  if (!ptr) return larder_pool_malloc(pool, size);
  if (size == 0) {
    larder_pool_free(pool, ptr);
    return NULL;
  }
  STEPS_BEGIN(pool);
  pl_block *b = checked_block(pool, ptr, "realloc");
  size_t bsize = block_size_for(size);
  if (!bsize) {
    STEPS_END(pool);
    errno = ENOMEM;
    return NULL;
  }
  size_t cur = bl_size(b);
  pl_block *next = bl_next(b);
  if (bsize > cur && bl_is_free(next) && cur + bl_size(next) >= bsize) {
    list_remove(pool, next);
    bl_set_size(b, cur + bl_size(next));
    bl_next(b)->size_flags &= ~PL_PREV_FREE;
    cur = bl_size(b);
    next = bl_next(b);
    STEP(pool);
  }
  if (bsize <= cur) {
    if (cur - bsize >= PL_MIN_BLOCK) {
      /* The cut-off tail may touch a free successor: merge them, as free does. */
      pl_block *rest = (pl_block *)((char *)b + bsize);
      rest->size_flags = cur - bsize;
      bl_set_size(b, bsize);
      if (bl_is_free(next)) {
        list_remove(pool, next);
        bl_set_size(rest, bl_size(rest) + bl_size(next));
      }
      bl_mark_free(rest);
      list_insert(pool, rest);
      STEP(pool);
    }
    STEPS_END(pool);
    return ptr;
  }
  STEPS_END(pool);
  void *q = larder_pool_malloc(pool, size);
  if (!q) return NULL;
  memcpy(q, ptr, cur - PL_HDR);
  larder_pool_free(pool, ptr);
  return q;
}

size_t larder_pool_usable_size(larder_pool_t *pool, const void *ptr) {
  if (!ptr) return 0;
  return bl_size(checked_block(pool, ptr, "usable_size")) - PL_HDR;
}

int larder_pool_owns(larder_pool_t *pool, const void *ptr) {
  uintptr_t a = (uintptr_t)ptr;
  for (const pl_area *ar = pool->areas; ar; ar = ar->next)
    if (a >= (uintptr_t)area_first((pl_area *)ar) && a < (uintptr_t)ar + ar->bytes) return 1;
  return 0;
}

unsigned larder_pool_last_steps(const larder_pool_t *pool) { return pool->last_steps; }

/* ---------------------------------------------------------------- walking and checking */

void larder_pool_walk(larder_pool_t *pool, larder_pool_walker_t walker, void *user) {
  for (pl_area *a = pool->areas; a; a = a->next) {
    pl_block *end = area_sentinel(a);
    for (pl_block *b = area_first(a); b < end && bl_size(b); b = bl_next(b))
      walker(bl_payload(b), bl_size(b) - PL_HDR, !bl_is_free(b), user);
  }
}

void larder_pool_stats(larder_pool_t *pool, larder_pool_stats_t *out) {
  memset(out, 0, sizeof(*out));
  out->overhead = PL_CONTROL_BYTES;
  for (pl_area *a = pool->areas; a; a = a->next) {
    out->areas++;
    out->overhead += PL_AREA_OVERHEAD;
    pl_block *end = area_sentinel(a);
    for (pl_block *b = area_first(a); b < end && bl_size(b); b = bl_next(b)) {
      size_t usable = bl_size(b) - PL_HDR;
      out->overhead += PL_HDR;
      if (bl_is_free(b)) {
        out->free += usable;
        out->free_blocks++;
        if (usable > out->largest_free) out->largest_free = usable;
      } else {
        out->used += usable;
        out->used_blocks++;
      }
    }
  }
}

static int check_report(int errors, const char *msg, const void *where) {
  if (errors < 8) {
    char buf[200];
    size_t n = 0;
    for (const char *s = "larder_pool_check: "; *s; s++) buf[n++] = *s;
    for (const char *s = msg; *s && n < 150; s++) buf[n++] = *s;
    buf[n++] = ' ';
    buf[n++] = 'a';
    buf[n++] = 't';
    buf[n++] = ' ';
    pl_write_hex(buf, &n, (uintptr_t)where);
    buf[n++] = '\n';
    ssize_t w = write(2, buf, n);
    (void)w;
  }
  return errors + 1;
}

static int pl_block_in_areas(larder_pool_t *p, const pl_block *b) {
  uintptr_t x = (uintptr_t)b;
  for (pl_area *a = p->areas; a; a = a->next)
    if (x >= (uintptr_t)area_first(a) && x < (uintptr_t)area_sentinel(a)) return 1;
  return 0;
}

int larder_pool_check(larder_pool_t *pool) {
  int errors = 0;
  if (!pool || pool->magic != PL_MAGIC) return check_report(0, "not a live pool", pool);
  size_t free_blocks = 0, nareas = 0;
  /* 1. Physical order: sizes tile each area exactly, flags agree between neighbours, no
   *    two free blocks touch, every free block's footer points at itself. */
  for (pl_area *a = pool->areas; a; a = a->next) {
    nareas++;
    if (((uintptr_t)a & (PL_ALIGN - 1)) || (uintptr_t)a < pool->lo || (uintptr_t)a + a->bytes > pool->hi) {
      errors = check_report(errors, "area outside the pool's range", a);
      continue;
    }
    pl_block *end = area_sentinel(a);
    pl_block *b = area_first(a);
    int prev_free = 0;
    if (bl_prev_is_free(b)) errors = check_report(errors, "first block says its predecessor is free", b);
    while (b < end) {
      size_t size = bl_size(b);
      if (size < PL_MIN_BLOCK || (size & (PL_ALIGN - 1)) || (char *)b + size > (char *)end) {
        errors = check_report(errors, "block size out of range", b);
        break;
      }
      if (b->size_flags & (PL_FOREIGN | 8)) errors = check_report(errors, "reserved flag set", b);
      if (bl_prev_is_free(b) != prev_free) errors = check_report(errors, "prev-free flag disagrees", b);
      if (bl_is_free(b)) {
        free_blocks++;
        if (prev_free) errors = check_report(errors, "two free blocks touch (missed coalescing)", b);
        if (*bl_footer(b) != b) errors = check_report(errors, "free block's footer is wrong", b);
      }
      prev_free = bl_is_free(b);
      b = bl_next(b);
    }
    if (b == end) {
      if (bl_size(end) != 0 || bl_is_free(end)) errors = check_report(errors, "sentinel damaged", end);
      if (bl_prev_is_free(end) != prev_free) errors = check_report(errors, "sentinel prev-free flag disagrees", end);
    } else if (b < end) {
      /* already reported */
    } else {
      errors = check_report(errors, "blocks run past the area's end", b);
    }
  }
  if (nareas != pool->nareas) errors = check_report(errors, "area count disagrees", pool);
  /* 2. Lists: every listed block is free, inside an area, in its right class, with
   *    consistent links; the bitmaps say exactly which lists are non-empty; the lists hold
   *    exactly the free blocks (counts agree and a block can sit on one list only). */
  size_t listed = 0;
  for (int fl = 0; fl < PL_FL_COUNT; fl++) {
    int fl_nonempty = 0;
    for (unsigned sl = 0; sl < PL_SL_COUNT; sl++) {
      pl_block *h = pool->heads[fl][sl];
      int bit = (pool->sl_bitmap[fl] >> sl) & 1;
      if ((h != NULL) != bit) errors = check_report(errors, "second-level bitmap disagrees with its list", h);
      if (h) fl_nonempty = 1;
      pl_block *prev = NULL;
      for (pl_block *b = h; b; prev = b, b = b->next_free) {
        if (++listed > free_blocks) {
          errors = check_report(errors, "more listed blocks than free blocks (cycle or stale entry)", b);
          goto lists_done;
        }
        if (!pl_block_in_areas(pool, b)) {
          errors = check_report(errors, "listed block outside every area", b);
          goto lists_done;
        }
        if (!bl_is_free(b)) errors = check_report(errors, "used block on a free list", b);
        if (b->prev_free != prev) errors = check_report(errors, "free-list back link wrong", b);
        int f, s;
        map_insert(bl_size(b), &f, &s);
        if (f != fl || s != (int)sl) errors = check_report(errors, "block on the wrong size list", b);
      }
    }
    if (((pool->fl_bitmap >> fl) & 1) != (uint64_t)fl_nonempty)
      errors = check_report(errors, "first-level bitmap disagrees", pool);
  }
  if (pool->fl_bitmap >> PL_FL_COUNT) errors = check_report(errors, "first-level bitmap beyond its lists", pool);
lists_done:
  if (listed != free_blocks) errors = check_report(errors, "free blocks missing from the lists", pool);
  return errors;
}
