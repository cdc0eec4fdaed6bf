/* libFuzzer target for liblarder's allocation API (issues 12 and 16). The input is a sequence
 * of 4-byte operations on 64 slots:
 *
 *   byte 0  operation (low 4 bits); 0x80: the size comes from the edge table (below) instead of
 *           bytes 2-3; 0x40: the operation's variant (an overflowing product, an alignment from
 *           the whole range);
 *   byte 1  slot (low 6 bits); with 0x80, the top 2 bits pick the table entry itself, one
 *           below or one above it;
 *   byte 2  size: with 0x80 the table entry (mod its length); else bits 7..3 give a power of
 *           two (mod 23: 1 B .. 4 MiB) and, with byte 3, the bits below it;
 *   byte 3  the alignment of aligned operations, the element count of calloc/reallocarray.
 *
 * The edge table is built at the first input from the library itself, so it follows the
 * superblock size S in force: 0, 1, every size class (walked with larder_usable_size), S/4 (the
 * small limit), S and runs of k chunks less the span header (medium spans), the medium limit
 * (2 MiB less the header), the large-span cache limit (64 MiB), every power of two from 2^5 to
 * 2^63, PTRDIFF_MAX and SIZE_MAX and their neighbours. Alignments: powers of two from 1 to 2 MiB,
 * or (variant) from 1 to 2^63; or not powers of two (0, 3, 24, 65, S - 1, 2^63 + 1, SIZE_MAX ...).
 *
 * Operations: malloc, calloc (zeroed; overflowing products), realloc and reallocarray (from NULL
 * or a block of any kind, to a size of any kind), memalign, posix_memalign, aligned_alloc,
 * malloc_usable_size, free, realloc to 0, malloc_shared, larder_trim and larder_validate.
 *
 * Every call is checked against the contract (the differential check: the fuzzer's own model of
 * what each call must return, from its arguments alone, against what larder returned):
 *   - errno is set to a sentinel before every call: a call that succeeds leaves it, a failure
 *     sets ENOMEM (size or alignment too large; an overflowing product) or EINVAL (an alignment
 *     memalign cannot round, aligned_alloc's non-powers of two); posix_memalign returns its error
 *     and leaves errno alone, and *out too on failure;
 *   - NULL or not: a size above PTRDIFF_MAX or an alignment above 2^62 must fail; a request up
 *     to 256 MiB (size plus alignment) must succeed; between, either is allowed;
 *   - a block: aligned as asked (at least 16), usable size at least the size asked, the kept
 *     prefix intact across realloc, calloc's block zero, a failed realloc's block untouched
 *     (same usable size, same contents).
 * Every block is filled with a pattern derived from its allocation's id (the whole block up to
 * 8 KiB, beyond that its first and last 4 KiB and, up to 16 MiB, one word per 4 KiB page
 * between), checked before every free and realloc. Blocks above 16 MiB are checked and freed
 * at once, never kept in a slot, so that an input's resident memory stays within a few
 * hundred MiB (a realloc copies, calloc may clear, whole blocks); blocks above 16 MiB are
 * touched at their edges only. Every 64 operations and at the end of an input larder_validate() must find no
 * violation; the blocks of an input are all freed at its end. Any failure aborts with a
 * message, which libFuzzer reports with the input.
 *
 * API_FUZZ_REPORT=1 in the environment prints, at exit, how often each call succeeded or failed
 * and the realloc pairs met (block kind before -> size kind asked, growing or shrinking): the
 * evidence that a corpus reaches the edges (docs/hardening.md); API_FUZZ_REQUIRE_EDGES=1 also
 * makes the process fail when one of them was never met (the CTest replay sets it).
 *
 * The prefixed API only: libFuzzer (and the sanitizers' runtimes) keep their own malloc.
 * Built by fuzz/CMakeLists.txt with clang -fsanitize=fuzzer from larder's own sources (all but
 * the standard-name wrappers); replay_main.c replays a corpus through the same function
 * without libFuzzer, linked against liblarder.a. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "larder.h"

#define AF_SLOTS 64
#define AF_FULL 8192                       /* blocks up to this size are filled and checked whole */
#define AF_EDGE 4096                       /* beyond it: first and last 4 KiB, one word per page between */
#define AF_PAGE_WORDS_MAX ((size_t)16 << 20) /* beyond this, the edges only (RSS) */
#define AF_SURE ((size_t)256 << 20)        /* a request up to this (size + alignment) must be served */
#define AF_KEEP ((size_t)16 << 20)         /* bigger blocks are checked and freed at once (RSS) */
#define AF_REQUEST_MAX ((size_t)PTRDIFF_MAX) /* glibc's limit, and larder's: no object above it */
#define AF_ALIGN_MAX ((size_t)1 << 62)       /* larder's: no alignment above it */

