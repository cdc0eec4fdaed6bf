/* heap-leak's lower-bound predictor (seed 000 §5.2: mpf_lower = 14 + 1.1tr + 127.6t) against
 * values worked out by hand, including the seed's own check: three threads start at about 399
 * faults and add 3 per round. */
#include "check.h"
#include "heap_leak_model.h"

#include <math.h>

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

int main(void) {
  const double A = HEAP_LEAK_MPF_A, B = HEAP_LEAK_MPF_B, C = HEAP_LEAK_MPF_C;
  CHECK(A == 14.0 && B == 1.1 && C == 127.6);
  /* t = 1, r = 1: 14 + 1.1 + 127.6 */
  CHECK(near(heap_leak_mpf_lower(A, B, C, 1, 1), 142.7));
  /* t = 1, r = 8: 14 + 8.8 + 127.6 */
  CHECK(near(heap_leak_mpf_lower(A, B, C, 1, 8), 150.4));
  /* t = 3, r = 1: 14 + 3.3 + 382.8 = 400.1, the seed's "starts at 399" */
  CHECK(near(heap_leak_mpf_lower(A, B, C, 3, 1), 400.1));
  /* each extra round with three threads adds 3 * 1.1 */
  CHECK(near(heap_leak_mpf_lower(A, B, C, 3, 2) - heap_leak_mpf_lower(A, B, C, 3, 1), 3.3));
  /* t = 7, r = 8: 14 + 61.6 + 893.2 */
  CHECK(near(heap_leak_mpf_lower(A, B, C, 7, 8), 968.8));
  /* recalibrated constants are used as given: 1 + 2*3*4 + 5*3 */
  CHECK(near(heap_leak_mpf_lower(1, 2, 5, 3, 4), 40.0));
  CHECK(near(heap_leak_mpf_lower(0, 0, 0, 100, 100), 0.0));
  return check_done();
}
