#!/usr/bin/env python3
"""Master servers (`master HOST:PORT`) against a scripted master and server.

  master_test.py CASE          (SLIPGATE names the binary)

The scripted master is a UDP socket on 127.0.0.1 (or ::1) that records every
datagram with its time and source; the scripted game server answers the
game's status query (and, for the level cases, a client's first datagram
with a serverdata message) as the protocol facts say:

- Quake 3: "\\xff\\xff\\xff\\xffheartbeat QuakeArena-1\\n" (ioquake3
  sv_main.c), sent again at shutdown; the master's "getinfo CHALLENGE" is
  answered by the server's infoResponse, through slipgate.
- QuakeWorld: "a\\n<sequence>\\n<players>\\n" (mvdsv sv_master.c), the players
  counted from the server's status answer; "C\\n" at shutdown.
- Quake 2: "\\xff\\xff\\xff\\xffheartbeat\\n" + the server's status text
  (Quake 2 sv_main.c, Master_Heartbeat); "\\xff\\xff\\xff\\xffshutdown".

Every heartbeat must come from slipgate's listening address and port (that
is what the master lists).  Datagrams go only to 127.0.0.1 / ::1; loops are
bounded in count and time.
"""
import os
import signal
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fail, check, free_port, main, require_ipv6  # noqa: E402

OOB = b'\xff\xff\xff\xff'


class Peer:
    """A UDP socket that records (time, data, source) and answers with `answer(data, src)`."""

    def __init__(self, host='127.0.0.1', answer=None):
        fam = socket.AF_INET6 if ':' in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.05)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.got = []
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        for _ in range(1200):  # bounded: 1200 x 0.05 s at most
            if self.stop.is_set():
                return
            try:
                data, src = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.cond:
                self.got.append((time.monotonic(), data, src))
                self.cond.notify_all()
            if self.answer:
                for reply in self.answer(data, src) or []:
                    self.sock.sendto(reply, src)

    def wait(self, pred, n=1, timeout=5.0):
        """The first `n` datagrams for which pred(data) holds, waiting up to `timeout`."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [g for g in self.got if pred(g[1])]
                if len(hits) >= n or time.monotonic() >= end:
                    return hits
                self.cond.wait(max(0.0, end - time.monotonic()))

    def send(self, data, dest):
        self.sock.sendto(data, dest)

    def close(self):
        self.stop.set()
        self.thread.join(2.0)
        self.sock.close()


def addr(host, port):
    return '[%s]:%d' % (host, port) if ':' in host else '%s:%d' % (host, port)


def route(h, server, master, protocol, extra='', listen='127.0.0.1'):
    lst = '[%s]:$P0' % listen if ':' in listen else '%s:$P0' % listen
    conf = ('route m {\n  listen %s\n  server %s\n  protocol %s\n  master %s\n%s}\n'
            % (lst, addr(server.host, server.port), protocol, addr(master.host, master.port),
               extra))
    p = h.proxy(conf)
    return p, p.ports[0]


def from_listener(hits, port):
    return all(src[1] == port for _, _, src in hits)


# ---- Quake 3 ---------------------------------------------------------

Q3_HB = OOB + b'heartbeat QuakeArena-1\n'


def q3_server(data, src):
    if data.startswith(OOB + b'getinfo '):
        ch = data[len(OOB) + 8:].strip()
        return [OOB + b'infoResponse\n\\challenge\\' + ch + b'\\hostname\\scripted'
                b'\\clients\\0\\sv_maxclients\\8\\protocol\\68\\gamename\\Quake3Arena']
    return []


def case_master_q3(h, host='127.0.0.1'):
    """A Quake 3 route heartbeats its master from the listening port at start,
    the master's getinfo reaches the server through slipgate and the answer
    comes back to the master from the same port; the session it opened ends
    on the handshake timeout; at shutdown the heartbeat goes again."""
    server = Peer(host, q3_server)
    master = Peer(host)
    try:
        p, port = route(h, server, master, 'q3', '  handshake_timeout 1s\n', listen=host)
        hb = master.wait(lambda d: d == Q3_HB)
        check(hb, 'no "heartbeat QuakeArena-1" reached the master: %r' % master.got[:5])
        check(from_listener(hb, port),
              'the heartbeat did not come from the listening port %d: %r' % (port, hb))
        # The master asks, as dpmaster does, at the heartbeat's source.
        master.send(OOB + b'getinfo abc123', hb[0][2][:2])
        info = master.wait(lambda d: d.startswith(OOB + b'infoResponse'))
        check(info and b'\\challenge\\abc123' in info[0][1],
              'the infoResponse with the challenge did not come back: %r' % master.got)
        check(from_listener(info, port), 'the infoResponse came from another port: %r' % info)
        # The query's session is not a player's: it ends on the handshake
        # timeout (and a full table would end it first for a newcomer).
        check(p.wait_for_log(r'session end reason=handshake timeout', 3.0),
              'the master query\'s session did not end on the handshake timeout')
        n = len(master.got)
        p.stop()
        bye = master.wait(lambda d: d == Q3_HB, n=2, timeout=3.0)
        check(len(bye) == 2 and len(master.got) > n, 'no heartbeat at shutdown: %r' % master.got)
    finally:
        server.close()
        master.close()


def case_master_q3_v6(h):
    """The same on ::1 (an IPv6 listener and master)."""
    require_ipv6()
    case_master_q3(h, '::1')


# ---- QuakeWorld ------------------------------------------------------

QW_STATUS = (OOB + b'n\\hostname\\scripted\\map\\e1m1\\maxclients\\8\n'
             b'1 0 10 30 "alice" "" 0 0\n2 0 12 25 "bob" "" 4 4\n')


def qw_serverdata(seq, level):
    msg = bytes([11]) + struct.pack('<ii', 28, 7) + b'qw\0' + bytes([0]) + level + b'\0'
    msg += struct.pack('<10f', 800, 100, 320, 500, 10, 10, 10, 4, 4, 1)
    return struct.pack('<II', seq | 0x80000000, 1) + msg


class QwServer:
    """Answers "status" with QW_STATUS; answers each sequenced client datagram
    with the next level's serverdata."""

    def __init__(self, levels):
        self.levels = list(levels)
        self.seq = 0

    def __call__(self, data, src):
        if data == OOB + b'status\n':
            return [QW_STATUS]
        if not data.startswith(OOB) and self.levels:
            self.seq += 1
            return [qw_serverdata(self.seq, self.levels.pop(0))]
        return []


