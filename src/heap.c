/* Heaps, superblocks and the global heap: every slow path of small allocations.
 *
 * Hoard (seed 004 §3): each thread has its own heap; superblocks of one size class belong to
 * one heap at a time; the global heap (Hoard's heap 0) takes superblocks back when a heap
 * falls below the emptiness threshold, and from exited threads, and hands them to heaps that
 * run out. The threshold keeps, for every heap, (u >= a - K*S) or (u >= (1-f)*a), which bounds
 * blowup to a constant factor (Hoard §4.1).
 *
 * Locking: a heap is touched only by its thread. The global heap, the segment cursor and the
 * list of heaps are guarded by one mutex, taken only on the paths from step 3 onwards (see the
 * map at the top of alloc.c). Remote frees take no lock at all.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- size classes ---- */
uint8_t ld_class_of_granule[LD_SMALL_LIMIT / 16 + 1];
uint32_t ld_class_size[LD_CLASS_COUNT];
/* Bytes of blocks one superblock of each class holds: Hoard's "a" counts these rather than S,
 * so that a heap of full superblocks has u == a even when blocks do not divide S evenly
 * (otherwise, for f below the tail waste, the invariant could never hold). */
static int64_t class_capacity_bytes[LD_CLASS_COUNT + 1];

size_t ld_sb_size = 65536;
uintptr_t ld_sb_mask = ~(uintptr_t)65535;
size_t ld_small_max = LD_SMALL_LIMIT;
uintptr_t ld_free_key;

/* The heap every thread starts with: all its classes point at a superblock with no blocks,
 * so the first malloc of a thread falls to the slow path, which makes the real heap. */
static sb_t sb_none;
heap_t ld_heap_empty = {.current = {[0 ... LD_CLASS_COUNT] = &sb_none}};
__thread heap_t *ld_heap_tls __attribute__((tls_model("initial-exec"))) = &ld_heap_empty;

/* ---- the global heap ---- */
#define SEGMENT_SIZE ((size_t)4 << 20) /* superblocks are carved from 4 MiB mappings */

typedef struct sb_list_s {
  sb_t *head, *tail;
  size_t count;
} sb_list_t;

static struct {
  pthread_mutex_t lock;
  heap_t heap;                     /* owner of every superblock the global heap holds */
  int64_t u, a;                    /* Hoard's u_0 and a_0 */
  sb_list_t by_class[LD_CLASS_COUNT]; /* partly used superblocks given back by heaps */
  sb_list_t empty_dirty;           /* empty, pages still resident; newest at head */
  sb_list_t empty_clean;           /* empty and purged */
  char *segment_next, *segment_end;
  heap_t *heaps;                   /* every heap ever made; exited threads' are not live */
  ld_stats_t retired;              /* counters of heaps that were abandoned */
  size_t carved_total, carved_since_reclaim;   /* superblocks carved from segments */
  uint64_t last_reclaim_ns;
} global = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_key_t heap_key;
static ld_stats_t stats_unowned;   /* events in threads without a heap, counted atomically */
static _Atomic int init_state;     /* 0 not started, 1 running, 2 done */
static __thread int init_running_here;
static __thread int thread_exit_ran;  /* larder's thread-exit hook has run in this thread */
static _Atomic unsigned options_epoch = 1;

static void heap_thread_exit(void *arg);
static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);
static void stats_at_exit(void);

static size_t sb_data_offset(uint32_t block_size);

/* ---- initialisation ---- */

static void classes_init(void) {
  unsigned cls = 0;
  for (uint32_t s = 16; s <= 128; s += 16) ld_class_size[cls++] = s;
  for (uint32_t base = 128; base < LD_SMALL_LIMIT; base *= 2)
    for (uint32_t step = 1; step <= 8; step++) ld_class_size[cls++] = base + step * (base / 8);
  for (unsigned k = 0; k < LD_CLASS_COUNT; k++)
    class_capacity_bytes[k] = (int64_t)((ld_sb_size - sb_data_offset(ld_class_size[k])) / ld_class_size[k]) * ld_class_size[k];
  for (unsigned k = 0; k <= LD_CLASS_COUNT; k++) /* classes too big for this S are never used */
    if (class_capacity_bytes[k] == 0) class_capacity_bytes[k] = (int64_t)ld_sb_size;
  unsigned c = 0;
  for (size_t g = 0; g <= LD_SMALL_LIMIT / 16; g++) {
    size_t size = g * 16;
    while (c < LD_CLASS_COUNT && ld_class_size[c] < size) c++;
    ld_class_of_granule[g] = (uint8_t)((size <= ld_small_max && c < LD_CLASS_COUNT) ? c : LD_CLASS_LARGE);
  }
}

void ld_init_if_needed(void) {
  int state = atomic_load_explicit(&init_state, memory_order_acquire);
  if (LD_LIKELY(state == 2)) return;
  if (init_running_here) return; /* the initialiser itself allocated: defaults serve it */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) sched_yield();
    return;
  }
  init_running_here = 1;
  ld_options_init();
  ld_sb_size = (size_t)ld_options.superblock_size;
  ld_sb_mask = ~(uintptr_t)(ld_sb_size - 1);
  ld_small_max = ld_sb_size / 4 < LD_SMALL_LIMIT ? ld_sb_size / 4 : LD_SMALL_LIMIT;
  ld_options_freeze();
  classes_init();
  /* The key that detects double frees: from the clock and an address (ASLR), not secret,
   * only unlikely to appear in user data by chance. */
  ld_free_key = (uintptr_t)ld_os_now_ns() * 0x9E3779B97F4A7C15ull ^ (uintptr_t)&global ^ 0x5bd1e995u;
  ld_free_key |= 1; /* a tag is never 0, the value malloc leaves in a live block */
  pthread_key_create(&heap_key, heap_thread_exit);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  if (ld_options.stats) atexit(stats_at_exit);
  if (ld_options.verbose)
    ld_message("larder: superblock %zu bytes, f=%.3f, K=%d, purge delay %d ms, large cache %d MiB\n", ld_sb_size,
               ld_options.empty_fraction, (int)ld_options.k, (int)ld_options.purge_delay_ms,
               (int)ld_options.large_cache_mb);
  init_running_here = 0;
  atomic_store_explicit(&init_state, 2, memory_order_release);
}

