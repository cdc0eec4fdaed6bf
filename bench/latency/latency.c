/* latency: per-operation latency of malloc and free, and fragmentation, for the real-time
 * pool against general allocators (seed 003 §4.4: a real-time allocator must bound the worst
 * case, not the mean; §6.1: fragmentation = peak heap / peak live, TLSF 9.29%).
 *
 *   latency [--pool] [--ops N] [--live-bytes B] [--max-size B] [--seed S] [--trace FILE]
 *           [--pool-bytes B] [--prefault] [--touch 0|1]
 *
 * Without --pool the program calls plain malloc/free, so glibc, larder, mimalloc or any other
 * allocator is measured by preloading it. With --pool it calls larder_pool_malloc/free on a
 * pool over one mapping. The workload is a synthetic sequence with the thesis's phases
 * (ramp, peak, plateau, teardown; seed 003 §5.1-5.2), or a recorded trace (--trace, format in
 * docs/trace-format.md) replayed in its merged order on one thread. Every operation is timed
 * alone with the CPU timestamp counter (clock_gettime elsewhere); its bookkeeping lives in
 * mappings of its own, so only the allocator's memory shows in the RSS figures.
 * Last stdout line: {"name": "latency", "params": {...}, "figures": {...}}
 * (docs/benchmarks.md conventions: exit 2 on bad flags, 1 on a runtime failure). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "larder_pool.h"
#ifdef LATENCY_HAVE_TRACE
#include "trace_read.h"
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t lat_tick(void) {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
#define LAT_TSC 1
#else
static inline uint64_t lat_tick(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define LAT_TSC 0
#endif

static uint64_t lat_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { OP_MALLOC = 0, OP_FREE = 1, OP_REALLOC = 2, OP_CALLOC = 3, OP_MEMALIGN = 4 };

/* One operation: kind, the object slot it works on, the requested size, log2 alignment. */
struct lat_op {
  uint32_t slot;
  uint32_t size;
  uint8_t kind;
  uint8_t align_log2;
};

/* ---------------------------------------------------------------- flags */

static const char *lat_usage_text =
    "usage: latency [--pool] [--ops N] [--live-bytes B] [--max-size B] [--seed S]\n"
    "               [--trace FILE] [--pool-bytes B] [--prefault] [--touch 0|1]\n"
    "  --pool          use the real-time pool (larder_pool_*) instead of plain malloc/free\n"
    "  --ops N         synthetic operations before the teardown (default 1000000; 1000..100000000)\n"
    "  --live-bytes B  synthetic plateau of live bytes; the peak is twice it (default 33554432)\n"
    "  --max-size B    largest synthetic request (default 262144; 16..67108864)\n"
    "  --seed S        random seed of the synthetic sequence (default 1)\n"
    "  --trace FILE    replay a recorded trace (docs/trace-format.md) instead\n"
    "  --pool-bytes B  the pool's mapping (default: 4 x peak live + 16 MiB)\n"
    "  --prefault      with --pool: make the pool's pages resident first, as a real-time\n"
    "                  program would (its RSS then says nothing about fragmentation)\n"
    "  --touch 0|1     write every allocated byte, so RSS is real (default 1)\n";

static void lat_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "latency: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n%s", lat_usage_text);
  va_end(ap);
  exit(2);
}

static void lat_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "latency: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static uint64_t lat_parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi) {
  if (!v || !*v) lat_usage_error("%s needs a value", flag);
  uint64_t x = 0;
  for (const char *s = v; *s; s++) {
    if (*s < '0' || *s > '9') lat_usage_error("%s: not a plain decimal number: %s", flag, v);
    if (x > (UINT64_MAX - 9) / 10) lat_usage_error("%s: too large: %s", flag, v);
    x = x * 10 + (uint64_t)(*s - '0');
  }
  if (x < lo || x > hi) lat_usage_error("%s: %s is outside %" PRIu64 "..%" PRIu64, flag, v, lo, hi);
  return x;
}

/* ---------------------------------------------------------------- bookkeeping memory */

/* Anonymous memory of the program's own, never from the allocator being measured. */
static void *lat_map(size_t bytes) {
  void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) lat_die("cannot map %zu bytes: %s", bytes, strerror(errno));
  return p;
}

static uint64_t lat_maxrss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_maxrss * 1024u;
}

