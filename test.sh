#!/usr/bin/env bash
# Install what is missing, build twice (plain with -Werror, and with
# AddressSanitizer + UBSan), run every test in both builds, and print
# "N passed, N failed" counted from meson's test logs.
#   ./test.sh                 everything
#   ./test.sh --suite NAME    extra arguments go to `meson test`
set -uo pipefail
cd "$(dirname "$0")"
scripts/deps.sh --test || exit 1

builds=("build-test:-Dwerror=true"
        "build-asan:-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false")
status=0
for entry in "${builds[@]}"; do
  dir=${entry%%:*}
  opts=${entry#*:}
  echo "=== $dir ($opts)"
  # shellcheck disable=SC2086
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" $opts >/dev/null || { echo "meson setup failed for $dir"; status=1; continue; }
  fi
  ninja -C "$dir" || { echo "build failed in $dir"; status=1; continue; }
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" || status=1
done

# Count the real results from meson's JSON test logs.
python3 - "${builds[@]%%:*}" <<'PY'
import json, sys
passed = failed = skipped = 0
for d in sys.argv[1:]:
    try:
        lines = open(f"{d}/meson-logs/testlog.json").read().splitlines()
    except OSError:
        failed += 1
        print(f"{d}: no test log (build failed?)")
        continue
    for line in lines:
        r = json.loads(line)
        res = r.get("result")
        if res in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif res == "SKIP":
            skipped += 1
        else:
            failed += 1
            print(f"{d}: FAILED {r.get('name')} ({res})")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
count=$?
[ $status -eq 0 ] && [ $count -eq 0 ]
