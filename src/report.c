/* Messages from inside the allocator: formatted on the stack and written straight to stderr,
 * because the allocator cannot call anything that might allocate while it reports.
 *
 * Two promises (issue 12):
 *   - a message cut at the length limit still ends its line: the cut is marked with "..." and
 *     the newline the message was written with is kept, so the program's next output does not
 *     glue itself to the warning;
 *   - a message comes out even when the calling thread has a cancellation pending: write(2)
 *     is a cancellation point, and ld_os_write (os.c) disables cancellation around it (deferred
 *     cancellation would otherwise unwind the thread inside the allocator, halfway through a
 *     report, and a fatal message would be lost before abort()). */
#define _GNU_SOURCE
#include "internal.h"
#include "os.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_MAX 512

void ld_message(const char *fmt, ...) {
  char buf[REPORT_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = (size_t)n;
  if (len >= sizeof buf) {
    /* Cut: vsnprintf kept sizeof buf - 1 characters. Mark the cut, and end the line when the
     * message was a line (every message of larder's is, but a caller may build one in parts). */
    static const char cut_line[] = "...\n", cut[] = "...";
    size_t fl = strlen(fmt);
    int line = fl > 0 && fmt[fl - 1] == '\n';
    const char *mark = line ? cut_line : cut;
    size_t ml = line ? sizeof cut_line - 1 : sizeof cut - 1;
    len = sizeof buf - 1;
    memcpy(buf + len - ml, mark, ml);
  }
  ld_os_write(2, buf, len);
}

/* An invalid or double free: continuing would corrupt the heap, so the program stops here,
 * with the address, where a debugger or a core file shows the caller. */
void ld_fatal_bad_free(const char *what, const void *p) {
  ld_message("larder: %s of %p; stopping the program\n", what, p);
  abort();
}
