/* churn: a large live heap replaced at random, the shape of a cache or an in-memory database
 * (issue 8, "New workload: churn"). Each of T threads fills an array of N live blocks, then
 * repeatedly frees a random one and allocates a new one in its slot. A share of the frees can
 * be done by another thread: the block is handed through a lock-free ring to the next thread
 * (thread i to i+1 mod T; with one thread, to a helper thread that only frees), which frees it.
 *
 * The figure that matters is CPU per replacement at a given N: an allocator whose slow paths
 * walk the heap pays more as N grows, one whose every path is O(1) does not. CPU time is the
 * whole process's (user + system, every thread, the helper included) over the replace phase
 * only, so the fill phase and the final frees are not counted and a shared machine does not
 * decide the figure the way wall time would. The final frees have a figure of their own,
 * teardown_ns_per_free: every thread frees its live blocks in slot order and exits (the
 * replacements have shuffled the slots, unless the allocator gives a freed block straight back
 * to the next malloc of its size), the CPU of that phase per block.
 *
 * --realloc-share F: a share of the steps resize the chosen block with realloc instead of
 * replacing it: it grows by 1-16 bytes (a string appended to, a vector pushed to), and once it
 * would pass 4 x its size range's top it starts again at a new size (a realloc that shrinks).
 * Most such reallocs stay within the block's size class or medium run; the rest move it. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "churn";

static const char *const mix_choices[] = {"uniform", "small", NULL};

static uint64_t opt_threads = 1;
static uint64_t opt_live = 100000;
static uint64_t opt_min_size = 256;
static uint64_t opt_max_size = 256;
static const char *opt_mix = "uniform";
static uint64_t opt_ops = 0;
static double opt_seconds = 5;
static double opt_remote_share = 0;
static uint64_t opt_seed = 1;
static bool opt_touch = false;
static double opt_realloc_share = 0;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "threads"},
    {"live", 0, BENCH_OPT_U64, &opt_live, 1, 10000000, 0, 0, false, "live blocks per thread"},
    {"min-size", 0, BENCH_OPT_U64, &opt_min_size, 1, 1ull << 30, 0, 0, false,
     "smallest block (--mix uniform)"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 1, 1ull << 30, 0, 0, false,
     "largest block (--mix uniform)"},
    {"mix", 0, BENCH_OPT_CHOICE, &opt_mix, 0, 0, 0, 0, false,
     "sizes: uniform in min-size..max-size, or small (16 B - 4 KiB, skewed to small)", NULL,
     mix_choices},
    {"ops", 0, BENCH_OPT_U64, &opt_ops, 0, 1ull << 40, 0, 0, false,
     "replacements per thread; 0 = run for --seconds"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false,
     "length of the replace phase (ignored when --ops is given)"},
    {"remote-share", 0, BENCH_OPT_REAL, &opt_remote_share, 0, 0, 0, 1, false,
     "share of frees done by another thread"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
    {"touch", 0, BENCH_OPT_FLAG, &opt_touch, 0, 0, 0, 0, false,
     "write every page of each new block (default: its first and last byte)"},
    {"realloc-share", 0, BENCH_OPT_REAL, &opt_realloc_share, 0, 0, 0, 1, false,
     "share of steps that grow the chosen block by 1-16 bytes with realloc instead of replacing it"},
};

static const struct bench_prog prog = {
    "churn",
    "T threads keep N live blocks each and replace random ones; CPU per replacement, RSS and "
    "address space",
    opts, BENCH_NOPTS(opts)};

struct ch_thread {
  struct bench_ring in;    /* blocks another thread hands to this one to free */
  struct bench_ring *out;  /* where this thread's remote share goes */
  struct ch_thread *pred;  /* the thread whose blocks arrive in `in` */
  _Alignas(64) atomic_bool done; /* finished replacing and flushed `out` */
  unsigned id;
  bool helper; /* frees only */
  pthread_t th;
  void **slots;
  size_t *sizes;           /* --realloc-share: each slot's size */
  struct bench_rng rng;
  uint64_t ops, remote, freed_for_others, reallocs;
  int failed;
};

