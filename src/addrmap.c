/* The ownership map (addrmap.h has the contract): two bits per granule of the 48-bit user
 * address space (owned, released), in a two-level radix whose leaves are mapped on first use.
 *
 * Index of address a (granule G = 2^g):   granule = a >> g
 *   leaf  = granule >> LEAF_SHIFT          (root slot)
 *   bit   = granule & (LEAF_GRANULES - 1)  (in each of the leaf's two arrays: word bit / 64,
 *                                           bit bit % 64)
 * The root has 2^(48 - g - LEAF_SHIFT) slots: 2^18 at G = 16 KiB (2 MiB of address space),
 * 2^12 at G = 1 MiB (32 KiB). It is mapped at init and only the pages holding slots in use are
 * ever touched; reading an untouched slot reads the zero page, which cannot fault.
 *
 * Memory only comes from ld_os_map (os.c), and is never written through a pointer that
 * contains() was given, so contains() can be asked about any value at all. */
#define _GNU_SOURCE
#include "addrmap.h"
#include "os.h"

#include <errno.h>
#include <stdatomic.h>

#define ADDR_BITS      LD_ADDRMAP_ADDR_BITS
#define LEAF_SHIFT     LD_ADDRMAP_LEAF_SHIFT       /* granules per leaf: 2^16 */
#define LEAF_GRANULES  ((uintptr_t)1 << LEAF_SHIFT)
#define LEAF_WORDS     LD_ADDRMAP_LEAF_WORDS       /* 1024 words: 8 KiB */
typedef ld_addrmap_leaf_t leaf_t;
#define LEAF_BYTES     sizeof(leaf_t)

#pragma GCC visibility push(hidden)

ld_addrmap_t ld_addrmap;
#define map ld_addrmap

int ld_addrmap_init(size_t granule) {
  if (granule < 4096 || granule > ((size_t)1 << 30) || (granule & (granule - 1))) return EINVAL;
  unsigned shift = (unsigned)__builtin_ctzll((unsigned long long)granule);
  if (atomic_load_explicit(&map.root, memory_order_acquire))
    return shift == map.shift ? 0 : EINVAL;
  size_t slots = (size_t)1 << (ADDR_BITS - shift - LEAF_SHIFT);
  size_t bytes = slots * sizeof(leaf_t *);
  size_t page = ld_os_page_size();
  bytes = (bytes + page - 1) & ~(page - 1);
  void *root;
  int err = ld_os_map(bytes, &root);
  if (err) return err;
  map.shift = shift;
  map.root_slots = slots;
  atomic_store_explicit(&map.root, (_Atomic(leaf_t *) *)root, memory_order_release);
  return 0;
}

/* The leaf for root slot i, mapped (and published with a CAS) when create is set. */
static leaf_t *leaf_get(size_t i, bool create) {
  _Atomic(leaf_t *) *root = atomic_load_explicit(&map.root, memory_order_acquire);
  leaf_t *leaf = atomic_load_explicit(&root[i], memory_order_acquire);
  if (leaf || !create) return leaf;
  void *mem;
  if (ld_os_map(LEAF_BYTES, &mem) != 0) return NULL;
  leaf_t *expected = NULL;
  if (atomic_compare_exchange_strong_explicit(&root[i], &expected, (leaf_t *)mem, memory_order_acq_rel,
                                              memory_order_acquire)) {
    atomic_fetch_add_explicit(&map.leaves, 1, memory_order_relaxed);
    return mem;
  }
  ld_os_unmap(mem, LEAF_BYTES); /* another thread published one first */
  return expected;
}

