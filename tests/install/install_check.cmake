# Installs the built litetx into a scratch prefix and consumes it the ways a user would:
#  1. find_package(litetx) with the core only (consumer/), configured with pkg-config unable
#     to find LMDB or hiredis and with GoogleTest disabled: the core needs none of them. The
#     program prints litetx::Version() and runs the README example.
#  2. find_package(litetx COMPONENTS lmdb [redis] store_contract) (components/): a program on
#     the LMDB (and Redis) store, and the store contract suite run on MemoryStore, which must
#     run every contract test. Asking for a component that does not exist must fail.
#  3. pkg-config: `pkg-config --modversion` of litetx, litetx-lmdb (and litetx-redis) is the
#     version; consumer/main.cpp is compiled with `pkg-config --cflags --libs litetx` only,
#     components/backends.cpp with litetx-lmdb (and litetx-redis), and both are run.
#  4. The installed `litetx --version` prints the version; its manual page and bash completion
#     are installed and are the ones the installed tool generates.
# Variables: BUILD_DIR (litetx's build tree), SRC (tests/install), WORK (scratch directory),
# VERSION (the project version), CXX (the C++ compiler), WITH_REDIS (ON/OFF), CONTRACT_SRC
# (tests/store_contract.cpp, whose TEST_P count the contract run must match).
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/no-pkgconfig")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
function(expect what regex text)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected a match of '${regex}' in:\n${text}")
  endif()
endfunction()
string(REPLACE "." "\\." version_re "${VERSION}")
set(prefix "${WORK}/prefix")
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

# 1. The core through find_package, with LMDB, hiredis and GoogleTest out of reach.
run(${CMAKE_COMMAND} -E env PKG_CONFIG_LIBDIR=${WORK}/no-pkgconfig PKG_CONFIG_PATH=
    ${CMAKE_COMMAND} -S "${SRC}/consumer" -B "${WORK}/core" -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON)
run(${CMAKE_COMMAND} --build "${WORK}/core")
run("${WORK}/core/consumer")
# alice's version: her first (the clock in microseconds, a multiple of 1000) plus one write.
expect("core consumer" "^litetx ${version_re}\nalice v[1-9][0-9]*001 {\"balance\":70}\n$" "${out}")
string(REPLACE "\n" "; " out "${out}")
message(STATUS "core via find_package: ${out}")

# 2. The components through find_package.
set(redis_flag -DWITH_REDIS=${WITH_REDIS})
run(${CMAKE_COMMAND} -S "${SRC}/components" -B "${WORK}/components"
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${redis_flag})
run(${CMAKE_COMMAND} --build "${WORK}/components")
run("${WORK}/components/backends" "${WORK}/lmdb-data" 1)
if(WITH_REDIS)
  expect("backends" "^lmdb {\"n\":7}\nredis unavailable\n$" "${out}")
else()
  expect("backends" "^lmdb {\"n\":7}\n$" "${out}")
endif()
string(REPLACE "\n" "; " out "${out}")
message(STATUS "components via find_package: ${out}")
file(STRINGS "${CONTRACT_SRC}" contract_tests REGEX "^TEST_P\\(StoreContractTest,")
list(LENGTH contract_tests n_contract)
if(n_contract LESS 10)
  message(FATAL_ERROR "found only ${n_contract} contract tests in ${CONTRACT_SRC}")
endif()
run("${WORK}/components/contract")
expect("contract" "\\[  PASSED  \\] ${n_contract} tests\\." "${out}")
message(STATUS "installed store contract: ${n_contract} tests passed on MemoryStore")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}/components" -B "${WORK}/no-such-component"
    -DCMAKE_PREFIX_PATH=${prefix} ${redis_flag} -DEXTRA_COMPONENT=nosuch
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "find_package(litetx COMPONENTS nosuch) succeeded")
endif()
expect("unknown component" "no component 'nosuch'" "${err}")

# 3. pkg-config.
file(GLOB pc_dirs "${prefix}/lib*/pkgconfig" "${prefix}/lib/*/pkgconfig")
list(JOIN pc_dirs ":" pc_path)
set(pc_env ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pc_path}:$ENV{PKG_CONFIG_PATH}")
set(pc_modules litetx-lmdb)
if(WITH_REDIS)
  list(APPEND pc_modules litetx-redis)
endif()
foreach(m litetx ${pc_modules})
  run(${pc_env} pkg-config --modversion ${m})
  expect("pkg-config --modversion ${m}" "^${version_re}\n$" "${out}")
endforeach()
run(${pc_env} pkg-config --cflags --libs litetx)
separate_arguments(core_flags UNIX_COMMAND "${out}")
if(core_flags MATCHES "lmdb|hiredis")
  message(FATAL_ERROR "pkg-config litetx names a backend library: ${core_flags}")
endif()
run(${CXX} -std=c++20 -O1 -o "${WORK}/pc-core" "${SRC}/consumer/main.cpp" ${core_flags})
run("${WORK}/pc-core")
expect("pkg-config core" "^litetx ${version_re}\nalice v[1-9][0-9]*001 {\"balance\":70}\n$" "${out}")
run(${pc_env} pkg-config --cflags --libs ${pc_modules})
separate_arguments(backend_flags UNIX_COMMAND "${out}")
set(backend_defs "")
if(WITH_REDIS)
  set(backend_defs -DWITH_REDIS=1)
endif()
run(${CXX} -std=c++20 -O1 ${backend_defs} -o "${WORK}/pc-backends"
    "${SRC}/components/backends.cpp" ${backend_flags})
file(REMOVE_RECURSE "${WORK}/lmdb-data")
run("${WORK}/pc-backends" "${WORK}/lmdb-data" 1)
expect("pkg-config backends" "^lmdb {\"n\":7}\n" "${out}")
message(STATUS "via pkg-config: core and ${pc_modules} compiled, linked and ran")

# 4. The installed tool.
if(EXISTS "${prefix}/bin/litetx")
  run("${prefix}/bin/litetx" --version)
  expect("litetx --version" "^litetx ${version_re}\n$" "${out}")
  message(STATUS "installed tool: ${out}")
  include(GNUInstallDirs)
  foreach(pair "man;${CMAKE_INSTALL_MANDIR}/man1/litetx.1"
               "completion;bash;${CMAKE_INSTALL_DATADIR}/bash-completion/completions/litetx")
    list(POP_BACK pair file)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "not installed: ${prefix}/${file}")
    endif()
    file(READ "${prefix}/${file}" installed)
    run("${prefix}/bin/litetx" ${pair})
    if(NOT installed STREQUAL out)
      message(FATAL_ERROR "${prefix}/${file} differs from `litetx ${pair}`")
    endif()
    message(STATUS "installed ${file}")
  endforeach()
endif()
