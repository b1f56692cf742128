#!/usr/bin/env python3
"""The `http` server of slipgate: /metrics, the JSON API, the live stream,
the token, the limits.  The real slipgate binary ($SLIPGATE) on 127.0.0.1;
Quake 3 captures from $SG_TESTDATA.  Usage: http_test.py CASE

    metrics_match_stats  /metrics parses (prometheus_client's parser) and its
                         counters equal --stats after a scripted run
    metrics_unique       two filters of each of several kinds on a route:
                         every series of /metrics is unique (Prometheus's
                         own parser; a `position` label tells them apart)
    api_match_stats      /api/routes and /api/sessions equal --stats
    stream_replay        /api/stream delivers the frames of a real capture
                         replay: the same lines as an inspect filter writes,
                         and the same on a route without any filter
    stream_slow_client   a stream client that never reads: events dropped
                         and counted, memory flat, the relay unharmed
    token                http_token: nothing without it, bearer or cookie in
    only_get             other methods are refused with 405
    connection_limit     with every connection taken by idle clients, a new
                         client is served at once: the one idle the longest
                         is closed for it, the others and the stream clients
                         stay; at most 8 stream clients
    closed_burst         300 connections that send half a request line and
                         close: each frees its slot at once, no socket is
                         left in CLOSE-WAIT, / and /metrics answer within
                         a second
    request_too_large    a request past the size cap is refused
    metrics_decode_match_stats
                         `+set http` on the command line; a Quake 3 capture
                         replayed with reencode always and --record: the
                         decode, re-encode and demo series of /metrics,
                         /api/sessions and /api/recordings equal --stats;
                         once the session timed out, slipgate_demo_bytes_total
                         equals the demo file's size and --stats demo_bytes
    recording_started    /api/recordings: started_ms and duration_ms are the
                         file's (a max_size part opened late), not the
                         session's
    utf8_names           a record directory named `d\u00e9`: /api/recordings,
                         /api/sessions and --stats name the same file, as
                         its name on disk reads in UTF-8
    idle_closed          a connection that sends nothing, and one that stops
                         half-way through its request, are closed after
                         `http_idle_timeout` (3 s here; 30 s by default)
    game_info            a Quake 3 capture replayed: /api/routes names the
                         server (sv_hostname), the map and one player;
                         /api/sessions and /api/players the player's name
                         (its configstring); a route without a decoded
                         session has them empty (the page says unknown);
                         the ping's two legs are timed (the client's
                         message acks, the server's command acks)
    game_loss            a Quake 3 replay without some of the client's
                         datagrams: /api/sessions counts them as lost c2s
    demos                a recorded Quake 3 replay: /api/demos lists the
                         finished demo with its size, map and player, and
                         /api/demo serves its bytes behind http_token; a
                         path with `..`, a relative one, one outside the
                         record directory, a symbolic link to a file and a
                         file under a linked directory are refused
    recent               with no stream client open, a Quake 3 replay's
                         print lines are kept: /api/recent gives them
                         (chat, print, centerprint, disconnect only), at
                         most 100, oldest first
    workers_merged       with two worker loops (-w 2), /metrics, /api/routes,
                         /api/sessions count the sessions of both loops, and
                         /api/stream delivers a replay whose session is on
                         the other loop than the http server's
"""

import json
import os
import re
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from httplib_sg import (Fail, check, V4, request, get_json, Stream, replay_game,  # noqa: E402
                        server_socket, q3cap)
import harness  # noqa: E402


def prometheus_parser():
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        # Debian's python3-prometheus-client, when python3 is not Debian's
        sys.path.append('/usr/lib/python3/dist-packages')
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            raise Fail('python3-prometheus-client is not installed (scripts/deps.sh --test)')
    return text_string_to_metric_families


def http_proxy(h, routes, extra=''):
    """slipgate with `http 127.0.0.1:$P0` and the given route blocks."""
    conf = 'http 127.0.0.1:$P0\n' + extra + routes
    px = h.proxy(conf, routes=conf.count('route '))
    px.http = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    return px


def scrape(port):
    status, hdrs, body = request(port, '/metrics')
    check(status == 200, '/metrics: status %s' % status)
    check(hdrs.get('content-type', '').startswith('text/plain; version=0.0.4'),
          '/metrics content type %r' % hdrs.get('content-type'))
    parse = prometheus_parser()
    samples = {}
    try:
        for fam in parse(body.decode()):
            for s in fam.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    except Exception as e:
        raise Fail('/metrics does not parse as Prometheus text: %s\n%s' % (e, body[:2000]))
    return samples