/* Before main, so that the class table is ready before the first allocation of any thread. */
__attribute__((constructor)) static void heap_constructor(void) { ld_init_if_needed(); }

void ld_options_changed(void) { atomic_fetch_add(&options_epoch, 1); }

/* ---- small helpers on superblocks and lists ---- */

static inline int sb_group_of(int32_t used, int32_t capacity) {
  if (used <= 0) return 0;
  if (used >= capacity) return LD_GROUP_FULL;
  return 1 + (int)((4 * (int64_t)used - 1) / capacity);
}

/* The smallest `used` that still belongs to group g. */
static inline int32_t sb_group_floor(int g, int32_t capacity) {
  if (g == 0) return 0;
  if (g == LD_GROUP_FULL) return capacity;
  return (int32_t)(((int64_t)(g - 1) * capacity + 1 + 3) / 4);
}

static void list_push_front(sb_list_t *list, sb_t *sb) {
  sb->prev = NULL;
  sb->next = list->head;
  if (list->head) list->head->prev = sb; else list->tail = sb;
  list->head = sb;
  list->count++;
}

static void list_push_back(sb_list_t *list, sb_t *sb) {
  sb->next = NULL;
  sb->prev = list->tail;
  if (list->tail) list->tail->next = sb; else list->head = sb;
  list->tail = sb;
  list->count++;
}

static void list_remove(sb_list_t *list, sb_t *sb) {
  if (sb->prev) sb->prev->next = sb->next; else list->head = sb->next;
  if (sb->next) sb->next->prev = sb->prev; else list->tail = sb->prev;
  sb->next = sb->prev = NULL;
  list->count--;
}

/* The first block sits at a multiple of the largest power of two dividing the block size
 * (up to 16 KiB), so that a class whose size is a multiple of an alignment gives aligned
 * blocks (larder_memalign). For the power-of-two classes this costs nothing: the header
 * already forces the first block past offset 0. */
static size_t sb_data_offset(uint32_t block_size) {
  size_t pow2 = (size_t)block_size & (~(size_t)block_size + 1);
  if (pow2 > LD_SMALL_LIMIT) pow2 = LD_SMALL_LIMIT;
  return pow2 < LD_SB_HEADER ? LD_SB_HEADER : pow2;
}

static void sb_format(sb_t *sb, unsigned cls) {
  uint32_t bs = ld_class_size[cls];
  size_t offset = sb_data_offset(bs);
  sb->free_list = NULL;
  sb->used = 0;
  sb->floor = 0;
  sb->block_size = bs;
  sb->capacity = (uint32_t)((ld_sb_size - offset) / bs);
  sb->reciprocal = (((uint64_t)1 << 40) + bs - 1) / bs;
  sb->data = (char *)sb + offset;
  sb->bump = sb->data;
  sb->magic = LD_SB_MAGIC;
  sb->size_class = (uint8_t)cls;
  sb->kind = LD_KIND_SMALL;
  atomic_store_explicit(&sb->remote, NULL, memory_order_relaxed);
}

/* Carves up to a page's worth of untouched blocks onto the free list: memory is touched as it
 * is needed, so a superblock's pages become resident one at a time. */
static int sb_carve(sb_t *sb) {
  char *end = sb->data + (size_t)sb->capacity * sb->block_size;
  if (sb->bump >= end) return 0;
  size_t want = 4096 / sb->block_size;
  if (want < 1) want = 1;
  ld_block_t *head = sb->free_list;
  int n = 0;
  while (n < (int)want && sb->bump + sb->block_size <= end) {
    /* blocks are carved in address order, so push them in reverse */
    n++;
    sb->bump += sb->block_size;
  }
  for (int i = 1; i <= n; i++) {
    ld_block_t *b = (ld_block_t *)(sb->bump - (size_t)i * sb->block_size);
    b->next = head;
    b->tag = ld_free_key ^ (uintptr_t)b;
    head = b;
  }
  sb->free_list = head;
  return n;
}

/* Takes every block other threads freed into sb with one exchange; returns how many. */
static int sb_collect_remote(sb_t *sb) {
  if (atomic_load_explicit(&sb->remote, memory_order_relaxed) == NULL) return 0;
  ld_block_t *list = atomic_exchange_explicit(&sb->remote, NULL, memory_order_acquire);
  if (!list) return 0;
  int n = 1;
  ld_block_t *tail = list;
  while (tail->next) {
    tail = tail->next;
    n++;
  }
  tail->next = sb->free_list;
  sb->free_list = list;
  sb->used -= n;
  return n;
}

void ld_free_remote(sb_t *sb, ld_block_t *b) {
  /* A superblock the global heap holds with no block in use has nothing to free: this is a
   * double free into memory that may already have been purged (and lost its tags). A live
   * block's superblock cannot be in that state, whoever handed the block over. */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) == &global.heap &&
      __atomic_load_n(&sb->used, __ATOMIC_RELAXED) <= 0)
    ld_fatal_bad_free("double free", b);
  b->tag = ld_free_key ^ (uintptr_t)b;
  ld_block_t *head = atomic_load_explicit(&sb->remote, memory_order_relaxed);
  do {
    b->next = head;
  } while (!atomic_compare_exchange_weak_explicit(&sb->remote, &head, b, memory_order_release,
                                                  memory_order_relaxed));
}

