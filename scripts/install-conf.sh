#!/bin/sh
# meson install script (dist/meson.build): install-conf.sh EXAMPLE DIR SHOWN
# installs EXAMPLE as DIR/slipgate.conf under $DESTDIR unless a file is
# already there: an operator's edited configuration is never overwritten (the
# new example is installed as SHOWN all the same).
set -eu
example=$1
dir="${DESTDIR:-}$2"
mkdir -p "$dir"
if [ -e "$dir/slipgate.conf" ]; then
  echo "slipgate: kept $dir/slipgate.conf as it is; the new example is $3"
else
  install -m 0644 "$example" "$dir/slipgate.conf"
  echo "slipgate: installed $dir/slipgate.conf"
fi
