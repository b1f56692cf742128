#!/usr/bin/env bash
# Install what is missing, build twice (plain with -Werror, and with
# AddressSanitizer + UBSan), run every test in both builds (the real-peer
# suite, minutes of real games, only in the plain build: its sessions run
# through the sanitizers in the fault suite's capture replays), then build the
# libFuzzer targets with clang (build-fuzz) and run each one for 60 s after
# replaying its seeds and regression inputs (the `fuzz` suite), and print
# "N passed, N failed" counted from the three builds' meson test logs.
#   ./test.sh                 everything
#   ./test.sh --suite NAME    extra arguments go to `meson test` of the two
#                             first builds; the fuzz step is then left out
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
  only=()
  [ $# -eq 0 ] && [ "$dir" = build-asan ] && only=(--no-suite peers)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$dir" --print-errorlogs --num-processes 2 "${only[@]}" "$@" || status=1
done

# The fuzz suite: every libFuzzer target for $SG_FUZZ_SECONDS (60) s,
# seeds generated at run time from ../shared/testdata.  Its tests count
# like any other; a build that fails counts as a failure.
logdirs=("${builds[@]%%:*}")
if [ $# -eq 0 ]; then
  fuzz_dir=build-fuzz
  fuzz_opts="-Dfuzzing=true -Db_lundef=false -Dfuzz_seconds=${SG_FUZZ_SECONDS:-60}"
  echo "=== $fuzz_dir (clang $fuzz_opts)"
  rm -f "$fuzz_dir/meson-logs/testlog.json"
  # shellcheck disable=SC2086
  if { [ -f "$fuzz_dir/build.ninja" ] && meson configure "$fuzz_dir" $fuzz_opts >/dev/null; } ||
     CC=clang meson setup "$fuzz_dir" $fuzz_opts >/dev/null; then
    if ninja -C "$fuzz_dir"; then
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$fuzz_dir" --suite fuzz --print-errorlogs --num-processes 2 || status=1
    else
      echo "build failed in $fuzz_dir"; status=1
    fi
  else
    echo "meson setup failed for $fuzz_dir"; status=1
  fi
  logdirs+=("$fuzz_dir")
fi

# Count the real results from meson's JSON test logs.
python3 - "${logdirs[@]}" <<'PY'
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
