/* soak: a server's load kept up for as long as asked, with every block checked. Not a race to
 * win but a run to survive: one wrong byte, one block handed out twice, one false report of a
 * bad free fails it (exit 1), whatever the allocator.
 *
 * T worker threads each keep --live blocks in slots and replace random ones: sizes 90% of
 * 16 B-1,152 B, 9% of 1-64 KiB, 1% of 64 KiB to --max-size (small classes, medium spans and
 * large ones of most allocators); a share of the old blocks is handed to another thread, which
 * checks and frees it (a mutex-protected queue per thread: the hand-off is the program's, the
 * frees are the allocator's remote ones); a share is realloc'd (its prefix must survive), a
 * share of the new ones comes from calloc (it must read zero) or posix_memalign (16 B-64 KiB
 * alignments, checked), and malloc_usable_size is checked against every request. Optionally
 * short-lived threads come and go (they allocate, hand half of their blocks to the workers and
 * exit), the workers pause together now and then (idle phases, in which memory goes back to
 * the OS and comes again), and larder_validate runs every second when the allocator has it.
 * The main thread may also fork now and then (a pre-forked server's start, or a child
 * spawned by a busy process): the child, whose only thread is the one that forked, checks and
 * frees blocks the workers made before (frees into heaps whose threads the child does not
 * have), starts threads of its own that allocate, check and free, trims and validates, and
 * exits; it runs under alarm(), so a lock the fork left held shows as a failed child rather
 * than a hung run. It may call malloc_trim while the workers run, read the statistics
 * (mallinfo2, malloc_info, larder_stats_get, larder_class_stats_get), and change larder's options at run time
 * (larder_option_set) under them.
 *
 * Blocks are written sparsely by default: a word at the start, one every 4 KiB and one at the
 * end, as a program writes headers and leaves buffers partly unset. What the memory held before
 * (a freed block's leftovers, the allocator's own) stays in the rest, and realloc and the
 * program's copies carry it along: a full pattern would hide it (larder's copied free tag,
 * fixed in 0.2, made such a block's free a false "double free"; tests/alloc/stale_tag.c).
 *
 * Figures: operations (replacements) per second and per CPU-second, hand-offs, reallocs and
 * the rest, peak RSS; corrupt (wrong bytes, failed calls) and validation failures, which must
 * be 0. */
#define _GNU_SOURCE
#include "common.h"
#include "larder.h" /* (larder_class_stats_t's layout: the calls go through dlsym) */

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* GCC's -Wuse-after-free=2 follows the slot's old pointer into paths realloc failed on, where
 * it is still the live block. */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuse-after-free"

static const char *const PROG = "soak";

static uint64_t opt_threads = 4;
static uint64_t opt_live = 20000;
static double opt_seconds = 10;
static uint64_t opt_max_size = 2u << 20;
static double opt_remote_share = 0.3;
static double opt_realloc_share = 0.05;
static double opt_calloc_share = 0.05;
static double opt_align_share = 0.03;
static double opt_idle_every = 0;
static double opt_idle_seconds = 1.5;
static double opt_thin_every = 0;
static uint64_t opt_short_lived = 0;
static bool opt_full_fill = false;
static bool opt_validate = false;
static uint64_t opt_seed = 1;
static double opt_fork_every = 0;
static double opt_trim_every = 0;
static double opt_options_every = 0;
static double opt_stats_every = 0;

