/* The maintenance floor: everything that keeps the allocator healthy over a process's life
 * without being part of one malloc or free. It is entered only from above (alloc.c's slow
 * paths, stats.c and wrappers.c's public calls, its own thread, the thread-exit hook); the
 * files below it never call it: they lower the deadline ld_due_ns when free memory appears and
 * return (internal.h, "work due for the maintenance floor").
 *
 *   start-up          the tunables, the size classes, the ownership map, the fork handlers
 *   thread start/exit a thread's heap is made at its first call; at its exit the thread's
 *                     cache and remote buffer are emptied and its superblocks go to the
 *                     global heap (where other threads reuse them)
 *   the purge         memory back to the OS by age (a decay in the manner of jemalloc's):
 *                     free runs of chunks (segment.c) and cached large spans (large.c) idle
 *                     for LARDER_PURGE_DELAY_MS are purged, wholly free segments unmapped, and
 *                     every heap whose lock is free is tidied (its pending frees collected,
 *                     Hoard's threshold applied, its empty superblocks to the global heap)
 *   the purge thread  for processes that stop calling: started once the process has mapped
 *                     LARDER_PURGE_THREAD_MB (any process shape: an event loop, a pool, a
 *                     forked worker), it sleeps until the deadline; it never keeps a process
 *                     alive nor changes how it ends (below)
 *   a thread's own    bins unused for a purge delay give back most of their blocks, and the
 *   trim              buffered remote frees are sent (cache.c, ld_cache_trim)
 *   fork              every lock taken before, made new in the child
 *   validation        larder_validate, and LARDER_DEBUG's validation at a bounded rate
 *   option changes    larder_option_set
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

_Atomic uint64_t ld_due_ns = UINT64_MAX;
_Atomic int ld_purge_waiters; /* internal.h: a fork or malloc_trim waits for the run under way */
_Atomic uint64_t ld_purge_delay_ns = 1000u * 1000000u; /* LARDER_PURGE_DELAY_MS, in ns: set at start and by larder_option_set */
_Atomic int ld_purge_thread_running; /* 0 none, 1 running */
_Atomic unsigned ld_options_epoch = 1;
_Atomic size_t ld_validations;

static _Atomic int init_state;     /* 0 not started, 1 running, 2 done */
static __thread int init_running_here;
static pthread_key_t heap_key;
static _Atomic int heap_key_made;
static __thread int thread_exit_ran;  /* larder's thread-exit hook has run in this thread */

static pthread_mutex_t thread_lock = PTHREAD_MUTEX_INITIALIZER; /* the purge thread's sleep */
static pthread_cond_t thread_wake;
_Atomic uint64_t ld_purge_thread_wake_ns = UINT64_MAX; /* when the purge thread means to wake */

/* Forks wait here for one another, asleep: spinning on the purge's run flag instead, 8
 * threads forking at once took 2.5x glibc's system time (asleep: 1.4x). */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);
static void thread_exit(void *arg);
static void purge_thread_start_if_wanted(void);
static void purge_thread_nudge(uint64_t now);

static void purge_delay_changed(void) {
  atomic_store_explicit(&ld_purge_delay_ns, (uint64_t)LD_OPTION(purge_delay_ms) * 1000000u, memory_order_relaxed);
}

/* ---- start-up ---- */

void ld_maintain_init(void) {
  int state = atomic_load_explicit(&init_state, memory_order_acquire);
  if (LD_LIKELY(state == 2)) return;
  if (init_running_here) return; /* the initialiser itself allocated: defaults serve it */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) ld_os_yield();
    return;
  }
  init_running_here = 1;
  int saved_errno = errno;
  ld_heap_empty_init();
  ld_options_init();
  ld_sb_size = (size_t)LD_OPTION(superblock_size);
  ld_sb_shift = (unsigned)__builtin_ctzll(ld_sb_size);
  ld_sb_mask = ~(uintptr_t)(ld_sb_size - 1);
  /* at most 32 units a superblock (sb_t, dormant: one word), none smaller than a page */
  unsigned page_shift = (unsigned)__builtin_ctzll(ld_os_page_size());
  ld_dormant_shift = ld_sb_shift - 5 > page_shift ? ld_sb_shift - 5 : page_shift;
  ld_small_max = ld_sb_size / 4 < LD_SMALL_LIMIT ? ld_sb_size / 4 : LD_SMALL_LIMIT;
  ld_options_freeze();
  purge_delay_changed();
  ld_classes_init();
  ld_heap_fraction_changed();
  if (ld_addrmap_init(ld_sb_size) != 0) ld_message("larder: the ownership map could not be made; bad pointers may fault\n");
  /* The key that detects double frees: from the clock and an address (ASLR), not secret,
   * only unlikely to appear in user data by chance. */
  ld_free_key = (uintptr_t)ld_os_now_ns() * 0x9E3779B97F4A7C15ull ^ (uintptr_t)&init_state ^ 0x5bd1e995u;
  ld_free_key |= 1; /* a tag is never 0 */
#ifdef LARDER_HARDENED
  /* The link secret must not be guessable: from the kernel's random source. */
  if (ld_os_random(&ld_link_secret, sizeof ld_link_secret) != 0) ld_link_secret = ld_free_key * 0xff51afd7ed558ccdull;
  ld_link_secret |= 1;
  ld_free_key ^= ld_link_secret & ~(uintptr_t)1;
