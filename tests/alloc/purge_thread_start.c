/* The purge thread starts in any program, and a process that cannot start it still gives memory
 * back from its calls (src/maintain.c, purge_thread_start).
 *
 *   tls      a program with 256 KiB of static TLS (__thread arrays), which glibc puts on every
 *            thread's stack: the purge thread, asked for a 64 KiB stack, was refused (EINVAL)
 *            and never ran. Now it starts (purge_thread_starts 1) and gives back 8 MiB freed
 *            while the program makes no call (purge_thread_runs > 0, bytes_purged > 0).
 *   refused  a process whose seccomp filter refuses new threads (clone and clone3: EPERM, as a
 *            sandbox may): larder's attempt fails, and the calls run the purge instead
 *            (purge_call_runs > 0, bytes_purged > 0, purge_thread_starts 0). Until 2026-11-30
 *            the failed attempt left the thread marked as running: no purge ever ran, and the
 *            exit waited 2 s for a thread that did not exist (the quick suite's soak took 3.2 s
 *            for 1 s of work).
 * Both run with LARDER_PURGE_DELAY_MS=100 and the thread wanted once 8 MiB are mapped
 * (LARDER_PURGE_THREAD=2, LARDER_PURGE_THREAD_MB=8: CMake sets them).
 *
 * usage: alloc_purge_thread_start tls|refused */
#include "alloc_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#endif

#define BLOCKS ((16u << 20) / 256)
static void *blocks[BLOCKS];
static __thread char big_tls[256 << 10]; /* (tls: more static TLS than a 64 KiB stack holds) */

static void *nothing(void *arg) { return arg; }

/* clone and clone3 fail with EPERM from now on; false if the filter cannot be installed here. */
static bool refuse_threads(void) {
#if defined(__x86_64__)
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return false;
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) == 0) { /* the filter did not take */
    pthread_join(t, NULL);
    return false;
  }
  return true;
#else
  return false;
#endif
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "tls") != 0 && strcmp(argv[1], "refused") != 0)) {
    fprintf(stderr, "usage: %s tls|refused\n", argv[0]);
    return 2;
  }
  bool refused = strcmp(argv[1], "refused") == 0;
  if (!alloc_is_larder()) {
    printf("purge_thread_start: larder's purge thread only\n");
    return ALLOC_SKIP;
  }
  alloc_api_t api = alloc_api();
  REQUIRE(api.stats_get);
  memset(big_tls, 1, sizeof big_tls);
  if (refused && !refuse_threads()) {
    printf("purge_thread_start: no seccomp filter here (or not x86-64): skipped\n");
    return ALLOC_SKIP;
  }
  larder_stats_t before = alloc_stats(&api);

  /* 16 MiB mapped: the thread is wanted (LARDER_PURGE_THREAD_MB=8) */
  for (unsigned i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(256);
    REQUIRE(blocks[i] != NULL);
    memset(blocks[i], 1, 256);
  }
  for (unsigned i = 0; i < BLOCKS; i++) free(blocks[i]);
  larder_stats_t built = alloc_stats(&api);

  if (refused) {
    /* calls that take slow paths (2,000 blocks of 64 sizes: bins refilled and flushed), every
     * 20 ms for 1 s (ten purge delays) */
    for (int i = 0; i < 50; i++) {
      sleep_ms(20);
      for (unsigned k = 0; k < 2000; k++) REQUIRE((blocks[k] = malloc(16 + (k % 64) * 16)) != NULL);
      for (unsigned k = 0; k < 2000; k++) free(blocks[k]);
    }
  } else {
    sleep_ms(1000); /* no call at all: the thread's work */
  }
  larder_stats_t after = alloc_stats(&api);
  size_t starts = after.purge_thread_starts - before.purge_thread_starts;
  size_t thread_runs = after.purge_thread_runs - built.purge_thread_runs;
  size_t call_runs = after.purge_call_runs - built.purge_call_runs;
  size_t purged = after.bytes_purged - built.bytes_purged;
  printf("purge_thread_start %s: thread starts %zu, thread runs %zu, call runs %zu, %zu bytes purged\n", argv[1], starts,
         thread_runs, call_runs, purged);
  if (after.mallocs == 0) { /* (a build without call counters counts no runs either) */
    printf("purge_thread_start: no statistics in this build: not checked\n");
    return 0;
  }
  if (refused) {
    CHECK_MSG(starts == 0, "a purge thread started in a process that refuses threads");
    CHECK_MSG(call_runs > 0, "no purge ran from the calls: the refused thread still counts as running");
  } else {
    CHECK_MSG(starts == 1, "the purge thread did not start in a program with 256 KiB of static TLS");
    CHECK_MSG(thread_runs > 0, "the purge thread ran no purge while the program idled");
  }
  CHECK_MSG(purged > 0, "nothing of the 16 MiB freed went back");
  CHECK(api.validate() == 0);
  return check_done();
}
