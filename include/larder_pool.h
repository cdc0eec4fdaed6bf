/* larder real-time pools: two-level segregated fit (TLSF) over caller-given memory.
 * Every malloc and free is O(1) in the worst case; no locks inside, a pool belongs to its
 * caller (see larder_pool_locked_* below for one shared between threads).
 * Included by larder.h. The rules, the layout and the bounds are in docs/pools.md. */
#ifndef LARDER_POOL_H
#define LARDER_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct larder_pool_s larder_pool_t;

/* Alignment every pool block gets, and that create/add_area need of their buffer. */
#define LARDER_POOL_ALIGN 16u
/* log2 of the second-level subdivisions of each power of two (compile-time tunable, 1..6):
 * 5 means 32 lists per power of two, so a size class is at most 1/32 of its sizes wide. */
#ifndef LARDER_POOL_SL_LOG2
#define LARDER_POOL_SL_LOG2 5
#endif

/* Smallest buffer larder_pool_create accepts (the control structure and one block). */
size_t larder_pool_min_bytes(void);

/* Makes a pool inside [mem, mem+bytes). Returns NULL (errno EINVAL) for a NULL buffer, one
 * not aligned to LARDER_POOL_ALIGN, or one smaller than larder_pool_min_bytes(). The pool
 * never touches memory outside the buffers it is given. */
larder_pool_t *larder_pool_create(void *mem, size_t bytes);
/* Adds another area (any size from 64 bytes, aligned to LARDER_POOL_ALIGN, not overlapping
 * the pool's other areas). Returns 0, or -1 with errno EINVAL. */
int    larder_pool_add_area(larder_pool_t *pool, void *mem, size_t bytes);
/* Forgets the pool; the caller's buffers are its own again. Blocks still allocated die. */
void   larder_pool_destroy(larder_pool_t *pool);

/* Called by malloc/memalign/realloc when no free block fits: it should add an area of at
 * least `bytes` bytes with larder_pool_add_area and return 0, or return -1 to refuse.
 * Called at most once per request. Set to NULL to remove. */
typedef int (*larder_pool_grow_t)(larder_pool_t *pool, size_t bytes, void *user);
void   larder_pool_set_grow(larder_pool_t *pool, larder_pool_grow_t grow, void *user);

/* malloc(0) returns a minimal block. NULL with errno ENOMEM when no free block fits
 * (see docs/pools.md for the exact guarantee). */
void  *larder_pool_malloc(larder_pool_t *pool, size_t size);
/* alignment: a power of two; NULL with errno EINVAL otherwise. */
void  *larder_pool_memalign(larder_pool_t *pool, size_t alignment, size_t size);
void  *larder_pool_realloc(larder_pool_t *pool, void *ptr, size_t size);
/* free(NULL) does nothing. A pointer outside the pool, misaligned, or already free stops
 * the program with a message naming the address (the pool is never silently corrupted). */
void   larder_pool_free(larder_pool_t *pool, void *ptr);
size_t larder_pool_usable_size(larder_pool_t *pool, const void *ptr);
/* 1 when ptr lies inside one of the pool's areas, else 0. O(number of areas). */
int    larder_pool_owns(larder_pool_t *pool, const void *ptr);

/* Walks every block; returns 0 when boundary tags, free lists and bitmaps agree, else the
 * number of inconsistencies found (the first few are described on stderr). */
int    larder_pool_check(larder_pool_t *pool);

/* Calls walker once per block in address order, area by area; size is the usable size. */
typedef void (*larder_pool_walker_t)(void *ptr, size_t size, int used, void *user);
void   larder_pool_walk(larder_pool_t *pool, larder_pool_walker_t walker, void *user);

typedef struct larder_pool_stats_s {
  size_t used;          /* usable bytes in used blocks */
  size_t free;          /* usable bytes in free blocks */
  size_t largest_free;  /* usable size of the largest free block */
  size_t overhead;      /* control structure, area headers and block headers */
  size_t used_blocks, free_blocks, areas;
} larder_pool_stats_t;
/* Exact figures, gathered by a walk (O(blocks)); not for the real-time path. */
void   larder_pool_stats(larder_pool_t *pool, larder_pool_stats_t *out);

/* Steps the last malloc/memalign/realloc/free of this pool took, when pool.c is compiled
 * with -DLARDER_POOL_COUNT_STEPS (the constant-time test); 0 otherwise. */
unsigned larder_pool_last_steps(const larder_pool_t *pool);

/* ---- the same pool shared between threads: one mutex around each call ---- */
typedef struct larder_pool_locked_s larder_pool_locked_t;
larder_pool_locked_t *larder_pool_locked_create(void *mem, size_t bytes);
int    larder_pool_locked_add_area(larder_pool_locked_t *lp, void *mem, size_t bytes);
void   larder_pool_locked_destroy(larder_pool_locked_t *lp);
void  *larder_pool_locked_malloc(larder_pool_locked_t *lp, size_t size);
void  *larder_pool_locked_memalign(larder_pool_locked_t *lp, size_t alignment, size_t size);
void  *larder_pool_locked_realloc(larder_pool_locked_t *lp, void *ptr, size_t size);
void   larder_pool_locked_free(larder_pool_locked_t *lp, void *ptr);
size_t larder_pool_locked_usable_size(larder_pool_locked_t *lp, const void *ptr);
int    larder_pool_locked_check(larder_pool_locked_t *lp);
void   larder_pool_locked_stats(larder_pool_locked_t *lp, larder_pool_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* LARDER_POOL_H */
