# Real-time pool tests (docs/pools.md). Paths are relative to tests/.
# The pool sources are compiled into each test, so the tests exercise exactly src/pool.c
# (the steps test needs it built with -DLARDER_POOL_COUNT_STEPS anyway) and do not depend on
# the general allocator.
set(LARDER_POOL_TEST_SOURCES ${PROJECT_SOURCE_DIR}/src/pool.c ${PROJECT_SOURCE_DIR}/src/pool_locked.c)

foreach(t basic integrity frag served badinput)
  larder_test(test_pool_${t} SOURCES pool/test_pool_${t}.c ${LARDER_POOL_TEST_SOURCES}
              LIBS Threads::Threads TIMEOUT 60)
  target_compile_options(test_pool_${t} PRIVATE -Wall -Wextra)
endforeach()

larder_test(test_pool_steps SOURCES pool/test_pool_steps.c ${LARDER_POOL_TEST_SOURCES}
            LIBS Threads::Threads TIMEOUT 60)
target_compile_definitions(test_pool_steps PRIVATE LARDER_POOL_COUNT_STEPS=1)

# The pool as shipped in liblarder.a: the same API test against the library.
if(TARGET larder_static)
  larder_test(test_pool_basic_lib SOURCES pool/test_pool_basic.c TIMEOUT 60)
endif()

# liblarder-pool.so preloaded into a test program and into real programs (python3, sort).
if(TARGET larder_pool_preload)
  add_executable(test_pool_preload_prog pool/test_pool_preload.c)
  set_target_properties(test_pool_preload_prog PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
  target_include_directories(test_pool_preload_prog PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_pool_preload_prog PRIVATE Threads::Threads dl)
  add_test(NAME test_pool_preload COMMAND test_pool_preload_prog)
  set_tests_properties(test_pool_preload PROPERTIES TIMEOUT 60
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:larder_pool_preload>")
  add_test(NAME test_pool_preload_programs
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pool/preload_programs.sh $<TARGET_FILE:larder_pool_preload>)
  set_tests_properties(test_pool_preload_programs PROPERTIES TIMEOUT 60)
endif()

# bench/latency's contract (a small run per mode, the JSON line, bad flags).
if(TARGET latency)
  add_test(NAME test_pool_latency_smoke
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pool/latency_smoke.sh $<TARGET_FILE:latency>
            ${PROJECT_SOURCE_DIR}/traces/sqlite.ltr.gz)
  set_tests_properties(test_pool_latency_smoke PROPERTIES TIMEOUT 60)
endif()
