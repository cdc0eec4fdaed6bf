/* The class byte of a small superblock in the ownership map (src/addrmap.h,
 * ld_addrmap_small_class), which a free by a thread that holds no batch for the block's
 * superblock reads instead of the superblock's header (src/alloc.c, free_deferring). Built
 * against liblarder.a with the internal header, to read the map.
 *
 *   classes   a block of every size from 1 B to the largest class: the map gives its
 *             superblock's class (plus one), as the header does; a medium and a large span's
 *             granules give 0; the stack, static data and NULL give -1;
 *   give-back 4 threads fill 300 superblocks of 12 classes, free every block, and the heaps
 *             and the global heap give them back (malloc_trim): every superblock recorded is
 *             either no longer larder's (-1), no small superblock (0), or a small superblock
 *             whose header says the class the map says; the validation walk, which checks the
 *             map against every superblock it visits, passes before and after;
 *   remote    another thread frees 20,000 blocks of 64 B from 400 superblocks of main's in
 *             random order (its buffer holds no batch for most of them): every block comes
 *             back, once, and the walk passes;
 *   interior  (a child) another thread frees a pointer 16 bytes into a live block of 64 B
 *             whose superblock it holds no batch for: reported as an invalid free, with the
 *             address, and the child stops (SIGABRT). */
#include "addrmap.h"
#include "alloc_util.h"
#include "internal.h"

#include <malloc.h>
#include <pthread.h>

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

static int static_datum;

static int compare_pointers(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

static void check_classes(void) {
  for (size_t size = 1; size <= LD_SMALL_LIMIT; size += size < 256 ? 1 : 97) {
    void *p = malloc(size);
    REQUIRE(p != NULL);
    const sb_t *sb = ld_sb_of(p);
    CHECK(sb->kind == LD_KIND_SMALL);
    CHECK_MSG(ld_addrmap_small_class(p) == sb->size_class + 1, "size %zu: map %d, header class %u", size,
              ld_addrmap_small_class(p), sb->size_class);
    free(p);
  }
  void *medium = malloc(100000), *large = malloc((size_t)4 << 20);
  REQUIRE(medium && large);
  CHECK(ld_addrmap_small_class(medium) == 0);
  CHECK(ld_addrmap_small_class((char *)large + ((size_t)1 << 20)) == 0); /* an inner granule */
  CHECK(ld_addrmap_small_class(large) == 0);
  free(medium);
  free(large);
  int local = 0;
  CHECK(ld_addrmap_small_class(&local) == -1);
  CHECK(ld_addrmap_small_class(&static_datum) == -1);
  CHECK(ld_addrmap_small_class(NULL) == -1);
}

#define GIVE_THREADS 4
#define GIVE_CLASSES 12
#define GIVE_BLOCKS 6000
static const sb_t *given[GIVE_THREADS][GIVE_BLOCKS];

static void *give_worker(void *arg) {
  uintptr_t t = (uintptr_t)arg;
  static const size_t sizes[GIVE_CLASSES] = {16, 48, 96, 160, 320, 640, 1280, 2560, 3000, 5000, 9000, 16000};
  void *blocks[GIVE_BLOCKS];
  for (unsigned i = 0; i < GIVE_BLOCKS; i++) {
    size_t size = sizes[i % GIVE_CLASSES];
    REQUIRE((blocks[i] = malloc(size)) != NULL);
    memset(blocks[i], (int)i, size < 64 ? size : 64);
    given[t][i] = ld_sb_of(blocks[i]);
  }
  alloc_shuffle(blocks, GIVE_BLOCKS, 7 + t);
  for (unsigned i = 0; i < GIVE_BLOCKS; i++) free(blocks[i]);
  return NULL;
}

static void check_give_back(void) {
  pthread_t threads[GIVE_THREADS];
  for (uintptr_t t = 0; t < GIVE_THREADS; t++) REQUIRE(pthread_create(&threads[t], NULL, give_worker, (void *)t) == 0);
  for (unsigned t = 0; t < GIVE_THREADS; t++) pthread_join(threads[t], NULL);
  CHECK(larder_validate() == 0);
  malloc_trim(0);
  CHECK(larder_validate() == 0);
  /* each superblock once */
  const sb_t **all = &given[0][0];
  size_t total = (size_t)GIVE_THREADS * GIVE_BLOCKS;
  qsort(all, total, sizeof *all, compare_pointers);
  size_t superblocks = 0, gone = 0, none = 0, small = 0;
  for (size_t i = 0; i < total; i++) {
    const sb_t *sb = all[i];
    if (i && sb == all[i - 1]) continue;
    superblocks++;
    int mapped = ld_addrmap_small_class((const char *)sb + 1);
    if (mapped < 0) {
      gone++;
    } else if (mapped == 0) {
      none++;
    } else {
      small++;
      /* still a small superblock (the global heap keeps some): its header agrees */
      CHECK_MSG(sb->kind == LD_KIND_SMALL && sb->size_class + 1 == mapped, "superblock %p: map %d, kind %u class %u",
                (const void *)sb, mapped, sb->kind, sb->size_class);
    }
  }
  printf("give-back: %zu superblocks looked at: %zu unmapped, %zu no small superblock, %zu still small\n", superblocks,
         gone, none, small);
  CHECK_MSG(gone + none > 0, "malloc_trim gave no superblock back");
}

#define REMOTE_BLOCKS 20000
static void *remote_blocks[REMOTE_BLOCKS];

static void *remote_freer(void *arg) {
  (void)arg;
  for (unsigned i = 0; i < REMOTE_BLOCKS; i++) free(remote_blocks[i]);
  return NULL;
}

static void check_remote(void) {
  for (unsigned i = 0; i < REMOTE_BLOCKS; i++) {
    REQUIRE((remote_blocks[i] = malloc(64)) != NULL);
    memset(remote_blocks[i], 0x5a, 64);
  }
  void *first = remote_blocks[0];
  alloc_shuffle(remote_blocks, REMOTE_BLOCKS, 11);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, NULL, remote_freer, NULL) == 0);
  pthread_join(thread, NULL);
  CHECK(larder_validate() == 0);
  /* every block comes back from malloc, and none twice */
  void **again = malloc(REMOTE_BLOCKS * sizeof *again);
  REQUIRE(again != NULL);
  bool first_seen = false;
  for (unsigned i = 0; i < REMOTE_BLOCKS; i++) {
    REQUIRE((again[i] = malloc(64)) != NULL);
    first_seen |= again[i] == first;
  }
  CHECK_MSG(first_seen, "a block another thread freed did not come back");
  qsort(again, REMOTE_BLOCKS, sizeof *again, compare_pointers);
  for (unsigned i = 1; i < REMOTE_BLOCKS; i++) CHECK_MSG(again[i] != again[i - 1], "%p handed out twice", again[i]);
  for (unsigned i = 0; i < REMOTE_BLOCKS; i++) free(again[i]);
  free(again);
  CHECK(larder_validate() == 0);
}

