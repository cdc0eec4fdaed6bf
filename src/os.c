/* The one seam to the operating system (see os.h for the contract). */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic size_t os_mmap_calls, os_munmap_calls, os_madvise_calls;
static _Atomic size_t os_lock_sleeps;
static _Atomic size_t os_mmap_bytes, os_munmap_bytes, os_madvise_bytes;

/* errno: the seam never changes it (os.h). A failure is returned as a value and the caller
 * decides what the application sees, so that a successful malloc does not leave behind the
 * EEXIST of an aligned-mapping probe, the ENOMEM of an mremap that could not grow in place, or
 * the ESRCH of a check on an exited thread (issue 16). Each function below keeps the caller's
 * errno in `saved` and puts it back on every return. */
static int os_fail(int saved, int fallback) {
  int e = errno ? errno : fallback;
  errno = saved;
  return e;
}

static void os_count(_Atomic size_t *calls, _Atomic size_t *bytes, size_t n) {
  atomic_fetch_add_explicit(calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(bytes, n, memory_order_relaxed);
}

/* Two kinds of mapping. Address space that larder reserves and fills as it goes (segments, the
 * ownership map's leaves, heaps, the pools' areas) is mapped MAP_NORESERVE, outside the kernel's
 * overcommit heuristic. A large span is memory the program asked for, all of it: it is mapped
 * without that flag (`committed`), so that under the default heuristic the kernel refuses a
 * span it could never back (more than RAM + swap), as it refuses glibc's, and mremap refuses
 * to grow one that far. Before, malloc(2^45) succeeded and its addrmap leaves (16 KiB per
 * 4 GiB, never given back) stayed resident: 256 MiB per such call (issue 16, the API fuzzer). */
static int map_plain(size_t bytes, int extra, void **out) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
  if (p == MAP_FAILED) return errno ? errno : ENOMEM;
  os_count(&os_mmap_calls, &os_mmap_bytes, bytes);
  *out = p;
  return 0;
}

int ld_os_map(size_t bytes, void **out) {
  int saved = errno;
  int err = map_plain(bytes, MAP_NORESERVE, out);
  errno = saved;
  return err;
}

static int map_aligned(size_t bytes, size_t align, int extra, void **out);

int ld_os_map_aligned(size_t bytes, size_t align, void **out) {
  int saved = errno;
  int err = map_aligned(bytes, align, MAP_NORESERVE, out);
  errno = saved;
  return err;
}

int ld_os_map_committed(size_t bytes, size_t align, void **out) {
  int saved = errno;
  int err = map_aligned(bytes, align, 0, out);
  errno = saved;
  return err;
}

static int map_aligned(size_t bytes, size_t align, int extra, void **out) {
  size_t page = ld_os_page_size();
  if (align <= page) return map_plain(bytes, extra, out);
  if (bytes > SIZE_MAX - align) return ENOMEM;
  /* First at the aligned address just above where the kernel would place the mapping: for a
   * large alignment (segments: 64 MiB) this avoids mapping bytes + align even for a moment,
   * which would show as a peak of address space. */
  void *probe;
  int err = map_plain(bytes, extra, &probe);
  if (err) return err;
  if (((uintptr_t)probe & (align - 1)) == 0) {
    *out = probe;
    return 0;
  }
  ld_os_unmap(probe, bytes);
  /* Aligned addresses near the probe: just above it, then below it, where the kernel places
   * new mappings (they grow down), skipping a few that earlier segments hold. */
  uintptr_t above = ((uintptr_t)probe + align - 1) & ~(uintptr_t)(align - 1);
  uintptr_t below = (uintptr_t)probe & ~(uintptr_t)(align - 1);
  for (int k = -1; k < 8; k++) {
    uintptr_t hint = k < 0 ? above : below - (uintptr_t)k * align;
    if (hint < align || hint > below + align) continue;
    void *p = mmap((void *)hint, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | extra, -1, 0);
    if (p == MAP_FAILED) continue;
    if (p == (void *)hint) {
      os_count(&os_mmap_calls, &os_mmap_bytes, bytes);
      *out = p;
      return 0;
    }
    munmap(p, bytes); /* an old kernel that took the address as a hint only */
    break;
  }
  /* Else map more than needed, then give back the misaligned head and the tail: one mmap and
   * at most two munmaps, whatever the alignment. */
  void *raw;
  err = map_plain(bytes + align - page, extra, &raw);
  if (err) return err;
  uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = start - (uintptr_t)raw;
  size_t tail = (align - page) - head;
  if (head) ld_os_unmap(raw, head);
  if (tail) ld_os_unmap((char *)start + bytes, tail);
  *out = (void *)start;
  return 0;
}

