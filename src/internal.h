/* Internal types and functions of liblarder, shared by the files in src/.
 *
 * Vocabulary (Hoard, seed 004 §3):
 *   superblock (sb_)  S bytes, S-aligned, blocks of one size class, owned by one heap.
 *   heap (heap_)      one per thread; keeps u (bytes in use) and a (bytes held).
 *   global heap       Hoard's heap 0: superblocks given back by heaps and by exited threads.
 *   segment           a large mapping that superblocks are carved from, so mmap calls stay few.
 *   large span        an allocation above the largest size class, mapped on its own, with a
 *                     header laid out like a superblock's so that free finds it the same way.
 */
#ifndef LD_INTERNAL_H
#define LD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* Everything declared below is internal to the library, not exported from liblarder.so. */
#pragma GCC visibility push(hidden)

#define LD_LIKELY(x)   __builtin_expect(!!(x), 1)
#define LD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LD_NOINLINE    __attribute__((noinline))
#define LD_NORETURN    __attribute__((noreturn))
#define LD_CACHE_LINE  64

/* ---- size classes ----
 * 16..128 in steps of 16, then 8 classes per doubling up to 16 KiB: neighbouring classes are
 * at most 12.5% apart above 128 bytes, which bounds internal fragmentation the way Hoard's base
 * b = 1.2 does (seed 004 §5), a little tighter. */
#define LD_CLASS_COUNT     64
#define LD_CLASS_LARGE     LD_CLASS_COUNT      /* sentinel class: "not a small size" */
#define LD_SMALL_LIMIT     16384               /* largest size class */
#define LD_MIN_ALIGN       16
#define LD_SB_HEADER       256                 /* first block never starts before this offset */

extern uint8_t  ld_class_of_granule[LD_SMALL_LIMIT / 16 + 1]; /* (size+15)/16 -> class */
extern uint32_t ld_class_size[LD_CLASS_COUNT];

static inline unsigned ld_size_class(size_t size) { return ld_class_of_granule[(size + 15) >> 4]; }

/* ---- blocks and superblocks ---- */
typedef struct ld_block_s {
  struct ld_block_s *next;
  uintptr_t tag;          /* ld_free_key ^ address while free: catches double frees cheaply */
} ld_block_t;

extern uintptr_t ld_free_key;

enum { LD_KIND_SMALL = 1, LD_KIND_LARGE = 2, LD_KIND_LARGE_CACHED = 3 };

/* Fullness groups (Hoard §3.1): 0 empty, 1..4 by quarters of fullness, 5 full. */
#define LD_GROUP_COUNT 6
#define LD_GROUP_FULL  5

#define LD_DEFERRED_MAX 64

#define LD_SB_MAGIC 0x1a7de75bu

struct heap_s;

typedef struct sb_s {
  /* first cache line: set when the superblock is formatted, then only read; remote freers
   * read it, so nothing the owner writes often may live here (false sharing, Hoard §3.3) */
  uint32_t magic;
  uint8_t size_class, kind, group, purged;
  uint32_t block_size;
  uint32_t capacity;
  uint64_t reciprocal;         /* ceil(2^40 / block_size): block index without a division */
  char *data;                  /* first block (large span: the user pointer) */
  _Atomic(struct heap_s *) owner;
  void *map_base;              /* large span: the mapping */
  size_t map_bytes;
  size_t usable;               /* large span: bytes usable from data */
  /* second cache line: the owner's */
  _Alignas(LD_CACHE_LINE) ld_block_t *free_list; /* local LIFO free list */
  int32_t used;                /* blocks handed out and not yet collected back */
  int32_t floor;               /* current: Hoard's release mark; else its group's lowest used */
  char *bump;                  /* blocks below this have been carved; above, untouched */
  struct sb_s *next, *prev;    /* links in a fullness group or a global list */
  uint64_t idle_since_ns;      /* when it became empty in the global heap (purge delay) */
  /* third cache line: other threads' frees (CAS push), taken by the owner with an exchange */
  _Alignas(LD_CACHE_LINE) _Atomic(ld_block_t *) remote;
} sb_t;

_Static_assert(sizeof(sb_t) <= LD_SB_HEADER, "superblock header must fit before the first block");

/* Hands out the head of sb's free list (not empty): the one way a block leaves a free list. */
static inline ld_block_t *ld_sb_pop(sb_t *sb) {
  ld_block_t *b = sb->free_list;
  sb->free_list = b->next;
  b->tag = 0;
  sb->used++;
  return b;
}

extern size_t ld_sb_size;          /* S */
extern uintptr_t ld_sb_mask;       /* ~(S-1) */
extern size_t ld_small_max;        /* min(LD_SMALL_LIMIT, S/4) */

/* The header of the superblock or large span holding p. (p-1) rather than p lets a large span
 * aligned to S or more keep its header in the S-chunk just below the user pointer. */
static inline sb_t *ld_sb_of(const void *p) { return (sb_t *)(((uintptr_t)p - 1) & ld_sb_mask); }

