/* What a thread's heap makes resident: a thread that mallocs one small block and waits (a
 * thread-per-connection server's idle connection: bench/thread-rest) must have few pages of its
 * heap (src/internal.h, heap_t, 420 KiB of address space) in memory. The pages a heap writes:
 * the bins' first page, the owned table's entry, and the fields every heap writes (the size
 * table bin_of, the counters, the per-class arrays, the heap proper), which the layout keeps
 * together in 2 pages: the size table of 2-byte entries starts a page, the deferred frees'
 * stand-in bin (its first line used) ends them, and what only some heaps write (the fullness
 * groups, the class votes, the medium spans' and the fit tier's arrays) lies after the lock.
 * Before that layout the same fields took 4 pages. A page
 * only read maps the kernel's zero page and costs no memory: /proc/self/pagemap
 * tells it apart (its frame is the zero page's, which a fresh mapping read once shows).
 *
 * Checked: at most 4 pages of the heap written for one class, and at most 5 for six classes
 * met (two pages of bins). Built against liblarder.a with the internal header; skipped where
 * the kernel gives no frame numbers (an unprivileged process reads them as zero). */
#include "alloc_util.h"
#include "internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

static int pagemap = -1;
static uint64_t zero_frame;

static uint64_t frame_of(const void *page) {
  uint64_t entry = 0;
  if (pread(pagemap, &entry, sizeof entry, (off_t)((uintptr_t)page / 4096) * (off_t)sizeof entry) != (ssize_t)sizeof entry)
    return 0;
  return entry & ((UINT64_C(1) << 55) - 1);
}

/* Pages of [base, base + bytes) resident and not the zero page. */
static unsigned written_pages(const void *base, size_t bytes) {
  size_t pages = (bytes + 4095) / 4096;
  unsigned char *vec = calloc(pages, 1);
  REQUIRE(vec != NULL);
  REQUIRE(mincore((void *)base, pages * 4096, vec) == 0);
  unsigned n = 0;
  for (size_t i = 0; i < pages; i++)
    if ((vec[i] & 1) && frame_of((const char *)base + i * 4096) != zero_frame) n++;
  free(vec);
  return n;
}

static const size_t sizes[] = {16, 8000, 3000, 1000, 200, 64};
static unsigned classes_met;
static unsigned heap_pages;

static void *worker(void *arg) {
  (void)arg;
  char *volatile held[6];
  for (unsigned i = 0; i < classes_met; i++) {
    held[i] = malloc(sizes[i]);
    REQUIRE(held[i] != NULL);
    held[i][0] = 1;
  }
  heap_t *heap = ld_heap_tls;
  heap_pages = written_pages(heap, sizeof(heap_t));
  for (unsigned i = 0; i < classes_met; i++) free(held[i]);
  return NULL;
}

static unsigned pages_for(unsigned classes) {
  classes_met = classes;
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
  REQUIRE(pthread_join(t, NULL) == 0);
  return heap_pages;
}

int main(void) {
  pagemap = open("/proc/self/pagemap", O_RDONLY);
  volatile char *fresh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fresh != MAP_FAILED);
  (void)fresh[0];
  zero_frame = pagemap >= 0 ? frame_of((const void *)fresh) : 0;
  if (zero_frame == 0) {
    printf("heap_pages: skipped, /proc/self/pagemap gives no frame numbers here\n");
    return ALLOC_SKIP;
  }
  free(malloc(1)); /* the main thread's heap first: the workers' are new ones */
  unsigned one = pages_for(1);
  printf("heap_pages: a thread holding 1 block: %u pages of its heap written\n", one);
  CHECK_MSG(one <= 4, "a thread holding one 16-byte block wrote %u pages of its heap (at most 4)", one);
  /* (a second thread takes the first one's heap, which is reused: its pages stay written) */
  unsigned six = pages_for(6);
  printf("heap_pages: a thread holding blocks of 6 classes: %u pages of its heap written\n", six);
  CHECK_MSG(six <= 5, "a thread holding blocks of 6 classes wrote %u pages of its heap (at most 5)", six);
  return check_done();
}
