/* Loading a trace for replay: validation, the per-thread merge, and object numbering.
 *
 * The recorder writes per-thread blocks; this merges them by timestamp into one sequence
 * (seed 004 §5.4) and gives every allocation a number, so that the replayer indexes a table
 * instead of hashing recorded addresses while it is being timed. Everything is allocated with
 * mmap and listed in a region table, so the replayer can tell its own resident pages from the
 * heap's (seed 003 §5.4 measures the heap alone). */
#ifndef LARDER_TRACE_READ_H
#define LARDER_TRACE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "trace_format.h"

#define LTR_NONE UINT32_MAX

/* One operation of the merged trace. Frees of addresses the trace never allocated are left
 * out (and counted); a realloc(p, 0) that returned NULL becomes a free. */
struct ltr_event {
  uint64_t size;        /* bytes requested (calloc: count*size) */
  uint32_t obj_in;      /* object released (free, realloc), else LTR_NONE */
  uint32_t obj_out;     /* object produced, else LTR_NONE (free; a call that failed) */
  uint32_t thread;      /* index of the recorded thread, 0.. */
  uint8_t kind;         /* enum ltr_op */
  uint8_t align_log2;
  uint16_t pad;
};

struct ltr_trace {
  struct ltr_header header;
  uint64_t records;            /* records in the file */
  uint64_t blocks;
  struct ltr_event *ops;          /* merged order */
  uint64_t nops;
  uint32_t nthreads;
  uint32_t *thread_tid;        /* [nthreads] kernel tid of each recorded thread */
  uint64_t *thread_nops;       /* [nthreads] ops of each thread */
  uint64_t nobjects;
  uint64_t *obj_size;          /* [nobjects] requested size */
  uint32_t *obj_thread;        /* [nobjects] thread that allocated it */
  uint64_t *obj_pos;           /* [nobjects] index of the allocating op in that thread's ops */
  uint64_t *obj_addr;          /* [nobjects] address the recorded allocator returned (trace-frag) */
  uint64_t op_counts[LTR_OP_MAX + 1];
  uint64_t unknown_frees;      /* free/realloc of an address the trace never allocated */
  uint64_t null_frees;         /* free(NULL): replayed, cheap */
  uint64_t alloc_of_live;      /* an allocation returned an address already live in the trace */
  uint64_t overlaps_resolved;  /* of those, pairs whose two objects were both freed later */
  uint64_t failed_allocs;      /* the recorded call returned NULL */
  uint64_t peak_live;          /* bytes live at the trace's peak, in merged order */
  uint64_t end_live;           /* bytes never freed */
  uint64_t duration;           /* last timestamp, in record units (ticks or ns) */
};

/* Loads and checks path (plain or gzip-compressed). On failure returns -1 with a message in
 * err that names the byte offset of the problem. */
int ltr_load(const char *path, struct ltr_trace *t, char *err, size_t errlen);

/* Anonymous memory that belongs to the replayer, not to the allocator being measured. */
void *ltr_map(size_t bytes);
void ltr_unmap(void *p, size_t bytes);
/* Resident bytes of every region ltr_map handed out (mincore). */
uint64_t ltr_own_resident(void);

const char *ltr_op_name(unsigned op);

/* A u64 -> u32 hash map over ltr_map memory (open addressing; key 0 means empty, so callers
 * never store 0). The loader uses it for addresses; trace-frag for superblocks and pages. */
struct ltr_map64 { uint64_t *keys; uint32_t *vals; size_t cap, n; };
int ltr_map_init(struct ltr_map64 *m, size_t cap);      /* cap: a power of two */
void ltr_map_free(struct ltr_map64 *m);
uint32_t *ltr_map_find(struct ltr_map64 *m, uint64_t key);
int ltr_map_put(struct ltr_map64 *m, uint64_t key, uint32_t val);
void ltr_map_del(struct ltr_map64 *m, uint64_t key);

#endif
