/* Shared plumbing of the workload programs; see common.h and docs/benchmarks.md. */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- usage and flag parsing ---------------------------------------------------------- */

/* The defaults as they were before parsing, so a usage message printed after some flags were
 * taken still shows the real defaults. */
#define BENCH_MAX_OPTS 64
static uint64_t bench_default_u64[BENCH_MAX_OPTS];
static double bench_default_real[BENCH_MAX_OPTS];
static const char *bench_default_str[BENCH_MAX_OPTS];
static bool bench_defaults_saved;

static void bench_save_defaults(const struct bench_prog *prog) {
  for (size_t i = 0; i < prog->nopts && i < BENCH_MAX_OPTS; i++) {
    const struct bench_opt *o = &prog->opts[i];
    if (o->kind == BENCH_OPT_U64)
      bench_default_u64[i] = *(const uint64_t *)o->dest;
    else if (o->kind == BENCH_OPT_REAL)
      bench_default_real[i] = *(const double *)o->dest;
    else if (o->kind == BENCH_OPT_CHOICE)
      bench_default_str[i] = *(const char *const *)o->dest;
  }
  bench_defaults_saved = true;
}

static void bench_print_usage(const struct bench_prog *prog, FILE *out) {
  fprintf(out, "usage: %s [options]\n  %s\n\noptions:\n", prog->name, prog->summary);
  for (size_t i = 0; i < prog->nopts; i++) {
    const struct bench_opt *o = &prog->opts[i];
    char head[64];
    const char *arg = o->kind == BENCH_OPT_U64    ? " N"
                      : o->kind == BENCH_OPT_REAL   ? " X"
                      : o->kind == BENCH_OPT_CHOICE ? " WORD"
                                                    : "";
    if (o->short_name)
      snprintf(head, sizeof head, "-%c, --%s%s", o->short_name, o->name, arg);
    else
      snprintf(head, sizeof head, "    --%s%s", o->name, arg);
    fprintf(out, "  %-26s %s", head, o->help);
    if (o->alias) {
      fputc('\n', out);
      continue;
    }
    if (o->default_text && o->kind == BENCH_OPT_U64) {
      fprintf(out, " [%" PRIu64 "..%" PRIu64 ", default %s]\n", o->min, o->max, o->default_text);
      continue;
    }
    switch (o->kind) {
    case BENCH_OPT_U64:
      fprintf(out, " [%" PRIu64 "..%" PRIu64 ", default %" PRIu64 "]\n", o->min, o->max,
              bench_defaults_saved && i < BENCH_MAX_OPTS ? bench_default_u64[i]
                                                         : *(const uint64_t *)o->dest);
      break;
    case BENCH_OPT_REAL:
      fprintf(out, " [%g..%g, default %g]\n", o->rmin, o->rmax,
              bench_defaults_saved && i < BENCH_MAX_OPTS ? bench_default_real[i]
                                                         : *(const double *)o->dest);
      break;
    case BENCH_OPT_FLAG:
      fputc('\n', out);
      break;
    case BENCH_OPT_CHOICE:
      fputs(" [", out);
      for (size_t k = 0; o->choices && o->choices[k]; k++)
        fprintf(out, "%s%s", k ? "|" : "", o->choices[k]);
      fprintf(out, ", default %s]\n",
              o->default_text ? o->default_text
              : bench_defaults_saved && i < BENCH_MAX_OPTS ? bench_default_str[i]
                                                           : *(const char *const *)o->dest);
      break;
    }
  }
  fprintf(out, "  %-26s %s\n", "-h, --help", "show this help");
  fprintf(out, "\nThe last stdout line is one JSON object: {\"name\", \"params\", \"figures\"}.\n"
               "Exit status: 0 ok, 1 runtime failure, 2 bad command line.\n");
}

void bench_usage_error(const struct bench_prog *prog, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", prog->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n\n", stderr);
  bench_print_usage(prog, stderr);
  exit(BENCH_EXIT_USAGE);
}

void bench_die(const char *prog, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stdout);
  exit(BENCH_EXIT_RUNTIME);
}

/* Accepts only a plain unsigned decimal: strtoull alone would take "-1" (wrapping), "0x10",
 * leading spaces and trailing junk. */
static bool bench_parse_u64(const char *s, uint64_t *out) {
  if (*s == '\0')
    return false;
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE || *end != '\0')
    return false;
  *out = (uint64_t)v;
  return true;
}

static bool bench_parse_real(const char *s, double *out) {
  if (*s == '\0' || *s == ' ' || *s == '\t')
    return false;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno == ERANGE || *end != '\0' || !isfinite(v))
    return false;
  *out = v;
  return true;
}

