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

#include <stdatomic.h>
#include <stdbool.h>
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
/* Gives the pages back to the OS; the range stays mapped and reads as zero when touched again.
 * Locked pages (mlock, mlockall), which madvise refuses, are replaced by new zero pages (locked
 * and resident again under mlockall(MCL_FUTURE)). An error: the range may still hold its
 * bytes, all or some (madvise may purge a part before it refuses). */
int      ld_os_purge(void *addr, size_t bytes);
/* Asks the kernel to back the range with transparent huge pages (MADV_HUGEPAGE) when it can:
 * a hint, so 0 or the kernel's refusal (EINVAL where THP is absent); not a purge (the
 * madvise statistics count purges only). */
int      ld_os_advise_huge_pages(void *addr, size_t bytes);
/* The opposite (MADV_NOHUGEPAGE): the range keeps 4 KiB pages, and khugepaged leaves it alone.
 * The kernel may refuse (ENOMEM past its count of mappings); not a purge either. */
int      ld_os_advise_no_huge_pages(void *addr, size_t bytes);
/* The size of a transparent huge page the advice above is about (2 MiB on x86-64). */
#define LD_OS_HUGE_PAGE ((size_t)2 << 20)

size_t   ld_os_page_size(void);
int      ld_os_cpu_count(void);
uint64_t ld_os_now_ns(void);          /* monotonic clock */
uint64_t ld_os_now_coarse_ns(void);   /* the same, to a few ms, for deadlines on slow paths */
int      ld_os_thread_id(void);       /* the kernel's id of the calling thread */
int      ld_os_process_id(void);      /* the process's id: its main thread's kernel id */
bool     ld_os_secure_execution(void); /* set-user-ID, set-group-ID or capabilities gained at exec (AT_SECURE) */
void     ld_os_thread_name(const char *name); /* names the calling thread (ps -L, top -H, gdb), 15 bytes at most */
int      ld_os_thread_alive(int tid); /* 0 once that thread of this process has exited */

void     ld_os_sleep_ms(unsigned ms);
void     ld_os_yield(void);
/* A full memory barrier on every running thread of the process (membarrier(2), private
 * expedited, registered at the first call); 0, or an errno value when the kernel lacks it. */
int      ld_os_fence_all_threads(void);
/* A condition variable timed by the monotonic clock, and a wait on it of at most ns
 * (the mutex held, as pthread_cond_timedwait). */
void     ld_os_cond_init(pthread_cond_t *cond);
void     ld_os_cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t ns);
/* Registers fork handlers (as pthread_atfork) that stay for the whole life of the process:
 * glibc drops the handlers a library registered when that library is finalised (exit, dlclose),
 * and a fork that runs without them copies whatever another thread held. The library that
 * calls it must never be unloaded (linked -z nodelete). */
void     ld_os_atfork_forever(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* Writes all of buf to fd without allocating (messages from inside the allocator). */
void     ld_os_write(int fd, const char *buf, size_t len);

/* ---- locks ----
 * The locks of the heaps, the list of heaps, the global heap and the segments: a word taken
 * with one CAS and given back with one exchange; a thread that finds it held spins 32 pauses
 * (the process-wide locks: up to LD_LOCK_SHARED_SPIN_NS), then waits in the kernel (a futex; Drepper, "Futexes Are Tricky", 2011, the third mutex). These are
 * taken on every refill and flush, and several times at a thread's start and end: a
 * pthread_mutex_lock and unlock pair was about 55 instructions there (callgrind, 6.7% of
 * larson-server's), these are about 10. After fork, the child resets them (maintain.c). */
typedef struct ld_lock_s {
  _Atomic uint32_t word; /* 0 free, 1 held, 2 held and a thread may be waiting */
} ld_lock_t;
#define LD_LOCK_INIT {0}
/* The slow path of ld_lock: spins a little, then sleeps until the word is given back. */
void     ld_os_lock_wait(ld_lock_t *lock);
/* The same for a lock that every thread of the process shares (the global heap's, the
 * segments'): spins for up to LD_LOCK_SHARED_SPIN_NS before it sleeps (ld_lock_shared). */
void     ld_os_lock_wait_shared(ld_lock_t *lock);
/* Wakes one thread asleep in ld_os_lock_wait. */
void     ld_os_lock_wake(ld_lock_t *lock);
static inline void ld_lock(ld_lock_t *lock) {
  uint32_t expected = 0;
  if (!__builtin_expect(atomic_compare_exchange_strong_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                                memory_order_relaxed), 1))
    ld_os_lock_wait(lock);
}
/* A process-wide lock. Its holders' sections are as short, but every thread may want it: with
 * more runnable threads than cores, a waiter that goes to sleep gets a core back only after the
 * others' time slices, and a call that slept on one took 3-65 ms (docs/allocator.md, "Known
 * limits"). So its waiters spin for a time, long enough to outlast a holder that runs, before
 * they sleep: 4 workers on 2 cores, every call timed for 10 s, made 16-38 calls over 10 ms
 * (median 28) with the 32 pauses of ld_lock, 3-21 (median 3) with this spin; medium churn at 2
 * threads and larson at 64 kept their CPU and peak RSS. The bound is a time, not a count of
 * pauses: a pause takes 24 ns on this machine's CPU and a few on others. */
