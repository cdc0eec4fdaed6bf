/* Multithreaded stress: T threads (default 8, more than the 2 cores so threads are preempted
 * inside the allocator), random sizes 1 B .. 1 MiB skewed to small, a third of all frees done
 * by another thread (blocks handed over through a mutex-protected queue per thread, the
 * remote-free path of seed 002 and DESIGN §1), some reallocs, one block in ten from
 * posix_memalign with an alignment of 16 B .. 64 KiB. Every block is filled with a
 * pattern derived from its address and size, checked before it is freed or reallocated: a
 * block given out twice, two overlapping blocks, or an allocator that writes into a live block
 * all break a pattern. Meanwhile the main thread calls malloc_trim(0) every millisecond, so
 * memory is given back to the OS while other threads reuse it: a live block whose pages were
 * purged reads back as zeros and breaks its pattern. At the end, with larder,
 * larder_validate() must find nothing wrong.
 *
 * With "sparse", half of the blocks (by their pattern) get only their first and last words
 * written, as a program writes a header and leaves a buffer's rest unset: what the memory held
 * before stays in between and goes where realloc copies it. A full pattern hides the allocator's
 * own leftovers; the free tag of a freed block, copied so into a small block by realloc, once
 * made that block's free a "double free" (tests/alloc/stale_tag.c). This mode calls no
 * malloc_trim, whose purge would zero the leftovers.
 *
 * usage: alloc_mt_stress [threads] [ops-per-thread] [seed] [sparse] */
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>

#include "alloc_util.h"

#define SLOTS 512
#define QCAP 4096

typedef struct item_s { void *p; size_t size; } item_t;

typedef struct queue_s {
  pthread_mutex_t mu;
  item_t items[QCAP];
  int n;
} queue_t;

typedef struct worker_s {
  pthread_t tid;
  int id;
  uint64_t seed;
  long ops;
  long allocs, frees, handed, received, reallocs, corrupt;
} worker_t;

static int nthreads = 8;
static queue_t *queues;
static worker_t *workers;
static bool sparse_mode;

/* Sparse blocks (sparse_mode, half of them): words 0 and the last of their pattern only. */
static bool block_sparse(const void *orig, size_t size) {
  return sparse_mode && size >= 16 && (alloc_pat_word(orig, size, 1) & 1);
}
static void block_fill(void *p, size_t size) {
  if (!block_sparse(p, size)) {
    alloc_fill(p, size);
    return;
  }
  uint64_t first = alloc_pat_word(p, size, 0), last = alloc_pat_word(p, size, (size - 8) / 8 + 1);
  memcpy(p, &first, 8);
  memcpy((char *)p + size - 8, &last, 8);
}
/* As alloc_check_as: the first `len` bytes of p, a block filled as (orig, size). */
static size_t block_check_as(const void *p, const void *orig, size_t size, size_t len) {
  if (!block_sparse(orig, size)) return alloc_check_as(p, orig, size, len);
  uint64_t first = alloc_pat_word(orig, size, 0), last = alloc_pat_word(orig, size, (size - 8) / 8 + 1);
  if (memcmp(p, &first, len < 8 ? len : 8) != 0) return 0;
  if (len == size && memcmp((const char *)p + size - 8, &last, 8) != 0) return size - 8;
  return (size_t)-1;
}
static size_t block_check(const void *p, size_t size) { return block_check_as(p, p, size, size); }
static atomic_long live_blocks;
static atomic_int running;

static void verify_and_free(worker_t *w, void *p, size_t size, const char *how) {
  size_t bad = block_check(p, size);
  if (bad != (size_t)-1) {
    w->corrupt++;
    fprintf(stderr, "thread %d: %s block %p size %zu corrupted at offset %zu\n", w->id, how, p,
            size, bad);
  }
  free(p);
  w->frees++;
  atomic_fetch_sub(&live_blocks, 1);
}

