#!/usr/bin/env python3
"""The spectator port (`spectate`) through the real binary, Quake 3, with
scripted clients on 127.0.0.1 and an echo server as the route's server
(loopback@spectate_CASE).

    handshake      getchallenge -> challengeResponse C CLIENT 71; a connect
                   with C and the password -> connectResponse C; a connect
                   with another challenge -> the game's "No or bad challenge";
                   one "spectator ... started" log line, and one "ended:
                   disconnected"-free "ended" line when slipgate stops
    password       no password and a wrong one -> "print\\nInvalid password\\n";
                   nobody started
    max            max_spectators 1: a second spectator's connect -> the
                   game's "Server is full."; the first one still answered
    no_relay       every kind of packet to the spectator port (challenge,
                   connect, sequenced datagrams, rcon, status queries,
                   garbage) from a spectator and from strangers: the route's
                   server receives nothing, and every answer goes back to
                   the address that wrote
    metrics        /metrics counts the spectator, the refusal and the port's
                   datagrams and bytes each way; /api/routes lists it (name,
                   address, session watched)
    doctor         `slipgate doctor` says the spectator port can be bound, or
                   that it cannot (a port already held), with the file and line
    reload         a reload (SIGHUP) applies a new spectate_password and
                   max_spectators at once, the live spectator stays; a new
                   spectate_delay is not applied, and one warning says a
                   restart applies it
    workers        with `workers 2`: the port answers, and one warning says it
                   sees only worker loop 0's sessions
    config_errors  `spectate` without `protocol q3`, `spectate_delay 11m` and
                   `spectate_password` without `spectate` are refused with
                   the file and line

Only 127.0.0.1; bounded waits; processes ended by PID (harness.py).
"""

import os
import re
import signal
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

sys.path.insert(0, os.path.join(HERE, '..', 'http'))

from harness import V4, check, main  # noqa: E402
import httplib_sg  # noqa: E402

OOB = b'\xff\xff\xff\xff'


def connect_packet(challenge, password=None, qport=4321, protocol=68, name='watcher'):
    info = '\\name\\%s\\protocol\\%d\\qport\\%d\\challenge\\%d' % (name, protocol, qport, challenge)
    if password is not None:
        info += '\\password\\%s' % password
    out = subprocess.run([os.environ['SG_Q3_CONNECT'], 'connect "%s"' % info],
                         stdout=subprocess.PIPE, timeout=10, check=True).stdout
    check(out.startswith(OOB + b'connect '), 'q3_connect_packet gave %r' % out[:20])
    return out


def config(srv, extra=''):
    return ('route spect {\n    listen 127.0.0.1:$P0\n    server %s\n    protocol q3\n'
            '    spectate 127.0.0.1:$P1\n%s}\n' % (srv.addr, extra))


def ask(c, dest, data, what):
    c.send(data, dest)
    r = c.recv_one(3.0)
    check(r is not None, 'no answer to %s' % what)
    check(r[1] == dest, 'the answer to %s came from %s, not %s' % (what, r[1], dest))
    return r[0]


def challenge(c, dest, mine=1234):
    got = ask(c, dest, OOB + b'getchallenge %d ' % mine, 'getchallenge')
    m = re.match(rb'\xff\xff\xff\xffchallengeResponse (-?\d+) (-?\d+) (\d+)$', got)
    check(m is not None, 'not a challengeResponse: %r' % got)
    check(int(m.group(2)) == mine, 'the client challenge came back as %s' % m.group(2))
    check(m.group(3) == b'71', 'protocol %s in the challengeResponse' % m.group(3))
    return int(m.group(1))


def started(px):
    return px.count_log(r'spectator \d+ \(.*\) from .* started')


