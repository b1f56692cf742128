#!/usr/bin/env python3
"""Loopback tests: a filter is never passed by how a datagram is packed
(issue 25 item 1), and `undecodable drop` (the fail-closed choice for what
does not decode).  Scripted peers on 127.0.0.1 around the real binary: the
"server" is a plain UDP socket that learns the session's upstream address
from the client's connect and then sends what the case needs.

    qw_padded        QuakeWorld: 1 030 clc_nop then clc_stringcmd
                     "say forbidden" (1 055 bytes, what mvdsv accepts) under
                     `filter drop { match "forbidden"; direction to_server }`:
                     the command never reaches the server (the rest does)
    q2_padded        Quake 2 (34): 5 000 clc_nop then the same command: the
                     same
    nq_padded        NetQuake: 5 000 clc_nop then the same command: the same
    q2_zpackets      Quake 2 (35) under `reencode always`: a server datagram
                     of four zpackets whose contents (30 000 svc_nop each)
                     are 120 000 messages arrives whole and byte-identical
                     (not cut to the first ones), with 0 decode errors
    q2_zpool_drop    five zpackets of 32 KiB each, more than the decoder
                     holds: an error, not a shorter list; relayed as it came
                     under `reencode always` with `undecodable relay` (the
                     default), dropped with `undecodable drop` and counted as
                     drops.undecodable (also in /metrics' reason label
                     through the same table)
    qw_undecoded_drop  QuakeWorld: a client datagram with an FTE voice
                     message (an extension slipgate relays as raw bytes, so
                     a command behind it would be unseen) and one with an
                     opcode nobody knows are dropped under `undecodable drop`
                     (drops.undecodable 2); a plain one passes
    nq_undecodable_drop  NetQuake: an unknown client opcode: relayed by
                     default, dropped and counted under `undecodable drop`
    q3_undecodable_drop  Quake 3: a client datagram that does not decode
                     (no gamestate seen: its keys are unknown): the same

Only 127.0.0.1; every wait bounded; processes killed by PID.  Exit 0 pass,
1 fail, 77 skip.
"""

import os
import struct
import sys
import zlib

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

from harness import V4, Fail, check, main  # noqa: E402

OOB = b'\xff\xff\xff\xff'
WAIT = 2.0


def recv_upto(sock, timeout, what):
    sock.settimeout(timeout)
    try:
        return sock.recvfrom(65536)
    except OSError:
        raise Fail('nothing arrived: %s' % what)
    finally:
        sock.setblocking(False)


def silent(sock, timeout):
    """True when nothing arrives at `sock` within `timeout` s."""
    sock.settimeout(timeout)
    try:
        sock.recvfrom(65536)
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(False)


class Game:
    """slipgate with one route (`protocol`, extra route lines `conf`)
    between a client socket and a scripted server socket."""

    def __init__(self, h, protocol, conf=''):
        self.h = h
        self.srv = h.udp_socket(V4)
        self.protocol = protocol
        self.px = h.proxy(config='route main {\n'
                          '    listen 127.0.0.1:$P0\n'
                          '    server 127.0.0.1:%d\n'
                          '    protocol %s\n'
                          '    new_sessions_per_source 1000\n'
                          '%s\n}\n' % (self.srv.getsockname()[1], protocol, conf))
        self.dest = (V4, self.px.ports[0])
        self.client = h.client(V4)
        self.up = None

    def connect(self, request, answer, same=None):
        """The client's connectionless `request`; the server answers `answer`
        (the client sees it, or its first `same` bytes: a NetQuake accept's
        port is slipgate's)."""
        self.client.send(request, self.dest)
        data, self.up = recv_upto(self.srv, WAIT, 'the connect at the server')
        check(data == request, 'the server got %r, expected the connect' % data[:60])
        self.srv.sendto(answer, self.up)
        got = self.client.recv_one(WAIT)
        check(got is not None and got[0][:same] == answer[:same], 'the answer did not reach the client: %r'
              % (got,))

    def to_server(self, data):
        """Send `data` from the client; what the server got (or None)."""
        self.client.send(data, self.dest)
        self.srv.settimeout(WAIT)
        try:
            got, src = self.srv.recvfrom(65536)
        except OSError:
            return None
        finally:
            self.srv.setblocking(False)
        check(src == self.up, 'from %s, not the session\'s upstream socket %s' % (src, self.up))
        return got

    def to_client(self, data):
        """Send `data` from the server; what the client got (or None)."""
        self.srv.sendto(data, self.up)
        got = self.client.recv_one(WAIT)
        return got[0] if got else None

    def stop(self):
        rc = self.px.stop()
        check(rc == 0, 'slipgate exited with %d' % rc)
        st = self.px.stats()
        for r in st['routes']:
            if r.get('name') == 'main':
                return r
        raise Fail('no route "main" in --stats: %r' % st)