/* Hands a block to another thread; 0 when its queue is full (the caller frees it). */
static int hand_over(int to, void *p, size_t size) {
  queue_t *q = &queues[to];
  int ok = 0;
  pthread_mutex_lock(&q->mu);
  if (q->n < QCAP) {
    q->items[q->n].p = p;
    q->items[q->n].size = size;
    q->n++;
    ok = 1;
  }
  pthread_mutex_unlock(&q->mu);
  return ok;
}

static void drain(worker_t *w) {
  queue_t *q = &queues[w->id];
  item_t local[QCAP];  /* 64 KiB of stack: threads here have the default 8 MiB */
  pthread_mutex_lock(&q->mu);
  int n = q->n;
  memcpy(local, q->items, (size_t)n * sizeof(item_t));
  q->n = 0;
  pthread_mutex_unlock(&q->mu);
  for (int i = 0; i < n; i++) {
    verify_and_free(w, local[i].p, local[i].size, "received");
    w->received++;
  }
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  item_t *slot = calloc(SLOTS, sizeof *slot);
  if (!slot) { w->corrupt++; return NULL; }
  uint64_t s = w->seed;
  for (long op = 0; op < w->ops; op++) {
    if ((op & 15) == 0) drain(w);
    item_t *it = &slot[alloc_rng(&s) % SLOTS];
    if (!it->p) {
      size_t size = alloc_rand_size(&s);
      void *p = NULL;
      if (alloc_rng(&s) % 10 == 0) {
        /* one in ten aligned, 16 B .. 64 KiB: aligned blocks are freed remotely too */
        size_t align = (size_t)16 << (alloc_rng(&s) % 13);
        if (posix_memalign(&p, align, size) != 0) p = NULL;
        if (p && (uintptr_t)p % align) {
          fprintf(stderr, "thread %d: posix_memalign(%zu, %zu) = %p\n", w->id, align, size, p);
          w->corrupt++;
        }
      } else {
        p = malloc(size);
      }
      if (!p) { fprintf(stderr, "thread %d: allocation of %zu failed\n", w->id, size); w->corrupt++; continue; }
      block_fill(p, size);
      it->p = p;
      it->size = size;
      w->allocs++;
      atomic_fetch_add(&live_blocks, 1);
      continue;
    }
    unsigned what = (unsigned)(alloc_rng(&s) % 30);
    if (what < 10) {
      /* a third of the frees: the block goes to another thread, which checks and frees it */
      size_t bad = block_check(it->p, it->size);
      if (bad != (size_t)-1) {
        w->corrupt++;
        fprintf(stderr, "thread %d: block %p size %zu corrupted at offset %zu before hand-over\n",
                w->id, it->p, it->size, bad);
      }
      int to = (int)((unsigned)(w->id + 1 + alloc_rng(&s) % (unsigned)(nthreads - 1)) % (unsigned)nthreads);
      if (nthreads > 1 && hand_over(to, it->p, it->size)) w->handed++;
      else verify_and_free(w, it->p, it->size, "local");
      it->p = NULL;
    } else if (what < 13) {
      /* realloc keeps the common prefix; the block then gets the pattern of its new place */
      size_t bad = block_check(it->p, it->size);
      if (bad != (size_t)-1) { w->corrupt++; fprintf(stderr, "thread %d: %p corrupted before realloc\n", w->id, it->p); }
      size_t ns = alloc_rand_size(&s);
      void *old = it->p;
      void *np = realloc(old, ns);
      if (!np) { fprintf(stderr, "thread %d: realloc(%zu) failed\n", w->id, ns); w->corrupt++; continue; }
      size_t keep = it->size < ns ? it->size : ns;
      bad = block_check_as(np, old, it->size, keep);
      if (bad != (size_t)-1) {
        w->corrupt++;
        fprintf(stderr, "thread %d: realloc %zu -> %zu lost byte %zu\n", w->id, it->size, ns, bad);
      }
      block_fill(np, ns);
      it->p = np;
      it->size = ns;
      w->reallocs++;
    } else {
      verify_and_free(w, it->p, it->size, "local");
      it->p = NULL;
    }
  }
  drain(w);
  for (int i = 0; i < SLOTS; i++)
    if (slot[i].p) verify_and_free(w, slot[i].p, slot[i].size, "final");
  free(slot);
  atomic_fetch_sub(&running, 1);
  return NULL;
}

