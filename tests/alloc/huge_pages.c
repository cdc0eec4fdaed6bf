/* LARDER_HUGE_PAGES (src/options.h, src/segment.c): segments mapped while the option is 1 are
 * advised to the kernel for transparent huge pages (MADV_HUGEPAGE), so a large heap walked at
 * random misses the TLB far less; off, they are not.
 *
 *   on    a child run with LARDER_HUGE_PAGES=1 allocates 16 MiB of 256-byte blocks; the
 *         mapping that holds them says THPeligible: 1 in /proc/self/smaps, and the blocks
 *         read back intact;
 *   off   with LARDER_HUGE_PAGES=0, when the kernel's THP mode is "madvise" (only advised
 *         ranges get huge pages), the same mapping says THPeligible: 0;
 *   purge with LARDER_HUGE_PAGES=1, half of the blocks are freed, two superblocks in every
 *         four, and malloc_trim gives the free ones back: every 2 MiB range then holds purged
 *         pages beside live ones, which khugepaged would fault back in to make a huge page
 *         again (src/segment.c, segment_purge); the mapping that holds a live block says
 *         "nh" (MADV_NOHUGEPAGE) in its VmFlags, and the blocks read back intact.
 * Skipped (77) without larder, where the kernel has no transparent huge pages or they are off
 * ("never"), or where smaps has no THPeligible line. Whether the kernel found free 2 MiB pages
 * (AnonHugePages) is printed, not checked: it depends on the machine's memory. */
#include <malloc.h>

#include "alloc_util.h"

#define BLOCKS (16 * 4096)
#define SIZE 256

/* The smaps lines of the mapping holding p, after its address line, into text: 1 if found. */
static int mapping_of(const void *p, char *text, size_t size) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return 0;
  char line[512];
  int inside = 0, found = 0;
  size_t used = 0;
  text[0] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      if (inside) break;
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
      found |= inside;
      continue;
    }
    size_t n = strlen(line);
    if (inside && used + n < size) memcpy(text + used, line, n + 1), used += n;
  }
  fclose(f);
  return found;
}

/* The THPeligible and AnonHugePages figures of the mapping holding p: 1 if found. */
static int smaps_of(const void *p, int *eligible, long *huge_kib) {
  char text[4096];
  *eligible = -1;
  *huge_kib = -1;
  if (!mapping_of(p, text, sizeof text)) return 0;
  const char *at;
  if ((at = strstr(text, "THPeligible:"))) sscanf(at, "THPeligible: %d", eligible);
  if ((at = strstr(text, "AnonHugePages:"))) sscanf(at, "AnonHugePages: %ld kB", huge_kib);
  return 1;
}

/* Whether the VmFlags of the mapping holding p name flag (two letters): 1, 0, or -1 (none). */
static int vmflag_of(const void *p, const char *flag) {
  char text[4096];
  const char *at;
  if (!mapping_of(p, text, sizeof text) || !(at = strstr(text, "VmFlags:"))) return -1;
  char want[5] = {' ', flag[0], flag[1], ' ', 0};
  char flags[256];
  snprintf(flags, sizeof flags, "%.*s ", (int)strcspn(at + 8, "\n"), at + 8); /* a space after the last */
  return strstr(flags, want) != NULL;
}

static int child_purge(void) {
  static void *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    if (!blocks[i]) return 90;
    memset(blocks[i], i & 0xff, SIZE);
  }
  /* 512 blocks of 256 B are two superblocks of 64 KiB: two freed, two kept, and so on */
  for (int i = 0; i < BLOCKS; i++)
    if (i % 1024 < 512) {
      free(blocks[i]);
      blocks[i] = NULL;
    }
  malloc_trim(0);
  void *probe = blocks[BLOCKS / 2 + 512 + 256];
  int nh = vmflag_of(probe, "nh"), hg = vmflag_of(probe, "hg");
  for (int i = 0; i < BLOCKS; i++)
    if (blocks[i]) {
      for (int k = 0; k < SIZE; k++)
        if (((unsigned char *)blocks[i])[k] != (unsigned char)(i & 0xff)) return 92;
      free(blocks[i]);
    }
  fprintf(stderr, "nh=%d hg=%d\n", nh, hg);
  return 0;
}

