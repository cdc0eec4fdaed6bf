/* liblarder-trace.so: preload it into any program to record every allocation call.
 *
 *   LARDER_TRACE_FILE=/tmp/app.%p.ltr LD_PRELOAD=build/lib/liblarder-trace.so app ...
 *
 * Each call is forwarded to the next allocator in the link order (dlsym RTLD_NEXT) and a
 * 32-byte record (time, operation, size, alignment, pointer in, pointer out) goes into a
 * buffer of the calling thread. A full buffer is written to the file as one block with one
 * write() on an O_APPEND descriptor, so threads never share a lock on the hot path; a reader
 * merges the blocks by timestamp, the way Hoard merges its per-heap traces (seed 004 §5.4).
 * The thesis recorded with memwatch and a log line per call (seed 003 §5.3); a binary record
 * per call keeps the slowdown small enough to trace real, threaded programs.
 *
 * Rules this file keeps:
 * - It never calls malloc itself (no stdio, no strdup): buffers come from mmap.
 * - dlsym may call calloc/malloc before the real functions are known; those calls are served
 *   from a static arena and their frees are recognised and dropped.
 * - Calls made from inside a forwarded call (an allocator whose memalign calls malloc) are not
 *   recorded twice: a per-thread depth counter lets them through unrecorded.
 * - Timestamps: taken after the call for calls that produce a block and before the call for
 *   calls that release one, so a block's allocation always sorts before its free even when
 *   another thread frees it, and a free sorts before the allocation that reuses its address.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "trace_format.h"

#define TR_EXPORT __attribute__((visibility("default")))
#define TR_LIKELY(x) __builtin_expect(!!(x), 1)
#define TR_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* 4096 records (128 KiB) per thread: one write() per 4096 calls. */
#define TR_BUF_RECORDS 4096u
#define TR_PATH_MAX 4096

typedef void *(*tr_malloc_fn)(size_t);
typedef void *(*tr_calloc_fn)(size_t, size_t);
typedef void *(*tr_realloc_fn)(void *, size_t);
typedef void (*tr_free_fn)(void *);
typedef int (*tr_posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*tr_memalign_fn)(size_t, size_t);
typedef void *(*tr_valloc_fn)(size_t);

static tr_malloc_fn real_malloc;
static tr_calloc_fn real_calloc;
static tr_realloc_fn real_realloc;
static tr_free_fn real_free;
static tr_posix_memalign_fn real_posix_memalign;
static tr_memalign_fn real_aligned_alloc;
static tr_memalign_fn real_memalign;
static tr_valloc_fn real_valloc;
static tr_valloc_fn real_pvalloc;

/* ---- the start-up arena: serves dlsym's own calls before the real functions are known ---- */
static _Alignas(64) unsigned char tr_arena[64 * 1024];
static atomic_size_t tr_arena_used;

static void *tr_arena_alloc(size_t size) {
  size_t need = (size + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&tr_arena_used, need);
  if (at + need > sizeof tr_arena) return NULL;
  return tr_arena + at; /* static storage is zero, as calloc needs */
}
static int tr_in_arena(const void *p) {
  return (const unsigned char *)p >= tr_arena && (const unsigned char *)p < tr_arena + sizeof tr_arena;
}

/* ---- per-thread buffers ---- */
struct tr_thread {
  struct tr_thread *next;          /* registry link, under tr_reg_lock */
  uint32_t tid, seq;
  _Atomic uint32_t n;              /* records filled; the exit flush reads it from another thread */
  uint32_t pad;                    /* puts block right before buf, with no gap */
  struct ltr_block block;          /* written just before buf, so a flush is one write() */
  struct ltr_record buf[TR_BUF_RECORDS];
};
_Static_assert(offsetof(struct tr_thread, buf) == offsetof(struct tr_thread, block) + LTR_BLOCK_SIZE,
               "a flush writes block and buf as one run of bytes");

static __thread struct tr_thread *tls_thread __attribute__((tls_model("initial-exec")));
static __thread int tls_depth __attribute__((tls_model("initial-exec")));
static __thread int tls_dead __attribute__((tls_model("initial-exec")));
/* kept after the buffer is gone, so a dying thread's last records still name it */
static __thread uint32_t tls_seq __attribute__((tls_model("initial-exec"))) = UINT32_MAX;

static atomic_flag tr_reg_lock = ATOMIC_FLAG_INIT;
static struct tr_thread *tr_threads;
static atomic_uint tr_next_seq;
static pthread_key_t tr_key;
static int tr_key_ok;

