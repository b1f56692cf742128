#!/usr/bin/env bash
# Install what slipgate needs to build and test on Debian 12 (bookworm),
# only what is missing, through sudo when not root.
#   scripts/deps.sh           build dependencies
#   scripts/deps.sh --test    plus what the test suite uses
#   scripts/deps.sh --play    plus the playground's games (slipgate play,
#                             ./run.sh with no arguments)
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config libuv1-dev zlib1g-dev libsodium-dev
      libpcap-dev libmicrohttpd-dev python3)
if [ "${1:-}" = "--test" ]; then
  # clang + libclang-rt-dev (libFuzzer and the sanitizer runtimes, only a
  # Recommends of clang) + llvm (llvm-symbolizer) for the fuzz suite; the
  # games of the real-peer tests (Nexuiz: the DarkPlaces protocol, ~890 MB);
  # ss for the socket tests; fteqcc builds the
  # NetQuake and QuakeWorld peers' placeholder game code; the prometheus
  # client's text parser and headless Chromium for the `http` tests; the
  # Debian packaging tools, systemd-analyze (systemd) and procps (kill, which
  # the units' ExecReload helper's /bin/sh also has built in) for the
  # `install` tests (slipgate speaks sd_notify itself: no libsystemd); the
  # Quake 2 peers are built
  # from source (../shared/peers/q2: SDL2, X11, GL headers, xdotool); valgrind
  # (callgrind) counts the instructions per datagram in `bench@instructions`
  # podman, mmdebstrap, runc, uidmap and slirp4netns build and run the
  # container image (scripts/image.sh) in the `container` suite; nodejs and
  # npm validate the Kubernetes manifests (npm packages, `kubernetes` suite)
  pkgs+=(clang libclang-rt-dev llvm xvfb xauth libgl1-mesa-dri ioquake3 ioquake3-server openarena openarena-server tshark
        iproute2 quakespasm darkplaces fteqcc mvdsv ktx ezquake qstat nexuiz nexuiz-server
        python3-prometheus-client chromium
        debhelper dpkg-dev lintian fakeroot systemd procps
        pkgconf libsdl2-dev libx11-dev libxi-dev mesa-common-dev libgl-dev xdotool valgrind
        podman mmdebstrap runc uidmap slirp4netns nodejs npm)
fi
if [ "${1:-}" = "--play" ]; then
  # ioquake3's dedicated server and client with the free OpenArena data,
  # the headless X server the client runs in
  pkgs+=(ioquake3 ioquake3-server openarena openarena-server xvfb xauth libgl1-mesa-dri)
fi

missing=()
for p in "${pkgs[@]}"; do
  # A Node.js from elsewhere (NodeSource's nodejs bundles npm and conflicts
  # with Debian's npm package): the commands are what the tests need.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "slipgate: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
echo "slipgate: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
