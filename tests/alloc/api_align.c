/* Every allocation entry point returns memory aligned as promised, writable over the whole
 * requested size and with malloc_usable_size() >= the request, for sizes 0 .. 1 MiB and
 * alignments 16 B .. 64 KiB (DESIGN §1 "Behaviour every caller may rely on": 16-byte minimum
 * alignment, any power of two on request).
 *
 * Blocks of one round stay live together, each filled with its own pattern, so two blocks
 * that overlap, or a usable size that reaches into a neighbour, break a pattern. */
#include <malloc.h>

#include "alloc_util.h"

#define MIN_ALIGN 16
#define MAX_SIZE (1024 * 1024)

static size_t sizes[128];
static size_t nsizes;

/* 0, 1 .. 33, then each power of two up to 1 MiB with its neighbours - the boundaries of
 * size classes and of the small/large split lie among them whatever the class table is. */
static void build_sizes(void) {
  for (size_t s = 0; s <= 33; s++) sizes[nsizes++] = s;
  for (size_t p = 64; p <= MAX_SIZE; p *= 2) {
    sizes[nsizes++] = p - 1;
    sizes[nsizes++] = p;
    if (p < MAX_SIZE) sizes[nsizes++] = p + 1;
  }
}

typedef struct blk_s { void *p; size_t size; size_t usable; } blk_t;

/* Fills every usable byte, as a caller who trusts malloc_usable_size may. */
static void take(blk_t *b, void *p, size_t size, size_t align, const char *fn) {
  b->p = p;
  b->size = size;
  b->usable = 0;
  CHECK_MSG(p != NULL, "%s(align %zu, size %zu) returned NULL", fn, align, size);
  if (!p) return;
  CHECK_MSG(((uintptr_t)p % align) == 0, "%s(align %zu, size %zu) = %p misaligned", fn, align,
            size, p);
  b->usable = malloc_usable_size(p);
  CHECK_MSG(b->usable >= size, "%s(align %zu, size %zu): usable %zu < size", fn, align, size,
            b->usable);
  alloc_fill(p, b->usable);
}

static void check_and_free(blk_t *b, int n, const char *fn) {
  for (int i = 0; i < n; i++) {
    if (!b[i].p) continue;
    size_t bad = alloc_check(b[i].p, b[i].usable);
    CHECK_MSG(bad == (size_t)-1, "%s: block %p size %zu corrupted at offset %zu", fn, b[i].p,
              b[i].size, bad);
    free(b[i].p);
    b[i].p = NULL;
  }
}

