/* malloc_stats() prints glibc's lines first, in glibc's order and spelling, so that programs
 * and test suites that parse them find them:
 *
 *   Arena 0:
 *   system bytes     = <n>
 *   in use bytes     = <n>
 *   Total (incl. mmap):
 *   system bytes     = <n>
 *   in use bytes     = <n>
 *   max mmap regions = <n>
 *   max mmap bytes   = <n>
 *
 * (glibc 2.36's output on this machine; glibc prints one "Arena i:" block per arena, larder's
 * heaps are one arena.) The figures must mean what glibc's do: with a 100-byte block and a
 * 64 MiB block live, in use covers both, the arena's in use covers the small one, system bytes
 * are at least in use, and the 64 MiB block (a mapping of its own in glibc and larder alike)
 * shows in the mmap peaks. Under larder, its own table follows. */
#include <malloc.h>

#include "alloc_util.h"

static const char *next_line(const char **cursor) {
  static char line[256];
  const char *s = *cursor, *e = strchr(s, '\n');
  if (!e) return NULL;
  size_t n = (size_t)(e - s) < sizeof line - 1 ? (size_t)(e - s) : sizeof line - 1;
  memcpy(line, s, n);
  line[n] = 0;
  *cursor = e + 1;
  return line;
}

/* The next line must be `label` followed by a number; returns it (or SIZE_MAX if absent). */
static size_t want_figure(const char **cursor, const char *label) {
  const char *l = next_line(cursor);
  size_t v = SIZE_MAX, len = strlen(label);
  CHECK_MSG(l && strncmp(l, label, len) == 0 && sscanf(l + len, "%zu", &v) == 1, "want \"%s<number>\", got \"%s\"",
            label, l ? l : "(end of output)");
  return v;
}

static void want_line(const char **cursor, const char *text) {
  const char *l = next_line(cursor);
  CHECK_MSG(l && strcmp(l, text) == 0, "want \"%s\", got \"%s\"", text, l ? l : "(end of output)");
}

int main(void) {
  static char out[65536];
  char *volatile small = malloc(100);
  char *volatile big = malloc((size_t)64 << 20);
  REQUIRE(small && big);
  memset(small, 1, 100);
  memset(big, 1, 1 << 20);

  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int saved = dup(2);
  fflush(stderr);
  dup2(fds[1], 2);
  malloc_stats();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fds[1]);
  size_t len = 0;
  ssize_t r;
  while (len < sizeof out - 1 && (r = read(fds[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)r;
  close(fds[0]);
  out[len] = 0;

  const char *cur = out;
  want_line(&cur, "Arena 0:");
  size_t arena_system = want_figure(&cur, "system bytes     = ");
  size_t arena_in_use = want_figure(&cur, "in use bytes     = ");
  /* glibc: one block per arena; this single-threaded program has one */
  want_line(&cur, "Total (incl. mmap):");
  size_t system = want_figure(&cur, "system bytes     = ");
  size_t in_use = want_figure(&cur, "in use bytes     = ");
  size_t regions = want_figure(&cur, "max mmap regions = ");
  size_t mmap_bytes = want_figure(&cur, "max mmap bytes   = ");

  const size_t big_bytes = (size_t)64 << 20;
  CHECK_MSG(arena_in_use >= 100 && arena_in_use < big_bytes, "arena in use %zu: want the small block, not the big one",
            arena_in_use);
  CHECK_MSG(arena_system >= arena_in_use, "arena system %zu < in use %zu", arena_system, arena_in_use);
  CHECK_MSG(in_use >= big_bytes + 100, "total in use %zu < the 64 MiB + 100 B live", in_use);
  CHECK_MSG(system >= in_use, "total system %zu < in use %zu", system, in_use);
  CHECK_MSG(system - arena_system >= big_bytes, "total system %zu - arena %zu: the 64 MiB mapping is missing", system,
            arena_system);
  CHECK_MSG(regions >= 1 && regions < 1000, "max mmap regions %zu", regions);
  CHECK_MSG(mmap_bytes >= big_bytes, "max mmap bytes %zu < 64 MiB", mmap_bytes);
  if (alloc_is_larder()) CHECK_MSG(strstr(cur, "larder statistics") != NULL, "larder's table does not follow: %s", cur);
  if (check_failures) fprintf(stderr, "malloc_stats printed:\n%s", out);

  free(big);
  free(small);
  printf("malloc_stats_shape: arena %zu/%zu, total %zu/%zu, max mmap %zu regions %zu bytes, %s\n", arena_in_use,
         arena_system, in_use, system, regions, mmap_bytes, alloc_is_larder() ? "larder" : "glibc");
  return check_done();
}
