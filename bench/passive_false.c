/* passive-false (seed 004 §5.3): active-false preceded by handing each thread an object the
 * main thread allocated, which the thread frees at once. The program is active_false.c with
 * the passive step switched on; see the comment there. */
#define HF_PASSIVE 1
#include "active_false.c"
