/* idle-return: does memory go back to the OS when a server frees its data and then waits
 * without calling the allocator (issue 15, "New workload: idle-return")? A process builds a
 * heap of small blocks (16 B - 1 KiB by default, optionally a share of larger ones), frees all
 * of it or all but a kept fraction, then idles: it only sleeps, with no allocation call at
 * all, while RSS is read at fixed moments. Four process shapes, because an allocator can give
 * memory back in one and keep it in another (issue 15 measured all four):
 *
 *   loop      one thread does all the allocation (an event loop); T helper threads exist but
 *             never allocate (they block on a pipe).
 *   pool      T threads build, then free, a share of the blocks freed by another thread.
 *   fork      a parent forks T worker processes; each builds, frees and idles on its own, and
 *             each is measured on its own (pre-forked servers).
 *   one-idle  the main thread builds, frees and idles while T other threads keep working on
 *             small working sets (a thread that idles while others work).
 *
 * RSS comes from /proc/self/statm: a sampler thread reads it every --sample-ms into memory
 * that it maps itself, and the idling thread reads it after 1, 2, 5 and 10 purge delays
 * (--purge-delay-ms, which should match the allocator's own delay, LARDER_PURGE_DELAY_MS for
 * liblarder; the program sets nothing in the allocator) and at the end of the idle. Neither
 * calls malloc. After the last reading the allocator's own "bytes in use" is read (its
 * statistics call may do work of its own, so never during the idle): larder_stats_get when
 * liblarder is loaded, jemalloc's stats.allocated, tcmalloc's current_allocated_bytes, or
 * glibc's mallinfo2 (uordblks + hblkhd) when glibc's malloc is the one in use. */
#define _GNU_SOURCE
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Only the layout of larder_stats_t: nothing of liblarder is linked (it is found with dlsym
 * when it is the allocator in use). */
#include "larder.h"

static const char *const PROG = "idle-return";

static const char *const shape_choices[] = {"loop", "pool", "fork", "one-idle", NULL};
enum { SHAPE_LOOP, SHAPE_POOL, SHAPE_FORK, SHAPE_ONE_IDLE };

#define IDLE_DEFAULT UINT64_MAX /* not given: 10 purge delays + 1 s */

static const char *opt_shape = "loop";
static uint64_t opt_threads = 4;
static uint64_t opt_heap_mb = 200;
static uint64_t opt_min_size = 16;
static uint64_t opt_max_size = 1024;
static double opt_large_share = 0;
static uint64_t opt_large_min = 65536;
static uint64_t opt_large_max = 1048576;
static double opt_keep_fraction = 0;
static double opt_remote_share = 0.25;
static uint64_t opt_purge_delay_ms = 1000;
static uint64_t opt_idle_ms = IDLE_DEFAULT;
static uint64_t opt_sample_ms = 50;
static uint64_t opt_work_blocks = 1000;
static uint64_t opt_parent_mb = 0;
static uint64_t opt_seed = 1;

static const struct bench_opt opts[] = {
    {"shape", 0, BENCH_OPT_CHOICE, &opt_shape, 0, 0, 0, 0, false,
     "process shape: loop (one allocating thread, idle helpers), pool (T allocating threads), "
     "fork (T worker processes), one-idle (one thread idles while T others work)",
     NULL, shape_choices},
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 256, 0, 0, false,
     "loop: helper threads that never allocate; pool: allocating threads; fork: worker "
     "processes; one-idle: working threads besides the idle one"},
    {"heap-mb", 0, BENCH_OPT_U64, &opt_heap_mb, 1, 65536, 0, 0, false,
     "MiB of blocks built by each process (split among pool threads)"},
    {"min-size", 0, BENCH_OPT_U64, &opt_min_size, 1, 1ull << 30, 0, 0, false,
     "smallest block"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 1, 1ull << 30, 0, 0, false, "largest block"},
    {"large-share", 0, BENCH_OPT_REAL, &opt_large_share, 0, 0, 0, 1, false,
     "share of the blocks drawn from large-min..large-max instead"},
    {"large-min", 0, BENCH_OPT_U64, &opt_large_min, 1, 1ull << 30, 0, 0, false,
     "smallest large block"},
    {"large-max", 0, BENCH_OPT_U64, &opt_large_max, 1, 1ull << 30, 0, 0, false,
     "largest large block"},
    {"keep-fraction", 0, BENCH_OPT_REAL, &opt_keep_fraction, 0, 0, 0, 1, false,
     "share of the blocks (chosen at random) kept live through the idle"},
    {"remote-share", 0, BENCH_OPT_REAL, &opt_remote_share, 0, 0, 0, 1, false,
     "pool: share of the frees done by another thread"},
    {"purge-delay-ms", 0, BENCH_OPT_U64, &opt_purge_delay_ms, 0, 3600000, 0, 0, false,
     "the allocator's purge delay, for the readings only (set nothing: match "
     "LARDER_PURGE_DELAY_MS)"},
    {"idle-ms", 0, BENCH_OPT_U64, &opt_idle_ms, 0, 86400000, 0, 0, false,
     "idle time after the frees, no allocator calls", "10 x purge-delay-ms + 1000"},
    {"sample-ms", 0, BENCH_OPT_U64, &opt_sample_ms, 1, 60000, 0, 0, false,
     "RSS sampling period"},
    {"work-blocks", 0, BENCH_OPT_U64, &opt_work_blocks, 1, 10000000, 0, 0, false,
     "one-idle: live blocks of each working thread"},
    {"parent-mb", 0, BENCH_OPT_U64, &opt_parent_mb, 0, 65536, 0, 0, false,
     "fork: MiB the parent builds and frees from two threads before forking (so an allocator "
     "with a background thread has started it in the parent)"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
};