static void *free_interior(void *p) {
  free(p);
  return NULL;
}

static void interior_child(void) {
  char *blocks[64];
  for (unsigned i = 0; i < 64; i++) REQUIRE((blocks[i] = malloc(64)) != NULL);
  char *p = blocks[40] + 16;
  fprintf(stderr, "interior pointer %p\n", (void *)p);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, NULL, free_interior, p) == 0);
  pthread_join(thread, NULL);
  /* (the ring lets it go within 4 slow frees, or the thread's exit does: never here) */
  fprintf(stderr, "the interior free went unreported\n");
  exit(0);
}

static void check_interior(void) {
  alloc_child_t child;
  char *args[] = {(char *)"interior", NULL};
  REQUIRE(alloc_run_self(args, NULL, 20, &child) == 0);
  char described[128];
  alloc_describe_status(child.status, described, sizeof described);
  CHECK_MSG(WIFSIGNALED(child.status) && WTERMSIG(child.status) == SIGABRT, "the child %s; stderr: %s", described, child.err);
  void *p = NULL;
  const char *at = strstr(child.err, "interior pointer ");
  CHECK(at && sscanf(at, "interior pointer %p", &p) == 1);
  char address[32];
  snprintf(address, sizeof address, "%p", p);
  CHECK_MSG(strstr(child.err, "invalid free") != NULL && strstr(child.err, address) != NULL,
            "the report names neither the fault nor %s: %s", address, child.err);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "interior") == 0) interior_child();
  check_classes();
  check_give_back();
  check_remote();
  check_interior();
  return check_done();
}
