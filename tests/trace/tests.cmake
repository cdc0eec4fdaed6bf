# Tests of the trace recorder and replayer (tracer/). Included from tests/CMakeLists.txt, so
# source paths here are relative to tests/.
if(NOT TARGET trace-replay OR NOT TARGET larder_trace)
  return()
endif()

# Metrics and the loader on hand-made data, in C (no allocator under test: glibc).
larder_test(trace_metrics SOURCES trace/test_trace_metrics.c LIBS larder_trace_read m TIMEOUT 30)

# Programs run under the recorder by check_trace.py.
add_executable(trace_prog trace/trace_prog.c)
target_link_libraries(trace_prog PRIVATE Threads::Threads)
set_target_properties(trace_prog PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
add_executable(trace_fork_exec trace/fork_exec.c)
set_target_properties(trace_fork_exec PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
add_executable(trace_tree_prog trace/tree_prog.c)
set_target_properties(trace_tree_prog PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "tests/trace: python3 not found; the recorder checks are not registered")
  return()
endif()
set(TRACE_CHECK ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/trace/check_trace.py
    --recorder $<TARGET_FILE:larder_trace> --replay $<TARGET_FILE:trace-replay>)
foreach(t record-replay faithful unchanged-output fork-exec bad-input clock-and-env vfork-exec process-tree)
  add_test(NAME trace.${t} COMMAND ${TRACE_CHECK} --prog $<TARGET_FILE:trace_prog>
           --fork-exec $<TARGET_FILE:trace_fork_exec> --tree-prog $<TARGET_FILE:trace_tree_prog> ${t})
  set_tests_properties(trace.${t} PROPERTIES TIMEOUT 60)
endforeach()
