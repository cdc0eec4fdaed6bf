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
# At the seeds suite's scale (hoard-blowup: 100,000 blocks of 64 B a turn), 4 threads: larder's
# blowup stays near 2 (glibc's is about 5, the thread count). A heap that kept 64 superblocks of
# slack for classes other threads' frees emptied (hysteresis, internal.h LD_BOOST_MAX_COLLECTED)
# read 3.53 here.
bench_check(blowup-scale blowup
  CHECKS --params threads,blocks,size,rounds
         --figures baseline_rss_bytes,peak_rss_bytes,final_rss_bytes,maxrss_bytes,ideal_bytes,blowup,elapsed_s
         "--expr=f['blowup'] >= 0.9"
         "--expr=f['blowup'] <= 2.6 or not preload"
  ARGS -t 4 --blocks 100000 --size 64 --rounds 10)

# ---- churn (issue 8): a large live heap replaced at random ----
set(CHURN_FIGS cpu_ns_per_op,ops,ops_per_cpu_s,ops_per_s,cpu_s,wall_s,fill_s,remote_frees,reallocs,minflt,peak_rss_kib,rss_kib,mapped_kib,mapped_peak_kib)
set(CHURN_PARAMS threads,live,min_size,max_size,mix,ops,seconds,remote_share,seed,touch,realloc_share)
# Fixed count, two threads handing a quarter of their frees to each other: every thread does
# exactly --ops replacements; the CPU figures are one another's arithmetic; about a quarter of
# the frees went through the ring; the process held at least the live blocks (2 x 5000 x ~16 B).
bench_check(churn.remote churn
  CHECKS --params ${CHURN_PARAMS} --figures ${CHURN_FIGS}
         --param threads=2 --param ops=20000 --param mix=\"small\" --param remote_share=0.25
         --figure ops=40000 --positive cpu_ns_per_op,ops_per_cpu_s,cpu_s,wall_s,peak_rss_kib,rss_kib,mapped_kib
         "--expr=abs(f['cpu_ns_per_op'] * f['ops'] * 1e-9 - f['cpu_s']) < 1e-6 * f['cpu_s'] + 1e-9"
         "--expr=abs(f['ops_per_cpu_s'] * f['cpu_s'] - f['ops']) < 1e-6 * f['ops']"
         "--expr=0.2 * f['ops'] <= f['remote_frees'] <= 0.3 * f['ops']"
         "--expr=f['peak_rss_kib'] >= f['rss_kib'] and f['mapped_peak_kib'] >= f['mapped_kib']"
         "--expr=f['mapped_kib'] >= f['rss_kib']"
  ARGS -t 2 --live 5000 --ops 20000 --remote-share 0.25 --mix small)
# Timed, one thread whose remote share goes to a helper thread, large blocks with every page
# written: the phase lasts at least --seconds, half the frees are remote, and the blocks were
# really written (RSS holds most of 300 live blocks of 150 KiB on average, 44 MiB).
bench_check(churn.timed churn
  CHECKS --figures ${CHURN_FIGS} --param touch=true --param ops=0 --param seconds=0.3
         --positive ops,remote_frees
         "--expr=f['wall_s'] >= 0.3"
         "--expr=0.4 * f['ops'] <= f['remote_frees'] <= 0.6 * f['ops']"
         "--expr=f['rss_kib'] >= 0.5 * 300 * 150000 / 1024"
  ARGS --live 300 --seconds 0.3 --remote-share 0.5 --min-size 1000 --max-size 300000 --touch)
# No remote share: no ring, no remote frees.
bench_check(churn.local churn
  CHECKS --figure remote_frees=0 --figure reallocs=0 --figure ops=30000 --param min_size=256 --param max_size=256
         --param mix=\"uniform\" --param threads=1
  ARGS --live 10000 --ops 30000)
# Half the steps grow their block with realloc (strings and vectors in a live heap): about half
# of the steps are reallocs, and the process held at least the live blocks.
bench_check(churn.realloc churn
  CHECKS --params ${CHURN_PARAMS} --figures ${CHURN_FIGS} --param realloc_share=0.5 --figure ops=40000
         --figure remote_frees=0 --positive cpu_ns_per_op,peak_rss_kib
         "--expr=0.4 * f['ops'] <= f['reallocs'] <= 0.6 * f['ops']"
         "--expr=f['peak_rss_kib'] >= 5000 * 16 / 1024"
  ARGS --live 5000 --ops 40000 --mix small --realloc-share 0.5)
