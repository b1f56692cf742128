#!/usr/bin/env python3
"""The 'inspect' filter through the real slipgate binary (filterloop_inspect@CASE).

    json_q3_<s>   a real Quake 3 capture (../shared/testdata/q3/sessions/<s>)
                  replayed through `protocol q3` with
                  `filter inspect { format json level fields output FILE }`:
                  every line parses with json; one line per datagram of each
                  session, in the replay's order, with the direction and the
                  netchan sequence of the capture's header (fragment bit
                  removed), the frame kinds (oob / partial / message) the
                  headers imply, and per session as many lines, messages and
                  out-of-band frames as slipgate's --stats counters; message
                  frames carry their message list (kinds known, the client's
                  moves as clc_move, the server's snapshots)
    text_q3       the same replay (ioq68) at `format text level messages`:
                  every line has the prefix (time, route, session, client,
                  arrow), one packet line per datagram, message lines whose
                  kinds are known names
    raw_auto      `protocol auto` with arbitrary (not Quake) datagrams, both
                  ways through an echo server, `level fields`: raw frames,
                  codec null, the hex preview equals the datagram's first bytes

    send_first    the same replay (ioq71) twice: with only the inspector (a
                  tap) the route takes the send-first path (--stats "path",
                  datagrams waited for their decoding: deferred.max_waiting
                  >= 1); with a rewrite filter that matches nothing added it
                  keeps the in-order path (nothing waited); the inspector's
                  lines are the same in both runs but for times, session
                  ids and client ports, and so are the decode counters

Replays use tests/fault (lock-step, both ends of the capture played by the
test; see fault_test.py).  Only 127.0.0.1; bounded loops; processes killed
by PID (harness.py).
"""

import json
import os
import re
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))
sys.path.insert(0, os.path.join(HERE, '..', 'fault'))

import harness  # noqa: E402
from harness import V4, Fail, check, main, parse_hostport  # noqa: E402
import fault_test  # noqa: E402
from fault_test import (Replay, ServerSide, UpstreamMap, stop_ok, stats_route,  # noqa: E402
                        sessions_by_port)
from q3cap import Capture, OOB, FRAGMENT_BIT, FRAGMENT_SIZE, frag_info  # noqa: E402

KINDS = {'print', 'centerprint', 'chat', 'servercmd', 'clientcmd', 'stufftext', 'configstring',
         'disconnect', 'game'}


def config(srv, protocol, inspect_body):
    return ('route main {\n'
            '    listen 127.0.0.1:$P0\n'
            '    server %s\n'
            '    protocol %s\n'
            '    new_sessions_per_source 1000\n'
            '    filter inspect {\n%s\n    }\n'
            '}\n' % (srv.addr, protocol, inspect_body))


def expected_frames(cap, ep):
    """[(dir, seq or None, kind)] of one capture endpoint's datagrams, in order."""
    out = []
    for d in cap.dgrams:
        if d.client != ep:
            continue
        direction = 'c2s' if d.c2s else 's2c'
        if d.payload[:4] == OOB:
            out.append((direction, None, 'oob'))
            continue
        word = struct.unpack_from('<I', d.payload, 0)[0]
        seq = word & ~FRAGMENT_BIT & 0xffffffff
        if seq >= 1 << 31:
            seq -= 1 << 32
        fi = frag_info(d.payload, d.c2s, cap.checksum)
        kind = 'partial' if fi is not None and fi[2] == FRAGMENT_SIZE else 'message'
        out.append((direction, seq, kind))
    return out


def replay(h, cap_name, protocol, inspect_body, extra=''):
    cap = Capture(cap_name)
    srv = ServerSide()
    try:
        # -v: UpstreamMap reads the start line, at debug until the server answers
        text = config(srv, protocol, inspect_body)
        if extra:
            text = text[:text.rindex('}')] + extra + '}\n'
        px = h.proxy(config=text, args=['-v'], lifetime=90.0)
        ups = UpstreamMap(px)
        rep = Replay(h, px, srv, ups, cap, hold=False).run()
        check(not rep.problems, 'replay problems:\n  %s' % '\n  '.join(rep.problems))
        st = stop_ok(px)
    finally:
        srv.close()
    return cap, rep, stats_route(st)


def read_lines(path):
    check(os.path.exists(path), 'the inspector wrote no file %s' % path)
    with open(path, 'rb') as f:
        data = f.read()
    check(data.endswith(b'\n'), 'the output does not end with a newline')
    return data.decode('utf-8').split('\n')[:-1]


