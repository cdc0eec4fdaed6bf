/* Segments: large mappings cut into S-sized chunks. A run of chunks is a superblock (one
 * chunk) or a medium span (several); free runs are kept by length and coalesced with their
 * free neighbours when a run is freed, so freed medium memory serves the next medium request
 * of any similar size and small-object refills alike (DESIGN §1, medium objects).
 *
 * The bookkeeping of every chunk lives in the segment's header (the first chunks of the
 * segment), never in the chunks themselves: a purged free run is not written again until it is
 * handed out (issue "memory at server scale").
 *
 * Every operation is O(1) in the number of segments, runs and chunks: free runs sit in bins by
 * length (exact up to 32 chunks, then 8 bins per doubling, as TLSF's second level does) with a
 * bitmap of non-empty bins, and finding a fit is two find-first-set instructions.
 *
 * Free runs are dirty (freed since their last purge: some pages may be resident) or clean
 * (fresh or purged: no page resident), kept apart as jemalloc keeps its dirty and retained
 * extents (issue 15): each kind has its own bins, runs coalesce only with free neighbours of
 * their kind, and an allocation takes a dirty run when one fits, so that the pages a process
 * already has are reused before any clean page is touched, and clean runs stay clean. Dirty
 * runs are also on a list ordered by the time they were freed, and the purge gives back:
 *   - by age: runs idle for the purge delay (a decay in the manner of jemalloc's);
 *   - by amount: the least dirty memory held at any moment of the last PURGE_WINDOWS windows
 *     of at least the purge delay each, taken from the old end of the list. That much stayed
 *     unused all that time even when no single run did: a run that coalesces with a newly
 *     freed neighbour is as new as the neighbour, so under steady churn the age alone would
 *     never expire the old part (issue 15: a mixed load kept 195 MB of free memory dirty for
 *     minutes). One window alone purged what a load that swings every few seconds needed
 *     again at its next peak (server-mix at 8 threads: 3.7 GB refaulted in 3 minutes).
 * A purged run becomes clean and coalesces with its clean neighbours; a segment that is wholly
 * free and clean is unmapped.
 *
 * A run also knows how far its resident pages may reach (`resident`, bytes from its start;
 * none past it): kept through frees, splits, merges and purges while free, and while in use
 * the most of what it had and what its user touches. A medium span is whole chunks, and a 20
 * KiB block in a chunk a 60 KiB one left resident keeps 40 KiB of old pages resident behind it
 * for its whole life: random 16-64 KiB blocks held 1.6x their bytes in RSS (jemalloc 1.32x,
 * glibc 1.07x). So a run in use whose old pages reach more than half as far again as its
 * user's bytes (LD_SEGMENT_TAIL: a medium span, which uses nothing past its usable size) waits
 * on the list of tails; the purge gives back the tail of each one that has lived a purge
 * delay, and a free or a resize takes the run off the list first. A span
 * freed and taken again at its size is not listed. A span a thread's cache hands out again
 * (cache.c) is marked instead and listed late, by its owner, under the lock
 * (ld_segment_list_late): most are freed first, and never cost the lock. A listed span freed
 * goes back to its segment, or is taken off the list and kept by an owner whose medium
 * blocks are many (ld_segment_kept_reach). Purging as the span was handed out cost 5x
 * the CPU of 20-60 KiB churn that writes little of each block (madvise, and under threads TLB
 * shootdowns) for pages the next span faulted back in: short-lived spans must not pay for
 * long-lived ones. The list shares the segment lock the span took and gives back anyway.
 *
 * Segments are aligned to LD_SEGMENT_ALIGN so that a chunk finds its segment with a mask.
 * Their size grows with the process (4 MiB at first, up to 64 MiB), so that a small program
 * maps little and a large one maps few times.
 */
#define _GNU_SOURCE
#include "addrmap.h"
#include "internal.h"
#include "os.h"

#include <errno.h>
#include <string.h>

#define LD_SEGMENT_ALIGN ((size_t)64 << 20)
#define SEGMENT_MIN      ((size_t)4 << 20)
#define SEGMENT_MAGIC    0x5e6e3e47u
#ifdef LARDER_HARDENED
#define GUARD_CHUNKS 1
#else
#define GUARD_CHUNKS 0
#endif

enum { CHUNK_FREE = 1, CHUNK_USED = 2, CHUNK_HEADER = 3 };

typedef struct chunk_s {
  uint32_t run;                   /* at a run's first and last chunk: its length in chunks */
  uint32_t index;                 /* position in the segment */
  uint8_t state;                  /* CHUNK_*, at a run's first and last chunk */
  uint8_t dirty;                  /* free run: some pages may be resident (its kind) */
  uint8_t purged;                 /* clean free run: holds pages that were purged after use */
  uint8_t bin;
  uint32_t resident;              /* no page at or past this many bytes from the run's start
                                     is resident (0 for a clean free run) */
  uint8_t tail;                   /* run in use: on the list of tails */
  uint8_t excess;                 /* run in use: handed out again by a thread's cache with old
                                     pages past half as far again as its user's bytes, not yet
                                     listed (ld_segment_list_late) */
  uint32_t need;                  /* run on the list of tails: the bytes its user touches */
  struct chunk_s *next, *prev;    /* free run: its bin (of its kind) */
  struct chunk_s *dnext, *dprev;  /* dirty free run: the decay list, newest at the head;
                                     run in use: the list of tails, oldest at the head */
  uint64_t freed_ns;              /* dirty free run: when freed; tail: when listed */
} chunk_t;

typedef struct segment_s {
  uint32_t magic;
  uint32_t chunk_count, header_chunks, used_chunks;
  size_t bytes;
  bool huge; /* advised for transparent huge pages (LARDER_HUGE_PAGES): segment_purge */
  struct segment_s *next, *prev;
  chunk_t chunks[];
} segment_t;

#define BIN_EXACT 32
#define BIN_COUNT 128

/* The purge by amount looks at this many windows of the purge delay (above). */
#define PURGE_WINDOWS 4
_Static_assert(PURGE_WINDOWS >= 2, "the current window and at least one before it");

/* Growth over fragments (LARDER_GROW_PURGE_KB, off by default): a run handed out clean while
 * dirty runs wait (none of them long enough: a medium span of many chunks among freed
 * superblocks) purges as many bytes of the oldest dirty runs, so that the process's resident
 * memory does not grow with memory it holds free already: sqlite's trace replayed twice, where
 * a second pass's doubling array of 1-2 MB found the first pass's memory freed in single
 * chunks (with the fit tier at 128 B: 28.6% -> 6.3% fragmentation). At most the option's
 * bytes per purge run, and off by default: under a server's churn of medium blocks
 * (server-mix, 1% of 100 KiB-2 MiB) every such span purged pages that the next superblocks
 * faulted back, 1.4-2.6 GB in 8 s against 12-19 MB with no bound (23-38 MB with 4 MiB). */

