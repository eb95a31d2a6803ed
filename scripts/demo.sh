#!/usr/bin/env bash
# The main job: builds litetx and runs the example program.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/examples/litetx_example
