#!/usr/bin/env python3
"""slipgate-bench spectate, run short, its figures checked for existence and
sanity (never for speed).  Usage: spect_check.py BENCH CASE

    smoke  N = 0, 2 and 4 spectators on one watched session, 1 s each: every
           run ended well; the player's datagrams all relayed and nothing
           unknown reached the server; slipgate's CPU time, its residence
           histogram (p50 <= p99), the spectators' datagrams and snapshots,
           RSS per spectator and the CPU over N = 0 are there; /metrics
           counts N spectators, none refused or limited; no spectator's datagram failed
           to decode
    flood  one real spectator watches while 64 source ports of 127.0.0.1
           flood the spectator port with getchallenge and connects (right
           and wrong challenges, a bounded count) for 3 s, max_spectators 4:
           the player's datagrams all relay and its one session stays; the
           real spectator is shown snapshots all along (no gap of 1 s) and
           is never ended before the stop; at most 4 spectators at once;
           the refused counter counts the refusals the flood was told
           about; the flood's one address is answered at most 10 times a
           second, the rest counted as limited; nothing reaches the server's socket; the log is not
           flooded: refusals are logged one by one up to a bound, then
           summed up in one line
"""
import json
import os
import re
import shutil
import subprocess
import sys


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run(bench, args, timeout):
    p = subprocess.run([bench, 'spectate', '--json'] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    err = p.stderr.decode(errors='replace')
    check(p.returncode == 0, 'slipgate-bench spectate exited %d:\n%s' % (p.returncode, err))
    return json.loads(p.stdout)['spectate']


def common(r, flood=False):
    n = r['spectators']
    check(r['ok'], 'N=%d: %s' % (n, r['error']))
    check(r['relayed'] > 0 and r['relayed'] == r['c2s_sent'] + r['s2c_sent'] and r['lost'] == 0,
          'N=%d: the player\'s datagrams were not all relayed: %r' % (n, r))
    check(r['unknown_at_server'] == 0, 'N=%d: %d unknown datagrams reached the server'
          % (n, r['unknown_at_server']))
    check(r['cpu_ms'] is not None and r['cpu_ms'] > 0, 'N=%d: no CPU time' % n)
    check(r['cpu_ns_per_datagram'] is not None and r['cpu_ns_per_datagram'] > 0,
          'N=%d: no CPU per datagram' % n)
    check(r['residence_count'] >= r['relayed'] and r['residence_p50_us'] is not None and
          r['residence_p99_us'] is not None and
          0 < r['residence_p50_us'] <= r['residence_p99_us'],
          'N=%d: residence figures: %r' % (n, {k: v for k, v in r.items() if 'resid' in k}))
    check(r['rss_before_kib'] > 0 and r['rss_after_kib'] > 0, 'N=%d: no RSS' % n)
    if n:
        check(r['spectator_snapshots'] > 0 and
              r['spectator_datagrams'] >= r['spectator_snapshots'],
              'N=%d: the spectators were shown no snapshots: %r' % (n, r))
        check(r['spectator_sent'] > 0, 'N=%d: the spectators sent nothing' % n)
        check(r['spectator_decode_errors'] == 0, 'N=%d: %d spectator datagrams did not decode'
              % (n, r['spectator_decode_errors']))
        # (with a flood, the growth is the flood's too: under ASan its quarantine)
        check(r['rss_per_spectator_kib'] is not None and
              (flood or -4096 < r['rss_per_spectator_kib'] < 65536),
              'N=%d: RSS per spectator %r' % (n, r['rss_per_spectator_kib']))
        check(r['spectator_max_gap_ms'] is not None, 'N=%d: no gap figure' % n)


def case_smoke(bench):
    d = run(bench, ['--spectators', '0,2,4', '--seconds', '1'], 90)
    runs = d['runs']
    check([r['spectators'] for r in runs] == [0, 2, 4], 'runs: %r' % runs)
    for r in runs:
        common(r)
        n = r['spectators']
        m = r['metrics']
        check(m['active'] == n and m['total'] == n and m['refused'] == 0 and m['limited'] == 0,
              'N=%d: /metrics says %r' % (n, m))
        check(n == 0 or m['datagrams_out'] > 0, 'N=%d: /metrics counts no datagram out' % n)
        if n:
            for k in ('extra_cpu_ns_per_spectator_datagram', 'extra_cpu_share_per_spectator',
                      'residence_p50_vs_none', 'residence_p99_vs_none'):
                check(r[k] is not None, 'N=%d: no %s' % (n, k))
    print(json.dumps(d, indent=1))


def case_flood(bench):
    d = run(bench, ['--spectators', '1', '--flood', '64', '--max-spectators', '4',
                    '--seconds', '3', '--keep-logs'], 90)
    logs = d['logs']
    try:
        r = d['runs'][0]
        common(r, flood=True)
        check(r['flood_sent'] > 1000, 'the flood sent only %d datagrams' % r['flood_sent'])
        check(r['spectator_max_gap_ms'] < 1000,
              'the real spectator went %.0f ms without a datagram' % r['spectator_max_gap_ms'])
        m = r['metrics']
        check(0 < m['active'] <= 4, 'active spectators: %d with max_spectators 4' % m['active'])
        # its one address is answered at most 10 times a second (ioquake3's limit)
        # (its ports that got a seat are spectators: theirs are answered as such)
        answered = r['flood_stranger_answers']
        check(answered <= 10 * (r['flood_seconds'] + 2),
              'the flood\'s address was answered %d times in %.1f s' % (answered,
                                                                       r['flood_seconds']))
        check(m['limited'] > 0 and m['limited'] <= r['flood_sent'],
              'limited %d of %d flood datagrams' % (m['limited'], r['flood_sent']))
        told = r['flood_full'] + r['flood_bad_challenge']
        check(told > 0 and m['refused'] >= told,
              'refused counter %d, the flood was refused %d times' % (m['refused'], told))
        with open(os.path.join(logs, 'spectate-1.log'), errors='replace') as f:
            log = f.read()
        starts = [int(x) for x in re.findall(r'spectator \d+ \(.*?\) from .* started \((\d+) '
                                             r'watching\)', log)]
        check(starts and max(starts) <= 4, 'watching counts: %r' % starts)
        check(len(re.findall(r'session start ', log)) == 1,
              'the player\'s session did not stay one session')
        check(re.search(r'session end reason=shutdown', log), 'the player\'s session did not '
              'last until the stop')
        ends = re.findall(r'spectator 1 \(bench1000\) from .* ended: (.*?) \(', log)
        check(ends == ['the route closed'], 'the real spectator ended: %r' % ends)
        one_by_one = len(re.findall(r'spectator from .* refused', log))
        check(one_by_one <= 20, '%d refusals logged one by one (of %d): the log is flooded'
              % (one_by_one, m['refused']))
        summed = [int(x) for x in re.findall(r'(\d+) more spectator refusals', log)]
        check(one_by_one + sum(summed) == m['refused'],
              'refusals: %d logged, %r summed up, %d counted' % (one_by_one, summed,
                                                                 m['refused']))
        print(json.dumps(d, indent=1))
    finally:
        shutil.rmtree(logs, ignore_errors=True)


CASES = {'smoke': case_smoke, 'flood': case_flood}

if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.exit('usage: spect_check.py BENCH %s' % '|'.join(CASES))
    try:
        CASES[sys.argv[2]](sys.argv[1])
    except AssertionError as e:
        print('FAIL: %s' % e)
        sys.exit(1)
