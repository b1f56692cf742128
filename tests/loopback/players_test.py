#!/usr/bin/env python3
"""Loopback tests of what the admin page shows of each player: the name
(NetQuake, Quake 2), the netchan's loss and the ping slipgate times from the
traffic (QuakeWorld, NetQuake), between scripted clients and servers.

Run one case:  SLIPGATE=build/proxy/slipgate tests/loopback/players_test.py CASE
"""
import json
import os
import socket
import struct
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import V4, Fail, check, main  # noqa: E402
from relay_test import nq_control, recv_from, route_block, stop_ok  # noqa: E402

OOB = b'\xff\xff\xff\xff'
TOP = 'http 127.0.0.1:$P1\n'


def get_json(port, path):
    with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=5) as r:
        return json.loads(r.read().decode())


def player(px):
    """The one player of /api/players, and its /api/sessions entry."""
    pl = get_json(px.ports[1], '/api/players')['players']
    check(len(pl) == 1, '/api/players: %r' % pl)
    ss = [s for s in get_json(px.ports[1], '/api/sessions')['sessions']
          if s['id'] == pl[0]['session']]
    check(len(ss) == 1, '/api/sessions has no session %d' % pl[0]['session'])
    return pl[0], ss[0]


def wait_name(px, want, what):
    deadline = time.monotonic() + 3
    while True:
        p, s = player(px)
        if p.get('name') == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check(p.get('name') == want and s.get('player') == want,
          '%s: /api/players name %r, /api/sessions player %r, expected %r'
          % (what, p.get('name'), s.get('player'), want))


def metric(port, name, **labels):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=5) as r:
        text = r.read().decode()
    want = ','.join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + '{'):
            got = ','.join(sorted(line[len(name) + 1:line.index('}')].split(',')))
            if got == want:
                return float(line.rsplit(' ', 1)[1])
    raise Fail('no %s{%s} in /metrics' % (name, want))


# ---- NetQuake ----

NQ_DATA, NQ_ACK, NQ_EOM, NQ_UNREL = 0x00010000, 0x00020000, 0x00080000, 0x00100000


def nq(flags, seq, body=b''):
    return struct.pack('>II', flags | (8 + len(body)), seq) + body


def nq_session(h):
    """A scripted NetQuake connect through slipgate: (proxy, client, dest,
    the server's game socket, the upstream address it talks to)."""
    lobby, game = h.udp_socket(V4), h.udp_socket(V4)
    px = h.proxy(config=TOP + route_block('nq', '127.0.0.1:$P0', '127.0.0.1:%d'
                                          % lobby.getsockname()[1], protocol='nq'))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    c.send(nq_control(b'\x01QUAKE\x00\x03'), dest)
    _, up = recv_from(lobby, 2.0, 'the connect request at the server')
    lobby.sendto(nq_control(b'\x81' + struct.pack('<I', game.getsockname()[1])), up)
    check(c.recv_one(2.0) is not None, 'the accept did not reach the client')
    return px, c, dest, game, up


def case_names_nq(h):
    """NetQuake: the player's name is the client's `name` command (a
    clc_stringcmd in a reliable message), quoted or not, the latest one."""
    px, c, dest, game, up = nq_session(h)
    for seq, cmd, want in [(0, b'name "Ranger"\n', 'Ranger'), (1, b'name Bob the Slayer\n',
                                                                'Bob the Slayer')]:
        c.send(nq(NQ_DATA | NQ_EOM, seq, b'\x04' + cmd + b'\x00'), dest)
        recv_from(game, 2.0, 'the name command at the server')
        wait_name(px, want, 'after %r' % cmd)
    stop_ok(px)
    print('NetQuake names: Ranger, then Bob the Slayer')


def case_ping_nq(h):
    """NetQuake: the ping is the reliable round trips slipgate sees (a
    server's reliable piece until the client's ACK, 120 ms here, and a
    client's until the server's, 60 ms); unreliable datagrams skipped by
    the server count as lost s2c."""
    px, c, dest, game, up = nq_session(h)
    game.setblocking(True)
    for seq in range(4):
        # The client's reliable piece; the server acknowledges it 60 ms later.
        c.send(nq(NQ_DATA | NQ_EOM, seq, b'\x01'), dest)
        recv_from(game, 2.0, 'the client\'s reliable piece')
        time.sleep(0.06)
        game.sendto(nq(NQ_ACK, seq), up)
        # The server's reliable piece; the client acknowledges it 120 ms later.
        game.sendto(nq(NQ_DATA | NQ_EOM, seq, b'\x08hi\n\x00'), up)
        got = [c.recv_one(2.0) for _ in range(2)]  # the ACK, then the piece
        check(got[1] is not None and got[1][0][:4] == struct.pack('>I', NQ_DATA | NQ_EOM | 13),
              'the server\'s reliable piece did not reach the client: %r' % (got,))
        time.sleep(0.12)  # the client's own delay before it acknowledges
        c.send(nq(NQ_ACK, seq), dest)
        recv_from(game, 2.0, 'the client\'s ACK')
    # Unreliable datagrams 0, 1, 3, 4: one lost on the way to slipgate.
    for seq in (0, 1, 3, 4):
        game.sendto(nq(NQ_UNREL, seq, b'\x01'), up)
    check(len(c.recv(0.3)) == 4, 'the unreliable datagrams did not all arrive')
    p, s = player(px)
    rtt = s.get('rtt_ms') or {}
    check(rtt.get('client') is not None and 110 <= rtt['client'] <= 900,
          'client leg %r ms, expected about 120' % rtt.get('client'))
    check(rtt.get('server') is not None and 55 <= rtt['server'] <= 900,
          'server leg %r ms, expected about 60' % rtt.get('server'))
    check(p.get('ping_ms') == s.get('ping_ms') == rtt['client'] + rtt['server'],
          '/api/players ping %r, /api/sessions %r, legs %r' % (p.get('ping_ms'),
                                                               s.get('ping_ms'), rtt))
    check(p.get('lost') == s.get('lost') == {'c2s': 0, 's2c': 1} and
          p['sequenced']['s2c'] == 4, 'loss %r of %r, expected 1 s2c of 4'
          % (p.get('lost'), p.get('sequenced')))
    check(metric(px.ports[1], 'slipgate_rtt_seconds_count', route='nq', leg='client') == 4,
          'slipgate_rtt_seconds_count{leg=client}')
    stop_ok(px)
    print('NetQuake ping %d ms (legs %r), loss %r' % (p['ping_ms'], rtt, p['lost']))


