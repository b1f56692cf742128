#!/usr/bin/env python3
"""Instructions per relayed datagram, counted by callgrind: a deterministic
figure for what slipgate's live path costs, beside the minimal relay's.

    instructions.py [--slipgate PATH] [--bench PATH] [--games q3,qw,q2]
                    [--modes minrelay,decode,reencode,record] [--limit N]
                    [--set NAME=VALUE]... [--json] [--check]

Each game's real session captures (Quake 3 68 and 71, QuakeWorld, Quake 2
34/35/36; found with scripts/testdata.py) are replayed in lock-step through
the relay under test, which runs under `valgrind --tool=callgrind`: a
client socket sends each client datagram to the relay and waits until the
server socket has it, the server socket sends each server datagram to the
relay's upstream address of that client and waits until the client has it.
Lock-step keeps the replay lossless however slow the relay runs under
valgrind, and gives every relay the same traffic in the same order.

What is counted: the instructions (callgrind's `Ir`) of the relay's
datagram path, from the moment its loop finds a socket readable to the
datagrams handed to the kernel: in slipgate the sockets' read callback and
the deferred sends of the loop's check and idle phases (proxy/udp.c:
on_poll, on_check, on_idle, and all they call), in the minimal relay its
two read handlers (minrelay.c: from_clients, from_server).  The event loop
itself (epoll_wait, libuv's bookkeeping) and periodic timers are left out:
they tick with wall time, which under valgrind varies from run to run, and
would make the figure drift by several percent.  Kernel work (the
syscalls) is not seen by callgrind at all.  The count of a run that
replays only the session's first HEAD datagrams (the handshake) is
subtracted from that of the whole replay, and the rest divided by the
datagrams between: the steady in-game cost per datagram, both directions
together.  Two runs give the same figures (to a few instructions).

Relays (modes):
  minrelay   the bench's minimal relay (slipgate-bench --serve-minrelay:
             epoll, recvmmsg, sendmmsg, one socket per client): the floor
  decode     slipgate -p GAME: every datagram decoded, nothing rebuilt
  reencode   slipgate -p GAME +set reencode always: every message rebuilt
  record     slipgate -p GAME --record DIR: decoded and recorded as a demo
Each slipgate runs with one worker loop (-w 1).

The ratios are against minrelay on the same capture.  Targets (what the
benchmarks page compares them with): decode <= 1.0 x, reencode and record
<= 1.1 x.  It is a benchmark: nothing is asserted about the figures, except
with --check (used by the `bench@instructions` test on a short replay):
every datagram relayed, every count above zero.

NetQuake is left out: its accept moves the server's port, which this
lock-step replayer does not follow (slipgate-bench --game nq measures it
end to end).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')
sys.path.insert(0, os.path.join(ROOT, 'tests', 'fuzz'))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))

from seeds import pcapng_udp  # noqa: E402

OOB = b'\xff\xff\xff\xff'
GAMES = {
    'q3': ('q3', ['ioq68', 'ioq71', 'oa71']),
    'qw': ('qw', ['ezquake_mvdsv']),
    'q2': ('q2', ['q2pro_34', 'q2pro_35', 'q2pro_36', 'yquake2_34']),
}
MODES = ['minrelay', 'decode', 'reencode', 'record']
TARGETS = {'decode': 1.0, 'reencode': 1.1, 'record': 1.1}
HEAD = 60          # datagrams of the handshake run
SLIPGATE_PATH = ['on_poll', 'on_check', 'on_idle']  # proxy/udp.c: where a datagram's work runs
MINRELAY_PATH = ['from_clients', 'from_server']      # tests/bench/minrelay.c: the same
WAIT = 10.0        # s a datagram may take through a relay under valgrind
HOLD = 0.5         # s before the replay goes on without a datagram the relay holds
START_WAIT = 60.0  # s for the relay to listen under valgrind


class Fail(Exception):
    pass


def testdata_dir():
    out = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'testdata.py'), 'dir'],
                         capture_output=True, text=True, timeout=30)
    path = out.stdout.strip()
    if out.returncode != 0 or not os.path.isdir(path):
        raise Fail('scripts/testdata.py dir: %s' % (out.stderr.strip() or 'no test data'))
    return path


def session(path):
    """[(c2s, payload)] of the capture's game session: between the server
    port and the client port that sent `connect` (other clients' status
    queries left out)."""
    dgrams = pcapng_udp(path)
    first = next(((s, d) for s, d, p in dgrams if p.startswith(OOB + b'connect')), None)
    if first is None:
        raise Fail('%s: no connect' % path)
    client, server = first
    out = [(s == client, p) for s, d, p in dgrams
           if (s, d) in ((client, server), (server, client))]
    if len(out) < HEAD * 2:
        raise Fail('%s: only %d datagrams' % (path, len(out)))
    return out


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def callgrind_total(path):
    """The run's instructions: the `totals:` (or `summary:`) line of a
    callgrind output file; the part files of other threads added."""
    total = 0
    found = False
    d, base = os.path.split(path)
    for name in os.listdir(d):
        if not name.startswith(base):
            continue
        with open(os.path.join(d, name)) as f:
            for line in f:
                m = re.match(r'(?:totals|summary):\s+(\d+)', line)
                if m:
                    total += int(m.group(1))
                    found = True
                    break
    if not found:
        raise Fail('%s: no totals line' % path)
    return total


def replay(args, mode, game, dgrams, count, work):
    """Replays dgrams[:count] through one relay under callgrind; returns its
    instructions and how many datagrams came through."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(('127.0.0.1', 0))
    sport = server.getsockname()[1]
    lport = free_udp_port()
    out = os.path.join(work, 'cg-%s-%d.out' % (mode, count))
    vg = ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + out,
          '--separate-threads=no', '--dump-instr=no', '--trace-children=no']
    if mode == 'minrelay':
        # Its datagram path: from a readable socket to sendmmsg (minrelay.c)
        cmd = vg + ['--collect-atstart=no'] + ['--toggle-collect=' + f for f in MINRELAY_PATH]
        cmd += [args.bench, '--serve-minrelay', str(lport), str(sport)]
    else:
        # Only the datagram path: the read callbacks of its sockets and the
        # sends deferred to the loop's check and idle phases (proxy/udp.c);
        # the periodic timers (sweeps, stats), which tick with wall time,
        # are left out (see the module docstring).
        cmd = vg + ['--collect-atstart=no'] + ['--toggle-collect=' + f for f in SLIPGATE_PATH]
        cmd += [args.slipgate, '-w', '1', '-l', '127.0.0.1:%d' % lport,
                    '-s', '127.0.0.1:%d' % sport, '-p', game]
        for kv in args.set:
            name, _, value = kv.partition('=')
            cmd += ['+set', name, value]
        if mode == 'reencode':
            cmd += ['+set', 'reencode', 'always']
        elif mode == 'record':
            rec = os.path.join(work, 'rec-%d' % count)
            os.makedirs(rec, exist_ok=True)
            cmd += ['--record', rec]
    log = open(os.path.join(work, '%s-%d.log' % (mode, count)), 'w')
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(('127.0.0.1', 0))
    relayed = 0
    try:
        dest = ('127.0.0.1', lport)
        upstream = None
        # The relay is up when the first datagram comes through; resend it
        # until then (a datagram to a port nobody listens on is lost).
        c2s, first = dgrams[0]
        if not c2s:
            raise Fail('the capture starts with a server datagram')
        server.settimeout(0.5)
        end = time.monotonic() + START_WAIT
        while upstream is None:
            if proc.poll() is not None or time.monotonic() > end:
                raise Fail('%s did not relay the first datagram (exit %s); log %s'
                           % (mode, proc.poll(), log.name))
            client.sendto(first, dest)
            try:
                _, upstream = server.recvfrom(65536)
            except socket.timeout:
                continue
        sent = {True: 1, False: 0}
        got = {True: 1, False: 0}
        socks = {True: server, False: client}  # who receives each direction

        def take(c2s, timeout):
            """Wait up to `timeout` s for what the relay still owes `c2s`'s
            receiver; drain the other side's too.  True when all came."""
            nonlocal upstream
            end = time.monotonic() + timeout
            for _ in range(100000):
                for d in (True, False):
                    socks[d].setblocking(False)
                    while got[d] < sent[d] + 64:
                        try:
                            _, src = socks[d].recvfrom(65536)
                        except BlockingIOError:
                            break
                        got[d] += 1
                        if d:
                            upstream = src
                if got[c2s] >= sent[c2s]:
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                socks[c2s].settimeout(min(left, 0.05))
                try:
                    _, src = socks[c2s].recvfrom(65536)
                    got[c2s] += 1
                    if c2s:
                        upstream = src
                except socket.timeout:
                    pass
            return False

        for c2s, payload in dgrams[1:count]:
            if c2s:
                client.sendto(payload, dest)
            else:
                server.sendto(payload, upstream)
            sent[c2s] += 1
            # A relay that holds a fragment until its message is whole
            # (reencode always) sends nothing for it yet: after HOLD s the
            # replay goes on, and what is owed must come by the end.
            take(c2s, HOLD)
        if not take(True, WAIT) or not take(False, WAIT):
            raise Fail('%s: %d of %d client and %d of %d server datagrams came through'
                       % (mode, got[True], sent[True], got[False], sent[False]))
        relayed = got[True] + got[False]
    finally:
        client.close()
        server.close()
        if proc.poll() is None:
            proc.send_signal(2)  # SIGINT: a clean exit writes callgrind's file
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    if proc.returncode != 0:
        raise Fail('%s exited %d; log %s' % (mode, proc.returncode, log.name))
    return callgrind_total(out), relayed


