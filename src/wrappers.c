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

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#define LD_PUBLIC __attribute__((visibility("default")))

LD_PUBLIC LD_ALIGNED_HOT void *malloc(size_t size) { return larder_malloc(size); }
/* flatten: free is larder_free's fast path itself, not a jump to it (one instruction a free;
 * malloc's is inlined without asking, being shorter). */
LD_PUBLIC LD_ALIGNED_HOT __attribute__((flatten)) void free(void *p) { larder_free(p); }
LD_PUBLIC void *calloc(size_t n, size_t size) { return larder_calloc(n, size); }
LD_PUBLIC void *realloc(void *p, size_t size) { return larder_realloc(p, size); }
LD_PUBLIC void *reallocarray(void *p, size_t n, size_t size) { return larder_reallocarray(p, n, size); }
LD_PUBLIC int posix_memalign(void **out, size_t alignment, size_t size) { return larder_posix_memalign(out, alignment, size); }
LD_PUBLIC void *aligned_alloc(size_t alignment, size_t size) { return larder_aligned_alloc(alignment, size); }
/* C23 (glibc 2.43): a program built against a C library that has them calls these, which under
 * LD_PRELOAD must not reach the C library's free */
LD_PUBLIC void free_sized(void *p, size_t size) { larder_free_sized(p, size); }
LD_PUBLIC void free_aligned_sized(void *p, size_t alignment, size_t size) {
  larder_free_aligned_sized(p, alignment, size);
}
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

/* A class's free blocks (on its superblocks' lists and in the threads' caches): glibc's free
 * chunks, for mallinfo's ordblks and malloc_info's <sizes>. */
static size_t class_free_blocks(const larder_class_stats_t *k) { return (k->bytes_free + k->bytes_cached) / k->block_size; }

/* larder's statistics and its classes' (*n of them), from one walk (ld_stats_gather); returns
 * the free small blocks of all classes. */
static size_t take_stats(larder_stats_t *st, larder_class_stats_t classes[LD_CLASS_COUNT], size_t *n) {
  *n = ld_stats_gather(st, classes, LD_CLASS_COUNT);
  size_t count = 0;
  for (size_t c = 0; c < *n; c++) count += class_free_blocks(&classes[c]);
  return count;
}

static void fill_mallinfo2(struct mallinfo2 *mi) {
  larder_stats_t st;
  larder_class_stats_t classes[LD_CLASS_COUNT];
  size_t n, free_count = take_stats(&st, classes, &n);
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
  mi->ordblks = free_count; /* (fordblks holds more: capacity never carved, free chunks, kept spans) */
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
  mi.hblks = (int)m2.hblks;
  mi.hblkhd = (int)m2.hblkhd;
  mi.uordblks = (int)m2.uordblks;
  mi.fordblks = (int)m2.fordblks;
  mi.ordblks = (int)m2.ordblks;
  mi.usmblks = (int)m2.usmblks;
  return mi;
}

