/* larder real-time pools: two-level segregated fit (TLSF) over caller-given memory.
 * Every malloc and free is O(1) in the worst case; no locks inside, a pool belongs to its
 * caller (see larder_pool_locked_* below for one shared between threads).
 * Included by larder.h. */
#ifndef LARDER_POOL_H
#define LARDER_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct larder_pool_s larder_pool_t;

/* Makes a pool inside [mem, mem+bytes). Returns NULL (errno EINVAL) for a NULL or
 * misaligned buffer or one too small for the pool's own structures. */
larder_pool_t *larder_pool_create(void *mem, size_t bytes);
/* Adds another area to a pool; returns 0, or -1 with errno EINVAL. */
int    larder_pool_add_area(larder_pool_t *pool, void *mem, size_t bytes);
void   larder_pool_destroy(larder_pool_t *pool);

void  *larder_pool_malloc(larder_pool_t *pool, size_t size);
void  *larder_pool_memalign(larder_pool_t *pool, size_t alignment, size_t size);
void  *larder_pool_realloc(larder_pool_t *pool, void *ptr, size_t size);
void   larder_pool_free(larder_pool_t *pool, void *ptr);
size_t larder_pool_usable_size(larder_pool_t *pool, const void *ptr);

/* Walks every block; returns 0 when boundary tags, free lists and bitmaps agree. */
int    larder_pool_check(larder_pool_t *pool);

typedef void (*larder_pool_walker_t)(void *ptr, size_t size, int used, void *user);
void   larder_pool_walk(larder_pool_t *pool, larder_pool_walker_t walker, void *user);

typedef struct larder_pool_stats_s {
  size_t used;          /* bytes in used blocks (payload) */
  size_t free;          /* bytes in free blocks (payload) */
  size_t largest_free;  /* largest block malloc could return now */
  size_t overhead;      /* control structure and block headers */
} larder_pool_stats_t;
void   larder_pool_stats(larder_pool_t *pool, larder_pool_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* LARDER_POOL_H */