def json_q3(h, cap_name):
    out = h.path('inspect.jsonl')
    cap, rep, route = replay(h, cap_name, 'q3',
                             '        format json\n        level fields\n        output %s'
                             % out)
    objs = []
    for i, line in enumerate(read_lines(out)):
        try:
            o = json.loads(line)
        except ValueError as e:
            raise Fail('line %d is not JSON (%s): %r' % (i + 1, e, line[:300]))
        check(isinstance(o, dict), 'line %d is not an object' % (i + 1))
        objs.append(o)
    by_port = sessions_by_port(route)
    total = 0
    for ep in rep.socks:
        port = rep.port_of(ep)
        ss = by_port.get(port, [])
        check(len(ss) == 1, 'client %s: %d sessions in the stats' % (ep, len(ss)))
        s = ss[0]
        mine = [o for o in objs if o.get('session') == s['id']]
        # The common fields, on every line.
        for o in mine:
            check(o.get('v') == 1 and o.get('route') == 'main' and o.get('codec') == 'q3'
                  and o.get('client') == s['client'] and isinstance(o.get('t'), int)
                  and re.match(r'^\d\d:\d\d:\d\d\.\d{3}$', o.get('time', ''))
                  and o.get('dropped') is False and o.get('reencoded') is False
                  and isinstance(o.get('msgs'), list) and o.get('nmsgs') >= len(o['msgs'])
                  and isinstance(o.get('game'), dict) and o['game'].get('len') == o['len'],
                  'session %d: a line lacks the common fields: %r' % (s['id'], o))
        # One line per datagram, in the replay's order, as the capture's headers say.
        want = expected_frames(cap, ep)
        got = [(o['dir'], None if o['frame'] == 'oob' else o['seq'], o['frame']) for o in mine]
        if got != want:
            first = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                         min(len(got), len(want)))
            raise Fail('session of %s: %d lines for %d datagrams; first difference at %d: '
                       'got %r, the capture says %r' % (ep, len(got), len(want), first,
                                                         got[first:first + 3],
                                                         want[first:first + 3]))
        c = s['counters']
        check(sum(1 for o in mine if o['dir'] == 'c2s') == c['c2s_packets']
              and sum(1 for o in mine if o['dir'] == 's2c') == c['s2c_packets'],
              'session %d: line counts differ from --stats counters %r' % (s['id'], c))
        check(sum(o['len'] for o in mine if o['dir'] == 'c2s') == c['c2s_bytes']
              and sum(o['len'] for o in mine if o['dir'] == 's2c') == c['s2c_bytes'],
              'session %d: the lengths do not add up to the --stats bytes' % s['id'])
        d = s['decode']
        msgs = [o for o in mine if o['frame'] == 'message']
        check(len(msgs) == d['messages'] and sum(o['frame'] == 'oob' for o in mine) == d['oob']
              and len(mine) == d['datagrams'],
              'session %d: %d message / %d oob lines, stats say %r'
              % (s['id'], len(msgs), sum(o['frame'] == 'oob' for o in mine), d))
        # Message lists: known kinds; moves and snapshots in the game session.
        names = {'c2s': set(), 's2c': set()}
        for o in mine:
            for m in o['msgs']:
                check(m.get('kind') in KINDS and isinstance(m.get('name'), str)
                      and isinstance(m.get('num'), int)
                      and (m['text'] is None or isinstance(m['text'], str)),
                      'a message entry is malformed: %r' % m)
                names[o['dir']].add(m['name'])
        if ep == cap.game_client:
            check('clc_move' in names['c2s'] and 'svc_snapshot' in names['s2c']
                  and 'svc_gamestate' in names['s2c'],
                  'game session: message names %r' % names)
            check(any(o.get('new_level') and o.get('level') for o in mine),
                  'game session: no frame marked new_level with its map')
            check(sum(len(o['msgs']) for o in msgs) > len(msgs) // 2,
                  'game session: message frames without message lists '
                  '(the codec gives none?)')
        total += len(mine)
    check(total == len(objs), '%d lines belong to no session of the replay' % (len(objs) - total))
    print('%s: %d JSON lines, every one parsed; per session they match the capture\'s '
          'headers and the --stats counters' % (cap_name, len(objs)))


def case_json_q3_ioq68(h):
    json_q3(h, 'ioq68')


def case_json_q3_ioq71(h):
    json_q3(h, 'ioq71')


def case_json_q3_oa71(h):
    json_q3(h, 'oa71')


PREFIX = re.compile(r'^(\d\d:\d\d:\d\d\.\d{3}) main (s\d+) +(127\.0\.0\.1:\d+) +(c>s|s>c) (.*)$')


