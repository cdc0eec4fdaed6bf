/* See frag.h. Kept apart from the replayer so that tests can feed it known series. */
#include "frag.h"

static double frag_pct(double heap, double live) { return live > 0 ? (heap / live - 1.0) * 100.0 : 0.0; }

struct ltr_frag ltr_fragmentation(const struct ltr_frag_sample *s, size_t n, int64_t peak_live,
                                  uint64_t peak_heap) {
  struct ltr_frag f = {0, 0, 0, 0};
  double sum = 0;
  size_t regular = 0;
  const struct ltr_frag_sample *at_live = NULL, *at_heap = NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i].live <= 0) continue;
    if (s[i].regular) { sum += frag_pct((double)s[i].heap, (double)s[i].live); regular++; }
    if (!at_live || s[i].live > at_live->live) at_live = &s[i];
    if (!at_heap || s[i].heap > at_heap->heap) at_heap = &s[i];
  }
  if (regular) f.average = sum / (double)regular;
  if (at_live) f.at_peak_live = frag_pct((double)at_live->heap, (double)at_live->live);
  if (at_heap) f.at_peak_heap = frag_pct((double)at_heap->heap, (double)at_heap->live);
  f.peak_heap_over_peak_live = frag_pct((double)peak_heap, (double)peak_live);
  return f;
}