def measure(args, game, capture, dgrams, mode, work):
    n = min(len(dgrams), args.limit) if args.limit else len(dgrams)
    head, _ = replay(args, mode, game, dgrams, HEAD, work)
    full, relayed = replay(args, mode, game, dgrams, n, work)
    return {'game': game, 'capture': capture, 'mode': mode, 'datagrams': n - HEAD,
            'relayed': relayed, 'instructions': full - head,
            'per_datagram': (full - head) / (n - HEAD)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--slipgate', default=os.environ.get('SLIPGATE', 'slipgate'))
    ap.add_argument('--bench', default=os.environ.get('SLIPGATE_BENCH', 'slipgate-bench'))
    ap.add_argument('--games', default='q3,qw,q2')
    ap.add_argument('--captures', default='', help='capture names (default: all of each game)')
    ap.add_argument('--modes', default=','.join(MODES))
    ap.add_argument('--limit', type=int, default=0, help='datagrams of each capture (0: all)')
    ap.add_argument('--set', action='append', default=[], metavar='NAME=VALUE',
                    help='a directive for every slipgate run (+set NAME VALUE), e.g. '
                         'residence=off to measure what the residence times cost')
    ap.add_argument('--json', action='store_true')
    ap.add_argument('--check', action='store_true',
                    help='fail unless every datagram came through and every count is above 0')
    args = ap.parse_args()
    if not shutil.which('valgrind'):
        print('FAIL: valgrind is not installed (apt-get install valgrind)')
        return 1
    modes = args.modes.split(',')
    if 'minrelay' not in modes or any(m not in MODES for m in modes):
        print('FAIL: --modes takes minrelay (always) and any of %s' % ', '.join(MODES[1:]))
        return 2
    td = testdata_dir()
    rows = []
    work = tempfile.mkdtemp(prefix='sg-instr-')
    try:
        for g in args.games.split(','):
            if g not in GAMES:
                print('FAIL: --games: %r is not one of %s' % (g, ', '.join(GAMES)))
                return 2
            folder, names = GAMES[g]
            for name in names:
                if args.captures and name not in args.captures.split(','):
                    continue
                dgrams = session(os.path.join(td, folder, 'sessions', name, 'capture.pcap'))
                for mode in modes:
                    rows.append(measure(args, g, name, dgrams, mode, work))
                    if not args.json:
                        r = rows[-1]
                        print('  %-4s %-14s %-9s %7d datagrams %12.0f instructions/datagram'
                              % (g, name, mode, r['datagrams'], r['per_datagram']), flush=True)
    except Fail as e:
        print('FAIL: %s (files kept in %s)' % (e, work))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    base = {(r['game'], r['capture']): r['per_datagram'] for r in rows if r['mode'] == 'minrelay'}
    for r in rows:
        r['x_minrelay'] = r['per_datagram'] / base[(r['game'], r['capture'])]
        t = TARGETS.get(r['mode'])
        r['target'] = t
        r['met'] = None if t is None else r['x_minrelay'] <= t
    if args.json:
        print(json.dumps({'rows': rows, 'head': HEAD}, indent=1))
    else:
        print('\ninstructions per datagram (callgrind Ir of the datagram path, in-game '
              'datagrams after the first %d)' % HEAD)
        print('%-4s %-14s %-9s %12s %8s  %s' % ('game', 'capture', 'mode', 'instr/dgram',
                                               'x min', 'target'))
        for r in rows:
            tgt = '' if r['target'] is None else '<= %.1f x %s' % (
                r['target'], 'met' if r['met'] else 'MISSED')
            print('%-4s %-14s %-9s %12.0f %8.2f  %s' % (r['game'], r['capture'], r['mode'],
                                                       r['per_datagram'], r['x_minrelay'], tgt))
        print('\nreproduce: %s' % ' '.join(['tests/bench/instructions.py'] + sys.argv[1:]))
    if args.check:
        bad = [r for r in rows if r['relayed'] != r['datagrams'] + HEAD or r['per_datagram'] <= 0]
        if bad:
            print('FAIL: %r' % bad)
            return 1
        print('PASS: %d rows, every datagram relayed, every count above 0' % len(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
