/* Shared plumbing of the larder-bench workload programs: flag parsing, the monotonic clock,
 * the one-line JSON result, getrusage/RSS probes and a small seeded random generator.
 * Nothing here calls the allocator on a measured path, so the helpers do not disturb what the
 * programs measure. The contract (flags, exit codes, JSON shape) is docs/benchmarks.md. */
#ifndef LARDER_BENCH_COMMON_H
#define LARDER_BENCH_COMMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses shared by all programs (docs/benchmarks.md "Exit status"). */
#define BENCH_EXIT_RUNTIME 1
#define BENCH_EXIT_USAGE 2

enum bench_opt_kind {
  BENCH_OPT_U64,  /* uint64_t, plain decimal, checked against [min, max] */
  BENCH_OPT_REAL, /* double, finite, checked against [rmin, rmax] */
  BENCH_OPT_FLAG, /* bool, takes no value */
  BENCH_OPT_CHOICE, /* const char *, one of `choices`; written as a JSON string */
};

struct bench_opt {
  const char *name;  /* long name without the leading "--" */
  char short_name;   /* single-letter alias, or 0 */
  enum bench_opt_kind kind;
  void *dest;        /* uint64_t *, double * or bool *; holds the default before parsing */
  uint64_t min, max; /* BENCH_OPT_U64 range */
  double rmin, rmax; /* BENCH_OPT_REAL range */
  bool alias;        /* another name for an earlier option: not repeated in the JSON params */
  const char *help;
  const char *default_text; /* shown as the default in the usage instead of the value, or NULL */
  const char *const *choices; /* BENCH_OPT_CHOICE: the accepted words, NULL-terminated */
};

struct bench_prog {
  const char *name;    /* program name, also the JSON "name" */
  const char *summary; /* one line for the usage text */
  const struct bench_opt *opts;
  size_t nopts;
};

#define BENCH_NOPTS(a) (sizeof(a) / sizeof((a)[0]))

/* Parses argv against prog->opts. -h/--help prints the usage on stdout and exits 0; any bad
 * flag prints a message and the usage on stderr and exits BENCH_EXIT_USAGE. */
void bench_parse(const struct bench_prog *prog, int argc, char **argv);

