/* Internal types and functions of liblarder, shared by the files in src/.
 *
 * Vocabulary (Hoard, seed 004 §3), and the file that owns each, from the top floor down
 * (src/floors.txt; a file calls only files on its own floor or below, and maintenance is
 * entered only from above it):
 *   fast paths, slow paths        alloc.c       malloc and free (top of the file), the rest of
 *                                               the interface
 *   maintenance (ld_maintain_)    maintain.c    start-up, thread start and exit, the purge runs
 *                                               and the purge thread, fork, statistics at exit,
 *                                               debug validation, option changes
 *   front end (ld_cache_)         cache.c       each thread's caches of free blocks per size
 *                                               class and its buffer of frees for other heaps,
 *                                               fed and drained in batches
 *   heap (heap_)                  heap.c        one per thread; the superblocks it owns, u and a
 *                                               per class, Hoard's threshold
 *   global heap (global_)         global.c      Hoard's heap 0: superblocks given back by heaps
 *                                               and by exited threads
 *   size class, superblock (sb_)  superblock.c  S bytes, S-aligned, blocks of one size class,
 *                                               owned by one heap at a time
 *   medium and large spans        large.c       objects above the largest size class
 *   segment, chunk (segment_)     segment.c     large mappings cut into S-sized chunks
 *   os (ld_os_)                   os.c          the only calls to the OS
 *
 * Lower files never call maintenance: they record that work is due (ld_due_note below: a
 * deadline) and return; the slow paths in alloc.c and the purge thread run it.
 */
#ifndef LD_INTERNAL_H
#define LD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy: a slow free's mark */

#include "os.h" /* ld_lock_t */

#include "options.h"

/* Everything declared below is internal to the library, not exported from liblarder.so. */
#pragma GCC visibility push(hidden)

#define LD_LIKELY(x)   __builtin_expect(!!(x), 1)
#define LD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LD_NOINLINE    __attribute__((noinline))
/* The malloc and free fast paths start a cache line, whatever the code before them, so that
 * their few instructions sit in as few lines and decoded-instruction windows as they can (churn
 * of 10,000 live 256-byte blocks ran 2-3% slower when free started 48 bytes into a line):
 * larder_malloc and larder_free (alloc.c), and wrappers.c's malloc and free, which inline them. */
#define LD_ALIGNED_HOT __attribute__((aligned(LD_CACHE_LINE)))
#define LD_NORETURN    __attribute__((noreturn))
#define LD_CACHE_LINE  64
/* A word only its owner thread writes, while other threads may read it (statistics, helpers):
 * the owner's update is a relaxed atomic store, the same instructions as a plain one on x86
 * and aarch64, so that the readers' relaxed loads are not a data race in C11 terms. */
#define LD_OWNER_ADD(lv, n) __atomic_store_n(&(lv), (lv) + (n), __ATOMIC_RELAXED)
#define LD_OWNER_SET(lv, v) __atomic_store_n(&(lv), (v), __ATOMIC_RELAXED)
#define LD_READ(lv)         __atomic_load_n(&(lv), __ATOMIC_RELAXED)
/* A word the purge may store (relaxed) while the owner's fast path reads it: bin_of and a bin's
 * span, which a drain turns away (cache.c, ld_cache_drain_idle). The fast paths read them with
 * plain loads, which the compiler folds into their compares (as relaxed atomic loads, a
 * malloc(32)+free pair took 94 instructions instead of 92); the ThreadSanitizer build reads
 * them atomically, so that it sees no race where x86 has none. */
#ifdef __SANITIZE_THREAD__
#define LD_FAST_READ(lv) LD_READ(lv)
#else
#define LD_FAST_READ(lv) (lv)
#endif

/* A counter only its owner thread increments, read by others through LD_READ: one
 * read-modify-write instruction on x86-64, which the compiler sees as opaque (so a sanitizer
 * does not call the readers' loads a race); elsewhere a relaxed load and store. */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define LD_OWNER_INC(lv) __asm__("incq %0" : "+m"(lv))
#define LD_OWNER_INC32(lv) __asm__("incl %0" : "+m"(lv))
#define LD_OWNER_DEC32(lv) __asm__("decl %0" : "+m"(lv))
#else
#define LD_OWNER_INC(lv) LD_OWNER_ADD(lv, 1)
#define LD_OWNER_INC32(lv) LD_OWNER_ADD(lv, 1)
#define LD_OWNER_DEC32(lv) LD_OWNER_ADD(lv, -1)
#endif

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
 * b = 1.2 does (seed 004 §5), a little tighter. These 64 fixed classes come first; up to
 * LD_CLASS_LEARNED_MAX more are learned at run time, each the exact size of a request that
 * dominates a class's refills where its blocks cost less memory (superblock.c,
 * ld_class_learn). A class's index thus orders the fixed classes by size, not the learned. */
#define LD_CLASS_FIXED     64
#define LD_CLASS_LEARNED_MAX 8
#define LD_CLASS_COUNT     (LD_CLASS_FIXED + LD_CLASS_LEARNED_MAX)
#define LD_CLASS_LARGE     LD_CLASS_COUNT      /* sentinel class: "not a small size" */
#define LD_SMALL_LIMIT     16384               /* largest size class */
#define LD_MIN_ALIGN       16
#define LD_SB_HEADER       256                 /* first block never starts before this offset */

extern uint8_t  ld_class_of_granule[LD_SMALL_LIMIT / 16 + 1]; /* (size+15)/16 -> class */
extern uint32_t ld_class_size[LD_CLASS_COUNT];
extern int64_t  ld_class_capacity_bytes[LD_CLASS_COUNT + 1];  /* bytes of blocks per superblock */
extern uint32_t ld_class_capacity[LD_CLASS_COUNT];            /* blocks per superblock */
/* Where a class's blocks lie in any of its superblocks, as a superblock's header and a bin
 * keep it (first: the offset of the first block): an offset o from the superblock starts a
 * block iff (o - first) < span and (o - first) * divisor_magic < divisor_magic (a multiply,
 * no division). */
typedef struct ld_class_shape_s {
  uint32_t first, span;   /* span: capacity x block size (0 for a class too big for S) */
  uint64_t divisor_magic; /* ceil(2^64 / block size) */
} ld_class_shape_t;
extern ld_class_shape_t ld_class_shape[LD_CLASS_COUNT];
static inline bool ld_shape_block_start(const ld_class_shape_t *shape, uintptr_t offset) {
  uint32_t at = (uint32_t)offset - shape->first;
  return at < shape->span && (uint64_t)at * shape->divisor_magic < shape->divisor_magic;
}

/* A learned class is published by storing its granules' entries (release) after its sizes and
 * shapes: a reader that finds it there finds them set up. */
static inline unsigned ld_granule_class(size_t g) { return __atomic_load_n(&ld_class_of_granule[g], __ATOMIC_ACQUIRE); }
static inline unsigned ld_size_class(size_t size) { return ld_granule_class((size + 15) >> 4); }
/* Classes learned so far (superblock.c); a heap whose bin_of was set for fewer sets it again at
 * its next refill (alloc.c, malloc_class; cache.c, ld_cache_classes_sync). */
extern unsigned ld_classes_learned;
/* Learns the class of exactly granule g * 16 bytes, if its blocks cost at least 1/17 less memory
 * than those of the class that serves g now (superblock.c, class_footprint), and a place is
 * left. Any thread, any time. */
void ld_class_learn(size_t g);
/* 1 for a granule whose class ld_class_learn found would not gain enough: not asked again. */
extern uint8_t ld_granule_no_gain[LD_SMALL_LIMIT / 16 + 1];

/* A set of size classes, a bit per class. Arithmetic on one 128-bit integer; a set other
 * threads read is kept as two words, each read and written with a relaxed atomic (one 16-byte
 * atomic would need libatomic's lock). */
_Static_assert(LD_CLASS_COUNT <= 128, "a set of classes is 128 bits");
__extension__ typedef unsigned __int128 ld_class_set_t;
#define LD_CLASS_BIT(c) ((ld_class_set_t)1 << (c))
static inline unsigned ld_class_set_first(ld_class_set_t set) {
  uint64_t low = (uint64_t)set;
  return low ? (unsigned)__builtin_ctzll(low) : 64 + (unsigned)__builtin_ctzll((uint64_t)(set >> 64));
}
static inline bool ld_class_set_has(ld_class_set_t set, unsigned c) { return (set >> c) & 1; }
typedef struct ld_class_words_s { uint64_t word[2]; } ld_class_words_t;
static inline ld_class_set_t ld_class_words_read(const ld_class_words_t *w) {
  return (ld_class_set_t)LD_READ(w->word[1]) << 64 | LD_READ(w->word[0]);
}
static inline void ld_class_words_set(ld_class_words_t *w, ld_class_set_t set) {
  LD_OWNER_SET(w->word[0], (uint64_t)set);
  LD_OWNER_SET(w->word[1], (uint64_t)(set >> 64));
}
/* [k][c]: the first class from c up whose size is a multiple of 2^k (an aligned request's
 * class: superblocks place such a class's first block at a multiple too), or LD_CLASS_LARGE
 * when no small class is; c may be LD_CLASS_LARGE itself. Alignments up to LD_SMALL_LIMIT. */
#define LD_ALIGN_CLASS_SHIFTS 15
extern uint8_t ld_class_aligned[LD_ALIGN_CLASS_SHIFTS][LD_CLASS_COUNT + 1];
_Static_assert((1u << (LD_ALIGN_CLASS_SHIFTS - 1)) == LD_SMALL_LIMIT, "a row for every small alignment");

/* ---- blocks and superblocks ---- */
extern size_t ld_sb_size;          /* S */
extern unsigned ld_sb_shift;       /* log2(S) */
extern unsigned ld_dormant_shift;  /* log2 of a dormant unit: a page, or S / 32 if larger (sb_t, dormant) */
typedef struct ld_block_s {
  struct ld_block_s *next;
  uintptr_t tag;          /* ld_tag(block) while free: catches double frees cheaply */
} ld_block_t;

extern uintptr_t ld_free_key;

/* LD_KIND_RESIZING: a medium or large span that realloc is resizing or moving, claimed with a
 * CAS of its kind (alloc.c, realloc_block): a free of it meanwhile is a double free, and fails
 * its own CAS instead of giving back chunks whose count is changing. */
enum { LD_KIND_SMALL = 1, LD_KIND_LARGE = 2, LD_KIND_LARGE_CACHED = 3, LD_KIND_MEDIUM = 4, LD_KIND_FREED = 5, LD_KIND_FIT = 6,
       LD_KIND_RESIZING = 7 };
/* Whether a span's kind says its block is not the program's to free: freed (kept, cached,
 * given back) or claimed by a realloc; a free of it is a double free (the reports' wording). */
static inline bool ld_kind_not_live(unsigned kind) {
  return kind == LD_KIND_LARGE_CACHED || kind == LD_KIND_FREED || kind == LD_KIND_RESIZING;
}

/* Fullness groups (Hoard §3.1), with one boundary at Hoard's (1-f) mark so that a superblock
 * that may be given back is always at the head of group 0, 1 or 2 (no search):
 *   0 empty; 1, 2 at most (1-f) full (halves); 3, 4 above (1-f) (halves); 5 full. */
#define LD_GROUP_COUNT 6
#define LD_GROUP_FULL  5
#define LD_GROUP_RELEASABLE_MAX 2
#define LD_GROUP_NONE  7   /* not in a group: a heap's current superblock, or in transit */
#define LD_GROUP_EMPTY 6   /* the global heap's: empty, waiting for its class (global.c) */
#define LD_GROUP_DORMANT 8 /* the global heap's: some of its pages given back (global.c) */

#define LD_SB_MAGIC 0x1a7de75bu

/* The remote list head of a superblock, one 64-bit word so that one CAS pushes a whole batch
 * of frees and says how many it holds (issue "front end": the owner learns the count without
 * walking blocks another core wrote). Batches go to the owner's inbox (ld_message_t) first;
 * this list takes those that find it full, and the owner's forwarding of a message whose
 * superblock changed hands:
 *   bit 0          announced: the superblock waits on its owner's pending list;
 *   bits 1..24     blocks on the list;
 *   bit 25         watched: the superblock is its owner's current one for its class, which the
 *                  owner's next fills reach anyway, so a batch pushed onto it announces
 *                  nothing (no second CAS, no pending list); the owner counts what came in
 *                  when it stops watching, under the same atomic word (ld_sb_unwatch). Set
 *                  by a fill that will leave it blocks (heap.c, ld_heap_fill; why: heap_set_current);
 *   bits 26..63    the first block's offset in the superblock (0: the list is empty; offset 0
 *                  is the header, never a block). */
#define LD_REMOTE_ANNOUNCED ((uint64_t)1)
#define LD_REMOTE_COUNT_SHIFT 1
#define LD_REMOTE_COUNT_MASK ((uint64_t)0xffffff)
#define LD_REMOTE_WATCHED ((uint64_t)1 << 25)
#define LD_REMOTE_HEAD_SHIFT 26

struct heap_s;
struct ld_message_s;

typedef struct sb_s {
  /* first cache line: set when the superblock is formatted, then only read; remote freers
   * read it, so nothing the owner writes often may live here (false sharing, Hoard §3.3) */
  uint32_t magic;
  uint8_t size_class, kind, purged;
  uint32_t block_size;
  uint32_t capacity;
  uint32_t span;               /* capacity * block_size: where blocks end, from data */
  /* Units (ld_dormant_shift) of a superblock the global heap holds whose pages were given back
   * because every block on them was free (global.c, "Free pages of partly used superblocks"):
   * a block that starts on one is free, reads as zero, and is on no list, until a take wakes
   * the superblock (ld_sb_wake). Set under the global lock before the pages go, cleared after
   * the tags are written again; read by every check of a free that is not the owner's
   * (ld_check_small_free). */
  uint32_t dormant;
  uint64_t divisor_magic;      /* UINT64_MAX / block_size + 1: divisibility without a division */
  char *data;                  /* first block (spans: the user pointer) */
  _Atomic(struct heap_s *) owner;
  size_t map_bytes;            /* large span: its mapping's length (the mapping starts at the
                                  header); medium span: bytes of its chunks */
  size_t usable;               /* spans: bytes usable from data */
  /* second cache line: the owner's, under its heap lock (spans: the cache's) */
  _Alignas(LD_CACHE_LINE) ld_block_t *free_list; /* free blocks, each tagged */
  int32_t used;                /* carved blocks not on free_list or inbox_list and not counted
                                  in remote_seen: handed out, in a thread's cache, or freed by
                                  another thread since the owner last looked */
  int32_t remote_seen;         /* blocks on the remote list already taken out of used */
  ld_block_t *inbox_list;      /* batches taken from the owner's inbox (ld_sb_deliver_message),
                                  chained as on the remote list, hints and all, so that the fill
                                  that reaches them prefetches each batch's blocks at once */
  int32_t inbox_count;         /* blocks on inbox_list */
  char *bump;                  /* blocks below this have been carved; above, untouched */
  uint8_t group;               /* LD_GROUP_*: changes as blocks come and go, so not on the first line */
  struct sb_s *next, *prev;    /* links in a fullness group, a global list, the large cache */
  /* third cache line: other threads' frees (CAS push of a batch), taken with an exchange */
  _Alignas(LD_CACHE_LINE) _Atomic(uint64_t) remote; /* see LD_REMOTE_* above */
  struct sb_s *pending_next;   /* link on the owner's pending list, written by the announcer */
  uint64_t idle_since_ns;      /* large cache: when it was freed; the global heap's: when it came
                                  (empty list: when it emptied) */
  int32_t dormant_blocks;      /* carved blocks that start on dormant units: free, listed nowhere */
  int32_t scanned_used;        /* used when the global heap last looked for free pages; -1: look */
} sb_t;

