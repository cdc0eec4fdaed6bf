/* Trace loading for the replayer: see trace_read.h. No malloc here: every table comes from
 * ltr_map so that the replayer's own memory can be subtracted from the heap's RSS. */
#define _GNU_SOURCE
#include "trace_read.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the replayer's own regions ---- */
#define LTR_MAX_REGIONS 256
static struct { void *p; size_t len; } ltr_regions[LTR_MAX_REGIONS];

static size_t ltr_page(void) {
  static size_t page;
  if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

void *ltr_map(size_t bytes) {
  if (bytes == 0) bytes = 1;
  bytes = (bytes + ltr_page() - 1) & ~(ltr_page() - 1);
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  for (int i = 0; i < LTR_MAX_REGIONS; i++)
    if (!ltr_regions[i].p) { ltr_regions[i].p = p; ltr_regions[i].len = bytes; return p; }
  munmap(p, bytes);   /* more regions than we track: refuse rather than miscount */
  return NULL;
}

void ltr_unmap(void *p, size_t bytes) {
  if (!p) return;
  for (int i = 0; i < LTR_MAX_REGIONS; i++)
    if (ltr_regions[i].p == p) { munmap(p, ltr_regions[i].len); ltr_regions[i].p = NULL; return; }
  (void)bytes;
}

/* Grows a region (mremap may move it); keeps the region table right. */
static void *ltr_remap(void *p, size_t old_len, size_t new_len) {
  new_len = (new_len + ltr_page() - 1) & ~(ltr_page() - 1);
  for (int i = 0; i < LTR_MAX_REGIONS; i++)
    if (ltr_regions[i].p == p) {
      void *q = mremap(p, ltr_regions[i].len, new_len, MREMAP_MAYMOVE);
      if (q == MAP_FAILED) return NULL;
      ltr_regions[i].p = q;
      ltr_regions[i].len = new_len;
      return q;
    }
  (void)old_len;
  return NULL;
}

uint64_t ltr_own_resident(void) {
  static unsigned char vec[1 << 16];
  uint64_t pages = 0;
  size_t page = ltr_page();
  for (int i = 0; i < LTR_MAX_REGIONS; i++) {
    if (!ltr_regions[i].p) continue;
    size_t npages = ltr_regions[i].len / page;
    for (size_t at = 0; at < npages; at += sizeof vec) {
      size_t chunk = npages - at < sizeof vec ? npages - at : sizeof vec;
      if (mincore((char *)ltr_regions[i].p + at * page, chunk * page, vec) != 0) break;
      for (size_t k = 0; k < chunk; k++) pages += vec[k] & 1;
    }
  }
  return pages * page;
}

const char *ltr_op_name(unsigned op) {
  static const char *names[] = {"?", "malloc", "calloc", "realloc", "reallocarray", "free",
                                "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc"};
  return op <= LTR_OP_MAX ? names[op] : "?";
}

static int ltr_fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- u64 -> u32 hash map (open addressing, linear probing, backward-shift delete) ---- */

static uint64_t ltr_hash(uint64_t k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
  return k;
}

int ltr_map_init(struct ltr_map64 *m, size_t cap) {
  m->cap = cap; m->n = 0;
  m->keys = ltr_map(cap * sizeof *m->keys);
  m->vals = ltr_map(cap * sizeof *m->vals);
  return m->keys && m->vals ? 0 : -1;
}
void ltr_map_free(struct ltr_map64 *m) {
  ltr_unmap(m->keys, m->cap * sizeof *m->keys);
  ltr_unmap(m->vals, m->cap * sizeof *m->vals);
}
/* key 0 is "empty": callers never store 0 (a NULL address; thread keys are offset by 1) */
uint32_t *ltr_map_find(struct ltr_map64 *m, uint64_t key) {
  size_t mask = m->cap - 1;
  for (size_t i = ltr_hash(key) & mask;; i = (i + 1) & mask) {
    if (m->keys[i] == key) return &m->vals[i];
    if (m->keys[i] == 0) return NULL;
  }
}
static int ltr_map_grow(struct ltr_map64 *m) {
  struct ltr_map64 bigger;
  if (ltr_map_init(&bigger, m->cap * 2)) return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) ltr_map_put(&bigger, m->keys[i], m->vals[i]);
  ltr_map_free(m);
  *m = bigger;
  return 0;
}
int ltr_map_put(struct ltr_map64 *m, uint64_t key, uint32_t val) {
  if ((m->n + 1) * 2 > m->cap && ltr_map_grow(m)) return -1;
  size_t mask = m->cap - 1;
  for (size_t i = ltr_hash(key) & mask;; i = (i + 1) & mask) {
    if (m->keys[i] == key) { m->vals[i] = val; return 0; }
    if (m->keys[i] == 0) { m->keys[i] = key; m->vals[i] = val; m->n++; return 0; }
  }
}
void ltr_map_del(struct ltr_map64 *m, uint64_t key) {
  size_t mask = m->cap - 1, i = ltr_hash(key) & mask;
  while (m->keys[i] != key) { if (!m->keys[i]) return; i = (i + 1) & mask; }
  /* backward shift: pull later entries of the probe run into the hole */
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (!m->keys[j]) break;
    size_t home = ltr_hash(m->keys[j]) & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->keys[i] = m->keys[j]; m->vals[i] = m->vals[j]; i = j;
    }
  }
  m->keys[i] = 0;
  m->n--;
}