/* For checks that involve several flags (e.g. max-size >= min-size): message, usage, exit 2. */
void bench_usage_error(const struct bench_prog *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Runtime failure: message on stderr, exit BENCH_EXIT_RUNTIME. */
void bench_die(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Seconds on CLOCK_MONOTONIC (system-wide, so comparable across forked processes). */
double bench_now(void);

/* Current resident set in bytes from /proc/self/statm; 0 if it cannot be read. */
uint64_t bench_rss_bytes(void);
/* getrusage(RUSAGE_SELF): minor faults so far, and peak RSS in bytes. */
uint64_t bench_minflt(void);
uint64_t bench_maxrss_bytes(void);

unsigned bench_cpus(void);
size_t bench_cache_line(void);

/* Starts a thread or stops the program with exit 1: a workload with a missing thread would
 * report a wrong figure. */
/* Sleeps for `seconds` of CLOCK_MONOTONIC time, through signal interruptions. */
void bench_sleep_seconds(double seconds);

void bench_thread_start(const char *prog, pthread_t *t, void *(*fn)(void *), void *arg);
void bench_thread_join(const char *prog, pthread_t t);

/* Call times to the microsecond (drop-wait, tail-latency): a bucket per microsecond up to
 * BENCH_HIST_US, the longer ones in the last. Each thread fills its own; they are added up at
 * the end. */
#define BENCH_HIST_US 100000u
uint32_t *bench_hist_new(const char *prog); /* zeroed; stops the program when out of memory */
static inline void bench_hist_add(uint32_t *hist, uint64_t ns) {
  uint64_t us = ns / 1000u;
  hist[us < BENCH_HIST_US ? us : BENCH_HIST_US]++;
}
void bench_hist_merge(uint32_t *into, const uint32_t *from);
/* The p-th quantile (0.999: the 99.9th percentile) of `count` times, in whole microseconds. */
double bench_hist_quantile_us(const uint32_t *hist, uint64_t count, double p);

/* Keeps the compiler from deleting a malloc/free pair whose result is otherwise unused
 * (GCC and Clang remove such pairs at -O2). */
static inline void bench_escape(void *p) { __asm__ volatile("" : : "g"(p) : "memory"); }

/* splitmix64: small, seedable, and each thread can have its own stream. */
struct bench_rng {
  uint64_t state;
};
void bench_rng_seed(struct bench_rng *r, uint64_t seed, uint64_t stream);
uint64_t bench_rng_next(struct bench_rng *r);
/* Uniform in [0, n), n > 0 (multiply-high, bias below 2^-64 * n). */
uint64_t bench_rng_below(struct bench_rng *r, uint64_t n);

/* One JSON object, built in memory and printed as the last stdout line by bench_json_end. */
struct bench_json {
  char *buf;
  size_t len, cap;
  bool first;        /* no member written yet in the current object */
  const char *prog;  /* for error messages */
};
/* Starts {"name": ..., "params": { and writes every non-alias option of prog. */
void bench_json_begin(struct bench_json *j, const struct bench_prog *prog);
void bench_json_param_u64(struct bench_json *j, const char *key, uint64_t v);
void bench_json_param_real(struct bench_json *j, const char *key, double v);
/* Closes "params" and opens "figures". */
void bench_json_figures(struct bench_json *j);
void bench_json_u64(struct bench_json *j, const char *key, uint64_t v);
void bench_json_real(struct bench_json *j, const char *key, double v);
void bench_json_real_list(struct bench_json *j, const char *key, const double *v, size_t n);
void bench_json_u64_list(struct bench_json *j, const char *key, const uint64_t *v, size_t n);
/* Closes the object, prints it on its own line, flushes stdout, frees the buffer. */
void bench_json_end(struct bench_json *j);

/* ---- additions for the server-scale workloads (churn, server-mix) ---------------------- */

/* /proc/self/statm: address space (VmSize) and resident set in bytes, read without allocating.
 * Returns false (and zeroes) when the file cannot be read. */
bool bench_statm(uint64_t *size_bytes, uint64_t *resident_bytes);
/* One "Key:  N kB" line of /proc/self/status (VmHWM, VmPeak, VmSize, VmRSS, ...) in KiB, read
 * without allocating; 0 when absent. */
uint64_t bench_status_kib(const char *key);
/* CPU time of the whole process (user + system, every thread), seconds. */
double bench_cpu_seconds(void);

/* A list of [x, y] pairs, xy holding x0, y0, x1, y1, ...: "key": [[x0, y0], [x1, y1], ...]. */
void bench_json_pair_list(struct bench_json *j, const char *key, const double *xy, size_t n);
/* A string figure or parameter (plain ASCII without quotes or backslashes). */
void bench_json_string(struct bench_json *j, const char *key, const char *v);

/* A single-producer single-consumer ring of blocks handed from the thread that allocated them
 * to the thread that frees them. The producer publishes its tail every BENCH_RING_BATCH pushes
 * (and on flush), the consumer frees everything published at once: the hand-off costs a few
 * plain stores per block and one shared cache-line transfer per batch, so it does not dominate
 * what the workload measures. Head and tail sit on their own cache lines. */
#define BENCH_RING_BATCH 32
struct bench_ring {
  _Alignas(64) _Atomic uint64_t tail; /* published by the producer */
  _Alignas(64) _Atomic uint64_t head; /* published by the consumer */
  _Alignas(64) uint64_t ptail;        /* producer's private tail and cached head */
  uint64_t phead;
  void **slot;
  uint64_t mask; /* capacity - 1, capacity a power of two */
};
/* Capacity rounded up to a power of two, at least 4 * BENCH_RING_BATCH; exits 1 when out of
 * memory (the slot array is allocated here, before any measured phase). */
void bench_ring_init(const char *prog, struct bench_ring *r, uint64_t capacity);
void bench_ring_destroy(struct bench_ring *r);
/* Producer: false when the ring is full (the caller drains its own inbound ring and retries). */
bool bench_ring_push(struct bench_ring *r, void *p);
/* Producer: publishes every push so far. */
void bench_ring_flush(struct bench_ring *r);
/* Consumer: frees every published block; returns how many. */
uint64_t bench_ring_drain(struct bench_ring *r);
/* Consumer: moves up to `max` published blocks into out[] (without freeing them) and releases
 * their slots; returns how many. For a consumer that times its frees apart from the hand-off. */
uint64_t bench_ring_take(struct bench_ring *r, void **out, uint64_t max);

#endif
