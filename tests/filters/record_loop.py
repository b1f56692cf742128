"""Loopback tests of the 'record' filter through the real slipgate binary.

Real Quake 3 captures ($SG_TESTDATA/q3/sessions/*/capture.pcap) are
replayed through slipgate in lock-step (the fault tests' Replay, which
checks every datagram arrives byte-identical at the other end), with the
recorder configured as a `filter record { }` block:

    filter_block      the name template, the demo identical to the offline
                      `slipgate pcap decode --record` demo and ending where
                      the client's own demo ends (the capture ends with the
                      client quitting), --stats demos and the filter's
                      counters
    max_size_parts    max_size: several parts, each a demo that starts with a
                      gamestate and reads without errors; --stats demo_bytes
                      is the bytes of every part
    shortcut          `record DIR`: a record filter in --stats "filters", the
                      default MAP-DATE-TIME-CLIENT name, the offline decode's demo
    one_per_route     two recorders on one route are refused at start-up
    bad_name          an unknown placeholder: --check-config names file, line
                      and the placeholder, exit 1

Only 127.0.0.1 is used; every process is killed by PID at the end.
"""

import glob
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))
sys.path.insert(0, os.path.join(HERE, '..', 'fault'))

import harness  # noqa: E402
from harness import Fail, check  # noqa: E402
import fault_test as ft  # noqa: E402
from q3cap import Capture  # noqa: E402

CONFIG = '''
route main {
    listen 127.0.0.1:$P0
    server %(server)s
    protocol q3
    new_sessions_per_source 1000
%(extra)s
}
'''


def replay(h, res, capture, extra, name='proxy'):
    """Replay `capture` through a proxy configured with `extra` route lines;
    returns (stats route, the capture's game session)."""
    cap = Capture(capture)
    srv = res.add(ft.ServerSide())
    # -v: UpstreamMap reads the start line, at debug until the server answers
    px = h.proxy(config=CONFIG % {'server': srv.addr, 'extra': extra}, args=['-v'], name=name)
    ups = ft.UpstreamMap(px)
    rep = ft.Replay(h, px, srv, ups, cap, hold=False).run()
    check(not rep.problems, '%s: %d problems in the replay:\n  %s'
          % (capture, len(rep.problems), '\n  '.join(rep.problems[:10])))
    st = ft.stop_ok(px)
    route = ft.stats_route(st)
    game = ft.check_replay_sessions(rep, route, decoded=True, reencode=False)
    check(game is not None, 'no game session in the stats')
    return cap, px, route, game


def demo_ok(h, path):
    rc, fields, out = ft.demo_info(h.exe, path)
    check(rc == 0 and fields.get('errors') == '0', 'slipgate demo info %s: exit %d\n%s'
          % (path, rc, out))
    return ft.demo_messages(fields)


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def last_sequence(data):
    """The sequence of the last message of a Quake 3 demo (records of
    int32 sequence, int32 length, bytes; -1 -1 ends it), or None."""
    off, last = 0, None
    while off + 8 <= len(data):
        seq, n = struct.unpack_from('<ii', data, off)
        if n < 0 or off + 8 + n > len(data):
            break
        last, off = seq, off + 8 + n
    return last


def check_ends_with_client(cap, path):
    """The live demo ends where the real client's own demo of the same
    minutes ends: at the client's disconnect, before the server's answer."""
    own = glob.glob(os.path.join(os.environ.get('SG_TESTDATA', ''), 'q3', 'sessions', cap.name,
                                 'client_demo.dm_*'))
    check(len(own) == 1, 'no client demo for %s (SG_TESTDATA)' % cap.name)
    want, got = last_sequence(read(own[0])), last_sequence(read(path))
    check(got == want, '%s ends with message %s; the client\'s own demo ends with %s (it stops '
          'at the client\'s disconnect)' % (path, got, want))
    return got


def filters_of(route):
    f = route.get('filters')
    check(isinstance(f, list), 'stats: the route has no "filters" list: %r' % (route,))
    return f


@ft.with_resources
def case_filter_block(h, res):
    demos = h.path('demos')
    cap, px, route, game = replay(h, res, 'ioq71', '''
    filter record rec {
        directory "%s"
        name "%%route%%-%%map%%-s%%session%%"
    }''' % demos)
    files = sorted(os.listdir(demos))
    check(len(files) == 1, 'expected one demo, got %s' % files)
    check(re.fullmatch(r'main-[A-Za-z0-9_.-]+-s%d\.dm_71' % game['id'], files[0]),
          'the demo %r does not follow the template %%route%%-%%map%%-s%%session%% '
          '(session %d)' % (files[0], game['id']))
    path = os.path.join(demos, files[0])
    check(game.get('demos') == 1 and game.get('demo') == path,
          'stats: demos %r demo %r, expected 1 and %s' % (game.get('demos'), game.get('demo'),
                                                          path))
    msgs = demo_ok(h, path)
    last = check_ends_with_client(cap, path)
    ref = ft.offline_demo(h.exe, h.dir, cap)
    live = read(path)
    check(live == ref, 'the demo (%d bytes) differs from the offline decode\'s (%d bytes)'
          % (len(live), len(ref)))
    f = filters_of(route)
    check(len(f) == 1 and f[0]['label'] == 'rec' and f[0]['name'] == 'record' and f[0]['tap'],
          'stats filters: %r' % f)
    check(f[0]['errors'] == 0 and f[0]['dropped'] == 0 and f[0]['changed'] == 0
          and f[0]['seen'] == f[0]['passed'] and f[0]['seen'] >= msgs[0],
          'stats filter counters %r for a demo of %d messages' % (f[0], msgs[0]))
    check(px.count_log(r'rec: recording to ' + re.escape(path)) == 1
          and px.count_log(r'rec: demo ' + re.escape(path) + r' finished .*; the client '
                           r'disconnected') == 1,
          'expected one "recording to" and one "finished ...; the client disconnected" line '
          'for %s' % path)
    print('demo %s: %d messages (%d gamestates), ends with message %d as the client\'s own, '
          'identical to the offline decode; filter counters %s'
          % (files[0], msgs[0], msgs[1], last, {k: f[0][k] for k in ('seen', 'passed',
                                                                     'errors')}))


