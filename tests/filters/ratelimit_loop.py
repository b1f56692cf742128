"""Loopback tests of the 'ratelimit' filter through the real slipgate binary.

An echo server and a client on 127.0.0.1 (undecoded traffic: SG_FRAME_RAW):

    to_server   packets_per_second 50, burst 10, direction to_server: a fast
                burst of 300 gets through only the burst plus what the rate
                refilled meanwhile; --stats' drop counter "filter" equals
                the datagrams that did not arrive; "limiting" is logged
                once; a later stream below the cap passes whole; the
                session-end line has the counts
    to_client   direction to_client with a byte cap: the server gets
                everything, the replies are capped, counters agree

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

CONFIG = '''
route capped {
    listen 127.0.0.1:$P0
    server %(server)s
    idle_timeout 30s
    filter ratelimit {
%(conf)s
    }
}
'''


def route_stats(st, name):
    for r in st.get('routes', []):
        if r.get('name') == name:
            return r
    raise Fail('stats: no route %r in %r' % (name, st))


def drain(client, quiet=0.5, limit=15.0):
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


def settle(srv, limit=5.0):
    """The server's datagrams once nothing new came for 0.4 s."""
    end = time.monotonic() + limit
    last, since = -1, time.monotonic()
    for _ in range(10000):
        n = len(srv.snapshot())
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > 0.4 or time.monotonic() > end:
            break
        time.sleep(0.02)
    return [d for _, _, d in srv.snapshot()]


def to_server(h):
    srv = h.echo(V4, TAG)
    px = h.proxy(config=CONFIG % {'server': srv.addr, 'conf': '        packets_per_second 50\n'
                                  '        burst 10\n        direction to_server'})
    cl = h.client(V4)
    dest = (V4, px.ports[0])
    n = 300

    # A fast burst: the bucket's 10, plus 50/s for the time it took.
    t0 = time.monotonic()
    for i in range(n):
        cl.send(b'f%04d' % i, dest)
        if i % 20 == 19:
            time.sleep(0.001)  # no socket buffer on the way overflows
    elapsed = time.monotonic() - t0
    got = settle(srv)
    replies = drain(cl)
    s = len(got)
    hi = 10 + int(50 * (elapsed + 0.1)) + 1
    print('burst of %d in %.1f ms: %d reached the server (allowed 10..%d), %d replies'
          % (n, elapsed * 1000, s, hi, len(replies)))
    check(10 <= s <= hi, '%d of %d passed a cap of 50/s with burst 10 in %.1f ms'
          % (s, n, elapsed * 1000))
    check(got == [b'f%04d' % i for i in range(10)] + got[10:], 'the first 10 did not all pass')
    check(len(replies) == s, 'to_client is not limited, yet %d replies for %d' % (len(replies), s))
    # (logged at the first drop; waited for: the harness reads slipgate's stderr in a thread)
    check(px.wait_count_log(r'ratelimit: limiting to_server: over 50 packets/s \(burst 10\)', 1,
                            timeout=5.0) == 1,
          '"limiting" not logged exactly once')

    # After a pause, a stream below the cap passes whole (25/s against 50/s).
    time.sleep(0.3)
    for i in range(20):
        cl.send(b's%04d' % i, dest)
        time.sleep(0.04)
    slow = [d for d in settle(srv) if d.startswith(b's')]
    check(len(slow) == 20, '%d of 20 datagrams below the cap passed' % len(slow))
    drain(cl)

    check(px.stop() == 0, 'slipgate did not exit cleanly')
    route = route_stats(px.stats(), 'capped')
    cnt = route['counters']
    seen = [f['seen'] for f in route.get('filters', []) if f.get('name') == 'ratelimit']
    # it sees the replies too (and passes them: direction to_server)
    check(seen == [n + 20 + cnt['s2c_packets']],
          'ratelimit saw %s datagrams, %d sent + %d replies: the kernel dropped some on the way'
          % (seen, n + 20, cnt['s2c_packets']))
    dropped = n + 20 - len(srv.snapshot())
    check(cnt['drops']['filter'] == dropped, 'stats drops.filter %d, %d did not arrive'
          % (cnt['drops']['filter'], dropped))
    check(cnt['c2s_packets'] == len(srv.snapshot()), 'stats c2s_packets %d, the server saw %d'
          % (cnt['c2s_packets'], len(srv.snapshot())))
    want = 'ratelimit: session end: dropped to_server %d of %d datagrams' % (dropped, n + 20)
    check(px.count_log(want) == 1, 'no log line %r' % want)
    check(px.count_log('limiting') == 1, '"limiting" logged more than once')


def to_client(h):
    srv = h.echo(V4, TAG)
    px = h.proxy(config=CONFIG % {'server': srv.addr, 'conf': '        bytes_per_second 2k\n'
                                  '        burst_bytes 1k\n        direction to_client'})
    cl = h.client(V4)
    dest = (V4, px.ports[0])
    n = 100
    t0 = time.monotonic()
    for i in range(n):
        cl.send(b'%04d' % i + b'x' * 96, dest)  # replies: 104 bytes each
        time.sleep(0.001)
    got = settle(srv)
    replies = drain(cl)
    elapsed = time.monotonic() - t0
    # 1024 bytes at once (9 replies), then 2048 bytes/s: at most ~20 per second more
    hi = 9 + int(2048 * (elapsed + 0.1) / 104) + 1
    print('%d replies in %.2f s (allowed 9..%d)' % (len(replies), elapsed, hi))
    check(len(got) == n, 'the server got %d of %d; to_server is not limited' % (len(got), n))
    check(9 <= len(replies) <= hi, '%d replies passed a 2k/s cap in %.2f s'
          % (len(replies), elapsed))
    check(px.stop() == 0, 'slipgate did not exit cleanly')
    cnt = route_stats(px.stats(), 'capped')['counters']
    check(cnt['drops']['filter'] == n - len(replies) and cnt['s2c_packets'] == len(replies),
          'stats drops.filter %d s2c %d; %d replies of %d' % (cnt['drops']['filter'],
                                                               cnt['s2c_packets'],
                                                               len(replies), n))
    check(px.count_log('limiting to_client') == 1, '"limiting to_client" not logged once')


CASES = {
    'to_server': to_server,
    'to_client': to_client,
}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
