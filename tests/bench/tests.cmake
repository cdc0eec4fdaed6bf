# Tests of the larder-bench workload programs (bench/). Included from tests/CMakeLists.txt,
# so source paths here are relative to tests/. Every program runs at tiny parameters under
# glibc and, when the allocator is built, again with liblarder preloaded; check_bench.py checks
# the exit status, that the last stdout line is the JSON object of docs/benchmarks.md, and the
# figures' relations stated below. A bad command line must give exit 2 and a usage message.
if(NOT DEFINED LARDER_BENCH_TARGETS OR NOT TARGET bench_common)
  return()
endif()

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "tests/bench: python3 not found; the workload checks are not registered")
  return()
endif()

set(BENCH_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/bench/check_bench.py)

# bench_check(<test name> <program> CHECKS <checker options...> ARGS <program arguments...>)
# registers bench.<test name> (glibc) and bench.<test name>.larder (liblarder preloaded into
# the program only, not into the python checker).
function(bench_check tname prog)
  cmake_parse_arguments(B "" "TIMEOUT" "CHECKS;ARGS" ${ARGN})
  if(NOT TARGET ${prog})
    return()
  endif()
  if(NOT B_TIMEOUT)
    set(B_TIMEOUT 30)
  endif()
  add_test(NAME bench.${tname}
    COMMAND ${Python3_EXECUTABLE} ${BENCH_CHECK} run $<TARGET_FILE:${prog}> ${prog} ${B_CHECKS}
            -- ${B_ARGS})
  set_tests_properties(bench.${tname} PROPERTIES TIMEOUT ${B_TIMEOUT} LABELS bench)
  if(TARGET larder_shared)
    add_test(NAME bench.${tname}.larder
      COMMAND ${Python3_EXECUTABLE} ${BENCH_CHECK} run $<TARGET_FILE:${prog}> ${prog}
              --preload $<TARGET_FILE:larder_shared> ${B_CHECKS} -- ${B_ARGS})
    set_tests_properties(bench.${tname}.larder PROPERTIES TIMEOUT ${B_TIMEOUT} LABELS bench)
  endif()
endfunction()

# bench_bad(<program> <argument lists separated by -->): each must exit 2 with a usage message.
function(bench_bad prog)
  if(NOT TARGET ${prog})
    return()
  endif()
  add_test(NAME bench.${prog}.bad_flags
    COMMAND ${Python3_EXECUTABLE} ${BENCH_CHECK} bad $<TARGET_FILE:${prog}>
            -- --no-such-flag
            -- --threads abc
            -- --threads 0
            -- --threads
            -- --threads -1
            -- --threads=2x
            -- -t 99999999999999999999999
            -- stray-argument
            ${ARGN})
  set_tests_properties(bench.${prog}.bad_flags PROPERTIES TIMEOUT 30 LABELS bench)
endfunction()

# ---- malloc-test (seed 000 benchmark 1) ----
set(MT_FIGS elapsed_s,null_loop_s,net_s,pairs_per_s,per_thread_s)
bench_check(malloc-test.threads malloc-test
  CHECKS --params size,iterations,threads,processes --figures ${MT_FIGS}
         --param threads=2 --param iterations=200000 --param processes=false
         --len per_thread_s=2 --positive elapsed_s,net_s,pairs_per_s
         "--expr=f['net_s'] == max(f['elapsed_s'] - f['null_loop_s'], 1e-9) or abs(f['net_s'] - (f['elapsed_s'] - f['null_loop_s'])) < 1e-6"
         "--expr=abs(f['pairs_per_s'] * f['net_s'] - 2 * 200000) < 1e-3 * 2 * 200000"
  ARGS --size 512 --iterations 200000 --threads 2)
bench_check(malloc-test.processes malloc-test
  CHECKS --figures ${MT_FIGS} --param processes=true --param threads=2 --len per_thread_s=2
         --positive elapsed_s,net_s
  ARGS --size 8192 --iterations 100000 -t 2 --processes)
bench_bad(malloc-test -- --processes=1 -- --size 0 -- --iterations 1.5)

# ---- heap-leak (seed 000 benchmark 2) ----
bench_check(heap-leak heap-leak
  CHECKS --params threads,objects,rounds,size,replacements,seed,mpf_a,mpf_b,mpf_c
         --figures minflt,minflt_setup,minflt_per_round,mpf_lower,mpf_excess,elapsed_s
         --param threads=2 --param rounds=3 --param replacements=500 --len minflt_per_round=3
         --positive minflt
         "--expr=abs(f['mpf_lower'] - (14 + 1.1 * 2 * 3 + 127.6 * 2)) < 1e-9"
         "--expr=abs(f['mpf_excess'] - (f['minflt'] - f['mpf_lower'])) < 1e-6"
         "--expr=f['minflt'] >= f['minflt_setup'] + sum(f['minflt_per_round'])"
  ARGS -t 2 --rounds 3 --objects 1000 --replacements 500 --size 40)
