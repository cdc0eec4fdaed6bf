# tests/alloc, hardening (issue 12): misuse stopped with a message naming the address (never a
# SIGSEGV), fork from a signal handler and under stdio locks, output with a cancellation
# pending, statistics while threads start, the ownership map, the prefixed API under TSan, and
# the hardened build. Included from tests.cmake, which defines alloc_test(); paths are relative
# to tests/. Each was written before the core could pass it; docs/hardening.md says which pass
# at which commit.

# ---- the ownership map, unit-tested from its own source and os.c ----
if(EXISTS ${PROJECT_SOURCE_DIR}/src/addrmap.c)
  add_executable(alloc_addrmap_unit alloc/addrmap_unit.c ${PROJECT_SOURCE_DIR}/src/addrmap.c
                 ${PROJECT_SOURCE_DIR}/src/os.c)
  set_target_properties(alloc_addrmap_unit PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
  target_include_directories(alloc_addrmap_unit PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(alloc_addrmap_unit PRIVATE Threads::Threads)
  add_test(NAME alloc_addrmap_unit COMMAND alloc_addrmap_unit)
  set_tests_properties(alloc_addrmap_unit PROPERTIES LABELS alloc TIMEOUT 120)
endif()

# ---- unit tests against liblarder.a with the library's internal header ----
# A long purge delay for each: the inbox test holds main's heap lock while its senders run and
# exit, and a purge run that judged main idle (no slow call for a delay, on a loaded machine)
# would wait for that lock in an exiting sender that main joins; the hint test sets a fill up
# by hand, which a purge run between would undo.
function(alloc_internal_test name source)
  add_executable(${name} ${source})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${LARDER_TEST_DIR})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                             ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE larder_static Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS alloc TIMEOUT 120 ENVIRONMENT "LARDER_PURGE_DELAY_MS=60000")
endfunction()
if(TARGET larder_static)
  alloc_internal_test(alloc_inbox_unit alloc/inbox_unit.c) # the inbox of remote frees
  alloc_internal_test(alloc_hint_room alloc/hint_room.c)   # a hinted batch and a bin without room for it whole
  alloc_internal_test(alloc_bin_least alloc/bin_least.c)   # every bin holds 3 blocks: a pair stays on the fast paths
  alloc_internal_test(alloc_bin_places alloc/bin_places.c) # bins laid out in the order their classes are met
  alloc_internal_test(alloc_heap_pages alloc/heap_pages.c) # the pages a resting thread's heap writes
  alloc_internal_test(alloc_first_fill alloc/first_fill.c) # a class's first refill carves about a page of blocks
  alloc_internal_test(alloc_watch_current alloc/watch_current.c) # a superblock a fill uses up is never watched
  alloc_internal_test(alloc_mark_lookup alloc/mark_lookup.c) # a free that finds a mark looks in one ring
  alloc_internal_test(alloc_options_run_time alloc/options_run_time.c) # larder_option_set files every heap itself
  alloc_internal_test(alloc_trim_bounded alloc/trim_bounded.c) # malloc_trim purges what was free when called
  alloc_internal_test(alloc_lock_shared alloc/lock_shared.c) # a process-wide lock's waiters spin past a running holder
  alloc_internal_test(alloc_class_map alloc/class_map.c) # a small superblock's class in the ownership map, for remote frees
  # (alone: a test beside it preempts the holder, and a preempted holder's waiters rightly sleep)
  set_tests_properties(alloc_lock_shared PROPERTIES RUN_SERIAL TRUE)
endif()

# ---- misuse of pointers: static, stack, foreign mmap, wild; double and interior frees;
# realloc of freed blocks (each in a child; message with the address and SIGABRT) ----
alloc_test(alloc_misuse_pointers SOURCES alloc/misuse_pointers.c PRELOAD TIMEOUT 120)
# A free block's link overwritten into a cycle: the fill's count stops it, naming a block.
alloc_test(alloc_free_list_cycle SOURCES alloc/free_list_cycle.c PRELOAD TIMEOUT 60)