int ld_os_unmap(void *addr, size_t bytes) {
  int saved = errno;
  if (munmap(addr, bytes) != 0) return os_fail(saved, EINVAL);
  os_count(&os_munmap_calls, &os_munmap_bytes, bytes);
  return 0;
}

int ld_os_remap(void *old, size_t old_bytes, size_t new_bytes, void *dest, void **out) {
  int saved = errno;
  void *p = dest ? mremap(old, old_bytes, new_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, dest)
                 : mremap(old, old_bytes, new_bytes, 0);
  if (p == MAP_FAILED) return os_fail(saved, ENOMEM);
  if (dest) {
    /* dest was mapped (and counted) by the caller; the old range is gone */
    os_count(&os_munmap_calls, &os_munmap_bytes, old_bytes);
  } else if (new_bytes > old_bytes) {
    os_count(&os_mmap_calls, &os_mmap_bytes, new_bytes - old_bytes);
  } else if (new_bytes < old_bytes) {
    os_count(&os_munmap_calls, &os_munmap_bytes, old_bytes - new_bytes);
  }
  *out = p;
  return 0;
}

int ld_os_protect_none(void *addr, size_t bytes) {
  int saved = errno;
  if (mprotect(addr, bytes, PROT_NONE) != 0) return os_fail(saved, EINVAL);
  return 0;
}

int ld_os_random(void *buf, size_t bytes) {
  int saved = errno;
  char *p = buf;
  while (bytes > 0) {
    long n = syscall(SYS_getrandom, p, bytes, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_fail(saved, EIO);
    }
    p += n;
    bytes -= (size_t)n;
  }
  errno = saved;
  return 0;
}

int ld_os_purge(void *addr, size_t bytes) {
  int saved = errno;
  if (madvise(addr, bytes, MADV_DONTNEED) != 0) {
    /* EINVAL: locked pages (madvise refuses them; it may have purged the range's unlocked
     * part). A new mapping over the range makes it read zero, as the caller files it (a clean
     * run: calloc clears none of it); the old pages go, and under mlockall(MCL_FUTURE) the
     * new ones are locked, so memory returns only with the segment's unmapping. */
    if (errno != EINVAL || mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                                -1, 0) == MAP_FAILED)
      return os_fail(saved, EINVAL);
    os_count(&os_mmap_calls, &os_mmap_bytes, bytes);
    errno = saved;
    return 0;
  }
  os_count(&os_madvise_calls, &os_madvise_bytes, bytes);
  return 0;
}

/* Advice that purges nothing (not counted): 0, or the kernel's refusal (`refused` if it
 * gives no errno). */
static inline int os_advise(void *addr, size_t bytes, int advice, int refused) {
  int saved = errno;
  if (madvise(addr, bytes, advice) != 0) return os_fail(saved, refused);
  return 0;
}

int ld_os_advise_huge_pages(void *addr, size_t bytes) {
#ifdef MADV_HUGEPAGE
  return os_advise(addr, bytes, MADV_HUGEPAGE, EINVAL);
#else
  (void)addr, (void)bytes;
  return EINVAL;
#endif
}

