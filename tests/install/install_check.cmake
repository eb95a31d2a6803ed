# Installs the built litetx into a scratch prefix, builds tests/install/consumer against it with
# find_package(litetx), runs it, and checks its output (the README example's last line).
# Variables: BUILD_DIR (litetx's build tree), SRC (the consumer), WORK (scratch directory).
file(REMOVE_RECURSE "${WORK}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK}/prefix")
run(${CMAKE_COMMAND} -S "${SRC}" -B "${WORK}/build" -DCMAKE_PREFIX_PATH=${WORK}/prefix
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK}/build")
run("${WORK}/build/consumer")
# alice's version: her first (the clock in microseconds, a multiple of 1000) plus one write.
if(NOT out MATCHES "alice v[1-9][0-9]*001 {\"balance\":70}")
  message(FATAL_ERROR "unexpected output of the consumer:\n${out}")
endif()
message(STATUS "installed litetx found, linked and ran: ${out}")