def case_text_q3(h):
    out = h.path('inspect.txt')
    cap, rep, route = replay(h, 'ioq68', 'q3',
                             '        level messages\n        output %s' % out)
    lines = read_lines(out)
    packets = 0
    kinds = set()
    for line in lines:
        m = PREFIX.match(line)
        check(m, 'a line without the prefix: %r' % line)
        rest = m.group(5)
        if rest.startswith('  '):
            kind = rest.split()[0]
            check(kind in KINDS, 'unknown kind %r in %r' % (kind, line))
            kinds.add(kind)
        else:
            check(re.match(r'^(raw|oob|partial|message|rejected) +seq=-?\d+ +len=\d+', rest),
                  'bad packet line %r' % line)
            packets += 1
    check(packets == rep.total_sent(), '%d packet lines for %d datagrams'
          % (packets, rep.total_sent()))
    check('game' in kinds and 'configstring' in kinds, 'message kinds seen: %r' % kinds)
    print('text: %d lines, %d packet lines, kinds %s' % (len(lines), packets, sorted(kinds)))


def case_raw_auto(h):
    out = h.path('raw.jsonl')
    echo = h.echo(V4)
    px = h.proxy(config=config(echo, 'auto',
                               '        format json\n        level fields\n        output %s'
                               % out))
    c = h.client(V4)
    sent = []
    for i in range(20):
        data = bytes((i * 7 + k) & 0xff for k in range(10 + i * 9))
        c.send(data, (V4, px.ports[0]))
        r = c.recv_one(3.0)
        check(r is not None, 'no echo for datagram %d' % i)
        sent.append(data)
    stop_ok(px)
    objs = [json.loads(line) for line in read_lines(out)]
    check(len(objs) == 40, '%d lines for 20 datagrams each way' % len(objs))
    for i, o in enumerate(objs):
        data = sent[i // 2] if i % 2 == 0 else b'ECHO' + sent[i // 2]
        check(o['dir'] == ('c2s' if i % 2 == 0 else 's2c'), 'line %d: dir %r' % (i, o['dir']))
        check(o['frame'] == 'raw' and o['codec'] is None and o['msgs'] == []
              and o['len'] == len(data) and o['seq'] == -1 and 'game' not in o,
              'line %d: %r' % (i, o))
        check(o['hex'] == data[:64].hex(), 'line %d: hex %r, sent %r' % (i, o['hex'],
                                                                       data[:64].hex()))
    print('raw: 40 lines, raw frames with their first bytes')



def case_send_first(h):
    runs = {}
    for name, extra in (('taps', ''),
                        ('rewrite', '    filter rewrite {\n        replace "zq_never_zq" "x"\n'
                                    '    }\n')):
        out = h.path('inspect-%s.jsonl' % name)
        cap, rep, route = replay(h, 'ioq71', 'q3',
                                 '        format json\n        level fields\n        output %s'
                                 % out, extra=extra)
        lines = []
        for line in read_lines(out):
            o = json.loads(line)
            for k in ('t', 'time', 'session', 'client'):
                o.pop(k, None)
            lines.append(json.dumps(o, sort_keys=True))
        dec = [sorted((s.get('decode') or {}).items()) for s in route.get('sessions') or []]
        runs[name] = (route, sorted(lines), sorted(map(str, dec)))
    taps, rw = runs['taps'][0], runs['rewrite'][0]
    check(taps.get('path') == 'send-first', 'a chain of taps: path %r, expected send-first'
          % taps.get('path'))
    check(rw.get('path') == 'in-order', 'a chain with a rewrite filter: path %r, expected '
          'in-order' % rw.get('path'))
    dt, dr = taps.get('deferred') or {}, rw.get('deferred') or {}
    check(dt.get('max_waiting', 0) >= 1, 'send-first: no datagram waited for its decoding: %r'
          % dt)
    check(dr.get('max_waiting') == 0, 'in-order: datagrams waited for their decoding: %r' % dr)
    check(runs['taps'][1] == runs['rewrite'][1], 'the inspector saw different frames on the '
          'two paths (%d and %d lines)' % (len(runs['taps'][1]), len(runs['rewrite'][1])))
    check(runs['taps'][2] == runs['rewrite'][2], 'decode counters differ: %r vs %r'
          % (runs['taps'][2], runs['rewrite'][2]))
    print('send-first: %d inspector lines identical to the in-order path; at most %d datagrams '
          'waited for decoding' % (len(runs['taps'][1]), dt['max_waiting']))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
