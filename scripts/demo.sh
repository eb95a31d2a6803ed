#!/usr/bin/env bash
# The main job: builds the library and the `litetx` tool only (no tests, no examples) into
# ./build-demo and runs `litetx demo`, a bank on the embedded LMDB store with concurrent
# transfers, coordinator crashes injected at random and the collector repairing them, followed
# by a verification (exit 0 only if it holds). Arguments go to `litetx demo` (see
# `build-demo/tools/litetx demo --help`); without any, a 10-second run. The store is
# build-demo/demo-data (LITETX_DEMO_STORE names another directory), written with --sync
# nosync, which survives a process crash and risks only recent writes on an OS crash or power
# loss (LITETX_DEMO_SYNC=durable fsyncs every write, much slower). scripts/test.sh builds
# everything, tests included, into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITETX_BUILD_TESTS=OFF \
  -DLITETX_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-demo --target litetx_cli -j"$(nproc 2>/dev/null || echo 2)"
[[ $# -eq 0 ]] && set -- --duration 10s
exec ./build-demo/tools/litetx --store "lmdb:${LITETX_DEMO_STORE:-build-demo/demo-data}" \
  --sync "${LITETX_DEMO_SYNC:-nosync}" demo "$@"