static void bench_set_value(const struct bench_prog *prog, const struct bench_opt *o,
                            const char *shown, const char *val) {
  if (o->kind == BENCH_OPT_CHOICE) {
    for (size_t k = 0; o->choices && o->choices[k]; k++)
      if (strcmp(val, o->choices[k]) == 0) {
        *(const char **)o->dest = o->choices[k];
        return;
      }
    bench_usage_error(prog, "%s expects one of the words listed below, got '%s'", shown, val);
  }
  if (o->kind == BENCH_OPT_U64) {
    uint64_t v;
    if (!bench_parse_u64(val, &v))
      bench_usage_error(prog, "%s expects a non-negative integer, got '%s'", shown, val);
    if (v < o->min || v > o->max)
      bench_usage_error(prog, "%s %s is out of range [%" PRIu64 "..%" PRIu64 "]", shown, val,
                        o->min, o->max);
    *(uint64_t *)o->dest = v;
  } else {
    double v;
    if (!bench_parse_real(val, &v))
      bench_usage_error(prog, "%s expects a number, got '%s'", shown, val);
    if (v < o->rmin || v > o->rmax)
      bench_usage_error(prog, "%s %s is out of range [%g..%g]", shown, val, o->rmin, o->rmax);
    *(double *)o->dest = v;
  }
}

void bench_parse(const struct bench_prog *prog, int argc, char **argv) {
  bench_save_defaults(prog);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      bench_print_usage(prog, stdout);
      exit(0);
    }
    const struct bench_opt *o = NULL;
    const char *inline_val = NULL;
    if (a[0] == '-' && a[1] == '-' && a[2] != '\0') {
      const char *name = a + 2;
      const char *eq = strchr(name, '=');
      size_t n = eq ? (size_t)(eq - name) : strlen(name);
      for (size_t k = 0; k < prog->nopts; k++)
        if (strlen(prog->opts[k].name) == n && strncmp(prog->opts[k].name, name, n) == 0)
          o = &prog->opts[k];
      if (eq)
        inline_val = eq + 1;
    } else if (a[0] == '-' && a[1] != '\0' && a[2] == '\0') {
      for (size_t k = 0; k < prog->nopts; k++)
        if (prog->opts[k].short_name == a[1])
          o = &prog->opts[k];
    }
    if (!o)
      bench_usage_error(prog, "unknown argument '%s'", a);
    if (o->kind == BENCH_OPT_FLAG) {
      if (inline_val)
        bench_usage_error(prog, "--%s takes no value", o->name);
      *(bool *)o->dest = true;
      continue;
    }
    const char *val = inline_val;
    if (!val) {
      if (i + 1 >= argc)
        bench_usage_error(prog, "%s needs a value", a);
      val = argv[++i];
    }
    char shown[80];
    snprintf(shown, sizeof shown, "--%s", o->name);
    bench_set_value(prog, o, shown, val);
  }
}

/* ---- clock, rusage, RSS, machine ------------------------------------------------------ */

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t bench_rss_bytes(void) {
  /* read(2) on a stack buffer rather than stdio, so that sampling RSS allocates nothing. */
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  unsigned long long size_pages, resident_pages;
  if (sscanf(buf, "%llu %llu", &size_pages, &resident_pages) != 2)
    return 0;
  return (uint64_t)resident_pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t bench_minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_minflt;
}

uint64_t bench_maxrss_bytes(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_maxrss * 1024u; /* Linux reports kilobytes */
}

unsigned bench_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1u;
}

size_t bench_cache_line(void) {
  long n = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
  return n > 0 ? (size_t)n : 64u;
}

uint32_t *bench_hist_new(const char *prog) {
  uint32_t *hist = calloc(BENCH_HIST_US + 1, sizeof *hist);
  if (!hist) bench_die(prog, "out of memory");
  return hist;
}

void bench_hist_merge(uint32_t *into, const uint32_t *from) {
  for (unsigned b = 0; b <= BENCH_HIST_US; b++) into[b] += from[b];
}

double bench_hist_quantile_us(const uint32_t *hist, uint64_t count, double p) {
  uint64_t want = (uint64_t)((double)count * p), seen = 0;
  for (unsigned b = 0; b <= BENCH_HIST_US; b++) {
    seen += hist[b];
    if (seen > want) return b;
  }
  return 0;
}

void bench_thread_start(const char *prog, pthread_t *t, void *(*fn)(void *), void *arg) {
  int rc = pthread_create(t, NULL, fn, arg);
  if (rc != 0)
    bench_die(prog, "pthread_create failed: %s", strerror(rc));
}

