#!/usr/bin/env bash
# Runs the RapidCheck properties of litetx_property_tests with a seed drawn now, so that every
# test run tries new cases (the fixed-seed run replays the same ones each time). Prints the
# seed first, and on failure the command that replays the run. ctest runs it as
# PropertiesRandomSeed (property-tests/CMakeLists.txt).
#   random_seed.sh <litetx_property_tests> <cases per property> <gtest filter>
# LITETX_PROPERTY_RANDOM_SEED=N replays seed N instead of drawing one.
set -uo pipefail
binary=$1 cases=$2 filter=$3
seed=${LITETX_PROPERTY_RANDOM_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
echo "seed=$seed (random-seed property run, $cases cases per property)"
RC_PARAMS="max_success=$cases seed=$seed verbose_progress=0" "$binary" --gtest_brief=1 \
  --gtest_filter="$filter"
status=$?
if [[ $status -ne 0 ]]; then
  echo "random-seed property run FAILED with seed=$seed; replay it with"
  echo "  LITETX_PROPERTY_RANDOM_SEED=$seed ctest --test-dir build -R PropertiesRandomSeed --output-on-failure"
  echo "or"
  echo "  RC_PARAMS=\"max_success=$cases seed=$seed\" $binary --gtest_filter='$filter'"
fi
exit $status
