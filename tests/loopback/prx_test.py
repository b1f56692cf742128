#!/usr/bin/env python3
"""QuakeWorld proxy chains (`route_by prx`): the real slipgate binary between
a scripted QuakeWorld client and scripted QuakeWorld servers on 127.0.0.1.

    SLIPGATE=build/proxy/slipgate python3 prx_test.py CASE

The client speaks as ezQuake does through qwfwd nodes: its challenge
request and its connect go to the first node, with the rest of the chain in
the userinfo's `prx` key.  Every scripted server records what reached it, so
a case can tell that nothing went anywhere it should not.
"""

import os
import re
import selectors
import signal
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import V4, Fail, check, main  # noqa: E402

OOB = b'\xff\xff\xff\xff'


class QwServer:
    """A scripted QuakeWorld server: 'c' to getchallenge, 'j' to a connect
    carrying its challenge, 'l' to 'k', and a netchan datagram with a
    svc_nop to each netchan datagram.  Records (source, payload) of all."""

    def __init__(self, challenge=424242):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((V4, 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.addr = '%s:%d' % (V4, self.port)
        self.challenge = challenge
        self.records = []
        self.lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _answer(self, data):
        if data.startswith(OOB + b'getchallenge'):
            return OOB + b'c%d\x00' % self.challenge
        if data.startswith(OOB + b'connect '):
            m = re.match(rb'connect \d+ \d+ (-?\d+) ', data[4:])
            if m and int(m.group(1)) == self.challenge:
                return OOB + b'j'
            return OOB + b'n\nBad challenge.\n\x00'
        if data.startswith(OOB + b'k'):
            return b'l'
        if data.startswith(OOB):
            return None
        if len(data) >= 8:
            seq = struct.unpack_from('<I', data)[0] & 0x7fffffff
            return struct.pack('<II', seq, seq) + b'\x01'
        return None

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        deadline = time.monotonic() + 60
        while not self._stop and time.monotonic() < deadline:
            for _ in sel.select(0.2):
                for _ in range(64):
                    try:
                        data, src = self.sock.recvfrom(65536)
                    except (BlockingIOError, InterruptedError):
                        break
                    with self.lock:
                        self.records.append((src, data))
                    out = self._answer(data)
                    if out is not None:
                        self.sock.sendto(out, src)
        sel.close()

    def got(self):
        with self.lock:
            return list(self.records)

    def connects(self):
        return [(s, d) for s, d in self.got() if d.startswith(OOB + b'connect ')]

    def close(self):
        self._stop = True
        self._thread.join(2)
        self.sock.close()


class QwClient:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((V4, 0))
        self.sock.settimeout(0.1)

    def send(self, data, dest):
        self.sock.sendto(data, dest)

    def recv(self, timeout=2.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                return self.sock.recvfrom(65536)
            except socket.timeout:
                continue
        return None, None

    def challenge(self, dest):
        self.send(OOB + b'getchallenge\n', dest)
        data, src = self.recv()
        check(data is not None and data.startswith(OOB + b'c'),
              'no challenge from %s: %r' % (dest, data))
        check(src == dest, 'challenge from %r, not %r' % (src, dest))
        return int(data[5:].split(b'\x00')[0])

    def connect(self, dest, userinfo, challenge=None, qport=4321):
        if challenge is None:
            challenge = self.challenge(dest)
        self.send(OOB + b'connect 28 %d %d "%s"\n' % (qport, challenge, userinfo.encode()), dest)
        return self.recv()

    def close(self):
        self.sock.close()


def proxy_conf(name, allow, **opts):
    lines = ['route %s {' % name, '    listen 127.0.0.1:$P0', '    server 127.0.0.1:9',
             '    protocol qw', '    route_by prx', '    prx_allow %s' % allow]
    lines += ['    %s %s' % (k, v) for k, v in opts.items()]
    return '\n'.join(lines + ['}', ''])


def stop_stats(px):
    rc = px.stop(signal.SIGTERM)
    check(rc == 0, 'slipgate exited with status %d' % rc)
    st = px.stats()
    for r in st['routes']:
        return r
    raise Fail('no route in stats')


def play(client, dest, n=5):
    """The player's netchan datagrams; each must be answered through the chain."""
    for seq in range(1, n + 1):
        client.send(struct.pack('<IIH', seq, 0, 4321) + b'\x01', dest)
        data, src = client.recv()
        check(data is not None and len(data) >= 9, 'no answer to netchan datagram %d' % seq)
        check(src == dest, 'netchan answer from %r, not %r' % (src, dest))


def case_prx_chain(h):
    """A chain through two slipgates: the client names B and the server in
    `prx`; A sends B the connect with `prx` = the server, B sends the
    server the connect without `prx`, both stamped `*qwfwd`; 'j' comes back
    and the game flows both ways."""
    srv = QwServer()
    try:
        pb = h.proxy(config=proxy_conf('b', srv.addr), name='b')
        pa = h.proxy(config=proxy_conf('a', '127.0.0.1:%d' % pb.ports[0]), name='a')
        a = (V4, pa.ports[0])
        c = QwClient()
        chain = '127.0.0.1:%d@%s' % (pb.ports[0], srv.addr)
        data, src = c.connect(a, '\\name\\player\\prx\\%s\\team\\red' % chain)
        check(data == OOB + b'j', 'no accept through the chain: %r' % data)
        check(src == a, 'accept from %r, not the first node %r' % (src, a))
        conns = srv.connects()
        check(len(conns) == 1, '%d connects reached the server, expected 1' % len(conns))
        text = conns[0][1].decode('latin-1')
        check('prx' not in text, 'the server still sees a prx key: %r' % text)
        check('\\*qwfwd\\' in text, 'the server sees no *qwfwd stamp: %r' % text)
        check('\\name\\player' in text and '\\team\\red' in text,
              'the userinfo lost keys on the way: %r' % text)
        check(' 424242 ' in text, 'the server got another challenge than its own: %r' % text)
        play(c, a)
        check(pa.wait_for_log(r'prx chain: .* -> 127\.0\.0\.1:%d' % pb.ports[0], 2) is not None,
              'A does not log the next hop B')
        check(pb.wait_for_log(r'prx chain: .* -> %s' % re.escape(srv.addr), 2) is not None,
              'B does not log the server')
        c.close()
        for px in (pa, pb):
            r = stop_stats(px)
            check(r['counters']['c2s_packets'] >= 7, 'few datagrams relayed: %r' % r['counters'])
    finally:
        srv.close()


def case_prx_refusals(h):
    """Outside the allow-list, over the hop limit, naming slipgate itself, a
    malformed chain and a bad challenge: each refused with its reason
    printed to the client ('n'), counted, and nothing sent to any server;
    an established player is unaffected."""
    srv, other = QwServer(), QwServer()
    try:
        px = h.proxy(config=proxy_conf('a', srv.addr, prx_max_hops=2))
        a = (V4, px.ports[0])
        player = QwClient()
        data, _ = player.connect(a, '\\name\\p\\prx\\%s' % srv.addr)
        check(data == OOB + b'j', 'the player was not accepted: %r' % data)
        play(player, a, 2)
        before = len(srv.got())
        cases = [
            ('\\name\\x\\prx\\%s' % other.addr, r'not a destination', 'prx_not_allowed'),
            ('\\name\\x\\prx\\127.0.0.1:1@127.0.0.2:2@%s' % srv.addr, r'3 hops, at most 2',
             'prx_hops'),
            ('\\name\\x\\prx\\127.0.0.1:%d' % px.ports[0], r'this proxy itself', 'prx_self'),
            ('\\name\\x\\prx\\@%s' % srv.addr, r'malformed', 'prx_invalid'),
            ('\\name\\x\\prx\\server.example:27500', r'not a numeric address', 'prx_invalid'),
        ]
        for ui, why, _ in cases:
            c = QwClient()
            data, _ = c.connect(a, ui)
            check(data is not None and data.startswith(OOB + b'n'),
                  'no refusal printed for %r: %r' % (ui, data))
            check(re.search(why, data.decode('latin-1')), 'refusal for %r says %r, expected %r'
                  % (ui, data, why))
            c.close()
        c = QwClient()
        data, _ = c.connect(a, '\\name\\x\\prx\\%s' % srv.addr, challenge=12345)
        check(data is not None and b'bad challenge' in data, 'a forged challenge: %r' % data)
        c.close()
        play(player, a, 2)
        check(other.got() == [], 'the server outside the allow-list got %r' % other.got())
        extra = [d for _, d in srv.got()[before:] if d.startswith(OOB)]
        check(extra == [], 'refused chains reached the allowed server: %r' % extra)
        check(px.wait_for_log(r'refused \(prx_', 2) is not None, 'no refusal logged')
        r = stop_stats(px)
        d = r['counters']['drops']
        want = {'prx_not_allowed': 1, 'prx_hops': 1, 'prx_self': 1, 'prx_invalid': 3}
        for k, n in want.items():
            check(d.get(k) == n, 'drops.%s = %r, expected %d' % (k, d.get(k), n))
    finally:
        srv.close()
        other.close()


def case_prx_flood(h):
    """A source starting chains faster than prx_chains_per_source is refused
    (told, counted, logged once a minute); chains it started are unaffected."""
    srv = QwServer()
    try:
        px = h.proxy(config=proxy_conf('a', srv.addr, prx_chains_per_source=3,
                                       new_sessions_per_source=1000))
        a = (V4, px.ports[0])
        players = []
        for i in range(3):
            c = QwClient()
            data, _ = c.connect(a, '\\name\\p%d\\prx\\%s' % (i, srv.addr))
            check(data == OOB + b'j', 'chain %d not accepted: %r' % (i, data))
            players.append(c)
        n_conn = len(srv.connects())
        for i in range(5):
            c = QwClient()
            data, _ = c.connect(a, '\\name\\f%d\\prx\\%s' % (i, srv.addr))
            check(data is not None and b'too many new connections' in data,
                  'flood chain %d: %r' % (i, data))
            c.close()
        check(len(srv.connects()) == n_conn, 'refused chains reached the server')
        for c in players:
            play(c, a, 2)
        check(px.wait_for_log(r'refused \(prx_rate\)', 2) is not None, 'the flood was not logged')
        check(px.count_log(r'refused \(prx_rate\)') == 1,
              'the flood was logged %d times, expected once a minute'
              % px.count_log(r'refused \(prx_rate\)'))
        r = stop_stats(px)
        check(r['counters']['drops']['prx_rate'] == 5, 'drops.prx_rate %r'
              % r['counters']['drops']['prx_rate'])
    finally:
        srv.close()


def case_prx_pingstatus(h):
    """pingstatus: 'n' and 8 bytes for each allowed server (address, port
    and ping, little-endian), with the ping slipgate measured."""
    srv = QwServer()
    try:
        px = h.proxy(config=proxy_conf('a', '%s 10.0.0.0/8' % srv.addr,
                                       prx_ping_interval='200ms'))
        a = (V4, px.ports[0])
        c = QwClient()
        entry = None
        for asked in range(1, 41):
            c.send(OOB + b'pingstatus', a)
            data, src = c.recv()
            check(data is not None and data.startswith(OOB + b'n'), 'no pingstatus answer')
            check(len(data) == 5 + 8, 'pingstatus: %d bytes, expected one server: %r'
                  % (len(data), data))
            ip, port, ms = data[5:9], struct.unpack_from('<H', data, 9)[0], \
                struct.unpack_from('<H', data, 11)[0]
            check(ip == bytes([127, 0, 0, 1]) and port == srv.port,
                  'pingstatus names %r:%d, expected %s' % (ip, port, srv.addr))
            if ms != 0xffff:
                entry = ms
                break
            time.sleep(0.05)
        check(entry is not None and entry < 1000, 'no ping measured: %r' % entry)
        answered = asked
        # A source gets 60 answers a minute (the answer outweighs the question).
        for _ in range(80):
            c.send(OOB + b'pingstatus', a)
        while True:
            data, src = c.recv(0.5)
            if data is None:
                break
            answered += 1
        check(answered == 60, '%d pingstatus answers in a minute, expected 60' % answered)
        pings = [d for _, d in srv.got() if d == OOB + b'k\n']
        check(1 <= len(pings) <= 20, '%d pings reached the server in ~2 s' % len(pings))
        c.close()
        stop_stats(px)
    finally:
        srv.close()


def case_prx_status(h):
    """A browser's status and a ping, from a source with no session: the
    node answers them itself (status: its own serverinfo, *version
    "qwfwd ...", as ezQuake's browser tells a proxy node by; a ping: 'l'),
    and nothing reaches the route's server or the allowed one."""
    srv, fixed = QwServer(), QwServer()
    try:
        conf = proxy_conf('node', srv.addr, prx_ping_interval='0').replace('127.0.0.1:9',
                                                                          fixed.addr)
        px = h.proxy(config=conf)
        a = (V4, px.ports[0])
        c = QwClient()
        c.send(OOB + b'status 23\n', a)
        data, src = c.recv()
        check(data == OOB + b'n\\*version\\qwfwd slipgate\\hostname\\node\n\x00',
              'status answer: %r' % (data,))
        for ping in (b'k\n', b'k', b'ping'):
            c.send(OOB + ping, a)
            data, src = c.recv()
            check(data == b'l', 'answer to %r: %r' % (ping, data))
        c.close()
        stop_stats(px)
        check(srv.got() == [] and fixed.got() == [],
              'the node relayed a query: %r %r' % (srv.got(), fixed.got()))
    finally:
        srv.close()
        fixed.close()


def case_prx_answers_metric(h):
    """/metrics counts what a node answers itself, by kind
    (slipgate_prx_answers_total): challenge requests, pingstatus, status
    and pings."""
    import urllib.request
    srv = QwServer()
    try:
        conf = 'http 127.0.0.1:$P1\n' + proxy_conf('node', srv.addr, prx_ping_interval='0')
        px = h.proxy(config=conf)
        a = (V4, px.ports[0])
        c = QwClient()
        want = {'challenge': 2, 'pingstatus': 3, 'status': 1, 'ping': 2}
        for query, n in ((b'getchallenge\n', 2), (b'pingstatus', 3), (b'status 23\n', 1),
                         (b'k\n', 2)):
            for _ in range(n):
                c.send(OOB + query, a)
                data, src = c.recv()
                check(data is not None, 'no answer to %r' % query)
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % px.ports[1],
                                    timeout=5) as r:
            text = r.read().decode()
        got = {}
        for line in text.splitlines():
            m = re.match(r'slipgate_prx_answers_total\{route="node",kind="(\w+)"\} (\d+)$', line)
            if m:
                got[m.group(1)] = int(m.group(2))
        check(got == want, 'slipgate_prx_answers_total %r, expected %r' % (got, want))
        c.close()
        stop_stats(px)
    finally:
        srv.close()


def case_prx_allow_file(h):
    """prx_allow_file: a bad line is named by file and line; SIGHUP reads
    the file again, and a destination added there becomes reachable."""
    srv, other = QwServer(), QwServer()
    try:
        path = h.path('allow.txt')
        with open(path, 'w') as f:
            f.write('# servers\n%s\nnot-an-address\n' % srv.addr)
        bad = h.proxy(config=proxy_conf('a', srv.addr, prx_allow_file=path), ready=False,
                      name='bad')
        rc = bad.wait_exit(5)
        check(rc not in (None, 0), 'slipgate started with a bad allow-list line (%r)' % rc)
        check(bad.wait_for_log(re.escape(path) + r':3: .*not-an-address', 5),
              'the bad line is not named by file:line')
        with open(path, 'w') as f:
            f.write('%s\n' % srv.addr)
        px = h.proxy(config=proxy_conf('a', srv.addr, prx_allow_file=path))
        a = (V4, px.ports[0])
        c = QwClient()
        data, _ = c.connect(a, '\\name\\x\\prx\\%s' % other.addr)
        check(data is not None and b'not a destination' in data, 'not refused: %r' % data)
        c.close()
        with open(path, 'w') as f:
            f.write('%s\n%s\n' % (srv.addr, other.addr))
        mark = px.log_mark()
        px.send_signal(signal.SIGHUP)
        check(px.wait_for_log(r'prx allow-list reloaded \(3 entries\)', 5, start=mark),
              'no reload of the allow-list')
        c = QwClient()
        data, _ = c.connect(a, '\\name\\x\\prx\\%s' % other.addr)
        check(data == OOB + b'j', 'the added destination is not reachable: %r' % data)
        c.close()
        stop_stats(px)
    finally:
        srv.close()
        other.close()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
