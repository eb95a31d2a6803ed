#!/usr/bin/env bash
# Mutation check of the test suites. Each scripts/mutants/<name>.patch breaks the coordinator
# or the collector in one deliberate way, named by the file (docs/protocol.md §8.3 lists them:
# rolling back a committed transaction, repairing without a claim, a lost update, a wrong
# outcome, a guessed "outcome unknown"). For each one,
# the script builds a scratch copy of this tree with the patch applied, runs the suites under
# ctest and lists the tests that failed: a mutant is killed when at least one test fails.
# The unpatched tree is run first and must pass, or nothing the mutants show means anything.
#
# Usage: bash scripts/mutants.sh [name ...]        (default: every patch in scripts/mutants)
# Environment:
#   LITETX_MUTANT_TESTS   ctest -R regex of the tests to run (default: all but the install test)
#   LITETX_MUTANT_WORK    scratch directory (default: a new temp dir, removed at the end)
#   LITETX_MUTANT_JOBS    build and ctest parallelism (default: nproc)
# Exit status: 0 if every mutant was killed, 1 if any survived, 2 if the baseline failed.
# Takes about 4 minutes per mutant on a 2-core machine, after a first full build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${LITETX_MUTANT_JOBS:-$(nproc 2>/dev/null || echo 2)}"
tests_regex="${LITETX_MUTANT_TESTS:-.}"
exclude='InstallAndFindPackage'

if [[ $# -gt 0 ]]; then
  names=("$@")
else
  names=()
  for p in "$root"/scripts/mutants/*.patch; do names+=("$(basename "$p" .patch)"); done
fi
for n in "${names[@]}"; do
  [[ -f "$root/scripts/mutants/$n.patch" ]] || { echo "no such mutant: $n" >&2; exit 2; }
done

work="${LITETX_MUTANT_WORK:-}"
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
src="$work/src"
rm -rf "$src"
mkdir -p "$src"
# The working tree as it is (tracked and untracked files, not what .gitignore excludes).
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$src"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLITETX_BUILD_EXAMPLES=OFF \
  "${launcher[@]}" >/dev/null

# Builds, runs the selected tests and prints the names of those that failed (one a line).
run_suites() {
  local log="$1"
  cmake --build "$src/build" -j"$jobs" >"$log.build" 2>&1 || { echo "BUILD-FAILED"; return; }
  ctest --test-dir "$src/build" -j"$jobs" -R "$tests_regex" -E "$exclude" --timeout 600 \
    >"$log" 2>&1 || true
  sed -n '/The following tests FAILED:/,$p' "$log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p'
  grep -q "tests passed" "$log" || echo "CTEST-DID-NOT-RUN"
}

echo "baseline: unpatched tree"
failed="$(run_suites "$work/baseline.log")"
if [[ -n "$failed" ]]; then
  echo "the unpatched tree fails:"; echo "$failed" | sed 's/^/  /'
  exit 2
fi
echo "  all selected tests pass ($(grep -o '[0-9]* tests failed out of [0-9]*' "$work/baseline.log" || true))"

survivors=0
summary=""
for n in "${names[@]}"; do
  patch="$root/scripts/mutants/$n.patch"
  (cd "$src" && git apply "$patch")
  failed="$(run_suites "$work/$n.log")"
  (cd "$src" && git apply -R "$patch")
  if [[ "$failed" == *BUILD-FAILED* ]]; then
    echo "mutant $n: does not build (see $work/$n.log.build)"; exit 2
  fi
  if [[ -z "$failed" ]]; then
    survivors=$((survivors + 1))
    echo "mutant $n: SURVIVED (no test failed)"
    summary+="$n: survived"$'\n'
  else
    count="$(echo "$failed" | wc -l)"
    echo "mutant $n: killed by $count tests:"
    echo "$failed" | sed 's/^/  /'
    summary+="$n: killed by $count"$'\n'
  fi
done
echo
echo "summary:"
printf '%s' "$summary" | sed 's/^/  /'
[[ $survivors -eq 0 ]]