def metric(samples, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    check(key in samples, 'no sample %s%s in /metrics' % (name, labels))
    return samples[key]


def echo_traffic(h, px, n, port_index=1):
    """n datagrams from each of 3 clients through route 0, echoed."""
    dest = (V4, px.ports[port_index])
    clients = [h.client(V4) for _ in range(3)]
    for c in clients:
        for i in range(n):
            c.send(b'hello %d' % i, dest)
        got = 0
        end = time.monotonic() + 5
        while got < n and time.monotonic() < end:
            got += len(c.recv(0.2))
        check(got == n, 'client %d: %d of %d echoes' % (c.port, got, n))
    return clients


ROUTE_ECHO = '''route main {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    filter netem {
        loss_to_server 25%%
        seed 7
    }
}
'''


def case_metrics_match_stats(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    # about a quarter of the client datagrams lost in the netem filter (drops by reason)
    dest = (V4, px.ports[1])
    clients = [h.client(V4) for _ in range(3)]
    for c in clients:
        for i in range(30):
            c.send(b'hello %d' % i, dest)
    time.sleep(0.5)
    samples = scrape(px.http)
    px.stop()
    st = px.stats()['routes'][0]
    c = st['counters']
    for direction in ('c2s', 's2c'):
        check(metric(samples, 'slipgate_datagrams_total', route='main', direction=direction)
              == c[direction + '_packets'], 'datagrams %s differ from --stats' % direction)
        check(metric(samples, 'slipgate_bytes_total', route='main', direction=direction)
              == c[direction + '_bytes'], 'bytes %s differ from --stats' % direction)
    for reason, n in c['drops'].items():
        check(metric(samples, 'slipgate_drops_total', route='main', reason=reason) == n,
              'drops %s differ from --stats' % reason)
    check(c['drops']['filter'] > 0, 'the drop filter dropped nothing: %s' % c)
    check(metric(samples, 'slipgate_sessions_total', route='main') == st['sessions_total'] == 3,
          'sessions_total: %s' % st['sessions_total'])
    check(metric(samples, 'slipgate_sessions_active', route='main') == 3, 'sessions_active')
    check(metric(samples, 'slipgate_listener_kernel_drops_total', route='main')
          == st['listener']['kernel_drops'], 'kernel drops')
    for pos, f in enumerate(st['filters']):
        for k, name in (('seen', 'frames'), ('passed', 'passed'), ('dropped', 'dropped'),
                        ('changed', 'changed'), ('injected', 'injected'), ('errors', 'errors')):
            check(metric(samples, 'slipgate_filter_%s_total' % name, route='main',
                         filter=f['label'], position=str(pos)) == f[k],
                  'filter %s %s' % (f['label'], k))
    check(metric(samples, 'slipgate_process_resident_memory_bytes') > 1e6, 'RSS')
    check(metric(samples, 'slipgate_loop_lag_seconds') < 1.0, 'loop lag')
    check(c['c2s_packets'] > 0 and c['s2c_packets'] > 0, 'no traffic: %s' % c)


ROUTES_DUP_FILTERS = '''route main {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    protocol q3
    filter rewrite {
        replace "a" "b"
    }
    filter rewrite {
        replace "a" "b"
    }
    filter drop {
        kinds chat
    }
    filter drop {
        kinds chat
    }
    filter netem {
        loss_to_server 1%%
    }
    filter netem {
        loss_to_server 1%%
    }
    filter inspect {
        output %s
    }
    filter inspect {
        output %s
    }
}
route other {
    listen 127.0.0.1:$P2
    server 127.0.0.1:%d
    filter netem {
        loss_to_client 1%%
    }
    filter netem {
        loss_to_client 1%%
    }
}
'''


def case_metrics_unique(h):
    """Filters of the same kind (the same label) on one route: every series of
    /metrics is unique (Prometheus keeps one of two equal series)."""
    srv = h.echo(V4)
    px = http_proxy(h, ROUTES_DUP_FILTERS % (srv.port, h.path('i1.log'), h.path('i2.log'),
                                             srv.port))
    for port in px.ports[1:3]:  # some traffic through both routes
        c = h.client(V4)
        for i in range(5):
            c.send(b'hello %d' % i, (V4, port))
    _, _, body = request(px.http, '/metrics')
    parse = prometheus_parser()
    seen = {}
    try:
        families = list(parse(body.decode()))
    except Exception as e:
        raise Fail('/metrics does not parse as Prometheus text: %s' % e)
    for fam in families:
        for smp in fam.samples:
            key = (smp.name, tuple(sorted(smp.labels.items())))
            seen[key] = seen.get(key, 0) + 1
    dups = [k for k, n in seen.items() if n > 1]
    check(not dups, '%d series appear more than once in /metrics, e.g. %s' % (len(dups), dups[:3]))
    frames = sorted((dict(k[1])['route'], int(dict(k[1])['position']), dict(k[1])['filter'])
                    for k in seen if k[0] == 'slipgate_filter_frames_total')
    want = [('main', i, f) for i, f in enumerate(['rewrite', 'rewrite', 'drop', 'drop', 'netem',
                                                   'netem', 'inspect', 'inspect'])]
    want += [('other', 0, 'netem'), ('other', 1, 'netem')]
    check(frames == want, 'slipgate_filter_frames_total series: %s' % frames)
    print('%d series, all unique; filter series %s' % (len(seen), frames))


def case_api_match_stats(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    dest = (V4, px.ports[1])
    for c in [h.client(V4) for _ in range(2)]:
        for i in range(10):
            c.send(b'x' * (i + 1), dest)
    time.sleep(0.5)
    routes = get_json(px.http, '/api/routes')
    sessions = get_json(px.http, '/api/sessions')
    recs = get_json(px.http, '/api/recordings')
    px.stop()
    stats = px.stats()
    check(recs == {'recordings': []}, 'recordings: %r' % recs)
    check(len(routes['routes']) == len(stats['routes']) == 1, 'routes')
    a, b = routes['routes'][0], stats['routes'][0]
    def live(v, k):  # sessions_active is live in /api, 0 in --stats at exit (each loop's too)
        if k == 'workers':
            return [{x: y for x, y in w.items() if x != 'sessions_active'} for w in v]
        return v
    for k in b:
        if k in ('sessions', 'listener', 'sessions_active', 'game'):
            continue
        check(live(a.get(k), k) == live(b[k], k), '/api/routes %s: %r, --stats %r'
              % (k, a.get(k), b[k]))
    check('sessions' not in a, '/api/routes lists the sessions too')
    check(a['sessions_active'] == 2 and b['sessions_active'] == 0, 'sessions_active')
    check(a['game']['players'] == 2 and b['game']['players'] == 0,  # live, like sessions_active
          'game: /api %r, --stats %r' % (a['game'], b['game']))
    check(len(sessions['sessions']) == 2, '/api/sessions: %r' % sessions)
    by_id = {s['id']: s for s in b['sessions']}
    for s in sessions['sessions']:
        t = by_id[s['id']]
        check(s['route'] == 'main', 'route name')
        for k in ('client', 'upstream_port', 'started_ms', 'counters'):
            check(s[k] == t[k], 'session %d %s: %r vs --stats %r' % (s['id'], k, s[k], t[k]))
        check(s['state'] == 'active' and t['state'] == 'ended', 'states')


ROUTE_Q3 = '''route %s {
    listen 127.0.0.1:$P%d
    server 127.0.0.1:%d
    protocol q3
%s}
'''


# What the ioq71 capture's gamestate says (its server info and the player's
# configstring), as the capture's server and client set them.
GAME_Q3_IOQ71 = {'hostname': 'peers-oa', 'map': 'oa_dm1', 'player': 'peers'}


def strip_volatile(ev):
    return {k: v for k, v in ev.items() if k not in ('t', 'time', 'route', 'session', 'client')}


def case_stream_replay(h):
    cap = q3cap.Capture('ioq71')
    s1, s2 = server_socket(), server_socket()
    h.sockets += [s1, s2]
    inspect_out = h.path('inspect.jsonl')
    routes = (ROUTE_Q3 % ('tapped', 1, s1.getsockname()[1],
                          '    filter inspect {\n        format json\n        output %s\n'
                          '        kinds print,servercmd,configstring,disconnect,clientcmd,'
                          'centerprint,chat,stufftext\n    }\n' % inspect_out)
              + ROUTE_Q3 % ('bare', 2, s2.getsockname()[1], ''))
    px = http_proxy(h, routes)
    kinds = 'print,servercmd,configstring,disconnect,clientcmd,centerprint,chat,stufftext'
    st1 = Stream(px.http, '?route=tapped&kinds=' + kinds)
    st2 = Stream(px.http, '?route=bare&kinds=text')
    st3 = Stream(px.http, '?session=1&kinds=text')  # the tapped route's session: the first
    try:
        check(st1.wait_status() == 200 and st2.wait_status() == 200 and st3.wait_status() == 200,
              'stream status')
        sent, got = replay_game(cap, px.ports[1], s1)
        check(got >= sent - 10, 'tapped replay: %d sent, %d arrived' % (sent, got))
        sent, got = replay_game(cap, px.ports[2], s2)
        check(got >= sent - 10, 'bare replay: %d sent, %d arrived' % (sent, got))
        time.sleep(1.5)  # the inspect filter flushes about once a second
        px.stop()
        lines = [json.loads(x) for x in open(inspect_out)]
        ev1 = st1.wait_events(len(lines), 3)
        ev2 = st2.wait_events(len(lines), 3)
        ev3 = st3.wait_events(len(lines), 3)
    finally:
        st1.close()
        st2.close()
        st3.close()
    check(len(lines) >= 5, 'the inspect filter wrote %d lines (streams: %d, %d)' % (len(lines), len(ev1), len(ev2)))
    check(len(ev1) == len(lines), 'stream of the tapped route: %d events, inspect %d lines'
          % (len(ev1), len(lines)))
    for a, b in zip(ev1, lines):
        check(strip_volatile(a) == strip_volatile(b), 'stream event %r\n  != inspect line %r'
              % (a, b))
    check(len(ev2) == len(lines), 'stream of the route without filters: %d events, %d '
          'expected' % (len(ev2), len(lines)))
    for a, b in zip(ev2, lines):
        check(strip_volatile(a) == strip_volatile(b), 'bare route event %r\n  != %r' % (a, b))
    texts = [m['text'] for e in ev2 for m in e['msgs'] if m['kind'] == 'print']
    check(any('entered the game' in (t or '') for t in texts), 'no "entered the game" print '
          'in the stream: %r' % texts[:10])
    check(all(e['route'] == 'bare' for e in ev2), 'route filter let others through')
    check(len(ev3) == len(lines) and all(e['session'] == 1 and e['route'] == 'tapped'
                                         for e in ev3),
          'session=1: %d events, %r' % (len(ev3), [(e['route'], e['session']) for e in ev3][:5]))


def rss_of(samples):
    return metric(samples, 'slipgate_process_resident_memory_bytes')


def case_stream_slow_client(h):
    # Under AddressSanitizer, freed memory waits in a quarantine (256 MB by
    # default) and shows as resident: keep it small so RSS means growth.
    opts = os.environ.get('ASAN_OPTIONS', '')
    os.environ['ASAN_OPTIONS'] = (opts + ':' if opts else '') + 'quarantine_size_mb=1'
    srv = h.echo(V4)
    route = '''route main {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    filter inspect {
        output /dev/null
        level packets
    }
}
''' % srv.port
    px = http_proxy(h, route)
    # A client that asks for the stream and never reads; small buffers so
    # the kernel holds little and slipgate's own bound shows.
    lazy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lazy.connect((V4, px.http))
    h.sockets.append(lazy)
    if not os.environ.get('SG_NOLAZY'):
        lazy.sendall(b'GET /api/stream HTTP/1.1\r\nHost: x\r\n\r\n')
    time.sleep(0.3)
    dest = (V4, px.ports[1])
    clients = [h.client(V4) for _ in range(4)]
    payload = b'p' * 900

    def burst(n):
        for i in range(n):
            for c in clients:
                c.send(payload, dest)
            if i % 10 == 9:
                time.sleep(0.003)
        for c in clients:
            c.recv(0.1)

    burst(1000)
    first = scrape(px.http)
    burst(4000)
    second = scrape(px.http)
    dropped = metric(second, 'slipgate_http_stream_dropped_total')
    queued = metric(second, 'slipgate_http_stream_events_total')
    check(os.environ.get('SG_NOLAZY') or metric(second, 'slipgate_http_stream_clients') == 1, 'the lazy client is gone')
    check(dropped > 1000, 'only %d events dropped for a client that never reads (%d queued)'
          % (dropped, queued))
    grew = rss_of(second) - rss_of(first)

    check(grew < 2 * 1024 * 1024, 'RSS grew by %d bytes while 16000 more events came for a '
          'client that does not read' % grew)
    # Every datagram sent is accounted for: forwarded, or lost in a full
    # listener buffer (the burst outruns a 2-core host at times).
    fwd = metric(second, 'slipgate_datagrams_total', route='main', direction='c2s')
    kdrops = metric(second, 'slipgate_listener_kernel_drops_total', route='main')
    print('forwarded %d, kernel drops %d of 20000' % (fwd, kdrops))
    check(fwd + kdrops == 20000, 'forwarded %d + kernel drops %d != 20000 sent' % (fwd, kdrops))
    check(fwd >= 10000, 'the relay suffered: %d of 20000 forwarded' % fwd)
    # the server still answers a reader
    status, _, _ = request(px.http, '/api/routes')
    check(status == 200, 'the server is stuck: %s' % status)


def case_token(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port, extra='http_token s3cret-t0ken\n')
    for path in ('/', '/metrics', '/api/routes', '/api/sessions', '/api/recordings',
                 '/api/stream', '/app.js'):
        status, hdrs, _ = request(px.http, path)
        check(status == 401, '%s without the token: %s' % (path, status))
        status, _, _ = request(px.http, path, headers={'Authorization': 'Bearer wrong-token'})
        check(status == 401, '%s with a wrong token: %s' % (path, status))
        status, _, _ = request(px.http, path, headers={'Authorization': 'Bearer s3cret-t0ke'})
        check(status == 401, '%s with a prefix of the token: %s' % (path, status))
    status, _, body = request(px.http, '/metrics',
                              headers={'Authorization': 'Bearer s3cret-t0ken'})
    check(status == 200 and b'slipgate_datagrams_total' in body, 'bearer: %s' % status)
    status, _, _ = request(px.http, '/api/routes', headers={'Cookie': 'slipgate_token=s3cret-t0ken'})
    check(status == 200, 'cookie: %s' % status)
    status, hdrs, _ = request(px.http, '/?token=s3cret-t0ken')
    check(status == 303 and 'slipgate_token=s3cret-t0ken' in hdrs.get('set-cookie', '')
          and 'HttpOnly' in hdrs.get('set-cookie', ''), 'login: %s %s' % (status, hdrs))
    status, _, _ = request(px.http, '/?token=nope')
    check(status == 401, 'login with a wrong token: %s' % status)


def case_only_get(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    for method in ('POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'):
        status, hdrs, _ = request(px.http, '/metrics', method=method,
                                  body=b'x=1' if method in ('POST', 'PUT') else b'')
        check(status == 405 and hdrs.get('allow') == 'GET', '%s: %s %s' % (method, status, hdrs))
    status, _, _ = request(px.http, '/nothing-here')
    check(status == 404, 'unknown path: %s' % status)
    for query in ('?kinds=bogus', '?kinds=chat,', '?session=abc', '?session=0',
                  '?route=' + 'r' * 200):
        status, _, body = request(px.http, '/api/stream' + query)
        check(status == 400, '/api/stream%s: %s %r' % (query[:40], status, body[:100]))
    status, hdrs, body = request(px.http, '/')
    check(status == 200 and b'<title>slipgate</title>' in body, 'page: %s' % status)
    check("script-src 'self'" in hdrs.get('content-security-policy', ''), 'CSP: %r' % hdrs)


def sock_open(s):
    """True while the peer has not closed `s` (nothing to read and no end of file)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b''
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.settimeout(5)


def timed_request(port, path, limit):
    t0 = time.monotonic()
    status, _, body = request(port, path, timeout=limit + 1.0)
    took = time.monotonic() - t0
    check(status == 200 and took <= limit, 'GET %s: status %s after %.2f s (at most %.1f s)'
          % (path, status, took, limit))
    return took, body


def evicted(port):
    m = re.search(rb'^slipgate_http_evicted_total (\d+)$', request(port, '/metrics')[2], re.M)
    check(m is not None, 'no slipgate_http_evicted_total in /metrics')
    return int(m.group(1))


def case_connection_limit(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    held = []
    for i in range(32):  # SG_HTTP_MAX_CONNECTIONS, idle: half of them in the middle of a request
        s = socket.create_connection((V4, px.http), timeout=5)
        if i % 2:
            s.sendall(b'GET /metrics HTTP/1.1\r\nHo')
        held.append(s)
        h.sockets.append(s)
        time.sleep(0.01)  # the first is the one idle the longest
    # A 33rd client is served at once: the connection idle the longest makes room.
    timed_request(px.http, '/api/routes', 1.5)
    check(not sock_open(held[0]), 'the connection idle the longest is still open')
    still = sum(sock_open(s) for s in held[1:])
    check(still == 31, '%d of the other 31 idle connections are open (one eviction was enough)'
          % still)
    # the one that was closed left a free slot: no second eviction for this scrape
    check(evicted(px.http) == 1, 'slipgate_http_evicted_total is not 1')
    for s in held:
        s.close()
    time.sleep(0.3)
    # at most 8 stream clients (SG_HTTP_MAX_STREAMS)
    streams = [Stream(px.http) for _ in range(8)]
    try:
        check(all(st.wait_status() == 200 for st in streams), 'eight streams')
        status, _, _ = request(px.http, '/api/stream', timeout=2.0)
        check(status == 503, 'a ninth stream: %s' % status)
    finally:
        for st in streams:
            st.close()
    time.sleep(1.2)  # a stream client that went away is noticed within a second
    # Stream clients are never closed for another: 8 streams and 24 idle connections,
    # then a new client.
    streams = [Stream(px.http) for _ in range(8)]
    try:
        check(all(st.wait_status() == 200 for st in streams), 'eight streams, again')
        held = [socket.create_connection((V4, px.http), timeout=5) for _ in range(24)]
        h.sockets += held
        time.sleep(0.3)
        before = evicted(px.http)  # this scrape itself may have evicted one
        for _ in range(3):
            timed_request(px.http, '/metrics', 1.5)
        check(all(st.thread.is_alive() and st.error is None for st in streams),
              'a stream client was closed to make room')
        check(evicted(px.http) - before <= 3, 'more evictions than new clients')
    finally:
        for st in streams:
            st.close()


def close_wait(port):
    """Sockets of slipgate's listening `port` in CLOSE-WAIT (the peer closed, slipgate not)."""
    n = 0
    with open('/proc/net/tcp') as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if int(local.split(':')[1], 16) == port and state == '08':
                n += 1
    return n


def case_closed_burst(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    socks = []
    try:
        for _ in range(300):
            s = socket.create_connection((V4, px.http), timeout=5)
            s.sendall(b'GET /metr')  # half a request line
            socks.append(s)
    finally:
        for s in socks:
            s.close()
    took_page, body = timed_request(px.http, '/', 1.0)
    check(b'<title>slipgate</title>' in body, 'the page: %r' % body[:200])
    took_metrics, _ = timed_request(px.http, '/metrics', 1.0)
    end = time.monotonic() + 2
    while close_wait(px.http) and time.monotonic() < end:
        time.sleep(0.05)
    check(close_wait(px.http) == 0, '%d sockets of the http port in CLOSE-WAIT'
          % close_wait(px.http))
    print('after 300 closed half requests: / in %.3f s, /metrics in %.3f s'
          % (took_page, took_metrics))


def case_request_too_large(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port)
    # SG_HTTP_REQUEST_MAX is 16 KiB: 8 KB of headers pass, 24 KB do not
    status, _, _ = request(px.http, '/metrics', headers={'X-Big': 'a' * 8000})
    check(status == 200, 'an 8 KB request: %s' % status)
    status, _, _ = request(px.http, '/metrics', headers={'X-Big': 'a' * 24000})
    check(status in (413, 414, 431, None), 'a 24 KB request: %s' % status)
    status, _, _ = request(px.http, '/metrics')
    check(status == 200, 'the server is fine after it: %s' % status)


class FirstPart:
    """The part [start, frac) of a capture's game (the client has not left yet)."""

    def __init__(self, cap, frac, start=0.0):
        self.checksum = cap.checksum
        game = cap.game()
        self._game = game[int(len(game) * start):int(len(game) * frac)]

    def game(self):
        return self._game


def case_metrics_decode_match_stats(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    # idle_timeout: the session (its demo still open) ends after the scrape below
    px = h.proxy(args=['-l', '127.0.0.1:$P1', '-s', '127.0.0.1:%d' % srv.getsockname()[1],
                       '-p', 'q3', '--record', demos, '+set', 'reencode', 'always',
                       '+set', 'idle_timeout', '4s', '+set', 'http', '127.0.0.1:$P0'])
    check(px.wait_for_log(r'http: serving on http://127\.0\.0\.1:%d/' % px.ports[0], 5)
          is not None, '+set http: no "http: serving on" line')
    sent, got = replay_game(FirstPart(cap, 0.7), px.ports[1], srv)
    check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
    samples = scrape(px.ports[0])
    sessions = get_json(px.ports[0], '/api/sessions')['sessions']
    recs = get_json(px.ports[0], '/api/recordings')['recordings']
    # The session times out: its demo is finished as it ends, and counts then.
    deadline = time.time() + 15
    while time.time() < deadline:
        ended = get_json(px.ports[0], '/api/sessions?ended=1')['sessions']
        if ended and all(s['state'] == 'ended' for s in ended):
            break
        time.sleep(0.25)
    check(ended and all(s['state'] == 'ended' for s in ended),
          'the session did not time out (idle_timeout 4s): %r' % ended)
    after = scrape(px.ports[0])
    px.stop()
    st = [r for r in px.stats()['routes'] if r['name'] == 'default'][0]
    games = [s for s in st['sessions'] if s.get('codec') == 'q3']
    check(len(games) >= 1, '--stats: no session decoded as q3: %r' % st['sessions'])
    for k, name in (('datagrams', 'decode_datagrams'), ('messages', 'decode_messages'),
                    ('oob', 'decode_oob'), ('rejected', 'decode_rejected'),
                    ('errors', 'decode_errors'), ('reencoded', 'reencodes'),
                    ('reencode_identical', 'reencodes_identical'),
                    ('reencode_errors', 'reencode_errors')):
        want = sum(s['decode'][k] for s in games)
        got = metric(samples, 'slipgate_%s_total' % name, route='default', codec='q3')
        check(got == want, 'slipgate_%s_total %r, --stats sessions\' decode.%s %r'
              % (name, got, k, want))
    d = sum(s['decode']['messages'] for s in games)
    check(d > 100 and metric(samples, 'slipgate_reencodes_identical_total', route='default',
                             codec='q3') > 100, 'too little decoded: %r' % games)
    check(metric(samples, 'slipgate_demos_written_total', route='default')
          == sum(s.get('demos', 0) for s in games) == 1, 'demos written: /metrics %r, --stats %r'
          % (metric(samples, 'slipgate_demos_written_total', route='default'),
             [s.get('demos') for s in games]))
    # /api/sessions: the --stats fields of the same sessions
    by_id = {s['id']: s for s in st['sessions']}
    for s in sessions:
        t = by_id[s['id']]
        for k in ('client', 'codec', 'decode', 'demos', 'demo', 'counters'):
            check(s.get(k) == t.get(k), '/api/sessions %d %s: %r, --stats %r'
                  % (s['id'], k, s.get(k), t.get(k)))
    for s in ended:  # the same session, ended: all of it as --stats has it
        t = by_id[s['id']]
        for k in ('client', 'codec', 'decode', 'demos', 'demo', 'demo_bytes', 'counters',
                  'end_reason'):
            check(s.get(k) == t.get(k), '/api/sessions?ended=1 %d %s: %r, --stats %r'
                  % (s['id'], k, s.get(k), t.get(k)))
    # /api/recordings: the demo --stats names, with its map, being written
    check(len(recs) == 1 and metric(samples, 'slipgate_recordings_active', route='default') == 1,
          'recordings: %r' % recs)
    r = recs[0]
    size = os.path.getsize(games[0]['demo'])
    check(r['path'] == games[0]['demo'] and r['session'] == games[0]['id']
          and r['route'] == 'default' and r['map'] == 'oa_dm1', 'recording %r, --stats %r'
          % (r, games[0]))
    check(0 < r['bytes'] <= size and metric(samples, 'slipgate_recording_bytes',
                                            route='default') == r['bytes'],
          'recording bytes %r, /metrics %r, the file at exit %d bytes'
          % (r['bytes'], metric(samples, 'slipgate_recording_bytes', route='default'), size))
    # Demo bytes count the finished files: none while the demo is written, then its size
    # (the files on disk), as --stats says, once the session ended.
    check(metric(samples, 'slipgate_demo_bytes_total', route='default') == 0
          and [s.get('demo_bytes') for s in sessions] == [0],
          'demo bytes while the only demo is being written: /metrics %r, /api/sessions %r'
          % (metric(samples, 'slipgate_demo_bytes_total', route='default'),
             [s.get('demo_bytes') for s in sessions]))
    on_disk = sum(os.path.getsize(os.path.join(demos, n)) for n in os.listdir(demos))
    got = metric(after, 'slipgate_demo_bytes_total', route='default')
    check(got == on_disk == sum(s['demo_bytes'] for s in games) > 0,
          'slipgate_demo_bytes_total %r, demo files on disk %r bytes, --stats demo_bytes %r'
          % (got, on_disk, [s['demo_bytes'] for s in games]))
    check(metric(after, 'slipgate_demos_written_total', route='default') == 1
          and metric(after, 'slipgate_recordings_active', route='default') == 0
          and metric(after, 'slipgate_recording_bytes', route='default') == 0,
          'after the session ended: demos written %r, recordings %r (%r bytes)'
          % (metric(after, 'slipgate_demos_written_total', route='default'),
             metric(after, 'slipgate_recordings_active', route='default'),
             metric(after, 'slipgate_recording_bytes', route='default')))
    print('%d messages decoded, %d rebuilt identical; demo %s (%d bytes while live, %d once '
          'finished)' % (d, metric(samples, 'slipgate_reencodes_identical_total',
                                   route='default', codec='q3'), r['path'], r['bytes'], got))


def case_recording_started(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1],
                                   '    filter record {\n        directory %s\n'
                                   '        max_size 8000\n    }\n' % demos))
    keep = {}
    try:
        # The first part of the game, a pause, then more: max_size rolls the
        # demo over to a second file during the second part.
        sent, got = replay_game(FirstPart(cap, 0.35), px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'first part: %d sent, %d arrived' % (sent, got))
        first = sorted(os.listdir(demos))
        time.sleep(1.5)
        resumed = time.time() * 1000
        sent, got = replay_game(FirstPart(cap, 0.7, 0.35), px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'second part: %d sent, %d arrived' % (sent, got))
        now = time.time() * 1000
        recs = get_json(px.http, '/api/recordings')['recordings']
        sessions = get_json(px.http, '/api/sessions')['sessions']
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    files = sorted(os.listdir(demos))
    check(len(first) == 1 and len(files) >= 2, 'demo files after the first part %r, after the '
          'second %r: expected one, then a second part (max_size 8000)' % (first, files))
    check(len(recs) == 1 and os.path.basename(recs[0]['path']) not in first,
          'recordings %r: expected the part opened in the second half' % recs)
    r = recs[0]
    s = [x for x in sessions if x['id'] == r['session']][0]
    check(resumed - 50 <= r['started_ms'] <= now + 50 and r['duration_ms'] <= now - resumed + 100,
          'recording started_ms %d, duration_ms %d: not the file\'s (opened after %d, scraped at '
          '%d; the session started at %d)' % (r['started_ms'], r['duration_ms'], resumed, now,
                                              s['started_ms']))
    check(r['started_ms'] >= s['started_ms'] + 1400, 'the file started %d ms after its session'
          % (r['started_ms'] - s['started_ms']))
    print('%d files; the current one opened %d ms after the session began, %d ms old'
          % (len(files), r['started_ms'] - s['started_ms'], r['duration_ms']))


def case_utf8_names(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('d\u00e9')
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1],
                                   '    filter record {\n        directory "%s"\n    }\n' % demos))
    keep = {}
    try:
        sent, got = replay_game(FirstPart(cap, 0.35), px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        raw = {}
        for path in ('/api/recordings', '/api/sessions', '/api/routes'):
            status, _, raw[path] = request(px.http, path)
            check(status == 200, 'GET %s: status %s' % (path, status))
        recs = get_json(px.http, '/api/recordings')['recordings']
        sessions = get_json(px.http, '/api/sessions')['sessions']
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    px.stop()
    stats = px.stats()  # parses: valid JSON
    files = os.listdir(demos)
    check(len(files) == 1 and len(recs) == 1, 'demo files %r, recordings %r' % (files, recs))
    on_disk = os.path.join(demos, files[0])
    s = [x for x in sessions if x['id'] == recs[0]['session']]
    st = [x for r in stats['routes'] for x in r.get('sessions', []) if x['id'] == recs[0]['session']]
    check(recs[0]['path'] == on_disk, '/api/recordings path %r, the file on disk %r'
          % (recs[0]['path'], on_disk))
    check(len(s) == 1 and s[0].get('demo') == on_disk, '/api/sessions demo %r, the file on disk '
          '%r' % (s[0].get('demo') if s else None, on_disk))
    check(len(st) == 1 and st[0].get('demo') == on_disk, '--stats demo %r, the file on disk %r'
          % (st[0].get('demo') if st else None, on_disk))
    for path, body in raw.items():  # as UTF-8 text, not escaped byte by byte
        body.decode('utf-8')  # strict: raises on bytes that are not UTF-8
        check(b'\\u00c3' not in body, '%s: %r' % (path, body[:400]))
    check('d\u00e9'.encode() in raw['/api/recordings'], '/api/recordings: %r'
          % raw['/api/recordings'][:400])
    print('the demo %s, named alike by /api/recordings, /api/sessions and --stats' % on_disk)


def case_game_info(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1], '') +
                    ROUTE_Q3 % ('idle', 2, srv.getsockname()[1], ''))
    keep = {}
    try:
        before = {r['name']: r for r in get_json(px.http, '/api/routes')['routes']}
        sent, got = replay_game(FirstPart(cap, 0.35), px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        routes = {r['name']: r for r in get_json(px.http, '/api/routes')['routes']}
        sessions = get_json(px.http, '/api/sessions')['sessions']
        players = get_json(px.http, '/api/players')['players']
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    want = GAME_Q3_IOQ71
    check(before['arena']['game'] == {'hostname': '', 'map': '', 'players': 0},
          'before any client: %r' % before['arena'].get('game'))
    g = routes['arena'].get('game')
    check(g == {'hostname': want['hostname'], 'map': want['map'], 'players': 1},
          '/api/routes arena game %r, expected %r' % (g, want))
    check(routes['idle'].get('game') == {'hostname': '', 'map': '', 'players': 0},
          '/api/routes idle game %r' % routes['idle'].get('game'))
    check(len(sessions) == 1 and sessions[0].get('player') == want['player'] and
          sessions[0].get('hostname') == want['hostname'] and sessions[0].get('map') == want['map'],
          '/api/sessions %r' % [(s.get('player'), s.get('hostname'), s.get('map'))
                                for s in sessions])
    check(len(players) == 1 and players[0].get('name') == want['player'],
          '/api/players %r' % players)
    s = sessions[0]
    check(s.get('lost') == {'c2s': 0, 's2c': 0} and s['sequenced']['c2s'] > 100 and
          s['sequenced']['s2c'] > 50, 'netchan loss of a whole replay: %r, %r'
          % (s.get('lost'), s.get('sequenced')))
    rtt = s.get('rtt_ms') or {}
    check(rtt.get('client') is not None and rtt.get('server') is not None and
          players[0].get('ping_ms') == s.get('ping_ms') == rtt['client'] + rtt['server'],
          'ping %r (players %r), legs %r: expected both legs timed (the client acknowledges '
          'the server\'s messages, the server the client\'s commands)'
          % (s.get('ping_ms'), players[0].get('ping_ms'), rtt))
    print('route arena: %r; player %r; sequenced %r; ping %r ms (legs %r)'
          % (g, players[0]['name'], s['sequenced'], s['ping_ms'], rtt))


class Lossy:
    """A capture's game without every `every`th sequenced, unfragmented client
    datagram after the first 50: the client's loss as slipgate sees it."""

    def __init__(self, cap, every):
        import struct
        self.checksum = cap.checksum
        self._game, self.omitted, n = [], 0, 0
        for d in cap.game():
            if d.c2s and d.payload[:4] != b'\xff\xff\xff\xff' and len(d.payload) >= 4:
                seq = struct.unpack('<I', d.payload[:4])[0]
                n += 1
                if n > 50 and n % every == 0 and not seq & 0x80000000:
                    self.omitted += 1
                    continue
            self._game.append(d)

    def game(self):
        return self._game


def case_game_loss(h):
    cap = Lossy(q3cap.Capture('ioq71'), 25)
    srv = server_socket()
    h.sockets.append(srv)
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1], ''))
    keep = {}
    try:
        sent, got = replay_game(cap, px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        sessions = get_json(px.http, '/api/sessions')['sessions']
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    check(cap.omitted > 10, '%d omitted' % cap.omitted)
    check(len(sessions) == 1 and sessions[0].get('lost') == {'c2s': cap.omitted, 's2c': 0},
          'lost %r, %d client datagrams omitted' % (sessions[0].get('lost') if sessions else None,
                                                     cap.omitted))
    print('%d client datagrams omitted, lost %r of %r' % (cap.omitted, sessions[0]['lost'],
                                                         sessions[0]['sequenced']))


def case_demos(h):
    import urllib.parse
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    secret = h.path('secret.txt')
    with open(secret, 'w') as f:
        f.write('SECRET-CONTENT\n')
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1], '    record %s\n' % demos),
                    extra='http_token t0ken-demos\n')
    auth = {'Authorization': 'Bearer t0ken-demos'}
    keep = {}
    try:
        sent, got = replay_game(cap, px.ports[1], srv, keep=keep)  # to the client's disconnect
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        os.symlink(secret, os.path.join(demos, 'link.dm_71'))
        os.symlink(h.dir, os.path.join(demos, 'up'))
        end = time.monotonic() + 5
        while True:
            listed = get_json(px.http, '/api/demos', headers=auth)['demos']
            if listed or time.monotonic() > end:
                break
            time.sleep(0.1)
        files = [f for f in os.listdir(demos) if not os.path.islink(os.path.join(demos, f))]
        check(len(files) == 1, 'demo files %r' % files)
        on_disk = os.path.join(demos, files[0])
        check([d['path'] for d in listed] == [on_disk], '/api/demos %r, on disk %r (the links '
              'are not listed)' % (listed, on_disk))
        d = listed[0]
        check(d['bytes'] == os.path.getsize(on_disk) > 0 and d['map'] == 'oa_dm1' and
              d['player'] == 'peers' and d['route'] == 'arena' and d['name'] == files[0],
              '/api/demos entry %r' % d)
        status, _, _ = request(px.http, '/api/demos')
        check(status == 401, '/api/demos without the token: %s' % status)

        def get(path, **kw):
            return request(px.http, '/api/demo?path=' + urllib.parse.quote(path, safe=''), **kw)
        status, hdrs, body = get(on_disk, headers=auth)
        with open(on_disk, 'rb') as f:
            want = f.read()
        check(status == 200 and body == want, 'download: status %s, %d bytes of %d'
              % (status, len(body), len(want)))
        check('attachment' in hdrs.get('content-disposition', ''), 'headers %r' % hdrs)
        status, _, body = get(on_disk)
        check(status == 401 and want[:64] not in body, 'download without the token: %s' % status)
        for path, code in ((demos + '/../secret.txt', 400), ('secret.txt', 400),
                           (demos + '/./' + files[0], 400), (secret, 403),
                           (os.path.join(demos, 'link.dm_71'), 403),
                           (os.path.join(demos, 'up', 'secret.txt'), 403),
                           (os.path.join(demos, 'none.dm_71'), 404), ('/etc/passwd', 403)):
            status, _, body = get(path, headers=auth)
            check(status == code and b'SECRET-CONTENT' not in body,
                  '%s: status %s (expected %d), %r' % (path, status, code, body[:80]))
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    print('listed and served %s (%d bytes); .., relative, outside and linked paths refused'
          % (files[0], len(want)))


