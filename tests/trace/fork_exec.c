/* Under liblarder-trace.so: one file per process, a new one after exec.
 *   fork_exec            mallocs 1111 bytes, forks (the child mallocs 2222 and exits),
 *                        waits, then execs itself as "fork_exec stage2"
 *   fork_exec stage2     mallocs 3333 bytes
 * The checker (check_trace.py fork-exec) finds 1111 only in the parent's file, 2222 only in
 * the child's, 3333 only in "<parent file>.exec1". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void use(size_t n) {
  volatile char *p = malloc(n);
  if (!p) exit(1);
  p[0] = 1;
  free((void *)p);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "stage2") == 0) { use(3333); return 0; }
  use(1111);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) { use(2222); _exit(0); }   /* _exit: the child's records must still be written */
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  execl("/proc/self/exe", argv[0], "stage2", (char *)NULL);
  return 1;
}