/* ---- process state ---- */
enum { TR_UNINIT = 0, TR_INITING = 1, TR_READY = 2, TR_OFF = 3 };
static atomic_int tr_state;
static atomic_int tr_fd = -1;
static uint64_t tr_start_ns;
static uint64_t tr_stamp_start;    /* tr_stamp() when the file was opened */
static int tr_use_tsc;
static uint32_t tr_pid;            /* the process the open file belongs to */
static atomic_int tr_final;        /* set by the exit flush: later records are written at once */

static void tr_lock(void) { while (atomic_flag_test_and_set_explicit(&tr_reg_lock, memory_order_acquire)) ; }
static void tr_unlock(void) { atomic_flag_clear_explicit(&tr_reg_lock, memory_order_release); }

static uint64_t tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The record clock. A CLOCK_MONOTONIC read costs 55 ns on the project's VM and rdtsc 24 ns,
 * and every call is stamped, so the TSC is used where the kernel itself trusts it (its
 * clocksource is "tsc": synchronised across CPUs, constant rate). Plain rdtsc, not rdtscp or
 * lfence+rdtsc: those wait for earlier instructions and made a malloc/free pair cost 130 ns
 * instead of 50 ns here. The price: rdtsc may execute a little before the load that gave this
 * thread its pointer completes, so a free within about 100 ns of another thread's allocation
 * of the same block can sort before it; the replayer counts such pairs (alloc_of_live,
 * unknown_frees) rather than trusting them. Each block header carries a (ticks, ns) pair so
 * readers can convert ticks to time. */
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
static inline uint64_t tr_stamp(void) {
#if defined(__x86_64__)
  if (tr_use_tsc) return __rdtsc();
#endif
  return tr_now();
}

/* A message on stderr without stdio (which would allocate). */
static void tr_say(const char *a, const char *b, const char *c) {
  const char *parts[4] = {"liblarder-trace: ", a, b, c};
  for (int i = 0; i < 4; i++)
    if (parts[i]) { ssize_t r = write(2, parts[i], strlen(parts[i])); (void)r; }
  ssize_t r = write(2, "\n", 1); (void)r;
}

