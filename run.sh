#!/usr/bin/env bash
# Install what is missing, build, and run slipgate:
#   ./run.sh                                    the playground: a local OpenArena
#                                               server with bots behind slipgate
#                                               (slipgate play; ./run.sh play --help)
#   ./run.sh --with-client --seconds 30         the same with a headless client
#   ./run.sh -s game.example.org:27960          in front of a real server (clients
#                                               connect to port 27960 here)
#   ./run.sh -c config/slipgate.conf.example
set -euo pipefail
cd "$(dirname "$0")"
play=no
case "${1:-}" in
  ""|play|--with-client|--seconds|--seconds=*|--basedir|--basedir=*|--dir|--dir=*|--map|--map=*)
    play=yes ;;
esac
if [ "$play" = yes ]; then
  scripts/deps.sh --play
else
  scripts/deps.sh
fi
[ -f build/build.ninja ] || meson setup build --buildtype=release >/dev/null
ninja -C build >/dev/null
if [ "$play" = yes ]; then
  [ "${1:-}" = play ] && shift
  exec build/proxy/slipgate play "$@"
fi
exec build/proxy/slipgate "$@"
