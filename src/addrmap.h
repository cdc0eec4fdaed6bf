/* The ownership map: the set of address ranges liblarder owns (segments, large spans), so that
 * free, realloc and malloc_usable_size can tell a pointer larder handed out from any other
 * before they read a header through it (issue 12: a static, a stack, a foreign-mmap or a wild
 * pointer must be reported, never faulted on).
 *
 * Granularity: a granule of G bytes (G = the superblock size S, a power of two) is owned as a
 * whole. Two bits per granule (owned now; released: larder's once, since given back), in a
 * two-level radix over the 48-bit user address space:
 *   root:  one pointer per 2^16 granules (G = 64 KiB: 2^16 entries, 512 KiB of address space,
 *          mapped at init without being touched: only the entries in use cost memory);
 *   leaf:  16 KiB of bits for 2^16 granules (G = 64 KiB: 4 GiB of address space per leaf),
 *          mapped on the first add into that range and never given back.
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

/* True when p lies in a granule larder owns. */
bool ld_addrmap_contains(const void *p);

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

/* Introspection for tests and statistics: leaves mapped, and the bytes the map itself holds
 * (root and leaves, as mapped address space). */
size_t ld_addrmap_leaves(void);
size_t ld_addrmap_bytes(void);

#pragma GCC visibility pop

#endif
