/* A double free at a random point of a random heap is reported, and no block is ever handed
 * out twice. Each seed runs in a child process (this program re-executed): the child keeps up
 * to 4,096 blocks of up to three sizes (malloc, calloc and posix_memalign), replacing them at
 * random, and at a random step frees again one of the blocks it freed lately that has not been
 * handed out since: from its own thread (seeds 0 and 2 mod 4), from a new thread that has made
 * no call before it (1 mod 4; made at the start, so that glibc's allocations for it come first),
 * or (3 mod 4) from a helper thread that frees a quarter of the replaced blocks all along, so
 * that its ring of slow frees is busy (cache.c). Half of those last seeds race instead: a live
 * block goes to the helper to free and the child frees it too, at once, either free first.
 * In every other group of four seeds (seed / 4 odd, the race seeds aside), the child also frees
 * temporaries: half its mallocs are freed at once, and now and then a run of up to 8 is
 * freed in reverse order, so that frees take the fast path of a block freed back onto the bin
 * it came from (alloc.c, larder_free) and the block freed again may be one of them.
 * It then goes on, and checks every block it is given against those it holds. The parent requires each child to
 * stop with larder's message naming that block; a child that goes on to the end ("no report")
 * or is handed a block it holds ("handed out twice") fails the seed.
 *
 * Found by this test's first version: free(a), free(b), free(a), then two mallocs of their
 * size handed a out twice (a was in the bin and the deferred free at once: alloc.c, bin_pop).
 * glibc names no address: without larder the test is skipped. */
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "alloc_util.h"

enum { LIVE = 4096, RECENT = 64, STEPS = 60000, AFTER = 20000 };

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* The new thread of the remote seeds: made before the loop, so that pthread_create's own
 * allocations (glibc callocs the thread's DTV, 288 bytes with this program's modules) come
 * before the block to free again is chosen. Made at the free instead, it could be handed that
 * block, freed a moment before: the free that followed was then a free of glibc's live DTV,
 * which no allocator can tell from a first free (seed 5253: "no report"). */
static void *_Atomic remote_block;
static void *free_in_thread(void *arg) {
  (void)arg;
  void *p;
  while (!(p = atomic_load_explicit(&remote_block, memory_order_acquire))) sched_yield();
  free(p);
  return NULL;
}

/* The helper's queue: one producer (the child's thread), one consumer (the helper). */
enum { QUEUE = 1024 };
static void *queue[QUEUE];
static _Atomic unsigned queue_head, queue_tail;
static _Atomic int queue_done;
static _Atomic unsigned helper_freed; /* frees the helper has made (its free returned) */
static void queue_push(void *p) {
  unsigned tail = atomic_load_explicit(&queue_tail, memory_order_relaxed);
  while (tail - atomic_load_explicit(&queue_head, memory_order_acquire) == QUEUE) sched_yield();
  queue[tail % QUEUE] = p;
  atomic_store_explicit(&queue_tail, tail + 1, memory_order_release);
}
/* Until the helper has made every free it was given: a block the child freed first must not
 * be handed out to it again before the helper's free comes, which would make that free one of
 * the new block (a use after free no allocator can tell from a free). */
static void helper_wait(void) {
  while (atomic_load_explicit(&helper_freed, memory_order_acquire) != atomic_load_explicit(&queue_tail, memory_order_relaxed))
    sched_yield();
}
static void *helper(void *arg) {
  (void)arg;
  for (;;) {
    unsigned head = atomic_load_explicit(&queue_head, memory_order_relaxed);
    if (head == atomic_load_explicit(&queue_tail, memory_order_acquire)) {
      if (atomic_load_explicit(&queue_done, memory_order_acquire) &&
          head == atomic_load_explicit(&queue_tail, memory_order_acquire))
        return NULL;
      sched_yield();
      continue;
    }
    void *p = queue[head % QUEUE];
    atomic_store_explicit(&queue_head, head + 1, memory_order_release);
    free(p);
    atomic_fetch_add_explicit(&helper_freed, 1, memory_order_release);
  }
}

/* A block the child is handed must not be one it holds; it is no longer a free one. */
static bool handed_twice(void *p, void *const *live, void **recent) {
  for (unsigned j = 0; j < LIVE; j++)
    if (live[j] == p) {
      fprintf(stderr, "handed out twice: %p\n", p);
      return true;
    }
  for (unsigned j = 0; j < RECENT; j++)
    if (recent[j] == p) recent[j] = NULL;
  return false;
}

