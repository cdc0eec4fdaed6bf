/* trace-replay: the thesis's driver program (seed 003 §5.3-5.7, Appendix A) for larder traces.
 *
 *   trace-replay FILE [--mode thesis|faithful] [-t N] [--iterations I] [--timeseries OUT.csv]
 *                     [--no-rss] [--usable] [--split-above B]
 *
 * thesis:   T threads each replay the whole trace I times (seed 003 Table 5-1, Appendix A).
 * faithful: each recorded thread is replayed by its own thread; a free of a block another
 *           thread allocated stays a cross-thread free and waits until that allocation ran.
 *
 * Every allocated block is written (one byte per page), so RSS is real (seed 003 §5.4).
 * Live bytes are counted from the requested sizes (§5.5); the heap's RSS is the Rss of the
 * [heap] and anonymous mappings in /proc/self/smaps (§5.4) minus the replayer's own tables,
 * whose resident pages mincore() counts (they are all mmap'd by trace_read.c, never malloc'd).
 * The heap is sampled when live bytes pass their last sampled peak by 1/256, at regular
 * intervals, and at the end; fragmentation follows the four definitions of §3.7.2, the fourth
 * (peak heap / peak live) first. Time is CLOCK_MONOTONIC_RAW (§5.6).
 *
 * --usable splits the fourth into the allocator's rounding and the rest: every block's
 * malloc_usable_size is counted as it is allocated and freed, and the peak of those bytes
 * (usable) gives internal fragmentation (peak usable / peak live) and external (peak heap /
 * peak usable); the two multiply to the fourth. A size class that rounds 1032 B to 1152 B
 * costs 11.6% however well the heap is laid out. The calls add to time_s: an untimed pass.
 *
 * --split-above B serves every malloc, calloc and realloc of more than B bytes from the C
 * library's own malloc (looked up in libc.so.6 itself, past any preloaded allocator), the rest
 * from the allocator under test: what that allocator's figures would be with a coalescing,
 * best-fit tier (glibc's) for its larger blocks (issue 15, docs/results.md). A realloc across
 * the split moves the block. Aligned requests stay with the allocator under test. Under glibc
 * the split changes nothing.
 *
 * Exit status: 0 done, 1 failure while running, 2 bad flags, 3 unreadable or invalid trace. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "frag.h"
#include "trace_read.h"

enum rp_mode { RP_THESIS, RP_FAITHFUL };

struct rp_sample { double t_s; uint64_t ops; int64_t live; uint64_t heap; int kind; };
enum { RP_SAMPLE_START, RP_SAMPLE_REGULAR, RP_SAMPLE_PEAK, RP_SAMPLE_END };
static const char *rp_sample_kind[] = {"start", "regular", "peak", "end"};

/* One replaying thread; padded so counters of two threads never share a line. */
struct rp_worker {
  _Alignas(128) int index;
  pthread_t thread;
  void **objs;                 /* object id -> block (thesis: own table; faithful: shared) */
  const struct ltr_event *ops;    /* the ops this worker runs */
  uint64_t nops;
  int64_t live, pending, peak_live;
  int64_t usable, peak_usable;       /* --usable, one thread: malloc_usable_size of live blocks */
  uint64_t done_ops, failures, bad_align, sampling_ns;
  _Alignas(128) _Atomic uint64_t progress;   /* faithful: ops finished this iteration */
};

static struct {
  struct ltr_trace tr;
  enum rp_mode mode;
  int threads;
  uint64_t iterations;
  int rss;
  int usable;                                 /* --usable: count malloc_usable_size too */
  uint64_t split_above;                       /* --split-above: larger blocks from libc's malloc; 0: none */
  void *(*libc_malloc)(size_t);
  void *(*libc_calloc)(size_t, size_t);
  void *(*libc_realloc)(void *, size_t);
  void (*libc_free)(void *);
  const char *timeseries;
  struct rp_worker *w;
  _Alignas(128) _Atomic int64_t live;         /* published live bytes, all workers */
  _Alignas(128) _Atomic int64_t next_peak_sample;
  atomic_flag sampling;
  int64_t batch;                              /* publish live bytes in steps of this many */
  uint64_t regular_every;
  struct rp_sample *samples;
  size_t nsamples, sample_cap, dropped_samples;
  uint64_t t0_ns;
  uint64_t heap_max;
  pthread_barrier_t start, pass;               /* start: workers + main; pass: workers */
  _Alignas(128) _Atomic int64_t peak_live;    /* highest published live bytes */
  _Alignas(128) _Atomic int64_t usable_live, usable_peak; /* --usable with several threads */
  char *smaps_buf;
  size_t smaps_cap;
  int statm_fd;
  int clock;                                  /* the worker whose progress places samples */
  int smaps_always;                           /* --rss-method smaps: the thesis's reading at every sample */
  uint64_t page, own;
  int64_t statm_offset;
} rp;

