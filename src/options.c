/* The tunables table (options.h) and its parsing. Malformed values are warned about and
 * ignored, never fatal: a typo in an environment variable must not take a server down. */
#define _GNU_SOURCE
#include "options.h"
#include "internal.h"
#include "larder.h"
#include "os.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

ld_options_t ld_options = {
#define LD_OPTION_DEFAULT(name, def, lo, hi, integral, at_start, comment) .name = def,
  LD_OPTION_TABLE(LD_OPTION_DEFAULT)
#undef LD_OPTION_DEFAULT
};

typedef struct option_row_s {
  const char *name;
  double *value;
  double lo, hi;
  int integral, at_start;
} option_row_t;

static option_row_t option_rows[] = {
#define LD_OPTION_ROW(name, def, lo, hi, integral, at_start, comment) \
  {#name, &ld_options.name, lo, hi, integral, at_start},
  LD_OPTION_TABLE(LD_OPTION_ROW)
#undef LD_OPTION_ROW
};
#define OPTION_COUNT (sizeof option_rows / sizeof option_rows[0])

int ld_remote_free_mark = 1; /* from the table by ld_options_init, then by every change */
size_t ld_medium_cache_bytes = (size_t)1024 << 10; /* (the same) */
size_t ld_bin_growth_bytes = (size_t)256 << 10;    /* (the same) */
unsigned ld_learned_classes_max = 8;             /* (the same) */
size_t ld_fit_above = 0;                         /* (the same) */
size_t ld_grow_purge_bytes = 0;                  /* (the same) */

/* The words kept equal to an option (options.h), from its value now. */
static void option_mirrors_update(void) {
  __atomic_store_n(&ld_remote_free_mark, ld_option_load(&ld_options.remote_free_check) != 0, __ATOMIC_RELAXED);
  __atomic_store_n(&ld_medium_cache_bytes, (size_t)ld_option_load(&ld_options.medium_cache_kb) << 10, __ATOMIC_RELAXED);
  __atomic_store_n(&ld_bin_growth_bytes, (size_t)ld_option_load(&ld_options.bin_growth_kb) << 10, __ATOMIC_RELAXED);
  __atomic_store_n(&ld_learned_classes_max, (unsigned)ld_option_load(&ld_options.learned_classes), __ATOMIC_RELAXED);
  __atomic_store_n(&ld_fit_above, (size_t)ld_option_load(&ld_options.fit_above), __ATOMIC_RELAXED);
  __atomic_store_n(&ld_grow_purge_bytes, (size_t)ld_option_load(&ld_options.grow_purge_kb) << 10, __ATOMIC_RELAXED);
}

static int options_frozen;

/* Environment variables with the LARDER_ prefix that belong to other parts of larder. */
static const char *const option_foreign_prefixes[] = {"TRACE_", "POOL_", "BUILD_", "BENCH_", "TEST_"};

static option_row_t *option_find(const char *name, size_t len) {
  for (size_t i = 0; i < OPTION_COUNT; i++)
    if (strlen(option_rows[i].name) == len && strncasecmp(option_rows[i].name, name, len) == 0)
      return &option_rows[i];
  return NULL;
}

static int option_parse(const option_row_t *row, const char *text, double *out) {
  if (!text || !*text) return -1;
  char *end;
  int saved = errno; /* read at start-up, inside the first malloc: errno is the program's */
  errno = 0;
  double v = strtod(text, &end);
  int range_error = errno;
  errno = saved;
  while (*end == ' ') end++;
  if (range_error || *end || !isfinite(v)) return -1;
  if (v < row->lo || v > row->hi) return -1;
  if (row->integral && v != floor(v)) return -1;
  if (row->value == &ld_options.superblock_size) {
    unsigned long s = (unsigned long)v;
    if (s & (s - 1)) return -1;
  }
  *out = v;
  return 0;
}

/* name, name_len: the setting as the user wrote it (LARDER_EMPTY_FRACTION), for the message. */
static int option_apply(option_row_t *row, const char *text, const char *origin, const char *name, int name_len) {
  double v;
  if (option_parse(row, text, &v) != 0) {
    ld_message("larder: ignoring %s%.*s=%s: expected %s from %g to %g%s\n", origin, name_len, name, text ? text : "",
               row->integral ? "a whole number" : "a number", row->lo, row->hi,
               row->value == &ld_options.superblock_size ? ", a power of two" : "");
    return -1;
  }
  if (row->at_start && options_frozen && v != ld_option_load(row->value)) {
    ld_message("larder: ignoring %s%.*s=%s: it can only be set before the first allocation\n", origin, name_len, name, text);
    return -1;
  }
  __atomic_store(row->value, &v, __ATOMIC_RELAXED);
  option_mirrors_update();
  return 0;
}

/* A program that gained privileges at exec (set-user-ID, set-group-ID, file capabilities)
 * takes no setting from the environment of the user who started it, as glibc erases its
 * MALLOC_ tunables and jemalloc reads MALLOC_CONF with secure_getenv: a LARDER_ setting could
 * make it print to a terminal it does not own (stats, verbose) or hold memory it would give
 * back. It says so once, if any is set; larder_option_set still works. */
static bool options_ignored_secure(void) {
  if (!ld_os_secure_execution()) return false;
  extern char **environ;
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, "LARDER_", 7) == 0) {
      ld_message("larder: ignoring the LARDER_ settings: a set-user-ID or set-group-ID program (secure execution)\n");
      break;
    }
  return true;
}

void ld_options_init(void) {
  extern char **environ;
  option_mirrors_update(); /* the table's defaults, whatever the environment says */
  if (options_ignored_secure()) return;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "LARDER_", 7) != 0) continue;
    const char *name = *e + 7;
    const char *eq = strchr(name, '=');
    if (!eq) continue;
    int foreign = 0;
    for (size_t i = 0; i < sizeof option_foreign_prefixes / sizeof option_foreign_prefixes[0]; i++)
      if (strncmp(name, option_foreign_prefixes[i], strlen(option_foreign_prefixes[i])) == 0) foreign = 1;
    if (foreign) continue;
    option_row_t *row = option_find(name, (size_t)(eq - name));
    if (!row) {
      ld_message("larder: ignoring unknown setting LARDER_%.*s\n", (int)(eq - name), name);
      continue;
    }
    option_apply(row, eq + 1, "LARDER_", name, (int)(eq - name));
  }
}

void ld_options_freeze(void) { options_frozen = 1; }

int ld_option_set(const char *name, const char *value) {
  option_row_t *row = name ? option_find(name, strlen(name)) : NULL;
  if (!row) {
    ld_message("larder: larder_option_set: unknown option '%s'\n", name ? name : "(null)");
    return -1;
  }
  return option_apply(row, value, "", name, (int)strlen(name));
}

double larder_option_get(const char *name) {
  option_row_t *row = name ? option_find(name, strlen(name)) : NULL;
  return row ? ld_option_load(row->value) : -1;
}
