/* A pool shared between threads: the pool itself has no locks (a real-time caller owns
 * its pool, seed 003 §4.4.1 notes TLSF does not address contention), so callers who share
 * one take this wrapper, which holds one mutex around each call. The mutex lives at the
 * front of the caller's buffer; the pool follows it. */
#include "larder_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

struct larder_pool_locked_s {
  pthread_mutex_t mutex;
  larder_pool_t *pool;
};

#define PLK_HEADER ((sizeof(struct larder_pool_locked_s) + LARDER_POOL_ALIGN - 1) & ~(size_t)(LARDER_POOL_ALIGN - 1))

larder_pool_locked_t *larder_pool_locked_create(void *mem, size_t bytes) {
  if (!mem || ((uintptr_t)mem & (LARDER_POOL_ALIGN - 1)) || bytes < PLK_HEADER + larder_pool_min_bytes()) {
    errno = EINVAL;
    return NULL;
  }
  larder_pool_locked_t *lp = (larder_pool_locked_t *)mem;
  lp->pool = larder_pool_create((char *)mem + PLK_HEADER, bytes - PLK_HEADER);
  if (!lp->pool) return NULL;
  if (pthread_mutex_init(&lp->mutex, NULL) != 0) {
    larder_pool_destroy(lp->pool);
    errno = EINVAL;
    return NULL;
  }
  return lp;
}

int larder_pool_locked_add_area(larder_pool_locked_t *lp, void *mem, size_t bytes) {
  pthread_mutex_lock(&lp->mutex);
  int r = larder_pool_add_area(lp->pool, mem, bytes);
  int e = errno;
  pthread_mutex_unlock(&lp->mutex);
  errno = e;
  return r;
}

void larder_pool_locked_destroy(larder_pool_locked_t *lp) {
  if (!lp) return;
  larder_pool_destroy(lp->pool);
  pthread_mutex_destroy(&lp->mutex);
}

/* errno is saved across the unlock so callers see the pool's ENOMEM/EINVAL. */
void *larder_pool_locked_malloc(larder_pool_locked_t *lp, size_t size) {
  pthread_mutex_lock(&lp->mutex);
  void *p = larder_pool_malloc(lp->pool, size);
  int e = errno;
  pthread_mutex_unlock(&lp->mutex);
  errno = e;
  return p;
}

void *larder_pool_locked_memalign(larder_pool_locked_t *lp, size_t alignment, size_t size) {
  pthread_mutex_lock(&lp->mutex);
  void *p = larder_pool_memalign(lp->pool, alignment, size);
  int e = errno;
  pthread_mutex_unlock(&lp->mutex);
  errno = e;
  return p;
}

void *larder_pool_locked_realloc(larder_pool_locked_t *lp, void *ptr, size_t size) {
  pthread_mutex_lock(&lp->mutex);
  void *p = larder_pool_realloc(lp->pool, ptr, size);
  int e = errno;
  pthread_mutex_unlock(&lp->mutex);
  errno = e;
  return p;
}

void larder_pool_locked_free(larder_pool_locked_t *lp, void *ptr) {
  pthread_mutex_lock(&lp->mutex);
  larder_pool_free(lp->pool, ptr);
  pthread_mutex_unlock(&lp->mutex);
}

size_t larder_pool_locked_usable_size(larder_pool_locked_t *lp, const void *ptr) {
  pthread_mutex_lock(&lp->mutex);
  size_t n = larder_pool_usable_size(lp->pool, ptr);
  pthread_mutex_unlock(&lp->mutex);
  return n;
}

int larder_pool_locked_check(larder_pool_locked_t *lp) {
  pthread_mutex_lock(&lp->mutex);
  int r = larder_pool_check(lp->pool);
  pthread_mutex_unlock(&lp->mutex);
  return r;
}

void larder_pool_locked_stats(larder_pool_locked_t *lp, larder_pool_stats_t *out) {
  pthread_mutex_lock(&lp->mutex);
  larder_pool_stats(lp->pool, out);
  pthread_mutex_unlock(&lp->mutex);
}