static uint64_t rp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void rp_usage(FILE *f) {
  fprintf(f,
    "usage: trace-replay FILE [--mode thesis|faithful] [-t|--threads N] [--iterations I]\n"
    "                    [--timeseries OUT.csv] [--rss-method statm|smaps] [--no-rss]\n"
    "  FILE, --trace FILE a larder trace (liblarder-trace.so), plain or gzip-compressed\n"
    "  --mode thesis      N threads each replay the whole trace I times (default)\n"
    "  --mode faithful    one thread per recorded thread; cross-thread frees wait for their\n"
    "                     allocation (-t must be omitted or equal the recorded thread count)\n"
    "  -t, --threads N    replaying threads, 1..1024 (default 1)\n"
    "  --iterations I     passes over the trace, 1..10^9 (default 1)\n"
    "  --timeseries F     write live bytes and heap RSS over time to F (CSV)\n"
    "  --rss-method M     statm (default): read the heap from /proc/self/statm while replaying,\n"
    "                     calibrated against smaps; smaps: read smaps at every sample (exact,\n"
    "                     about 1 ms per 100 MB resident, excluded from time_s)\n"
    "  --no-rss           do not sample RSS (time only)\n"
    "  --usable           count malloc_usable_size of every block: fragmentation split into\n"
    "                     internal (the allocator's rounding) and external (the rest);\n"
    "                     the calls add to the time, so use it on an untimed pass\n"
    "  --split-above B    blocks of more than B bytes come from the C library's own malloc,\n"
    "                     the rest from the allocator under test (a what-if: that allocator\n"
    "                     with a coalescing tier above B)\n");
}

static int rp_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!s || !*s) return -1;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static void rp_bad(const char *msg, const char *arg) {
  fprintf(stderr, "trace-replay: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
  rp_usage(stderr);
  exit(2);
}

/* ---- heap RSS (seed 003 §5.4): Rss of [heap] and anonymous mappings, minus our own ---- */
static int rp_counted_mapping(const char *line) {
  /* "start-end perms offset dev inode   path" */
  const char *p = line;
  for (int field = 0; field < 5; field++) {
    while (*p && *p != ' ') p++;
    while (*p == ' ') p++;
  }
  if (*p == '\n' || *p == 0) return 1;                 /* anonymous */
  if (strncmp(p, "[heap]", 6) == 0) return 1;
  if (strncmp(p, "[anon:", 6) == 0) return 1;          /* named anonymous memory */
  return 0;                                            /* files, [stack], [vdso], ... */
}

static uint64_t rp_smaps_heap(void) {
  int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t kb = 0;
  int counted = 0;
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, rp.smaps_buf + have, rp.smaps_cap - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    rp.smaps_buf[have] = 0;
    char *line = rp.smaps_buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) {
        const char *dash = strchr(line, '-');
        if (dash && dash < nl) counted = rp_counted_mapping(line);
      } else if (counted && strncmp(line, "Rss:", 4) == 0) {
        kb += strtoull(line + 4, NULL, 10);
      }
      line = nl + 1;
    }
    have = (size_t)(rp.smaps_buf + have - line);
    memmove(rp.smaps_buf, line, have);
  }
  close(fd);
  return kb * 1024;
}

/* The precise reading: smaps walks the page tables of every mapping, so it costs about a
 * millisecond per 100 MB resident; it is taken at the start and at the end. */
static uint64_t rp_heap_rss_smaps(void) {
  uint64_t all = rp_smaps_heap(), own = ltr_own_resident();
  return all > own ? all - own : 0;
}

/* The cheap reading used while replaying: anonymous resident pages from /proc/self/statm
 * (resident - shared), less what is anonymous but not heap (the main stack, copied-on-write
 * pages of libraries: rp.statm_offset, measured against smaps at the start) and less our own
 * tables (rp.own, settled before the start because every table is pre-faulted). The kernel's
 * RSS counters are per-CPU and may lag by a few hundred KiB; the end-of-run difference
 * between the two readings is reported as rss_method_gap_bytes. */
