#!/usr/bin/env bash
# Builds the concurrency tests with ThreadSanitizer into ./build-tsan and runs them: the
# engine's concurrency, run, lock and contention tests and the stress suite (tests/stress).
# Any data race fails the run (halt_on_error). Called by scripts/test.sh; LITETX_TSAN=0 skips.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITETX_SANITIZE=thread \
  -DLITETX_BUILD_TOOLS=OFF -DLITETX_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$(nproc 2>/dev/null || echo 2)" --target litetx_tests stress_tests
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
build-tsan/tests/litetx_tests --gtest_brief=1 \
  --gtest_filter='ConcurrencyTest.*:ContentionTest.*:RunTest.*:LockTest.*:LeaseTest.*:LeaseKeeperTest.*:ClaimFinalitySlowCollector.*'
build-tsan/tests/stress/stress_tests --gtest_brief=1
echo "tsan: no data race reported"
