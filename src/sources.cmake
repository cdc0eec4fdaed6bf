# liblarder's core sources, one per concern (docs/allocator.md has the map). Paths are
# relative to src/. Kept apart from CMakeLists.txt so that other builds (the Rust crate) can
# read the same list.
set(LARDER_CORE_SOURCES
  alloc.c       # malloc/free fast paths (top of the file), the rest of the interface
  superblock.c  # size classes, superblock layout, carving, the remote free list
  cache.c       # the front end: per-thread caches of free blocks, batched remote frees
  heap.c        # thread heaps: fill and return in batches, pending frees, Hoard's threshold, heap lifecycle
  fit.c         # the fit tier (LARDER_FIT_ABOVE): best fit with coalescing per heap, in regions of one chunk
  global.c      # the global heap (Hoard's heap 0)
  segment.c     # segments cut into chunks; free runs by length, coalesced, purged by age
  large.c       # medium spans (runs of chunks) and large spans (own mappings, cache)
  maintain.c    # maintenance: start-up, thread start/exit, the purge and its thread, fork, stats at exit, validation, option changes
  options.c     # the tunables table
  addrmap.c     # the address ranges larder owns (segments, large spans), checked before a header is read
  os.c          # the one seam to the OS
  report.c      # messages and fatal errors
  stats.c       # statistics and validation API
  wrappers.c    # the standard names and the C++ operators
)
