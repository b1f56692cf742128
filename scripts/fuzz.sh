#!/bin/sh
# Run the libFuzzer targets of tests/fuzz, one after another.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET...]
#
# Configures build-fuzz (clang, -Dfuzzing=true) if needed, builds the
# targets, cuts their seeds from the test data ($SG_TESTDATA, default
# ../shared/testdata) into build-fuzz/seeds/TARGET, and runs each target
# for SECONDS.  New inputs accumulate in build-fuzz/corpus/TARGET, crash
# inputs go to build-fuzz/artifacts/TARGET, output to
# build-fuzz/logs/TARGET.log.  Exits 1 if any target crashed, leaked,
# timed out, ran out of memory or printed a sanitizer report, naming the
# target and its artifact; 2 on a usage error.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
testdata=${SG_TESTDATA:-$(python3 "$root/scripts/testdata.py" dir)} || exit 1
all="fuzz_huffman fuzz_q3_message fuzz_q3_client fuzz_q3_netchan fuzz_q3_filters fuzz_demo_reader fuzz_config fuzz_bmsg fuzz_qw fuzz_sign fuzz_nq fuzz_q2 fuzz_json fuzz_qw_prx fuzz_q3_spectate"

seconds=60
case ${1:-} in
  ''|*[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
targets=${*:-$all}
for t in $targets; do
  case " $all " in
    *" $t "*) ;;
    *) echo "fuzz.sh: unknown target '$t' (known: $all)" >&2; exit 2 ;;
  esac
done

# Longest input per target: room for the oversized messages and datagrams
# each decoder must refuse (MAX_MSGLEN is 16384); the others keep libFuzzer's
# default (the largest seed, at least 4096).
max_len() {
  case $1 in
    fuzz_q3_client) echo "-max_len=20000" ;;
    fuzz_q3_message|fuzz_q3_netchan|fuzz_q3_filters) echo "-max_len=40000" ;;
    *) ;;
  esac
}

cd "$root"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang meson setup "$build" -Dfuzzing=true -Db_lundef=false
else
  meson configure "$build" -Dfuzzing=true -Db_lundef=false
fi
# shellcheck disable=SC2086
meson compile -C "$build" $targets
# shellcheck disable=SC2086
python3 tests/fuzz/seeds.py --testdata "$testdata" --source "$root" gen "$build/seeds" $targets

# What a sanitizer, libFuzzer or a target's property check prints on a failure.
reports='ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)'
reports="$reports|runtime error:|property failed"
failed=""
summary=""
for t in $targets; do
  log=$build/logs/$t.log
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
  echo "== $t: ${seconds}s"
  rc=0
  # shellcheck disable=SC2046
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" $(max_len "$t") \
    "$build/corpus/$t" "$build/seeds/$t" >"$log" 2>&1 || rc=$?

  # libFuzzer's last status line: "#N DONE cov: C ft: F corp: ... exec/s: E ..."
  stats=$(grep -E '^#[0-9]+' "$log" | tail -n 1 |
    sed -E 's/^#([0-9]+)[[:space:]]+[A-Z]+[[:space:]]+/runs \1 /')
  if [ "$rc" -ne 0 ] || grep -qE "$reports" "$log"; then
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "$t: FAILED (exit $rc): $(grep -m 1 -E "$reports" "$log" || true)"
    echo "$t: artifact ${artifact:-none}; log $log"
    failed="$failed $t"
    summary="$summary
$t: FAILED, artifact ${artifact:-none}"
  else
    echo "$t: ok: $stats"
    summary="$summary
$t: ok: $stats"
  fi
done

echo "== summary$summary"
if [ -n "$failed" ]; then
  echo "fuzz.sh: failures in:$failed (reproduce: build-fuzz/tests/fuzz/TARGET ARTIFACT)" >&2
  exit 1
fi
