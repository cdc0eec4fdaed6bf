/* larder_version(): the library's version, from the one definition in include/larder.h. */
#include "larder.h"

const char *larder_version(void) { return LARDER_VERSION_STRING; }