/* ---- a heap's fullness groups ---- */

static void heap_recompute_threshold(heap_t *heap, unsigned c) {
  double f = ld_options.empty_fraction;
  int64_t by_k = heap->a[c] - (int64_t)ld_options.k * class_capacity_bytes[c];
  int64_t by_f = (int64_t)((1.0 - f) * (double)heap->a[c]);
  /* The invariant fails only when both hold: u < a - K*S and u < (1-f)*a (Hoard §3.1);
   * rounding by_f down keeps u == (1-f)*a on the legal side. */
  heap->u_release[c] = by_k < by_f ? by_k : by_f;
}

/* Sets the current superblock's floor from the threshold; the owner's paths only, since its
 * fast path reads it. */
static void heap_set_release_mark(heap_t *heap, unsigned c) {
  heap_recompute_threshold(heap, c);
  sb_t *cur = heap->current[c];
  if (cur != &sb_none) {
    int64_t mark = heap->u_release[c] - heap->u_other[c];
    int64_t floor = mark <= 0 ? 0 : (mark + cur->block_size - 1) / cur->block_size;
    cur->floor = floor > INT32_MAX ? INT32_MAX : (int32_t)floor;
  }
}

/* Hoard's u for class c: the current superblock's blocks and the others'. */
static inline int64_t heap_u(const heap_t *heap, unsigned c) {
  /* relaxed loads: the statistics call this on other threads' heaps while they run */
  const sb_t *cur = __atomic_load_n(&heap->current[c], __ATOMIC_RELAXED);
  return __atomic_load_n(&heap->u_other[c], __ATOMIC_RELAXED) +
         (cur != &sb_none ? (int64_t)__atomic_load_n(&cur->used, __ATOMIC_RELAXED) * cur->block_size : 0);
}

static void heap_recompute_all(heap_t *heap) {
  heap->options_epoch = atomic_load_explicit(&options_epoch, memory_order_relaxed);
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) heap_recompute_threshold(heap, c);
}

static void heap_group_insert(heap_t *heap, sb_t *sb) {
  int g = sb_group_of(sb->used, (int32_t)sb->capacity);
  unsigned c = sb->size_class;
  sb->group = (uint8_t)g;
  sb->floor = sb_group_floor(g, (int32_t)sb->capacity);
  sb->prev = NULL;
  sb->next = heap->groups[c][g];
  if (sb->next) sb->next->prev = sb;
  heap->groups[c][g] = sb; /* move to front (Hoard §3.1): reuse what was freed last */
  heap->group_classes[g] |= (uint64_t)1 << c;
}

static void heap_group_remove(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class, g = sb->group;
  if (sb->prev) sb->prev->next = sb->next; else heap->groups[c][g] = sb->next;
  if (sb->next) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
  if (!heap->groups[c][g]) heap->group_classes[g] &= ~((uint64_t)1 << c);
}

static inline bool sb_is_current(heap_t *heap, sb_t *sb) { return heap->current[sb->size_class] == sb; }

/* ---- the global heap ---- */

static void global_lock(void) { pthread_mutex_lock(&global.lock); }
static void global_unlock(void) { pthread_mutex_unlock(&global.lock); }

/* Gives the pages of empty superblocks that have been idle for the purge delay back to the OS.
 * The header page stays, so the superblock can be handed out again at once. */
static void global_purge_expired(uint64_t now, bool all) {
  uint64_t delay = (uint64_t)ld_options.purge_delay_ms * 1000000u;
  while (global.empty_dirty.tail) {
    sb_t *sb = global.empty_dirty.tail;
    if (!all && now - sb->idle_since_ns < delay) break;
    list_remove(&global.empty_dirty, sb);
    size_t page = ld_os_page_size();
    ld_os_purge((char *)sb + page, ld_sb_size - page);
    sb->purged = 1;
    sb->free_list = NULL; /* the lists lived in the purged pages */
    sb->bump = sb->data;
    list_push_front(&global.empty_clean, sb);
  }
}

/* Called with the global lock held. */
static void global_put(sb_t *sb, uint64_t now) {
  sb_collect_remote(sb);
  atomic_store_explicit(&sb->owner, &global.heap, memory_order_relaxed);
  sb->floor = 0;
  global.a += (int64_t)ld_sb_size;
  global.u += (int64_t)sb->used * sb->block_size;
  if (sb->used == 0) {
    sb->idle_since_ns = now;
    sb->purged = 0;
    list_push_front(&global.empty_dirty, sb);
  } else {
    list_push_front(&global.by_class[sb->size_class], sb);
  }
}

/* A new superblock from the current segment, mapping a new segment when it is used up.
 * Called with the global lock held. */
static sb_t *segment_carve(void) {
  if (global.segment_next + ld_sb_size > global.segment_end) {
    void *seg;
    size_t bytes = SEGMENT_SIZE > ld_sb_size * 4 ? SEGMENT_SIZE : ld_sb_size * 4;
    if (ld_os_map_aligned(bytes, ld_sb_size, &seg) != 0) return NULL;
    global.segment_next = seg;
    global.segment_end = (char *)seg + bytes;
  }
  sb_t *sb = (sb_t *)global.segment_next;
  global.segment_next += ld_sb_size;
  return sb;
}