/* The two kinds of free run, each with bins of its own. */
enum { KIND_CLEAN = 0, KIND_DIRTY = 1 };

static struct {
  ld_lock_t lock;
  chunk_t *bins[2][BIN_COUNT];       /* [KIND_*] */
  uint64_t bitmap[2][BIN_COUNT / 64];
  chunk_t *dirty_head, *dirty_tail;  /* newest first */
  chunk_t *tails_head, *tails_tail;  /* runs in use with old pages past their users' bytes, oldest first */
  size_t bytes_tails_purged;
  segment_t *segments;
  size_t segment_count, segment_bytes;
  size_t bytes_free_dirty, bytes_free_clean;
  size_t bytes_purged, bytes_refaulted;
  size_t purges_refused;             /* purges the OS refused (locked pages), which stay dirty */
  /* The purge by amount: the least dirty memory held since window_start_ns, and in each of
   * the windows before it, newest first (less what was purged since). */
  uint64_t window_start_ns;
  size_t window_min_dirty;
  size_t past_min_dirty[PURGE_WINDOWS - 1];
  /* Bytes of dirty runs that clean runs handed out purged since the last purge run
   * (ld_segment_alloc, "growth over fragments"): at most LARDER_GROW_PURGE_KB */
  size_t grow_purged;
} seg = {.lock = LD_LOCK_INIT};

void ld_segment_lock(void) { ld_lock_shared(&seg.lock); }
void ld_segment_unlock(bool reinit) {
  if (reinit) ld_lock_reset(&seg.lock);
  else ld_unlock(&seg.lock);
}

static inline segment_t *segment_of_chunk(chunk_t *c) {
  return (segment_t *)((char *)(c - c->index) - offsetof(segment_t, chunks));
}
static inline char *chunk_address(chunk_t *c) { return (char *)segment_of_chunk(c) + (size_t)c->index * ld_sb_size; }
static inline segment_t *segment_of_address(const void *p) {
  return (segment_t *)((uintptr_t)p & ~(uintptr_t)(LD_SEGMENT_ALIGN - 1));
}

/* The segments mapped now, a bit per LD_SEGMENT_ALIGN of the address space (512 KiB of .bss,
 * of which a page holds 2 TiB of addresses: the pages a process touches are one or two).
 * Written and read under the lock: whether an address that may name memory given back since
 * lies in a segment, without a walk of the segments (ld_segment_list_late). */
#define SEGMENT_SLOTS (((uintptr_t)1 << LD_ADDRMAP_ADDR_BITS) / LD_SEGMENT_ALIGN)
static uint64_t segments_mapped[SEGMENT_SLOTS / 64];
static void segment_mapped_set(const segment_t *s, bool mapped) {
  uintptr_t slot = (uintptr_t)s / LD_SEGMENT_ALIGN;
  if (mapped) segments_mapped[slot / 64] |= (uint64_t)1 << (slot % 64);
  else segments_mapped[slot / 64] &= ~((uint64_t)1 << (slot % 64));
}
static bool segment_is_mapped(const segment_t *s) {
  uintptr_t slot = (uintptr_t)s / LD_SEGMENT_ALIGN;
  return slot < SEGMENT_SLOTS && (segments_mapped[slot / 64] >> (slot % 64) & 1);
}

/* ---- bins ---- */
static unsigned bin_of(size_t n) { /* the bin holding runs of n chunks (n >= 1) */
  if (n <= BIN_EXACT) return (unsigned)(n - 1);
  unsigned level = 63u - (unsigned)__builtin_clzll((unsigned long long)n); /* >= 5 */
  unsigned sub = (unsigned)(n >> (level - 3)) & 7u;
  unsigned b = BIN_EXACT + (level - 5) * 8 + sub;
  return b < BIN_COUNT ? b : BIN_COUNT - 1;
}
/* The lowest bin whose every run holds n chunks. */
static unsigned bin_fit(size_t n) {
  unsigned b = bin_of(n);
  if (n <= BIN_EXACT) return b;
  unsigned level = 63u - (unsigned)__builtin_clzll((unsigned long long)n);
  size_t lower = ((size_t)8 + ((n >> (level - 3)) & 7u)) << (level - 3);
  return lower == n ? b : b + 1;
}

/* A free run's bins are those of its kind (c->dirty). */
static void bin_insert(chunk_t *c) {
  unsigned b = bin_of(c->run), k = c->dirty;
  c->bin = (uint8_t)b;
  c->prev = NULL;
  c->next = seg.bins[k][b];
  if (c->next) c->next->prev = c;
  seg.bins[k][b] = c;
  seg.bitmap[k][b / 64] |= (uint64_t)1 << (b % 64);
}
static void bin_remove(chunk_t *c) {
  unsigned b = c->bin, k = c->dirty;
  if (c->prev) c->prev->next = c->next; else seg.bins[k][b] = c->next;
  if (c->next) c->next->prev = c->prev;
  if (!seg.bins[k][b]) seg.bitmap[k][b / 64] &= ~((uint64_t)1 << (b % 64));
  c->next = c->prev = NULL;
}
static chunk_t *bin_find(unsigned kind, size_t n) {
  unsigned b = bin_fit(n);
  if (b >= BIN_COUNT) return NULL;
  for (unsigned w = b / 64; w < BIN_COUNT / 64; w++) {
    uint64_t bits = seg.bitmap[kind][w];
    if (w == b / 64) bits &= ~(uint64_t)0 << (b % 64);
    if (bits) {
      chunk_t *c = seg.bins[kind][w * 64 + (unsigned)__builtin_ctzll(bits)];
      /* the last bin is open-ended: its head may be too short */
      return c->run >= n ? c : NULL;
    }
  }
  return NULL;
}
/* A fit: a dirty run first (its pages may be resident already), else a clean one. A request
 * that fits only across a dirty run and its clean neighbour maps a new segment instead: address
 * space, no page (the dirty run is purged within the delay, and the two coalesce then). (The
 * dirty run whose resident pages best matched the request, among a bin's first 4, made no
 * difference to RSS under medium churn, 1.59x against 1.61x: a bin seldom holds more than
 * the run just freed.) */
static chunk_t *fit_find(size_t n) {
  chunk_t *c = bin_find(KIND_DIRTY, n);
  return c ? c : bin_find(KIND_CLEAN, n);
}

