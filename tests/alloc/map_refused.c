/* A mapping the OS refuses is not the end of memory: a smaller one may fit. Near the address
 * space limit (RLIMIT_AS), or when every mapped byte is locked (mlockall(MCL_FUTURE)) within
 * RLIMIT_MEMLOCK (8 MiB for a user by default), larder's 4 MiB segment was refused where
 * glibc's small steps were not, and every malloc failed until then: under mlockall as a user,
 * all of 1,000 mallocs of 100 bytes (glibc: none). src/segment.c now halves a refused segment
 * down to what the request needs.
 *
 * The child (this program again) fills most of the first segment with 3.5 MiB of small blocks,
 * then sets RLIMIT_AS 3 MiB above its address space, so that a new 4 MiB segment cannot be
 * mapped but a 2 MiB one can, and allocates 1.5 MiB more in blocks of 100 B to 8 KiB: none may
 * fail. Under larder the child must also have mapped a second segment. RLIMIT_AS applies to
 * root as to anyone, so the test runs everywhere.
 *
 * usage: alloc_map_refused [child] */
#include "alloc_util.h"

#include <sys/resource.h>

/* The process's address space in bytes (VmSize), read without allocating. */
static size_t vm_size(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *v = strstr(buf, "VmSize:");
  return v ? (size_t)strtoull(v + 7, NULL, 10) << 10 : 0;
}

static int child(void) {
  enum { BEFORE = 3584, AFTER = 1536 }; /* KiB */
  static void *held[40000];
  size_t count = 0, bytes = 0;
  while (bytes < (size_t)BEFORE << 10 && count < 40000) {
    held[count] = malloc(1000);
    if (!held[count]) return 10;
    bytes += 1000;
    count++;
  }
  alloc_api_t api = alloc_api();
  larder_stats_t before;
  memset(&before, 0, sizeof before);
  if (api.stats_get) api.stats_get(&before);
  size_t vm = vm_size();
  if (!vm) return 11;
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0) return 12;
  lim.rlim_cur = vm + ((size_t)3 << 20);
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 13;
  size_t failures = 0, sizes[] = {100, 200, 400, 1000, 3000, 8192};
  bytes = 0;
  for (unsigned i = 0; bytes < (size_t)AFTER << 10 && count < 40000; i++, count++) {
    size_t size = sizes[i % 6];
    held[count] = malloc(size);
    if (!held[count]) failures++;
    bytes += size;
  }
  larder_stats_t after;
  memset(&after, 0, sizeof after);
  if (api.stats_get) api.stats_get(&after);
  char line[160];
  int n = snprintf(line, sizeof line, "map_refused: %zu failed mallocs under the limit; segments %zu -> %zu\n",
                   failures, (size_t)before.segments, (size_t)after.segments);
  if (write(1, line, (size_t)n) < 0) return 14;
  if (failures) return 1;
  if (api.stats_get && after.segments <= before.segments) return 2; /* (the limit was not met) */
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) return child();
  char *args[] = {(char *)"child", NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, NULL, 60, &c) == 0);
  char status[96];
  alloc_describe_status(c.status, status, sizeof status);
  CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
            "child: %s (1: mallocs failed under the limit; 2: no second segment, the test did not test); %s", status,
            c.err);
  return check_done();
}
