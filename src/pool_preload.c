/* liblarder-pool.so: a whole program's malloc family from one growing TLSF pool.
 *
 * The thesis compares TLSF with ptmalloc2 and tcmalloc by replacing malloc in the traced
 * program (seed 003 §4.4.5 notes that TLSF normally needs source access for this; §6.9 grows
 * its pool with mmap). Preloading this library does the same for any program: one pool, one
 * global lock (TLSF has no per-thread structure, seed 003 §4.4.1), new areas obtained from
 * the OS in chunks through the pool's growth callback, and requests of LARDER_POOL_HUGE bytes
 * or more in mappings of their own, given back on free.
 *
 * Tunables, read once at the first allocation (bad values are reported and ignored):
 *   LARDER_POOL_CHUNK  bytes per new area (default 8 MiB, at least 64 KiB)
 *   LARDER_POOL_HUGE   requests at least this big get their own mapping (default 4 MiB)
 *   LARDER_POOL_STATS  1: print the pool's figures on stderr at exit
 */
#define _GNU_SOURCE
#include "larder_pool.h"
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PP_EXPORT __attribute__((visibility("default")))

/* A direct mapping's header sits just below the pointer, where a pool block keeps its size
 * word: bit 2 (the pool never sets it, src/pool.c) marks it. [ptr-8] = mapping length |
 * PP_FOREIGN, [ptr-16] = ptr - mapping start. */
#define PP_FOREIGN ((size_t)4)

static pthread_mutex_t pp_lock = PTHREAD_MUTEX_INITIALIZER;
static larder_pool_t *pp_pool;
static size_t pp_chunk = (size_t)8 << 20;
static size_t pp_huge = (size_t)4 << 20;
static int pp_stats;
static int pp_stats_fd = 2;
static size_t pp_page = 4096;
/* figures for LARDER_POOL_STATS */
static size_t pp_area_bytes, pp_areas, pp_huge_live, pp_huge_peak, pp_huge_maps;

static void pp_msg(const char *a, const char *b) {
  ld_os_write(2, "liblarder-pool: ", 16);
  ld_os_write(2, a, strlen(a));
  if (b) ld_os_write(2, b, strlen(b));
  ld_os_write(2, "\n", 1);
}

/* A decimal byte count with an optional k/m/g suffix; 0 when malformed. */
static size_t pp_parse_bytes(const char *s) {
  size_t v = 0;
  if (!s || !*s) return 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (SIZE_MAX - 9) / 10) return 0;
    v = v * 10 + (size_t)(*s - '0');
  }
  size_t mult = 1;
  if (*s == 'k' || *s == 'K') mult = (size_t)1 << 10, s++;
  else if (*s == 'm' || *s == 'M') mult = (size_t)1 << 20, s++;
  else if (*s == 'g' || *s == 'G') mult = (size_t)1 << 30, s++;
  if (*s || v > SIZE_MAX / mult) return 0;
  return v * mult;
}

static size_t pp_round_page(size_t n) { return (n + pp_page - 1) & ~(pp_page - 1); }

static int pp_grow(larder_pool_t *pool, size_t bytes, void *user) {
  (void)user;
  size_t want = bytes > pp_chunk ? pp_round_page(bytes) : pp_chunk;
  if (want < bytes) return -1;
  void *mem;
  if (ld_os_map(want, &mem) != 0) return -1;
  if (larder_pool_add_area(pool, mem, want) != 0) {
    ld_os_unmap(mem, want);
    return -1;
  }
  pp_area_bytes += want;
  pp_areas++;
  return 0;
}

/* Called with the lock held. The control structure and the first area share one chunk. */
static int pp_init(void) {
  if (pp_pool) return 0;
  pp_page = ld_os_page_size();
  const char *s = secure_getenv("LARDER_POOL_CHUNK");
  if (s) {
    size_t v = pp_parse_bytes(s);
    if (v >= ((size_t)64 << 10)) pp_chunk = pp_round_page(v);
    else pp_msg("ignoring LARDER_POOL_CHUNK (want bytes >= 65536, k/m/g suffix allowed): ", s);
  }
  s = secure_getenv("LARDER_POOL_HUGE");
  if (s) {
    size_t v = pp_parse_bytes(s);
    if (v >= 4096) pp_huge = v;
    else pp_msg("ignoring LARDER_POOL_HUGE (want bytes >= 4096, k/m/g suffix allowed): ", s);
  }
  s = secure_getenv("LARDER_POOL_STATS");
  if (s) {
    if (!strcmp(s, "1")) {
      pp_stats = 1;
      /* a copy of stderr: programs such as sort close fd 2 in their own atexit handler */
      int fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
      if (fd >= 0) pp_stats_fd = fd;
    }
    else if (strcmp(s, "0")) pp_msg("ignoring LARDER_POOL_STATS (want 0 or 1): ", s);
  }
  void *mem;
  if (ld_os_map(pp_chunk, &mem) != 0) return -1;
  pp_pool = larder_pool_create(mem, pp_chunk);
  if (!pp_pool) {
    ld_os_unmap(mem, pp_chunk);
    return -1;
  }
  pp_area_bytes = pp_chunk;
  pp_areas = 1;
  larder_pool_set_grow(pp_pool, pp_grow, NULL);
  return 0;
}

