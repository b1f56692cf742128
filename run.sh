#!/usr/bin/env bash
# Install what is missing, build, and run the proxy with the given options:
#   ./run.sh -s game.example.org:27960          (clients connect to port 27960 here)
#   ./run.sh -c config/slipgate.conf.example
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release >/dev/null
ninja -C build >/dev/null
exec build/proxy/slipgate "$@"
