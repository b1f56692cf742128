"""Loopback tests of the 'netem' filter through the real slipgate binary.

An echo server and a client on 127.0.0.1 (no game protocol: the frames are
SG_FRAME_RAW, nobody decodes them):

    loss_seeded   loss 10 both ways, seed 42: what arrives each way lies
                  within 5 sigma of the binomial expectation, --stats' drop
                  counter "filter" equals what was lost, the session-end log
                  line agrees, a second run with seed 42 loses exactly the
                  same datagrams and a run with seed 43 does not
    delay         delay_to_server 60ms + delay_to_client 40ms: every round
                  trip is at least 100 ms, and the median is 100 ms (+ a
                  little) more than through a route without netem
    jitter        delay_to_client 50ms, jitter_to_client 20ms: round trips
                  from 30 ms, 36 of 40 within 70 ms (+ slack; a loaded host
                  runs a timer late now and then), and actually spread
    duplicate     duplicate_to_client 100: every reply arrives twice, and
                  --stats counts the copies

Every loop is bounded; processes are killed by PID (harness.py).
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import V4, Fail, check  # noqa: E402

TAG = b'ECHO'

ROUTE = '''
route %(name)s {
    listen 127.0.0.1:%(port)s
    server %(server)s
    idle_timeout 30s
%(extra)s
}
'''


def config(*routes):
    return ''.join(ROUTE % r for r in routes)


def route_stats(st, name):
    for r in st.get('routes', []):
        if r.get('name') == name:
            return r
    raise Fail('stats: no route %r in %r' % (name, st))


def drain(client, quiet=0.5, limit=15.0):
    """Every datagram arriving until nothing comes for `quiet` s (at most `limit` s)."""
    out = []
    end = time.monotonic() + limit
    for _ in range(100000):
        if time.monotonic() > end:
            break
        r = client.recv_one(quiet)
        if r is None:
            break
        out.append(r[0])
    return out


def blast(client, dest, n, prefix=b'n'):
    """Send n numbered datagrams, paced so that no socket buffer overflows."""
    for i in range(n):
        client.send(prefix + b'%06d' % i, dest)
        if i % 25 == 24:
            time.sleep(0.004)


def wait_server(srv, want, limit=5.0):
    """Wait until the server has `want` datagrams or nothing new came for 0.5 s."""
    end = time.monotonic() + limit
    last, since = -1, time.monotonic()
    for _ in range(10000):
        n = len(srv.snapshot())
        if n >= want or time.monotonic() > end:
            break
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > 0.5:
            break
        time.sleep(0.02)


def five_sigma(k, n, p, what):
    mean = n * p
    sigma = (n * p * (1 - p)) ** 0.5
    check(abs(k - mean) <= 5 * sigma, '%s: %d of %d, expected %.1f +- %.1f (5 sigma)'
          % (what, k, n, mean, 5 * sigma))


# ---------------------------------------------------------------- cases

def run_loss(h, seed, n):
    """One proxy with netem loss 10 and `seed`; returns (server ids, client ids, proxy)."""
    srv = h.echo(V4, TAG)
    cl = h.client(V4)
    px = h.proxy(config=config({'name': 'lossy', 'port': '$P0', 'server': srv.addr,
                                'extra': '    filter netem {\n        loss 10\n'
                                         '        seed %d\n    }' % seed}),
                 name='seed%d' % seed)
    dest = (V4, px.ports[0])
    blast(cl, dest, n)
    wait_server(srv, n)
    replies = drain(cl)
    got_server = [d for _, _, d in srv.snapshot()]
    check(px.stop() == 0, 'slipgate did not exit cleanly')
    for d in replies:
        check(d.startswith(TAG), 'a reply without the echo tag: %r' % d[:20])
    srv.close()
    h.servers.remove(srv)
    return got_server, [d[len(TAG):] for d in replies], px


def loss_seeded(h):
    n = 2000
    at_server, at_client, px = run_loss(h, 42, n)
    s, c = len(at_server), len(at_client)
    print('seed 42: %d of %d reached the server, %d replies of %d reached the client'
          % (s, n, c, s))
    check(len(set(at_server)) == s, 'the server saw duplicates')
    check(set(at_client) <= set(at_server), 'replies to datagrams the server never saw')
    five_sigma(s, n, 0.9, 'to_server survivors')
    five_sigma(c, s, 0.9, 'to_client survivors')

    # Slipgate's own counters: what it dropped is exactly what was lost.
    r = route_stats(px.stats(), 'lossy')
    cnt = r['counters']
    check(cnt['drops']['filter'] == n - c, 'stats drops.filter %d, lost %d (%d + %d)'
          % (cnt['drops']['filter'], n - c, n - s, s - c))
    check(cnt['c2s_packets'] == s and cnt['s2c_packets'] == c,
          'stats c2s %d s2c %d, the peers saw %d and %d'
          % (cnt['c2s_packets'], cnt['s2c_packets'], s, c))
    check(sum(v for k, v in cnt['drops'].items() if k != 'filter') == 0,
          'drops other than the filter: %r' % cnt['drops'])
    want = ('netem: session end: to_server %d datagrams, %d lost, 0 duplicated, 0 reordered; '
            'to_client %d datagrams, %d lost' % (n, n - s, s, s - c))
    check(px.count_log(want) == 1, 'no log line %r' % want)
    check(px.count_log(r'netem: to_server: loss 10\.0000%.*seed 42$') == 1,
          'the settings and seed were not logged once')

    # The same seed: the very same datagrams lost; another seed: others.
    again_server, again_client, _ = run_loss(h, 42, n)
    check(again_server == at_server and again_client == at_client,
          'seed 42 twice: %d/%d then %d/%d arrived, or other ones'
          % (s, c, len(again_server), len(again_client)))
    other_server, other_client, _ = run_loss(h, 43, n)
    check(set(other_server) != set(at_server),
          'seeds 42 and 43 lost the same datagrams to the server')
    print('seed 43: %d reached the server, %d the client' % (len(other_server),
                                                            len(other_client)))


def rtts(cl, dest, n, what):
    out = []
    for i in range(n):
        payload = b'%s-%d' % (what.encode(), i)
        t0 = time.monotonic()
        cl.send(payload, dest)
        r = cl.recv_one(2.0)
        check(r is not None and r[0] == TAG + payload,
              '%s: round trip %d: no (right) echo within 2 s: %r' % (what, i, r))
        out.append((time.monotonic() - t0) * 1000)
    return out


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def delay(h):
    srv = h.echo(V4, TAG)
    px = h.proxy(config=config(
        {'name': 'plain', 'port': '$P0', 'server': srv.addr, 'extra': ''},
        {'name': 'slow', 'port': '$P1', 'server': srv.addr,
         'extra': '    filter netem {\n        delay_to_server 60ms\n'
                  '        delay_to_client 40ms\n    }'}), routes=2)
    cl = h.client(V4)
    plain = rtts(cl, (V4, px.ports[0]), 20, 'plain')
    slow = rtts(cl, (V4, px.ports[1]), 20, 'slow')
    diff = median(slow) - median(plain)
    print('median round trip %.2f ms plain, %.2f ms with netem (+%.2f ms); min %.2f ms'
          % (median(plain), median(slow), diff, min(slow)))
    check(min(slow) >= 98.0, 'a round trip of %.2f ms, below the 100 ms of delay' % min(slow))
    check(95.0 <= diff <= 150.0, 'round trip grew by %.2f ms, expected 100 ms' % diff)
    px.stop()


def jitter(h):
    srv = h.echo(V4, TAG)
    px = h.proxy(config=config(
        {'name': 'jit', 'port': '$P0', 'server': srv.addr,
         'extra': '    filter netem {\n        delay_to_client 50ms\n'
                  '        jitter_to_client 20ms\n        seed 5\n    }'}))
    cl = h.client(V4)
    v = rtts(cl, (V4, px.ports[0]), 40, 'jitter')
    # A timer never fires early, so no round trip is below 30 ms; a loaded
    # host may run one late (the scheduler, not the filter), so the upper
    # bound holds for 36 of the 40 (a jitter twice as wide would put about
    # 10 of them past 75 ms).
    late = sorted(v)[35]
    print('round trips %.2f .. %.2f ms, 36 of 40 within %.2f ms' % (min(v), max(v), late))
    check(min(v) >= 28.0, 'a round trip of %.2f ms, below the 30 ms of delay - jitter' % min(v))
    check(late <= 75.0, 'round trips %.2f .. %.2f ms: only %d of 40 within 70 ms (+ slack)'
          % (min(v), max(v), sum(1 for x in v if x <= 75.0)))
    check(max(v) - min(v) >= 15.0, 'round trips hardly vary: %.2f .. %.2f ms' % (min(v), max(v)))
    px.stop()


def duplicate(h):
    srv = h.echo(V4, TAG)
    px = h.proxy(config=config(
        {'name': 'dup', 'port': '$P0', 'server': srv.addr,
         'extra': '    filter netem {\n        duplicate_to_client 100\n    }'}))
    cl = h.client(V4)
    dest = (V4, px.ports[0])
    n = 50
    for i in range(n):
        cl.send(b'd%03d' % i, dest)
        time.sleep(0.002)
    got = drain(cl)
    wait_server(srv, n)
    check(len(srv.snapshot()) == n, 'the server got %d of %d (to_server is not duplicated)'
          % (len(srv.snapshot()), n))
    for i in range(n):
        k = got.count(TAG + b'd%03d' % i)
        check(k == 2, 'reply %d arrived %d times, expected twice' % (i, k))
    check(px.stop() == 0, 'slipgate did not exit cleanly')
    cnt = route_stats(px.stats(), 'dup')['counters']
    check(cnt['c2s_packets'] == n and cnt['s2c_packets'] == 2 * n,
          'stats c2s %d s2c %d, expected %d and %d' % (cnt['c2s_packets'], cnt['s2c_packets'],
                                                      n, 2 * n))


CASES = {
    'loss_seeded': loss_seeded,
    'delay': delay,
    'jitter': jitter,
    'duplicate': duplicate,
}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