static int child(unsigned long seed) {
  rng_state = seed * 2654435761u + 1;
  static void *live[LIVE];
  void *recent[RECENT] = {0};
  unsigned freed = 0;
  size_t sizes[3] = {16 + rnd() % 200, 16 + rnd() % 2000, 16 + rnd() % 100};
  unsigned nsizes = 1 + (unsigned)(rnd() % 3);
  int at = 1000 + (int)(rnd() % (STEPS - AFTER - 1000));
  bool remote = seed % 4 == 1, helped = seed % 4 == 3, race = helped && (seed / 4) % 2;
  bool temporaries = !race && (seed / 4) % 2;
  pthread_t helper_thread, remote_thread;
  if (helped) REQUIRE(pthread_create(&helper_thread, NULL, helper, NULL) == 0);
  if (remote) REQUIRE(pthread_create(&remote_thread, NULL, free_in_thread, NULL) == 0);
  void *again = NULL;
  for (int step = 0; step < STEPS; step++) {
    unsigned k = (unsigned)(rnd() % LIVE);
    if (live[k] && helped && rnd() % 4 == 0) {
      queue_push(live[k]); /* the helper frees it */
      live[k] = NULL;
    } else if (live[k]) {
      free(live[k]);
      recent[freed++ % RECENT] = live[k];
      live[k] = NULL;
    } else {
      size_t size = sizes[rnd() % nsizes];
      unsigned how = (unsigned)(rnd() % 8);
      void *p = NULL;
      if (how == 0) p = calloc(1, size);
      else if (how == 1 && posix_memalign(&p, 64, size) != 0) p = NULL;
      else if (how > 1) p = malloc(size);
      REQUIRE(p != NULL);
      if (handed_twice(p, live, recent)) return 0;
      memset(p, 0x33, size);
      if (temporaries && rnd() % 2) { /* a temporary: freed at once */
        free(p);
        recent[freed++ % RECENT] = p;
      } else {
        live[k] = p;
      }
      if (temporaries && rnd() % 16 == 0) { /* a run, freed in reverse order */
        void *run[8];
        unsigned n = 1 + (unsigned)(rnd() % 8);
        for (unsigned r = 0; r < n; r++) {
          REQUIRE((run[r] = malloc(size)) != NULL);
          if (handed_twice(run[r], live, recent)) return 0;
          for (unsigned q = 0; q < r; q++)
            if (run[q] == run[r]) {
              fprintf(stderr, "handed out twice: %p\n", run[r]);
              return 0;
            }
          memset(run[r], 0x44, size);
        }
        for (unsigned r = n; r-- > 0;) {
          free(run[r]);
          recent[freed++ % RECENT] = run[r];
        }
      }
    }
    if (step == at && race) {
      for (unsigned t = 0; t < LIVE && !again; t++) {
        unsigned x = (k + t) % LIVE;
        if (live[x]) again = live[x], live[x] = NULL;
      }
      if (!again) return 77;
      alloc_announce(again);
      queue_push(again);
      free(again);
      helper_wait();
    } else if (step == at) {
      unsigned back = (unsigned)(rnd() % RECENT);
      for (unsigned t = 0; t < RECENT && !again; t++) again = recent[(freed + 2 * RECENT - 1 - back - t) % RECENT];
      if (!again) return 77;
      alloc_announce(again);
      if (helped) {
        queue_push(again);
        helper_wait();
      } else if (remote) {
        atomic_store_explicit(&remote_block, again, memory_order_release);
        pthread_join(remote_thread, NULL);
      } else {
        free(again);
      }
    }
  }
  if (helped) {
    atomic_store_explicit(&queue_done, 1, memory_order_release);
    pthread_join(helper_thread, NULL); /* its exit settles its ring */
  }
  fprintf(stderr, "no report\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(strtoul(argv[2], NULL, 10));
  if (!alloc_is_larder()) {
    printf("double_free_random: not larder (glibc names no address), skipped\n");
    return 77;
  }
  unsigned seeds = 120, reported = 0, skipped = 0;
  for (unsigned seed = 1; seed <= seeds; seed++) {
    char arg[24];
    snprintf(arg, sizeof arg, "%u", seed);
    char *args[] = {(char *)"--child", arg, NULL};
    alloc_child_t r;
    REQUIRE(alloc_run_self(args, NULL, 60, &r) == 0);
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 77) {
      skipped++;
      continue;
    }
    const char *line = strstr(r.err, "addr=");
    char addr[32] = "";
    if (line) sscanf(line + 5, "%31[0-9a-fx]", addr);
    const char *after = line ? strchr(line, '\n') : NULL;
    bool named = after && addr[0] && strstr(after, "larder:") && strstr(after, addr);
    char desc[80];
    alloc_describe_status(r.status, desc, sizeof desc);
    CHECK_MSG(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT && named,
              "seed %u (%s): %s; stderr: %.300s", seed,
              seed % 4 == 1 ? "a new thread" : seed % 4 == 3 ? ((seed / 4) % 2 ? "a race with a busy thread" : "a busy thread") : "the same thread",
              desc, r.err);
    reported += WIFSIGNALED(r.status) && named;
  }
  printf("double_free_random: %u seeds, %u reported, %u without a block to free again\n", seeds, reported, skipped);
  CHECK(skipped < seeds / 4);
  return check_done();
}