void *ld_segment_take_span(size_t chunks) {
  size_t bytes = chunks * ld_sb_size;
  if (bytes > SEGMENT_SIZE / 4) return NULL; /* a quarter segment at most: the rest is mapped */
  global_lock();
  if (global.segment_next + bytes > global.segment_end) {
    /* The rest of this segment goes to the global heap as empty superblocks, not to waste. */
    while (global.segment_next + ld_sb_size <= global.segment_end) {
      sb_t *sb = (sb_t *)global.segment_next;
      global.segment_next += ld_sb_size;
      sb_format(sb, 0);
      global_put(sb, ld_os_now_ns());
    }
    global.segment_end = global.segment_next; /* segment_carve maps a new one */
    sb_t *first = segment_carve();
    if (!first) {
      global_unlock();
      return NULL;
    }
    global.segment_next = (char *)first; /* carve the span from the new segment's start */
  }
  void *base = global.segment_next;
  global.segment_next += bytes;
  global_unlock();
  return base;
}

void ld_segment_give_span(void *base, size_t chunks) {
  size_t page = ld_os_page_size();
  ld_os_purge((char *)base + page, chunks * ld_sb_size - page);
  global_lock();
  for (size_t i = 0; i < chunks; i++) {
    sb_t *sb = (sb_t *)((char *)base + i * ld_sb_size);
    sb_format(sb, 0);
    sb->purged = 1;
    atomic_store_explicit(&sb->owner, &global.heap, memory_order_relaxed);
    global.a += (int64_t)ld_sb_size;
    list_push_front(&global.empty_clean, sb);
  }
  global_unlock();
}

/* A superblock of class cls from the global heap's lists, or NULL. Global lock held. */
static sb_t *global_take_listed(unsigned cls) {
  sb_list_t *mine = &global.by_class[cls];
  for (size_t tries = mine->count; tries > 0; tries--) {
    sb_t *sb = mine->head;
    list_remove(mine, sb);
    global.u -= (int64_t)sb_collect_remote(sb) * sb->block_size;
    if (sb->used < (int32_t)sb->capacity) {
      global.a -= (int64_t)ld_sb_size;
      global.u -= (int64_t)sb->used * sb->block_size;
      return sb;
    }
    list_push_back(mine, sb); /* still full: look at the next one */
  }
  sb_list_t *from = global.empty_dirty.head ? &global.empty_dirty : &global.empty_clean;
  sb_t *sb = from->head;
  if (!sb) return NULL;
  list_remove(from, sb);
  global.a -= (int64_t)ld_sb_size;
  if (sb->size_class != cls || sb->purged) sb_format(sb, cls);
  sb->purged = 0;
  return sb;
}

static void heap_reclaim(heap_t *me);

/* A superblock for class cls, now owned by heap, or NULL when the OS has no memory.
 * Before the process grows by new superblocks, the frees that other threads left on idle
 * heaps' superblocks are collected (heap_reclaim): without it a thread that allocated and
 * then went idle would keep all that memory, a P-fold blowup (Hoard §2.2). The reclaim walks
 * every heap, so it runs only after the process has grown by 16 superblocks and either by an
 * eighth since the last one (amortised, a constant cost per new superblock) or 10 ms after
 * it (at most a hundred walks a second). */
static sb_t *global_take(heap_t *heap, unsigned cls) {
  global_lock();
  sb_t *sb = global_take_listed(cls);
  uint64_t now = ld_os_now_ns();
  if (!sb && global.carved_since_reclaim >= 16 &&
      (global.carved_since_reclaim * 8 >= global.carved_total || now - global.last_reclaim_ns >= 10000000u)) {
    global.carved_since_reclaim = 0;
    global.last_reclaim_ns = now;
    global_unlock();
    heap_reclaim(heap);
    global_lock();
    sb = global_take_listed(cls);
  }
  if (!sb) {
    sb = segment_carve();
    if (sb) {
      sb_format(sb, cls);
      global.carved_since_reclaim++;
      global.carved_total++;
    }
  }
  if (sb) {
    atomic_store_explicit(&sb->owner, heap, memory_order_relaxed);
    LD_STAT_INC(heap, superblocks_from_global);
  }
  if (global.empty_dirty.tail) global_purge_expired(now, ld_options.purge_delay_ms == 0);
  global_unlock();
  ld_large_purge_expired(now);
  return sb;
}

/* ---- giving superblocks back: Hoard's emptiness threshold ---- */

/* Finds a class-c superblock at least f empty, emptiest group first (Hoard §3.1: "transfer a
 * mostly-empty superblock"). Below the threshold one always exists: if u < (1-f)a, some
 * superblock is less than (1-f) full. The current superblock goes last, being the one the
 * heap is allocating from. */
static sb_t *heap_find_releasable(heap_t *heap, unsigned c, bool allow_current) {
  double full_limit = 1.0 - ld_options.empty_fraction;
  for (int g = 0; g < LD_GROUP_FULL; g++)
    for (sb_t *sb = heap->groups[c][g]; sb; sb = sb->next)
      if (sb->used <= full_limit * sb->capacity) return sb;
  sb_t *sb = heap->current[c];
  if (allow_current && sb != &sb_none && sb->used <= full_limit * sb->capacity) return sb;
  return NULL;
}

static void heap_detach(heap_t *heap, sb_t *sb) {
  unsigned c = sb->size_class;
  if (sb_is_current(heap, sb)) {
    heap->current[c] = &sb_none;
  } else {
    heap_group_remove(heap, sb);
    heap->u_other[c] -= (int64_t)sb->used * sb->block_size;
  }
  heap->a[c] -= class_capacity_bytes[c];
}

