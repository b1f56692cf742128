#!/usr/bin/env bash
# Build slipgate's OCI image from Debian's packages with Debian's tools,
# offline (no registry): mmdebstrap extracts the runtime libraries slipgate
# links (and their dependencies) from the host's apt sources, slipgate goes
# in from a meson build through `meson install --destdir`, and podman
# imports the file system as an image.  doc/kubernetes.md says how to run it.
#
#   scripts/image.sh [--build DIR] [--tag NAME] [--work DIR] [--suite SUITE]
#
#   --build DIR   a configured meson build directory to install slipgate from
#                 (default: build-image, set up here with --prefix=/usr
#                 --buildtype=release -Dtests=false)
#   --tag NAME    the image's name (default localhost/slipgate:VERSION)
#   --work DIR    where the file system is put together (default: a
#                 temporary directory); DIR/base-HASH.tar, the libraries'
#                 file system, is kept there and reused while the package
#                 list, the suite and this script are the same
#   --suite S     the Debian suite (default: the host's VERSION_CODENAME)
#
# The image: /usr/bin/slipgate and its libraries, nothing else (no shell, no
# package manager, no documentation, no CA certificates); user 10001
# (slipgate); ENTRYPOINT slipgate -c /etc/slipgate/slipgate.conf, so that
# arguments (`+set NAME VALUE`, -v) go after it; the default configuration
# (one Quake 3 route 0.0.0.0:27960 -> 127.0.0.1:27961, http on :9100,
# drain_timeout 30s, demos in /var/lib/slipgate/demos) is replaced by
# mounting a file on /etc/slipgate/slipgate.conf; SLIPGATE_SET_NAME=VALUE
# variables are +set NAME VALUE; logs go to standard error.
# Needs root or a user podman works for (mmdebstrap picks its mode itself).
# The last line of output is the image's name; its size is said before it.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=
tag=
work=
suite=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

for t in mmdebstrap podman meson tar readelf; do
  command -v "$t" >/dev/null 2>&1 || {
    echo "image.sh: '$t' is not installed (scripts/deps.sh --test installs the image tools)" >&2
    exit 1
  }
done

if [ -z "$suite" ]; then
  # shellcheck disable=SC1091
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$suite" ] || { echo "image.sh: no VERSION_CODENAME in /etc/os-release: give --suite" >&2; exit 1; }
fi

# The runtime libraries, by their Debian packages (the libraries' own
# dependencies come with them).
pkgs=libc6,libgcc-s1,libuv1,libsodium23,zlib1g,libpcap0.8,libmicrohttpd12

if [ -z "$build" ]; then
  build="$here/build-image"
  [ -f "$build/build.ninja" ] ||
    meson setup "$build" "$here" --prefix=/usr --buildtype=release -Dtests=false >/dev/null
  ninja -C "$build" >/dev/null
fi
[ -f "$build/build.ninja" ] || { echo "image.sh: $build is not a meson build directory" >&2; exit 1; }

cleanup=
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/slipgate-image.XXXXXX")
  cleanup=$work
fi
mkdir -p "$work"
trap '[ -z "$cleanup" ] || rm -rf "$cleanup"; [ -z "${root:-}" ] || rm -rf "$root" "$stage" "$work/image.tar"' EXIT

# The libraries' file system, cached by what makes it.  SOURCE_DATE_EPOCH
# (the last commit's time, else 0) makes mmdebstrap's output reproducible
# for the same packages.
key=$( (echo "$pkgs $suite"; cat "$0"; apt-cache policy ${pkgs//,/ } 2>/dev/null | grep -E '^\S|Candidate') |
       sha256sum | cut -c1-16)
base="$work/base-$key.tar"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)}
if [ ! -s "$base" ]; then
  mmdebstrap --quiet --variant=extract --include="$pkgs" \
    --dpkgopt='path-exclude=/usr/share/*' \
    "$suite" "$work/part-$key.tar" >&2
  mv "$work/part-$key.tar" "$base"
fi

