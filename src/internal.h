/* Internal types and functions of liblarder, shared by the files in src/.
 *
 * Vocabulary (Hoard, seed 004 §3), and the file that owns each:
 *   size class, superblock (sb_)   superblock.c  S bytes, S-aligned, blocks of one size class,
 *                                                owned by one heap at a time.
 *   heap (heap_)                   heap.c        one per thread; keeps u (bytes in use) and a
 *                                                (bytes held) per class, Hoard's threshold.
 *   global heap (global_)          global.c      Hoard's heap 0: superblocks given back by heaps
 *                                                and by exited threads.
 *   segment, chunk (segment_)      segment.c     large mappings cut into S-sized chunks; runs of
 *                                                chunks are superblocks or medium spans, and free
 *                                                runs are coalesced and purged by age.
 *   medium and large spans         large.c       objects above the largest size class: runs of
 *                                                chunks (medium) or mappings of their own (large),
 *                                                with a header laid out like a superblock's so that
 *                                                free finds it with the same mask.
 *   purge (purge_)                 purge.c       memory back to the OS by age: deadlines checked
 *                                                from slow paths, an optional background thread,
 *                                                malloc_trim.
 *   init, fork                     init.c        start-up, fork handlers, statistics at exit.
 *   os (ld_os_)                    os.c          the only calls to the OS.
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
/* A word only its owner thread writes, while other threads may read it (statistics, helpers):
 * the owner's update is a relaxed atomic store, the same instructions as a plain one on x86
 * and aarch64, so that the readers' relaxed loads are not a data race in C11 terms. */
#define LD_OWNER_ADD(lv, n) __atomic_store_n(&(lv), (lv) + (n), __ATOMIC_RELAXED)
#define LD_OWNER_SET(lv, v) __atomic_store_n(&(lv), (v), __ATOMIC_RELAXED)

/* ---- request limits: checked once, where a size enters (alloc.c) ----
 * No object is larger than PTRDIFF_MAX, glibc's bound (malloc.c, checked_request2size), so the
 * difference of two pointers into one block always fits a ptrdiff_t; no alignment is above
 * 2^62. With both, every sum the allocator forms from a request (a header offset + the size +
 * the alignment, rounded up to a page or a chunk) stays below SIZE_MAX: the functions behind
 * the entry points (large.c, the heaps) take that as given and do not check again. A request
 * beyond either limit is NULL with errno ENOMEM, and realloc leaves the old block as it was. */
#define LD_REQUEST_MAX ((size_t)PTRDIFF_MAX)
#define LD_ALIGN_MAX   ((size_t)1 << 62)
static inline bool ld_request_ok(size_t size, size_t align) { return size <= LD_REQUEST_MAX && align <= LD_ALIGN_MAX; }

/* ---- size classes (superblock.c) ----
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
extern int64_t  ld_class_capacity_bytes[LD_CLASS_COUNT + 1];  /* bytes of blocks per superblock */

static inline unsigned ld_size_class(size_t size) { return ld_class_of_granule[(size + 15) >> 4]; }

/* ---- blocks and superblocks ---- */
extern size_t ld_sb_size;          /* S */
typedef struct ld_block_s {
  struct ld_block_s *next;
  uintptr_t tag;          /* ld_free_key ^ address while free: catches double frees cheaply */
} ld_block_t;

extern uintptr_t ld_free_key;

enum { LD_KIND_SMALL = 1, LD_KIND_LARGE = 2, LD_KIND_LARGE_CACHED = 3, LD_KIND_MEDIUM = 4, LD_KIND_FREED = 5 };

/* Fullness groups (Hoard §3.1), with one boundary at Hoard's (1-f) mark so that a superblock
 * that may be given back is always at the head of group 0, 1 or 2 (no search):
 *   0 empty; 1, 2 at most (1-f) full (halves); 3, 4 above (1-f) (halves); 5 full. */
#define LD_GROUP_COUNT 6
#define LD_GROUP_FULL  5
#define LD_GROUP_RELEASABLE_MAX 2

#define LD_SB_MAGIC 0x1a7de75bu

/* The remote free list head carries one flag in its low bit (blocks are 16-byte aligned):
 * set while the superblock waits on its owner's pending list. A freer that sets it (the first
 * remote free since the owner last looked) puts the superblock on that list, so the owner
 * finds superblocks with frees to collect without scanning (heap.c, heap_process_pending). */
