#!/usr/bin/env bash
# Install what is missing, build twice (plain with -Werror, and with
# AddressSanitizer + UBSan), run the tests in both builds, then build the
# libFuzzer targets with clang (build-fuzz) and run each one for 40 s after
# replaying its seeds and regression inputs (the `fuzz` suite), and print the
# skipped tests by name, the wall time of every build step and of every suite,
# and "N passed, N failed" counted from the builds' meson test logs.
#
# The sanitizer build leaves out `peers` (minutes of real games; their
# sessions run through the sanitizers in the fault suite's capture replays),
# `bench` (timings; the relays it measures run in the fault and loopback
# suites), `workers` (the same cases again with two loops: the loopback
# suite's loopback@workers_* cases and http@workers_merged keep the worker
# pool under the sanitizers, and on a 2-CPU machine every route runs two
# loops by default anyway), `browser` (Chromium reading the page the http
# suite already checks), `install` (file layout, no C) and `container` (an
# image holds the plain build's slipgate: the sanitizers' runtime is not in it).
#
# A test that exits 77 (skip) counts as a failure unless it is listed, with
# its reason, in tests/expected-skips (empty in CI: every test runs there).
#
#   ./test.sh                 everything
#   ./test.sh --quick         the plain build's unit, loopback and docs suites
#                             (minutes; for development)
#   ./test.sh --suite NAME    extra arguments go to `meson test` of the two
#                             first builds; the fuzz step is then left out
set -uo pipefail
cd "$(dirname "$0")"
scripts/deps.sh --test || exit 1

quick=0
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi

builds=("build-test:-Dwerror=true -Dreal_peers=enabled"
        "build-asan:-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false")
[ $quick -eq 1 ] && builds=("build-test:-Dwerror=true")
status=0
steps=()   # "build step seconds" lines for the summary
now() { date +%s; }

# setup_or_configure DIR OPTS...: a fresh build directory is set up, an
# existing one takes the options again (an older one may lack them).
setup_or_configure() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

for entry in "${builds[@]}"; do
  dir=${entry%%:*}
  opts=${entry#*:}
  echo "=== $dir ($opts)"
  rm -f "$dir/meson-logs/testlog.json"
  t0=$(now)
  # shellcheck disable=SC2086
  if ! setup_or_configure "$dir" $opts; then
    echo "meson setup failed for $dir"; status=1; continue
  fi
  if ! ninja -C "$dir"; then
    echo "build failed in $dir"; status=1; continue
  fi
  t1=$(now)
  steps+=("$dir build $((t1 - t0))")
  sel=()
  if [ $quick -eq 1 ]; then
    sel=(--suite unit --suite loopback --suite docs)
  elif [ $# -eq 0 ] && [ "$dir" = build-asan ]; then
    sel=(--no-suite peers --no-suite bench --no-suite workers --no-suite browser
         --no-suite install --no-suite container)
  fi
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$dir" --print-errorlogs --num-processes 2 "${sel[@]}" "$@" || status=1
  steps+=("$dir test $(($(now) - t1))")
done

# The fuzz suite: every libFuzzer target for $SG_FUZZ_SECONDS (40) s,
# seeds generated at run time from the test data.  Its tests count
# like any other; a build that fails counts as a failure.
logdirs=("${builds[@]%%:*}")
if [ $# -eq 0 ] && [ $quick -eq 0 ]; then
  fuzz_dir=build-fuzz
  fuzz_opts="-Dfuzzing=true -Db_lundef=false -Dfuzz_seconds=${SG_FUZZ_SECONDS:-40}"
  echo "=== $fuzz_dir (clang $fuzz_opts)"
  rm -f "$fuzz_dir/meson-logs/testlog.json"
  t0=$(now)
  # shellcheck disable=SC2086
  if { [ -f "$fuzz_dir/build.ninja" ] && meson configure "$fuzz_dir" $fuzz_opts >/dev/null; } ||
     CC=clang meson setup "$fuzz_dir" $fuzz_opts >/dev/null; then
    if ninja -C "$fuzz_dir"; then
      t1=$(now)
      steps+=("$fuzz_dir build $((t1 - t0))")
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$fuzz_dir" --suite fuzz --print-errorlogs --num-processes 2 || status=1
      steps+=("$fuzz_dir test $(($(now) - t1))")
    else
      echo "build failed in $fuzz_dir"; status=1
    fi
  else
    echo "meson setup failed for $fuzz_dir"; status=1
  fi
  logdirs+=("$fuzz_dir")
fi

# Count the real results from meson's JSON test logs; print the skips, the
# time of every step and of every suite.
printf '%s\n' "${steps[@]}" | python3 scripts/test-summary.py tests/expected-skips "${logdirs[@]}"
count=$?
[ $status -eq 0 ] && [ $count -eq 0 ]
