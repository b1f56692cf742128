#!/usr/bin/env python3
"""What the server's own status answers put on /api/routes, for the games
whose traffic does not carry the server's name (Quake 2, NetQuake): the
real slipgate binary on 127.0.0.1 with `ready_probe on` in front of a
scripted server.  Usage: status_test.py CASE

    q2   a scripted Quake 2 server answers "status" with its serverinfo and
         two player lines: /api/routes shows its hostname and map in `game`
         and in `probe` the players (2) and slots (maxclients 8); an answer
         from another address with another name changes nothing; the
         server's malformed answers (not its form, cut short) are counted
         and the last good answer stays; once it has not answered for
         ready_probe_timeout, `game` no longer shows the name (the probe
         keeps it with its age); the server got status queries only, from
         one address, at most one per 200 ms
    nq   the same for NetQuake's CCREQ_SERVER_INFO and CCREP_SERVER_INFO
         (address, host name, level, players 3, maximum 16, version)
    q2_page, nq_page
         without `ready_probe`, with `http` on (the page): the server is
         asked its status at once and then every 10 s, no more; /api/routes
         shows its name, level, players and slots; /ready is not made to
         depend on it (200 while the server is silent)
    nq_nohttp
         neither `http` nor `ready_probe`: the server gets no query at all
"""

import os
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'http'))

import harness  # noqa: E402
from harness import check  # noqa: E402
import httplib_sg  # noqa: E402

V4 = '127.0.0.1'
OOB = b'\xff\xff\xff\xff'


def q2_answer(name):
    return (OOB + b'print\n\\maxclients\\8\\hostname\\' + name +
            b'\\mapname\\q2dm1\\protocol\\34\n0 25 "alice"\n-2 40 "bob"\n')


Q2 = {
    'protocol': 'q2',
    'query': OOB + b'status\n',
    'answer': q2_answer,
    'bad': [OOB + b'print\nServer is full.\n',            # not a status answer
            q2_answer(b'cut')[:-5]],                      # a player line cut short
    'want': {'map': 'q2dm1', 'players': 2, 'max_players': 8},
}


def nq_ctl(body):
    return struct.pack('>I', 0x80000000 | (len(body) + 4)) + body


def nq_answer(name):
    return nq_ctl(b'\x83' + b'127.0.0.1:26000\0' + name + b'\0e1m1\0' + bytes([3, 16, 3]))


NQ = {
    'protocol': 'nq',
    'query': nq_ctl(b'\x02QUAKE\0\x03'),
    'answer': nq_answer,
    'bad': [nq_ctl(b'\x83' + b'127.0.0.1:26000\0only a name'),  # strings without their NUL
            nq_ctl(b'\x83' + b'a\0b\0c\0' + bytes([1]))],          # a byte missing
    'want': {'map': 'e1m1', 'players': 3, 'max_players': 16},
}


class Server:
    """A scripted game server: answers the game's status query with
    `answer` (None: stays silent), and notes every datagram."""

    def __init__(self, h, game):
        self.sock = h.udp_socket(V4)
        self.sock.settimeout(0.05)
        self.game = game
        self.answer = game['answer'](b'Slip Gate')
        self.queries, self.sources = [], set()
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                data, peer = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            self.queries.append((time.monotonic(), data))
            self.sources.add(peer)
            if data == self.game['query'] and self.answer is not None:
                self.sock.sendto(self.answer, peer)

    def close(self):
        self.stop = True
        self.thread.join(2)


def route(px):
    routes = httplib_sg.get_json(px.http, '/api/routes')['routes']
    check(len(routes) == 1, '/api/routes: %r' % routes)
    return routes[0]


def wait_route(px, cond, what, timeout=3.0):
    """Poll /api/routes until cond(route) holds; returns the route."""
    end = time.monotonic() + timeout
    r = route(px)
    for _ in range(1000):
        if cond(r) or time.monotonic() > end:
            break
        time.sleep(0.05)
        r = route(px)
    check(cond(r), '%s: /api/routes game %r, probe %r' % (what, r.get('game'), r.get('probe')))
    return r