static pthread_barrier_t ch_filled, ch_go, ch_replaced, ch_teardown;
static atomic_bool ch_stop;
static bool ch_remote_on;
static uint64_t ch_remote_threshold; /* a free is remote when rng < threshold (of 2^32) */
static uint64_t ch_realloc_threshold; /* a step reallocs when rng < threshold (of 2^32) */
static size_t ch_realloc_top;         /* a growing block starts again past this */

/* --mix small: octaves 16-32, 32-64, ..., 2048-4096 with weights 8, 7, ..., 1 (of 36), uniform
 * within an octave: most requests are small, as in real programs, and every octave is used. */
static size_t ch_size(struct bench_rng *r) {
  if (opt_mix == mix_choices[1]) {
    uint64_t w = bench_rng_below(r, 36);
    unsigned oct = 0;
    for (uint64_t acc = 8; w >= acc; oct++)
      acc += 7 - oct;
    size_t lo = (size_t)16 << oct;
    return lo + (size_t)bench_rng_below(r, lo + 1);
  }
  return (size_t)(opt_min_size + bench_rng_below(r, opt_max_size - opt_min_size + 1));
}

static void ch_write(unsigned char *p, size_t sz, unsigned char v) {
  p[0] = v;
  p[sz - 1] = v;
  if (opt_touch)
    for (size_t o = 4096 - ((uintptr_t)p & 4095); o < sz; o += 4096)
      p[o] = v;
}

static void ch_pause(void) {
  struct timespec ts = {0, 20000}; /* 20 us: waiting must not burn the CPU being measured */
  nanosleep(&ts, NULL);
}

/* After its own work: drain the inbound ring until the thread feeding it is done, so every
 * handed block is freed inside the measured phase. */
static void ch_finish_inbound(struct ch_thread *c) {
  if (!c->pred)
    return;
  for (;;) {
    bool pred_done = atomic_load_explicit(&c->pred->done, memory_order_acquire);
    uint64_t n = bench_ring_drain(&c->in);
    c->freed_for_others += n;
    if (pred_done)
      return;
    if (n == 0)
      ch_pause();
  }
}

static void *ch_helper(void *arg) {
  struct ch_thread *c = arg;
  pthread_barrier_wait(&ch_filled);
  pthread_barrier_wait(&ch_go);
  ch_finish_inbound(c);
  atomic_store_explicit(&c->done, true, memory_order_release);
  pthread_barrier_wait(&ch_replaced);
  pthread_barrier_wait(&ch_teardown);
  return NULL;
}

