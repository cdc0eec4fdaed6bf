# The hardened build (docs/hardening.md): free-list links encoded with a per-process secret
# and checked before they are followed, a guard chunk at the end of every segment, and the
# blocks of each carved page handed out in a random order. Always built as liblarder-hardened
# (.a and .so, for the tests and for users who want it beside the default); -DLARDER_HARDENED=ON
# makes the main liblarder.a/.so hardened too.
option(LARDER_HARDENED "build the main liblarder hardened (encoded free lists, guard pages, random carve order)" OFF)

larder_library(larder_hardened STATIC)
target_compile_definitions(larder_hardened PRIVATE LARDER_HARDENED=1)
set_target_properties(larder_hardened PROPERTIES OUTPUT_NAME larder-hardened)

larder_library(larder_hardened_shared SHARED)
target_compile_definitions(larder_hardened_shared PRIVATE LARDER_HARDENED=1)
set_target_properties(larder_hardened_shared PROPERTIES OUTPUT_NAME larder-hardened)
target_link_options(larder_hardened_shared PRIVATE -Wl,-Bsymbolic-functions
  -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/exports.map)

if(LARDER_HARDENED)
  target_compile_definitions(larder_static PRIVATE LARDER_HARDENED=1)
  target_compile_definitions(larder_shared PRIVATE LARDER_HARDENED=1)
endif()