static uint64_t rp_statm_anon(void) {
  char buf[128];
  ssize_t n = pread(rp.statm_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = buf;
  strtoull(p, &p, 10);
  uint64_t resident = strtoull(p, &p, 10), shared = strtoull(p, &p, 10);
  return resident > shared ? (resident - shared) * rp.page : 0;
}

static uint64_t rp_heap_rss(void) {
  if (rp.smaps_always) return rp_heap_rss_smaps();
  int64_t v = (int64_t)rp_statm_anon() - rp.statm_offset - (int64_t)rp.own;
  return v > 0 ? (uint64_t)v : 0;
}

static void rp_take_sample(int kind, uint64_t ops) {
  if (!rp.rss) return;
  uint64_t heap = rp_heap_rss();
  if (heap > rp.heap_max) rp.heap_max = heap;
  if (rp.nsamples == rp.sample_cap) { rp.dropped_samples++; return; }
  struct rp_sample *s = &rp.samples[rp.nsamples++];
  s->t_s = (double)(rp_now() - rp.t0_ns) / 1e9;
  s->ops = ops;
  s->live = atomic_load(&rp.live);
  s->heap = heap;
  s->kind = kind;
}

/* Samples are placed by the progress of one worker (the one with the most calls: in faithful
 * mode the recorded main thread may do little), the same clock for every allocator. */
static uint64_t rp_progress(void) { return __atomic_load_n(&rp.w[rp.clock].done_ops, __ATOMIC_RELAXED); }

/* Called by whichever worker pushed live bytes past the next peak mark. */
static void rp_maybe_peak_sample(struct rp_worker *w, int64_t g) {
  if (g < atomic_load_explicit(&rp.next_peak_sample, memory_order_relaxed)) return;
  if (atomic_flag_test_and_set(&rp.sampling)) return;
  uint64_t t = rp_now();
  int64_t cur = atomic_load(&rp.live);
  if (cur >= atomic_load(&rp.next_peak_sample)) {
    rp_take_sample(RP_SAMPLE_PEAK, rp_progress());
    int64_t step = cur / 1024 > 4096 ? cur / 1024 : 4096;
    atomic_store(&rp.next_peak_sample, cur + step);
  }
  atomic_flag_clear(&rp.sampling);
  w->sampling_ns += rp_now() - t;
}

static void rp_regular_sample(struct rp_worker *w) {
  while (atomic_flag_test_and_set(&rp.sampling)) sched_yield();
  uint64_t t = rp_now();
  rp_take_sample(RP_SAMPLE_REGULAR, rp_progress());
  atomic_flag_clear(&rp.sampling);
  w->sampling_ns += rp_now() - t;
}

/* peak = max(peak, v), for a peak several workers raise. */
static inline void rp_raise_peak(_Atomic int64_t *peak, int64_t v) {
  int64_t pk = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > pk && !atomic_compare_exchange_weak(peak, &pk, v)) ;
}

static inline void rp_account(struct rp_worker *w, int64_t delta) {
  w->live += delta;
  if (w->live > w->peak_live) w->peak_live = w->live;
  if (rp.threads == 1) {         /* alone: no read-modify-write on the shared counter */
    atomic_store_explicit(&rp.live, w->live, memory_order_relaxed);
    if (delta > 0 && rp.rss) rp_maybe_peak_sample(w, w->live);
    return;
  }
  w->pending += delta;
  if (w->pending >= rp.batch || w->pending <= -rp.batch) {
    int64_t g = atomic_fetch_add_explicit(&rp.live, w->pending, memory_order_relaxed) + w->pending;
    w->pending = 0;
    rp_raise_peak(&rp.peak_live, g);
    if (delta > 0 && rp.rss) rp_maybe_peak_sample(w, g);
  }
}

/* --usable: a block's usable bytes come (delta > 0) or go. Several threads count exactly on
 * one shared counter: a cross-thread free in faithful mode leaves no per-thread sum to trust. */
static void rp_account_usable(struct rp_worker *w, void *p, int sign) {
  int64_t delta = sign * (int64_t)malloc_usable_size(p);
  if (rp.threads == 1) {
    w->usable += delta;
    if (w->usable > w->peak_usable) w->peak_usable = w->usable;
    return;
  }
  rp_raise_peak(&rp.usable_peak, atomic_fetch_add_explicit(&rp.usable_live, delta, memory_order_relaxed) + delta);
}

/* Writes one byte per page so the pages are resident, as the thesis's driver uses them. */
static inline void rp_touch(void *p, uint64_t size) {
  unsigned char *c = p;
  for (uint64_t i = 0; i < size; i += 4096) c[i] = (unsigned char)i;
  if (size) c[size - 1] = 1;
}

static void rp_wait_for(uint32_t thread, uint64_t pos) {
  struct rp_worker *owner = &rp.w[thread];
  for (int spins = 0; atomic_load_explicit(&owner->progress, memory_order_acquire) <= pos; spins++) {
    if (spins < 64) __builtin_ia32_pause();
    else sched_yield();
  }
}

/* --split-above: a block from libc's malloc is kept in the object table with its low bit set
 * (every block is at least 8-byte aligned), so that its free goes back there. */
