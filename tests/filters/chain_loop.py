"""Loopback tests of the chain's counters through the real slipgate binary:
the per-filter "filters" array of --stats and the periodic `stats` log line
(`stats_interval`).

    stats_filters     two filters on a relayed (undecoded) route: each one's
                      label, name, tap flag and counters in --stats match the
                      datagrams sent; a route without filters has "filters": []
    stats_interval    one `stats` line per route per interval, whose counts
                      agree with the traffic and with --stats; a SIGHUP that
                      sets the interval to 0 stops them; a too-short interval
                      is refused

Only 127.0.0.1 is used; every process is killed by PID at the end.
"""

import os
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import V4, check  # noqa: E402

N = 40  # datagrams per client

CONFIG = '''
%(top)s
route main {
    listen 127.0.0.1:$P0
    server %(server)s
    filter textlog words {
        file "%(log)s"
    }
    filter record {
        directory "%(demos)s"
    }
}
route plain {
    listen 127.0.0.1:$P1
    server %(server)s
}
'''


def send_through(h, px, port, clients=1):
    """N datagrams from each of `clients` clients to the proxy's `port`, all echoed back."""
    cs = [h.client(V4) for _ in range(clients)]
    flows = [(c, b'hello %d' % i) for i in range(N) for c in cs]
    got = harness.pump(flows, (V4, port), b'ECHO')
    for c in cs:
        check(len(got[c]) == N, 'client %s got %d of %d echoes' % (c.port, len(got[c]), N))
    return cs


def start(h, top=''):
    srv = h.echo(V4)
    text = CONFIG % {'top': top, 'server': srv.addr, 'log': h.path('text.log'),
                     'demos': h.path('demos')}
    return srv, h.proxy(config=text, routes=2)


def route_named(st, name):
    for r in st['routes']:
        if r['name'] == name:
            return r
    raise harness.Fail('no route %r in --stats' % name)


def case_stats_filters(h):
    srv, px = start(h)
    send_through(h, px, px.ports[0], clients=2)
    send_through(h, px, px.ports[1])
    check(px.stop() == 0, 'slipgate did not exit 0')
    st = px.stats()
    main, plain = route_named(st, 'main'), route_named(st, 'plain')
    check(plain.get('filters') == [], 'route without filters: "filters" is %r'
          % plain.get('filters'))
    f = main.get('filters')
    check(isinstance(f, list) and len(f) == 2, 'route main: "filters" is %r' % (f,))
    frames = 2 * 2 * N  # two clients, each datagram and its echo
    check(main['counters']['c2s_packets'] == 2 * N and main['counters']['s2c_packets'] == 2 * N,
          'route counters %r' % main['counters'])
    expect = [('words', 'textlog', True), ('record', 'record', True)]
    check([(x['label'], x['name'], x['tap']) for x in f] == expect,
          'filters %r, expected %r' % ([(x['label'], x['name'], x['tap']) for x in f], expect))
    for x in f:
        check(x['seen'] == frames and x['passed'] == frames and x['dropped'] == 0
              and x['changed'] == 0 and x['injected'] == 0 and x['errors'] == 0,
              'filter %s: %r, expected seen = passed = %d and nothing else' % (x['label'], x,
                                                                              frames))
        check(set(x) == {'label', 'name', 'tap', 'seen', 'passed', 'dropped', 'changed',
                         'injected', 'errors'}, 'filter fields %r' % sorted(x))
    check(not os.path.exists(h.path('demos')) or not os.listdir(h.path('demos')),
          'the recorder wrote a demo of undecoded traffic')
    print('route main: %s; route plain: no filters' % [(x['label'], x['seen'], x['passed'])
                                                      for x in f])


STATS_RE = re.compile(r'\[(?P<route>\w+)\] stats: sessions_active=(?P<active>\d+) '
                      r'sessions_total=(?P<total>\d+) c2s_packets=(?P<c2s>\d+) c2s_bytes=\d+ '
                      r's2c_packets=(?P<s2c>\d+) s2c_bytes=\d+ drops=(?P<drops>\d+) '
                      r'kernel_drops=(?P<kdrops>\d+)(?P<rest>.*)$')
