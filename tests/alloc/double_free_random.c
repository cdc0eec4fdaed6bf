/* A double free at a random point of a random heap is reported, and no block is ever handed
 * out twice. Each seed runs in a child process (this program re-executed): the child keeps up
 * to 4,096 blocks of up to three sizes (malloc, calloc and posix_memalign), replacing them at
 * random, and at a random step frees again one of the blocks it freed lately that has not been
 * handed out since, from its own thread or (odd seeds) from a new one. It then goes on, and
 * checks every block it is given against those it holds. The parent requires each child to
 * stop with larder's message naming that block; a child that goes on to the end ("no report")
 * or is handed a block it holds ("handed out twice") fails the seed.
 *
 * Found by this test's first version: free(a), free(b), free(a), then two mallocs of their
 * size handed a out twice (a was in the bin and the deferred free at once: alloc.c, bin_pop).
 * glibc names no address: without larder the test is skipped. */
#include <malloc.h>
#include <pthread.h>
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

static void announce(const void *p) {
  char line[64];
  int n = snprintf(line, sizeof line, "addr=%p\n", p);
  if (write(2, line, (size_t)n) < 0) _exit(90);
}

static void *free_in_thread(void *p) {
  free(p);
  return NULL;
}

static int child(unsigned long seed) {
  rng_state = seed * 2654435761u + 1;
  static void *live[LIVE];
  void *recent[RECENT] = {0};
  unsigned freed = 0;
  size_t sizes[3] = {16 + rnd() % 200, 16 + rnd() % 2000, 16 + rnd() % 100};
  unsigned nsizes = 1 + (unsigned)(rnd() % 3);
  int at = 1000 + (int)(rnd() % (STEPS - AFTER - 1000));
  bool remote = seed & 1;
  void *again = NULL;
  for (int step = 0; step < STEPS; step++) {
    unsigned k = (unsigned)(rnd() % LIVE);
    if (live[k]) {
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
      for (unsigned j = 0; j < LIVE; j++)
        if (live[j] == p) {
          fprintf(stderr, "handed out twice: %p\n", p);
          return 0;
        }
      for (unsigned j = 0; j < RECENT; j++)
        if (recent[j] == p) recent[j] = NULL;
      live[k] = p;
      memset(p, 0x33, size);
    }
    if (step == at) {
      unsigned back = (unsigned)(rnd() % RECENT);
      for (unsigned t = 0; t < RECENT && !again; t++) again = recent[(freed + 2 * RECENT - 1 - back - t) % RECENT];
      if (!again) return 77;
      announce(again);
      if (remote) {
        pthread_t thread;
        REQUIRE(pthread_create(&thread, NULL, free_in_thread, again) == 0);
        pthread_join(thread, NULL);
      } else {
        free(again);
      }
    }
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
              "seed %u (%s): %s; stderr: %.300s", seed, seed & 1 ? "another thread" : "the same thread", desc, r.err);
    reported += WIFSIGNALED(r.status) && named;
  }
  printf("double_free_random: %u seeds, %u reported, %u without a block to free again\n", seeds, reported, skipped);
  CHECK(skipped < seeds / 4);
  return check_done();
}
