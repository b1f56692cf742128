#!/usr/bin/env python3
"""Quake 3 protocols slipgate does not decode, through the real binary
(loopback@q3_protocol_CASE; issue 27 point 5).

    43   a client whose connect (plain text, as Quake 3 1.11-1.16 sent it)
         announces protocol 43, then sequenced datagrams both ways through
         an echo server on `protocol q3` with `filter inspect`
    84   the same with protocol 84 (Wolfenstein: Enemy Territory), its
         connect adaptive-Huffman coded as the game sends it
         (tests/q3/q3_connect_packet)

Each: every datagram comes back byte-identical (the echo server returns
what it got, so both directions are checked); --stats names the session
"Quake 3 protocol N (game): relayed, headers only" with 0 decode errors;
the info log says so once the server has answered ("... relayed, headers
only (slipgate does not decode it)", once, after the session's start line)
and in the session's end line; the
inspector's lines show the
header (seq) as headers-only and no message.  Only 127.0.0.1; bounded
waits; processes ended by PID (harness.py).
"""

import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

from harness import V4, check, main, parse_hostport  # noqa: E402

TAG = b'ECHO'
GAMES = {43: 'Quake 3 1.11-1.16', 84: 'Wolfenstein: Enemy Territory'}


def roundtrip(client, dest, payload):
    client.send(payload, dest)
    r = client.recv_one(3.0)
    check(r is not None, 'no echo for %r' % payload[:16])
    check(r[0] == TAG + payload, 'echo differs: sent %r, got %r' % (payload[:24], r[0][:28]))


def connect_packet(protocol):
    text = 'connect "\\name\\peer\\protocol\\%d\\qport\\4321\\challenge\\777"' % protocol
    if protocol == 43:
        return b'\xff\xff\xff\xff' + text.encode()  # 1.11-1.16 sent it plain
    out = subprocess.run([os.environ['SG_Q3_CONNECT'], text], stdout=subprocess.PIPE,
                         timeout=10, check=True).stdout
    check(out.startswith(b'\xff\xff\xff\xffconnect ') and len(out) > 14,
          'q3_connect_packet gave %r' % out[:20])
    return out


def one(h, protocol):
    game = GAMES[protocol]
    srv = h.echo(V4)
    log = h.path('inspect.txt')
    px = h.proxy(config='route hp {\n    listen 127.0.0.1:$P0\n    server %s\n'
                        '    protocol q3\n    filter inspect {\n        format text\n        level fields\n'
                        '        output %s\n    }\n}\n' % (srv.addr, log))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    # no getchallenge: the echo server answers with its tag first, which no
    # Quake 3 server would (a sequenced-looking datagram before the connect)
    roundtrip(c, dest, connect_packet(protocol))
    want = 'Quake 3 protocol %d (%s): relayed, headers only' % (protocol, game)
    notice = want + ' (slipgate does not decode it)'
    check(px.wait_for_log(re.escape(notice), 3.0) is not None,
          'no "%s" line once the connect went through' % notice)
    for seq in range(1, 9):
        # sequence (the fragment bit on one), qport, then payload no 68 parse accepts
        word = seq | (0x80000000 if seq == 5 else 0)
        roundtrip(c, dest, struct.pack('<IH', word, 4321) + bytes((seq * 37 + k) & 0xff
                                                                   for k in range(40)))
    rc = px.stop()
    check(rc == 0, 'slipgate exited %d' % rc)
    st = px.stats()
    sess = [s for r in st['routes'] if r['name'] == 'hp' for s in r['sessions']
            if parse_hostport(s['client'])[1] == c.port]
    check(len(sess) == 1, 'expected one session, got %r' % sess)
    s = sess[0]
    check(s.get('codec') == 'q3', 'not given to q3: %r' % s)
    check(s['decode']['errors'] == 0, 'decode errors: %r' % s)
    check(want in s.get('decode_info', ''), '--stats decode_info %r lacks %r'
          % (s.get('decode_info'), want))
    plog = px.log_lines()
    starts = [i for i, l in enumerate(plog) if ' info ' in l and 'session start' in l]
    said = [i for i, l in enumerate(plog) if notice in l]
    check(starts and said and said[0] > starts[0],
          'the notice is not logged after the session\'s start line (once the server answered)')
    lines = [l for l in px.log_lines() if want in l]
    check(len([l for l in lines if notice in l]) == 1 and len(lines) == 2
          and 'datagrams relayed undecoded' in lines[1],
          'expected one notice and the session\'s end line with %r, got %r' % (want, lines))
    check(not any('first decode error' in l for l in px.log_lines()), 'a decode error was logged')
    with open(log) as f:
        text = f.read()
    heads = [l for l in text.splitlines() if 'q3 headers-only' in l]
    check(len(heads) == 17, 'expected 17 headers-only inspector lines (8 client, 9 echoes), got %d:\n%s'
          % (len(heads), text[-2000:]))
    check(any('seq=5' in l and 'fragment=1' in l and 'qport=4321' in l for l in heads),
          'no fragmented datagram line with its qport: %r' % heads)
    check(any('seq=8' in l for l in heads), 'no seq=8 line: %r' % heads)
    check('svc_' not in text and 'clc_' not in text, 'a payload was decoded:\n%s' % text[-2000:])
    print('%s; 0 errors; %d inspector header lines' % (lines[0].strip(), len(heads)))


def case_43(h):
    one(h, 43)


def case_84(h):
    one(h, 84)


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
