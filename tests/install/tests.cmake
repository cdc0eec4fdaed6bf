# liblarder as a library (docs/install.md): its exported symbols and SONAME, malloc_info's XML,
# an install into a temporary prefix used through pkg-config and find_package(larder), and the
# Rust crate's cargo test. Paths are relative to tests/.
find_package(Python3 COMPONENTS Interpreter)
set(LARDER_INSTALL_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR}/install)

if(TARGET larder_shared AND Python3_Interpreter_FOUND)
  # The dynamic symbols: the standard names, the C++ operators and larder_*, nothing else;
  # liblarder-pool.so: the malloc family only. And liblarder.so's SONAME and file version.
  set(pool_lib "")
  if(TARGET larder_pool_preload)
    set(pool_lib --pool-lib $<TARGET_FILE:larder_pool_preload>)
  endif()
  add_test(NAME install.exports
    COMMAND ${Python3_EXECUTABLE} ${LARDER_INSTALL_TEST_DIR}/check_exports.py
            --lib $<TARGET_FILE:larder_shared> ${pool_lib}
            --version ${PROJECT_VERSION} --soversion ${LARDER_SOVERSION})
  set_tests_properties(install.exports PROPERTIES TIMEOUT 60)

  # malloc_info's XML, from a program linked with liblarder.a and from one preloaded.
  add_executable(install_malloc_info install/malloc_info.c)
  set_target_properties(install_malloc_info PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
  target_link_libraries(install_malloc_info PRIVATE larder_static)
  add_executable(install_malloc_info_libc install/malloc_info.c)
  set_target_properties(install_malloc_info_libc PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
  target_compile_definitions(install_malloc_info_libc PRIVATE LARDER_TEST_PRELOADED=1)
  add_test(NAME install.malloc_info
    COMMAND ${Python3_EXECUTABLE} ${LARDER_INSTALL_TEST_DIR}/check_malloc_info.py
            --version ${PROJECT_VERSION} -- $<TARGET_FILE:install_malloc_info>)
  add_test(NAME install.malloc_info.preload
    COMMAND ${Python3_EXECUTABLE} ${LARDER_INSTALL_TEST_DIR}/check_malloc_info.py
            --version ${PROJECT_VERSION} --preload $<TARGET_FILE:larder_shared>
            -- $<TARGET_FILE:install_malloc_info_libc>)
  set_tests_properties(install.malloc_info install.malloc_info.preload PROPERTIES TIMEOUT 60)

  # cmake --install into a temporary prefix, then a C program through pkg-config and a CMake
  # project through find_package(larder), shared and static. Depends on the whole build being
  # there, which it is when ctest runs after `cmake --build`.
  add_test(NAME install.prefix
    COMMAND sh ${LARDER_INSTALL_TEST_DIR}/install_test.sh
            ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/install_prefix_test
            ${PROJECT_VERSION} ${LARDER_SOVERSION} ${CMAKE_C_COMPILER} ${CMAKE_GENERATOR})
  set_tests_properties(install.prefix PROPERTIES TIMEOUT 300)
endif()

# The Rust crate (rust/larder): cargo test, with its own target folder inside the build.
add_test(NAME install.cargo_test
  COMMAND sh ${LARDER_INSTALL_TEST_DIR}/cargo_test.sh ${PROJECT_SOURCE_DIR}/rust/larder
          ${CMAKE_BINARY_DIR}/rust-target)
set_tests_properties(install.cargo_test PROPERTIES TIMEOUT 900)

# ... and its publishable package (rust/larder/package.sh) builds on its own. Not at the same
# time as the cargo test: both compile the crate.
add_test(NAME install.cargo_package
  COMMAND sh ${LARDER_INSTALL_TEST_DIR}/cargo_package.sh ${PROJECT_SOURCE_DIR}/rust/larder
          ${CMAKE_BINARY_DIR}/rust-package)
set_tests_properties(install.cargo_package PROPERTIES TIMEOUT 900)
set_tests_properties(install.cargo_test install.cargo_package PROPERTIES RESOURCE_LOCK larder_rust_crate)

foreach(t install.exports install.malloc_info install.malloc_info.preload install.prefix
          install.cargo_test install.cargo_package)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES LABELS install)
  endif()
endforeach()