static inline int pp_is_huge(const void *p) { return (((const size_t *)p)[-1] & PP_FOREIGN) != 0; }
static inline size_t pp_huge_len(const void *p) { return ((const size_t *)p)[-1] & ~(size_t)15; }
static inline size_t pp_huge_off(const void *p) { return ((const size_t *)p)[-2]; }

/* A mapping of its own, aligned as asked; fresh mappings read as zero. No lock needed. */
static void *pp_huge_alloc(size_t alignment, size_t size) {
  if (alignment < 16) alignment = 16;
  size_t lead = alignment > 16 ? alignment : 16;
  if (size > SIZE_MAX - lead - 2 * pp_page) return NULL;
  size_t len = pp_round_page(size + lead);
  void *base;
  int err = alignment > pp_page ? ld_os_map_aligned(len, alignment, &base) : ld_os_map(len, &base);
  if (err) return NULL;
  /* with the mapping aligned (to a page or to alignment), base + lead is aligned */
  char *p = (char *)base + lead;
  ((size_t *)p)[-1] = len | PP_FOREIGN;
  ((size_t *)p)[-2] = lead;
  pthread_mutex_lock(&pp_lock);
  pp_huge_live += len;
  if (pp_huge_live > pp_huge_peak) pp_huge_peak = pp_huge_live;
  pp_huge_maps++;
  pthread_mutex_unlock(&pp_lock);
  return p;
}

static void pp_huge_free(void *p) {
  size_t len = pp_huge_len(p);
  char *base = (char *)p - pp_huge_off(p);
  pthread_mutex_lock(&pp_lock);
  pp_huge_live -= len;
  pthread_mutex_unlock(&pp_lock);
  ld_os_unmap(base, len);
}

static void *pp_alloc(size_t alignment, size_t size) {
  void *p = NULL;
  if (size >= pp_huge) {
    p = pp_huge_alloc(alignment, size);
  } else {
    pthread_mutex_lock(&pp_lock);
    if (pp_init() == 0)
      p = alignment > 16 ? larder_pool_memalign(pp_pool, alignment, size) : larder_pool_malloc(pp_pool, size);
    pthread_mutex_unlock(&pp_lock);
  }
  if (!p) errno = ENOMEM;
  return p;
}

PP_EXPORT void *malloc(size_t size) { return pp_alloc(16, size); }

PP_EXPORT void free(void *p) {
  if (!p) return;
  if (pp_is_huge(p)) {
    pp_huge_free(p);
    return;
  }
  pthread_mutex_lock(&pp_lock);
  if (!pp_pool) {
    pthread_mutex_unlock(&pp_lock);
    pp_msg("free of a pointer before any allocation (not from this allocator)", NULL);
    abort();
  }
  larder_pool_free(pp_pool, p); /* stops the program, naming p, when p is not a pool block */
  pthread_mutex_unlock(&pp_lock);
}

PP_EXPORT void *calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = pp_alloc(16, total);
  if (p && !pp_is_huge(p)) memset(p, 0, malloc_usable_size(p)); /* every usable byte, as glibc (alloc.c) */
  return p;
}

PP_EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  if (pp_is_huge(p)) return pp_huge_len(p) - pp_huge_off(p);
  pthread_mutex_lock(&pp_lock);
  size_t n = pp_pool ? larder_pool_usable_size(pp_pool, p) : 0;
  pthread_mutex_unlock(&pp_lock);
  return n;
}

PP_EXPORT void *realloc(void *p, size_t size) {
  if (!p) return malloc(size);
  if (size == 0) {
    free(p);
    return NULL;
  }
  if (pp_is_huge(p)) {
    size_t have = pp_huge_len(p) - pp_huge_off(p);
    if (size <= have && size >= pp_huge / 2) return p;
  } else if (size < pp_huge) {
    pthread_mutex_lock(&pp_lock);
    if (!pp_pool) {
      pthread_mutex_unlock(&pp_lock);
      pp_msg("realloc of a pointer before any allocation (not from this allocator)", NULL);
      abort();
    }
    void *q = larder_pool_realloc(pp_pool, p, size);
    pthread_mutex_unlock(&pp_lock);
    if (!q) errno = ENOMEM;
    return q;
  }
  /* between the pool and a mapping of its own: move */
  void *q = malloc(size);
  if (!q) return NULL;
  size_t old = malloc_usable_size(p);
  memcpy(q, p, old < size ? old : size);
  free(p);
  return q;
}