static void tr_write_all(int fd, const void *p, size_t len) {
  const char *c = p;
  while (len) {
    ssize_t w = write(fd, c, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;        /* disk full: the trace is short, the program goes on */
    c += w; len -= (size_t)w;
  }
}

/* One write() of the block header and the records: O_APPEND keeps concurrent blocks whole. */
static void tr_flush(struct tr_thread *th, uint32_t n) {
  int fd = atomic_load(&tr_fd);
  if (n == 0 || fd < 0) return;
  th->block.magic = LTR_BLOCK_MAGIC;
  th->block.tid = th->tid;
  th->block.count = n;
  th->block.thread_seq = th->seq;
  th->block.clock_ticks = tr_stamp() - tr_stamp_start;
  th->block.clock_ns = tr_now() - tr_start_ns;
  int saved = errno;
  tr_write_all(fd, &th->block, LTR_BLOCK_SIZE + (size_t)n * LTR_RECORD_SIZE);
  errno = saved;
}

static void tr_thread_exit(void *arg);

static struct tr_thread *tr_thread_new(void) {
  void *m = mmap(NULL, sizeof(struct tr_thread), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  struct tr_thread *th = m;
  th->tid = (uint32_t)syscall(SYS_gettid);
  th->seq = atomic_fetch_add(&tr_next_seq, 1);
  tls_seq = th->seq;
  tr_lock();
  th->next = tr_threads;
  tr_threads = th;
  tr_unlock();
  tls_thread = th;
  /* The key's destructor flushes at thread exit; setspecific needs no malloc for low keys. */
  if (tr_key_ok) pthread_setspecific(tr_key, th);
  return th;
}

static void tr_unregister(struct tr_thread *th) {
  tr_lock();
  for (struct tr_thread **pp = &tr_threads; *pp; pp = &(*pp)->next)
    if (*pp == th) { *pp = th->next; break; }
  tr_unlock();
}

/* Runs when a thread exits. Allocation calls it still makes (later destructors, libc's own
 * clean-up) are written one record at a time from the stack (tls_dead). */
static void tr_thread_exit(void *arg) {
  struct tr_thread *th = arg;
  if (!th || atomic_load(&tr_final)) return;  /* after the exit flush the registry owns it */
  tr_unregister(th);
  tr_flush(th, atomic_load_explicit(&th->n, memory_order_acquire));
  tls_thread = NULL;
  tls_dead = 1;
  munmap(th, sizeof *th);
}

/* A record that cannot go into a buffer (dying thread, after the exit flush). */
static void tr_record_now(const struct ltr_record *r, uint32_t seq) {
  int fd = atomic_load(&tr_fd);
  if (fd < 0) return;
  struct { struct ltr_block b; struct ltr_record r; } one;
  one.b.magic = LTR_BLOCK_MAGIC;
  one.b.tid = (uint32_t)syscall(SYS_gettid);
  one.b.count = 1;
  one.b.thread_seq = seq;
  one.b.clock_ticks = tr_stamp() - tr_stamp_start;
  one.b.clock_ns = tr_now() - tr_start_ns;
  one.r = *r;
  int saved = errno;
  tr_write_all(fd, &one, sizeof one);
  errno = saved;
}

static void tr_record(unsigned op, uint64_t size, unsigned align_log2, const void *in,
                      const void *out, uint64_t t) {
  if (TR_UNLIKELY(atomic_load_explicit(&tr_state, memory_order_relaxed) != TR_READY)) return;
  struct tr_thread *th = tls_thread;
  if (TR_UNLIKELY(!th || atomic_load_explicit(&tr_final, memory_order_relaxed))) {
    struct ltr_record r = {t - tr_stamp_start, (uint64_t)(uintptr_t)in, (uint64_t)(uintptr_t)out,
                           ltr_pack(op, size, align_log2)};
    if (tls_dead || atomic_load(&tr_final)) { tr_record_now(&r, tls_seq); return; }
    th = tr_thread_new();
    if (!th) { tr_record_now(&r, tls_seq); return; }
  }
  uint32_t n = atomic_load_explicit(&th->n, memory_order_relaxed);
  struct ltr_record *r = &th->buf[n];
  r->t = t - tr_stamp_start;
  r->addr_in = (uint64_t)(uintptr_t)in;
  r->addr_out = (uint64_t)(uintptr_t)out;
  r->packed = ltr_pack(op, size, align_log2);
  n++;
  if (TR_UNLIKELY(n == TR_BUF_RECORDS)) {
    tr_flush(th, n);
    n = 0;
  }
  atomic_store_explicit(&th->n, n, memory_order_release);
}

/* ---- the output file ---- */
static size_t tr_put_u64(char *dst, uint64_t v) {
  char tmp[24];
  size_t k = 0;
  do { tmp[k++] = (char)('0' + v % 10); v /= 10; } while (v);
  for (size_t i = 0; i < k; i++) dst[i] = tmp[k - 1 - i];
  return k;
}

/* Expands %p to the pid and %% to %; with no %p, a process other than the one that started
 * the recording (a forked child, or any exec'd or spawned descendant) adds ".<pid>" so it
 * never writes into another process's file. Returns 0, or -1 if the name is too long. */
static int tr_expand_for(const char *pattern, char *out, size_t cap, int add_pid, uint64_t pid) {
  size_t o = 0;
  int had_pid = 0;
  for (const char *p = pattern; *p; p++) {
    if (o + 24 >= cap) return -1;
    if (p[0] == '%' && p[1] == 'p') { o += tr_put_u64(out + o, pid); p++; had_pid = 1; }
    else if (p[0] == '%' && p[1] == '%') { out[o++] = '%'; p++; }
    else out[o++] = *p;
  }
  if (!had_pid && add_pid) {
    if (o + 24 >= cap) return -1;
    out[o++] = '.';
    o += tr_put_u64(out + o, pid);
  }
  out[o] = 0;
  return 0;
}
static int tr_expand(const char *pattern, char *out, size_t cap, int add_pid) {
  return tr_expand_for(pattern, out, cap, add_pid, (uint64_t)getpid());
}

/* Field 22 of /proc/PID/stat (starttime) and the program name (comm may be NULL); pid 0
 * is this process. 0 when the process does not exist. */
static uint64_t tr_proc_start_of(uint32_t pid, char comm[16]) {
  char buf[1024];
  uint64_t start = 0;
  char path[48] = "/proc/self/stat";
  if (pid) {
    memcpy(path, "/proc/", 6);
    size_t k = tr_put_u64(path + 6, pid);
    memcpy(path + 6 + k, "/stat", 6);
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
  if (comm && open_paren && close_paren && close_paren > open_paren) {
    size_t len = (size_t)(close_paren - open_paren - 1);
    if (len > 15) len = 15;
    memcpy(comm, open_paren + 1, len);
  }
  if (!close_paren) return 0;
  /* after ") " come fields 3.. ; starttime is field 22, i.e. the 20th after the paren */
  char *p = close_paren + 2;
  for (int field = 3; field < 22 && *p; p++)
    if (*p == ' ') field++;
  while (*p >= '0' && *p <= '9') start = start * 10 + (uint64_t)(*p++ - '0');
  return start;
}
static uint64_t tr_proc_start(char comm[16]) { return tr_proc_start_of(0, comm); }

static int tr_read_header(const char *path, struct ltr_header *h) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, h, sizeof *h);
  close(fd);
  return n == (ssize_t)sizeof *h && memcmp(h->magic, LTR_MAGIC, 8) == 0;
}

/* Is the file at path a trace of this very process (an earlier image, before an exec)? */
static int tr_is_ours(const char *path, uint32_t pid, uint64_t proc_start) {
  struct ltr_header h;
  return tr_read_header(path, &h) && h.pid == pid && h.proc_start == proc_start;
}

/* ---- the recorded process tree ----
 * The process that starts a recording is its root. It puts LARDER_TRACE_ROOT=<pid>:<start>
 * into its environment (tr_mark_environ), and exec and posix_spawn add it to an explicit
 * environment that lacks it, so every program image of the tree knows whether it is the
 * root (same pid and start time: the root after an exec) or a descendant. A descendant
 * whose environment lost the marker anyway (a program that builds its children's
 * environment from scratch) still recognises the root's file: its header names a process
 * that is running now. Without this an exec'd child of a fork with a name without %p
 * truncated and shared its parent's file (issue 10). */
#define TR_ROOT_VAR "LARDER_TRACE_ROOT"
static uint32_t tr_root_pid;
static uint64_t tr_root_start;
static char tr_root_env[64];        /* "LARDER_TRACE_ROOT=<pid>:<start>" */

static int tr_parse_root(const char *v, uint32_t *pid, uint64_t *start) {
  uint64_t a = 0, b = 0;
  const char *p = v;
  if (!p || *p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9') a = a * 10 + (uint64_t)(*p++ - '0');
  if (*p++ != ':' || *p < '0' || *p > '9') return 0;
  while (*p >= '0' && *p <= '9') b = b * 10 + (uint64_t)(*p++ - '0');
  if (*p || a == 0 || a > UINT32_MAX) return 0;
  *pid = (uint32_t)a;
  *start = b;
  return 1;
}

static void tr_set_root(uint32_t pid, uint64_t start) {
  tr_root_pid = pid;
  tr_root_start = start;
  size_t o = sizeof TR_ROOT_VAR;     /* "LARDER_TRACE_ROOT=" */
  memcpy(tr_root_env, TR_ROOT_VAR "=", o);
  o += tr_put_u64(tr_root_env + o, pid);
  tr_root_env[o++] = ':';
  o += tr_put_u64(tr_root_env + o, start);
  tr_root_env[o] = 0;
}

static int tr_env_has_root(char *const envp[]) {
  if (!envp) return 0;
  for (char *const *e = envp; *e; e++)
    if (strncmp(*e, TR_ROOT_VAR "=", sizeof TR_ROOT_VAR) == 0) return 1;
  return 0;
}

extern char **environ;

/* The root's marker into this process's own environment, without malloc: a copy of the
 * pointer array in a mapping of its own. setenv and putenv copy an array they did not
 * allocate before changing it, so nothing ever frees this one. Called from the constructor,
 * before the program's main, when no other thread reads the environment. */
static void tr_mark_environ(void) {
  if (!tr_root_env[0] || tr_env_has_root(environ)) return;
  size_t n = 0;
  if (environ)
    while (environ[n]) n++;
  char **arr = mmap(NULL, (n + 2) * sizeof(char *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arr == MAP_FAILED) return;
  for (size_t i = 0; i < n; i++) arr[i] = environ[i];
  arr[n] = tr_root_env;
  arr[n + 1] = NULL;
  environ = arr;
}

/* Decides who this program image is when it starts (not a fork child, which knows). */
static int tr_is_descendant(const char *pattern, uint32_t mypid, uint64_t mystart) {
  uint32_t rp;
  uint64_t rs;
  if (tr_parse_root(getenv(TR_ROOT_VAR), &rp, &rs)) {
    tr_set_root(rp, rs);
    return !(rp == mypid && rs == mystart);
  }
  /* No marker (an environment built from scratch, or a raw exec): the files tell.
   * 1. This process's own file from before an exec (same pid and start time) names the root. */
  char path[TR_PATH_MAX];
  struct ltr_header h;
  for (int add = 0; add < 2; add++)
    if (tr_expand(pattern, path, sizeof path - 16, add) == 0 && tr_read_header(path, &h) && h.pid == mypid &&
        h.proc_start == mystart && h.root_pid) {
      tr_set_root(h.root_pid, h.root_pid == mypid ? mystart : tr_proc_start_of(h.root_pid, NULL));
      return h.root_pid != mypid;
    }
  /* 2. The parent's file (with %p), or the root's file (without), written by a process that
   *    is running now. */
  uint32_t ppid = (uint32_t)getppid();
  int have_p = strstr(pattern, "%p") != NULL;
  if (tr_expand_for(pattern, path, sizeof path - 16, 0, have_p ? ppid : mypid) == 0 && tr_read_header(path, &h) &&
      h.pid != mypid && h.proc_start != 0 && (!have_p || h.pid == ppid) &&
      tr_proc_start_of(h.pid, NULL) == h.proc_start) {
    uint32_t root = h.root_pid ? h.root_pid : h.pid;
    tr_set_root(root, root == h.pid ? h.proc_start : tr_proc_start_of(root, NULL));
    return 1;
  }
  tr_set_root(mypid, mystart);
  return 0;
}

/* LARDER_TRACE_CLOCK=ns forces CLOCK_MONOTONIC; otherwise the TSC when the kernel uses it. */
static int tr_want_tsc(void) {
#if defined(__x86_64__)
  const char *want = getenv("LARDER_TRACE_CLOCK");
  if (want && *want) {
    if (strcmp(want, "ns") == 0) return 0;
    if (strcmp(want, "tsc") != 0) tr_say("LARDER_TRACE_CLOCK must be ns or tsc, not ", want, "; using the default");
  }
  char cs[32] = {0};
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, cs, sizeof cs - 1);
  close(fd);
  return n >= 3 && strncmp(cs, "tsc\n", 4) == 0;
#else
  return 0;
#endif
}

static void tr_open_file(int is_child) {
  const char *pattern = getenv("LARDER_TRACE_FILE");
  if (!pattern || !*pattern) pattern = "larder-trace.%p.ltr";
  char path[TR_PATH_MAX];
  struct ltr_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, LTR_MAGIC, 8);
  h.version = LTR_VERSION;
  h.header_size = LTR_HEADER_SIZE;
  h.record_size = LTR_RECORD_SIZE;
  h.pid = (uint32_t)getpid();
  tr_pid = h.pid;
  h.ppid = (uint32_t)getppid();
  h.proc_start = tr_proc_start(h.comm);
  /* A fork child is a descendant (it inherited the root from its parent); a starting image
   * finds out from the environment. */
  int add_pid = is_child || tr_is_descendant(pattern, h.pid, h.proc_start);
  h.root_pid = tr_root_pid;
  if (tr_expand(pattern, path, sizeof path - 16, add_pid) != 0) {
    tr_say("LARDER_TRACE_FILE is too long; not recording", NULL, NULL);
    atomic_store(&tr_state, TR_OFF);
    return;
  }
  /* An exec'd image has the pid and start time of the image before it: keep that file and
   * start "<name>.exec<n>" instead. */
  size_t base_len = strlen(path);
  while (tr_is_ours(path, h.pid, h.proc_start) && h.exec_seq < 1000) {
    h.exec_seq++;
    memcpy(path + base_len, ".exec", 5);
    size_t k = tr_put_u64(path + base_len + 5, h.exec_seq);
    path[base_len + 5 + k] = 0;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    tr_say("cannot create ", path, "; not recording");
    atomic_store(&tr_state, TR_OFF);
    return;
  }
  tr_use_tsc = tr_want_tsc();
  if (tr_use_tsc) h.flags |= LTR_FLAG_TSC;
  tr_start_ns = tr_now();
  tr_stamp_start = tr_stamp();
  h.start_ns = tr_start_ns;
  tr_write_all(fd, &h, sizeof h);
  atomic_store(&tr_fd, fd);
}

static void tr_atfork_prepare(void) { tr_lock(); }
static void tr_atfork_parent(void) { tr_unlock(); }

/* The child: a new file for the new pid; the parent's unwritten records stay the parent's. */
static void tr_atfork_child(void) {
  struct tr_thread *self = tls_thread, *th = tr_threads;
  tr_threads = NULL;
  tr_unlock();
  while (th) {                     /* other threads do not exist in the child */
    struct tr_thread *next = th->next;
    if (th != self) munmap(th, sizeof *th);
    th = next;
  }
  if (self) {
    self->next = NULL;
    tr_threads = self;
    self->tid = (uint32_t)syscall(SYS_gettid);
    self->seq = 0;
    tls_seq = 0;
    atomic_store(&self->n, 0);
  }
  atomic_store(&tr_next_seq, 1);
  int old = atomic_exchange(&tr_fd, -1);
  if (old >= 0) close(old);
  if (atomic_load(&tr_state) == TR_READY) tr_open_file(1);
}

static void tr_resolve(void) {
  real_malloc = (tr_malloc_fn)dlsym(RTLD_NEXT, "malloc");
  real_calloc = (tr_calloc_fn)dlsym(RTLD_NEXT, "calloc");
  real_realloc = (tr_realloc_fn)dlsym(RTLD_NEXT, "realloc");
  real_free = (tr_free_fn)dlsym(RTLD_NEXT, "free");
  real_posix_memalign = (tr_posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = (tr_memalign_fn)dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = (tr_memalign_fn)dlsym(RTLD_NEXT, "memalign");
  real_valloc = (tr_valloc_fn)dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = (tr_valloc_fn)dlsym(RTLD_NEXT, "pvalloc");
}

/* First call from any thread: find the real functions, open the file. A second thread that
 * arrives meanwhile waits; a nested call from dlsym on this thread is served by the arena. */
static __thread int tls_initing __attribute__((tls_model("initial-exec")));

static void tr_init(void) {
  int expect = TR_UNINIT;
  if (!atomic_compare_exchange_strong(&tr_state, &expect, TR_INITING)) {
    if (tls_initing) return;
    while (atomic_load(&tr_state) == TR_INITING) ;
    return;
  }
  tls_initing = 1;
  tr_resolve();
  tls_initing = 0;
  if (!real_malloc || !real_free || !real_calloc || !real_realloc) {
    tr_say("cannot find the next malloc with dlsym; not recording", NULL, NULL);
    atomic_store(&tr_state, TR_OFF);
    return;
  }
  tr_key_ok = pthread_key_create(&tr_key, tr_thread_exit) == 0;
  pthread_atfork(tr_atfork_prepare, tr_atfork_parent, tr_atfork_child);
  tr_open_file(0);
  int ready = TR_INITING;
  atomic_compare_exchange_strong(&tr_state, &ready, TR_READY);
}

__attribute__((constructor)) static void tr_ctor(void) {
  if (atomic_load(&tr_state) == TR_UNINIT) tr_init();
  if (atomic_load(&tr_state) == TR_READY) tr_mark_environ();
}

/* Writes every thread's buffer. At exit (final) later records are written as soon as they
 * are made. exec and _exit do not set final: in a vfork child they run on the parent's
 * memory, and the parent must go on buffering. */
static void tr_flush_registry(int final) {
  tr_lock();
  if (final) atomic_store(&tr_final, 1);
  for (struct tr_thread *th = tr_threads; th; th = th->next) {
    uint32_t n = atomic_exchange(&th->n, 0);
    tr_flush(th, n);
  }
  tr_unlock();
}

__attribute__((destructor)) static void tr_dtor(void) {
  if (atomic_load(&tr_state) != TR_READY) return;
  tr_flush_registry(1);
}

/* True when this call must not be recorded or must go to the start-up arena. */
static inline int tr_passthrough(void) {
  if (TR_UNLIKELY(atomic_load_explicit(&tr_state, memory_order_acquire) < TR_READY)) tr_init();
  return tls_depth != 0;
}

#define TR_CALL(expr) (tls_depth++, (expr)); tls_depth--

/* ---- the interposed functions ---- */
TR_EXPORT void *malloc(size_t size) {
  if (TR_UNLIKELY(!real_malloc)) {
    tr_init();
    if (!real_malloc) return tr_arena_alloc(size);
  }
  if (tls_depth) return real_malloc(size);
  void *p = TR_CALL(real_malloc(size));
  tr_record(LTR_MALLOC, size, 0, NULL, p, tr_stamp());
  return p;
}

TR_EXPORT void *calloc(size_t count, size_t size) {
  if (TR_UNLIKELY(!real_calloc)) {
    tr_init();
    if (!real_calloc) {
      size_t total;
      if (__builtin_mul_overflow(count, size, &total)) return NULL;
      return tr_arena_alloc(total);
    }
  }
  if (tls_depth) return real_calloc(count, size);
  void *p = TR_CALL(real_calloc(count, size));
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) total = SIZE_MAX;
  tr_record(LTR_CALLOC, total, 0, NULL, p, tr_stamp());
  return p;
}

TR_EXPORT void free(void *p) {
  if (TR_UNLIKELY(tr_in_arena(p))) return;
  if (TR_UNLIKELY(!real_free)) { tr_init(); if (!real_free) return; }
  if (tls_depth) { real_free(p); return; }
  tr_record(LTR_FREE, 0, 0, p, NULL, tr_stamp());
  TR_CALL(real_free(p));
}

TR_EXPORT void *realloc(void *p, size_t size) {
  if (TR_UNLIKELY(tr_in_arena(p))) {
    /* a block dlsym got from the arena: move it to the real heap, unrecorded */
    void *q = malloc(size);
    if (q) memcpy(q, p, size < (size_t)(tr_arena + sizeof tr_arena - (unsigned char *)p)
                            ? size : (size_t)(tr_arena + sizeof tr_arena - (unsigned char *)p));
    return q;
  }
  if (TR_UNLIKELY(!real_realloc)) {
    tr_init();
    if (!real_realloc) return p ? NULL : tr_arena_alloc(size);
  }
  if (tls_depth) return real_realloc(p, size);
  uint64_t t = tr_stamp();
  void *q = TR_CALL(real_realloc(p, size));
  /* a realloc that moves frees p: stamp it before the call (see the file comment), which makes
   * its new block's allocation early by the call's length; the readers resolve the overlap
   * that can give with another thread's use of that block (trace-format.md) */
  tr_record(LTR_REALLOC, size, 0, p, q, q == p ? tr_stamp() : t);
  return q;
}

/* Implemented here rather than forwarded: glibc's reallocarray calls realloc, which would
 * record the call a second time. */
TR_EXPORT void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    if (!tr_passthrough()) tr_record(LTR_REALLOCARRAY, LTR_SIZE_MAX, 0, p, NULL, tr_stamp());
    errno = ENOMEM;
    return NULL;
  }
  if (tr_passthrough() || TR_UNLIKELY(!real_realloc)) return realloc(p, total);
  uint64_t t = tr_stamp();
  void *q = TR_CALL(real_realloc(p, total));
  tr_record(LTR_REALLOCARRAY, total, 0, p, q, q == p ? tr_stamp() : t);
  return q;
}