static const struct bench_prog prog = {
    "idle-return",
    "build a heap, free all or part of it, idle with no allocator calls; RSS over time and "
    "after 1, 2, 5 and 10 purge delays, per process shape (issue 15)",
    opts, BENCH_NOPTS(opts)};

static int ir_shape;
static double ir_t0;               /* the series' clock: the program's start */
static uint64_t ir_keep_threshold; /* a block is kept when rng>>32 < this */
static uint64_t ir_remote_threshold;
static uint64_t ir_large_threshold;

/* ---- the allocator's own "bytes in use" ------------------------------------------------ */

enum { SRC_NONE, SRC_LARDER, SRC_JEMALLOC, SRC_TCMALLOC, SRC_MALLINFO2 };
static const char *const src_names[] = {"none", "larder_stats_get", "jemalloc:stats.allocated",
                                        "tcmalloc:generic.current_allocated_bytes", "mallinfo2"};
static int ir_src = SRC_NONE;
static void (*ir_larder_stats_get)(larder_stats_t *);
static int (*ir_mallctl)(const char *, void *, size_t *, void *, size_t);
static int (*ir_tc_property)(const char *, size_t *);
static struct mallinfo2 (*ir_mallinfo2)(void);

static bool same_object(void *a, void *b) {
  Dl_info ia, ib;
  if (!a || !b || !dladdr(a, &ia) || !dladdr(b, &ib))
    return false;
  return ia.dli_fbase == ib.dli_fbase;
}

/* Looked up once at start: dlsym's failure path allocates its error message, and no lookup
 * may run during the idle. glibc's mallinfo2 only describes glibc's own malloc, so it is used
 * only when malloc comes from the same object; under another preloaded allocator without a
 * statistics call the figure is missing (null) rather than glibc's empty arena. */