# slipgate from the build.
stage="$work/stage"
root="$work/root"
rm -rf "$stage" "$root"
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet >/dev/null
bin=$(find "$stage" -path '*/bin/slipgate' -type f | head -n 1)
[ -n "$bin" ] || { echo "image.sh: meson install put no bin/slipgate under $stage" >&2; exit 1; }

mkdir -p "$root"
tar -C "$root" -xf "$base"
# What no process of the image uses: package data, documentation, locales,
# character set converters (slipgate calls no iconv), apt's configuration.
rm -rf "${root:?}"/usr/share "${root:?}"/var/lib/dpkg "${root:?}"/var/lib/apt "${root:?}"/var/cache \
       "${root:?}"/var/log/* "${root:?}"/etc/apt "${root:?}"/etc/dpkg \
       "${root:?}"/usr/lib/*/gconv "${root:?}"/usr/bin "${root:?}"/usr/sbin "${root:?}"/usr/libexec
install -D -m 0755 "$bin" "$root/usr/bin/slipgate"
strip --strip-unneeded "$root/usr/bin/slipgate" 2>/dev/null || true

# Every library slipgate needs, and theirs, must be there: the image cannot
# tell later (it has no shell).
missing=$(
  todo=("$root/usr/bin/slipgate") seen=" "
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]}; todo=("${todo[@]:1}")
    for lib in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$seen" in *" $lib "*) continue ;; esac
      seen="$seen$lib "
      p=$(find "$root/lib" "$root/usr/lib" -maxdepth 2 -name "$lib" 2>/dev/null | head -n 1)
      if [ -z "$p" ]; then echo "$lib"; else todo+=("$(readlink -f "$p")"); fi
    done
  done
)
[ -z "$missing" ] || { echo "image.sh: libraries missing from the image: $missing" >&2; exit 1; }

# The user, the files a process expects, the configuration, the volume.
mkdir -p "$root"/etc/slipgate "$root"/var/lib/slipgate/demos "$root"/tmp "$root"/run "$root"/proc \
         "$root"/sys "$root"/dev
chmod 1777 "$root"/tmp
printf 'root:x:0:0:root:/root:/nonexistent\nslipgate:x:10001:10001:slipgate:/var/lib/slipgate:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n' >"$root"/etc/passwd
printf 'root:x:0:\nslipgate:x:10001:\nnogroup:x:65534:\n' >"$root"/etc/group
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root"/etc/hosts
printf 'hosts: files dns\n' >"$root"/etc/nsswitch.conf
cat >"$root"/etc/slipgate/slipgate.conf <<'EOF'
# slipgate in a container: the image's default.  Mount your own file on
# /etc/slipgate/slipgate.conf, or change this one with SLIPGATE_SET_NAME=VALUE
# variables or +set NAME VALUE arguments (doc/kubernetes.md).
http 0.0.0.0:9100
drain_timeout 30s
route game {
    listen 0.0.0.0:27960
    server 127.0.0.1:27961
    protocol q3
    record /var/lib/slipgate/demos
}
EOF
chown -R 10001:10001 "$root"/var/lib/slipgate

version=$("$root/usr/bin/slipgate" --version 2>/dev/null | head -n 1 | awk '{print $2}') || version=
[ -n "$version" ] || version=dev
tag=${tag:-localhost/slipgate:$version}

# One layer, its entries in name order with one time stamp.
tar -C "$root" --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf "$work/image.tar" .
podman import --quiet \
  --change 'USER=10001:10001' \
  --change 'WORKDIR=/var/lib/slipgate' \
  --change 'ENTRYPOINT=["/usr/bin/slipgate","-c","/etc/slipgate/slipgate.conf"]' \
  --change 'CMD=[]' \
  --change 'VOLUME=/var/lib/slipgate' \
  --change 'EXPOSE=27960/udp' \
  --change 'EXPOSE=9100/tcp' \
  --change 'STOPSIGNAL=SIGTERM' \
  --change "LABEL=org.opencontainers.image.title=slipgate" \
  --change "LABEL=org.opencontainers.image.version=$version" \
  "$work/image.tar" "$tag" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "image.sh: $tag: $((size / 1024)) KiB ($(du -sk "$root" | cut -f1) KiB on disk unpacked)" >&2
echo "$tag"
