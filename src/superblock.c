/* Size classes and superblocks: the layout of a superblock, carving its blocks, and the
 * remote free list that other threads push onto without a lock (seed 002).
 *
 * A superblock is one S-sized chunk of a segment (segment.c), S-aligned, holding blocks of one
 * size class after a header (internal.h, sb_t). Its owner alone pops and pushes its local free
 * list; every other free, and the owner's own frees into a superblock it is not allocating
 * from, go on the remote list with a CAS.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <string.h>

uint8_t ld_class_of_granule[LD_SMALL_LIMIT / 16 + 1];
uint32_t ld_class_size[LD_CLASS_COUNT];
/* Bytes of blocks one superblock of each class holds: Hoard's "a" counts these rather than S,
 * so that a heap of full superblocks has u == a even when blocks do not divide S evenly
 * (otherwise, for f below the tail waste, the invariant could never hold). */
int64_t ld_class_capacity_bytes[LD_CLASS_COUNT + 1];

size_t ld_sb_size = 65536;
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

void ld_classes_init(void) {
  unsigned cls = 0;
  for (uint32_t s = 16; s <= 128; s += 16) ld_class_size[cls++] = s;
  for (uint32_t base = 128; base < LD_SMALL_LIMIT; base *= 2)
    for (uint32_t step = 1; step <= 8; step++) ld_class_size[cls++] = base + step * (base / 8);
  for (unsigned k = 0; k < LD_CLASS_COUNT; k++)
    ld_class_capacity_bytes[k] =
        (int64_t)((ld_sb_size - sb_data_offset(ld_class_size[k])) / ld_class_size[k]) * ld_class_size[k];
  for (unsigned k = 0; k <= LD_CLASS_COUNT; k++) /* classes too big for this S are never used */
    if (ld_class_capacity_bytes[k] <= 0) ld_class_capacity_bytes[k] = (int64_t)ld_sb_size;
  unsigned c = 0;
  for (size_t g = 0; g <= LD_SMALL_LIMIT / 16; g++) {
    size_t size = g * 16;
    while (c < LD_CLASS_COUNT && ld_class_size[c] < size) c++;
    ld_class_of_granule[g] = (uint8_t)((size <= ld_small_max && c < LD_CLASS_COUNT) ? c : LD_CLASS_LARGE);
  }
}

void ld_sb_format(sb_t *sb, unsigned cls) {
  uint32_t bs = ld_class_size[cls];
  size_t offset = sb_data_offset(bs);
  sb->free_list = NULL;
  sb->local_free = sb->local_tail = NULL;
  sb->local_count = 0;
  sb->in_local_dirty = 0;
  LD_OWNER_SET(sb->used, 0);
  sb->floor = 0;
  LD_OWNER_SET(sb->block_size, bs);
  sb->capacity = (uint32_t)((ld_sb_size - offset) / bs);
  sb->reciprocal = (((uint64_t)1 << 40) + bs - 1) / bs;
  sb->data = (char *)sb + offset;
  sb->bump = sb->data;
  sb->magic = LD_SB_MAGIC;
  sb->size_class = (uint8_t)cls;
  sb->kind = LD_KIND_SMALL;
  sb->group = 0;
  sb->purged = 0;
  sb->next = sb->prev = sb->pending_next = NULL;
  atomic_store_explicit(&sb->remote, 0, memory_order_relaxed);
}

/* Carves up to a page's worth of untouched blocks onto the free list: memory is touched as it
 * is needed, so a superblock's pages become resident one at a time, and a purged page is not
 * written before a block on it is handed out. */
int ld_sb_carve(sb_t *sb) {
  char *end = sb->data + (size_t)sb->capacity * sb->block_size;
  if (sb->bump >= end) return 0;
  size_t want = 4096 / sb->block_size;
  if (want < 1) want = 1;
  ld_block_t *head = sb->free_list;
  int n = 0;
  while (n < (int)want && sb->bump + sb->block_size <= end) {
    n++;
    sb->bump += sb->block_size;
  }
#ifdef LARDER_HARDENED
  /* Hardened: the blocks of each carved page are handed out in a random order, so that the
   * layout of consecutive allocations cannot be predicted (a shuffle of at most 256). */
  uint16_t order[4096 / 16];
  for (int i = 0; i < n; i++) order[i] = (uint16_t)i;
  if (!carve_rng) carve_rng = (ld_link_secret ^ (uintptr_t)&carve_rng) | 1;
  for (int i = n - 1; i > 0; i--) {
    carve_rng ^= carve_rng << 13, carve_rng ^= carve_rng >> 7, carve_rng ^= carve_rng << 17;
    int j = (int)(carve_rng % (uint64_t)(i + 1));
    uint16_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (int i = 0; i < n; i++) {
    ld_block_t *b = (ld_block_t *)(sb->bump - (size_t)(order[i] + 1) * sb->block_size);
    ld_set_next(b, head);
    b->tag = ld_tag(b);
    head = b;
  }
#else
  for (int i = 1; i <= n; i++) { /* carved in address order, so pushed in reverse */
    ld_block_t *b = (ld_block_t *)(sb->bump - (size_t)i * sb->block_size);
    ld_set_next(b, head);
    b->tag = ld_tag(b);
    head = b;
  }
#endif
  sb->free_list = head;
  return n;
}

bool ld_sb_is_announced(const sb_t *sb) {
  return (atomic_load_explicit(&((sb_t *)sb)->remote, memory_order_acquire) & LD_REMOTE_ANNOUNCED) != 0;
}

/* Splices a list taken from the remote list onto the free list. The walk (needed for its tail
 * and length) also checks each block: one whose tag was overwritten was written after it was
 * freed, and a list longer than the superblock holds has a cycle, which only a block pushed
 * twice (two threads freeing it at once) makes. Either stops the program. */
static int collect_list(sb_t *sb, ld_block_t *list) {
  int n = 0;
  ld_block_t *tail = NULL;
  for (ld_block_t *b = list; b; b = ld_next(b)) {
    if (!ld_block_is_free(b)) ld_fatal_bad_free("free block written after free (use after free), or double free", b);
    if (++n > (int)sb->capacity) ld_fatal_bad_free("double free (a block freed twice at once) in the superblock", sb);
    tail = b;
  }
  if (tail) {
    ld_set_next(tail, sb->free_list);
    sb->free_list = list;
    __atomic_store_n(&sb->used, sb->used - n, __ATOMIC_RELAXED); /* the owner's free path reads it */
  }
  return n;
}

int ld_sb_collect(sb_t *sb, bool clear_announce) {
  uintptr_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed);
  uintptr_t keep;
  do {
    keep = clear_announce ? 0 : (old & LD_REMOTE_ANNOUNCED);
    if (old == keep) return 0;
  } while (!atomic_compare_exchange_weak_explicit(&sb->remote, &old, keep, memory_order_acq_rel, memory_order_relaxed));
  return collect_list(sb, (ld_block_t *)(old & ~LD_REMOTE_ANNOUNCED));
}

