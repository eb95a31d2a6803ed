#!/usr/bin/env bash
# Availability after crashes, measured through the litetx CLI.
#
#   scripts/availability.sh PATH/TO/litetx OUTDIR
#
# 1. Bank workload, run twice: once with no collector, once with `litetx gc --interval 1s`
#    running beside it. An LMDB store (--sync nosync) gets ACCOUNTS accounts of 1000. PROCS
#    processes (bash loops) each make PER_PROC transfers of a random amount (1..100) between
#    two random distinct accounts with `litetx apply` (adjust -x / +x), one after the other.
#    Every CRASH_EVERY-th transfer runs with LITETX_FAULTS=crash-after-writes:2: the process
#    dies after its 2nd store write (the transaction record and the first account), so it
#    leaves an account held by a transaction nobody is running any more. Every attempt's exit
#    code is recorded. Default lease and busy timeout of the binary.
#    Afterwards `litetx gc --once --older-than 1ms` settles what is left, and the script checks
#    that the total is unchanged, that every account equals 1000 plus the committed transfers,
#    and that no transaction is left unsettled.
# 2. Blocked time: a transfer A->B crashes holding A (crash-after-writes:2). Then a transfer
#    A->B is tried every 100 ms with --busy-timeout 0s (no collector) until one commits, or
#    until BLOCKED_MAX seconds have passed. Reported: seconds from the crash to that commit.
#
# Prints one line of JSON on stdout (also OUTDIR/summary.json): per workload run "bank_nogc" /
# "bank_gc" the counts of outcomes (committed, busy, crashed = exit 86, other, with
# "crash_injected_but_busy": crashes that never happened because the transfer was busy before
# its first write), "wall_s", "unsettled_at_end" (before the final settling), the checks
# ("total" vs "expected_total", "accounts_mismatched"), the collector's counters; and
# "blocked": "blocked_s" (null and "gave_up":true past BLOCKED_MAX). Per-attempt logs
# (OUTDIR/bank-*.log: proc attempt from to amount injected exit outcome start_ms end_ms) and
# the commands' outputs stay in OUTDIR. Takes about 1.5 minutes with a 5 s lease, about 4.5
# minutes with a 120 s one (the blocked-time experiment then waits the whole lease).
# Knobs (environment): PROCS=4 PER_PROC=40 ACCOUNTS=8 CRASH_EVERY=5 SEED=1 BLOCKED_MAX=150
# VARIANTS="nogc gc" (which workload runs to make) APPLY_LIMIT=60 (seconds per apply)
# APPLY_FLAGS="" (extra flags for the workload's applies, e.g. "--busy-timeout 6s").
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 PATH/TO/litetx OUTDIR" >&2
  exit 2
fi
BIN=$(readlink -f "$1")
OUT=$2
[ -x "$BIN" ] || { echo "$0: $1 is not executable" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")

PROCS=${PROCS:-4}
PER_PROC=${PER_PROC:-40}
ACCOUNTS=${ACCOUNTS:-8}
CRASH_EVERY=${CRASH_EVERY:-5}
SEED=${SEED:-1}
BLOCKED_MAX=${BLOCKED_MAX:-150}
VARIANTS=${VARIANTS:-"nogc gc"}
APPLY_LIMIT=${APPLY_LIMIT:-60}
read -r -a APPLY_FLAGS <<< "${APPLY_FLAGS:-}"

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# lit DIR ARGS...: the CLI on store DIR.
lit() { local d=$1; shift; "$BIN" --store "lmdb:$d" --sync nosync "$@"; }

outcome_of() {  # exit code -> outcome name
  case $1 in
    0) echo committed ;; 10) echo conflict ;; 11) echo busy ;; 12) echo deleted ;;
    13) echo not_found ;; 14) echo aborted ;; 15) echo unknown ;; 16) echo unavailable ;;
    17) echo failed_precondition ;; 18) echo corruption ;; 86) echo crashed ;;
    124 | 137) echo timeout ;; *) echo "exit$1" ;;
  esac
}

transfer_json() {  # FROM TO AMOUNT
  printf '{"actions":[{"op":"adjust","collection":"accounts","id":"%s","by":{"balance":-%d}},{"op":"adjust","collection":"accounts","id":"%s","by":{"balance":%d}}]}' \
    "$1" "$3" "$2" "$3"
}