/* allow_current: false when another thread does it for an idle heap, whose current
 * superblocks belong to that heap's fast paths. */
static void heap_release_while_below(heap_t *heap, unsigned c, bool allow_current) {
  if (heap->options_epoch != atomic_load_explicit(&options_epoch, memory_order_relaxed)) heap_recompute_all(heap);
  if (heap_u(heap, c) >= heap->u_release[c]) return;
  global_lock();
  uint64_t now = ld_os_now_ns();
  while (heap_u(heap, c) < heap->u_release[c]) {
    sb_t *sb = heap_find_releasable(heap, c, allow_current);
    if (!sb) break;
    heap_detach(heap, sb);
    global_put(sb, now);
    LD_STAT_INC(heap, superblocks_to_global);
    heap_recompute_threshold(heap, c);
  }
  if (global.empty_dirty.tail) global_purge_expired(now, ld_options.purge_delay_ms == 0);
  global_unlock();
}

/* Collects the remote frees of every class-c superblock the heap holds outside the current
 * one, and files each in its new fullness group. Heap lock held. Groups are walked from the
 * emptiest, and collecting only ever makes a superblock emptier, so none is visited twice. */
static void heap_collect_class(heap_t *heap, unsigned c) {
  for (int g = 0; g < LD_GROUP_COUNT; g++) {
    sb_t *sb = heap->groups[c][g];
    while (sb) {
      sb_t *next = sb->next;
      int n = sb_collect_remote(sb);
      if (n) {
        heap->u_other[c] -= (int64_t)n * sb->block_size;
        if (sb_group_of(sb->used, (int32_t)sb->capacity) != g) {
          heap_group_remove(heap, sb);
          heap_group_insert(heap, sb);
        }
      }
      sb = next;
    }
  }
}

static void heap_lock(heap_t *heap) { pthread_mutex_lock(&heap->lock); }
static void heap_unlock(heap_t *heap) { pthread_mutex_unlock(&heap->lock); }

/* Does the deferred frees of heap (heap lock held). A block whose superblock another thread
 * has meanwhile given to the global heap becomes a remote free. Hoard §3.1: each free moves
 * its superblock to its new fullness group, and the threshold is checked for each class. */
static void heap_flush_deferred(heap_t *heap) {
  uint64_t classes = 0;
  ld_block_t *b = heap->deferred;
  heap->deferred = NULL;
  heap->deferred_count = 0;
  while (b) {
    ld_block_t *next = b->next;
    sb_t *sb = ld_sb_of(b);
    if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != heap) {
      ld_free_remote(sb, b);
    } else {
      unsigned c = sb->size_class;
      b->next = sb->free_list;
      sb->free_list = b;
      sb->used--;
      if (sb_is_current(heap, sb)) {
        /* it became current after the free was deferred: its used alone counts */
      } else {
        heap->u_other[c] -= sb->block_size;
        if (sb->used < sb->floor) {
          heap_group_remove(heap, sb);
          heap_group_insert(heap, sb);
        }
      }
      classes |= (uint64_t)1 << c;
    }
    b = next;
  }
  while (classes) {
    unsigned c = (unsigned)__builtin_ctzll(classes);
    classes &= classes - 1;
    heap_release_while_below(heap, c, true);
    heap_set_release_mark(heap, c);
  }
}

void ld_heap_free_local(heap_t *heap, ld_block_t *b) {
  b->tag = ld_free_key ^ (uintptr_t)b; /* from here on a second free of b is caught */
  b->next = heap->deferred;
  heap->deferred = b;
  if (++heap->deferred_count < LD_DEFERRED_MAX) return;
  heap_lock(heap);
  heap_flush_deferred(heap);
  heap_unlock(heap);
}

void ld_heap_free_slow(heap_t *heap, unsigned cls) {
  heap_lock(heap);
  if (heap->deferred) heap_flush_deferred(heap);
  heap_collect_class(heap, cls);
  heap_release_while_below(heap, cls, true);
  heap_set_release_mark(heap, cls);
  heap_unlock(heap);
}

/* Collects the frees waiting on the heaps' superblocks and gives back what Hoard's threshold
 * says they no longer need. The caller's own heap (whose lock it holds) is done fully; other
 * threads' heaps only when their lock is free, which it is unless their thread is in a slow
 * path itself; their current superblocks belong to their fast paths and are left alone. */
static void heap_reclaim(heap_t *me) {
  heap_t *head = __atomic_load_n(&global.heaps, __ATOMIC_ACQUIRE);
  for (heap_t *h = head; h; h = h->next_heap) {
    if (h != me && (!__atomic_load_n(&h->live, __ATOMIC_RELAXED) || pthread_mutex_trylock(&h->lock) != 0)) continue;
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      if (!h->a[c]) continue;
      heap_collect_class(h, c);
      heap_release_while_below(h, c, h == me);
    }
    if (h != me) pthread_mutex_unlock(&h->lock);
  }
}

/* A thread that has freed many blocks into other threads' superblocks collects them for the
 * owner of the last one, and applies Hoard's threshold there, if that heap's lock is free.
 * Without it an owner that is waiting (for a token, a queue, a request) keeps every block
 * other threads freed until it allocates again: Hoard's round-robin producer/consumer would
 * then hold T times the memory it needs (seed 004 §2.2), where Hoard's locked free releases
 * at once. The help is amortised over LD_HELP_EVERY remote frees. */
