/* The introspection API: statistics merged from per-thread counters on demand, and the
 * validation walk. Nothing here runs on an allocation path. */
#define _GNU_SOURCE
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <stdio.h>
#include <string.h>

/* Every field of larder_stats_t, once: the table and the JSON are printed from this list. */
#define STATS_FIELDS(X)                                                                     \
  X(mallocs) X(frees) X(remote_frees) X(reallocs) X(bytes_in_use) X(bytes_held) X(bytes_mapped) \
  X(superblocks_to_global) X(superblocks_from_global) X(large_allocs) X(large_cache_hits)      \
  X(large_bytes_in_use) X(large_bytes_cached) X(mmap_calls) X(munmap_calls) X(madvise_calls) X(mmap_bytes)           \
  X(munmap_bytes) X(madvise_bytes)

void larder_stats_get(larder_stats_t *out) {
  ld_init_if_needed();
  ld_stats_t counts;
  int64_t in_use, held;
  ld_stats_merge(&counts, &in_use, &held);
  ld_os_counts_t os;
  ld_os_counts(&os);
  memset(out, 0, sizeof *out);
  out->mallocs = counts.mallocs;
  out->frees = counts.frees;
  out->remote_frees = counts.remote_frees;
  out->reallocs = counts.reallocs;
  size_t large = ld_large_bytes_in_use(), cached = ld_large_bytes_cached();
  out->bytes_in_use = (size_t)(in_use > 0 ? in_use : 0) + large;
  out->bytes_held = (size_t)(held > 0 ? held : 0) + large + cached;
  out->bytes_mapped = os.mmap_bytes - os.munmap_bytes;
  out->superblocks_to_global = counts.superblocks_to_global;
  out->superblocks_from_global = counts.superblocks_from_global;
  out->large_allocs = counts.large_allocs;
  out->large_cache_hits = counts.large_cache_hits;
  out->large_bytes_in_use = large;
  out->large_bytes_cached = cached;
  out->mmap_calls = os.mmap_calls;
  out->munmap_calls = os.munmap_calls;
  out->madvise_calls = os.madvise_calls;
  out->mmap_bytes = os.mmap_bytes;
  out->munmap_bytes = os.munmap_bytes;
  out->madvise_bytes = os.madvise_bytes;
}

void larder_stats_print(int fd) {
  larder_stats_t st;
  larder_stats_get(&st);
  char buf[2048];
  size_t n = (size_t)snprintf(buf, sizeof buf, "larder statistics%s\n",
#ifdef LARDER_STATS
                              ""
#else
                              " (call counters compiled out)"
#endif
  );
#define STATS_ROW(f) \
  if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, "  %-24s %zu\n", #f, st.f);
  STATS_FIELDS(STATS_ROW)
#undef STATS_ROW
  ld_os_write(fd, buf, n < sizeof buf ? n : sizeof buf - 1);
}

void larder_stats_print_json(int fd) {
  larder_stats_t st;
  larder_stats_get(&st);
  char buf[2048];
  size_t n = (size_t)snprintf(buf, sizeof buf, "{\"allocator\": \"larder\"");
#define STATS_JSON(f) \
  if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"%s\": %zu", #f, st.f);
  STATS_FIELDS(STATS_JSON)
#undef STATS_JSON
  if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, "}\n");
  ld_os_write(fd, buf, n < sizeof buf ? n : sizeof buf - 1);
}

int larder_validate(void) {
  int violations = 0;
  ld_heap_validate_all(&violations);
  return violations;
}