static void ir_find_stats(void) {
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  void *f;
  if ((f = dlsym(RTLD_DEFAULT, "larder_stats_get")) != NULL) {
    *(void **)&ir_larder_stats_get = f;
    ir_src = SRC_LARDER;
  } else if ((f = dlsym(RTLD_DEFAULT, "mallctl")) != NULL && same_object(f, m)) {
    *(void **)&ir_mallctl = f;
    ir_src = SRC_JEMALLOC;
  } else if ((f = dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty")) != NULL &&
             same_object(f, m)) {
    *(void **)&ir_tc_property = f;
    ir_src = SRC_TCMALLOC;
  } else if ((f = dlsym(RTLD_DEFAULT, "mallinfo2")) != NULL && same_object(f, m)) {
    *(void **)&ir_mallinfo2 = f;
    ir_src = SRC_MALLINFO2;
  }
}

/* Bytes in use by the allocator's own count, or -1 when it has none (or the call fails). */
static double ir_alloc_in_use(void) {
  switch (ir_src) {
  case SRC_LARDER: {
    /* Room beyond the struct: a newer liblarder may have appended fields. */
    union {
      larder_stats_t s;
      size_t pad[512];
    } st;
    memset(&st, 0, sizeof st);
    ir_larder_stats_get(&st.s);
    return (double)st.s.bytes_in_use;
  }
  case SRC_JEMALLOC: {
    uint64_t epoch = 1;
    size_t sz = sizeof epoch, v = 0, vsz = sizeof v;
    if (ir_mallctl("epoch", &epoch, &sz, &epoch, sz) != 0 ||
        ir_mallctl("stats.allocated", &v, &vsz, NULL, 0) != 0)
      return -1;
    return (double)v;
  }
  case SRC_TCMALLOC: {
    size_t v = 0;
    if (!ir_tc_property("generic.current_allocated_bytes", &v))
      return -1;
    return (double)v;
  }
  case SRC_MALLINFO2: {
    struct mallinfo2 mi = ir_mallinfo2();
    return (double)(mi.uordblks + mi.hblkhd);
  }
  }
  return -1;
}

/* ---- the sampler: its own mapping, never malloc ----------------------------------------- */

#define SAMPLE_CAP 65536 /* [t, kib] pairs; a longer run is thinned (every other one kept) */
#define MAX_SERIES 400

static double *ir_samples; /* mmap'd */
static size_t ir_nsamples;
static double ir_sample_peak;
static atomic_bool ir_sampler_stop;

static uint64_t ir_rss_kib(void) {
  uint64_t vsize, rss;
  bench_statm(&vsize, &rss);
  return rss / 1024;
}

static void *ir_sampler(void *arg) {
  (void)arg;
  double period = (double)opt_sample_ms * 1e-3, next = bench_now();
  while (!atomic_load(&ir_sampler_stop)) {
    if (ir_nsamples == SAMPLE_CAP) {
      for (size_t i = 0; 2 * i < SAMPLE_CAP; i++) {
        ir_samples[2 * i] = ir_samples[4 * i];
        ir_samples[2 * i + 1] = ir_samples[4 * i + 1];
      }
      ir_nsamples = SAMPLE_CAP / 2;
      period *= 2;
    }
    double kib = (double)ir_rss_kib();
    ir_samples[2 * ir_nsamples] = bench_now() - ir_t0;
    ir_samples[2 * ir_nsamples + 1] = kib;
    ir_nsamples++;
    if (kib > ir_sample_peak)
      ir_sample_peak = kib;
    next += period;
    double now = bench_now();
    if (next < now)
      next = now;
    bench_sleep_seconds(next - now);
  }
  return NULL;
}

static pthread_t ir_sampler_th;

static void ir_sampler_start(void) {
  ir_samples = mmap(NULL, SAMPLE_CAP * 2 * sizeof(double), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ir_samples == MAP_FAILED)
    bench_die(PROG, "cannot map the sampler's storage: %s", strerror(errno));
  ir_nsamples = 0;
  ir_sample_peak = 0;
  atomic_store(&ir_sampler_stop, false);
  bench_thread_start(PROG, &ir_sampler_th, ir_sampler, NULL);
}

static void ir_sampler_stop_join(void) {
  atomic_store(&ir_sampler_stop, true);
  bench_thread_join(PROG, ir_sampler_th);
}

/* ---- one process's measurements (in shared memory for the fork shape) ------------------ */

#define NMARKS 4
static const unsigned marks[NMARKS] = {1, 2, 5, 10}; /* purge delays */

struct ir_result {
  double rss_start_kib, rss_peak_kib, rss_after_free_kib, rss_after_idle_kib;
  double rss_mark_kib[NMARKS]; /* -1: the idle ended before that mark */
  double live_bytes, alloc_in_use; /* alloc_in_use -1: no source */
  uint64_t blocks, kept, remote_frees, work_ops;
  double build_s, free_s, build_end_s, idle_start_s, idle_end_s;
  uint64_t samples;
  size_t nseries;
  double series[2 * (MAX_SERIES + 2)];
  int failed;
};

/* Copies the sampler's series, thinned to at most MAX_SERIES points (every k-th, the last one
 * kept), into the result. */
static void ir_store_series(struct ir_result *r) {
  size_t n = ir_nsamples, stride = (n + MAX_SERIES - 1) / MAX_SERIES, ns = 0;
  if (stride == 0)
    stride = 1;
  for (size_t i = 0; i < n; i += stride, ns++) {
    r->series[2 * ns] = ir_samples[2 * i];
    r->series[2 * ns + 1] = ir_samples[2 * i + 1];
  }
  if (n && (n - 1) % stride != 0) {
    r->series[2 * ns] = ir_samples[2 * (n - 1)];
    r->series[2 * ns + 1] = ir_samples[2 * (n - 1) + 1];
    ns++;
  }
  r->nseries = ns;
  r->samples = n;
  if (ir_sample_peak > r->rss_peak_kib)
    r->rss_peak_kib = ir_sample_peak;
}

/* The idle: nothing but sleeps and RSS readings, at 1, 2, 5 and 10 purge delays after the
 * frees and at the end. */
static void ir_idle(struct ir_result *r, double idle_s) {
  double idle0 = bench_now(), delay = (double)opt_purge_delay_ms * 1e-3;
  r->idle_start_s = idle0 - ir_t0;
  for (int k = 0; k < NMARKS; k++) {
    double at = idle0 + marks[k] * delay;
    r->rss_mark_kib[k] = -1;
    if (at > idle0 + idle_s + 1e-9)
      continue;
    double now = bench_now();
    if (at > now)
      bench_sleep_seconds(at - now);
    r->rss_mark_kib[k] = (double)ir_rss_kib();
  }
  double now = bench_now();
  if (idle0 + idle_s > now)
    bench_sleep_seconds(idle0 + idle_s - now);
  r->rss_after_idle_kib = (double)ir_rss_kib();
  r->idle_end_s = bench_now() - ir_t0;
}

/* ---- building and freeing ---------------------------------------------------------------- */

struct ir_heap {
  void **slots;
  size_t *sizes; /* requested sizes, for the live bytes of the kept blocks */
  size_t n, cap;
  void **kept;
  size_t nkept;
  double kept_bytes;
  struct bench_rng rng;
  int failed;
};

static size_t ir_size(struct bench_rng *rng) {
  if (ir_large_threshold && (bench_rng_next(rng) >> 32) < ir_large_threshold)
    return (size_t)(opt_large_min + bench_rng_below(rng, opt_large_max - opt_large_min + 1));
  return (size_t)(opt_min_size + bench_rng_below(rng, opt_max_size - opt_min_size + 1));
}

/* Every page of a block is written, as a server fills what it allocates: RSS then holds all
 * the live bytes, and what stays resident after the frees is the allocator's doing. */
static void ir_touch(unsigned char *p, size_t sz, unsigned char v) {
  p[0] = v;
  for (size_t o = 4096 - ((uintptr_t)p & 4095); o < sz; o += 4096)
    p[o] = v;
  p[sz - 1] = v;
}

/* Allocates blocks until `bytes` requested bytes are live. */
static void ir_build(struct ir_heap *h, uint64_t bytes) {
  uint64_t built = 0;
  while (built < bytes) {
    if (h->n == h->cap) {
      size_t cap = h->cap ? 2 * h->cap : 4096;
      void **s = realloc(h->slots, cap * sizeof *s);
      if (s)
        h->slots = s;
      size_t *z = s ? realloc(h->sizes, cap * sizeof *z) : NULL;
      if (!s || !z) {
        h->failed = 1;
        return;
      }
      h->sizes = z;
      h->cap = cap;
    }
    size_t sz = ir_size(&h->rng);
    unsigned char *p = malloc(sz);
    if (!p) {
      h->failed = 1;
      return;
    }
    ir_touch(p, sz, (unsigned char)h->n);
    h->slots[h->n] = p;
    h->sizes[h->n] = sz;
    h->n++;
    built += sz;
  }
}

/* Moves the kept blocks (each kept with probability keep-fraction) out of the slots into an
 * array of their own, so the big arrays can be freed and what stays live is the blocks and
 * that array. */
static void ir_select_kept(struct ir_heap *h) {
  size_t nk = 0;
  unsigned char *keep = NULL;
  if (ir_keep_threshold) {
    keep = calloc(h->n ? h->n : 1, 1);
    if (!keep) {
      h->failed = 1;
      return;
    }
    for (size_t i = 0; i < h->n; i++)
      if ((bench_rng_next(&h->rng) >> 32) < ir_keep_threshold) {
        keep[i] = 1;
        nk++;
      }
  }
  if (nk) {
    h->kept = malloc(nk * sizeof *h->kept);
    if (!h->kept) {
      free(keep);
      h->failed = 1;
      return;
    }
    for (size_t i = 0; i < h->n; i++)
      if (keep[i]) {
        h->kept[h->nkept++] = h->slots[i];
        h->kept_bytes += (double)h->sizes[i];
        h->slots[i] = NULL;
      }
    h->kept_bytes += (double)(nk * sizeof *h->kept);
  }
  free(keep);
}

static void ir_release_arrays(struct ir_heap *h) {
  free(h->slots);
  free(h->sizes);
  h->slots = NULL;
  h->sizes = NULL;
}

static void ir_free_kept(struct ir_heap *h) {
  for (size_t i = 0; i < h->nkept; i++)
    free(h->kept[i]);
  free(h->kept);
  h->kept = NULL;
  h->nkept = 0;
}

/* A pool shape's block j of thread i is freed by thread i+1 when this holds: the fractional
 * parts of j times the golden ratio are evenly spread, so the share is met at any count. */
static bool ir_remote(size_t j) {
  return (((uint64_t)j * 0x9e3779b97f4a7c15ull) >> 32) < ir_remote_threshold;
}

static uint64_t ir_bytes(uint64_t mb) { return mb << 20; }

static double ir_idle_seconds(void) { return (double)opt_idle_ms * 1e-3; }

/* ---- loop and fork workers: one allocating thread ---------------------------------------- */

static int ir_helper_pipe[2];

static void *ir_loop_helper(void *arg) {
  (void)arg;
  char c;
  /* Blocks until the end: exists, never allocates (an event loop's worker pool). */
  while (read(ir_helper_pipe[0], &c, 1) < 0 && errno == EINTR)
    ;
  return NULL;
}

/* Build, free, idle in the calling thread (the loop shape's event loop, a fork worker, the
 * one-idle shape's idle thread). */
static void ir_single(struct ir_result *r, uint64_t stream) {
  struct ir_heap h = {0};
  bench_rng_seed(&h.rng, opt_seed, stream);
  double b0 = bench_now();
  ir_build(&h, ir_bytes(opt_heap_mb));
  double b1 = bench_now();
  r->build_s = b1 - b0;
  r->build_end_s = b1 - ir_t0;
  r->blocks = h.n;
  r->rss_peak_kib = (double)ir_rss_kib();
  if (!h.failed)
    ir_select_kept(&h);
  if (h.failed) {
    r->failed = 1;
    return;
  }
  for (size_t i = 0; i < h.n; i++)
    free(h.slots[i]);
  ir_release_arrays(&h);
  r->free_s = bench_now() - b1;
  r->rss_after_free_kib = (double)ir_rss_kib();
  r->kept = h.nkept;
  r->live_bytes = h.kept_bytes;
  ir_idle(r, ir_idle_seconds());
  r->alloc_in_use = ir_alloc_in_use();
  ir_free_kept(&h);
}

/* ---- pool: T allocating threads ---------------------------------------------------------- */

struct ir_pool_thread {
  struct ir_heap h;
  struct ir_pool_thread *pred; /* whose remote blocks this thread frees */
  pthread_t th;
  uint64_t remote_frees;
};

static pthread_barrier_t ir_built, ir_freed_b, ir_released;
static pthread_mutex_t ir_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ir_exit_cond = PTHREAD_COND_INITIALIZER;
static bool ir_exit;
static unsigned ir_pool_n;

static void ir_wait_exit(void) {
  pthread_mutex_lock(&ir_exit_lock);
  while (!ir_exit)
    pthread_cond_wait(&ir_exit_cond, &ir_exit_lock);
  pthread_mutex_unlock(&ir_exit_lock);
}

static void ir_signal_exit(void) {
  pthread_mutex_lock(&ir_exit_lock);
  ir_exit = true;
  pthread_cond_broadcast(&ir_exit_cond);
  pthread_mutex_unlock(&ir_exit_lock);
}

static void *ir_pool_worker(void *arg) {
  struct ir_pool_thread *c = arg;
  ir_build(&c->h, ir_bytes(opt_heap_mb) / ir_pool_n);
  if (!c->h.failed)
    ir_select_kept(&c->h);
  pthread_barrier_wait(&ir_built);
  bool remote_on = ir_pool_n > 1 && ir_remote_threshold > 0;
  if (!c->h.failed)
    for (size_t j = 0; j < c->h.n; j++)
      if (c->h.slots[j] && !(remote_on && ir_remote(j)))
        free(c->h.slots[j]);
  if (remote_on && !c->pred->h.failed)
    for (size_t j = 0; j < c->pred->h.n; j++)
      if (c->pred->h.slots[j] && ir_remote(j)) {
        free(c->pred->h.slots[j]);
        c->remote_frees++;
      }
  pthread_barrier_wait(&ir_freed_b);
  ir_release_arrays(&c->h);
  pthread_barrier_wait(&ir_released);
  ir_wait_exit();
  ir_free_kept(&c->h);
  return NULL;
}

static void ir_pool(struct ir_result *r) {
  unsigned T = (unsigned)opt_threads;
  ir_pool_n = T;
  struct ir_pool_thread *th = calloc(T, sizeof *th);
  if (!th)
    bench_die(PROG, "out of memory");
  for (unsigned i = 0; i < T; i++) {
    bench_rng_seed(&th[i].h.rng, opt_seed, i);
    th[i].pred = &th[(i + T - 1) % T];
  }
  pthread_barrier_init(&ir_built, NULL, T + 1);
  pthread_barrier_init(&ir_freed_b, NULL, T + 1);
  pthread_barrier_init(&ir_released, NULL, T + 1);
  double b0 = bench_now();
  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &th[i].th, ir_pool_worker, &th[i]);
  pthread_barrier_wait(&ir_built);
  double b1 = bench_now();
  r->build_s = b1 - b0;
  r->build_end_s = b1 - ir_t0;
  r->rss_peak_kib = (double)ir_rss_kib();
  pthread_barrier_wait(&ir_freed_b);
  pthread_barrier_wait(&ir_released);
  r->free_s = bench_now() - b1;
  r->rss_after_free_kib = (double)ir_rss_kib();
  for (unsigned i = 0; i < T; i++) {
    r->failed |= th[i].h.failed;
    r->blocks += th[i].h.n;
    r->kept += th[i].h.nkept;
    r->live_bytes += th[i].h.kept_bytes;
    r->remote_frees += th[i].remote_frees;
  }
  if (!r->failed)
    ir_idle(r, ir_idle_seconds());
  r->alloc_in_use = ir_alloc_in_use();
  ir_signal_exit();
  for (unsigned i = 0; i < T; i++)
    bench_thread_join(PROG, th[i].th);
  free(th);
}

