/* Unit test of the ownership map (src/addrmap.c, issue 12), built from addrmap.c and os.c
 * directly so it does not depend on the allocator core being wired to it.
 *
 * For each granule (4 KiB, the smallest and default and largest superblock sizes, 16 KiB,
 * 64 KiB, 1 MiB), in a child process of its own (the map is initialised once per process):
 *   - init rejects bad granules and a second init with another granule;
 *   - nothing is contained before an add, for any pointer value: NULL, small integers, the
 *     stack, static data, a glibc heap block, the last user page, 2^47, 2^48, non-canonical
 *     and kernel addresses, all-ones, and a million random 64-bit values (the process would die
 *     of SIGSEGV if a lookup read through the pointer or through an unmapped map page);
 *   - a real mapping (aligned to the granule, length not a multiple of it) is contained from
 *     its first to its last byte, and the rest of its last granule (documented), and not the
 *     granule before or after; contains_header follows p-1; remove clears it;
 *   - the class byte of a small superblock: set, read through p-1's granule, cleared by a
 *     remove and the add after it;
 *   - a model check: 20,000 random adds and removes of granule ranges in a window that crosses
 *     leaf boundaries, compared granule by granule with a byte array;
 *   - concurrency: four threads add and remove their own ranges (sharing leaves that they
 *     create concurrently) while two readers check that a range added before stays contained
 *     and a range never added never is;
 *   - cost: nanoseconds per contains() on hits and on misses, printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/addrmap.h"
#include "../../src/os.h"
#include "check.h"

static int static_datum = 42;

static uint64_t rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define LEAF_GRANULES ((uintptr_t)1 << 16)

/* ---- nothing is contained, for any value ---- */
static void check_empty(void) {
  int local = 0;
  void *heap = malloc(100);
  const uintptr_t values[] = {0, 1, 16, 4096, (uintptr_t)&local, (uintptr_t)&static_datum,
                              (uintptr_t)heap, (uintptr_t)check_empty, ((uintptr_t)1 << 47) - 1,
                              (uintptr_t)1 << 47, ((uintptr_t)1 << 48) - 1, (uintptr_t)1 << 48,
                              0x00007f0000001230ull, 0x0000800000000000ull, 0x8000000000000000ull,
                              0xffff800000000000ull, 0xffffffffff600000ull, UINTPTR_MAX};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    CHECK_MSG(!ld_addrmap_contains((const void *)values[i]), "0x%lx contained in an empty map",
              (unsigned long)values[i]);
    CHECK(!ld_addrmap_contains_header((const void *)values[i]));
  }
  uint64_t s = 12345;
  long hits = 0;
  for (int i = 0; i < 1000000; i++) hits += ld_addrmap_contains((const void *)(uintptr_t)rng(&s));
  for (int i = 0; i < 1000000; i++) /* user-space values only: they reach the leaf level */
    hits += ld_addrmap_contains((const void *)(uintptr_t)(rng(&s) & (((uint64_t)1 << 48) - 1)));
  CHECK_MSG(hits == 0, "%ld random values contained in an empty map", hits);
  free(heap);
}