_Static_assert(sizeof(sb_t) <= LD_SB_HEADER, "superblock header must fit before the first block");
_Static_assert(offsetof(sb_t, usable) + sizeof(size_t) <= LD_CACHE_LINE, "what remote freers read stays on the first line");

/* Free blocks carry a tag wherever they wait (a thread's cache, a superblock's lists, a batch
 * of remote frees), so that a double free is caught at the second free, on every path. malloc
 * clears it. The tag is the process's key xor the block's address, not the key alone: freed
 * memory keeps its tags when it is reused uncleared (a medium span over an empty superblock's
 * chunk, whose first block starts where the span's block does), and a program copies such
 * bytes without writing them (realloc shrinking a medium block into a small one copies its
 * bytes 8-15; a struct copied with a field left unset). A tag of the key alone, copied to
 * another block, made that block's first free a "double free" (tests/alloc/stale_tag.c); a
 * tag copied from elsewhere names the wrong address. A live block's own bytes equal its tag
 * with odds of 2^-64. (key | 1, addresses 16-aligned: a tag is never 0.) */
static inline uintptr_t ld_tag(const void *b) { return ld_free_key ^ (uintptr_t)b; }
static inline bool ld_block_is_free(const ld_block_t *b) { return b->tag == ld_tag(b); }

/* A slow free's mark (alloc.c, free_deferring): the top two bytes of the tag word, written
 * alone (one store) so that the other six still tell whether the block was free when its free
 * came (a free tag's low 48 bits are the key's xor the address, which fits in them). The mark
 * is the key's top 16 bits inverted, which a free tag's (the key's: a user address is below
 * 2^48) never equals. Two bytes, not one: the program may write the word after the owner
 * hands the block out again, and a byte of its data would match a one-byte mark once in 256
 * processes (bad_free's race-owner-first, whose owner fills the block with 7s: about 1 run
 * in 100), two bytes once in 65,536. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LD_TAG_TOP_BYTES 0
#else
#define LD_TAG_TOP_BYTES 6
#endif
#define LD_MARK_FLIP ((uintptr_t)0xffff << 48) /* a mark's top 16 bits are the key's, flipped */
static inline uint16_t ld_ring_mark_bits(void) { return (uint16_t)~(ld_free_key >> 48); }
/* The marking heap's ring id (heap_t, ring_id) goes in the top two bytes of the block's link
 * word, so that an owner that finds the mark looks in that heap's ring alone (cache.c,
 * deferred_claim), not in every heap's. A link's top two bytes are 0 (larder's mappings lie
 * below 2^48) and ld_next ignores them: a block freed twice, still on a list of its owner's
 * when the second free marks it, keeps a link that leads where it did. */
#define LD_RING_IDS 65536
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LD_LINK_TOP_BYTES 0
#else
#define LD_LINK_TOP_BYTES 6
#endif
static inline void ld_ring_mark(ld_block_t *b, uint16_t ring_id) {
  uint16_t mark = ld_ring_mark_bits();
  memcpy((unsigned char *)&b->next + LD_LINK_TOP_BYTES, &ring_id, sizeof ring_id);
  /* after the block's slot in the ring and the id (cache.c, deferred_claim: an owner that sees
   * the mark finds the id, and the slot of the heap it names); on x86 an order the compiler
   * keeps, no instruction */
  atomic_thread_fence(memory_order_release);
  memcpy((unsigned char *)&b->tag + LD_TAG_TOP_BYTES, &mark, sizeof mark);
}
/* The ring id a marked block carries (read after its mark, with acquire order). */
static inline uint16_t ld_ring_mark_id(const ld_block_t *b) {
  uint16_t id;
  atomic_thread_fence(memory_order_acquire);
  memcpy(&id, (const unsigned char *)&b->next + LD_LINK_TOP_BYTES, sizeof id);
  return id;
}
/* Whether a marked block still carries its mark, over six bytes that are not its free tag's. */
static inline bool ld_ring_marked(const ld_block_t *b) {
  uintptr_t t = b->tag;
  return (uint16_t)(t >> 48) == ld_ring_mark_bits() && ((t ^ ld_tag(b)) << 16) != 0;
}

/* Whether a deferred free's word w lets it settle at once (the free fast path, alloc.c): not
 * its free tag (a double free) and not a slow free's mark (another thread frees the block
 * too, and the two must not both go on: cache.c, deferred_claim), in one compare: w xor the
 * free tag has 0x0000 in its top 16 bits for the free tag, 0xffff for a mark. A live block
 * whose own word has either (1 in 32,768 of random data; never 0x0000 or 0xffff: maintain.c)
 * takes the slow path, which lets it settle. */
static inline bool ld_tag_settles(uintptr_t w, uintptr_t tag) { return ((w ^ tag) >> 48) - 1 < 0xfffe; }
/* What a slow free leaving its ring writes over its mark (cache.c, slow_free_leaves): the mark
 * over the free tag's six low bytes, a word that says "another thread's free has this block"
 * to its owner (a deferred free of it is a double free: cache.c, deferred_claim), and that the
 * free's own later checks do not take for the free tag. */
static inline uintptr_t ld_ring_claimed_word(const void *b) { return ld_tag(b) ^ LD_MARK_FLIP; }

/* Asks for p's cache line in a state this core may write (x86's PREFETCHW; other CPUs: the
 * compiler's write prefetch): the owner prefetches the blocks of a batch of remote frees
 * (superblock.c), which malloc will write (the tag) once they are handed out. A prefetch never
 * faults, so it may be given any address. */
