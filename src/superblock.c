/* Size classes and superblocks: the layout of a superblock, taking its free blocks in
 * batches, and the remote list that other threads push batches onto without a lock (seed 002).
 *
 * A superblock is one S-sized chunk of a segment (segment.c), S-aligned, holding blocks of one
 * size class after a header (internal.h, sb_t). Its owner (a heap, under its lock) takes free
 * blocks from it into a thread's cache and puts them back in batches (heap.c); other threads
 * hand their frees of its blocks over in batches, one CAS each, on its remote list.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "os.h"

#include <string.h>

uint8_t ld_class_of_granule[LD_SMALL_LIMIT / 16 + 1];
uint8_t ld_class_aligned[LD_ALIGN_CLASS_SHIFTS][LD_CLASS_COUNT + 1];
uint32_t ld_class_size[LD_CLASS_COUNT];
/* Bytes of blocks one superblock of each class holds: Hoard's "a" counts these rather than S,
 * so that a heap of full superblocks has u == a even when blocks do not divide S evenly
 * (otherwise, for f below the tail waste, the invariant could never hold). */
int64_t ld_class_capacity_bytes[LD_CLASS_COUNT + 1];
uint32_t ld_class_capacity[LD_CLASS_COUNT];
ld_class_shape_t ld_class_shape[LD_CLASS_COUNT];

size_t ld_sb_size = 65536;
unsigned ld_sb_shift = 16;
unsigned ld_dormant_shift = 12;
uintptr_t ld_sb_mask = ~(uintptr_t)65535;
size_t ld_small_max = LD_SMALL_LIMIT;
uintptr_t ld_free_key;

#ifdef LARDER_HARDENED
uintptr_t ld_link_secret;
LD_NORETURN void ld_fatal_corrupt_list(const void *sb, const void *block) {
  ld_message("larder: free list of superblock %p corrupted after block %p (a write after free?)\n", sb, block);
  ld_fatal_bad_free("heap corruption detected at free block", block);
}
static __thread uint64_t carve_rng;
#endif

/* The first block sits at a multiple of the largest power of two dividing the block size
 * (up to 16 KiB), so that a class whose size is a multiple of an alignment gives aligned
 * blocks (larder_memalign). For the power-of-two classes this costs nothing: the header
 * already forces the first block past offset 0. */
static size_t sb_data_offset(uint32_t block_size) {
  size_t pow2 = (size_t)block_size & (~(size_t)block_size + 1);
  if (pow2 > LD_SMALL_LIMIT) pow2 = LD_SMALL_LIMIT;
  return pow2 < LD_SB_HEADER ? LD_SB_HEADER : pow2;
}

/* Blocks of this size a superblock holds. */
static uint32_t class_capacity(uint32_t size) {
  size_t first = sb_data_offset(size);
  return first < ld_sb_size ? (uint32_t)((ld_sb_size - first) / size) : 0;
}
/* The memory a block of this size costs once its superblock is full: the pages its superblock's
 * blocks lie on (the header's included; pages past the last block are never touched), over
 * the blocks. (Per 2^16 bytes of block, so that sizes compare; the class must fit S.) */
static uint64_t class_footprint(uint32_t size) {
  uint32_t capacity = class_capacity(size);
  size_t used = ld_round_up(sb_data_offset(size) + (size_t)capacity * size, ld_os_page_size());
  return ((uint64_t)used << 16) / capacity;
}
static void class_shape_set(unsigned k) {
  uint32_t size = ld_class_size[k];
  ld_class_capacity[k] = class_capacity(size);
  ld_class_capacity_bytes[k] = (int64_t)ld_class_capacity[k] * size;
  if (ld_class_capacity_bytes[k] <= 0) ld_class_capacity_bytes[k] = (int64_t)ld_sb_size; /* too big for this S: never used */
  ld_class_shape[k] = (ld_class_shape_t){(uint32_t)sb_data_offset(size), ld_class_capacity[k] * size, UINT64_MAX / size + 1};
}

void ld_classes_init(void) {
  unsigned cls = 0;
  for (uint32_t s = 16; s <= 128; s += 16) ld_class_size[cls++] = s;
  for (uint32_t base = 128; base < LD_SMALL_LIMIT; base *= 2)
    for (uint32_t step = 1; step <= 8; step++) ld_class_size[cls++] = base + step * (base / 8);
  _Static_assert(8 + 7 * 8 == LD_CLASS_FIXED, "the fixed classes");
  for (unsigned k = 0; k < LD_CLASS_FIXED; k++) class_shape_set(k);
  for (unsigned k = LD_CLASS_FIXED; k <= LD_CLASS_COUNT; k++) ld_class_capacity_bytes[k] = (int64_t)ld_sb_size; /* (not learned yet: a divisor) */
  unsigned c = 0;
  for (size_t g = 0; g <= LD_SMALL_LIMIT / 16; g++) {
    size_t size = g * 16;
    while (c < LD_CLASS_FIXED && ld_class_size[c] < size) c++;
    ld_class_of_granule[g] = (uint8_t)((size <= ld_small_max && c < LD_CLASS_FIXED) ? c : LD_CLASS_LARGE);
  }
  for (unsigned k = 0; k < LD_ALIGN_CLASS_SHIFTS; k++) {
    unsigned next = LD_CLASS_LARGE;
    ld_class_aligned[k][LD_CLASS_LARGE] = LD_CLASS_LARGE;
    for (unsigned i = LD_CLASS_FIXED; i-- > 0;) {
      if (ld_class_size[i] <= ld_small_max && ld_class_size[i] % (1u << k) == 0) next = i;
      ld_class_aligned[k][i] = (uint8_t)next;
    }
  }
}

