#!/usr/bin/env bash
# Builds litetx and runs every test (GoogleTest and RapidCheck suites) under ctest.
# LITETX_LONG=1 runs the long property and stress runs instead of the CI-sized ones.
export LITETX_LONG="${LITETX_LONG:-0}"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc 2>/dev/null || echo 2)"
