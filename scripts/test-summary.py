#!/usr/bin/env python3
"""The end of ./test.sh: results counted from meson's JSON test logs.

    scripts/test-summary.py EXPECTED_SKIPS BUILD_DIR... < STEPS

Prints every skipped test by name (with its reason when EXPECTED_SKIPS lists
it), the wall time of each build step (the lines "DIR STEP SECONDS" read from
standard input), the time of each suite per build (the tests' durations
summed, each test under its first suite), and "N passed, N failed, N
skipped".  A skip not listed in EXPECTED_SKIPS is a failure, and so is a
listed skip whose test passed or failed instead (the list must say what is
true).  Exit 0 when nothing failed.

EXPECTED_SKIPS: one test a line, its name (as meson lists it, without the
project prefix: `loopback@concurrent_v6`), white space, then the reason;
`#` starts a comment.  CI keeps it empty.
"""
import collections
import json
import sys


def read_expected(path):
    expected = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.split('#', 1)[0].strip()
                if line:
                    name, _, why = line.partition(' ')
                    expected[name] = why.strip() or '(no reason given)'
    except FileNotFoundError:
        pass
    return expected


def split_name(name):
    """'slipgate:unit / q3_msg@x' -> ('unit', 'q3_msg@x')."""
    head, sep, test = name.partition(' / ')
    if not sep:
        return '?', name
    return head.split('+')[0].split(':')[-1], test


def main(argv):
    expected = read_expected(argv[1])
    steps = [line.split() for line in sys.stdin if line.strip()]
    passed = failed = skipped = 0
    skips = []
    suites = collections.OrderedDict()
    for d in argv[2:]:
        try:
            with open(f"{d}/meson-logs/testlog.json") as f:
                lines = f.read().splitlines()
        except OSError:
            failed += 1
            print(f"{d}: no test log (build failed?)")
            continue
        for line in lines:
            r = json.loads(line)
            res = r.get("result")
            suite, name = split_name(r.get("name", "?"))
            t = suites.setdefault((d, suite), [0, 0.0])
            t[0] += 1
            t[1] += float(r.get("duration") or 0)
            if res == "SKIP":
                skipped += 1
                skips.append((d, name))
            elif name in expected:
                failed += 1
                print(f"{d}: {name} is in {argv[1]} but did not skip ({res})")
            elif res in ("OK", "EXPECTEDFAIL"):
                passed += 1
            else:
                failed += 1
                print(f"{d}: FAILED {name} ({res})")

    if skips:
        print(f"skipped tests ({len(skips)}):")
    for d, name in skips:
        if name in expected:
            print(f"  {d}: {name}: expected ({expected[name]})")
        else:
            failed += 1
            print(f"  {d}: {name}: NOT in {argv[1]}: counted as a failure")
    if expected:
        print(f"expected skips ({argv[1]}):")
        for name, why in expected.items():
            print(f"  {name}: {why}")
    else:
        print(f"expected skips ({argv[1]}): none")

    print("wall time per build step:")
    total = 0
    for d, step, secs in steps:
        total += int(secs)
        print(f"  {d:12} {step:6} {int(secs) // 60:3d} min {int(secs) % 60:02d} s")
    print(f"  {'all':12} {'':6} {total // 60:3d} min {total % 60:02d} s")
    print("test time per suite (durations summed; each test under its first suite):")
    for (d, suite), (n, secs) in sorted(suites.items(), key=lambda kv: (kv[0][0], -kv[1][1])):
        print(f"  {d:12} {suite:10} {n:4d} tests {secs:8.1f} s")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