def case_handshake(h):
    srv = h.echo(V4)
    px = h.proxy(config=config(srv, '    spectate_password sesame\n'))
    dest = (V4, px.ports[1])
    c = h.client(V4)
    ch = challenge(c, dest)
    check(challenge(c, dest) == ch, 'the challenge changed between two requests')
    got = ask(c, dest, connect_packet(ch ^ 0x55, 'sesame'), 'a connect with another challenge')
    check(got == OOB + b'print\nNo or bad challenge for your address.\n',
          'a wrong challenge got %r' % got)
    got = ask(c, dest, connect_packet(ch, 'sesame'), 'the connect')
    check(got == OOB + b'connectResponse %d' % ch, 'the connect got %r' % got)
    check(px.wait_count_log(r'spectator 1 \(watcher\) from 127\.0\.0\.1:%d started' % c.port,
                            1, 3.0), 'no start line for the spectator')
    # The accept again when the client repeats its connect (the first was lost).
    got = ask(c, dest, connect_packet(ch, 'sesame'), 'the connect again')
    check(got == OOB + b'connectResponse %d' % ch, 'the repeated connect got %r' % got)
    check(started(px) == 1, 'a repeated connect started a second spectator')
    rc = px.stop()
    check(rc == 0, 'slipgate exited %d' % rc)
    check(px.count_log(r'spectator 1 \(watcher\) from .* ended: the route closed') == 1,
          'no end line for the spectator')
    check(not srv.snapshot(), 'the server received %d datagrams' % len(srv.snapshot()))


def case_password(h):
    srv = h.echo(V4)
    px = h.proxy(config=config(srv, '    spectate_password sesame\n'))
    dest = (V4, px.ports[1])
    c = h.client(V4)
    ch = challenge(c, dest)
    for pw in (None, 'open', 'sesam', 'sesame2'):
        got = ask(c, dest, connect_packet(ch, pw), 'a connect with password %r' % pw)
        check(got == OOB + b'print\nInvalid password\n', 'password %r got %r' % (pw, got))
    check(started(px) == 0, 'a spectator started without the password')
    check(px.wait_count_log(r'spectator from .* refused \(Invalid password\)', 4, 3.0) >= 4,
          'no refusal line')
    check(not srv.snapshot(), 'the server received datagrams')


def case_max(h):
    srv = h.echo(V4)
    px = h.proxy(config=config(srv, '    max_spectators 1\n'))
    dest = (V4, px.ports[1])
    a, b = h.client(V4), h.client(V4)
    ch = challenge(a, dest)
    check(ask(a, dest, connect_packet(ch), 'the first connect') == OOB + b'connectResponse %d' % ch,
          'the first spectator was not accepted')
    ch = challenge(b, dest)
    got = ask(b, dest, connect_packet(ch, qport=999), 'the second connect')
    check(got == OOB + b'print\nServer is full.\n', 'the second spectator got %r' % got)
    check(started(px) == 1, '%d spectators started with max_spectators 1' % started(px))
    check(px.wait_count_log(r'refused: max_spectators \(1\)', 1, 3.0) == 1, 'no refusal line')
    # the first one is still known (its repeated connect is answered)
    ch = challenge(a, dest)
    check(ask(a, dest, connect_packet(ch), 'the first connect again') ==
          OOB + b'connectResponse %d' % ch, 'the first spectator was forgotten')


def case_reload(h):
    srv = h.echo(V4)
    px = h.proxy(config=config(srv, '    spectate_password sesame\n    max_spectators 1\n'))
    dest = (V4, px.ports[1])
    a, b = h.client(V4), h.client(V4)
    ch = challenge(a, dest)
    check(ask(a, dest, connect_packet(ch, 'sesame'), 'the first connect') ==
          OOB + b'connectResponse %d' % ch, 'the first spectator was not accepted')
    with open(px.config_path) as f:
        text = f.read()
    px.write_config(text.replace('spectate_password sesame', 'spectate_password open')
                    .replace('max_spectators 1', 'max_spectators 2\n    spectate_delay 5s'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'configuration reloaded$', 3.0, start=mark),
          'no "configuration reloaded" after SIGHUP')
    check(px.count_log(r'spectators reloaded: 2 at most, password \(1 watching stay\)',
                       start=mark) == 1, 'no "spectators reloaded" line')
    check(px.count_log(r'warn\b.*spectate_delay changed to 5\.0 s: restart slipgate to apply '
                       r'it', start=mark) == 1, 'no one warning that spectate_delay needs a restart')
    check(px.count_log(r'warn\b', start=mark) == 1, 'other warnings at the reload')
    ch = challenge(b, dest)
    got = ask(b, dest, connect_packet(ch, 'sesame', qport=999), 'a connect with the old password')
    check(got == OOB + b'print\nInvalid password\n', 'the old password got %r' % got)
    got = ask(b, dest, connect_packet(ch, 'open', qport=999), 'a connect with the new password')
    check(got == OOB + b'connectResponse %d' % ch,
          'the new password with max_spectators 2 got %r' % got)
    check(px.wait_count_log(r'spectator 2 \(watcher\) from .* started', 1, 3.0) == 1,
          'no start line for the second spectator')
    rc = px.stop()
    check(rc == 0, 'slipgate exited %d' % rc)
    check(px.count_log(r'spectator 1 \(watcher\) from .* ended: the route closed') == 1,
          'the first spectator did not stay until the stop')