enum { K_SMALL, K_MEDIUM, K_LARGE, K_ALIGNED, K_HUGE, K_COUNT };
static const char *const af_kind_name[K_COUNT] = {"small", "medium", "large", "aligned-large", "impossible"};

struct af_slot {
  unsigned char *p;
  size_t n;
  uint64_t id;
  const char *how; /* the call that made the block, and its alignment: for the failure report */
  size_t align;
  int kind;
};

static const char *af_how; /* the call being made */
static uint64_t af_next_id = 1;
static const struct af_slot *af_current; /* the slot being worked on */

static void af_fail(const char *what, size_t op, const void *p, size_t n) {
  fprintf(stderr, "api_fuzz: %s at operation %zu in %s (block %p, %zu bytes)", what, op, af_how ? af_how : "?", p, n);
  if (af_current && af_current->p)
    fprintf(stderr, "; the slot held %p, %zu bytes from %s (alignment %zu)", (void *)af_current->p, af_current->n,
            af_current->how ? af_current->how : "?", af_current->align);
  fputc('\n', stderr);
  abort();
}

/* The pattern: one 64-bit word per 8 bytes of the block, from the allocation's id. */
static inline uint64_t af_word(uint64_t id, size_t w) {
  uint64_t x = id * 0x9E3779B97F4A7C15ULL + (uint64_t)w * 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}
static inline unsigned char af_byte(uint64_t id, size_t i) {
  return (unsigned char)(af_word(id, i >> 3) >> ((i & 7) * 8));
}

/* The pattern loops are the hot part of a run: keep libFuzzer's comparison tracing out of
 * them (the coverage that matters is larder's). */
#if defined(__clang__)
#define AF_NOCOV __attribute__((no_sanitize("coverage")))
#else
#define AF_NOCOV
#endif

/* Calls BODY(off, len) for each checked stretch of a block of n bytes: all of a block up to
 * AF_FULL bytes; beyond, its first and last AF_EDGE bytes and, up to AF_PAGE_WORDS_MAX, one
 * 8-byte word per page. */
#define AF_STRETCHES(n, BODY)                                                     \
  do {                                                                            \
    size_t af_n = (n);                                                            \
    if (af_n <= AF_FULL) {                                                        \
      size_t off = 0, len = af_n;                                                 \
      BODY;                                                                       \
    } else {                                                                      \
      { size_t off = 0, len = AF_EDGE; BODY; }                                    \
      { size_t off = af_n - AF_EDGE, len = AF_EDGE; BODY; }                       \
      if (af_n <= AF_PAGE_WORDS_MAX)                                              \
        for (size_t pg = AF_EDGE; pg + 8 <= af_n - AF_EDGE; pg += 4096) {         \
          size_t off = pg, len = 8;                                               \
          BODY;                                                                   \
        }                                                                         \
    }                                                                             \
  } while (0)

/* Bytes [off, off+len) of the pattern, whole words where they are aligned to the block. */
AF_NOCOV static void af_fill_range(unsigned char *p, uint64_t id, size_t off, size_t len) {
  size_t i = off, end = off + len;
  for (; i < end && (i & 7); i++) p[i] = af_byte(id, i);
  for (; i + 8 <= end; i += 8) {
    uint64_t w = af_word(id, i >> 3);
    memcpy(p + i, &w, 8);
  }
  for (; i < end; i++) p[i] = af_byte(id, i);
}

AF_NOCOV static int af_range_ok(const unsigned char *p, uint64_t id, size_t off, size_t len) {
  size_t i = off, end = off + len;
  uint64_t diff = 0;
  for (; i < end && (i & 7); i++) diff |= p[i] ^ af_byte(id, i);
  for (; i + 8 <= end; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    diff |= w ^ af_word(id, i >> 3);
  }
  for (; i < end; i++) diff |= p[i] ^ af_byte(id, i);
  return diff == 0;
}