static unsigned tr_log2_align(size_t a) {
  if (a == 0 || (a & (a - 1))) return LTR_ALIGN_BAD;
  return (unsigned)__builtin_ctzll((unsigned long long)a);
}

TR_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (tr_passthrough() || !real_posix_memalign) {
    if (!real_posix_memalign) return ENOMEM;
    return real_posix_memalign(out, align, size);
  }
  int rc = TR_CALL(real_posix_memalign(out, align, size));
  tr_record(LTR_POSIX_MEMALIGN, size, tr_log2_align(align), NULL, rc == 0 ? *out : NULL, tr_stamp());
  return rc;
}

#define TR_ALIGNED(name, op, fn)                                              \
  TR_EXPORT void *name(size_t align, size_t size) {                           \
    if (tr_passthrough() || !fn) return fn ? fn(align, size) : NULL;          \
    void *p = TR_CALL(fn(align, size));                                       \
    tr_record(op, size, tr_log2_align(align), NULL, p, tr_stamp());             \
    return p;                                                                 \
  }
TR_ALIGNED(aligned_alloc, LTR_ALIGNED_ALLOC, real_aligned_alloc)
TR_ALIGNED(memalign, LTR_MEMALIGN, real_memalign)

#define TR_PAGE_ALIGNED(name, op, fn)                                         \
  TR_EXPORT void *name(size_t size) {                                         \
    if (tr_passthrough() || !fn) return fn ? fn(size) : NULL;                 \
    void *p = TR_CALL(fn(size));                                              \
    tr_record(op, size, 0, NULL, p, tr_stamp());                                \
    return p;                                                                 \
  }