/* ---- reading the bytes ---- */
static unsigned char *ltr_read_gzip(const char *path, size_t *len_out, char *err, size_t errlen) {
  int fds[2];
  if (pipe(fds)) { ltr_fail(err, errlen, "%s: pipe: %s", path, strerror(errno)); return NULL; }
  pid_t pid = fork();
  if (pid < 0) { ltr_fail(err, errlen, "%s: fork: %s", path, strerror(errno)); return NULL; }
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]); close(fds[1]);
    execlp("gzip", "gzip", "-dc", "--", path, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t cap = 1 << 24, len = 0;
  unsigned char *buf = ltr_map(cap);
  while (buf) {
    if (len == cap) {
      buf = ltr_remap(buf, cap, cap * 2);
      cap *= 2;
      if (!buf) break;
    }
    ssize_t r = read(fds[0], buf + len, cap - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!buf) { ltr_fail(err, errlen, "%s: out of memory decompressing", path); return NULL; }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ltr_unmap(buf, cap);
    ltr_fail(err, errlen, "%s: gzip -dc failed (status %d): corrupt or truncated .gz", path,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return NULL;
  }
  *len_out = len;
  return buf;
}

/* ---- the per-thread merge (a binary heap over each thread's next record) ---- */
struct ltr_cursor { const uint64_t *idx; uint64_t at, n; };

static uint64_t ltr_head_time(const unsigned char *data, const struct ltr_cursor *c) {
  struct ltr_record r;
  memcpy(&r, data + c->idx[c->at], sizeof r);
  return r.t;
}

static void ltr_sift(uint32_t *heap, uint32_t n, uint32_t i, const uint64_t *key) {
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && (key[heap[l]] < key[heap[m]] || (key[heap[l]] == key[heap[m]] && heap[l] < heap[m]))) m = l;
    if (r < n && (key[heap[r]] < key[heap[m]] || (key[heap[r]] == key[heap[m]] && heap[r] < heap[m]))) m = r;
    if (m == i) return;
    uint32_t tmp = heap[i]; heap[i] = heap[m]; heap[m] = tmp;
    i = m;
  }
}