/* ---- the decay list ---- */
static void dirty_push(chunk_t *c) {
  /* clocks were read before the lock: keep the list ordered by age anyway */
  if (seg.dirty_head && seg.dirty_head->freed_ns > c->freed_ns) c->freed_ns = seg.dirty_head->freed_ns;
  c->dprev = NULL;
  c->dnext = seg.dirty_head;
  if (c->dnext) c->dnext->dprev = c; else seg.dirty_tail = c;
  seg.dirty_head = c;
}
static void dirty_remove(chunk_t *c) {
  if (c->dprev) c->dprev->dnext = c->dnext; else seg.dirty_head = c->dnext;
  if (c->dnext) c->dnext->dprev = c->dprev; else seg.dirty_tail = c->dprev;
  c->dnext = c->dprev = NULL;
}
/* r takes c's place on the decay list (a split keeps the order by age). */
static void dirty_replace(chunk_t *c, chunk_t *r) {
  r->dprev = c->dprev;
  r->dnext = c->dnext;
  if (r->dprev) r->dprev->dnext = r; else seg.dirty_head = r;
  if (r->dnext) r->dnext->dprev = r; else seg.dirty_tail = r;
  c->dnext = c->dprev = NULL;
}

/* ---- the list of tails (runs in use; see the top of the file) ---- */
static void tail_push(chunk_t *c, size_t need, uint64_t now) {
  if (seg.tails_tail && seg.tails_tail->freed_ns > now) now = seg.tails_tail->freed_ns; /* clocks read before the lock */
  c->need = (uint32_t)need;
  c->freed_ns = now;
  c->dnext = NULL;
  c->dprev = seg.tails_tail;
  if (seg.tails_tail) seg.tails_tail->dnext = c; else seg.tails_head = c;
  seg.tails_tail = c;
  __atomic_store_n(&c->tail, 1, __ATOMIC_RELAXED);
}
/* Lock held. The flag is cleared last, with release: a run's user that reads it clear without
 * the lock (ld_segment_resize) knows no purge of its tail is under way. */
static void tail_remove(chunk_t *c) {
  if (c->dprev) c->dprev->dnext = c->dnext; else seg.tails_head = c->dnext;
  if (c->dnext) c->dnext->dprev = c->dprev; else seg.tails_tail = c->dprev;
  c->dnext = c->dprev = NULL;
  __atomic_store_n(&c->tail, 0, __ATOMIC_RELEASE);
}

/* ---- runs ---- */
static void run_mark(segment_t *s, uint32_t start, uint32_t len, uint8_t state) {
  chunk_t *first = &s->chunks[start], *last = &s->chunks[start + len - 1];
  first->run = last->run = len;
  first->state = last->state = state;
}

static void free_run_account(chunk_t *c, int sign) {
  size_t bytes = (size_t)c->run * ld_sb_size;
  if (c->dirty) LD_OWNER_SET(seg.bytes_free_dirty, seg.bytes_free_dirty + (sign > 0 ? bytes : -bytes));
  else seg.bytes_free_clean += sign > 0 ? bytes : -bytes;
}

size_t ld_segment_dirty_bytes(void) { return LD_READ(seg.bytes_free_dirty); }

/* After an operation that took dirty chunks (lock held): the window's low mark. */
static inline void window_note(void) {
  if (seg.bytes_free_dirty < seg.window_min_dirty) seg.window_min_dirty = seg.bytes_free_dirty;
}

/* Files the free run that starts at s->chunks[start]. */
static void free_run_insert(segment_t *s, uint32_t start, uint32_t len, bool dirty, bool purged, uint64_t freed_ns,
                            size_t resident) {
  run_mark(s, start, len, CHUNK_FREE);
  chunk_t *c = &s->chunks[start];
  c->dirty = dirty;
  c->purged = purged;
  c->resident = dirty ? (uint32_t)resident : 0;
  c->freed_ns = freed_ns;
  bin_insert(c);
  if (dirty) dirty_push(c);
  free_run_account(c, +1);
}
static void free_run_remove(chunk_t *c) {
  bin_remove(c);
  if (c->dirty) dirty_remove(c);
  free_run_account(c, -1);
}

/* Takes the first n chunks of the free run c; the rest stays free, in c's place on the decay
 * list (it was freed at the same time). Returns how far the taken chunks' resident pages may
 * reach. Lock held. */
static size_t free_run_take_front(segment_t *s, chunk_t *c, size_t n) {
  uint32_t start = c->index, len = c->run;
  size_t taken = n * ld_sb_size, resident = c->resident;
  bin_remove(c);
  free_run_account(c, -1);
  if (len > n) {
    chunk_t *r = &s->chunks[start + n];
    run_mark(s, start + (uint32_t)n, len - (uint32_t)n, CHUNK_FREE);
    r->dirty = c->dirty;
    r->purged = c->purged;
    r->resident = resident > taken ? (uint32_t)(resident - taken) : 0;
    r->freed_ns = c->freed_ns;
    bin_insert(r);
    if (c->dirty) dirty_replace(c, r);
    free_run_account(r, +1);
  } else if (c->dirty) {
    dirty_remove(c);
  }
  return resident < taken ? resident : taken;
}

/* The chunks a segment of n chunks gives its header (the segment_t and its chunk table). */
static size_t segment_header_chunks(size_t n) {
  return (offsetof(segment_t, chunks) + n * sizeof(chunk_t) + ld_sb_size - 1) / ld_sb_size;
}

/* Whether a segment of `bytes` holds need_chunks besides its header and guard. */
static bool segment_holds(size_t bytes, size_t need_chunks) {
  size_t n = bytes / ld_sb_size;
  return n >= segment_header_chunks(n) + need_chunks + GUARD_CHUNKS;
}