static const struct bench_opt opts[] = {
    {"threads", 't', BENCH_OPT_U64, &opt_threads, 1, 1024, 0, 0, false, "worker threads"},
    {"live", 0, BENCH_OPT_U64, &opt_live, 1, 10000000, 0, 0, false, "live blocks per worker"},
    {"seconds", 0, BENCH_OPT_REAL, &opt_seconds, 0, 0, 0.001, 86400, false, "run time"},
    {"max-size", 0, BENCH_OPT_U64, &opt_max_size, 65536, 1ull << 30, 0, 0, false,
     "largest block (the 1% drawn from 64 KiB up)"},
    {"remote-share", 0, BENCH_OPT_REAL, &opt_remote_share, 0, 0, 0, 1, false,
     "share of replaced blocks handed to another thread to free"},
    {"realloc-share", 0, BENCH_OPT_REAL, &opt_realloc_share, 0, 0, 0, 1, false,
     "share of replaced blocks realloc'd to a new size instead"},
    {"calloc-share", 0, BENCH_OPT_REAL, &opt_calloc_share, 0, 0, 0, 1, false, "share of new blocks from calloc"},
    {"align-share", 0, BENCH_OPT_REAL, &opt_align_share, 0, 0, 0, 1, false,
     "share of new blocks from posix_memalign (16 B-64 KiB)"},
    {"idle-every", 0, BENCH_OPT_REAL, &opt_idle_every, 0, 0, 0, 86400, false,
     "seconds between idle phases (0: none)"},
    {"idle-seconds", 0, BENCH_OPT_REAL, &opt_idle_seconds, 0, 0, 0, 3600, false, "length of an idle phase"},
    {"thin-every", 0, BENCH_OPT_REAL, &opt_thin_every, 0, 0, 0, 86400, false,
     "seconds between thinnings: each worker frees all but 1 in 50 of its live blocks, then refills as it goes on (0: none)"},
    {"short-lived", 0, BENCH_OPT_U64, &opt_short_lived, 0, 64, 0, 0, false,
     "short-lived threads started every 100 ms (each allocates 2,000 blocks, hands half on, exits)"},
    {"full-fill", 0, BENCH_OPT_FLAG, &opt_full_fill, 0, 0, 0, 0, false,
     "write every byte of each block (default: sparse, see the source)"},
    {"validate", 0, BENCH_OPT_FLAG, &opt_validate, 0, 0, 0, 0, false,
     "call larder_validate every second, when the allocator has it"},
    {"seed", 0, BENCH_OPT_U64, &opt_seed, 0, UINT64_MAX, 0, 0, false, "random seed"},
    {"fork-every", 0, BENCH_OPT_REAL, &opt_fork_every, 0, 0, 0, 86400, false,
     "seconds between forks while the workers run; each child checks, allocates, frees and exits (0: none)"},
    {"trim-every", 0, BENCH_OPT_REAL, &opt_trim_every, 0, 0, 0, 86400, false,
     "seconds between calls of malloc_trim(0) while the workers run (0: none)"},
    {"options-every", 0, BENCH_OPT_REAL, &opt_options_every, 0, 0, 0, 86400, false,
     "seconds between changes of larder's run-time options, when the allocator has them (0: none)"},
    {"stats-every", 0, BENCH_OPT_REAL, &opt_stats_every, 0, 0, 0, 86400, false,
     "seconds between reads of the allocator's statistics: mallinfo2, malloc_info, larder_stats_get, larder_class_stats_get (0: none)"},
};

static const struct bench_prog prog = {
    "soak", "a server's load for a while, every block checked: a wrong byte or a false bad-free report fails it",
    opts, BENCH_NOPTS(opts)};

struct item {
  void *p;
  size_t size;
};

#define QUEUE_CAP 8192
struct queue {
  pthread_mutex_t mu;
  uint32_t n;
  struct item items[QUEUE_CAP];
};

/* Blocks each worker makes as it starts and leaves alone until it ends: a forked child checks
 * and frees them (docs at the top). */
#define STABLE 64

struct worker {
  pthread_t tid;
  unsigned id;
  struct bench_rng rng;
  struct item *slots;
  struct item stable[STABLE];
  uint64_t ops, handed, received, reallocs, callocs, aligned;
  unsigned thinned; /* the last thinning (thin_epoch) this worker made */
};

static struct queue *queues;
static struct worker *workers;
static atomic_ulong corrupt;
static atomic_int stop, idle_now;
static atomic_uint thin_epoch; /* raised by the main thread every --thin-every seconds */
static atomic_ulong short_lived_handed;
static atomic_uint stable_ready; /* workers whose stable blocks are made */

static void report(const char *what, const void *p, size_t size) {
  if (atomic_fetch_add(&corrupt, 1) < 20) fprintf(stderr, "%s: %s: block %p, size %zu\n", PROG, what, p, size);
}

