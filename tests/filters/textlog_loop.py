#!/usr/bin/env python3
"""Loopback tests of the 'textlog' filter: real Quake 3 captures replayed
through the real slipgate binary (-p q3), the log file read back and
compared with what `slipgate pcap decode` finds in the same capture.

Also holds the helpers the other text-filter loopback tests share
(guard_loop.py, inject_loop.py import this module):

    start_proxy(h, srv, filters)   slipgate with one q3 route and the given
                                   filter blocks, listening on 127.0.0.1
    loose_replay(...)              lock-step replay of a capture's game
                                   session that does not expect byte-identical
                                   output (filters change it); records what
                                   each side received
    write_pcap(path, ...)          the client's view (what the client sent,
                                   what it received) as a classic pcap file
    decode_lines(h, path)          `slipgate pcap decode` of such a file

Everything talks only to 127.0.0.1; every loop is bounded in count and
time; the processes are started by the loopback harness and killed by PID.
Exit 0 pass, 1 fail.
"""

import os
import re
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))
sys.path.insert(0, os.path.join(HERE, '..', 'fault'))
sys.path.insert(0, HERE)

from harness import V4, Fail, check, main  # noqa: E402
import q3cap  # noqa: E402
import fault_test  # noqa: E402  (Replay, ServerSide, UpstreamMap, stop_ok)

WAIT = 3.0
LOG_RE = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) s(\d+) (\S+) (to_client|to_server) '
                    r'(\S+) ?(.*)$')


def capture(name):
    try:
        return q3cap.Capture(name)
    except q3cap.CaptureError as e:
        raise Fail(str(e))  # missing test data fails (scripts/testdata.py)


def start_proxy(h, srv, filters, extra=(), lifetime=90.0):
    """slipgate with one Quake 3 route towards `srv` running `filters` (the
    text of the filter blocks)."""
    conf = ('route main {\n'
            '    listen 127.0.0.1:$P0\n'
            '    server %s\n'
            '    protocol q3\n'
            '    new_sessions_per_source 1000\n'
            '%s\n'
            '}\n' % (srv.addr, filters))
    # -v: the "session start" line naming the upstream port is at debug until the server answers
    return h.proxy(conf, args=['-v'] + list(extra), lifetime=lifetime)


def escape(text):
    """The textlog's escaping of a message text (filters/text.c)."""
    out = []
    for c in text:
        if c == 0x5c:
            out.append('\\\\')
        elif c == 0x0a:
            out.append('\\n')
        elif c == 0x0d:
            out.append('\\r')
        elif c == 0x09:
            out.append('\\t')
        elif c < 0x20 or c > 0x7e:
            out.append('\\x%02x' % c)
        else:
            out.append(chr(c))
    return ''.join(out)


def read_log(path):
    check(os.path.exists(path), 'the text log %s was not created' % path)
    with open(path, encoding='ascii') as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        m = LOG_RE.match(line)
        check(m is not None, 'a text log line is not "TIME sN CLIENT DIRECTION KIND TEXT": %r'
              % line)
        out.append(m.groups())
    return out


