/* trace-frag: Hoard's fragmentation figures (seed 004 §5.4, Table 4) from a recorded trace.
 *
 *   trace-frag FILE [--superblock S] [--small-limit B] [--page P] [--classes-per-doubling N]
 *              [--coalesce-above B]
 *
 * Hoard measured fragmentation off-line: "updating the maximum memory in use and the maximum
 * memory allocated would serialize all memory operations", so each heap recorded its operations
 * with a timestamp, the traces were merged in timestamp order and the merged trace processed
 * to find the maximum memory allocated (A) and in use (U). We do the same with the recorder
 * (liblarder-trace.so preloaded in front of the allocator, per-thread buffers, no lock) and
 * this program, which reads the merged order from trace_read.c.
 *
 * U(t): bytes requested and not yet freed. A(t): memory the allocator holds for those blocks,
 * from the addresses it returned, "without counting overhead (like per-object headers)"
 * (§5.4, after Wilson and Johnstone): a block of a size class (at most B bytes) holds its
 * whole S-aligned superblock, so S bytes for every superblock with at least one live block; a
 * larger block holds its size rounded up to P. A/U is max A over max U, as in Table 4. This A
 * is a lower bound on what a Hoard-style allocator holds (an empty superblock kept by a heap
 * within its K slack is not counted: the trace cannot see it). The same walk also counts A at
 * page granularity (every P-byte page with a live byte), which means the same for any
 * allocator.
 *
 * Size classes (issue 15): the same walk rounds each small block up to its class (16-byte
 * steps to 128 bytes, then --classes-per-doubling classes per doubling up to the small limit:
 * larder's fixed table at 8; a larger block to P, all of them one pool, as medium spans
 * coalesce) and tracks each class's live bytes. The peak of their sum is U plus the classes'
 * rounding; the sum of each class's own peak is what an allocator needs that keeps a class's
 * memory to that class for the whole run (never handing a class's free memory to another
 * class, nor giving it back). Where the classes peak at different times the second exceeds the
 * first: that excess is fragmentation due to segregation alone, whatever the allocator does
 * within a class. An allocator that moves empty superblocks between classes (larder, jemalloc,
 * mimalloc) can do better; one that coalesces free memory of all sizes (glibc) need not pay it
 * at all. --coalesce-above B counts every block above B bytes (the larger ones too) instead as
 * one coalescing pool, in 16-byte steps with a 16-byte header each, as a best-fit allocator lays
 * them out: what a coalescing tier for those sizes would save, at best.
 *
 * Prints one JSON line. Exit status: 0 done, 2 bad flags, 3 unreadable or invalid trace. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_read.h"

static void tf_usage(FILE *f) {
  fprintf(f,
          "usage: trace-frag FILE [--superblock S] [--small-limit B] [--page P] [--classes-per-doubling N]\n"
          "                  [--coalesce-above B]\n"
          "  Hoard's fragmentation (seed 004 §5.4): max memory allocated / max in use, from a trace\n"
          "  recorded under the allocator (LD_PRELOAD=liblarder-trace.so:liblarder.so).\n"
          "  --superblock S   superblock size, a power of two (default 65536, larder's default)\n"
          "  --small-limit B  largest block served from superblocks (default min(16384, S/4))\n"
          "  --page P         page size for larger blocks and the page count (default 4096)\n"
          "  --classes-per-doubling N  size classes per doubling above 128 B, for the class figures\n"
          "                   (1-64, default 8: larder's fixed classes)\n"
          "  --coalesce-above B  for the class figures, every block above B bytes is in one\n"
          "                   coalescing pool (16-byte steps, 16-byte headers); default: none\n");
}

static int tf_pow2(uint64_t v) { return v && !(v & (v - 1)); }

static int tf_parse(const char *s, uint64_t *out) {
  char *end;
  if (!s || !*s || *s == '-') return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end) return -1;
  *out = v;
  return 0;
}

/* A reference count per key (superblock or page number) and the bytes the counted keys cover. */
struct tf_count { struct ltr_map64 map; uint64_t bytes, unit, peak; };

static int tf_inc(struct tf_count *c, uint64_t key) {
  uint32_t *v = ltr_map_find(&c->map, key + 1);
  if (v) { (*v)++; return 0; }
  if (ltr_map_put(&c->map, key + 1, 1)) return -1;
  c->bytes += c->unit;
  if (c->bytes > c->peak) c->peak = c->bytes;
  return 0;
}