/* ---- one-idle: T threads keep working while the main thread idles ------------------------ */

#define WORK_BURST 1000 /* replacements between pauses of 1 ms: a server serving requests */

struct ir_work_thread {
  pthread_t th;
  struct bench_rng rng;
  _Alignas(64) _Atomic uint64_t live; /* requested bytes live now */
  uint64_t ops;
  int failed;
};

static atomic_bool ir_work_stop;
static pthread_barrier_t ir_work_ready;

static void *ir_work(void *arg) {
  struct ir_work_thread *w = arg;
  size_t n = (size_t)opt_work_blocks;
  void **slot = calloc(n, sizeof *slot);
  size_t *size = calloc(n, sizeof *size);
  uint64_t live = 0;
  if (!slot || !size)
    w->failed = 1;
  for (size_t i = 0; i < n && !w->failed; i++) {
    size[i] = ir_size(&w->rng);
    slot[i] = malloc(size[i]);
    if (!slot[i]) {
      w->failed = 1;
      break;
    }
    ir_touch(slot[i], size[i], 1);
    live += size[i];
  }
  atomic_store_explicit(&w->live, live, memory_order_relaxed);
  pthread_barrier_wait(&ir_work_ready);
  while (!w->failed && !atomic_load_explicit(&ir_work_stop, memory_order_relaxed)) {
    for (int k = 0; k < WORK_BURST; k++) {
      size_t i = (size_t)bench_rng_below(&w->rng, n);
      free(slot[i]);
      live -= size[i];
      size[i] = ir_size(&w->rng);
      slot[i] = malloc(size[i]);
      if (!slot[i]) {
        w->failed = 1;
        break;
      }
      ir_touch(slot[i], size[i], (unsigned char)k);
      live += size[i];
      w->ops++;
    }
    atomic_store_explicit(&w->live, live, memory_order_relaxed);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; slot && i < n; i++)
    free(slot[i]);
  free(slot);
  free(size);
  return NULL;
}