int ld_os_advise_no_huge_pages(void *addr, size_t bytes) {
#ifdef MADV_NOHUGEPAGE
  return os_advise(addr, bytes, MADV_NOHUGEPAGE, ENOMEM);
#else
  (void)addr, (void)bytes;
  return EINVAL;
#endif
}

size_t ld_os_page_size(void) {
  static size_t page;
  if (!page) {
    int saved = errno;
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? (size_t)p : 4096;
    errno = saved;
  }
  return page;
}

int ld_os_cpu_count(void) {
  int saved = errno;
  long n = sysconf(_SC_NPROCESSORS_ONLN); /* reads /sys: may fail and set errno */
  errno = saved;
  return n > 0 ? (int)n : 1;
}

uint64_t ld_os_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ld_os_now_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ld_os_thread_id(void) { return (int)syscall(SYS_gettid); }
int ld_os_process_id(void) { return (int)getpid(); }
bool ld_os_secure_execution(void) { return getauxval(AT_SECURE) != 0; }
void ld_os_thread_name(const char *name) {
  /* prctl on the calling thread: pthread_setname_np may open /proc/self/task/<id>/comm, a
   * descriptor the program would see (maintain.c, the purge thread) */
  int saved = errno;
  prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
  errno = saved;
}

int ld_os_thread_alive(int tid) {
  /* Signal 0 checks existence only. A reused id reads as alive: that only delays a reclaim. */
  int saved = errno;
  int gone = syscall(SYS_tgkill, (int)getpid(), tid, 0) != 0 && errno == ESRCH;
  errno = saved;
  return !gone;
}

void ld_os_sleep_ms(unsigned ms) {
  int saved = errno;
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  errno = saved;
}

/* glibc's registration under pthread_atfork, which names the caller's library (__dso_handle)
 * so that __cxa_finalize can drop its handlers when the library is finalised. At exit that
 * happens while other threads may still fork, even between one fork's prepare handler and its
 * parent and child handlers; forks that then ran with no handler, or with handlers that took
 * nothing, gave children a lock another thread held or a list it was changing (3 threads
 * forking while main called exit: a child waited for ever in ld_segment_alloc or reported a
 * false double free, 19 of 200 exits). Registered with no library, the handlers are never
 * dropped. Weak: other C libraries, and static links where nothing else needs it, have only
 * pthread_atfork (a static program is never finalised as a library). */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso_handle)
    __attribute__((weak));

void ld_os_atfork_forever(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  int saved = errno;
  if (__register_atfork)
    __register_atfork(prepare, parent, child, NULL);
  else
    pthread_atfork(prepare, parent, child);
  errno = saved;
}

void ld_os_cond_init(pthread_cond_t *cond) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

void ld_os_cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t ns) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t t = (uint64_t)ts.tv_nsec + ns;
  ts.tv_sec += (time_t)(t / 1000000000u);
  ts.tv_nsec = (long)(t % 1000000000u);
  int saved = errno;
  pthread_cond_timedwait(cond, mutex, &ts);
  errno = saved;
}

void ld_os_write(int fd, const char *buf, size_t len) {
  /* write() is a cancellation point: a thread with a pending cancellation would otherwise be
   * cancelled inside malloc_stats() with nothing printed. */
  int old_state, saved = errno;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_state);
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    buf += n;
    len -= (size_t)n;
  }
  pthread_setcancelstate(old_state, NULL);
  errno = saved;
}

void ld_os_counts(ld_os_counts_t *out) {
  out->mmap_calls = atomic_load_explicit(&os_mmap_calls, memory_order_relaxed);
  out->munmap_calls = atomic_load_explicit(&os_munmap_calls, memory_order_relaxed);
  out->madvise_calls = atomic_load_explicit(&os_madvise_calls, memory_order_relaxed);
  out->mmap_bytes = atomic_load_explicit(&os_mmap_bytes, memory_order_relaxed);
  out->munmap_bytes = atomic_load_explicit(&os_munmap_bytes, memory_order_relaxed);
  out->madvise_bytes = atomic_load_explicit(&os_madvise_bytes, memory_order_relaxed);
  out->lock_sleeps = atomic_load_explicit(&os_lock_sleeps, memory_order_relaxed);
}

