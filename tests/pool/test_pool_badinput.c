/* Bad input gets a defined result: create/add_area/memalign/malloc return NULL or -1 with
 * errno; free/realloc of a pointer outside the pool, a misaligned one, or one already
 * freed stops the program with a message naming the address. Those run in child
 * processes: the child must die of SIGABRT and its stderr must name the pointer. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "larder_pool.h"
#include "pool/pool_test_util.h"

static char *mem;
static larder_pool_t *pool;

/* Runs fn in a child; returns 1 when it aborted with a message containing the address. */
static int aborts_naming(void (*fn)(void *), void *arg, const void *addr, const char *what) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    fn(arg);
    _exit(0); /* not reached when the pool catches the error */
  }
  close(fds[1]);
  char buf[1024];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof(buf) - 1 && (r = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0) n += (size_t)r;
  buf[n] = 0;
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  char want[64];
  snprintf(want, sizeof(want), "%#lx", (unsigned long)(uintptr_t)addr);
  int ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, want) != NULL;
  if (!ok)
    fprintf(stderr, "%s: child status %#x, stderr \"%s\" (wanted SIGABRT and %s)\n", what, status, buf, want);
  else
    printf("%s: aborted with: %s", what, buf);
  return ok;
}

static void do_free(void *p) { larder_pool_free(pool, p); }
static void do_realloc(void *p) { (void)larder_pool_realloc(pool, p, 100); }
static void do_double_free(void *p) { larder_pool_free(pool, p); larder_pool_free(pool, p); }

int main(void) {
  size_t bytes = 1 << 20;
  mem = ptu_buffer(bytes + 64);

  /* create: NULL, misaligned, too small */
  errno = 0;
  CHECK(larder_pool_create(NULL, bytes) == NULL && errno == EINVAL);
  errno = 0;
  CHECK(larder_pool_create(mem + 8, bytes) == NULL && errno == EINVAL);
  errno = 0;
  CHECK(larder_pool_create(mem, larder_pool_min_bytes() - 16) == NULL && errno == EINVAL);
  CHECK(larder_pool_create(mem, 0) == NULL);
  pool = larder_pool_create(mem, larder_pool_min_bytes());
  CHECK(pool != NULL && larder_pool_check(pool) == 0);

  pool = larder_pool_create(mem, bytes);
  REQUIRE(pool);
  /* add_area: NULL, misaligned, too small, overlapping the pool */
  char other[256] __attribute__((aligned(16)));
  errno = 0;
  CHECK(larder_pool_add_area(pool, NULL, 4096) == -1 && errno == EINVAL);
  CHECK(larder_pool_add_area(pool, other + 4, 200) == -1);
  CHECK(larder_pool_add_area(pool, other, 32) == -1);
  CHECK(larder_pool_add_area(pool, mem + 4096, 4096) == -1);
  CHECK(larder_pool_add_area(NULL, other, sizeof(other)) == -1);
  /* requests that can never fit, and bad alignments */
  errno = 0;
  CHECK(larder_pool_malloc(pool, SIZE_MAX) == NULL && errno == ENOMEM);
  CHECK(larder_pool_malloc(pool, SIZE_MAX - 4096) == NULL);
  CHECK(larder_pool_malloc(pool, bytes) == NULL);
  CHECK(larder_pool_memalign(pool, (size_t)1 << 62, 16) == NULL);
  CHECK(larder_pool_memalign(pool, 4096, SIZE_MAX - 100) == NULL);
  errno = 0;
  CHECK(larder_pool_memalign(pool, 24, 16) == NULL && errno == EINVAL);
  void *keep = larder_pool_malloc(pool, 100);
  CHECK(keep != NULL);
  memset(keep, 0x6b, 100);
  size_t keep_usable = larder_pool_usable_size(pool, keep);
  /* impossible sizes: NULL, ENOMEM, the block untouched (issue 16) */
  const size_t impossible[] = {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 100, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1,
                               (size_t)PTRDIFF_MAX, (size_t)1 << 62};
  for (size_t i = 0; i < sizeof impossible / sizeof impossible[0]; i++) {
    errno = 0;
    CHECK(larder_pool_realloc(pool, keep, impossible[i]) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(larder_pool_malloc(pool, impossible[i]) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(larder_pool_memalign(pool, 64, impossible[i]) == NULL && errno == ENOMEM);
  }
  CHECK(larder_pool_usable_size(pool, keep) == keep_usable); /* untouched by the failed reallocs */
  int intact = 1;
  for (int i = 0; i < 100; i++) intact &= ((unsigned char *)keep)[i] == 0x6b;
  CHECK(intact);
  CHECK(larder_pool_check(pool) == 0);
  /* a destroyed pool fails its check */
  CHECK(larder_pool_check(NULL) != 0);

  /* frees the pool refuses, each in a child */
  static char outside[64] __attribute__((aligned(16)));
  void *live = larder_pool_malloc(pool, 200);
  void *freed = larder_pool_malloc(pool, 300);
  void *guard = larder_pool_malloc(pool, 300);
  larder_pool_free(pool, freed);
  (void)guard;
  CHECK(aborts_naming(do_free, outside, outside, "free of a static buffer"));
  CHECK(aborts_naming(do_free, &bytes, &bytes, "free of a stack address"));
  CHECK(aborts_naming(do_free, (char *)live + 8, (char *)live + 8, "free of a misaligned interior pointer"));
  CHECK(aborts_naming(do_free, (char *)live + 16, (char *)live + 16, "free of an aligned interior pointer"));
  CHECK(aborts_naming(do_free, freed, freed, "free of a freed block"));
  CHECK(aborts_naming(do_double_free, live, live, "double free"));
  CHECK(aborts_naming(do_realloc, freed, freed, "realloc of a freed block"));
  CHECK(aborts_naming(do_realloc, outside, outside, "realloc of a foreign pointer"));
  /* the parent's pool is unharmed by all that */
  CHECK(larder_pool_check(pool) == 0);
  free(mem);
  return check_done();
}
