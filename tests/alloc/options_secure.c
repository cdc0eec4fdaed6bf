/* A set-user-ID program takes no LARDER_ setting from the environment of the user who runs it
 * (src/options.c): glibc erases its own malloc tunables there, and a setting could make the
 * program print to a terminal it does not own or hold memory it would give back.
 *
 * The test copies itself into a new directory as a program owned by nobody (65534) with the
 * set-user-ID bit, and runs that copy as root with LARDER_PURGE_DELAY_MS=12345 and
 * LARDER_NO_SUCH_OPTION=1: it starts with AT_SECURE set (its effective user is not its real
 * one), and must read the default purge delay, say once that the settings are ignored, and not
 * warn about the unknown one. Then the same copy without the bit must take the setting (the
 * check can fail). Skipped when not root (no chown) or where the file system ignores the bit
 * (nosuid). Linked with liblarder.a: a set-user-ID program ignores LD_PRELOAD.
 *
 * usage: alloc_options_secure [child] */
#include "alloc_util.h"

#include <sys/auxv.h>
#include <sys/stat.h>

static int child(void) {
  alloc_api_t api = alloc_api();
  if (!api.option_get) return 3;
  void *volatile p = malloc(64); /* (the settings are read at the first allocation; volatile: kept) */
  free(p);
  printf("secure=%lu purge_delay_ms=%.0f\n", getauxval(AT_SECURE), api.option_get("purge_delay_ms"));
  return 0;
}

/* Runs `path` child with the settings, capturing stdout and stderr apart. */
static int run(const char *path, char *out, size_t out_len, char *err, size_t err_len) {
  int o[2], e[2];
  if (pipe(o) || pipe(e)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(o[1], 1);
    dup2(e[1], 2);
    close(o[0]);
    close(e[0]);
    char *argv[] = {(char *)path, (char *)"child", NULL};
    char *envp[] = {(char *)"LARDER_PURGE_DELAY_MS=12345", (char *)"LARDER_NO_SUCH_OPTION=1", NULL};
    alarm(20);
    execve(path, argv, envp);
    _exit(127);
  }
  close(o[1]);
  close(e[1]);
  ssize_t n = read(o[0], out, out_len - 1);
  out[n > 0 ? n : 0] = 0;
  size_t got = 0;
  while (got < err_len - 1 && (n = read(e[0], err + got, err_len - 1 - got)) > 0) got += (size_t)n;
  err[got] = 0;
  close(o[0]);
  close(e[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv) {
  if (argc > 1) return child();
  if (!alloc_is_larder()) {
    printf("options_secure: not larder: skipped\n");
    return ALLOC_SKIP;
  }
  if (geteuid() != 0) {
    printf("options_secure: needs root to make a set-user-ID copy: skipped\n");
    return ALLOC_SKIP;
  }
  char dir[] = "/tmp/larder-secure-XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  REQUIRE(chmod(dir, 0755) == 0);
  char path[96];
  snprintf(path, sizeof path, "%s/options_secure", dir);
  /* the copy */
  int in = open("/proc/self/exe", O_RDONLY), outfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);
  REQUIRE(in >= 0 && outfd >= 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0) REQUIRE(write(outfd, buf, (size_t)n) == n);
  close(in);
  close(outfd);
  REQUIRE(chown(path, 65534, 65534) == 0);
  REQUIRE(chmod(path, 04755) == 0);

  char out[256], err[4096];
  int rc = run(path, out, sizeof out, err, sizeof err);
  unsigned long secure = 1;
  double delay = -1;
  int fields = sscanf(out, "secure=%lu purge_delay_ms=%lf", &secure, &delay);
  int result = 0;
  if (rc == 0 && fields == 2 && secure == 0) {
    printf("options_secure: the file system ignores the set-user-ID bit here: skipped\n");
    result = ALLOC_SKIP;
  } else {
    CHECK_MSG(rc == 0 && fields == 2, "set-user-ID copy: exit %d, stdout \"%s\", stderr \"%s\"", rc, out, err);
    CHECK_MSG(delay == 1000, "set-user-ID: purge_delay_ms %.0f (the environment said 12345)", delay);
    CHECK_MSG(strstr(err, "ignoring the LARDER_ settings") != NULL, "no word of the ignored settings: \"%s\"", err);
    CHECK_MSG(strstr(err, "NO_SUCH_OPTION") == NULL, "the settings were read: \"%s\"", err);
    printf("options_secure: set-user-ID copy: %s", out);
    /* the same program without the bit takes the setting */
    REQUIRE(chmod(path, 0755) == 0);
    rc = run(path, out, sizeof out, err, sizeof err);
    fields = sscanf(out, "secure=%lu purge_delay_ms=%lf", &secure, &delay);
    CHECK_MSG(rc == 0 && fields == 2 && secure == 0 && delay == 12345, "plain copy: exit %d, stdout \"%s\"", rc, out);
    printf("options_secure: plain copy: %s", out);
    result = check_done();
  }
  unlink(path);
  rmdir(dir);
  return result;
}