static inline void ld_prefetch_for_write(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

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
/* (the top two bytes may hold a slow free's ring id: ld_ring_mark) */
static inline ld_block_t *ld_next(const ld_block_t *b) { return (ld_block_t *)((uintptr_t)b->next & (((uintptr_t)1 << 48) - 1)); }
#endif

/* Blocks in a bin need no link. The hardened build seals them (the link word holds the
 * encoded NULL) and checks the seal and the tag when malloc hands a block out, so that a
 * use-after-free write into a cached block stops the program there. */
#ifdef LARDER_HARDENED
static inline void ld_bin_seal(ld_block_t *b) { ld_set_next(b, NULL); }
static inline void ld_bin_check(const ld_block_t *b) {
  if (ld_next(b) != NULL || b->tag != ld_tag(b))
    ld_fatal_corrupt_list((const void *)((uintptr_t)b & ~(uintptr_t)(ld_sb_size - 1)), b);
}
#else
static inline void ld_bin_seal(ld_block_t *b) { (void)b; }
static inline void ld_bin_check(const ld_block_t *b) { (void)b; }
#endif

extern uintptr_t ld_sb_mask;       /* ~(S-1) */
extern size_t ld_small_max;        /* min(LD_SMALL_LIMIT, S/4) */
extern size_t ld_medium_max;       /* largest span carved from segments (large.c) */

/* The header of the superblock or span holding p. (p-1) rather than p lets a large span
 * aligned to S or more keep its header in the S-chunk just below the user pointer. */
/* mask: ld_sb_mask, read once by a loop whose stores could alias it (heap.c) */
static inline sb_t *ld_sb_of_masked(const void *p, uintptr_t mask) { return (sb_t *)(((uintptr_t)p - 1) & mask); }
static inline sb_t *ld_sb_of(const void *p) { return ld_sb_of_masked(p, ld_sb_mask); }

/* True when p is the start of one of sb's blocks (whether carved yet is the owner's to say:
 * bump is the owner's). The offset from the first block, below capacity x size (p below the
 * first block wraps to above it), is a multiple of the size when offset x magic, modulo 2^64,
 * is below magic (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019:
 * exact for offsets and sizes below 2^32); the bins use the same test (ld_bin_t). */
static inline bool ld_sb_is_block_start(const sb_t *sb, const void *p);
/* The blocks carved so far: a multiply for the division (the same paper: exact below 2^32). */
static inline uint32_t ld_sb_carved(const sb_t *sb) {
  return (uint32_t)(((unsigned __int128)(uint64_t)(sb->bump - sb->data) * sb->divisor_magic) >> 64);
}
static inline bool ld_sb_is_block_start(const sb_t *sb, const void *p) {
  uint64_t offset = (uintptr_t)p - (uintptr_t)sb->data;
  return offset < sb->span && offset * sb->divisor_magic < sb->divisor_magic;
}

/* superblock.c */
void ld_classes_init(void);
void ld_sb_format(sb_t *sb, unsigned cls);
/* What a take counted, for the heap's statistics and accounting (ld_sb_take_blocks). */
typedef struct ld_take_counts_s {
  int32_t remote_accounted; /* remote-list blocks taken out of used here */
  uint64_t hinted;          /* blocks whose lines were prefetched from batch hints */
  uint64_t hint_taken;      /* of those, taken in whole batches from their hints, unread */
  bool short_of_room;       /* fewer than asked, with blocks left: the next batch would not fit */
  bool restarted;           /* every carved block was on the free list: carved again from the first */
} ld_take_counts_t;
/* Takes up to `want` free blocks of sb into out[]: its free list, then the batches taken from
 * the owner's inbox (whole batches from their hints where the hints hold, which may bring up
 * to `most`; else walked), then its remote list (taken whole with one exchange: it becomes the
 * free list, no walk), each prefetched from its hints as it becomes the free list, then
 * untouched blocks carved at the bump pointer (a page at a time); a superblock all of whose
 * carved blocks are on its free list is carved again from its first block instead (no walk).
 * Each block read is checked
 * (its tag, the list's length). Returns how many; used grows by that many. Owner. */
unsigned ld_sb_take_blocks(sb_t *sb, void **out, unsigned want, unsigned most, ld_take_counts_t *counts);
/* Puts a chain of n blocks of sb (head..tail, linked, tagged) back on its free list; used
 * shrinks by n. Owner, under its lock. */
static inline void ld_sb_put_chain(sb_t *sb, ld_block_t *head, ld_block_t *tail, int32_t n) {
  ld_set_next(tail, sb->free_list);
  sb->free_list = head;
  LD_OWNER_SET(sb->used, sb->used - n);
}
/* Free blocks sb can still give: its lists and its untouched blocks. */
static inline int32_t ld_sb_free_blocks(const sb_t *sb) { return (int32_t)sb->capacity - sb->used; }
/* The owner looks at sb's remote list without taking it: the blocks pushed since it last
 * looked leave used (returned: how many), and the announced flag is cleared, so that the next
 * batch announces sb again. Only the one who took sb off a pending list may call it with
 * clear_announce, so a superblock is never on a pending list twice. */
int  ld_sb_account_remote(sb_t *sb, bool clear_announce);
/* Pushes a batch (head..tail, n blocks of sb, linked and tagged) on sb's remote list with one
 * CAS; true when this push announced sb (the caller then calls ld_sb_announce). Unless it
 * announced sb, the caller must not read sb afterwards: the owner may have freed it. */
bool ld_sb_push_remote_batch(sb_t *sb, ld_block_t *head, ld_block_t *tail, uint32_t n);
/* The owner watches its current superblock sb (batches pushed onto it announce nothing), and
 * stops: unwatching counts the blocks pushed since the owner last looked (returned: how
 * many; used falls by that many), as ld_sb_account_remote does. Owner, under its lock. */
bool ld_sb_is_watched(const sb_t *sb);
void ld_sb_watch(sb_t *sb);
int  ld_sb_unwatch(sb_t *sb);
/* Puts sb on its owner's pending list (a CAS): the owner, or whoever tidies it, collects it. */
void ld_sb_announce(sb_t *sb);
/* owner's pending list, taken whole with one exchange (NULL: empty), for the owner to look at
 * under its lock (heap.c, global.c: a bounded part at a time, the rest kept in pending_taken). */
sb_t *ld_sb_pending_take(struct heap_s *owner);
bool ld_sb_is_announced(const sb_t *sb);
/* Sends k messages to owner's inbox (each a batch: its first block, its last's offset from
 * their superblock and its count, the blocks linked and tagged; seq is not read), as many as
 * the inbox has room for, with one CAS: returns how many (0: the inbox is full, nothing was
 * done). self: the sending thread's heap, which keeps the owner's head as last read (NULL:
 * none to keep). */
unsigned ld_inbox_push_many(struct heap_s *owner, const struct ld_message_s *messages, unsigned k, struct heap_s *self);
/* Takes the oldest published message of heap's inbox into *out; false: none (or the next one
 * is claimed and not yet written). The caller holds heap's lock. */
bool ld_inbox_take(struct heap_s *heap, struct ld_message_s *out);
/* The reader's part for a message it took from reader's inbox (reader: a heap or the global
 * heap, whose lock the caller holds). Its superblock, if reader owns it: the batch joins the
 * superblock's inbox_list and used falls by its count (a count larger than used means a block
 * was freed twice), for the caller to account. NULL: the slot a fork left empty, or a
 * superblock that changed hands after its freer read the owner, whose batch goes on by the
 * superblock's remote list, announced to its owner now (the path a full inbox takes). */
sb_t *ld_sb_deliver_message(struct heap_s *reader, const struct ld_message_s *m);
/* A fork child: slots that threads of the parent claimed and never wrote are published empty,
 * so that the child's reads go past them. */
void ld_inbox_after_fork(struct heap_s *heap);
/* The messages waiting (validation, statistics). */
uint32_t ld_inbox_waiting(const struct heap_s *heap);
void ld_sb_validate(const sb_t *sb, const struct heap_s *owner, int *violations);
/* The global heap's look for free pages in sb, a superblock it holds (global lock held): units
 * of sb's pages on which every carved block is free (on its lists, or dormant already) are
 * given back, and the blocks that start on them leave the lists and become dormant (sb_t,
 * dormant). Blocks on the remote list count as in use. Returns the bytes given back (0: none,
 * or a list that does not add up, which is left to the paths that take it to report). */
size_t ld_sb_give_back_free_pages(sb_t *sb);
#define LD_DORMANT_USED_MAX_INV 4 /* looked at only with at most 1/4 of its blocks in use */
/* sb is sparse enough to be looked at: the global heap's look, and an idle thread's heap giving
 * such superblocks to the global heap (heap.c, heap_give_empty_locked). */
static inline bool ld_sb_sparse(const sb_t *sb) { return (uint64_t)sb->used * LD_DORMANT_USED_MAX_INV <= sb->capacity; }
/* The dormant blocks of sb listed again (tagged, linked), its pages written back as it goes, for
 * a take (global lock held). */
void ld_sb_wake(sb_t *sb);
/* The dormant unit p lies on, and the bytes of `units` dormant units. */
static inline unsigned ld_sb_unit_of(const sb_t *sb, const void *p) {
  return (unsigned)(((uintptr_t)p - (uintptr_t)sb) >> ld_dormant_shift);
}
static inline size_t ld_dormant_units_bytes(uint32_t units) { return (size_t)__builtin_popcount(units) << ld_dormant_shift; }

/* ---- statistics, per heap, merged on demand (stats.c) ----
 * Only one counter is written on the fast paths (frees_cached); malloc's count is derived:
 * every small malloc pops a block that a refill or a free put in the cache, so
 * mallocs = blocks_refilled + frees_cached - blocks_flushed - blocks cached now. */
typedef struct ld_stats_s {
  size_t frees_cached;          /* frees of the thread's own blocks into its cache */
  size_t frees_other;           /* frees of medium and large spans */
  size_t remote_frees;          /* frees of blocks other heaps own (frees = the three) */
  size_t reallocs;
  size_t blocks_refilled, blocks_flushed; /* cache traffic, in batches */
  size_t superblocks_to_global, superblocks_from_global;
  size_t large_allocs, large_cache_hits, medium_allocs, medium_cache_hits;
  size_t medium_late_tails;     /* kept spans handed out with old pages to list late (cache.c) */
  size_t medium_cache_grows;    /* a thread's medium cache bound doubled (cache.c, medium_cache_missed) */
  size_t bin_growths;           /* a bin's limit grew past its first (cache.c, bin_grow) */
  size_t superblocks_restarted; /* refills that carved a wholly free superblock again (superblock.c) */
  size_t superblocks_watched;   /* current superblocks a fill watched (heap.c, ld_heap_fill) */
  size_t refills, flushes, superblocks_examined, free_lock_acquisitions;
  size_t remote_batches, remote_announcements; /* the remote free path's atomic operations */
  size_t remote_sends;          /* claims of slots in owners' inboxes: one CAS for up to LD_OUTBOX batches */
  size_t remote_inbox_full;     /* batches that found their owner's inbox full (the remote list) */
  size_t remote_sent_bytes;     /* freed by this thread into other heaps' superblocks */
  size_t remote_taken_bytes;    /* taken by this heap from its superblocks' remote lists */
  size_t parked_heaps_taken;    /* an exited thread's heap taken whole by a new thread */
  size_t orphan_heaps_taken;    /* a heap made after its thread's exit hook, taken by a new thread once that thread was gone */
  size_t parked_heaps_released; /* a parked heap's superblocks given to the global heap by the purge */
  size_t heaps_examined;        /* heaps looked at to find a new thread's (constant per thread) */
  size_t refill_pending_examined; /* messages and announced superblocks refills looked at (at most 64 of each per refill) */
  size_t remote_hinted;           /* remote-list blocks whose lines a refill prefetched from hints */
  size_t remote_hint_taken;       /* of those, taken in whole batches from their hints (superblock.c) */
  size_t remote_to_bins;          /* blocks of batches of one or two put in the owner's bins unread (heap.c) */
  size_t mark_rings_examined;     /* rings looked in for a marked block's other free (cache.c, deferred_claim) */
  size_t fit_allocs, fit_frees;   /* the fit tier's blocks handed out, and freed by their owner (others': remote_frees) */
  size_t fit_remote_bytes;        /* of those, bytes freed into other heaps' regions (fit.c) */
  size_t fit_remote_taken_bytes;  /* bytes other threads freed into this heap's regions, collected */
  size_t fit_regions_examined;    /* regions with other threads' frees looked at by collections (at most 4 per call) */
} ld_stats_t;

#ifdef LARDER_STATS
#define LD_STAT_INC(heap, field) LD_OWNER_INC((heap)->stats.field)
#define LD_STAT_ADD(heap, field, n) LD_OWNER_ADD((heap)->stats.field, (n))
#else
#define LD_STAT_INC(heap, field) ((void)0)
#define LD_STAT_ADD(heap, field, n) ((void)0)
#endif

/* ---- the front end: per-thread caches (cache.c) ----
 * A bin holds pointers to free blocks of one class that the thread owns: malloc pops one
 * without reading the block's neighbours or its superblock, and a free of an owned block
 * pushes one (alloc.c). A bin never holds more than `limit` (at most LD_BIN_SLOTS, and at
 * first about LD_BIN_BYTES of blocks; a bin that cycles grows, within the thread's
 * bin_growth_kb: cache.c, bin_grow); refills and flushes move half of that between the bin and
 * the superblocks, under the heap's lock, where Hoard's accounting is applied per batch. A bin is
 * 1 KiB; its first 40 hold what the free fast path needs on one cache line. 122 slots rather
 * than 58 (a 512-byte bin) halve the refills and flushes of the classes up to 128 bytes, whose
 * bins LD_BIN_BYTES does not bound first: threadtest (8 B) ran 130 instead of 115 instructions
 * per malloc and free with 58. */
#define LD_BIN_SLOTS 123
#define LD_BIN_BYTES 16384
/* A bin holds at least 3 blocks, whatever their size: with 1 or 2 (classes above 5,461 B) a
 * refill brought 1 block, which a free then kept as the deferred free (alloc.c), so the next
 * malloc of the class found its bin empty again and every malloc and free of such a size took
 * both slow paths: malloc(8000)+free 276 instructions against 75 at 4,000 B. */
#define LD_BIN_LEAST 3
#define LD_BIN_FULL ((void *)1) /* slots[limit]: where a free's push stops (no limit load) */
typedef struct ld_bin_s {
  uint32_t count;            /* blocks in slots[0, count), newest last; slots[count] keeps
                                the block popped last, if no push came since (alloc.c,
                                larder_free), and no slot is NULL once the bin is set up */
  uint16_t limit;            /* at most LD_BIN_SLOTS - 1; slots[limit] holds LD_BIN_FULL. The
                                class's first limit (about LD_BIN_BYTES of blocks), or more
                                where the bin cycles (cache.c, bin_grow) */
  uint8_t refilled;          /* BIN_REFILLED: refilled since the thread's last trim (the bin is
                                in use); BIN_FLUSHED_LAST: its last slow event was a flush (or
                                a growth instead of one); BIN_CYCLED: it grew since the last
                                trim; BIN_TURNED: it turned (a flush after a refill, or the
                                reverse) since the last trim (cache.c, bin_grow) */
  uint8_t fill;              /* blocks the next refill brings: 4 at first, doubling up to
                                half the limit (a thread that uses a class little, or lives
                                briefly, does not carve blocks it never uses) */
  uint32_t first;            /* the class's first block offset in a superblock */
  uint32_t span;             /* capacity x block size: offsets past first + span are no block */
  uint64_t divisor_magic;    /* ceil(2^64 / block size): n is a multiple iff n*magic < magic */
  /* The blocks of the class's current superblock not carved yet: a free of one of them is a
   * free of a block never handed out (only the current superblock of a class is ever partly
   * carved: heap.c). Read by the free fast path, set by fills. */
  uintptr_t uncarved_start, uncarved_len;
  void *slots[LD_BIN_SLOTS];
} ld_bin_t;
_Static_assert(sizeof(ld_bin_t) == 1024, "a bin is 1 KiB, so its address is a shift");
/* p lies among the blocks of the class's current superblock not carved yet (a free of it is of
 * a block never handed out; no slot above the bin's top may name one: heap.c,
 * bin_scrub_uncarved). One compare: below uncarved_start wraps to above uncarved_len. */
static inline bool ld_bin_uncarved(const ld_bin_t *bin, const void *p) {
  return (uintptr_t)p - bin->uncarved_start < bin->uncarved_len;
}
/* A free the thread's fast path deferred (heap_t, deferred): the block and its bin. */
typedef struct ld_deferred_s {
  ld_block_t *block;
  ld_bin_t *bin;
} ld_deferred_t;
#define LD_DEFERRED 4 /* frees deferred (heap_t, deferred; ld_heap_deferred_is compares each) */

/* The superblocks a heap owns, each as its address | class << 7, in a table indexed by the
 * address in 64 KiB units (the default S; a bigger superblock fills one slot per 64 KiB, so a
 * block's own address finds it): the free fast path learns a block's owner and bin
 * from the heap alone, without reading any header (a pointer larder never handed out finds no
 * entry and goes to the slow path, which asks the ownership map first: addrmap.h). Indexing by
 * address, not by a hash, gives every superblock of a 1 GiB span a slot of its own (segments
 * are contiguous), and costs a shift and a mask; the table's pages become resident only where
 * the heap has superblocks. The bin's place << 7 (heap_t, bin_place: bins are laid out in the
 * order the heap meets their classes) is the bin's offset in the heap divided by 8, an x86
 * scaled index, and stays below the smallest S (16 KiB). Two superblocks may want one slot (a
 * heap spread over more than 1 GiB, or S = 16 or 32 KiB); the later one wins, and the other's
 * frees take the slow path, which finds the same answer from the header. */
#define LD_OWNED_BITS 14
#define LD_OWNED_SLOTS (1u << LD_OWNED_BITS)
#define LD_OWNED_CLASS_SHIFT 7
static inline uintptr_t ld_owned_slot(uintptr_t sb) { return (sb >> 16) & (LD_OWNED_SLOTS - 1); }

/* Frees of blocks other heaps own wait in a small buffer, one batch per superblock, and are
 * handed over with one CAS per batch (small ones of one owner: 16 to a CAS), as a message in
 * the owner's inbox (snmalloc's message
 * passing is the model; seed 002's
 * point: no free waits for a lock). A batch goes when it reaches LD_REMOTE_BATCH blocks or
 * LD_REMOTE_BATCH_BYTES, when its slot is wanted by another superblock, when the whole buffer
 * holds more than LD_REMOTE_PENDING_BYTES (then the next open batch round the buffer: cache.c),
 * at the thread's next maintenance, and at thread exit. A thread's buffer thus holds at most
 * LD_REMOTE_PENDING_BYTES plus one block, and its outboxes (small batches sent, waiting to go
 * with others to the same owner: cache.c) at most LD_OUTBOX_PENDING_BYTES plus one batch.
 * 1,024 slots (256 sets of 4; 160 KiB of the heap, its pages touched as slots are used): a
 * thread that frees into many superblocks at random
 * (churn-remote, 10^5 live blocks of 256 B each: 400 superblocks per owner) sent batches of
 * 1.5 blocks with 64 slots, 2.5 with 256 and a 256 KiB bound, 3.7 with 1,024 and 256 KiB, and
 * 4.6 with 1,024 and 512 KiB (1.14-1.16x the operations per CPU-second of 256 slots; 1 MiB:
 * 7.4 and 1.20-1.23x, at twice the blocks a thread may keep from their owners); a consumer of
 * remote-free's 16 B-1 KiB mix spent 0.70x the CPU per free with 256 slots that it spent with 64. */
#define LD_REMOTE_SLOTS 1024
/* A slow free marked as it entered the ring (its slot entry carries this bit): it must still
 * carry the mark as it leaves (cache.c, slow_free_leaves). */
#define LD_SLOW_FREE_TAGGED 0x8000u
_Static_assert(LD_REMOTE_SLOTS < LD_SLOW_FREE_TAGGED, "a slot number leaves the bit free");
#define LD_REMOTE_BATCH 64
#define LD_REMOTE_BATCH_BYTES 16384
#define LD_REMOTE_PENDING_BYTES 524288
_Static_assert(LD_REMOTE_SLOTS % 64 == 0, "remote_open: a bit per slot, 64 to a word");
typedef struct ld_remote_slot_s { /* its superblock: heap->remote_sb */
  ld_block_t *head, *tail;
  /* the superblock's owner and block size when the batch opened (its header's first line was
   * read then): the send reads neither from the header, whose line has long left this core by
   * then (churn-remote at 10^6 live blocks: 79% of the send's samples on that load) */
  struct heap_s *owner;
  uint32_t block_size;
  uint32_t count;
  uint16_t full;                     /* the count at which it goes: LD_REMOTE_BATCH blocks or
                                        LD_REMOTE_BATCH_BYTES, for its superblock's block size */
  uint8_t size_class;                /* its superblock's, for the block-start check of a free
                                        that will join it (alloc.c, free_deferring: the class
                                        from block_size was a table look and a bound check more) */
  uint16_t offsets[LD_REMOTE_BATCH]; /* the batch's blocks in the order appended, in 16-byte units */
} ld_remote_slot_t;
_Static_assert(LD_REMOTE_BATCH <= UINT16_MAX && LD_CLASS_COUNT <= UINT8_MAX, "full and size_class fit");

/* A batch's hint. The chain of a batch of remote frees runs through blocks the freeing core
 * wrote last: the owner that walks it waits for each line before it learns the next address
 * (issue 17: most of a remote free's cost). So the batch's first block also carries what its
 * freer knew: the batch's length, its last block and as many of the blocks after the first as
 * the block has room for (offsets from the superblock in 16-byte units; a longer batch goes on
 * in the first block listed: cache.c, batch_hint_write). The owner reads it
 * when it takes the remote list and prefetches those blocks all at once (superblock.c). On the
 * remote list the chain stays the truth: a hint is only used to prefetch, so a wrong one costs
 * time, never correctness. A batch from the inbox is taken whole from its hints, without
 * reading its other blocks (superblock.c, take_hinted), only when every hint block's check
 * (a keyed sum of what it lists) holds and every place listed is a block of the superblock;
 * else it is walked. Blocks of 16 bytes have no room; nor does the hardened build use hints
 * (its links are checked as they are followed, a hint's are not). */
typedef struct ld_batch_hint_s {
  ld_block_t *next;
  uintptr_t tag;
  uint16_t count, last;
  /* in the batch's first block: the first block of the batch pushed before it (0: none), which
   * is also its last block's link; written with the push (superblock.c), so that the owner's
   * prefetch goes from batch to batch reading one line of each, not two */
  uint16_t next_batch;
  uint16_t check; /* ld_batch_hint_check of count, last and the places listed */
  uint16_t after_first[];
} ld_batch_hint_t;
_Static_assert(sizeof(ld_batch_hint_t) == 24, "a hint leaves (size - 24) / 2 offsets of room");
/* A block's place in its superblock as a hint and the slots record it (16-byte units), and back. */
static inline uint16_t ld_batch_offset(const sb_t *sb, const void *b) { return (uint16_t)(((uintptr_t)b - (uintptr_t)sb) >> 4); }
static inline ld_block_t *ld_batch_block(const sb_t *sb, unsigned offset) { return (ld_block_t *)((uintptr_t)sb + ((uintptr_t)offset << 4)); }
static inline unsigned ld_batch_hint_room(uint32_t block_size) {
#ifdef LARDER_HARDENED
  (void)block_size;
  return 0;
#else
  return block_size >= 32 && ld_sb_size <= ((size_t)1 << 20) ? (block_size - (uint32_t)sizeof(ld_batch_hint_t)) / 2 : 0;
#endif
}
/* A hint block's check: a Fletcher sum of its count, its last block and the n places it lists,
 * keyed by the process's free key, so that a write after free over a hint (bytes 16 on of a
 * free block, which no tag covers) is seen before the hint is trusted with addresses. Two
 * additions a place; written by the freer (cache.c), checked by the owner (superblock.c). */
static inline uint16_t ld_batch_hint_sum(uint16_t count, uint16_t last, const uint16_t *places, unsigned n) {
  uint32_t a = (uint32_t)ld_free_key ^ count, b = (uint32_t)(ld_free_key >> 32) ^ last;
  for (unsigned i = 0; i < n; i++) {
    a += places[i];
    b += a;
  }
  return (uint16_t)(a ^ (a >> 16) ^ (b << 3) ^ (b >> 13));
}
static inline uint16_t ld_batch_hint_check(const ld_batch_hint_t *hint, unsigned n) {
  return ld_batch_hint_sum(hint->count, hint->last, hint->after_first, n);
}
/* The buffer is set-associative: a superblock's batch may sit in any of the LD_REMOTE_WAYS
 * slots of its set. A thread that frees blocks of many size classes in turn (a consumer of
 * mixed sizes) has a few tens of superblocks' batches growing at once; one slot per
 * superblock, direct-mapped, sent a batch whenever two of them met in a slot (4.4 blocks a
 * batch on remote-free's 16 B-1 KiB mix). */
#define LD_REMOTE_WAYS 4
/* Frees the free fast path does not take wait in a ring of this many (heap_t, slow_frees). */
#define LD_SLOW_FREES 4
static inline unsigned ld_remote_set(const sb_t *sb) {
  return (unsigned)(((uintptr_t)sb >> ld_sb_shift) & (LD_REMOTE_SLOTS / LD_REMOTE_WAYS - 1)) * LD_REMOTE_WAYS;
}

/* A heap's inbox (issue 17: at most one atomic operation per batch of remote frees). A batch
 * goes to its superblock's owner as one message in the owner's inbox, a bounded ring that many
 * threads write and one reads: the freer claims a slot with one CAS on the ring's tail and
 * publishes it with a plain release store of its sequence number; whoever holds the owner's
 * lock takes messages in order with no atomic operation at all, and puts each batch on its
 * superblock's inbox list with the count the message carries (no block is walked). The reader
 * writes nothing in the slots: it publishes how far it has read (inbox_head, a line of its
 * own), and a writer claims a slot only once the reader is past that slot's message of the
 * pass before, which it learns from the head it saw last (heap_t, inbox_seen_*) and reads
 * again only when that is a whole ring behind. So a message costs the slot's line moving to
 * the reader and back, and nothing else shared. Before, a batch went onto its superblock's
 * remote list with a CAS, and the first since the owner looked put the superblock on the
 * owner's pending list with a second; that path stays for a batch that finds the inbox full
 * with the owner's lock busy, and for the forwarding of a message whose superblock changed
 * hands in flight. A slot's seq is its position plus one (16 bits, which wrap harmlessly: a
 * slot's number one pass before differs by 256), so a zeroed heap's inbox is empty and ready.
 * 256 messages of at most LD_REMOTE_BATCH_BYTES each: an owner that stops reading is helped by
 * its freers long before (LD_HELP_AFTER_BATCHES). */
#define LD_INBOX_SLOTS 256
typedef struct ld_message_s {
  ld_block_t *head;          /* the batch's first block (its chain runs to the tail) */
  uint32_t tail_offset;      /* its last block, from its superblock */
  uint16_t count;            /* blocks; 0: a slot a fork left claimed and unwritten */
  _Atomic(uint16_t) seq;     /* (uint16_t)(position + 1) once written: see above */
} ld_message_t;
_Static_assert(sizeof(ld_message_t) == 16, "four messages to a cache line");
/* A message's last block, from its first and its offset. */
static inline ld_block_t *ld_message_tail(const ld_message_t *m) {
  return (ld_block_t *)((char *)ld_sb_of(m->head) + m->tail_offset);
}
_Static_assert(LD_REMOTE_BATCH <= UINT16_MAX, "a message's count");
#define LD_OUTBOX 16 /* small batches for one owner a thread sends together (heap_t, outboxes) */
/* A thread stages small batches for this many owners at once, an outbox each, in either of the
 * two outboxes of the owner's set (ld_outbox_set). One outbox for all owners was sent whenever
 * the owner changed: a thread freeing the blocks of 64 producers sent 1.1 messages a CAS; and
 * one place per owner sent every batch when two of a few owners met in it (9% of runs with 4). */
#define LD_OUTBOXES 64
#define LD_STAGED_MAX 8 /* a batch of at most this many blocks waits in an outbox (cache.c) */
/* The outboxes of a thread hold at most this many bytes of blocks: past it, all are sent. */
#define LD_OUTBOX_PENDING_BYTES 524288
typedef struct ld_outbox_s {
  struct heap_s *owner; /* whose batches it holds (when count > 0) */
  uint32_t count;
  uint32_t bytes;       /* its batches' blocks' */
  ld_message_t messages[LD_OUTBOX];
} ld_outbox_t;
_Static_assert(LD_OUTBOXES == 64, "outbox_open: a bit per outbox, in one word");
/* The first of the two outboxes an owner's batches may wait in: heaps are page-aligned
 * mappings, mixed by a multiply. */
static inline unsigned ld_outbox_set(const struct heap_s *owner) {
  return (unsigned)((((uintptr_t)owner >> 12) * 0x9e3779b97f4a7c15ull) >> 59) << 1;
}

/* ---- heaps (heap.c) ---- */
/* Hoard's u and a are kept per size class, as its proof bounds them (seed 004 §4.1): a heap
 * takes a superblock of class c only when all its class-c superblocks are full, so taking one
 * keeps the invariant for K >= 1, which per-heap sums would not. u counts the blocks in the
 * thread's cache as in use (they are the front end's); the cache's bound therefore enters
 * Hoard's blowup bound as a constant per thread (docs/allocator.md). */
/* Hysteresis (heap.c, heap_take_from_global): extra superblocks of slack a class may earn, and
 * all of a heap's classes together. A class whose own frees cycle a few MiB through the global
 * heap each round (Hoard's threadtest with buffers: 67 superblocks of 4 KiB blocks) needs its
 * whole round: LD_BOOST_MAX. A class whose superblocks other threads' frees emptied earns at
 * most LD_BOOST_MAX_COLLECTED, as every class did before: those superblocks are what a
 * producer's next turn may take from the global heap, and 64 of them kept by each of Hoard's
 * round-robin producers took its blowup at 4 threads (100,000 blocks of 64 B a turn) from 1.99
 * to 3.53. The budget keeps the heap's sum, and so the blowup bound's constant, at 128
 * superblocks (8 MiB), where 16 for each of 73 classes allowed 1,168. */
#define LD_BOOST_MAX 64
#define LD_BOOST_MAX_COLLECTED 16
#define LD_BOOST_BUDGET 128
#define LD_MEDIUM_CACHE_SPANS 64 /* medium spans a thread's cache keeps (heap_t, medium_cache) */
#define LD_MEDIUM_LATE 256       /* spans in use a thread's heap lists late (heap_t, medium_late) */
#define LD_MEDIUM_GHOST_CHUNKS 32 /* chunk counts of spans pushed out the cache remembers (heap_t) */
#define LD_LATE_FAULTS_MAX 256   /* late tails only while the hits fault fewer bytes each on average */
/* A kept medium span, with what choosing it needs, so that the choice reads no span header */
typedef struct ld_medium_kept_s {
  sb_t *span;
  uint32_t bytes;  /* its chunks' */
  uint32_t reach;  /* how far its resident pages may reach (ld_segment_kept_reach) */
} ld_medium_kept_t;
/* A slot of a heap's ring of returned medium spans (heap_t, medium_returned): what the owner's
 * cache keeps of the span, written by its freer, so that taking it reads neither the span's
 * header nor its chunk, lines the freer's core holds (a stack linked through the headers made
 * the owner's take a chain of such loads: remote-free of 16-256 KiB blocks spent a fifth of its
 * CPU there). */
#define LD_MEDIUM_RETURN_SLOTS 64
typedef struct ld_medium_slot_s {
  uintptr_t span_chunks;   /* the span (S-aligned) | its chunks; 0: a slot a fork left claimed and unwritten */
  uint32_t reach;          /* as ld_medium_kept_t's, read by the freer */
  _Atomic(uint32_t) seq;   /* (uint32_t)(position + 1) once written */
} ld_medium_slot_t;
_Static_assert(sizeof(ld_medium_slot_t) == 16, "four slots to a cache line");

/* A heap's part of the fit tier (fit.c): free blocks of its regions in bins by size, under the
 * heap's lock; `pending`, regions with blocks other threads freed, pushed by them with a CAS. */
#define LD_FIT_BINS 128
typedef struct ld_fit_heap_s {
  uint64_t nonempty[LD_FIT_BINS / 64];  /* bit b: bins[b] holds a block */
  struct ld_fit_free_s *bins[LD_FIT_BINS];
  sb_t *regions;                        /* every region of the heap (sb->next, sb->prev) */
  sb_t *empty_region;                   /* a wholly free region kept (at most one) */
  sb_t *pending_taken;                  /* taken from `pending`, not yet collected */
  int64_t in_use;                       /* bytes of live blocks (headers included) */
  int64_t regions_held;
  uint64_t empty_since_ns;              /* when empty_region emptied */
  _Alignas(LD_CACHE_LINE) _Atomic(sb_t *) pending;
} ld_fit_heap_t;

typedef struct heap_s {
  /* ---- the front end: owner only, no lock (alloc.c's fast paths, cache.c) ---- */
  ld_bin_t bins[LD_CLASS_COUNT + 1];   /* first in the heap (ld_owned_entry), in the order their
                                          classes are met (bin_place); [LD_CLASS_LARGE] stays
                                          empty, limit 0: every class's until it has a place */
  uintptr_t owned[LD_OWNED_SLOTS];     /* ld_owned_entry(sb); written under the heap lock */
  /* (size + 15) / 16 -> its class's bin, as the bin's offset in the heap in units of 8 bytes
   * (ld_bin_of_entry; the sentinel's for a class with no place yet): malloc's fast path reaches
   * the bin with a scaled index, the instructions of a plain offset's, and the table is 2 KiB,
   * not 4. An offset, not a pointer, so that a zero table is valid: the empty heap's sends every
   * malloc to bins[0], which it never fills, and the empty heap can be zero-initialised (.bss):
   * with pointers it needed an initialiser, which put its 256 KB in the library's .data.
   * It starts a (4 KiB) page: with the fields after it, up to the lock, it fills two pages,
   * which every heap writes (tests/alloc/heap_pages.c; unaligned, the same fields spread over
   * three). */
  _Alignas(4096) uint16_t bin_of[LD_SMALL_LIMIT / 16 + 1];
  /* The owner is in its bins: counted up and down by the fast paths and the slow paths that
   * touch the bins (ld_cache_enter), so the purge may empty an idle thread's bins (cache.c,
   * ld_cache_drain_idle). Beside the statistics free counts in: no line of its own. */
  int bins_busy;
  /* The blocks the thread freed last into its own bins, oldest at deferred_at: each checked
   * for its range (its class's blocks, carved) but not yet for the free tag, and in no bin.
   * Their lines were prefetched; a free reads the oldest's tag, whose line has had
   * LD_DEFERRED calls' time to arrive, sets it and pushes it, and puts its own block in that
   * place, so that no free waits for the line of the block it frees (issue 17: churn of 256 B
   * blocks at 10^6 live, 81-96 ns per replacement with one deferred, 61-66 with four). An
   * empty place holds one of deferred_sinks, whose tag is 0 and which goes into
   * deferred_sink_bin, so that the fast path needs no test for it.
   * A double free is caught as the block settles (its free tag is there, or another thread's
   * mark or claimed word: cache.c, deferred_claim), and before then: malloc's pop of a block
   * that is also deferred goes to the slow path, which settles them all (ld_heap_deferred_is:
   * the block was in its bin when its free came, and would be handed out twice); a refill
   * looks for a free tag on them after its fill and a flush before and after (cache.c,
   * deferred_check), since a superblock's list, or another thread's batch of frees, may hold
   * such a block; the purge's drain, the thread's exit and the process's settle them
   * (ld_cache_settle_deferred). */
  ld_deferred_t deferred[LD_DEFERRED];
  uintptr_t deferred_at; /* in bytes from deferred[0]: the fast path adds, masks and stores */
  int bins_draining;                   /* LD_BINS_*: the purge empties this idle heap's bins */
  ld_class_words_t bins_turned_classes; /* the classes whose frees the purge turned away */
  ld_stats_t stats;
  ld_block_t deferred_sinks[LD_DEFERRED]; /* stand-ins for deferred[]'s empty places */
  /* (where they go, deferred_sink_bin, is after the lock: its first line is all it uses) */
  /* medium spans this thread allocated less those it freed, their chunks' bytes and their
   * usable bytes (either may go below zero; the sum over heaps is what is in use): two shared
   * atomics were a contended line between threads that churn medium blocks (large.c) */
  int64_t medium_bytes, medium_usable;
  /* (the remote buffer's slots are at the end of the heap: remote_sb, remote) */
  uint32_t remote_appends;             /* blocks appended to the buffer (wraps): its clock */
  uint32_t remote_bytes;               /* bytes waiting in remote[] (at most LD_REMOTE_PENDING_BYTES or so) */
  /* the slots holding a batch, a bit each: sending them all (thread exit, trim, the purge)
   * reads these 128 bytes, not every slot (larson-server: 30 batches per exit) */
  uint64_t remote_open[LD_REMOTE_SLOTS / 64];
  uint32_t remote_cursor;              /* where the next batch sent for the buffer's bound is looked for */
  int remote_busy;                     /* the owner is in its remote buffer (cache.c) */
  int remote_draining;                 /* the purge is sending an idle owner's batches */
  /* The frees the fast path did not take (another heap's blocks, those that join a batch
   * included, the global heap's, the thread's own outside its table), each waiting for
   * LD_SLOW_FREES more before it is taken: free_slow prefetches the block's line and its
   * superblock's header and goes on, so that neither is waited for (issue 17: a free in
   * random order into superblocks the global heap holds, 10^6 blocks of 256 B: 0.45-0.6 of
   * the time, against 1.1-1.5x jemalloc's; a consumer's frees of a producer's blocks: the
   * read of each block's tag was 61% of free_slow's samples). Under the remote buffer's
   * protocol (remote_busy), as the purge settles them for an idle owner (cache.c). NULL:
   * empty. */
  void *slow_frees[LD_SLOW_FREES];
  /* each one's batch slot when it came (a hint), with LD_SLOW_FREE_TAGGED when the block was
   * marked as it came (alloc.c, free_deferring) */
  uint16_t slow_free_slots[LD_SLOW_FREES];
  uint32_t slow_free_next;             /* the slot the next one takes (wraps) */
  /* this heap's place in the table of rings (heap.c, ld_heap_of_ring_id), which its marks
   * carry (ld_ring_mark); 0: none (past LD_RING_IDS heaps), and its slow frees are not marked */
  uint16_t ring_id;
  struct heap_s *inbox_seen_owner;     /* the heap whose inbox this thread last wrote to, */
  uint32_t inbox_seen_head;            /* and its inbox_head as read then (superblock.c) */
  struct heap_s *medium_seen_owner;    /* the heap whose ring of returned medium spans this */
  uint64_t medium_seen_taken;          /* thread last pushed to, and its reader's word then
                                          (cache.c, medium_returned_push) */
  /* Small batches wait in outboxes, one per owner (heap_t, outboxes), and are sent together:
   * one CAS claims their inbox slots (cache.c, outbox_send). Bit i: outboxes[i] holds some.
   * Part of the remote buffer, under its protocol. */
  uint64_t outbox_open;
  uint32_t outbox_bytes;               /* the sum of the outboxes' bytes */
  struct heap_s *help_owner;           /* the heap this thread last sent batches to, */
  uint64_t help_looks;                 /* its `looks` then, */
  uint32_t help_batches;               /* and the batches sent since (ld_heap_help_idle_owner) */
  uint64_t last_maintenance_ns;        /* coarse clock at the last trim of idle bins */
  /* &errno of the thread that uses the heap, set as the thread takes it (maintain.c,
   * ld_maintain_thread_heap): the slow paths that keep the caller's errno (alloc.c) read and
   * write it with a load and a store, where each use of errno is a call into the C library
   * (__errno_location), two a slow path. */
  int *errno_at;
  int bins_ready;                      /* bins and bin_of set up (ld_cache_init_bins) */
  unsigned classes_synced;             /* the learned classes bin_of knows (ld_cache_classes_sync) */
  /* bit c: bins[c] is set up (cache.c, bin_setup; the validation walk checks it against the
   * limits). The walks of the bins (the thread's exit and trim, the purge's, the statistics)
   * look at these only: a walk of all 64 read 64 KiB, 16 pages a thread that uses a few
   * classes never touched (a one-object program: 15 of its 127 page faults at its exit). */
  ld_class_words_t bins_set_up;
  /* Bins are laid out in the order the heap meets their classes, so that a thread that uses a
   * few classes touches a few pages of bins (four bins to a page; at their classes' places, a
   * thread that used six sizes had six pages of bins resident). bin_place[c]: 1 + the place of
   * class c's bin in bins[], 0 until its first refill (cache.c, bin_setup); place_class[i]: the
   * class at place i. Places only grow, and keep their classes for the heap's life; the
   * sentinel LD_CLASS_LARGE keeps its own place (0 in bin_place: every class's until it has
   * one). Written by the owner before bins_set_up says the class is set up. */
  uint8_t bin_place[LD_CLASS_COUNT + 1];
  uint8_t place_class[LD_CLASS_COUNT + 1];
  uint8_t places_used;
  /* What the bins grown past their first limits may hold in all, in bytes: the sum over the
   * bins of (limit - first limit) * block size, at most bin_growth_kb as it was when they grew
   * (lowered at run time, it stops growth; trims give the rest back: cache.c, bin_grow). */
  size_t bins_grown_bytes;
  /* ---- the heap proper: under `lock` ---- */
  sb_t *current[LD_CLASS_COUNT + 1];   /* the superblock each class's refills draw from */
  int64_t u[LD_CLASS_COUNT + 1];       /* bytes in use per class (Hoard's u_i) */
  int64_t a[LD_CLASS_COUNT + 1];       /* bytes held per class (Hoard's a_i) */
  int64_t carved[LD_CLASS_COUNT + 1];  /* bytes of the blocks carved in those (the statistics: the rest
                                          of a superblock was never touched) */
  int64_t u_release[LD_CLASS_COUNT + 1]; /* give a superblock of class c back when u[c] < this */
  uint8_t boost[LD_CLASS_COUNT + 1];   /* extra K earned by ping-pong (hysteresis, heap.c) */
  uint16_t boost_total;                /* their sum, at most LD_BOOST_BUDGET */
  ld_class_set_t release_due;          /* classes whose own frees left partly used superblocks to give back (heap.c) */
  ld_class_set_t released_own;         /* classes whose last give-away was of superblocks their own frees emptied */
  uint64_t last_release_ns[LD_CLASS_COUNT + 1];
  uint64_t last_take_ns[LD_CLASS_COUNT + 1];
  unsigned options_epoch;
  size_t superblocks_held;
  uint32_t medium_late_count;
  uint32_t medium_hit_faults;          /* bytes past their spans' resident pages the cache's hits
                                          touched, on average over the last 32 (cache.c) */
  uint32_t medium_faulted, medium_hits; /* (their sum so far, and a count of the hits) */
  uint32_t medium_cached;              /* spans in medium_cache */
  /* Spans the cache's bounds pushed out, by chunks (1-32; more: 32), not yet matched by a miss,
   * and their sum; the misses since the first of them, and of those the ones such a span would
   * have served (cache.c, medium_cache_missed) */
  uint8_t medium_ghosts[LD_MEDIUM_GHOST_CHUNKS];
  uint16_t medium_ghost_count;
  uint8_t medium_misses, medium_ghost_hits;
  bool medium_cache_used;              /* a span was taken from it since the owner's last trim */
  int64_t medium_cached_bytes;         /* their chunks' bytes */
  /* Bytes by which the cache's bound exceeds medium_cache_kb, grown where half of 64 misses
   * were of spans the bound had pushed out (cache.c, medium_cache_missed), given back when the
   * cache is emptied. Written by the owner in its cache, or by the purge while the owner is out of it
   * (atomic: the statistics read it from any thread). */
  _Atomic(size_t) medium_extra;
  uint32_t span_calls;                 /* medium calls served by the kept spans (alloc.c: a poll
                                          in 16); the owner's alone, no lock */
  uint64_t last_slow_ns;               /* coarse clock at the owner's last slow path (set by
                                          alloc.c before it calls down: the heap's "now") */
  uint64_t looks;                      /* times the owner looked at its pending frees */
  /* A thread uses it. Beside last_slow_ns and looks, which a freer reads with it for every
   * batch it sends (heap.c, ld_heap_help_idle_owner): one line from the owner's core, not two
   * (it sat on the lock's line, which the owner writes at every slow path). */
  int live;
  sb_t *pending_taken;                 /* taken from `pending`, not yet looked at (heap.c) */
  /* Superblocks with frees waiting (announced), pushed by any thread with a CAS. Its own
   * cache line: remote freers write it, the owner reads it on every refill. */
  _Alignas(LD_CACHE_LINE) _Atomic(sb_t *) pending;
  /* The inbox's tail, claimed by remote freers with a CAS and read by nobody else: on a line
   * of its own, it stays in the cache of a thread that sends many batches. */
  _Alignas(LD_CACHE_LINE) _Atomic(uint32_t) inbox_tail;
  /* The next message to take, written by the reader (under `lock`) and read by writers once a
   * ring of messages at most: a line of its own. */
  _Alignas(LD_CACHE_LINE) _Atomic(uint32_t) inbox_head;
  /* Medium spans this thread allocated and another freed (cache.c, "medium spans"): a bounded
   * ring (medium_returned_slots) that freers write and readers take: the owner's next medium
   * malloc, or the purge for a thread that stopped calling or exited. A freer claims
   * a slot with one CAS on this word (the position, high half, and the chunks pushed, low half,
   * both counting up and wrapping) and publishes it with a release store of its seq; a reader
   * claims the slots it read with one CAS on medium_returned_taken (position and chunks taken).
   * A line of its own: the freers write it. */
  _Alignas(LD_CACHE_LINE) _Atomic(uint64_t) medium_returned;
  /* medium_extra, copied here by the owner (or the purge) as it changes: the ring's bound is
   * the cache's, read by the freers on the line they write anyway */
  _Atomic(size_t) medium_returned_extra;
  /* The ring's reader side: the next position to take (high half) and the chunks taken (low
   * half), written by a reader's CAS, read by the freers for the room left. */
  _Alignas(LD_CACHE_LINE) _Atomic(uint64_t) medium_returned_taken;
  /* Guards the heap proper: taken by the owner in its slow paths (uncontended), and with
   * trylock by another thread that tidies an idle heap. */
  _Alignas(LD_CACHE_LINE) ld_lock_t lock;
  struct heap_s *next_heap;            /* all heaps, live and abandoned */
  struct heap_s *next_idle;            /* heaps no thread uses, newest first (heaps.lock) */
  struct heap_s *next_orphan;          /* the queue of orphan heaps (heaps.lock) */
  int orphan_tid;                      /* made after its thread's exit hook ran: that thread's id */
  /* The kernel's id of the thread that uses it, 0 once retired (heaps.lock; read without it by
   * the purge thread: ld_heaps_thread_alive) */
  int thread_tid;
  bool kept_current;                   /* parked with its classes' current superblocks (heap.c) */
  bool exiting;                        /* its thread's exit hook runs: no tidy gives away its superblocks (heap lock; heap.c) */
  bool table_purged;                   /* parked with nothing: owned[]'s pages given back (heap.c) */
  bool orphan_queued;                  /* in the queue of orphan heaps (heaps.lock) */
  /* Where deferred[]'s stand-ins go: never full, emptied with them. Last of the fields every
   * heap writes: only its count and first LD_DEFERRED slots are used, so the rest of its 1 KiB
   * may lie on a page no heap writes. */
  ld_bin_t deferred_sink_bin;
  /* Written only by a thread whose heap holds superblocks it used up (groups: Hoard §3.1's
   * fullness groups, heap.c) or many of a class (class_vote): after the lock, out of the
   * pages every heap writes, which they made 3 instead of 2 (tests/alloc/heap_pages.c). */
  sb_t *groups[LD_CLASS_COUNT][LD_GROUP_COUNT];
  /* Per class, the size its refills were for most (a majority vote over rounds of
   * LD_VOTE_ROUND; alloc.c, class_vote): what a learned class would be. */
  struct { uint16_t granule, votes, calls; } class_vote[LD_CLASS_COUNT];
  /* The remote buffer's slots (cache.c), near the end: 42 KB whose pages are touched only as
   * slots are used, kept out from between the fields every heap writes (the size table, the
   * counters, the per-class arrays, the heap proper), which then share 2 pages
   * (tests/alloc/heap_pages.c).
   * Each slot's superblock (NULL: the slot is empty), apart from the slots so that a free
   * finds its batch reading one line, a set's four superblocks. */
  _Alignas(64) ld_message_t inbox[LD_INBOX_SLOTS]; /* batches of other threads' frees */
  _Alignas(64) sb_t *remote_sb[LD_REMOTE_SLOTS];
  /* Each slot's last append (the heap's remote_appends when a block last joined its batch), apart
   * from the slots as well: a free that opens a batch chooses the way whose batch grew longest
   * ago reading a line of this 4 KiB array, a line of remote_sb and remote_open's word, where
   * the slots' own fields (168 bytes a slot, 172 KiB in all) were four lines: 1.8 first-level
   * misses a block for a consumer of 64 producers' blocks (count-instructions --misses, fan-in). */
  uint32_t remote_last[LD_REMOTE_SLOTS];
  ld_remote_slot_t remote[LD_REMOTE_SLOTS];
  ld_outbox_t outboxes[LD_OUTBOXES];   /* (17 KiB, its pages touched as owners are met) */
  /* ---- last, the arrays of the medium spans and the fit tier, only a thread that uses those
   * touches (5 KiB: between the fields every heap writes, they made those 5 pages instead of
   * 4; tests/alloc/heap_pages.c) ---- */
  /* Medium spans this thread freed, kept to serve its next medium requests without the segment
   * lock (cache.c, "medium spans"): oldest first, at most LD_MEDIUM_CACHE_SPANS and
   * medium_cache_kb of chunks. The owner's, within its busy mark (remote_enter); the purge
   * empties an idle thread's while that mark is clear. */
  ld_medium_kept_t medium_cache[LD_MEDIUM_CACHE_SPANS];
  /* Spans in use the cache handed out with old pages past half as far again as their blocks
   * (marked so in their segments), oldest first: listed on the segments' list of tails late,
   * as one batch, by the owner or, for an idle owner, the purge (cache.c, medium_late_list).
   * An entry whose span was freed since is skipped then. Under the busy mark too. */
  sb_t *medium_late[LD_MEDIUM_LATE];
  /* The ring of returned spans' slots (medium_returned, above, says which are written) */
  _Alignas(LD_CACHE_LINE) ld_medium_slot_t medium_returned_slots[LD_MEDIUM_RETURN_SLOTS];
  /* the fit tier (fit.c; LARDER_FIT_ABOVE): under `lock`, its pending list aside */
  _Alignas(LD_CACHE_LINE) ld_fit_heap_t fit;
} heap_t;

/* bin_of's entry for the bin at place i (heap_t, bin_place), and the bin an entry names */
#define LD_BIN_OF_SCALE 8
#define ld_bin_of_entry(i) ((uint16_t)((offsetof(heap_t, bins) + (size_t)(i) * sizeof(ld_bin_t)) / LD_BIN_OF_SCALE))
_Static_assert(sizeof(ld_bin_t) % LD_BIN_OF_SCALE == 0 &&
                   (offsetof(heap_t, bins) + (LD_CLASS_COUNT + 1) * sizeof(ld_bin_t)) / LD_BIN_OF_SCALE <= UINT16_MAX,
               "bin_of's entries name every bin");
#define ld_bin_of_bin(heap, entry) ((ld_bin_t *)((char *)(heap) + (uintptr_t)(entry) * LD_BIN_OF_SCALE))
/* Class c's bin; until the class's first refill gives it a place (cache.c, bin_setup), the
 * sentinel's, which is empty and not set up (limit 0), as a bin not set up was. */
static inline unsigned ld_heap_bin_place(const heap_t *heap, unsigned c) {
  unsigned place = __atomic_load_n(&heap->bin_place[c], __ATOMIC_RELAXED);
  return place ? place - 1 : LD_CLASS_LARGE;
}
static inline ld_bin_t *ld_heap_bin(heap_t *heap, unsigned c) { return &heap->bins[ld_heap_bin_place(heap, c)]; }
static inline const ld_bin_t *ld_heap_bin_const(const heap_t *heap, unsigned c) { return &heap->bins[ld_heap_bin_place(heap, c)]; }
/* The owned table's entry for sb, whose class's bin is set up (one that is not would read as
 * the sentinel's place, at LD_OWNED_NONE: not owned). */
static inline uintptr_t ld_owned_entry(const heap_t *heap, const sb_t *sb) {
  return (uintptr_t)sb | ((uintptr_t)ld_heap_bin_place(heap, sb->size_class) << LD_OWNED_CLASS_SHIFT);
}
/* The class of an owned table's place (ld_heap_owned_class's value >> LD_OWNED_CLASS_SHIFT). */
static inline unsigned ld_heap_place_class(const heap_t *heap, uintptr_t place) {
  return __atomic_load_n(&heap->place_class[place], __ATOMIC_RELAXED);
}
/* The class of a bin that has a place (not the sentinel's). */
static inline unsigned ld_heap_bin_class(const heap_t *heap, const ld_bin_t *bin) {
  return ld_heap_place_class(heap, (uintptr_t)(bin - heap->bins));
}
/* What heap's table of owned superblocks says of p, whose superblock is sb (p masked): the
 * place of its class's bin << LD_OWNED_CLASS_SHIFT when the heap owns sb (ld_heap_place_class
 * gives the class), else a value at or past LD_OWNED_NONE, so one compare tells (the free fast
 * path's; a relaxed load, a plain one: the purge may clear an entry). */
#define LD_OWNED_NONE ((uintptr_t)LD_CLASS_COUNT << LD_OWNED_CLASS_SHIFT)
static inline uintptr_t ld_heap_owned_class(const heap_t *heap, uintptr_t p, uintptr_t sb) {
  const uintptr_t *owned = heap->owned; /* (indexed so, the table's offset folds into the load) */
  return LD_READ(owned[ld_owned_slot(p)]) - sb;
}
/* The bin at such a place: a multiply by a power of two (a bin is 1 KiB, the bins first). */
_Static_assert(offsetof(heap_t, bins) == 0, "a bin's address is the heap's plus a shift");
static inline ld_bin_t *ld_heap_owned_bin(const heap_t *heap, uintptr_t owned_class) {
  return (ld_bin_t *)((char *)heap + owned_class * (sizeof(ld_bin_t) >> LD_OWNED_CLASS_SHIFT));
}
/* Bytes of the medium spans other threads returned to heap, waiting for it (any thread). */
static inline size_t ld_heap_medium_returned_bytes(const heap_t *heap) {
  heap_t *h = (heap_t *)heap;
  uint32_t taken = (uint32_t)atomic_load_explicit(&h->medium_returned_taken, memory_order_acquire);
  uint32_t pushed = (uint32_t)atomic_load_explicit(&h->medium_returned, memory_order_relaxed);
  int32_t chunks = (int32_t)(pushed - taken); /* (read apart: may be a little off, never below 0) */
  return chunks > 0 ? (size_t)chunks * ld_sb_size : 0;
}
extern heap_t ld_heap_empty;          /* every thread starts here: no blocks, owns nothing */
extern sb_t ld_sb_none;               /* the current superblock of a class that has none */
extern __thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec")));

/* The inbox's next message if its writer has published it, else NULL (acquire: what the
 * writer wrote before, the batch's links and tags, is seen). Two loads: a fill that finds none
 * pays no more. The reader's (under heap's lock). */
static inline ld_message_t *ld_inbox_next(heap_t *heap) {
  uint32_t pos = atomic_load_explicit(&heap->inbox_head, memory_order_relaxed); /* the reader's own */
  ld_message_t *m = &heap->inbox[pos & (LD_INBOX_SLOTS - 1)];
  return atomic_load_explicit(&m->seq, memory_order_acquire) == (uint16_t)(pos + 1) ? m : NULL;
}

/* Fills bin cls (empty) of the calling thread's heap with up to `want` blocks (the heap's
 * pending frees first, whose batches of one or two blocks go straight into their classes'
 * bins, this one's included; then its superblocks, the global heap, a new superblock) and
 * raises the bin's count by as many. Returns the bin's count (0: out of memory, errno ENOMEM).
 * The owner's, in its bins; takes the heap's lock. */
unsigned ld_heap_fill(heap_t *heap, unsigned cls, unsigned want);
/* Returns n blocks of the calling thread's (blocks[i] freed or cached, tagged), which leave
 * `bin` (its count falls by n), to their superblocks, and applies Hoard's threshold to their
 * class. Blocks of superblocks the heap no longer owns are left in place and their number
 * returned through *foreign_out: the caller frees those as remote frees. Takes the heap's
 * lock. */
void ld_heap_return(heap_t *heap, ld_bin_t *bin, void **blocks, unsigned n, unsigned *foreign_out);
/* Every bin's blocks back to their superblocks under one lock (a thread's exit, malloc_trim:
 * ld_cache_drain; a bin at a time cost a lock, the pending check and Hoard's threshold per
 * class, 31 times per larson thread). A bin's blocks of superblocks given away while cached
 * stay in it, bin->count of them, for the caller to send to their owners. */
void ld_heap_return_bins(heap_t *heap);
/* The heap's deferred free at place (heap_t, deferred) into its bin, which has room, and
 * block (of bin) in its place, or the place's stand-in when block is NULL: under the heap's
 * lock, as a fill's blocks are, so that a merge of the statistics never sees a block both
 * deferred and in its bin. */
void ld_heap_settle_deferred(heap_t *heap, unsigned place, ld_block_t *block, ld_bin_t *bin);
/* Every place of heap's deferred frees empty (none may hold a free): their stand-ins ready
 * for the fast path (tag 0), their bin emptied. */
void ld_heap_reset_deferred(heap_t *heap);
/* Whether b is in one of the places (a free or a stand-in: the stand-ins are in no bin). */
static inline bool ld_heap_deferred_is(const heap_t *heap, const void *b) {
  _Static_assert(LD_DEFERRED == 4, "four compares");
  return b == heap->deferred[0].block || b == heap->deferred[1].block || b == heap->deferred[2].block || b == heap->deferred[3].block;
}
/* The place of the oldest deferred free (the next a free settles). */
static inline unsigned ld_heap_deferred_oldest(const heap_t *heap) { return (unsigned)(heap->deferred_at / sizeof(ld_deferred_t)); }
/* Whether place holds a free (not a stand-in). */
static inline bool ld_heap_deferred_holds(const heap_t *heap, unsigned place) {
  return LD_READ(heap->deferred[place].bin) != &heap->deferred_sink_bin;
}
/* Collects the frees announced on heap's pending list and those pushed onto its current
 * superblocks (the caller owns heap). */
void ld_heap_collect_pending(heap_t *heap);
/* Tidies a heap for the purge: its pending frees collected, Hoard's threshold applied, its
 * empty superblocks given to the global heap, and, when its thread has been idle a purge delay
 * (idle), its sparse ones too. mine: the caller owns it; else trylock, false when the lock was
 * busy. */
bool ld_heap_tidy(heap_t *heap, bool mine, bool idle);
/* A batch of remote frees went to owner: an owner that has made no slow-path call for a
 * while, or that has not looked at its pending frees while this thread sent it
 * LD_HELP_AFTER_BATCHES batches, is helped: its inbox is read whole (a constant: at most
 * LD_INBOX_SLOTS messages), its pending frees collected and Hoard's threshold applied
 * (trylock; never waits). */
#define LD_HELP_AFTER_BATCHES 64
void ld_heap_help_idle_owner(heap_t *self, heap_t *owner, uint64_t now);
/* A batch found owner's inbox full (owner: any heap, the global heap included): the freer
 * reads PENDING_PER_CALL of its messages for it, under its lock taken with trylock (never a
 * wait). false: the lock was busy, nothing done. */
bool ld_heap_help_full_inbox(heap_t *self, heap_t *owner);
heap_t *ld_heap_new(bool after_exit_hook);  /* a heap for the calling thread (made or reused) */
void    ld_heap_empty_init(void);           /* the empty heap's non-zero fields (start-up) */
void    ld_heap_fraction_changed(void);     /* Hoard's f was set: the groups' boundaries follow */
/* larder_option_set: every heap files its superblocks and sets its thresholds under the new
 * options now, each under its own lock, in the setter's call, so that no thread's refill or
 * flush does it for a heap of any size (only one that reaches its heap first, heap.c). */
void    ld_heaps_options_apply(void);
/* Thread exit: the heap's empty superblocks go to the global heap, and the heap with the rest
 * waits (parked) for the next new thread; true if it still holds superblocks. keeping: a place
 * among the parked heaps that keep their current superblocks and bins, taken before the cache
 * was emptied (ld_heap_keep_reserve: false when all are taken). */
bool    ld_heap_keep_reserve(void);
void    ld_heap_exit_begin(heap_t *heap);
bool    ld_heap_park(heap_t *heap, bool keeping);
/* The purge: a parked heap no thread took within a delay gives everything to the global heap;
 * false if its lock was busy. */
bool    ld_heap_release_parked(heap_t *heap);
/* A parked heap that holds no superblock: its table of owned superblocks' pages back to the OS
 * (once, until it owns one again). false: its lock was busy. For the purge (maintain.c). */
bool    ld_heap_purge_parked_table(heap_t *heap);
void    ld_heap_validate(heap_t *heap, int *violations);

/* ---- the fit tier (fit.c): best fit with coalescing, per heap, for sizes in
 * (LARDER_FIT_ABOVE, ld_small_max]; regions are chunks of kind LD_KIND_FIT ---- */
/* A block of at least size bytes (16-byte aligned), or NULL: no memory. The heap's lock is
 * taken (not held by the caller). */
void   *ld_fit_alloc(heap_t *heap, size_t size);
/* The largest request the tier serves: three quarters of a region, so that blocks past the small
 * classes (medium spans, whole chunks each, otherwise) share regions too. */
#define LD_FIT_MAX() ((ld_sb_size >> 2) * 3)
/* p, in region r (its chunk's header: kind LD_KIND_FIT), freed by the thread whose heap is heap
 * (its own block: under its lock; another's, or heap the empty one: two CASes, no lock, three
 * when the region must be announced). A pointer that starts no live block is reported. */
void    ld_fit_free(heap_t *heap, sb_t *r, void *p);
/* p's usable bytes, 0 when no live block starts at p. */
size_t  ld_fit_usable(sb_t *r, const void *p);
/* The purge's, for each heap: other threads' frees collected, the empty region kept given back
 * once idle a delay (idle, all: now). false: another thread's heap's lock was busy. */
bool    ld_fit_tidy(heap_t *heap, bool mine, bool idle, bool all);
/* Adds heap's live bytes and regions (the caller holds its lock: ld_heaps_stats). */
void    ld_fit_figures(heap_t *heap, int64_t *in_use, int64_t *regions);
void    ld_fit_validate(heap_t *heap, int *violations);
heap_t *ld_heaps_first(void);
/* The heap with this ring id (heap_t, ring_id), or NULL: none has it. Heaps are never unmapped. */
heap_t *ld_heap_of_ring_id(unsigned id);
void    ld_heaps_lock_all(void);
void    ld_heaps_unlock_all(bool reinit);
size_t  ld_heaps_live_count(void);
bool    ld_heaps_thread_alive(int self_tid); /* some thread that allocated may still run (heap.c) */
typedef struct ld_heap_figures_s {
  int64_t in_use, held, cached, cached_blocks;
  int64_t fit_in_use, fit_regions;     /* the fit tier's (fit.c), summed */
  int64_t medium_bytes, medium_usable; /* heap_t's, summed */
  int64_t medium_cached;               /* chunks' bytes of the spans in threads' medium caches */
} ld_heap_figures_t;
/* A size class's figures, summed over the heaps or the global heap (larder_class_stats_get):
 * Hoard's u (in use, cached, or freed by other threads and not taken back yet), the blocks in
 * bins and deferred frees, superblocks held, and the bytes of blocks carved in them. */
typedef struct ld_class_figures_s {
  int64_t in_use[LD_CLASS_COUNT], cached[LD_CLASS_COUNT], superblocks[LD_CLASS_COUNT], carved[LD_CLASS_COUNT];
} ld_class_figures_t;
/* classes: NULL, or added to (the class figures, with the others) */
void    ld_heaps_stats(ld_stats_t *out, ld_heap_figures_t *figures, ld_class_figures_t *classes);
void    ld_stats_add(ld_stats_t *dst, const ld_stats_t *src);
/* Adds n to the field at field_offset of the calling thread's counters (or, for a thread
 * without a heap, of a shared atomic set): for the cold paths only. ld_stat_count: one event. */
extern ld_stats_t ld_stats_unowned;
static inline void ld_stat_add(heap_t *heap, size_t field_offset, size_t n) {
#ifdef LARDER_STATS
  if (heap != &ld_heap_empty) LD_OWNER_ADD(*(size_t *)((char *)&heap->stats + field_offset), n);
  else __atomic_fetch_add((size_t *)((char *)&ld_stats_unowned + field_offset), n, __ATOMIC_RELAXED);
#else
  (void)heap;
  (void)field_offset;
  (void)n;
#endif
}
static inline void ld_stat_count(heap_t *heap, size_t field_offset) { ld_stat_add(heap, field_offset, 1); }

/* ---- the front end (cache.c) ---- */
/* Bin cls is empty: refill it; returns a block, or NULL (errno ENOMEM). */
void   *ld_cache_refill(heap_t *heap, unsigned cls);
/* A free of b, a block of sb, that the fast path did not take (b checked and tagged): into
 * the thread's bin (half of it goes back to the superblocks first when it is full), or into
 * the batch for sb's owner. True when a batch moved (the caller polls maintenance then). */
bool    ld_cache_free_owned(heap_t *heap, sb_t *sb, ld_block_t *b);
/* The owner's paths that touch its bins outside the fast paths run between these two, so
 * that the purge never empties bins the owner is using (cache.c, ld_cache_drain_idle). */
void    ld_cache_wait_for_purge(heap_t *heap);
/* bins_busy is the owner's, except in ld_heap_empty, which every thread without a heap yet
 * marks (never drained, so the flag there means nothing). A plain store each way, not a
 * counter: the regions never nest (nothing inside one calls malloc or free), and a store
 * neither loads nor waits for the last one (churn of 256-byte blocks at 10k live, CPU ns per
 * replacement, medians of 5 alternating runs: 11.17 without the flag, 11.86 as a counter,
 * 11.63 as stores). */
/* The store that leaves has release order (a plain store on x86, as the compiler may not move
 * the bins' accesses past it anyway: the signal fence before it): the purge's drain reads the
 * flag with acquire order after its membarrier, so that its reads of the bins happen after the
 * owner's writes in the C11 model too, and ThreadSanitizer, which does not model membarrier,
 * sees the order (scripts/test-sanitize.sh). */
#define LD_BUSY_INC(heap) __atomic_store_n(&(heap)->bins_busy, 1, __ATOMIC_RELAXED)
#define LD_BUSY_DEC(heap) __atomic_store_n(&(heap)->bins_busy, 0, __ATOMIC_RELEASE)
#define LD_BINS_IN_USE 0      /* the owner's, the fast paths in front of them */
#define LD_BINS_DRAINING 1    /* the purge empties them; the fast paths are turned away */
#define LD_BINS_TURNED_AWAY 2 /* the purge is done; the owner's next slow path turns them back */
static inline void ld_cache_enter(heap_t *heap) {
  LD_BUSY_INC(heap);
  atomic_signal_fence(memory_order_seq_cst); /* the purge's membarrier makes this a fence */
  if (LD_UNLIKELY(__atomic_load_n(&heap->bins_draining, __ATOMIC_ACQUIRE) != LD_BINS_IN_USE)) ld_cache_wait_for_purge(heap);
}
static inline void ld_cache_leave(heap_t *heap) {
  atomic_signal_fence(memory_order_seq_cst);
  LD_BUSY_DEC(heap);
}
/* Empties the bins of heap, whose thread has stopped calling, if it is not in them (the
 * purge): 1 emptied, 0 nothing to empty, -1 the owner was in them (try again later). */
int     ld_cache_drain_idle(heap_t *heap);
/* The deferred frees (heap_t, deferred) checked for a double free, tagged and put in their
 * bins; the owner, in its bins (ld_cache_enter). */
void    ld_cache_settle_deferred(heap_t *heap);
/* The oldest deferred free settled and p (of bin, range checked) deferred in its place: the
 * free fast path's work, when the oldest's bin is full (flushed: returns true) or it carries
 * the free tag (reported). p is checked for the free tag. */
bool    ld_cache_defer(heap_t *heap, void *p, ld_bin_t *bin);
/* The free tag written on b, a block of the thread's own freed on a slow path, after its word
 * is checked: not the free tag, nor marked by another thread's free (a double free). */
void    ld_cache_claim_own(ld_block_t *b);
/* The same from outside the bins (realloc, the process's exit, a thread's statistics): enters
 * them if a free waits; the slow frees waiting (heap_t, slow_frees) are taken as well. */
void    ld_cache_settle_deferred_now(heap_t *heap);
/* free_slow's p joins the thread's ring of slow frees (its lines are being prefetched), with
 * `slot`, where its superblock's batch was in the remote buffer (LD_REMOTE_SLOTS: none; a hint,
 * looked at again when p leaves the ring). The free it displaces, if any, is returned with its
 * slot in *old_slot (LD_SLOW_FREE_TAGGED set if it was marked: its claimed word is on it now,
 * slow_free_leaves), and the caller is left in the remote buffer (remote_busy: it finishes with
 * ld_cache_join_held, which marks p); NULL: none, p is marked if slot has LD_SLOW_FREE_TAGGED,
 * and the buffer is left. A pointer already in the ring is reported as a double free. */
void   *ld_cache_defer_slow_free(heap_t *heap, void *p, unsigned slot, unsigned *old_slot);
/* Every slow free waiting is taken (the owner, in its bins: before a refill). */
void    ld_cache_settle_slow_frees(heap_t *heap);
/* The slot of sb's batch in heap's remote buffer, LD_REMOTE_SLOTS if it has none: a look
 * outside the buffer's protocol (the purge may be sending the batches of an idle thread), so
 * only a hint. A superblock with a batch was checked when the batch opened; free_deferring
 * skips the ownership map for it. */
static inline unsigned ld_cache_batch_slot(const heap_t *heap, const sb_t *sb) {
  unsigned set = ld_remote_set(sb);
#pragma GCC unroll 4
  for (unsigned w = 0; w < LD_REMOTE_WAYS; w++)
    if (LD_READ(heap->remote_sb[set + w]) == sb) return set + w;
  return LD_REMOTE_SLOTS;
}
/* Checks the thread's own remote buffer (a validation walk: maintain.c). */
void    ld_cache_validate(heap_t *heap, int *violations);
/* Whether heap's bins or remote buffer hold anything (racy: for the purge's scheduling). */
bool    ld_cache_holds(const heap_t *heap);
/* A free of a block of another heap's superblock sb (checked, tagged) opens a batch for sb
 * in the thread's buffer; true: a batch was sent. */
bool    ld_cache_free_remote(heap_t *heap, sb_t *sb, ld_block_t *b);
/* The free of p, whose superblock sb (p's mask) may have a batch in the thread's buffer,
 * joins it after the block's own checks. LD_JOIN_DONE: p joined; LD_JOIN_NONE: sb has no batch
 * there (nothing done, p not read); LD_JOIN_APPEND: p is checked, tagged and counted, and the
 * caller finishes with ld_cache_append_and_leave. ld_cache_join_held is the same for a caller
 * already in the remote buffer (ld_cache_defer_slow_free), with a hint of sb's slot (and
 * LD_SLOW_FREE_TAGGED when p left the ring claimed: ld_check_claimed_free's checks), and marks
 * `mark` (unless NULL: the free that took p's place in the ring) before it leaves the buffer or
 * returns LD_JOIN_APPEND (alloc.c, free_deferring). */
enum { LD_JOIN_DONE, LD_JOIN_NONE, LD_JOIN_APPEND };
int     ld_cache_free_remote_batched(heap_t *heap, sb_t *sb, void *p);
int     ld_cache_join_held(heap_t *heap, sb_t *sb, void *p, unsigned slot, void *mark);
bool    ld_cache_append_and_leave(heap_t *heap, sb_t *sb, void *p);
/* The thread's own maintenance: bins unused since the last call give back most of what they
 * hold (as jemalloc's tcache garbage collection does), and the remote buffer is sent. */
void    ld_cache_trim(heap_t *heap);
/* The purge sends the batches in the remote buffer of a heap whose thread stopped calling:
 * false when it could not because the owner was at work in it (try again later). */
bool    ld_cache_send_idle_batches(heap_t *heap);
/* Empties every bin and the remote buffer (thread exit, malloc_trim). keep_bins: the exit of a
 * thread whose heap will keep its bins (ld_heap_park): each bin keeps up to half its first limit
 * of blocks of its class's current superblock, the rest goes back. */
void    ld_cache_drain(heap_t *heap, bool keep_bins);
/* Sets the bins' limits and fast-check figures (a new heap, or changed options). */
/* The calling thread's cache of medium spans (cache.c, "medium spans"). alloc: a kept span
 * for a malloc of `size` bytes, or NULL. free: true if the span (a medium span in use, checked)
 * was kept, returned to the thread that allocated it, or went back, false if the cache does
 * not take spans of its size (the caller frees it). drain_idle: the purge, for a thread that
 * stopped calling: 1 its kept spans went back, 0 it kept none, -1 it was in its cache. drain_returned: the purge, for a heap no thread
 * uses: the spans returned to it go back to their segments. */
void   *ld_cache_medium_alloc(heap_t *heap, size_t size);
bool    ld_cache_medium_free(heap_t *heap, sb_t *span);
int     ld_cache_medium_drain_idle(heap_t *heap);
void    ld_cache_medium_drain_returned(heap_t *heap);
void    ld_cache_medium_after_fork(heap_t *heap); /* slots claimed by threads the child lacks */
size_t  ld_cache_medium_extra(void); /* the heaps' medium_extra, summed (statistics) */
void    ld_cache_init_bins(heap_t *heap);
/* The classes learned since the heap's bin_of was set: bin_of follows ld_class_of_granule again.
 * The owner, in its bins (ld_cache_enter). */
void    ld_cache_classes_sync(heap_t *heap);
int64_t ld_cache_bytes(const heap_t *heap);   /* what a heap's bins hold, read from any thread */

/* ---- the global heap (global.c), Hoard's heap 0 ---- */
extern heap_t ld_global_heap;  /* the owner token of superblocks the global heap holds */
void    ld_global_lock(void);
void    ld_global_unlock(void);
/* Global lock held, in a long loop: a thread that waits for it goes first (os.h,
 * ld_lock_let_waiters_in). */
void    ld_global_let_waiters_in(void);
/* A superblock of class cls for heap (from the global heap's lists, else a new one from the
 * segments), or NULL when the OS has no memory. */
sb_t   *ld_global_take(heap_t *heap, unsigned cls);
/* An empty region of the fit tier that its heap did not keep: waits here for another heap's
 * tier (ld_global_take_region, newest first) or, a purge delay, for the purge, which gives it
 * to the segments (ld_global_release_empties). */
void    ld_global_put_region(sb_t *r);
sb_t   *ld_global_take_region(void);
/* Gives sb (detached from its heap) to the global heap. Global lock held. An empty
 * superblock waits a purge delay for a take of its class (global.c). */
void    ld_global_put_locked(sb_t *sb);
/* Empty superblocks that have waited a purge delay (all of them: `all`) back to the segments;
 * returns their bytes. For the purge (maintain.c), which calls it inside
 * ld_segment_purge_frees(true): they are purged as they go. */
size_t  ld_global_release_empties(uint64_t now, bool all);
uint64_t ld_global_next_expiry(void); /* when the oldest empty superblock will have waited a delay; 0: none */
/* A medium span of `bytes` is about to take chunks that the segments' dirty memory cannot
 * cover: empty superblocks waiting in the global heap go back first (dirty, not purged; at
 * most bytes / S + 1 of them), so that the span reuses resident pages rather than new ones. */
void    ld_global_release_for_span(size_t bytes);
void    ld_global_tidy(void);   /* collects announced frees of superblocks it holds, and its inbox */
bool    ld_global_try_tidy(uint32_t most); /* the same for `most` of each, if its lock is free */
/* A free of b (checked, tagged), a block of sb, which the global heap holds: onto sb's free
 * list under the global lock, as Hoard frees into heap 0 (seed 004 §3), if the lock is free
 * (no free waits for one: seed 002) and sb is still the global heap's. false: nothing done,
 * and the caller frees b as a remote free. A thread whose heap gave superblocks away while it
 * still held their blocks (a large heap freed in random order: the threshold gives back
 * partly used superblocks) frees them here at a lock each, where a remote free into one of
 * thousands of superblocks made a batch of one block each time (CAS, announcement). */
bool    ld_global_free(sb_t *sb, ld_block_t *b);
void    ld_global_validate(int *violations);
/* Free pages of partly used superblocks the global heap has held for a purge delay (all: every
 * one) given back (ld_sb_give_back_free_pages), until the looks have passed `budget` blocks;
 * returns the bytes. *more: some were left for the next run. For the purge. */
size_t  ld_global_give_back_free_pages(uint64_t now, bool all, size_t budget, bool *more);
void    ld_global_stats(int64_t *in_use, int64_t *held, size_t *taken_bytes, ld_class_figures_t *classes);
size_t  ld_global_dormant_bytes(void); /* pages given back from partly used superblocks, held still */
void    ld_global_reinit_lock(void);

/* x rounded up to a multiple of `to`, a power of two. */
static inline size_t ld_round_up(size_t x, size_t to) { return (x + to - 1) & ~(to - 1); }

/* ---- segments (segment.c): runs of S-sized chunks ---- */
/* A run of `chunks` chunks, S-aligned, or NULL (errno ENOMEM). *clean: every page of it is
 * zero (fresh or purged). touch: the bytes from the run's start the caller will use.
 * LD_SEGMENT_TAIL: the caller uses no byte past `touch` (a medium span's usable size), so old
 * pages past it may be purged while the run is in use, once it has lived a purge delay
 * (segment.c, "tails"). */
#define LD_SEGMENT_TAIL 1u
void   *ld_segment_alloc(size_t chunks, size_t touch, unsigned flags, bool *clean);
/* resident: how far the caller may have made the run's pages resident (its own writes). */
void    ld_segment_free(void *run, size_t chunks, size_t resident);
void    ld_segment_purge_frees(bool on); /* this thread's ld_segment_free purges at once (the purge) */
/* Grows the run at `run` from `chunks` to `new_chunks` in place when the chunks after it are
 * free; returns false otherwise. Shrinking always succeeds. touch: the bytes from the run's
 * start the caller now uses (the run leaves the list of tails whatever its size). */
bool    ld_segment_resize(void *run, size_t chunks, size_t new_chunks, size_t touch);
/* A run in use kept by its holder to hand out again without the lock (a medium span in a
 * thread's cache: cache.c), after its free retired it. Only a listed run's bounds change under
 * another thread (the purge of its tail); an unlisted one's are its holder's alone until it is
 * freed or resized. ld_segment_kept_reach: how far the run's resident pages may reach (its
 * bound, at least 1), its late mark cleared; or 0 if it is on the list of tails and must be
 * freed (the flag read clear, with acquire, says any purge of its tail is over), unless
 * `unlist`: then it is taken off the list, under the lock, and kept.
 * ld_segment_retouch: an unlisted run's new bound, `touch` bytes, as its holder hands it out
 * again to a user who will touch that many (more than its bound: only a bound that grows is
 * written). A bound more than half as far again as the user's bytes is marked for late
 * listing instead (below). */
size_t  ld_segment_kept_reach(void *run, bool owner, bool unlist, uint32_t *late_slot);
size_t  ld_segment_kept_reach_own(void *run, bool unlist, uint32_t *late_slot); /* owner true: its free's (inlined there) */
void    ld_segment_retouch(void *run, size_t touch);
/* Late tails. A holder that hands a kept run out again to a user whose bytes its old pages
 * reach more than half as far again as (cache.c) marks it (ld_segment_mark_excess, before the
 * pointer leaves it) instead of taking the lock to list it; its owner's thread, or the purge
 * for an owner out of its cache, later lists each run of `runs` still marked and still its
 * (span->owner == owner), under the lock, as ld_segment_alloc would have (ld_segment_list_late;
 * NULL entries and runs freed since are skipped). Anyone else clears the mark under the lock (a
 * free of the run by another thread, a resize: ld_segment_kept_reach, ld_segment_resize), so
 * that no run is listed once another thread may hand it out. With `owner` (the thread whose
 * heap the span's owner is; ld_segment_kept_reach_own for its free), ld_segment_kept_reach
 * clears the mark without the lock and gives the late_slot the mark was made with (else
 * UINT32_MAX; late_slot may be NULL). */
void    ld_segment_mark_excess(void *run, uint32_t late_slot);
void    ld_segment_list_late(void *const *runs, size_t n, const struct heap_s *owner);
/* Purges free runs idle for the purge delay (all: every free run) and unmaps segments that
 * are wholly free. Returns the bytes given back. */
size_t  ld_segment_purge(uint64_t now, bool all);
uint64_t ld_segment_next_expiry(void); /* when the oldest dirty run expires; 0: none */
size_t  ld_segment_dirty_bytes(void);  /* free chunks still resident, read without the lock */
void    ld_segment_validate(int *violations);
void    ld_segment_lock(void);
void    ld_segment_unlock(bool reinit);
typedef struct ld_segment_stats_s {
  size_t segments, bytes_free_dirty, bytes_free_clean, bytes_purged, bytes_refaulted;
  size_t bytes_tails_purged; /* old pages purged past runs in use (medium spans' tails) */
} ld_segment_stats_t;
void    ld_segment_stats(ld_segment_stats_t *out);

/* ---- medium and large spans (large.c) ----
 * Sizes and alignments come checked (ld_request_ok). */
/* *dirty: how many bytes from the returned pointer may hold old data (0: the block reads as
 * zero); calloc clears those only. owner: the heap a medium span goes back to when another
 * thread frees it (cache.c, "medium spans"; NULL: none); large spans have none. */
void   *ld_large_alloc(size_t size, size_t align, size_t *dirty, heap_t *owner);
/* A large span freed (cached or unmapped); a medium span freed back to its segment, not kept.
 * Each claims the span with a CAS of its kind: the second of two frees at once is reported. */
void    ld_large_free(sb_t *span);
void    ld_medium_free(sb_t *span);
/* Resizes a span in place (medium: neighbouring chunks; large: mremap); NULL if it cannot. */
void   *ld_large_realloc_in_place(sb_t *span, size_t size, int kind);
/* A large span moved to a bigger mapping without copying (mremap); NULL if it cannot. */
void   *ld_large_realloc_move(sb_t *span, size_t size, int kind);
/* A growing large span moved (mremap) onto the start of a cached span that holds the new
 * size and still has its pages, whose pages past the moved ones are reused as they are
 * (a buffer that doubles to 16 MiB again and again faulted every page of every round);
 * NULL if the cache holds none. */
void   *ld_large_realloc_cached(sb_t *span, size_t size, int kind);
size_t  ld_large_purge(uint64_t now, bool all);
uint64_t ld_large_next_expiry(void);
size_t  ld_large_bytes_in_use(void);
/* Large spans in use now, and the most in use at once, in spans and in bytes (malloc_stats). */
void    ld_large_peaks(size_t *spans_now, size_t *spans_peak, size_t *bytes_peak);
size_t  ld_large_bytes_cached(void);
size_t  ld_large_bytes_cached_dirty(void); /* cached spans not yet purged, read without the lock */
/* A medium span freed by the calling thread: marked freed with a CAS (of two frees of it at
 * once, one is reported as a double free; a later one finds it freed: alloc.c, free_span) and
 * taken out of the counts. Then kept by the thread (cache.c) or released. */
void    ld_medium_retire(sb_t *span);
/* A retired span back to its segment. */
void    ld_medium_release(sb_t *span);
/* Where malloc's block starts in a medium span (ld_large_alloc: the header rounded up to the
 * alignment), and the bytes from the span's start a malloc of `size` bytes touches (its
 * chunks: that rounded up to S). */
#define LD_MEDIUM_OFFSET ld_round_up(LD_SB_HEADER, LD_MIN_ALIGN)
size_t  ld_medium_touch(size_t size);
/* A retired span of `bytes` bytes of chunks, resident up to `reach` bytes, handed out again
 * for a malloc that touches `touch` bytes of it (ld_medium_touch), whose chunks it fits (the caller checked; old pages
 * past half as far again are the caller's to mark, cache.c), its owner `owner`, the calling
 * thread's heap. Its bytes may all hold old data. */
void   *ld_medium_reuse(sb_t *span, size_t bytes, size_t reach, size_t touch, heap_t *owner);
/* Medium spans counted by threads without a heap (the others count in their heap_t): chunks'
 * bytes and usable bytes. */
void    ld_medium_unowned(int64_t *bytes, int64_t *usable);
void    ld_large_lock(void);
void    ld_large_unlock(bool reinit);

/* ---- work due for the maintenance floor ----
 * The earliest time something should be purged. Lower files lower it when free memory
 * appears (ld_due_note) and return; alloc.c's slow paths and the purge thread compare it with
 * the clock and run the purge (maintain.c). Takes no lock, so it may be called anywhere. */
extern _Atomic uint64_t ld_due_ns;
extern _Atomic uint64_t ld_purge_delay_ns; /* LARDER_PURGE_DELAY_MS in ns (maintain.c keeps it) */
static inline uint64_t ld_purge_delay(void) { return atomic_load_explicit(&ld_purge_delay_ns, memory_order_relaxed); }
static inline void ld_due_lower_to(uint64_t t) {
  uint64_t cur = atomic_load_explicit(&ld_due_ns, memory_order_relaxed);
  while (t < cur && !atomic_compare_exchange_weak_explicit(&ld_due_ns, &cur, t, memory_order_relaxed, memory_order_relaxed)) {
  }
}
static inline void ld_due_note(uint64_t now) { ld_due_lower_to(now + ld_purge_delay()); }

/* Threads waiting for the purge run under way to end (maintain.c): a fork, whose prepare
 * handler must hold the purge, and malloc_trim. While one waits, the run stops at its next
 * step and its hand-overs yield nothing. A hand-over (os.h, ld_unlock_to_waiter) yields the
 * core until the waiting thread has the lock; with more runnable threads than cores a yield can
 * give a whole time slice away, and a run of a few hundred hand-overs then took a second or
 * more of wall time: a fork beside four busy threads on 2 cores waited up to 1.4 s for it
 * (glibc's longest 32 ms), malloc_trim up to 1.6 s before its own run began. */
extern _Atomic int ld_purge_waiters;
static inline bool ld_purge_hurried(void) { return atomic_load_explicit(&ld_purge_waiters, memory_order_relaxed) != 0; }
/* Whether the run's long loops stop here: a thread waits for the run to end, and the run is not
 * a trim's own (all), which goes to the end. */
static inline bool ld_purge_cut(bool all) { return !all && ld_purge_hurried(); }
/* A turn of one of the purge's long loops (every few purges): false when the loop is to stop,
 * a thread waiting for the run to end and the run not a trim's own (all), whose loops go on
 * without hand-overs; else the lock goes to a thread that waits for it (os.h), and true. What a
 * stopped loop leaves is still due: the next run takes it. After a drop one phase alone, the
 * empty superblocks' give-back (a madvise each), kept a fork waiting 0.55 s beside four
 * threads that took the segment lock for 32 KiB blocks (drop-wait --fork-every-ms). */
static inline bool ld_purge_turn(ld_lock_t *lock, bool all) {
  if (ld_purge_hurried()) return all;
  ld_lock_let_waiters_in(lock);
  return true;
}
/* The turn of a loop that is never cut (heap.c's give-aways, a heap at a time): a hand-over,
 * unless a thread waits for the run to end. */
static inline void ld_purge_let_waiters_in(ld_lock_t *lock) { (void)ld_purge_turn(lock, true); }
static inline void ld_purge_unlock_to_waiter(ld_lock_t *lock) {
  if (ld_purge_hurried()) ld_unlock(lock);
  else ld_unlock_to_waiter(lock);
}

/* ---- maintenance (maintain.c), entered from alloc.c, stats.c, wrappers.c, its thread ---- */
void    ld_maintain_init(void);                 /* start-up, once (any thread, any time) */
heap_t *ld_maintain_thread_heap(void);          /* the calling thread's heap, made on first use */
/* From the slow paths, with the coarse clock: has the purge run when due (by the purge thread,
 * or here in a process without one: maintain.c) and the thread's own
 * cache trim now and then; allocating: the caller is an allocation (not a free), where the
 * purge thread may be started. Nothing is due on nearly every call, so that test is inline
 * (four loads, no call: a refill or flush of 8 blocks paid about 45 instructions for the
 * call that found nothing); ld_maintain_poll_slow acts. */
extern _Atomic uint64_t ld_purge_thread_wake_ns; /* when the purge thread means to wake */
extern _Atomic int ld_purge_thread_running;
void    ld_maintain_poll_slow(heap_t *heap, uint64_t now, bool allocating);
static inline void ld_maintain_poll(heap_t *heap, uint64_t now, bool allocating) {
  uint64_t due = atomic_load_explicit(&ld_due_ns, memory_order_relaxed);
  /* (no deadline at all: the slow path sets one, for a thread that may stop calling; a
   * deadline before the purge thread's wake: the slow path wakes it) */
  if (LD_LIKELY(now < due && due != UINT64_MAX &&
                due >= atomic_load_explicit(&ld_purge_thread_wake_ns, memory_order_relaxed) &&
                now - heap->last_maintenance_ns < ld_purge_delay() &&
                (!allocating || atomic_load_explicit(&ld_purge_thread_running, memory_order_relaxed))))
    return;
  ld_maintain_poll_slow(heap, now, allocating);
}
void    ld_maintain_debug_validate(heap_t *heap); /* LARDER_DEBUG: at a bounded rate */
int     ld_maintain_trim(void);
/* Out of memory (a mapping refused): what the caches hold goes back to the segments and the OS
 * (the thread's bins, batches and kept medium spans, the empty superblocks of its heap and of the
 * global heap, the cached large spans); true if anything did, when the call is worth making
 * again. Work bounded by what was cached; a second call in a row finds nothing. */
bool    ld_maintain_reclaim(heap_t *heap);
int     ld_maintain_validate(void);
typedef struct ld_purge_stats_s {
  size_t thread_runs, thread_bytes, thread_starts;
  size_t call_runs; /* purge runs made by malloc and free calls (no purge thread) */
  size_t bins_emptied; /* idle threads' bins emptied by any purge run */
  size_t medium_emptied; /* idle threads' kept medium spans given back by any purge run */
  size_t runs_cut;     /* runs stopped early for a waiting fork or trim */
} ld_purge_stats_t;
void    ld_maintain_purge_stats(ld_purge_stats_t *out);
extern _Atomic unsigned ld_options_epoch;
extern _Atomic size_t ld_validations;

/* ---- stats.c ---- */
/* malloc_stats: glibc's lines with larder's figures, then larder's table. */
void    ld_stats_print_glibc_shape(int fd);
/* larder_stats_get's figures (out, unless NULL) and the first n size classes'
 * (larder_class_stats_get, unless classes is NULL), from one walk of the heaps and the global
 * heap, so that a table and its classes, or mallinfo's figures and its free blocks, tell of one
 * moment; returns the classes in use. */
struct larder_stats_s;
struct larder_class_stats_s;
size_t  ld_stats_gather(struct larder_stats_s *out, struct larder_class_stats_s *classes, size_t n);

/* ---- report.c ---- */
void ld_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LD_NORETURN void ld_fatal_bad_free(const char *what, const void *p);
/* p starts on one of sb's dormant units (sb_t, dormant). */
static inline bool ld_sb_in_dormant(const sb_t *sb, const void *p) {
  uint32_t dormant = __atomic_load_n(&sb->dormant, __ATOMIC_ACQUIRE);
  return LD_UNLIKELY(dormant != 0) && (dormant >> ld_sb_unit_of(sb, p) & 1);
}
/* A block starting on a dormant unit was free when its page went: its tag went with it. A take
 * may wake the superblock meanwhile: it writes the tags, then clears the mark (release), so a
 * mark read cleared is followed by a second look at the word (acquire: after it). The purge
 * sets the mark before the page goes: a tag read gone means the mark is there.
 * This alone is left for a block that leaves the ring of slow frees claimed (cache.c,
 * slow_free_leaves): that it starts a block of its class was checked as it came (alloc.c,
 * free_deferring), before its mark was written, and its word is the claimed word now, never
 * the free tag (a remote free: 8 fewer instructions, and no read of the header's layout). */
static inline void ld_check_claimed_free(const sb_t *sb, const void *p) {
  if (ld_sb_in_dormant(sb, p) || ld_block_is_free((const ld_block_t *)p)) ld_fatal_bad_free("double free", p);
}
/* A small block's own checks on a free, made wherever the free is taken (alloc.c's
 * free_checked, cache.c's remote free into an open batch): p starts one of sb's blocks and
 * does not carry the free tag. */
static inline void ld_check_small_free(const sb_t *sb, const void *p) {
  if (!ld_sb_is_block_start(sb, p)) ld_fatal_bad_free("invalid free (not the start of a block)", p);
  if (ld_block_is_free((const ld_block_t *)p)) ld_fatal_bad_free("double free", p);
  ld_check_claimed_free(sb, p);
}

#pragma GCC visibility pop

#endif