def session(route):
    s = [x for x in route['sessions'] if x.get('decode')]
    check(len(s) == 1, 'expected one decoded session: %r' % route['sessions'])
    return s[0]


DROP_FORBIDDEN = ('    filter drop {\n'
                  '        match "forbidden"\n'
                  '        direction to_server\n'
                  '    }')


def padded(g, header, nop, stringcmd, n):
    """`n` nops then `stringcmd "say forbidden"`, then a plain say: the
    first reaches the server without the command, the second whole."""
    dgram = header(1) + nop * n + stringcmd + b'say forbidden\0'
    got = g.to_server(dgram)
    check(got is not None, 'the padded datagram did not reach the server (only its command '
          'should have been removed)')
    check(b'forbidden' not in got, 'the filter was passed: the server got "say forbidden" '
          'behind %d nops (%d bytes)' % (n, len(dgram)))
    check(got.startswith(header(1)[:4]) and got.count(nop) >= n,
          'the rest of the datagram did not arrive: %d bytes' % len(got))
    plain = header(2) + stringcmd + b'say allowed\0'
    got = g.to_server(plain)
    check(got == plain, 'a plain command changed: %r' % (got,))
    r = g.stop()
    s = session(r)
    check(s['decode']['errors'] == 0, 'decode errors: %r' % s['decode'])
    print('%s: %d nops and "say forbidden" (%d bytes): the command was removed, the rest '
          'went on' % (g.protocol, n, len(dgram)))


def qw_connect(g):
    g.connect(OOB + b'connect 28 4242 1234 "\\name\\p"\n', OOB + b'j')


def qw_header(seq):
    return struct.pack('<IIH', seq, 0, 4242)


def case_qw_padded(h):
    g = Game(h, 'qw', DROP_FORBIDDEN)
    qw_connect(g)
    padded(g, qw_header, b'\x01', b'\x04', 1030)


def q2_header(seq):
    return struct.pack('<IIH', seq, 0, 1000)


def case_q2_padded(h):
    g = Game(h, 'q2', DROP_FORBIDDEN)
    g.connect(OOB + b'connect 34 1000 99 "\\name\\x"\n', OOB + b'client_connect')
    padded(g, q2_header, b'\x01', b'\x04', 5000)


def nq_header(seq, body_len):
    return struct.pack('>II', 0x00100000 | (8 + body_len), seq)


def nq_connect(g):
    """CCREQ_CONNECT; the accept names the server's own port (no move)."""
    g.connect(struct.pack('>I', 0x80000000 | 12) + b'\x01QUAKE\x00\x03',
              struct.pack('>I', 0x80000000 | 9) + b'\x81'
              + struct.pack('<I', g.srv.getsockname()[1]), same=5)


def case_nq_padded(h):
    g = Game(h, 'nq', DROP_FORBIDDEN)
    nq_connect(g)
    n = 5000
    body = b'\x01' * n + b'\x04say forbidden\0'
    got = g.to_server(nq_header(1, len(body)) + body)
    check(got is not None, 'the padded datagram did not reach the server')
    check(b'forbidden' not in got, 'the filter was passed: the server got "say forbidden" '
          'behind %d nops' % n)
    check(got.count(b'\x01') >= n, 'the nops did not arrive: %d bytes' % len(got))
    body = b'\x04say allowed\0'
    plain = nq_header(2, len(body)) + body
    check(g.to_server(plain) == plain, 'a plain command changed')
    s = session(g.stop())
    check(s['decode']['errors'] == 0, 'decode errors: %r' % s['decode'])
    print('nq: %d nops and "say forbidden": the command was removed, the rest went on' % n)


def zpacket(contents):
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = z.compress(contents) + z.flush()
    return b'\x15' + struct.pack('<HH', len(packed), len(contents)) + packed


def q2_35(g):
    g.connect(OOB + b'connect 35 17 99 "\\name\\x" 1400\n', OOB + b'client_connect')


def case_q2_zpackets(h):
    g = Game(h, 'q2', '    reencode always')
    q2_35(g)
    body = b''.join(zpacket(b'\x06' * 30000) for _ in range(4))
    dgram = struct.pack('<II', 1, 0) + body
    got = g.to_client(dgram)
    check(got is not None, 'the zpackets did not reach the client')
    check(got == dgram, 'the client got %d bytes, the server sent %d (%d of 4 zpackets): the '
          'rebuild cut the datagram' % (len(got), len(dgram), got.count(zpacket(b'\x06' * 30000))))
    s = session(g.stop())
    check(s['decode']['errors'] == 0, 'decode errors: %r' % s['decode'])
    check(s['decode']['reencoded'] >= 1, 'not rebuilt: %r' % s['decode'])
    print('q2: four zpackets of 30 000 svc_nop (%d bytes) rebuilt whole, byte-identical'
          % len(dgram))


