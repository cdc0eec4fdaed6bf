/* libFuzzer target for liblarder's allocation API (issue 12). The input is a sequence of
 * 4-byte operations on 64 slots:
 *
 *   byte 0  operation (low 4 bits) and flags: 0x80 picks the size from a table of boundary
 *           sizes (size classes, S/4, the large and direct-map limits) instead of bytes 2-3;
 *   byte 1  slot (mod 64);
 *   byte 2  size: bits 7..3 give a power of two (mod 23: 1 B .. 4 MiB), and with byte 3 the
 *           bits below it; for aligned operations and calloc/reallocarray, byte 3 also gives
 *           the alignment or the element count.
 *
 * Operations: malloc, calloc (checked zero), realloc (the kept prefix checked), reallocarray
 * (with overflowing counts: NULL, ENOMEM, the block intact), memalign, posix_memalign and
 * aligned_alloc (powers of two from 1 B to 2 MiB, non-powers of two, and invalid alignments:
 * EINVAL and *out untouched; aligned_alloc refuses a non-power of two with EINVAL), malloc_usable_size, free, realloc to 0, malloc_shared, impossible
 * sizes (NULL, ENOMEM), larder_trim and larder_validate. Every 64 operations and at the end of
 * an input larder_validate() must find no violation.
 *
 * Every block is filled with a pattern derived from its allocation's id (the whole block up to
 * 8 KiB, beyond that its first and last 4 KiB and one word per 4 KiB page between), checked
 * before every free and realloc, and the blocks of an input are all freed at its end. Any
 * failure aborts with a message, which libFuzzer reports with the input.
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

#include "larder.h"

#define AF_SLOTS 64
#define AF_FULL 8192  /* blocks up to this size are filled and checked whole */
#define AF_EDGE 4096  /* beyond it: first and last 4 KiB, one word per page between */

struct af_slot {
  unsigned char *p;
  size_t n;
  uint64_t id;
  const char *how;   /* the call that made the block, and its alignment: for the failure report */
  size_t align;
};

static const char *af_how;  /* the call being made */
static size_t af_align;

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
 * AF_FULL bytes; beyond, its first and last AF_EDGE bytes and one 8-byte word per page. */