#define LD_REMOTE_ANNOUNCED ((uintptr_t)1)

struct heap_s;
struct segment_s;

typedef struct sb_s {
  /* first cache line: set when the superblock is formatted, then only read; remote freers
   * read it, so nothing the owner writes often may live here (false sharing, Hoard §3.3) */
  uint32_t magic;
  uint8_t size_class, kind, group, purged;
  uint32_t block_size;
  uint32_t capacity;
  uint64_t reciprocal;         /* ceil(2^40 / block_size): block index without a division */
  char *data;                  /* first block (spans: the user pointer) */
  _Atomic(struct heap_s *) owner;
  void *map_base;              /* large span: the mapping */
  size_t map_bytes;            /* large span: its length; medium span: bytes of its chunks */
  size_t usable;               /* spans: bytes usable from data */
  /* second cache line: the owner's (or, for spans, the cache's) */
  _Alignas(LD_CACHE_LINE) ld_block_t *free_list; /* blocks to allocate from (heap lock, or current) */
  ld_block_t *local_free;      /* the owner's frees while not current: no lock, no atomic */
  int32_t used;                /* blocks handed out and not yet collected back */
  int32_t local_count;         /* blocks on local_free (written by the owner only) */
  int32_t floor;               /* current: Hoard's release mark; else unused */
  uint8_t in_local_dirty;      /* listed in its owner's local_dirty (owner only) */
  char *bump;                  /* blocks below this have been carved; above, untouched */
  struct sb_s *next, *prev;    /* links in a fullness group, a global list, the large cache */
  ld_block_t *local_tail;      /* the first block pushed on local_free: splicing is O(1) */
  /* third cache line: other threads' frees (CAS push), taken by the owner with an exchange */
  _Alignas(LD_CACHE_LINE) _Atomic(uintptr_t) remote; /* ld_block_t * | LD_REMOTE_ANNOUNCED */
  struct sb_s *pending_next;   /* link on the owner's pending list, written by the announcer */
  uint64_t idle_since_ns;      /* large cache: when it was freed */
} sb_t;

_Static_assert(sizeof(sb_t) <= LD_SB_HEADER, "superblock header must fit before the first block");

/* Free blocks carry a tag derived from their address, on every list (local, remote, free), so
 * that a double free is caught at the second free, on every path. A live block's tag is 0. */
static inline uintptr_t ld_tag(const void *b) { return ld_free_key ^ (uintptr_t)b; }
static inline bool ld_block_is_free(const ld_block_t *b) { return b->tag == ld_tag(b); }

/* Free-list links. In the hardened build (-DLARDER_HARDENED=ON) a link is stored encoded with
 * a per-process secret and the address it is stored at (as glibc's safe-linking does), and
 * checked before it is followed: it must be NULL or a block of the same superblock. A
 * use-after-free write that forges a link then decodes to garbage and stops the program,
 * instead of steering malloc to an address of the attacker's choosing. In the default build
 * both functions are plain loads and stores. */
#ifdef LARDER_HARDENED
extern uintptr_t ld_link_secret;
LD_NORETURN void ld_fatal_corrupt_list(const void *sb, const void *block);
static inline void ld_set_next(ld_block_t *b, ld_block_t *next) {
  b->next = (ld_block_t *)((uintptr_t)next ^ ld_link_secret ^ ((uintptr_t)b >> 4));
}
static inline ld_block_t *ld_next(const ld_block_t *b) {
  ld_block_t *next = (ld_block_t *)((uintptr_t)b->next ^ ld_link_secret ^ ((uintptr_t)b >> 4));
  /* a link stays inside its superblock, past its header */
  if (LD_UNLIKELY(next && (((uintptr_t)next ^ (uintptr_t)b) >= ld_sb_size ||
                           ((uintptr_t)next & (ld_sb_size - 1)) < LD_SB_HEADER || ((uintptr_t)next & 15))))
    ld_fatal_corrupt_list((const void *)((uintptr_t)b & ~(uintptr_t)(ld_sb_size - 1)), b);
  return next;
}
#else
static inline void ld_set_next(ld_block_t *b, ld_block_t *next) { b->next = next; }
static inline ld_block_t *ld_next(const ld_block_t *b) { return b->next; }
#endif

