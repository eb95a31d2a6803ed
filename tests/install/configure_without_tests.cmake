# Configures litetx with LITETX_BUILD_TESTS=OFF and LITETX_BUILD_EXAMPLES=OFF while GoogleTest,
# RapidCheck and Google Benchmark are disabled (CMAKE_DISABLE_FIND_PACKAGE_*: a REQUIRED lookup
# of a disabled package is an error), then checks that the tool is still a target and that no
# test was registered. Variables: SRC (litetx's source tree), WORK (scratch build directory).
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}" -B "${WORK}" -DLITETX_BUILD_TESTS=OFF
    -DLITETX_BUILD_EXAMPLES=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_rapidcheck=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure without tests failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}" --target help
    RESULT_VARIABLE rc OUTPUT_VARIABLE targets)
if(NOT rc EQUAL 0 OR NOT targets MATCHES "litetx_cli")
  message(FATAL_ERROR "no litetx_cli target in the configure without tests:\n${targets}")
endif()
if(targets MATCHES "litetx_tests|litetx_property_tests|cli_tests|stress_tests")
  message(FATAL_ERROR "test targets exist with LITETX_BUILD_TESTS=OFF:\n${targets}")
endif()
if(EXISTS "${WORK}/CTestTestfile.cmake")
  file(READ "${WORK}/CTestTestfile.cmake" ctest_file)
  if(ctest_file MATCHES "add_test")
    message(FATAL_ERROR "tests registered with LITETX_BUILD_TESTS=OFF")
  endif()
endif()
message(STATUS "configured without tests; litetx_cli is a target, no test framework looked up")
