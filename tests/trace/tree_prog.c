/* A process tree under liblarder-trace.so (check_trace.py process-tree): every process image
 * makes its own known sequence of calls, "seq TAG": for i = 1..50, p = malloc(TAG*1000 + i),
 * then free(p), then one realloc chain of TAG*1000 + 100 growing to + 200. The checker finds
 * each tag's sequence, call by call, in exactly one file, with the right pointers.
 *
 *   tree_prog seq TAG          the sequence, nothing else
 *   tree_prog fork-exec        seq 1; fork: the child does seq 2 and execs "seq 3"; seq 4
 *   tree_prog fork-exit        seq 1; fork: the child does seq 2 and _exit(0)s; seq 3
 *   tree_prog vfork-exec       seq 1; vfork: the child execs "seq 2"; seq 3
 *   tree_prog spawn            seq 1; posix_spawn "seq 2" with environ; posix_spawn "seq 3" with
 *                              an environment of only LD_PRELOAD and LARDER_TRACE_FILE; seq 4
 *   tree_prog raw-exec         seq 1; fork: the child execs "seq 2" by the raw system call with
 *                              only LD_PRELOAD and LARDER_TRACE_FILE (no wrapper adds the root
 *                              marker: the new image must recognise its root's file); seq 3
 * (a shell pipeline is run by the checker: sh -c 'tree_prog seq 5 | tree_prog seq 6') */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void seq(int tag) {
  for (int i = 1; i <= 50; i++) {
    volatile char *p = malloc((size_t)tag * 1000 + (size_t)i);
    if (!p) exit(1);
    p[0] = (char)i;
    free((void *)p);
  }
  char *q = malloc((size_t)tag * 1000 + 100);
  if (!q) exit(1);
  q = realloc(q, (size_t)tag * 1000 + 200);
  if (!q) exit(1);
  free(q);
}

static int wait_ok(pid_t pid) {
  int status;
  if (waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static char self[4096];
static char env_pre[4200], env_file[4200];

/* An environment of only the recorder's two variables. */
static char **bare_env(void) {
  static char *env[3];
  const char *p = getenv("LD_PRELOAD"), *f = getenv("LARDER_TRACE_FILE");
  snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", p ? p : "");
  snprintf(env_file, sizeof env_file, "LARDER_TRACE_FILE=%s", f ? f : "");
  env[0] = env_pre;
  env[1] = env_file;
  env[2] = NULL;
  return env;
}

static void exec_seq(const char *tag) {
  char *argv[] = {self, "seq", (char *)tag, NULL};
  execv(self, argv);
  _exit(127);
}

int main(int argc, char **argv) {
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  if (argc < 2) return 2;
  const char *mode = argv[1];
  if (!strcmp(mode, "seq") && argc > 2) { seq(atoi(argv[2])); return 0; }
  if (!strcmp(mode, "fork-exec")) {
    seq(1);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) { seq(2); exec_seq("3"); }
    if (!wait_ok(pid)) return 1;
    seq(4);
    return 0;
  }
  if (!strcmp(mode, "fork-exit")) {
    seq(1);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) { seq(2); _exit(0); }
    if (!wait_ok(pid)) return 1;
    seq(3);
    return 0;
  }
  if (!strcmp(mode, "vfork-exec")) {
    seq(1);
    pid_t pid = vfork();
    if (pid < 0) return 1;
    if (pid == 0) exec_seq("2");
    if (!wait_ok(pid)) return 1;
    seq(3);
    return 0;
  }
  if (!strcmp(mode, "spawn")) {
    seq(1);
    pid_t pid;
    char *a2[] = {self, "seq", "2", NULL};
    if (posix_spawn(&pid, self, NULL, NULL, a2, environ) != 0 || !wait_ok(pid)) return 1;
    char **env = bare_env();
    char *a3[] = {self, "seq", "3", NULL};
    if (posix_spawn(&pid, self, NULL, NULL, a3, env) != 0 || !wait_ok(pid)) return 1;
    seq(4);
    return 0;
  }
  if (!strcmp(mode, "raw-exec")) {
    seq(1);
    char **env = bare_env();
    char *a2[] = {self, "seq", "2", NULL};
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) { syscall(SYS_execve, self, a2, env); _exit(127); }
    if (!wait_ok(pid)) return 1;
    seq(3);
    return 0;
  }
  return 2;
}