def case_no_relay(h):
    srv = h.echo(V4)
    px = h.proxy(config=config(srv))
    dest = (V4, px.ports[1])
    spect, stranger = h.client(V4), h.client(V4)
    ch = challenge(spect, dest)
    check(ask(spect, dest, connect_packet(ch), 'the connect') == OOB + b'connectResponse %d' % ch,
          'not accepted')
    kinds = [OOB + b'getstatus', OOB + b'getinfo xxx', OOB + b'rcon secret status',
             OOB + b'disconnect', OOB + b'\x00\x01', b'', b'x', b'\x01\x00\x00\x00',
             struct.pack('<IH', 1, 4321) + bytes(range(40)),
             struct.pack('<IH', 2 | 0x80000000, 4321) + bytes(60),
             struct.pack('<IH', 3, 4321) + b'\xff' * 1200]
    for k in kinds:
        spect.send(k, dest)
        stranger.send(k, dest)
    stranger.send(connect_packet(ch), dest)  # another address's challenge
    # the spectator's answers come to it, a stranger's to the stranger
    for c in (spect, stranger):
        for data, src in c.recv(1.0):
            check(src == dest, 'an answer from %s' % (src,))
    got = ask(stranger, dest, OOB + b'getchallenge 77 ', 'the stranger\'s getchallenge')
    check(got.startswith(OOB + b'challengeResponse '), 'the stranger got %r' % got)
    # and the route itself still relays (its server hears the listener's traffic only)
    c = h.client(V4)
    c.send(b'hello', (V4, px.ports[0]))
    r = c.recv_one(3.0)
    check(r is not None and r[0] == b'ECHOhello', 'the route does not relay: %r' % (r,))
    recs = srv.snapshot()
    check([d for _, _, d in recs] == [b'hello'],
          'the server received %r' % [d[:20] for _, _, d in recs])
    check(px.alive(), 'slipgate died')


def metric(port, line):
    status, _, body = httplib_sg.request(port, '/metrics')
    check(status == 200, '/metrics answered %s' % status)
    for ln in body.decode().splitlines():
        if ln.startswith(line + ' '):
            return int(ln.split()[-1])
    raise AssertionError('no %s in /metrics' % line)


def case_metrics(h):
    srv = h.echo(V4)
    px = h.proxy(config='http 127.0.0.1:$P2\n' + config(srv, '    spectate_password sesame\n'))
    dest = (V4, px.ports[1])
    http = px.listed_ports()['http'][1]
    c = h.client(V4)
    ch = challenge(c, dest)
    ask(c, dest, connect_packet(ch, 'wrong'), 'a connect with a wrong password')
    check(ask(c, dest, connect_packet(ch, 'sesame'), 'the connect') ==
          OOB + b'connectResponse %d' % ch, 'not accepted')
    r = 'route="spect"'
    check(metric(http, 'slipgate_spectators_active{%s}' % r) == 1, 'active is not 1')
    check(metric(http, 'slipgate_spectators_total{%s}' % r) == 1, 'total is not 1')
    check(metric(http, 'slipgate_spectators_refused_total{%s}' % r) == 1, 'refused is not 1')
    check(metric(http, 'slipgate_spectator_datagrams_total{%s,direction="in"}' % r) == 3,
          'datagrams in is not 3')
    check(metric(http, 'slipgate_spectator_datagrams_total{%s,direction="out"}' % r) == 3,
          'datagrams out is not 3')
    check(metric(http, 'slipgate_spectator_bytes_total{%s,direction="in"}' % r) > 0,
          'no bytes in')
    # the JSON API (the web page's) lists it
    routes = httplib_sg.get_json(http, '/api/routes')
    sp = [x for x in routes['routes'] if x['name'] == 'spect'][0]['spectators']
    check(sp['port'] == '127.0.0.1:%d' % px.ports[1], 'the port is %r' % sp['port'])
    check(len(sp['list']) == 1, 'spectators listed: %r' % sp['list'])
    one = sp['list'][0]
    check(one['name'] == 'watcher' and one['address'] == '127.0.0.1:%d' % c.port and
          one['session'] == 0 and one['datagrams_in'] == 1, 'the spectator is listed as %r' % one)
    # and --stats at exit
    check(px.stop() == 0, 'slipgate did not exit 0')
    st = [x for x in px.stats()['routes'] if x['name'] == 'spect'][0]
    check('spectators' in st, '--stats has no spectators member')


