# Checks of the allocator's source structure (label structure). Included from
# tests/CMakeLists.txt.
#
# floors: scripts/check-floors.py reads the calls between liblarder's source files from the
# objects of liblarder.a (nm) and checks them against src/floors.txt: calls go to the same floor
# or lower, the maintenance floor is entered from above only, no circle of more than two files,
# every file placed (docs/allocator.md "Floors", issue 15). The script's own tests are
# tests/python/test_floors_check.py.

if(NOT TARGET larder_static)
  return()
endif()
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "tests/structure: python3 not found; the floors check is not registered")
  return()
endif()
set(LARDER_FLOORS_NM nm)
if(CMAKE_NM)
  set(LARDER_FLOORS_NM ${CMAKE_NM})
endif()
add_test(NAME floors
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check-floors.py
          --table ${PROJECT_SOURCE_DIR}/src/floors.txt --nm ${LARDER_FLOORS_NM}
          $<TARGET_FILE:larder_static>)
set_tests_properties(floors PROPERTIES LABELS structure TIMEOUT 60)

# data-size: the libraries carry little initialised writable data (scripts/check-data-size.py). A
# big object with an initialiser lands in .data, mapped from the file and partly resident in every
# process that loads the library, or in the program's own .data for liblarder.a (liblarder had two
# 256 KB heaps there: about 250 KB of RSS before main). Its own tests:
# tests/python/test_data_size_check.py.
set(larder_data_size_libs $<TARGET_FILE:larder_shared>)
foreach(lib larder_static larder_hardened_shared larder_debug larder_pool_preload)
  if(TARGET ${lib})
    list(APPEND larder_data_size_libs $<TARGET_FILE:${lib}>)
  endif()
endforeach()
add_test(NAME data-size
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check-data-size.py ${larder_data_size_libs})
set_tests_properties(data-size PROPERTIES LABELS structure TIMEOUT 60)