#endif
  /* The key's top 16 bits (the free tag's) and their inverse (a slow free's mark) are neither
   * 0x0000 nor 0xffff, the top bytes of most words of data (small numbers, user pointers,
   * negative ones): a block whose own word had them would take the free's slow path at every
   * free (alloc.c, larder_free; internal.h, ld_tag_settles). */
  if ((uint16_t)((ld_free_key >> 48) + 1) <= 1) ld_free_key ^= (uintptr_t)0x5a5a << 48;
  ld_os_cond_init(&thread_wake);
  ld_os_atfork_forever(fork_prepare, fork_parent, fork_child);
  /* The thread-exit hook's key, made before main (the constructor below), so that it is one of
   * glibc's first 32, whose values live in the thread's own block. Made at a thread's first
   * heap, after a program had made 32 keys, it was a key of glibc's second level: a thread whose
   * first allocation was the second-level block of its own first pthread_setspecific set the
   * heap there from inside that call, whose own block then replaced the one larder's value
   * was in: the hook never ran, and each such thread's heap was lost (2,000 threads: 633 MB;
   * a repro after gperftools' thread_dealloc_unittest and snmalloc's multi_setspecific). */
  if (pthread_key_create(&heap_key, thread_exit) == 0) atomic_store_explicit(&heap_key_made, 1, memory_order_release);
  if (LD_OPTION(verbose))
    ld_message("larder %s: superblock %zu bytes, f=%.3f, K=%d, purge delay %d ms, purge thread %d (from %d MiB), "
               "large cache %d MiB\n",
               LARDER_VERSION_STRING, ld_sb_size, LD_OPTION(empty_fraction), (int)LD_OPTION(k), (int)LD_OPTION(purge_delay_ms),
               (int)LD_OPTION(purge_thread), (int)LD_OPTION(purge_thread_mb), (int)LD_OPTION(large_cache_mb));
  errno = saved_errno;
  init_running_here = 0;
  atomic_store_explicit(&init_state, 2, memory_order_release);
}

/* Before main, so that the class table is ready before the first allocation of any thread. */
__attribute__((constructor)) static void init_constructor(void) { ld_maintain_init(); }

/* ---- thread start and exit ---- */

/* The calling thread's bins, buffered remote frees and kept medium spans go back (cache.c),
 * the thread marked as in its bins meanwhile (thread exit, malloc_trim, out of memory);
 * keep_bins: but for what its heap, parked next, keeps of its bins (heap.c, ld_heap_park). */
static void drain_caches(heap_t *heap, bool keep_bins) {
  ld_cache_enter(heap);
  ld_cache_drain(heap, keep_bins);
  ld_cache_leave(heap);
}

heap_t *ld_maintain_thread_heap(void) {
  ld_maintain_init();
  int saved_errno = errno;
  heap_t *heap = ld_heap_new(thread_exit_ran);
  if (!heap) {
    errno = ENOMEM;
    return NULL;
  }
  ld_cache_init_bins(heap);
  heap->last_maintenance_ns = ld_os_now_coarse_ns();
  heap->errno_at = &errno; /* (a parked heap taken again: the new thread's) */
  ld_heap_tls = heap;
  /* (the key is one of the first 32, made at start-up: its value goes in the thread's own block) */
  if (atomic_load_explicit(&heap_key_made, memory_order_acquire)) pthread_setspecific(heap_key, heap);
  errno = saved_errno;
  return heap;
}

/* The thread-exit hook (a pthread key destructor): the thread's bins and buffered remote
 * frees go back, its heap's empty superblocks go to the global heap, and the heap with the
 * rest waits for the next new thread, which takes it whole (heap.c, ld_heap_park): a program
 * that starts and ends threads all the time (larson; a thread per connection) would otherwise
 * move every superblock to the global heap and back at each thread's end and start, under the
 * global lock. If no thread comes within a purge delay, the purge gives it all to the global
 * heap (DESIGN §1: an exited thread's memory is reused; Hoard §3 keeps a heap's superblocks
 * for whichever thread maps to it next). */
static void thread_exit(void *arg) {
  heap_t *heap = arg;
  thread_exit_ran = 1;
  if (!heap || heap == &ld_heap_empty) return;
  int saved_errno = errno;
  LD_OWNER_SET(heap->last_slow_ns, ld_os_now_coarse_ns());
  ld_heap_exit_begin(heap); /* (no tidy gives its superblocks away from here to its park) */
  /* (a place among the parked heaps that keep their bins, taken first: heap.c, ld_heap_park) */
  bool keeping = ld_heap_keep_reserve();
  drain_caches(heap, keeping);
  ld_heap_tls = &ld_heap_empty;
  bool parked = ld_heap_park(heap, keeping);
  uint64_t now = ld_os_now_coarse_ns();
  /* (a heap holding regions of the fit tier: its empty one goes back at the purge's next look) */
  if (parked || LD_READ(heap->fit.regions_held)) ld_due_note(now);
  ld_maintain_poll_slow(&ld_heap_empty, now, true);
  purge_thread_nudge(now);
  errno = saved_errno;
}

