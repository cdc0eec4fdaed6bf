/* Memory back to the OS, by age (a decay in the manner of jemalloc's).
 *
 * Freed memory is not given back at once: a program that frees and allocates in waves would
 * pay a page fault per page per wave. Each free run of chunks (segment.c) and each cached large
 * span (large.c) remembers when it was freed; once it has been idle for the purge delay
 * (LARDER_PURGE_DELAY_MS), its pages are purged, and a wholly free segment is unmapped.
 *
 * Who does it, without any path walking the heap per call:
 *   - a deadline, the earliest time something expires, is set when free memory appears;
 *   - slow paths (refills, announcements of frees, medium and large calls, thread exit) read a
 *     coarse clock and run the purge once the deadline has passed (ld_purge_check);
 *   - a background thread (LARDER_PURGE_THREAD; by default in multithreaded processes) does the
 *     same for a process that makes no calls at all, such as a server idling after a peak.
 * A purge run also tidies every heap whose lock is free: frees other threads left with an idle
 * owner are collected, Hoard's threshold applied, and empty superblocks go to the segments.
 * This walk over heaps is paid once per deadline, not per call.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

_Atomic uint64_t ld_purge_deadline_ns = UINT64_MAX;
static _Atomic int purge_running;
static _Atomic int purge_thread_state; /* 0 not started, 1 running */
static _Atomic size_t thread_runs, thread_bytes;

static uint64_t purge_delay_ns(void) { return (uint64_t)ld_options.purge_delay_ms * 1000000u; }

static void deadline_lower_to(uint64_t t) {
  uint64_t cur = atomic_load_explicit(&ld_purge_deadline_ns, memory_order_relaxed);
  while (t < cur && !atomic_compare_exchange_weak_explicit(&ld_purge_deadline_ns, &cur, t, memory_order_relaxed,
                                                           memory_order_relaxed)) {
  }
}

void ld_purge_note_free_memory(uint64_t now) { deadline_lower_to(now + purge_delay_ns()); }

static size_t purge_run_locked(uint64_t now, bool all) {
  heap_t *mine = ld_heap_tls;
  bool busy = false;
  for (heap_t *h = ld_heaps_first(); h; h = h->next_heap)
    if (!ld_heap_tidy(h, h == mine, all, now)) busy = true;
  ld_global_tidy();
  size_t released = ld_segment_purge(now, all) + ld_large_purge(now, all);
  uint64_t next = UINT64_MAX, t;
  if ((t = ld_segment_next_expiry()) && t < next) next = t;
  if ((t = ld_large_next_expiry()) && t < next) next = t;
  if (busy && now + purge_delay_ns() < next) next = now + purge_delay_ns();
  atomic_store_explicit(&ld_purge_deadline_ns, UINT64_MAX, memory_order_relaxed);
  deadline_lower_to(next);
  return released;
}

/* Returns the bytes given back, or -1 when another thread was purging. */
static ssize_t purge_run_once(uint64_t now) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&purge_running, &expected, 1)) return -1; /* one at a time */
  size_t bytes = purge_run_locked(now, false);
  atomic_store_explicit(&purge_running, 0, memory_order_release);
  return (ssize_t)bytes;
}

void ld_purge_run(uint64_t now) { purge_run_once(now); }

int ld_purge_trim(void) {
  ld_init_if_needed();
  while (atomic_exchange(&purge_running, 1)) ld_os_sleep_ms(1);
  size_t released = purge_run_locked(ld_os_now_ns(), true);
  atomic_store_explicit(&purge_running, 0, memory_order_release);
  return released > 0;
}

/* ---- the background thread ---- */

static void *purge_thread_main(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL); /* the program's signals are not ours to take */
  for (;;) {
    uint64_t now = ld_os_now_ns();
    uint64_t deadline = atomic_load_explicit(&ld_purge_deadline_ns, memory_order_relaxed);
    if (now >= deadline) {
      ssize_t bytes = purge_run_once(now);
      if (bytes >= 0) {
        atomic_fetch_add_explicit(&thread_runs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&thread_bytes, (size_t)bytes, memory_order_relaxed);
      }
      deadline = atomic_load_explicit(&ld_purge_deadline_ns, memory_order_relaxed);
    }
    /* Sleep until the deadline, but wake at least once a second: a deadline set meanwhile is
     * then seen within a second, and an idle process costs one wake-up per second. */
    uint64_t wait_ms = 1000;
    if (deadline != UINT64_MAX && deadline > now && (deadline - now) / 1000000u + 1 < wait_ms)
      wait_ms = (deadline - now) / 1000000u + 1;
    if (deadline <= now) wait_ms = 1;
    ld_os_sleep_ms((unsigned)wait_ms);
  }
  return NULL;
}

/* LARDER_PURGE_THREAD: 0 never, 1 always, 2 (default) once the process has a second thread
 * that allocates: a server, which may idle after a peak without calling malloc. */
void ld_purge_thread_start_if_enabled(void) {
  int mode = (int)ld_options.purge_thread;
  if (mode == 0 || (mode == 2 && ld_heaps_live_count() < 2)) return;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&purge_thread_state, &expected, 1)) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t tid;
  if (pthread_create(&tid, &attr, purge_thread_main, NULL) != 0) {
    ld_message("larder: could not start the purge thread; memory is returned from allocation calls only\n");
  }
  pthread_attr_destroy(&attr);
}

void ld_purge_after_fork_child(void) {
  /* The child has no purge thread (fork copies only the calling thread): one is started again
   * when the child makes a second thread. */
  atomic_store_explicit(&purge_thread_state, 0, memory_order_relaxed);
  atomic_store_explicit(&purge_running, 0, memory_order_relaxed);
}

bool ld_purge_thread_running(void) { return atomic_load_explicit(&purge_thread_state, memory_order_relaxed) != 0; }

void ld_purge_stats(ld_purge_stats_t *out) {
  out->thread_runs = atomic_load_explicit(&thread_runs, memory_order_relaxed);
  out->thread_bytes = atomic_load_explicit(&thread_bytes, memory_order_relaxed);
}