def case_doctor(h):
    held = h.udp_socket(V4)
    port = held.getsockname()[1]
    srv = h.echo(V4)
    for spect, want in ((port, r":4:\d+: .*cannot bind the spectator port 127\.0\.0\.1:%d" % port),
                        (0, r":4:\d+: .*spectator port 127\.0\.0\.1:0 can be bound")):
        path = h.path('doctor%d.conf' % spect)
        with open(path, 'w') as f:
            f.write('route a {\n    server %s\n    protocol q3\n    spectate 127.0.0.1:%d\n'
                    '    listen 127.0.0.1:0\n}\n' % (srv.addr, spect))
        r = h.run(['doctor', '-c', path], timeout=30)
        out = (r.stdout + r.stderr).decode(errors='replace')
        check(re.search(re.escape(path) + want, out), 'no %r in:\n%s' % (want, out))


def case_config_errors(h):
    cases = [
        ('route a {\n    server 127.0.0.1:2\n    spectate 127.0.0.1:3\n}\n',
         r':3:\d+: error: .*\'spectate\' needs a game with spectators'),
        ('route a {\n    server 127.0.0.1:2\n    protocol q3\n    spectate 127.0.0.1:3\n'
         '    spectate_delay 11m\n}\n', r':5:\d+: error: .*spectate_delay'),
        ('route a {\n    server 127.0.0.1:2\n    protocol q3\n    spectate_password x\n}\n',
         r':1:1: error: .*need \'spectate ADDR:PORT\''),
        ('route a {\n    server 127.0.0.1:2\n    protocol q3\n    spectate 127.0.0.1:3\n'
         '    max_spectators 0\n}\n', r':5:\d+: error: .*max_spectators'),
    ]
    for i, (text, want) in enumerate(cases):
        path = h.path('bad%d.conf' % i)
        with open(path, 'w') as f:
            f.write(text)
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        check(r.returncode != 0, '--check-config accepted:\n%s' % text)
        check(re.search(re.escape(path) + want, err), 'no %r in:\n%s' % (want, err))
    good = h.path('good.conf')
    with open(good, 'w') as f:
        f.write('route a {\n    server 127.0.0.1:2\n    protocol q3\n    spectate 127.0.0.1:3\n'
                '    spectate_delay 0\n    spectate_password x\n    max_spectators 4\n}\n')
    r = h.run(['--check-config', '-c', good])
    check(r.returncode == 0, 'a good config refused: %s' % r.stderr.decode(errors='replace'))


def case_workers(h):
    """With `workers 2` the spectator port still answers, and one warning at
    start says it sees only worker loop 0's sessions."""
    srv = h.echo(V4)
    px = h.proxy(config='workers 2\n' + config(srv))
    dest = (V4, px.ports[1])
    c = h.client(V4)
    ch = challenge(c, dest)
    check(ask(c, dest, connect_packet(ch), 'the connect') == OOB + b'connectResponse %d' % ch,
          'not accepted with two worker loops')
    want = (r'warn.*spectate: the spectator port sees only worker loop 0\'s sessions '
            r'\(about 1 player in 2 with 2 worker loops\)')
    check(px.count_log(want) == 1, 'no single warning about the worker loops:\n%s' % px.log_text())
    check(px.stop() == 0, 'slipgate did not exit 0')


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