AF_NOCOV static int af_range_zero(const unsigned char *p, size_t off, size_t len) {
  unsigned char acc = 0;
  for (size_t i = off; i < off + len; i++) acc |= p[i];
  return acc == 0;
}

static void af_fill(unsigned char *p, size_t n, uint64_t id) {
  AF_STRETCHES(n, af_fill_range(p, id, off, len));
}

/* Checks the first `upto` bytes of a block filled as (n, id); returns 1 when intact. */
static int af_intact(const unsigned char *p, size_t n, uint64_t id, size_t upto) {
  int ok = 1;
  AF_STRETCHES(n, if (off < upto) ok &= af_range_ok(p, id, off, off + len <= upto ? len : upto - off));
  return ok;
}

static int af_zero(const unsigned char *p, size_t n) {
  int ok = 1;
  AF_STRETCHES(n, ok &= af_range_zero(p, off, len));
  return ok;
}

/* ---- the edges, from the library in force ---- */

static size_t af_S = 65536, af_small_max = 16384;
static size_t af_table[256];
static size_t af_ntable;

static void af_add(size_t v) {
  if (af_ntable < sizeof af_table / sizeof af_table[0]) af_table[af_ntable++] = v;
}

/* The table's order is fixed where it does not depend on S, so that seed inputs
 * (fuzz/make_api_seeds.py) can name entries: [0, 58] the powers of two 2^5 .. 2^63, [59, 68]
 * the sizes near PTRDIFF_MAX and SIZE_MAX, [69, 71] 0, 1, 8, then what depends on S. */
static void af_init(void) {
  double s = larder_option_get("superblock_size");
  if (s >= 4096 && s <= (double)((size_t)1 << 30)) af_S = (size_t)s;
  af_small_max = af_S / 4 < 16384 ? af_S / 4 : 16384;
  for (unsigned k = 5; k < 64; k++) af_add((size_t)1 << k);
  af_add((size_t)PTRDIFF_MAX);
  af_add((size_t)PTRDIFF_MAX - 4095);
  af_add((size_t)PTRDIFF_MAX - af_S);
  af_add(((size_t)1 << 62) + af_S);
  af_add(SIZE_MAX);
  af_add(SIZE_MAX - 15);
  af_add(SIZE_MAX - 100);
  af_add(SIZE_MAX - 4095);
  af_add(SIZE_MAX - af_S);
  af_add(SIZE_MAX - ((size_t)2 << 20));
  af_add(0);
  af_add(1);
  af_add(8);
  af_add(af_S);
  /* medium spans: runs of k chunks of S bytes, less the 256-byte span header */
  const size_t chunks[] = {1, 2, 3, 4, 8, 16, 31, 32};
  for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) af_add(chunks[i] * af_S - 256);
  af_add(((size_t)2 << 20) - 256); /* the largest medium span (large.c) */
  af_add(((size_t)2 << 20) + 4096);
  af_add(((size_t)64 << 20) - 256); /* the largest large span the cache keeps (64 MiB mappings) */
  af_add(((size_t)64 << 20) + 4096);
  /* every size class: the next one starts a byte past the last one's usable size */
  for (size_t n = 1; n <= af_small_max;) {
    void *p = larder_malloc(n);
    size_t u = larder_usable_size(p);
    larder_free(p);
    if (!p || u < n) break;
    af_add(u);
    n = u + 1;
  }
}

static size_t af_size(const uint8_t *c) {
  if (c[0] & 0x80) {
    size_t b = af_table[c[2] % af_ntable];
    switch (c[1] >> 6) {
      case 1: return b ? b - 1 : 0;
      case 2: return b == SIZE_MAX ? b : b + 1;
      default: return b;
    }
  }
  unsigned e = (unsigned)(c[2] >> 3) % 23; /* 2^0 .. 2^22 */
  size_t r = ((size_t)(c[2] & 7) << 8) | c[3];
  if (e <= 11) return r & (((size_t)1 << e) - 1);
  return ((size_t)1 << e) | (r << (e - 11)) % ((size_t)1 << e) | (r & 15);
}

/* Alignments: powers of two 1 B .. 2 MiB, or (variant) 1 .. 2^63; with 0x80, values that are
 * not powers of two (or small ones, mostly not). */
