# Real-time pools (docs/pools.md). Included by src/CMakeLists.txt.
# LARDER_POOL_SOURCES go into liblarder.a/.so (paths relative to src/); the pool code uses
# only the caller's memory and no part of the general allocator.
set(LARDER_POOL_SOURCES pool.c pool_locked.c)

# liblarder-pool.so: a whole program's malloc family served from one growing pool (areas
# from ld_os_map in chunks), so the thesis's TLSF comparison (seed 003 §6) runs on any
# program without source changes: LD_PRELOAD=build/lib/liblarder-pool.so prog.
if(NOT TARGET larder_pool_preload AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/os.c)
  add_library(larder_pool_preload SHARED
    ${CMAKE_CURRENT_LIST_DIR}/pool.c
    ${CMAKE_CURRENT_LIST_DIR}/pool_preload.c
    ${CMAKE_CURRENT_LIST_DIR}/os.c)
  target_include_directories(larder_pool_preload PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(larder_pool_preload PRIVATE -Wall -Wextra -fno-semantic-interposition)
  # Only the standard names are exported; the pool and os functions stay private to the
  # library, so a program that also links liblarder.a keeps its own copies.
  set_target_properties(larder_pool_preload PROPERTIES OUTPUT_NAME larder-pool C_VISIBILITY_PRESET hidden)
  target_link_libraries(larder_pool_preload PRIVATE Threads::Threads)
  # never unloaded: its fork handlers stay registered for the process's life (pool_preload.c)
  target_link_options(larder_pool_preload PRIVATE -Wl,-z,nodelete)
endif()