int main(int argc, char **argv) {
  long ops = 25000;
  uint64_t seed = 0x1234567;
  if (argc > 1) nthreads = atoi(argv[1]);
  if (argc > 2) ops = atol(argv[2]);
  if (argc > 3) seed = strtoull(argv[3], NULL, 0);
  if (argc > 4) sparse_mode = strcmp(argv[4], "sparse") == 0;
  if (nthreads < 1 || nthreads > 1024 || ops < 1 || (argc > 4 && !sparse_mode)) {
    fprintf(stderr, "usage: %s [threads 1..1024] [ops >= 1] [seed] [sparse]\n", argv[0]);
    return 2;
  }
  queues = calloc((size_t)nthreads, sizeof *queues);
  workers = calloc((size_t)nthreads, sizeof *workers);
  REQUIRE(queues && workers);
  for (int i = 0; i < nthreads; i++) {
    pthread_mutex_init(&queues[i].mu, NULL);
    workers[i].id = i;
    workers[i].seed = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 7919 + 1;
    workers[i].ops = ops;
  }
  atomic_store(&running, nthreads);
  for (int i = 0; i < nthreads; i++)
    REQUIRE(pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]) == 0);
  long trims = 0;
  while (atomic_load(&running) > 0) {
    /* not in sparse mode: a purge zeroes the leftovers that mode keeps for realloc to copy */
    if (!sparse_mode) {
      malloc_trim(0);
      trims++;
    }
    usleep(1000);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(workers[i].tid, NULL);

  /* Blocks handed to a thread after its last drain: main frees them (yet another thread). */
  worker_t mainw = {.id = -1};
  for (int i = 0; i < nthreads; i++) {
    for (int j = 0; j < queues[i].n; j++) {
      verify_and_free(&mainw, queues[i].items[j].p, queues[i].items[j].size, "leftover");
      mainw.received++;
    }
    queues[i].n = 0;
  }

  long allocs = 0, frees = mainw.frees, handed = 0, received = mainw.received, reallocs = 0,
       corrupt = mainw.corrupt;
  for (int i = 0; i < nthreads; i++) {
    allocs += workers[i].allocs;
    frees += workers[i].frees;
    handed += workers[i].handed;
    received += workers[i].received;
    reallocs += workers[i].reallocs;
    corrupt += workers[i].corrupt;
  }
  printf("mt_stress: %d threads x %ld ops, seed %#llx%s: %ld mallocs, %ld frees (%ld by another "
         "thread), %ld reallocs, %ld corrupt, %ld malloc_trim calls meanwhile\n",
         nthreads, ops, (unsigned long long)seed, sparse_mode ? ", sparse" : "", allocs, frees, received, reallocs, corrupt, trims);
  CHECK(corrupt == 0);
  CHECK(allocs == frees);
  CHECK(handed == received);
  CHECK(atomic_load(&live_blocks) == 0);
  /* about a third of the frees crossed threads (10 of the 30 outcomes, minus full queues) */
  CHECK_MSG(nthreads == 1 || received * 5 >= frees, "only %ld of %ld frees were remote", received, frees);

  alloc_api_t api = alloc_api();
  if (api.validate) {
    int v = api.validate();
    CHECK_MSG(v == 0, "larder_validate() found %d violation(s)", v);
    larder_stats_t st;
    api.stats_get(&st);
    printf("larder: remote_frees %zu, bytes_in_use %zu, bytes_held %zu, to_global %zu, "
           "from_global %zu\n", st.remote_frees, st.bytes_in_use, st.bytes_held,
           st.superblocks_to_global, st.superblocks_from_global);
    /* the remote frees must have gone through larder's remote path */
    CHECK_MSG(nthreads == 1 || st.remote_frees > 0, "remote_frees is 0");
  }
  free(queues);
  free(workers);
  return check_done();
}