/* glibc's malloc_info: the same XML shape (<malloc version="1">, <heap>, <sizes>, <total>,
 * <system>, <aspace>) with larder's figures from larder_stats_get and larder_class_stats_get.
 * glibc writes one <heap> per arena; larder's heaps together are one, nr 0 (as malloc_stats has
 * them), whose <sizes> list the free small blocks by size class (from the class above the one
 * below, to the block size; total = count x block size), and a <larder> element follows with
 * larder's own counters. "rest" is memory held but not in use, its count the free small blocks
 * (the rest of its size: capacity never carved, free chunks, kept spans); "mmap" is the large
 * spans in use; there are no fast bins. Like glibc: EINVAL unless options is 0. */
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
  larder_class_stats_t classes[LD_CLASS_COUNT];
  size_t n, free_count = take_stats(&st, classes, &n);
  size_t free_bytes = st.bytes_held > st.bytes_in_use ? st.bytes_held - st.bytes_in_use : 0;
  fprintf(fp, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
  for (size_t c = 0; c < n; c++) {
    size_t count = class_free_blocks(&classes[c]);
    if (count)
      fprintf(fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n",
              c ? classes[c - 1].block_size + 1 : 1, classes[c].block_size, count * classes[c].block_size, count);
  }
  fprintf(fp, "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
  fprintf(fp, "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n", free_count, free_bytes);
  fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", st.bytes_held);
  fprintf(fp, "<aspace type=\"total\" size=\"%zu\"/>\n</heap>\n", st.bytes_mapped);
  fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n");
  fprintf(fp, "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n", free_count, free_bytes);
  size_t spans_now, spans_peak, bytes_peak;
  ld_large_peaks(&spans_now, &spans_peak, &bytes_peak);
  fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", spans_now, st.large_bytes_in_use);
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

typedef struct { int unused; } cxx_nothrow_t;

/* A nothrow new that found no memory while a new-handler is installed. The standard's nothrow
 * new calls the throwing one and returns NULL if that throws ([new.delete.single]): the
 * handler may throw std::bad_alloc, which C cannot catch, and which left larder's nothrow new
 * (noexcept) and ended the program (gperftools' tcmalloc_unittest, OperatorsNewOOMs). The C++
 * runtime's own nothrow form does it (libstdc++'s and libc++'s call the global throwing new,
 * this library's, inside a try block). Without one (not found: a static runtime), the handler
 * is not called and the answer is NULL. Looked up at the first such call only. */
typedef void *(*cxx_runtime_nothrow_fn)(size_t, const cxx_nothrow_t *);
typedef void *(*cxx_runtime_nothrow_aligned_fn)(size_t, size_t, const cxx_nothrow_t *);
static LD_NOINLINE void *cxx_new_nothrow_handled(size_t size, size_t alignment) {
  static void *_Atomic runtime_plain, *_Atomic runtime_aligned;
  static _Atomic int looked_up;
  if (!atomic_load_explicit(&looked_up, memory_order_acquire)) {
    atomic_store_explicit(&runtime_plain, dlsym(RTLD_NEXT, "_ZnwmRKSt9nothrow_t"), memory_order_relaxed);
    atomic_store_explicit(&runtime_aligned, dlsym(RTLD_NEXT, "_ZnwmSt11align_val_tRKSt9nothrow_t"), memory_order_relaxed);
    atomic_store_explicit(&looked_up, 1, memory_order_release);
  }
  static const cxx_nothrow_t tag;
  void *plain = atomic_load_explicit(&runtime_plain, memory_order_relaxed);
  void *aligned = atomic_load_explicit(&runtime_aligned, memory_order_relaxed);
  if (!alignment && plain) return ((cxx_runtime_nothrow_fn)plain)(size, &tag);
  if (alignment && aligned) return ((cxx_runtime_nothrow_aligned_fn)aligned)(size, alignment, &tag);
  return NULL;
}

/* operator new's contract: retry through the new-handler, then throw std::bad_alloc (or
 * return NULL for the nothrow forms). */
static void *cxx_new(size_t size, size_t alignment, int nothrow) {
  for (;;) {
    void *p = alignment ? larder_memalign(alignment, size) : larder_malloc(size);
    if (LD_LIKELY(p != NULL)) return p;
    cxx_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler) break;
    if (nothrow) return cxx_new_nothrow_handled(size, alignment);
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

/* The operators' definitions are weak: a program linked with liblarder.a that defines its own
 * (replaceable, [replacement.functions]) keeps them, where strong ones made the link fail
 * ("multiple definition of operator new"). (Under LD_PRELOAD the executable's come first
 * anyway.)
 *
 * Four are the base of the others: new and delete, plain and aligned. The standard gives each
 * other form a default that calls one of them ([new.delete.single], [new.delete.array]): new[]
 * calls new, a sized or nothrow delete calls delete, delete[] calls delete, nothrow new calls new
 * and catches. A program may replace only some, typically new(size_t) and delete(void *), and
 * then relies on the defaults to reach its own: `delete p` of a complete type is a sized delete
 * (C++14 on, GCC's default and clang's since 19), which must end in the program's delete, not
 * in larder's free of a block larder never made (under LD_PRELOAD such a program was stopped
 * at its first delete: "invalid free"; glibc's C++ runtime runs it). So the first call of a
 * derived form looks every operator up (dlsym: the definition every module's call binds to;
 * else, in a static executable, the one the link chose): when all twenty are larder's, the
 * derived forms are served here as before; when any is the program's, each derived form hands
 * its call to the C++ runtime's definition of the same name (dlsym RTLD_NEXT: libstdc++'s or
 * libc++'s default, which catches for the nothrow forms), or, without a runtime, calls the
 * global definition of the operator its default calls (an exception of a nothrow new's
 * replaced new then passes through). Looked up once, at the first call of a derived form, not
 * inside malloc: dlsym may allocate. */
enum {
  CXX_NEW, CXX_DELETE, CXX_NEW_ALIGNED, CXX_DELETE_ALIGNED, /* the base four */
  CXX_NEW_ARRAY, CXX_NEW_NOTHROW, CXX_NEW_ARRAY_NOTHROW,
  CXX_NEW_ARRAY_ALIGNED, CXX_NEW_ALIGNED_NOTHROW, CXX_NEW_ARRAY_ALIGNED_NOTHROW,
  CXX_DELETE_ARRAY, CXX_DELETE_SIZED, CXX_DELETE_ARRAY_SIZED, CXX_DELETE_NOTHROW, CXX_DELETE_ARRAY_NOTHROW,
  CXX_DELETE_ARRAY_ALIGNED, CXX_DELETE_SIZED_ALIGNED, CXX_DELETE_ARRAY_SIZED_ALIGNED,
  CXX_DELETE_ALIGNED_NOTHROW, CXX_DELETE_ARRAY_ALIGNED_NOTHROW,
  CXX_OPERATORS
};

static void *cxx_op_new(size_t n) { return cxx_new(n, 0, 0); }
static void cxx_op_delete(void *p) { larder_free(p); }
static void *cxx_op_new_aligned(size_t n, size_t al) { return cxx_new(n, al, 0); }
static void cxx_op_delete_aligned(void *p, size_t al) { larder_free_aligned_sized(p, al, 0); }

typedef struct {
  const char *name;   /* the Itanium name */
  int calls;          /* the operator its default calls ([new.delete]); itself for the base four */
  void *own;          /* larder's definition */
  void *link_time;    /* the definition the static link chose (a program's replaces the weak one) */
} cxx_operator_t;

typedef struct {
  void *next;         /* the C++ runtime's definition of the same name, or NULL */
  void *calls_global; /* the global definition of the operator its default calls */
} cxx_route_t;

/* (own and checked: LARDER_DEBUG=1 when the operators were looked up; the calls take the path
 * out of line, which checks a delete's stated size and alignment) */
enum { CXX_UNKNOWN, CXX_OWN, CXX_OWN_CHECKED, CXX_FORWARD };
static _Atomic int cxx_state;
static cxx_route_t cxx_routes[CXX_OPERATORS];

static void cxx_lookup(const cxx_operator_t *ops) {
  void *global[CXX_OPERATORS];
  bool replaced = false;
  for (int i = 0; i < CXX_OPERATORS; i++) {
    global[i] = dlsym(RTLD_DEFAULT, ops[i].name);
    if (!global[i]) global[i] = ops[i].link_time; /* a static executable */
    replaced |= global[i] != ops[i].own;
  }
  for (int i = 0; replaced && i < CXX_OPERATORS; i++) { /* (read only when forwarding) */
    cxx_routes[i].next = i == ops[i].calls ? NULL : dlsym(RTLD_NEXT, ops[i].name);
    cxx_routes[i].calls_global = global[ops[i].calls];
  }
  /* (two threads may both look: they find the same) */
  int state = replaced ? CXX_FORWARD : LD_OPTION(debug) ? CXX_OWN_CHECKED : CXX_OWN;
  atomic_store_explicit(&cxx_state, state, memory_order_release);
}

/* How a derived operator serves its call once the operators were looked up: NULL, larder
 * does (no operator is the program's). */
static LD_NOINLINE const cxx_route_t *cxx_route_slow(int op);
/* Whether larder serves every derived form (known after the first call of one). */
static inline bool cxx_own(void) { return atomic_load_explicit(&cxx_state, memory_order_acquire) == CXX_OWN; }

#define LD_CXX LD_PUBLIC __attribute__((weak))

/* the base four */
LD_CXX void *_Znwm(size_t n) __attribute__((alias("cxx_op_new")));
LD_CXX void _ZdlPv(void *p) __attribute__((alias("cxx_op_delete")));
LD_CXX void *_ZnwmSt11align_val_t(size_t n, size_t al) __attribute__((alias("cxx_op_new_aligned")));
LD_CXX void _ZdlPvSt11align_val_t(void *p, size_t al) __attribute__((alias("cxx_op_delete_aligned")));

/* the derived sixteen: larder's own, unless the program replaced an operator */
/* (the forwarding out of line: the own path is a compare and a jump to larder's) */
#define CXX_DERIVED_NEW(name, params, own_call, next_type, next_args, calls_type, calls_args) \
  static LD_NOINLINE void *cxx_forward##name params {                                     \
    const cxx_route_t *r = cxx_route_slow(CXX##name);                                     \
    if (!r) return own_call;                                                              \
    if (r->next) return ((next_type)r->next) next_args;                                   \
    return ((calls_type)r->calls_global) calls_args;                                      \
  }                                                                                       \
  static void *cxx_op##name params {                                                      \
    if (LD_LIKELY(cxx_own())) return own_call;                                            \
    return cxx_forward##name next_args;                                                   \
  }
/* (a delete's own call with what it states: checked with LARDER_DEBUG=1, and always in the
 * hardened build; alloc.c, larder_free_sized) */
#ifdef LARDER_HARDENED
#define CXX_OWN_FREE(p, checked_call) checked_call
#else
#define CXX_OWN_FREE(p, checked_call) larder_free(p)
#endif
#define CXX_DERIVED_DELETE(name, params, checked_call, next_type, next_args, calls_type, calls_args) \
  static LD_NOINLINE void cxx_forward##name params {                                               \
    const cxx_route_t *r = cxx_route_slow(CXX##name);                                              \
    if (!r) checked_call;                                                                          \
    else if (r->next) ((next_type)r->next) next_args;                                              \
    else ((calls_type)r->calls_global) calls_args;                                                 \
  }                                                                                                \
  static void cxx_op##name params {                                                                \
    if (LD_LIKELY(cxx_own())) CXX_OWN_FREE(p, checked_call);                                       \
    else cxx_forward##name next_args;                                                              \
  }

typedef void *(*cxx_new_fn)(size_t);
typedef void *(*cxx_new_nothrow_fn)(size_t, const cxx_nothrow_t *);
typedef void *(*cxx_new_aligned_fn)(size_t, size_t);
typedef void *(*cxx_new_aligned_nothrow_fn)(size_t, size_t, const cxx_nothrow_t *);
typedef void (*cxx_delete_fn)(void *);
typedef void (*cxx_delete_sized_fn)(void *, size_t);
typedef void (*cxx_delete_nothrow_fn)(void *, const cxx_nothrow_t *);
typedef void (*cxx_delete_aligned_fn)(void *, size_t);
typedef void (*cxx_delete_sized_aligned_fn)(void *, size_t, size_t);
typedef void (*cxx_delete_aligned_nothrow_fn)(void *, size_t, const cxx_nothrow_t *);

CXX_DERIVED_NEW(_NEW_ARRAY, (size_t n), cxx_new(n, 0, 0), cxx_new_fn, (n), cxx_new_fn, (n))
CXX_DERIVED_NEW(_NEW_NOTHROW, (size_t n, const cxx_nothrow_t *t), cxx_new(n, 0, 1),
                cxx_new_nothrow_fn, (n, t), cxx_new_fn, (n))
CXX_DERIVED_NEW(_NEW_ARRAY_NOTHROW, (size_t n, const cxx_nothrow_t *t), cxx_new(n, 0, 1),
                cxx_new_nothrow_fn, (n, t), cxx_new_fn, (n))
CXX_DERIVED_NEW(_NEW_ARRAY_ALIGNED, (size_t n, size_t al), cxx_new(n, al, 0),
                cxx_new_aligned_fn, (n, al), cxx_new_aligned_fn, (n, al))
CXX_DERIVED_NEW(_NEW_ALIGNED_NOTHROW, (size_t n, size_t al, const cxx_nothrow_t *t), cxx_new(n, al, 1),
                cxx_new_aligned_nothrow_fn, (n, al, t), cxx_new_aligned_fn, (n, al))
CXX_DERIVED_NEW(_NEW_ARRAY_ALIGNED_NOTHROW, (size_t n, size_t al, const cxx_nothrow_t *t), cxx_new(n, al, 1),
                cxx_new_aligned_nothrow_fn, (n, al, t), cxx_new_aligned_fn, (n, al))
CXX_DERIVED_DELETE(_DELETE_ARRAY, (void *p), larder_free(p), cxx_delete_fn, (p), cxx_delete_fn, (p))
CXX_DERIVED_DELETE(_DELETE_SIZED, (void *p, size_t n), larder_free_sized(p, n), cxx_delete_sized_fn, (p, n), cxx_delete_fn, (p))
CXX_DERIVED_DELETE(_DELETE_ARRAY_SIZED, (void *p, size_t n), larder_free_sized(p, n),
                   cxx_delete_sized_fn, (p, n), cxx_delete_fn, (p))
CXX_DERIVED_DELETE(_DELETE_NOTHROW, (void *p, const cxx_nothrow_t *t), larder_free(p), cxx_delete_nothrow_fn, (p, t),
                   cxx_delete_fn, (p))
CXX_DERIVED_DELETE(_DELETE_ARRAY_NOTHROW, (void *p, const cxx_nothrow_t *t), larder_free(p),
                   cxx_delete_nothrow_fn, (p, t),
                   cxx_delete_fn, (p))
CXX_DERIVED_DELETE(_DELETE_ARRAY_ALIGNED, (void *p, size_t al), larder_free_aligned_sized(p, al, 0),
                   cxx_delete_aligned_fn, (p, al),
                   cxx_delete_aligned_fn, (p, al))
CXX_DERIVED_DELETE(_DELETE_SIZED_ALIGNED, (void *p, size_t n, size_t al), larder_free_aligned_sized(p, al, n),
                   cxx_delete_sized_aligned_fn, (p, n, al),
                   cxx_delete_aligned_fn, (p, al))
CXX_DERIVED_DELETE(_DELETE_ARRAY_SIZED_ALIGNED, (void *p, size_t n, size_t al),
                   larder_free_aligned_sized(p, al, n), cxx_delete_sized_aligned_fn,
                   (p, n, al), cxx_delete_aligned_fn, (p, al))
CXX_DERIVED_DELETE(_DELETE_ALIGNED_NOTHROW, (void *p, size_t al, const cxx_nothrow_t *t),
                   larder_free_aligned_sized(p, al, 0),
                   cxx_delete_aligned_nothrow_fn, (p, al, t), cxx_delete_aligned_fn, (p, al))
CXX_DERIVED_DELETE(_DELETE_ARRAY_ALIGNED_NOTHROW, (void *p, size_t al, const cxx_nothrow_t *t),
                   larder_free_aligned_sized(p, al, 0),
                   cxx_delete_aligned_nothrow_fn, (p, al, t), cxx_delete_aligned_fn, (p, al))

LD_CXX void *_Znam(size_t n) __attribute__((alias("cxx_op_NEW_ARRAY")));
LD_CXX void *_ZnwmRKSt9nothrow_t(size_t n, const cxx_nothrow_t *t) __attribute__((alias("cxx_op_NEW_NOTHROW")));
LD_CXX void *_ZnamRKSt9nothrow_t(size_t n, const cxx_nothrow_t *t) __attribute__((alias("cxx_op_NEW_ARRAY_NOTHROW")));
LD_CXX void *_ZnamSt11align_val_t(size_t n, size_t al) __attribute__((alias("cxx_op_NEW_ARRAY_ALIGNED")));
LD_CXX void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const cxx_nothrow_t *t)
    __attribute__((alias("cxx_op_NEW_ALIGNED_NOTHROW")));
