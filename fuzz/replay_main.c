/* Replays fuzz inputs through LLVMFuzzerTestOneInput without libFuzzer, so the committed
 * corpus runs as a test with any compiler: replay_main FILE-OR-DIR... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, errors = 0;
  if (argc < 2) { fprintf(stderr, "usage: %s FILE-OR-DIR...\n", argv[0]); return 2; }
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) { fprintf(stderr, "replay: no such file: %s\n", argv[i]); return 2; }
    if (S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[i]);
      struct dirent *e;
      while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
        errors += replay_file(path);
        files++;
      }
      if (d) closedir(d);
    } else {
      errors += replay_file(argv[i]);
      files++;
    }
  }
  printf("replayed %d inputs\n", files);
  return errors || files == 0 ? 1 : 0;
}