/* ---- the purge ---- */

static _Atomic int purge_running;  /* one purge run at a time */
static __thread int purging_here;  /* this thread holds purge_running (fork_prepare) */

/* A fork or malloc_trim that finds a run under way says so while it waits (internal.h,
 * ld_purge_waiters): the run stops at its next step (a trim's own run excepted), yields no more
 * at its hand-overs, and no new run starts, so the waiter gets purge_running next. */
static void purge_wait_begin(void) { atomic_fetch_add_explicit(&ld_purge_waiters, 1, memory_order_relaxed); }
static void purge_wait_end(void) { atomic_fetch_sub_explicit(&ld_purge_waiters, 1, memory_order_relaxed); }
static _Atomic size_t thread_runs, thread_bytes, thread_starts, bins_emptied, medium_emptied, call_runs, runs_cut;

/* Tidies every heap (trylock for other threads' heaps) and the global heap, purges what has
 * been idle for the delay (all: everything), and sets the next deadline. */
/* Another thread's heap whose thread has made no slow call for a purge delay. */
static bool heap_idle(const heap_t *h, const heap_t *mine, uint64_t now) {
  return h != mine && now - LD_READ(h->last_slow_ns) >= ld_purge_delay();
}
/* The next purge run is due when h will have been idle a delay, if not sooner. */
static void idle_at_lower(uint64_t *idle_at, const heap_t *h) {
  uint64_t at = LD_READ(h->last_slow_ns) + ld_purge_delay();
  if (at < *idle_at) *idle_at = at;
}

/* Blocks a run's looks at partly used superblocks may pass (global.c): the purge thread's and
 * malloc_trim's (a few milliseconds), and those of a run inside a malloc or free call (about a
 * tenth of a millisecond). */
#define PURGE_SCAN_BLOCKS_THREAD ((size_t)1 << 21)
#define PURGE_SCAN_BLOCKS_CALL ((size_t)1 << 15)

/* A run that a fork or malloc_trim waits for (ld_purge_waiters): its long loops (the give-back
 * of empty superblocks, of free runs, of free pages) stop at their next turn, each after a few
 * items at least, so that every run that starts makes progress however often forks come, and
 * the rest is due at once, for the next run (ld_purge_cut). The walks over the heaps go on (each
 * heap's tidy is bounded), without yielding. A trim's own run (all) goes to the end. */

static size_t purge_run_locked(uint64_t now, bool all, size_t scan_blocks) {
  /* The deadline is consumed as the run starts, not as it ends: work noted while the run looks
   * (a span kept, a run freed after the run read the segments' expiry) lowers it again and
   * waits for the next run, where a store at the end would have overwritten its note, and in
   * a process that then makes no call that memory stayed for good. */
  atomic_store_explicit(&ld_due_ns, UINT64_MAX, memory_order_relaxed);
  heap_t *mine = ld_heap_tls;
  bool busy = false;
  uint64_t idle_at = UINT64_MAX; /* when the next thread that holds blocks will have been idle a delay */
  /* A thread that stopped calling keeps its batches of remote frees: they go first, so the
   * owners' tidies below count them in this run (sent after an owner's tidy, a batch waited
   * a whole delay more). */
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap) {
    if (h == mine || !__atomic_load_n(&h->live, __ATOMIC_RELAXED)) continue;
    if (!heap_idle(h, mine, now)) {
      if (ld_cache_holds(h)) idle_at_lower(&idle_at, h);
      continue;
    }
    if (!ld_cache_send_idle_batches(h)) busy = true; /* and its slow frees */
    /* and its bins, whose blocks keep their superblocks from being given back (what goes back
     * for an idle thread is purged at once: segment.c) */
    ld_segment_purge_frees(true);
    int emptied = ld_cache_drain_idle(h);
    int medium = ld_cache_medium_drain_idle(h); /* and its kept medium spans */
    ld_segment_purge_frees(false);
    if (emptied < 0 || medium < 0) busy = true;
    if (emptied > 0) atomic_fetch_add_explicit(&bins_emptied, 1, memory_order_relaxed);
    if (medium > 0) atomic_fetch_add_explicit(&medium_emptied, 1, memory_order_relaxed);
  }
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap) {
    bool idle = heap_idle(h, mine, now);
    ld_segment_purge_frees(idle);
    if (!ld_heap_tidy(h, h == mine, idle)) busy = true;
    /* the fit tier's: other threads' frees collected, an empty region given back after a delay */
    if (!ld_fit_tidy(h, h == mine, idle || !__atomic_load_n(&h->live, __ATOMIC_RELAXED), all)) busy = true;
    /* an exited thread's heap that no new thread took within a delay */
    if (!__atomic_load_n(&h->live, __ATOMIC_RELAXED) && LD_READ(h->superblocks_held)) {
      if (!idle && !all) {
        idle_at_lower(&idle_at, h);
      } else if (!ld_heap_release_parked(h)) {
        busy = true;
      }
    }
    /* a parked heap that holds nothing, idle a delay: its table's pages */
    if (!__atomic_load_n(&h->live, __ATOMIC_RELAXED) && !LD_READ(h->superblocks_held) && !LD_READ(h->table_purged) &&
        (idle || all) && !ld_heap_purge_parked_table(h))
      busy = true;
    /* medium spans other threads freed to a heap no thread uses: back to their segments */
    if (!__atomic_load_n(&h->live, __ATOMIC_RELAXED)) ld_cache_medium_drain_returned(h);
    ld_segment_purge_frees(false);
  }
  ld_global_tidy();
  /* empty superblocks that waited a delay: purged as they go (segment.c) */
  ld_segment_purge_frees(true);
  size_t released = ld_global_release_empties(now, all);
  ld_segment_purge_frees(false);
  released += ld_segment_purge(now, all) + ld_large_purge(now, all);
  /* the free pages of partly used superblocks that waited a delay in the global heap */
  bool more = false;
  released += ld_global_give_back_free_pages(now, all, scan_blocks, &more);
  if (more) busy = true;
  uint64_t next = UINT64_MAX, t;
  if ((t = ld_global_next_expiry()) && t < next) next = t;
  if ((t = ld_segment_next_expiry()) && t < next) next = t;
  if ((t = ld_large_next_expiry()) && t < next) next = t;
  if (busy && now + ld_purge_delay() < next) next = now + ld_purge_delay();
  if (idle_at < next) next = idle_at;
  if (ld_purge_cut(all)) { /* (its loops may have stopped early) */
    atomic_fetch_add_explicit(&runs_cut, 1, memory_order_relaxed);
    next = now;
  }
  ld_due_lower_to(next);
  return released;
}