create_accounts() {  # DIR N
  local d=$1 n=$2 i acts=""
  for ((i = 0; i < n; i++)); do
    acts+="${acts:+,}{\"op\":\"insert\",\"collection\":\"accounts\",\"id\":\"a$i\",\"doc\":{\"balance\":1000}}"
  done
  echo "{\"actions\":[$acts]}" | lit "$d" apply - > /dev/null
}

# Prints "id balance" per account (committed view).
balances() {
  lit "$1" scan accounts | grep -o '"id":"[^"]*","status":"found"[^}]*"doc":{"balance":-\?[0-9]*' |
    sed 's/"id":"\([^"]*\)".*"balance":\(-\?[0-9]*\)/\1 \2/'
}

# One worker: PER_PROC transfers, one line per attempt in its log:
# proc attempt from to amount injected exit outcome start_ms end_ms
worker() {
  local d=$1 p=$2 log=$3 i from to amt inj rc start end
  RANDOM=$((SEED * 1000 + p))
  for ((i = 0; i < PER_PROC; i++)); do
    from=$((RANDOM % ACCOUNTS))
    to=$((RANDOM % (ACCOUNTS - 1)))
    ((to >= from)) && to=$((to + 1))
    amt=$((RANDOM % 100 + 1))
    inj=0
    (((i + p) % CRASH_EVERY == CRASH_EVERY - 1)) && inj=1
    transfer_json "a$from" "a$to" "$amt" > "$OUT/tmp.$p.json"
    start=$(now_ms)
    if ((inj)); then
      LITETX_FAULTS=crash-after-writes:2 timeout -k 5 "$APPLY_LIMIT" \
        "$BIN" --store "lmdb:$d" --sync nosync apply "${APPLY_FLAGS[@]}" "$OUT/tmp.$p.json" >> "$log.out" 2>> "$log.err"
    else
      timeout -k 5 "$APPLY_LIMIT" \
        "$BIN" --store "lmdb:$d" --sync nosync apply "${APPLY_FLAGS[@]}" "$OUT/tmp.$p.json" >> "$log.out" 2>> "$log.err"
    fi
    rc=$?
    end=$(now_ms)
    echo "$p $i a$from a$to $amt $inj $rc $(outcome_of $rc) $start $end" >> "$log"
  done
  rm -f "$OUT/tmp.$p.json"
}