void ld_heap_help_owner(heap_t *self, sb_t *sb) {
  heap_t *owner = atomic_load_explicit(&sb->owner, memory_order_relaxed);
  if (owner == self || owner == &global.heap || owner == NULL) return;
  if (!__atomic_load_n(&owner->live, __ATOMIC_RELAXED) || pthread_mutex_trylock(&owner->lock) != 0) return;
  /* The superblock may have changed hands meanwhile; its class is fixed while owned. */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) == owner && owner->live) {
    unsigned c = sb->size_class;
    heap_collect_class(owner, c);
    heap_release_while_below(owner, c, false);
  }
  pthread_mutex_unlock(&owner->lock);
}

/* ---- refill: the current superblock of a class has no free block ---- */

/* The fullest class-c superblock with room (Hoard §3.1: allocate from nearly-full ones). */
static sb_t *heap_fullest(heap_t *heap, unsigned c) {
  for (int g = LD_GROUP_FULL - 1; g >= 0; g--) {
    sb_t *sb = heap->groups[c][g];
    if (sb) {
      heap_group_remove(heap, sb);
      return sb;
    }
  }
  return NULL;
}

void *ld_heap_refill(heap_t *heap, unsigned cls) {
  if (LD_UNLIKELY(ld_options.debug) && larder_validate() != 0)
    ld_message("larder: validation failed before a refill (LARDER_DEBUG)\n");
  heap_lock(heap);
  if (heap->deferred) heap_flush_deferred(heap);
  sb_t *sb = heap->current[cls];
  if (sb != &sb_none) {
    sb_collect_remote(sb);
    if (!sb->free_list) sb_carve(sb);
    if (!sb->free_list) {
      heap->current[cls] = &sb_none;
      heap_group_insert(heap, sb);
      heap->u_other[cls] += (int64_t)sb->used * sb->block_size;
      sb = &sb_none;
    }
  }
  if (sb == &sb_none) {
    heap_collect_class(heap, cls);
    sb = heap_fullest(heap, cls);
    if (sb) {
      heap->u_other[cls] -= (int64_t)sb->used * sb->block_size;
      if (!sb->free_list) sb_carve(sb);
    }
  }
  if (!sb) {
    sb = global_take(heap, cls);
    if (!sb) {
      heap_unlock(heap);
      errno = ENOMEM;
      return NULL;
    }
    heap->a[cls] += class_capacity_bytes[cls];
    if (!sb->free_list) sb_carve(sb);
  }
  heap->current[cls] = sb;
  ld_block_t *b = ld_sb_pop(sb);
  /* Collected frees lowered u: the threshold may have been crossed (a release may take the
   * current superblock; the next malloc then refills again). */
  heap_release_while_below(heap, cls, true);
  heap_set_release_mark(heap, cls);
  heap_unlock(heap);
  return b;
}

/* ---- heap lifecycle ---- */

/* A heap for a new thread: an exited thread's, or a new one. Heaps are never unmapped, and
 * there are never more than the most threads that lived at once. */
static void heap_abandon_locked(heap_t *heap, uint64_t now);

static heap_t *heap_new_locked(void) {
  /* A heap made by a thread after its exit hook had run (a destructor that allocated in the
   * last round) is given up once the kernel says that thread is gone. */
  for (heap_t *h = global.heaps; h; h = h->next_heap)
    if (h->live && h->orphan_tid && !ld_os_thread_alive(h->orphan_tid) && pthread_mutex_trylock(&h->lock) == 0) {
      /* trylock: heap locks come before the global lock, which is held here */
      heap_abandon_locked(h, 0);
      pthread_mutex_unlock(&h->lock);
    }
  for (heap_t *h = global.heaps; h; h = h->next_heap)
    if (!h->live) {
      h->live = 1;
      return h;
    }
  void *mem;
  size_t bytes = (sizeof(heap_t) + ld_os_page_size() - 1) & ~(ld_os_page_size() - 1);
  if (ld_os_map(bytes, &mem) != 0) return NULL;
  heap_t *heap = mem;
  pthread_mutex_init(&heap->lock, NULL);
  heap->live = 1;
  heap->next_heap = global.heaps;
  __atomic_store_n(&global.heaps, heap, __ATOMIC_RELEASE); /* heap_reclaim walks without the lock */
  return heap;
}

heap_t *ld_heap_for_thread(void) {
  ld_init_if_needed();
  global_lock();
  heap_t *heap = heap_new_locked();
  global_unlock();
  if (!heap) return NULL;
  for (unsigned c = 0; c <= LD_CLASS_COUNT; c++) {
    heap->current[c] = &sb_none;
    heap->u_other[c] = heap->a[c] = 0;
  }
  heap_recompute_all(heap);
  heap->orphan_tid = thread_exit_ran ? ld_os_thread_id() : 0;
  ld_heap_tls = heap;
  /* May allocate (glibc's second-level key table), which now finds the heap. */
  pthread_setspecific(heap_key, heap);
  return heap;
}

/* Thread exit: everything the heap holds goes to the global heap, where other threads reuse
 * it (DESIGN §1), and the heap itself waits for the next new thread. Both locks held. */
/* Other threads' counters are read while they run: each is a word, read once, so the sum is
 * a snapshot that may lag by a few operations, never torn. */
static void stats_add(ld_stats_t *dst, const ld_stats_t *src) {
  size_t *d = (size_t *)dst;
  const size_t *s = (const size_t *)src;
  for (size_t i = 0; i < sizeof(ld_stats_t) / sizeof(size_t); i++) d[i] += __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

static void heap_abandon_locked(heap_t *heap, uint64_t now) {
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *sb = heap->current[c];
    if (sb != &sb_none) {
      heap_detach(heap, sb);
      global_put(sb, now);
    }
    for (int g = 0; g < LD_GROUP_COUNT; g++)
      while ((sb = heap->groups[c][g])) {
        heap_detach(heap, sb);
        global_put(sb, now);
      }
  }
#ifdef LARDER_STATS
  stats_add(&global.retired, &heap->stats);
  memset(&heap->stats, 0, sizeof heap->stats);
#endif
  heap->orphan_tid = 0;
  __atomic_store_n(&heap->live, 0, __ATOMIC_RELAXED);
}

