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

# alloc_test(NAME SOURCES ... [PRELOAD] [DEBUG] [TIMEOUT s] [ARGS ...] [LIBS ...] [ENV VAR=value ...])
# DEBUG links larder_debug (the static build with extra checks) instead of larder_static.
# ENV: larder's settings for this test and its .preload twin (not for the glibc build, which
# skips what they tune).
function(alloc_test name)
  cmake_parse_arguments(A "PRELOAD;DEBUG" "TIMEOUT" "SOURCES;ARGS;LIBS;ENV" ${ARGN})
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
  set(tests ${name})
  if(ALLOC_HAVE_LARDER AND A_PRELOAD)
    set_tests_properties(${name}.preload PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc)
    list(APPEND tests ${name}.preload)
  endif()
  if(ALLOC_HAVE_LARDER AND A_ENV)
    set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT ${A_ENV})
  endif()
endfunction()

# ---- API semantics ----
alloc_test(alloc_api_align   SOURCES alloc/api_align.c   PRELOAD TIMEOUT 60)
alloc_test(alloc_api_realloc SOURCES alloc/api_realloc.c PRELOAD TIMEOUT 60)
alloc_test(alloc_api_calloc  SOURCES alloc/api_calloc.c  PRELOAD TIMEOUT 60)
alloc_test(alloc_api_errors  SOURCES alloc/api_errors.c  PRELOAD TIMEOUT 60)
alloc_test(alloc_api_misc    SOURCES alloc/api_misc.c    PRELOAD TIMEOUT 60)
alloc_test(alloc_api_cxx     SOURCES alloc/api_cxx.cpp   PRELOAD TIMEOUT 60)
# C23's free_sized and free_aligned_sized; stated sizes checked with LARDER_DEBUG=1
alloc_test(alloc_free_sized SOURCES alloc/free_sized.c PRELOAD TIMEOUT 120)
# a program that replaces only the base operators: every other form reaches them
alloc_test(alloc_cxx_replaced SOURCES alloc/cxx_replaced.cpp PRELOAD TIMEOUT 60)
# impossible sizes, errno and alignment arguments (issue 16)
alloc_test(alloc_realloc_impossible SOURCES alloc/realloc_impossible.c PRELOAD TIMEOUT 60)
alloc_test(alloc_errno_kept         SOURCES alloc/errno_kept.c         PRELOAD TIMEOUT 120)
alloc_test(alloc_align_validity     SOURCES alloc/align_validity.c     PRELOAD TIMEOUT 60)
alloc_test(alloc_malloc_stats_shape SOURCES alloc/malloc_stats_shape.c PRELOAD TIMEOUT 60)
# the OS out of memory (RLIMIT_AS): NULL with ENOMEM from every path, then recovery
alloc_test(alloc_out_of_memory SOURCES alloc/out_of_memory.c PRELOAD TIMEOUT 120 LIBS Threads::Threads)
alloc_test(alloc_out_of_memory_after_free SOURCES alloc/out_of_memory_after_free.c PRELOAD TIMEOUT 60)
# calloc's zeroes where a purge fails: memory the program locked (madvise refuses it), and
# madvise denied (EPERM: the run stays dirty, the purge's loops end)
foreach(mode locked denied)
  alloc_test(alloc_purge_failed_${mode} SOURCES alloc/purge_failed.c PRELOAD TIMEOUT 60 ARGS ${mode}
             ENV LARDER_MEDIUM_CACHE_KB=0 LARDER_PURGE_THREAD=0)
endforeach()
# a refused segment is retried smaller (RLIMIT_AS, mlockall within RLIMIT_MEMLOCK)
alloc_test(alloc_map_refused SOURCES alloc/map_refused.c PRELOAD TIMEOUT 60)

