#!/usr/bin/env bash
# The main job: builds litetx and runs `litetx demo`, a bank on the embedded LMDB store with
# concurrent transfers, coordinator crashes injected at random and the collector repairing
# them, followed by a verification (exit 0 only if it holds). Arguments go to `litetx demo`
# (see `build/tools/litetx demo --help`); without any, a 10-second run. The store is
# build/demo-data (LITETX_DEMO_STORE names another directory), written with --sync nosync,
# which survives a process crash and risks only recent writes on an OS crash or power loss
# (LITETX_DEMO_SYNC=durable fsyncs every write, much slower).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
[[ $# -eq 0 ]] && set -- --duration 10
exec ./build/tools/litetx --store "lmdb:${LITETX_DEMO_STORE:-build/demo-data}" \
  --sync "${LITETX_DEMO_SYNC:-nosync}" demo "$@"