/* ---- learned classes ----
 * A program whose memory is mostly one size just above a class's lower bound wastes up to
 * 12.5% of every block: sqlite's page cache asks for 1,032 bytes, which the 1,152-byte class
 * serves, 56 blocks to a superblock where 62 of 1,040 would fit (docs/results.md: the real
 * program's peak RSS 104.3 -> 97.8 MB and its time 2.89 -> 2.72 s with exact classes). glibc's
 * best fit gives such a program its exact size; a fixed table cannot. So the slow path of a
 * small malloc counts, per heap and class, which size its refills asked for (alloc.c,
 * class_vote), and a size that made at least three quarters of a round of 16 refills becomes
 * a class of its own: the granules from the class below up to it are served by the new class
 * from then on. Only where a block of the new class costs at least 1/17 less memory (the pages
 * its full superblock touches, over its blocks: class_footprint; sqlite's 4,368 bytes fit 14
 * blocks to a superblock as the 4,608-byte class does, but leave its last page untouched; a
 * size that gains less does not pay for another partly used superblock per thread), and at
 * most learned_classes of them (LD_CLASS_LEARNED_MAX): each class costs a heap a bin and a
 * partly used superblock. Blocks already handed out keep their class; each heap's bin_of
 * follows the new table at its next refill (cache.c, ld_cache_classes_sync). The lock is only
 * tried: a thread that finds another learning, or a fork child of a process that was, leaves
 * the size to a later round. */
unsigned ld_classes_learned;
uint8_t ld_granule_no_gain[LD_SMALL_LIMIT / 16 + 1];
static ld_lock_t learn_lock = LD_LOCK_INIT;

void ld_class_learn(size_t g) {
  if (g == 0 || g * 16 > ld_small_max || !ld_trylock(&learn_lock)) return;
  unsigned n = ld_classes_learned, now = ld_granule_class(g), k = LD_CLASS_FIXED + n;
  uint32_t size = (uint32_t)g * 16;
  bool gains = now < LD_CLASS_COUNT && ld_class_size[now] != size && ld_class_capacity[now] && class_capacity(size) &&
               (uint64_t)class_footprint(size) * 17 <= (uint64_t)class_footprint(ld_class_size[now]) * 16;
  /* (for good: a class learned later between g and its class only brings g's nearer) */
  if (!gains) __atomic_store_n(&ld_granule_no_gain[g], 1, __ATOMIC_RELAXED);
  if (gains && n < LD_CLASS_LEARNED_MAX && n < LD_LEARNED_CLASSES_MAX()) {
    ld_class_size[k] = size;
    class_shape_set(k);
    /* Aligned requests above 16 bytes go to the class's fixed neighbours: a thread whose bins
     * do not follow the table yet serves k's granules from the class above it (aligned_fast,
     * alloc.c), which need not be a multiple of k's alignment if a learned class lies between. */
    for (unsigned j = 0; j < LD_ALIGN_CLASS_SHIFTS; j++)
      ld_class_aligned[j][k] = (1u << j) <= LD_MIN_ALIGN ? (uint8_t)k : ld_class_aligned[j][now];
    /* published: the tables above are set before a reader can find k (ld_granule_class) */
    for (size_t h = g; h > 0 && ld_granule_class(h) == now; h--) __atomic_store_n(&ld_class_of_granule[h], (uint8_t)k, __ATOMIC_RELEASE);
    __atomic_store_n(&ld_classes_learned, n + 1, __ATOMIC_RELEASE);
  }
  ld_unlock(&learn_lock);
}

void ld_sb_format(sb_t *sb, unsigned cls) {
  uint32_t bs = ld_class_size[cls];
  sb->free_list = sb->inbox_list = NULL;
  sb->inbox_count = 0;
  LD_OWNER_SET(sb->used, 0);
  sb->remote_seen = 0;
  LD_OWNER_SET(sb->block_size, bs);
  sb->capacity = ld_class_capacity[cls];
  sb->span = ld_class_shape[cls].span;
  sb->divisor_magic = ld_class_shape[cls].divisor_magic;
  sb->data = (char *)sb + ld_class_shape[cls].first;
  LD_OWNER_SET(sb->bump, sb->data);
  sb->magic = LD_SB_MAGIC;
  sb->size_class = (uint8_t)cls;
  sb->kind = LD_KIND_SMALL;
  sb->group = LD_GROUP_NONE;
  sb->purged = 0;
  __atomic_store_n(&sb->dormant, 0, __ATOMIC_RELEASE);
  sb->dormant_blocks = 0;
  sb->scanned_used = -1;
  sb->next = sb->prev = sb->pending_next = NULL;
  atomic_store_explicit(&sb->remote, 0, memory_order_relaxed);
  /* its class in the ownership map, for other threads' frees (addrmap.h, ld_addrmap_small_class) */
  ld_addrmap_set_small_class(sb, cls + 1);
}

/* ---- the remote list word ---- */
static inline uint64_t remote_count(uint64_t w) { return (w >> LD_REMOTE_COUNT_SHIFT) & LD_REMOTE_COUNT_MASK; }
static inline ld_block_t *remote_head(const sb_t *sb, uint64_t w) {
  uint64_t off = w >> LD_REMOTE_HEAD_SHIFT;
  return off ? (ld_block_t *)((char *)sb + off) : NULL;
}

/* Carves up to `want` untouched blocks (a bin's refill: at most half a bin, 8 KiB): memory is
 * touched as it is needed, so a superblock's pages become resident a few at a time, and a
 * purged page is not written before a block on it is handed out. Each carved block is tagged,
 * as every free block is, so that a free of a block still in a cache is caught as a double
 * free. It stops short of `want` only at the superblock's end. */
