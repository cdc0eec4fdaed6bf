/* The global heap, Hoard's heap 0 (seed 004 §3): it receives superblocks that a heap's
 * emptiness threshold gives back and the superblocks of exited threads, and hands them to
 * heaps that run out. Empty superblocks are not kept here: they go back to the segments
 * (segment.c), where they coalesce with their neighbours, serve any size class or a medium
 * span, and are purged by age.
 *
 * Superblocks with room wait in a list per class; full ones (from exited threads) in one list,
 * until frees into them reach the global heap's inbox or are announced on its pending list, as
 * for any heap. So taking a superblock looks at one list head, never at every superblock held.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <string.h>

typedef struct sb_list_s {
  sb_t *head;
  size_t count;
} sb_list_t;

/* Zero-initialised (in .bss, not .data): a 256 KB heap_t with an initialiser would be 256 KB of
 * the library file, mapped and partly faulted in by every process that loads it. */
heap_t ld_global_heap;

static struct {
  ld_lock_t lock;
  int64_t u, a;                        /* Hoard's u_0 and a_0 */
  sb_list_t by_class[LD_CLASS_COUNT];  /* superblocks with room */
  sb_list_t full;                      /* no room: waiting for frees */
  size_t taken_bytes;                  /* remote frees accounted for (statistics) */
  sb_t *pending_taken;                 /* taken from the pending list, not yet looked at */
} global = {.lock = LD_LOCK_INIT};

void ld_global_lock(void) { ld_lock(&global.lock); }
void ld_global_unlock(void) { ld_unlock(&global.lock); }
void ld_global_reinit_lock(void) { ld_lock_reset(&global.lock); }

static void list_push(sb_list_t *list, sb_t *sb) {
  sb->prev = NULL;
  sb->next = list->head;
  if (list->head) list->head->prev = sb;
  list->head = sb;
  list->count++;
}
static void list_remove(sb_list_t *list, sb_t *sb) {
  if (sb->prev) sb->prev->next = sb->next; else list->head = sb->next;
  if (sb->next) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
  list->count--;
}
/* The list sb belongs on by its fullness, and the one it is on (recorded in sb->group). */
static inline sb_list_t *list_for(const sb_t *sb) {
  return sb->used >= (int32_t)sb->capacity ? &global.full : &global.by_class[sb->size_class];
}
static inline sb_list_t *list_of(const sb_t *sb) {
  return sb->group == LD_GROUP_FULL ? &global.full : &global.by_class[sb->size_class];
}
static void list_file(sb_t *sb) {
  sb->group = sb->used >= (int32_t)sb->capacity ? LD_GROUP_FULL : 0;
  list_push(list_for(sb), sb);
}

/* An empty superblock that no freer can still announce goes back to the segments. */
static bool give_back_if_empty(sb_t *sb) {
  if (sb->used != 0 || ld_sb_is_announced(sb)) return false;
  list_remove(list_of(sb), sb);
  global.a -= (int64_t)ld_sb_size;
  sb->kind = LD_KIND_FREED;
  /* its pages: those its blocks were carved on (the segment adds those it found resident) */
  ld_segment_free(sb, 1, ld_round_up((size_t)(sb->bump - (char *)sb), ld_os_page_size()));
  return true;
}

void ld_global_put_locked(sb_t *sb) {
  atomic_store_explicit(&sb->owner, &ld_global_heap, memory_order_release);
  global.a += (int64_t)ld_sb_size;
  global.u += (int64_t)sb->used * sb->block_size;
  list_file(sb);
  give_back_if_empty(sb);
}

/* sb gained free blocks: back to the segments if it is empty now, else onto the list its
 * fullness calls for. Global lock held. */
static void refile_after_frees(sb_t *sb) {
  if (!give_back_if_empty(sb) && list_for(sb) != list_of(sb)) {
    list_remove(list_of(sb), sb);
    list_file(sb);
  }
}

bool ld_global_free(sb_t *sb, ld_block_t *b) {
  /* read without the lock first: most callers' superblocks are another heap's */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != &ld_global_heap || !ld_trylock(&global.lock))
    return false;
  /* (a superblock given back to the segments keeps the global heap as its owner: kind says) */
  if (atomic_load_explicit(&sb->owner, memory_order_relaxed) != &ld_global_heap || sb->kind != LD_KIND_SMALL) {
    ld_global_unlock();
    return false;
  }
  ld_set_next(b, sb->free_list);
  sb->free_list = b;
  sb->used--;
  global.u -= (int64_t)sb->block_size;
  refile_after_frees(sb);
  ld_global_unlock();
  return true;
}

/* Collects the frees announced on superblocks the global heap holds; each entry was paid for
 * by the free that announced it. Global lock held. At most `most` are looked at: a take (a
 * refill) looks at GLOBAL_PENDING_PER_TAKE, the purge's tidy at all; the rest wait in
 * pending_taken, still announced (heap.c, heap_process_pending_some, says why). */