/* Returns the bytes given back, or -1 when another thread was purging or waits to. */
static ssize_t purge_run_once(uint64_t now, size_t scan_blocks) {
  int expected = 0;
  if (ld_purge_hurried() || !atomic_compare_exchange_strong(&purge_running, &expected, 1)) return -1;
  purging_here = 1;
  size_t bytes = purge_run_locked(now, false, scan_blocks);
  purging_here = 0;
  atomic_store_explicit(&purge_running, 0, memory_order_release);
  return (ssize_t)bytes;
}

/* internal.h's ld_maintain_poll found something to do, or could not tell: the same tests,
 * each acted on. */
void ld_maintain_poll_slow(heap_t *heap, uint64_t now, bool allocating) {
  if (allocating) purge_thread_start_if_wanted();
  uint64_t due_ns = atomic_load_explicit(&ld_due_ns, memory_order_relaxed);
  /* A thread that stops calling after this is looked at by a purge run within a delay (its
   * bins and batches: cache.c): make sure one is due. One compare here; the run schedules the
   * next for the threads that hold blocks and are not idle yet. */
  if (LD_UNLIKELY(due_ns == UINT64_MAX) && heap != &ld_heap_empty) {
    ld_due_note(now);
    due_ns = atomic_load_explicit(&ld_due_ns, memory_order_relaxed);
  }
  /* Work became due before the purge thread means to wake: wake it (no lock is needed to
   * signal, and a signal lost to a thread not yet waiting costs at most one sleep). */
  if (LD_UNLIKELY(due_ns < atomic_load_explicit(&ld_purge_thread_wake_ns, memory_order_relaxed))) {
    atomic_store_explicit(&ld_purge_thread_wake_ns, due_ns, memory_order_relaxed);
    pthread_cond_signal(&thread_wake);
  }
  bool due = now >= due_ns;
  bool own = heap != &ld_heap_empty && now - heap->last_maintenance_ns >= ld_purge_delay();
  if (LD_LIKELY(!due && !own)) return;
  int saved_errno = errno; /* a successful call leaves errno alone */
  if (own) {
    heap->last_maintenance_ns = now;
    LD_OWNER_SET(heap->last_slow_ns, now);
    ld_cache_enter(heap);
    ld_cache_trim(heap);
    ld_cache_leave(heap);
  }
  /* The run walks every heap and gives back whatever waited a delay: work that grows with the
   * process. With a purge thread it is the thread's, woken above when it slept past the
   * deadline: a malloc or free never pays for it. Without one (a process below
   * LARDER_PURGE_THREAD_MB mapped, whose heaps and superblocks are few for that reason;
   * LARDER_PURGE_THREAD=0; a fork child before its first allocation's slow path starts one),
   * the call that finds it due runs it. */
  if (due && !atomic_load_explicit(&ld_purge_thread_running, memory_order_acquire) && purge_run_once(ld_os_now_ns(), PURGE_SCAN_BLOCKS_CALL) >= 0)
    atomic_fetch_add_explicit(&call_runs, 1, memory_order_relaxed);
  errno = saved_errno;
}

int ld_maintain_trim(void) {
  ld_maintain_init();
  heap_t *mine = ld_heap_tls;
  if (mine != &ld_heap_empty) LD_OWNER_SET(mine->last_slow_ns, ld_os_now_coarse_ns());
  drain_caches(mine, false);
  /* A run under way is cut short and a new one kept out while this waits (beside four busy
   * threads on 2 cores a trim waited up to 1.6 s for the purge thread's run). Its own run still
   * hands the locks to waiting threads, yields included: the caller waits so that the threads
   * doing the work do not (docs/results.md, "malloc_trim's purge loops"). */
  if (atomic_exchange(&purge_running, 1)) {
    purge_wait_begin();
    while (atomic_exchange(&purge_running, 1)) ld_os_sleep_ms(1);
    purge_wait_end();
  }
  purging_here = 1;
  size_t released = purge_run_locked(ld_os_now_ns(), true, PURGE_SCAN_BLOCKS_THREAD);
  purging_here = 0;
  atomic_store_explicit(&purge_running, 0, memory_order_release);
  return released > 0;
}

