/* drop-wait: the main thread builds a large heap and frees all of it at once (a drop: a cache
 * flushed, a big batch finished), then W worker threads allocate for a while, every call timed.
 * The allocator gives the dropped memory back meanwhile (larder: a purge delay after the frees),
 * and a worker that needs a lock the giving-back holds waits for it: the worst call and the
 * calls past 100 us and 1 ms show it (a server's tail latency after a drop).
 *
 * Each worker mallocs --worker-size blocks and keeps them, growing its heap (so that it takes
 * new superblocks, or new memory, as it goes), pausing --pause-ms after every 1,024 calls; at
 * --worker-max-mb it frees them all and starts again. Only the mallocs and frees of the workers
 * are timed (two clock reads around each). A machine's own scheduling jitter shows too: compare
 * allocators in the same runs, over repeats.
 *
 * With --fork-every MS the main thread forks meanwhile, every MS milliseconds, and times each
 * fork() call in the parent (the child exits at once): a program that starts a child process
 * while the allocator gives the drop back waits that long (larder's fork handlers must hold the
 * purge; until 2026-11-29 a fork waited for the whole purge run, up to a second or more when
 * threads outnumbered cores). */
#define _GNU_SOURCE
#include "common.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const PROG = "drop-wait";

static uint64_t opt_heap_mb = 1024;
static uint64_t opt_block = 256;
static uint64_t opt_workers = 1;
static double opt_seconds = 4;
static uint64_t opt_worker_size = 1024;
static uint64_t opt_worker_max_mb = 256;
static double opt_pause_ms = 1.5;
static double opt_fork_every_ms = 0;

static const struct bench_opt opts[] = {
    {"heap-mb", 0, BENCH_OPT_U64, &opt_heap_mb, 1, 1u << 20, 0, 0, false, "MiB of blocks the main thread builds and drops"},
    {"block-size", 0, BENCH_OPT_U64, &opt_block, 1, 1u << 20, 0, 0, false, "size of the dropped blocks"},
    {"workers", 'w', BENCH_OPT_U64, &opt_workers, 1, 256, 0, 0, false, "threads that allocate after the drop"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 3600, false, "length of the workers' timed phase"},
    {"worker-size", 0, BENCH_OPT_U64, &opt_worker_size, 1, 1u << 20, 0, 0, false, "size of the workers' blocks"},
    {"worker-max-mb", 0, BENCH_OPT_U64, &opt_worker_max_mb, 1, 1u << 20, 0, 0, false,
     "MiB a worker holds before it frees all and starts again"},
    {"pause-ms", 0, BENCH_OPT_REAL, &opt_pause_ms, 0, 0, 0, 1000, false, "pause after every 1,024 calls of a worker"},
    {"fork-every-ms", 0, BENCH_OPT_REAL, &opt_fork_every_ms, 0, 0, 0, 60000, false,
     "the main thread forks every this many ms while the workers run, each fork() timed (0: no forks)"},
};

static const struct bench_prog prog = {
    "drop-wait", "one thread drops a large heap while others allocate: how long their calls wait", opts,
    BENCH_NOPTS(opts)};

struct dw_worker {
  pthread_t th;
  uint32_t *hist;
  uint64_t calls, over_100us, over_1ms, worst_ns;
  double worst_at_s; /* from the start of the timed phase */
};

static double dw_start;

static uint64_t dw_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void dw_count(struct dw_worker *w, uint64_t begin, uint64_t end) {
  uint64_t d = end - begin;
  w->calls++;
  bench_hist_add(w->hist, d);
  if (d > 100000u) w->over_100us++;
  if (d > 1000000u) w->over_1ms++;
  if (d > w->worst_ns) {
    w->worst_ns = d;
    w->worst_at_s = (double)begin / 1e9 - dw_start;
  }
}