/* The owner's local frees are spliced without a walk (their tags are checked as they are
 * handed out: ld_sb_pop), so collecting them costs nothing per block. */
int ld_sb_collect_local(sb_t *sb) {
  int n = __atomic_load_n(&sb->local_count, __ATOMIC_ACQUIRE);
  if (!n) return 0;
  ld_set_next(sb->local_tail, sb->free_list);
  sb->free_list = sb->local_free;
  sb->local_free = sb->local_tail = NULL;
  __atomic_store_n(&sb->local_count, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&sb->used, sb->used - n, __ATOMIC_RELAXED);
  return n;
}

bool ld_sb_push_remote(sb_t *sb, ld_block_t *b) {
  b->tag = ld_tag(b);
  uintptr_t old = atomic_load_explicit(&sb->remote, memory_order_relaxed);
  do {
    ld_set_next(b, (ld_block_t *)(old & ~LD_REMOTE_ANNOUNCED));
  } while (!atomic_compare_exchange_weak_explicit(&sb->remote, &old, (uintptr_t)b | LD_REMOTE_ANNOUNCED,
                                                  memory_order_acq_rel, memory_order_relaxed));
  return (old & LD_REMOTE_ANNOUNCED) == 0;
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

/* Checks one superblock's lists and counts; `owner` is who must own it. */
void ld_sb_validate(const sb_t *sb, const heap_t *owner, int *violations) {
  if (sb->magic != LD_SB_MAGIC || sb->kind != LD_KIND_SMALL) {
    VIOLATION("superblock %p: bad header\n", (const void *)sb);
    return;
  }
  if (atomic_load_explicit(&((sb_t *)sb)->owner, memory_order_relaxed) != owner)
    VIOLATION("superblock %p: owner %p, expected %p\n", (const void *)sb, (void *)sb->owner, (const void *)owner);
  char *end = sb->data + (size_t)sb->capacity * sb->block_size;
  if (sb->bump < sb->data || sb->bump > end) VIOLATION("superblock %p: carve pointer out of range\n", (const void *)sb);
  size_t carved = (size_t)(sb->bump - sb->data) / sb->block_size;
  size_t free_count = 0;
  for (const ld_block_t *b = sb->free_list; b; b = ld_next(b)) {
    uintptr_t off = (uintptr_t)b - (uintptr_t)sb->data;
    if ((char *)b < sb->data || (char *)b >= sb->bump || off % sb->block_size) {
      VIOLATION("superblock %p: free-list entry %p is not a carved block\n", (const void *)sb, (const void *)b);
      return;
    }
    if (!ld_block_is_free(b)) VIOLATION("superblock %p: free block %p lost its tag\n", (const void *)sb, (const void *)b);
    if (++free_count > carved) {
      VIOLATION("superblock %p: free list longer than the carved blocks (a cycle?)\n", (const void *)sb);
      return;
    }
  }
  size_t local_count = 0;
  for (const ld_block_t *b = sb->local_free; b; b = ld_next(b)) {
    if (b->tag != ld_tag(b)) VIOLATION("superblock %p: local free block %p lost its tag\n", (const void *)sb, (const void *)b);
    if (++local_count > carved) {
      VIOLATION("superblock %p: local free list longer than the carved blocks\n", (const void *)sb);
      return;
    }
  }
  if (local_count != (size_t)sb->local_count)
    VIOLATION("superblock %p: %zu local frees, counted %d\n", (const void *)sb, local_count, sb->local_count);
  /* Blocks on the local and remote lists are still counted in used until they are collected. */
  if ((size_t)sb->used != carved - free_count)
    VIOLATION("superblock %p: used %d but %zu carved - %zu free\n", (const void *)sb, sb->used, carved, free_count);
}
