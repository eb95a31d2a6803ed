#!/usr/bin/env bash
# Configures and builds litetx into ./build (Release with debug info), after bootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
long=OFF
[[ "${LITETX_LONG:-0}" == 1 ]] && long=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITETX_LONG_TESTS="$long" >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)"