static inline ld_block_t *ld_sb_pop(sb_t *sb) {
  ld_block_t *b = sb->free_list;
  ld_block_t *next = ld_next(b);
  sb->free_list = next;
  /* The next malloc reads next->next: in a large heap the block is often not cached, and
   * fetching it now hides the miss behind the caller's work. */
  __builtin_prefetch(next, 1);
  int32_t used = sb->used + 1;
  b->tag = 0;
  LD_OWNER_SET(sb->used, used);
  return b;
}

extern uintptr_t ld_sb_mask;       /* ~(S-1) */
extern size_t ld_small_max;        /* min(LD_SMALL_LIMIT, S/4) */
extern size_t ld_medium_max;       /* largest span carved from segments (large.c) */

/* The header of the superblock or span holding p. (p-1) rather than p lets a large span
 * aligned to S or more keep its header in the S-chunk just below the user pointer. */
static inline sb_t *ld_sb_of(const void *p) { return (sb_t *)(((uintptr_t)p - 1) & ld_sb_mask); }

/* superblock.c */
void ld_classes_init(void);
void ld_sb_format(sb_t *sb, unsigned cls);
int  ld_sb_carve(sb_t *sb);
/* Takes the blocks other threads freed into sb onto its free list; returns how many. With
 * clear_announce the announced flag is cleared too: only the one who took sb off a pending
 * list may do that, so a superblock is never on a pending list twice. */
int  ld_sb_collect(sb_t *sb, bool clear_announce);
/* Moves the owner's local frees onto the free list; returns how many. */
int  ld_sb_collect_local(sb_t *sb);
/* Pushes b on sb's remote list; true when this free announced sb (the caller then puts it
 * on its owner's pending list). */
bool ld_sb_push_remote(sb_t *sb, ld_block_t *b);
bool ld_sb_is_announced(const sb_t *sb);
void ld_sb_validate(const sb_t *sb, const struct heap_s *owner, int *violations);

/* ---- statistics, per heap, merged on demand (stats.c) ---- */
typedef struct ld_stats_s {
  size_t mallocs, frees, remote_frees, reallocs;
  size_t superblocks_to_global, superblocks_from_global;
  size_t large_allocs, large_cache_hits, medium_allocs;
  size_t refills, superblocks_examined, free_lock_acquisitions;
} ld_stats_t;

#ifdef LARDER_STATS
#define LD_STAT_INC(heap, field) LD_OWNER_ADD((heap)->stats.field, 1)
#define LD_STAT_ADD(heap, field, n) LD_OWNER_ADD((heap)->stats.field, (n))
#else
#define LD_STAT_INC(heap, field) ((void)0)
#define LD_STAT_ADD(heap, field, n) ((void)0)
#endif

/* ---- heaps (heap.c) ---- */
/* Hoard's u and a are kept per size class, as its proof bounds them (seed 004 §4.1): a heap
 * takes a superblock of class c only when all its class-c superblocks are full, so taking one
 * keeps the invariant for K >= 1, which per-heap sums would not.
 * u is kept in two parts so that the fast paths write no heap counter: the current
 * superblock's used blocks, and u_other, the bytes in use in the class's other superblocks,
 * which only changes under the heap's lock. The current superblock's floor is set so that a
 * free taking u below the release threshold leaves the fast path. */
#define LD_BOOST_MAX 16   /* hysteresis: extra superblocks of slack a class may earn */
#define LD_LOCAL_DIRTY_MAX 256 /* superblocks with local frees a heap remembers */
#define LD_CURRENT_SLOTS 128
static inline unsigned ld_current_slot(const void *sb) {
  return (unsigned)(((uintptr_t)sb * 0x9E3779B97F4A7C15ull) >> 57);
}

