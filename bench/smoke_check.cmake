# bench/smoke_check.cmake — the bench_smoke test: runs
#   litetx --store memory: bench --quick --json
# and checks that every row and read row has its fields, that no operation failed, and that
# writes_per_tx <= 2N+3 (counted by CountingStore). It never checks a speed target.
# Usage: cmake -DLITETX=<path of the litetx tool> -P smoke_check.cmake
if(NOT LITETX)
  message(FATAL_ERROR "pass -DLITETX=<path of the litetx tool>")
endif()
execute_process(COMMAND ${LITETX} --store memory: bench --quick --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "litetx bench exited ${rc}: ${err}\n${out}")
endif()

# Reads `field` of the JSON path given after it into `var`; fails the test if it is missing.
function(get_field var)
  string(JSON value ERROR_VARIABLE error GET "${out}" ${ARGN})
  if(error)
    message(FATAL_ERROR "missing ${ARGN}: ${error}\n${out}")
  endif()
  set(${var} "${value}" PARENT_SCOPE)
endfunction()

string(JSON rows LENGTH "${out}" rows)
# Default sizes 1, 2, 4, 16, each with 1 thread and with --threads (4).
if(NOT rows EQUAL 8)
  message(FATAL_ERROR "expected 8 rows, got ${rows}\n${out}")
endif()
math(EXPR last "${rows} - 1")
foreach(i RANGE ${last})
  foreach(f threads tx_per_s raw_cas_per_s p50_us p99_us ratio_to_bound meets_target
            peak_rss_kb commits round_trips_per_tx critical_round_trips_per_tx batches_per_tx)
    get_field(unused rows ${i} ${f})
  endforeach()
  get_field(n rows ${i} n)
  get_field(writes rows ${i} writes_per_tx)
  get_field(errors rows ${i} errors)
  math(EXPR bound "2 * ${n} + 3")
  if(writes GREATER bound)
    message(FATAL_ERROR
      "row ${i}: N=${n} costs ${writes} writes per transaction, over 2N+3 = ${bound}")
  endif()
  if(NOT errors EQUAL 0)
    message(FATAL_ERROR "row ${i}: ${errors} operations failed\n${out}")
  endif()
endforeach()

string(JSON reads LENGTH "${out}" reads)
if(NOT reads EQUAL 2)
  message(FATAL_ERROR "expected 2 read rows, got ${reads}\n${out}")
endif()
foreach(i 0 1)
  foreach(f threads committed_read_per_s committed_p50_us committed_p99_us raw_read_per_s
            raw_p50_us raw_p99_us)
    get_field(unused reads ${i} ${f})
  endforeach()
endforeach()
get_field(errors errors)
get_field(unused all_targets_met)
get_field(unused peak_rss_kb)
if(NOT errors EQUAL 0)
  message(FATAL_ERROR "${errors} operations failed\n${out}")
endif()
message(STATUS "bench_smoke: ${rows} rows, writes_per_tx within 2N+3")
