/* larder-spawn: start one workload and report its rusage exactly.
 *
 * Usage: larder-spawn [--preload LIB] [--rss-ms MS] [--cwd DIR] PROGRAM [ARGS...]
 * (environment and stdio pass through; --cwd: the program runs in DIR)
 * --preload sets LD_PRELOAD for the program only, so the allocator under test is never
 * loaded into the launcher itself. --rss-ms samples the program's resident set
 * (/proc/PID/statm) every MS milliseconds from a second thread while the first waits.
 * Writes to fd 3 after the program ends:
 *   status=<raw wait status> wall=<s> utime=<s> stime=<s> maxrss=<KiB> minflt= majflt= nvcsw= nivcsw=
 *   rss <t_s>:<KiB> <t_s>:<KiB> ...          (only with --rss-ms)
 * or "error=<errno text>" if the program could not be started (exit 127).
 * Samples come every millisecond for the first 100 ms (short runs still get a shape), then
 * every MS. The series keeps at most RSS_MAX samples: when full, every second one is dropped
 * and the interval doubles, so a long run keeps its whole shape at a coarser step.
 *
 * Why a launcher at all: Linux keeps ru_maxrss across execve, and a child spawned straight
 * from the Python harness starts with the harness's own peak RSS (tens of MiB with
 * matplotlib loaded), which would hide the workload's. A child spawned from this small
 * program starts from about a megabyte. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

#define RSS_MAX 4096
static struct { double t; long kib; } rss[RSS_MAX];
static int rss_n;
static long rss_step_ns;
static volatile int rss_stop;
static pid_t rss_pid;
static double rss_t0;

/* Resident KiB of the program: statm's second field, in pages. -1 once it is gone. */
static long rss_read(int fd) {
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *p = strchr(buf, ' ');
  if (!p) return -1;
  long pages = strtol(p + 1, NULL, 10);
  return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *rss_sampler(void *arg) {
  (void)arg;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/statm", (int)rss_pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  int skip = 1; /* every n-th tick is kept after thinning */
  long tick = 0;
  while (!rss_stop) {
    long kib = rss_read(fd);
    if (kib > 0 && tick % skip == 0) {
      if (rss_n == RSS_MAX) {
        for (int i = 0; i < RSS_MAX / 2; i++) rss[i] = rss[2 * i];
        rss_n = RSS_MAX / 2;
        skip *= 2;
      }
      rss[rss_n].t = spawn_now() - rss_t0;
      rss[rss_n].kib = kib;
      rss_n++;
    }
    tick++;
    /* The first 100 ms at 1 ms steps (at most), so that a run of a few tens of milliseconds
     * still has a shape; a reading of statm costs a few microseconds. */
    long step = rss_step_ns;
    if (step > 1000000L && spawn_now() - rss_t0 < 0.1) step = 1000000L;
    struct timespec ts = {step / 1000000000L, step % 1000000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !rss_stop) ;
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  FILE *report = fdopen(3, "w");
  const char *cwd = NULL;
  int first = 1;
  for (;;) {
    if (argc > first + 1 && strcmp(argv[first], "--preload") == 0) {
      if (setenv("LD_PRELOAD", argv[first + 1], 1) != 0) {
        perror("larder-spawn: setenv");
        return 2;
      }
      first += 2;
    } else if (argc > first + 1 && strcmp(argv[first], "--rss-ms") == 0) {
      rss_step_ns = (long)(atof(argv[first + 1]) * 1e6);
      first += 2;
    } else if (argc > first + 1 && strcmp(argv[first], "--cwd") == 0) {
      cwd = argv[first + 1];
      first += 2;
    } else {
      break;
    }
  }
  if (report == NULL || argc <= first) {
    fprintf(stderr, "usage: larder-spawn [--preload LIB] [--rss-ms MS] [--cwd DIR] PROGRAM [ARGS...] (report on fd 3)\n");
    return 2;
  }
  /* The launcher's own working directory does not matter: change it, and the program inherits it
   * (a relative program path is then relative to DIR, as in a shell after cd). */
  if (cwd && chdir(cwd) != 0) {
    fprintf(report, "error=cannot enter working directory %s: %s\n", cwd, strerror(errno));
    fclose(report);
    return 127;
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
  pthread_t sampler;
  int sampling = 0;
  if (rss_step_ns > 0) {
    rss_pid = pid;
    rss_t0 = t0;
    sampling = pthread_create(&sampler, NULL, rss_sampler, NULL) == 0;
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
  if (sampling) {
    rss_stop = 1;
    pthread_join(sampler, NULL);
  }
  fprintf(report,
          "status=%d wall=%.9f utime=%.6f stime=%.6f maxrss=%ld minflt=%ld majflt=%ld nvcsw=%ld nivcsw=%ld\n",
          status, wall, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
          (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt,
          ru.ru_nvcsw, ru.ru_nivcsw);
  if (sampling) {
    fputs("rss", report);
    for (int i = 0; i < rss_n; i++) fprintf(report, " %.3f:%ld", rss[i].t, rss[i].kib);
    fputc('\n', report);
  }
  fclose(report);
  return 0;
}
