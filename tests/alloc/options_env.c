/* Tunables from the environment (DESIGN §1: "Tunables are environment variables LARDER_* read
 * once at start (and larder_option_set) ... Unknown or malformed values are reported on stderr
 * and ignored, never fatal").
 *   - a child with malformed and unknown LARDER_* variables runs normally, keeps the defaults,
 *     and names every bad variable on stderr;
 *   - a child with valid ones (f, K, superblock size) runs with them, silently;
 *   - larder_option_set refuses bad names and values with -1 and keeps the old value.
 * Without larder there is nothing to test: skipped. */
#include <ctype.h>

#include "alloc_util.h"

static int child_work(void) {
  void *p[1000];
  for (int i = 0; i < 1000; i++) {
    p[i] = malloc((size_t)(i % 300) + 1);
    if (!p[i]) return 30;
    alloc_fill(p[i], (size_t)(i % 300) + 1);
  }
  for (int i = 0; i < 1000; i++) {
    if (alloc_check(p[i], (size_t)(i % 300) + 1) != (size_t)-1) return 31;
    free(p[i]);
  }
  alloc_api_t api = alloc_api();
  if (api.validate && api.validate() != 0) return 32;
  return 0;
}

static void lower(char *s) { for (; *s; s++) *s = (char)tolower((unsigned char)*s); }

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) {
    /* the values the parent expects, printed on stderr (stdout is not captured) */
    alloc_api_t api = alloc_api();
    int rc = child_work();
    fprintf(stderr, "got k=%g f=%g S=%g\n", api.option_get("k"), api.option_get("empty_fraction"),
            api.option_get("superblock_size"));
    return rc;
  }
  alloc_api_t api = alloc_api();
  if (!api.option_set) {
    printf("options_env: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  char *args[] = {(char *)"--child", NULL};
  alloc_child_t c;

  /* malformed and unknown: reported, ignored, defaults kept */
  {
    char *env[] = {(char *)"LARDER_K=abc", (char *)"LARDER_EMPTY_FRACTION=2",
                   (char *)"LARDER_SUPERBLOCK_SIZE=12345", (char *)"LARDER_PURGE_DELAY_MS=-5",
                   (char *)"LARDER_NO_SUCH_SETTING=1", (char *)"LARDER_STATS=yes", NULL};
    REQUIRE(alloc_run_self(args, env, 30, &c) == 0);
    char desc[80];
    alloc_describe_status(c.status, desc, sizeof desc);
    CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "bad settings: child %s: %s", desc, c.err);
    lower(c.err);
    const char *named[] = {"abc", "empty_fraction", "12345", "-5", "no_such_setting", "yes"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
      CHECK_MSG(strstr(c.err, named[i]) != NULL, "stderr does not mention '%s': %s", named[i], c.err);
    CHECK_MSG(strstr(c.err, "got k=4 f=0.25 s=65536") != NULL, "defaults not kept: %s", c.err);
  }
  /* valid: applied, and nothing on stderr but the child's own line */
  {
    char *env[] = {(char *)"LARDER_K=2", (char *)"LARDER_EMPTY_FRACTION=0.5",
                   (char *)"LARDER_SUPERBLOCK_SIZE=131072", NULL};
    REQUIRE(alloc_run_self(args, env, 30, &c) == 0);
    char desc[80];
    alloc_describe_status(c.status, desc, sizeof desc);
    CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "good settings: child %s: %s", desc, c.err);
    CHECK_MSG(strncmp(c.err, "got k=2 f=0.5 S=131072\n", 24) == 0 && c.err[24] == 0,
              "valid settings: stderr \"%s\"", c.err);
  }
  /* larder_option_set: -1 for bad input, old value kept (messages go to stderr) */
  {
    double k0 = api.option_get("k");
    CHECK(api.option_set("k", "abc") == -1);
    CHECK(api.option_set("k", "") == -1);
    CHECK(api.option_set("k", "3x") == -1);
    CHECK(api.option_set("empty_fraction", "1.5") == -1);
    CHECK(api.option_set("no_such_setting", "1") == -1);
    CHECK(api.option_get("k") == k0);
    CHECK(api.option_get("no_such_setting") == -1);
    CHECK(api.option_set("k", "6") == 0);
    CHECK(api.option_get("k") == 6);
    CHECK(api.option_set("k", "4") == 0);
  }
  printf("options_env: bad LARDER_* settings reported and ignored, good ones applied\n");
  return check_done();
}