def case_master_qw(h):
    """QuakeWorld: "a\\nSEQ\\nPLAYERS\\n" from the listening port at start and
    every master_interval, the players from the server's status answer; the
    master's status query is relayed and answered; "C\\n" at shutdown."""
    server = Peer('127.0.0.1', QwServer([]))
    master = Peer('127.0.0.1')
    try:
        p, port = route(h, server, master, 'qw', '  master_interval 1s\n')
        hb = master.wait(lambda d: d.startswith(b'a\n'), n=2, timeout=4.0)
        check(len(hb) == 2, 'two heartbeats did not come within 4 s: %r' % master.got)
        if len(hb) == 2:
            check(hb[0][1] == b'a\n1\n2\n' and hb[1][1] == b'a\n2\n2\n',
                  'heartbeats are not a\\nSEQ\\n2\\n: %r' % [x[1] for x in hb])
            gap = hb[1][0] - hb[0][0]
            check(0.7 <= gap <= 2.0, 'heartbeats %.2f s apart, not master_interval 1s' % gap)
        check(from_listener(hb, port), 'a heartbeat came from another port: %r' % hb)
        master.send(OOB + b'status\n', ('127.0.0.1', port))
        st = master.wait(lambda d: d == QW_STATUS)
        check(st and from_listener(st, port), 'the status answer did not reach the master')
        p.stop()
        check(master.wait(lambda d: d == b'C\n', timeout=3.0), 'no "C\\n" at shutdown')
    finally:
        server.close()
        master.close()


def case_master_qw_level(h):
    """A level change the server announces to a player sends a heartbeat at
    once (the interval is long); the first level seen does not."""
    server = Peer('127.0.0.1', QwServer([b'e1m1', b'e1m2']))
    master = Peer('127.0.0.1')
    client = Peer('127.0.0.1')
    try:
        p, port = route(h, server, master, 'qw', '  master_interval 10m\n')
        check(master.wait(lambda d: d.startswith(b'a\n')), 'no heartbeat at start')
        hdr = struct.pack('<IIH', 1, 0, 1234)
        client.send(hdr + b'\x01', ('127.0.0.1', port))  # clc_nop
        check(client.wait(lambda d: b'e1m1' in d), 'the first serverdata was not relayed')
        time.sleep(0.3)  # a heartbeat for the first level would be here by now
        check(len(master.wait(lambda d: d.startswith(b'a\n'), n=2, timeout=0.0)) == 1,
              'the first level seen sent a heartbeat: %r' % master.got)
        client.send(struct.pack('<IIH', 2, 1, 1234) + b'\x01', ('127.0.0.1', port))
        check(client.wait(lambda d: b'e1m2' in d), 'the second serverdata was not relayed')
        hb = master.wait(lambda d: d.startswith(b'a\n'), n=2, timeout=3.0)
        check(len(hb) == 2, 'no heartbeat after the level changed: %r' % master.got)
        check(p.alive(), 'slipgate exited')
    finally:
        server.close()
        master.close()
        client.close()


