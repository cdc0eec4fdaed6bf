# tests/alloc: what liblarder must hold (API contracts, Hoard's invariant, threads, fork,
# bad frees, real programs under LD_PRELOAD). Source paths are relative to tests/.
#
# Before src/ defines the allocator the same programs build against glibc
# (LARDER_TEST_GLIBC), so the tests themselves can be checked; the larder-specific parts
# then skip (exit 77, SKIP_RETURN_CODE).
if(TARGET larder_static AND TARGET larder_shared)
  set(ALLOC_HAVE_LARDER ON)
else()
  set(ALLOC_HAVE_LARDER OFF)
endif()

# alloc_test(NAME SOURCES ... [PRELOAD] [DEBUG] [TIMEOUT s] [ARGS ...] [LIBS ...])
# DEBUG links larder_debug (the static build with extra checks) instead of larder_static.
function(alloc_test name)
  cmake_parse_arguments(A "PRELOAD;DEBUG" "TIMEOUT" "SOURCES;ARGS;LIBS" ${ARGN})
  set(extra)
  if(A_TIMEOUT)
    list(APPEND extra TIMEOUT ${A_TIMEOUT})
  endif()
  if(A_ARGS)
    list(APPEND extra ARGS ${A_ARGS})
  endif()
  if(ALLOC_HAVE_LARDER)
    if(A_PRELOAD)
      list(APPEND extra PRELOAD)
    endif()
    set(lib larder_static)
    if(A_DEBUG)
      set(lib larder_debug)
    endif()
    larder_test(${name} SOURCES ${A_SOURCES} LIBS ${lib} ${A_LIBS} ${CMAKE_DL_LIBS} ${extra})
  else()
    larder_test(${name} SOURCES ${A_SOURCES} LIBS ${A_LIBS} ${CMAKE_DL_LIBS} m ${extra})
    target_compile_definitions(${name} PRIVATE LARDER_TEST_GLIBC=1)
  endif()
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc)
  if(ALLOC_HAVE_LARDER AND A_PRELOAD)
    set_tests_properties(${name}.preload PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc)
  endif()
endfunction()

# ---- API semantics ----
alloc_test(alloc_api_align   SOURCES alloc/api_align.c   PRELOAD TIMEOUT 60)
alloc_test(alloc_api_realloc SOURCES alloc/api_realloc.c PRELOAD TIMEOUT 60)
alloc_test(alloc_api_calloc  SOURCES alloc/api_calloc.c  PRELOAD TIMEOUT 60)
alloc_test(alloc_api_errors  SOURCES alloc/api_errors.c  PRELOAD TIMEOUT 60)
alloc_test(alloc_api_misc    SOURCES alloc/api_misc.c    PRELOAD TIMEOUT 60)
alloc_test(alloc_api_cxx     SOURCES alloc/api_cxx.cpp   PRELOAD TIMEOUT 60)
