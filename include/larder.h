/* larder: a scalable, memory-efficient malloc for multithreaded servers.
 *
 * The prefixed API below is always available. Linking liblarder.a or preloading
 * liblarder.so also defines the standard names (malloc, free, ..., operator new),
 * which forward to these functions.
 */
#ifndef LARDER_H
#define LARDER_H

#include <stddef.h>

/* ---- version: set here and nowhere else (CMake, larder.pc and the Rust crate read these lines) ---- */
#define LARDER_VERSION_MAJOR 0
#define LARDER_VERSION_MINOR 2
#define LARDER_VERSION_PATCH 0
#define LARDER_VERSION (LARDER_VERSION_MAJOR * 10000 + LARDER_VERSION_MINOR * 100 + LARDER_VERSION_PATCH)
#define LARDER_VERSION_STR_(x) #x
#define LARDER_VERSION_XSTR_(x) LARDER_VERSION_STR_(x)
#define LARDER_VERSION_STRING LARDER_VERSION_XSTR_(LARDER_VERSION_MAJOR) "." \
  LARDER_VERSION_XSTR_(LARDER_VERSION_MINOR) "." LARDER_VERSION_XSTR_(LARDER_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the liblarder actually linked or preloaded, for example "0.1.0"; compare it
 * with LARDER_VERSION_STRING, the version of this header. */
const char *larder_version(void);

/* ---- allocation: the same contracts as the C library functions of the same name ---- */
void  *larder_malloc(size_t size);
void  *larder_calloc(size_t count, size_t size);
void  *larder_realloc(void *ptr, size_t size);
void  *larder_reallocarray(void *ptr, size_t count, size_t size);
void   larder_free(void *ptr);
void  *larder_memalign(size_t alignment, size_t size);
int    larder_posix_memalign(void **out, size_t alignment, size_t size);
void  *larder_aligned_alloc(size_t alignment, size_t size);
size_t larder_usable_size(const void *ptr);
/* C23's free_sized and free_aligned_sized: free, with the size (and alignment) the block was
 * allocated with. With LARDER_DEBUG=1, or in the hardened build, a size larger than the block
 * or an alignment the block lacks is reported as an invalid free. */
void   larder_free_sized(void *ptr, size_t size);
void   larder_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* A block aligned to and padded to whole cache lines, for objects that several threads
 * write: nothing else ever shares its lines (seed 000 §6). Free it with larder_free. */
void  *larder_malloc_shared(size_t size);

/* Gives every free page back to the OS now. Returns 1 if memory was released, else 0. */
int    larder_trim(size_t pad);

/* ---- tunables (the table is in docs/tunables.md and src/options.c) ---- */
/* Sets a tunable by its name without the LARDER_ prefix, for example ("purge_delay_ms", "0").
 * Returns 0, or -1 (and a message on stderr) for an unknown name or malformed value.
 * Layout tunables (superblock_size) only take effect before the first allocation. */
int    larder_option_set(const char *name, const char *value);
/* The current value of a tunable, or -1 for an unknown name. */
double larder_option_get(const char *name);

/* ---- statistics: per-thread counters, merged when asked for ---- */
typedef struct larder_stats_s {
  size_t mallocs, frees, remote_frees, reallocs;  /* calls; frees include remote ones */
  size_t bytes_in_use;        /* what the program holds: small blocks handed out, medium and large spans */
  size_t bytes_held;          /* superblocks held by all heaps (Hoard's a) + large spans in use and cached */
  size_t bytes_mapped;        /* address space obtained from the OS and not yet unmapped */
  size_t superblocks_to_global, superblocks_from_global;
  size_t large_allocs, large_cache_hits, large_bytes_in_use, large_bytes_cached;
  size_t mmap_calls, munmap_calls, madvise_calls;
  size_t mmap_bytes, munmap_bytes, madvise_bytes;
  /* cost of the slow paths: each is bounded by a constant per call (docs/allocator.md) */
  size_t refills;                /* small-object slow paths: the current superblock was empty */
  size_t superblocks_examined;   /* superblocks looked at by those refills (constant per refill) */
  size_t free_lock_acquisitions; /* locks taken on a free path (local frees take none) */
  size_t validations;            /* full validation walks (larder_validate, LARDER_DEBUG) */
  /* medium objects: runs of superblock-sized chunks inside segments, coalesced when freed */
  size_t medium_allocs, medium_bytes_in_use; /* in use: their chunks (bytes_in_use counts their usable bytes) */
  size_t segments;               /* segments mapped now */
  size_t bytes_free_dirty;       /* free chunks still resident: what the decay will purge */
  /* memory given back */
  size_t bytes_purged;           /* bytes given back with madvise or munmap of free memory */
  size_t bytes_refaulted;        /* purged bytes handed out again (a proxy for page faults) */
  size_t purge_thread_runs, purge_thread_bytes; /* the background purge thread's wake-ups and bytes */
  /* the front end (since 0.2): per-thread caches of free blocks and batched remote frees */
  size_t bytes_cached;           /* free blocks waiting in threads' caches (not in bytes_in_use) */
  size_t bytes_remote_pending;   /* freed by other threads, not yet seen by their owners (not in use) */
  size_t cache_flushes;          /* batches of blocks returned from caches to superblocks */
  size_t remote_batches;         /* batches of remote frees handed over: one atomic operation each */
  size_t remote_announcements;   /* of those, ones that announced their superblock: one more CAS each */
  size_t purge_thread_starts;    /* times the purge thread was started (it ends when idle) */
  size_t idle_bins_emptied;      /* threads' caches emptied by the purge after a delay without a call */
  size_t parked_heaps_taken;     /* exited threads' heaps taken whole, superblocks and all, by new threads */
  size_t parked_heaps_released;  /* exited threads' heaps no new thread took within a purge delay: emptied */
  size_t heaps_examined;         /* heaps looked at to find new threads' heaps (at most 5 per thread) */
  size_t refill_pending_examined; /* messages of remote frees and announced superblocks looked at by refills (at most 64 of each per refill) */
  size_t remote_hinted;           /* blocks freed by other threads whose lines a refill prefetched from their freers' hints */
  size_t medium_tails_purged;     /* bytes of old pages purged past medium spans that lived a purge delay */
  /* medium spans threads keep to reuse (LARDER_MEDIUM_CACHE_KB) */
  size_t medium_cache_hits;       /* medium mallocs served from the thread's kept spans */
  size_t medium_bytes_cached;     /* kept spans' chunks (in bytes_cached and bytes_held) */
  size_t remote_inbox_full;       /* batches that found their owner's inbox full: onto the superblock's remote list instead */
  size_t remote_hint_taken;       /* of remote_hinted, blocks taken in whole batches from their hints, without reading them */
  size_t remote_to_bins;          /* blocks freed by other threads in batches of one or two, put straight in their owners' caches unread */
  size_t mark_rings_examined;     /* other threads' rings of slow frees looked in by frees of blocks that carried their mark (at most one per such free) */
  size_t purge_call_runs;         /* purge runs made inside malloc and free calls: only in a process without the purge thread */
  size_t orphan_heaps_taken;      /* heaps made by thread-local destructors after larder's exit hook, taken as they stood by new threads once their threads were gone */
  size_t bytes_dormant;           /* pages of partly used superblocks the global heap holds, given back because every block on them was free (in bytes_held, not resident) */
  size_t purge_runs_cut;          /* purge runs stopped early for a fork or malloc_trim that waited for them (the rest ran next) */
  size_t lock_sleeps;             /* waits for one of larder's locks that slept in the kernel (a contended lock whose holder did not give it back within the spin) */
  size_t remote_sends;            /* batches of remote frees went to their owners' inboxes in this many groups, one CAS each (a group: up to 16 small batches for one owner) */
  size_t idle_medium_emptied;     /* threads' kept medium spans given back by the purge after a delay without a call */
  size_t medium_late_tails;       /* of medium_cache_hits, kept spans handed out with old pages past 1.5x the block, their tails listed late (docs/allocator.md) */
  size_t medium_cache_grows;      /* times a thread's medium cache bound doubled: half of 64 medium mallocs in a row that missed were of sizes it had pushed out (LARDER_MEDIUM_CACHE_MAX_KB) */
  size_t medium_cache_extra;      /* bytes by which threads' medium cache bounds now exceed LARDER_MEDIUM_CACHE_KB, all threads together */
  size_t bin_growths;             /* times a thread's bin of a size class grew past its first limit (about 16 KiB of blocks) because it cycled: flushed, then refilled (LARDER_BIN_GROWTH_KB) */
  size_t classes_learned;         /* size classes learned at run time, each the exact size that dominated a class's refills (LARDER_LEARNED_CLASSES) */
  /* the fit tier (LARDER_FIT_ABOVE, off by default): best fit with coalescing per thread */
  size_t fit_allocs;              /* blocks it handed out (in mallocs) */
  size_t fit_bytes_in_use;        /* its live blocks' usable bytes (in bytes_in_use) */
  size_t fit_regions;             /* its regions, one superblock-sized chunk each (in bytes_held) */
  size_t superblocks_restarted;   /* refills that found every carved block of a superblock free and carved it again from its first block, instead of walking its free list */
  size_t superblocks_watched;     /* current superblocks the owner watched, a locked instruction to start and one to stop, so that other threads' frees onto them announce nothing: only those a fill leaves blocks in (one a fill uses up is not) */
} larder_stats_t;

void   larder_stats_get(larder_stats_t *out);
void   larder_stats_print(int fd);       /* human-readable table, then the size classes' (below) */
void   larder_stats_print_json(int fd);  /* one JSON object and a newline; "classes": the size classes' */

/* Where the small blocks' memory lies, by size class (the superblocks' memory: bytes_held less
 * the medium and large spans). Per class, bytes_in_use + bytes_cached + bytes_free +
 * bytes_never_used = (superblocks + superblocks_global) * blocks_per_superblock * block_size. */
typedef struct larder_class_stats_s {
  size_t block_size;            /* bytes of each block (a malloc of up to this many, above the class below, gets one) */
  size_t blocks_per_superblock; /* blocks a superblock of the class holds */
  size_t superblocks;           /* superblocks of the class the threads' heaps hold (heaps waiting for a new thread included) */
  size_t superblocks_global;    /* superblocks of the class the global heap holds (partly used, full, empty, or with pages given back) */
  size_t bytes_in_use;          /* blocks handed out, and blocks other threads freed that their owners have not taken back yet (over all
                                   classes, those are larder_stats_t's bytes_remote_pending) */
  size_t bytes_cached;          /* blocks in the threads' caches (their bins and deferred frees) */
  size_t bytes_free;            /* free blocks in the superblocks, handed out before or made ready for a refill: their pages
                                   were written (resident, unless the global heap gave them back: bytes_dormant) */
  size_t bytes_never_used;      /* the superblocks' blocks not carved yet: pages never touched (not resident) */
  size_t learned;               /* 1: a class learned at run time for one size that dominated its class's refills
                                   (LARDER_LEARNED_CLASSES); 0: one of the fixed classes */
} larder_class_stats_t;
/* Fills out[0, n) with the figures of the size classes, smallest first, and returns how many
 * classes there are (with out NULL or n 0, only that). A snapshot: other threads' figures may
 * lag their calls by a few operations. */
size_t larder_class_stats_get(larder_class_stats_t *out, size_t n);

/* ---- checking ---- */
/* Walks every heap and superblock, checks every list and counter, and Hoard's invariant
 * (u >= a - K*S or u >= (1-f)*a for every thread heap). Returns 0 when all holds, else the
 * number of violations, each described on stderr. Safe to call at any time from any thread. */
int    larder_validate(void);

#ifdef __cplusplus
}
#endif

/* Real-time pools over caller-given memory, O(1) malloc and free (TLSF). */
#include "larder_pool.h"

#endif /* LARDER_H */
