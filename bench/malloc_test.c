/* malloc-test: Lever & Boreham's benchmark 1 (seed 000 §4.1, §5.1; listing in seed 001
 * Appendix B). Every worker first times a null loop, then the same number of malloc/free pairs;
 * the null-loop time is subtracted as the listing does. Each worker does the full iteration
 * count (the listing hands `iteration_count` to every thread unchanged), so total work grows
 * with the worker count, which is what the seed's "threads past the CPU count" series plots.
 * --processes forks the workers instead (seed 000 Table 1: two threads vs two processes). */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const PROG = "malloc-test";

static uint64_t opt_size = 512;
static uint64_t opt_iterations = 10000000; /* seed 000 §4.1: "10 million balanced requests" */
static uint64_t opt_threads = 1;
static bool opt_processes = false;

static const struct bench_opt opts[] = {
    {"size", 0, BENCH_OPT_U64, &opt_size, 1, 1ull << 30, 0, 0, false, "bytes per request"},
    {"iterations", 0, BENCH_OPT_U64, &opt_iterations, 1, 1ull << 40, 0, 0, false,
     "malloc/free pairs per worker"},
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "workers"},
    {"processes", 0, BENCH_OPT_FLAG, &opt_processes, 0, 0, 0, 0, false,
     "fork the workers as processes instead of threads"},
};

static const struct bench_prog prog = {
    "malloc-test", "N malloc/free pairs per worker, minus a timed null loop (seed 001 App. B)",
    opts, BENCH_NOPTS(opts)};

/* One slot per worker, in memory shared with forked children in process mode. */
struct mt_result {
  double null_s;
  double loop_start, loop_end; /* CLOCK_MONOTONIC, comparable across processes */
  int ok;
};

struct mt_shared {
  pthread_barrier_t barrier; /* process-shared in process mode */
  struct mt_result res[];
};

static struct mt_shared *mt_sh;

/* The listing's dummy(): an empty call the compiler may not inline or remove, so the null
 * loop costs the loop and two calls, as in the original. */
__attribute__((noinline)) static void *mt_dummy(uint64_t i) {
  __asm__ volatile("" : : "g"(i) : "memory");
  return NULL;
}

static void mt_run(unsigned idx) {
  const uint64_t n = opt_iterations;
  const size_t size = (size_t)opt_size;
  struct mt_result *r = &mt_sh->res[idx];

  double t0 = bench_now();
  for (uint64_t i = 0; i < n; i++) {
    void *buf = mt_dummy(i);
    buf = mt_dummy(i);
    bench_escape(buf);
  }
  r->null_s = bench_now() - t0;

  /* Line the malloc loops up so that "elapsed" measures them running together, not a thread
   * that started late running alone. */
  pthread_barrier_wait(&mt_sh->barrier);

  r->loop_start = bench_now();
  for (uint64_t i = 0; i < n; i++) {
    void *buf = malloc(size);
    if (!buf) {
      r->ok = 0;
      return;
    }
    bench_escape(buf);
    free(buf);
  }
  r->loop_end = bench_now();
  r->ok = 1;
}

static void *mt_thread(void *arg) {
  mt_run((unsigned)(uintptr_t)arg);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  const unsigned T = (unsigned)opt_threads;

  size_t shbytes = sizeof(struct mt_shared) + T * sizeof(struct mt_result);
  /* Shared anonymous memory so forked workers can report back; mmap, not malloc, so the
   * allocator under test sees only the workload's own calls. */
  mt_sh = mmap(NULL, shbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mt_sh == MAP_FAILED)
    bench_die(PROG, "mmap failed: %s", strerror(errno));

  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  if (opt_processes)
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  if (pthread_barrier_init(&mt_sh->barrier, &ba, T) != 0)
    bench_die(PROG, "cannot create a barrier for %u workers", T);

  printf("Starting test: %u %s, %llu pairs of %llu bytes each\n", T,
         opt_processes ? "processes" : "threads", (unsigned long long)opt_iterations,
         (unsigned long long)opt_size);
  fflush(stdout); /* or the children would print the buffered line again */

  if (opt_processes) {
    pid_t *pids = calloc(T, sizeof *pids);
    if (!pids)
      bench_die(PROG, "out of memory");
    for (unsigned i = 0; i < T; i++) {
      pid_t p = fork();
      if (p < 0) {
        /* The started children wait at the barrier for ever; stop them before leaving. */
        for (unsigned k = 0; k < i; k++)
          kill(pids[k], SIGKILL);
        bench_die(PROG, "fork failed: %s", strerror(errno));
      }
      if (p == 0) {
        mt_run(i);
        _exit(mt_sh->res[i].ok ? 0 : 1);
      }
      pids[i] = p;
    }
    /* Reap in exit order: a worker that dies before the barrier would leave the others
     * waiting there for ever, so the first failure stops the rest. */
    int failed = 0;
    for (unsigned left = T; left > 0; left--) {
      int st;
      pid_t p = waitpid(-1, &st, 0);
      if (p < 0)
        bench_die(PROG, "waitpid failed: %s", strerror(errno));
      for (unsigned k = 0; k < T; k++)
        if (pids[k] == p)
          pids[k] = 0;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (!failed)
          for (unsigned k = 0; k < T; k++)
            if (pids[k] > 0)
              kill(pids[k], SIGKILL);
        failed++;
      }
    }
    free(pids);
    if (failed)
      bench_die(PROG, "%d worker process(es) failed", failed);
  } else {
    pthread_t *th = calloc(T, sizeof *th);
    if (!th)
      bench_die(PROG, "out of memory");
    for (unsigned i = 0; i < T; i++)
      bench_thread_start(PROG, &th[i], mt_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < T; i++)
      bench_thread_join(PROG, th[i]);
    free(th);
    for (unsigned i = 0; i < T; i++)
      if (!mt_sh->res[i].ok)
        bench_die(PROG, "malloc(%llu) returned NULL", (unsigned long long)opt_size);
  }

  double first = mt_sh->res[0].loop_start, last = mt_sh->res[0].loop_end, null_sum = 0;
  double per_thread[1024];
  for (unsigned i = 0; i < T; i++) {
    const struct mt_result *r = &mt_sh->res[i];
    if (r->loop_start < first)
      first = r->loop_start;
    if (r->loop_end > last)
      last = r->loop_end;
    null_sum += r->null_s;
    per_thread[i] = (r->loop_end - r->loop_start) - r->null_s;
    printf("%s %u adjusted timing: %.6f seconds for %llu requests of %llu bytes.\n",
           opt_processes ? "Process" : "Thread", i, per_thread[i],
           (unsigned long long)opt_iterations, (unsigned long long)opt_size);
  }
  double elapsed = last - first;
  double null_s = null_sum / T;
  double net = elapsed - null_s;
  if (net < 1e-9)
    net = 1e-9; /* a null loop longer than the work only happens on tiny runs */

  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "null_loop_s", null_s);
  bench_json_real(&j, "net_s", net);
  bench_json_real(&j, "pairs_per_s", (double)T * (double)opt_iterations / net);
  bench_json_real_list(&j, "per_thread_s", per_thread, T);
  bench_json_end(&j);

  pthread_barrier_destroy(&mt_sh->barrier);
  munmap(mt_sh, shbytes);
  return 0;
}