int ltr_load(const char *path, struct ltr_trace *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ltr_fail(err, errlen, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return ltr_fail(err, errlen, "%s: not a regular file", path);
  }
  size_t len = (size_t)st.st_size, map_len = len;
  unsigned char *data = NULL;
  int from_gzip = 0;
  unsigned char magic2[2] = {0, 0};
  if (len >= 2 && pread(fd, magic2, 2, 0) == 2 && magic2[0] == 0x1f && magic2[1] == 0x8b) {
    close(fd);
    data = ltr_read_gzip(path, &len, err, errlen);
    if (!data) return -1;
    map_len = len;
    from_gzip = 1;
  } else if (len > 0) {
    data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return ltr_fail(err, errlen, "%s: mmap: %s", path, strerror(errno));
  } else {
    close(fd);
  }
  int rc = -1;
#define FAIL(...) do { ltr_fail(err, errlen, __VA_ARGS__); goto out; } while (0)

  /* header */
  if (len < 8 || memcmp(data, LTR_MAGIC, 8) != 0)
    FAIL("%s: byte 0: not a larder trace (magic \"LRDTRACE\" missing)", path);
  if (len < LTR_HEADER_SIZE)
    FAIL("%s: byte %zu: truncated header (%zu of %u bytes)", path, len, len, LTR_HEADER_SIZE);
  memcpy(&t->header, data, sizeof t->header);
  if (t->header.version != LTR_VERSION)
    FAIL("%s: byte 8: unsupported trace version %u (this reader knows version %u)", path,
         t->header.version, LTR_VERSION);
  if (t->header.header_size < LTR_HEADER_SIZE || t->header.header_size > len)
    FAIL("%s: byte 10: bad header size %u", path, t->header.header_size);
  if (t->header.record_size != LTR_RECORD_SIZE)
    FAIL("%s: byte 12: record size %u, expected %u", path, t->header.record_size, LTR_RECORD_SIZE);

  /* pass 1: check every block and record, number the threads */
  struct ltr_map64 threads = {0}, addrs = {0};
  /* An address allocated again while live in merged order: one call overlapped another
   * thread's whole use of the address. A realloc that moves is stamped before its call (its
   * free must sort before another thread's malloc of the old block: recorder.c), so when that
   * call is preempted, another thread may malloc and free the new block before the realloc
   * returns it. The displaced object waits here, address -> object, so that both objects are
   * freed by the frees that follow rather than one becoming an unknown free and the other
   * live forever. */
  struct ltr_map64 shadow = {0};
  if (ltr_map_init(&threads, 64)) FAIL("%s: out of memory", path);
  uint32_t tcap = 64;
  t->thread_tid = ltr_map(tcap * sizeof *t->thread_tid);
  uint64_t *tcount = ltr_map(tcap * sizeof *tcount);
  for (size_t off = t->header.header_size; off < len;) {
    if (len - off < LTR_BLOCK_SIZE)
      FAIL("%s: byte %zu: truncated block header (%zu of %u bytes)", path, off, len - off, LTR_BLOCK_SIZE);
    struct ltr_block b;
    memcpy(&b, data + off, sizeof b);
    if (b.magic != LTR_BLOCK_MAGIC)
      FAIL("%s: byte %zu: bad block magic 0x%08x (corrupt trace)", path, off, b.magic);
    size_t body = (size_t)b.count * LTR_RECORD_SIZE;
    if (b.count == 0 || len - off - LTR_BLOCK_SIZE < body)
      FAIL("%s: byte %zu: truncated block: it announces %u records, %zu bytes remain", path, off,
           b.count, len - off - LTR_BLOCK_SIZE);
    for (uint32_t k = 0; k < b.count; k++) {
      size_t roff = off + LTR_BLOCK_SIZE + (size_t)k * LTR_RECORD_SIZE;
      struct ltr_record r;
      memcpy(&r, data + roff, sizeof r);
      unsigned op = ltr_op(r.packed);
      if (op < 1 || op > LTR_OP_MAX)
        FAIL("%s: byte %zu: unknown operation %u in record", path, roff + 30, op);
      if (r.t > t->duration) t->duration = r.t;
    }
    /* a thread is its sequence number; records of a dying thread carry UINT32_MAX and are
     * told apart by tid */
    uint64_t key = b.thread_seq != UINT32_MAX ? (uint64_t)b.thread_seq + 1 : ((uint64_t)b.tid << 32) | 1u << 31;
    uint32_t *slot = ltr_map_find(&threads, key);
    uint32_t ti;
    if (slot) ti = *slot;
    else {
      ti = t->nthreads++;
      if (ti == tcap) {
        t->thread_tid = ltr_remap(t->thread_tid, 0, tcap * 2 * sizeof *t->thread_tid);
        tcount = ltr_remap(tcount, 0, tcap * 2 * sizeof *tcount);
        tcap *= 2;
      }
      if (!t->thread_tid || !tcount || ltr_map_put(&threads, key, ti)) FAIL("%s: out of memory", path);
      t->thread_tid[ti] = b.tid;
    }
    tcount[ti] += b.count;
    t->records += b.count;
    t->blocks++;
    off += LTR_BLOCK_SIZE + body;
  }

  /* pass 2: each thread's record offsets, in file order (its program order) */
  struct ltr_cursor *cur = ltr_map((t->nthreads + 1) * sizeof *cur);
  uint64_t *idx = ltr_map((t->records + 1) * sizeof *idx);
  if (!cur || !idx) FAIL("%s: out of memory", path);
  {
    uint64_t base = 0;
    for (uint32_t i = 0; i < t->nthreads; i++) { cur[i].idx = idx + base; cur[i].n = 0; base += tcount[i]; }
  }
  for (size_t off = t->header.header_size; off < len;) {
    struct ltr_block b;
    memcpy(&b, data + off, sizeof b);
    uint64_t key = b.thread_seq != UINT32_MAX ? (uint64_t)b.thread_seq + 1 : ((uint64_t)b.tid << 32) | 1u << 31;
    uint32_t ti = *ltr_map_find(&threads, key);
    for (uint32_t k = 0; k < b.count; k++)
      ((uint64_t *)cur[ti].idx)[cur[ti].n++] = off + LTR_BLOCK_SIZE + (uint64_t)k * LTR_RECORD_SIZE;
    off += LTR_BLOCK_SIZE + (size_t)b.count * LTR_RECORD_SIZE;
  }
  ltr_map_free(&threads);

  /* pass 3: merge by time, number the objects, resolve every address */
  t->ops = ltr_map((t->records + 1) * sizeof *t->ops);
  t->thread_nops = ltr_map((t->nthreads + 1) * sizeof *t->thread_nops);
  uint64_t ocap = t->records + 1;   /* at most one object per record */
  t->obj_size = ltr_map(ocap * sizeof *t->obj_size);
  t->obj_thread = ltr_map(ocap * sizeof *t->obj_thread);
  t->obj_pos = ltr_map(ocap * sizeof *t->obj_pos);
  t->obj_addr = ltr_map(ocap * sizeof *t->obj_addr);
  uint32_t *heap = ltr_map((t->nthreads + 1) * sizeof *heap);
  uint64_t *key = ltr_map((t->nthreads + 1) * sizeof *key);
  if (!t->ops || !t->thread_nops || !t->obj_size || !t->obj_thread || !t->obj_pos || !t->obj_addr || !heap || !key ||
      ltr_map_init(&addrs, 1024) || ltr_map_init(&shadow, 16))
    FAIL("%s: out of memory", path);
  uint32_t hn = 0;
  for (uint32_t i = 0; i < t->nthreads; i++)
    if (cur[i].n) { key[i] = ltr_head_time(data, &cur[i]); heap[hn++] = i; }
  for (uint32_t i = hn / 2; i-- > 0;) ltr_sift(heap, hn, i, key);
  uint64_t live = 0;
  while (hn) {
    uint32_t ti = heap[0];
    struct ltr_record r;
    memcpy(&r, data + cur[ti].idx[cur[ti].at], sizeof r);
    if (++cur[ti].at < cur[ti].n) key[ti] = ltr_head_time(data, &cur[ti]);
    else heap[0] = heap[--hn];
    ltr_sift(heap, hn, 0, key);

    unsigned op = ltr_op(r.packed);
    uint64_t size = ltr_size(r.packed);
    t->op_counts[op]++;
    struct ltr_event o = {size, LTR_NONE, LTR_NONE, ti, (uint8_t)op, (uint8_t)ltr_align_log2(r.packed), 0};
    uint32_t shadowed = LTR_NONE;     /* the older holder of addr_in, when two hold it */
    if (op == LTR_FREE || op == LTR_REALLOC || op == LTR_REALLOCARRAY) {
      if (r.addr_in) {
        uint32_t *slot = ltr_map_find(&addrs, r.addr_in);
        if (slot) {
          o.obj_in = *slot;
          /* Two objects hold the address in merged order (see the shadow map above): the
           * freeing thread's own newer one goes first, else the older one. */
          uint32_t *older = ltr_map_find(&shadow, r.addr_in);
          if (older) {
            shadowed = *older;
            if (t->obj_thread[*slot] != ti) o.obj_in = shadowed;
          }
        } else {
          t->unknown_frees++;
        }
      } else if (op == LTR_FREE) {
        t->null_frees++;
      }
      if (op == LTR_FREE && r.addr_in && o.obj_in == LTR_NONE) continue;  /* not ours to free */
    }
    if (op != LTR_FREE && !r.addr_out) {
      if ((op == LTR_REALLOC || op == LTR_REALLOCARRAY) && o.obj_in != LTR_NONE && size == 0) {
        o.kind = LTR_FREE;            /* realloc(p, 0) that freed p: replay it as free(p) */
      } else if (o.obj_in != LTR_NONE) {
        t->failed_allocs++;           /* a failed realloc leaves p alone: nothing to replay */
        continue;
      } else {
        t->failed_allocs++;           /* replayed, to fail (or succeed and be freed) again */
      }
    }
    if (o.obj_in != LTR_NONE) {
      if (shadowed != LTR_NONE) {     /* one of two holders goes; the other keeps the address */
        uint32_t keep = shadowed == o.obj_in ? LTR_NONE : shadowed;
        ltr_map_del(&shadow, r.addr_in);
        if (keep != LTR_NONE && ltr_map_put(&addrs, r.addr_in, keep)) FAIL("%s: out of memory", path);
        t->overlaps_resolved++;
      } else {
        ltr_map_del(&addrs, r.addr_in);
      }
      live -= t->obj_size[o.obj_in];
    }
    if (o.kind != LTR_FREE && r.addr_out) {
      uint32_t id = (uint32_t)t->nobjects++;
      if (t->nobjects >= UINT32_MAX) FAIL("%s: more than 2^32 objects", path);
      uint32_t *holder = ltr_map_find(&addrs, r.addr_out);
      if (holder) {                   /* its free was not seen, or not yet (see the shadow map) */
        t->alloc_of_live++;
        uint32_t displaced = *holder;
        if (!ltr_map_find(&shadow, r.addr_out) && ltr_map_put(&shadow, r.addr_out, displaced))
          FAIL("%s: out of memory", path);
      }
      if (ltr_map_put(&addrs, r.addr_out, id)) FAIL("%s: out of memory", path);
      t->obj_size[id] = size;
      t->obj_thread[id] = ti;
      t->obj_pos[id] = t->thread_nops[ti];
      t->obj_addr[id] = r.addr_out;
      o.obj_out = id;
      live += size;
      if (live > t->peak_live) t->peak_live = live;
    }
    t->thread_nops[ti]++;
    t->ops[t->nops++] = o;
  }
  t->end_live = live;
  ltr_map_free(&addrs);
  ltr_map_free(&shadow);
  ltr_unmap(cur, 0);
  ltr_unmap(idx, 0);
  ltr_unmap(heap, 0);
  ltr_unmap(key, 0);
  ltr_unmap(tcount, 0);
  rc = 0;
out:
#undef FAIL
  if (data && from_gzip) ltr_unmap(data, map_len);
  else if (data && data != MAP_FAILED) munmap(data, map_len);
  return rc;
}
