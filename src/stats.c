/* The introspection API: statistics merged from per-thread counters on demand, and the
 * validation walk. Nothing here runs on an allocation path. */
#define _GNU_SOURCE
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every field of larder_stats_t, once: the table and the JSON are printed from this list. */
#define STATS_FIELDS(X)                                                                     \
  X(mallocs) X(frees) X(remote_frees) X(reallocs) X(bytes_in_use) X(bytes_held) X(bytes_mapped) \
  X(superblocks_to_global) X(superblocks_from_global) X(large_allocs) X(large_cache_hits)      \
  X(large_bytes_in_use) X(large_bytes_cached) X(mmap_calls) X(munmap_calls) X(madvise_calls) X(mmap_bytes)           \
  X(munmap_bytes) X(madvise_bytes) X(refills) X(superblocks_examined) X(free_lock_acquisitions)             \
  X(validations) X(medium_allocs) X(medium_bytes_in_use) X(segments) X(bytes_free_dirty) X(bytes_purged)     \
  X(bytes_refaulted) X(purge_thread_runs) X(purge_thread_bytes) X(bytes_cached) X(bytes_remote_pending) \
  X(cache_flushes) X(remote_batches) X(remote_announcements) X(purge_thread_starts) X(idle_bins_emptied) \
  X(parked_heaps_taken) X(parked_heaps_released) X(heaps_examined) X(refill_pending_examined) \
  X(remote_hinted) X(medium_tails_purged) X(medium_cache_hits) X(medium_bytes_cached) X(remote_inbox_full) X(remote_hint_taken) \
  X(remote_to_bins) X(mark_rings_examined) X(purge_call_runs) X(orphan_heaps_taken) X(bytes_dormant) X(purge_runs_cut) \
  X(lock_sleeps) X(remote_sends) X(idle_medium_emptied) X(medium_late_tails) X(medium_cache_grows) X(medium_cache_extra) X(bin_growths) \
  X(classes_learned) X(fit_allocs) X(fit_bytes_in_use) X(fit_regions) \
  X(superblocks_restarted) X(superblocks_watched)

static size_t positive(int64_t v) { return v > 0 ? (size_t)v : 0; }

/* The small size classes this process uses (those that fit its superblock size, and those
 * learned so far), smallest first, into order[]; returns how many. */
static size_t classes_in_use(unsigned order[LD_CLASS_COUNT]) {
  size_t n = 0;
  unsigned learned = __atomic_load_n(&ld_classes_learned, __ATOMIC_ACQUIRE);
  for (unsigned c = 0; c < LD_CLASS_FIXED + learned; c++) {
    if (!ld_class_capacity[c] || ld_class_size[c] > ld_small_max) continue;
    size_t at = n++;
    for (; at > 0 && ld_class_size[order[at - 1]] > ld_class_size[c]; at--) order[at] = order[at - 1];
    order[at] = c;
  }
  return n;
}

