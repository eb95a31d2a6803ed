#!/usr/bin/env bash
# Checks the Promela model of the commit protocol (model/litetx.pml) with Spin.
#
#   check.sh build DIR
#       Generates the verifier (spin -a) and compiles it (pan) into DIR; the runs below use it.
#   check.sh verify SECONDS SEEDS [VAR=value...]
#       Bitstate search with randomised transition order, one run of SECONDS per seed
#       (1..SEEDS). Fails if any run reports an error, and prints the error trail.
#   check.sh mutant PROPERTY SECONDS [VAR=value...]
#       The same search on a mutated model (LITETX_MUT=n names the mutation), SECONDS split over
#       seeds 1..4 (a trail one seed's search order reaches at once can be out of another's reach
#       for minutes). Passes only if a run stops at an assertion naming PROPERTY (an extended
#       regular expression, e.g. atomicity_ok or "(a_ok|b_ok)"); prints the start of the trail.
#
# VAR=value set the scope (LITETX_MAXCRASH, ...; see litetx.pml). LITETX_MODEL_BUILD names the
# DIR of "build". Each run works in a fresh temporary directory, never in the source tree.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
model="$here/litetx.pml"
spin="${SPIN:-spin}"
cc="${CC:-cc}"
mode="${1:?build, verify or mutant}"
shift
if [[ "$mode" == build ]]; then
  dir="${1:?directory}"
  mkdir -p "$dir"
  cp "$model" "$dir/litetx.pml"
  cd "$dir"
  rm -f pan pan.c
  "$spin" -a litetx.pml >spin.out 2>&1 || { cat spin.out; exit 2; }
  # BITSTATE: a bit array instead of a state table; T_RAND/P_RAND: the order in which
  # transitions and processes are tried depends on the seed (-RS), so runs with different seeds
  # cover different parts of a space too large for one exhaustive search.
  # -Og: pan.c is large, and -O2 takes twice as long to compile for no faster a search (the
  # search is bound by the hashing of states into the bit array).
  "$cc" -Og -w -DSAFETY -DBITSTATE -DT_RAND -DP_RAND -o pan pan.c
  echo "built $dir/pan"
  exit 0
fi
if [[ "$mode" == mutant ]]; then
  property="${1:?property}"
  shift
fi
seconds="${1:?seconds}"
shift
seeds=4
if [[ "$mode" == verify ]]; then
  seeds="${1:?seeds}"
  shift
else
  seconds=$(( seconds / seeds > 0 ? seconds / seeds : 1 ))
fi
build="${LITETX_MODEL_BUILD:?LITETX_MODEL_BUILD: the directory of check.sh build}"
[[ -x "$build/pan" ]] || { echo "no verifier in $build: run check.sh build first"; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/litetx-model.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$build/litetx.pml" "$work/litetx.pml"
cd "$work"
(( $# )) && export "$@"

trail() {
  "$build/pan" -r 2>&1 | grep -E "^ *[0-9]+:.*proc|violated" || true
}

found=0
for ((seed = 1; seed <= seeds; seed++)); do
  # SIGINT makes pan stop and print its statistics (and "errors: N") at the time limit.
  set +e
  # 2^28 bits (32 MiB), 3 hash functions per state.
  timeout -s INT "$seconds" "$build/pan" -w28 -k3 -m20000 -RS"$seed" >pan.out 2>&1
  set -e
  errors="$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | tail -1)"
  stored="$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | tail -1)"
  depth="$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | tail -1)"
  elapsed="$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' pan.out | tail -1)"
  hashf="$(sed -n 's/^hash factor: \([0-9.e+]*\).*/\1/p' pan.out | tail -1)"
  if [[ -z "$errors" ]]; then
    cat pan.out
    echo "check.sh: pan printed no result"
    exit 2
  fi
  # How the run ended: at an error, at the time limit ("Interrupted"), or with no state left to
  # visit (with a high hash factor, few states were skipped as false "already seen" matches).
  if [[ "$errors" != 0 ]]; then how="stopped at the error"
  elif grep -q '^Interrupted' pan.out; then how="cut at ${seconds}s"
  else how="search complete"; fi
  echo "seed $seed: errors $errors, states stored $stored, depth $depth, ${elapsed}s ($how), hash factor $hashf"
  # pan still prints "errors: 0" when it stops for want of memory or cuts paths at the depth
  # bound: such a run has searched little or nothing, and is a failure, not a pass.
  if grep -q 'out of memory\|reached -DMEMLIM\|max search depth too small' pan.out; then
    grep -m3 'out of memory\|reached -DMEMLIM\|max search depth too small' pan.out
    echo "check.sh: pan could not search (memory or depth bound)"
    exit 2
  fi
  if [[ "$errors" == 0 ]] && ! awk -v n="${stored:-0}" 'BEGIN { exit !(n + 0 >= 1000) }'; then
    echo "check.sh: pan stored only ${stored:-0} states: too few for a search"
    exit 2
  fi
  if [[ "$errors" != 0 ]]; then
    found=1
    grep -m1 'assertion violated\|invalid end state\|error' pan.out || true
    break
  fi
done

if [[ "$mode" == verify ]]; then
  if [[ "$found" == 1 ]]; then
    echo "FAILED: the model has an error trail:"
    trail
    exit 1
  fi
  echo "OK: no error in $seeds runs"
  exit 0
fi

if [[ "$found" == 0 ]]; then
  echo "FAILED: the mutation was not caught (no error trail)"
  exit 1
fi
if ! grep -Eq "assertion violated.*$property" pan.out; then
  echo "FAILED: the mutation failed, but not on $property:"
  grep -m3 'violated\|error' pan.out || true
  trail | tail -40
  exit 1
fi
echo "OK: caught by $property. Start of the trail:"
trail | head -25
