/* The one seam to the operating system. Only os.c calls mmap, munmap, madvise, or reads the
 * page size, the CPU count or the clock.
 *
 * Contract, once for all: sizes and addresses passed in are multiples of the page size; the
 * functions that can fail return 0 on success or an errno value (ENOMEM, EINVAL), never -1,
 * and no function here changes errno, on success or failure: what the application sees in
 * errno is decided by the entry point that called (alloc.c), so a successful call leaves it
 * alone (issue 16). */
#ifndef LD_OS_H
#define LD_OS_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

/* Maps `bytes` of zeroed read-write memory. */
int      ld_os_map(size_t bytes, void **out);
/* Maps `bytes` starting at an address that is a multiple of `align` (a power of two >= page). */
int      ld_os_map_aligned(size_t bytes, size_t align, void **out);
/* The same for memory the program asked for as a whole (large spans): counted by the kernel's
 * overcommit policy, so a mapping it could never back fails (ENOMEM) instead of succeeding.
 * The two above are MAP_NORESERVE: address space larder fills as it goes. */
int      ld_os_map_committed(size_t bytes, size_t align, void **out);
int      ld_os_unmap(void *addr, size_t bytes);
/* Resizes a mapping: in place only (dest NULL), or by moving its pages to dest, a mapping of
 * new_bytes the caller made, which it replaces (no copy, no page fault). */
int      ld_os_remap(void *old, size_t old_bytes, size_t new_bytes, void *dest, void **out);
/* Makes the pages inaccessible (guard pages of the hardened build). */
int      ld_os_protect_none(void *addr, size_t bytes);
/* Fills buf from the kernel's random source (getrandom). */
int      ld_os_random(void *buf, size_t bytes);
/* Gives the pages back to the OS; the range stays mapped and reads as zero when touched again. */
int      ld_os_purge(void *addr, size_t bytes);

size_t   ld_os_page_size(void);
int      ld_os_cpu_count(void);
uint64_t ld_os_now_ns(void);          /* monotonic clock */
uint64_t ld_os_now_coarse_ns(void);   /* the same, to a few ms, for deadlines on slow paths */
int      ld_os_thread_id(void);       /* the kernel's id of the calling thread */
int      ld_os_thread_alive(int tid); /* 0 once that thread of this process has exited */

void     ld_os_sleep_ms(unsigned ms);
void     ld_os_yield(void);
/* A full memory barrier on every running thread of the process (membarrier(2), private
 * expedited, registered at the first call); 0, or an errno value when the kernel lacks it. */
int      ld_os_fence_all_threads(void);
/* Live threads of this process now (from /proc/self/stat; a main thread that called
 * pthread_exit is not counted), or 0 when that cannot be read. */
int      ld_os_thread_count(void);
/* A condition variable timed by the monotonic clock, and a wait on it of at most ns
 * (the mutex held, as pthread_cond_timedwait). */
void     ld_os_cond_init(pthread_cond_t *cond);
void     ld_os_cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t ns);
/* Writes all of buf to fd without allocating (messages from inside the allocator). */
void     ld_os_write(int fd, const char *buf, size_t len);

/* Process-wide counts of the calls above, for the statistics. */
typedef struct ld_os_counts_s {
  size_t mmap_calls, munmap_calls, madvise_calls;
  size_t mmap_bytes, munmap_bytes, madvise_bytes;
} ld_os_counts_t;
void     ld_os_counts(ld_os_counts_t *out);
size_t   ld_os_mapped_bytes(void);  /* mapped and not yet unmapped, read without a lock */

#endif
