/* trace-frag: Hoard's fragmentation figures (seed 004 §5.4, Table 4) from a recorded trace.
 *
 *   trace-frag FILE [--superblock S] [--small-limit B] [--page P]
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
 * Prints one JSON line. Exit status: 0 done, 2 bad flags, 3 unreadable or invalid trace. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_read.h"

static void tf_usage(FILE *f) {
  fprintf(f,
          "usage: trace-frag FILE [--superblock S] [--small-limit B] [--page P]\n"
          "  Hoard's fragmentation (seed 004 §5.4): max memory allocated / max in use, from a trace\n"
          "  recorded under the allocator (LD_PRELOAD=liblarder-trace.so:liblarder.so).\n"
          "  --superblock S   superblock size, a power of two (default 65536, larder's default)\n"
          "  --small-limit B  largest block served from superblocks (default min(16384, S/4))\n"
          "  --page P         page size for larger blocks and the page count (default 4096)\n");
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

int main(int argc, char **argv) {
  const char *path = NULL;
  uint64_t sb = 65536, small = 0, page = 4096;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    uint64_t *dst = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { tf_usage(stdout); return 0; }
    if (!strcmp(a, "--superblock")) dst = &sb;
    else if (!strcmp(a, "--small-limit")) dst = &small;
    else if (!strcmp(a, "--page")) dst = &page;
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

  struct ltr_trace t;
  char err[512];
  if (ltr_load(path, &t, err, sizeof err)) {
    fprintf(stderr, "trace-frag: %s\n", err);
    return 3;
  }
  struct tf_count sbs = {.unit = sb}, pages = {.unit = page};
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
      if (sz <= small) tf_dec(&sbs, ad / sb);
      else large -= (sz + page - 1) / page * page;
      uint64_t last = (ad + (sz ? sz : 1) - 1) / page;
      for (uint64_t p = ad / page; p <= last; p++) tf_dec(&pages, p);
    }
    if (e->obj_out != LTR_NONE) {
      uint64_t o = e->obj_out, sz = t.obj_size[o], ad = t.obj_addr[o];
      u += sz;
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
  printf("{\"name\":\"trace-frag\",\"params\":{\"superblock\":%" PRIu64 ",\"small_limit\":%" PRIu64
         ",\"page\":%" PRIu64 "},\"figures\":{\"fragmentation\":%.4f,\"max_in_use_bytes\":%" PRIu64
         ",\"max_allocated_bytes\":%" PRIu64 ",\"allocated_at_max_in_use_bytes\":%" PRIu64
         ",\"fragmentation_pages\":%.4f,\"max_allocated_pages_bytes\":%" PRIu64
         ",\"total_requested_bytes\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"average_size\":%.4f"
         ",\"threads\":%u,\"records\":%" PRIu64 ",\"unknown_frees\":%" PRIu64 ",\"end_in_use_bytes\":%" PRIu64 "}}\n",
         sb, small, page, frag, u_peak, a_peak, a_at_u_peak, frag_pages, pages.peak, requested, objects,
         objects ? (double)requested / (double)objects : 0.0, t.nthreads, t.records, t.unknown_frees, u);
  return 0;
}
