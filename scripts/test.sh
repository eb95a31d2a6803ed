#!/usr/bin/env bash
# Builds litetx and runs every test (GoogleTest and RapidCheck suites) under ctest, after the
# ThreadSanitizer build of the concurrency, collector, race and stress tests (scripts/tsan.sh;
# LITETX_TSAN=0 skips it). LITETX_LONG=1 runs the long property and stress runs instead of the CI-sized ones.
export LITETX_LONG="${LITETX_LONG:-0}"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
if [[ "${LITETX_TSAN:-1}" == 1 ]]; then
  bash scripts/tsan.sh
fi
ctest --test-dir build --output-on-failure -j"$(nproc 2>/dev/null || echo 2)"