LD_CXX void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const cxx_nothrow_t *t)
    __attribute__((alias("cxx_op_NEW_ARRAY_ALIGNED_NOTHROW")));
LD_CXX void _ZdaPv(void *p) __attribute__((alias("cxx_op_DELETE_ARRAY")));
LD_CXX void _ZdlPvm(void *p, size_t n) __attribute__((alias("cxx_op_DELETE_SIZED")));
LD_CXX void _ZdaPvm(void *p, size_t n) __attribute__((alias("cxx_op_DELETE_ARRAY_SIZED")));
LD_CXX void _ZdlPvRKSt9nothrow_t(void *p, const cxx_nothrow_t *t) __attribute__((alias("cxx_op_DELETE_NOTHROW")));
LD_CXX void _ZdaPvRKSt9nothrow_t(void *p, const cxx_nothrow_t *t) __attribute__((alias("cxx_op_DELETE_ARRAY_NOTHROW")));
LD_CXX void _ZdaPvSt11align_val_t(void *p, size_t al) __attribute__((alias("cxx_op_DELETE_ARRAY_ALIGNED")));
LD_CXX void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) __attribute__((alias("cxx_op_DELETE_SIZED_ALIGNED")));
LD_CXX void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al)
    __attribute__((alias("cxx_op_DELETE_ARRAY_SIZED_ALIGNED")));
