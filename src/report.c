/* Messages from inside the allocator: formatted on the stack and written straight to stderr,
 * because the allocator cannot call anything that might allocate while it reports. */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void ld_message(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  ld_os_write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* An invalid or double free: continuing would corrupt the heap, so the program stops here,
 * with the address, where a debugger or a core file shows the caller. */
void ld_fatal_bad_free(const char *what, const void *p) {
  ld_message("larder: %s of %p; stopping the program\n", what, p);
  abort();
}
