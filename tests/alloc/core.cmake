# tests/alloc/core.cmake: the cost of the core's slow paths (issue "server speed").
alloc_test(alloc_debug_cost SOURCES alloc/debug_cost.c PRELOAD TIMEOUT 120 ENV LARDER_DEBUG=1)

# The hardened build (src/hardened.cmake) under the same loads as the default one: the
# preloaded liblarder-hardened.so must pass them unchanged.
if(ALLOC_HAVE_LARDER AND TARGET larder_hardened_shared)
  foreach(entry "alloc_mt_stress|8;25000" "alloc_api_realloc|" "alloc_api_align|" "alloc_medium_churn|"
                "alloc_fork_threads|20" "alloc_fork_concurrent|20" "alloc_remote_exit|")
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 t)
    list(SUBLIST parts 1 -1 args)
    if(TARGET ${t}_libc)
      add_test(NAME ${t}.hardened COMMAND ${t}_libc ${args})
      set_tests_properties(${t}.hardened PROPERTIES ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:larder_hardened_shared>"
        SKIP_RETURN_CODE 77 LABELS alloc TIMEOUT 180)
    endif()
  endforeach()
endif()

# LARDER_VERBOSE=1 reports the version with the settings (issue "a real library").
if(ALLOC_HAVE_LARDER)
  add_test(NAME alloc_verbose_version COMMAND alloc_api_misc)
  set_tests_properties(alloc_verbose_version PROPERTIES ENVIRONMENT "LARDER_VERBOSE=1"
    PASS_REGULAR_EXPRESSION "larder [0-9]+\\.[0-9]+\\.[0-9]+: superblock" LABELS alloc TIMEOUT 60)
endif()

# The front end (issue 17): bins bounded, a thread's exit returns what it cached and buffered,
# remote frees in batches of one CAS (plus one to announce), Hoard's invariant with bins.
alloc_test(alloc_front_end SOURCES alloc/front_end.c PRELOAD TIMEOUT 120 LIBS Threads::Threads)
# A free of the block malloc handed out last goes straight back in its bin: the next malloc of
# its size hands the same block out again; counted and validated.
alloc_test(alloc_free_last_alloc SOURCES alloc/free_last_alloc.c PRELOAD TIMEOUT 60)
# Bins that grow where they cycle, within the thread's bin_growth_kb; the trim and a thread's
# exit give the growth back.
alloc_test(alloc_bin_growth SOURCES alloc/bin_growth.c PRELOAD TIMEOUT 60 LIBS Threads::Threads)
# The statistics by size class add up, follow a class's blocks in and out, and count remote frees
# in use only while they wait to be taken back
alloc_test(alloc_class_stats SOURCES alloc/class_stats.c PRELOAD TIMEOUT 60 LIBS Threads::Threads)
# A size that dominates a class's refills becomes a class of its own where it packs blocks
# tighter; sizes that gain little, mixes, and the option's bound learn nothing more
alloc_test(alloc_learned_classes SOURCES alloc/learned_classes.c PRELOAD TIMEOUT 60 LIBS Threads::Threads)

# Honest figures (issue 15): bytes_in_use back near zero after all is freed, own and remote
# frees, threads alive; mallinfo2 agrees.
alloc_test(alloc_stats_in_use SOURCES alloc/stats_in_use.c PRELOAD TIMEOUT 60 LIBS Threads::Threads)
