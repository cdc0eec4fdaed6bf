/* A shared library for alloc_dlopen: it allocates from its constructor, hands blocks to its
 * caller, frees blocks its caller allocated, and frees its own on unload. It links against
 * nothing but libc, so its malloc/free resolve to whatever the process uses: larder linked
 * into the executable, larder preloaded, or glibc. */
#include <stdlib.h>
#include <string.h>

static char *lib_keep;
static size_t lib_keep_size;

__attribute__((constructor)) static void lib_init(void) {
  lib_keep_size = 12345;
  lib_keep = malloc(lib_keep_size);
  if (lib_keep) memset(lib_keep, 0x6B, lib_keep_size);
}

__attribute__((destructor)) static void lib_fini(void) {
  free(lib_keep);
  lib_keep = NULL;
}

/* Returns a block the caller frees; its bytes are (i * 31 + n) & 0xff. */
char *lib_make(size_t n) {
  char *p = malloc(n);
  if (!p) return NULL;
  for (size_t i = 0; i < n; i++) p[i] = (char)((i * 31 + n) & 0xff);
  char *q = realloc(p, n + 64);  /* grow it, as a library building a buffer would */
  return q ? q : p;
}

/* Frees a block the caller allocated; returns its first byte, to show it was readable. */
int lib_take(char *p) {
  int c = p ? (unsigned char)p[0] : -1;
  free(p);
  return c;
}

/* 1 when the constructor's block is intact. */
int lib_kept_ok(void) {
  if (!lib_keep) return 0;
  for (size_t i = 0; i < lib_keep_size; i++)
    if ((unsigned char)lib_keep[i] != 0x6B) return 0;
  return 1;
}

char *lib_dup(const char *s) { return strdup(s); }