/* ---- a real mapping ---- */
static void check_mapping(size_t g) {
  size_t page = ld_os_page_size();
  size_t bytes = 3 * g + 5 * page; /* ends inside its fourth granule (when g > 5 pages) */
  void *mem;
  REQUIRE(ld_os_map_aligned(bytes, g, &mem) == 0);
  char *base = mem;
  CHECK(ld_addrmap_state(base) == LD_ADDR_FOREIGN);
  CHECK(ld_addrmap_add(base, bytes) == 0);
  CHECK(ld_addrmap_contains(base));
  CHECK(ld_addrmap_state(base) == LD_ADDR_OWNED);
  CHECK(ld_addrmap_contains(base + bytes - 1));
  for (size_t off = 0; off < bytes; off += page) CHECK(ld_addrmap_contains(base + off));
  size_t rounded = (bytes + g - 1) / g * g;
  CHECK_MSG(ld_addrmap_contains(base + rounded - 1), "the rest of the last granule is the range's");
  CHECK(!ld_addrmap_contains(base + rounded));
  CHECK(!ld_addrmap_contains(base - 1));
  CHECK(!ld_addrmap_contains(base - g));
  CHECK(!ld_addrmap_contains_header(base));      /* its header would be in the granule below */
  CHECK(ld_addrmap_contains_header(base + 1));
  CHECK(ld_addrmap_contains_header(base + rounded)); /* header read at the last granule */
  CHECK(!ld_addrmap_contains_header(base + rounded + 1));
  ld_addrmap_remove(base, bytes);
  for (size_t off = 0; off < rounded; off += page) CHECK(!ld_addrmap_contains(base + off));
  CHECK(ld_addrmap_state(base) == LD_ADDR_RELEASED);
  CHECK(ld_addrmap_state(base + rounded - 1) == LD_ADDR_RELEASED);
  CHECK(ld_addrmap_state(base + rounded) == LD_ADDR_FOREIGN);
  CHECK(ld_addrmap_state(base - 1) == LD_ADDR_FOREIGN);
  /* add/remove never touch the range itself: it can be unmapped while marked */
  CHECK(ld_addrmap_add(base, bytes) == 0);
  ld_os_unmap(base, bytes);
  CHECK(ld_addrmap_contains(base + g)); /* marked, unmapped: the lookup does not read it */
  ld_addrmap_remove(base, bytes);
  CHECK(!ld_addrmap_contains(base + g));
}

/* ---- the class byte of a small superblock ---- */
/* A granule's class byte: -1 where the header's granule is not owned (as contains_header), 0
 * (no small superblock) after an add, the value set, and 0 again once the range is removed and
 * added back, so that a class never outlives the mapping it was set in. */
static void check_small_class(size_t g) {
  size_t bytes = 4 * g;
  void *mem;
  REQUIRE(ld_os_map_aligned(bytes, g, &mem) == 0);
  char *base = mem;
  CHECK(ld_addrmap_small_class(base + 16) == -1);
  CHECK(ld_addrmap_small_class(NULL) == -1);
  REQUIRE(ld_addrmap_add(base, bytes) == 0);
  for (size_t i = 0; i < 4; i++) CHECK(ld_addrmap_small_class(base + i * g + 16) == 0);
  ld_addrmap_set_small_class(base + g, 7);
  ld_addrmap_set_small_class(base + 2 * g, 255);
  CHECK(ld_addrmap_small_class(base + g + 16) == 7);
  CHECK(ld_addrmap_small_class(base + 2 * g - 1) == 7); /* the granule's last byte */
  CHECK(ld_addrmap_small_class(base + g) == 0);          /* its header is the granule below */
  CHECK(ld_addrmap_small_class(base + 2 * g + 1) == 255);
  CHECK(ld_addrmap_small_class(base + 3 * g + 1) == 0);
  ld_addrmap_set_small_class(base + g, 0);
  CHECK(ld_addrmap_small_class(base + g + 16) == 0);
  ld_addrmap_remove(base + 2 * g, g);
  CHECK(ld_addrmap_small_class(base + 2 * g + 1) == -1);
  REQUIRE(ld_addrmap_add(base + 2 * g, g) == 0);
  CHECK_MSG(ld_addrmap_small_class(base + 2 * g + 1) == 0, "a class set before a remove is gone after the add");
  ld_addrmap_remove(base, bytes);
  ld_os_unmap(base, bytes);
}

/* ---- bad arguments ---- */
static void check_arguments(size_t g) {
  CHECK(ld_addrmap_add((void *)((uintptr_t)1 << 48), g) == EINVAL);
  CHECK(ld_addrmap_add((void *)(((uintptr_t)1 << 48) - g), 2 * g) == EINVAL);
  CHECK(ld_addrmap_add((void *)(uintptr_t)(64 * g), 0) == EINVAL);
  CHECK(!ld_addrmap_contains((void *)(uintptr_t)(64 * g)));
  CHECK(ld_addrmap_init(g) == 0);       /* again, same granule: nothing happens */
  CHECK(ld_addrmap_init(g * 2) == EINVAL);
  /* the last granule below 2^48 can be owned */
  uintptr_t top = ((uintptr_t)1 << 48) - g;
  CHECK(ld_addrmap_add((void *)top, g) == 0);
  CHECK(ld_addrmap_contains((void *)(((uintptr_t)1 << 48) - 1)));
  CHECK(!ld_addrmap_contains((void *)((uintptr_t)1 << 48)));
  ld_addrmap_remove((void *)top, g);
  CHECK(!ld_addrmap_contains((void *)top));
}