bench_bad(churn -- --mix big -- --mix -- --min-size 300 --max-size 100 -- --remote-share 1.5 -- --realloc-share 2
          -- --remote-share -0.1 -- --live 0 -- --seconds 0 -- --touch=1 -- --ops x)

# ---- server-mix (issue 9): a server's RSS over work, idle and thread exit ----
set(SM_FIGS ops,ops_per_s,remote_frees,large_allocs,rss_start_kib,peak_rss_kib,rss_5s_kib,rss_end_work_kib,rss_after_free_kib,rss_after_idle_kib,rss_after_exit_kib,mapped_peak_kib,mapped_kib,idle_calls,work_begin_s,work_end_s,idle_end_s,exit_s,samples,rss_series,live_5s_kib,live_end_work_kib,live_after_free_kib,live_peak_kib,live_series)
set(SM_PARAMS threads,working_set,max_size,seconds,remote_share,idle_seconds,idle_calls,exit_wait_ms,sample_ms,seed,touch)
# Short run with idle calls: the phases come in order and last what was asked; three idle
# calls in 0.3 s; work shorter than 5 s, so rss_5s_kib is null; the series is [t, kib] pairs in
# time order; the peak is at least every reading.
bench_check(server-mix server-mix
  CHECKS --params ${SM_PARAMS} --figures ${SM_FIGS} --nullable rss_5s_kib,live_5s_kib
         --param threads=2 --param idle_calls=true --param touch=false --figure idle_calls=3
         --figure live_after_free_kib=0 --positive live_peak_kib
         "--expr=f['live_5s_kib'] is None and len(f['live_series']) == len(f['rss_series'])"
         "--expr=max(y for t, y in f['live_series']) <= f['live_peak_kib'] and f['live_end_work_kib'] <= f['live_peak_kib']"
         --positive ops,remote_frees,large_allocs,peak_rss_kib,mapped_kib
         "--expr=f['rss_5s_kib'] is None"
         "--expr=f['work_end_s'] - f['work_begin_s'] >= 0.5 and f['idle_end_s'] - f['work_end_s'] >= 0.3 and f['exit_s'] >= f['idle_end_s']"
         "--expr=all(a[0] < b[0] for a, b in zip(f['rss_series'], f['rss_series'][1:]))"
         "--expr=len(f['rss_series']) >= 20 and f['rss_series'][0][0] < f['work_begin_s'] + 0.1"
         "--expr=f['peak_rss_kib'] >= max(y for t, y in f['rss_series']) and f['peak_rss_kib'] >= f['rss_end_work_kib']"
         "--expr=f['mapped_peak_kib'] >= f['mapped_kib'] or f['samples'] == 0"
  ARGS -t 2 --seconds 0.5 --idle-seconds 0.3 --idle-calls --exit-wait-ms 50 --sample-ms 20 --working-set 64)
# Many samples are thinned to at most 400 points, the last one kept.
bench_check(server-mix.thinned server-mix
  CHECKS --figures ${SM_FIGS} --nullable rss_5s_kib,live_5s_kib --figure idle_calls=0 --param touch=true
         "--expr=f['samples'] > 400 and 200 <= len(f['rss_series']) <= 401"
         "--expr=f['rss_series'][-1][0] >= f['exit_s']"
  ARGS -t 1 --remote-share 0.5 --seconds 0.6 --idle-seconds 0.1 --exit-wait-ms 50 --sample-ms 1 --working-set 32 --touch)
# Past 5 s of work rss_5s_kib is a reading (one thread, small working set: about 5 s of one core).
bench_check(server-mix.5s server-mix
  CHECKS --figures ${SM_FIGS} --positive rss_5s_kib,live_5s_kib
         "--expr=f['rss_5s_kib'] <= f['peak_rss_kib'] and f['live_5s_kib'] <= f['live_peak_kib']"
  TIMEOUT 60
  ARGS -t 1 --remote-share 0 --seconds 5.1 --idle-seconds 0 --exit-wait-ms 0 --working-set 32)
bench_bad(server-mix -- --max-size 1000 -- --remote-share 2 -- --idle-calls=yes -- --sample-ms 0
          -- --working-set 0 -- --idle-seconds -1 -- --seconds 0)

