/* Memory freed serves again when the OS refuses more (maintain.c, ld_maintain_reclaim; glibc's
 * malloc/tst-dynarray-fail shape). With the address space limited (RLIMIT_AS, 2 MiB above the
 * lowest limit under which one more page maps), one thread fills it with small strings held in
 * an array that grows by realloc, until a call fails; frees everything; and goes again, four rounds.
 * Every round must hold at least half as many strings as the first, and 1,000 small strings
 * must come right after each round's frees. Until 2026-11-29 the rounds after the first held
 * 1,369 strings against the first's 16,320 (the thread's kept medium spans held the chunks the
 * array's next 16 KiB needed, and a refused mapping was the end); glibc holds the same number
 * every round. Every failure must be NULL with ENOMEM. The work runs in a child, whose limit
 * is its own. */
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "alloc_util.h"

#define ROUNDS 4

static bool one_page_maps(void) {
  void *p = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (p == MAP_FAILED) return false;
  munmap(p, 1);
  return true;
}

/* The lowest limit under which one more page maps (to 128 KiB), plus 2 MiB: as the glibc test
 * sets it, so that what the process already maps has no room left to lend. */
static bool limit_address_space(void) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  unsigned long low = 1ul << 20, high = 1ul << 34;
  while (high - low > (128ul << 10)) {
    unsigned long mid = low + (high - low) / 2;
    limit.rlim_cur = mid;
    if (setrlimit(RLIMIT_AS, &limit) != 0) return false;
    if (one_page_maps()) high = mid;
    else low = mid;
  }
  limit.rlim_cur = high + (2ul << 20);
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

static int work(void) {
  if (!limit_address_space()) return 3;
  long held[ROUNDS] = {0}, wrong_errno = 0, after_free_failed = 0;
  for (int round = 0; round < ROUNDS; round++) {
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
      if (n == cap) {
        size_t grown = cap ? cap + cap / 2 : 16;
        errno = 0;
        char **nv = realloc(v, grown * sizeof *v);
        if (!nv) {
          if (errno != ENOMEM) wrong_errno++;
          break;
        }
        v = nv;
        cap = grown;
      }
      errno = 0;
      if (!(v[n] = strdup("placeholder"))) {
        if (errno != ENOMEM) wrong_errno++;
        break;
      }
      n++;
    }
    held[round] = (long)n;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
    char *again[1000];
    int got = 0;
    while (got < 1000 && (again[got] = strdup("placeholder"))) got++;
    if (got < 1000) after_free_failed++;
    for (int i = 0; i < got; i++) free(again[i]);
  }
  fprintf(stderr, "work: strings held per round:");
  for (int r = 0; r < ROUNDS; r++) fprintf(stderr, " %ld", held[r]);
  fprintf(stderr, "; %ld rounds whose 1,000 strings after the frees failed, %ld failures without ENOMEM\n",
          after_free_failed, wrong_errno);
  if (held[0] < 1000) return 4; /* the limit left no room: the case did not happen */
  for (int r = 1; r < ROUNDS; r++)
    if (held[r] * 2 < held[0]) return 5;
  return after_free_failed ? 6 : wrong_errno ? 7 : 0;
}

int main(void) {
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(work());
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  char desc[80];
  alloc_describe_status(st, desc, sizeof desc);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
            "the child ended with %s (3: no limit set, 4: the limit left no room, 5: a round held less than half "
            "the first's strings, 6: small strings failed right after the frees, 7: a failure without ENOMEM)",
            desc);
  printf("out_of_memory_after_free: %s\n", desc);
  return check_done();
}
