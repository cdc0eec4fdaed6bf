# liblarder's library-level sources beyond the allocator core (sources.cmake): what makes it
# a versioned library. Paths are relative to src/. Read by src/CMakeLists.txt and by the Rust
# crate's build script (rust/larder/build.rs), like sources.cmake.
set(LARDER_LIBRARY_SOURCES
  version.c    # larder_version()
)