/* The word written at each place: depends on the block's address and size, so a block handed
 * out twice or overlapping another breaks it. */
static uint64_t key_of(const void *p, size_t size) {
  uint64_t x = (uint64_t)(uintptr_t)p ^ ((uint64_t)size << 40) ^ 0x5DEECE66DULL;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}

static void fill(void *p, size_t size) {
  uint64_t k = key_of(p, size);
  unsigned char *b = p;
  if (size < 16) {
    for (size_t i = 0; i < size; i++) b[i] = (unsigned char)(k >> (8 * (i % 8)));
    return;
  }
  if (opt_full_fill) {
    for (size_t off = 0; off + 8 <= size; off += 8) memcpy(b + off, &k, 8);
  } else {
    for (size_t off = 0; off + 16 <= size; off += 4096) memcpy(b + off, &k, 8);
  }
  memcpy(b + size - 8, &k, 8);
}

/* The first `len` bytes of p, written as (orig, size): intact? */
static bool intact_as(const void *p, const void *orig, size_t size, size_t len) {
  uint64_t k = key_of(orig, size), v;
  const unsigned char *b = p;
  if (size < 16) {
    for (size_t i = 0; i < size && i < len; i++)
      if (b[i] != (unsigned char)(k >> (8 * (i % 8)))) return false;
    return true;
  }
  /* (the words that end at most where the last one begins: past that, fill's last word
   * overwrote the word before it in part, when size is not a multiple of 8) */
  size_t step = opt_full_fill ? 8 : 4096;
  for (size_t off = 0; off + 16 <= size && off + 8 <= len; off += step) {
    memcpy(&v, b + off, 8);
    if (v != k) return false;
  }
  if (len >= size) {
    memcpy(&v, b + size - 8, 8);
    if (v != k) return false;
  }
  return true;
}

static size_t pick_size(struct bench_rng *r) {
  uint64_t band = bench_rng_below(r, 100);
  if (band < 90) return 16 + (size_t)bench_rng_below(r, 1137);
  if (band < 99) return 1024 + (size_t)bench_rng_below(r, 64512);
  return 65536 + (size_t)bench_rng_below(r, opt_max_size - 65536 + 1);
}

static bool chance(struct bench_rng *r, double share) {
  return share > 0 && (double)bench_rng_below(r, 1u << 20) < share * (double)(1u << 20);
}

static void check_and_free(struct item it, const char *how) {
  if (!intact_as(it.p, it.p, it.size, it.size)) report(how, it.p, it.size);
  free(it.p);
}

/* A new block of `size` bytes: malloc, or calloc or posix_memalign now and then, checked. */
static void *new_block(struct bench_rng *r, size_t size, struct worker *w) {
  void *p;
  if (chance(r, opt_calloc_share)) {
    p = calloc(1, size);
    if (p) {
      const unsigned char *b = p;
      unsigned char any = b[size - 1];
      for (size_t i = 0; i < size && i < 256; i++) any |= b[i];
      for (size_t i = 256; i < size; i += 1024) any |= b[i];
      if (any) report("calloc's block is not zero", p, size);
      if (w) w->callocs++;
    }
  } else if (chance(r, opt_align_share)) {
    size_t align = (size_t)16 << bench_rng_below(r, 13);
    /* (each failure names the call and its alignment: mimalloc 2.0.9 misaligns a block whose
     * size equals an alignment of 256-1,024 B, its issue 700, and rpmalloc refuses alignments
     * of 64 KiB, its span size; docs/results.md) */
    char what[96];
    int error = posix_memalign(&p, align, size);
    if (error != 0) {
      snprintf(what, sizeof what, "posix_memalign (alignment %zu) failed: %s", align, strerror(error));
      report(what, NULL, size);
      return NULL;
    }
    if ((uintptr_t)p & (align - 1)) {
      snprintf(what, sizeof what, "posix_memalign's block is misaligned (alignment %zu)", align);
      report(what, p, size);
    }
    if (w) w->aligned++;
  } else {
    p = malloc(size);
  }
  if (!p) {
    report("allocation failed", NULL, size);
    return NULL;
  }
  if (malloc_usable_size(p) < size) report("malloc_usable_size below the request", p, size);
  fill(p, size);
  return p;
}