static void heap_thread_exit(void *arg) {
  heap_t *heap = arg;
  thread_exit_ran = 1;
  if (!heap || heap == &ld_heap_empty) return;
  ld_heap_tls = &ld_heap_empty;
  heap_lock(heap);
  if (heap->deferred) heap_flush_deferred(heap);
  global_lock();
  uint64_t now = ld_os_now_ns();
  heap_abandon_locked(heap, now);
  if (global.empty_dirty.tail) global_purge_expired(now, ld_options.purge_delay_ms == 0);
  global_unlock();
  heap_unlock(heap);
}

/* ---- fork: the child of a multithreaded parent must find every lock free ---- */
/* Lock order everywhere: heap locks, then the large-span cache lock, then the global lock. */
static void fork_prepare(void) {
  for (heap_t *h = __atomic_load_n(&global.heaps, __ATOMIC_ACQUIRE); h; h = h->next_heap) pthread_mutex_lock(&h->lock);
  ld_large_lock(); /* the large-span cache lock comes before the global lock (span_release) */
  global_lock();
}
static void fork_parent(void) {
  global_unlock();
  ld_large_unlock();
  for (heap_t *h = __atomic_load_n(&global.heaps, __ATOMIC_ACQUIRE); h; h = h->next_heap) pthread_mutex_unlock(&h->lock);
}
static void fork_child(void) {
  /* The child has one thread. The other threads' heaps stay as they were (a thread may have
   * been in a fast path), unused: their memory stays allocated in the child. */
  global_unlock();
  ld_large_unlock();
  for (heap_t *h = __atomic_load_n(&global.heaps, __ATOMIC_ACQUIRE); h; h = h->next_heap) pthread_mutex_unlock(&h->lock);
}

/* ---- trim, stats, validation ---- */

int ld_global_trim(void) {
  /* The calling thread's empty superblocks go first, so they are purged with the rest. */
  heap_t *heap = ld_heap_tls;
  if (heap != &ld_heap_empty) {
    heap_lock(heap);
    if (heap->deferred) heap_flush_deferred(heap);
  }
  global_lock();
  if (heap != &ld_heap_empty)
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      heap_collect_class(heap, c);
      sb_t *sb;
      while ((sb = heap->groups[c][0])) {
        heap_detach(heap, sb);
        global_put(sb, 0);
      }
      heap_set_release_mark(heap, c);
    }
  size_t before = global.empty_clean.count;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    sb_t *sb = global.by_class[c].head;
    while (sb) {
      sb_t *next = sb->next;
      int n = sb_collect_remote(sb);
      global.u -= (int64_t)n * sb->block_size;
      if (sb->used == 0) {
        list_remove(&global.by_class[c], sb);
        global.a -= (int64_t)ld_sb_size;
        global.u -= (int64_t)sb->used * sb->block_size;
        global_put(sb, 0);
      }
      sb = next;
    }
  }
  global_purge_expired(0, true);
  int released = global.empty_clean.count > before;
  global_unlock();
  if (heap != &ld_heap_empty) heap_unlock(heap);
  return released;
}

void ld_stat_count(heap_t *heap, size_t field_offset) {
#ifdef LARDER_STATS
  if (heap != &ld_heap_empty) (*(size_t *)((char *)&heap->stats + field_offset))++;
  else __atomic_fetch_add((size_t *)((char *)&stats_unowned + field_offset), 1, __ATOMIC_RELAXED);
#else
  (void)heap;
  (void)field_offset;
#endif
}

void ld_stats_merge(ld_stats_t *out, int64_t *in_use, int64_t *held) {
  memset(out, 0, sizeof *out);
  *in_use = *held = 0;
  global_lock();
  stats_add(out, &global.retired);
  stats_add(out, &stats_unowned);
  for (heap_t *h = global.heaps; h; h = h->next_heap) {
    stats_add(out, &h->stats);
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      *in_use += heap_u(h, c);
      *held += __atomic_load_n(&h->a[c], __ATOMIC_RELAXED) / class_capacity_bytes[c] * (int64_t)ld_sb_size;
    }
  }
  *in_use += global.u;
  *held += global.a;
  global_unlock();
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

/* Checks one superblock's lists and counts; `owner` is who must own it. */
static void sb_validate(const sb_t *sb, const heap_t *owner, int *violations) {
  if (sb->magic != LD_SB_MAGIC || sb->kind != LD_KIND_SMALL) {
    VIOLATION("superblock %p: bad header\n", (const void *)sb);
    return;
  }
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != owner)
    VIOLATION("superblock %p: owner %p, expected %p\n", (const void *)sb, (void *)sb->owner, (const void *)owner);
  char *end = sb->data + (size_t)sb->capacity * sb->block_size;
  if (sb->bump < sb->data || sb->bump > end) VIOLATION("superblock %p: carve pointer out of range\n", (const void *)sb);
  size_t carved = (size_t)(sb->bump - sb->data) / sb->block_size;
  size_t free_count = 0;
  for (const ld_block_t *b = sb->free_list; b; b = b->next) {
    uintptr_t off = (uintptr_t)b - (uintptr_t)sb->data;
    if ((char *)b < sb->data || (char *)b >= sb->bump || off % sb->block_size) {
      VIOLATION("superblock %p: free-list entry %p is not a carved block\n", (const void *)sb, (const void *)b);
      return;
    }
    if (b->tag != (ld_free_key ^ (uintptr_t)b)) VIOLATION("superblock %p: free block %p lost its tag\n", (const void *)sb, (const void *)b);
    if (++free_count > carved) {
      VIOLATION("superblock %p: free list longer than the carved blocks (a cycle?)\n", (const void *)sb);
      return;
    }
  }
  /* Blocks on the remote list are still counted in used until the owner collects them. */
  if ((size_t)sb->used != carved - free_count)
    VIOLATION("superblock %p: used %d but %zu carved - %zu free\n", (const void *)sb, sb->used, carved, free_count);
}

