/* Empty on purpose: glibc's gnulib-shared sources include <libc-config.h> to map gnulib's
   configuration onto glibc's own build; a standalone build against the installed glibc
   needs none of it (see scripts/glibc-malloc-tests.sh).  */
