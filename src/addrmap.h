/* The ownership map: the set of address ranges liblarder owns (segments, large spans), so that
 * free, realloc and malloc_usable_size can tell a pointer larder handed out from any other
 * before they read a header through it (issue 12: a static, a stack, a foreign-mmap or a wild
 * pointer must be reported, never faulted on).
 *
 * Granularity: a granule of G bytes (G = the superblock size S, a power of two) is owned as a
 * whole. Two bits per granule (owned now; released: larder's once, since given back) and a
 * byte (the class of the small superblock there: ld_addrmap_small_class), in a two-level radix
 * over the 48-bit user address space:
 *   root:  one pointer per 2^16 granules (G = 64 KiB: 2^16 entries, 512 KiB of address space,
 *          mapped at init without being touched: only the entries in use cost memory);
 *   leaf:  16 KiB of bits and 64 KiB of class bytes for 2^16 granules (G = 64 KiB: 4 GiB of
 *          address space per leaf), mapped on the first add into that range and never given
 *          back; its pages are touched only as granules in them are used.
 *
 * Contract:
 *   - ld_addrmap_init once, before any other call (ld_maintain_init). Not thread-safe.
 *   - ld_addrmap_add(base, bytes) after the range is mapped and before any pointer into it
 *     is handed out; ld_addrmap_remove(base, bytes) before the range is unmapped.
 *   - A range owns every granule it overlaps (start rounded down, end rounded up), so no two
 *     ranges may share a granule. Every range larder maps starts at a multiple of S
 *     (ld_os_map_aligned(..., S)), so a granule is never shared: the part of a granule past
 *     the end of a large span's mapping is not larder's, but the header that a free through a
 *     pointer into it would read lies at the start of that granule, inside the span.
 *   - ld_addrmap_contains(p) is lock-free (two acquire loads), takes no lock, allocates nothing,
 *     and never faults, whatever the value of p (NULL, kernel or non-canonical addresses,
 *     freed memory). add and remove are lock-free too (an atomic OR / AND per bitmap word; a
 *     leaf is published with one CAS), so they may be called under any of larder's locks.
 *   - Addresses at or above 2^48 are never contained; adding such a range fails (EINVAL).
 *
 * Header checks: ld_sb_of(p) reads the header at (p-1) & ~(S-1), so the granule that decides
 * whether that read is safe is the one holding p-1: call ld_addrmap_contains_header(p).
 */
#ifndef LD_ADDRMAP_H
#define LD_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* granule: a power of two from 4 KiB to 1 GiB (larder passes S, 16 KiB .. 1 MiB).
 * Returns 0, EINVAL (bad granule) or ENOMEM (the root could not be mapped). A second call
 * with the same granule does nothing; with another granule it fails with EINVAL. */
int  ld_addrmap_init(size_t granule);

/* Marks [base, base+bytes) as larder's. 0, EINVAL (empty range, not initialised, or beyond
 * 2^48) or ENOMEM (a leaf could not be mapped; nothing of the range is marked then). */
int  ld_addrmap_add(const void *base, size_t bytes);

/* Unmarks [base, base+bytes), and remembers it was larder's (LD_ADDR_RELEASED) until a later
 * add. Leaves stay mapped. */
void ld_addrmap_remove(const void *base, size_t bytes);

/* The map itself, for the lookup below, which free's slow path inlines (a call and its
 * saved registers were a third of it). Written by addrmap.c only. */
#define LD_ADDRMAP_ADDR_BITS 48
#define LD_ADDRMAP_LEAF_SHIFT 16 /* granules per leaf: 2^16 */
#define LD_ADDRMAP_LEAF_WORDS (((uintptr_t)1 << LD_ADDRMAP_LEAF_SHIFT) / 64)
/* Two bits per granule, in two arrays: owned (larder's now), and released (larder's once, given
 * back to the OS since: a pointer there is most likely a use after free or a double free). */
/* And a byte per granule: the size class plus one of the small superblock it holds, 0 for
 * anything else (ld_addrmap_small_class below). */
typedef struct ld_addrmap_leaf_s {
  _Atomic uint64_t bits[LD_ADDRMAP_LEAF_WORDS];
  _Atomic uint64_t released[LD_ADDRMAP_LEAF_WORDS];
  _Atomic uint8_t small_class[(uintptr_t)1 << LD_ADDRMAP_LEAF_SHIFT];
} ld_addrmap_leaf_t;
typedef struct ld_addrmap_s {
  unsigned shift; /* log2 of the granule */
  size_t root_slots;
  _Atomic(_Atomic(ld_addrmap_leaf_t *) *) root; /* NULL until init */
  _Atomic size_t leaves;
} ld_addrmap_t;
extern ld_addrmap_t ld_addrmap __attribute__((visibility("hidden")));