/* Marks granules [first, last] (inclusive) owned (set) or released (!set). */
static void mark(uintptr_t first, uintptr_t last, bool set) {
  uintptr_t g = first;
  while (g <= last) {
    size_t slot = (size_t)(g >> LEAF_SHIFT);
    leaf_t *leaf = leaf_get(slot, false);
    uintptr_t leaf_end = ((uintptr_t)slot << LEAF_SHIFT) + LEAF_GRANULES - 1;
    uintptr_t stop = last < leaf_end ? last : leaf_end;
    if (leaf) {
      uintptr_t from = g; /* the range's first granule in this leaf */
      while (g <= stop) {
        size_t bit = (size_t)(g & (LEAF_GRANULES - 1));
        size_t word = bit / 64;
        unsigned lo = (unsigned)(bit % 64);
        uintptr_t word_last = g + (63 - lo);
        unsigned hi = word_last <= stop ? 63 : lo + (unsigned)(stop - g);
        uint64_t mask = (hi == 63 ? ~(uint64_t)0 : (((uint64_t)1 << (hi + 1)) - 1)) & ~(((uint64_t)1 << lo) - 1);
        if (set) {
          atomic_fetch_and_explicit(&leaf->released[word], ~mask, memory_order_relaxed);
          atomic_fetch_or_explicit(&leaf->bits[word], mask, memory_order_release);
        } else {
          atomic_fetch_and_explicit(&leaf->bits[word], ~mask, memory_order_release);
          atomic_fetch_or_explicit(&leaf->released[word], mask, memory_order_relaxed);
        }
        g += (uintptr_t)(hi - lo) + 1;
      }
      /* no class: a range added is not formatted yet, one removed holds nothing (a byte read
       * first, so that a large span's range does not touch the class bytes' pages) */
      for (uintptr_t h = from; h <= stop; h++) {
        size_t at = (size_t)(h & (LEAF_GRANULES - 1));
        if (atomic_load_explicit(&leaf->small_class[at], memory_order_relaxed))
          atomic_store_explicit(&leaf->small_class[at], 0, memory_order_release);
      }
    }
    g = stop + 1;
  }
}

/* The granules [first, last] that [base, base+bytes) overlaps; false if none or out of range. */
static bool range_of(const void *base, size_t bytes, uintptr_t *first, uintptr_t *last) {
  uintptr_t a = (uintptr_t)base;
  if (!atomic_load_explicit(&map.root, memory_order_acquire) || bytes == 0 || a >= ((uintptr_t)1 << ADDR_BITS) || bytes > ((uintptr_t)1 << ADDR_BITS) - a)
    return false;
  *first = a >> map.shift;
  *last = (a + bytes - 1) >> map.shift;
  return true;
}

int ld_addrmap_add(const void *base, size_t bytes) {
  uintptr_t first, last;
  if (!range_of(base, bytes, &first, &last)) return EINVAL;
  /* Every leaf first, so that a failure leaves nothing of the range marked. */
  for (size_t s = (size_t)(first >> LEAF_SHIFT); s <= (size_t)(last >> LEAF_SHIFT); s++)
    if (!leaf_get(s, true)) return ENOMEM;
  mark(first, last, true);
  return 0;
}

void ld_addrmap_remove(const void *base, size_t bytes) {
  uintptr_t first, last;
  if (range_of(base, bytes, &first, &last)) mark(first, last, false);
}

/* The leaf holding address a and the granule's index in it; NULL when none. */
static inline leaf_t *leaf_of(uintptr_t a, size_t *bit) { return ld_addrmap_leaf_of(a, bit); }

ld_addr_state_t ld_addrmap_state(const void *p) {
  size_t bit;
  leaf_t *leaf = leaf_of((uintptr_t)p, &bit);
  if (!leaf) return LD_ADDR_FOREIGN;
  if ((atomic_load_explicit(&leaf->bits[bit / 64], memory_order_acquire) >> (bit % 64)) & 1) return LD_ADDR_OWNED;
  if ((atomic_load_explicit(&leaf->released[bit / 64], memory_order_relaxed) >> (bit % 64)) & 1) return LD_ADDR_RELEASED;
  return LD_ADDR_FOREIGN;
}

size_t ld_addrmap_leaves(void) { return atomic_load_explicit(&map.leaves, memory_order_relaxed); }

size_t ld_addrmap_bytes(void) {
  if (!atomic_load_explicit(&map.root, memory_order_acquire)) return 0;
  size_t page = ld_os_page_size();
  size_t root = (map.root_slots * sizeof(leaf_t *) + page - 1) & ~(page - 1);
  return root + ld_addrmap_leaves() * LEAF_BYTES;
}

#pragma GCC visibility pop