static segment_t *segment_map(size_t need_chunks) {
  size_t bytes = SEGMENT_MIN;
  while (bytes < LD_SEGMENT_ALIGN && bytes < seg.segment_bytes / 4) bytes *= 2;
  while (bytes < LD_SEGMENT_ALIGN && !segment_holds(bytes, need_chunks)) bytes *= 2;
  if (!segment_holds(bytes, need_chunks)) return NULL;
  void *base;
  while (ld_os_map_aligned(bytes, LD_SEGMENT_ALIGN, &base) != 0) {
    /* Refused: the address space limit (RLIMIT_AS) is near, or every mapped byte is locked
     * (mlockall(MCL_FUTURE)) within RLIMIT_MEMLOCK, 8 MiB for a user by default: a 4 MiB
     * segment did not fit where glibc's 132 KiB steps did, and every malloc failed. A smaller
     * segment that still holds the request may fit: halved, at most log2(4 MiB / S) times. */
    if (!segment_holds(bytes / 2, need_chunks)) return NULL;
    bytes /= 2;
  }
  size_t n = bytes / ld_sb_size, header_chunks = segment_header_chunks(n);
  /* LARDER_HUGE_PAGES: a random walk over a large heap misses the TLB on nearly every block
   * with 4 KiB pages (churn, 10^6 live blocks of 256 B: 0.81x the CPU with huge pages, peak RSS
   * 1.01x). Off by default: RSS then grows 2 MiB at a time (docs/allocator.md); the ranges a
   * purge leaves in part go back to 4 KiB pages (segment_purge). */
  bool huge = LD_OPTION(huge_pages) != 0 && ld_os_advise_huge_pages(base, bytes) == 0;
  if (ld_addrmap_add(base, bytes) != 0) {
    ld_os_unmap(base, bytes);
    return NULL;
  }
  segment_t *s = base;
  s->magic = SEGMENT_MAGIC;
  s->chunk_count = (uint32_t)n;
  s->header_chunks = (uint32_t)header_chunks;
  s->used_chunks = 0;
  s->bytes = bytes;
  s->huge = huge;
  for (uint32_t i = 0; i < n; i++) s->chunks[i].index = i;
  run_mark(s, 0, (uint32_t)header_chunks, CHUNK_HEADER);
#ifdef LARDER_HARDENED
  /* A guard chunk at the end, inaccessible: a linear overflow out of the segment's last block
   * faults instead of running into the next mapping. */
  n -= GUARD_CHUNKS;
  run_mark(s, (uint32_t)n, GUARD_CHUNKS, CHUNK_HEADER);
  ld_os_protect_none((char *)s + n * ld_sb_size, GUARD_CHUNKS * ld_sb_size);
#endif
  s->prev = NULL;
  s->next = seg.segments;
  if (s->next) s->next->prev = s;
  seg.segments = s;
  segment_mapped_set(s, true);
  seg.segment_count++;
  seg.segment_bytes += bytes;
  free_run_insert(s, (uint32_t)header_chunks, (uint32_t)(n - header_chunks), false, false, 0, 0);
  return s;
}

static void segment_unmap(segment_t *s) {
  segment_mapped_set(s, false);
  if (s->prev) s->prev->next = s->next; else seg.segments = s->next;
  if (s->next) s->next->prev = s->prev;
  seg.segment_count--;
  seg.segment_bytes -= s->bytes;
  ld_addrmap_remove(s, s->bytes);
  ld_os_unmap(s, s->bytes);
}

static size_t run_purge_tail(chunk_t *c, size_t chunks);

/* Growth over fragments (above): up to `chunks` chunks of the oldest dirty runs purged, within
 * the budget. Segment lock held. */
static void grow_purge(size_t chunks) {
  size_t limit = LD_GROW_PURGE_BYTES();
  size_t left = chunks, budget = seg.grow_purged < limit ? (limit - seg.grow_purged) / ld_sb_size : 0;
  if (left > budget) left = budget;
  size_t refused = seg.purges_refused;
  while (left && seg.dirty_tail && seg.purges_refused == refused) {
    size_t n = seg.dirty_tail->run < left ? seg.dirty_tail->run : left;
    seg.bytes_purged += run_purge_tail(seg.dirty_tail, n);
    left -= n;
    seg.grow_purged += n * ld_sb_size;
  }
}

void *ld_segment_alloc(size_t chunks, size_t touch, unsigned flags, bool *clean) {
  uint64_t listed_ns = 0;
  ld_segment_lock();
  chunk_t *c = fit_find(chunks);
  if (!c) {
    if (!segment_map(chunks) || !(c = bin_find(KIND_CLEAN, chunks))) {
      ld_segment_unlock(false);
      errno = ENOMEM;
      return NULL;
    }
  }
  segment_t *s = segment_of_chunk(c);
  uint32_t start = c->index;
  bool dirty = c->dirty, purged = c->purged;
  size_t reach = free_run_take_front(s, c, chunks);
  run_mark(s, start, (uint32_t)chunks, CHUNK_USED);
  s->used_chunks += (uint32_t)chunks;
  if (purged && !dirty) seg.bytes_refaulted += chunks * ld_sb_size;
  if (dirty) window_note();
  c->resident = (uint32_t)(reach > touch ? reach : touch);
  if (!dirty && seg.dirty_tail && LD_GROW_PURGE_BYTES()) grow_purge(chunks);
  if ((flags & LD_SEGMENT_TAIL) && reach > touch + touch / 2) {
    listed_ns = ld_os_now_coarse_ns();
    tail_push(c, touch, listed_ns);
  }
  ld_segment_unlock(false);
  if (listed_ns) ld_due_note(listed_ns);
  *clean = !dirty;
  return chunk_address(c);
}

/* The free run of the given kind just before chunk `start` of s, or NULL. */
static chunk_t *free_left(segment_t *s, uint32_t start, bool dirty) {
  if (start <= s->header_chunks || s->chunks[start - 1].state != CHUNK_FREE) return NULL;
  chunk_t *p = &s->chunks[start - s->chunks[start - 1].run];
  return (bool)p->dirty == dirty ? p : NULL;
}
/* The free run of the given kind starting at chunk `end` of s, or NULL. */
static chunk_t *free_right(segment_t *s, uint32_t end, bool dirty) {
  if (end >= s->chunk_count || s->chunks[end].state != CHUNK_FREE) return NULL;
  chunk_t *q = &s->chunks[end];
  return (bool)q->dirty == dirty ? q : NULL;
}

/* Files [start, start+len) of s as a free run of the given kind, coalesced with its free
 * neighbours of that kind (a dirty run takes the time given, the newest; a clean run is purged
 * if any part of it was). `resident`: how far the new part's resident pages may reach; the
 * coalesced run's bound is the last part's that has any. Lock held. */
static void run_file_coalesced(segment_t *s, uint32_t start, uint32_t len, bool dirty, bool purged, uint64_t now,
                               size_t resident) {
  chunk_t *p = free_left(s, start, dirty);
  if (p) {
    purged |= p->purged;
    if (!resident) resident = p->resident;
    else resident += (size_t)p->run * ld_sb_size;
    free_run_remove(p);
    len += p->run;
    start = p->index;
  }
  chunk_t *q = free_right(s, start + len, dirty);
  if (q) {
    purged |= q->purged;
    if (q->resident) resident = (size_t)len * ld_sb_size + q->resident;
    free_run_remove(q);
    len += q->run;
  }
  free_run_insert(s, start, len, dirty, dirty ? false : purged, dirty ? now : 0, dirty ? resident : 0);
}