# ---- Quake 2 ---------------------------------------------------------

Q2_BODY = b'\\hostname\\scripted\\mapname\\q2dm1\\maxclients\\8\n0 12 "alice"\n'


def q2_server(data, src):
    if data == OOB + b'status\n':
        return [OOB + b'print\n' + Q2_BODY]
    return []


def case_master_q2(h):
    """Quake 2: "heartbeat\\n" + the server's status text from the listening
    port, every master_interval; the master's status query relayed and
    answered; "shutdown" at shutdown."""
    server = Peer('127.0.0.1', q2_server)
    master = Peer('127.0.0.1')
    try:
        p, port = route(h, server, master, 'q2', '  master_interval 1s\n')
        want = OOB + b'heartbeat\n' + Q2_BODY
        hb = master.wait(lambda d: d.startswith(OOB + b'heartbeat'), n=2, timeout=4.0)
        check(len(hb) == 2 and all(x[1] == want for x in hb),
              'two heartbeats with the status text did not come: %r' % master.got)
        check(from_listener(hb, port), 'a heartbeat came from another port: %r' % hb)
        master.send(OOB + b'status\n', ('127.0.0.1', port))
        st = master.wait(lambda d: d.startswith(OOB + b'print\n'))
        check(st and from_listener(st, port), 'the status answer did not reach the master')
        p.stop()
        check(master.wait(lambda d: d == OOB + b'shutdown', timeout=3.0), 'no shutdown message')
    finally:
        server.close()
        master.close()


def case_master_q2_silent(h):
    """A server that does not answer the status query: no heartbeat (Quake 2's
    carries the status), one warning, and the route keeps relaying."""
    server = Peer('127.0.0.1', lambda d, s: [])
    master = Peer('127.0.0.1')
    try:
        p, port = route(h, server, master, 'q2', '  master_interval 1s\n')
        check(p.wait_for_log(r'did not answer the status query', 4.0), 'no warning')
        time.sleep(1.5)
        check(p.count_log(r'did not answer the status query') == 1, 'the warning repeated')
        check(not master.got, 'a heartbeat went without the status: %r' % master.got)
    finally:
        server.close()
        master.close()


def case_master_drain(h):
    """SIGTERM with drain_timeout: the master gets the shutdown message at
    once, while a player's session goes on, and nothing after it (no second
    one when the route closes)."""
    server = Peer('127.0.0.1', lambda d, s: [OOB + b'print\n' + Q2_BODY]
                  if d == OOB + b'status\n' else [d])
    master = Peer('127.0.0.1')
    player = Peer('127.0.0.1')
    try:
        conf = ('drain_timeout 20s\nroute m {\n  listen 127.0.0.1:$P0\n  server 127.0.0.1:%d\n'
                '  protocol q2\n  master 127.0.0.1:%d\n  handshake_timeout 30s\n'
                '  idle_timeout 2s\n}\n' % (server.port, master.port))
        p = h.proxy(conf)
        port = p.ports[0]
        check(master.wait(lambda d: d.startswith(OOB + b'heartbeat')), 'no heartbeat at start')
        player.send(b'\x01\x00\x00\x00\x00\x00\x00\x00hello', ('127.0.0.1', port))
        check(player.wait(lambda d: d.endswith(b'hello')), 'the player was not relayed')
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        bye = master.wait(lambda d: d == OOB + b'shutdown', timeout=3.0)
        check(bye and p.alive(), 'no shutdown message while draining (alive: %s)' % p.alive())
        check(bye[0][0] - t < 2.0, 'the shutdown message came %.1f s after SIGTERM'
              % (bye[0][0] - t))
        rc = p.wait_exit(10)
        check(rc == 0, 'exit status %s after the drain' % rc)
        check(len(master.wait(lambda d: d == OOB + b'shutdown', n=2, timeout=0.0)) == 1,
              'more than one shutdown message: %r' % master.got)
        check(not [g for g in master.got if g[0] > bye[0][0] and g[1] != OOB + b'shutdown'
                   and g[1].startswith(OOB + b'heartbeat')], 'a heartbeat after the shutdown')
    finally:
        server.close()
        master.close()
        player.close()


# ---- configuration ---------------------------------------------------

