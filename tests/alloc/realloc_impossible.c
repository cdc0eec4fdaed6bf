/* realloc to a size no machine can serve: NULL, errno ENOMEM, and the old block exactly as it
 * was (C17 7.22.3.5: "If memory for the new object cannot be allocated, the old object is not
 * deallocated and its value is unchanged"), from a block of every kind larder makes:
 *   - every small size class (found by walking sizes by malloc_usable_size, so the test does
 *     not need the class table), from malloc and from memalign;
 *   - medium spans (runs of chunks in a segment: the smallest, ~20 KB, 1 MiB, the largest);
 *   - large spans (a mapping each: just above the medium limit, 4 MiB, 64 MiB), freshly mapped
 *     and reused from the large-span cache;
 *   - large spans aligned to the superblock size S or more (their header sits below the user
 *     pointer), and page-aligned ones.
 * The target sizes are SIZE_MAX and its neighbours, PTRDIFF_MAX and PTRDIFF_MAX + 1 (glibc's
 * limit: no object above PTRDIFF_MAX), 2^62 and 2^63 - S, and overflowing reallocarray
 * products. Issue 16: a medium span realloc'ed to SIZE_MAX - 100 came back as the same pointer
 * with errno 0 and 64 KiB usable, an offset plus the size having wrapped in the in-place resize.
 * After the failures, each block is still usable: it grows by a realloc that succeeds, with its
 * contents kept, and is freed. */
#include <malloc.h>

#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

#include "alloc_util.h"

#define MAX_BLOCKS 1200 /* glibc, for comparison, has a class per 16 bytes */

typedef struct blk_s {
  void *p;
  size_t size, usable;
  char how[48];
} blk_t;

static blk_t blocks[MAX_BLOCKS];
static int nblocks;

static void add(void *p, size_t size, const char *fmt, size_t arg) {
  REQUIRE(nblocks < MAX_BLOCKS);
  CHECK_MSG(p != NULL, "could not allocate the block to test (%zu bytes)", size);
  if (!p) return;
  blk_t *b = &blocks[nblocks++];
  b->p = p;
  b->size = size;
  b->usable = malloc_usable_size(p);
  snprintf(b->how, sizeof b->how, fmt, arg);
  alloc_fill(p, size);
}

int main(void) {
  alloc_api_t api = alloc_api();
  size_t S = api.option_get ? (size_t)api.option_get("superblock_size") : 65536;

  /* Every small class: the next class starts one byte past the last one's usable size. */
  int classes = 0;
  for (size_t size = 1; size <= 16384 && size <= S / 4;) {
    void *p = malloc(size);
    REQUIRE(p != NULL);
    size_t usable = malloc_usable_size(p);
    add(p, size, "malloc(%zu)", size);
    classes++;
    size = usable + 1;
  }
  /* Small blocks made by the aligned path (a class whose blocks are multiples of the alignment). */
  add(memalign(64, 100), 100, "memalign(64, %d)", 100);
  add(memalign(4096, 3000), 3000, "memalign(4096, %d)", 3000);
  /* Medium spans: just above the small limit, around 20 KB, 1 MiB, and the largest. */
  const size_t medium[] = {S / 4 + 1, 20000, (size_t)1 << 20, ((size_t)2 << 20) - 4096};
  for (size_t i = 0; i < sizeof medium / sizeof medium[0]; i++) add(malloc(medium[i]), medium[i], "malloc(%zu)", medium[i]);
  /* Large spans: fresh, then one from the large-span cache (freed, then asked for again). */
  const size_t large[] = {((size_t)2 << 20) + 1, (size_t)4 << 20, (size_t)64 << 20};
  for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) add(malloc(large[i]), large[i], "malloc(%zu)", large[i]);
  alloc_call((size_t)8 << 20);
  add(malloc((size_t)7 << 20), (size_t)7 << 20, "malloc(%zu) from the cache", (size_t)7 << 20);
  /* Aligned large spans: to S and 4 S (header below the user pointer), and to a page. */
  add(memalign(S, 1000), 1000, "memalign(S, %d)", 1000);
  add(memalign(4 * S, (size_t)3 << 20), (size_t)3 << 20, "memalign(4S, %zu)", (size_t)3 << 20);
  add(memalign(4096, (size_t)5 << 20), (size_t)5 << 20, "memalign(4096, %zu)", (size_t)5 << 20);

  const size_t impossible[] = {SIZE_MAX,
                               SIZE_MAX - 1,
                               SIZE_MAX - 15,
                               SIZE_MAX - 100,
                               SIZE_MAX - 4095,
                               SIZE_MAX - S,
                               SIZE_MAX - ((size_t)2 << 20),
                               (size_t)PTRDIFF_MAX + 1,
                               (size_t)PTRDIFF_MAX,
                               (size_t)PTRDIFF_MAX - 100,
                               (size_t)PTRDIFF_MAX - S,
                               ((size_t)1 << 63) - ((size_t)2 << 20),
                               (size_t)1 << 62};
  const size_t nimp = sizeof impossible / sizeof impossible[0];
  int calls = 0;
  for (int i = 0; i < nblocks; i++) {
    blk_t *b = &blocks[i];
    for (size_t k = 0; k < nimp + 2; k++) {
      size_t want = k < nimp ? impossible[k] : 0;
      errno = 0;
      void *q;
      if (k < nimp) q = realloc(b->p, want);
      else if (k == nimp) q = reallocarray(b->p, SIZE_MAX / 2, 3);          /* wraps to a small size */
      else q = reallocarray(b->p, 2, ((size_t)PTRDIFF_MAX / 2) + 1);       /* PTRDIFF_MAX + 1 */
      int e = errno;
      calls++;
      const char *what = k < nimp ? "realloc" : "reallocarray";
      CHECK_MSG(q == NULL, "%s of %s to %zu returned %p (usable %zu), errno %d: want NULL", what, b->how, want, q,
                q ? malloc_usable_size(q) : 0, e);
      CHECK_MSG(e == ENOMEM, "%s of %s to %zu: errno %d, want ENOMEM", what, b->how, want, e);
      if (q) { /* the block moved or shrank under the caller: follow it so the rest stays valid */
        b->p = q;
        b->usable = malloc_usable_size(q);
        if (b->size > b->usable) b->size = b->usable;
        alloc_fill(b->p, b->size);
        continue;
      }
      size_t usable = malloc_usable_size(b->p);
      CHECK_MSG(usable == b->usable, "failed %s of %s to %zu: usable size %zu -> %zu", what, b->how, want, b->usable,
                usable);
      size_t bad = alloc_check(b->p, b->size);
      CHECK_MSG(bad == (size_t)-1, "failed %s of %s to %zu: contents changed at offset %zu", what, b->how, want, bad);
    }
    /* Still a live block: it grows, keeping its contents, and frees. */
    size_t grow = b->size + b->size / 2 + 1;
    void *q = realloc(b->p, grow);
    CHECK_MSG(q != NULL, "%s: realloc to %zu after the failures returned NULL", b->how, grow);
    if (q) {
      size_t bad = alloc_check_as(q, b->p, b->size, b->size);
      CHECK_MSG(bad == (size_t)-1, "%s: contents lost growing to %zu after the failures (offset %zu)", b->how, grow, bad);
      free(q);
    } else {
      free(b->p);
    }
  }
  if (api.validate) CHECK_MSG(api.validate() == 0, "larder_validate() found violations");
  printf("realloc_impossible: %d blocks (%d small classes, S = %zu), %d failing calls, %s\n", nblocks, classes, S,
         calls, alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
