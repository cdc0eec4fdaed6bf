/* The seed's predictor, kept apart from the program so that tests/bench can check it. */
#include "heap_leak_model.h"

double heap_leak_mpf_lower(double a, double b, double c, unsigned long threads,
                           unsigned long rounds) {
  /* seed 000 §5.2: mpf_lower = 14 + 1.1tr + 127.6t */
  const double t = (double)threads, r = (double)rounds;
  return a + b * t * r + c * t;
}