static size_t af_alignment(uint8_t b, int whole_range) {
  if (b & 0x80) {
    const size_t odd[] = {0, 3, 5, 12, 24, 48, 65, 100, 4095, 4097, af_S - 1, af_S + 1, (size_t)3 << 20,
                          ((size_t)1 << 62) + 1, ((SIZE_MAX >> 1) + 1) + 1, SIZE_MAX};
    unsigned i = b & 0x7f;
    return i < sizeof odd / sizeof odd[0] ? odd[i] : (size_t)(i - sizeof odd / sizeof odd[0]) + 1;
  }
  return (size_t)1 << (whole_range ? b % 64 : b % 22);
}

static int af_is_pow2(size_t a) { return a && !(a & (a - 1)); }

static size_t af_pow2_up(size_t x) { /* 0 when there is none (x > 2^63) */
  size_t a = 1;
  while (a < x && a) a <<= 1;
  return a;
}

static int af_kind(size_t n, size_t align) {
  if (n > AF_REQUEST_MAX || align > AF_ALIGN_MAX) return K_HUGE;
  if (align >= af_S) return K_ALIGNED;
  if (align < 16) align = 16;
  if (n <= af_small_max && align <= af_small_max) return K_SMALL;
  size_t offset = align > 256 ? align : 256;
  return offset + n <= ((size_t)2 << 20) ? K_MEDIUM : K_LARGE;
}

/* ---- the contract ---- */

enum af_want { WANT_OK, WANT_MAY, WANT_ENOMEM, WANT_EINVAL };

/* What a request of n bytes aligned to `align` (a power of two) must do. */
static enum af_want af_want_for(size_t n, size_t align) {
  if (n > AF_REQUEST_MAX || align > AF_ALIGN_MAX) return WANT_ENOMEM;
  if (n <= AF_SURE && align <= AF_SURE && n + align <= AF_SURE) return WANT_OK;
  return WANT_MAY;
}

/* outcome counters for API_FUZZ_REPORT */
enum { C_MALLOC, C_CALLOC, C_REALLOC, C_REALLOCARRAY, C_MEMALIGN, C_POSIX_MEMALIGN, C_ALIGNED_ALLOC, C_SHARED, C_CALLS };
static const char *const af_call_name[C_CALLS] = {"malloc",   "calloc",         "realloc",       "reallocarray",
                                                   "memalign", "posix_memalign", "aligned_alloc", "malloc_shared"};
static size_t af_outcome[C_CALLS][3]; /* served, ENOMEM, EINVAL */
static size_t af_pairs[K_COUNT][K_COUNT][2];
static size_t af_errno_checks;

static int af_sentinel(size_t op) { return 7000 + (int)(op & 1023); }

/* Checks a call's result against `want`; errno was `sentinel` before it, `e` after. */
static void af_expect(const void *p, int e, int sentinel, enum af_want want, int call, size_t op, size_t n) {
  af_errno_checks++;
  if (p) {
    if (want == WANT_ENOMEM || want == WANT_EINVAL) af_fail("a request the contract refuses was served", op, p, n);
    if (e != sentinel) af_fail("a call that succeeded changed errno", op, p, (size_t)e);
    af_outcome[call][0]++;
    return;
  }
  if (want == WANT_OK) af_fail("a request the contract promises failed", op, NULL, n);
  int expected = want == WANT_EINVAL ? EINVAL : ENOMEM;
  if (e != expected) af_fail(want == WANT_EINVAL ? "failed without errno EINVAL" : "failed without errno ENOMEM", op, NULL, (size_t)e);
  af_outcome[call][want == WANT_EINVAL ? 2 : 1]++;
}

/* A call that returns nothing to check (free, usable size, validate, trim) leaves errno. */
static void af_errno_kept(int e, int sentinel, size_t op) {
  af_errno_checks++;
  if (e != sentinel) af_fail("errno changed by a call that cannot fail", op, NULL, (size_t)e);
}

static void af_check_new(struct af_slot *s, size_t op, size_t align) {
  if ((uintptr_t)s->p % (align < 16 ? 16 : align)) af_fail("misaligned block", op, s->p, s->n);
  size_t usable = larder_usable_size(s->p);
  if (usable < s->n) af_fail("usable size below the size asked for", op, s->p, s->n);
  s->id = af_next_id++;
  s->how = af_how;
  s->align = align;
  s->kind = af_kind(s->n, align);
  af_fill(s->p, s->n, s->id);
}