/* Frees chunks [start, start+len) of s, resident up to `resident` bytes: a dirty run. Lock held. */
static void run_free_locked(segment_t *s, uint32_t start, uint32_t len, uint64_t now, size_t resident) {
  size_t bytes = (size_t)len * ld_sb_size;
  run_file_coalesced(s, start, len, true, false, now, resident < bytes ? resident : bytes);
}

/* Gives [addr, addr + bytes) of s back to the OS. In a segment advised for huge pages
 * (LARDER_HUGE_PAGES), a 2 MiB range the purge covers only in part keeps pages it did not
 * purge, and the kernel's khugepaged collapses such a range into a huge page again, faulting
 * the purged part back in: a 256 MiB range purged but for one page in 2 MiB came back at 16
 * MiB every 10 s (this kernel's defaults: 4,096 pages scanned every 10 s), so memory given back
 * after a peak came back within minutes. Those ranges (at most the two at the purge's ends)
 * keep 4 KiB pages from then on (MADV_NOHUGEPAGE), the rest of the segment its huge pages. A
 * refusal (the kernel's count of mappings) leaves the range as it was. */
static int segment_purge(segment_t *s, char *addr, size_t bytes) {
  int rc = ld_os_purge(addr, bytes);
  if (rc != 0 || !s->huge) return rc;
  uintptr_t lo = (uintptr_t)addr, hi = lo + bytes, huge = LD_OS_HUGE_PAGE;
  uintptr_t seg_lo = (uintptr_t)s, seg_hi = seg_lo + s->bytes;
  uintptr_t partial[2] = {lo & (huge - 1) ? lo & ~(huge - 1) : 0, hi & (huge - 1) ? hi & ~(huge - 1) : 0};
  for (int i = 0; i < 2; i++) {
    if (!partial[i] || (i == 1 && partial[1] == partial[0])) continue;
    uintptr_t from = partial[i] > seg_lo ? partial[i] : seg_lo, to = partial[i] + huge < seg_hi ? partial[i] + huge : seg_hi;
    ld_os_advise_no_huge_pages((void *)from, to - from);
  }
  return 0;
}

/* Purges chunks [start, start+n) of s, free and filed nowhere yet, and files them clean.
 * A purge the OS refuses (madvise on pages locked by mlock or mlockall: EINVAL) leaves the
 * bytes as they were: the run is filed dirty again, as if freed now, since a clean run is
 * taken as reading zero (calloc clears none of a medium span from one). Filed clean, such a
 * run gave calloc(1536000) 14 bytes of an earlier block under mlockall. Returns the bytes
 * purged (0: refused, counted in purges_refused, which ends the purge's loops).
 * The madvise is made without the lock, the chunks marked in use meanwhile (no allocation
 * takes them, no neighbour's free coalesces with them, their segment stays mapped): a thread
 * that waits for the lock (a new superblock, a medium span) waits for the bookkeeping alone.
 * With more runnable threads than cores, a purge thread preempted in the middle of a madvise
 * under the lock kept such a thread waiting for milliseconds (tail-latency: 46-75 holds of
 * over 50 us in 5 s). Lock held on entry and on return, let go between. */
static size_t run_purge_and_file(segment_t *s, uint32_t start, uint32_t n) {
  size_t bytes = (size_t)n * ld_sb_size;
  chunk_t *c = &s->chunks[start];
  run_mark(s, start, n, CHUNK_USED);
  c->resident = 0;
  c->tail = 0;
  c->excess = 0;
  s->used_chunks += n;
  ld_segment_unlock(false);
  int rc = segment_purge(s, (char *)s + (size_t)start * ld_sb_size, bytes);
  ld_segment_lock();
  s->used_chunks -= n;
  if (rc != 0) {
    seg.purges_refused++;
    run_file_coalesced(s, start, n, true, false, ld_os_now_coarse_ns(), bytes);
    return 0;
  }
  run_file_coalesced(s, start, n, false, true, 0, 0);
  return bytes;
}

/* Set by the purge around what it gives back for a thread that stopped calling: those chunks
 * are purged at once rather than filed dirty, since their blocks have waited a delay already
 * (a dirty run filed now would also make its dirty neighbours as new as itself). */
static __thread bool free_purges;
void ld_segment_purge_frees(bool on) { free_purges = on; }

void ld_segment_free(void *run, size_t chunks, size_t resident) {
  segment_t *s = segment_of_address(run);
  uint32_t start = (uint32_t)(((uintptr_t)run - (uintptr_t)s) >> ld_sb_shift);
  /* the coarse clock (a tick late at most: a decay in purge delays needs no finer); the precise
   * one was 5% of the CPU of 20-60 KiB churn */
  uint64_t now = ld_os_now_coarse_ns();
  ld_segment_lock();
  chunk_t *c = &s->chunks[start];
  if (s->magic != SEGMENT_MAGIC || start < s->header_chunks || start >= s->chunk_count || c->state != CHUNK_USED ||
      c->run != chunks) {
    ld_segment_unlock(false);
    ld_fatal_bad_free("double free or corrupted span (chunks not in use)", run);
  }
  /* (a small superblock's class, in the ownership map, goes with it: a span's chunks hold none) */
  ld_addrmap_set_small_class(run, 0);
  s->used_chunks -= (uint32_t)chunks;
  if (c->tail) tail_remove(c);
  __atomic_store_n(&c->excess, 0, __ATOMIC_RELAXED);
  if (c->resident > resident) resident = c->resident;
  if (free_purges) {
    seg.bytes_purged += run_purge_and_file(s, start, (uint32_t)chunks);
    /* the purge frees superblock after superblock: a thread that waits goes first (os.h) */
    ld_purge_unlock_to_waiter(&seg.lock);
    return;
  }
  run_free_locked(s, start, (uint32_t)chunks, now, resident);
  ld_segment_unlock(false);
  ld_due_note(now);
}

/* The chunk that starts the run in use at `run`. */
static chunk_t *run_chunk(void *run) {
  segment_t *s = segment_of_address(run);
  /* (a shift: a division by the variable S was a 64-bit divide on every medium free) */
  return &s->chunks[((uintptr_t)run - (uintptr_t)s) >> ld_sb_shift];
}

/* Only a listed run's bounds change under another thread (the purge of its tail): an unlisted
 * one's are its holder's alone, and stay so until it is freed or resized. The flag read clear
 * with acquire says any purge of its tail is over. A run marked excess is listed late by its
 * owner's thread (ld_segment_list_late) under the lock: anyone else clears the mark under the
 * lock too, so that the owner never lists a run another thread has taken. */