static void tf_dec(struct tf_count *c, uint64_t key) {
  uint32_t *v = ltr_map_find(&c->map, key + 1);
  if (!v) return;
  if (--*v == 0) {
    ltr_map_del(&c->map, key + 1);
    c->bytes -= c->unit;
  }
}

/* The class figures: live bytes per class, each class's peak, and the peak of their sum. A
 * class is its index (tf_class); the last two places are the pools: blocks above the small
 * limit in pages, and blocks above --coalesce-above (if given) in 16-byte steps. */
enum { TF_CLASSES_MAX = 8 + 24 * 64, TF_POOL_PAGES = TF_CLASSES_MAX, TF_POOL_COALESCED, TF_PLACES };
struct tf_classes {
  uint64_t per_doubling, small, page, coalesce_above;
  int64_t live[TF_PLACES], peak[TF_PLACES], sum, sum_peak;
};

/* The place of a block of sz bytes and the bytes it takes there. */
static unsigned tf_class(const struct tf_classes *c, uint64_t sz, uint64_t *bytes) {
  if (sz == 0) sz = 1;
  if (c->coalesce_above && sz > c->coalesce_above) {
    *bytes = (sz + 15) / 16 * 16 + 16;
    return TF_POOL_COALESCED;
  }
  if (sz > c->small) {
    *bytes = (sz + c->page - 1) / c->page * c->page;
    return TF_POOL_PAGES;
  }
  if (sz <= 128) {
    *bytes = (sz + 15) / 16 * 16;
    return (unsigned)(*bytes / 16 - 1);
  }
  unsigned b = 63u - (unsigned)__builtin_clzll(sz - 1); /* sz in (2^b, 2^(b+1)] */
  uint64_t step = ((uint64_t)1 << b) / c->per_doubling;
  if (step < 16) step = 16;
  *bytes = (sz + step - 1) / step * step;
  return 8u + (b - 7u) * (unsigned)c->per_doubling + (unsigned)((*bytes - ((uint64_t)1 << b)) / step) - 1u;
}

static void tf_class_add(struct tf_classes *c, uint64_t sz, int sign) {
  uint64_t bytes;
  unsigned k = tf_class(c, sz, &bytes);
  c->live[k] += sign * (int64_t)bytes;
  c->sum += sign * (int64_t)bytes;
  if (c->live[k] > c->peak[k]) c->peak[k] = c->live[k];
  if (c->sum > c->sum_peak) c->sum_peak = c->sum;
}