# ---- idle-return (issue 15): memory back after the frees, with no allocator calls ----
set(IR_FIGS procs,blocks,kept_blocks,live_bytes,alloc_bytes_in_use,stats_from_larder,remote_frees,work_ops,rss_start_kib,rss_peak_kib,rss_after_free_kib,rss_after_1_delay_kib,rss_after_2_delays_kib,rss_after_5_delays_kib,rss_after_10_delays_kib,rss_after_idle_kib,build_s,free_s,build_end_s,idle_start_s,idle_end_s,proc_rss_peak_kib,proc_rss_after_free_kib,proc_rss_after_idle_kib,proc_live_bytes,samples,rss_series)
set(IR_PARAMS shape,threads,heap_mb,min_size,max_size,large_share,large_min,large_max,keep_fraction,remote_share,purge_delay_ms,idle_ms,sample_ms,work_blocks,parent_mb,seed,stats_source)
# The statistics come from liblarder when it is preloaded and from glibc's mallinfo2 otherwise.
set(IR_SOURCE "--expr=p['stats_source'] == ('larder_stats_get' if preload else 'mallinfo2') and f['stats_from_larder'] == (1 if preload else 0)")
# An idle of 3 purge delays: the readings after 5 and 10 delays are null.
set(IR_SHORT --nullable rss_after_5_delays_kib,rss_after_10_delays_kib
    "--expr=f['rss_after_5_delays_kib'] is None and f['rss_after_10_delays_kib'] is None")
# Event loop, everything freed: the heap was built and written (RSS held most of its 16 MiB),
# nothing is live, the idle lasted what was asked and reached all four readings, the sampler
# ran from the start to the end of the idle.
bench_check(idle-return.loop idle-return
  CHECKS --params ${IR_PARAMS} --figures ${IR_FIGS} ${IR_SOURCE}
         --param shape=\"loop\" --param threads=2 --param idle_ms=1100
         --figure procs=1 --figure kept_blocks=0 --figure live_bytes=0 --figure remote_frees=0
         --positive blocks,rss_start_kib,rss_after_1_delay_kib,rss_after_10_delays_kib,alloc_bytes_in_use
         "--expr=16 * 2**20 / 1024 <= f['blocks'] <= 16 * 2**20 / 16 + 1"
         "--expr=f['rss_peak_kib'] >= f['rss_start_kib'] + 0.8 * 16 * 1024"
         "--expr=f['build_end_s'] <= f['idle_start_s'] and f['idle_end_s'] - f['idle_start_s'] >= 1.1"
         "--expr=all(a[0] < b[0] for a, b in zip(f['rss_series'], f['rss_series'][1:]))"
         "--expr=len(f['rss_series']) >= 40 and f['rss_series'][-1][0] >= f['idle_end_s'] - 0.1"
         "--expr=f['proc_rss_after_idle_kib'] == [f['rss_after_idle_kib']]"
  ARGS --shape loop -t 2 --heap-mb 16 --purge-delay-ms 100 --idle-ms 1100 --sample-ms 20)
# Half the blocks kept (1% of them 64-256 KiB): the live bytes are about half the heap, stay
# resident, and the allocator counts at least them in use; an idle of 2.5 delays reaches the
# first two readings only.
bench_check(idle-return.keep idle-return
  CHECKS --figures ${IR_FIGS} ${IR_SOURCE} --nullable rss_after_5_delays_kib,rss_after_10_delays_kib
         --param keep_fraction=0.5 --param large_share=0.01
         --positive rss_after_1_delay_kib,rss_after_2_delays_kib
         "--expr=f['rss_after_5_delays_kib'] is None and f['rss_after_10_delays_kib'] is None"
         "--expr=0.35 * 16 * 2**20 <= f['live_bytes'] <= 0.65 * 16 * 2**20"
         "--expr=0.45 * f['blocks'] <= f['kept_blocks'] <= 0.55 * f['blocks']"
         "--expr=f['rss_after_idle_kib'] * 1024 >= 0.9 * f['live_bytes']"
         "--expr=f['alloc_bytes_in_use'] >= f['live_bytes']"
  ARGS -t 1 --heap-mb 16 --keep-fraction 0.5 --large-share 0.01 --large-min 65536
       --large-max 262144 --purge-delay-ms 100 --idle-ms 250)