TR_PAGE_ALIGNED(valloc, LTR_VALLOC, real_valloc)
TR_PAGE_ALIGNED(pvalloc, LTR_PVALLOC, real_pvalloc)

/* ---- leaving without destructors: exec replaces the image and _exit skips atexit, so both
 * write every buffer first. Records after a failed exec are written one at a time. ---- */
/* A vfork child (posix_spawn, Python's subprocess) shares the parent's memory and runs no
 * atfork handler, so its pid differs from the one the file was opened for: it must leave
 * the buffers alone, as the parent's other threads are still filling them. */
static void tr_flush_all(void) {
  if (atomic_load(&tr_state) == TR_READY && (uint32_t)getpid() == tr_pid) tr_flush_registry(0);
}

TR_EXPORT __attribute__((noreturn)) void _exit(int status) {
  tr_flush_all();
  for (;;) syscall(SYS_exit_group, status);
}
TR_EXPORT __attribute__((noreturn)) void _Exit(int status) { _exit(status); }

typedef int (*tr_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*tr_execv_fn)(const char *, char *const[]);
typedef int (*tr_fexecve_fn)(int, char *const[], char *const[]);

#define TR_NEXT(type, name) ((type)dlsym(RTLD_NEXT, name))

/* envp with the root marker added when it lacks it (see tr_mark_environ), in a VLA of the
 * caller's frame: no malloc, and safe in a vfork child. */