static void *ch_worker(void *arg) {
  struct ch_thread *c = arg;
  const uint64_t live = opt_live;
  void **slots = c->slots;
  for (uint64_t i = 0; i < live; i++) {
    size_t sz = ch_size(&c->rng);
    unsigned char *p = malloc(sz);
    if (!p) {
      c->failed = 1;
      break;
    }
    ch_write(p, sz, (unsigned char)i);
    slots[i] = p;
    if (c->sizes)
      c->sizes[i] = sz;
  }
  pthread_barrier_wait(&ch_filled);
  pthread_barrier_wait(&ch_go);
  uint64_t k = 0;
  if (!c->failed) {
    const uint64_t quota = opt_ops ? opt_ops : UINT64_MAX;
    for (; k < quota; k++) {
      if ((k & 255) == 0 && !opt_ops && atomic_load_explicit(&ch_stop, memory_order_relaxed))
        break;
      if (ch_remote_on && (k & (BENCH_RING_BATCH - 1)) == 0 && c->pred)
        c->freed_for_others += bench_ring_drain(&c->in);
      uint64_t i = bench_rng_below(&c->rng, live);
      void *old = slots[i];
      if (c->sizes && (bench_rng_next(&c->rng) >> 32) < ch_realloc_threshold) {
        size_t sz = c->sizes[i] + 1 + (size_t)bench_rng_below(&c->rng, 16);
        if (sz > ch_realloc_top)
          sz = ch_size(&c->rng);
        unsigned char *p = realloc(old, sz);
        if (!p) {
          c->failed = 1;
          break;
        }
        ch_write(p, sz, (unsigned char)k);
        slots[i] = p;
        c->sizes[i] = sz;
        c->reallocs++;
        continue;
      }
      if (ch_remote_on && (bench_rng_next(&c->rng) >> 32) < ch_remote_threshold) {
        while (!bench_ring_push(c->out, old)) {
          /* Full: free what others handed us (so a ring of waiting threads moves), then let
           * the consumer run. */
          if (c->pred)
            c->freed_for_others += bench_ring_drain(&c->in);
          sched_yield();
        }
        c->remote++;
      } else {
        free(old);
      }
      size_t sz = ch_size(&c->rng);
      unsigned char *p = malloc(sz);
      if (!p) {
        slots[i] = NULL;
        c->failed = 1;
        break;
      }
      ch_write(p, sz, (unsigned char)k);
      slots[i] = p;
      if (c->sizes)
        c->sizes[i] = sz;
    }
  }
  c->ops = k;
  if (c->out)
    bench_ring_flush(c->out);
  atomic_store_explicit(&c->done, true, memory_order_release);
  ch_finish_inbound(c);
  pthread_barrier_wait(&ch_replaced);
  pthread_barrier_wait(&ch_teardown);
  for (uint64_t i = 0; i < live; i++)
    free(slots[i]);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  if (opt_max_size < opt_min_size)
    bench_usage_error(&prog, "--max-size (%llu) is below --min-size (%llu)",
                      (unsigned long long)opt_max_size, (unsigned long long)opt_min_size);
  const unsigned T = (unsigned)opt_threads;
  ch_remote_on = opt_remote_share > 0;
  ch_remote_threshold = opt_remote_share >= 1 ? (1ull << 32) : (uint64_t)(opt_remote_share * 4294967296.0);
  ch_realloc_threshold = opt_realloc_share >= 1 ? (1ull << 32) : (uint64_t)(opt_realloc_share * 4294967296.0);
  ch_realloc_top = 4 * (opt_mix == mix_choices[1] ? 4096 : (size_t)opt_max_size);
  const bool helper = ch_remote_on && T == 1;
  const unsigned N = T + (helper ? 1 : 0);

  struct ch_thread *th = aligned_alloc(64, ((N * sizeof *th + 63) / 64) * 64);
  if (!th)
    bench_die(PROG, "out of memory");
  memset(th, 0, N * sizeof *th);
  for (unsigned i = 0; i < N; i++) {
    struct ch_thread *c = &th[i];
    c->id = i;
    c->helper = i >= T;
    atomic_init(&c->done, false);
    bench_rng_seed(&c->rng, opt_seed, i);
    if (!c->helper) {
      c->slots = calloc(opt_live, sizeof *c->slots);
      if (!c->slots)
        bench_die(PROG, "out of memory for %llu slots", (unsigned long long)opt_live);
      if (opt_realloc_share > 0 && !(c->sizes = calloc(opt_live, sizeof *c->sizes)))
        bench_die(PROG, "out of memory for %llu sizes", (unsigned long long)opt_live);
    }
  }
  if (ch_remote_on) {
    /* thread i's remote frees go to i+1 (mod T), or to the helper when T = 1 */
    for (unsigned i = 0; i < N; i++)
      bench_ring_init(PROG, &th[i].in, 16384);
    if (helper) {
      th[0].out = &th[1].in;
      th[1].pred = &th[0];
    } else {
      for (unsigned i = 0; i < T; i++) {
        th[i].out = &th[(i + 1) % T].in;
        th[(i + 1) % T].pred = &th[i];
      }
    }
  }

  pthread_barrier_init(&ch_filled, NULL, N + 1);
  pthread_barrier_init(&ch_go, NULL, N + 1);
  pthread_barrier_init(&ch_replaced, NULL, N + 1);
  pthread_barrier_init(&ch_teardown, NULL, N + 1);

  double f0 = bench_now();
  for (unsigned i = 0; i < N; i++)
    bench_thread_start(PROG, &th[i].th, th[i].helper ? ch_helper : ch_worker, &th[i]);
  pthread_barrier_wait(&ch_filled);
  double fill_s = bench_now() - f0;
  uint64_t minflt0 = bench_minflt();
  double cpu0 = bench_cpu_seconds();
  double t0 = bench_now();
  pthread_barrier_wait(&ch_go);
  if (!opt_ops) {
    bench_sleep_seconds(opt_seconds);
    atomic_store(&ch_stop, true);
  }
  pthread_barrier_wait(&ch_replaced);
  double cpu1 = bench_cpu_seconds();
  double t1 = bench_now();
  uint64_t minflt1 = bench_minflt();
  uint64_t vsize, rss;
  bench_statm(&vsize, &rss);
  /* The kernel brings its high-water marks up to date only at some calls: one read after the
   * statm read may be below it (the purge thread's madvise in between), so each peak is at
   * least that reading (server_mix.c saw it once). */
  uint64_t hwm_kib = bench_status_kib("VmHWM");
  uint64_t vmpeak_kib = bench_status_kib("VmPeak");
  if (hwm_kib < rss / 1024)
    hwm_kib = rss / 1024;
  if (vmpeak_kib < vsize / 1024)
    vmpeak_kib = vsize / 1024;
  double cpu2 = bench_cpu_seconds();
  pthread_barrier_wait(&ch_teardown);

  uint64_t ops = 0, remote = 0, reallocs = 0;
  int failed = 0;
  for (unsigned i = 0; i < N; i++) {
    bench_thread_join(PROG, th[i].th);
    ops += th[i].ops;
    remote += th[i].remote;
    reallocs += th[i].reallocs;
    if (th[i].failed)
      failed = 1;
  }
  if (failed)
    bench_die(PROG, "malloc returned NULL");
  /* the teardown: every thread frees its live blocks, in slot order (which the replacements
   * have shuffled, unless the allocator gave each slot its own block back), and exits */
  double teardown_cpu_s = bench_cpu_seconds() - cpu2;
  uint64_t live_total = opt_live * T;

  double cpu_s = cpu1 - cpu0, wall_s = t1 - t0;
  double per_op = ops ? cpu_s * 1e9 / (double)ops : 0;
  printf("churn: %u threads x %llu live blocks, %llu replacements (%llu freed remotely) in "
         "%.3f s wall, %.3f s CPU: %.1f ns CPU per replacement; peak RSS %llu KiB, address "
         "space %llu KiB at the end\n",
         T, (unsigned long long)opt_live, (unsigned long long)ops, (unsigned long long)remote,
         wall_s, cpu_s, per_op, (unsigned long long)hwm_kib, (unsigned long long)(vsize / 1024));

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "cpu_ns_per_op", per_op);
  bench_json_u64(&j, "ops", ops);
  bench_json_real(&j, "ops_per_cpu_s", cpu_s > 0 ? (double)ops / cpu_s : 0);
  bench_json_real(&j, "ops_per_s", wall_s > 0 ? (double)ops / wall_s : 0);
  bench_json_real(&j, "cpu_s", cpu_s);
  bench_json_real(&j, "wall_s", wall_s);
  bench_json_real(&j, "fill_s", fill_s);
  bench_json_real(&j, "teardown_ns_per_free", live_total ? teardown_cpu_s * 1e9 / (double)live_total : 0);
  bench_json_u64(&j, "remote_frees", remote);
  bench_json_u64(&j, "reallocs", reallocs);
  bench_json_u64(&j, "minflt", minflt1 - minflt0);
  bench_json_u64(&j, "peak_rss_kib", hwm_kib);
  bench_json_u64(&j, "rss_kib", rss / 1024);
  bench_json_u64(&j, "mapped_kib", vsize / 1024);
  bench_json_u64(&j, "mapped_peak_kib", vmpeak_kib);
  bench_json_end(&j);

  for (unsigned i = 0; i < N; i++) {
    free(th[i].slots);
    free(th[i].sizes);
    if (ch_remote_on)
      bench_ring_destroy(&th[i].in);
  }
  free(th);
  return 0;
}
