/* The standard entry points: the C library's allocation functions and the C++ operators.
 * Each only forwards to the larder_ core (alloc.c). This is the one file that defines names
 * the program and libc resolve to, so linking the prefixed API alone overrides nothing.
 *
 * The C++ operators are defined here in C under their Itanium ABI names, so liblarder needs
 * no C++ runtime; the throwing forms reach the program's runtime through weak references. */
#define _GNU_SOURCE
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#define LD_PUBLIC __attribute__((visibility("default")))

LD_PUBLIC void *malloc(size_t size) { return larder_malloc(size); }
/* flatten: free is larder_free's fast path itself, not a jump to it (one instruction a free;
 * malloc's is inlined without asking, being shorter). */
LD_PUBLIC __attribute__((flatten)) void free(void *p) { larder_free(p); }
LD_PUBLIC void *calloc(size_t n, size_t size) { return larder_calloc(n, size); }
LD_PUBLIC void *realloc(void *p, size_t size) { return larder_realloc(p, size); }
LD_PUBLIC void *reallocarray(void *p, size_t n, size_t size) { return larder_reallocarray(p, n, size); }
LD_PUBLIC int posix_memalign(void **out, size_t alignment, size_t size) { return larder_posix_memalign(out, alignment, size); }
LD_PUBLIC void *aligned_alloc(size_t alignment, size_t size) { return larder_aligned_alloc(alignment, size); }
LD_PUBLIC void *memalign(size_t alignment, size_t size) { return larder_memalign(alignment, size); }
LD_PUBLIC void *valloc(size_t size) { return larder_memalign(ld_os_page_size(), size); }
LD_PUBLIC void *pvalloc(size_t size) {
  size_t page = ld_os_page_size();
  if (!ld_request_ok(size, 0)) { /* before the rounding up, which could wrap */
    errno = ENOMEM;
    return NULL;
  }
  return larder_memalign(page, size ? (size + page - 1) & ~(page - 1) : page);
}
LD_PUBLIC size_t malloc_usable_size(void *p) { return larder_usable_size(p); }
LD_PUBLIC int malloc_trim(size_t pad) { return larder_trim(pad); }
LD_PUBLIC void malloc_stats(void) { ld_stats_print_glibc_shape(2); }
/* glibc's tuning knobs do not apply to larder; accepting them keeps programs that set them working. */
LD_PUBLIC int mallopt(int param, int value) {
  (void)param;
  (void)value;
  return 1;
}

static void fill_mallinfo2(struct mallinfo2 *mi) {
  larder_stats_t st;
  larder_stats_get(&st);
  /* glibc's meanings: uordblks in use outside separate mappings, hblks/hblkhd the separately
   * mapped blocks in use (larder's large spans), fordblks held but free. */
  *mi = (struct mallinfo2){0};
  size_t spans_now, spans_peak, bytes_peak;
  ld_large_peaks(&spans_now, &spans_peak, &bytes_peak);
  mi->arena = st.bytes_held - st.large_bytes_in_use - st.large_bytes_cached;
  mi->hblks = spans_now;
  mi->hblkhd = st.large_bytes_in_use;
  mi->uordblks = st.bytes_in_use - st.large_bytes_in_use;
  mi->fordblks = st.bytes_held - st.bytes_in_use;
  mi->usmblks = st.bytes_mapped;
}
LD_PUBLIC struct mallinfo2 mallinfo2(void) {
  struct mallinfo2 mi;
  fill_mallinfo2(&mi);
  return mi;
}
LD_PUBLIC struct mallinfo mallinfo(void) {
  struct mallinfo2 m2;
  fill_mallinfo2(&m2);
  struct mallinfo mi = {0};
  mi.arena = (int)m2.arena;
  mi.hblkhd = (int)m2.hblkhd;
  mi.uordblks = (int)m2.uordblks;
  mi.fordblks = (int)m2.fordblks;
  mi.usmblks = (int)m2.usmblks;
  return mi;
}

/* glibc's malloc_info: the same XML shape (<malloc version="1">, <total>, <system>, <aspace>)
 * with larder's figures from larder_stats_get. glibc writes one <heap> per arena; larder's
 * per-thread heaps are not listed one by one, so there is no <heap> element, only the totals,
 * and a <larder> element with larder's own counters. "rest" is memory held but not in use
 * (larder does not count free blocks, so that total has a size and no count); "mmap" is the
 * large spans in use; there are no fast bins. Like glibc: EINVAL unless options is 0. */
LD_PUBLIC int malloc_info(int options, FILE *fp) {
  if (options != 0) {
    errno = EINVAL;
    return EINVAL;
  }
  if (!fp) {
    errno = EINVAL;
    return EINVAL;
  }
  larder_stats_t st;
  larder_stats_get(&st);
  size_t free_bytes = st.bytes_held > st.bytes_in_use ? st.bytes_held - st.bytes_in_use : 0;
  fprintf(fp, "<malloc version=\"1\">\n");
  fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
  fprintf(fp, "<total type=\"rest\" size=\"%zu\"/>\n", free_bytes);
  fprintf(fp, "<total type=\"mmap\" size=\"%zu\"/>\n", st.large_bytes_in_use);
  fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", st.bytes_held);
  fprintf(fp, "<aspace type=\"total\" size=\"%zu\"/>\n", st.bytes_mapped);
  fprintf(fp, "<larder version=\"%s\" in_use=\"%zu\" held=\"%zu\" mapped=\"%zu\" mallocs=\"%zu\" "
              "frees=\"%zu\" remote_frees=\"%zu\" reallocs=\"%zu\" large_allocs=\"%zu\" "
              "large_cached=\"%zu\" medium_in_use=\"%zu\" segments=\"%zu\" free_dirty=\"%zu\" "
              "purged=\"%zu\" mmap_calls=\"%zu\" munmap_calls=\"%zu\" madvise_calls=\"%zu\"/>\n",
          larder_version(), st.bytes_in_use, st.bytes_held, st.bytes_mapped, st.mallocs, st.frees,
          st.remote_frees, st.reallocs, st.large_allocs, st.large_bytes_cached, st.medium_bytes_in_use,
          st.segments, st.bytes_free_dirty, st.bytes_purged, st.mmap_calls, st.munmap_calls,
          st.madvise_calls);
  fprintf(fp, "</malloc>\n");
  return 0;
}