def case_master_reload(h):
    """A reload adds a master (a heartbeat goes at once), and one that does
    not resolve is refused with its file and line: the old list stays, and
    the reload's end says so instead of "configuration reloaded"."""
    server = Peer('127.0.0.1', q3_server)
    master = Peer('127.0.0.1')
    try:
        text = ('route m {\n  listen 127.0.0.1:%s\n  server 127.0.0.1:%d\n  protocol q3\n'
                '  master_interval 1s\n%s}\n')
        p = h.proxy(text % ('$P0', server.port, ''))
        port = p.ports[0]
        time.sleep(0.3)
        check(not master.got, 'a heartbeat went to no master')
        p.write_config(text % (port, server.port, '  master 127.0.0.1:%d\n' % master.port))
        p.send_signal(signal.SIGHUP)
        hb = master.wait(lambda d: d == Q3_HB, timeout=3.0)
        check(hb and from_listener(hb, port), 'no heartbeat after the reload added the master')
        mark = p.log_mark()
        p.write_config(text % (port, server.port, '  master nosuchhost.invalid:27950\n'))
        p.send_signal(signal.SIGHUP)
        check(p.wait_for_log(r'\.conf:6:10: cannot resolve master .nosuchhost\.invalid', 5.0,
                             start=mark), 'the reload did not name the master\'s file and line')
        check(p.wait_for_log(r'keeping the old masters', 1.0, start=mark), 'no "keeping"')
        check(p.wait_for_log(r'configuration reloaded in part \(see the errors above\): \[m\] kept '
                             r'the old masters', 2.0, start=mark),
              'the reload\'s end does not say the masters were kept')
        check(p.count_log(r'configuration reloaded$', mark) == 0,
              'a reload that kept the old masters is logged as "configuration reloaded"')
        check(p.count_log(r'cannot resolve master', mark) == 1,
              'the error is not told once: %d times' % p.count_log(r'cannot resolve master', mark))
        n = len(master.got)
        more = master.wait(lambda d: d == Q3_HB, n=n + 2, timeout=4.0)
        check(len(more) >= n + 2, 'the old master got no more heartbeats after the bad reload')
        check(p.alive(), 'slipgate exited on the bad reload')
    finally:
        server.close()
        master.close()


def case_master_config_errors(h):
    """A master that does not resolve stops the start with FILE:LINE:COL; an
    IPv6 master for an IPv4 listener says so; `master` needs a protocol."""
    cfg = h.path('bad.conf')
    lp = free_port()
    with open(cfg, 'w') as f:
        f.write('route m {\n  listen 127.0.0.1:%d\n' % lp + '  server 127.0.0.1:27960\n  protocol q3\n'
                '  master 127.0.0.1:27950 nosuchhost.invalid:27950\n}\n')
    r = h.run(['-c', cfg], timeout=10.0)
    r.stderr = r.stderr.decode(errors='replace')
    check(r.returncode != 0, 'slipgate started with a master that does not resolve')
    check('bad.conf:5:26:' in r.stderr and 'nosuchhost.invalid' in r.stderr,
          'the error does not name the file, line and column: %r' % r.stderr[-800:])
    with open(cfg, 'w') as f:
        f.write('route m {\n  listen 127.0.0.1:%d\n' % lp + '  server 127.0.0.1:27960\n  protocol q3\n'
                '  master [::1]:27950\n}\n')
    r = h.run(['-c', cfg], timeout=10.0)
    r.stderr = r.stderr.decode(errors='replace')
    check(r.returncode != 0 and 'IPv6' in r.stderr and 'bad.conf:5:' in r.stderr,
          'an IPv6 master for an IPv4 listener was not refused clearly: %r' % r.stderr[-800:])
    r = h.run(['--check-config', '-c', cfg], timeout=10.0)
    r.stderr = r.stderr.decode(errors='replace') + r.stdout.decode(errors='replace')
    check(r.returncode != 0 and 'IPv6' in r.stderr and 'bad.conf:5:' in r.stderr,
          '--check-config did not refuse the IPv6 master: %r' % r.stderr[-800:])
    with open(cfg, 'w') as f:
        f.write('route m {\n  server 127.0.0.1:27960\n  master 127.0.0.1:27950\n}\n')
    r = h.run(['--check-config', '-c', cfg], timeout=10.0)
    r.stderr = r.stderr.decode(errors='replace')
    check(r.returncode != 0 and 'bad.conf:3:' in r.stderr and 'protocol' in r.stderr,
          '`master` without a protocol was accepted: %r' % r.stderr[-800:])
    with open(cfg, 'w') as f:
        f.write('route m {\n  server 127.0.0.1:27960\n  protocol qw\n  master 127.0.0.1\n}\n')
    r = h.run(['--check-config', '-c', cfg], timeout=10.0)
    r.stderr = r.stderr.decode(errors='replace')
    check(r.returncode != 0 and 'bad.conf:4:' in r.stderr and 'HOST:PORT' in r.stderr,
          'a master without a port was accepted: %r' % r.stderr[-800:])


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