# ---- threads ----
# 8 threads on 2 cores; the DEBUG variant runs the same load against larder_debug.
alloc_test(alloc_mt_stress SOURCES alloc/mt_stress.c PRELOAD TIMEOUT 120 ARGS 8 25000)
if(TARGET larder_debug)
  alloc_test(alloc_mt_stress_debug SOURCES alloc/mt_stress.c DEBUG TIMEOUT 120 ARGS 8 10000 7)
  alloc_test(alloc_remote_exit_debug SOURCES alloc/remote_exit.c DEBUG TIMEOUT 120 ARGS 800)
  alloc_test(alloc_fork_threads_debug SOURCES alloc/fork_threads.c DEBUG TIMEOUT 240 ARGS 20)
  alloc_test(alloc_fork_concurrent_debug SOURCES alloc/fork_concurrent.c DEBUG TIMEOUT 120 ARGS 20 LIBS Threads::Threads)
  alloc_test(alloc_tls_dtor_debug SOURCES alloc/tls_dtor.c DEBUG TIMEOUT 60)
endif()
alloc_test(alloc_thread_churn SOURCES alloc/thread_churn.c PRELOAD TIMEOUT 120)
alloc_test(alloc_thread_churn_rss SOURCES alloc/thread_churn_rss.c PRELOAD TIMEOUT 180)
# a pool that recycles 64 threads, 20 rounds: RSS within 1.3x the first round's
alloc_test(alloc_thread_recycle_rss SOURCES alloc/thread_recycle_rss.c PRELOAD TIMEOUT 120)
# A process ends as without larder: main's pthread_exit, SIGTERM, fork and vfork children
# with the purge thread running.
alloc_test(alloc_process_end SOURCES alloc/process_end.c PRELOAD TIMEOUT 90 LIBS Threads::Threads)
if(ALLOC_HAVE_LARDER)
  set_property(TEST alloc_process_end APPEND PROPERTY ENVIRONMENT "LARDER_TEST_LIB=$<TARGET_FILE:larder_shared>")
endif()
# no file descriptor opened by larder's threads (the purge thread asks whether it is alone)
alloc_test(alloc_no_descriptors SOURCES alloc/no_descriptors.c PRELOAD TIMEOUT 60 LIBS Threads::Threads
           ENV LARDER_PURGE_THREAD=1 LARDER_PURGE_DELAY_MS=20)
alloc_test(alloc_thread_start SOURCES alloc/thread_start.c PRELOAD TIMEOUT 120)
alloc_test(alloc_tls_dtor     SOURCES alloc/tls_dtor.c     PRELOAD TIMEOUT 60)
alloc_test(alloc_prodcons     SOURCES alloc/prodcons.c     PRELOAD TIMEOUT 120)
alloc_test(alloc_fork_threads SOURCES alloc/fork_threads.c PRELOAD TIMEOUT 240)
# forks from several threads at once (worker threads that each start a child process)
alloc_test(alloc_fork_concurrent SOURCES alloc/fork_concurrent.c PRELOAD TIMEOUT 120 LIBS Threads::Threads)
# exit() while other threads fork
alloc_test(alloc_fork_at_exit SOURCES alloc/fork_at_exit.c PRELOAD TIMEOUT 120 LIBS Threads::Threads)
# forks and malloc_trim calls that find a purge run under way cut it short (the purge thread
# gives back the heaps two threads thin); what the cut runs left goes back later
alloc_test(alloc_fork_during_purge SOURCES alloc/fork_during_purge.c PRELOAD TIMEOUT 120 LIBS Threads::Threads
           ENV LARDER_PURGE_THREAD=1 LARDER_PURGE_DELAY_MS=20)

# ---- Hoard's invariant, checked by larder_validate() ----
alloc_test(alloc_invariant SOURCES alloc/invariant.c PRELOAD TIMEOUT 180)