static inline int rp_split_is_libc(const void *p) { return (int)((uintptr_t)p & 1u); }
static inline void *rp_split_block(void *p) { return (void *)((uintptr_t)p & ~(uintptr_t)1); }
static void rp_split_free(void *p) {
  if (rp_split_is_libc(p)) rp.libc_free(rp_split_block(p));
  else free(p);
}
/* Places a malloc, calloc or realloc under the split (*out: the block, tagged if libc's, or
 * NULL); 0 for any other operation, which the allocator under test serves as before. A free
 * of a libc block is placed here too. */
static int rp_split_op(const struct ltr_event *o, void *in, size_t size, void **out) {
  int want_libc = size > rp.split_above, in_libc = in && rp_split_is_libc(in);
  void *block = in ? rp_split_block(in) : NULL, *p = NULL;
  switch (o->kind) {
  case LTR_FREE:
    if (!in_libc) return 0;
    rp.libc_free(block);
    *out = NULL;
    return 1;
  case LTR_MALLOC: p = want_libc ? rp.libc_malloc(size) : malloc(size); break;
  case LTR_CALLOC: p = want_libc ? rp.libc_calloc(1, size) : calloc(1, size); break;
  case LTR_REALLOC:
  case LTR_REALLOCARRAY:
    if (!in) p = want_libc ? rp.libc_malloc(size) : malloc(size);
    else if (in_libc == want_libc) p = want_libc ? rp.libc_realloc(block, size) : realloc(block, size);
    else { /* across the split: moved */
      p = want_libc ? rp.libc_malloc(size) : malloc(size);
      if (!p) break; /* as a failed realloc: the old block was already counted out; it stays leaked */
      size_t old = rp.tr.obj_size[o->obj_in];
      memcpy(p, block, old < size ? old : size);
      rp_split_free(in);
    }
    break;
  default:
    return 0;
  }
  *out = p && want_libc ? (void *)((uintptr_t)p | 1u) : p;
  return 1;
}

static void rp_run_op(struct rp_worker *w, const struct ltr_event *o) {
  void **objs = w->objs;
  const struct ltr_trace *tr = &rp.tr;
  void *in = NULL, *p = NULL;
  if (o->obj_in != LTR_NONE) {
    if (rp.mode == RP_FAITHFUL && tr->obj_thread[o->obj_in] != (uint32_t)w->index)
      rp_wait_for(tr->obj_thread[o->obj_in], tr->obj_pos[o->obj_in]);
    in = objs[o->obj_in];
    objs[o->obj_in] = NULL;
    if (in) rp_account(w, -(int64_t)tr->obj_size[o->obj_in]);
    if (in && rp.usable) rp_account_usable(w, in, -1); /* before realloc or free releases it */
  }
  size_t size = (size_t)o->size;
  size_t align = o->align_log2 < 64 ? (size_t)1 << o->align_log2 : 0;
  if (rp.split_above && rp_split_op(o, in, size, &p)) goto placed;
  switch (o->kind) {
  case LTR_FREE: free(in); return;
  case LTR_MALLOC: p = malloc(size); break;
  case LTR_CALLOC: p = calloc(1, size); break;
  case LTR_REALLOC:
  case LTR_REALLOCARRAY: p = realloc(in, size); break;
  case LTR_POSIX_MEMALIGN:
    if (!align || align < sizeof(void *)) { w->bad_align++; return; }
    if (posix_memalign(&p, align, size) != 0) p = NULL;
    break;
  case LTR_ALIGNED_ALLOC:
    if (!align) { w->bad_align++; return; }
    p = aligned_alloc(align, size);
    break;
  case LTR_MEMALIGN:
    if (!align) { w->bad_align++; return; }
    p = memalign(align, size);
    break;
  case LTR_VALLOC: p = valloc(size); break;
  case LTR_PVALLOC: p = pvalloc(size); break;
  default: return;
  }
placed:
  if (o->obj_out == LTR_NONE) {       /* the recorded call failed */
    rp_split_free(p);
    return;
  }
  if (!p) { w->failures++; return; }
  rp_touch(rp_split_block(p), size);
  objs[o->obj_out] = p;
  rp_account(w, (int64_t)size);
  if (rp.usable) rp_account_usable(w, p, 1);
}

/* Frees what the trace left live, so every iteration starts from the same state. */
static void rp_free_leftovers(struct rp_worker *w) {
  for (uint64_t id = 0; id < rp.tr.nobjects; id++)
    if (w->objs[id]) {
      if (rp.usable) rp_account_usable(w, w->objs[id], -1);
      rp_split_free(w->objs[id]);
      w->objs[id] = NULL;
      rp_account(w, -(int64_t)rp.tr.obj_size[id]);
    }
}

