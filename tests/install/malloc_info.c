/* Writes malloc_info's XML for check_malloc_info.py after some allocations of each kind, and
 * checks the error contract (EINVAL for options other than 0). Linked with liblarder.a, or
 * built against libc alone and run with liblarder.so preloaded (LARDER_TEST_PRELOADED). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL 2000
static void *small[SMALL];
static void *large[4];

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.xml\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < SMALL; i++) {
    small[i] = malloc(16 + (size_t)(i % 200) * 8);
    if (!small[i]) return 1;
    memset(small[i], 1, 16);
  }
  for (int i = 0; i < 4; i++) {
    large[i] = malloc((size_t)(2 + i) << 20); /* past the segment limit: large spans */
    if (!large[i]) return 1;
    memset(large[i], 1, 4096);
  }
  for (int i = 0; i < SMALL; i += 2) free(small[i]);

  if (malloc_info(1, stdout) != EINVAL) {
    fprintf(stderr, "malloc_info(1, fp) did not return EINVAL\n");
    return 1;
  }
  FILE *fp = fopen(argv[1], "w");
  if (!fp) {
    perror(argv[1]);
    return 1;
  }
  int rc = malloc_info(0, fp);
  fclose(fp);
  if (rc != 0) {
    fprintf(stderr, "malloc_info(0, fp) returned %d\n", rc);
    return 1;
  }
  printf("malloc_info written to %s\n", argv[1]);
  for (int i = 1; i < SMALL; i += 2) free(small[i]);
  for (int i = 0; i < 4; i++) free(large[i]);
  return 0;
}
