/* A warning cut at larder's message length limit keeps its newline (issue 12): a malformed
 * setting with a 2,000-character value makes larder's "ignoring LARDER_..." warning longer than
 * its 512-byte buffer. The child then writes a marker line; the parent checks that the marker
 * starts a line of its own (the warning ended with '\n') and that the warning was cut, not lost.
 * The same with a short malformed value, whose warning must be whole. */
#include "alloc_util.h"

static void run(size_t value_len) {
  static char env[2100];
  size_t pre = (size_t)snprintf(env, sizeof env, "LARDER_EMPTY_FRACTION=");
  memset(env + pre, 'x', value_len);
  env[pre + value_len] = 0;
  char *envs[] = {env, NULL};
  char *args[] = {(char *)"--child", NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, envs, 20, &c) == 0);
  char desc[80];
  alloc_describe_status(c.status, desc, sizeof desc);
  CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child ended with %s", desc);
  const char *warn = strstr(c.err, "larder: ignoring");
  const char *marker = strstr(c.err, "MARKER-LINE");
  CHECK_MSG(warn != NULL, "value of %zu characters: no warning: %s", value_len, c.err);
  CHECK_MSG(marker != NULL, "the child's marker is missing: %s", c.err);
  if (!warn || !marker) return;
  CHECK_MSG(marker > warn && marker[-1] == '\n',
            "value of %zu characters: the marker does not start a line; the warning lost its newline: %.*s",
            value_len, (int)(marker - warn + 11), warn);
  const char *eol = strchr(warn, '\n');
  size_t line = eol ? (size_t)(eol - warn) + 1 : strlen(warn);
  if (value_len > 600) {
    CHECK_MSG(line <= 512, "the warning is %zu bytes long, over the 512-byte limit", line);
    CHECK_MSG(line >= 4 && strncmp(warn + line - 4, "...\n", 4) == 0, "the cut is not marked with ...");
  } else {
    CHECK_MSG(strstr(warn, "expected") != NULL && strstr(warn, "expected") < eol, "a short warning was cut");
  }
  printf("message_cut: value of %4zu characters: warning of %zu bytes, %s\n", value_len, line,
         marker[-1] == '\n' ? "ends its line" : "GLUED to the next line");
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) {
    void *volatile p = malloc(10); /* larder reads its settings at start, at the latest here */
    free(p);
    static const char m[] = "MARKER-LINE\n";
    return write(2, m, sizeof m - 1) < 0;
  }
  if (!alloc_is_larder()) {
    printf("misuse_message_cut: skipped, larder is not the allocator\n");
    return ALLOC_SKIP;
  }
  run(2000);
  run(700);
  run(10);
  return check_done();
}
