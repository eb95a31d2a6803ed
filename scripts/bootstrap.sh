#!/usr/bin/env bash
# Installs what litetx needs to build and test, from Debian 12 packages only. Idempotent:
# packages already present are left alone, and apt-get runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libboost-json1.81-dev   # Boost.JSON 1.81 (never libboost-dev: 1.74 conflicts)
  libspdlog-dev           # logging (uses the external fmt 9)
  libgtest-dev            # unit tests
  librapidcheck-dev       # property tests
  liblmdb-dev             # the LMDB store (durable embedded backend)
  libcli11-dev            # command-line parsing of the tools
  libhiredis-dev          # the Redis store (client library)
  redis-server            # the Redis store's tests start their own server
  doxygen                 # the API reference (the `docs` target)
  groff-base              # checks the generated manual page (groff)
  spin                    # checks the protocol model (model/, its ctest)
  gnuplot-nox             # `litetx bench --plot` (its tests in tests/cli)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
