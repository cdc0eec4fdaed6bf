/* A tiny check helper: CHECK(cond) reports file:line and the condition, and the test
 * exits non-zero at the end (check_done()). One test file per concern. */
#ifndef LARDER_CHECK_H
#define LARDER_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond) \
  do { if (!(cond)) { check_failures++; \
       fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_MSG(cond, ...) \
  do { if (!(cond)) { check_failures++; \
       fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Stops the test at once: for conditions after which nothing else can be checked. */
#define REQUIRE(cond) \
  do { if (!(cond)) { fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
       exit(1); } } while (0)

static inline int check_done(void) {
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}

#endif
