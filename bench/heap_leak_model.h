/* Lever & Boreham's lower-bound predictor of minor page faults for benchmark 2
 * (seed 000 §5.2): mpf_lower = a + b*t*r + c*t, fitted by the seed on single-thread runs as
 * a = 14 (one thread, one round, a one-block array), b = 1.1 (each round, per thread: the
 * pthread_create), c = 127.6 (10,000 40-byte objects and their array, per thread). */
#ifndef LARDER_BENCH_HEAP_LEAK_MODEL_H
#define LARDER_BENCH_HEAP_LEAK_MODEL_H

#define HEAP_LEAK_MPF_A 14.0
#define HEAP_LEAK_MPF_B 1.1
#define HEAP_LEAK_MPF_C 127.6

/* threads = t, the initial number of threads; rounds = r, the number of thread generations. */
double heap_leak_mpf_lower(double a, double b, double c, unsigned long threads,
                           unsigned long rounds);

#endif