size_t ld_os_mapped_bytes(void) {
  return atomic_load_explicit(&os_mmap_bytes, memory_order_relaxed) - atomic_load_explicit(&os_munmap_bytes, memory_order_relaxed);
}

void ld_os_yield(void) { sched_yield(); }

void ld_os_lock_handoff(ld_lock_t *lock) {
  uint64_t until = ld_os_now_ns() + LD_LOCK_HANDOFF_NS;
  while (atomic_load_explicit(&lock->word, memory_order_relaxed) == 0 && ld_os_now_ns() < until) sched_yield();
}

/* A short spin first, then sleep. The sections these locks guard are short (a fit or a
 * coalescing, a batch): a holder on another core gives the word back within a few hundred
 * nanoseconds, sooner than a sleep in the kernel and a wake-up. 32 pauses (about half a
 * microsecond here) bound what a spin wastes when the holder was preempted. Two threads
 * churning 20-60 KiB blocks made 2,118 futex calls in 200,000 replacements each, 64 with the
 * spin, for 0.85x the CPU per replacement (7 alternating rounds, 0.64-1.14); larson with 64
 * threads on 2 cores: the same peak RSS (103.8 against 103.2 MiB, 6 pairs) and 0.97x the
 * operations (0.86-1.05, 4 rounds). An earlier try with 64 spins had larson's 64 threads run
 * 20-30% more operations a second but peak 15-20% higher in RSS (98-114 MiB against 84-96),
 * an equilibrium of more blocks in flight between threads. The word says 2 (a waiter) for as
 * long as this thread sleeps, so the holder's exchange sees it and wakes one. errno is kept. */
#define LOCK_SPINS 32
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* One pause, then one try at the word (read first: not written while it is held). */
static inline bool lock_spin_once(ld_lock_t *lock) {
  cpu_relax();
  uint32_t expected = 0;
  return atomic_load_explicit(&lock->word, memory_order_relaxed) == 0 &&
         atomic_compare_exchange_weak_explicit(&lock->word, &expected, 1, memory_order_acquire, memory_order_relaxed);
}

static void lock_sleep(ld_lock_t *lock) {
  int saved = errno;
  while (atomic_exchange_explicit(&lock->word, 2, memory_order_acquire) != 0) {
    atomic_fetch_add_explicit(&os_lock_sleeps, 1, memory_order_relaxed);
    syscall(SYS_futex, &lock->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
  }
  errno = saved;
}

void ld_os_lock_wait(ld_lock_t *lock) {
  for (int i = 0; i < LOCK_SPINS; i++)
    if (lock_spin_once(lock)) return;
  lock_sleep(lock);
}

/* The clock is read once per 16 pauses (about 20 ns a read, against 16 pauses of 1-24 ns). */
void ld_os_lock_wait_shared(ld_lock_t *lock) {
  for (int i = 0; i < LOCK_SPINS; i++)
    if (lock_spin_once(lock)) return;
  uint64_t until = ld_os_now_ns() + LD_LOCK_SHARED_SPIN_NS;
  do {
    for (int i = 0; i < 16; i++)
      if (lock_spin_once(lock)) return;
  } while (ld_os_now_ns() < until);
  lock_sleep(lock);
}

void ld_os_lock_wake(ld_lock_t *lock) {
  int saved = errno;
  syscall(SYS_futex, &lock->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  errno = saved;
}

int ld_os_fence_all_threads(void) {
  static _Atomic int registered; /* 0 not yet, 1 yes, -1 refused */
  int saved = errno, r = atomic_load_explicit(&registered, memory_order_acquire);
  if (r == 0) {
    r = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
    atomic_store_explicit(&registered, r, memory_order_release);
  }
  int result = ENOSYS;
  if (r == 1 && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) result = 0;
  errno = saved;
  return result;
}