/* ---- model check across leaf boundaries ---- */
#define WIN 8192 /* granules in the window */
static void check_model(size_t g, uint64_t seed) {
  /* the window starts half a window below a leaf boundary, far from anything mapped (the map
   * never touches the ranges, so they need not be mapped) */
  uintptr_t first_granule = 3 * LEAF_GRANULES - WIN / 2;
  uintptr_t base = first_granule * g;
  if (base + (uintptr_t)WIN * g > ((uintptr_t)1 << 47)) base = ((uintptr_t)1 << 46) / g * g;
  static unsigned char model[WIN]; /* 0 foreign, 1 owned, 2 released */
  memset(model, 0, sizeof model);
  /* A remove marks granules released only where a leaf exists, that is in a leaf some add
   * touched before (the window spans at most 3 leaves; indexed by leaf number mod 4). */
  unsigned char leaf_seen[4] = {0, 0, 0, 0};
  uint64_t s = seed;
  long mismatches = 0;
  for (int op = 0; op < 20000; op++) {
    size_t start = (size_t)(rng(&s) % WIN);
    size_t max = WIN - start;
    size_t len = 1 + (size_t)(rng(&s) % (rng(&s) % 8 == 0 ? max : (max < 200 ? max : 200)));
    /* byte-exact ranges inside the granules: start anywhere in its first granule */
    uintptr_t a = base + start * g + (uintptr_t)(rng(&s) % g);
    uintptr_t end = base + (start + len - 1) * g + 1 + (uintptr_t)(rng(&s) % g);
    if (end <= a) end = a + 1;
    int add = rng(&s) % 2;
    if (add) CHECK(ld_addrmap_add((void *)a, end - a) == 0);
    else ld_addrmap_remove((void *)a, end - a);
    for (size_t k = (a - base) / g; k <= (end - 1 - base) / g; k++)
      if (add) model[k] = 1;
      else if (model[k] == 1 || leaf_seen[(base / g + k) >> 16 & 3]) model[k] = 2;
    for (size_t k = (a - base) / g; add && k <= (end - 1 - base) / g; k++) leaf_seen[(base / g + k) >> 16 & 3] = 1;
    if (op % 500 == 0 || op == 19999)
      for (size_t k = 0; k < WIN; k++) {
        uintptr_t probe = base + k * g + (uintptr_t)(rng(&s) % g);
        if (ld_addrmap_contains((void *)probe) != (model[k] == 1)) mismatches++;
        if ((int)ld_addrmap_state((void *)probe) != model[k]) mismatches++;
      }
  }
  CHECK_MSG(mismatches == 0, "granule %zu: %ld mismatches against the model", g, mismatches);
  ld_addrmap_remove((void *)base, (uintptr_t)WIN * g);
}

/* ---- concurrency ---- */
static atomic_int conc_stop;
static size_t conc_g;
static uintptr_t conc_fixed, conc_never;
static atomic_long conc_errors, conc_reads;

static void *conc_writer(void *arg) {
  int id = (int)(intptr_t)arg;
  /* each writer owns granules id, id+4, id+8 ... of a region that spans fresh leaves */
  uintptr_t region = (uintptr_t)5 * LEAF_GRANULES * conc_g;
  uint64_t s = (uint64_t)id + 77;
  for (int i = 0; i < 20000; i++) {
    uintptr_t k = (uintptr_t)(rng(&s) % (3 * LEAF_GRANULES / 4)) * 4 + (uintptr_t)id;
    void *p = (void *)(region + k * conc_g);
    if (ld_addrmap_add(p, conc_g) != 0) atomic_fetch_add(&conc_errors, 1);
    if (!ld_addrmap_contains(p)) atomic_fetch_add(&conc_errors, 1);
    ld_addrmap_remove(p, conc_g);
    if (ld_addrmap_contains(p)) atomic_fetch_add(&conc_errors, 1);
  }
  return NULL;
}