static void heap_validate(heap_t *heap, int *violations) {
  double f = ld_options.empty_fraction;
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
    int64_t k_slack = (int64_t)ld_options.k * class_capacity_bytes[c];
    int64_t u = 0, a = 0;
    sb_t *cur = heap->current[c];
    if (cur != &sb_none) {
      sb_validate(cur, heap, violations);
      if (cur->size_class != c) VIOLATION("heap %p: current superblock of class %u has class %u\n", (void *)heap, c, cur->size_class);
      a += class_capacity_bytes[c];
    }
    for (int g = 0; g < LD_GROUP_COUNT; g++) {
      bool any = heap->groups[c][g] != NULL;
      if (any != !!(heap->group_classes[g] & ((uint64_t)1 << c)))
        VIOLATION("heap %p: group bitmap of group %d, class %u is wrong\n", (void *)heap, g, c);
      const sb_t *prev = NULL;
      for (sb_t *sb = heap->groups[c][g]; sb; prev = sb, sb = sb->next) {
        sb_validate(sb, heap, violations);
        if (sb->prev != prev) VIOLATION("superblock %p: broken back link\n", (void *)sb);
        if (sb->size_class != c || sb->group != g) VIOLATION("superblock %p: filed under class %u group %d\n", (void *)sb, c, g);
        if (sb_group_of(sb->used, (int32_t)sb->capacity) != g)
          VIOLATION("superblock %p: used %d does not belong in group %d\n", (void *)sb, sb->used, g);
        u += (int64_t)sb->used * sb->block_size;
        a += class_capacity_bytes[c];
      }
    }
    if (u != heap->u_other[c]) VIOLATION("heap %p class %u: u outside the current superblock is %lld, superblocks add up to %lld\n", (void *)heap, c, (long long)heap->u_other[c], (long long)u);
    int64_t hu = heap_u(heap, c);
    if (a != heap->a[c]) VIOLATION("heap %p class %u: a is %lld, superblocks add up to %lld\n", (void *)heap, c, (long long)heap->a[c], (long long)a);
    /* Hoard's invariant (seed 004 §3.1), per size class as its proof has it (§4.1). */
    if (!(hu >= heap->a[c] - k_slack || (double)hu >= (1.0 - f) * (double)heap->a[c]))
      VIOLATION("heap %p class %u: Hoard's invariant fails: u=%lld a=%lld K*S=%lld f=%.3f\n", (void *)heap, c,
                (long long)hu, (long long)heap->a[c], (long long)k_slack, f);
  }
}

static void global_list_validate(const sb_list_t *list, bool must_be_empty, int *violations) {
  size_t n = 0;
  const sb_t *prev = NULL;
  for (const sb_t *sb = list->head; sb; prev = sb, sb = sb->next) {
    if (sb->prev != prev) VIOLATION("global heap: broken back link at %p\n", (const void *)sb);
    if (must_be_empty && sb->used != 0) VIOLATION("global heap: superblock %p on an empty list has %d blocks in use\n", (const void *)sb, sb->used);
    sb_validate(sb, &global.heap, violations);
    if (++n > list->count) break;
  }
  if (n != list->count || list->tail != prev) VIOLATION("global heap: list count %zu, found %zu\n", list->count, n);
}

/* The calling thread's heap, the global heap, and every abandoned heap: other live threads'
 * heaps change under our feet without a lock, so they are checked by their own threads. */
void ld_heap_validate_all(int *violations) {
  ld_init_if_needed();
  heap_t *mine = ld_heap_tls;
  if (mine != &ld_heap_empty) {
    heap_lock(mine);
    if (mine->deferred) heap_flush_deferred(mine);
    /* Options may have changed, and other threads may have reclaimed for this heap: bring
     * its threshold up to date, as its next slow path would, before checking it. */
    for (unsigned c = 0; c < LD_CLASS_COUNT; c++) {
      heap_recompute_threshold(mine, c);
      heap_release_while_below(mine, c, true);
      heap_set_release_mark(mine, c);
    }
    heap_validate(mine, violations);
    heap_unlock(mine);
  }
  global_lock();
  for (unsigned c = 0; c < LD_CLASS_COUNT; c++) global_list_validate(&global.by_class[c], false, violations);
  global_list_validate(&global.empty_dirty, true, violations);
  global_list_validate(&global.empty_clean, true, violations);
  for (heap_t *h = global.heaps; h; h = h->next_heap)
    for (unsigned c = 0; c < LD_CLASS_COUNT && !h->live; c++)
      if (h->u_other[c] != 0 || h->a[c] != 0) VIOLATION("abandoned heap %p still holds memory in class %u\n", (void *)h, c);
  global_unlock();
}

/* ---- statistics at exit ---- */
static void stats_at_exit(void) {
  if (ld_options.stats >= 2) larder_stats_print_json(2);
  else larder_stats_print(2);
}