/* ld_segment_kept_reach's case of a marked run another thread frees (unlist false: a run
 * listed by its owner meanwhile goes to its segment), or of a listed run its owner keeps */
static LD_NOINLINE size_t kept_reach_locked(chunk_t *c, bool unlist) {
  ld_segment_lock();
  __atomic_store_n(&c->excess, 0, __ATOMIC_RELAXED);
  size_t reach = c->resident;
  if (c->tail && unlist) tail_remove(c);
  else if (c->tail) reach = 0;
  ld_segment_unlock(false);
  return reach;
}

static inline __attribute__((always_inline)) size_t kept_reach(void *run, bool owner, bool unlist, uint32_t *late_slot) {
  chunk_t *c = run_chunk(run);
  if (late_slot) *late_slot = UINT32_MAX;
  /* The mark first, with acquire: a listing clears it after it lists the run, with release
   * (ld_segment_list_late), so that a mark read clear is followed by the flag read set. */
  uint8_t excess = __atomic_load_n(&c->excess, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&c->tail, __ATOMIC_ACQUIRE)) return unlist ? kept_reach_locked(c, true) : 0;
  if (LD_LIKELY(!excess)) return __atomic_load_n(&c->resident, __ATOMIC_RELAXED);
  if (!owner) return kept_reach_locked(c, false);
  if (late_slot) *late_slot = c->need;
  __atomic_store_n(&c->excess, 0, __ATOMIC_RELAXED);
  return __atomic_load_n(&c->resident, __ATOMIC_RELAXED);
}

size_t ld_segment_kept_reach(void *run, bool owner, bool unlist, uint32_t *late_slot) {
  return kept_reach(run, owner, unlist, late_slot);
}
size_t ld_segment_kept_reach_own(void *run, bool unlist, uint32_t *late_slot) { return kept_reach(run, true, unlist, late_slot); }

void ld_segment_retouch(void *run, size_t touch) {
  __atomic_store_n(&run_chunk(run)->resident, (uint32_t)touch, __ATOMIC_RELAXED);
}

void ld_segment_mark_excess(void *run, uint32_t late_slot) {
  chunk_t *c = run_chunk(run);
  c->need = late_slot; /* (unused by a run not on the list of tails, and its holder's) */
  __atomic_store_n(&c->excess, 1, __ATOMIC_RELEASE);
}

/* The chunk of `run` if it lies at a chunk's start in a segment still mapped (lock held): a
 * late list's entry may name a span freed since, its segment unmapped. */
static chunk_t *run_chunk_mapped(const void *run) {
  segment_t *s = segment_of_address(run);
  if (!segment_is_mapped(s)) return NULL;
  uintptr_t i = ((uintptr_t)run - (uintptr_t)s) >> ld_sb_shift;
  if (((uintptr_t)run & (ld_sb_size - 1)) || i < s->header_chunks || i >= s->chunk_count) return NULL;
  return &s->chunks[i];
}

void ld_segment_list_late(void *const *runs, size_t n, const struct heap_s *owner) {
  size_t listed = 0;
  uint64_t now = ld_os_now_coarse_ns();
  /* The lines each entry needs are asked for before the lock (a prefetch never faults: the
   * segment may be gone), and waiters get the lock every 16 entries: up to 256 entries, two
   * cold lines each, held other threads' refills for tens of microseconds. */
  for (size_t i = 0; i < n; i++) {
    if (!runs[i]) continue;
    __builtin_prefetch(run_chunk(runs[i]));
    __builtin_prefetch(runs[i]);
  }
  ld_segment_lock();
  for (size_t i = 0; i < n; i++) {
    if (i % 16 == 15) ld_lock_let_waiters_in(&seg.lock);
    sb_t *span = runs[i];
    if (!span) continue; /* (freed by its owner since) */
    chunk_t *c = run_chunk_mapped(span);
    /* Marked: the start of a span in use (only a span's start is marked, and its free clears
     * it). Acquire: the owner its marker wrote before the mark is seen. */
    if (!c || !__atomic_load_n(&c->excess, __ATOMIC_ACQUIRE) || atomic_load_explicit(&span->owner, memory_order_relaxed) != owner)
      continue;
    /* (the user's bytes: its usable size changes only by a resize, which takes the lock for a
     * marked run) */
    size_t need = (size_t)(span->data - (char *)span) + span->usable;
    if (!c->tail && c->state == CHUNK_USED && c->resident > need + need / 2) {
      tail_push(c, need, now);
      listed++;
    }
    /* after the flag: a free or resize that reads the mark clear without the lock then reads
     * the flag set (ld_segment_kept_reach) */
    __atomic_store_n(&c->excess, 0, __ATOMIC_RELEASE);
  }
  ld_segment_unlock(false);
  if (listed) ld_due_note(now);
}

bool ld_segment_resize(void *run, size_t chunks, size_t new_chunks, size_t touch) {
  segment_t *s = segment_of_address(run);
  uint32_t start = (uint32_t)(((uintptr_t)run - (uintptr_t)s) >> ld_sb_shift);
  chunk_t *c = &s->chunks[start];
  /* Its user may use more of it now: off the list first, so that no purge of its tail is under
   * way once this returns (the flag read clear, with acquire, says the last one is over). The
   * bound stays where it was, but for bytes the user will touch (only it writes it in use). */
  uint8_t excess = __atomic_load_n(&c->excess, __ATOMIC_ACQUIRE); /* (before the flag: ld_segment_kept_reach) */
  if (new_chunks == chunks && !excess && !__atomic_load_n(&c->tail, __ATOMIC_ACQUIRE)) {
    if (touch > __atomic_load_n(&c->resident, __ATOMIC_RELAXED)) __atomic_store_n(&c->resident, (uint32_t)touch, __ATOMIC_RELAXED);
    return true;
  }
  uint64_t now = ld_os_now_coarse_ns();
  bool ok = false;
  ld_segment_lock();
  if (c->tail) tail_remove(c);
  __atomic_store_n(&c->excess, 0, __ATOMIC_RELAXED); /* (its owner lists it no more) */
  /* within the run as it is (a growth that succeeds follows all it takes, below; one that
   * fails leaves the run as it was: its user touches nothing past it) */
  if (touch > c->resident && touch <= chunks * ld_sb_size) c->resident = (uint32_t)touch;
  if (new_chunks == chunks) {
    ld_segment_unlock(false);
    return true;
  }
  if (new_chunks < chunks) {
    run_mark(s, start, (uint32_t)new_chunks, CHUNK_USED);
    s->used_chunks -= (uint32_t)(chunks - new_chunks);
    size_t kept = new_chunks * ld_sb_size;
    run_free_locked(s, start + (uint32_t)new_chunks, (uint32_t)(chunks - new_chunks), now,
                    c->resident > kept ? c->resident - kept : 0);
    if (c->resident > kept) c->resident = (uint32_t)kept;
    ok = true;
  } else {
    /* The chunks after the span: a free run, and the free run of the other kind after it
     * (a dirty and a clean run may lie side by side). */
    uint32_t end = start + (uint32_t)chunks;
    size_t extra = new_chunks - chunks;
    chunk_t *q = end < s->chunk_count && s->chunks[end].state == CHUNK_FREE ? &s->chunks[end] : NULL;
    chunk_t *r = q && q->run < extra ? free_right(s, end + q->run, !q->dirty) : NULL;
    if (q && q->run + (r ? r->run : 0) >= extra) {
      for (chunk_t *c = q; c && extra > 0; c = c == q ? r : NULL) {
        size_t n = c->run < extra ? c->run : extra;
        bool dirty = c->dirty, purged = c->purged;
        free_run_take_front(s, c, n);
        if (purged && !dirty) seg.bytes_refaulted += n * ld_sb_size;
        if (dirty) window_note();
        extra -= n;
      }
      run_mark(s, start, (uint32_t)new_chunks, CHUNK_USED);
      s->used_chunks += (uint32_t)(new_chunks - chunks);
      c->resident = (uint32_t)(new_chunks * ld_sb_size); /* the chunks taken: not followed */
      ok = true;
    }
  }
  ld_segment_unlock(false);
  if (ok && new_chunks < chunks) ld_due_note(now);
  return ok;
}