# Pool of two threads, a quarter of the frees done by the other thread.
bench_check(idle-return.pool idle-return
  CHECKS --figures ${IR_FIGS} ${IR_SOURCE} ${IR_SHORT} --param shape=\"pool\" --figure procs=1 --figure live_bytes=0
         "--expr=0.2 * f['blocks'] <= f['remote_frees'] <= 0.3 * f['blocks']"
         "--expr=f['rss_peak_kib'] >= f['rss_start_kib'] + 0.8 * 16 * 1024"
  ARGS --shape pool -t 2 --heap-mb 16 --remote-share 0.25 --purge-delay-ms 100 --idle-ms 300)
# Two worker processes after the parent built and freed 4 MiB from two threads: each built its
# own 8 MiB (RSS of each held it) and kept its quarter; the top-level figures are the largest.
bench_check(idle-return.fork idle-return
  CHECKS --figures ${IR_FIGS} ${IR_SOURCE} ${IR_SHORT} --param shape=\"fork\" --param parent_mb=4 --figure procs=2
         --len proc_rss_peak_kib=2 --len proc_rss_after_idle_kib=2 --len proc_live_bytes=2
         "--expr=all(k >= 0.8 * 8 * 1024 for k in f['proc_rss_peak_kib'])"
         "--expr=all(0.15 * 8 * 2**20 <= b <= 0.35 * 8 * 2**20 for b in f['proc_live_bytes'])"
         "--expr=f['rss_after_idle_kib'] == max(f['proc_rss_after_idle_kib']) and f['live_bytes'] == max(f['proc_live_bytes'])"
  ARGS --shape fork -t 2 --heap-mb 8 --parent-mb 4 --keep-fraction 0.25 --purge-delay-ms 100 --idle-ms 300)
# One thread idles while another keeps replacing blocks: the worker worked through the idle,
# and its working set is live.
bench_check(idle-return.one-idle idle-return
  CHECKS --figures ${IR_FIGS} ${IR_SOURCE} ${IR_SHORT} --param shape=\"one-idle\" --param work_blocks=500
         --positive work_ops
         "--expr=500 * 16 <= f['live_bytes'] <= 500 * 1024"
  ARGS --shape one-idle -t 1 --heap-mb 8 --work-blocks 500 --purge-delay-ms 100 --idle-ms 300)
bench_bad(idle-return -- --shape tree -- --shape -- --keep-fraction 2 -- --min-size 100 --max-size 10
          -- --large-min 10 --large-max 5 -- --parent-mb 4 -- --heap-mb 0 -- --idle-ms x
          -- --purge-delay-ms -5 -- --large-share nan)

# ---- remote-free (issue 17): CPU per block when every free is another thread's ----
set(RF_FIGS cpu_ns_per_block,producer_ns_per_malloc,consumer_ns_per_free,frees_per_s,mallocs,frees,elapsed_s,producer_cpu_s,consumer_cpu_s,process_cpu_s,malloc_batches,free_batches,clock_overhead_ns,pinned,cpus)
set(RF_PARAMS pairs,consumers,min_size,max_size,seconds,blocks,batch,queue,pin,touch,seed,producer_cpus,consumer_cpus)
# A fixed count: every block is freed; the per-block figures are one another's arithmetic and
# the timed CPU is part of the process's; 20000 blocks in batches of 64 make 313 malloc
# batches per producer; pinned exactly when there are two CPUs or more.
bench_check(remote-free.count remote-free
  CHECKS --params ${RF_PARAMS} --figures ${RF_FIGS} --param pairs=2 --param pin=\"auto\"
         --figure mallocs=40000 --figure frees=40000 --figure malloc_batches=626
         --positive cpu_ns_per_block,producer_ns_per_malloc,consumer_ns_per_free,frees_per_s,clock_overhead_ns
         "--expr=abs(f['cpu_ns_per_block'] - f['producer_ns_per_malloc'] - f['consumer_ns_per_free']) <= 1e-6 * f['cpu_ns_per_block']"
         "--expr=abs(f['producer_ns_per_malloc'] * f['mallocs'] - f['producer_cpu_s'] * 1e9) <= 1e-6 * f['producer_cpu_s'] * 1e9"
         "--expr=abs(f['consumer_ns_per_free'] * f['frees'] - f['consumer_cpu_s'] * 1e9) <= 1e-6 * f['consumer_cpu_s'] * 1e9"
         "--expr=f['free_batches'] * 64 >= f['frees']"
         "--expr=f['producer_cpu_s'] + f['consumer_cpu_s'] <= f['process_cpu_s'] + 0.01"
         "--expr=abs(f['frees_per_s'] * f['elapsed_s'] - f['frees']) <= 1e-6 * f['frees']"
         "--expr=f['pinned'] == (1 if f['cpus'] >= 2 else 0) and (p['producer_cpus'] == 'any') == (f['pinned'] == 0)"
  ARGS --pairs 2 --blocks 20000 --batch 64)