# ---- bad frees stop the program naming the address ----
alloc_test(alloc_bad_free SOURCES alloc/bad_free.c PRELOAD TIMEOUT 60)
alloc_test(alloc_bin_stale_slots SOURCES alloc/bin_stale_slots.c PRELOAD TIMEOUT 120 LIBS Threads::Threads)
alloc_test(alloc_double_free_random SOURCES alloc/double_free_random.c PRELOAD TIMEOUT 120)
# ... and a live block whose tag word was copied from reused free memory is no bad free
alloc_test(alloc_stale_tag SOURCES alloc/stale_tag.c PRELOAD TIMEOUT 120)

# ---- dlopen of a library that allocates (linked to nothing but libc) ----
add_library(alloc_dlopen_lib SHARED alloc/dlopen_lib.c)
alloc_test(alloc_dlopen SOURCES alloc/dlopen.c PRELOAD TIMEOUT 60 ARGS $<TARGET_FILE:alloc_dlopen_lib>)
add_dependencies(alloc_dlopen alloc_dlopen_lib)
if(TARGET alloc_dlopen_libc)
  add_dependencies(alloc_dlopen_libc alloc_dlopen_lib)
endif()

# ---- returning memory, large spans ----
alloc_test(alloc_trim  SOURCES alloc/trim.c  PRELOAD TIMEOUT 120)
alloc_test(alloc_parked_heap SOURCES alloc/parked_heap.c PRELOAD TIMEOUT 60)
alloc_test(alloc_heap_reuse SOURCES alloc/heap_reuse.c PRELOAD TIMEOUT 60)
alloc_test(alloc_thread_exit_key SOURCES alloc/thread_exit_key.c PRELOAD TIMEOUT 60 LIBS Threads::Threads)
alloc_test(alloc_global_free SOURCES alloc/global_free.c PRELOAD TIMEOUT 60)
alloc_test(alloc_own_frees_due SOURCES alloc/own_frees_due.c PRELOAD TIMEOUT 60)
alloc_test(alloc_hysteresis_rounds SOURCES alloc/hysteresis_rounds.c PRELOAD TIMEOUT 60)
alloc_test(alloc_superblock_restart SOURCES alloc/superblock_restart.c PRELOAD TIMEOUT 60)
alloc_test(alloc_parked_bins SOURCES alloc/parked_bins.c PRELOAD TIMEOUT 60)
# (no purge run may read main's inbox before its fill does: the test counts what the fill reads)
alloc_test(alloc_pending_bound SOURCES alloc/pending_bound.c PRELOAD TIMEOUT 60 ENV LARDER_PURGE_DELAY_MS=60000)
alloc_test(alloc_remote_hints SOURCES alloc/remote_hints.c PRELOAD TIMEOUT 60)
alloc_test(alloc_remote_into_bins SOURCES alloc/remote_into_bins.c PRELOAD TIMEOUT 60)
alloc_test(alloc_remote_per_owner SOURCES alloc/remote_per_owner.c PRELOAD TIMEOUT 60)
alloc_test(alloc_huge_pages SOURCES alloc/huge_pages.c PRELOAD TIMEOUT 60)
alloc_test(alloc_large SOURCES alloc/large.c PRELOAD TIMEOUT 120)