bool ld_maintain_reclaim(heap_t *heap) {
  if (heap == &ld_heap_empty) return false;
  /* (a mapping refused: glibc's tst-dynarray-fail, under RLIMIT_AS, freed everything and its
   * next 16 KiB realloc failed, the chunks it needed kept by the thread's medium spans) */
  bool cached = ld_cache_holds(heap); /* (its kept medium spans included) */
  drain_caches(heap, false);
  ld_heap_tidy(heap, true, false);
  uint64_t now = ld_os_now_ns();
  size_t released = ld_global_release_empties(now, true) + ld_large_purge(now, true);
  return cached || released > 0;
}

/* ---- the purge thread ----
 * For processes that stop calling (an event loop that idles after a peak, an idle pool): it
 * sleeps until the deadline, at most a second, and runs the purge. It never changes how a
 * process ends:
 *   - it blocks every signal (the program's signals are not its to take);
 *   - each time it wakes it asks whether it is the process's last thread (a program whose
 *     main called pthread_exit after its other threads ended; the thread-exit hook wakes it
 *     at once when a thread leaves it nearly alone): whether the thread of any heap a thread
 *     holds still exists (heap.c, ld_heaps_thread_alive), never through a file descriptor,
 *     which the program would see (/proc/self/stat, read until 2026-11-28, took the lowest
 *     free number for a moment: 43 of 4.1 million open("/dev/null") calls of a program
 *     returned another number than the one it had just closed, tests/alloc/no_descriptors.c).
 *     Then it gives everything back and returns, its signals still blocked: the C library
 *     ends the process as after its last thread (exit(0)). (Until 2026-11-28 it unblocked them
 *     first, so that a SIGTERM sent meanwhile took effect; but a thread that never allocated
 *     may still run, unseen by the heaps, and a signal must never reach larder's thread. A
 *     signal sent while every thread blocked it ends with the process, as it would have if
 *     the program's last thread had ended the process.)
 *   - a fork child has none until it starts one as any process does; the library's
 *     destructor (at exit; the library is never unloaded) stops it and waits for it.
 * It is started from an allocation's slow path, the thread-exit hook or a public call, never
 * from a free: the C library frees memory while it holds the lock pthread_create needs (its
 * stack cache), and a thread started there would deadlock (found by
 * tests/alloc/misuse_stats_during_start.c). By default it starts once the process has mapped
 * LARDER_PURGE_THREAD_MB (16 MiB): tiny programs never get a thread. */
#define PURGE_THREAD_SLEEP_MS 1000u
#define PURGE_THREAD_NUDGED_MS 10u

static _Atomic int thread_stop;
static _Atomic int thread_nudged;  /* quick checks left: a thread just left it nearly alone */
static pthread_t thread_id;

static void *purge_thread_main(void *arg) {
  (void)arg;
  int self_tid = ld_os_thread_id();
  ld_os_thread_name("larder-purge"); /* what a user sees beside the program's own threads */
  for (;;) {
    uint64_t now = ld_os_now_ns();
    bool refused = false; /* another thread purges, or a fork or trim waits: try again in a while */
    if (now >= atomic_load_explicit(&ld_due_ns, memory_order_relaxed)) {
      ssize_t bytes = purge_run_once(now, PURGE_SCAN_BLOCKS_THREAD);
      refused = bytes < 0;
      if (bytes >= 0) {
        atomic_fetch_add_explicit(&thread_runs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&thread_bytes, (size_t)bytes, memory_order_relaxed);
      }
    }
    /* (purge_thread set to 0 at run time: calls run the purge from now on, as in a process
     * that never had the thread) */
    if (atomic_load_explicit(&thread_stop, memory_order_relaxed) || LD_OPTION(purge_thread) == 0) break;
    if (!ld_heaps_thread_alive(self_tid)) {
      /* The program is gone: what it freed goes back now. (A thread that never allocated may
       * still run: then the process goes on, and its next allocation slow path starts the
       * thread again.) */
      ld_maintain_trim();
      atomic_store_explicit(&ld_purge_thread_running, 0, memory_order_release);
      return NULL;
    }
    uint64_t due = atomic_load_explicit(&ld_due_ns, memory_order_relaxed);
    uint64_t sleep_ms = PURGE_THREAD_SLEEP_MS;
    if (atomic_load_explicit(&thread_nudged, memory_order_relaxed) > 0) {
      atomic_fetch_sub_explicit(&thread_nudged, 1, memory_order_relaxed);
      sleep_ms = PURGE_THREAD_NUDGED_MS;
    }
    uint64_t wait_ns = due > now ? due - now : 0;
    if (wait_ns > sleep_ms * 1000000u) wait_ns = sleep_ms * 1000000u;
    if (refused && wait_ns < 1000000u) wait_ns = 1000000u;
    atomic_store_explicit(&ld_purge_thread_wake_ns, now + wait_ns, memory_order_relaxed);
    pthread_mutex_lock(&thread_lock);
    if (!atomic_load_explicit(&thread_stop, memory_order_relaxed) && LD_OPTION(purge_thread) != 0)
      ld_os_cond_wait_ns(&thread_wake, &thread_lock, wait_ns);
    pthread_mutex_unlock(&thread_lock);
  }
  atomic_store_explicit(&ld_purge_thread_running, 0, memory_order_release);
  return NULL;
}