static size_t tr_env_len(char *const envp[]) {
  size_t n = 0;
  if (envp)
    while (envp[n]) n++;
  return n;
}
#define TR_WITH_ROOT(envp, out)                                                  \
  size_t out##_n = (tr_root_env[0] && !tr_env_has_root(envp)) ? tr_env_len(envp) + 2 : 1; \
  char *out##_arr[out##_n];                                                   \
  char *const *out = envp;                                                    \
  if (out##_n > 1) {                                                          \
    for (size_t i = 0; i + 2 < out##_n; i++) out##_arr[i] = envp[i];          \
    out##_arr[out##_n - 2] = tr_root_env;                                     \
    out##_arr[out##_n - 1] = NULL;                                            \
    out = out##_arr;                                                          \
  }

TR_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  tr_flush_all();
  tr_execve_fn f = TR_NEXT(tr_execve_fn, "execve");
  if (!f) { errno = ENOSYS; return -1; }
  TR_WITH_ROOT(envp, env2);
  return f(path, argv, env2);
}
TR_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }
TR_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  tr_flush_all();
  tr_execve_fn f = TR_NEXT(tr_execve_fn, "execvpe");
  if (!f) { errno = ENOSYS; return -1; }
  TR_WITH_ROOT(envp, env2);
  return f(file, argv, env2);
}
TR_EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }
TR_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  tr_flush_all();
  tr_fexecve_fn f = TR_NEXT(tr_fexecve_fn, "fexecve");
  if (!f) { errno = ENOSYS; return -1; }
  TR_WITH_ROOT(envp, env2);
  return f(fd, argv, env2);
}

