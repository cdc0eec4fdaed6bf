/* Misuse of pointers is stopped with larder's message naming the address, never a SIGSEGV
 * (issue 12, "Must hold"). Each case runs in a child process (this program re-executed),
 * which writes "addr=0x..." and then makes the mistake; the parent checks the child died of
 * SIGABRT and that what it wrote after that line names the address and comes from larder.
 *
 * Pointers larder never handed out, through free and through realloc:
 *   static     - a pointer into this program's static data;
 *   stack      - a pointer into the calling thread's stack;
 *   mmap       - the start of a region the program mapped itself (foreign mmap);
 *   wild       - an unmapped address (0x7f0000001230, or the first unmapped one above it
 *                in 4 GiB steps), whose superblock-header address is unmapped too.
 *   The same four through malloc_usable_size may return 0 or stop the program with the
 *   message, but must not fault either (usable-*).
 * Double frees, the second free of:
 *   small      - a 48-byte block;
 *   medium     - a 100 KiB block (a run of superblocks carved from a segment);
 *   large      - a 4 MiB block (kept in the large-span cache after its first free);
 *   huge       - a 200 MiB block (beyond the cache: unmapped at its first free).
 * Interior pointers: 16 bytes into a small block, 4 KiB into a medium one, 8 KiB and 1 MiB
 * into a large one.
 * Blocks of another thread's heap (that thread alive): free's first look is the thread's batch
 * of remote frees for the block's superblock, which spares the ownership map and the header
 * once the superblock has a batch (cache.c): the second free of a block waiting in the batch
 * (double-remote) and 16 bytes into another block of its superblock (interior-remote).
 * realloc of a freed small, large (cached) and huge (unmapped) block: must say "double free"
 * or "use after free", since the pointer is one larder did allocate.
 *
 * Every case runs as is, and with LARDER_DEBUG=1. glibc names no address: without larder the
 * test is skipped. Cases that fail against the core of eba5c40 (before the ownership map):
 * static, mmap, wild (free and realloc: SIGSEGV reading a header), huge double free
 * (SIGSEGV), realloc of a freed large or huge block (wrong message, or SIGSEGV). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "alloc_util.h"

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wpragmas"

static char static_area[4096] = {1};

/* True when the page holding p is mapped (mincore fails with ENOMEM on unmapped ranges). */
static int page_mapped(uintptr_t p) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char v;
  return mincore((void *)(p & ~(uintptr_t)(page - 1)), (size_t)page, &v) == 0 || errno != ENOMEM;
}

/* An address that is unmapped, as is everything from 1 MiB below it (so the superblock
 * header a lookup might read, for any superblock size up to 1 MiB, is unmapped too). */
static uintptr_t wild_address(void) {
  for (uintptr_t a = 0x7f0000001230ull; a < 0x7ff000000000ull; a += (uintptr_t)1 << 32) {
    int clear = 1;
    for (uintptr_t q = (a & ~(uintptr_t)0xfffff) - 4096; q <= a + 4096 && clear; q += 4096)
      clear = !page_mapped(q);
    if (clear) return a;
  }
  return 0;
}

typedef enum { OP_FREE, OP_REALLOC, OP_USABLE } op_t;

static void misuse(op_t op, void *p) {
  alloc_announce(p);
  if (op == OP_FREE) {
    free(p);
  } else if (op == OP_REALLOC) {
    void *q = realloc(p, 100);
    fprintf(stderr, "realloc returned %p\n", q);
  } else {
    size_t n = malloc_usable_size(p);
    fprintf(stderr, "usable=%zu\n", n);
    exit(n == 0 ? 0 : 94);
  }
}

static op_t op_of(const char *mode) {
  if (strncmp(mode, "realloc-", 8) == 0) return OP_REALLOC;
  if (strncmp(mode, "usable-", 7) == 0) return OP_USABLE;
  return OP_FREE;
}

static const char *target_of(const char *mode) {
  const char *dash = strchr(mode, '-');
  return dash ? dash + 1 : mode;
}

