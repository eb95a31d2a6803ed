#!/usr/bin/env bash
# Builds the concurrency tests with ThreadSanitizer into ./build-tsan and runs them: the
# engine's concurrency, run, lock, lease and contention tests, the collectors on real threads
# (two at once, the background loop), the race tests (litetx_race_tests: coordinators and
# collectors held mid-commit and mid-repair while others run) and the stress suite
# (tests/stress), the written-document cache under concurrent Databases, and the batch steps with concurrent chunks, concurrent items, takeovers and
# listeners (tests/batch). The RapidCheck properties are not built here (RapidCheck is a static library
# built without TSAN). Any data race fails the run (halt_on_error), and so does a run in which
# fewer tests ran than expected. Called by scripts/test.sh; LITETX_TSAN=0 skips.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITETX_SANITIZE=thread \
  -DLITETX_BUILD_TOOLS=OFF -DLITETX_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$(nproc 2>/dev/null || echo 2)" \
  --target litetx_tests litetx_race_tests stress_tests batch_tests
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"

# Runs `binary` with gtest filter `filter` and checks that every suite the filter names
# matches a test and that every listed test ran: a renamed suite must not drop out of the
# ThreadSanitizer run silently.
run() {
  local binary=$1 filter=$2 listed ran out status suite suites
  listed=$("$binary" --gtest_list_tests --gtest_filter="$filter")
  if [[ "$filter" != "*" ]]; then
    IFS=: read -ra suites <<<"$filter"
    for suite in "${suites[@]}"; do
      suite=${suite%.\*}
      if ! grep -q "^$suite\.\$" <<<"$listed"; then
        echo "tsan: $suite matches no test in $binary"
        exit 1
      fi
    done
  fi
  listed=$(grep -c '^  ' <<<"$listed" || true)
  out=$(mktemp)
  set +e
  "$binary" --gtest_brief=1 --gtest_filter="$filter" 2>&1 | tee "$out"
  status=${PIPESTATUS[0]}
  set -e
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$out" | tail -1)
  rm -f "$out"
  if [[ $status -ne 0 ]]; then
    echo "tsan: $binary failed (exit $status)"
    exit "$status"
  fi
  if [[ "$listed" -eq 0 || "${ran:-0}" -ne "$listed" ]]; then
    echo "tsan: $binary ran ${ran:-no} tests of $listed listed"
    exit 1
  fi
  echo "tsan: $(basename "$binary"): $ran tests, no data race"
}

run build-tsan/tests/litetx_tests \
  'ConcurrencyTest.*:ContentionTest.*:RunTest.*:LockTest.*:LeaseTest.*:LeaseKeeperTest.*:ClaimFinalitySlowCollector.*:CollectorConcurrencyTest.*:CollectorBackgroundTest.*:RedisStoreTest.*:RedisClusterStoreTest.*:FinisherTest.*:BatchFinisherAttackTest.*:LmdbStoreGroupCommitTest.*:ParallelCommitTest.*:ParallelAttack.*:WrittenCacheConcurrency.*:WrittenCacheMulti.*:MetaReuseAttack.*:OutcomePagesTest.*:CollectorShareTest.*:TombstoneAttackTest.*'
run build-tsan/property-tests/litetx_race_tests '*'
run build-tsan/tests/stress/stress_tests '*'
run build-tsan/tests/batch/batch_tests 'BatchSeedTest.*:BatchStepTest.*'
echo "tsan: no data race reported"
