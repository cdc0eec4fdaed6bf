/* The larder trace file format, version 1 (docs/trace-format.md is the reference).
 *
 * A file is one 64-byte header followed by blocks. Each block is what one thread's buffer
 * held when it was flushed: a 32-byte block header naming the thread and carrying one clock
 * calibration point, then `count` fixed 32-byte records in that thread's order. Blocks of different threads interleave, so a reader
 * merges them by timestamp, as Hoard merges its per-heap traces offline (seed 004 §5.4).
 * Every integer is little-endian. */
#ifndef LARDER_TRACE_FORMAT_H
#define LARDER_TRACE_FORMAT_H

#include <stdint.h>

#define LTR_MAGIC        "LRDTRACE"   /* 8 bytes, no terminator in the file */
#define LTR_VERSION      1u
#define LTR_HEADER_SIZE  64u
#define LTR_BLOCK_MAGIC  0x314b4c42u  /* "BLK1" read as a little-endian u32 */
#define LTR_BLOCK_SIZE   32u
#define LTR_RECORD_SIZE  32u

#define LTR_SIZE_BITS    48
#define LTR_SIZE_MAX     ((UINT64_C(1) << LTR_SIZE_BITS) - 1) /* larger requests saturate */
#define LTR_ALIGN_BAD    0xffu        /* alignment that is not a power of two */

/* Header flag: record times are CPU timestamp-counter ticks since the start (x86 with a TSC
 * the kernel trusts as its clocksource), not nanoseconds. Ticks order events across threads
 * exactly as nanoseconds would; the (ticks, ns) pair in every block header converts them. */
#define LTR_FLAG_TSC     1u

enum ltr_op {
  LTR_MALLOC = 1,
  LTR_CALLOC = 2,
  LTR_REALLOC = 3,
  LTR_REALLOCARRAY = 4,
  LTR_FREE = 5,
  LTR_POSIX_MEMALIGN = 6,
  LTR_ALIGNED_ALLOC = 7,
  LTR_MEMALIGN = 8,
  LTR_VALLOC = 9,
  LTR_PVALLOC = 10,
  LTR_OP_MAX = 10
};

struct ltr_header {
  char     magic[8];
  uint16_t version;
  uint16_t header_size;
  uint16_t record_size;
  uint16_t flags;          /* LTR_FLAG_TSC; readers ignore unknown bits */
  uint32_t pid;
  uint32_t ppid;
  uint64_t start_ns;       /* CLOCK_MONOTONIC when the file was opened */
  uint64_t proc_start;     /* /proc/self/stat starttime: the same across exec, so an exec'd
                              image can tell that a file with its pid is its own predecessor's */
  uint32_t exec_seq;       /* 0 for the process's first image, n for the n-th exec'd image */
  uint32_t root_pid;       /* pid of the process that started the recorded process tree (0 in
                              files written before this field existed) */
  char     comm[16];       /* program name, NUL-padded */
};

struct ltr_block {
  uint32_t magic;
  uint32_t tid;            /* kernel thread id */
  uint32_t count;          /* records that follow */
  uint32_t thread_seq;     /* 0 for the first thread that allocated, 1 for the next, ... */
  uint64_t clock_ticks;    /* the clock, in record units, when the block was written ... */
  uint64_t clock_ns;       /* ... and CLOCK_MONOTONIC - start_ns at the same moment */
};

struct ltr_record {
  uint64_t t;              /* ticks (LTR_FLAG_TSC) or ns since the file was opened */
  uint64_t addr_in;        /* the pointer given (free, realloc), else 0 */
  uint64_t addr_out;       /* the pointer returned (0 for free and for failures) */
  uint64_t packed;         /* size:48 | op:8 | log2(alignment):8 */
};

static inline uint64_t ltr_pack(unsigned op, uint64_t size, unsigned align_log2) {
  if (size > LTR_SIZE_MAX) size = LTR_SIZE_MAX;
  return size | ((uint64_t)(op & 0xffu) << 48) | ((uint64_t)(align_log2 & 0xffu) << 56);
}
static inline uint64_t ltr_size(uint64_t packed) { return packed & LTR_SIZE_MAX; }
static inline unsigned ltr_op(uint64_t packed) { return (unsigned)(packed >> 48) & 0xffu; }
static inline unsigned ltr_align_log2(uint64_t packed) { return (unsigned)(packed >> 56); }

_Static_assert(sizeof(struct ltr_header) == LTR_HEADER_SIZE, "header is 64 bytes");
_Static_assert(sizeof(struct ltr_block) == LTR_BLOCK_SIZE, "block header is 32 bytes");
_Static_assert(sizeof(struct ltr_record) == LTR_RECORD_SIZE, "record is 32 bytes");

#endif
