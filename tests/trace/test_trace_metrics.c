/* Fragmentation (seed 003 §3.7.2) on a hand-made series with known answers, and the trace
 * loader on a hand-made trace: merge order, object numbering, peak live bytes, frees of
 * addresses the trace never allocated, and the byte offset named for each kind of damage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "frag.h"
#include "trace_read.h"

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static void test_definitions(void) {
  /* live:  100, 200, 400, 300 (regular samples), heap: 150, 220, 440, 480
   * 1: mean(50, 10, 10, 60) = 32.5 %
   * 2: at max live (400): 440/400 -> 10 %
   * 3: at max heap (480): 480/300 -> 60 %
   * 4: max heap 480 / peak live 400 (counted exactly) -> 20 % */
  struct ltr_frag_sample s[] = {{0, 50, 0}, {100, 150, 1}, {200, 220, 1}, {400, 440, 1}, {300, 480, 1}};
  struct ltr_frag f = ltr_fragmentation(s, 5, 400, 480);
  CHECK_MSG(near(f.average, 32.5), "%f", f.average);
  CHECK_MSG(near(f.at_peak_live, 10.0), "%f", f.at_peak_live);
  CHECK_MSG(near(f.at_peak_heap, 60.0), "%f", f.at_peak_heap);
  CHECK_MSG(near(f.peak_heap_over_peak_live, 20.0), "%f", f.peak_heap_over_peak_live);
  /* the thesis's Table 6-1: ptmalloc2 124452 KB over 116903 KB live -> 6.46 % */
  f = ltr_fragmentation(NULL, 0, 116903, 124452);
  CHECK_MSG(fabs(f.peak_heap_over_peak_live - 6.46) < 0.005, "%f", f.peak_heap_over_peak_live);
  CHECK(f.average == 0 && f.at_peak_live == 0);
}

/* ---- hand-made traces ---- */
struct rec { uint64_t t, in, out; unsigned op; uint64_t size; unsigned align; };

static size_t put_header(unsigned char *buf, uint16_t version) {
  struct ltr_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, LTR_MAGIC, 8);
  h.version = version;
  h.header_size = LTR_HEADER_SIZE;
  h.record_size = LTR_RECORD_SIZE;
  h.pid = 42;
  memcpy(buf, &h, sizeof h);
  return sizeof h;
}

static size_t put_block(unsigned char *buf, uint32_t tid, uint32_t seq, const struct rec *r, uint32_t n) {
  struct ltr_block b = {LTR_BLOCK_MAGIC, tid, n, seq, 0, 0};
  memcpy(buf, &b, sizeof b);
  for (uint32_t i = 0; i < n; i++) {
    struct ltr_record x = {r[i].t, r[i].in, r[i].out, ltr_pack(r[i].op, r[i].size, r[i].align)};
    memcpy(buf + sizeof b + i * sizeof x, &x, sizeof x);
  }
  return sizeof b + n * sizeof(struct ltr_record);
}

static const char *write_tmp(const unsigned char *buf, size_t len) {
  static char path[64];
  strcpy(path, "/tmp/larder-trace-test-XXXXXX");
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, buf, len) == (ssize_t)len);
  close(fd);
  return path;
}

/* Thread A (seq 0) allocates a (100) and b (50); thread B (seq 1) frees a (a cross-thread
 * free), allocates c (300), reallocs c to 500 at another address, frees 0xdead (never
 * allocated) and frees NULL. Blocks are out of time order in the file, as real ones are. */
static size_t build_good(unsigned char *buf) {
  size_t n = put_header(buf, LTR_VERSION);
  struct rec b1[] = {{40, 0xa0, 0, LTR_FREE, 0, 0}, {50, 0, 0xc0, LTR_MALLOC, 300, 0},
                     {60, 0xc0, 0xd0, LTR_REALLOC, 500, 0}, {70, 0xdead, 0, LTR_FREE, 0, 0},
                     {80, 0, 0, LTR_FREE, 0, 0}};
  struct rec a1[] = {{10, 0, 0xa0, LTR_MALLOC, 100, 0}, {20, 0, 0xb0, LTR_POSIX_MEMALIGN, 50, 6}};
  n += put_block(buf + n, 202, 1, b1, 5);
  n += put_block(buf + n, 101, 0, a1, 2);
  return n;
}

static void test_loader(void) {
  unsigned char buf[4096];
  size_t len = build_good(buf);
  struct ltr_trace t;
  char err[256];
  const char *path = write_tmp(buf, len);
  REQUIRE(ltr_load(path, &t, err, sizeof err) == 0);
  unlink(path);
  CHECK(t.records == 7);
  CHECK(t.nthreads == 2);
  CHECK_MSG(t.nops == 6, "%llu", (unsigned long long)t.nops);   /* the free of 0xdead is dropped */
  CHECK(t.unknown_frees == 1);
  CHECK(t.null_frees == 1);
  CHECK(t.nobjects == 4);                 /* a, b, c, c' */
  /* live: 100, 150, 50 (a freed), 350 (c), 550 (c -> 500): peak 550, end 550 */
  CHECK_MSG(t.peak_live == 550, "%llu", (unsigned long long)t.peak_live);
  CHECK(t.end_live == 550);
  /* merged by time: A's two ops come first although their block is second in the file */
  CHECK(t.ops[0].kind == LTR_MALLOC && t.ops[0].size == 100 && t.ops[0].thread == 1);
  CHECK(t.ops[1].kind == LTR_POSIX_MEMALIGN && t.ops[1].align_log2 == 6);
  CHECK(t.ops[2].kind == LTR_FREE && t.ops[2].obj_in == t.ops[0].obj_out && t.ops[2].thread == 0);
  CHECK(t.ops[4].kind == LTR_REALLOC && t.ops[4].obj_in == t.ops[3].obj_out);
  /* faithful replay needs the producer of each object: a was A's first op */
  CHECK(t.obj_thread[t.ops[0].obj_out] == 1 && t.obj_pos[t.ops[0].obj_out] == 0);
  CHECK(t.obj_thread[t.ops[3].obj_out] == 0 && t.obj_pos[t.ops[3].obj_out] == 1);
}

static void expect_error(const unsigned char *buf, size_t len, const char *want) {
  struct ltr_trace t;
  char err[256] = "";
  const char *path = write_tmp(buf, len);
  int rc = ltr_load(path, &t, err, sizeof err);
  unlink(path);
  CHECK_MSG(rc == -1 && strstr(err, want), "wanted \"%s\", got rc %d \"%s\"", want, rc, err);
}

static void test_damage(void) {
  unsigned char buf[4096], bad[4096];
  size_t len = build_good(buf);
  /* first block header at 64, its records at 96, 128, ...; the second block at 64+32+5*32 = 256 */
  expect_error(buf, 40, "byte 40: truncated header");
  memcpy(bad, buf, len); bad[8] = 7;
  expect_error(bad, len, "byte 8: unsupported trace version 7");
  memcpy(bad, buf, len); bad[0] = 'X';
  expect_error(bad, len, "byte 0: not a larder trace");
  expect_error(buf, len - 10, "byte 256: truncated block");
  expect_error(buf, 64 + 20, "byte 64: truncated block header");
  memcpy(bad, buf, len); bad[256] ^= 0xff;
  expect_error(bad, len, "byte 256: bad block magic");
  memcpy(bad, buf, len); bad[128 + 30] = 77;     /* the op byte of the second record */
  expect_error(bad, len, "byte 158: unknown operation 77");
}

int main(void) {
  test_definitions();
  test_loader();
  test_damage();
  return check_done();
}
