/* dlopen of a library that allocates (DESIGN §1: works "under dlopen"): blocks cross the
 * boundary in both directions (the library's malloc freed by the program, the program's
 * malloc freed by the library), the library allocates in its constructor and frees in its
 * destructor, and the cycle of dlopen/dlclose repeats. With one allocator in the process all
 * of this is fine; a library that ended up with a different malloc than the program would
 * crash or corrupt on the first crossing free.
 *
 * usage: alloc_dlopen path/to/liballoc_dlopen_lib.so */
#include "alloc_util.h"

typedef char *(*make_fn)(size_t);
typedef int (*take_fn)(char *);
typedef int (*ok_fn)(void);
typedef char *(*dup_fn)(const char *);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/liballoc_dlopen_lib.so\n", argv[0]);
    return 2;
  }
  for (int round = 0; round < 20; round++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
      return 2;
    }
    make_fn make;
    take_fn take;
    ok_fn kept;
    dup_fn dup;
    *(void **)&make = dlsym(h, "lib_make");
    *(void **)&take = dlsym(h, "lib_take");
    *(void **)&kept = dlsym(h, "lib_kept_ok");
    *(void **)&dup = dlsym(h, "lib_dup");
    REQUIRE(make && take && kept && dup);
    CHECK(kept() == 1);
    const size_t sizes[] = {1, 40, 1000, 70000, 3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      size_t n = sizes[i];
      char *p = make(n);
      REQUIRE(p != NULL);
      size_t bad = 0;
      for (size_t j = 0; j < n; j++) bad += (unsigned char)p[j] != ((j * 31 + n) & 0xff);
      CHECK_MSG(bad == 0, "round %d: block of %zu from the library has %zu wrong bytes", round, n, bad);
      p = realloc(p, 2 * n + 100);  /* the program grows the library's block */
      REQUIRE(p != NULL);
      free(p);
      char *q = malloc(n + 1);  /* and the library frees the program's */
      REQUIRE(q != NULL);
      q[0] = 0x42;
      CHECK(take(q) == 0x42);
    }
    char *s = dup("larder dlopen");
    CHECK(s && strcmp(s, "larder dlopen") == 0);
    free(s);
    CHECK(kept() == 1);
    CHECK(dlclose(h) == 0);
  }
  alloc_api_t api = alloc_api();
  if (api.validate) {
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
  }
  printf("dlopen: 20 dlopen/dlclose rounds with blocks crossing both ways, %s\n",
         alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
