/* Fragmentation by the four definitions of seed 003 §3.7.2 (after Johnstone and Wilson),
 * from samples of (live bytes, heap bytes) taken while a trace is replayed. Each is given as
 * a percentage over and above live memory: (heap / live - 1) * 100. */
#ifndef LARDER_FRAG_H
#define LARDER_FRAG_H

#include <stddef.h>
#include <stdint.h>

struct ltr_frag_sample { int64_t live; uint64_t heap; int regular; };

struct ltr_frag {
  double peak_heap_over_peak_live;  /* 4: max heap / max live; the two need not coincide */
  double average;                   /* 1: mean of heap/live over the regular samples */
  double at_peak_live;              /* 2: heap / live at the sample of maximum live */
  double at_peak_heap;              /* 3: heap / live at the sample of maximum heap */
};

/* peak_live and peak_heap are the run's maxima (peak_live is counted exactly, not sampled);
 * samples with no live bytes are skipped, as a ratio to zero means nothing. */
struct ltr_frag ltr_fragmentation(const struct ltr_frag_sample *s, size_t n, int64_t peak_live,
                                  uint64_t peak_heap);

#endif