typedef struct heap_s {
  sb_t *current[LD_CLASS_COUNT + 1];   /* the superblock each class allocates from */
  int64_t u_other[LD_CLASS_COUNT + 1]; /* bytes in use outside the current superblock */
  int64_t a[LD_CLASS_COUNT + 1];       /* bytes held per class (Hoard's a_i) */
  int64_t u_release[LD_CLASS_COUNT + 1]; /* give a superblock of class c back when u[c] < this */
  uint8_t boost[LD_CLASS_COUNT + 1];   /* extra K earned by ping-pong (hysteresis, heap.c) */
  uint64_t last_release_ns[LD_CLASS_COUNT + 1];
  uint64_t last_take_ns[LD_CLASS_COUNT + 1];
  unsigned options_epoch;
  sb_t *groups[LD_CLASS_COUNT][LD_GROUP_COUNT];
  size_t superblocks_held;
  /* Superblocks into which the owner freed while they were not current (owner only, no lock).
   * An entry may be stale (the superblock was given away since): it is checked when used. */
  sb_t *local_dirty[LD_LOCAL_DIRTY_MAX];
  unsigned local_dirty_count;
  uint64_t last_refill_ns;             /* coarse clock at the last refill: is the heap idle? */
  /* The current superblocks by address hash, each as its address + 1: free's fast path finds
   * whether a pointer is in one of them without reading any header (a pointer larder never
   * handed out is checked against the ownership map first: addrmap.h). A collision only sends
   * a free to the slower path. */
  uintptr_t current_tag[LD_CURRENT_SLOTS];
  ld_stats_t stats;
  unsigned remote_since_help;
  /* Superblocks with frees waiting (announced), pushed by any thread with a CAS. Its own
   * cache line: remote freers write it, the owner reads it on every refill. */
  _Alignas(LD_CACHE_LINE) _Atomic(sb_t *) pending;
  _Atomic unsigned pending_count;      /* announcements since the list was last taken */
  /* Guards everything but the current superblocks' free lists: taken by the owner in its slow
   * paths, and by another thread that collects an idle heap's frees. */
  _Alignas(LD_CACHE_LINE) pthread_mutex_t lock;
  struct heap_s *next_heap;            /* all heaps, live and abandoned */
  int live;                            /* a thread uses it */
  int orphan_tid;                      /* made after its thread's exit hook ran: that thread's id */
  bool is_global;                      /* the global heap's owner token */
} heap_t;

extern heap_t ld_heap_empty;          /* every thread starts here; its classes have no blocks */
extern sb_t ld_sb_none;               /* the current superblock of a class that has none */
extern __thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec")));

heap_t *ld_heap_for_thread(void);                  /* makes the calling thread's heap */
void   *ld_heap_refill(heap_t *heap, unsigned cls); /* a block of class cls, or NULL (ENOMEM) */
void    ld_heap_free_slow(heap_t *heap, unsigned cls); /* Hoard's release after a local free */
/* Frees b into sb, a superblock that is not the calling thread's current one: a CAS on its
 * remote list, and the first such free puts sb on its owner's pending list. Never a lock. */
void    ld_heap_free_other(heap_t *self, sb_t *sb, ld_block_t *b);
void    ld_heap_announce(sb_t *sb);
/* The owner's free into one of its superblocks that is not current took local_count to n:
 * the first local free (remember sb) or the last block (sb is empty: announce it). */
void    ld_heap_free_local_slow(heap_t *heap, sb_t *sb, int32_t n);
/* Maintenance of one heap by any thread (purge.c): collects its pending frees and gives its
 * empty superblocks to the global heap. mine: the caller owns it. Returns false when work is
 * left for a later run (the heap's lock was busy, or it is not idle yet). */
bool    ld_heap_tidy(heap_t *heap, bool mine, bool all, uint64_t now);
void    ld_heap_validate(heap_t *heap, int *violations);
/* The calling thread's own pending frees, collected (statistics: u counts them as freed). */
void    ld_heap_collect_pending(heap_t *heap);
heap_t *ld_heaps_first(void);
void    ld_heaps_lock_all(void);
void    ld_heaps_unlock_all(bool reinit);
size_t  ld_heaps_live_count(void);
void    ld_heaps_stats(ld_stats_t *out, int64_t *in_use, int64_t *held);
void    ld_stats_add(ld_stats_t *dst, const ld_stats_t *src);
/* Counts one event in the field at field_offset of the calling thread's counters (or, for a
 * thread without a heap, in a shared atomic set): for the cold paths only. */
void    ld_stat_count(heap_t *heap, size_t field_offset);

/* ---- the global heap (global.c), Hoard's heap 0 ---- */
extern heap_t ld_global_heap;  /* the owner token of superblocks the global heap holds */
void    ld_global_lock(void);
void    ld_global_unlock(void);
/* A superblock of class cls for heap (from the global heap's lists, else a new one from the
 * segments), or NULL when the OS has no memory. */
sb_t   *ld_global_take(heap_t *heap, unsigned cls);
/* Gives sb (detached from its heap, remote frees collected) to the global heap. Global lock
 * held. Empty superblocks go straight back to the segments. */
