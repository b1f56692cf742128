"""Residence times: the real slipgate binary between scripted peers on
127.0.0.1, its /metrics and --stats histograms read back.
    SLIPGATE=build/proxy/slipgate python3 residence_test.py CASE
Exit 0 pass, 1 fail.  Figures only: no timing is asserted beyond what must
hold (a datagram's time inside slipgate is part of its round trip).
"""
import os
import re
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import V4, check, main  # noqa: E402

N = 200  # round trips, one datagram each way


def conf(extra=''):
    return ('http 127.0.0.1:$P1\n' + extra +
            'route res {\n    listen 127.0.0.1:$P0\n    server %s\n}\n')


def round_trips(h, px, srv):
    """N datagrams to the echo server and back, one at a time: the round
    trips' lengths in ns, as this process measured them."""
    c = h.client(V4)
    dest = (V4, px.ports[0])
    rtts = []
    for i in range(N):
        payload = b'residence %d' % i
        t0 = time.monotonic_ns()
        c.send(payload, dest)
        r = c.recv_one(2.0)
        t1 = time.monotonic_ns()
        check(r is not None and r[0] == b'ECHO' + payload,
              'round trip %d: got %r' % (i, r))
        rtts.append(t1 - t0)
    return rtts


def metrics(px):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % px.ports[1], timeout=5) as resp:
        return resp.read().decode()


def prom_hist(text, name, labels):
    """The histogram's cumulative buckets [(le, n)], its sum and count."""
    lab = re.escape(labels)
    pre = lab + ',' if labels else ''
    buckets = [(float('inf') if le == '+Inf' else float(le), int(n)) for le, n in re.findall(
        r'^%s_bucket\{%sle="([^"]+)"\} (\d+)$' % (name, pre), text, re.M)]
    sel = r'\{%s\}' % lab if labels else ''
    s = re.search(r'^%s_sum%s (\S+)$' % (name, sel), text, re.M)
    n = re.search(r'^%s_count%s (\d+)$' % (name, sel), text, re.M)
    check(buckets and s and n, 'no %s{%s} histogram in /metrics:\n%s' % (name, labels, text[:3000]))
    return buckets, float(s.group(1)), int(n.group(1))


def check_prom(text, name, labels, count):
    buckets, total, n = prom_hist(text, name, labels)
    les = [le for le, _ in buckets]
    check(les == sorted(les) and les[-1] == float('inf') and len(les) == 17,
          '%s{%s}: le bounds %r' % (name, labels, les))
    counts = [c for _, c in buckets]
    check(all(a <= b for a, b in zip(counts, counts[1:])),
          '%s{%s}: cumulative buckets go down: %r' % (name, labels, counts))
    check(counts[-1] == n and (count is None or n == count),
          '%s{%s}: count %d, +Inf %d, expected %r' % (name, labels, n, counts[-1], count))
    check(n == 0 or total > 0, '%s{%s}: sum %r for %d' % (name, labels, total, n))
    return n, total


def check_json(hist, count, what):
    check(hist['count'] == count, '%s: count %d, expected %d' % (what, hist['count'], count))
    check(sum(n for _, n in hist['buckets']) == hist['count'],
          '%s: the buckets %r do not add up to %d' % (what, hist['buckets'], hist['count']))
    edges = [le for le, _ in hist['buckets'] if le is not None]
    check(edges == sorted(set(edges)), '%s: bucket edges not ascending: %r' % (what, edges))
    if count:
        q = [hist['p50_us'], hist['p99_us'], hist['p999_us'], hist['max_us']]
        check(0 < q[0] <= q[1] <= q[2] <= q[3], '%s: p50/p99/p99.9/max %r' % (what, q))
        check(hist['sum_us'] > 0, '%s: sum %r' % (what, hist['sum_us']))


