/* Start-up, fork and exit: reading the tunables once, the size-class tables, the fork
 * handlers that keep a child's allocator usable, statistics at exit, and the debug mode's
 * validation at a bounded rate.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <sched.h>
#include <stdlib.h>

static _Atomic int init_state;     /* 0 not started, 1 running, 2 done */
static __thread int init_running_here;
_Atomic unsigned ld_options_epoch = 1;
_Atomic size_t ld_validations;

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);
static void stats_at_exit(void);

void ld_init_if_needed(void) {
  int state = atomic_load_explicit(&init_state, memory_order_acquire);
  if (LD_LIKELY(state == 2)) return;
  if (init_running_here) return; /* the initialiser itself allocated: defaults serve it */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) sched_yield();
    return;
  }
  init_running_here = 1;
  ld_options_init();
  ld_sb_size = (size_t)ld_options.superblock_size;
  ld_sb_mask = ~(uintptr_t)(ld_sb_size - 1);
  ld_small_max = ld_sb_size / 4 < LD_SMALL_LIMIT ? ld_sb_size / 4 : LD_SMALL_LIMIT;
  ld_options_freeze();
  ld_classes_init();
  if (ld_addrmap_init(ld_sb_size) != 0) ld_message("larder: the ownership map could not be made; bad pointers may fault\n");
  /* The key that detects double frees: from the clock and an address (ASLR), not secret,
   * only unlikely to appear in user data by chance. */
  ld_free_key = (uintptr_t)ld_os_now_ns() * 0x9E3779B97F4A7C15ull ^ (uintptr_t)&init_state ^ 0x5bd1e995u;
  ld_free_key |= 1; /* a tag is never 0, the value malloc leaves in a live block */
#ifdef LARDER_HARDENED
  /* The link secret must not be guessable: from the kernel's random source. */
  if (ld_os_random(&ld_link_secret, sizeof ld_link_secret) != 0) ld_link_secret = ld_free_key * 0xff51afd7ed558ccdull;
  ld_link_secret |= 1;
  ld_free_key ^= ld_link_secret & ~(uintptr_t)1;
#endif
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  if (ld_options.stats) atexit(stats_at_exit);
  if (ld_options.verbose)
    ld_message("larder %s: superblock %zu bytes, f=%.3f, K=%d, purge delay %d ms, purge thread %d, large cache %d MiB\n",
               LARDER_VERSION_STRING, ld_sb_size, ld_options.empty_fraction, (int)ld_options.k, (int)ld_options.purge_delay_ms,
               (int)ld_options.purge_thread, (int)ld_options.large_cache_mb);
  init_running_here = 0;
  atomic_store_explicit(&init_state, 2, memory_order_release);
}

/* Before main, so that the class table is ready before the first allocation of any thread. */
__attribute__((constructor)) static void init_constructor(void) { ld_init_if_needed(); }

void ld_options_changed(void) { atomic_fetch_add(&ld_options_epoch, 1); }

/* ---- fork ----
 * The child of a multithreaded parent must find every lock free, so the prepare handler takes
 * them all (lock order: heaps, the large-span cache, the global heap, the segments) and both
 * sides release them. In a process with one allocating thread and no purge thread, nobody else
 * can hold them, and a fork from a signal handler that interrupted malloc would deadlock on a
 * lock the interrupted call holds: there, as the C library does, nothing is taken, and the
 * child makes every lock new. */
static bool fork_skipped;

/* glibc's stdio list lock, taken by its fork after the atfork prepare handlers. A thread that
 * holds a FILE lock and allocates, and one in fflush(NULL) that holds the list lock and waits
 * for that FILE, would deadlock with a fork holding larder's locks and waiting for the list
 * lock. Taking the list lock first gives glibc's own order (stdio, then malloc); it is
 * recursive, so glibc's fork takes it again in this thread. Weak: absent from other C
 * libraries, where the step is skipped. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));

static void fork_prepare(void) {
  fork_skipped = ld_heaps_live_count() <= 1 && !ld_purge_thread_running();
  if (fork_skipped) return;
  if (_IO_list_lock) _IO_list_lock();
  ld_heaps_lock_all();
  ld_large_lock();
  ld_global_lock();
  ld_segment_lock();
}
static void fork_parent(void) {
  if (fork_skipped) return;
  ld_segment_unlock(false);
  ld_global_unlock();
  ld_large_unlock(false);
  ld_heaps_unlock_all(false);
  if (_IO_list_unlock) _IO_list_unlock();
}
static void fork_child(void) {
  /* The child has one thread, so every lock is made new, held or not (glibc resets its stdio
   * list lock itself). The other threads' heaps stay as they were (a thread may have been in a
   * fast path), unused: their memory stays allocated in the child. */
  ld_segment_unlock(true);
  ld_global_reinit_lock();
  ld_large_unlock(true);
  ld_heaps_unlock_all(true);
  ld_purge_after_fork_child();
}

/* ---- debug mode: validation at a bounded rate ----
 * A validation walks what the calling thread can check (its heap, the global heap, the
 * segments), O(superblocks). Running one only after as many slow-path events as there are
 * superblocks keeps LARDER_DEBUG=1 within a constant factor of a release run. */
void ld_debug_validate_maybe(heap_t *heap) {
  if (LD_LIKELY(!ld_options.debug)) return;
  static _Atomic size_t events, next_at;
  size_t n = atomic_fetch_add_explicit(&events, 1, memory_order_relaxed) + 1;
  if (n < atomic_load_explicit(&next_at, memory_order_relaxed)) return;
  size_t gap = 256 + 4 * heap->superblocks_held * (ld_heaps_live_count() + 1);
  atomic_store_explicit(&next_at, n + gap, memory_order_relaxed);
  if (larder_validate() != 0) ld_message("larder: validation failed before a refill (LARDER_DEBUG)\n");
}

static void stats_at_exit(void) {
  if (ld_options.stats >= 2) larder_stats_print_json(2);
  else larder_stats_print(2);
}