# Timed, not pinned: the run lasts what was asked.
bench_check(remote-free.timed remote-free
  CHECKS --figures ${RF_FIGS} --param pin=\"off\" --figure pinned=0 --param producer_cpus=\"any\"
         --positive frees,cpu_ns_per_block
         "--expr=f['elapsed_s'] >= 0.3 and f['frees'] == f['mallocs']"
  ARGS -t 1 --seconds 0.3 --pin off --min-size 1000 --max-size 5000)
# The consumer writes each block before freeing it: every block still freed, the choice named.
bench_check(remote-free.touch remote-free
  CHECKS --figures ${RF_FIGS} --param touch=\"write\" --figure mallocs=5000 --figure frees=5000
         --positive consumer_ns_per_free
  ARGS --blocks 5000 --touch write)
# Fan-in: four producers hand every block to one consumer, which frees them all.
bench_check(remote-free.fan-in remote-free
  CHECKS --params ${RF_PARAMS} --figures ${RF_FIGS} --param pairs=4 --param consumers=1
         --figure mallocs=20000 --figure frees=20000 --figure malloc_batches=316
         --positive consumer_ns_per_free,producer_ns_per_malloc
         "--expr=f['free_batches'] * 64 >= f['frees']"
         "--expr=abs(f['consumer_ns_per_free'] * f['frees'] - f['consumer_cpu_s'] * 1e9) <= 1e-6 * f['consumer_cpu_s'] * 1e9"
  ARGS --pairs 4 --consumers 1 --blocks 5000 --batch 64)
bench_bad(remote-free -- --min-size 100 --max-size 10 -- --pin maybe -- --touch all -- --batch 0 -- --queue 1
          -- --seconds 0 -- --blocks x -- --pairs 257 -- --pairs 2 --consumers 3 -- --consumers 257)

# ---- soak: every block checked; 0 corrupt, and the shares of the work as asked ----
set(SOAK_FIGS ops,ops_per_s,ops_per_cpu_s,handed_over,reallocs,callocs,aligned,short_lived_threads,idle_phases,thinnings,validations,validation_failures,forks,fork_failures,trims,option_sets,option_refusals,stats_reads,corrupt,peak_rss_kib,elapsed_s,cpu_s)
set(SOAK_PARAMS threads,live,seconds,max_size,remote_share,realloc_share,calloc_share,align_share,idle_every,idle_seconds,thin_every,short_lived,full_fill,validate,seed,fork_every,trim_every,options_every,stats_every)
bench_check(soak soak
  CHECKS --params ${SOAK_PARAMS} --figures ${SOAK_FIGS} --figure corrupt=0 --figure validation_failures=0
         --positive ops,handed_over,reallocs,callocs,aligned,short_lived_threads,peak_rss_kib
         "--expr=f['elapsed_s'] >= 1.0 and f['idle_phases'] >= 1"
         "--expr=0.02 <= f['reallocs'] / f['ops'] <= 0.08"
         "--expr=abs(f['ops_per_s'] * f['elapsed_s'] - f['ops']) <= 1e-6 * f['ops']"
  ARGS -t 3 --live 2000 --seconds 1 --short-lived 1 --idle-every 0.4 --idle-seconds 0.2 --validate)
# The process's life under the same load: forks (each child checks the workers' blocks, frees
# them, allocates in threads of its own, validates and exits 0), thinnings (a cache flushed:
# the workers free all but 1 in 50 of their blocks and refill), malloc_trim, the statistics
# read and larder's options changed at run time, all while the workers run; every byte written and checked
# (--full-fill, whose check compared the last two words wrongly until 2026-11-28).
bench_check(soak.process soak
  CHECKS --params ${SOAK_PARAMS} --figures ${SOAK_FIGS} --figure corrupt=0 --figure validation_failures=0
         --figure fork_failures=0 --figure option_refusals=0 --positive ops,handed_over,forks,trims,stats_reads,thinnings
         "--expr=f['option_sets'] >= 4 and f['validations'] >= 1 if preload else f['option_sets'] == 0"
  ARGS -t 3 --live 2000 --seconds 1.5 --fork-every 0.2 --trim-every 0.2 --options-every 0.05 --stats-every 0.05 --validate
       --full-fill --thin-every 0.3)