def case_recent(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    px = http_proxy(h, ROUTE_Q3 % ('arena', 1, srv.getsockname()[1], ''))
    check(get_json(px.http, '/api/recent') == {'events': []}, 'before any traffic')
    keep = {}
    try:
        sent, got = replay_game(cap, px.ports[1], srv, keep=keep)
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        events = get_json(px.http, '/api/recent')['events']
    finally:
        if 'cli' in keep:
            keep['cli'].close()
    check(0 < len(events) <= 100, '%d events' % len(events))
    kinds = {m['kind'] for e in events for m in e['msgs']}
    check(kinds and kinds <= {'chat', 'print', 'centerprint', 'disconnect'}, 'kinds %r' % kinds)
    texts = [m.get('text') or '' for e in events for m in e['msgs']]
    check(any('entered the game' in t for t in texts), 'no "entered the game" print: %r'
          % texts[:20])
    times = [e['time'] for e in events]
    check(times == sorted(times), 'not oldest first: %r' % times)
    check(all(e['session'] == 1 and e['route'] == 'arena' for e in events),
          'events %r' % events[:3])
    print('%d recent events, kinds %r' % (len(events), sorted(kinds)))


def case_idle_closed(h):
    srv = h.echo(V4)
    px = http_proxy(h, ROUTE_ECHO % srv.port, extra='http_idle_timeout 3s\n')
    silent = socket.create_connection((V4, px.http), timeout=5)
    half = socket.create_connection((V4, px.http), timeout=5)
    h.sockets += [silent, half]
    half.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')  # no blank line: never complete
    t0 = time.monotonic()
    closed = {}
    for s in (silent, half):
        s.settimeout(1.0)
    while len(closed) < 2 and time.monotonic() - t0 < 15:
        for name, s in (('silent', silent), ('half', half)):
            if name in closed:
                continue
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b''
            check(data == b'' or data.startswith(b'HTTP/1.1 4'),
                  '%s connection: got %r' % (name, data[:100]))
            closed[name] = time.monotonic() - t0
    check(set(closed) == {'silent', 'half'}, 'idle connections still open after 15 s: %s'
          % ({'silent', 'half'} - set(closed)))
    check(all(2.5 <= t <= 6 for t in closed.values()), 'closed after %r s, expected about 3'
          % closed)
    status, _, _ = request(px.http, '/api/routes')
    check(status == 200, 'the server after closing idle connections: %s' % status)
    print('idle connections closed after %s' % ', '.join('%s %.1f s' % kv
                                                         for kv in sorted(closed.items())))
def steer_worker(host, n):
    """The loop slipgate's steering program picks for IPv4 `host` (proxy/udp.c)."""
    x = int.from_bytes(socket.inet_aton(host), 'big')
    x ^= x >> 16
    x = (x * 0x45d9f3b) & 0xffffffff
    x ^= x >> 16
    return x % n


def case_workers_merged(h):
    srv = h.echo(V4)
    s2 = server_socket()
    h.sockets.append(s2)
    routes = ('route main {\n    listen 127.0.0.1:$P1\n    server 127.0.0.1:%d\n}\n' % srv.port
              + ROUTE_Q3 % ('game', 2, s2.getsockname()[1], ''))
    conf = 'workers 2\nhttp 127.0.0.1:$P0\n' + routes
    px = h.proxy(conf, routes=2)
    px.http = px.ports[0]
    check(px.wait_for_log(r'http: serving on', 5) is not None, 'http is not served with -w 2')
    # 8 clients from 8 loopback addresses: both loops get some.
    hosts = ['127.0.0.%d' % i for i in range(2, 10)]
    check(len({steer_worker(a, 2) for a in hosts}) == 2, 'the addresses all steer to one loop')
    dest = (V4, px.ports[1])
    for a in hosts:
        c = h.client(a)
        for i in range(5):
            c.send(b'm %d' % i, dest)
        got, end = 0, time.monotonic() + 5
        while got < 5 and time.monotonic() < end:
            got += len(c.recv(0.2))
        check(got == 5, 'client %s: %d of 5 echoes' % (a, got))
    # A game replayed from an address on loop 1 (worker 0 serves http).
    far = next(a for a in ('127.0.0.%d' % i for i in range(20, 40)) if steer_worker(a, 2) == 1)
    st = Stream(px.http, '?route=game&kinds=text')
    try:
        check(st.wait_status() == 200, 'stream status')
        sent, got = replay_game(q3cap.Capture('ioq71'), px.ports[2], s2, host=far)
        check(got >= sent - 10, 'replay: %d sent, %d arrived' % (sent, got))
        samples = scrape(px.http)
        routes_doc = get_json(px.http, '/api/routes')
        sessions = get_json(px.http, '/api/sessions')
        events = st.wait_events(5, 5)
    finally:
        st.close()
    check(metric(samples, 'slipgate_sessions_total', route='main') == 8
          and metric(samples, 'slipgate_sessions_active', route='main') == 8,
          '/metrics: sessions of route main: %s total, %s active, expected 8'
          % (metric(samples, 'slipgate_sessions_total', route='main'),
             metric(samples, 'slipgate_sessions_active', route='main')))
    for d in ('c2s', 's2c'):
        check(metric(samples, 'slipgate_datagrams_total', route='main', direction=d) == 40,
              '/metrics: %s datagrams %s, expected 40' % (d, metric(
                  samples, 'slipgate_datagrams_total', route='main', direction=d)))
    check(metric(samples, 'slipgate_decode_datagrams_total', route='game', codec='q3') > 0,
          '/metrics: nothing decoded on the game route (its session is on loop 1)')
    main = next(r for r in routes_doc['routes'] if r['name'] == 'main')
    shares = [w['sessions_total'] for w in main.get('workers') or []]
    check(len(shares) == 2 and all(x > 0 for x in shares) and sum(shares) == 8,
          '/api/routes: sessions per loop %r' % shares)
    mine = sorted(parse_client(s['client']) for s in sessions['sessions'] if s['route'] == 'main')
    check(mine == sorted(hosts), '/api/sessions: clients %r, expected %r' % (mine, hosts))
    game = [s for s in sessions['sessions'] if s['route'] == 'game']
    check(len(game) == 1 and (game[0]['id'] - 1) % 2 == 1,
          '/api/sessions: the game session %r, expected one on loop 1' % game)
    texts = [m.get('text') for e in events for m in e.get('msgs', []) if m['kind'] == 'print']
    check(len(events) >= 5 and all(e['session'] == game[0]['id'] for e in events)
          and any('entered the game' in (t or '') for t in texts),
          '/api/stream: %d events of sessions %s, prints %r'
          % (len(events), sorted({e['session'] for e in events}), texts[:5]))
    px.stop()


def parse_client(text):
    return text.rsplit(':', 1)[0]


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