bench_check(heap-leak.constants heap-leak
  CHECKS --param mpf_a=1 --param mpf_b=2 --param mpf_c=3 --param replacements=200
         --figure mpf_lower=19 --len minflt_per_round=3
  ARGS --threads 2 --rounds 3 --objects 200 --mpf-a 1 --mpf-b 2 --mpf-c 3)
bench_bad(heap-leak -- --mpf-a nan -- --mpf-b 1e400 -- --rounds 0 -- --mpf-c)

add_executable(test_bench_heap_leak_model bench/test_heap_leak_model.c)
set_target_properties(test_bench_heap_leak_model PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
target_include_directories(test_bench_heap_leak_model PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_bench_heap_leak_model PRIVATE bench_heap_leak_model m)
add_test(NAME bench.heap_leak_model COMMAND test_bench_heap_leak_model)
set_tests_properties(bench.heap_leak_model PROPERTIES TIMEOUT 10 LABELS bench)

# ---- false-share (seed 000 benchmark 3) ----
bench_check(false-share false-share
  CHECKS --params threads,size,writes,aligned
         --figures elapsed_s,writes_per_s,shared_line_pairs,cache_line_bytes
         --param aligned=false --positive elapsed_s,writes_per_s,cache_line_bytes
  ARGS -t 2 --size 8 --writes 200000)
# Cache-line aligned objects must never share a line, whatever the allocator.
bench_check(false-share.aligned false-share
  CHECKS --param aligned=true --figure shared_line_pairs=0 --positive writes_per_s
  ARGS -t 3 --size 40 --writes 200000 --aligned)
bench_bad(false-share -- --aligned=yes -- --writes 0)

# ---- Hoard's workloads (seed 004 §5) ----
foreach(p active-false passive-false)
  bench_check(${p} ${p}
    CHECKS --params threads,size,iterations,writes --figures elapsed_s --positive elapsed_s
           --param threads=2 --param iterations=200
    ARGS -t 2 --size 8 --iterations 200 --writes 200)
  bench_bad(${p} -- --size -- --writes 0)
endforeach()

bench_check(threadtest threadtest
  CHECKS --params threads,iterations,objects,size --figures elapsed_s,ops_per_s
         --positive elapsed_s,ops_per_s
         "--expr=abs(f['ops_per_s'] * f['elapsed_s'] - 2 * 2000 * 5) < 1e-3 * 2 * 2000 * 5"
  ARGS -t 2 --iterations 5 --objects 2000 --size 8)
bench_bad(threadtest -- --objects 0)

bench_check(larson larson
  CHECKS --params threads,seconds,min_size,max_size,chunks,rounds,seed
         --figures ops_per_s,ops,elapsed_s,thread_generations
         --positive ops_per_s,ops --param seconds=0.2
         "--expr=f['elapsed_s'] >= 0.2"
         "--expr=f['thread_generations'] >= 2 and f['ops'] % 2 == 0"
         "--expr=abs(f['ops_per_s'] * f['elapsed_s'] - f['ops']) < 1e-6 * f['ops']"
  ARGS -t 2 --seconds 0.2 --chunks 1000 --rounds 1000 --min-size 10 --max-size 100)
bench_bad(larson -- --min-size 50 --max-size 10 -- --seconds 0 -- --seconds abc -- --seconds inf)

bench_check(shbench shbench
  CHECKS --params threads,iterations,min_size,max_size,slots,seed --figures elapsed_s,ops_per_s
         --positive elapsed_s,ops_per_s
  ARGS -t 2 --iterations 50000 --slots 200)
bench_bad(shbench -- --min-size 101 --max-size 100 -- --slots 0)

# ---- free-contention (seed 002) ----
# With an operation count the number of frees is exact: every block produced is freed.
bench_check(free-contention.count free-contention
  CHECKS --params workers,seconds,operations,size,queue --figures frees_per_s,frees,elapsed_s
         --figure frees=20001 --param workers=2 --positive frees_per_s
  ARGS -w 2 --operations 20001 --queue 64)
bench_check(free-contention.timed free-contention
  CHECKS --positive frees_per_s,frees "--expr=f['elapsed_s'] >= 0.19"
  ARGS --workers 1 --seconds 0.2)
bench_bad(free-contention -- --queue 1 -- -w 0 -- --seconds -1 -- --workers 513)

# ---- blowup (Hoard §2.2, §6) ----
# The blocks are written, so RSS must grow by at least most of K*B: a blowup well under 1
# would mean the figure does not see the workload's memory.
bench_check(blowup blowup
  CHECKS --params threads,blocks,size,rounds
         --figures baseline_rss_bytes,peak_rss_bytes,final_rss_bytes,maxrss_bytes,ideal_bytes,blowup,elapsed_s
         --figure ideal_bytes=1280000
         "--expr=f['peak_rss_bytes'] >= f['baseline_rss_bytes']"
         "--expr=abs(f['blowup'] - (f['peak_rss_bytes'] - f['baseline_rss_bytes']) / f['ideal_bytes']) < 1e-6"
         "--expr=f['blowup'] >= 0.9"
  ARGS -t 3 --blocks 20000 --size 64 --rounds 3)
bench_bad(blowup -- --blocks 0 -- --rounds x)