static unsigned sb_carve(sb_t *sb, void **out, unsigned want) {
  uint32_t left = sb->capacity - ld_sb_carved(sb);
  unsigned n = want < left ? want : left;
  size_t size = sb->block_size;
  /* A bin hands out its last slot first: the lowest address goes last, so that malloc walks a
   * fresh page upward, the order prefetchers follow. */
  char *p = sb->bump + (size_t)n * size;
  LD_OWNER_SET(sb->bump, sb->bump + (size_t)n * size); /* (read by a free outside the owner's lock: alloc.c, free_small_own) */
#ifndef LARDER_HARDENED
  /* One pass, with the key read once: a tag's store could alias ld_free_key as far as the
   * compiler knows (threadtest at 1,000 B carves 8 blocks a refill: 87 -> 40 instructions);
   * unrolled, the loop's own test and jump are paid once in four blocks (threadtest, which
   * carves every block again each round: 137.8 -> 136.0 instructions a pair) */
  const uintptr_t key = ld_free_key;
#pragma GCC unroll 4
  for (unsigned i = 0; i < n; i++) {
    p -= size;
    out[i] = p;
    ((ld_block_t *)p)->tag = key ^ (uintptr_t)p; /* ld_tag(p) */
  }
#else
  for (unsigned i = 0; i < n; i++) out[i] = p -= size;
  /* Hardened: the blocks of each carved page are handed out in a random order, so that the
   * layout of consecutive allocations cannot be predicted. */
  if (!carve_rng) carve_rng = (ld_link_secret ^ (uintptr_t)&carve_rng) | 1;
  for (unsigned i = n; i > 1; i--) {
    carve_rng ^= carve_rng << 13, carve_rng ^= carve_rng >> 7, carve_rng ^= carve_rng << 17;
    unsigned j = (unsigned)(carve_rng % i);
    void *t = out[i - 1];
    out[i - 1] = out[j];
    out[j] = t;
  }
  for (unsigned i = 0; i < n; i++) {
    ((ld_block_t *)out[i])->tag = ld_tag(out[i]);
    ld_bin_seal(out[i]);
  }
#endif
  return n;
}

/* A superblock of which every carved block is on its free list (none handed out, in a cache,
 * deferred, or on its way back from another thread: used counts all of those, and the remote
 * and inbox lists are empty) starts again from its first block, carved at the bump pointer, so
 * that the take does not walk its free list, a chain of dependent loads of lines its own frees
 * wrote long ago (threadtest's rounds: every superblock empties, then refills). Nothing points
 * at its blocks any more but that list; the blocks keep their tags, so a free of one now is
 * still caught (above the bump pointer: "never allocated"), and the fill makes the range above
 * the bump pointer the free fast path's to refuse again (heap.c, ld_heap_fill). The owner,
 * under its lock. */
static inline bool sb_restart_if_free(sb_t *sb) {
  if (sb->used != 0 || sb->free_list == NULL || sb->remote_seen != 0 || sb->inbox_list != NULL) return false;
  sb->free_list = NULL;
  LD_OWNER_SET(sb->bump, sb->data);
  return true;
}

/* Free blocks the owner may take from its lists: the carved ones not in use. A list longer
 * than that has a block on it twice (two threads freed one block at once) or was overwritten. */
static inline int32_t sb_listed_blocks(const sb_t *sb) {
  return (int32_t)ld_sb_carved(sb) - sb->used - sb->remote_seen;
}

/* The most blocks one take prefetches from batch hints: a 64 KiB superblock of 64-byte blocks,
 * 64 KiB of lines, which stay in the core's L2 (512 KiB here) until the walks and the mallocs
 * reach them. At 128, the refills after the first walked the rest of a long list a line at a
 * time. */
#define HINT_PREFETCH_MAX 1024

/* Prefetches the blocks of the remote list just taken, batch after batch, from the hints their
 * freers wrote (internal.h, ld_batch_hint_t): the walk that follows then finds its lines
 * arriving together instead of one after another. Everything read is checked to lie in sb,
 * and nothing is written: a stale or overwritten hint only prefetches the wrong lines. */
static uint64_t remote_prefetch(sb_t *sb, const ld_block_t *head, uint64_t total) {
  unsigned room = ld_batch_hint_room(sb->block_size);
  if (!room) return 0;
  uintptr_t units = ld_sb_size >> 4;
  uint64_t seen = 0, asked = 0; /* blocks passed; blocks whose lines were asked for */
  bool batch_start = true;        /* head starts a batch (else a hint block listed already) */
  unsigned next_batch = 0;        /* the batch after this one, from its first block's hint */
  while (head && seen < total && seen < HINT_PREFETCH_MAX) {
    const ld_batch_hint_t *hint = (const ld_batch_hint_t *)head;
    unsigned count = hint->count, last = hint->last;
    if (count == 0 || count > LD_REMOTE_BATCH || last >= units || last < (LD_SB_HEADER >> 4)) break;
    if (batch_start) next_batch = hint->next_batch;
    unsigned n = count - 1 < room ? count - 1 : room;
    for (unsigned i = 0; i < n; i++) {
      unsigned off = hint->after_first[i];
      if (off >= units) return asked;
      ld_prefetch_for_write(ld_batch_block(sb, off));
    }
    asked += batch_start + n; /* the batch's first block, read, and the blocks listed */
    if (count - 1 > room) { /* the first block listed lists the next ones (cache.c, batch_hint_write) */
      head = ld_batch_block(sb, hint->after_first[0]);
      seen += n;
      batch_start = false;
      continue;
    }
    batch_start = true;
    seen += count;
    /* the next batch starts after this one's last block, as its first block's hint says (the
     * last block's line is asked for, not waited for; 0: this batch was pushed first) */
    ld_prefetch_for_write(ld_batch_block(sb, last));
    if (next_batch == 0 || next_batch >= units || next_batch < (LD_SB_HEADER >> 4)) break;
    head = ld_batch_block(sb, next_batch);
  }
  return asked < total ? asked : total;
}