/* glibc's own names, which some programs and debuggers call directly. */
LD_PUBLIC void *__libc_malloc(size_t size) { return larder_malloc(size); }
LD_PUBLIC void __libc_free(void *p) { larder_free(p); }
LD_PUBLIC void *__libc_calloc(size_t n, size_t size) { return larder_calloc(n, size); }
LD_PUBLIC void *__libc_realloc(void *p, size_t size) { return larder_realloc(p, size); }
LD_PUBLIC void *__libc_memalign(size_t alignment, size_t size) { return larder_memalign(alignment, size); }
LD_PUBLIC void *__libc_valloc(size_t size) { return valloc(size); }
LD_PUBLIC void *__libc_pvalloc(size_t size) { return pvalloc(size); }

/* ---- C++ ---- */
typedef void (*cxx_new_handler_t)(void);
extern cxx_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void *__cxa_allocate_exception(size_t) __attribute__((weak));
extern void __cxa_throw(void *, void *, void (*)(void *)) __attribute__((weak, noreturn));
extern char _ZTISt9bad_alloc[] __attribute__((weak)); /* typeinfo for std::bad_alloc */
extern char _ZTVSt9bad_alloc[] __attribute__((weak)); /* its vtable */
extern void _ZNSt9bad_allocD1Ev(void *) __attribute__((weak));

/* operator new's contract: retry through the new-handler, then throw std::bad_alloc (or
 * return NULL for the nothrow forms). */
static void *cxx_new(size_t size, size_t alignment, int nothrow) {
  for (;;) {
    void *p = alignment ? larder_memalign(alignment, size) : larder_malloc(size);
    if (LD_LIKELY(p != NULL)) return p;
    cxx_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) break;
    handler();
  }
  if (nothrow) return NULL;
  if (__cxa_allocate_exception && __cxa_throw && _ZTISt9bad_alloc && _ZTVSt9bad_alloc) {
    void **exception = __cxa_allocate_exception(sizeof(void *));
    *exception = _ZTVSt9bad_alloc + 2 * sizeof(void *); /* vptr: past offset-to-top and typeinfo */
    __cxa_throw(exception, _ZTISt9bad_alloc, _ZNSt9bad_allocD1Ev);
  }
  ld_message("larder: operator new(%zu) is out of memory and no C++ runtime is loaded to throw\n", size);
  abort();
}

typedef struct { int unused; } cxx_nothrow_t;

LD_PUBLIC void *_Znwm(size_t n) { return cxx_new(n, 0, 0); }
LD_PUBLIC void *_Znam(size_t n) { return cxx_new(n, 0, 0); }
LD_PUBLIC void *_ZnwmRKSt9nothrow_t(size_t n, const cxx_nothrow_t *t) { (void)t; return cxx_new(n, 0, 1); }
LD_PUBLIC void *_ZnamRKSt9nothrow_t(size_t n, const cxx_nothrow_t *t) { (void)t; return cxx_new(n, 0, 1); }
LD_PUBLIC void *_ZnwmSt11align_val_t(size_t n, size_t al) { return cxx_new(n, al, 0); }
LD_PUBLIC void *_ZnamSt11align_val_t(size_t n, size_t al) { return cxx_new(n, al, 0); }
LD_PUBLIC void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const cxx_nothrow_t *t) { (void)t; return cxx_new(n, al, 1); }
LD_PUBLIC void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const cxx_nothrow_t *t) { (void)t; return cxx_new(n, al, 1); }

LD_PUBLIC void _ZdlPv(void *p) { larder_free(p); }
LD_PUBLIC void _ZdaPv(void *p) { larder_free(p); }
LD_PUBLIC void _ZdlPvm(void *p, size_t n) { (void)n; larder_free(p); }
LD_PUBLIC void _ZdaPvm(void *p, size_t n) { (void)n; larder_free(p); }
LD_PUBLIC void _ZdlPvRKSt9nothrow_t(void *p, const cxx_nothrow_t *t) { (void)t; larder_free(p); }
LD_PUBLIC void _ZdaPvRKSt9nothrow_t(void *p, const cxx_nothrow_t *t) { (void)t; larder_free(p); }
LD_PUBLIC void _ZdlPvSt11align_val_t(void *p, size_t al) { (void)al; larder_free(p); }
LD_PUBLIC void _ZdaPvSt11align_val_t(void *p, size_t al) { (void)al; larder_free(p); }
LD_PUBLIC void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) { (void)n; (void)al; larder_free(p); }
LD_PUBLIC void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) { (void)n; (void)al; larder_free(p); }
LD_PUBLIC void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const cxx_nothrow_t *t) { (void)al; (void)t; larder_free(p); }
LD_PUBLIC void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const cxx_nothrow_t *t) { (void)al; (void)t; larder_free(p); }