static void ir_one_idle(struct ir_result *r) {
  unsigned T = (unsigned)opt_threads;
  struct ir_work_thread *w = aligned_alloc(64, ((T * sizeof *w + 63) / 64) * 64 + 64);
  if (!w)
    bench_die(PROG, "out of memory");
  memset(w, 0, T * sizeof *w);
  for (unsigned i = 0; i < T; i++)
    bench_rng_seed(&w[i].rng, opt_seed, 1000 + i);
  pthread_barrier_init(&ir_work_ready, NULL, T + 1);
  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &w[i].th, ir_work, &w[i]);
  pthread_barrier_wait(&ir_work_ready);
  ir_single(r, 0);
  double work_live = 0;
  for (unsigned i = 0; i < T; i++)
    work_live += (double)atomic_load_explicit(&w[i].live, memory_order_relaxed);
  r->live_bytes += work_live;
  atomic_store(&ir_work_stop, true);
  for (unsigned i = 0; i < T; i++) {
    bench_thread_join(PROG, w[i].th);
    r->work_ops += w[i].ops;
    r->failed |= w[i].failed;
  }
  free(w);
}

/* ---- the whole process, per shape ---------------------------------------------------------- */

/* One measured process: sampler on, the shape's work, sampler off, series stored. */
static void ir_measure_process(struct ir_result *r, uint64_t stream) {
  r->rss_start_kib = (double)ir_rss_kib();
  ir_sampler_start();
  switch (ir_shape) {
  case SHAPE_LOOP:
  case SHAPE_FORK: {
    pthread_t *helpers = NULL;
    unsigned H = ir_shape == SHAPE_LOOP ? (unsigned)opt_threads : 0;
    if (H) {
      if (pipe(ir_helper_pipe) != 0)
        bench_die(PROG, "pipe failed: %s", strerror(errno));
      helpers = calloc(H, sizeof *helpers);
      if (!helpers)
        bench_die(PROG, "out of memory");
      for (unsigned i = 0; i < H; i++)
        bench_thread_start(PROG, &helpers[i], ir_loop_helper, NULL);
    }
    ir_single(r, stream);
    if (H) {
      close(ir_helper_pipe[1]); /* every helper's read returns 0 */
      for (unsigned i = 0; i < H; i++)
        bench_thread_join(PROG, helpers[i]);
      close(ir_helper_pipe[0]);
      free(helpers);
    }
    break;
  }
  case SHAPE_POOL:
    ir_pool(r);
    break;
  case SHAPE_ONE_IDLE:
    ir_one_idle(r);
    break;
  }
  ir_sampler_stop_join();
  ir_store_series(r);
  munmap(ir_samples, SAMPLE_CAP * 2 * sizeof(double));
}