/* The front of the first batch of sb's inbox list, k of its `count` blocks (0 < k < count),
 * for a bin with room for k: the batch's first block and the k - 1 after it in its chain, from
 * its hint, which must list the whole batch (one hint block) and check out as take_hinted's
 * do. The rest of the batch stays at the front of the list, its chain unchanged, and its new
 * first block (a free block, not handed out) gets the hint of what is left. A bin holds
 * LD_BIN_BYTES / size blocks rounded down and a batch closes at LD_BIN_BYTES rounded up (14
 * and 15 at 1,152 B): without this, such a batch was walked block by block, each line last
 * written on the freer's core (on remote-free's 16 B-1 KiB mix two thirds of the blocks, 15%
 * of the process's time in that walk). false: nothing taken (the walk will have the batch). */
static LD_NOINLINE bool take_hinted_front(sb_t *sb, void **out, const ld_batch_hint_t *first, unsigned count, unsigned k) {
  unsigned listed = count - 1;
  if (listed > ld_batch_hint_room(sb->block_size) || ld_batch_hint_check(first, listed) != first->check ||
      first->after_first[0] != first->last)
    return false;
  for (unsigned i = 0; i < listed; i++) {
    ld_block_t *b = ld_batch_block(sb, first->after_first[i]);
    if ((char *)b >= sb->bump || !ld_sb_is_block_start(sb, b)) return false; /* a carved block */
  }
  /* after_first[] runs from the batch's last block (0) to the one after its first (listed - 1) */
  out[0] = (void *)first;
  for (unsigned j = 1; j < k; j++) {
    ld_block_t *b = ld_batch_block(sb, first->after_first[listed - j]);
    ld_prefetch_for_write(b);
    out[j] = b;
  }
  unsigned left = count - k;
  ld_batch_hint_t *rest = (ld_batch_hint_t *)ld_batch_block(sb, first->after_first[listed - k]);
  rest->count = (uint16_t)left;
  rest->last = first->last;
  rest->next_batch = first->next_batch;
  memcpy(rest->after_first, first->after_first, (left - 1) * sizeof(uint16_t)); /* two blocks: no overlap */
  rest->check = ld_batch_hint_check(rest, left - 1);
  sb->inbox_list = (ld_block_t *)rest;
  return true;
}

/* Whole batches from the front of sb's inbox list, their blocks' addresses read from their
 * hints instead of from the chain (internal.h, ld_batch_hint_t): a refill of a producer's
 * class then reads one line per hint block, a line per `room` blocks, where the walk waited
 * for every block's line, last written on the freer's core (free-contention, 64-byte blocks,
 * one worker, with the host placing the two vCPUs far apart: 1.42x the frees per second; the
 * blocks' lines are prefetched and arrive while the mallocs that hand them out go on). A batch
 * is taken (whole, or its front: below) only when every hint block's check holds, every place
 * listed is a carved block, and its last block is the one the first hint names; else it and the batches
 * after it are left to the walk, which checks each block's tag and link. The tags of blocks
 * taken so are not read here (a write after free over a block's first 16 bytes is then not
 * seen when it is handed out again); the free that tagged each checked it, and a second free
 * of one still finds its tag. out[] holds n blocks already and has room for `most`; of a batch
 * that does not fit whole the front is taken, as much as fits (take_hinted_front, when one
 * hint block lists the batch), else it is left for the next fill, which then brings fewer
 * than `want` (short_of_room). Returns the new count. */
static unsigned take_hinted(sb_t *sb, void **out, unsigned n, unsigned want, unsigned most, ld_take_counts_t *counts) {
  unsigned room = ld_batch_hint_room(sb->block_size);
  while (room && n < want && sb->inbox_list) {
    ld_block_t *head = sb->inbox_list;
    const ld_batch_hint_t *first = (const ld_batch_hint_t *)head, *hint = first;
    unsigned count = first->count;
    if (count == 0 || count > LD_REMOTE_BATCH || (int32_t)count > sb->inbox_count) break;
    if (n + count > most) { /* no room for it whole: its front, or the fill makes do with what it has */
      unsigned k = most - n;
      if (k && take_hinted_front(sb, out + n, first, count, k)) {
        sb->inbox_count -= (int32_t)k;
        LD_OWNER_SET(sb->used, sb->used + (int32_t)k);
        n += k;
        counts->hinted += k;
        counts->hint_taken += k;
      }
      counts->short_of_room = n != 0;
      break;
    }
    unsigned got = 1, left = count, last = ld_batch_offset(sb, head);
    out[n] = head;
    for (;;) {
      unsigned listed = left - 1 < room ? left - 1 : room;
      if (ld_batch_hint_check(hint, listed) != hint->check) return n;
      for (unsigned i = 0; i < listed; i++) {
        ld_block_t *b = ld_batch_block(sb, hint->after_first[i]);
        if ((char *)b >= sb->bump || !ld_sb_is_block_start(sb, b)) return n; /* a carved block */
        ld_prefetch_for_write(b);
        out[n + got++] = b;
      }
      if (listed) last = hint->after_first[0]; /* the farthest listed: the batch's last, at the end */
      if (left - 1 <= room) break;
      /* the farthest listed lists the blocks after it (cache.c, batch_hint_write) */
      hint = (const ld_batch_hint_t *)ld_batch_block(sb, hint->after_first[0]);
      left -= room;
      if (hint->count != left) return n;
    }
    if (last != first->last) return n;
    /* the next batch: the last block's link, the chain's truth (its line was asked for when
     * the message was read: heap.c, heap_process_inbox) */
    sb->inbox_list = ld_next(ld_batch_block(sb, last));
    sb->inbox_count -= (int32_t)count;
    LD_OWNER_SET(sb->used, sb->used + (int32_t)count);
    n += count;
    counts->hinted += count;
    counts->hint_taken += count;
  }
  return n;
}

