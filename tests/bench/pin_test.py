#!/usr/bin/env python3
"""bench@pin: slipgate-bench --pin puts each relay on CPUs of its own.

With --pin the bench pins its harness (generator, sink) to every CPU this
process may use but the last ones, and each relay to the last CPUs (one per
loop).  The JSON says where it put them (`machine.pinned`) and, per mode,
the CPUs the relay could really run on, read from the kernel once the relay
served (`relay_cpus`).  Checked:
  - with --pin, every relay's CPUs are the last allowed one, the harness's
    the others, and the two do not meet; without it, every relay may use
    every allowed CPU and `pinned` is null;
  - a worker count that leaves the harness no CPU is refused (exit 2, the
    reason said), not run unpinned.
Usage: pin_test.py SLIPGATE_BENCH
"""
import json
import os
import subprocess
import sys


def cpu_list(cpus):
    """The bench's (taskset's) form: "0", "2-3", "0,2,5-7"."""
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def run(bench, *args):
    p = subprocess.run([bench, "--quick", "--json", "--modes", "minrelay,slipgate-decode", *args],
                       capture_output=True, text=True, timeout=120)
    return p


def main():
    bench = sys.argv[1]
    allowed = sorted(os.sched_getaffinity(0))
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    if len(allowed) < 2:
        p = run(bench, "--pin")
        check(p.returncode == 2 and "--pin needs more CPUs" in p.stderr,
              "one CPU: --pin refused with exit 2 and the reason (%d: %s)"
              % (p.returncode, p.stderr.strip()[-200:]))
        return 1 if failures else 0

    p = run(bench, "--pin")
    check(p.returncode == 0, "--pin runs (exit %d)%s"
          % (p.returncode, "" if p.returncode == 0 else ": " + p.stderr.strip()[-300:]))
    if p.returncode == 0:
        d = json.loads(p.stdout)
        pin = d["machine"]["pinned"]
        want_relay, want_harness = cpu_list(allowed[-1:]), cpu_list(allowed[:-1])
        check(pin == {"harness": want_harness, "relay": want_relay, "relay_widest": want_relay},
              "pinned: harness %s, relay %s (got %s)" % (want_harness, want_relay, pin))
        for name, m in d["modes"].items():
            check(m.get("relay_cpus") == want_relay,
                  "%s ran on CPU %s (the kernel says %r)" % (name, want_relay, m.get("relay_cpus")))
        check("--pin" in d["command"], "the command that reproduces the run has --pin")

    p = run(bench)
    check(p.returncode == 0, "unpinned run (exit %d)" % p.returncode)
    if p.returncode == 0:
        d = json.loads(p.stdout)
        check(d["machine"]["pinned"] is None, "unpinned: pinned is null")
        for name, m in d["modes"].items():
            check(m.get("relay_cpus") == cpu_list(allowed),
                  "unpinned: %s may use every CPU %s (got %r)"
                  % (name, cpu_list(allowed), m.get("relay_cpus")))

    # A worker count as large as the CPUs leaves the harness none: refused.
    wide = 8 if len(allowed) <= 8 else None
    if not wide:
        print("note: more than 8 CPUs: no worker count (1, 2, 4, 8) leaves the harness none")
    else:
        p = subprocess.run([bench, "--quick", "--json", "--pin", "--workers", str(wide)],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 2 and "--pin needs more CPUs than the most loops of any mode (8)"
              in p.stderr, "--pin --workers 8 on %d CPUs refused with exit 2 (%d: %s)"
              % (len(allowed), p.returncode, p.stderr.strip()[-200:]))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
