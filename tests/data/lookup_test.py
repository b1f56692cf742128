#!/usr/bin/env python3
"""scripts/testdata.py against an empty ../shared, offline: a copy of the
repository whose tests/data/ holds the test data finds it there; its peers
are named as "fetch needed" with their repository, commit and sha256; without
tests/data/ the test data is named file by file.  Nothing reaches the
network (the lookup only reads files); temporary directories only.

    lookup_test.py REPOSITORY_ROOT
Exit 0 pass, 1 fail.
"""
import os
import shutil
import subprocess
import sys
import tempfile


def run(script, root, shared, *args):
    env = {k: v for k, v in os.environ.items() if k not in ('SG_TESTDATA', 'SG_SHARED')}
    return subprocess.run([sys.executable, script, *args, '--root', root, '--shared', shared],
                          capture_output=True, text=True, env=env, timeout=120)


def main(argv):
    src = os.path.abspath(argv[1])
    real = run(os.path.join(src, 'scripts', 'testdata.py'), src, os.path.join(src, '..', 'shared'),
               'dir')
    if real.returncode != 0:
        print('FAIL: this checkout has no test data to copy:\n' + real.stderr)
        return 1
    data_src = real.stdout.strip()
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix='sg-lookup-') as tmp:
        root = os.path.join(tmp, 'slipgate')
        shared = os.path.join(tmp, 'shared')          # beside the copy, empty
        os.makedirs(os.path.join(root, 'scripts'))
        os.makedirs(os.path.join(root, 'tests', 'data'))
        os.makedirs(shared)
        script = os.path.join(root, 'scripts', 'testdata.py')
        shutil.copy(os.path.join(src, 'scripts', 'testdata.py'), script)
        shutil.copy(os.path.join(src, 'tests', 'data', 'MANIFEST'),
                    os.path.join(root, 'tests', 'data', 'MANIFEST'))

        # No data anywhere: every file named with its sha256.
        r = run(script, root, shared, 'dir')
        check(r.returncode == 1, f'dir without data: exit {r.returncode}, not 1')
        check('fetch needed: the test data' in r.stderr, 'dir without data: no "fetch needed":\n'
              + r.stderr)
        check('fetch needed: q3/sessions/ioq68/capture.pcap sha256 ' in r.stderr,
              'dir without data: the files are not named with their sha256')

        # The data in the copy's tests/data/: found there, ../shared empty.
        r = run(script, root, shared, 'fetch', '--from', data_src)
        check(r.returncode == 0, f'fetch --from {data_src}: exit {r.returncode}\n{r.stdout}')
        r = run(script, root, shared, 'dir')
        check(r.returncode == 0 and r.stdout.strip() == os.path.join(root, 'tests', 'data'),
              f'dir: {r.returncode} {r.stdout!r} {r.stderr!r}, not the copy\'s tests/data')

        # A changed file is not used.
        victim = os.path.join(root, 'tests', 'data', 'q3', 'demos', 'osp_chat.dm_68')
        with open(victim, 'r+b') as f:
            f.write(b'\xff')
        r = run(script, root, shared, 'dir')
        check(r.returncode == 1 and 'osp_chat.dm_68: sha256 differs' in r.stderr,
              f'a changed file was accepted: {r.returncode} {r.stderr!r}')

        # The peers: fetch needed, with repository, pinned commit and sha256.
        r = run(script, root, shared, 'peers')
        check(r.returncode == 1, f'peers with an empty ../shared: exit {r.returncode}, not 1')
        for want in ('fetch needed: https://github.com/skullernet/q2pro@'
                     '3aa0d40ba58935154b0d2a02116021bfbb4f17e8',
                     'sha256 5edde483a78c38f0558876c3df731cf52cc4e74f6fd000ccffb314b52aa384c7',
                     'fetch needed: https://github.com/yquake2/yquake2@'
                     '69599f5a7b3c543f33a5cec34811f09a98fbeb45',
                     'fetch needed: https://github.com/kphillisjr/dpmaster@'
                     '1c1bd46a78d41726f3c1d13cc27e41d2e7620e19',
                     'make_synthetic_quake_data.sh'):
            check(want in r.stderr, f'peers: {want!r} not said:\n{r.stderr}')

    if failures:
        print('FAIL\n' + '\n'.join(failures))
        return 1
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