#define LD_LOCK_SHARED_SPIN_NS 50000u
static inline void ld_lock_shared(ld_lock_t *lock) {
  uint32_t expected = 0;
  if (!__builtin_expect(atomic_compare_exchange_strong_explicit(&lock->word, &expected, 1, memory_order_acquire,
                                                                memory_order_relaxed), 1))
    ld_os_lock_wait_shared(lock);
}
static inline bool ld_trylock(ld_lock_t *lock) {
  uint32_t expected = 0;
  return atomic_compare_exchange_strong_explicit(&lock->word, &expected, 1, memory_order_acquire, memory_order_relaxed);
}
static inline void ld_unlock(ld_lock_t *lock) {
  if (__builtin_expect(atomic_exchange_explicit(&lock->word, 0, memory_order_release) == 2, 0)) ld_os_lock_wake(lock);
}
/* For a holder that will ask for the lock again at once, in a long loop (the purge giving back
 * thousands of superblocks): a thread that waits gets it first. A plain unlock wakes the waiter,
 * but the holder's next lock takes the free word before the woken thread runs (tens of
 * microseconds), and the waiter sleeps again, for as long as the loop lasts (16-60 ms after
 * 1.5 GB was freed). So the holder yields until the woken thread has the word, for at most
 * LD_LOCK_HANDOFF_NS (ld_os_lock_handoff). The bound is a time, not a count of yields: with
 * more runnable threads than cores a yield may give the core away for a whole time slice, and
 * 256 yields held the purge thread about a second per hand-over
 * (tests/alloc/medium_tails_race.c beside two busy loops: 5 purge runs in 21 s). */
#define LD_LOCK_HANDOFF_NS 100000u
void     ld_os_lock_handoff(ld_lock_t *lock);
static inline void ld_unlock_to_waiter(ld_lock_t *lock) {
  if (__builtin_expect(atomic_exchange_explicit(&lock->word, 0, memory_order_release) != 2, 1)) return;
  ld_os_lock_wake(lock);
  ld_os_lock_handoff(lock);
}
/* The same in the middle of the loop, the lock held: when a thread waits, it goes first. */
static inline void ld_lock_let_waiters_in(ld_lock_t *lock) {
  if (__builtin_expect(atomic_load_explicit(&lock->word, memory_order_relaxed) != 2, 1)) return;
  ld_unlock_to_waiter(lock);
  ld_lock(lock);
}
/* The child of fork: the threads that held locks are gone. */
static inline void ld_lock_reset(ld_lock_t *lock) { atomic_store_explicit(&lock->word, 0, memory_order_relaxed); }

/* Process-wide counts of the calls above, for the statistics. */
typedef struct ld_os_counts_s {
  size_t mmap_calls, munmap_calls, madvise_calls;
  size_t mmap_bytes, munmap_bytes, madvise_bytes;
  size_t lock_sleeps; /* waits for a lock that went to sleep in the kernel (ld_os_lock_wait*) */
} ld_os_counts_t;
void     ld_os_counts(ld_os_counts_t *out);
size_t   ld_os_mapped_bytes(void);  /* mapped and not yet unmapped, read without a lock */

#endif