unsigned ld_sb_take_blocks(sb_t *sb, void **out, unsigned want, unsigned most, ld_take_counts_t *counts) {
  unsigned n = 0;
  counts->restarted = sb_restart_if_free(sb);
  for (int pass = 0; pass < 3 && n < want; pass++) {
    int32_t listed = sb_listed_blocks(sb);
    unsigned start = n;
    /* The walk stops after `listed` blocks: a list that goes on past them has a block on it
     * twice (two threads freed it at once) or a link overwritten after free into a cycle,
     * which the test after the loop reports, naming the block the walk would have taken next
     * (the one met twice, when a block's link points back at itself). */
    unsigned stop = listed <= 0 ? n : (unsigned)listed < want - n ? n + (unsigned)listed : want;
    ld_block_t *b = sb->free_list;
    /* (a do-while that tests b itself: with `b && n < stop` as one loop condition, GCC kept b's
     * test as a flag, 14 instructions a block against 13, threadtest 140.8 against 138.2 a pair;
     * the outer loop runs once, but written as an if, GCC's layout cost tt-1000 3.4 a pair) */
    void **to = out + n, **end = out + stop;
    while (b && to < end) {
      do {
        /* The block's line is read for its link anyway: its tag is checked on the way. */
        if (LD_UNLIKELY(!ld_block_is_free(b))) ld_fatal_bad_free("free block written after free (use after free), or double free", b);
        *to++ = b;
        ld_block_t *next = ld_next(b);
        ld_bin_seal(b);
        b = next;
      } while (to < end && LD_LIKELY(b != NULL));
    }
    n = (unsigned)(to - out);
    if (LD_UNLIKELY(b && n < want))
      ld_fatal_bad_free("free list longer than its free blocks (a block freed twice at once, or a free block's link "
                        "overwritten: use after free)",
                        b);
    sb->free_list = b;
    LD_OWNER_SET(sb->used, sb->used + (int32_t)(n - start));
    if (n == want || pass == 2) break;
    if (sb->inbox_list) n = take_hinted(sb, out, n, want, most, counts);
    if (n >= want || counts->short_of_room) break;
    if (sb->inbox_list) { /* the free list is empty: the batches from the inbox become it */
      sb->free_list = sb->inbox_list;
      counts->hinted += remote_prefetch(sb, sb->free_list, (uint64_t)sb->inbox_count);
      sb->inbox_list = NULL;
      sb->inbox_count = 0;
      continue;
    }
    /* The free list is empty: the remote list becomes it, taken whole (the announced flag
     * stays with whoever holds sb on a pending list, the watched flag with the owner). */
    uint64_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed);
    do {
      if (remote_count(old) == 0) break;
    } while (!atomic_compare_exchange_weak_explicit(&sb->remote, &old, old & (LD_REMOTE_ANNOUNCED | LD_REMOTE_WATCHED),
                                                    memory_order_acquire, memory_order_relaxed));
    uint64_t count = remote_count(old);
    if (count == 0) break;
    /* used counts the blocks pushed since the owner last looked; remote_seen the others */
    counts->remote_accounted += (int32_t)(count - (uint64_t)sb->remote_seen);
    LD_OWNER_SET(sb->used, sb->used - (int32_t)(count - (uint64_t)sb->remote_seen));
    LD_OWNER_SET(sb->remote_seen, 0);
    sb->free_list = remote_head(sb, old);
    counts->hinted += remote_prefetch(sb, sb->free_list, count);
  }
  if (n < want && !counts->short_of_room) { /* (short of room: free blocks wait; carve none) */
    unsigned carved = sb_carve(sb, out + n, want - n);
    LD_OWNER_SET(sb->used, sb->used + (int32_t)carved);
    n += carved;
  }
  return n;
}

/* Counts the blocks pushed since the owner last looked, given the remote word `old`. */
static int account_word(sb_t *sb, uint64_t old) {
  int32_t count = (int32_t)remote_count(old);
  int32_t fresh = count - sb->remote_seen;
  if (fresh <= 0) return 0;
  if (LD_UNLIKELY(fresh > sb->used)) ld_fatal_bad_free("double free (more blocks freed than in use) in the superblock", sb);
  LD_OWNER_SET(sb->remote_seen, count);
  LD_OWNER_SET(sb->used, sb->used - fresh);
  return fresh;
}

/* Clearing the announced flag releases: the owner's read of sb->pending_next (heap.c) happens
 * before the next announcer's write of it, which acquires through the remote word. */
int ld_sb_account_remote(sb_t *sb, bool clear_announce) {
  uint64_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed);
  if (clear_announce)
    while ((old & LD_REMOTE_ANNOUNCED) &&
           !atomic_compare_exchange_weak_explicit(&sb->remote, &old, old & ~LD_REMOTE_ANNOUNCED, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
    }
  return account_word(sb, old);
}

/* (only the owner, under its heap's lock, sets or clears the flag: a plain read tells it) */
bool ld_sb_is_watched(const sb_t *sb) {
  return (atomic_load_explicit(&((sb_t *)sb)->remote, memory_order_relaxed) & LD_REMOTE_WATCHED) != 0;
}

void ld_sb_watch(sb_t *sb) { atomic_fetch_or_explicit(&sb->remote, LD_REMOTE_WATCHED, memory_order_relaxed); }

/* A push that saw the flag set announced nothing and is counted here; one that finds it
 * cleared announces as usual. The two meet on the remote word, so none is missed. */