static int child(void) {
  static void *blocks[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    blocks[i] = malloc(SIZE);
    if (!blocks[i]) return 90;
    memset(blocks[i], i & 0xff, SIZE);
  }
  int eligible;
  long huge_kib;
  void *probe = blocks[BLOCKS / 2];
  if (!smaps_of(probe, &eligible, &huge_kib)) return 91;
  for (int i = 0; i < BLOCKS; i++)
    for (int k = 0; k < SIZE; k++)
      if (((unsigned char *)blocks[i])[k] != (unsigned char)(i & 0xff)) return 92;
  for (int i = 0; i < BLOCKS; i++) free(blocks[i]);
  fprintf(stderr, "eligible=%d huge_kib=%ld\n", eligible, huge_kib);
  return 0;
}

static int run(const char *value, int *eligible, long *huge_kib) {
  char env[64];
  snprintf(env, sizeof env, "LARDER_HUGE_PAGES=%s", value);
  char *args[] = {(char *)"--child", NULL};
  char *envs[] = {env, NULL};
  alloc_child_t c;
  REQUIRE(alloc_run_self(args, envs, 60, &c) == 0);
  CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "LARDER_HUGE_PAGES=%s: child status %d: %s", value,
            c.status, c.err);
  const char *at = strstr(c.err, "eligible=");
  return at && sscanf(at, "eligible=%d huge_kib=%ld", eligible, huge_kib) == 2;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--child") == 0) return child();
  if (argc == 2 && strcmp(argv[1], "--child-purge") == 0) return child_purge();
  if (!alloc_is_larder()) {
    printf("huge_pages: not larder, skipped\n");
    return ALLOC_SKIP;
  }
  char mode[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f) {
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
  }
  if (!mode[0] || strstr(mode, "[never]")) {
    printf("huge_pages: the kernel has no transparent huge pages here (%s), skipped\n", mode[0] ? "never" : "absent");
    return ALLOC_SKIP;
  }
  int on, off;
  long on_kib, off_kib;
  REQUIRE(run("1", &on, &on_kib));
  if (on < 0) {
    printf("huge_pages: smaps has no THPeligible line here, skipped\n");
    return ALLOC_SKIP;
  }
  printf("huge_pages: LARDER_HUGE_PAGES=1: THPeligible %d, AnonHugePages %ld KiB (kernel mode: %.*s)\n", on, on_kib,
         (int)strcspn(mode, "\n"), mode);
  CHECK_MSG(on == 1, "LARDER_HUGE_PAGES=1: the heap's mapping is not eligible for huge pages");
  {
    char *args[] = {(char *)"--child-purge", NULL};
    char *envs[] = {(char *)"LARDER_HUGE_PAGES=1", NULL};
    alloc_child_t c;
    REQUIRE(alloc_run_self(args, envs, 60, &c) == 0);
    CHECK_MSG(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "purge child status %d: %s", c.status, c.err);
    int nh = -1, hg = -1;
    const char *at = strstr(c.err, "nh=");
    CHECK_MSG(at && sscanf(at, "nh=%d hg=%d", &nh, &hg) == 2, "purge child printed no flags: %s", c.err);
    printf("huge_pages: after the purge, a live block's mapping: nh %d, hg %d\n", nh, hg);
    CHECK_MSG(nh == 1 && hg == 0, "a 2 MiB range purged in part is still advised for huge pages (nh %d, hg %d)", nh, hg);
  }
  if (strstr(mode, "[madvise]")) {
    REQUIRE(run("0", &off, &off_kib));
    printf("huge_pages: LARDER_HUGE_PAGES=0: THPeligible %d, AnonHugePages %ld KiB\n", off, off_kib);
    CHECK_MSG(off == 0, "LARDER_HUGE_PAGES=0 under the madvise mode: the heap's mapping is eligible all the same");
  }
  return check_done();
}
