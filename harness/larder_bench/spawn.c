/* larder-spawn: start one workload and report its rusage exactly.
 *
 * Usage: larder-spawn [--preload LIB] PROGRAM [ARGS...]   (environment and stdio pass through)
 * --preload sets LD_PRELOAD for the program only, so the allocator under test is never
 * loaded into the launcher itself.
 * Writes one line to fd 3 after the program ends:
 *   status=<raw wait status> wall=<s> utime=<s> stime=<s> maxrss=<KiB> minflt= majflt= nvcsw= nivcsw=
 * or "error=<errno text>" if the program could not be started (exit 127).
 *
 * Why a launcher at all: Linux keeps ru_maxrss across execve, and a child spawned straight
 * from the Python harness starts with the harness's own peak RSS (tens of MiB with
 * matplotlib loaded), which would hide the workload's. A child spawned from this small
 * program starts from about a megabyte. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double spawn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  FILE *report = fdopen(3, "w");
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "--preload") == 0) {
    if (setenv("LD_PRELOAD", argv[2], 1) != 0) {
      perror("larder-spawn: setenv");
      return 2;
    }
    first = 3;
  }
  if (report == NULL || argc <= first) {
    fprintf(stderr, "usage: larder-spawn [--preload LIB] PROGRAM [ARGS...] (report on fd 3)\n");
    return 2;
  }
  /* The report fd must not leak into the workload. */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, 3);
  pid_t pid;
  double t0 = spawn_now();
  int rc = posix_spawn(&pid, argv[first], &fa, NULL, argv + first, environ);
  if (rc != 0) {
    fprintf(report, "error=%s\n", strerror(rc));
    fclose(report);
    return 127;
  }
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      fprintf(report, "error=wait4: %s\n", strerror(errno));
      fclose(report);
      return 127;
    }
  }
  double wall = spawn_now() - t0;
  fprintf(report,
          "status=%d wall=%.9f utime=%.6f stime=%.6f maxrss=%ld minflt=%ld majflt=%ld nvcsw=%ld nivcsw=%ld\n",
          status, wall, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
          (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt,
          ru.ru_nvcsw, ru.ru_nivcsw);
  fclose(report);
  return 0;
}