class LooseReplay:
    """Plays the game session of a capture through slipgate in capture order,
    lock-step: after each datagram, waits until the other end received
    something (a piece of a fragmented message may be held by slipgate until
    the message is whole, so pieces wait only briefly).  Records what the
    client and the server received, and what the client sent."""

    def __init__(self, h, px, srv, cap, wait=WAIT, pace=0.0):
        self.h, self.px, self.srv, self.cap = h, px, srv, cap
        self.wait = wait
        self.pace = pace
        self.ups = fault_test.UpstreamMap(px)
        self.dest = (V4, px.ports[0])
        self.client = h.client(V4)
        self.upstream = None
        self.to_client = []   # payloads the client received
        self.to_server = []   # payloads the server received
        self.client_sent = []  # (time, payload) sent by the client
        self.events = []      # ('c2s'|'s2c', payload) in the order seen by the client's wire
        self.silent = 0       # datagrams after which nothing arrived

    def _got_client(self, wait):
        r = self.client.recv_one(wait)
        if r is None:
            return False
        self.to_client.append(r[0])
        self.events.append(('s2c', r[0]))
        return True

    def run(self, limit=None):
        dgrams = [d for d in self.cap.dgrams if d.client == self.cap.game_client]
        if limit:
            dgrams = dgrams[:limit]
        t0 = time.monotonic()
        for d in dgrams:
            if not self.px.alive():
                raise Fail('slipgate exited during the replay, at %r' % (d,))
            if self.pace:
                lag = t0 + d.ts * self.pace - time.monotonic()
                if lag > 0:
                    time.sleep(min(lag, 1.0))
            partial = q3cap.is_partial(d.payload, d.c2s, self.cap.checksum)
            wait = 0.2 if partial else self.wait
            if d.c2s:
                self.client.send(d.payload, self.dest)
                self.client_sent.append(d.payload)
                self.events.append(('c2s', d.payload))
                if self.upstream is None:
                    self.upstream = self.ups.get(self.client.port, timeout=self.wait)
                    check(self.upstream is not None, 'no "session start" line for the replay')
                got = self.srv.take(self.upstream, 1, wait)
                self.to_server += got
                if not got:
                    self.silent += 1
            else:
                if self.upstream is None:
                    continue
                self.srv.send(d.payload, self.upstream)
                if not self._got_client(wait):
                    self.silent += 1
            # whatever else came (a message rebuilt into several pieces)
            for _ in range(16):
                if not self._got_client(0.0):
                    break
            if self.upstream is not None:
                self.to_server += self.srv.take(self.upstream, 64, 0.0)
        self.elapsed = time.monotonic() - t0
        return self


def _udp_frame(src, dst, payload):
    """Ethernet + IPv4 + UDP around `payload` (checksums left 0)."""
    ip_src = bytes(int(x) for x in src[0].split('.'))
    ip_dst = bytes(int(x) for x in dst[0].split('.'))
    udp = struct.pack('>HHHH', src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, ip_src,
                     ip_dst) + udp
    return b'\x02\x00\x00\x00\x00\x02' + b'\x02\x00\x00\x00\x00\x01' + b'\x08\x00' + ip


def write_pcap(path, events, client=('10.0.0.2', 40000), server=('10.0.0.1', 27960)):
    """A classic pcap of (direction, payload) events on the client's wire."""
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, (way, payload) in enumerate(events):
            frame = _udp_frame(client, server, payload) if way == 'c2s' else \
                _udp_frame(server, client, payload)
            f.write(struct.pack('<IIII', 1000 + i // 1000, (i % 1000) * 1000, len(frame),
                                len(frame)))
            f.write(frame)


def decode_lines(h, path):
    """(exit status, stdout lines, stderr) of `slipgate pcap decode PATH`."""
    r = h.run(['pcap', 'decode', path], timeout=60)
    return r.returncode, r.stdout.decode('utf-8', 'replace').splitlines(), \
        r.stderr.decode('utf-8', 'replace')


CMD_RE = re.compile(r'(svc_serverCommand|clc_clientCommand) (\d+) "((?:[^"\\]|\\.)*)')


def reliable_commands(lines, session=None):
    """{(op, number): first text seen} of the commands in decode output."""
    out = {}
    for line in lines:
        for op, num, text in CMD_RE.findall(line):
            out.setdefault((op, int(num)), text)
    return out


def _unescape(raw):
    """The decoder's escaped command text back to bytes-as-str; a clipped
    text ("...") is cut a little earlier so no escape is left half."""
    clipped = raw.endswith('...') and len(raw) >= 60
    if clipped:
        raw = raw[:40]
        while raw.endswith('\\') and not raw.endswith('\\\\'):
            raw = raw[:-1]
    return raw.encode('latin-1').decode('unicode_escape'), clipped


def expected_from_capture(h, cap):
    """What textlog should write for the capture's game session by default:
    [(direction, kind, number, text, clipped)] in reliable-number order per
    side, from `slipgate pcap decode` of the capture file itself (the
    offline decoder, run on the original bytes)."""
    rc, lines, err = decode_lines(h, cap.path)
    check(rc == 0, 'slipgate pcap decode %s failed (%d): %s' % (cap.path, rc, err[-2000:]))
    out = []
    for (op, num), raw in sorted(reliable_commands(lines).items()):
        text, clipped = _unescape(raw)
        verb = text.split(' ', 1)[0]
        if op == 'svc_serverCommand':
            if verb == 'cs':
                continue  # configstring: not logged by default
            kind = {'print': 'print', 'cp': 'centerprint', 'chat': 'chat', 'tchat': 'chat',
                    'disconnect': 'disconnect'}.get(verb, 'servercmd')
            out.append(('to_client', kind, num, text, clipped))
        else:
            kind = 'chat' if verb in ('say', 'say_team', 'tell') else 'clientcmd'
            out.append(('to_server', kind, num, text, clipped))
    return out


