/* server-mix: a server's memory over its life (issue 9, "New workload: server-mix"). T worker
 * threads each keep a working set of blocks of mixed sizes (99% small, 1% large buffers up to
 * MiBs) and replace random ones for a while, a share of the frees done by another thread (the
 * block is handed through a lock-free ring to the next worker, or to a helper thread when there
 * is one worker). Then every block is freed and the process idles with its threads alive,
 * making no allocation calls (or one malloc/free pair every 100 ms from the main thread); then
 * the threads exit. A sampler thread reads RSS every few milliseconds throughout.
 *
 * What it shows: whether RSS levels off while the work goes on (an allocator that cannot reuse
 * freed large or medium memory grows for as long as the work lasts), and whether memory goes
 * back to the OS when the program stops using it, with and without allocation calls to drive
 * the allocator, and after the threads exit.
 *
 * Live bytes are counted too (each block keeps its size in its first 4 bytes, which the
 * program writes anyway, and each thread counts what it allocates and frees): the blocks in
 * flight between threads are live, and on a loaded machine a ring fills while its consumer
 * waits for a core (up to 4096 blocks a worker, a hundred large ones), so live bytes swing
 * with the scheduling and RSS is read against them (issue 15). */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "server-mix";

static uint64_t opt_threads = 2;
static uint64_t opt_working_set = 256;
static uint64_t opt_max_size = 2u << 20;
static double opt_seconds = 20;
static double opt_remote_share = 0.25;
static double opt_idle_seconds = 5;
static bool opt_idle_calls = false;
static uint64_t opt_exit_wait_ms = 500;
static uint64_t opt_sample_ms = 50;
static uint64_t opt_seed = 1;
static bool opt_touch = false;

/* The size mix: 99% small in [SMALL_MIN, SMALL_MAX], 1% large in [LARGE_MIN, --max-size]. */
#define SMALL_MIN 8u
#define SMALL_MAX 2048u
#define LARGE_MIN (100u << 10)
#define MAX_SERIES 400

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "worker threads"},
    {"working-set", 0, BENCH_OPT_U64, &opt_working_set, 1, 10000000, 0, 0, false,
     "live blocks per worker"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, LARGE_MIN, 1ull << 30, 0, 0, false,
     "largest of the large blocks (the 1% drawn from 100 KiB up)"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false,
     "length of the work phase"},
    {"remote-share", 0, BENCH_OPT_REAL, &opt_remote_share, 0, 0, 0, 1, false,
     "share of frees done by another thread"},
    {"idle-seconds", 0, BENCH_OPT_REAL, &opt_idle_seconds, 0, 0, 0, 86400, false,
     "idle time after everything is freed, threads alive"},
    {"idle-calls", 0, BENCH_OPT_FLAG, &opt_idle_calls, 0, 0, 0, 0, false,
     "while idle, the main thread makes one malloc/free pair every 100 ms"},
    {"exit-wait-ms", 0, BENCH_OPT_U64, &opt_exit_wait_ms, 0, 3600000, 0, 0, false,
     "wait after the workers exit before the last RSS reading"},
    {"sample-ms", 0, BENCH_OPT_U64, &opt_sample_ms, 1, 60000, 0, 0, false,
     "RSS sampling period"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
    {"touch", 0, BENCH_OPT_FLAG, &opt_touch, 0, 0, 0, 0, false,
     "write every page of each new block (default: its first and last byte)"},
};

static const struct bench_prog prog = {
    "server-mix",
    "workers replace mixed-size blocks (8 B - 2 MiB), free everything, idle, exit; RSS over "
    "time",
    opts, BENCH_NOPTS(opts)};

struct sm_thread {
  struct bench_ring in;
  struct bench_ring *out;
  struct sm_thread *pred;
  _Alignas(64) atomic_bool done;
  bool helper;
  pthread_t th;
  void **slots;
  struct bench_rng rng;
  uint64_t ops, remote, large;
  /* bytes this thread allocated minus bytes it freed (its own and blocks handed to it): the
   * sum over threads is what the program holds; written by the thread, read by the sampler */
  _Atomic int64_t live;
  int failed;
};