# ---- QuakeWorld ----

def case_ping_qw(h):
    """QuakeWorld: the ping is the netchan's round trips (a server datagram
    until the client's datagram acknowledging its sequence: 100 ms here;
    a client datagram until the server's: 50 ms), on the page's API and in
    /metrics; a sequence the server skipped counts as lost s2c."""
    srv = h.udp_socket(V4)
    px = h.proxy(config=TOP + route_block('qw', '127.0.0.1:$P0', '127.0.0.1:%d'
                                          % srv.getsockname()[1], protocol='qw'))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    c.send(OOB + b'connect 28 1234 5678 "\\name\\Spike"\n', dest)
    _, up = recv_from(srv, 2.0, 'the connect at the server')
    srv.sendto(OOB + b'j', up)
    check(c.recv_one(2.0) is not None, 'no accept through slipgate')
    srv.setblocking(True)
    cseq, sseq = 0, 0
    for k in range(6):
        sseq += 2 if k == 3 else 1  # one server sequence never sent: lost
        srv.sendto(struct.pack('<II', sseq, cseq) + b'\x01', up)
        check(c.recv_one(2.0) is not None, 'the server datagram did not arrive')
        time.sleep(0.1)
        cseq += 1
        c.send(struct.pack('<IIH', cseq, sseq, 1234) + b'\x01', dest)
        recv_from(srv, 2.0, 'the client datagram')
        time.sleep(0.05)
    srv.sendto(struct.pack('<II', sseq + 1, cseq) + b'\x01', up)
    check(c.recv_one(2.0) is not None, 'the last server datagram did not arrive')
    p, s = player(px)
    rtt = s.get('rtt_ms') or {}
    check(rtt.get('client') is not None and 95 <= rtt['client'] <= 900,
          'client leg %r ms, expected about 100' % rtt.get('client'))
    check(rtt.get('server') is not None and 45 <= rtt['server'] <= 900,
          'server leg %r ms, expected about 50' % rtt.get('server'))
    check(p.get('ping_ms') == rtt['client'] + rtt['server'], '/api/players ping %r, legs %r'
          % (p.get('ping_ms'), rtt))
    check(p.get('name') == 'Spike', 'name %r' % p.get('name'))
    check(p.get('lost') == {'c2s': 0, 's2c': 1}, 'loss %r, expected 1 s2c' % p.get('lost'))
    n = metric(px.ports[1], 'slipgate_rtt_seconds_count', route='qw', leg='client')
    total = metric(px.ports[1], 'slipgate_rtt_seconds_sum', route='qw', leg='client')
    check(n == 6 and 0.095 * n <= total <= 0.9 * n, 'client leg metric: %r samples, %r s'
          % (n, total))
    stop_ok(px)
    print('QuakeWorld ping %d ms (legs %r), loss %r' % (p['ping_ms'], rtt, p['lost']))


# ---- Quake 2 ----

def case_names_q2(h):
    """Quake 2: the player's name is the connect's userinfo name, then a
    clc_userinfo's; a client sequence skipped counts as lost c2s, and the
    netchan's round trips give a ping."""
    srv = h.udp_socket(V4)
    px = h.proxy(config=TOP + route_block('q2', '127.0.0.1:$P0', '127.0.0.1:%d'
                                          % srv.getsockname()[1], protocol='q2'))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    c.send(OOB + b'connect 34 1234 5678 "\\name\\Grunt\\skin\\male/grunt"\n', dest)
    _, up = recv_from(srv, 2.0, 'the connect at the server')
    srv.sendto(OOB + b'client_connect', up)
    check(c.recv_one(2.0) is not None, 'no client_connect through slipgate')
    wait_name(px, 'Grunt', 'the connect')
    # The server's datagram 1; the client acknowledges it in datagram 1,
    # skips 2, sends its new userinfo in 3.
    srv.sendto(struct.pack('<II', 1, 0) + b'\x06', up)  # svc_nop
    check(c.recv_one(2.0) is not None, 'the server datagram did not arrive')
    time.sleep(0.05)
    c.send(struct.pack('<IIH', 1, 1, 1234) + b'\x01', dest)
    recv_from(srv, 2.0, 'the client datagram 1')
    c.send(struct.pack('<IIH', 3, 1, 1234) + b'\x03\\name\\Tank\\skin\\male/grunt\x00', dest)
    recv_from(srv, 2.0, 'the client datagram 3')
    wait_name(px, 'Tank', 'the clc_userinfo')
    p, s = player(px)
    check(p.get('lost') == {'c2s': 1, 's2c': 0}, 'loss %r, expected 1 c2s' % p.get('lost'))
    check(s['rtt_ms']['client'] is not None and s['rtt_ms']['client'] >= 45 and
          p.get('ping_ms') is not None, 'ping %r, legs %r' % (p.get('ping_ms'), s['rtt_ms']))
    stop_ok(px)
    print('Quake 2 names: Grunt, then Tank; loss %r; ping %r' % (p['lost'], p['ping_ms']))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