FILTER_RE = re.compile(r' \| (?P<label>\w+): seen=(?P<seen>\d+) passed=(?P<passed>\d+) '
                       r'dropped=(\d+) changed=(\d+) injected=(\d+) errors=(\d+)')


def stats_lines(px, start=0):
    return [m for m in (STATS_RE.search(l) for l in px.log_lines(start)) if m]


def case_stats_interval(h):
    srv, px = start(h, top='stats_interval 300ms')
    t0 = time.monotonic()
    send_through(h, px, px.ports[0])
    # lines for both routes, every 300 ms: wait for three rounds after the traffic
    mark = px.log_mark()
    for _ in range(3):
        check(px.wait_for_log(r'\[plain\] stats: ', 3.0, start=px.log_mark()) is not None,
              'no stats line within 3 s')
    elapsed = time.monotonic() - t0
    lines = stats_lines(px)
    mains = [m for m in lines if m.group('route') == 'main']
    plains = [m for m in lines if m.group('route') == 'plain']
    check(len(mains) >= 3 and len(plains) >= 3, '%d main and %d plain stats lines in %.1f s'
          % (len(mains), len(plains), elapsed))
    check(len(mains) <= elapsed / 0.3 + 2, '%d lines in %.1f s: more than one per 300 ms'
          % (len(mains), elapsed))
    last = [m for m in stats_lines(px, mark) if m.group('route') == 'main'][-1]
    check(int(last.group('c2s')) == N and int(last.group('s2c')) == N
          and last.group('total') == '1' and last.group('active') == '1',
          'the last main line says %r after %d datagrams each way' % (last.group(0), N))
    fl = FILTER_RE.findall(last.group('rest'))
    check([x[0] for x in fl] == ['words', 'record'], 'filters in the line: %r' % (fl,))
    for x in fl:
        check(int(x[1]) == 2 * N and int(x[2]) == 2 * N and x[3:] == ('0', '0', '0', '0'),
              'counters of %s in the line: %r' % (x[0], x))
    plain = [m for m in stats_lines(px, mark) if m.group('route') == 'plain'][-1]
    check(plain.group('rest') == '' and plain.group('c2s') == '0' and plain.group('kdrops') == '0',
          'the plain route\'s line: %r' % plain.group(0))

    # a reload to stats_interval 0 stops the lines
    text = open(px.config_path).read().replace('stats_interval 300ms', 'stats_interval 0')
    px.write_config(text)
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'configuration reloaded', 5.0, start=mark) is not None, 'no reload')
    time.sleep(1.0)
    after = px.log_lines(mark)
    reloaded = next(i for i, l in enumerate(after) if 'configuration reloaded' in l)
    late = [l for l in after[reloaded + 1:] if STATS_RE.search(l)]
    check(not late, 'stats lines after the interval was set to 0: %r' % late)
    check(px.stop() == 0, 'slipgate did not exit 0')
    st = px.stats()
    f = route_named(st, 'main')['filters']
    check([(x['label'], x['seen']) for x in f] == [('words', 2 * N), ('record', 2 * N)],
          '--stats filters %r disagree with the log line' % f)

    # a too-short interval is a configuration error
    bad = h.path('bad.conf')
    with open(bad, 'w') as fh:
        fh.write('stats_interval 20ms\nroute r {\n    server 127.0.0.1:27960\n}\n')
    r = h.run(['--check-config', '-c', bad])
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and "'stats_interval' is 0 (off) or at least 100ms" in err,
          'stats_interval 20ms: exit %d\n%s' % (r.returncode, err))
    print('%d main / %d plain stats lines in %.1f s, last: %s; none after the reload to 0'
          % (len(mains), len(plains), elapsed, last.group(0)))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
