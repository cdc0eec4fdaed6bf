/* blowup: the round-robin producer-consumer program of Hoard §2.2 and §6 (seed 004): "each
 * processor i allocates K blocks and processor (i + 1) mod P frees them. The program requires
 * only K blocks but [an allocator with private heaps and ownership] will allocate P * K blocks
 * (K on all P heaps)", and pure private heaps grow without bound.
 *
 * T threads pass a token around a ring. On its turn a thread frees the K blocks its predecessor
 * allocated, allocates K blocks of B bytes and writes them (so their pages are resident),
 * samples the process RSS, and passes the token on. Blowup is Hoard's "memory allocated by the
 * allocator / memory the program needed", with the growth of RSS over a baseline taken before
 * the first allocation standing for the former and K*B (the peak live bytes) for the latter. */
#define _GNU_SOURCE
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PROG = "blowup";

static uint64_t opt_threads = 4;
static uint64_t opt_blocks = 100000;
static uint64_t opt_size = 64;
static uint64_t opt_rounds = 10;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false,
     "threads in the ring (P)"},
    {"blocks", 0, BENCH_OPT_U64, &opt_blocks, 1, 1000000000, 0, 0, false,
     "blocks allocated per turn (K)"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "block size in bytes"},
    {"rounds", 0, BENCH_OPT_U64, &opt_rounds, 1, 1000000, 0, 0, false,
     "turns of the whole ring"},
};

static const struct bench_prog prog = {
    "blowup",
    "round-robin producer-consumer: thread i allocates K blocks, thread i+1 frees them; peak RSS "
    "growth over K*B (Hoard §2.2, §6)",
    opts, BENCH_NOPTS(opts)};

static pthread_mutex_t bl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bl_cond = PTHREAD_COND_INITIALIZER;
static bool bl_started;
static uint64_t bl_turn;   /* turns taken so far; thread bl_turn % T holds the token */
static uint64_t bl_turns;  /* R * T */
static void **bl_batch;    /* the K live blocks, allocated by the last token holder */
static bool bl_have_batch;
static uint64_t bl_peak_rss;
static int bl_failed;
static pthread_barrier_t bl_ready;

static void *bl_thread(void *arg) {
  const unsigned me = (unsigned)(uintptr_t)arg, T = (unsigned)opt_threads;
  const size_t size = (size_t)opt_size;
  pthread_barrier_wait(&bl_ready);
  for (;;) {
    pthread_mutex_lock(&bl_lock);
    while (!bl_failed && bl_turn < bl_turns && (!bl_started || bl_turn % T != me))
      pthread_cond_wait(&bl_cond, &bl_lock);
    bool over = bl_failed || bl_turn >= bl_turns;
    pthread_mutex_unlock(&bl_lock);
    if (over)
      break;

    /* Holding the token: the consumer side of the predecessor's batch, then the producer. */
    if (bl_have_batch)
      for (uint64_t k = 0; k < opt_blocks; k++)
        free(bl_batch[k]);
    bl_have_batch = false;
    int failed = 0;
    for (uint64_t k = 0; k < opt_blocks; k++) {
      void *p = malloc(size);
      if (!p) {
        for (uint64_t m = 0; m < k; m++)
          free(bl_batch[m]);
        failed = 1;
        break;
      }
      memset(p, (int)(me & 0xff), size);
      bl_batch[k] = p;
    }
    if (!failed) {
      bl_have_batch = true;
      uint64_t rss = bench_rss_bytes();
      if (rss > bl_peak_rss)
        bl_peak_rss = rss;
    }

    pthread_mutex_lock(&bl_lock);
    bl_failed |= failed;
    bl_turn++;
    pthread_cond_broadcast(&bl_cond);
    pthread_mutex_unlock(&bl_lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned T = (unsigned)opt_threads;
  bl_turns = opt_rounds * T;
  bl_batch = calloc(opt_blocks, sizeof *bl_batch);
  pthread_t *th = calloc(T, sizeof *th);
  if (!bl_batch || !th)
    bench_die(PROG, "out of memory");
  /* Make the bookkeeping array resident now so it is part of the baseline, not the growth. */
  memset(bl_batch, 0, opt_blocks * sizeof *bl_batch);
  if (pthread_barrier_init(&bl_ready, NULL, T + 1) != 0)
    bench_die(PROG, "cannot create a barrier");

  for (unsigned i = 0; i < T; i++)
    bench_thread_start(PROG, &th[i], bl_thread, (void *)(uintptr_t)i);
  pthread_barrier_wait(&bl_ready);
  uint64_t baseline = bench_rss_bytes();
  double t0 = bench_now();
  pthread_mutex_lock(&bl_lock);
  bl_started = true;
  pthread_cond_broadcast(&bl_cond);
  pthread_mutex_unlock(&bl_lock);
  for (unsigned i = 0; i < T; i++)
    bench_thread_join(PROG, th[i]);
  double elapsed = bench_now() - t0;
  if (bl_failed)
    bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);

  if (bl_have_batch)
    for (uint64_t k = 0; k < opt_blocks; k++)
      free(bl_batch[k]);
  uint64_t final_rss = bench_rss_bytes();
  uint64_t ideal = opt_blocks * opt_size;
  double growth = bl_peak_rss > baseline ? (double)(bl_peak_rss - baseline) : 0.0;
  double blowup = growth / (double)ideal;

  printf("blowup: %u threads, %llu turns of %llu blocks of %llu bytes: peak RSS %llu bytes "
         "(baseline %llu), ideal %llu bytes, blowup %.3f\n",
         T, (unsigned long long)bl_turns, (unsigned long long)opt_blocks,
         (unsigned long long)opt_size, (unsigned long long)bl_peak_rss,
         (unsigned long long)baseline, (unsigned long long)ideal, blowup);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_u64(&j, "baseline_rss_bytes", baseline);
  bench_json_u64(&j, "peak_rss_bytes", bl_peak_rss);
  bench_json_u64(&j, "final_rss_bytes", final_rss);
  bench_json_u64(&j, "maxrss_bytes", bench_maxrss_bytes());
  bench_json_u64(&j, "ideal_bytes", ideal);
  bench_json_real(&j, "blowup", blowup);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_end(&j);

  free(bl_batch);
  free(th);
  pthread_barrier_destroy(&bl_ready);
  return 0;
}
