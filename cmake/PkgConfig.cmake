# pkg-config files installed beside the CMake package (<libdir>/pkgconfig): litetx.pc for the
# core library, litetx-lmdb.pc and litetx-redis.pc for the backends, e.g.
#   c++ -std=c++20 app.cpp $(pkg-config --cflags --libs litetx-lmdb)
# The prefix is computed from the file's own location (${pcfiledir}), so an installed tree
# works wherever it is copied or installed (cmake --install --prefix ...). The libraries are
# static, so every dependency is a public Requires (pkg-config --libs without --static lists
# it). Boost.JSON has no pkg-config file: it is named in Libs.
file(RELATIVE_PATH _litetx_pc_to_prefix "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig"
  "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" _litetx_pc_to_prefix "${_litetx_pc_to_prefix}")
set(_litetx_pc_head "prefix=\${pcfiledir}/${_litetx_pc_to_prefix}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
")
set(_litetx_pc_dir ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig)

# Core: Boost.JSON (by path, from the Boost::json target found above) and spdlog.
file(GENERATE OUTPUT ${_litetx_pc_dir}/litetx.pc CONTENT "${_litetx_pc_head}
Name: litetx
Description: ${PROJECT_DESCRIPTION} (core: engine, collector, in-memory store)
Version: ${PROJECT_VERSION}
Requires: spdlog
Cflags: -I\${includedir} -I$<JOIN:$<REMOVE_DUPLICATES:$<TARGET_PROPERTY:Boost::json,INTERFACE_INCLUDE_DIRECTORIES>>, -I>
Libs: -L\${libdir} -llitetx -L$<TARGET_LINKER_FILE_DIR:Boost::json> -lboost_json
")
file(GENERATE OUTPUT ${_litetx_pc_dir}/litetx-lmdb.pc CONTENT "${_litetx_pc_head}
Name: litetx-lmdb
Description: litetx::LmdbStore, the embedded durable backend of litetx
Version: ${PROJECT_VERSION}
Requires: litetx = ${PROJECT_VERSION}, lmdb
Libs: -L\${libdir} -llitetx_lmdb
")
set(_litetx_pc_files ${_litetx_pc_dir}/litetx.pc ${_litetx_pc_dir}/litetx-lmdb.pc)
if(LITETX_WITH_REDIS)
  file(GENERATE OUTPUT ${_litetx_pc_dir}/litetx-redis.pc CONTENT "${_litetx_pc_head}
Name: litetx-redis
Description: litetx::RedisStore and litetx::RedisClusterStore, the Redis backends of litetx
Version: ${PROJECT_VERSION}
Requires: litetx = ${PROJECT_VERSION}, hiredis
Libs: -L\${libdir} -llitetx_redis
")
  list(APPEND _litetx_pc_files ${_litetx_pc_dir}/litetx-redis.pc)
endif()
install(FILES ${_litetx_pc_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