static bool queue_push(struct queue *q, struct item it) {
  bool ok = false;
  pthread_mutex_lock(&q->mu);
  if (q->n < QUEUE_CAP) {
    q->items[q->n++] = it;
    ok = true;
  }
  pthread_mutex_unlock(&q->mu);
  return ok;
}
static bool hand_over(unsigned to, struct item it) { return queue_push(&queues[to], it); }

static uint64_t drain_queue(struct queue *q) {
  static _Thread_local struct item local[QUEUE_CAP];
  pthread_mutex_lock(&q->mu);
  uint32_t n = q->n;
  memcpy(local, q->items, n * sizeof local[0]);
  q->n = 0;
  pthread_mutex_unlock(&q->mu);
  for (uint32_t i = 0; i < n; i++) check_and_free(local[i], "a block handed over was changed");
  return n;
}
static uint64_t drain(unsigned id) { return drain_queue(&queues[id]); }

static void replace(struct worker *w, struct item *it) {
  struct bench_rng *r = &w->rng;
  if (it->p) {
    if (!intact_as(it->p, it->p, it->size, it->size)) report("a live block was changed", it->p, it->size);
    if (chance(r, opt_realloc_share)) {
      size_t ns = pick_size(r);
      uint64_t k = key_of(it->p, it->size);
      size_t old_size = it->size;
      void *np = realloc(it->p, ns);
      if (!np) {
        report("realloc failed", NULL, ns);
        return; /* the old block stays */
      }
      uint64_t v;
      if (old_size >= 16 && ns >= 8 && (memcpy(&v, np, 8), v != k)) report("realloc lost the block's data", np, ns);
      if (malloc_usable_size(np) < ns) report("malloc_usable_size below the request", np, ns);
      fill(np, ns);
      it->p = np;
      it->size = ns;
      w->reallocs++;
      w->ops++;
      return;
    }
    if (opt_threads > 1 && chance(r, opt_remote_share) &&
        hand_over((unsigned)((w->id + 1 + bench_rng_below(r, opt_threads - 1)) % opt_threads), *it)) {
      w->handed++;
    } else {
      check_and_free(*it, "a block was changed");
    }
    it->p = NULL;
  }
  size_t size = pick_size(r);
  it->p = new_block(r, size, w);
  it->size = it->p ? size : 0;
  w->ops++;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  for (int i = 0; i < STABLE; i++) {
    w->stable[i].size = pick_size(&w->rng);
    w->stable[i].p = new_block(&w->rng, w->stable[i].size, NULL);
    if (!w->stable[i].p) w->stable[i].size = 0;
  }
  atomic_fetch_add(&stable_ready, 1);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    if (atomic_load_explicit(&idle_now, memory_order_relaxed)) {
      w->received += drain(w->id);
      bench_sleep_seconds(0.02);
      continue;
    }
    unsigned epoch = atomic_load_explicit(&thin_epoch, memory_order_relaxed);
    if (epoch != w->thinned) { /* a cache flush: most of the heap goes, scattered blocks stay */
      w->thinned = epoch;
      for (uint64_t i = 0; i < opt_live; i++)
        if (w->slots[i].p && i % 50 != 0) {
          check_and_free(w->slots[i], "a block was changed");
          w->slots[i].p = NULL;
          w->slots[i].size = 0;
        }
    }
    for (int k = 0; k < 256; k++) replace(w, &w->slots[bench_rng_below(&w->rng, opt_live)]);
    w->received += drain(w->id);
  }
  for (uint64_t i = 0; i < opt_live; i++)
    if (w->slots[i].p) check_and_free(w->slots[i], "a block was changed");
  for (int i = 0; i < STABLE; i++)
    if (w->stable[i].p) check_and_free(w->stable[i], "a block was changed");
  return NULL;
}

/* ---- forks, trims and option changes (the main thread, while the workers run) ---- */

/* A thread of a forked child: allocates, checks and frees, some of it handed to its sibling. */
enum { CHILD_THREADS = 2, CHILD_SLOTS = 1000, CHILD_STEPS = 20000 };
static struct queue child_queues[CHILD_THREADS];