/* fork --parent-mb: the parent builds and frees from two threads before forking. */
static void *ir_parent_half(void *arg) {
  struct ir_heap *h = arg;
  ir_build(h, ir_bytes(opt_parent_mb) / 2);
  for (size_t i = 0; i < h->n; i++)
    free(h->slots[i]);
  ir_release_arrays(h);
  return NULL;
}

static void ir_parent_work(void) {
  struct ir_heap a = {0}, b = {0};
  bench_rng_seed(&a.rng, opt_seed, 5000);
  bench_rng_seed(&b.rng, opt_seed, 5001);
  pthread_t t;
  bench_thread_start(PROG, &t, ir_parent_half, &b);
  ir_parent_half(&a);
  bench_thread_join(PROG, t);
  if (a.failed || b.failed)
    bench_die(PROG, "malloc returned NULL in the parent");
}

static struct ir_result *ir_fork(unsigned W) {
  size_t bytes = W * sizeof(struct ir_result);
  struct ir_result *res =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED)
    bench_die(PROG, "cannot map the results: %s", strerror(errno));
  memset(res, 0, bytes);
  if (opt_parent_mb)
    ir_parent_work();
  fflush(stdout);
  fflush(stderr);
  pid_t *pid = calloc(W, sizeof *pid);
  if (!pid)
    bench_die(PROG, "out of memory");
  for (unsigned i = 0; i < W; i++) {
    pid[i] = fork();
    if (pid[i] < 0) {
      int e = errno;
      for (unsigned k = 0; k < i; k++)
        kill(pid[k], SIGKILL);
      bench_die(PROG, "fork failed: %s", strerror(e));
    }
    if (pid[i] == 0) {
      ir_measure_process(&res[i], 100 + i);
      fflush(stdout);
      _exit(res[i].failed ? BENCH_EXIT_RUNTIME : 0);
    }
  }
  int bad = 0;
  for (unsigned i = 0; i < W; i++) {
    int st;
    while (waitpid(pid[i], &st, 0) < 0)
      if (errno != EINTR)
        bench_die(PROG, "waitpid failed: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "%s: worker process %u %s %d\n", PROG, i,
              WIFEXITED(st) ? "exited with status" : "was killed by signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      bad = 1;
    }
  }
  free(pid);
  if (bad)
    bench_die(PROG, "a worker process failed");
  return res;
}