static void *rp_worker_main(void *arg) {
  struct rp_worker *w = arg;
  pthread_barrier_wait(&rp.start);
  for (uint64_t it = 0; it < rp.iterations; it++) {
    for (uint64_t i = 0; i < w->nops; i++) {
      rp_run_op(w, &w->ops[i]);
      __atomic_store_n(&w->done_ops, w->done_ops + 1, __ATOMIC_RELAXED);
      if (rp.mode == RP_FAITHFUL) atomic_store_explicit(&w->progress, i + 1, memory_order_release);
      if (w->index == rp.clock && rp.rss && w->done_ops % rp.regular_every == 0) rp_regular_sample(w);
    }
    if (rp.mode == RP_THESIS) {
      rp_free_leftovers(w);
    } else {
      pthread_barrier_wait(&rp.pass);      /* everyone done with this pass */
      if (w->index == 0) rp_free_leftovers(w);
      pthread_barrier_wait(&rp.pass);
      atomic_store(&w->progress, 0);
      pthread_barrier_wait(&rp.pass);
    }
  }
  /* publish what is still pending so the final count is exact */
  atomic_fetch_add(&rp.live, w->pending);
  w->pending = 0;
  return NULL;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  uint64_t threads = 0, iterations = 1;
  rp.mode = RP_THESIS;
  rp.rss = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    char name[64];
    if (a[0] == '-' && a[1] == '-' && strchr(a, '=')) {
      size_t n = (size_t)(strchr(a, '=') - a);
      if (n >= sizeof name) rp_bad("unknown flag", a);
      memcpy(name, a, n); name[n] = 0;
      val = strchr(a, '=') + 1;
      a = name;
    }
#define NEXT() (val ? val : (i + 1 < argc ? argv[++i] : (rp_bad("missing value for", a), "")))
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { rp_usage(stdout); return 0; }
    else if (!strcmp(a, "--mode")) {
      const char *m = NEXT();
      if (!strcmp(m, "thesis")) rp.mode = RP_THESIS;
      else if (!strcmp(m, "faithful")) rp.mode = RP_FAITHFUL;
      else rp_bad("--mode must be thesis or faithful, not", m);
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
      if (rp_parse_u64(NEXT(), 1, 1024, &threads)) rp_bad("--threads takes 1..1024", argv[i]);
    } else if (!strcmp(a, "--iterations") || !strcmp(a, "-i")) {
      if (rp_parse_u64(NEXT(), 1, 1000000000, &iterations)) rp_bad("--iterations takes 1..10^9", argv[i]);
    } else if (!strcmp(a, "--timeseries")) {
      rp.timeseries = NEXT();
      if (!*rp.timeseries) rp_bad("--timeseries needs a file name", NULL);
    } else if (!strcmp(a, "--trace")) {     /* the file as a flag, for harness suite tables */
      const char *f = NEXT();
      if (path) rp_bad("more than one trace file", f);
      path = f;
    } else if (!strcmp(a, "--rss-method")) {
      const char *m = NEXT();
      if (!strcmp(m, "smaps")) rp.smaps_always = 1;
      else if (strcmp(m, "statm") != 0) rp_bad("--rss-method must be statm or smaps, not", m);
    } else if (!strcmp(a, "--no-rss")) {
      if (val) rp_bad("--no-rss takes no value", NULL);
      rp.rss = 0;
    } else if (!strcmp(a, "--usable")) {
      if (val) rp_bad("--usable takes no value", NULL);
      rp.usable = 1;
    } else if (!strcmp(a, "--split-above")) {
      if (rp_parse_u64(NEXT(), 1, UINT64_MAX / 2, &rp.split_above)) rp_bad("--split-above takes a size in bytes, at least 1", argv[i]);
    } else if (a[0] == '-' && a[1]) {
      rp_bad("unknown flag", a);
    } else if (!path) {
      path = a;
    } else {
      rp_bad("more than one trace file", a);
    }
#undef NEXT
  }
  if (!path) rp_bad("no trace file given", NULL);
  if (rp.timeseries && !rp.rss) rp_bad("--timeseries needs RSS samples; drop --no-rss", NULL);
  if (rp.split_above) {
    /* libc.so.6's own symbols: dlsym on its handle looks in it and its dependencies only, past
     * an allocator preloaded in front of it */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc) {
      *(void **)&rp.libc_malloc = dlsym(libc, "malloc");
      *(void **)&rp.libc_calloc = dlsym(libc, "calloc");
      *(void **)&rp.libc_realloc = dlsym(libc, "realloc");
      *(void **)&rp.libc_free = dlsym(libc, "free");
    }
    if (!rp.libc_malloc || !rp.libc_calloc || !rp.libc_realloc || !rp.libc_free) {
      fprintf(stderr, "trace-replay: --split-above needs the C library's malloc (libc.so.6), not found\n");
      return 2;
    }
    if (rp.usable) rp_bad("--split-above and --usable do not go together (two allocators' usable sizes)", NULL);
  }

  char err[512];
  if (ltr_load(path, &rp.tr, err, sizeof err) != 0) {
    fprintf(stderr, "trace-replay: %s\n", err);
    return 3;
  }
  struct ltr_trace *tr = &rp.tr;
  /* One process of a recorded tree: say so, and that its relatives have files of their own
   * (docs/traces.md "Process trees"; `larder-bench trace stats FILE` lists them). */
  const struct ltr_header *hd = &tr->header;
  if (hd->root_pid && (hd->root_pid != hd->pid || hd->exec_seq))
    fprintf(stderr,
            "trace-replay: %s is one process image (pid %u, %.16s, image %u) of a recorded tree whose root is pid %u; "
            "replaying it alone (`larder-bench trace stats %s` lists the tree's files)\n",
            path, hd->pid, hd->comm, hd->exec_seq + 1, hd->root_pid, path);
  if (rp.mode == RP_FAITHFUL) {
    if (threads && threads != tr->nthreads) {
      fprintf(stderr, "trace-replay: --mode faithful replays the %u recorded threads; -t %" PRIu64 " does not match\n",
              tr->nthreads, threads);
      return 2;
    }
    threads = tr->nthreads ? tr->nthreads : 1;
  } else if (!threads) {
    threads = 1;
  }
  rp.threads = (int)threads;
  rp.iterations = iterations;
  /* thesis mode with several threads publishes live bytes in 16 KiB steps so that counting
   * does not serialise the workers; faithful mode counts exactly, its order is the point */
  rp.batch = rp.threads == 1 || rp.mode == RP_FAITHFUL ? 1 : 16384;

  /* our tables: workers, object tables, per-thread op lists, stacks, samples, smaps buffer */
  rp.w = ltr_map(sizeof(struct rp_worker) * (size_t)rp.threads);
  rp.sample_cap = 16384;
  rp.samples = ltr_map(rp.sample_cap * sizeof *rp.samples);
  rp.smaps_cap = 1 << 20;
  rp.smaps_buf = ltr_map(rp.smaps_cap);
  if (!rp.w || !rp.samples || !rp.smaps_buf) { fprintf(stderr, "trace-replay: out of memory\n"); return 1; }
  void **shared_objs = NULL;
  struct ltr_event *split = NULL;
  if (rp.mode == RP_FAITHFUL) {
    shared_objs = ltr_map((tr->nobjects + 1) * sizeof(void *));
    split = ltr_map((tr->nops + 1) * sizeof *split);
    if (!shared_objs || !split) { fprintf(stderr, "trace-replay: out of memory\n"); return 1; }
    uint64_t at = 0;
    for (int k = 0; k < rp.threads; k++) {
      rp.w[k].ops = split + at;
      at += tr->thread_nops[k];
    }
    for (uint64_t i = 0; i < tr->nops; i++) {
      struct rp_worker *w = &rp.w[tr->ops[i].thread];
      ((struct ltr_event *)w->ops)[w->nops++] = tr->ops[i];
    }
  }
  for (int k = 0; k < rp.threads; k++) {
    struct rp_worker *w = &rp.w[k];
    w->index = k;
    if (rp.mode == RP_THESIS) {
      w->ops = tr->ops;
      w->nops = tr->nops;
      w->objs = ltr_map((tr->nobjects + 1) * sizeof(void *));
      if (!w->objs) { fprintf(stderr, "trace-replay: out of memory for %d object tables\n", rp.threads); return 1; }
    } else {
      w->objs = shared_objs;
    }
    /* fault the tables in now, so our own resident size is settled before measuring */
    memset(w->objs, 0, (tr->nobjects + 1) * sizeof(void *));
  }
  for (int k = 1; k < rp.threads; k++)
    if (rp.w[k].nops > rp.w[rp.clock].nops) rp.clock = k;
  uint64_t ops0 = rp.w[rp.clock].nops * iterations;
  rp.regular_every = ops0 / 1024 > 0 ? ops0 / 1024 : 1;
  atomic_store(&rp.next_peak_sample, 4096);

  pthread_barrier_init(&rp.start, NULL, (unsigned)rp.threads + 1);
  pthread_barrier_init(&rp.pass, NULL, (unsigned)rp.threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  /* the workers' stacks are ours too: mapped and faulted in before our share is measured */
  size_t stack_size = 256 * 1024;
  void **stacks = ltr_map(sizeof(void *) * (size_t)rp.threads);
  for (int k = 0; stacks && k < rp.threads; k++) {
    stacks[k] = ltr_map(stack_size);
    if (!stacks[k]) { stacks = NULL; break; }
    memset(stacks[k], 0, stack_size);
  }
  if (!stacks) { fprintf(stderr, "trace-replay: out of memory for thread stacks\n"); return 1; }
  rp.t0_ns = rp_now();
  memset(rp.samples, 0, rp.sample_cap * sizeof *rp.samples);
  rp.page = (uint64_t)sysconf(_SC_PAGESIZE);
  rp.statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (rp.rss && rp.statm_fd < 0) { fprintf(stderr, "trace-replay: cannot read /proc/self/statm\n"); return 1; }
  uint64_t heap_start = 0;
  if (rp.rss) {
    uint64_t smaps_all = rp_smaps_heap();
    rp.statm_offset = (int64_t)rp_statm_anon() - (int64_t)smaps_all;
    rp.own = ltr_own_resident();
    heap_start = smaps_all > rp.own ? smaps_all - rp.own : 0;
  }
  rp_take_sample(RP_SAMPLE_START, 0);
  for (int k = 0; k < rp.threads; k++) {
    pthread_attr_setstack(&attr, stacks[k], stack_size);
    int e = pthread_create(&rp.w[k].thread, &attr, rp_worker_main, &rp.w[k]);
    if (e) { fprintf(stderr, "trace-replay: cannot create thread %d: %s\n", k, strerror(e)); return 1; }
  }
  /* the main thread only starts the workers and waits */
  uint64_t t_start = rp_now();
  pthread_barrier_wait(&rp.start);
  for (int k = 0; k < rp.threads; k++) pthread_join(rp.w[k].thread, NULL);
  uint64_t t_end = rp_now();
  rp_take_sample(RP_SAMPLE_END, rp.w[rp.clock].done_ops);
  uint64_t heap_end = rp.nsamples ? rp.samples[rp.nsamples - 1].heap : 0;
  int64_t gap = rp.rss ? (int64_t)heap_end - (int64_t)rp_heap_rss_smaps() : 0;

  /* ---- figures ---- */
  uint64_t ops = 0, failures = 0, bad_align = 0, sampling_ns = 0;
  int64_t peak_sum = 0;
  for (int k = 0; k < rp.threads; k++) {
    ops += rp.w[k].done_ops;
    failures += rp.w[k].failures;
    bad_align += rp.w[k].bad_align;
    sampling_ns += rp.w[k].sampling_ns;
    peak_sum += rp.w[k].peak_live;
  }
  /* peak live across all workers: exact with one worker and in faithful mode, within
   * threads*16 KiB in thesis mode with several workers (peak_sum is the thesis's per-thread
   * figure added up: an upper bound, since the threads' peaks need not coincide) */
  int64_t peak_live = rp.threads == 1 ? rp.w[0].peak_live : atomic_load(&rp.peak_live);
  double wall = (double)(t_end - t_start) / 1e9;
  double sampling = (double)sampling_ns / 1e9;
  double time_s = wall - (rp.threads == 1 ? sampling : sampling / rp.threads);
  if (time_s <= 0) time_s = 1e-9;

  /* fragmentation, seed 003 §3.7.2 */
  struct ltr_frag_sample *fs = ltr_map((rp.nsamples + 1) * sizeof *fs);
  for (size_t i = 0; fs && i < rp.nsamples; i++) {
    fs[i].live = rp.samples[i].live;
    fs[i].heap = rp.samples[i].heap;
    fs[i].regular = rp.samples[i].kind == RP_SAMPLE_REGULAR;
  }
  struct ltr_frag fr = ltr_fragmentation(fs, fs ? rp.nsamples : 0, peak_live, rp.heap_max);
  double f1 = fr.average, f2 = fr.at_peak_live, f3 = fr.at_peak_heap, f4 = fr.peak_heap_over_peak_live;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  int64_t peak_usable = rp.threads == 1 ? rp.w[0].peak_usable : atomic_load(&rp.usable_peak);
  double internal = peak_live > 0 ? ((double)peak_usable / (double)peak_live - 1) * 100 : 0;
  double external = peak_usable > 0 ? ((double)rp.heap_max / (double)peak_usable - 1) * 100 : 0;

  if (rp.timeseries) {
    FILE *f = fopen(rp.timeseries, "w");
    if (!f) { fprintf(stderr, "trace-replay: cannot write %s: %s\n", rp.timeseries, strerror(errno)); return 1; }
    fprintf(f, "t_s,ops,live_bytes,heap_rss_bytes,kind\n");
    for (size_t i = 0; i < rp.nsamples; i++)
      fprintf(f, "%.6f,%" PRIu64 ",%" PRId64 ",%" PRIu64 ",%s\n", rp.samples[i].t_s, rp.samples[i].ops,
              rp.samples[i].live, rp.samples[i].heap, rp_sample_kind[rp.samples[i].kind]);
    fclose(f);
  }

  printf("trace-replay: %s: %" PRIu64 " records, %" PRIu64 " ops, %u recorded threads, %" PRIu64 " objects\n",
         path, tr->records, tr->nops, tr->nthreads, tr->nobjects);
  printf("mode %s, %d threads x %" PRIu64 " iterations: %" PRIu64 " calls in %.6f s (%.0f calls/s)\n",
         rp.mode == RP_THESIS ? "thesis" : "faithful", rp.threads, iterations, ops, time_s, (double)ops / time_s);
  if (tr->unknown_frees) printf("%" PRIu64 " frees of addresses never allocated in the trace were skipped\n", tr->unknown_frees);
  if (rp.rss) {
    printf("peak live %.1f KiB, peak heap RSS %.1f KiB (%zu samples, %.3f s sampling)\n",
           (double)peak_live / 1024, (double)rp.heap_max / 1024, rp.nsamples, sampling);
    printf("fragmentation: %.2f%% peak heap / peak live (thesis method 4), %.2f%% average (1), "
           "%.2f%% at peak live (2), %.2f%% at peak heap (3)\n", f4, f1, f2, f3);
  }
  if (rp.usable)
    printf("peak usable %.1f KiB: internal fragmentation %.2f%% (usable / live)%s%.2f%s\n", (double)peak_usable / 1024,
           internal, rp.rss ? ", external " : "", rp.rss ? external : 0.0, rp.rss ? "% (heap / usable)" : "");
  printf("{\"name\":\"trace-replay\",\"params\":{\"trace\":\"");
  for (const char *c = path; *c; c++) {
    if (*c == '"' || *c == '\\') putchar('\\');
    if ((unsigned char)*c >= 0x20) putchar(*c);
  }
  printf("\",\"mode\":\"%s\",\"threads\":%d,\"iterations\":%" PRIu64 ",\"rss\":%s,\"rss_method\":\"%s\"",
         rp.mode == RP_THESIS ? "thesis" : "faithful", rp.threads, iterations, rp.rss ? "true" : "false",
         rp.smaps_always ? "smaps" : "statm");
  if (rp.split_above) printf(",\"split_above\":%" PRIu64, rp.split_above);
  printf("},\"figures\":{");
  if (rp.rss)
    printf("\"fragmentation_pct\":%.4f,\"fragmentation_avg_pct\":%.4f,\"fragmentation_at_peak_live_pct\":%.4f,"
           "\"fragmentation_at_peak_heap_pct\":%.4f,\"peak_heap_rss_bytes\":%" PRIu64 ",",
           f4, f1, f2, f3, rp.heap_max);
  if (rp.usable) {
    printf("\"peak_usable_bytes\":%" PRId64 ",\"fragmentation_internal_pct\":%.4f,", peak_usable, internal);
    if (rp.rss) printf("\"fragmentation_external_pct\":%.4f,", external);
  }
  printf("\"peak_live_bytes\":%" PRId64 ",\"peak_live_per_thread_sum_bytes\":%" PRId64
         ",\"trace_peak_live_bytes\":%" PRIu64 ",\"trace_end_live_bytes\":%" PRIu64 ",\"time_s\":%.6f,\"wall_s\":%.6f,\"sampling_s\":%.6f,"
         "\"ops\":%" PRIu64 ",\"ops_per_s\":%.1f,\"trace_ops\":%" PRIu64 ",\"records\":%" PRIu64
         ",\"recorded_threads\":%u,\"objects\":%" PRIu64 ",\"unknown_frees\":%" PRIu64
         ",\"alloc_of_live\":%" PRIu64 ",\"overlaps_resolved\":%" PRIu64 ",\"recorded_failures\":%" PRIu64 ",\"replay_failures\":%" PRIu64
         ",\"bad_alignment\":%" PRIu64 ",\"heap_rss_start_bytes\":%" PRIu64 ",\"heap_rss_end_bytes\":%" PRIu64
         ",\"rss_method_gap_bytes\":%" PRId64 ",\"maxrss_bytes\":%ld,\"samples\":%zu,\"dropped_samples\":%zu}}\n",
         peak_live, peak_sum, tr->peak_live, tr->end_live, time_s, wall, sampling, ops, (double)ops / time_s, tr->nops,
         tr->records, tr->nthreads, tr->nobjects, tr->unknown_frees, tr->alloc_of_live, tr->overlaps_resolved, tr->failed_allocs,
         failures, bad_align, heap_start, heap_end, gap, ru.ru_maxrss * 1024L, rp.nsamples, rp.dropped_samples);
  return 0;
}
