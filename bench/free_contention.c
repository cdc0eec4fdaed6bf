/* free-contention: the producer/consumer test of seed 002 ("glibc free() contention"), written
 * from its description: threads calling malloc and threads calling free, passing blocks between
 * them, so that every free is of a block another thread allocated while that thread keeps
 * allocating from the same heap. An allocator whose free() waits for the owner's lock (glibc
 * 2.2's arenas, seed 002 "The Problem") loses throughput here; one whose remote free never
 * blocks does not. The figure is frees per second, the seed's table column, by worker count.
 *
 * N producers each hand blocks to their own consumer through a lock-free single-producer
 * single-consumer ring, so the hand-off itself takes no lock and the only shared state the
 * pair contends on is the allocator's. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PROG = "free-contention";

static uint64_t opt_workers = 1;
static double opt_seconds = 10;
static uint64_t opt_operations = 0;
static uint64_t opt_size = 64;
static uint64_t opt_queue = 1024;

static const struct bench_opt opts[] = {
    {"workers", 'w', BENCH_OPT_U64, &opt_workers, 1, 512, 0, 0, false,
     "producer/consumer pairs (the seed's -w)"},
    {"threads", 't', BENCH_OPT_U64, &opt_workers, 1, 512, 0, 0, true, "same as --workers"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false,
     "run time (ignored when --operations is given)"},
    {"operations", 0, BENCH_OPT_U64, &opt_operations, 0, 1ull << 40, 0, 0, false,
     "total frees, split among the pairs; 0 = run for --seconds"},
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1u << 20, 0, 0, false, "block size in bytes"},
    {"queue", 0, BENCH_OPT_U64, &opt_queue, 2, 1u << 20, 0, 0, false,
     "ring capacity per pair"},
};

static const struct bench_prog prog = {
    "free-contention",
    "producers allocate, consumers free what the producers allocated; frees per second "
    "(seed 002)",
    opts, BENCH_NOPTS(opts)};

/* Head and tail on their own cache lines, or the ring would add false sharing of its own. */
struct fc_pair {
  _Alignas(64) atomic_size_t tail; /* written by the producer */
  _Alignas(64) atomic_size_t head; /* written by the consumer */
  _Alignas(64) atomic_bool producer_done;
  void **ring;
  size_t cap;
  uint64_t quota; /* blocks to produce; UINT64_MAX in timed mode */
  pthread_barrier_t *start;
  double p_begin, c_begin, c_end;
  uint64_t frees;
  int failed;
};

static atomic_bool fc_stop;

static void *fc_producer(void *arg) {
  struct fc_pair *q = arg;
  const size_t size = (size_t)opt_size;
  size_t tail = 0;
  pthread_barrier_wait(q->start);
  q->p_begin = bench_now();
  for (uint64_t n = 0; n < q->quota; n++) {
    if ((n & 63) == 0 && atomic_load_explicit(&fc_stop, memory_order_relaxed))
      break;
    unsigned char *p = malloc(size);
    if (!p) {
      q->failed = 1;
      break;
    }
    p[0] = (unsigned char)n;
    /* Wait for room; yielding rather than spinning, since there may be fewer cores than
     * threads and the consumer needs the CPU to make room. */
    while (tail - atomic_load_explicit(&q->head, memory_order_acquire) >= q->cap) {
      if (atomic_load_explicit(&fc_stop, memory_order_relaxed)) {
        free(p);
        goto out;
      }
      sched_yield();
    }
    q->ring[tail % q->cap] = p;
    atomic_store_explicit(&q->tail, ++tail, memory_order_release);
  }
out:
  atomic_store_explicit(&q->producer_done, true, memory_order_release);
  return NULL;
}

static void *fc_consumer(void *arg) {
  struct fc_pair *q = arg;
  size_t head = 0;
  uint64_t frees = 0;
  pthread_barrier_wait(q->start);
  q->c_begin = bench_now();
  for (;;) {
    size_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
    if (head == tail) {
      /* Read done before re-reading tail: a block pushed just before done was set is seen. */
      if (atomic_load_explicit(&q->producer_done, memory_order_acquire) &&
          atomic_load_explicit(&q->tail, memory_order_acquire) == head)
        break;
      sched_yield();
      continue;
    }
    while (head != tail) {
      free(q->ring[head % q->cap]);
      frees++;
      /* Publish each slot at once so the producer never waits for a whole batch. */
      atomic_store_explicit(&q->head, ++head, memory_order_release);
    }
  }
  q->c_end = bench_now();
  q->frees = frees;
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned N = (unsigned)opt_workers;
  const bool timed = opt_operations == 0;

  struct fc_pair *pairs = aligned_alloc(64, N * sizeof *pairs);
  pthread_t *th = calloc(2 * (size_t)N, sizeof *th);
  if (!pairs || !th)
    bench_die(PROG, "out of memory");
  memset(pairs, 0, N * sizeof *pairs);
  pthread_barrier_t start;
  if (pthread_barrier_init(&start, NULL, 2 * N + 1) != 0)
    bench_die(PROG, "cannot create a barrier");
  for (unsigned i = 0; i < N; i++) {
    struct fc_pair *q = &pairs[i];
    q->cap = (size_t)opt_queue;
    q->ring = calloc(q->cap, sizeof *q->ring);
    if (!q->ring)
      bench_die(PROG, "out of memory for the rings");
    q->quota = timed ? UINT64_MAX : opt_operations / N + (i < opt_operations % N ? 1 : 0);
    q->start = &start;
  }
  for (unsigned i = 0; i < N; i++) {
    bench_thread_start(PROG, &th[2 * i], fc_consumer, &pairs[i]);
    bench_thread_start(PROG, &th[2 * i + 1], fc_producer, &pairs[i]);
  }
  pthread_barrier_wait(&start);
  if (timed) {
    bench_sleep_seconds(opt_seconds);
    atomic_store(&fc_stop, true);
  }
  for (unsigned i = 0; i < 2 * N; i++)
    bench_thread_join(PROG, th[i]);

  double first = pairs[0].p_begin, last = pairs[0].c_end;
  uint64_t frees = 0;
  for (unsigned i = 0; i < N; i++) {
    if (pairs[i].failed)
      bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
    if (pairs[i].p_begin < first)
      first = pairs[i].p_begin;
    if (pairs[i].c_begin < first)
      first = pairs[i].c_begin;
    if (pairs[i].c_end > last)
      last = pairs[i].c_end;
    frees += pairs[i].frees;
  }
  double elapsed = last - first;
  printf("free-contention: %u producer/consumer pairs, %llu frees in %.3f s\n", N,
         (unsigned long long)frees, elapsed);

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "frees_per_s", (double)frees / (elapsed > 0 ? elapsed : 1e-9));
  bench_json_u64(&j, "frees", frees);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_end(&j);

  for (unsigned i = 0; i < N; i++)
    free(pairs[i].ring);
  free(pairs);
  free(th);
  pthread_barrier_destroy(&start);
  return 0;
}