def body_of(kind, text):
    """The part of a decoded command textlog logs for `kind`."""
    if kind in ('servercmd', 'clientcmd'):
        return text
    arg = text.split(' ', 1)[1] if ' ' in text else ''
    if arg.startswith('"'):
        arg = arg[1:]
        end = arg.find('"')
        if end >= 0:
            arg = arg[:end]
    return arg


def textlog_replay(h, name):
    cap = capture(name)
    srv = fault_test.ServerSide()
    try:
        path = h.path('text.log')
        px = start_proxy(h, srv, '    filter textlog {\n        file "%s"\n    }' % path)
        ups = fault_test.UpstreamMap(px)
        rep = fault_test.Replay(h, px, srv, ups, cap, hold=False,
                                clients=[cap.game_client]).run()
        check(not rep.problems, 'the replay through textlog (a tap) was not byte-identical:\n  %s'
              % '\n  '.join(rep.problems[:10]))
        rc = px.stop()
        check(rc == 0, 'slipgate exited with %s' % rc)
    finally:
        srv.close()
    got = read_log(path)
    want = expected_from_capture(h, cap)
    check(len(want) >= 10, 'the capture decodes to only %d commands' % len(want))
    sid = {g[1] for g in got}
    check(len(sid) == 1, 'lines of %d sessions, expected the game session only: %s'
          % (len(sid), sorted(sid)))
    check(len(got) == len(want), '%d lines logged, the capture has %d commands (configstrings '
          'left out):\n  got: %s\n  want: %s' % (len(got), len(want), got[:40], want[:40]))
    # per direction, in order of the reliable numbers
    for way in ('to_client', 'to_server'):
        g = [x for x in got if x[3] == way]
        w = [x for x in want if x[0] == way]
        check(len(g) == len(w), '%s: %d lines, want %d' % (way, len(g), len(w)))
        for a, b in zip(g, w):
            body = body_of(b[1], b[3]).encode('latin-1')
            # the decoder clips long commands: compare the beginning then
            ok = a[4] == b[1] and (a[5].startswith(escape(body)) if b[4]
                                   else a[5] == escape(body.rstrip(b'\r\n')))
            check(ok, '%s command %d: logged %s %r, the capture has %s %r'
                  % (way, b[2], a[4], a[5], b[1], body))
    prints = [x[5] for x in got if x[4] == 'print']
    check('peers^7 entered the game' in prints, 'no "peers^7 entered the game" print: %s' % prints)
    print('%s: %d lines logged (%d to the client, %d to the server), each equal to the command '
          'the capture decodes to; %d prints: %s'
          % (name, len(got), len([x for x in got if x[3] == 'to_client']),
             len([x for x in got if x[3] == 'to_server']), len(prints), prints))


def case_replay_ioq68(h):
    textlog_replay(h, 'ioq68')


def case_replay_ioq71(h):
    textlog_replay(h, 'ioq71')


def case_replay_oa71(h):
    textlog_replay(h, 'oa71')


def case_bad_path(h):
    """An unopenable log file stops the start with a message naming it."""
    srv = fault_test.ServerSide()
    try:
        conf = ('route main {\n    listen 127.0.0.1:1\n    server %s\n    protocol q3\n'
                '    filter textlog {\n        file "%s/no/such/dir/t.log"\n    }\n}\n'
                % (srv.addr, h.dir))
        path = h.path('bad.conf')
        with open(path, 'w') as f:
            f.write(conf)
        r = h.run(['-c', path], timeout=10)
        err = r.stderr.decode('utf-8', 'replace')
        check(r.returncode != 0, 'slipgate started with an unopenable text log: %s' % err)
        # The start's checks (proxy/preflight.c, as --check-config) name the
        # file, the line of the textlog block and why.
        want = ("%s:5: error: route 'main': textlog file %s/no/such/dir/t.log: its directory "
                "%s/no/such/dir: No such file or directory" % (path, h.dir, h.dir))
        check(want in err, 'the error does not say %r:\n%s' % (want, err))
        print('slipgate refused to start: %s' % [l for l in err.splitlines() if want in l][0])
    finally:
        srv.close()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