int ld_sb_unwatch(sb_t *sb) {
  uint64_t old = atomic_fetch_and_explicit(&sb->remote, ~LD_REMOTE_WATCHED, memory_order_acq_rel);
  return account_word(sb, old);
}

bool ld_sb_is_announced(const sb_t *sb) {
  return (atomic_load_explicit(&((sb_t *)sb)->remote, memory_order_acquire) & LD_REMOTE_ANNOUNCED) != 0;
}

bool ld_sb_push_remote_batch(sb_t *sb, ld_block_t *head, ld_block_t *tail, uint32_t n) {
  uint64_t head_word = (uint64_t)((char *)head - (char *)sb) << LD_REMOTE_HEAD_SHIFT;
  uint64_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed), next;
  ld_batch_hint_t *hint = ld_batch_hint_room(sb->block_size) ? (ld_batch_hint_t *)head : NULL;
  do {
    ld_block_t *below = remote_head(sb, old);
    ld_set_next(tail, below);
    if (hint) hint->next_batch = below ? ld_batch_offset(sb, below) : 0;
    uint64_t flags = old & (LD_REMOTE_ANNOUNCED | LD_REMOTE_WATCHED);
    next = head_word | ((remote_count(old) + n) << LD_REMOTE_COUNT_SHIFT) | (flags ? flags : LD_REMOTE_ANNOUNCED);
  } while (!atomic_compare_exchange_weak_explicit(&sb->remote, &old, next, memory_order_acq_rel, memory_order_relaxed));
  return (old & (LD_REMOTE_ANNOUNCED | LD_REMOTE_WATCHED)) == 0;
}

void ld_sb_announce(sb_t *sb) {
  struct heap_s *owner = atomic_load_explicit(&sb->owner, memory_order_acquire);
  sb_t *head = atomic_load_explicit(&owner->pending, memory_order_relaxed);
  do {
    sb->pending_next = head;
  } while (!atomic_compare_exchange_weak_explicit(&owner->pending, &head, sb, memory_order_release, memory_order_relaxed));
}

sb_t *ld_sb_pending_take(struct heap_s *owner) {
  if (!atomic_load_explicit(&owner->pending, memory_order_relaxed)) return NULL;
  return atomic_exchange_explicit(&owner->pending, NULL, memory_order_acquire);
}

/* ---- the inbox (internal.h, ld_message_t) ---- */

unsigned ld_inbox_push_many(struct heap_s *owner, const ld_message_t *messages, unsigned k, struct heap_s *self) {
  uint32_t seen;
  if (self && self->inbox_seen_owner == owner) {
    seen = self->inbox_seen_head;
  } else {
    seen = atomic_load_explicit(&owner->inbox_head, memory_order_acquire);
    if (self) self->inbox_seen_owner = owner, self->inbox_seen_head = seen;
  }
  uint32_t pos = atomic_load_explicit(&owner->inbox_tail, memory_order_relaxed), take;
  for (;;) {
    uint32_t used = pos - seen;
    if (used + k > LD_INBOX_SLOTS) {
      /* the head seen may be behind: read it again (acquire: the reader is done with the
       * messages the slots held a pass ago) */
      seen = atomic_load_explicit(&owner->inbox_head, memory_order_acquire);
      if (self) self->inbox_seen_head = seen;
      /* the tail again, after the head: never behind it */
      pos = atomic_load_explicit(&owner->inbox_tail, memory_order_relaxed);
      used = pos - seen;
      if (used >= LD_INBOX_SLOTS) return 0; /* full */
    }
    take = k < LD_INBOX_SLOTS - used ? k : LD_INBOX_SLOTS - used;
    if (atomic_compare_exchange_weak_explicit(&owner->inbox_tail, &pos, pos + take, memory_order_relaxed, memory_order_relaxed))
      break;
  }
  for (uint32_t i = 0; i < take; i++) {
    ld_message_t *m = &owner->inbox[(pos + i) & (LD_INBOX_SLOTS - 1)];
    m->head = messages[i].head;
    m->tail_offset = messages[i].tail_offset;
    m->count = messages[i].count;
    /* release: the batch's links and tags, written by this thread, go with it */
    atomic_store_explicit(&m->seq, (uint16_t)(pos + i + 1), memory_order_release);
  }
  return take;
}

bool ld_inbox_take(struct heap_s *heap, ld_message_t *out) {
  ld_message_t *m = ld_inbox_next(heap);
  if (!m) return false;
  out->head = m->head;
  out->tail_offset = m->tail_offset;
  out->count = m->count;
  /* release: the copy above is done before a writer may claim the slot again */
  atomic_store_explicit(&heap->inbox_head, atomic_load_explicit(&heap->inbox_head, memory_order_relaxed) + 1,
                        memory_order_release);
  return true;
}

uint32_t ld_inbox_waiting(const struct heap_s *heap) {
  struct heap_s *h = (struct heap_s *)heap;
  return atomic_load_explicit(&h->inbox_tail, memory_order_acquire) - atomic_load_explicit(&h->inbox_head, memory_order_acquire);
}

void ld_inbox_after_fork(struct heap_s *heap) {
  uint32_t tail = atomic_load_explicit(&heap->inbox_tail, memory_order_relaxed);
  for (uint32_t pos = atomic_load_explicit(&heap->inbox_head, memory_order_relaxed); pos != tail; pos++) {
    ld_message_t *m = &heap->inbox[pos & (LD_INBOX_SLOTS - 1)];
    if (atomic_load_explicit(&m->seq, memory_order_relaxed) == (uint16_t)(pos + 1)) continue; /* written */
    /* claimed by a thread the child does not have: its batch is still in that thread's buffer,
     * which the child's purge sends (cache.c) */
    m->count = 0;
    atomic_store_explicit(&m->seq, (uint16_t)(pos + 1), memory_order_relaxed);
  }
}