/* pthread_create refused the purge thread (a process that may not make threads: a sandbox's
 * seccomp filter, a thread limit): not tried again, and the calls run the purge, as in a process
 * that never wanted the thread. Kept apart from ld_purge_thread_running, which the calls read
 * to leave the purge to the thread and the exit to wait for it: left at 1 after a refusal
 * (until 2026-11-30), it stopped every purge in such a process and made its exit wait 2 s. */
static _Atomic int thread_refused;

static void purge_thread_start(void) {
  if (atomic_load_explicit(&ld_purge_thread_running, memory_order_relaxed) || atomic_load_explicit(&thread_stop, memory_order_relaxed) ||
      atomic_load_explicit(&thread_refused, memory_order_relaxed))
    return;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&ld_purge_thread_running, &expected, 1)) return;
  int saved_errno = errno;
  /* Created with every signal blocked (a new thread inherits the mask): a signal must never
   * reach it, not even before its first instruction. Its stack is 64 KiB, or the default size
   * (0: address space, touched only as used) where glibc refuses that with EINVAL: it puts the
   * program's static TLS on each thread's stack, and 64 KiB was too small for a program with
   * large __thread arrays (the soak, whose purge thread never started). */
  static const size_t stacks[] = {64 * 1024, 0};
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int failed = EINVAL;
  for (unsigned i = 0; i < sizeof stacks / sizeof stacks[0] && failed == EINVAL; i++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (stacks[i]) pthread_attr_setstacksize(&attr, stacks[i]);
    failed = pthread_create(&thread_id, &attr, purge_thread_main, NULL);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (failed) {
    atomic_store_explicit(&thread_refused, 1, memory_order_relaxed);
    atomic_store_explicit(&ld_purge_thread_running, 0, memory_order_release);
    static _Atomic int warned;
    if (LD_OPTION(verbose) && !atomic_exchange(&warned, 1))
      ld_message("larder: could not start the purge thread; memory is returned from allocation calls only\n");
  } else {
    atomic_fetch_add_explicit(&thread_starts, 1, memory_order_relaxed);
  }
  errno = saved_errno;
}

/* Wakes the purge thread now (to stop, or to look at a deadline that came sooner). */
static void purge_thread_wake_now(void) {
  pthread_mutex_lock(&thread_lock);
  pthread_cond_signal(&thread_wake);
  pthread_mutex_unlock(&thread_lock);
}

/* From the slow paths of allocations (never frees: above), thread exits and public calls. */
static void purge_thread_start_if_wanted(void) {
  if (LD_LIKELY(atomic_load_explicit(&ld_purge_thread_running, memory_order_relaxed))) return;
  if (LD_OPTION(purge_thread) == 1 ||
      (LD_OPTION(purge_thread) == 2 && ld_os_mapped_bytes() >= (size_t)LD_OPTION(purge_thread_mb) << 20))
    purge_thread_start();
}

/* A thread left: the purge thread checks often for a while whether it is left alone. The
 * leaving thread only signals it (reading /proc here would tax every thread's exit), at most
 * once per PURGE_THREAD_NUDGED_MS. */
static void purge_thread_nudge(uint64_t now) {
  static _Atomic uint64_t last_nudge_ns;
  if (!atomic_load_explicit(&ld_purge_thread_running, memory_order_relaxed)) return;
  uint64_t last = atomic_load_explicit(&last_nudge_ns, memory_order_relaxed);
  if (now - last < (uint64_t)PURGE_THREAD_NUDGED_MS * 1000000u ||
      !atomic_compare_exchange_strong(&last_nudge_ns, &last, now))
    return;
  atomic_store_explicit(&thread_nudged, 1000 / PURGE_THREAD_NUDGED_MS, memory_order_relaxed);
  pthread_cond_signal(&thread_wake);
}

/* The process exits (liblarder.so is never unloaded: a dlclose leaves it in place, -z
 * nodelete; this runs at exit then): the thread-exit hook is unregistered (threads that end
 * later have nothing to give back to a process that ends), and the purge thread is woken and
 * waited for (it finishes a purge run at most) so that it runs nothing while the other
 * libraries' destructors run. The fork handlers stay (os.c, ld_os_atfork_forever): threads may
 * still fork until the process is gone. */
__attribute__((destructor)) static void maintain_unload(void) {
  /* The exiting thread's deferred frees are checked now: a double free among the program's
   * last frees is still reported (alloc.c, larder_free). */
  ld_cache_settle_deferred_now(ld_heap_tls);
  if (atomic_load_explicit(&heap_key_made, memory_order_acquire)) {
    atomic_store_explicit(&heap_key_made, 0, memory_order_release);
    pthread_key_delete(heap_key);
  }
  atomic_store_explicit(&thread_stop, 1, memory_order_relaxed);
  if (!atomic_load_explicit(&ld_purge_thread_running, memory_order_acquire)) return;
  if (pthread_equal(pthread_self(), thread_id)) return; /* exit() called from the thread itself */
  purge_thread_wake_now();
  for (int i = 0; i < 2000 && atomic_load_explicit(&ld_purge_thread_running, memory_order_acquire); i++) ld_os_sleep_ms(1);
}

