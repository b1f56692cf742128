#!/usr/bin/env python3
"""scripts/test-summary.py, the end of ./test.sh, on made-up meson test logs:
a skip not in the expected-skips list fails the run and is named; a listed
one passes with its reason printed; a listed test that did not skip fails;
the time of every build step and suite is printed.

    summary_test.py SCRIPT
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile


def log(d, rows):
    os.makedirs(os.path.join(d, 'meson-logs'))
    with open(os.path.join(d, 'meson-logs', 'testlog.json'), 'w') as f:
        for name, res, secs in rows:
            f.write(json.dumps({'name': name, 'result': res, 'duration': secs}) + '\n')


def run(script, skips, dirs, steps=''):
    return subprocess.run([sys.executable, script, skips] + dirs, input=steps,
                          capture_output=True, text=True, timeout=60)


def main(argv):
    script = argv[1]
    bad = []
    with tempfile.TemporaryDirectory(prefix='sg-summary-') as tmp:
        a, b = os.path.join(tmp, 'build-a'), os.path.join(tmp, 'build-b')
        log(a, [('slipgate:unit / q3_msg@x', 'OK', 1.5),
                ('slipgate:loopback / loopback@concurrent_v6', 'SKIP', 0.1),
                ('slipgate:loopback / loopback@dualstack', 'OK', 2.0)])
        log(b, [('slipgate:fault / fault@soak', 'OK', 21.0)])
        empty = os.path.join(tmp, 'none')
        listed = os.path.join(tmp, 'skips')
        with open(empty, 'w') as f:
            f.write('# nothing may skip\n')
        with open(listed, 'w') as f:
            f.write('loopback@concurrent_v6  no IPv6 loopback here\n')

        r = run(script, empty, [a, b], 'build-a build 75\nbuild-a test 130\n')
        if r.returncode != 1:
            bad.append(f'an unlisted skip: exit {r.returncode}, not 1')
        if 'loopback@concurrent_v6: NOT in' not in r.stdout:
            bad.append('the unlisted skip is not named:\n' + r.stdout)
        flat = ' '.join(r.stdout.split())
        for want in ('build-a build 1 min 15 s', 'build-a test 2 min 10 s',
                     'build-a loopback 2 tests 2.1 s', 'build-b fault 1 tests 21.0 s',
                     '3 passed, 1 failed, 1 skipped', 'expected skips (%s): none' % empty):
            if want not in flat:
                bad.append(f'{want!r} not printed:\n{r.stdout}')

        r = run(script, listed, [a, b])
        if r.returncode != 0 or 'expected (no IPv6 loopback here)' not in r.stdout:
            bad.append(f'a listed skip: exit {r.returncode}:\n{r.stdout}')

        with open(listed, 'a') as f:
            f.write('fault@soak  listed but it runs\n')
        r = run(script, listed, [a, b])
        if r.returncode != 1 or 'fault@soak is in' not in r.stdout:
            bad.append(f'a listed test that ran: exit {r.returncode}:\n{r.stdout}')

        r = run(script, empty, [a, os.path.join(tmp, 'missing')])
        if r.returncode != 1 or 'no test log' not in r.stdout:
            bad.append(f'a build without a test log: exit {r.returncode}:\n{r.stdout}')
    if bad:
        print('FAIL\n' + '\n'.join(bad))
        return 1
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