static pthread_barrier_t sm_filled, sm_worked, sm_freed;
static atomic_bool sm_stop;
static pthread_mutex_t sm_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sm_exit_cond = PTHREAD_COND_INITIALIZER;
static bool sm_exit;
static bool sm_remote_on;
static uint64_t sm_remote_threshold;

/* The sampler: [t, rss_kib, vsize_kib, live_kib] per sample, preallocated; it never calls
 * malloc. */
#define SM_FIELDS 4
static double *sm_samples;
static size_t sm_nsamples, sm_cap;
static double sm_t0;
static atomic_bool sm_sampler_stop;
static struct sm_thread *sm_threads;
static unsigned sm_nthreads;

static size_t sm_size(struct bench_rng *r, uint64_t *large) {
  if (bench_rng_below(r, 100) == 0) {
    (*large)++;
    return (size_t)(LARGE_MIN + bench_rng_below(r, opt_max_size - LARGE_MIN + 1));
  }
  return (size_t)(SMALL_MIN + bench_rng_below(r, SMALL_MAX - SMALL_MIN + 1));
}

/* The first and last byte of every new block are written (so the allocator's own pages and
 * the pages it hands out are in RSS as a program's would be); with --touch every page, as a
 * server that fills its buffers does: RSS then includes all live bytes. */
static void sm_write(unsigned char *p, size_t sz, unsigned char v) {
  uint32_t sz32 = (uint32_t)sz; /* sizes stay below 2^30 (--max-size); blocks hold >= 8 B */
  memcpy(p, &sz32, sizeof sz32);
  p[sz - 1] = v;
  if (opt_touch)
    for (size_t o = 4096 - ((uintptr_t)p & 4095); o < sz; o += 4096)
      p[o] = v;
}

static size_t sm_size_of(const void *p) {
  uint32_t sz32;
  memcpy(&sz32, p, sizeof sz32);
  return sz32;
}

static void sm_live_add(struct sm_thread *c, int64_t d) {
  atomic_store_explicit(&c->live, atomic_load_explicit(&c->live, memory_order_relaxed) + d,
                        memory_order_relaxed);
}

/* free(), counting the block out of the live bytes. */
static void sm_free(struct sm_thread *c, void *p) {
  if (!p)
    return;
  sm_live_add(c, -(int64_t)sm_size_of(p));
  free(p);
}

/* Frees every block waiting in the thread's inbound ring (bench_ring_drain, counted). */
static uint64_t sm_drain(struct sm_thread *c) {
  void *batch[64];
  uint64_t total = 0, n;
  while ((n = bench_ring_take(&c->in, batch, 64)) > 0) {
    for (uint64_t i = 0; i < n; i++)
      sm_free(c, batch[i]);
    total += n;
  }
  return total;
}

/* What the program holds now, in KiB (threads' counters read as they run). */
static double sm_live_kib(void) {
  int64_t sum = 0;
  for (unsigned i = 0; i < sm_nthreads; i++)
    sum += atomic_load_explicit(&sm_threads[i].live, memory_order_relaxed);
  return sum < 0 ? 0 : (double)sum / 1024.0;
}