def case_counts(h):
    """N datagrams each way: /metrics' slipgate_datagram_residence_seconds
    counts exactly N per direction, its buckets are cumulative and end at
    +Inf = count, the sum is positive; --stats says the same with
    percentiles in order; every datagram had a kernel timestamp; and the
    time inside slipgate is below the round trips the client measured
    (the largest residence below the longest round trip, the sums too)."""
    srv = h.echo(V4)
    px = h.proxy(config=conf() % srv.addr)
    rtts = round_trips(h, px, srv)
    text = metrics(px)
    n_c2s, sum_c2s = check_prom(text, 'slipgate_datagram_residence_seconds',
                                'route="res",direction="c2s"', N)
    n_s2c, sum_s2c = check_prom(text, 'slipgate_datagram_residence_seconds',
                                'route="res",direction="s2c"', N)
    check_prom(text, 'slipgate_loop_turn_seconds', '', None)
    check(re.search(r'^slipgate_datagram_residence_untimed_total\{route="res"\} 0$', text, re.M),
          'datagrams without a kernel timestamp:\n%s' % text[:2000])
    check(sum_c2s + sum_s2c < sum(rtts) / 1e9,
          'residence sums %.6f + %.6f s not below the round trips %.6f s'
          % (sum_c2s, sum_s2c, sum(rtts) / 1e9))
    st = px.stop()
    check(st == 0, 'slipgate exited %d' % st)
    route = [r for r in px.stats()['routes'] if r['name'] == 'res'][0]
    res = route['residence']
    check(res['on'] is True and res['untimed'] == 0, 'stats residence: %r' % (res,))
    check_json(res['c2s'], N, 'stats residence.c2s')
    check_json(res['s2c'], N, 'stats residence.s2c')
    check(res['c2s']['max_us'] + res['s2c']['max_us'] < max(rtts) / 1e3 * 2,
          'largest residences %.1f + %.1f us against the longest round trip %.1f us'
          % (res['c2s']['max_us'], res['s2c']['max_us'], max(rtts) / 1e3))
    check(max(res['c2s']['max_us'], res['s2c']['max_us']) < max(rtts) / 1e3,
          'a residence (%.1f / %.1f us) longer than the longest round trip (%.1f us)'
          % (res['c2s']['max_us'], res['s2c']['max_us'], max(rtts) / 1e3))
    loop = px.stats()['loop']['turn']
    check_json(loop, loop['count'], 'stats loop.turn')
    check(loop['count'] > 0, 'stats loop.turn: no turn counted')
    rtts.sort()
    print('residence c2s p50 %.1f p99 %.1f max %.1f us; s2c p50 %.1f p99 %.1f max %.1f us; '
          'round trip p50 %.1f max %.1f us (%d each way)'
          % (res['c2s']['p50_us'], res['c2s']['p99_us'], res['c2s']['max_us'],
             res['s2c']['p50_us'], res['s2c']['p99_us'], res['s2c']['max_us'],
             rtts[N // 2] / 1e3, rtts[-1] / 1e3, N))


def case_off(h):
    """`residence off`: the datagrams are relayed, none is measured (the
    histograms stay empty, --stats says "on": false)."""
    srv = h.echo(V4)
    px = h.proxy(config=conf('residence off\n') % srv.addr)
    round_trips(h, px, srv)
    text = metrics(px)
    check_prom(text, 'slipgate_datagram_residence_seconds', 'route="res",direction="c2s"', 0)
    check_prom(text, 'slipgate_datagram_residence_seconds', 'route="res",direction="s2c"', 0)
    check(px.stop() == 0, 'slipgate did not exit 0')
    res = [r for r in px.stats()['routes'] if r['name'] == 'res'][0]['residence']
    check(res['on'] is False and res['c2s']['count'] == 0 and res['s2c']['count'] == 0,
          'stats residence with `residence off`: %r' % (res,))
    check([r for r in px.stats()['routes'] if r['name'] == 'res'][0]['counters']['c2s_packets']
          == N, 'not every datagram relayed')


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