#define AF_STRETCHES(n, BODY)                                                     \
  do {                                                                            \
    size_t af_n = (n);                                                            \
    if (af_n <= AF_FULL) {                                                        \
      size_t off = 0, len = af_n;                                                 \
      BODY;                                                                       \
    } else {                                                                      \
      { size_t off = 0, len = AF_EDGE; BODY; }                                    \
      { size_t off = af_n - AF_EDGE, len = AF_EDGE; BODY; }                       \
      for (size_t pg = AF_EDGE; pg + 8 <= af_n - AF_EDGE; pg += 4096) {           \
        size_t off = pg, len = 8;                                                 \
        BODY;                                                                     \
      }                                                                           \
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

static const size_t af_boundaries[] = {
  0, 1, 8, 15, 16, 17, 24, 32, 48, 64, 112, 128, 129, 144, 256, 1000, 1024, 2048, 4095, 4096,
  4097, 8192, 12288, 14336, 16383, 16384, 16385, 32768, 65280, 65536, 65537, 131072, 262144,
  524288, 1048320, 1048576, 1048577, 2097152, 3145728, 4194304};
#define AF_NBOUND (sizeof af_boundaries / sizeof af_boundaries[0])

static size_t af_size(const uint8_t *c) {
  if (c[0] & 0x80) {
    size_t b = af_boundaries[c[3] % AF_NBOUND];
    int delta = (int)(c[2] % 3) - 1; /* the boundary, one below, one above */
    return (b == 0 && delta < 0) ? 0 : b + (size_t)(ptrdiff_t)delta;
  }
  unsigned e = (unsigned)(c[2] >> 3) % 23; /* 2^0 .. 2^22 */
  size_t r = ((size_t)(c[2] & 7) << 8) | c[3];
  if (e <= 11) return r & (((size_t)1 << e) - 1);
  return ((size_t)1 << e) | (r << (e - 11)) % ((size_t)1 << e) | (r & 15);
}

static void af_check_new(struct af_slot *s, size_t op, size_t align) {
  if (!s->p) return;
  if ((uintptr_t)s->p % (align < 16 ? 16 : align)) af_fail("misaligned block", op, s->p, s->n);
  size_t usable = larder_usable_size(s->p);
  if (usable < s->n) af_fail("usable size below the size asked for", op, s->p, s->n);
  s->id = af_next_id++;
  s->how = af_how;
  s->align = align;
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
  larder_free(s->p);
  s->p = NULL;
  s->n = 0;
}

static size_t af_pow2_up(size_t x) {
  size_t a = 1;
  while (a < x) a <<= 1;
  return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct af_slot slots[AF_SLOTS];
  memset(slots, 0, sizeof slots);
  size_t nops = size / 4;
  for (size_t op = 0; op < nops; op++) {
    const uint8_t *c = data + op * 4;
    struct af_slot *s = &slots[c[1] % AF_SLOTS];
    size_t n = af_size(c);
    static const char *const names[16] = {"malloc", "malloc", "malloc", "calloc", "realloc", "realloc",
                                           "reallocarray", "memalign", "posix_memalign", "aligned_alloc",
                                           "usable_size", "free", "free", "validate", "realloc(p, 0)",
                                           "malloc_shared"};
    af_how = names[c[0] & 15];
    af_current = s;
    switch (c[0] & 15) {
      case 0: case 1: case 2: /* malloc, or an impossible size */
        af_release(s, op);
        if ((c[0] & 0x40) && c[2] == 0xff) {
          size_t huge = SIZE_MAX - (size_t)c[3] * 4096;
          errno = 0;
          void *q = larder_malloc(huge);
          if (q || errno != ENOMEM) af_fail("impossible malloc did not fail with ENOMEM", op, q, huge);
          break;
        }
        s->p = larder_malloc(n);
        s->n = n;
        if (!s->p) af_fail("malloc failed", op, NULL, n);
        af_check_new(s, op, 16);
        break;
      case 3: { /* calloc: count x size, or an overflowing product */
        af_release(s, op);
        size_t count = 1 + (c[3] & 7);
        if ((c[0] & 0x40) && (c[3] & 0x80)) {
          errno = 0;
          void *q = larder_calloc(SIZE_MAX / 2 + 1, 2 + (c[3] & 3));
          if (q || errno != ENOMEM) af_fail("overflowing calloc did not fail with ENOMEM", op, q, 0);
          break;
        }
        size_t each = n / count;
        s->p = larder_calloc(count, each);
        s->n = count * each;
        if (!s->p) af_fail("calloc failed", op, NULL, s->n);
        if (!af_zero(s->p, s->n)) af_fail("calloc block not zero", op, s->p, s->n);
        af_check_new(s, op, 16);
        break;
      }
      case 4: case 5: { /* realloc, from NULL or a live block */
        af_live(s, op, "block damaged before realloc");
        if (n == 0 && s->p) n = 1; /* realloc to 0 is op 14 */
        unsigned char *q = larder_realloc(s->p, n);
        if (!q) af_fail("realloc failed", op, s->p, n);
        if (s->p && !af_intact(q, s->n, s->id, n < s->n ? n : s->n)) af_fail("realloc lost the contents", op, q, n);
        s->p = q;
        s->n = n;
        af_check_new(s, op, 16);
        break;
      }
      case 6: { /* reallocarray, or an overflowing one that must leave the block alone */
        size_t count = 1 + (c[3] & 15);
        af_live(s, op, "block damaged before reallocarray");
        if (c[0] & 0x40) {
          errno = 0;
          void *q = larder_reallocarray(s->p, SIZE_MAX / (count + 1) + 1, count + 1);
          if (q || errno != ENOMEM) af_fail("overflowing reallocarray did not fail with ENOMEM", op, q, 0);
          if (s->p && !af_intact(s->p, s->n, s->id, s->n)) af_fail("failed reallocarray damaged the block", op, s->p, s->n);
          break;
        }
        size_t each = n / count;
        if (count * each == 0 && s->p) each = 1;
        unsigned char *q = larder_reallocarray(s->p, count, each);
        if (!q) af_fail("reallocarray failed", op, s->p, count * each);
        size_t keep = count * each < s->n ? count * each : s->n;
        if (s->p && !af_intact(q, s->n, s->id, keep)) af_fail("reallocarray lost the contents", op, q, count * each);
        s->p = q;
        s->n = count * each;
        af_check_new(s, op, 16);
        break;
      }
      case 7: case 8: case 9: { /* memalign, posix_memalign, aligned_alloc */
        af_release(s, op);
        size_t align;
        int valid_pow2 = 1;
        if (c[3] & 0x80) {
          align = (size_t)(c[3] & 0x3f) + 1; /* 1 .. 64, mostly not powers of two */
          valid_pow2 = (align & (align - 1)) == 0;
        } else {
          align = (size_t)1 << (c[3] % 22); /* 1 B .. 2 MiB */
        }
        if (n > ((size_t)1 << 21)) n >>= 1; /* keep aligned blocks to a few MiB */
        if ((c[0] & 15) == 8) {
          void *out = (void *)&slots; /* must stay untouched on failure */
          int rc = larder_posix_memalign(&out, align, n);
          int ok_align = valid_pow2 && align % sizeof(void *) == 0;
          if (!ok_align) {
            if (rc != EINVAL || out != (void *)&slots) af_fail("posix_memalign accepted a bad alignment", op, out, align);
            break;
          }
          if (rc != 0) af_fail("posix_memalign failed", op, NULL, n);
          s->p = out;
        } else if ((c[0] & 15) == 7) {
          s->p = larder_memalign(align, n);
        } else {
          errno = 0;
          s->p = larder_aligned_alloc(align, n);
          if (!valid_pow2) { /* C17 DR 460, glibc 2.38: NULL and EINVAL */
            if (s->p || errno != EINVAL) af_fail("aligned_alloc accepted an alignment that is not a power of two", op, s->p, align);
            break;
          }
        }
        s->n = n;
        if (!s->p) af_fail("aligned allocation failed", op, NULL, n);
        af_check_new(s, op, af_pow2_up(align));
        break;
      }
      case 10: /* malloc_usable_size */
        if (!s->p) {
          if (larder_usable_size(NULL) != 0) af_fail("usable size of NULL is not 0", op, NULL, 0);
        } else if (larder_usable_size(s->p) < s->n) {
          af_fail("usable size shrank", op, s->p, s->n);
        } else if (!af_intact(s->p, s->n, s->id, s->n)) {
          af_fail("block damaged", op, s->p, s->n);
        }
        break;
      case 11: case 12:
        af_release(s, op);
        break;
      case 13:
        if (c[3] & 1) larder_trim(0);
        if (larder_validate() != 0) af_fail("larder_validate found violations", op, NULL, 0);
        break;
      case 14: /* realloc to 0 frees (glibc's behaviour) */
        if (s->p) {
          af_live(s, op, "block damaged before realloc(p, 0)");
          if (larder_realloc(s->p, 0) != NULL) af_fail("realloc(p, 0) did not return NULL", op, s->p, 0);
          s->p = NULL;
          s->n = 0;
        }
        break;
      case 15: /* cache-line aligned, for objects shared between threads */
        af_release(s, op);
        s->p = larder_malloc_shared(n);
        s->n = n;
        if (!s->p) af_fail("malloc_shared failed", op, NULL, n);
        af_check_new(s, op, 64);
        break;
    }
    if ((op & 63) == 63 && larder_validate() != 0) af_fail("larder_validate found violations", op, NULL, 0);
  }
  for (int i = 0; i < AF_SLOTS; i++) af_release(&slots[i], nops);
  if (larder_validate() != 0) af_fail("larder_validate found violations at the end", nops, NULL, 0);
  return 0;
}