sb_t *ld_sb_deliver_message(struct heap_s *reader, const ld_message_t *m) {
  if (!m->count) return NULL; /* (a fork's) */
  sb_t *sb = ld_sb_of(m->head);
  ld_block_t *tail = ld_message_tail(m);
  if (atomic_load_explicit(&sb->owner, memory_order_acquire) != reader) {
    if (ld_sb_push_remote_batch(sb, m->head, tail, m->count)) ld_sb_announce(sb);
    return NULL;
  }
  if (LD_UNLIKELY((int32_t)m->count > sb->used)) ld_fatal_bad_free("double free (more blocks freed than in use) in the superblock", sb);
#ifdef LARDER_HARDENED
  /* the tail's link may be written over below: a write after free into it is caught here, as
   * the walk catches one into any other block of the batch */
  if (ld_next(tail) != NULL || !ld_block_is_free(tail)) ld_fatal_corrupt_list(sb, tail);
#endif
  /* In front of the batches taken before, linked as a push onto the remote list links them.
   * The first needs no link (its chain ends at its tail, and the prefetch stops after it), so
   * an owner that reads each batch as it comes writes neither of its lines here. */
  ld_block_t *below = sb->inbox_list;
  if (below) {
    ld_set_next(tail, below);
    if (ld_batch_hint_room(sb->block_size)) ((ld_batch_hint_t *)m->head)->next_batch = ld_batch_offset(sb, below);
  }
  sb->inbox_list = m->head;
  sb->inbox_count += m->count;
  LD_OWNER_SET(sb->used, sb->used - (int32_t)m->count);
  return sb;
}

/* ---- free pages of partly used superblocks (global.c) ---- */

/* The units that the block at offset `start` (from sb) of `size` bytes lies on. */
static inline void block_units(uintptr_t start, uint32_t size, unsigned *first, unsigned *last) {
  *first = (unsigned)(start >> ld_dormant_shift);
  *last = (unsigned)((start + size - 1) >> ld_dormant_shift);
}

/* Counts, for each unit, the free blocks of one list on it into have[]; false: the list holds
 * something other than free carved blocks, or more than `most`. */
static bool count_listed(const sb_t *sb, const ld_block_t *head, uint16_t *have, int32_t *seen, int32_t most) {
  for (const ld_block_t *b = head; b; b = ld_next(b)) {
    if (!ld_sb_is_block_start(sb, b) || (const char *)b >= sb->bump || !ld_block_is_free(b) || ++*seen > most)
      return false;
    unsigned first, last;
    block_units((uintptr_t)b - (uintptr_t)sb, sb->block_size, &first, &last);
    for (unsigned k = first; k <= last; k++) have[k]++;
  }
  return true;
}

/* Moves the blocks of a list that do not start on `going` onto *kept; returns how many did. */
static int32_t relist(const sb_t *sb, const ld_block_t *head, uint32_t going, ld_block_t **kept) {
  int32_t gone = 0;
  for (ld_block_t *b = (ld_block_t *)head, *next; b; b = next) {
    next = ld_next(b);
    if (going >> ld_sb_unit_of(sb, b) & 1) {
      gone++;
    } else {
      ld_set_next(b, *kept);
      *kept = b;
    }
  }
  return gone;
}

size_t ld_sb_give_back_free_pages(sb_t *sb) {
  sb->scanned_used = sb->used;
  /* Only a sparse superblock: in a denser one few units are wholly free, and the look costs
   * as much. */
  if (!ld_sb_sparse(sb)) return 0;
  unsigned units = (unsigned)(ld_sb_size >> ld_dormant_shift);
  uint16_t need[32] = {0}, have[32] = {0}; /* carved blocks on each unit; free ones */
  const uintptr_t base = (uintptr_t)sb;
  const uint32_t size = sb->block_size, carved = ld_sb_carved(sb);
  /* Every carved block: its units need it free; one that starts on a dormant unit is. One pass
   * of arithmetic, no block read (at most S / 16 blocks: a look is bounded by a constant). */
  for (uint32_t i = 0; i < carved; i++) {
    unsigned first, last;
    block_units((uintptr_t)sb->data + (uintptr_t)i * size - base, size, &first, &last);
    bool free_already = sb->dormant >> first & 1;
    for (unsigned k = first; k <= last; k++) {
      need[k]++;
      have[k] += free_already;
    }
  }
  int32_t listed = 0, most = (int32_t)carved - sb->used - sb->remote_seen - sb->dormant_blocks;
  if (most <= 0 || !count_listed(sb, sb->free_list, have, &listed, most) ||
      !count_listed(sb, sb->inbox_list, have, &listed, most) || listed != most)
    return 0;
  uint32_t going = 0;
  for (unsigned k = 1; k < units; k++) /* (unit 0 holds the header) */
    if (need[k] && have[k] == need[k] && !(sb->dormant >> k & 1)) going |= (uint32_t)1 << k;
  /* and only when half its units or more go (those gone already count) */
  if (!going || (unsigned)__builtin_popcount(going | sb->dormant) * 2 < units) return 0;
  /* The lists lose the blocks that start on the units going (their links are about to read as
   * zero); the rest become one free list (the batches' hints go: a take walks the list). */
  ld_block_t *kept = NULL;
  int32_t gone = relist(sb, sb->free_list, going, &kept) + relist(sb, sb->inbox_list, going, &kept);
  sb->free_list = kept;
  sb->inbox_list = NULL;
  sb->inbox_count = 0;
  sb->dormant_blocks += gone;
  /* Marked before the pages go: a second free of one of their blocks finds the mark when it no
   * longer finds the tag (ld_check_small_free). */
  __atomic_store_n(&sb->dormant, sb->dormant | going, __ATOMIC_RELEASE);
  size_t unit = (size_t)1 << ld_dormant_shift, bytes = 0;
  for (unsigned k = 1; k < units;) {
    if (!(going >> k & 1)) {
      k++;
      continue;
    }
    unsigned end = k;
    while (end < units && (going >> end & 1)) end++;
    /* (refused: the pages keep their bytes; their blocks stay dormant all the same) */
    if (ld_os_purge((char *)sb + (size_t)k * unit, (size_t)(end - k) * unit) == 0) bytes += (size_t)(end - k) * unit;
    k = end;
  }
  return bytes;
}