int main(void) {
  build_sizes();
  static blk_t blks[128];
  long page = sysconf(_SC_PAGESIZE);

  /* malloc, calloc, realloc(NULL), reallocarray: the 16-byte minimum. */
  for (size_t i = 0; i < nsizes; i++) take(&blks[i], malloc(sizes[i]), sizes[i], MIN_ALIGN, "malloc");
  check_and_free(blks, (int)nsizes, "malloc");
  for (size_t i = 0; i < nsizes; i++) {
    void *p = calloc(1, sizes[i]);
    if (p) {
      const unsigned char *c = p;
      size_t nz = 0;
      for (size_t j = 0; j < sizes[i]; j++) nz += c[j] != 0;
      CHECK_MSG(nz == 0, "calloc(1, %zu): %zu non-zero bytes", sizes[i], nz);
    }
    take(&blks[i], p, sizes[i], MIN_ALIGN, "calloc");
  }
  check_and_free(blks, (int)nsizes, "calloc");
  for (size_t i = 0; i < nsizes; i++) take(&blks[i], realloc(NULL, sizes[i]), sizes[i], MIN_ALIGN, "realloc");
  check_and_free(blks, (int)nsizes, "realloc");
  for (size_t i = 0; i < nsizes; i++)
    take(&blks[i], reallocarray(NULL, 1, sizes[i]), sizes[i], MIN_ALIGN, "reallocarray");
  check_and_free(blks, (int)nsizes, "reallocarray");

  /* The aligned entry points, every power of two 16 B .. 64 KiB (and the smaller ones that
   * posix_memalign and memalign accept) over every size. */
  for (size_t align = sizeof(void *); align <= 64 * 1024; align *= 2) {
    for (size_t i = 0; i < nsizes; i++) {
      void *p = NULL;
      int rc = posix_memalign(&p, align, sizes[i]);
      CHECK_MSG(rc == 0, "posix_memalign(%zu, %zu) = %d", align, sizes[i], rc);
      take(&blks[i], rc == 0 ? p : NULL, sizes[i], align < MIN_ALIGN ? MIN_ALIGN : align,
           "posix_memalign");
    }
    check_and_free(blks, (int)nsizes, "posix_memalign");
    for (size_t i = 0; i < nsizes; i++)
      take(&blks[i], memalign(align, sizes[i]), sizes[i], align < MIN_ALIGN ? MIN_ALIGN : align,
           "memalign");
    check_and_free(blks, (int)nsizes, "memalign");
    /* C11 aligned_alloc; since C17 (DR 460) the size need not be a multiple of the
     * alignment, and glibc accepts any size, so larder must too. */
    for (size_t i = 0; i < nsizes; i++)
      take(&blks[i], aligned_alloc(align, sizes[i]), sizes[i],
           align < MIN_ALIGN ? MIN_ALIGN : align, "aligned_alloc");
    check_and_free(blks, (int)nsizes, "aligned_alloc");
  }

  /* valloc: page aligned; pvalloc: page aligned and rounded up to whole pages. */
  for (size_t i = 0; i < nsizes; i++) take(&blks[i], valloc(sizes[i]), sizes[i], (size_t)page, "valloc");
  check_and_free(blks, (int)nsizes, "valloc");
  for (size_t i = 0; i < nsizes; i++) {
    size_t rounded = (sizes[i] + (size_t)page - 1) & ~((size_t)page - 1);
    take(&blks[i], pvalloc(sizes[i]), rounded, (size_t)page, "pvalloc");
  }
  check_and_free(blks, (int)nsizes, "pvalloc");

  /* The prefixed API promises the same, and larder_malloc_shared whole cache lines. */
#if !defined(LARDER_TEST_PRELOADED) && !defined(LARDER_TEST_GLIBC)
  for (size_t i = 0; i < nsizes; i++) {
    void *p = larder_malloc_shared(sizes[i]);
    take(&blks[i], p, sizes[i], 64, "larder_malloc_shared");
    if (p) CHECK_MSG(larder_usable_size(p) % 64 == 0, "larder_malloc_shared(%zu): usable %zu",
                     sizes[i], larder_usable_size(p));
  }
  check_and_free(blks, (int)nsizes, "larder_malloc_shared");
#endif

  /* Alignments past the superblock size, 4 MiB .. 1 GiB: the block holds its size, not the
   * alignment's slack. Its usable size once ran to the end of a mapping of align + size, so a
   * realloc copied up to `align` bytes (4 GiB copied and resident after aligned_alloc(2^32,
   * 4097); found by the API fuzzer) and the statistics counted the slack in use. glibc keeps
   * the tail in its usable size (it remaps rather than copies), so larder only. */
  if (alloc_is_larder()) {
    alloc_api_t api = alloc_api();
    for (size_t align = (size_t)4 << 20; align <= (size_t)1 << 30; align <<= 2) {
      size_t size = 4097, rounded = (size + (size_t)page - 1) & ~((size_t)page - 1);
      larder_stats_t before, during;
      if (api.stats_get) api.stats_get(&before);
      unsigned char *p = aligned_alloc(align, size);
      CHECK_MSG(p && (uintptr_t)p % align == 0, "aligned_alloc(%zu, %zu) = %p", align, size, (void *)p);
      if (!p) continue;
      size_t usable = malloc_usable_size(p);
      CHECK_MSG(usable >= size && usable <= rounded, "aligned_alloc(%zu, %zu): usable %zu, want at most %zu",
                align, size, usable, rounded);
      if (api.stats_get) {
        api.stats_get(&during);
        /* the purge thread may unmap something meanwhile: a fall counts as nothing kept */
        size_t mapped = during.bytes_mapped > before.bytes_mapped ? during.bytes_mapped - before.bytes_mapped : 0;
        /* the block's pages, the superblock-sized chunk below it that holds its header, and
         * room for the ownership map's leaves, which a new address range may need */
        size_t chunk = api.option_get ? (size_t)api.option_get("superblock_size") : 0;
        size_t slack = (size_t)256 << 10;
        CHECK_MSG(mapped <= chunk + rounded + slack, "aligned_alloc(%zu, %zu) keeps %zu bytes mapped, want at most %zu",
                  align, size, mapped, chunk + rounded + slack);
      }
      memset(p, 0xa5, usable);
      unsigned char *q = realloc(p, usable + 1);
      CHECK_MSG(q != NULL, "realloc of an aligned block to %zu failed", usable + 1);
      if (!q) { free(p); continue; }
      size_t bad = 0;
      for (size_t i = 0; i < usable; i++) bad += q[i] != 0xa5;
      CHECK_MSG(bad == 0, "realloc of aligned_alloc(%zu, %zu): %zu bytes lost", align, size, bad);
      free(q);
      /* A span that small could never serve a large request: the cache does not keep it. */
      if (api.stats_get) {
        larder_stats_t after;
        api.stats_get(&after);
        CHECK_MSG(after.large_bytes_cached <= before.large_bytes_cached,
                  "aligned_alloc(%zu, %zu): its span was cached (%zu -> %zu bytes)", align, size,
                  before.large_bytes_cached, after.large_bytes_cached);
      }
    }
  }

  /* Aligned to the superblock size itself: a medium span (the block starts the chunk after its
   * header's), no mapping of its own, so 64 of them cost no mmap each. */
  if (alloc_is_larder()) {
    alloc_api_t api = alloc_api();
    size_t chunk = api.option_get ? (size_t)api.option_get("superblock_size") : 0;
    if (api.stats_get && chunk) {
      enum { N = 64 };
      static void *held[N];
      larder_stats_t before, after;
      api.stats_get(&before);
      for (int i = 0; i < N; i++) {
        size_t size = (size_t)(i % 8) * 4096 + 1;
        held[i] = aligned_alloc(chunk, size);
        CHECK_MSG(held[i] && (uintptr_t)held[i] % chunk == 0, "aligned_alloc(%zu, %zu) = %p", chunk, size, held[i]);
        if (held[i]) memset(held[i], i, size);
      }
      api.stats_get(&after);
      CHECK_MSG(after.mmap_calls - before.mmap_calls < N / 8, "%d blocks aligned to S made %zu mmap calls", N,
                after.mmap_calls - before.mmap_calls);
      for (int i = 0; i < N; i++) free(held[i]);
    }
  }

  CHECK(malloc_usable_size(NULL) == 0);
  printf("api_align: %zu sizes, alignments %zu..65536, %s\n", nsizes, sizeof(void *),
         alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