static uint64_t tf_class_peaks(const struct tf_classes *c) {
  uint64_t total = 0;
  for (unsigned k = 0; k < TF_PLACES; k++) total += (uint64_t)c->peak[k];
  return total;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  uint64_t sb = 65536, small = 0, page = 4096, per_doubling = 8, coalesce_above = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    uint64_t *dst = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { tf_usage(stdout); return 0; }
    if (!strcmp(a, "--superblock")) dst = &sb;
    else if (!strcmp(a, "--small-limit")) dst = &small;
    else if (!strcmp(a, "--page")) dst = &page;
    else if (!strcmp(a, "--classes-per-doubling")) dst = &per_doubling;
    else if (!strcmp(a, "--coalesce-above")) dst = &coalesce_above;
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "trace-frag: unknown flag %s\n", a);
      tf_usage(stderr);
      return 2;
    } else if (path) {
      fprintf(stderr, "trace-frag: one trace file only (got %s and %s)\n", path, a);
      return 2;
    } else {
      path = a;
      continue;
    }
    if (i + 1 >= argc || tf_parse(argv[i + 1], dst)) {
      fprintf(stderr, "trace-frag: %s takes a positive integer\n", a);
      return 2;
    }
    i++;
  }
  if (!path) { tf_usage(stderr); return 2; }
  if (!tf_pow2(sb) || sb < 4096 || sb > (1u << 30)) {
    fprintf(stderr, "trace-frag: --superblock must be a power of two from 4096 to 2^30\n");
    return 2;
  }
  if (!tf_pow2(page) || page < 512 || page > sb) {
    fprintf(stderr, "trace-frag: --page must be a power of two from 512 to the superblock size\n");
    return 2;
  }
  if (small == 0) small = sb / 4 < 16384 ? sb / 4 : 16384;
  if (small > sb) {
    fprintf(stderr, "trace-frag: --small-limit cannot exceed the superblock size\n");
    return 2;
  }
  if (per_doubling < 1 || per_doubling > 64) {
    fprintf(stderr, "trace-frag: --classes-per-doubling must be from 1 to 64\n");
    return 2;
  }
  if (coalesce_above && coalesce_above < 16) {
    fprintf(stderr, "trace-frag: --coalesce-above must be at least 16\n");
    return 2;
  }

  struct ltr_trace t;
  char err[512];
  if (ltr_load(path, &t, err, sizeof err)) {
    fprintf(stderr, "trace-frag: %s\n", err);
    return 3;
  }
  struct tf_count sbs = {.unit = sb}, pages = {.unit = page};
  static struct tf_classes classes; /* (static: 25 KiB of counters) */
  classes.per_doubling = per_doubling;
  classes.small = small;
  classes.page = page;
  classes.coalesce_above = coalesce_above;
  if (ltr_map_init(&sbs.map, 1024) || ltr_map_init(&pages.map, 4096)) {
    fprintf(stderr, "trace-frag: out of memory\n");
    return 1;
  }
  uint64_t u = 0, u_peak = 0, large = 0, a_peak = 0, a_at_u_peak = 0, requested = 0, objects = 0;
  for (uint64_t i = 0; i < t.nops; i++) {
    const struct ltr_event *e = &t.ops[i];
    if (e->obj_in != LTR_NONE) {
      uint64_t o = e->obj_in, sz = t.obj_size[o], ad = t.obj_addr[o];
      u -= sz;
      tf_class_add(&classes, sz, -1);
      if (sz <= small) tf_dec(&sbs, ad / sb);
      else large -= (sz + page - 1) / page * page;
      uint64_t last = (ad + (sz ? sz : 1) - 1) / page;
      for (uint64_t p = ad / page; p <= last; p++) tf_dec(&pages, p);
    }
    if (e->obj_out != LTR_NONE) {
      uint64_t o = e->obj_out, sz = t.obj_size[o], ad = t.obj_addr[o];
      u += sz;
      tf_class_add(&classes, sz, 1);
      requested += sz;
      objects++;
      int bad = 0;
      if (sz <= small) bad |= tf_inc(&sbs, ad / sb);
      else large += (sz + page - 1) / page * page;
      uint64_t last = (ad + (sz ? sz : 1) - 1) / page;
      for (uint64_t p = ad / page; p <= last && !bad; p++) bad |= tf_inc(&pages, p);
      if (bad) {
        fprintf(stderr, "trace-frag: out of memory\n");
        return 1;
      }
    }
    uint64_t a = sbs.bytes + large;
    if (a > a_peak) a_peak = a;
    if (u > u_peak) { u_peak = u; a_at_u_peak = a; }
  }
  double frag = u_peak ? (double)a_peak / (double)u_peak : 0.0;
  double frag_pages = u_peak ? (double)pages.peak / (double)u_peak : 0.0;
  uint64_t class_peaks = tf_class_peaks(&classes);
  double segregation = u_peak ? (double)class_peaks / (double)u_peak : 0.0;
  printf("{\"name\":\"trace-frag\",\"params\":{\"superblock\":%" PRIu64 ",\"small_limit\":%" PRIu64
         ",\"page\":%" PRIu64 ",\"classes_per_doubling\":%" PRIu64 ",\"coalesce_above\":%" PRIu64
         "},\"figures\":{\"fragmentation\":%.4f,\"max_in_use_bytes\":%" PRIu64
         ",\"max_allocated_bytes\":%" PRIu64 ",\"allocated_at_max_in_use_bytes\":%" PRIu64
         ",\"fragmentation_pages\":%.4f,\"max_allocated_pages_bytes\":%" PRIu64
         ",\"total_requested_bytes\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"average_size\":%.4f"
         ",\"threads\":%u,\"records\":%" PRIu64 ",\"unknown_frees\":%" PRIu64 ",\"end_in_use_bytes\":%" PRIu64
         ",\"class_rounded_max_in_use_bytes\":%" PRIu64 ",\"class_peaks_sum_bytes\":%" PRIu64 ",\"class_segregation\":%.4f}}\n",
         sb, small, page, per_doubling, coalesce_above, frag, u_peak, a_peak, a_at_u_peak, frag_pages, pages.peak, requested, objects,
         objects ? (double)requested / (double)objects : 0.0, t.nthreads, t.records, t.unknown_frees, u,
         (uint64_t)classes.sum_peak, class_peaks, segregation);
  return 0;
}