bench_bad(soak -- --live 0 -- --max-size 1000 -- --remote-share 2 -- --short-lived 65 -- --seconds 0
          -- --fork-every -1 -- --trim-every x -- --options-every 1e9 -- --stats-every -2 -- --thin-every -1)

# ---- drop-wait: a dropped heap, workers' calls timed; the percentiles in order ----
set(DW_FIGS build_s,drop_s,rss_peak_kib,calls,worst_call_us,worst_call_at_s,calls_over_100us,calls_over_1ms,p999_call_us,p9999_call_us,rss_end_kib,forks,worst_fork_us,forks_over_100ms)
bench_check(drop-wait drop-wait
  CHECKS --params heap_mb,block_size,workers,seconds,worker_size,worker_max_mb,pause_ms --figures ${DW_FIGS}
         --positive calls,rss_peak_kib
         "--expr=f['p999_call_us'] <= f['p9999_call_us'] <= f['worst_call_us'] + 1"
         "--expr=f['calls_over_1ms'] <= f['calls_over_100us'] <= f['calls']"
  ARGS --heap-mb 16 -w 2 --seconds 0.3 --worker-max-mb 4)
# forks while the drop goes back: each child exits 0 (else the program fails), every fork timed
bench_check(drop-wait.fork drop-wait
  CHECKS --figures ${DW_FIGS} --positive calls,forks
         "--expr=f['forks_over_100ms'] <= f['forks'] and f['worst_fork_us'] > 0"
  ARGS --heap-mb 16 -w 2 --seconds 0.3 --worker-max-mb 4 --fork-every-ms 10)
bench_bad(drop-wait -- --heap-mb 0 -- --workers 0 -- --seconds 0 -- --pause-ms -1 -- --block-size x -- --fork-every-ms -1)

# ---- tail-latency: a server's mix, every call timed; the counts and percentiles in order ----
bench_check(tail-latency tail-latency
  CHECKS --params workers,seconds,slots,phase_s,seed
         --figures calls,calls_per_s,worst_call_us,worst_malloc_us,worst_free_us,calls_over_1ms,calls_over_10ms,calls_over_100ms,p999_call_us,p9999_call_us,p99999_call_us,rss_end_work_kib,rss_after_free_kib
         --positive calls,calls_per_s,rss_end_work_kib
         "--expr=f['p999_call_us'] <= f['p9999_call_us'] <= f['p99999_call_us'] <= f['worst_call_us'] + 1"
         "--expr=f['calls_over_100ms'] <= f['calls_over_10ms'] <= f['calls_over_1ms'] <= f['calls']"
         "--expr=f['worst_call_us'] == max(f['worst_malloc_us'], f['worst_free_us'])"
  ARGS -w 3 --seconds 0.6 --slots 2000 --phase-s 0.2)
bench_bad(tail-latency -- --workers 0 -- --seconds 0 -- --slots 0 -- --phase-s 0 -- --seed x -- --workers 2000)

# ---- thread-rest: threads that hold a few blocks and wait; the growth per thread adds up ----
bench_check(thread-rest thread-rest
  CHECKS --params threads,classes,stack_kib
         --figures kib_per_thread,mapped_kib_per_thread,rss_before_kib,rss_resting_kib,rss_after_exit_kib,start_s
         --param threads=20 --param classes=6 --param stack_kib=64
         --positive kib_per_thread,rss_before_kib,rss_resting_kib
         "--expr=abs(f['kib_per_thread'] * p['threads'] - (f['rss_resting_kib'] - f['rss_before_kib'])) <= 0.01 * p['threads']"
         "--expr=f['rss_resting_kib'] > f['rss_before_kib']"
  ARGS --threads 20 --classes 6)
bench_bad(thread-rest -- --classes 0 -- --classes 65 -- --stack-kib 8 -- --threads 5000 -- --classes x)