static void *child_main(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  struct bench_rng r;
  bench_rng_seed(&r, opt_seed ^ 0xC41D, id + 1);
  static _Thread_local struct item mine[CHILD_SLOTS];
  memset(mine, 0, sizeof mine);
  for (int step = 0; step < CHILD_STEPS; step++) {
    struct item *it = &mine[bench_rng_below(&r, CHILD_SLOTS)];
    if (it->p && !(chance(&r, 0.25) && queue_push(&child_queues[(id + 1) % CHILD_THREADS], *it)))
      check_and_free(*it, "a forked child's block was changed");
    it->size = pick_size(&r);
    it->p = new_block(&r, it->size, NULL);
    if (!it->p) it->size = 0;
    if (step % 256 == 0) drain_queue(&child_queues[id]);
  }
  for (int i = 0; i < CHILD_SLOTS; i++)
    if (mine[i].p) check_and_free(mine[i], "a forked child's block was changed");
  return NULL;
}

/* The child of a fork: exits 0 when every block it looked at was intact and the allocator's
 * own check (if any) passed; 1 otherwise; SIGALRM when something hung. */
static void child_run(int (*validate)(void)) {
  alarm(60);
  atomic_store(&corrupt, 0); /* the parent's count came along */
  for (unsigned t = 0; t < opt_threads; t++)
    for (int i = 0; i < STABLE; i++)
      if (workers[t].stable[i].p) {
        check_and_free(workers[t].stable[i], "a block made before the fork was changed in the child");
        workers[t].stable[i].p = NULL;
      }
  for (int i = 0; i < CHILD_THREADS; i++) {
    pthread_mutex_init(&child_queues[i].mu, NULL);
    child_queues[i].n = 0;
  }
  pthread_t t[CHILD_THREADS];
  for (int i = 0; i < CHILD_THREADS; i++)
    if (pthread_create(&t[i], NULL, child_main, (void *)(uintptr_t)i) != 0) _exit(3);
  for (int i = 0; i < CHILD_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < CHILD_THREADS; i++) drain_queue(&child_queues[i]);
  malloc_trim(0);
  if (validate && validate() != 0) _exit(2);
  _exit(atomic_load(&corrupt) ? 1 : 0);
}

/* Forks once; returns whether the child exited 0. *call: how long the parent's fork() took
 * (the atfork handlers and the copy of the address space), the wait for the child apart: a
 * program that starts a child process waits that long. */
static bool fork_once(int (*validate)(void), double *call) {
  fflush(NULL);
  double began = bench_now();
  pid_t pid = fork();
  if (pid != 0) *call = bench_now() - began;
  if (pid < 0) {
    fprintf(stderr, "%s: fork failed\n", PROG);
    return false;
  }
  if (pid == 0) child_run(validate);
  int status;
  if (waitpid(pid, &status, 0) != pid) return false;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (WIFSIGNALED(status))
    fprintf(stderr, "%s: a forked child died of signal %d\n", PROG, WTERMSIG(status));
  else
    fprintf(stderr, "%s: a forked child exited %d\n", PROG, WEXITSTATUS(status));
  return false;
}

/* The longest call so far of one kind: *worst, given when the call began. */
static void note_worst(double *worst, double began) {
  double took = bench_now() - began;
  if (took > *worst) *worst = took;
}

/* larder's run-time options, set in turn to values far apart; each goes back at the end to the
 * value the run began with (the build's default, or the environment's LARDER_<NAME>). */
static const char *const option_changes[][2] = {
    {"empty_fraction", "0.1"},   {"k", "1"},               {"purge_delay_ms", "0"},
    {"medium_cache_kb", "0"},    {"large_cache_mb", "0"},  {"remote_free_check", "0"},
    {"purge_thread", "0"},       {"huge_pages", "1"},      {"medium_cache_max_kb", "0"},
    {"bin_growth_kb", "0"},
    {"empty_fraction", "0.9"},   {"k", "16"},              {"purge_delay_ms", "5"},
    {"medium_cache_kb", "4096"}, {"large_cache_mb", "256"}, {"remote_free_check", "1"},
    {"purge_thread", "1"},       {"huge_pages", "0"},      {"medium_cache_max_kb", "65536"},
    {"bin_growth_kb", "65536"},
};
enum { OPTION_CHANGES = sizeof option_changes / sizeof option_changes[0] };

