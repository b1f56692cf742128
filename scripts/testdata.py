#!/usr/bin/env python3
"""Where the tests find what slipgate does not write itself: one lookup.

    scripts/testdata.py dir      print the test-data directory (the real
                                 captures and demos of tests/data/MANIFEST)
    scripts/testdata.py peers    check the real peers' sources and generators
    scripts/testdata.py check    both
    scripts/testdata.py fetch --from DIR
                                 copy the test data from DIR (a ../shared/testdata
                                 of another machine, an unpacked archive) into
                                 tests/data/, each file checked by its sha256
Options: --root DIR (the repository, default this script's), --shared DIR
(default ROOT/../shared, or $SG_SHARED).

The test data is looked for in this order: $SG_TESTDATA when set, the
repository's tests/data/, then ../shared/testdata; a directory is used only
when every file of tests/data/MANIFEST is there with its sha256.  The peers
built from other projects' sources (the Quake 2 engines, the master server)
and the game-data generators come from ../shared/peers only: nothing here
reaches the network.  What is missing is named with where it comes from and
its sha256 ("fetch needed: ..."), and the exit status is 1.
"""
import argparse
import hashlib
import os
import shutil
import sys

# The peers: file under ../shared/peers, sha256, where it comes from.
PEERS = [
    ('q2/q2pro-3aa0d40.tar.gz',
     '5edde483a78c38f0558876c3df731cf52cc4e74f6fd000ccffb314b52aa384c7',
     'https://github.com/skullernet/q2pro@3aa0d40ba58935154b0d2a02116021bfbb4f17e8 '
     '(git archive --format=tar.gz --prefix=q2pro-3aa0d40/)'),
    ('q2/yquake2-69599f5.tar.gz',
     '41000c6e19840aa78da4b28bfc20907b5c949f0646836804f7da1bde899576d9',
     'https://github.com/yquake2/yquake2@69599f5a7b3c543f33a5cec34811f09a98fbeb45 '
     '(git archive --format=tar.gz --prefix=yquake2-69599f5/)'),
    ('master/dpmaster-1c1bd46.tar.gz',
     'ad3c09921ea074df77fb5849e1ef5c54114ae7e3180c3a5998056899764daf02',
     'https://github.com/kphillisjr/dpmaster@1c1bd46a78d41726f3c1d13cc27e41d2e7620e19'),
]
# The build scripts and data generators beside them (no public repository:
# they travel with ../shared/peers).
PEER_SCRIPTS = [
    'make_synthetic_quake_data.sh', 'make_box_bsp.py', 'make_pak.py', 'make_pop_lmp.py',
    'make_tiny_mdl.py', 'make_tiny_spr.py', 'make_wad.py', 'qc/defs.qc', 'qc/game.qc',
    'q2/build_q2_peers.sh', 'q2/make_q2_data.sh', 'q2/make_q2_bsp.py', 'q2/make_q2_pics.py',
    'q2/run_q2_session.sh', 'q2/dm2_summary.py', 'master/build_dpmaster.sh',
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 16), b''):
            h.update(block)
    return h.hexdigest()


def manifest(root):
    entries = []
    with open(os.path.join(root, 'tests', 'data', 'MANIFEST')) as f:
        for line in f:
            if line.strip() and not line.startswith('#'):
                digest, size, rel = line.split()
                entries.append((rel, digest, int(size)))
    return entries


def problems(directory, entries):
    """What directory lacks of entries (empty: it holds them all)."""
    out = []
    for rel, digest, size in entries:
        p = os.path.join(directory, rel)
        if not os.path.isfile(p):
            out.append(f'{rel}: missing')
        elif os.path.getsize(p) != size or sha256(p) != digest:
            out.append(f'{rel}: sha256 differs (want {digest})')
    return out


def find_testdata(root, shared):
    entries = manifest(root)
    tried = []
    candidates = []
    if os.environ.get('SG_TESTDATA'):
        candidates.append(os.environ['SG_TESTDATA'])
    candidates += [os.path.join(root, 'tests', 'data'), os.path.join(shared, 'testdata')]
    for d in candidates:
        bad = problems(d, entries)
        if not bad:
            return os.path.abspath(d), []
        tried.append((d, bad))
    msg = ['fetch needed: the test data (%d files, tests/data/MANIFEST) is in none of: %s'
           % (len(entries), ', '.join(d for d, _ in tried))]
    for d, bad in tried:
        if len(bad) < len(entries):
            msg += [f'  {d}: {b}' for b in bad]
    msg.append('  copy it into tests/data/ with: scripts/testdata.py fetch --from DIR')
    for rel, digest, size in entries:
        msg.append(f'  fetch needed: {rel} sha256 {digest} ({size} bytes)')
    return None, msg


def check_peers(shared):
    peers = os.path.join(shared, 'peers')
    msg = []
    for rel, digest, origin in PEERS:
        p = os.path.join(peers, rel)
        if not os.path.isfile(p) or sha256(p) != digest:
            why = 'missing' if not os.path.isfile(p) else 'sha256 differs'
            msg.append(f'fetch needed: {origin}, sha256 {digest} '
                       f'(as {p}: {why})')
    for rel in PEER_SCRIPTS:
        p = os.path.join(peers, rel)
        if not os.path.isfile(p):
            msg.append(f'fetch needed: {p} (the peers\' build scripts and game-data '
                       'generators travel with ../shared/peers; no public repository)')
    return msg


def fetch(root, src):
    dest = os.path.join(root, 'tests', 'data')
    failed = 0
    for rel, digest, size in manifest(root):
        s = os.path.join(src, rel)
        if not os.path.isfile(s) or sha256(s) != digest:
            print(f'fetch needed: {rel} sha256 {digest}: not in {src} (or differs)')
            failed += 1
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copyfile(s, os.path.join(dest, rel))
        print(f'{rel}: copied, sha256 checked')
    return 1 if failed else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('what', choices=['dir', 'peers', 'check', 'fetch'])
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument('--shared')
    ap.add_argument('--from', dest='src')
    a = ap.parse_args(argv[1:])
    shared = a.shared or os.environ.get('SG_SHARED') or os.path.join(a.root, '..', 'shared')
    if a.what == 'fetch':
        if not a.src:
            ap.error('fetch needs --from DIR (nothing here reaches the network)')
        return fetch(a.root, a.src)
    status = 0
    if a.what in ('dir', 'check'):
        d, msg = find_testdata(a.root, shared)
        if d:
            print(d)
        else:
            print('\n'.join(msg), file=sys.stderr)
            status = 1
    if a.what in ('peers', 'check'):
        msg = check_peers(shared)
        if msg:
            print('\n'.join(msg), file=sys.stderr)
            status = 1
        elif a.what == 'peers':
            print(os.path.abspath(os.path.join(shared, 'peers')))
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv))