# run_bank VARIANT: prints a JSON object.
run_bank() {
  local v=$1 d="$OUT/bank-$v" log="$OUT/bank-$v.log" gcpid="" p t0 t1 pids=()
  rm -rf "$d" "$OUT/bank-$v".*
  create_accounts "$d" "$ACCOUNTS"
  if [ "$v" = gc ]; then
    "$BIN" --store "lmdb:$d" --sync nosync gc --interval 1s \
      > "$OUT/bank-$v.gc.out" 2> "$OUT/bank-$v.gc.err" &
    gcpid=$!  # the collector itself (not a subshell), so SIGTERM reaches it
  fi
  t0=$(now_ms)
  for ((p = 0; p < PROCS; p++)); do
    worker "$d" "$p" "$OUT/bank-$v.w$p" &
    pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(now_ms)
  if [ -n "$gcpid" ]; then
    kill -TERM "$gcpid"
    wait "$gcpid"
  fi
  for ((p = 0; p < PROCS; p++)); do cat "$OUT/bank-$v.w$p"; done | sort -n -k9 > "$log"

  # What the runs left held, before any final settling.
  local unsettled_before
  unsettled_before=$(lit "$d" txns | grep -o '"unsettled":[0-9]*' | cut -d: -f2)
  lit "$d" gc --once --older-than 1ms > "$OUT/bank-$v.final-gc.json" 2>&1
  local unsettled_after
  unsettled_after=$(lit "$d" txns | grep -o '"unsettled":[0-9]*' | cut -d: -f2)

  # Expected balances: 1000 plus the committed transfers (a crashed, busy or other attempt
  # moved nothing, or its outcome is reported as "other" and the check below may fail).
  balances "$d" > "$OUT/bank-$v.balances"
  local check
  check=$(awk -v n="$ACCOUNTS" '
    FNR == NR { got[$1] = $2; total += $2; next }
    $8 == "committed" { want[$3] -= $5; want[$4] += $5 }
    END {
      bad = 0
      for (i = 0; i < n; i++) { a = "a" i; if (got[a] != 1000 + want[a]) { bad++; detail = detail " " a ":" got[a] "!=" 1000 + want[a] } }
      printf "%d %d %s\n", total, bad, detail
    }' "$OUT/bank-$v.balances" "$log")
  local total bad detail
  read -r total bad detail <<< "$check"

  local committed busy crashed other
  committed=$(awk '$8 == "committed"' "$log" | wc -l)
  busy=$(awk '$8 == "busy"' "$log" | wc -l)
  crashed=$(awk '$8 == "crashed"' "$log" | wc -l)
  other=$(awk '$8 != "committed" && $8 != "busy" && $8 != "crashed"' "$log" | wc -l)
  local injected injected_busy others
  injected=$(awk '$6 == 1' "$log" | wc -l)
  injected_busy=$(awk '$6 == 1 && $8 == "busy"' "$log" | wc -l)
  others=$(awk '$8 != "committed" && $8 != "busy" && $8 != "crashed" { c[$8]++ }
                END { s = ""; for (k in c) s = s (s ? "," : "") "\"" k "\":" c[k]; print "{" s "}" }' "$log")
  local gcstats="null"
  if [ "$v" = gc ]; then
    gcstats=$(grep -o '{.*}' "$OUT/bank-$v.gc.out" | tail -1)
    [ -n "$gcstats" ] || gcstats="null"
  fi
  printf '{"attempts":%d,"committed":%d,"busy":%d,"crashed":%d,"other":%d,"other_kinds":%s,"crash_injected":%d,"crash_injected_but_busy":%d,"wall_s":%s,"unsettled_at_end":%s,"unsettled_after_final_gc":%s,"total":%s,"expected_total":%d,"accounts_mismatched":%d,"mismatch":"%s","collector":%s}' \
    "$(wc -l < "$log")" "$committed" "$busy" "$crashed" "$other" "$others" "$injected" "$injected_busy" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')" \
    "${unsettled_before:-null}" "${unsettled_after:-null}" "${total:-null}" "$((ACCOUNTS * 1000))" \
    "${bad:-0}" "${detail:-}" "$gcstats"
}

# run_blocked: prints a JSON object.
run_blocked() {
  local d="$OUT/blocked" log="$OUT/blocked.log" t_crash t rc n=0 got="null" gave_up=true
  rm -rf "$d" "$log"
  create_accounts "$d" 2
  transfer_json a0 a1 10 > "$OUT/blocked-crash.json"
  transfer_json a0 a1 1 > "$OUT/blocked-try.json"
  LITETX_FAULTS=crash-after-writes:2 lit "$d" apply "$OUT/blocked-crash.json" > /dev/null 2>&1
  rc=$?
  t_crash=$(now_ms)
  local lease_ms
  lease_ms=$(lit "$d" txns | grep -o '"state":"pending","done":false[^}]*"lease_remaining_ms":-\?[0-9]*' |
    grep -o 'lease_remaining_ms":-\?[0-9]*' | cut -d: -f2 | head -1)
  echo "crash exit $rc at $t_crash, lease remaining ${lease_ms:-?} ms" > "$log"
  while :; do
    t=$(now_ms)
    if ((t - t_crash > BLOCKED_MAX * 1000)); then break; fi
    n=$((n + 1))
    lit "$d" apply --busy-timeout 0s "$OUT/blocked-try.json" >> "$log" 2>&1
    local r=$?
    if ((r == 0)); then
      got=$(awk -v a="$t_crash" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
      gave_up=false
      break
    fi
    sleep 0.1
  done
  lit "$d" gc --once --older-than 1ms > /dev/null 2>&1
  local total
  total=$(balances "$d" | awk '{ s += $2 } END { print s }')
  printf '{"crash_exit":%d,"lease_remaining_ms_after_crash":%s,"blocked_s":%s,"gave_up":%s,"limit_s":%d,"tries":%d,"total":%s,"expected_total":%d}' \
    "$rc" "${lease_ms:-null}" "$got" "$gave_up" "$BLOCKED_MAX" "$n" "${total:-null}" 2000
}

json="{\"binary\":\"$BIN\",\"procs\":$PROCS,\"transfers\":$((PROCS * PER_PROC)),\"accounts\":$ACCOUNTS,\"crash_every\":$CRASH_EVERY,\"seed\":$SEED,\"apply_flags\":\"${APPLY_FLAGS[*]}\""
for v in $VARIANTS; do
  json+=",\"bank_$v\":$(run_bank "$v")"
done
json+=",\"blocked\":$(run_blocked)}"
echo "$json" | tee "$OUT/summary.json"