/* ---- statistics, per heap, merged on demand (stats.c) ---- */
typedef struct ld_stats_s {
  size_t mallocs, frees, remote_frees, reallocs;
  size_t superblocks_to_global, superblocks_from_global;
  size_t large_allocs, large_cache_hits;
} ld_stats_t;

#ifdef LARDER_STATS
#define LD_STAT_INC(heap, field) ((heap)->stats.field++)
#else
#define LD_STAT_INC(heap, field) ((void)0)
#endif

/* ---- heaps ---- */
/* Hoard's u and a are kept per size class, as its proof bounds them (seed 004 §4.1): a heap
 * takes a superblock of class c only when all its class-c superblocks are full, so taking one
 * keeps the invariant for K >= 1, which per-heap sums would not.
 * u is kept in two parts so that the fast paths write no heap counter: the current
 * superblock's used blocks, and u_other, the bytes in use in the class's other superblocks,
 * which only changes under the heap's lock. The current superblock's floor is set so that a
 * free taking u below the release threshold leaves the fast path. */
typedef struct heap_s {
  sb_t *current[LD_CLASS_COUNT + 1];   /* the superblock each class allocates from */
  int64_t u_other[LD_CLASS_COUNT + 1]; /* bytes in use outside the current superblock */
  int64_t a[LD_CLASS_COUNT + 1];       /* bytes held per class (Hoard's a_i) */
  int64_t u_release[LD_CLASS_COUNT + 1]; /* give a superblock of class c back when u[c] < this */
  unsigned options_epoch;
  sb_t *groups[LD_CLASS_COUNT][LD_GROUP_COUNT];
  uint64_t group_classes[LD_GROUP_COUNT];  /* bit c: class c has superblocks in that group */
  ld_stats_t stats;
  /* Frees into the heap's own superblocks other than the current ones wait here (owner only,
   * no lock) and are done in batches under the lock: one lock per LD_DEFERRED_MAX frees. */
  ld_block_t *deferred;
  unsigned deferred_count;
  unsigned remote_since_help;          /* remote frees by this thread since it last helped */
  /* Guards everything but the current superblocks' free lists: taken by the owner in its slow
   * paths, and by another thread that reclaims an idle heap's frees (heap.c, heap_reclaim). */
  pthread_mutex_t lock;
  struct heap_s *next_heap;            /* all heaps, live and abandoned */
  int live;                            /* a thread uses it */
  int orphan_tid;                      /* made after its thread's exit hook ran: that thread's id */
} heap_t;

extern heap_t ld_heap_empty;          /* every thread starts here; its classes have no blocks */
extern __thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec")));

/* ---- heap.c: the slow paths and the global heap ---- */
heap_t *ld_heap_for_thread(void);                  /* makes the calling thread's heap */
void   *ld_heap_refill(heap_t *heap, unsigned cls); /* a block of class cls, or NULL (ENOMEM) */
void    ld_heap_free_slow(heap_t *heap, unsigned cls); /* Hoard's release after a local free */
void    ld_free_remote(sb_t *sb, ld_block_t *b);
/* Every LD_HELP_EVERY remote frees, the freeing thread collects them for the owner of the
 * last one's superblock, if that heap's lock is free (heap.c, ld_heap_help_owner). */
#define LD_HELP_EVERY 4096
void    ld_heap_help_owner(heap_t *self, sb_t *sb);
/* Frees b, a block of one of heap's superblocks other than a current one (batched). */
void    ld_heap_free_local(heap_t *heap, ld_block_t *b);
void    ld_options_changed(void);
int     ld_global_trim(void);
void    ld_heap_validate_all(int *violations);
void    ld_stats_merge(ld_stats_t *out, int64_t *in_use, int64_t *held);
/* Counts one event in the field at field_offset of the calling thread's counters (or, for a
 * thread without a heap, in a shared atomic set): for the cold paths only. */
void    ld_stat_count(heap_t *heap, size_t field_offset);
void    ld_init_if_needed(void);

/* Medium spans (heap.c): runs of whole superblocks carved from segments, for large objects
 * up to LD_MEDIUM_MAX_CHUNKS superblocks, so that they cost no mmap; given back, each of their
 * superblocks becomes an empty (purged) superblock of the global heap. */
#define LD_MEDIUM_MAX_CHUNKS 16
void   *ld_segment_take_span(size_t chunks);
void    ld_segment_give_span(void *base, size_t chunks);

/* ---- large.c ---- */
void   *ld_large_alloc(size_t size, size_t align, bool *zeroed);
void    ld_large_free(sb_t *span);
int     ld_large_trim(void);
void    ld_large_purge_expired(uint64_t now);
size_t  ld_large_bytes_in_use(void);
size_t  ld_large_bytes_cached(void);
void    ld_large_lock(void);
void    ld_large_unlock(void);

/* ---- report.c ---- */
void ld_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LD_NORETURN void ld_fatal_bad_free(const char *what, const void *p);

#pragma GCC visibility pop

#endif