static void fill_stats(larder_stats_t *out, const ld_stats_t *counts, const ld_heap_figures_t *heaps, int64_t global_in_use,
                       int64_t global_held, size_t global_taken) {
  ld_os_counts_t os;
  ld_os_counts(&os);
  ld_segment_stats_t seg;
  ld_segment_stats(&seg);
  ld_purge_stats_t purge;
  ld_maintain_purge_stats(&purge);
  memset(out, 0, sizeof *out);
  /* Every small malloc pops a block that a refill or a free put in a bin (ld_stats_t). */
  int64_t small_mallocs = (int64_t)counts->blocks_refilled + (int64_t)counts->frees_cached - (int64_t)counts->blocks_flushed -
                          heaps->cached_blocks;
  out->mallocs = positive(small_mallocs) + counts->large_allocs + counts->fit_allocs;
  out->frees = counts->frees_cached + counts->frees_other + counts->remote_frees + counts->fit_frees;
  out->remote_frees = counts->remote_frees;
  out->reallocs = counts->reallocs;
  /* u counts the blocks in bins and the blocks freed by other threads that their owners have
   * not yet looked at; neither is the program's. */
  int64_t remote_pending = (int64_t)counts->remote_sent_bytes - (int64_t)counts->remote_taken_bytes - (int64_t)global_taken;
  int64_t medium_bytes, medium_usable;
  ld_medium_unowned(&medium_bytes, &medium_usable);
  size_t large = ld_large_bytes_in_use(), cached = ld_large_bytes_cached();
  size_t medium = positive(medium_bytes + heaps->medium_bytes), usable = positive(medium_usable + heaps->medium_usable);
  /* a medium block is its usable bytes, as a small one is its class's: the rest of its chunks
   * is held, not in use */
  out->bytes_in_use = positive(heaps->in_use + global_in_use - heaps->cached - positive(remote_pending)) + large + usable;
  /* the fit tier's live blocks, less those other threads freed that their owners have not yet
   * collected */
  int64_t fit_pending = (int64_t)counts->fit_remote_bytes - (int64_t)counts->fit_remote_taken_bytes;
  out->fit_bytes_in_use = positive(heaps->fit_in_use - positive(fit_pending));
  out->fit_regions = positive(heaps->fit_regions);
  out->fit_allocs = counts->fit_allocs;
  out->bytes_in_use += out->fit_bytes_in_use;
  size_t medium_cached = positive(heaps->medium_cached);
  out->bytes_held = positive(heaps->held + global_held) + large + cached + medium + medium_cached;
  out->bytes_cached = positive(heaps->cached) + medium_cached;
  out->bytes_remote_pending = positive(remote_pending) + positive(fit_pending);
  out->bytes_held += out->fit_regions * ld_sb_size;
  out->bytes_mapped = os.mmap_bytes - os.munmap_bytes;
  out->superblocks_to_global = counts->superblocks_to_global;
  out->superblocks_from_global = counts->superblocks_from_global;
  out->large_allocs = counts->large_allocs;
  out->large_cache_hits = counts->large_cache_hits;
  out->large_bytes_in_use = large;
  out->large_bytes_cached = cached;
  out->mmap_calls = os.mmap_calls;
  out->munmap_calls = os.munmap_calls;
  out->madvise_calls = os.madvise_calls;
  out->mmap_bytes = os.mmap_bytes;
  out->munmap_bytes = os.munmap_bytes;
  out->madvise_bytes = os.madvise_bytes;
  out->refills = counts->refills;
  out->cache_flushes = counts->flushes;
  out->superblocks_examined = counts->superblocks_examined;
  out->free_lock_acquisitions = counts->free_lock_acquisitions;
  out->remote_batches = counts->remote_batches;
  out->remote_announcements = counts->remote_announcements;
  out->remote_sends = counts->remote_sends;
  out->remote_inbox_full = counts->remote_inbox_full;
  out->remote_hint_taken = counts->remote_hint_taken;
  out->remote_to_bins = counts->remote_to_bins;
  out->mark_rings_examined = counts->mark_rings_examined;
  out->validations = atomic_load_explicit(&ld_validations, memory_order_relaxed);
  out->medium_allocs = counts->medium_allocs;
  out->medium_bytes_in_use = medium;
  out->segments = seg.segments;
  out->bytes_free_dirty = seg.bytes_free_dirty;
  out->bytes_purged = seg.bytes_purged;
  out->bytes_refaulted = seg.bytes_refaulted;
  out->purge_thread_runs = purge.thread_runs;
  out->purge_call_runs = purge.call_runs;
  out->purge_thread_bytes = purge.thread_bytes;
  out->purge_thread_starts = purge.thread_starts;
  out->idle_bins_emptied = purge.bins_emptied;
  out->idle_medium_emptied = purge.medium_emptied;
  out->purge_runs_cut = purge.runs_cut;
  out->parked_heaps_taken = counts->parked_heaps_taken;
  out->orphan_heaps_taken = counts->orphan_heaps_taken;
  out->parked_heaps_released = counts->parked_heaps_released;
  out->heaps_examined = counts->heaps_examined;
  out->refill_pending_examined = counts->refill_pending_examined;
  out->remote_hinted = counts->remote_hinted;
  out->medium_tails_purged = seg.bytes_tails_purged;
  out->medium_cache_hits = counts->medium_cache_hits;
  out->medium_late_tails = counts->medium_late_tails;
  out->medium_cache_grows = counts->medium_cache_grows;
  out->bin_growths = counts->bin_growths;
  out->superblocks_restarted = counts->superblocks_restarted;
  out->superblocks_watched = counts->superblocks_watched;
  out->classes_learned = __atomic_load_n(&ld_classes_learned, __ATOMIC_ACQUIRE);
  out->medium_cache_extra = ld_cache_medium_extra();
  out->medium_bytes_cached = medium_cached;
  out->bytes_dormant = ld_global_dormant_bytes();
  out->lock_sleeps = os.lock_sleeps;
}