/* Purges the last `chunks` chunks of the dirty free run c (all of it when chunks >= its
 * length): they become clean and coalesce with the clean run after them; the rest of c stays
 * dirty, in its place on the decay list. Returns the bytes purged. Lock held. */
static size_t run_purge_tail(chunk_t *c, size_t chunks) {
  segment_t *s = segment_of_chunk(c);
  uint32_t start = c->index, len = c->run;
  uint32_t n = chunks < len ? (uint32_t)chunks : len, keep = len - n;
  if (keep) { /* the front stays dirty, as old as it was */
    bin_remove(c);
    free_run_account(c, -1);
    run_mark(s, start, keep, CHUNK_FREE);
    if (c->resident > (size_t)keep * ld_sb_size) c->resident = (uint32_t)((size_t)keep * ld_sb_size);
    bin_insert(c);
    free_run_account(c, +1);
  } else {
    free_run_remove(c);
  }
  /* a clean run before it is impossible when keep > 0 (c is dirty); else coalesce both ways */
  return run_purge_and_file(s, start + keep, n);
}

/* Every so many purges (a madvise each) the purge lets a thread that waits for the segment
 * lock (a new superblock, a medium span) go first: after a drop the runs to purge are many. Each
 * loop below reads its list's head again after a turn. */
#define PURGES_PER_TURN 8u

size_t ld_segment_purge(uint64_t now, bool all) {
  uint64_t delay = ld_purge_delay();
  /* all (malloc_trim): what was there when the call began, not what other threads free while
   * it runs. The loops let them in between purges; at every age, runs freed as fast as they
   * were purged kept the loops going: under load malloc_trim took minutes (bench/soak.c,
   * --trim-every: 284 s). */
  uint64_t age = all ? 0 : delay;
  size_t released = 0;
  unsigned steps = 0;
  ld_segment_lock();
  seg.grow_purged = 0; /* (growth over fragments: the budget starts again) */
  /* a refused purge (run_purge_and_file) ends the loops: the run is filed again as new, and
   * the next oldest would most likely be refused too (every page locked) */
  size_t refused = seg.purges_refused;
  bool go = true; /* (false: a fork or trim waits for this run, internal.h ld_purge_turn) */
  /* Tails of runs in use that have lived the delay: pages past what their users touch. */
  while (go && seg.tails_head && seg.tails_head->freed_ns + age <= now) {
    chunk_t *c = seg.tails_head;
    if (c->resident > c->need && segment_purge(segment_of_chunk(c), chunk_address(c) + c->need, c->resident - c->need) == 0) {
      seg.bytes_tails_purged += c->resident - c->need;
      c->resident = c->need;
    }
    tail_remove(c);
    if (++steps % PURGES_PER_TURN == 0) go = ld_purge_turn(&seg.lock, all);
  }
  /* By age: runs idle for the delay. */
  while (go && seg.dirty_tail && seg.dirty_tail->freed_ns + age <= now && seg.purges_refused == refused) {
    released += run_purge_tail(seg.dirty_tail, SIZE_MAX);
    if (++steps % PURGES_PER_TURN == 0) go = ld_purge_turn(&seg.lock, all);
  }
  /* By amount: dirty memory that was never needed during the last windows, the oldest first.
   * The runs purged by age count towards it. */
  if (go && (all || now - seg.window_start_ns >= delay)) {
    size_t target = seg.window_min_dirty;
    for (unsigned i = 0; i < PURGE_WINDOWS - 1; i++)
      if (seg.past_min_dirty[i] < target) target = seg.past_min_dirty[i];
    while (go && !all && seg.dirty_tail && released < target && seg.purges_refused == refused) {
      size_t want = (target - released + ld_sb_size - 1) / ld_sb_size;
      released += run_purge_tail(seg.dirty_tail, want);
      if (++steps % PURGES_PER_TURN == 0) go = ld_purge_turn(&seg.lock, all);
    }
    /* The window ends; what was purged leaves the low marks of the ones before (it is no
     * longer dirty memory that could stay unused). */
    for (unsigned i = PURGE_WINDOWS - 2; i > 0; i--) seg.past_min_dirty[i] = seg.past_min_dirty[i - 1];
    seg.past_min_dirty[0] = seg.window_min_dirty;
    for (unsigned i = 0; i < PURGE_WINDOWS - 1; i++)
      seg.past_min_dirty[i] = seg.past_min_dirty[i] > released ? seg.past_min_dirty[i] - released : 0;
    seg.window_start_ns = now;
    seg.window_min_dirty = seg.bytes_free_dirty;
  }
  /* A wholly free segment, purged (one clean run), goes back to the OS; the newest one stays
   * unless this is a trim, so a process that idles keeps one segment's address space and no
   * resident page. */
  segment_t *s = seg.segments;
  while (s) {
    segment_t *next = s->next;
    chunk_t *c = &s->chunks[s->header_chunks];
    if (s->used_chunks == 0 && c->state == CHUNK_FREE && !c->dirty && c->run == s->chunk_count - s->header_chunks - GUARD_CHUNKS &&
        (all || s != seg.segments)) {
      free_run_remove(c);
      released += s->bytes - (size_t)s->header_chunks * ld_sb_size;
      segment_unmap(s);
    }
    s = next;
  }
  seg.bytes_purged += released;
  ld_segment_unlock(false);
  return released;
}