static void sm_pause(void) {
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

static void sm_finish_inbound(struct sm_thread *c) {
  if (!c->pred)
    return;
  for (;;) {
    bool pred_done = atomic_load_explicit(&c->pred->done, memory_order_acquire);
    uint64_t n = sm_drain(c);
    if (pred_done)
      return;
    if (n == 0)
      sm_pause();
  }
}

static void sm_idle_until_exit(void) {
  pthread_mutex_lock(&sm_exit_lock);
  while (!sm_exit)
    pthread_cond_wait(&sm_exit_cond, &sm_exit_lock);
  pthread_mutex_unlock(&sm_exit_lock);
}

static void *sm_helper(void *arg) {
  struct sm_thread *c = arg;
  pthread_barrier_wait(&sm_filled);
  sm_finish_inbound(c);
  atomic_store_explicit(&c->done, true, memory_order_release);
  pthread_barrier_wait(&sm_worked);
  pthread_barrier_wait(&sm_freed);
  sm_idle_until_exit();
  return NULL;
}

static void *sm_worker(void *arg) {
  struct sm_thread *c = arg;
  const uint64_t n = opt_working_set;
  void **slots = c->slots;
  for (uint64_t i = 0; i < n && !c->failed; i++) {
    size_t sz = sm_size(&c->rng, &c->large);
    unsigned char *p = malloc(sz);
    if (!p)
      c->failed = 1;
    else {
      sm_write(p, sz, (unsigned char)i);
      sm_live_add(c, (int64_t)sz);
    }
    slots[i] = p;
  }
  pthread_barrier_wait(&sm_filled);
  uint64_t k = 0;
  while (!c->failed) {
    if ((k & 63) == 0 && atomic_load_explicit(&sm_stop, memory_order_relaxed))
      break;
    if (sm_remote_on && (k & (BENCH_RING_BATCH - 1)) == 0 && c->pred)
      sm_drain(c);
    uint64_t i = bench_rng_below(&c->rng, n);
    void *old = slots[i];
    if (sm_remote_on && (bench_rng_next(&c->rng) >> 32) < sm_remote_threshold) {
      while (!bench_ring_push(c->out, old)) {
        if (c->pred)
          sm_drain(c);
        sched_yield();
      }
      c->remote++;
    } else {
      sm_free(c, old);
    }
    size_t sz = sm_size(&c->rng, &c->large);
    unsigned char *p = malloc(sz);
    slots[i] = p;
    if (!p) {
      c->failed = 1;
      break;
    }
    sm_write(p, sz, (unsigned char)k);
    sm_live_add(c, (int64_t)sz);
    k++;
  }
  c->ops = k;
  if (c->out)
    bench_ring_flush(c->out);
  atomic_store_explicit(&c->done, true, memory_order_release);
  sm_finish_inbound(c);
  pthread_barrier_wait(&sm_worked);
  /* everything this worker still holds is freed by it */
  for (uint64_t i = 0; i < n; i++) {
    sm_free(c, slots[i]);
    slots[i] = NULL;
  }
  pthread_barrier_wait(&sm_freed);
  sm_idle_until_exit();
  return NULL;
}

static double sm_peak_rss, sm_peak_vsize, sm_peak_live; /* over every sample, kept or not */

/* Returns true when the storage was full and every other sample was dropped to make room (the
 * caller then samples half as often): a run longer than planned keeps an even series. */
static bool sm_take_sample(void) {
  uint64_t vsize, rss;
  bench_statm(&vsize, &rss);
  bool halved = false;
  if (sm_nsamples == sm_cap) {
    for (size_t i = 0; 2 * i < sm_cap; i++)
      memcpy(&sm_samples[SM_FIELDS * i], &sm_samples[SM_FIELDS * (2 * i)], SM_FIELDS * sizeof *sm_samples);
    sm_nsamples = (sm_cap + 1) / 2;
    halved = true;
  }
  double *s = &sm_samples[SM_FIELDS * sm_nsamples];
  s[0] = bench_now() - sm_t0;
  s[1] = (double)(rss / 1024);
  s[2] = (double)(vsize / 1024);
  s[3] = sm_live_kib();
  sm_nsamples++;
  if (s[3] > sm_peak_live)
    sm_peak_live = s[3];
  if (s[1] > sm_peak_rss)
    sm_peak_rss = s[1];
  if (s[2] > sm_peak_vsize)
    sm_peak_vsize = s[2];
  return halved;
}

static void *sm_sampler(void *arg) {
  (void)arg;
  double period = (double)opt_sample_ms * 1e-3;
  double next = sm_t0;
  while (!atomic_load(&sm_sampler_stop)) {
    if (sm_take_sample())
      period *= 2;
    next += period;
    double now = bench_now();
    if (next < now)
      next = now;
    bench_sleep_seconds(next - now);
  }
  return NULL;
}

/* RSS in KiB now (read by the main thread at phase boundaries). */
static uint64_t sm_rss_kib(void) {
  uint64_t vsize, rss;
  bench_statm(&vsize, &rss);
  return rss / 1024;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned T = (unsigned)opt_threads;
  sm_remote_on = opt_remote_share > 0;
  sm_remote_threshold =
      opt_remote_share >= 1 ? (1ull << 32) : (uint64_t)(opt_remote_share * 4294967296.0);
  const bool helper = sm_remote_on && T == 1;
  const unsigned N = T + (helper ? 1 : 0);

  /* Sampler storage for the whole run plus slack (the fill phase, the joins); a run that
   * outlasts it is thinned by the sampler, which never allocates. */
  double total_s = opt_seconds + opt_idle_seconds + (double)opt_exit_wait_ms * 1e-3 + 30;
  sm_cap = (size_t)(total_s * 1000.0 / (double)opt_sample_ms) + 64;
  if (sm_cap > 10000000)
    sm_cap = 10000000;
  sm_samples = malloc(sm_cap * SM_FIELDS * sizeof *sm_samples);
  struct sm_thread *th = aligned_alloc(64, ((N * sizeof *th + 63) / 64) * 64);
  if (!sm_samples || !th)
    bench_die(PROG, "out of memory");
  memset(th, 0, N * sizeof *th);
  sm_threads = th;
  sm_nthreads = N;
  for (unsigned i = 0; i < N; i++) {
    struct sm_thread *c = &th[i];
    c->helper = i >= T;
    atomic_init(&c->done, false);
    bench_rng_seed(&c->rng, opt_seed, i);
    if (!c->helper) {
      c->slots = calloc(opt_working_set, sizeof *c->slots);
      if (!c->slots)
        bench_die(PROG, "out of memory for %llu slots", (unsigned long long)opt_working_set);
    }
  }
  if (sm_remote_on) {
    for (unsigned i = 0; i < N; i++)
      bench_ring_init(PROG, &th[i].in, 4096);
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
  pthread_barrier_init(&sm_filled, NULL, N + 1);
  pthread_barrier_init(&sm_worked, NULL, N + 1);
  pthread_barrier_init(&sm_freed, NULL, N + 1);

  uint64_t rss_start_kib = sm_rss_kib();
  sm_t0 = bench_now();
  pthread_t sampler;
  bench_thread_start(PROG, &sampler, sm_sampler, NULL);
  for (unsigned i = 0; i < N; i++)
    bench_thread_start(PROG, &th[i].th, th[i].helper ? sm_helper : sm_worker, &th[i]);
  pthread_barrier_wait(&sm_filled);
  /* Work starts when the working sets are full; the series' time 0 is the program's start. */
  double work0 = bench_now();
  double work_begin_s = work0 - sm_t0;
  bench_sleep_seconds(opt_seconds);
  atomic_store(&sm_stop, true);
  pthread_barrier_wait(&sm_worked);
  double work_end_s = bench_now() - sm_t0;
  uint64_t rss_end_work = sm_rss_kib();
  double live_end_work = sm_live_kib();
  uint64_t hwm_work = bench_status_kib("VmHWM");
  pthread_barrier_wait(&sm_freed);
  uint64_t rss_after_free = sm_rss_kib();
  double live_after_free = sm_live_kib();

  /* Idle, threads alive, blocked on a condition variable. */
  double idle0 = bench_now();
  uint64_t idle_calls = 0;
  if (opt_idle_calls) {
    for (uint64_t k = 1; (double)k * 0.1 <= opt_idle_seconds + 1e-9; k++) {
      double t = idle0 + (double)k * 0.1, now = bench_now();
      if (t > now)
        bench_sleep_seconds(t - now);
      unsigned char *p = malloc(64);
      if (!p)
        bench_die(PROG, "malloc returned NULL");
      p[0] = p[63] = 1;
      bench_escape(p);
      free(p);
      idle_calls++;
    }
    double now = bench_now();
    if (idle0 + opt_idle_seconds > now)
      bench_sleep_seconds(idle0 + opt_idle_seconds - now);
  } else {
    bench_sleep_seconds(opt_idle_seconds);
  }
  double idle_end_s = bench_now() - sm_t0;
  uint64_t rss_after_idle = sm_rss_kib();

  pthread_mutex_lock(&sm_exit_lock);
  sm_exit = true;
  pthread_cond_broadcast(&sm_exit_cond);
  pthread_mutex_unlock(&sm_exit_lock);
  uint64_t ops = 0, remote = 0, large = 0;
  int failed = 0;
  for (unsigned i = 0; i < N; i++) {
    bench_thread_join(PROG, th[i].th);
    ops += th[i].ops;
    remote += th[i].remote;
    large += th[i].large;
    failed |= th[i].failed;
  }
  double exit_s = bench_now() - sm_t0;
  bench_sleep_seconds((double)opt_exit_wait_ms * 1e-3);
  uint64_t rss_after_exit = sm_rss_kib();
  uint64_t vsize_end, rss_end;
  bench_statm(&vsize_end, &rss_end);
  atomic_store(&sm_sampler_stop, true);
  bench_thread_join(PROG, sampler);
  if (failed)
    bench_die(PROG, "malloc returned NULL");

  /* Figures from the samples: peaks, RSS at 5 s of work, and the series thinned to at most
   * MAX_SERIES points (every k-th sample, the last one always kept). */
  double peak_rss = sm_peak_rss, peak_vsize = sm_peak_vsize, rss_5s = -1, live_5s = -1;
  for (size_t i = 0; i < sm_nsamples; i++) {
    double *s = &sm_samples[SM_FIELDS * i];
    if (rss_5s < 0 && s[0] >= work_begin_s + 5.0 && s[0] <= work_end_s) {
      rss_5s = s[1];
      live_5s = s[3];
    }
  }
  /* The kernel's high-water mark is brought up to date only at some calls (an madvise by the
   * purge thread between the statm read at the end of work and the VmHWM read may leave it
   * below the first: 54,012 against 54,176 KiB, seen once), so the peak is also at least every
   * reading this program made. */
  const uint64_t readings[] = {hwm_work, rss_end_work, rss_after_free, rss_after_idle, rss_after_exit, rss_end / 1024};
  for (size_t i = 0; i < sizeof readings / sizeof readings[0]; i++)
    if ((double)readings[i] > peak_rss)
      peak_rss = (double)readings[i];
  if ((double)(vsize_end / 1024) > peak_vsize) /* the same for the address space's last reading */
    peak_vsize = (double)(vsize_end / 1024);
  size_t stride = (sm_nsamples + MAX_SERIES - 1) / MAX_SERIES;
  if (stride == 0)
    stride = 1;
  double *series = malloc((MAX_SERIES + 2) * 2 * sizeof *series);
  double *live_series = malloc((MAX_SERIES + 2) * 2 * sizeof *live_series);
  if (!series || !live_series)
    bench_die(PROG, "out of memory");
  size_t ns = 0;
  for (size_t i = 0; i < sm_nsamples; i += stride, ns++) {
    series[2 * ns] = sm_samples[SM_FIELDS * i];
    series[2 * ns + 1] = sm_samples[SM_FIELDS * i + 1];
    live_series[2 * ns] = sm_samples[SM_FIELDS * i];
    live_series[2 * ns + 1] = sm_samples[SM_FIELDS * i + 3];
  }
  if (sm_nsamples && (sm_nsamples - 1) % stride != 0) {
    series[2 * ns] = sm_samples[SM_FIELDS * (sm_nsamples - 1)];
    series[2 * ns + 1] = sm_samples[SM_FIELDS * (sm_nsamples - 1) + 1];
    live_series[2 * ns] = sm_samples[SM_FIELDS * (sm_nsamples - 1)];
    live_series[2 * ns + 1] = sm_samples[SM_FIELDS * (sm_nsamples - 1) + 3];
    ns++;
  }

  printf("server-mix: %u workers x %llu blocks, %llu replacements (%llu freed remotely, %llu "
         "large) in %.2f s\n",
         T, (unsigned long long)opt_working_set, (unsigned long long)ops,
         (unsigned long long)remote, (unsigned long long)large, work_end_s - work_begin_s);
  printf("server-mix: RSS KiB: start %llu, at 5 s of work %s%.0f, end of work %llu, after "
         "free %llu, after %.1f s idle %llu, after exit %llu; peak %.0f; address space peak "
         "%.0f KiB, end %llu KiB\n",
         (unsigned long long)rss_start_kib, rss_5s < 0 ? "(work shorter) " : "",
         rss_5s < 0 ? 0.0 : rss_5s, (unsigned long long)rss_end_work,
         (unsigned long long)rss_after_free, opt_idle_seconds, (unsigned long long)rss_after_idle,
         (unsigned long long)rss_after_exit, peak_rss, peak_vsize,
         (unsigned long long)(vsize_end / 1024));
  printf("server-mix: live KiB: at 5 s of work %s%.0f, end of work %.0f, after free %.0f; "
         "peak %.0f\n",
         live_5s < 0 ? "(work shorter) " : "", live_5s < 0 ? 0.0 : live_5s, live_end_work,
         live_after_free, sm_peak_live);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_u64(&j, "ops", ops);
  bench_json_real(&j, "ops_per_s", (double)ops / (work_end_s - work_begin_s));
  bench_json_u64(&j, "remote_frees", remote);
  bench_json_u64(&j, "large_allocs", large);
  bench_json_u64(&j, "rss_start_kib", rss_start_kib);
  bench_json_real(&j, "peak_rss_kib", peak_rss);
  bench_json_real(&j, "rss_5s_kib", rss_5s < 0 ? NAN : rss_5s);
  bench_json_u64(&j, "rss_end_work_kib", rss_end_work);
  bench_json_u64(&j, "rss_after_free_kib", rss_after_free);
  bench_json_u64(&j, "rss_after_idle_kib", rss_after_idle);
  bench_json_u64(&j, "rss_after_exit_kib", rss_after_exit);
  bench_json_real(&j, "mapped_peak_kib", peak_vsize);
  bench_json_u64(&j, "mapped_kib", vsize_end / 1024);
  bench_json_u64(&j, "idle_calls", idle_calls);
  bench_json_real(&j, "work_begin_s", work_begin_s);
  bench_json_real(&j, "work_end_s", work_end_s);
  bench_json_real(&j, "idle_end_s", idle_end_s);
  bench_json_real(&j, "exit_s", exit_s);
  bench_json_u64(&j, "samples", sm_nsamples);
  bench_json_pair_list(&j, "rss_series", series, ns);
  bench_json_real(&j, "live_5s_kib", live_5s < 0 ? NAN : live_5s);
  bench_json_real(&j, "live_end_work_kib", live_end_work);
  bench_json_real(&j, "live_after_free_kib", live_after_free);
  bench_json_real(&j, "live_peak_kib", sm_peak_live);
  bench_json_pair_list(&j, "live_series", live_series, ns);
  bench_json_end(&j);

  free(series);
  free(live_series);
  for (unsigned i = 0; i < N; i++) {
    free(th[i].slots);
    if (sm_remote_on)
      bench_ring_destroy(&th[i].in);
  }
  free(th);
  free(sm_samples);
  return 0;
}