/* posix_spawn runs the child on this process's memory (vfork) and execs there through
 * libc's internal execve, which the wrappers above do not see: the marker goes into the
 * environment here. The child's new image then writes its own file. */
#include <spawn.h>
typedef int (*tr_spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                           const posix_spawnattr_t *, char *const[], char *const[]);
TR_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  tr_spawn_fn f = TR_NEXT(tr_spawn_fn, "posix_spawn");
  if (!f) return ENOSYS;
  TR_WITH_ROOT(envp, env2);
  return f(pid, path, fa, attr, argv, env2);
}
TR_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  tr_spawn_fn f = TR_NEXT(tr_spawn_fn, "posix_spawnp");
  if (!f) return ENOSYS;
  TR_WITH_ROOT(envp, env2);
  return f(pid, file, fa, attr, argv, env2);
}

/* execl, execlp, execle: gather the variadic arguments into an array on the stack. */
#include <stdarg.h>
#define TR_GATHER(first, ap, argv, want_env)                                    \
  size_t n = 1;                                                               \
  va_start(ap, first);                                                        \
  while (va_arg(ap, char *)) n++;                                             \
  va_end(ap);                                                                 \
  char *argv[n + 1];                                                          \
  argv[0] = (char *)first;                                                    \
  va_start(ap, first);                                                        \
  for (size_t i = 1; i <= n; i++) argv[i] = va_arg(ap, char *);              \
  if (want_env) envp = va_arg(ap, char **);                                   \
  va_end(ap)

TR_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  char **envp = environ;
  TR_GATHER(arg, ap, argv, 0);
  return execve(path, argv, envp);
}
TR_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  char **envp = environ;
  TR_GATHER(arg, ap, argv, 0);
  return execvpe(file, argv, envp);
}
TR_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  char **envp = NULL;
  TR_GATHER(arg, ap, argv, 1);
  return execve(path, argv, envp);
}