#define GLOBAL_PENDING_PER_TAKE 64u
static void global_tidy_locked(uint32_t most) {
  ld_message_t m;
  for (uint32_t n = 0; n < most && n < LD_INBOX_SLOTS && ld_inbox_take(&ld_global_heap, &m); n++) {
    sb_t *sb = ld_sb_deliver_message(&ld_global_heap, &m);
    if (!sb) continue;
    global.u -= (int64_t)m.count * sb->block_size;
    global.taken_bytes += (size_t)m.count * sb->block_size;
    refile_after_frees(sb);
  }
  sb_t *sb = global.pending_taken;
  for (uint32_t n = 0; n < most; n++) {
    if (!sb && !(sb = ld_sb_pending_take(&ld_global_heap))) break;
    sb_t *next = sb->pending_next;
    if (atomic_load_explicit(&sb->owner, memory_order_acquire) != &ld_global_heap) {
      ld_sb_announce(sb); /* it changed hands after it was announced: tell its owner */
    } else {
      int got = ld_sb_account_remote(sb, true);
      global.u -= (int64_t)got * sb->block_size;
      global.taken_bytes += (size_t)got * sb->block_size;
      refile_after_frees(sb);
    }
    sb = next;
  }
  global.pending_taken = sb;
}

bool ld_global_try_tidy(uint32_t most) {
  if (!ld_trylock(&global.lock)) return false;
  global_tidy_locked(most);
  ld_global_unlock();
  return true;
}

void ld_global_tidy(void) {
  ld_global_lock();
  global_tidy_locked(UINT32_MAX);
  ld_global_unlock();
}

sb_t *ld_global_take(heap_t *heap, unsigned cls) {
  ld_global_lock();
  global_tidy_locked(GLOBAL_PENDING_PER_TAKE);
  sb_t *sb = global.by_class[cls].head;
  if (sb) {
    list_remove(&global.by_class[cls], sb);
    sb->group = LD_GROUP_NONE;
    global.a -= (int64_t)ld_sb_size;
    global.u -= (int64_t)sb->used * sb->block_size;
    atomic_store_explicit(&sb->owner, heap, memory_order_release);
    LD_STAT_INC(heap, superblocks_from_global);
  }
  ld_global_unlock();
  LD_STAT_INC(heap, superblocks_examined);
  if (sb) return sb;
  bool clean;
  /* its pages are touched only as its blocks are carved: its bound when freed adds those */
  sb = ld_segment_alloc(1, ld_os_page_size(), 0, &clean);
  if (!sb) return NULL;
  (void)clean;
  ld_sb_format(sb, cls);
  atomic_store_explicit(&sb->owner, heap, memory_order_release);
  return sb;
}

void ld_global_stats(int64_t *in_use, int64_t *held, size_t *taken_bytes) {
  ld_global_lock();
  *in_use = global.u;
  *held = global.a;
  *taken_bytes = global.taken_bytes;
  ld_global_unlock();
}

#define VIOLATION(...) (ld_message("larder: validate: " __VA_ARGS__), (*violations)++)

static void list_validate(const sb_list_t *list, int cls, int64_t *u, int64_t *a, int *violations) {
  size_t n = 0;
  const sb_t *prev = NULL;
  for (sb_t *sb = list->head; sb; prev = sb, sb = sb->next) {
    if (sb->prev != prev) VIOLATION("global heap: broken back link at %p\n", (void *)sb);
    ld_sb_validate(sb, &ld_global_heap, violations);
    if (cls >= 0 && (sb->size_class != cls || sb->used >= (int32_t)sb->capacity))
      VIOLATION("global heap: superblock %p (class %u, %d used) filed under class %d\n", (void *)sb, sb->size_class, sb->used, cls);
    if (cls < 0 && sb->used < (int32_t)sb->capacity)
      VIOLATION("global heap: superblock %p on the full list has room\n", (void *)sb);
    *u += (int64_t)sb->used * sb->block_size;
    *a += (int64_t)ld_sb_size;
    if (++n > list->count) break;
  }
  if (n != list->count) VIOLATION("global heap: list count %zu, found %zu\n", list->count, n);
}

void ld_global_validate(int *violations) {
  ld_global_lock();
  int64_t u = 0, a = 0;
  for (int c = 0; c < LD_CLASS_COUNT; c++) list_validate(&global.by_class[c], c, &u, &a, violations);
  list_validate(&global.full, -1, &u, &a, violations);
  if (u != global.u || a != global.a)
    VIOLATION("global heap: u=%lld a=%lld, superblocks add up to u=%lld a=%lld\n", (long long)global.u,
              (long long)global.a, (long long)u, (long long)a);
  ld_global_unlock();
}