# ---- fork from a SIGALRM handler in a single-threaded process, 1,000 times (deadline 20 s
# inside the test, which kills the stuck process and reports the deadlock) ----
alloc_test(alloc_misuse_fork_signal SOURCES alloc/misuse_fork_signal.c PRELOAD TIMEOUT 60)
# The handler's fork inside the main flow's (glibc's tst-mallocfork2). Without the purge
# thread: with it the process has two threads, and glibc's own fork then takes its atfork lock,
# which the nested fork waits for for ever (docs/allocator.md, known limits).
add_test(NAME alloc_misuse_fork_in_fork COMMAND alloc_misuse_fork_signal 1000 fork)
set_tests_properties(alloc_misuse_fork_in_fork PROPERTIES LABELS alloc TIMEOUT 60 ENVIRONMENT "LARDER_PURGE_THREAD=0")
if(TARGET alloc_misuse_fork_signal_libc)
  add_test(NAME alloc_misuse_fork_in_fork.preload COMMAND alloc_misuse_fork_signal_libc 1000 fork)
  set_tests_properties(alloc_misuse_fork_in_fork.preload PROPERTIES LABELS alloc TIMEOUT 60
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:larder_shared>;LARDER_PURGE_THREAD=0")
endif()

# ---- larder's output: with a cancellation pending (malloc_stats, warnings), and a warning
# cut at the length limit keeps its newline ----
alloc_test(alloc_misuse_cancel SOURCES alloc/misuse_cancel.c PRELOAD TIMEOUT 60)
alloc_test(alloc_misuse_message_cut SOURCES alloc/misuse_message_cut.c PRELOAD TIMEOUT 60)

# ---- multithreaded fork while other threads hold stdio locks and allocate (three patterns;
# a stuck process is killed after 20 s and reported) ----
alloc_test(alloc_misuse_fork_stdio SOURCES alloc/misuse_fork_stdio.c PRELOAD TIMEOUT 120)

# ---- the prefixed API from several threads, nothing else: ThreadSanitizer's test
# (scripts/test-sanitize.sh); in the normal build a quick stress test ----
alloc_test(alloc_misuse_threads_prefixed SOURCES alloc/misuse_threads_prefixed.c TIMEOUT 120)
# idle threads' heaps emptied and their sparse superblocks given away by the purge while the
# others call and trim (prefixed API only: TSan can run it, see the file)
alloc_test(alloc_idle_heaps_prefixed SOURCES alloc/idle_heaps_prefixed.c TIMEOUT 120 LIBS Threads::Threads)
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_misuse_threads_prefixed.nostats COMMAND alloc_misuse_threads_prefixed 20000 nostats)
  set_tests_properties(alloc_misuse_threads_prefixed.nostats PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120)
  # with the fit tier serving every block above 256 B (src/fit.c): blocks handed between threads
  # go back by their regions' stacks, grown by realloc, collected by owners and by the purge
  add_test(NAME alloc_misuse_threads_prefixed.fit COMMAND alloc_misuse_threads_prefixed 20000)
  set_tests_properties(alloc_misuse_threads_prefixed.fit PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 120
    ENVIRONMENT "LARDER_FIT_ABOVE=256")
endif()

# ---- the hardened build: a forged free-list link is stopped (docs/hardening.md). Only when
# the core defines a larder_hardened library (-DLARDER_HARDENED=ON) ----
if(TARGET larder_hardened)
  larder_test(alloc_hardened_uaf SOURCES alloc/hardened_uaf.c LIBS larder_hardened ${CMAKE_DL_LIBS} TIMEOUT 60)
  set_tests_properties(alloc_hardened_uaf PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc)
  # the hardened build's tags, as the default build's: a copied tag is no double free
  larder_test(alloc_stale_tag_hardened SOURCES alloc/stale_tag.c LIBS larder_hardened ${CMAKE_DL_LIBS} TIMEOUT 120)
  set_tests_properties(alloc_stale_tag_hardened PROPERTIES SKIP_RETURN_CODE 77 LABELS alloc)
endif()

# ---- statistics read while threads start (a crash found by the TSan run) ----
alloc_test(alloc_misuse_stats_during_start SOURCES alloc/misuse_stats_during_start.c PRELOAD TIMEOUT 120)