static void *conc_reader(void *arg) {
  (void)arg;
  long n = 0;
  while (!atomic_load_explicit(&conc_stop, memory_order_relaxed)) {
    if (!ld_addrmap_contains((void *)conc_fixed)) atomic_fetch_add(&conc_errors, 1);
    if (ld_addrmap_contains((void *)conc_never)) atomic_fetch_add(&conc_errors, 1);
    n++;
  }
  atomic_fetch_add(&conc_reads, n);
  return NULL;
}

static void check_concurrent(size_t g) {
  conc_g = g;
  /* the writers' granules k*4+id cover the region; the fixed and the never-added granule lie
   * just below it, in the same leaf and bitmap word as the region's first granules when the
   * region starts mid-word (it starts at a leaf boundary: the word below is the leaf's last) */
  uintptr_t region = (uintptr_t)5 * LEAF_GRANULES * g;
  conc_fixed = region - g + 1;
  conc_never = region - 2 * g + 1;
  CHECK(ld_addrmap_add((void *)conc_fixed, 1) == 0);
  pthread_t w[4], r[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&r[i], NULL, conc_reader, NULL) == 0);
  for (int i = 0; i < 4; i++) REQUIRE(pthread_create(&w[i], NULL, conc_writer, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 4; i++) pthread_join(w[i], NULL);
  atomic_store(&conc_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
  CHECK_MSG(atomic_load(&conc_errors) == 0, "granule %zu: %ld wrong answers under concurrency", g,
            atomic_load(&conc_errors));
  CHECK(ld_addrmap_contains((void *)conc_fixed));
  ld_addrmap_remove((void *)conc_fixed, 1);
}

/* ---- cost ---- */
static void measure(size_t g) {
  void *mem;
  REQUIRE(ld_os_map_aligned(4 * g, g, &mem) == 0);
  REQUIRE(ld_addrmap_add(mem, 4 * g) == 0);
  const long n = 20000000;
  volatile long sink = 0;
  uint64_t s = 9;
  uintptr_t hit[64], miss[64];
  for (int i = 0; i < 64; i++) {
    hit[i] = (uintptr_t)mem + (uintptr_t)(rng(&s) % (4 * g));
    miss[i] = (uintptr_t)(rng(&s) & (((uint64_t)1 << 47) - 1));
  }
  double t0 = now_s();
  for (long i = 0; i < n; i++) sink += ld_addrmap_contains((void *)hit[i & 63]);
  double t1 = now_s();
  for (long i = 0; i < n; i++) sink += ld_addrmap_contains((void *)miss[i & 63]);
  double t2 = now_s();
  printf("addrmap granule %7zu: contains() %.2f ns on hits, %.2f ns on misses; %zu leaves, %zu KiB of map\n", g,
         (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n, ld_addrmap_leaves(), ld_addrmap_bytes() / 1024);
  ld_addrmap_remove(mem, 4 * g);
  ld_os_unmap(mem, 4 * g);
}

static int run_granule(size_t g) {
  CHECK(!ld_addrmap_contains(&static_datum));   /* before init */
  CHECK(ld_addrmap_add(&static_datum, 8) == EINVAL);
  CHECK(ld_addrmap_init(3000) == EINVAL);
  CHECK(ld_addrmap_init(0) == EINVAL);
  CHECK(ld_addrmap_init((size_t)1 << 31) == EINVAL);
  REQUIRE(ld_addrmap_init(g) == 0);
  check_empty();
  check_arguments(g);
  check_mapping(g);
  check_small_class(g);
  check_model(g, 1000 + g);
  check_empty(); /* the model and the edge cases left nothing behind */
  check_concurrent(g);
  measure(g);
  return check_done();
}

int main(void) {
  const size_t granules[] = {4096, 16384, 65536, 1 << 20};
  int failed = 0;
  for (size_t i = 0; i < sizeof granules / sizeof granules[0]; i++) {
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(60);
      int rc = run_granule(granules[i]);
      fflush(stdout);
      _exit(rc);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) REQUIRE(errno == EINTR);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "addrmap granule %zu: child ended with status 0x%x%s\n", granules[i], st,
              WIFSIGNALED(st) ? " (killed by a signal: a lookup faulted or hung)" : "");
      failed++;
    }
  }
  return failed ? 1 : 0;
}