@ft.with_resources
def case_max_size_parts(h, res):
    demos = h.path('demos')
    limit = 6000
    cap, px, route, game = replay(h, res, 'oa71', '''
    filter record {
        directory "%s"
        name "%%map%%"
        max_size %d
    }''' % (demos, limit))
    files = sorted(os.listdir(demos))
    check(len(files) >= 3, 'expected several parts of %d bytes, got %s' % (limit, files))
    check(game.get('demos') == len(files), 'stats: demos %r for %d files'
          % (game.get('demos'), len(files)))
    base = [f for f in files if '-part' not in f]
    check(len(base) == 1, 'expected one first part, got %s' % files)
    names = [base[0]] + ['%s-part%d.dm_71' % (base[0][:-6], i) for i in range(2, len(files) + 1)]
    check(sorted(names) == files, 'parts %s, expected %s' % (files, names))
    total = 0
    for n in names:
        p = os.path.join(demos, n)
        msgs = demo_ok(h, p)
        check(msgs[1] >= 1, '%s does not start with a gamestate: %r' % (n, msgs))
        size = os.path.getsize(p)
        # a part ends after the message that takes it past the limit
        check(n == names[-1] or size > limit, '%s: %d bytes, ended before the limit' % (n, size))
        check(size < limit + 8000, '%s: %d bytes, far past the limit %d' % (n, size, limit))
        total += msgs[0]
    check(game['demo'] == os.path.join(demos, names[-1]), 'stats: last demo %r, expected %s'
          % (game['demo'], names[-1]))
    sizes = [os.path.getsize(os.path.join(demos, n)) for n in names]
    check(game.get('demo_bytes') == sum(sizes), 'stats: demo_bytes %r, the parts hold %d bytes '
          '(%s)' % (game.get('demo_bytes'), sum(sizes), sizes))
    print('%d parts of about %d bytes: %s; %d messages in all, each part starts with a '
          'gamestate and reads without errors' % (len(names), limit, names, total))


@ft.with_resources
def case_shortcut(h, res):
    a = h.path('a')
    cap, px, route, game = replay(h, res, 'ioq68', '    record "%s"' % a)
    f = filters_of(route)
    check([(x['label'], x['name'], x['tap']) for x in f] == [('record', 'record', True)],
          'stats filters: %r; expected the `record` shortcut\'s filter' % f)
    fa = os.listdir(a)
    check(len(fa) == 1 and re.fullmatch(r'oa_dm1-\d{8}-\d{6}-127\.0\.0\.1_\d+\.dm_68', fa[0]),
          'demos: %s (expected MAP-YYYYmmdd-HHMMSS-CLIENT.dm_68)' % fa)
    path = os.path.join(a, fa[0])
    check(read(path) == ft.offline_demo(h.exe, h.dir, cap),
          'the demo differs from the offline decode\'s')
    check(game.get('demos') == 1 and game.get('demo') == path, 'stats: demos %r demo %r'
          % (game.get('demos'), game.get('demo')))
    msgs = demo_ok(h, path)
    last = check_ends_with_client(cap, path)
    print('record DIR -> %s (%d messages, the last %d as in the client\'s own demo), stats '
          'filters %s' % (fa[0], msgs[0], last, f))


def case_one_per_route(h):
    """Two recorders on one route would fight over the codec's one demo writer."""
    two, one = h.path('two.conf'), h.path('one.conf')
    with open(two, 'w') as f:
        f.write('route r {\n    server 127.0.0.1:27960\n    record a\n'
                '    filter record {\n        directory b\n    }\n}\n')
    with open(one, 'w') as f:  # port 0: --check-config binds it, the kernel gives a free one
        f.write('route r {\n    listen 127.0.0.1:0\n    server 127.0.0.1:27960\n'
                '    filter record {\n        directory b\n    }\n}\n')
    r = h.run(['--check-config', '-c', two])
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and re.search(re.escape(two) + r":1:1: error: route 'r' has 2 "
                                          r"recorders", err),
          'exit %d, expected 1 and a message naming the route:\n%s' % (r.returncode, err))
    # --record over a route that records already: the same
    r = h.run(['--check-config', '-c', one, '--record', 'x'])
    err2 = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and "has 2 recorders" in err2, 'exit %d:\n%s' % (r.returncode, err2))
    r = h.run(['--check-config', '-c', one])
    check(r.returncode == 0, 'one recorder refused: %s' % r.stderr.decode(errors='replace'))
    print(err.strip())


def case_bad_name(h):
    conf = h.path('bad.conf')
    with open(conf, 'w') as f:
        f.write('route r {\n    server 127.0.0.1:27960\n    filter record {\n'
                '        directory d\n        name %mapname%-%date%\n    }\n}\n')
    r = h.run(['--check-config', '-c', conf])
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1, '--check-config exit %d, expected 1\n%s' % (r.returncode, err))
    check(re.search(re.escape(conf) + r":3: error: filter 'record': 'name': unknown placeholder "
                    r"at '%mapname%", err), 'the message does not name file:line and the '
          'placeholder:\n%s' % err)
    print(err.strip())


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
