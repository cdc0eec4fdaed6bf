/* The tunables: one table, read once from LARDER_<NAME> at start (see options.c). */
#ifndef LD_OPTIONS_H
#define LD_OPTIONS_H

#include <stddef.h>

#pragma GCC visibility push(hidden)

#ifdef LARDER_DEBUG_BUILD
#define LD_DEBUG_DEFAULT 1
#else
#define LD_DEBUG_DEFAULT 0
#endif

/* X(name, default, min, max, integral, takes effect only at start, comment) */
#define LD_OPTION_TABLE(X)                                                                      \
  X(empty_fraction,  0.25,  0.01, 0.99,  0, 0, "Hoard f: a heap less than (1-f) full gives a superblock back (Hoard 3.1)") \
  X(k,               4,     1,    1e6,   1, 0, "Hoard K >= 1: superblocks of slack per class (K=0 would break the invariant at a heap's first block)") \
  X(superblock_size, 65536, 16384, 1048576, 1, 1, "bytes per superblock S and per medium chunk, a power of two (larger: medium blocks hold more, README)") \
  X(purge_delay_ms,  1000,  0,    3.6e6, 1, 0, "empty memory is returned to the OS after this delay; 0: at once") \
  X(purge_thread,    2,     0,    2,     1, 0, "background purge thread: 0 never, 1 from the first allocation, 2 once the process maps purge_thread_mb") \
  X(purge_thread_mb, 16,    0,    1e6,   1, 0, "mapped memory that starts the purge thread (purge_thread 2), in MiB: tiny programs get none") \
  X(large_cache_mb,  64,    0,    1e6,   1, 0, "freed large spans kept for reuse, in MiB")               \
  X(bin_growth_kb,   256,   0,    65536, 1, 0, "a thread's bins of the classes it cycles (flushed, then refilled) grow past their 16 KiB, together by at most this, in KiB; 0: fixed bins") \
  X(medium_cache_kb, 1024,  0,    1e6,   1, 0, "freed medium spans each thread keeps for its next mallocs, in KiB (spans up to half of it)") \
  X(medium_cache_max_kb, 4096, 0,  1e6,   1, 0, "a thread's medium cache grows to this, in KiB, while its bound pushes out spans its next mallocs miss; all threads' growth together at most 4 times this") \
  X(learned_classes, 8,     0,    8,     1, 0, "size classes learned at run time for one size that dominates a class's refills and packs 1/16 more blocks into a superblock (at most 8); 0: the fixed classes only") \
  X(fit_above,       0,     0,    16384, 1, 0, "blocks above this many bytes (at most 16384), up to three quarters of a superblock, come from a best-fit, coalescing tier per thread instead of size classes and medium spans: less memory on small heaps whose sizes shift, slower; 0: off (docs/allocator.md, the fit tier)") \
  X(grow_purge_kb,   0,     0,    1e7,   1, 0, "a run of clean chunks handed out while free dirty ones wait that none fits (a large span among freed superblocks) gives back as much of the oldest, up to this many KiB per purge run: RSS does not grow over fragments; 0: off (costs page faults under churn of medium blocks)") \
  X(huge_pages,      0,     0,    1,     1, 0, "segments mapped from now on are backed by 2 MiB transparent huge pages where the kernel allows: fewer TLB misses on large heaps, RSS in 2 MiB steps") \
  X(remote_free_check, 1,   0,    1,     1, 0, "a free of another thread's block marks it, so a double free by two threads is caught; 0: no mark (faster remote frees; such a double free may hand the block out twice)") \
  X(stats,           0,     0,    2,     1, 0, "print statistics at exit: 1 table, 2 JSON")             \
  X(verbose,         0,     0,    1,     1, 0, "report settings and warnings on stderr")               \
  X(debug,           LD_DEBUG_DEFAULT,     0,    1,     1, 0, "extra checks: full double-free search, validation on slow paths, the sizes free_sized and sized deletes state")

typedef struct ld_options_s {
#define LD_OPTION_FIELD(name, def, lo, hi, integral, at_start, comment) double name;
  LD_OPTION_TABLE(LD_OPTION_FIELD)
#undef LD_OPTION_FIELD
} ld_options_t;

extern ld_options_t ld_options;

/* An option's value. larder_option_set may store one while the purge thread, or any thread on a
 * slow path, reads it: both sides go through relaxed atomic accesses (a plain load and store of
 * an aligned word on the machines larder builds for, but no data race in C11's terms, or to
 * TSan, which reported the plain ones). */
static inline double ld_option_load(const double *field) {
  double v;
  __atomic_load(field, &v, __ATOMIC_RELAXED);
  return v;
}
#define LD_OPTION(name) ld_option_load(&ld_options.name)

/* remote_free_check as a word the remote free path tests in one instruction (its double took a
 * compare and two branches there); kept equal to the option by the setter. */
extern int ld_remote_free_mark;
/* medium_cache_kb in bytes, for the medium free's test (the double's conversion was 6 of its
 * instructions); kept equal by the setter as ld_remote_free_mark is. */
extern size_t ld_medium_cache_bytes;
#define LD_MEDIUM_CACHE_BYTES() __atomic_load_n(&ld_medium_cache_bytes, __ATOMIC_RELAXED)
/* bin_growth_kb in bytes, for the refill's and flush's test (as ld_medium_cache_bytes). */
extern size_t ld_bin_growth_bytes;
#define LD_BIN_GROWTH_BYTES() __atomic_load_n(&ld_bin_growth_bytes, __ATOMIC_RELAXED)
/* learned_classes as an integer, for the vote at each refill (alloc.c, class_vote), which stops
 * counting once that many are learned (as ld_medium_cache_bytes). */
extern unsigned ld_learned_classes_max;
#define LD_LEARNED_CLASSES_MAX() __atomic_load_n(&ld_learned_classes_max, __ATOMIC_RELAXED)

/* grow_purge_kb in bytes, for the segments' allocation (0: off); kept equal by the setter. */
extern size_t ld_grow_purge_bytes;
#define LD_GROW_PURGE_BYTES() __atomic_load_n(&ld_grow_purge_bytes, __ATOMIC_RELAXED)
/* fit_above in bytes, for malloc's slow path (0: the tier is off); kept equal by the setter. */
extern size_t ld_fit_above;
#define LD_FIT_ABOVE() __atomic_load_n(&ld_fit_above, __ATOMIC_RELAXED)

/* Reads every LARDER_* variable once; warns about unknown names and malformed values. */
void ld_options_init(void);
/* After this, options marked "at start" refuse changes. */
void ld_options_freeze(void);
/* Sets one option by name (larder_option_set's checks and messages); 0 or -1. */
int ld_option_set(const char *name, const char *value);

#pragma GCC visibility pop

#endif