void bench_thread_join(const char *prog, pthread_t t) {
  int rc = pthread_join(t, NULL);
  if (rc != 0)
    bench_die(prog, "pthread_join failed: %s", strerror(rc));
}

/* ---- random numbers -------------------------------------------------------------------- */

static uint64_t bench_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void bench_rng_seed(struct bench_rng *r, uint64_t seed, uint64_t stream) {
  /* Mixing the stream number in gives each thread an unrelated sequence from one --seed. */
  r->state = bench_mix64(seed ^ bench_mix64(stream + 0x9e3779b97f4a7c15ull));
}

uint64_t bench_rng_next(struct bench_rng *r) {
  r->state += 0x9e3779b97f4a7c15ull;
  return bench_mix64(r->state);
}

uint64_t bench_rng_below(struct bench_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void bench_json_put(struct bench_json *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void bench_json_put(struct bench_json *j, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
    va_end(ap);
    if (n < 0)
      bench_die(j->prog, "cannot format the JSON result");
    if ((size_t)n < j->cap - j->len) {
      j->len += (size_t)n;
      return;
    }
    size_t cap = j->cap * 2 + (size_t)n + 64;
    char *nb = realloc(j->buf, cap);
    if (!nb)
      bench_die(j->prog, "out of memory building the JSON result");
    j->buf = nb;
    j->cap = cap;
  }
}

/* Keys are written by the programs themselves (flag names, figure names): plain ASCII with no
 * quote or backslash, so no escaping is needed; '-' becomes '_' so Python can use them. */
static void bench_json_key(struct bench_json *j, const char *key) {
  bench_json_put(j, "%s\"", j->first ? "" : ", ");
  for (const char *p = key; *p; p++)
    bench_json_put(j, "%c", *p == '-' ? '_' : *p);
  bench_json_put(j, "\": ");
  j->first = false;
}

/* JSON has no NaN or infinity; a figure that is not finite is written as null so the line
 * still parses and the harness sees that the figure is missing. */
static void bench_json_number(struct bench_json *j, double v) {
  if (isfinite(v))
    bench_json_put(j, "%.9g", v);
  else
    bench_json_put(j, "null");
}

void bench_json_begin(struct bench_json *j, const struct bench_prog *prog) {
  j->cap = 1024;
  j->len = 0;
  j->prog = prog->name;
  j->buf = malloc(j->cap);
  if (!j->buf)
    bench_die(prog->name, "out of memory building the JSON result");
  j->buf[0] = '\0';
  bench_json_put(j, "{\"name\": \"%s\", \"params\": {", prog->name);
  j->first = true;
  for (size_t i = 0; i < prog->nopts; i++) {
    const struct bench_opt *o = &prog->opts[i];
    if (o->alias)
      continue;
    bench_json_key(j, o->name);
    switch (o->kind) {
    case BENCH_OPT_U64:
      bench_json_put(j, "%" PRIu64, *(const uint64_t *)o->dest);
      break;
    case BENCH_OPT_REAL:
      bench_json_number(j, *(const double *)o->dest);
      break;
    case BENCH_OPT_FLAG:
      bench_json_put(j, "%s", *(const bool *)o->dest ? "true" : "false");
      break;
    case BENCH_OPT_CHOICE:
      bench_json_put(j, "\"%s\"", *(const char *const *)o->dest);
      break;
    }
  }
}

void bench_json_param_u64(struct bench_json *j, const char *key, uint64_t v) {
  bench_json_key(j, key);
  bench_json_put(j, "%" PRIu64, v);
}

void bench_json_param_real(struct bench_json *j, const char *key, double v) {
  bench_json_key(j, key);
  bench_json_number(j, v);
}

void bench_json_figures(struct bench_json *j) {
  bench_json_put(j, "}, \"figures\": {");
  j->first = true;
}

void bench_json_u64(struct bench_json *j, const char *key, uint64_t v) {
  bench_json_param_u64(j, key, v);
}

void bench_json_real(struct bench_json *j, const char *key, double v) {
  bench_json_param_real(j, key, v);
}

void bench_json_real_list(struct bench_json *j, const char *key, const double *v, size_t n) {
  bench_json_key(j, key);
  bench_json_put(j, "[");
  for (size_t i = 0; i < n; i++) {
    if (i)
      bench_json_put(j, ", ");
    bench_json_number(j, v[i]);
  }
  bench_json_put(j, "]");
}

void bench_json_u64_list(struct bench_json *j, const char *key, const uint64_t *v, size_t n) {
  bench_json_key(j, key);
  bench_json_put(j, "[");
  for (size_t i = 0; i < n; i++)
    bench_json_put(j, "%s%" PRIu64, i ? ", " : "", v[i]);
  bench_json_put(j, "]");
}

void bench_json_end(struct bench_json *j) {
  bench_json_put(j, "}}");
  fflush(stdout);
  printf("%s\n", j->buf);
  fflush(stdout);
  free(j->buf);
  j->buf = NULL;
}

void bench_sleep_seconds(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double wake = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + seconds;
  ts.tv_sec = (time_t)wake;
  ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L)
    ts.tv_nsec = 999999999L;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/* ---- additions for the server-scale workloads (churn, server-mix) ---------------------- */

/* Reads a small /proc file into buf with read(2), so a sampler thread allocates nothing. */
static ssize_t bench_read_proc(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t len = 0;
  while (len < cap - 1) {
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

bool bench_statm(uint64_t *size_bytes, uint64_t *resident_bytes) {
  char buf[128];
  unsigned long long size_pages = 0, resident_pages = 0;
  *size_bytes = *resident_bytes = 0;
  if (bench_read_proc("/proc/self/statm", buf, sizeof buf) <= 0)
    return false;
  if (sscanf(buf, "%llu %llu", &size_pages, &resident_pages) != 2)
    return false;
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  *size_bytes = (uint64_t)size_pages * page;
  *resident_bytes = (uint64_t)resident_pages * page;
  return true;
}

uint64_t bench_status_kib(const char *key) {
  char buf[8192];
  if (bench_read_proc("/proc/self/status", buf, sizeof buf) <= 0)
    return 0;
  size_t klen = strlen(key);
  for (const char *line = buf; line && *line;) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      unsigned long long v = 0;
      if (sscanf(line + klen + 1, "%llu", &v) == 1)
        return (uint64_t)v;
      return 0;
    }
    line = strchr(line, '\n');
    if (line)
      line++;
  }
  return 0;
}

double bench_cpu_seconds(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  }
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_json_pair_list(struct bench_json *j, const char *key, const double *xy, size_t n) {
  bench_json_key(j, key);
  bench_json_put(j, "[");
  for (size_t i = 0; i < n; i++) {
    bench_json_put(j, "%s[", i ? ", " : "");
    bench_json_number(j, xy[2 * i]);
    bench_json_put(j, ", ");
    bench_json_number(j, xy[2 * i + 1]);
    bench_json_put(j, "]");
  }
  bench_json_put(j, "]");
}

void bench_json_string(struct bench_json *j, const char *key, const char *v) {
  bench_json_key(j, key);
  bench_json_put(j, "\"%s\"", v);
}

void bench_ring_init(const char *prog, struct bench_ring *r, uint64_t capacity) {
  uint64_t cap = 4 * BENCH_RING_BATCH;
  while (cap < capacity)
    cap *= 2;
  atomic_init(&r->tail, 0);
  atomic_init(&r->head, 0);
  r->ptail = r->phead = 0;
  r->mask = cap - 1;
  r->slot = malloc(cap * sizeof *r->slot);
  if (!r->slot)
    bench_die(prog, "out of memory for a hand-off ring of %llu blocks", (unsigned long long)cap);
}

void bench_ring_destroy(struct bench_ring *r) {
  free(r->slot);
  r->slot = NULL;
}

bool bench_ring_push(struct bench_ring *r, void *p) {
  if (r->ptail - r->phead > r->mask) {
    r->phead = atomic_load_explicit(&r->head, memory_order_acquire);
    if (r->ptail - r->phead > r->mask) {
      /* Full: publish what is there, or a consumer waiting for a batch would never see it. */
      atomic_store_explicit(&r->tail, r->ptail, memory_order_release);
      return false;
    }
  }
  r->slot[r->ptail & r->mask] = p;
  r->ptail++;
  if ((r->ptail & (BENCH_RING_BATCH - 1)) == 0)
    atomic_store_explicit(&r->tail, r->ptail, memory_order_release);
  return true;
}

void bench_ring_flush(struct bench_ring *r) {
  atomic_store_explicit(&r->tail, r->ptail, memory_order_release);
}

uint64_t bench_ring_drain(struct bench_ring *r) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed); /* only we write it */
  if (t == h)
    return 0;
  for (uint64_t i = h; i < t; i++)
    free(r->slot[i & r->mask]);
  atomic_store_explicit(&r->head, t, memory_order_release);
  return t - h;
}

uint64_t bench_ring_take(struct bench_ring *r, void **out, uint64_t max) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed); /* only we write it */
  uint64_t n = t - h < max ? t - h : max;
  for (uint64_t i = 0; i < n; i++)
    out[i] = r->slot[(h + i) & r->mask];
  if (n)
    atomic_store_explicit(&r->head, h + n, memory_order_release);
  return n;
}
