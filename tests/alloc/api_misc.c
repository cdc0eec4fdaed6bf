/* The rest of the glibc interface a drop-in replacement must answer (DESIGN §1):
 * free(NULL), malloc(0) unique pointers, malloc_usable_size on every kind of block,
 * mallinfo2 tracking what is in use, malloc_stats printing something, mallopt accepting the
 * standard parameters, malloc_trim returning 0 or 1. */
#include <malloc.h>

#include "alloc_util.h"

static size_t mi_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  /* uordblks: bytes in use in the heap proper; hblkhd: bytes in separately mapped blocks. */
  return mi.uordblks + mi.hblkhd;
}

int main(void) {
  free(NULL);

  /* malloc(0): distinct, freeable, usable size may be 0 or more. */
  {
    void *z[64];
    for (int i = 0; i < 64; i++) {
      z[i] = malloc(0);
      CHECK(z[i] != NULL);
      for (int j = 0; j < i; j++) CHECK_MSG(z[i] != z[j], "malloc(0) returned %p twice", z[i]);
    }
    for (int i = 0; i < 64; i++) free(z[i]);
  }

  /* mallinfo2: allocating 8 MiB in 4 KiB blocks raises in-use by at least that, freeing it
   * lowers it again by most of it. */
  {
    enum { N = 2048, SZ = 4096 };
    static void *b[N];
    size_t before = mi_in_use();
    for (int i = 0; i < N; i++) {
      b[i] = malloc(SZ);
      REQUIRE(b[i] != NULL);
      memset(b[i], 7, SZ);
    }
    size_t mid = mi_in_use();
    for (int i = 0; i < N; i++) free(b[i]);
    size_t after = mi_in_use();
    CHECK_MSG(mid >= before + (size_t)N * SZ, "mallinfo2 in-use %zu -> %zu after %d KiB", before,
              mid, N * SZ / 1024);
    CHECK_MSG(after + (size_t)N * SZ * 3 / 4 <= mid, "mallinfo2 in-use %zu -> %zu after free",
              mid, after);
    /* the same through a big block */
    before = mi_in_use();
    void *big = malloc(32 << 20);
    REQUIRE(big != NULL);
    mid = mi_in_use();
    /* the old mallinfo reports the same separately mapped blocks (it dropped hblks before) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
    struct mallinfo2 now = mallinfo2();
    CHECK_MSG(now.hblks >= 1 && (size_t)old.hblks == now.hblks && (size_t)old.hblkhd == now.hblkhd,
              "mallinfo hblks %d hblkhd %d, mallinfo2 %zu %zu, with a 32 MiB block held", old.hblks, old.hblkhd,
              now.hblks, now.hblkhd);
    free(big);
    after = mi_in_use();
    CHECK_MSG(mid >= before + (32 << 20), "mallinfo2 in-use %zu -> %zu after 32 MiB", before, mid);
    CHECK_MSG(after + (32 << 20) <= mid, "mallinfo2 in-use %zu -> %zu after freeing 32 MiB", mid,
              after);
  }

  /* malloc_stats writes a report on stderr. */
  {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int saved = dup(2);
    fflush(stderr);
    dup2(fds[1], 2);
    void *keep = malloc(1000);
    malloc_stats();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char buf[256];
    ssize_t n = read(fds[0], buf, sizeof buf);
    close(fds[0]);
    CHECK_MSG(n > 0, "malloc_stats() printed nothing on stderr");
    free(keep);
  }

  /* mallopt: the standard parameters are accepted (1) or declined (0), never a crash; the
   * allocator keeps working after each. */
  {
    const int params[][2] = {{M_TRIM_THRESHOLD, 128 * 1024}, {M_TOP_PAD, 0},
                             {M_MMAP_THRESHOLD, 256 * 1024}, {M_MMAP_MAX, 65536},
                             {M_ARENA_MAX, 8},              {M_ARENA_TEST, 8},
                             {M_PERTURB, 0},                {M_MXFAST, 64}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
      int rc = mallopt(params[i][0], params[i][1]);
      CHECK_MSG(rc == 0 || rc == 1, "mallopt(%d, %d) = %d", params[i][0], params[i][1], rc);
      void *p = malloc(300000);
      CHECK(p != NULL);
      if (p) memset(p, 3, 300000);
      free(p);
    }
  }

  /* malloc_trim returns 0 or 1 and leaves live blocks intact. */
  {
    void *live = malloc(5000);
    REQUIRE(live != NULL);
    alloc_fill(live, 5000);
    void *tmp[256];
    for (int i = 0; i < 256; i++) tmp[i] = malloc(1000);
    for (int i = 0; i < 256; i++) free(tmp[i]);
    int rc = malloc_trim(0);
    CHECK_MSG(rc == 0 || rc == 1, "malloc_trim(0) = %d", rc);
    rc = malloc_trim(1 << 20);
    CHECK_MSG(rc == 0 || rc == 1, "malloc_trim(1 MiB) = %d", rc);
    CHECK(alloc_check(live, 5000) == (size_t)-1);
    free(live);
  }

  printf("api_misc: %s\n", alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