/* ---- output ------------------------------------------------------------------------------ */

static double maxd(double a, double b) { return a > b ? a : b; }

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  for (int i = 0; shape_choices[i]; i++)
    if (opt_shape == shape_choices[i])
      ir_shape = i;
  if (opt_max_size < opt_min_size)
    bench_usage_error(&prog, "--max-size (%llu) is below --min-size (%llu)",
                      (unsigned long long)opt_max_size, (unsigned long long)opt_min_size);
  if (opt_large_max < opt_large_min)
    bench_usage_error(&prog, "--large-max (%llu) is below --large-min (%llu)",
                      (unsigned long long)opt_large_max, (unsigned long long)opt_large_min);
  if (opt_parent_mb && ir_shape != SHAPE_FORK)
    bench_usage_error(&prog, "--parent-mb applies to --shape fork only");
  if (opt_idle_ms == IDLE_DEFAULT)
    opt_idle_ms = 10 * opt_purge_delay_ms + 1000;
  ir_keep_threshold = opt_keep_fraction >= 1 ? (1ull << 32) : (uint64_t)(opt_keep_fraction * 4294967296.0);
  ir_remote_threshold =
      opt_remote_share >= 1 ? (1ull << 32) : (uint64_t)(opt_remote_share * 4294967296.0);
  ir_large_threshold =
      opt_large_share >= 1 ? (1ull << 32) : (uint64_t)(opt_large_share * 4294967296.0);
  ir_find_stats();
  ir_t0 = bench_now();

  unsigned nproc = ir_shape == SHAPE_FORK ? (unsigned)opt_threads : 1;
  struct ir_result *res;
  if (ir_shape == SHAPE_FORK) {
    res = ir_fork(nproc);
  } else {
    res = calloc(1, sizeof *res);
    if (!res)
      bench_die(PROG, "out of memory");
    ir_measure_process(res, 0);
    if (res->failed)
      bench_die(PROG, "malloc returned NULL");
  }

  /* Several processes: each figure is the largest over them (the worst process); the
   * per-process values are in the proc_ lists; the series is the first process's. */
  struct ir_result top = res[0];
  for (unsigned i = 1; i < nproc; i++) {
    struct ir_result *r = &res[i];
    top.rss_start_kib = maxd(top.rss_start_kib, r->rss_start_kib);
    top.rss_peak_kib = maxd(top.rss_peak_kib, r->rss_peak_kib);
    top.rss_after_free_kib = maxd(top.rss_after_free_kib, r->rss_after_free_kib);
    top.rss_after_idle_kib = maxd(top.rss_after_idle_kib, r->rss_after_idle_kib);
    for (int k = 0; k < NMARKS; k++)
      top.rss_mark_kib[k] = maxd(top.rss_mark_kib[k], r->rss_mark_kib[k]);
    top.live_bytes = maxd(top.live_bytes, r->live_bytes);
    top.alloc_in_use = maxd(top.alloc_in_use, r->alloc_in_use);
    top.blocks += r->blocks;
    top.kept += r->kept;
    top.build_s = maxd(top.build_s, r->build_s);
    top.free_s = maxd(top.free_s, r->free_s);
    top.build_end_s = maxd(top.build_end_s, r->build_end_s);
    top.idle_start_s = maxd(top.idle_start_s, r->idle_start_s);
    top.idle_end_s = maxd(top.idle_end_s, r->idle_end_s);
  }
  double *proc_free = calloc(nproc, sizeof(double)), *proc_idle = calloc(nproc, sizeof(double)),
         *proc_live = calloc(nproc, sizeof(double)), *proc_peak = calloc(nproc, sizeof(double));
  if (!proc_free || !proc_idle || !proc_live || !proc_peak)
    bench_die(PROG, "out of memory");
  for (unsigned i = 0; i < nproc; i++) {
    proc_free[i] = res[i].rss_after_free_kib;
    proc_idle[i] = res[i].rss_after_idle_kib;
    proc_live[i] = res[i].live_bytes;
    proc_peak[i] = res[i].rss_peak_kib;
  }

  printf("idle-return: shape %s, %u process(es), %llu blocks (%.0f MiB per process), %llu kept "
         "(%.1f MiB live); statistics from %s\n",
         opt_shape, nproc, (unsigned long long)top.blocks, (double)opt_heap_mb,
         (unsigned long long)top.kept, top.live_bytes / 1048576.0, src_names[ir_src]);
  printf("idle-return: RSS MiB: start %.1f, peak %.1f, after free %.1f", top.rss_start_kib / 1024,
         top.rss_peak_kib / 1024, top.rss_after_free_kib / 1024);
  for (int k = 0; k < NMARKS; k++)
    if (top.rss_mark_kib[k] >= 0)
      printf(", after %u delay%s %.1f", marks[k], marks[k] > 1 ? "s" : "",
             top.rss_mark_kib[k] / 1024);
  printf(", after %.1f s idle %.1f; allocator's bytes in use %s%.1f MiB\n",
         ir_idle_seconds(), top.rss_after_idle_kib / 1024, top.alloc_in_use < 0 ? "(none) " : "",
         top.alloc_in_use < 0 ? 0 : top.alloc_in_use / 1048576.0);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_string(&j, "stats_source", src_names[ir_src]);
  bench_json_figures(&j);
  bench_json_u64(&j, "procs", nproc);
  bench_json_u64(&j, "blocks", top.blocks);
  bench_json_u64(&j, "kept_blocks", top.kept);
  bench_json_real(&j, "live_bytes", top.live_bytes);
  bench_json_real(&j, "alloc_bytes_in_use", top.alloc_in_use < 0 ? NAN : top.alloc_in_use);
  bench_json_u64(&j, "stats_from_larder", ir_src == SRC_LARDER);
  bench_json_u64(&j, "remote_frees", top.remote_frees);
  bench_json_u64(&j, "work_ops", top.work_ops);
  bench_json_real(&j, "rss_start_kib", top.rss_start_kib);
  bench_json_real(&j, "rss_peak_kib", top.rss_peak_kib);
  bench_json_real(&j, "rss_after_free_kib", top.rss_after_free_kib);
  static const char *const mark_keys[NMARKS] = {"rss_after_1_delay_kib", "rss_after_2_delays_kib",
                                                "rss_after_5_delays_kib",
                                                "rss_after_10_delays_kib"};
  for (int k = 0; k < NMARKS; k++)
    bench_json_real(&j, mark_keys[k], top.rss_mark_kib[k] < 0 ? NAN : top.rss_mark_kib[k]);
  bench_json_real(&j, "rss_after_idle_kib", top.rss_after_idle_kib);
  bench_json_real(&j, "build_s", top.build_s);
  bench_json_real(&j, "free_s", top.free_s);
  bench_json_real(&j, "build_end_s", top.build_end_s);
  bench_json_real(&j, "idle_start_s", top.idle_start_s);
  bench_json_real(&j, "idle_end_s", top.idle_end_s);
  bench_json_real_list(&j, "proc_rss_peak_kib", proc_peak, nproc);
  bench_json_real_list(&j, "proc_rss_after_free_kib", proc_free, nproc);
  bench_json_real_list(&j, "proc_rss_after_idle_kib", proc_idle, nproc);
  bench_json_real_list(&j, "proc_live_bytes", proc_live, nproc);
  bench_json_u64(&j, "samples", res[0].samples);
  bench_json_pair_list(&j, "rss_series", res[0].series, res[0].nseries);
  bench_json_end(&j);
  free(proc_free);
  free(proc_idle);
  free(proc_live);
  free(proc_peak);
  return 0;
}