LD_CXX void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const cxx_nothrow_t *t)
    __attribute__((alias("cxx_op_DELETE_ALIGNED_NOTHROW")));
LD_CXX void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const cxx_nothrow_t *t)
    __attribute__((alias("cxx_op_DELETE_ARRAY_ALIGNED_NOTHROW")));

static LD_NOINLINE const cxx_route_t *cxx_route_slow(int op) {
  if (atomic_load_explicit(&cxx_state, memory_order_acquire) == CXX_UNKNOWN) {
#define CXX_ROW(id, name, calls, own) [id] = {#name, calls, (void *)own, (void *)name}
    static const cxx_operator_t ops[CXX_OPERATORS] = {
        CXX_ROW(CXX_NEW, _Znwm, CXX_NEW, cxx_op_new),
        CXX_ROW(CXX_DELETE, _ZdlPv, CXX_DELETE, cxx_op_delete),
        CXX_ROW(CXX_NEW_ALIGNED, _ZnwmSt11align_val_t, CXX_NEW_ALIGNED, cxx_op_new_aligned),
        CXX_ROW(CXX_DELETE_ALIGNED, _ZdlPvSt11align_val_t, CXX_DELETE_ALIGNED, cxx_op_delete_aligned),
        CXX_ROW(CXX_NEW_ARRAY, _Znam, CXX_NEW, cxx_op_NEW_ARRAY),
        CXX_ROW(CXX_NEW_NOTHROW, _ZnwmRKSt9nothrow_t, CXX_NEW, cxx_op_NEW_NOTHROW),
        CXX_ROW(CXX_NEW_ARRAY_NOTHROW, _ZnamRKSt9nothrow_t, CXX_NEW_ARRAY, cxx_op_NEW_ARRAY_NOTHROW),
        CXX_ROW(CXX_NEW_ARRAY_ALIGNED, _ZnamSt11align_val_t, CXX_NEW_ALIGNED, cxx_op_NEW_ARRAY_ALIGNED),
        CXX_ROW(CXX_NEW_ALIGNED_NOTHROW, _ZnwmSt11align_val_tRKSt9nothrow_t, CXX_NEW_ALIGNED, cxx_op_NEW_ALIGNED_NOTHROW),
        CXX_ROW(CXX_NEW_ARRAY_ALIGNED_NOTHROW, _ZnamSt11align_val_tRKSt9nothrow_t, CXX_NEW_ARRAY_ALIGNED,
                cxx_op_NEW_ARRAY_ALIGNED_NOTHROW),
        CXX_ROW(CXX_DELETE_ARRAY, _ZdaPv, CXX_DELETE, cxx_op_DELETE_ARRAY),
        CXX_ROW(CXX_DELETE_SIZED, _ZdlPvm, CXX_DELETE, cxx_op_DELETE_SIZED),
        CXX_ROW(CXX_DELETE_ARRAY_SIZED, _ZdaPvm, CXX_DELETE_ARRAY, cxx_op_DELETE_ARRAY_SIZED),
        CXX_ROW(CXX_DELETE_NOTHROW, _ZdlPvRKSt9nothrow_t, CXX_DELETE, cxx_op_DELETE_NOTHROW),
        CXX_ROW(CXX_DELETE_ARRAY_NOTHROW, _ZdaPvRKSt9nothrow_t, CXX_DELETE_ARRAY, cxx_op_DELETE_ARRAY_NOTHROW),
        CXX_ROW(CXX_DELETE_ARRAY_ALIGNED, _ZdaPvSt11align_val_t, CXX_DELETE_ALIGNED, cxx_op_DELETE_ARRAY_ALIGNED),
        CXX_ROW(CXX_DELETE_SIZED_ALIGNED, _ZdlPvmSt11align_val_t, CXX_DELETE_ALIGNED, cxx_op_DELETE_SIZED_ALIGNED),
        CXX_ROW(CXX_DELETE_ARRAY_SIZED_ALIGNED, _ZdaPvmSt11align_val_t, CXX_DELETE_ARRAY_ALIGNED,
                cxx_op_DELETE_ARRAY_SIZED_ALIGNED),
        CXX_ROW(CXX_DELETE_ALIGNED_NOTHROW, _ZdlPvSt11align_val_tRKSt9nothrow_t, CXX_DELETE_ALIGNED,
                cxx_op_DELETE_ALIGNED_NOTHROW),
        CXX_ROW(CXX_DELETE_ARRAY_ALIGNED_NOTHROW, _ZdaPvSt11align_val_tRKSt9nothrow_t, CXX_DELETE_ARRAY_ALIGNED,
                cxx_op_DELETE_ARRAY_ALIGNED_NOTHROW),
    };
#undef CXX_ROW
    cxx_lookup(ops);
  }
  return atomic_load_explicit(&cxx_state, memory_order_acquire) != CXX_FORWARD ? NULL : &cxx_routes[op];
}