static void *short_lived_main(void *arg) {
  struct bench_rng r;
  bench_rng_seed(&r, opt_seed, (uint64_t)(uintptr_t)arg);
  enum { N = 2000 };
  struct item *mine = malloc(N * sizeof *mine);
  if (!mine) {
    report("allocation failed", NULL, N * sizeof *mine);
    return NULL;
  }
  for (int i = 0; i < N; i++) {
    mine[i].size = pick_size(&r);
    mine[i].p = new_block(&r, mine[i].size, NULL);
    if (!mine[i].p) mine[i].size = 0;
  }
  uint64_t handed = 0;
  for (int i = 0; i < N; i++) {
    if (!mine[i].p) continue;
    if (!intact_as(mine[i].p, mine[i].p, mine[i].size, mine[i].size)) report("a block was changed", mine[i].p, mine[i].size);
    if (i % 2 && hand_over((unsigned)bench_rng_below(&r, opt_threads), mine[i]))
      handed++;
    else
      free(mine[i].p);
  }
  free(mine);
  atomic_fetch_add(&short_lived_handed, handed);
  return NULL;
}

int main(int argc, char **argv) {
  bench_parse(&prog, argc, argv);
  int (*validate)(void) = opt_validate ? (int (*)(void))dlsym(RTLD_DEFAULT, "larder_validate") : NULL;
  int (*option_set)(const char *, const char *) =
      opt_options_every > 0 ? (int (*)(const char *, const char *))dlsym(RTLD_DEFAULT, "larder_option_set") : NULL;
  double (*option_get)(const char *) = option_set ? (double (*)(const char *))dlsym(RTLD_DEFAULT, "larder_option_get") : NULL;
  if (!option_get) option_set = NULL; /* (both or neither) */
  double option_began[OPTION_CHANGES];
  for (unsigned i = 0; option_get && i < OPTION_CHANGES; i++) option_began[i] = option_get(option_changes[i][0]);
  queues = calloc(opt_threads, sizeof *queues);
  workers = calloc(opt_threads, sizeof *workers);
  if (!queues || !workers) bench_die(PROG, "out of memory for %llu threads", (unsigned long long)opt_threads);
  for (unsigned i = 0; i < opt_threads; i++) {
    pthread_mutex_init(&queues[i].mu, NULL);
    workers[i].id = i;
    bench_rng_seed(&workers[i].rng, opt_seed, i + 1);
    workers[i].slots = calloc(opt_live, sizeof(struct item));
    if (!workers[i].slots) bench_die(PROG, "out of memory for %llu slots", (unsigned long long)opt_live);
  }
  double cpu0 = bench_cpu_seconds(), start = bench_now();
  for (unsigned i = 0; i < opt_threads; i++) bench_thread_start(PROG, &workers[i].tid, worker_main, &workers[i]);
  double next_idle = opt_idle_every > 0 ? start + opt_idle_every : 0, next_check = start + 1;
  double next_thin = opt_thin_every > 0 ? start + opt_thin_every : 0;
  uint64_t thinnings = 0;
  double next_fork = opt_fork_every > 0 ? start + opt_fork_every : 0;
  double next_trim = opt_trim_every > 0 ? start + opt_trim_every : 0;
  double next_option = option_set ? start + opt_options_every : 0;
  double next_stats = opt_stats_every > 0 ? start + opt_stats_every : 0;
  void (*stats_get)(void *) = opt_stats_every > 0 ? (void (*)(void *))dlsym(RTLD_DEFAULT, "larder_stats_get") : NULL;
  size_t (*class_stats_get)(larder_class_stats_t *, size_t) =
      opt_stats_every > 0 ? (size_t (*)(larder_class_stats_t *, size_t))dlsym(RTLD_DEFAULT, "larder_class_stats_get") : NULL;
  FILE *devnull = opt_stats_every > 0 ? fopen("/dev/null", "w") : NULL;
  uint64_t validations = 0, validation_failures = 0, idle_phases = 0, short_lived = 0;
  uint64_t forks = 0, fork_failures = 0, trims = 0, option_sets = 0, option_refusals = 0, stats_reads = 0;
  /* the longest each call of the main thread took (a fork: until its child ended) */
  double worst_validate = 0, worst_fork = 0, worst_trim = 0, worst_option_set = 0, worst_short_lived = 0, worst_stats = 0;
  double worst_fork_call = 0;
  while (atomic_load(&stable_ready) < opt_threads) bench_sleep_seconds(0.001);
  while (bench_now() - start < opt_seconds) {
    double tick = 0.1;
    if (next_fork && opt_fork_every < tick) tick = opt_fork_every;
    if (next_trim && opt_trim_every < tick) tick = opt_trim_every;
    if (next_option && opt_options_every < tick) tick = opt_options_every;
    if (next_stats && opt_stats_every < tick) tick = opt_stats_every;
    if (next_thin && opt_thin_every < tick) tick = opt_thin_every;
    bench_sleep_seconds(tick);
    double at = bench_now();
    if (next_fork && at >= next_fork) {
      forks++;
      double began = bench_now();
      double call = 0;
      if (!fork_once(validate, &call)) fork_failures++;
      note_worst(&worst_fork, began);
      if (call > worst_fork_call) worst_fork_call = call;
      next_fork = bench_now() + opt_fork_every;
    }
    if (next_trim && at >= next_trim) {
      double began = bench_now();
      malloc_trim(0);
      note_worst(&worst_trim, began);
      trims++;
      next_trim = at + opt_trim_every;
    }
    if (next_option && at >= next_option) {
      const char *const *change = option_changes[option_sets % OPTION_CHANGES];
      double began = bench_now();
      int refused = option_set(change[0], change[1]);
      note_worst(&worst_option_set, began);
      if (refused) {
        option_refusals++;
        fprintf(stderr, "%s: larder_option_set(%s, %s) refused\n", PROG, change[0], change[1]);
      }
      option_sets++;
      next_option = at + opt_options_every;
    }
    if (next_stats && at >= next_stats) {
      /* (larder_stats_t is larder's; a buffer larger than it serves any version) */
      static uint64_t larder_stats[512];
      double began = bench_now();
      struct mallinfo2 mi = mallinfo2();
      if (devnull) malloc_info(0, devnull);
      if (stats_get) stats_get(larder_stats);
      if (class_stats_get) {
        static larder_class_stats_t classes[128];
        size_t n = class_stats_get(classes, 128);
        for (size_t c = 0; c < n && c < 128; c++) /* (a snapshot while the workers run: each class is its own) */
          if (classes[c].bytes_in_use > (size_t)1 << 50 || classes[c].bytes_free > (size_t)1 << 50)
            report("larder_class_stats_get's figures are out of range", NULL, classes[c].block_size);
      }
      note_worst(&worst_stats, began);
      if (mi.uordblks > (size_t)1 << 50) report("mallinfo2's bytes in use are out of range", NULL, mi.uordblks);
      stats_reads++;
      next_stats = at + opt_stats_every;
    }
    for (uint64_t i = 0; i < opt_short_lived; i++) {
      pthread_t t;
      double began = bench_now();
      bench_thread_start(PROG, &t, short_lived_main, (void *)(uintptr_t)(1000 + short_lived++));
      bench_thread_join(PROG, t);
      note_worst(&worst_short_lived, began);
    }
    double now = bench_now();
    if (validate && now >= next_check) {
      double began = bench_now();
      int v = validate();
      note_worst(&worst_validate, began);
      validations++;
      if (v) {
        validation_failures++;
        fprintf(stderr, "%s: larder_validate found %d violation(s)\n", PROG, v);
      }
      next_check = now + 1;
    }
    if (next_thin && now >= next_thin) {
      atomic_fetch_add_explicit(&thin_epoch, 1, memory_order_relaxed);
      thinnings++;
      next_thin = now + opt_thin_every;
    }
    if (next_idle && now >= next_idle && now - start + opt_idle_seconds < opt_seconds) {
      atomic_store(&idle_now, 1);
      bench_sleep_seconds(opt_idle_seconds);
      atomic_store(&idle_now, 0);
      idle_phases++;
      next_idle = bench_now() + opt_idle_every;
    }
  }
  atomic_store(&stop, 1);
  for (unsigned i = 0; i < opt_threads; i++) bench_thread_join(PROG, workers[i].tid);
  for (unsigned i = 0; option_sets && i < OPTION_CHANGES; i++) {
    char value[32];
    snprintf(value, sizeof value, "%.17g", option_began[i]);
    if (option_set(option_changes[i][0], value) != 0) option_refusals++;
  }
  uint64_t ops = 0, handed = atomic_load(&short_lived_handed), received = 0, reallocs = 0, callocs = 0, aligned = 0;
  for (unsigned i = 0; i < opt_threads; i++) {
    received += drain(i); /* handed to a worker after its last drain */
    ops += workers[i].ops;
    handed += workers[i].handed;
    received += workers[i].received;
    reallocs += workers[i].reallocs;
    callocs += workers[i].callocs;
    aligned += workers[i].aligned;
    free(workers[i].slots);
  }
  double elapsed = bench_now() - start, cpu = bench_cpu_seconds() - cpu0;
  if (handed != received) report("blocks handed over and received differ", NULL, (size_t)(handed - received));
  if (validate) {
    int v = validate();
    validations++;
    if (v) validation_failures++;
  }
  uint64_t bad = atomic_load(&corrupt);
  struct bench_json j;
  bench_json_begin(&j, &prog);
  bench_json_figures(&j);
  bench_json_u64(&j, "ops", ops);
  bench_json_real(&j, "ops_per_s", elapsed > 0 ? (double)ops / elapsed : 0);
  bench_json_real(&j, "ops_per_cpu_s", cpu > 0 ? (double)ops / cpu : 0);
  bench_json_u64(&j, "handed_over", handed);
  bench_json_u64(&j, "reallocs", reallocs);
  bench_json_u64(&j, "callocs", callocs);
  bench_json_u64(&j, "aligned", aligned);
  bench_json_u64(&j, "short_lived_threads", short_lived);
  bench_json_u64(&j, "idle_phases", idle_phases);
  bench_json_u64(&j, "thinnings", thinnings);
  bench_json_u64(&j, "validations", validations);
  bench_json_u64(&j, "validation_failures", validation_failures);
  bench_json_u64(&j, "forks", forks);
  bench_json_u64(&j, "fork_failures", fork_failures);
  bench_json_u64(&j, "trims", trims);
  bench_json_u64(&j, "option_sets", option_sets);
  bench_json_u64(&j, "option_refusals", option_refusals);
  bench_json_u64(&j, "stats_reads", stats_reads);
  bench_json_real(&j, "worst_validate_s", worst_validate);
  bench_json_real(&j, "worst_fork_s", worst_fork);
  bench_json_real(&j, "worst_fork_call_s", worst_fork_call);
  bench_json_real(&j, "worst_trim_s", worst_trim);
  bench_json_real(&j, "worst_option_set_s", worst_option_set);
  bench_json_real(&j, "worst_short_lived_s", worst_short_lived);
  bench_json_real(&j, "worst_stats_s", worst_stats);
  bench_json_u64(&j, "corrupt", bad);
  bench_json_u64(&j, "peak_rss_kib", bench_status_kib("VmHWM"));
  bench_json_real(&j, "elapsed_s", elapsed);
  bench_json_real(&j, "cpu_s", cpu);
  bench_json_end(&j);
  if (devnull) fclose(devnull);
  free(queues);
  free(workers);
  if (bad || validation_failures || fork_failures || option_refusals) {
    fprintf(stderr, "%s: FAILED: %llu corrupt, %llu validation failures, %llu failed children, %llu refused options\n",
            PROG, (unsigned long long)bad, (unsigned long long)validation_failures, (unsigned long long)fork_failures,
            (unsigned long long)option_refusals);
    return BENCH_EXIT_RUNTIME;
  }
  return 0;
}