static void fill_classes(larder_class_stats_t *out, const unsigned *order, size_t n, const ld_class_figures_t *in_heaps,
                         const ld_class_figures_t *in_global) {
  for (size_t i = 0; i < n; i++) {
    larder_class_stats_t *k = &out[i];
    unsigned c = order[i];
    k->learned = c >= LD_CLASS_FIXED;
    k->block_size = ld_class_size[c];
    k->blocks_per_superblock = ld_class_capacity[c];
    k->superblocks = positive(in_heaps->superblocks[c]);
    k->superblocks_global = positive(in_global->superblocks[c]);
    k->bytes_cached = positive(in_heaps->cached[c]);
    /* u counts the cached blocks too (ld_heaps_stats) */
    k->bytes_in_use = positive(in_heaps->in_use[c] + in_global->in_use[c] - in_heaps->cached[c]);
    size_t held = (k->superblocks + k->superblocks_global) * (size_t)ld_class_capacity_bytes[c];
    size_t carved = positive(in_heaps->carved[c] + in_global->carved[c]), taken = k->bytes_in_use + k->bytes_cached;
    k->bytes_free = carved > taken ? carved - taken : 0;
    k->bytes_never_used = held > carved ? held - carved : 0;
  }
}

size_t ld_stats_gather(larder_stats_t *out, larder_class_stats_t *classes, size_t n) {
  ld_maintain_init();
  ld_cache_settle_deferred_now(ld_heap_tls); /* the calling thread's frees all counted */
  ld_heap_collect_pending(ld_heap_tls);
  ld_stats_t counts;
  ld_heap_figures_t heaps;
  ld_class_figures_t in_heaps, in_global;
  int64_t global_in_use, global_held;
  size_t global_taken;
  if (classes) {
    memset(&in_heaps, 0, sizeof in_heaps);
    memset(&in_global, 0, sizeof in_global);
  }
  ld_heaps_stats(&counts, &heaps, classes ? &in_heaps : NULL);
  ld_global_stats(&global_in_use, &global_held, &global_taken, classes ? &in_global : NULL);
  if (out) fill_stats(out, &counts, &heaps, global_in_use, global_held, global_taken);
  unsigned order[LD_CLASS_COUNT];
  size_t in_use = classes_in_use(order);
  if (classes) fill_classes(classes, order, n < in_use ? n : in_use, &in_heaps, &in_global);
  return in_use;
}

void larder_stats_get(larder_stats_t *out) { ld_stats_gather(out, NULL, 0); }

size_t larder_class_stats_get(larder_class_stats_t *out, size_t n) {
  if (!out || !n) {
    ld_maintain_init();
    unsigned order[LD_CLASS_COUNT];
    return classes_in_use(order);
  }
  return ld_stats_gather(NULL, out, n);
}


/* The size classes that hold superblocks or cached blocks: a table after the statistics' (the
 * header names larder_class_stats_t's fields), or the JSON object's "classes" member. On the
 * stack, written with ld_os_write: allocates nothing (it runs at exit, and inside malloc_stats). */
static void print_classes(int fd, bool json, const larder_class_stats_t *classes, size_t count) {
  char buf[16384];
  size_t n = (size_t)snprintf(buf, sizeof buf, json ? ", \"classes\": [" : "larder size classes (those holding memory)\n  %10s %9s %11s %7s %13s %13s %13s %13s\n",
                              "block_size", "blocks/sb", "superblocks", "global", "bytes_in_use", "bytes_cached", "bytes_free", "never_used");
  bool first = true;
  for (size_t c = 0; c < count && n < sizeof buf; c++) {
    const larder_class_stats_t *k = &classes[c];
    if (!k->superblocks && !k->superblocks_global && !k->bytes_cached) continue;
    if (json)
      n += (size_t)snprintf(buf + n, sizeof buf - n,
                            "%s{\"block_size\": %zu, \"blocks_per_superblock\": %zu, \"superblocks\": %zu, "
                            "\"superblocks_global\": %zu, \"bytes_in_use\": %zu, \"bytes_cached\": %zu, \"bytes_free\": %zu, "
                            "\"bytes_never_used\": %zu, \"learned\": %s}",
                            first ? "" : ", ", k->block_size, k->blocks_per_superblock, k->superblocks, k->superblocks_global,
                            k->bytes_in_use, k->bytes_cached, k->bytes_free, k->bytes_never_used, k->learned ? "true" : "false");
    else
      n += (size_t)snprintf(buf + n, sizeof buf - n, "  %10zu %9zu %11zu %7zu %13zu %13zu %13zu %13zu%s\n", k->block_size,
                            k->blocks_per_superblock, k->superblocks, k->superblocks_global, k->bytes_in_use,
                            k->bytes_cached, k->bytes_free, k->bytes_never_used, k->learned ? "  learned" : "");
    first = false;
  }
  if (json && n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, "]");
  ld_os_write(fd, buf, n < sizeof buf ? n : sizeof buf - 1);
}

