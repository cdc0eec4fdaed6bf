# liblarder's core sources, one per concern (docs/allocator.md has the map). Paths are
# relative to src/. Kept apart from CMakeLists.txt so that other builds (the Rust crate) can
# read the same list.
set(LARDER_CORE_SOURCES
  alloc.c      # malloc/free fast paths, the rest of the interface
  heap.c       # heaps, superblocks, the global heap, Hoard's threshold, validation
  large.c      # large spans and their cache
  options.c    # the tunables table
  os.c         # the one seam to the OS
  report.c     # messages and fatal errors
  stats.c      # statistics and validation API
  wrappers.c   # the standard names and the C++ operators
)