# ---- real programs under LD_PRELOAD print the same as without it ----
# python3 (PYTHONMALLOC=malloc, threads), a C++ program, sort(1), gcc. The driver exits 77
# (skipped) only when the tool is not installed.
add_executable(alloc_preload_cxx_program alloc/preload_cxx_program.cpp)
target_link_libraries(alloc_preload_cxx_program PRIVATE Threads::Threads)
set_target_properties(alloc_preload_cxx_program PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
if(ALLOC_HAVE_LARDER)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    foreach(case python cxx sort gcc)
      add_test(NAME alloc_preload_${case}
        COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/alloc/preload_programs.py
                --lib $<TARGET_FILE:larder_shared> --work ${CMAKE_CURRENT_BINARY_DIR}/alloc_preload
                --cxx-program $<TARGET_FILE:alloc_preload_cxx_program> ${case})
      set_tests_properties(alloc_preload_${case} PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 300)
    endforeach()
  endif()
endif()

# ---- tunables from the environment; allocation before and after main ----
alloc_test(alloc_options_env SOURCES alloc/options_env.c PRELOAD TIMEOUT 60)
# a set-user-ID program takes no LARDER_ setting from its caller's environment (root only)
alloc_test(alloc_options_secure SOURCES alloc/options_secure.c TIMEOUT 60)
alloc_test(alloc_early_late  SOURCES alloc/early_late.c  PRELOAD TIMEOUT 60)
alloc_test(alloc_blowup_idle SOURCES alloc/blowup_idle.c PRELOAD TIMEOUT 120)
# ... and with the fit tier serving its 256-byte blocks (src/fit.c): freers collect for the idle
# owners, or each would keep its 32 MiB
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_blowup_idle.fit COMMAND alloc_blowup_idle)
  set_tests_properties(alloc_blowup_idle.fit PROPERTIES ENVIRONMENT "LARDER_FIT_ABOVE=128"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
endif()

# The stress load again under other settings, read from the environment at start: debug
# checks on; and memory purged at once from 16 KiB superblocks with no large span cache,
# which puts purging and reuse side by side as often as possible.
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_mt_stress.debug_env COMMAND alloc_mt_stress 8 10000 11)
  set_tests_properties(alloc_mt_stress.debug_env PROPERTIES ENVIRONMENT "LARDER_DEBUG=1"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
  add_test(NAME alloc_mt_stress.purge_now COMMAND alloc_mt_stress 8 15000 13)
  set_tests_properties(alloc_mt_stress.purge_now PROPERTIES
    ENVIRONMENT "LARDER_PURGE_DELAY_MS=0;LARDER_SUPERBLOCK_SIZE=16384;LARDER_LARGE_CACHE_MB=0"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
  # Half of the blocks written at their ends only: freed memory's leftovers, the allocator's
  # own included, stay in the rest and travel with realloc (mt_stress.c)
  add_test(NAME alloc_mt_stress.sparse COMMAND alloc_mt_stress 8 25000 17 sparse)
  set_tests_properties(alloc_mt_stress.sparse PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
  # The API contracts with the smallest and largest superblock size, which move the
  # small/large split (S/4) and the alignments a superblock can serve.
  foreach(sb 16384 1048576)
    foreach(t alloc_api_align alloc_api_realloc alloc_api_calloc alloc_large)
      add_test(NAME ${t}.sb${sb} COMMAND ${t})
      set_tests_properties(${t}.sb${sb} PROPERTIES ENVIRONMENT "LARDER_SUPERBLOCK_SIZE=${sb}"
        SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 60)
    endforeach()
  endforeach()
  # frees purge and unmap at once, and no large span is cached: the OS calls errno could
  # leak from are on every path
  add_test(NAME alloc_errno_kept.purge_now COMMAND alloc_errno_kept)
  set_tests_properties(alloc_errno_kept.purge_now PROPERTIES
    ENVIRONMENT "LARDER_PURGE_DELAY_MS=0;LARDER_LARGE_CACHE_MB=0;LARDER_PURGE_THREAD=1"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
  add_test(NAME alloc_realloc_impossible.sb16384 COMMAND alloc_realloc_impossible)
  set_tests_properties(alloc_realloc_impossible.sb16384 PROPERTIES ENVIRONMENT "LARDER_SUPERBLOCK_SIZE=16384"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 60)
  add_test(NAME alloc_invariant.debug_env COMMAND alloc_invariant)
  set_tests_properties(alloc_invariant.debug_env PROPERTIES ENVIRONMENT "LARDER_DEBUG=1"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 180)
  add_test(NAME alloc_thread_churn.purge_now COMMAND alloc_thread_churn 2000 16)
  set_tests_properties(alloc_thread_churn.purge_now PROPERTIES
    ENVIRONMENT "LARDER_PURGE_DELAY_MS=0;LARDER_SUPERBLOCK_SIZE=16384"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
endif()
alloc_test(alloc_remote_exit SOURCES alloc/remote_exit.c PRELOAD TIMEOUT 120)
alloc_test(alloc_false_sharing SOURCES alloc/false_sharing.c PRELOAD TIMEOUT 60)

# Registrations by concern, each file with one owner: core.cmake (slow-path cost, Hoard's
# invariant at scale), server.cmake (server-scale memory and speed), hardening.cmake (misuse,
# fork, fuzzing of the API).
foreach(part core server hardening)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${part}.cmake)
    include(${CMAKE_CURRENT_LIST_DIR}/${part}.cmake)
  endif()
endforeach()
# the free pages of partly used superblocks go back (global.c), idle or at malloc_trim, and a
# second free of a block on such a page is still reported
alloc_test(alloc_free_pages_partly_used_idle SOURCES alloc/free_pages_partly_used.c PRELOAD TIMEOUT 120 ARGS idle
           ENV LARDER_PURGE_DELAY_MS=200)
alloc_test(alloc_free_pages_partly_used_trim SOURCES alloc/free_pages_partly_used.c PRELOAD TIMEOUT 120 ARGS trim)
# ... and those of idle threads' heaps: a pool thins its heaps and idles
alloc_test(alloc_free_pages_partly_used_pool SOURCES alloc/free_pages_partly_used.c PRELOAD TIMEOUT 120 ARGS pool 32
           LIBS Threads::Threads ENV LARDER_PURGE_DELAY_MS=200)
alloc_test(alloc_free_pages_partly_used_double_free SOURCES alloc/free_pages_partly_used.c PRELOAD TIMEOUT 120
           ARGS expect-double-free)
alloc_test(alloc_free_pages_partly_used_double_free_remote SOURCES alloc/free_pages_partly_used.c PRELOAD TIMEOUT 120
           ARGS expect-double-free-remote LIBS Threads::Threads)

# The fit tier (LARDER_FIT_ABOVE, src/fit.c): best fit with coalescing per thread; contents kept
# at 20,000 live blocks of 1-48 KiB, other threads' frees collected by the owner and by the
# purge, bad frees reported. Once more at a smaller size under LARDER_DEBUG=1 (validation on
# the slow paths).
alloc_test(alloc_fit_tier SOURCES alloc/fit_tier.c PRELOAD TIMEOUT 180 LIBS Threads::Threads ENV LARDER_FIT_ABOVE=1024)
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_fit_tier.debug COMMAND alloc_fit_tier 4000 3)
  set_tests_properties(alloc_fit_tier.debug PROPERTIES ENVIRONMENT "LARDER_FIT_ABOVE=1024;LARDER_DEBUG=1"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 180)
endif()

# Growth over fragments (LARDER_GROW_PURGE_KB, src/segment.c): a run of clean chunks handed out
# while free dirty runs wait that none fits gives back as much of the oldest, within the budget;
# off, nothing is given back.
alloc_test(alloc_grow_purge SOURCES alloc/grow_purge.c PRELOAD TIMEOUT 60 ENV LARDER_MEDIUM_CACHE_KB=0 LARDER_GROW_PURGE_KB=65536)
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_grow_purge.off COMMAND alloc_grow_purge)
  set_tests_properties(alloc_grow_purge.off PROPERTIES ENVIRONMENT "LARDER_MEDIUM_CACHE_KB=0"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 60)
  add_test(NAME alloc_grow_purge.budget COMMAND alloc_grow_purge)
  set_tests_properties(alloc_grow_purge.budget PROPERTIES ENVIRONMENT "LARDER_MEDIUM_CACHE_KB=0;LARDER_GROW_PURGE_KB=128"
    SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 60)
endif()