/* A live block still answers to malloc_usable_size and holds its pattern. */
static void af_live(const struct af_slot *s, size_t op, const char *when) {
  if (!s->p) return;
  if (larder_usable_size(s->p) < s->n) af_fail("usable size of a live block below its size", op, s->p, s->n);
  if (!af_intact(s->p, s->n, s->id, s->n)) af_fail(when, op, s->p, s->n);
}

static void af_release(struct af_slot *s, size_t op) {
  if (!s->p) return;
  af_live(s, op, "block damaged before free");
  int sentinel = af_sentinel(op);
  errno = sentinel;
  larder_free(s->p);
  af_errno_kept(errno, sentinel, op);
  s->p = NULL;
  s->n = 0;
}

/* A new block in s (or NULL): checked, and if above what a slot keeps, freed at once. */
static void af_take(struct af_slot *s, void *p, size_t n, size_t align, size_t op) {
  s->p = p;
  s->n = n;
  if (!p) return;
  af_check_new(s, op, align);
  if (n > AF_KEEP) af_release(s, op);
}

/* The edges a corpus must reach (API_FUZZ_REQUIRE_EDGES=1, the CTest replay): every call
 * both served and refused with ENOMEM, the aligned ones refused with EINVAL too, and every
 * possible realloc pair met, growing and shrinking. A merge that drops one fails the test. */
static int af_require;