static uint64_t lat_rss(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---------------------------------------------------------------- workloads */

static uint64_t lat_rng = 1;
static uint64_t lat_rand(void) {
  /* splitmix64 */
  uint64_t z = (lat_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Sizes like a control-plane program's: mostly small, a tail of buffers (seed 003 Figure
 * 5-8 has most requests under 1 KiB). Log-uniform inside each band. */
static uint32_t lat_size(uint64_t max_size) {
  uint64_t r = lat_rand() % 100;
  uint64_t lo, hi;
  if (r < 60) lo = 16, hi = 128;
  else if (r < 90) lo = 128, hi = 2048;
  else if (r < 98) lo = 2048, hi = 32768;
  else lo = 32768, hi = 262144;
  if (hi > max_size) hi = max_size;
  if (lo > hi) lo = hi / 2 ? hi / 2 : 1;
  /* log-uniform between lo and hi */
  double u = (double)(lat_rand() >> 11) / 9007199254740992.0;
  double v = (double)lo * __builtin_pow((double)hi / (double)lo, u);
  uint64_t s = (uint64_t)v;
  return (uint32_t)(s < 1 ? 1 : s > hi ? hi : s);
}

/* Live-bytes target at operation i of n: ramp 0 -> L (30%), peak L -> 2L -> L (20%),
 * plateau L (40%), teardown L -> 0 (10%). */
static uint64_t lat_target(uint64_t i, uint64_t n, uint64_t L) {
  double x = (double)i / (double)n;
  if (x < 0.3) return (uint64_t)(L * (x / 0.3));
  if (x < 0.4) return (uint64_t)(L * (1.0 + (x - 0.3) / 0.1));
  if (x < 0.5) return (uint64_t)(L * (2.0 - (x - 0.4) / 0.1));
  if (x < 0.9) return L;
  return (uint64_t)(L * (1.0 - (x - 0.9) / 0.1));
}

struct lat_work {
  struct lat_op *ops;
  uint64_t nops;
  uint64_t nslots;
  uint64_t peak_live;       /* bytes requested and live at the peak, in op order */
  uint64_t counts[5];
  const char *source;
};

static void lat_synthetic(struct lat_work *w, uint64_t nops, uint64_t live_bytes, uint64_t max_size, uint64_t seed) {
  lat_rng = seed * 0x2545f4914f6cdd1dull + 1;
  /* enough room: every op could be a malloc, then the teardown frees them all */
  uint64_t cap = 2 * nops + 16;
  w->ops = lat_map(cap * sizeof(struct lat_op));
  uint32_t *live = lat_map(nops * sizeof(uint32_t));        /* live slots */
  uint32_t *slot_size = lat_map(nops * sizeof(uint32_t));
  uint64_t nlive = 0, live_b = 0, next_slot = 0, k = 0;
  memset(w->counts, 0, sizeof(w->counts));
  w->peak_live = 0;
  for (uint64_t i = 0; i < nops; i++) {
    uint64_t target = lat_target(i, nops, live_bytes);
    int grow = live_b < target;
    int do_alloc = (lat_rand() % 100) < (grow ? 80u : 20u);
    if (nlive == 0) do_alloc = 1;
    if (do_alloc) {
      uint32_t s = lat_size(max_size);
      uint32_t slot = (uint32_t)next_slot++;
      slot_size[slot] = s;
      live[nlive++] = slot;
      live_b += s;
      if (live_b > w->peak_live) w->peak_live = live_b;
      w->ops[k++] = (struct lat_op){slot, s, OP_MALLOC, 0};
      w->counts[OP_MALLOC]++;
    } else {
      uint64_t j = lat_rand() % nlive;
      uint32_t slot = live[j];
      live[j] = live[--nlive];
      live_b -= slot_size[slot];
      w->ops[k++] = (struct lat_op){slot, 0, OP_FREE, 0};
      w->counts[OP_FREE]++;
    }
  }
  while (nlive) {
    uint32_t slot = live[--nlive];
    w->ops[k++] = (struct lat_op){slot, 0, OP_FREE, 0};
    w->counts[OP_FREE]++;
  }
  w->nops = k;
  w->nslots = next_slot;
  w->source = "synthetic";
  munmap(live, nops * sizeof(uint32_t));
  munmap(slot_size, nops * sizeof(uint32_t));
}

#ifdef LATENCY_HAVE_TRACE
static void lat_from_trace(struct lat_work *w, const char *path) {
  static struct ltr_trace t;
  char err[512];
  if (ltr_load(path, &t, err, sizeof(err)) != 0) lat_die("%s: %s", path, err);
  /* a realloc becomes two entries (the call and the rename of its object) */
  w->ops = lat_map((2 * t.nops + 1) * sizeof(struct lat_op));
  memset(w->counts, 0, sizeof(w->counts));
  uint64_t k = 0;
  for (uint64_t i = 0; i < t.nops; i++) {
    const struct ltr_event *e = &t.ops[i];
    uint32_t size = e->size > UINT32_MAX ? UINT32_MAX : (uint32_t)e->size;
    uint8_t kind;
    switch (e->kind) {
      case LTR_FREE: kind = OP_FREE; break;
      case LTR_REALLOC: case LTR_REALLOCARRAY: kind = OP_REALLOC; break;
      case LTR_CALLOC: kind = OP_CALLOC; break;
      case LTR_POSIX_MEMALIGN: case LTR_ALIGNED_ALLOC: case LTR_MEMALIGN: case LTR_VALLOC: case LTR_PVALLOC:
        kind = OP_MEMALIGN; break;
      default: kind = OP_MALLOC; break;
    }
    if (kind == OP_FREE) {
      if (e->obj_in == LTR_NONE) continue; /* free(NULL) */
      w->ops[k++] = (struct lat_op){e->obj_in, 0, OP_FREE, 0};
    } else if (kind == OP_REALLOC) {
      if (e->obj_out == LTR_NONE) continue;
      if (e->obj_in == LTR_NONE) w->ops[k++] = (struct lat_op){e->obj_out, size, OP_MALLOC, 0};
      else {
        /* the realloc works on obj_in's slot and then lives on as obj_out: give both one slot
         * by recording the move (slot of obj_out := slot of obj_in) as part of the op */
        w->ops[k++] = (struct lat_op){e->obj_in, size, OP_REALLOC, 0};
        w->ops[k++] = (struct lat_op){e->obj_out, 0, 255, 0}; /* rename marker, not timed */
        w->counts[OP_REALLOC]++;
        continue;
      }
    } else {
      if (e->obj_out == LTR_NONE) continue;
      uint8_t al = kind == OP_MEMALIGN ? e->align_log2 : 0;
      w->ops[k++] = (struct lat_op){e->obj_out, size, kind, al};
    }
    w->counts[w->ops[k - 1].kind]++;
  }
  w->nops = k;
  w->nslots = t.nobjects;
  w->peak_live = t.peak_live;
  w->source = "trace";
}
#endif

/* ---------------------------------------------------------------- percentiles */

static void lat_sort(uint32_t *a, uint64_t n) {
  /* LSD radix sort, 4 passes of 8 bits, scratch from our own mapping */
  if (n < 2) return;
  uint32_t *tmp = lat_map(n * sizeof(uint32_t));
  uint32_t *src = a, *dst = tmp;
  for (int shift = 0; shift < 32; shift += 8) {
    uint64_t count[257] = {0};
    for (uint64_t i = 0; i < n; i++) count[((src[i] >> shift) & 255u) + 1]++;
    for (int b = 0; b < 256; b++) count[b + 1] += count[b];
    for (uint64_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 255u]++] = src[i];
    uint32_t *t = src;
    src = dst;
    dst = t;
  }
  /* four passes: the result is back in a */
  munmap(tmp, n * sizeof(uint32_t));
}

static double lat_pct(const uint32_t *sorted, uint64_t n, double q) {
  if (!n) return 0;
  uint64_t i = (uint64_t)(q * (double)(n - 1) + 0.5);
  if (i >= n) i = n - 1;
  return sorted[i];
}

/* ---------------------------------------------------------------- JSON */

static char lat_json[16384];
static size_t lat_jlen;
static void lat_j(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(lat_json + lat_jlen, sizeof(lat_json) - lat_jlen, fmt, ap);
  va_end(ap);
  if (n > 0) lat_jlen += (size_t)n;
  if (lat_jlen >= sizeof(lat_json)) lat_die("JSON line too long");
}

static void lat_json_string(const char *s) {
  lat_j("\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') lat_j("\\%c", *s);
    else if ((unsigned char)*s < 0x20) lat_j("\\u%04x", *s);
    else lat_j("%c", *s);
  }
  lat_j("\"");
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  int use_pool = 0, touch = 1, prefault = 0;
  uint64_t nops = 1000000, live_bytes = 32u << 20, max_size = 256u << 10, seed = 1, pool_bytes = 0;
  const char *trace = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = NULL;
    char name[64];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(lat_usage_text, stdout);
      return 0;
    }
    if (strncmp(a, "--", 2) != 0) lat_usage_error("unexpected argument: %s", a);
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if (len >= sizeof(name)) lat_usage_error("unknown flag: %s", a);
    memcpy(name, a, len);
    name[len] = 0;
    if (!strcmp(name, "--pool")) {
      if (eq) lat_usage_error("--pool takes no value");
      use_pool = 1;
      continue;
    }
    if (!strcmp(name, "--prefault")) {
      if (eq) lat_usage_error("--prefault takes no value");
      prefault = 1;
      continue;
    }
    if (eq) v = eq + 1;
    else if (i + 1 < argc) v = argv[++i];
    if (!strcmp(name, "--ops")) nops = lat_parse_u64(name, v, 1000, 100000000);
    else if (!strcmp(name, "--live-bytes")) live_bytes = lat_parse_u64(name, v, 4096, (uint64_t)1 << 36);
    else if (!strcmp(name, "--max-size")) max_size = lat_parse_u64(name, v, 16, (uint64_t)64 << 20);
    else if (!strcmp(name, "--seed")) seed = lat_parse_u64(name, v, 0, UINT64_MAX);
    else if (!strcmp(name, "--pool-bytes")) pool_bytes = lat_parse_u64(name, v, 1 << 16, (uint64_t)1 << 40);
    else if (!strcmp(name, "--touch")) touch = (int)lat_parse_u64(name, v, 0, 1);
    else if (!strcmp(name, "--trace")) {
      if (!v || !*v) lat_usage_error("--trace needs a file name");
      trace = v;
    } else lat_usage_error("unknown flag: %s", name);
  }

  if (prefault && !use_pool) lat_usage_error("--prefault needs --pool");

  struct lat_work w;
  memset(&w, 0, sizeof(w));
  if (trace) {
#ifdef LATENCY_HAVE_TRACE
    lat_from_trace(&w, trace);
#else
    lat_usage_error("--trace: this build has no trace reader (tracer/ was not built)");
#endif
  } else {
    lat_synthetic(&w, nops, live_bytes, max_size, seed);
  }

  /* Bookkeeping, all in our own mappings and touched now, before the baseline. */
  void **slots = lat_map(w.nslots * sizeof(void *) + 8);
  uint32_t *slot_of = NULL; /* trace renames: the slot an object lives in */
  slot_of = lat_map(w.nslots * sizeof(uint32_t) + 8);
  for (uint64_t i = 0; i < w.nslots; i++) slot_of[i] = (uint32_t)i;
  uint64_t nalloc = w.counts[OP_MALLOC] + w.counts[OP_CALLOC] + w.counts[OP_MEMALIGN];
  uint32_t *t_alloc = lat_map(nalloc * sizeof(uint32_t) + 8);
  uint32_t *t_free = lat_map(w.counts[OP_FREE] * sizeof(uint32_t) + 8);
  uint32_t *t_realloc = lat_map(w.counts[OP_REALLOC] * sizeof(uint32_t) + 8);
  memset(slots, 0, w.nslots * sizeof(void *));
  memset(t_alloc, 0, nalloc * sizeof(uint32_t));
  memset(t_free, 0, w.counts[OP_FREE] * sizeof(uint32_t));
  memset(t_realloc, 0, w.counts[OP_REALLOC] * sizeof(uint32_t));

  larder_pool_t *pool = NULL;
  void *pool_mem = NULL;
  if (use_pool) {
    if (!pool_bytes) pool_bytes = 4 * w.peak_live + (16u << 20);
    pool_mem = mmap(NULL, pool_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (prefault ? MAP_POPULATE : MAP_NORESERVE), -1, 0);
    if (pool_mem == MAP_FAILED) lat_die("cannot map a pool of %" PRIu64 " bytes", pool_bytes);
    pool = larder_pool_create(pool_mem, pool_bytes);
    if (!pool) lat_die("larder_pool_create refused %" PRIu64 " bytes", pool_bytes);
  }

  /* timer overhead: median of empty pairs */
  static uint32_t empty[1001];
  for (int i = 0; i < 1001; i++) {
    uint64_t a = lat_tick();
    uint64_t b = lat_tick();
    empty[i] = (uint32_t)(b - a);
  }
  lat_sort(empty, 1001);

  /* Reset the peak-RSS mark (Linux: "5" > clear_refs), so the generator's scratch memory,
   * unmapped by now, does not count as heap; the baseline is what is resident now. */
  FILE *cr = fopen("/proc/self/clear_refs", "w");
  if (cr) {
    fputs("5", cr);
    fclose(cr);
  }
  uint64_t rss_before = lat_rss();
  uint64_t refused = 0;
  uint64_t na = 0, nf = 0, nr = 0;
  uint64_t ns0 = lat_now_ns(), tk0 = lat_tick();
  for (uint64_t i = 0; i < w.nops; i++) {
    const struct lat_op *op = &w.ops[i];
    if (op->kind == 255) {
      /* trace rename: the object produced by the last realloc lives in its input's slot */
      slot_of[op->slot] = slot_of[w.ops[i - 1].slot];
      continue;
    }
    uint32_t s = slot_of[op->slot];
    void *p;
    uint64_t t0, t1;
    switch (op->kind) {
      case OP_FREE:
        p = slots[s];
        t0 = lat_tick();
        if (use_pool) larder_pool_free(pool, p);
        else free(p);
        t1 = lat_tick();
        t_free[nf++] = (uint32_t)((t1 - t0) > UINT32_MAX ? UINT32_MAX : (t1 - t0));
        slots[s] = NULL;
        break;
      case OP_REALLOC:
        t0 = lat_tick();
        p = use_pool ? larder_pool_realloc(pool, slots[s], op->size) : realloc(slots[s], op->size);
        t1 = lat_tick();
        t_realloc[nr++] = (uint32_t)((t1 - t0) > UINT32_MAX ? UINT32_MAX : (t1 - t0));
        if (!p) { refused++; break; }
        slots[s] = p;
        if (touch) memset(p, 0x5a, op->size);
        break;
      default: {
        size_t align = (size_t)1 << op->align_log2;
        t0 = lat_tick();
        if (op->kind == OP_CALLOC) p = use_pool ? larder_pool_malloc(pool, op->size) : calloc(1, op->size);
        else if (op->kind == OP_MEMALIGN && align > 16)
          p = use_pool ? larder_pool_memalign(pool, align, op->size) : aligned_alloc(align, (op->size + align - 1) & ~(align - 1));
        else p = use_pool ? larder_pool_malloc(pool, op->size) : malloc(op->size);
        if (use_pool && p && op->kind == OP_CALLOC) memset(p, 0, op->size);
        t1 = lat_tick();
        t_alloc[na++] = (uint32_t)((t1 - t0) > UINT32_MAX ? UINT32_MAX : (t1 - t0));
        if (!p) { refused++; break; }
        slots[s] = p;
        if (touch) memset(p, 0x5a, op->size);
        break;
      }
    }
  }
  uint64_t tk1 = lat_tick(), ns1 = lat_now_ns();
  uint64_t rss_peak = lat_maxrss();
  uint64_t heap_peak = rss_peak > rss_before ? rss_peak - rss_before : 0;
  double ns_per_tick = LAT_TSC ? (double)(ns1 - ns0) / (double)(tk1 - tk0) : 1.0;

  /* totals of the timed calls alone */
  uint64_t sum_alloc = 0, sum_free = 0, sum_realloc = 0;
  for (uint64_t i = 0; i < na; i++) sum_alloc += t_alloc[i];
  for (uint64_t i = 0; i < nf; i++) sum_free += t_free[i];
  for (uint64_t i = 0; i < nr; i++) sum_realloc += t_realloc[i];
  lat_sort(t_alloc, na);
  lat_sort(t_free, nf);
  lat_sort(t_realloc, nr);

  larder_pool_stats_t pst;
  memset(&pst, 0, sizeof(pst));
  int pool_check = 0;
  if (use_pool) {
    pool_check = larder_pool_check(pool);
    larder_pool_stats(pool, &pst);
  }

  double frag = w.peak_live ? (double)heap_peak / (double)w.peak_live : 0;
  printf("latency: %s workload, %s, %" PRIu64 " ops (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64 " reallocs)\n",
         w.source, use_pool ? "larder pool" : "malloc", w.nops, na, nf, nr);
  printf("  malloc ns: p50 %.0f p99 %.0f p99.9 %.0f p99.99 %.0f max %.0f\n", lat_pct(t_alloc, na, 0.5) * ns_per_tick,
         lat_pct(t_alloc, na, 0.99) * ns_per_tick, lat_pct(t_alloc, na, 0.999) * ns_per_tick,
         lat_pct(t_alloc, na, 0.9999) * ns_per_tick,
         lat_pct(t_alloc, na, 1.0) * ns_per_tick);
  printf("  free ns:   p50 %.0f p99 %.0f p99.9 %.0f p99.99 %.0f max %.0f\n", lat_pct(t_free, nf, 0.5) * ns_per_tick,
         lat_pct(t_free, nf, 0.99) * ns_per_tick, lat_pct(t_free, nf, 0.999) * ns_per_tick,
         lat_pct(t_free, nf, 0.9999) * ns_per_tick,
         lat_pct(t_free, nf, 1.0) * ns_per_tick);
  printf("  peak live %" PRIu64 " B, peak heap RSS %" PRIu64 " B, fragmentation %.4f (%.2f%% excess)\n",
         w.peak_live, heap_peak, frag, (frag - 1) * 100);

  lat_j("{\"name\": \"latency\", \"params\": {\"pool\": %s, ", use_pool ? "true" : "false");
  lat_j("\"workload\": ");
  lat_json_string(w.source);
  if (trace) {
    lat_j(", \"trace\": ");
    lat_json_string(trace);
  } else {
    lat_j(", \"ops\": %" PRIu64 ", \"live_bytes\": %" PRIu64 ", \"max_size\": %" PRIu64 ", \"seed\": %" PRIu64,
          nops, live_bytes, max_size, seed);
  }
  lat_j(", \"pool_bytes\": %" PRIu64 ", \"prefault\": %s, \"touch\": %s}, \"figures\": {", use_pool ? pool_bytes : 0,
        prefault ? "true" : "false", touch ? "true" : "false");
  const char *names[3] = {"malloc", "free", "realloc"};
  uint32_t *arrs[3] = {t_alloc, t_free, t_realloc};
  uint64_t ns[3] = {na, nf, nr};
  uint64_t sums[3] = {sum_alloc, sum_free, sum_realloc};
  for (int k = 0; k < 3; k++) {
    if (k == 2 && nr == 0) continue;
    lat_j("\"%s_ops\": %" PRIu64 ", \"%s_p50_ns\": %.1f, \"%s_p99_ns\": %.1f, \"%s_p999_ns\": %.1f, "
          "\"%s_p9999_ns\": %.1f, \"%s_max_ns\": %.1f, \"%s_mean_ns\": %.2f, ",
          names[k], ns[k], names[k], lat_pct(arrs[k], ns[k], 0.5) * ns_per_tick, names[k],
          lat_pct(arrs[k], ns[k], 0.99) * ns_per_tick, names[k], lat_pct(arrs[k], ns[k], 0.999) * ns_per_tick,
          names[k], lat_pct(arrs[k], ns[k], 0.9999) * ns_per_tick,
          names[k], lat_pct(arrs[k], ns[k], 1.0) * ns_per_tick, names[k],
          ns[k] ? (double)sums[k] * ns_per_tick / (double)ns[k] : 0.0);
    /* The distribution for a CDF plot: [quantile, ns] pairs, denser in the tail. */
    static const double cdf_q[] = {0,    0.01,  0.05,  0.1,    0.2,    0.3,     0.4,     0.5,  0.6,
                                   0.7,  0.8,   0.9,   0.95,   0.98,   0.99,    0.995,   0.998, 0.999,
                                   0.9995, 0.9998, 0.9999, 0.99995, 0.99999, 0.999999, 1.0};
    lat_j("\"%s_cdf_ns\": [", names[k]);
    for (size_t q = 0; q < sizeof cdf_q / sizeof cdf_q[0]; q++)
      lat_j("%s[%g, %.1f]", q ? ", " : "", cdf_q[q], lat_pct(arrs[k], ns[k], cdf_q[q]) * ns_per_tick);
    lat_j("], ");
  }
  lat_j("\"alloc_free_s\": %.6f, \"elapsed_s\": %.6f, \"timer_overhead_ns\": %.1f, \"ns_per_tick\": %.6f, ",
        (double)(sum_alloc + sum_free + sum_realloc) * ns_per_tick / 1e9, (double)(ns1 - ns0) / 1e9,
        lat_pct(empty, 1001, 0.5) * ns_per_tick, ns_per_tick);
  lat_j("\"peak_live_bytes\": %" PRIu64 ", \"peak_heap_bytes\": %" PRIu64 ", \"fragmentation\": %.6f, "
        "\"excess_pct\": %.4f, \"refused\": %" PRIu64,
        w.peak_live, heap_peak, frag, (frag - 1) * 100, refused);
  if (use_pool)
    lat_j(", \"pool_check\": %d, \"pool_free_blocks_end\": %zu", pool_check, pst.free_blocks);
  lat_j("}}");
  puts(lat_json);
  fflush(stdout);
  if (pool_check) lat_die("the pool failed its integrity check after the run");
  return 0;
}