void ld_maintain_purge_stats(ld_purge_stats_t *out) {
  out->thread_runs = atomic_load_explicit(&thread_runs, memory_order_relaxed);
  out->call_runs = atomic_load_explicit(&call_runs, memory_order_relaxed);
  out->thread_bytes = atomic_load_explicit(&thread_bytes, memory_order_relaxed);
  out->thread_starts = atomic_load_explicit(&thread_starts, memory_order_relaxed);
  out->bins_emptied = atomic_load_explicit(&bins_emptied, memory_order_relaxed);
  out->medium_emptied = atomic_load_explicit(&medium_emptied, memory_order_relaxed);
  out->runs_cut = atomic_load_explicit(&runs_cut, memory_order_relaxed);
}

/* ---- fork ----
 * The child of a multithreaded parent must find every lock free, so the prepare handler takes
 * them all (lock order: heaps, the large-span cache, the global heap, the segments) and both
 * sides release them. In a process with one allocating thread and no purge thread, nobody else
 * can hold them, and a fork from a signal handler that interrupted malloc would deadlock on a
 * lock the interrupted call holds: there, as the C library does, nothing is taken but the fork
 * mutex (fork_lock, which malloc never holds), and the child makes every lock new. */
static __thread bool fork_skipped;

/* glibc's stdio list lock, taken by its fork after the atfork prepare handlers. A thread that
 * holds a FILE lock and allocates, and one in fflush(NULL) that holds the list lock and waits
 * for that FILE, would deadlock with a fork holding larder's locks and waiting for the list
 * lock. Taking the list lock first gives glibc's own order (stdio, then malloc); it is
 * recursive, so glibc's fork takes it again in this thread. Weak: absent from other C
 * libraries, where the step is skipped. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));

/* Both per thread: glibc runs the prepare handlers of concurrent forks at the same time (its
 * atfork lock is not held while they run), and a second fork's prepare cleared a global flag
 * that the first fork's parent handler then read: purge_running stayed taken and every later
 * fork spun in fork_prepare for ever (tests/alloc/fork_concurrent.c; found under Node.js, whose
 * worker threads each ran child_process.spawnSync). The thread that prepared is the one whose
 * parent or child handler runs next. */
static __thread bool fork_holds_purge;

/* purge_running for a fork, yielding to the run under way, which stops at its next step
 * (ld_purge_waiters); false after `most` yields. */
static bool fork_take_purge(unsigned most) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&purge_running, &expected, 1)) return true;
  purge_wait_begin();
  bool taken = false;
  for (unsigned i = 0; i < most && !taken; i++) {
    ld_os_yield();
    expected = 0;
    taken = atomic_compare_exchange_strong(&purge_running, &expected, 1);
  }
  purge_wait_end();
  return taken;
}

/* This thread's forks between their prepare and their parent or child handler: 2 when a signal
 * handler forks while the thread's own fork is in its handlers (glibc's tst-mallocfork2; fork
 * is async-signal-safe). The inner fork leaves everything to the outer one, which holds
 * fork_lock or is about to: taken again, it was never given back (the process hung). Its child
 * is this thread's copy in the middle of the outer fork, which goes on there as here. The count
 * rises before the lock is taken and falls after it is given back, so that a signal at any
 * point of the handlers finds it raised while the lock may be this thread's; one that comes
 * while the outer fork waits for the lock, or just after it gave it back, forks without taking
 * larder's locks, as glibc's fork takes none in a process of one thread: its child may call
 * only async-signal-safe functions (POSIX), which allocate nothing. */
static __thread unsigned fork_depth;