static void af_report(void) {
  fprintf(stderr, "api_fuzz report: %zu calls checked for errno; S = %zu, %zu edge sizes\n", af_errno_checks, af_S,
          af_ntable);
  for (int c = 0; c < C_CALLS; c++)
    fprintf(stderr, "  %-15s served %zu, ENOMEM %zu, EINVAL %zu\n", af_call_name[c], af_outcome[c][0], af_outcome[c][1],
            af_outcome[c][2]);
  fprintf(stderr, "  realloc pairs (block kind -> size kind: growing/shrinking):\n");
  /* the pairs that can happen: realloc never aligns (no target is aligned-large); a block of
   * one kind grows into its own kind or a bigger one and shrinks into its own or a smaller
   * one; an aligned block may hold any size, so it goes anywhere */
  int missing = 0, possible = 0;
  for (int a = 0; a < K_HUGE; a++)
    for (int b = 0; b < K_COUNT; b++) {
      if (b == K_ALIGNED) continue;
      fprintf(stderr, "    %-13s -> %-10s %6zu/%zu\n", af_kind_name[a], af_kind_name[b], af_pairs[a][b][0], af_pairs[a][b][1]);
      for (int shrink = 0; shrink < 2; shrink++) {
        int can = a == K_ALIGNED ? !(shrink && b == K_HUGE) : shrink ? b <= a : b >= a;
        possible += can;
        missing += can && af_pairs[a][b][shrink] == 0;
      }
    }
  fprintf(stderr, "  realloc pairs never met: %d of %d possible\n", missing, possible);
  for (int c = 0; c < C_CALLS; c++) {
    int einval = c == C_MEMALIGN || c == C_POSIX_MEMALIGN || c == C_ALIGNED_ALLOC;
    if (!af_outcome[c][0] || !af_outcome[c][1] || (einval && !af_outcome[c][2])) {
      fprintf(stderr, "  %s: an outcome never met\n", af_call_name[c]);
      missing++;
    }
  }
  if (af_require && missing) {
    fprintf(stderr, "api_fuzz: the corpus misses %d of the edges it must reach\n", missing);
    _exit(1); /* from an atexit handler: exit() again would be undefined */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    ready = 1;
    af_init();
    const char *r = getenv("API_FUZZ_REPORT"), *q = getenv("API_FUZZ_REQUIRE_EDGES");
    af_require = q && q[0] == '1';
    if ((r && r[0] == '1') || af_require) atexit(af_report);
  }
  struct af_slot slots[AF_SLOTS];
  memset(slots, 0, sizeof slots);
  size_t nops = size / 4;
  for (size_t op = 0; op < nops; op++) {
    const uint8_t *c = data + op * 4;
    struct af_slot *s = &slots[c[1] % AF_SLOTS];
    size_t n = af_size(c);
    int variant = (c[0] & 0x40) != 0;
    int sentinel = af_sentinel(op);
    static const char *const names[16] = {"malloc", "malloc", "malloc", "calloc", "realloc", "realloc",
                                           "reallocarray", "memalign", "posix_memalign", "aligned_alloc",
                                           "usable_size", "free", "free", "validate", "realloc(p, 0)",
                                           "malloc_shared"};
    af_how = names[c[0] & 15];
    af_current = s;
    switch (c[0] & 15) {
      case 0: case 1: case 2: { /* malloc; the variant asks for SIZE_MAX - k pages */
        af_release(s, op);
        if (variant && c[2] == 0xff) n = SIZE_MAX - (size_t)c[3] * 4096;
        errno = sentinel;
        void *p = larder_malloc(n);
        af_expect(p, errno, sentinel, af_want_for(n, 16), C_MALLOC, op, n);
        af_take(s, p, n, 16, op);
        break;
      }
      case 3: { /* calloc: count x each, or (variant) a product that overflows or is too large */
        af_release(s, op);
        size_t count = 1 + (c[3] & 7), each = n / count;
        if (variant && (c[3] & 0x80)) {
          const size_t pairs[][2] = {{SIZE_MAX / 2 + 1, 2}, {(size_t)1 << 32, (size_t)1 << 32},
                                     {(size_t)PTRDIFF_MAX / 2 + 1, 2}, {SIZE_MAX, SIZE_MAX}, {3, SIZE_MAX / 3 + 1}};
          count = pairs[c[3] % 5][0];
          each = pairs[c[3] % 5][1];
        }
        size_t bytes;
        int overflow = __builtin_mul_overflow(count, each, &bytes);
        errno = sentinel;
        void *p = larder_calloc(count, each);
        af_expect(p, errno, sentinel, overflow ? WANT_ENOMEM : af_want_for(bytes, 16), C_CALLOC, op, bytes);
        if (p && !af_zero(p, bytes)) af_fail("calloc block not zero", op, p, bytes);
        af_take(s, p, bytes, 16, op);
        break;
      }
      case 4: case 5: { /* realloc, from NULL or a live block, to any size */
        af_live(s, op, "block damaged before realloc");
        if (n == 0 && s->p) n = 1; /* realloc to 0 is op 14 */
        int from = s->p ? s->kind : -1;
        size_t old_usable = s->p ? larder_usable_size(s->p) : 0;
        errno = sentinel;
        unsigned char *q = larder_realloc(s->p, n);
        af_expect(q, errno, sentinel, af_want_for(n, 16), C_REALLOC, op, n);
        if (from >= 0) af_pairs[from][af_kind(n, 16)][n < s->n]++;
        if (!q) {
          /* the old block as it was: same usable size, same contents */
          if (s->p && larder_usable_size(s->p) != old_usable) af_fail("failed realloc changed the usable size", op, s->p, n);
          if (s->p && !af_intact(s->p, s->n, s->id, s->n)) af_fail("failed realloc damaged the block", op, s->p, n);
          break;
        }
        if (s->p && !af_intact(q, s->n, s->id, n < s->n ? n : s->n)) af_fail("realloc lost the contents", op, q, n);
        af_take(s, q, n, 16, op);
        break;
      }
      case 6: { /* reallocarray, or (variant) a product that must fail and leave the block alone */
        size_t count = 1 + (c[3] & 15);
        af_live(s, op, "block damaged before reallocarray");
        size_t each = n / count;
        if (variant) {
          count = c[3] & 1 ? SIZE_MAX / (count + 1) + 1 : (size_t)PTRDIFF_MAX / 2 + 1;
          each = c[3] & 1 ? (size_t)(1 + (c[3] & 15)) + 1 : 2;
        } else if (count * each == 0 && s->p) {
          each = 1;
        }
        size_t bytes;
        int overflow = __builtin_mul_overflow(count, each, &bytes);
        size_t old_usable = s->p ? larder_usable_size(s->p) : 0;
        errno = sentinel;
        unsigned char *q = larder_reallocarray(s->p, count, each);
        af_expect(q, errno, sentinel, overflow ? WANT_ENOMEM : af_want_for(bytes, 16), C_REALLOCARRAY, op, bytes);
        if (!q) {
          if (s->p && larder_usable_size(s->p) != old_usable) af_fail("failed reallocarray changed the usable size", op, s->p, bytes);
          if (s->p && !af_intact(s->p, s->n, s->id, s->n)) af_fail("failed reallocarray damaged the block", op, s->p, s->n);
          break;
        }
        if (s->p && !af_intact(q, s->n, s->id, bytes < s->n ? bytes : s->n)) af_fail("reallocarray lost the contents", op, q, bytes);
        af_take(s, q, bytes, 16, op);
        break;
      }
      case 7: case 8: case 9: { /* memalign, posix_memalign, aligned_alloc */
        af_release(s, op);
        size_t align = af_alignment(c[3], variant);
        if (!(c[0] & 0x80) && n > ((size_t)1 << 21)) n >>= 1; /* keep random aligned blocks to a few MiB */
        if ((c[0] & 15) == 8) {
          /* POSIX: EINVAL unless a power of two multiple of sizeof(void *); errno never touched */
          void *out = (void *)&slots;
          errno = sentinel;
          int rc = larder_posix_memalign(&out, align, n);
          af_errno_kept(errno, sentinel, op);
          int valid = af_is_pow2(align) && align % sizeof(void *) == 0;
          enum af_want want = valid ? af_want_for(n, align) : WANT_EINVAL;
          if (rc != 0 && out != (void *)&slots) af_fail("failed posix_memalign wrote *out", op, out, align);
          if (rc != 0 && rc != ENOMEM && rc != EINVAL) af_fail("posix_memalign returned neither 0, ENOMEM nor EINVAL", op, NULL, (size_t)rc);
          /* the same check as the other calls, with the return value in errno's place */
          af_expect(rc == 0 ? out : NULL, rc == 0 ? sentinel : rc, sentinel, want, C_POSIX_MEMALIGN, op, n);
          af_take(s, rc == 0 ? out : NULL, n, align, op);
        } else if ((c[0] & 15) == 7) {
          /* glibc: rounded up to a power of two, 0 serves as 1, nothing to round to: EINVAL */
          size_t a = af_pow2_up(align);
          errno = sentinel;
          void *p = larder_memalign(align, n);
          af_expect(p, errno, sentinel, a == 0 ? WANT_EINVAL : af_want_for(n, a), C_MEMALIGN, op, n);
          af_take(s, p, n, a, op);
        } else {
          /* C17 DR 460, glibc 2.38: a power of two or EINVAL (0 included) */
          errno = sentinel;
          void *p = larder_aligned_alloc(align, n);
          af_expect(p, errno, sentinel, af_is_pow2(align) ? af_want_for(n, align) : WANT_EINVAL, C_ALIGNED_ALLOC, op, n);
          af_take(s, p, n, align, op);
        }
        break;
      }
      case 10: { /* malloc_usable_size */
        errno = sentinel;
        size_t u = larder_usable_size(s->p);
        af_errno_kept(errno, sentinel, op);
        if (!s->p) {
          if (u != 0) af_fail("usable size of NULL is not 0", op, NULL, 0);
        } else if (u < s->n) {
          af_fail("usable size shrank", op, s->p, s->n);
        } else if (!af_intact(s->p, s->n, s->id, s->n)) {
          af_fail("block damaged", op, s->p, s->n);
        }
        break;
      }
      case 11: case 12:
        af_release(s, op);
        break;
      case 13:
        errno = sentinel;
        if (c[3] & 1) larder_trim(0);
        if (larder_validate() != 0) af_fail("larder_validate found violations", op, NULL, 0);
        af_errno_kept(errno, sentinel, op);
        break;
      case 14: /* realloc to 0 frees (glibc's behaviour): NULL, and a success */
        if (s->p) {
          af_live(s, op, "block damaged before realloc(p, 0)");
          errno = sentinel;
          if (larder_realloc(s->p, 0) != NULL) af_fail("realloc(p, 0) did not return NULL", op, s->p, 0);
          af_errno_kept(errno, sentinel, op);
          s->p = NULL;
          s->n = 0;
        }
        break;
      case 15: { /* cache-line aligned, for objects shared between threads */
        af_release(s, op);
        errno = sentinel;
        void *p = larder_malloc_shared(n);
        af_expect(p, errno, sentinel, af_want_for(n, 64), C_SHARED, op, n);
        af_take(s, p, n, 64, op);
        if (s->p && larder_usable_size(s->p) % 64) af_fail("malloc_shared: usable size not whole cache lines", op, s->p, n);
        break;
      }
    }
    if ((op & 63) == 63 && larder_validate() != 0) af_fail("larder_validate found violations", op, NULL, 0);
  }
  for (int i = 0; i < AF_SLOTS; i++) af_release(&slots[i], nops);
  if (larder_validate() != 0) af_fail("larder_validate found violations at the end", nops, NULL, 0);
  return 0;
}