PP_EXPORT void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, total);
}

PP_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || (alignment & (alignment - 1))) return EINVAL;
  void *p = pp_alloc(alignment, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

PP_EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1))) {
    errno = EINVAL;
    return NULL;
  }
  return pp_alloc(alignment, size);
}

/* glibc's memalign rounds an alignment that is not a power of two up to one. */
PP_EXPORT void *memalign(size_t alignment, size_t size) {
  if (alignment & (alignment - 1)) {
    size_t a = 1;
    while (a < alignment && a) a <<= 1;
    if (!a) {
      errno = EINVAL;
      return NULL;
    }
    alignment = a;
  }
  return pp_alloc(alignment, size);
}

PP_EXPORT void *valloc(size_t size) {
  if (!pp_pool) pp_page = ld_os_page_size();
  return pp_alloc(pp_page, size);
}

PP_EXPORT void *pvalloc(size_t size) {
  if (!pp_pool) pp_page = ld_os_page_size();
  if (size > SIZE_MAX - pp_page) {
    errno = ENOMEM;
    return NULL;
  }
  return pp_alloc(pp_page, pp_round_page(size ? size : 1));
}

/* The pool keeps its areas; there is nothing to trim (the thesis's TLSF neither). */
PP_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  return 0;
}

PP_EXPORT int mallopt(int param, int value) {
  (void)param;
  (void)value;
  return 1; /* accepted and ignored */
}

PP_EXPORT struct mallinfo2 mallinfo2(void) {
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof(mi));
  larder_pool_stats_t st;
  pthread_mutex_lock(&pp_lock);
  if (pp_pool) {
    larder_pool_stats(pp_pool, &st);
    mi.arena = pp_area_bytes;
    mi.ordblks = st.free_blocks;
    mi.uordblks = st.used;
    mi.fordblks = st.free;
    mi.keepcost = st.largest_free;
  }
  mi.hblks = pp_huge_maps;
  mi.hblkhd = pp_huge_live;
  pthread_mutex_unlock(&pp_lock);
  return mi;
}

/* fork: the child gets the pool in a consistent state and a fresh lock. */
static void pp_prepare(void) { pthread_mutex_lock(&pp_lock); }
static void pp_parent(void) { pthread_mutex_unlock(&pp_lock); }
static void pp_child(void) { pthread_mutex_init(&pp_lock, NULL); }

__attribute__((constructor)) static void pp_constructor(void) {
  /* for the process's whole life: handlers dropped at exit would let a fork from another
   * thread copy pp_lock held (os.c) */
  ld_os_atfork_forever(pp_prepare, pp_parent, pp_child);
}

static void pp_put_num(char *line, size_t *len, const char *label, size_t v) {
  char buf[32];
  int n = 0;
  do {
    buf[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && n < 30);
  for (const char *s = label; *s && *len < 500; s++) line[(*len)++] = *s;
  for (int i = n - 1; i >= 0 && *len < 500; i--) line[(*len)++] = buf[i];
}

__attribute__((destructor)) static void pp_destructor(void) {
  if (!pp_stats || !pp_pool) return;
  larder_pool_stats_t st;
  pthread_mutex_lock(&pp_lock);
  larder_pool_stats(pp_pool, &st);
  pthread_mutex_unlock(&pp_lock);
  char line[512];
  size_t n = 0;
  pp_put_num(line, &n, "liblarder-pool: areas ", pp_areas);
  pp_put_num(line, &n, " area_bytes ", pp_area_bytes);
  pp_put_num(line, &n, " used ", st.used);
  pp_put_num(line, &n, " free ", st.free);
  pp_put_num(line, &n, " largest_free ", st.largest_free);
  pp_put_num(line, &n, " used_blocks ", st.used_blocks);
  pp_put_num(line, &n, " free_blocks ", st.free_blocks);
  pp_put_num(line, &n, " huge_maps ", pp_huge_maps);
  pp_put_num(line, &n, " huge_peak ", pp_huge_peak);
  pp_put_num(line, &n, " check ", (size_t)larder_pool_check(pp_pool));
  line[n++] = '\n';
  ld_os_write(pp_stats_fd, line, n);
}
