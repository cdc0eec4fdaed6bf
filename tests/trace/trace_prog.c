/* A multithreaded program that counts its own allocation calls and its peak live bytes, to
 * be run under liblarder-trace.so: the replay of its trace must report the same figures.
 *
 *   trace_prog THREADS ROUNDS BLOCKS
 *
 * Each round, every thread allocates BLOCKS blocks (malloc, calloc, realloc that grows,
 * posix_memalign, aligned_alloc; sizes from a per-thread generator), then all threads meet at
 * a barrier, and each frees the blocks of the *next* thread (cross-thread frees). Nothing is
 * freed while blocks are being allocated, so live bytes only rise until the barrier and the
 * peak is the largest sum at a barrier: the same in any interleaving, hence comparable with
 * the replay of the merged trace.
 *
 * It prints "ops N peak P checksum C" with write(2) and snprintf on the stack (no stdio
 * buffer, which would be an allocation of libc's own). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_threads, g_rounds, g_blocks;
static pthread_barrier_t g_barrier;
static void ***g_blocks_of;       /* [thread][block] */
static uint64_t g_live[64][8];    /* bytes each thread has live, padded apart */
static uint64_t g_round_total[1024];
static uint64_t g_ops[64][8];
static uint64_t g_sum[64][8];

static uint64_t next_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg, next = (me + 1) % g_threads;
  uint64_t seed = 1234567u + (uint64_t)me * 7919u;
  uint64_t *sizes = calloc((size_t)g_blocks, sizeof *sizes);   /* counted: it is our call */
  g_ops[me][0]++;
  g_live[me][0] += (uint64_t)g_blocks * sizeof *sizes;
  for (int r = 0; r < g_rounds; r++) {
    void **mine = g_blocks_of[me];
    for (int b = 0; b < g_blocks; b++) {
      uint64_t size = 1 + next_rand(&seed) % (next_rand(&seed) % 8 == 0 ? 20000 : 300);
      void *p = NULL;
      switch (b % 5) {
      case 0: p = malloc(size); break;
      case 1: p = calloc(1, size); break;
      case 2: {
        p = malloc(size / 2 + 1);
        g_ops[me][0]++;
        g_live[me][0] += size / 2 + 1;
        if (p) { memset(p, 1, size / 2 + 1); }
        void *q = realloc(p, size);               /* grows: live bytes never fall */
        if (q) { g_live[me][0] -= size / 2 + 1; p = q; }
        break;
      }
      case 3: if (posix_memalign(&p, 64, size) != 0) p = NULL; break;
      case 4: p = aligned_alloc(256, (size + 255) & ~(uint64_t)255); size = (size + 255) & ~(uint64_t)255; break;
      }
      g_ops[me][0]++;
      if (!p) { fprintf(stderr, "trace_prog: allocation failed\n"); exit(1); }
      memset(p, (int)b, size);
      g_sum[me][0] += ((unsigned char *)p)[size - 1];
      g_live[me][0] += size;
      sizes[b] = size;
      mine[b] = p;
    }
    pthread_barrier_wait(&g_barrier);
    if (me == 0) {
      uint64_t total = 0;
      for (int t = 0; t < g_threads; t++) total += g_live[t][0];
      g_round_total[r] = total;
    }
    pthread_barrier_wait(&g_barrier);
    /* free the next thread's blocks: every free is remote */
    void **theirs = g_blocks_of[next];
    for (int b = 0; b < g_blocks; b++) { free(theirs[b]); g_ops[me][0]++; }
    pthread_barrier_wait(&g_barrier);
    /* our own blocks were freed by the previous thread: settle our count */
    uint64_t gone = 0;
    for (int b = 0; b < g_blocks; b++) gone += sizes[b];
    g_live[me][0] -= gone;
    pthread_barrier_wait(&g_barrier);
  }
  free(sizes);
  g_ops[me][0]++;
  return NULL;
}

static int parse(const char *s, int lo, int hi) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == 0 || *end || v < lo || v > hi) {
    fprintf(stderr, "trace_prog: bad argument %s (want %d..%d)\n", s, lo, hi);
    exit(2);
  }
  return (int)v;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: trace_prog THREADS ROUNDS BLOCKS\n"); return 2; }
  g_threads = parse(argv[1], 1, 64);
  g_rounds = parse(argv[2], 0, 1024);
  g_blocks = parse(argv[3], 1, 1000000);
  uint64_t main_ops = 0, main_live = 0;
  g_blocks_of = malloc((size_t)g_threads * sizeof *g_blocks_of);
  main_ops++;
  main_live += (uint64_t)g_threads * sizeof *g_blocks_of;
  for (int t = 0; t < g_threads; t++) {
    g_blocks_of[t] = malloc((size_t)g_blocks * sizeof(void *));
    main_ops++;
    main_live += (uint64_t)g_blocks * sizeof(void *);
  }
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_threads);
  pthread_t tid[64];
  for (int t = 0; t < g_threads; t++)
    if (pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t)) { fprintf(stderr, "trace_prog: pthread_create failed\n"); return 1; }
  for (int t = 0; t < g_threads; t++) pthread_join(tid[t], NULL);
  uint64_t ops = main_ops, peak = 0, sum = 0;
  for (int t = 0; t < g_threads; t++) { ops += g_ops[t][0]; sum += g_sum[t][0]; }
  /* every thread's sizes array is live through all rounds, so the per-round totals include it */
  for (int r = 0; r < g_rounds; r++)
    if (g_round_total[r] + main_live > peak) peak = g_round_total[r] + main_live;
  for (int t = 0; t < g_threads; t++) free(g_blocks_of[t]);
  free(g_blocks_of);
  ops += (uint64_t)g_threads + 1;
  char line[160];
  int n = snprintf(line, sizeof line, "ops %llu peak %llu checksum %llu\n", (unsigned long long)ops,
                   (unsigned long long)peak, (unsigned long long)sum);
  ssize_t w = write(1, line, (size_t)n);
  return w == n ? 0 : 1;
}