void    ld_global_put_locked(sb_t *sb);
void    ld_global_tidy(void);   /* collects announced frees of superblocks it holds */
void    ld_global_validate(int *violations);
void    ld_global_stats(int64_t *in_use, int64_t *held);
void    ld_global_reinit_lock(void);

/* ---- segments (segment.c): runs of S-sized chunks ---- */
/* A run of `chunks` chunks, S-aligned, or NULL (errno ENOMEM). *clean: every page of it is
 * zero (fresh or purged). */
void   *ld_segment_alloc(size_t chunks, bool *clean);
void    ld_segment_free(void *run, size_t chunks);
/* Grows the run at `run` from `chunks` to `new_chunks` in place when the chunks after it are
 * free; returns false otherwise. Shrinking always succeeds. */
bool    ld_segment_resize(void *run, size_t chunks, size_t new_chunks);
/* Purges free runs idle for the purge delay (all: every free run) and unmaps segments that
 * are wholly free. Returns the bytes given back. */
size_t  ld_segment_purge(uint64_t now, bool all);
uint64_t ld_segment_next_expiry(void); /* when the oldest dirty run expires; 0: none */
void    ld_segment_validate(int *violations);
void    ld_segment_lock(void);
void    ld_segment_unlock(bool reinit);
typedef struct ld_segment_stats_s {
  size_t segments, bytes_free_dirty, bytes_free_clean, bytes_purged, bytes_refaulted;
} ld_segment_stats_t;
void    ld_segment_stats(ld_segment_stats_t *out);

/* ---- medium and large spans (large.c) ----
 * Sizes and alignments come checked (ld_request_ok). */
/* *dirty: how many bytes from the returned pointer may hold old data (0: the block reads as
 * zero); calloc clears those only. */
void   *ld_large_alloc(size_t size, size_t align, size_t *dirty);
void    ld_large_free(sb_t *span);
/* Resizes a span in place (medium: neighbouring chunks; large: mremap); NULL if it cannot. */
void   *ld_large_realloc_in_place(sb_t *span, size_t size);
/* A large span moved to a bigger mapping without copying (mremap); NULL if it cannot. */
void   *ld_large_realloc_move(sb_t *span, size_t size);
size_t  ld_large_purge(uint64_t now, bool all);
uint64_t ld_large_next_expiry(void);
size_t  ld_large_bytes_in_use(void);
/* Large spans in use now, and the most in use at once, in spans and in bytes (malloc_stats). */
void    ld_large_peaks(size_t *spans_now, size_t *spans_peak, size_t *bytes_peak);
size_t  ld_large_bytes_cached(void);
size_t  ld_medium_bytes_in_use(void);
void    ld_large_lock(void);
void    ld_large_unlock(bool reinit);

/* ---- purge.c ---- */
/* The deadline when the next purge is due; slow paths call ld_purge_check with the clock
 * they have read. */
extern _Atomic uint64_t ld_purge_deadline_ns;
void    ld_purge_run(uint64_t now);
static inline void ld_purge_check(uint64_t now) {
  if (LD_UNLIKELY(now >= atomic_load_explicit(&ld_purge_deadline_ns, memory_order_relaxed))) ld_purge_run(now);
}
/* Free memory appeared: lowers the deadline to when it expires. Takes no lock and runs
 * nothing, so it may be called with any lock held; ld_purge_check is called with none. */
void    ld_purge_note_free_memory(uint64_t now);
void    ld_purge_thread_start_if_enabled(void);
void    ld_purge_after_fork_child(void);
bool    ld_purge_thread_running(void);
int     ld_purge_trim(void);
typedef struct ld_purge_stats_s {
  size_t thread_runs, thread_bytes;
} ld_purge_stats_t;
void    ld_purge_stats(ld_purge_stats_t *out);

/* ---- init.c ---- */
void    ld_init_if_needed(void);
void    ld_options_changed(void);
extern _Atomic unsigned ld_options_epoch;
void    ld_debug_validate_maybe(heap_t *heap);  /* LARDER_DEBUG: at a bounded rate */
extern _Atomic size_t ld_validations;

/* ---- stats.c ---- */
/* malloc_stats: glibc's lines with larder's figures, then larder's table. */
void    ld_stats_print_glibc_shape(int fd);

/* ---- report.c ---- */
void ld_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LD_NORETURN void ld_fatal_bad_free(const char *what, const void *p);

#pragma GCC visibility pop

#endif