void ld_sb_wake(sb_t *sb) {
  uint32_t dormant = sb->dormant;
  if (!dormant) return;
  const uint32_t size = sb->block_size, carved = ld_sb_carved(sb);
  ld_block_t *list = sb->free_list;
  int32_t woken = 0;
  for (uint32_t i = 0; i < carved; i++) {
    ld_block_t *b = (ld_block_t *)(sb->data + (size_t)i * size);
    if (!(dormant >> ld_sb_unit_of(sb, b) & 1)) continue;
    b->tag = ld_tag(b);
    ld_set_next(b, list);
    list = b;
    woken++;
  }
  sb->free_list = list;
  sb->dormant_blocks -= woken;
  /* Cleared after the tags are written: a free that reads the mark cleared, then reads the
   * block's word again, finds its tag (ld_check_small_free). */
  __atomic_store_n(&sb->dormant, 0, __ATOMIC_RELEASE);
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

/* Walks one of sb's lists of free blocks (each a carved block start, tagged), counting them
 * into *count; false: the walk could not go on (a link out of place, or a cycle). */
static bool list_validate(const sb_t *sb, const ld_block_t *head, const char *name, size_t carved, size_t *count,
                          int *violations) {
  for (const ld_block_t *b = head; b; b = ld_next(b)) {
    uintptr_t off = (uintptr_t)b - (uintptr_t)sb->data;
    if ((char *)b < sb->data || (char *)b >= sb->bump || off % sb->block_size) {
      VIOLATION("superblock %p: %s entry %p is not a carved block\n", (const void *)sb, name, (const void *)b);
      return false;
    }
    if (!ld_block_is_free(b)) VIOLATION("superblock %p: free block %p lost its tag\n", (const void *)sb, (const void *)b);
    if (ld_sb_in_dormant(sb, b)) VIOLATION("superblock %p: block %p listed on a dormant unit\n", (const void *)sb, (const void *)b);
    if (++*count > carved) {
      VIOLATION("superblock %p: %s longer than the carved blocks (a cycle?)\n", (const void *)sb, name);
      return false;
    }
  }
  return true;
}

/* Checks one superblock's lists and counts; `owner` is who must own it. The remote list is
 * not walked (other threads push onto it); its count is checked against what the owner saw. */
void ld_sb_validate(const sb_t *sb, const heap_t *owner, int *violations) {
  if (sb->magic != LD_SB_MAGIC || sb->kind != LD_KIND_SMALL) {
    VIOLATION("superblock %p: bad header\n", (const void *)sb);
    return;
  }
  if (atomic_load_explicit(&((sb_t *)sb)->owner, memory_order_relaxed) != owner)
    VIOLATION("superblock %p: owner %p, expected %p\n", (const void *)sb, (void *)sb->owner, (const void *)owner);
  int mapped_class = ld_addrmap_small_class((const char *)sb + 1);
  if (mapped_class != sb->size_class + 1)
    VIOLATION("superblock %p: class %u, the ownership map says %d\n", (const void *)sb, sb->size_class, mapped_class - 1);
  char *end = sb->data + (size_t)sb->capacity * sb->block_size;
  if (sb->bump < sb->data || sb->bump > end) VIOLATION("superblock %p: carve pointer out of range\n", (const void *)sb);
  size_t carved = (size_t)(sb->bump - sb->data) / sb->block_size; /* a division: checks ld_sb_carved */
  if (sb->divisor_magic != UINT64_MAX / sb->block_size + 1 || ld_sb_carved(sb) != carved)
    VIOLATION("superblock %p: divisor magic wrong\n", (const void *)sb);
  size_t free_count = 0, inbox_walked = 0;
  if (!list_validate(sb, sb->free_list, "free list", carved, &free_count, violations) ||
      !list_validate(sb, sb->inbox_list, "inbox list", carved, &inbox_walked, violations))
    return;
  if (inbox_walked != (size_t)sb->inbox_count)
    VIOLATION("superblock %p: inbox list holds %zu blocks, counted %d\n", (const void *)sb, inbox_walked, sb->inbox_count);
  free_count += inbox_walked;
  uint64_t word = atomic_load_explicit(&((sb_t *)sb)->remote, memory_order_acquire);
  if (sb->remote_seen < 0 || (uint64_t)sb->remote_seen > remote_count(word))
    VIOLATION("superblock %p: %d remote frees seen, the list holds %llu\n", (const void *)sb, sb->remote_seen,
              (unsigned long long)remote_count(word));
  if (sb->used < 0 || sb->dormant_blocks < 0 ||
      (size_t)sb->used + free_count + (size_t)sb->remote_seen + (size_t)sb->dormant_blocks != carved)
    VIOLATION("superblock %p: used %d + %zu free + %d remote seen + %d dormant, but %zu carved\n", (const void *)sb,
              sb->used, free_count, sb->remote_seen, sb->dormant_blocks, carved);
  if ((sb->dormant || sb->dormant_blocks) && owner != &ld_global_heap)
    VIOLATION("superblock %p: dormant units in a heap's superblock\n", (const void *)sb);
}