def zpool_case(h, conf):
    g = Game(h, 'q2', '    reencode always\n' + conf)
    q2_35(g)
    dgram = struct.pack('<II', 1, 0) + b''.join(zpacket(b'\x06' * 32768) for _ in range(5))
    got = g.to_client(dgram)
    ok = struct.pack('<II', 2, 0) + b'\x06\x06'
    check(g.to_client(ok) == ok, 'a plain server datagram after it did not pass whole')
    s = session(g.stop())
    return got, dgram, s


def case_q2_zpool_drop(h):
    got, dgram, s = zpool_case(h, '')
    check(got == dgram, 'with `undecodable relay` the client got %r bytes, expected the %d '
          'the server sent, as they came' % (got and len(got), len(dgram)))
    check(s['decode']['errors'] == 1, 'decode errors %r, expected 1 (too big)' % s['decode'])
    check(s['counters']['drops'].get('undecodable') == 0, 'drops: %r' % s['counters'])
    got, dgram, s = zpool_case(h, '    undecodable drop')
    check(got is None, 'with `undecodable drop` the client got %d bytes' % len(got or b''))
    check(s['counters']['drops'].get('undecodable') == 1,
          'drops.undecodable %r, expected 1' % s['counters']['drops'])
    print('q2: five 32 KiB zpackets: an error, relayed as they came by default, dropped and '
          'counted under `undecodable drop`')


def case_qw_undecoded_drop(h):
    g = Game(h, 'qw', '    undecodable drop\n' + DROP_FORBIDDEN)
    qw_connect(g)
    # FTE voice chat (clc 83): relayed as raw bytes, so "say forbidden" behind it is unseen.
    voice = qw_header(1) + b'\x53' + b'\x00\x03\x00abc' + b'\x04say forbidden\0'
    check(g.to_server(voice) is None, 'a datagram with an undecoded part reached the server')
    bad = qw_header(2) + b'\xee\x01\x02'
    check(g.to_server(bad) is None, 'an undecodable datagram reached the server')
    plain = qw_header(3) + b'\x04say allowed\0'
    check(g.to_server(plain) == plain, 'a plain datagram did not pass whole')
    s = session(g.stop())
    check(s['counters']['drops'].get('undecodable') == 2,
          'drops.undecodable %r, expected 2' % s['counters']['drops'])
    print('qw: an undecoded extension and an unknown opcode dropped and counted; the rest passes')


def case_nq_undecodable_drop(h):
    for conf, want in (('', 0), ('    undecodable drop', 1)):
        g = Game(h, 'nq', conf)
        nq_connect(g)
        body = b'\x01\x7f\x00\x00'
        bad = nq_header(1, len(body)) + body
        got = g.to_server(bad)
        check((got == bad) if want == 0 else (got is None),
              '%s: the undecodable datagram %s' % (conf.strip() or 'default',
                                                   'was dropped' if want == 0 else 'passed'))
        body = b'\x04say allowed\0'
        plain = nq_header(2, len(body)) + body
        check(g.to_server(plain) == plain, 'a plain datagram did not pass whole')
        s = session(g.stop())
        check(s['counters']['drops'].get('undecodable') == want,
              'drops.undecodable %r, expected %d' % (s['counters']['drops'], want))
    print('nq: an unknown opcode relayed by default, dropped and counted under '
          '`undecodable drop`')


def case_q3_undecodable_drop(h):
    for conf, want in (('', 0), ('    undecodable drop', 1)):
        g = Game(h, 'q3', conf)
        g.connect(OOB + b'connect "\\qport\\1234\\challenge\\5\\protocol\\68"',
                  OOB + b'connectResponse 5')
        bad = struct.pack('<IH', 1, 1234) + bytes(range(7, 47))
        got = g.to_server(bad)
        check((got == bad) if want == 0 else (got is None),
              '%s: the undecodable datagram %s' % (conf.strip() or 'default',
                                                   'was dropped' if want == 0 else 'passed'))
        r = g.stop()
        s = [x for x in r['sessions'] if x.get('codec') == 'q3']
        check(len(s) == 1, 'expected one q3 session: %r' % r['sessions'])
        check(s[0]['decode']['errors'] >= 1, 'no decode error: %r' % s[0]['decode'])
        check(s[0]['counters']['drops'].get('undecodable') == want,
              'drops.undecodable %r, expected %d' % (s[0]['counters']['drops'], want))
    print('q3: a datagram that does not decode relayed by default, dropped and counted under '
          '`undecodable drop`')


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