/* The statistics' table, then the classes' (larder_stats_print, malloc_stats). */
static void print_table(int fd, const larder_stats_t *st, const larder_class_stats_t *classes, size_t count) {
  char buf[4096];
  size_t n = (size_t)snprintf(buf, sizeof buf, "larder statistics%s\n",
#ifdef LARDER_STATS
                              ""
#else
                              " (call counters compiled out)"
#endif
  );
#define STATS_ROW(f) \
  if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, "  %-24s %zu\n", #f, st->f);
  STATS_FIELDS(STATS_ROW)
#undef STATS_ROW
  ld_os_write(fd, buf, n < sizeof buf ? n : sizeof buf - 1);
  print_classes(fd, false, classes, count);
}

void larder_stats_print(int fd) {
  larder_stats_t st;
  larder_class_stats_t classes[LD_CLASS_COUNT];
  size_t count = ld_stats_gather(&st, classes, LD_CLASS_COUNT);
  print_table(fd, &st, classes, count);
}

/* malloc_stats() prints glibc's lines first, so that programs and tests that parse them
 * ("Arena 0:", "system bytes", "in use bytes", "Total (incl. mmap):", "max mmap regions",
 * "max mmap bytes") find them, then larder's own table. The shape is glibc's __malloc_stats
 * (malloc.c), checked against glibc 2.36's output on this project's machine; only the width
 * differs, glibc casts to unsigned int and wraps above 4 GiB, larder prints the whole figure.
 * larder's figures, in glibc's meanings: larder's heaps together are one arena, whose system
 * bytes are everything held except large spans in use (superblocks, medium spans, cached large
 * spans) and whose in-use bytes are the blocks and medium spans handed out; large spans, a
 * mapping each, are glibc's mmapped chunks, added to both totals, and their peaks (in spans and
 * in bytes) are the "max mmap" lines. Formatted on the stack, written with ld_os_write: this
 * runs inside the allocator and allocates nothing. */
void ld_stats_print_glibc_shape(int fd) {
  larder_stats_t st;
  larder_class_stats_t classes[LD_CLASS_COUNT];
  size_t count = ld_stats_gather(&st, classes, LD_CLASS_COUNT);
  size_t spans_now, spans_peak, bytes_peak;
  ld_large_peaks(&spans_now, &spans_peak, &bytes_peak);
  size_t large = st.large_bytes_in_use;
  size_t arena_system = st.bytes_held > large ? st.bytes_held - large : 0;
  size_t arena_in_use = st.bytes_in_use > large ? st.bytes_in_use - large : 0;
  char buf[512];
  int n = snprintf(buf, sizeof buf,
                   "Arena 0:\n"
                   "system bytes     = %10zu\n"
                   "in use bytes     = %10zu\n"
                   "Total (incl. mmap):\n"
                   "system bytes     = %10zu\n"
                   "in use bytes     = %10zu\n"
                   "max mmap regions = %10zu\n"
                   "max mmap bytes   = %10zu\n",
                   arena_system, arena_in_use, arena_system + large, arena_in_use + large, spans_peak, bytes_peak);
  if (n > 0) ld_os_write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
  print_table(fd, &st, classes, count);
}

void larder_stats_print_json(int fd) {
  larder_stats_t st;
  larder_class_stats_t classes[LD_CLASS_COUNT];
  size_t count = ld_stats_gather(&st, classes, LD_CLASS_COUNT);
  char buf[4096];
  size_t n = (size_t)snprintf(buf, sizeof buf, "{\"allocator\": \"larder\"");
#define STATS_JSON(f) \
  if (n < sizeof buf) n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"%s\": %zu", #f, st.f);
  STATS_FIELDS(STATS_JSON)
#undef STATS_JSON
  ld_os_write(fd, buf, n < sizeof buf ? n : sizeof buf - 1);
  print_classes(fd, true, classes, count);
  ld_os_write(fd, "}\n", 2);
}

int larder_validate(void) { return ld_maintain_validate(); }

/* LARDER_STATS=1 (a table) or 2 (JSON): the statistics on stderr at exit. Registered here,
 * where they are printed, so that maintenance never calls up into this file. */
static void stats_at_exit(void) {
  if (LD_OPTION(stats) >= 2) larder_stats_print_json(2);
  else larder_stats_print(2);
}
__attribute__((constructor)) static void stats_at_exit_register(void) {
  ld_maintain_init();
  if (LD_OPTION(stats)) atexit(stats_at_exit);
}