static void *dw_work(void *arg) {
  struct dw_worker *w = arg;
  size_t cap = (size_t)(opt_worker_max_mb << 20) / opt_worker_size;
  if (cap < 1) cap = 1;
  void **kept = malloc(cap * sizeof *kept);
  if (!kept) bench_die(PROG, "out of memory");
  size_t n = 0;
  double end = dw_start + opt_seconds;
  struct timespec pause = {0, (long)(opt_pause_ms * 1e6)};
  while (bench_now() < end) {
    for (int k = 0; k < 1024; k++) {
      if (n == cap) {
        for (size_t i = 0; i < n; i++) {
          uint64_t a = dw_ns();
          free(kept[i]);
          dw_count(w, a, dw_ns());
        }
        n = 0;
      }
      uint64_t a = dw_ns();
      void *p = malloc(opt_worker_size);
      dw_count(w, a, dw_ns());
      if (!p) bench_die(PROG, "malloc(%llu) failed", (unsigned long long)opt_worker_size);
      *(volatile char *)p = 1;
      kept[n++] = p;
    }
    if (opt_pause_ms > 0) nanosleep(&pause, NULL);
  }
  for (size_t i = 0; i < n; i++) free(kept[i]);
  free(kept);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  size_t count = (size_t)((opt_heap_mb << 20) / opt_block);
  if (count < 1) count = 1;
  void **blocks = malloc(count * sizeof *blocks);
  if (!blocks) bench_die(PROG, "out of memory");
  double t0 = bench_now();
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(opt_block);
    if (!blocks[i]) bench_die(PROG, "malloc(%llu) failed", (unsigned long long)opt_block);
    memset(blocks[i], 1, opt_block < 64 ? opt_block : 64);
  }
  double t1 = bench_now();
  uint64_t rss_peak = bench_rss_bytes();
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  free(blocks);
  double t2 = bench_now();

  struct dw_worker *w = calloc(opt_workers, sizeof *w);
  if (!w) bench_die(PROG, "out of memory");
  dw_start = (double)dw_ns() / 1e9;
  double wall0 = bench_now();
  for (uint64_t i = 0; i < opt_workers; i++) {
    w[i].hist = bench_hist_new(PROG);
    bench_thread_start(PROG, &w[i].th, dw_work, &w[i]);
  }
  /* forks while the workers run: each fork() call timed in the parent */
  uint64_t forks = 0, worst_fork_ns = 0, forks_over_100ms = 0;
  if (opt_fork_every_ms > 0) {
    struct timespec gap = {(time_t)(opt_fork_every_ms / 1000), (long)(fmod(opt_fork_every_ms, 1000) * 1e6)};
    double end = dw_start + opt_seconds;
    while (bench_now() < end) {
      nanosleep(&gap, NULL);
      uint64_t a = dw_ns();
      pid_t pid = fork();
      if (pid == 0) _exit(0);
      uint64_t d = dw_ns() - a;
      if (pid < 0) bench_die(PROG, "fork failed");
      int status;
      if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        bench_die(PROG, "a forked child did not exit 0");
      forks++;
      if (d > worst_fork_ns) worst_fork_ns = d;
      if (d > 100000000u) forks_over_100ms++;
    }
  }
  for (uint64_t i = 0; i < opt_workers; i++) bench_thread_join(PROG, w[i].th);
  double wall1 = bench_now();

  uint64_t calls = 0, over_100us = 0, over_1ms = 0, worst = 0;
  double worst_at = 0;
  for (uint64_t i = 0; i < opt_workers; i++) {
    calls += w[i].calls;
    over_100us += w[i].over_100us;
    over_1ms += w[i].over_1ms;
    if (w[i].worst_ns > worst) worst = w[i].worst_ns, worst_at = w[i].worst_at_s;
    if (i) bench_hist_merge(w[0].hist, w[i].hist);
  }
  /* the 99.9th and 99.99th percentiles, to the microsecond */
  double at[2] = {bench_hist_quantile_us(w[0].hist, calls, 0.999), bench_hist_quantile_us(w[0].hist, calls, 0.9999)};
  printf("drop-wait: %.0f MiB of %llu-byte blocks dropped in %.3f s; %llu worker calls in %.2f s: worst %.1f us "
         "(at %.2f s), %llu over 100 us, %llu over 1 ms, p99.9 %.0f us, p99.99 %.0f us\n",
         (double)(opt_heap_mb), (unsigned long long)opt_block, t2 - t1, (unsigned long long)calls, wall1 - wall0,
         (double)worst / 1e3, worst_at, (unsigned long long)over_100us, (unsigned long long)over_1ms, at[0], at[1]);
  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "build_s", t1 - t0);
  bench_json_real(&j, "drop_s", t2 - t1);
  bench_json_real(&j, "rss_peak_kib", (double)rss_peak / 1024.0);
  bench_json_u64(&j, "calls", calls);
  bench_json_real(&j, "worst_call_us", (double)worst / 1e3);
  bench_json_real(&j, "worst_call_at_s", worst_at);
  bench_json_u64(&j, "calls_over_100us", over_100us);
  bench_json_u64(&j, "calls_over_1ms", over_1ms);
  bench_json_real(&j, "p999_call_us", at[0]);
  bench_json_real(&j, "p9999_call_us", at[1]);
  bench_json_real(&j, "rss_end_kib", (double)bench_rss_bytes() / 1024.0);
  bench_json_u64(&j, "forks", forks);
  bench_json_real(&j, "worst_fork_us", (double)worst_fork_ns / 1e3);
  bench_json_u64(&j, "forks_over_100ms", forks_over_100ms);
  bench_json_end(&j);
  for (uint64_t i = 0; i < opt_workers; i++) free(w[i].hist);
  free(w);
  return 0;
}