uint64_t ld_segment_next_expiry(void) {
  uint64_t delay = ld_purge_delay();
  ld_segment_lock();
  uint64_t t = 0;
  if (seg.dirty_tail) {
    t = seg.dirty_tail->freed_ns + delay;
    /* the end of the window, when the purge by amount looks again */
    if (seg.window_start_ns + delay < t) t = seg.window_start_ns + delay;
  }
  if (seg.tails_head && (!t || seg.tails_head->freed_ns + delay < t)) t = seg.tails_head->freed_ns + delay;
  ld_segment_unlock(false);
  return t;
}

void ld_segment_stats(ld_segment_stats_t *out) {
  ld_segment_lock();
  out->segments = seg.segment_count;
  out->bytes_free_dirty = seg.bytes_free_dirty;
  out->bytes_free_clean = seg.bytes_free_clean;
  out->bytes_purged = seg.bytes_purged;
  out->bytes_refaulted = seg.bytes_refaulted;
  out->bytes_tails_purged = seg.bytes_tails_purged;
  ld_segment_unlock(false);
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

/* Every segment is covered by runs whose ends agree; free runs of one kind are never adjacent
 * (they are coalesced), each is in the bin of its length and kind, and the dirty ones are on
 * the decay list. */
void ld_segment_validate(int *violations) {
  ld_segment_lock();
  size_t free_runs = 0, dirty_runs = 0, binned = 0, listed = 0, dirty_bytes = 0, tail_runs = 0, tails = 0;
  for (segment_t *s = seg.segments; s; s = s->next) {
    if (s->magic != SEGMENT_MAGIC) {
      VIOLATION("segment %p: bad magic\n", (void *)s);
      continue;
    }
    if (!segment_is_mapped(s)) VIOLATION("segment %p: not in the set of mapped segments\n", (void *)s);
    uint32_t i = 0, used = 0;
    int prev_state = 0, prev_dirty = -1;
    while (i < s->chunk_count) {
      chunk_t *c = &s->chunks[i];
      if (c->run == 0 || i + c->run > s->chunk_count) {
        VIOLATION("segment %p chunk %u: run of %u chunks overruns the segment\n", (void *)s, i, c->run);
        break;
      }
      chunk_t *last = &s->chunks[i + c->run - 1];
      if (last->run != c->run || last->state != c->state)
        VIOLATION("segment %p chunk %u: run ends disagree\n", (void *)s, i);
      if (c->state == CHUNK_FREE) {
        free_runs++;
        if (prev_state == CHUNK_FREE && prev_dirty == c->dirty)
          VIOLATION("segment %p chunk %u: two free runs of one kind side by side\n", (void *)s, i);
        if (c->bin != bin_of(c->run)) VIOLATION("segment %p chunk %u: in bin %u, length %u\n", (void *)s, i, c->bin, c->run);
        if (c->dirty) {
          dirty_runs++;
          dirty_bytes += (size_t)c->run * ld_sb_size;
        }
        if (c->dirty ? c->resident > (size_t)c->run * ld_sb_size : c->resident != 0)
          VIOLATION("segment %p chunk %u: resident bound %u for a %s run of %u chunks\n", (void *)s, i, c->resident,
                    c->dirty ? "dirty" : "clean", c->run);
      } else if (c->state == CHUNK_USED) {
        used += c->run;
        tail_runs += c->tail;
        if (c->resident > (size_t)c->run * ld_sb_size || (c->tail && (c->need >= c->resident || c->need == 0)))
          VIOLATION("segment %p chunk %u: run in use with resident bound %u, tail %u of %u bytes used, %u chunks\n",
                    (void *)s, i, c->resident, c->tail, c->need, c->run);
      }
      if (c->state != CHUNK_USED && c->tail) VIOLATION("segment %p chunk %u: a run not in use on the list of tails\n", (void *)s, i);
      if (c->excess && (c->state != CHUNK_USED || c->tail))
        VIOLATION("segment %p chunk %u: a run marked for late listing that is %s\n", (void *)s, i, c->tail ? "listed" : "not in use");
      prev_state = c->state;
      prev_dirty = c->dirty;
      i += c->run;
    }
    if (used != s->used_chunks) VIOLATION("segment %p: %u chunks in use, counted %u\n", (void *)s, used, s->used_chunks);
  }
  for (unsigned k = 0; k < 2; k++)
    for (unsigned b = 0; b < BIN_COUNT; b++) {
      bool any = seg.bins[k][b] != NULL;
      if (any != !!(seg.bitmap[k][b / 64] & ((uint64_t)1 << (b % 64)))) VIOLATION("segment bins: bitmap of bin %u/%u is wrong\n", k, b);
      for (chunk_t *c = seg.bins[k][b]; c; c = c->next) {
        if (c->state != CHUNK_FREE || c->bin != b || c->dirty != k)
          VIOLATION("segment bins: run %p in bin %u/%u is not free there\n", (void *)c, k, b);
        if (++binned > free_runs + 1) break;
      }
    }
  for (chunk_t *c = seg.dirty_head; c; c = c->dnext) {
    if (!c->dirty || c->state != CHUNK_FREE) VIOLATION("decay list: run %p is not a dirty free run\n", (void *)c);
    if (c->dnext && c->dnext->freed_ns > c->freed_ns) VIOLATION("decay list: out of order at %p\n", (void *)c);
    if (++listed > dirty_runs + 1) break;
  }
  for (chunk_t *c = seg.tails_head; c; c = c->dnext) {
    if (!c->tail || c->state != CHUNK_USED) VIOLATION("list of tails: run %p is not a run in use marked so\n", (void *)c);
    if (c->dnext && c->dnext->freed_ns < c->freed_ns) VIOLATION("list of tails: out of order at %p\n", (void *)c);
    if (++tails > tail_runs + 1) break;
  }
  if (tails != tail_runs) VIOLATION("list of tails holds %zu runs, segments mark %zu\n", tails, tail_runs);
  if (binned != free_runs) VIOLATION("segment bins hold %zu runs, segments have %zu free runs\n", binned, free_runs);
  if (listed != dirty_runs) VIOLATION("decay list holds %zu runs, segments have %zu dirty runs\n", listed, dirty_runs);
  if (dirty_bytes != seg.bytes_free_dirty) VIOLATION("dirty free bytes %zu, counted %zu\n", dirty_bytes, seg.bytes_free_dirty);
  ld_segment_unlock(false);
}