static void fork_prepare(void) {
  if (fork_depth++) return;
  fork_skipped = fork_holds_purge = false;
  /* Every fork takes it: a fork from a signal handler that interrupted malloc may too (malloc
   * never holds it). */
  pthread_mutex_lock(&fork_lock);
  if (ld_heaps_live_count() <= 1) {
    /* One allocating thread. The purge thread, if there is one, is kept out instead: no run
     * in progress and none may start until the fork is done (its runs are short; one that is
     * under way is waited for a little, else the locks are taken as usual). A run of this
     * very thread (a fork from a signal handler that interrupted it) keeps the others out. */
    if (purging_here) {
      fork_skipped = true;
      return;
    }
    if (fork_take_purge(1000)) {
      fork_skipped = fork_holds_purge = true;
      return;
    }
  } else if (!purging_here) {
    /* No purge run may be under way either: a run leaves state that no lock covers while it
     * empties an idle thread's bins or sends its batches (the bins turned away, a draining
     * flag), and a child forked then would inherit it half done, with no purge thread to
     * finish it (the forking thread was the idle one: its child waited forever for the
     * purge). Runs are short and take no lock the forking thread holds. */
    fork_holds_purge = fork_take_purge(UINT_MAX);
  }
  if (_IO_list_lock) _IO_list_lock();
  pthread_mutex_lock(&thread_lock);
  ld_heaps_lock_all();
  ld_large_lock();
  ld_global_lock();
  ld_segment_lock();
}
static void fork_parent(void) {
  if (fork_depth > 1) {
    fork_depth--;
    return;
  }
  if (fork_holds_purge) atomic_store_explicit(&purge_running, 0, memory_order_release);
  if (!fork_skipped) {
    ld_segment_unlock(false);
    ld_global_unlock();
    ld_large_unlock(false);
    ld_heaps_unlock_all(false);
    pthread_mutex_unlock(&thread_lock);
    if (_IO_list_unlock) _IO_list_unlock();
  }
  pthread_mutex_unlock(&fork_lock);
  fork_depth = 0;
}
static void fork_child(void) {
  if (fork_depth > 1) {
    fork_depth--;
    return;
  }
  /* The child has one thread, so every lock is made new, held or not (glibc resets its stdio
   * list lock itself). The other threads' heaps stay as they were (a thread may have been in a
   * fast path), unused: their memory stays allocated in the child. The child has no purge
   * thread: one starts when enough memory waits, as in any process. */
  ld_segment_unlock(true);
  ld_global_reinit_lock();
  ld_inbox_after_fork(&ld_global_heap); /* (the heaps': ld_heaps_unlock_all) */
  ld_large_unlock(true);
  ld_heaps_unlock_all(true);
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap) ld_cache_medium_after_fork(h);
  pthread_mutex_init(&thread_lock, NULL);
  pthread_mutex_init(&fork_lock, NULL);
  ld_os_cond_init(&thread_wake);
  atomic_store_explicit(&ld_purge_thread_running, 0, memory_order_relaxed);
  atomic_store_explicit(&purge_running, 0, memory_order_relaxed);
  atomic_store_explicit(&ld_purge_waiters, 0, memory_order_relaxed); /* other threads' waits stayed in the parent */
  fork_depth = 0;
}

/* ---- validation ---- */

/* What one thread can check without stopping the others: its own heap (other live heaps
 * change without a lock under their threads' fast paths, so each thread checks its own), the
 * abandoned heaps, the global heap, and the segments. */
int ld_maintain_validate(void) {
  ld_maintain_init();
  int violations = 0;
  atomic_fetch_add_explicit(&ld_validations, 1, memory_order_relaxed);
  /* The walk reads the thread's bins: the purge must not empty them meanwhile (cache.c). A
   * debug validation runs from a refill, already in them. */
  heap_t *mine = ld_heap_tls;
  bool outside = !LD_READ(mine->bins_busy);
  if (outside) ld_cache_enter(mine);
  ld_heap_validate(mine, &violations);
  if (outside) ld_cache_leave(mine);
  if (mine != &ld_heap_empty) ld_fit_validate(mine, &violations);
  ld_cache_validate(mine, &violations);
  ld_global_validate(&violations);
  ld_segment_validate(&violations);
  return violations;
}

/* LARDER_DEBUG: a validation walks what the calling thread can check, O(superblocks). Running
 * one only after as many slow-path events as there are superblocks keeps LARDER_DEBUG=1 within
 * a constant factor of a release run. */
void ld_maintain_debug_validate(heap_t *heap) {
  if (LD_LIKELY(!LD_OPTION(debug))) return;
  static _Atomic size_t events, next_at;
  size_t n = atomic_fetch_add_explicit(&events, 1, memory_order_relaxed) + 1;
  if (n < atomic_load_explicit(&next_at, memory_order_relaxed)) return;
  size_t gap = 256 + 4 * LD_READ(heap->superblocks_held) * (ld_heaps_live_count() + 1);
  atomic_store_explicit(&next_at, n + gap, memory_order_relaxed);
  if (ld_maintain_validate() != 0) ld_message("larder: validation failed before a refill (LARDER_DEBUG)\n");
}

/* ---- option changes ---- */
int larder_option_set(const char *name, const char *value) {
  ld_maintain_init();
  if (ld_option_set(name, value) != 0) return -1;
  ld_heap_fraction_changed();
  purge_delay_changed();
  /* a shorter delay: the deadline noted with the old one may lie far beyond the new one */
  ld_due_note(ld_os_now_coarse_ns());
  atomic_fetch_add(&ld_options_epoch, 1);
  /* The bins' limits follow the options at the thread's next heap. The heaps' groups and
   * thresholds follow here, every heap under its lock: work that grows with the superblocks
   * held, done by the setter. Until 2026-11-28 each heap's next refill or flush did it, on a
   * malloc or free path (heap.c, heap_check_options, which still does it for a heap its thread
   * reaches before this walk does). */
  ld_heaps_options_apply();
  /* purge_thread: 0 ends a running purge thread (after the run it may be in), 1 starts it now,
   * 2 once the process has mapped purge_thread_mb, as at start */
  if (LD_OPTION(purge_thread) == 0) {
    if (atomic_load_explicit(&ld_purge_thread_running, memory_order_acquire)) purge_thread_wake_now();
  } else {
    purge_thread_start_if_wanted();
  }
  return 0;
}