/* A freed block of the given kind, its memory touched at both ends while live. */
static void *freed_block(const char *kind) {
  size_t n = strcmp(kind, "small") == 0 ? 48 : strcmp(kind, "medium") == 0 ? 100 * 1024
           : strcmp(kind, "large") == 0 ? 4u << 20 : 200u << 20;
  char *p = malloc(n), *keep = malloc(n < 1024 ? n : 16);
  if (!p || !keep) _exit(95);
  p[0] = 1;
  p[n - 1] = 1;
  free(p);
  if (strcmp(kind, "huge") == 0)
    fprintf(stderr, "freed 200 MiB block: its first page is %s\n", page_mapped((uintptr_t)p) ? "still mapped" : "unmapped");
  return p; /* keep stays live, so a small p's superblock is not empty */
}

/* Three 48-byte blocks of a thread that stays alive (waiting for the process to end). */
static char *other_blocks[3];
static atomic_int other_ready;
static void *other_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++)
    if (!(other_blocks[i] = malloc(48))) _exit(95);
  atomic_store(&other_ready, 1);
  for (;;) pause();
  return NULL;
}

static int child(const char *mode) {
  op_t op = op_of(mode);
  const char *t = target_of(mode);
  if (strcmp(t, "remote") == 0) {
    pthread_t th;
    if (pthread_create(&th, NULL, other_thread, NULL) != 0) return 95;
    while (!atomic_load(&other_ready)) sched_yield();
    free(other_blocks[0]); /* a remote free: opens the batch for the blocks' superblock */
    misuse(OP_FREE, mode[0] == 'd' ? other_blocks[0] : other_blocks[1] + 16);
  } else if (strcmp(t, "static") == 0) misuse(op, static_area + 64);
  else if (strcmp(t, "stack") == 0) {
    char local[256];
    memset(local, 1, sizeof local);
    misuse(op, local + 32);
  } else if (strcmp(t, "mmap") == 0) {
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 96;
    memset(m, 1, 1 << 16);
    misuse(op, m);
  } else if (strcmp(t, "wild") == 0) {
    uintptr_t w = wild_address();
    if (!w) return 97;
    misuse(op, (void *)w);
  } else if (strncmp(mode, "double-", 7) == 0) {
    void *p = freed_block(t);
    misuse(OP_FREE, p);
  } else if (strncmp(mode, "realloc-freed-", 14) == 0) {
    void *p = freed_block(mode + 14);
    misuse(OP_REALLOC, p);
  } else if (strncmp(mode, "realloc-inplace-", 16) == 0) {
    /* A size its class serves in place (realloc's fast path, alloc.c): p freed just now (the
     * thread's deferred free), or freed and then settled in the bin by the next free (tagged). */
    char *p = malloc(48), *keep = malloc(48), *other = malloc(48);
    if (!p || !keep || !other) return 95;
    p[0] = keep[0] = other[0] = 1;
    free(p);
    if (strcmp(mode + 16, "cached") == 0) free(other);
    alloc_announce(p);
    void *q = realloc(p, 40);
    fprintf(stderr, "realloc returned %p\n", q);
  } else if (strncmp(mode, "interior-", 9) == 0) {
    size_t n = 48, off = 16;
    if (strcmp(mode, "interior-medium") == 0) n = 100 * 1024, off = 4096;
    else if (strcmp(mode, "interior-large") == 0) n = 4u << 20, off = 8192;
    else if (strcmp(mode, "interior-large-far") == 0) n = 4u << 20, off = 1u << 20;
    char *p = malloc(n);
    if (!p) return 95;
    memset(p, 1, n < 65536 ? n : 65536);
    misuse(OP_FREE, p + off);
  } else {
    return 92;
  }
  return 0; /* not reached when the misuse is caught */
}

typedef struct {
  const char *mode;
  const char *words; /* the message must contain one of these ('|'-separated), or NULL */
} case_t;