def run_case(h, game):
    srv = Server(h, game)
    try:
        conf = ('http 127.0.0.1:$P0\nready_probe on\nready_probe_timeout 1s\n'
                'route main {\n    listen 127.0.0.1:$P1\n    server 127.0.0.1:%d\n'
                '    protocol %s\n}\n' % (srv.sock.getsockname()[1], game['protocol']))
        px = h.proxy(conf)
        px.http = px.ports[0]
        px.wait_for_log(r'http: serving on', 5)
        want = game['want']

        # The server's answer: its name and level on the route, its players and slots.
        r = wait_route(px, lambda r: r['game']['hostname'] == 'Slip Gate', 'the server\'s name')
        g, p = r['game'], r['probe']
        check(g == {'hostname': 'Slip Gate', 'map': want['map'], 'players': 0},
              'game %r' % g)
        check(p['hostname'] == 'Slip Gate' and p['map'] == want['map'] and
              p['players'] == want['players'] and p['max_players'] == want['max_players'] and
              p['fresh'] is True and p['answers'] >= 1 and p['malformed'] == 0 and
              0 <= p['age_ms'] <= 1000, 'probe %r' % p)

        # Another address answering the probe's socket with another name: ignored.
        check(len(srv.sources) == 1, 'status queries from %r' % srv.sources)
        probe = next(iter(srv.sources))
        other = h.udp_socket(V4)
        for _ in range(5):
            other.sendto(game['answer'](b'Spoofed'), probe)
            time.sleep(0.05)

        # Malformed answers from the server: counted, the last good one stays.
        mark = px.log_mark()
        for bad in game['bad']:
            srv.answer = bad
            before = route(px)['probe']['malformed']
            wait_route(px, lambda r: r['probe']['malformed'] > before,
                       'a malformed answer counted (%r)' % bad)
        r = route(px)
        check(r['game']['hostname'] == 'Slip Gate' and r['probe']['hostname'] == 'Slip Gate',
              'after malformed answers and a spoofed one: game %r, probe %r'
              % (r['game'], r['probe']))
        check(px.count_log(r'do not read as its status', mark) >= 1,
              'no warning for the malformed answers:\n' + '\n'.join(px.log_lines(mark)))

        # Silent for longer than ready_probe_timeout: the name leaves `game`.
        srv.answer = None
        r = wait_route(px, lambda r: r['game']['hostname'] == '', 'a stale answer', 3.0)
        check(r['probe']['fresh'] is False and r['probe']['hostname'] == 'Slip Gate' and
              r['probe']['age_ms'] >= 1000, 'stale probe %r' % r['probe'])

        check(all(d == game['query'] for _, d in srv.queries),
              'the server got other datagrams: %r' % srv.queries[:5])
        span = srv.queries[-1][0] - srv.queries[0][0]
        check(len(srv.queries) <= span / 0.15 + 2, '%d queries in %.2f s: more than one per '
              '200 ms' % (len(srv.queries), span))
        check(px.stop() == 0, 'exit status')
        print('route main: %r; probe %r; %d queries in %.1f s'
              % (g, p, len(srv.queries), span))
    finally:
        srv.close()


def case_q2(h):
    run_case(h, Q2)


def case_nq(h):
    run_case(h, NQ)


def run_page(h, game):
    srv = Server(h, game)
    try:
        conf = ('http 127.0.0.1:$P0\n'
                'route main {\n    listen 127.0.0.1:$P1\n    server 127.0.0.1:%d\n'
                '    protocol %s\n}\n' % (srv.sock.getsockname()[1], game['protocol']))
        px = h.proxy(conf)
        px.http = px.ports[0]
        px.wait_for_log(r'http: serving on', 5)
        want = game['want']
        r = wait_route(px, lambda r: r['game']['hostname'] == 'Slip Gate', 'the server\'s name')
        p = r['probe']
        check(r['game']['map'] == want['map'] and p['players'] == want['players'] and
              p['max_players'] == want['max_players'] and p['fresh'] is True,
              'game %r, probe %r' % (r['game'], p))
        # /ready does not wait for the server's answers (no ready_probe)
        srv.answer = None
        status, _, body = httplib_sg.request(px.http, '/ready')
        check(status == 200, '/ready answered %s without ready_probe: %r' % (status, body))
        time.sleep(2.5)
        check(len(srv.queries) == 1 and srv.queries[0][1] == game['query'],
              'queries in the first 2.5 s: %r (one expected, then one every 10 s)'
              % [d for _, d in srv.queries])
        check(px.stop() == 0, 'exit status')
        print('page probe: game %r, probe %r, 1 query in 2.5 s' % (r['game'], p))
    finally:
        srv.close()


def case_q2_page(h):
    run_page(h, Q2)


def case_nq_page(h):
    run_page(h, NQ)


def case_nq_nohttp(h):
    srv = Server(h, NQ)
    try:
        conf = ('route main {\n    listen 127.0.0.1:$P0\n    server 127.0.0.1:%d\n'
                '    protocol nq\n}\n' % srv.sock.getsockname()[1])
        px = h.proxy(conf)
        time.sleep(1.0)
        check(srv.queries == [], 'the server was sent %r' % srv.queries)
        check(px.stop() == 0, 'exit status')
    finally:
        srv.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
