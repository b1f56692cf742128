#!/usr/bin/env python3
"""bench@faults: the relay's minor page faults per latency round are counted.

The bench reads the relay's fault count (/proc/PID/stat) around each
latency round and reports the difference (`latency.round_minor_faults`).
Checked against what must be true of the three kinds of mode:
  - direct has no relay: every round's count is null;
  - the minimal relay and slipgate have one per round, whole numbers >= 0;
  - slipgate decoding writes each new session's state in the first round
    (the sessions' scripts begin there: gamestates, first snapshots), so
    its first round has faults (tens per session with 4 KiB pages, fewer
    where transparent huge pages serve them); the minimal relay, whose
    buffers are all in place before, has fewer.
Usage: faults_test.py SLIPGATE_BENCH
"""
import json
import subprocess
import sys


def main():
    bench = sys.argv[1]
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    p = subprocess.run([bench, "--quick", "--json", "--sessions", "8",
                        "--modes", "direct,minrelay,slipgate-decode"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "the bench runs (exit %d)%s"
          % (p.returncode, "" if p.returncode == 0 else ": " + p.stderr.strip()[-300:]))
    if p.returncode != 0:
        return 1
    modes = json.loads(p.stdout)["modes"]
    faults = {m: modes[m]["latency"]["round_minor_faults"] for m in
              ("direct", "minrelay", "slipgate-decode")}
    rounds = len(modes["minrelay"]["latency"]["round_p99_us"])
    print("faults per round:", faults)
    check(rounds >= 1 and all(len(f) == rounds for f in faults.values()),
          "one count per latency round in every mode (%d rounds)" % rounds)
    check(all(v is None for v in faults["direct"]), "direct (no relay): no count")
    for m in ("minrelay", "slipgate-decode"):
        check(all(isinstance(v, int) and v >= 0 for v in faults[m]),
              "%s: a whole number >= 0 per round" % m)
    if not failures:
        first = faults["slipgate-decode"][0]
        check(first > 0, "slipgate-decode's first round: faults (%d for 8 sessions)" % first)
        check(faults["minrelay"][0] < first, "the minimal relay's first round: fewer (%d < %d)"
              % (faults["minrelay"][0], first))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