static const case_t cases[] = {
  {"free-static", NULL},   {"free-stack", NULL},     {"free-mmap", NULL},     {"free-wild", NULL},
  {"realloc-static", NULL}, {"realloc-stack", NULL}, {"realloc-mmap", NULL},  {"realloc-wild", NULL},
  {"usable-static", NULL}, {"usable-stack", NULL},   {"usable-mmap", NULL},   {"usable-wild", NULL},
  {"double-small", "double free"},  {"double-medium", "double free"},
  {"double-large", "double free"},  {"double-huge", NULL},
  {"interior-small", NULL}, {"interior-medium", NULL}, {"interior-large", NULL},
  {"interior-large-far", NULL},
  {"double-remote", "double free"},  {"interior-remote", NULL},
  {"realloc-freed-small", "double free|use after free"},
  {"realloc-inplace-deferred", "double free|use after free"},
  {"realloc-inplace-cached", "double free|use after free"},
  {"realloc-freed-large", "double free|use after free"},
  {"realloc-freed-huge", "double free|use after free"},
};

static int contains_any(const char *hay, const char *words) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", words);
  for (char *w = strtok(buf, "|"); w; w = strtok(NULL, "|"))
    if (strstr(hay, w)) return 1;
  return 0;
}

static int failures_listed;
static char failed_modes[2048];

static void run_case(const case_t *c, int debug) {
  char *args[] = {(char *)"--child", (char *)c->mode, NULL};
  char *env_dbg[] = {(char *)"LARDER_DEBUG=1", NULL};
  alloc_child_t r;
  REQUIRE(alloc_run_self(args, debug ? env_dbg : NULL, 30, &r) == 0);
  char desc[80];
  alloc_describe_status(r.status, desc, sizeof desc);
  const char *line = strstr(r.err, "addr=");
  if (!line) {
    CHECK_MSG(0, "%s (LARDER_DEBUG=%d): child did not reach the misuse (%s): %s", c->mode, debug, desc, r.err);
    return;
  }
  uintptr_t addr = (uintptr_t)strtoull(line + 5, NULL, 16);
  const char *after = strchr(line, '\n');
  after = after ? after + 1 : line + strlen(line);
  char hex[32];
  snprintf(hex, sizeof hex, "%lx", (unsigned long)addr);
  static char low[sizeof r.err];
  size_t i = 0;
  for (; after[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)after[i]);
  low[i] = 0;
  int aborted = WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT;
  int named = strstr(low, hex) != NULL;
  int prefixed = strstr(low, "larder") != NULL;
  int worded = !c->words || contains_any(low, c->words);
  int ok = aborted && named && prefixed && worded;
  if (op_of(c->mode) == OP_USABLE && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) ok = 1; /* returned 0 */
  CHECK_MSG(ok, "%s of 0x%s (LARDER_DEBUG=%d): child %s; stderr after the misuse: \"%s\"%s%s%s", c->mode, hex, debug,
            desc, after, named ? "" : " [address not named]", prefixed ? "" : " [no larder message]",
            worded ? "" : " [wrong words]");
  if (!ok && !debug) {
    size_t used = strlen(failed_modes);
    snprintf(failed_modes + used, sizeof failed_modes - used, " %s", c->mode);
    failures_listed++;
  }
  /* the message itself, for the log */
  const char *msg = strstr(after, "larder:");
  char first[160] = "";
  sscanf(msg ? msg : after, "%159[^\n]", first);
  printf("misuse %-20s LARDER_DEBUG=%d: %-24s %s %s\n", c->mode, debug, desc, ok ? "ok  " : "FAIL", first);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (argc > 2 && strcmp(argv[1], "--only") == 0) { /* misuse_pointers --only MODE...: a subset */
    for (int a = 2; a < argc; a++)
      for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        if (strcmp(cases[k].mode, argv[a]) == 0) run_case(&cases[k], 0);
    return check_done();
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [--only MODE...] (the parent runs its own children)\n", argv[0]);
    return 2;
  }
  if (!alloc_is_larder()) {
    printf("misuse_pointers: skipped, larder is not the allocator (glibc names no address)\n");
    return ALLOC_SKIP;
  }
  for (int debug = 0; debug <= 1; debug++)
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], debug);
  if (failures_listed) printf("misuse_pointers: %d case(s) not caught cleanly:%s\n", failures_listed, failed_modes);
  fflush(stdout);
  return check_done();
}
