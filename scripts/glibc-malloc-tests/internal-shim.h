/* Stand-ins for the few glibc-internal macros that malloc's test helpers (dynarray,
   alloc_buffer, scratch_buffer) use, so that they build as ordinary programs against the
   installed glibc.  Forced into every compile by scripts/glibc-malloc-tests.sh (-include).  */
#ifndef GLIBC_MALLOC_TESTS_INTERNAL_SHIM_H
#define GLIBC_MALLOC_TESTS_INTERNAL_SHIM_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Symbol-visibility bookkeeping of libc.so: meaningless outside it.  */
#define libc_hidden_proto(name)
#define libc_hidden_def(name)

#define __set_errno(val) (errno = (val))
#define __snprintf snprintf

/* libc's fatal-error path; dynarray_at_failure reports an out-of-range index with it.  */
static inline void __attribute__ ((noreturn))
__libc_fatal (const char *message)
{
  fputs (message, stderr);
  abort ();
}
#endif