/* The leaf holding address a and the granule's index in it; NULL when none. */
static inline ld_addrmap_leaf_t *ld_addrmap_leaf_of(uintptr_t a, size_t *bit) {
  if (a >= ((uintptr_t)1 << LD_ADDRMAP_ADDR_BITS)) return NULL;
  _Atomic(ld_addrmap_leaf_t *) *root = atomic_load_explicit(&ld_addrmap.root, memory_order_acquire);
  if (!root) return NULL;
  uintptr_t g = a >> ld_addrmap.shift;
  *bit = (size_t)(g & (((uintptr_t)1 << LD_ADDRMAP_LEAF_SHIFT) - 1));
  return atomic_load_explicit(&root[g >> LD_ADDRMAP_LEAF_SHIFT], memory_order_acquire);
}

/* The leaf holding address a when a's granule is larder's now (bit: the granule's index in
 * it); NULL otherwise. */
static inline ld_addrmap_leaf_t *ld_addrmap_owned_leaf(uintptr_t a, size_t *bit) {
  ld_addrmap_leaf_t *leaf = ld_addrmap_leaf_of(a, bit);
  if (!leaf || !((atomic_load_explicit(&leaf->bits[*bit / 64], memory_order_acquire) >> (*bit % 64)) & 1)) return NULL;
  return leaf;
}

/* True when p lies in a granule larder owns. */
static inline bool ld_addrmap_contains(const void *p) {
  size_t bit;
  return ld_addrmap_owned_leaf((uintptr_t)p, &bit) != NULL;
}

/* What p's granule is: larder's now; larder's before, given back to the OS since (a free or
 * realloc through such a pointer is a double free or a use after free, unless the program
 * mapped something of its own there since); or never larder's (as far as the map knows). For
 * the messages of the slow paths: as lock-free and fault-free as contains(). */
typedef enum { LD_ADDR_FOREIGN = 0, LD_ADDR_OWNED = 1, LD_ADDR_RELEASED = 2 } ld_addr_state_t;
ld_addr_state_t ld_addrmap_state(const void *p);

/* True when the header ld_sb_of(p) would read lies in a granule larder owns (p-1's granule). */
static inline bool ld_addrmap_contains_header(const void *p) {
  return p != NULL && ld_addrmap_contains((const char *)p - 1);
}

/* The class of the small superblock whose header ld_sb_of(p) would read, from the map instead
 * of the header: -1 when that granule is not larder's (as ld_addrmap_contains_header), 0 when it
 * holds no small superblock (a span, a fit region, a free chunk, a span's inner chunk), else its
 * size class plus one. Dense (a byte per granule: a line covers 4 MiB of superblocks, where
 * every header is a line of its own, on a page of its own, all in one cache set), so that a free
 * by a thread that holds no batch for the superblock knows the block's class without waiting
 * for the header (the remote free: alloc.c, free_deferring). A hint for what the header says:
 * exact for a block handed out and not yet freed (its superblock was formatted, the byte set,
 * before the block was handed out, and is not given back while it is in use); a stale or
 * foreign pointer may read an old class, and is caught by the header's full checks later. */
static inline int ld_addrmap_small_class(const void *p) {
  size_t bit;
  ld_addrmap_leaf_t *leaf = p ? ld_addrmap_owned_leaf((uintptr_t)p - 1, &bit) : NULL;
  return leaf ? atomic_load_explicit(&leaf->small_class[bit], memory_order_relaxed) : -1;
}
/* Records the class of the small superblock at sb (class_plus_one 0: it holds none now). sb
 * must lie in a granule larder owns. superblock.c as it formats one, segment.c as a run of
 * chunks comes back, addrmap.c as a range is added or removed. */
static inline void ld_addrmap_set_small_class(const void *sb, unsigned class_plus_one) {
  size_t bit;
  ld_addrmap_leaf_t *leaf = ld_addrmap_leaf_of((uintptr_t)sb, &bit);
  if (leaf && atomic_load_explicit(&leaf->small_class[bit], memory_order_relaxed) != class_plus_one)
    atomic_store_explicit(&leaf->small_class[bit], (uint8_t)class_plus_one, memory_order_release);
}

/* Introspection for tests and statistics: leaves mapped, and the bytes the map itself holds
 * (root and leaves, as mapped address space). */
size_t ld_addrmap_leaves(void);
size_t ld_addrmap_bytes(void);

#pragma GCC visibility pop

#endif
