#!/usr/bin/env bash
# A local Redis Cluster to try litetx on: 3 masters and 3 replicas on 127.0.0.1, ports
# 7000..7005 (LITETX_REDIS_BASE_PORT moves them; the cluster bus uses port + 10000), each
# daemonized with its data, log and pid file in DIR/<port> (DIR defaults to
# ./build/redis-cluster), append-only file on (appendfsync everysec).
#
#   scripts/redis-cluster.sh start  [DIR]          start the nodes, create the cluster once
#   scripts/redis-cluster.sh status [DIR]          each node's pid, role and cluster state
#   scripts/redis-cluster.sh stop   [--clean] [DIR] stop the nodes; --clean also removes
#                                                  their data (nodes.conf, AOF, logs)
#
# A stopped cluster started again keeps its data and its slot map (nodes.conf). Then try:
#   redis-cli -c -p 7000 set greeting hello && redis-cli -c -p 7000 get greeting
set -euo pipefail

base_port=${LITETX_REDIS_BASE_PORT:-7000}
node_timeout_ms=5000

die() {
  echo "redis-cluster: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start|stop [--clean]|status [DIR]" >&2
  exit 2
}

[ $# -ge 1 ] || usage
command=$1
shift
clean=0
dir=./build/redis-cluster
for arg in "$@"; do
  case $arg in
    --clean) [ "$command" = stop ] || usage; clean=1 ;;
    -*) usage ;;
    *) dir=$arg ;;
  esac
done
case $base_port in
  '' | *[!0-9]*) die "LITETX_REDIS_BASE_PORT must be a number (got '$base_port')" ;;
esac
if [ "$base_port" -lt 1024 ] || [ "$base_port" -gt 55530 ]; then
  die "LITETX_REDIS_BASE_PORT must be in 1024..55530 (the bus uses port + 10000)"
fi
ports=()
for i in 0 1 2 3 4 5; do ports+=($((base_port + i))); done

# The pid of the node on $1 if it runs (from its pid file), else nothing.
node_pid() {
  local file=$dir/$1/redis.pid pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  case $pid in '' | *[!0-9]*) return 0 ;; esac
  if kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ]; then
    echo "$pid"
  fi
}

# Whether something accepts connections on 127.0.0.1:$1.
listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cli() {
  local port=$1
  shift
  timeout 5 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null
}

# A field of CLUSTER INFO of the node on $1, or nothing.
cluster_field() {
  { cli "$1" cluster info || true; } | tr -d '\r' | sed -n "s/^$2://p"
}

need_tools() {
  command -v redis-server >/dev/null || die "redis-server not found in PATH: run scripts/bootstrap.sh"
  command -v redis-cli >/dev/null || die "redis-cli not found in PATH: run scripts/bootstrap.sh"
}

all_ok() {
  local p
  for p in "${ports[@]}"; do
    [ "$(cluster_field "$p" cluster_state)" = ok ] || return 1
  done
}

cmd_start() {
  need_tools
  local p running=0 to_start=()
  for p in "${ports[@]}"; do
    if [ -n "$(node_pid "$p")" ]; then
      running=$((running + 1))
    elif listening "$p"; then
      die "port $p is busy (not a node of $dir); stop what uses it or set LITETX_REDIS_BASE_PORT"
    elif listening $((p + 10000)); then
      die "port $((p + 10000)) (cluster bus of $p) is busy; stop what uses it or set LITETX_REDIS_BASE_PORT"
    else
      to_start+=("$p")
    fi
  done
  if [ "$running" -eq 6 ] && all_ok; then
    echo "redis-cluster: already running on 127.0.0.1:${ports[0]}..${ports[5]} ($dir)"
    return 0
  fi

  mkdir -p "$dir"
  local abs
  abs=$(cd "$dir" && pwd)
  for p in "${to_start[@]}"; do
    mkdir -p "$abs/$p"
    redis-server --port "$p" --bind 127.0.0.1 --dir "$abs/$p" --daemonize yes \
      --pidfile "$abs/$p/redis.pid" --logfile "$abs/$p/redis.log" \
      --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout "$node_timeout_ms" \
      --appendonly yes --appendfsync everysec --save "" ||
      die "redis-server on port $p did not start (see $abs/$p/redis.log)"
  done
  for p in "${to_start[@]}"; do
    local tries=0
    until [ "$(cli "$p" ping)" = PONG ]; do
      tries=$((tries + 1))
      [ "$tries" -le 100 ] || die "node $p does not answer PING after 10 s (see $abs/$p/redis.log)"
      sleep 0.1
    done
  done

  # Create the cluster only if no node has slots yet (a restarted cluster keeps its nodes.conf).
  local assigned=0 n
  for p in "${ports[@]}"; do
    n=$(cluster_field "$p" cluster_slots_assigned)
    assigned=$((assigned + ${n:-0}))
  done
  if [ "$assigned" -eq 0 ]; then
    local addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
      >"$abs/cluster-create.log" 2>&1 ||
      die "redis-cli --cluster create failed (see $abs/cluster-create.log)"
  fi

  local tries=0
  until all_ok; do
    tries=$((tries + 1))
    [ "$tries" -le 300 ] || die "the cluster is not cluster_state:ok after 30 s (see $abs/*/redis.log)"
    sleep 0.1
  done
  echo "redis-cluster: running on 127.0.0.1:${ports[0]}..${ports[5]} ($abs)"
  echo "  try: redis-cli -c -p ${ports[0]} set greeting hello"
}

cmd_stop() {
  local p pid left
  for p in "${ports[@]}"; do
    pid=$(node_pid "$p")
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    left=100
    while kill -0 "$pid" 2>/dev/null && [ "$left" -gt 0 ]; do
      sleep 0.1
      left=$((left - 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "redis-cluster: node $p (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    echo "redis-cluster: stopped node $p (pid $pid)"
  done
  for p in "${ports[@]}"; do
    rm -f "$dir/$p/redis.pid"
    if [ "$clean" -eq 1 ]; then rm -rf "${dir:?}/$p"; fi
  done
  if [ "$clean" -eq 1 ]; then
    rm -f "$dir/cluster-create.log"
    rmdir "$dir" 2>/dev/null || true
  fi
}

cmd_status() {
  local p pid ok=0 role state
  for p in "${ports[@]}"; do
    pid=$(node_pid "$p")
    if [ -z "$pid" ]; then
      echo "$p: not running"
      continue
    fi
    role=$(cli "$p" role | head -n 1 || true)
    state=$(cluster_field "$p" cluster_state)
    echo "$p: pid $pid, ${role:-no answer}, cluster_state:${state:-?}"
    [ "$state" = ok ] && ok=$((ok + 1))
  done
  [ "$ok" -eq 6 ]
}

case $command in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) usage ;;
esac
