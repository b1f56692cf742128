#!/usr/bin/env python3
"""Health and draining: /live and /ready on the `http` address, and what
SIGTERM, SIGINT and `drain_timeout` do to the sessions there.  The real
slipgate binary ($SLIPGATE) between an echo server and scripted clients on
127.0.0.1.  Usage: drain_test.py CASE

    health            /live and /ready answer 200 without the http_token
                      that every other path needs (401), and the text says
                      "live" / "ready"; other methods still get 405
    live_stuck_loop   two worker loops; the process's other threads held
                      still (ptrace, PTRACE_INTERRUPT): /live turns 503 and
                      names worker loop 1 once it has not turned for 5 s,
                      and 200 again once they run
    drain_session     drain_timeout 20s, one live session: SIGTERM turns
                      /ready to 503 at once (/live stays 200), the session's
                      datagrams are still relayed both ways, a new client
                      gets nothing (counted as drops.shutdown), /metrics'
                      slipgate_draining goes from 0 to 1, and once the
                      session ends (idle_timeout) slipgate exits 0 by itself
    drain_full_reply  draining, with a Quake 3, a QuakeWorld and a NetQuake
                      route: a new Quake 3 client's getchallenge gets
                      ioquake3's "print\nServer is full.\n", a new QuakeWorld
                      client's connect mvdsv's 'n' print "server is full", a
                      NetQuake connect request a CCREP_REJECT "Full." as
                      long as itself; a second
                      datagram within the second gets nothing, nor does one
                      shorter than the answer; all counted as
                      drops.shutdown; the live session keeps working
    ready_probe       ready_probe on, ready_probe_timeout 1s, a scripted Quake 3
                      server: /ready is 200 while it answers getstatus, 503
                      naming the route and its server once it has not
                      answered for 1 s (a statusResponse from another
                      address does not count), and 200 again once it
                      answers; the queries come at the interval, to the
                      server only
    ready_probe_reload
                      a server that never answers: /ready is 200 with
                      ready_probe off; a reload turning it on (in the route)
                      turns /ready to 503 naming the route; one turning it
                      off again, back to 200
    drain_timeout     drain_timeout 1s and a session that never stops:
                      slipgate ends it after about a second and exits 0
    second_sigterm    drain_timeout 60s, a live session: a second SIGTERM
                      ends the drain at once (exit 0, the session ended)
    sigint_at_once    drain_timeout 60s, a live session: SIGINT (Ctrl-C)
                      does not drain, slipgate stops at once (exit 0)
    no_drain_default  without drain_timeout, SIGTERM stops at once with a
                      live session, as it always did
    env_set           SLIPGATE_SET_DRAIN_TIMEOUT and SLIPGATE_SET_main__IDLE_TIMEOUT
                      in the environment act as +set drain_timeout and +set
                      main.idle_timeout; the command line's +set wins
"""

import os
import re
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'http'))

import harness  # noqa: E402
from harness import Fail, check  # noqa: E402
import httplib_sg  # noqa: E402

V4 = '127.0.0.1'


def request(port, path, method='GET', headers=None, timeout=3.0):
    """(status, body) of one HTTP/1.1 request with Connection: close."""
    try:
        status, _, body = httplib_sg.request(port, path, method, headers, timeout)
    except (ValueError, IndexError):
        status, body = None, b''
    if status is None:
        raise Fail('%s: no HTTP answer' % path)
    return status, body.decode(errors='replace')


def wait_status(port, path, want, timeout):
    """Poll `path` until it answers `want`; returns (seconds taken, body)."""
    t0 = time.monotonic()
    status, body = None, ''
    for _ in range(1000):
        status, body = request(port, path)
        if status == want or time.monotonic() - t0 > timeout:
            break
        time.sleep(0.02)
    check(status == want, '%s: %s %r, expected %d within %.1f s' % (path, status, body, want,
                                                                     timeout))
    return time.monotonic() - t0, body


def proxy(h, server_port, extra='', route_extra='', args=()):
    conf = ('http 127.0.0.1:$P0\n' + extra +
            'route main {\n    listen 127.0.0.1:$P1\n    server 127.0.0.1:%d\n%s}\n'
            % (server_port, route_extra))
    px = h.proxy(conf, args=args)
    px.http = px.ports[0]
    px.listen = (V4, px.ports[1])
    px.wait_for_log(r'http: serving on', 5)
    return px


def exchange(c, px, payload, timeout=2.0):
    """Send one datagram through the proxy; the echo comes back."""
    c.send(payload, px.listen)
    got = c.recv_one(timeout)
    check(got is not None and payload in got[0], 'no echo of %r through slipgate (got %r)'
          % (payload, got))


def case_health(h):
    srv = h.echo(V4)
    px = proxy(h, srv.port, extra='http_token s3cret-t0ken\n')
    status, body = request(px.http, '/live')
    check(status == 200 and body.strip() == 'live', '/live: %s %r' % (status, body))
    status, body = request(px.http, '/ready')
    check(status == 200 and body.strip() == 'ready', '/ready: %s %r' % (status, body))
    status, _ = request(px.http, '/metrics')
    check(status == 401, '/metrics without the token: %s (the token must still guard it)'
          % status)
    status, _ = request(px.http, '/ready', method='POST')
    check(status == 405, 'POST /ready: %s' % status)
    check(px.stop() == 0, 'exit status')


PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000


def case_live_stuck_loop(h):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    srv = h.echo(V4)
    px = proxy(h, srv.port, extra='workers 2\n')
    status, body = request(px.http, '/live')
    check(status == 200, '/live: %s %r' % (status, body))
    pid = px.proc.pid
    tids = [int(t) for t in os.listdir('/proc/%d/task' % pid) if int(t) != pid]
    check(tids, 'no thread besides the main one (workers 2)')
    held = []
    try:
        for t in tids:
            if libc.ptrace(PTRACE_SEIZE, t, None, None) != 0:
                raise Fail('ptrace(PTRACE_SEIZE, %d): %s (this case needs ptrace: root, or '
                           'kernel.yama.ptrace_scope 0)' % (t, os.strerror(ctypes.get_errno())))
            held.append(t)
            check(libc.ptrace(PTRACE_INTERRUPT, t, None, None) == 0, 'PTRACE_INTERRUPT')
            os.waitpid(t, WALL)
        t0 = time.monotonic()
        took, body = wait_status(px.http, '/live', 503, 8)
        check('worker loop 1 has not turned' in body, '/live: %r' % body)
        check(time.monotonic() - t0 >= 3.5, '/live failed after %.1f s, before 5 s'
              % (time.monotonic() - t0))
    finally:
        for t in held:
            libc.ptrace(PTRACE_DETACH, t, None, None)
    wait_status(px.http, '/live', 200, 3)
    check(px.stop() == 0, 'exit status')
    print('/live 503 after %.1f s with the worker loop held, 200 once it ran' % took)


def live_session(h, px):
    c = h.client(V4)
    exchange(c, px, b'hello 0')
    return c


def draining_metric(px):
    status, body = request(px.http, '/metrics')
    check(status == 200, '/metrics: %s' % status)
    m = re.search(r'^slipgate_draining (\d+)$', body, re.M)
    check(m, 'no slipgate_draining in /metrics')
    return int(m.group(1))


def case_drain_session(h):
    srv = h.echo(V4)
    px = proxy(h, srv.port, extra='drain_timeout 20s\n', route_extra='    idle_timeout 1500ms\n')
    c = live_session(h, px)
    check(draining_metric(px) == 0, 'slipgate_draining is not 0 before SIGTERM')
    mark = px.log_mark()
    t0 = time.monotonic()
    px.send_signal(signal.SIGTERM)
    took, body = wait_status(px.http, '/ready', 503, 1.0)
    check('draining' in body, '/ready while draining: %r' % body)
    check(draining_metric(px) == 1, 'slipgate_draining is not 1 while draining')
    status, body = request(px.http, '/live')
    check(status == 200, '/live while draining: %s %r' % (status, body))
    check(px.wait_for_log(r'draining: no new session; 1 session goes on', 2, mark),
          'no "draining" line:\n' + '\n'.join(px.log_lines(mark)))
    # The session goes on, both ways.
    for i in range(1, 6):
        exchange(c, px, b'hello %d' % i)
        time.sleep(0.1)
    # A newcomer gets nothing.
    n = h.client(V4)
    n.send(b'newcomer', px.listen)
    check(n.recv_one(0.5) is None, 'a new client was relayed while draining')
    check(px.alive(), 'slipgate exited while its session was live')
    # The session times out (idle_timeout): the drain ends, exit 0.
    rc = px.wait_exit(6)
    check(rc == 0, 'exit status %s after the last session ended (expected 0)\n%s'
          % (rc, px.log_text()[-2000:]))
    elapsed = time.monotonic() - t0
    check(px.count_log(r'drained \(no session left\): shutting down', mark) == 1,
          'no "drained" line:\n' + '\n'.join(px.log_lines(mark)))
    st = px.stats()
    route = st['routes'][0]
    check(route['sessions_total'] == 1, 'sessions_total %s, expected 1 (the newcomer got none)'
          % route['sessions_total'])
    drops = route.get('counters', {}).get('drops', {})
    check(drops.get('shutdown', 0) >= 1, 'drops %r: the newcomer is not counted' % drops)
    print('/ready 503 after %.0f ms; exit 0 %.1f s after SIGTERM' % (took * 1000, elapsed))


OOB = b'\xff\xff\xff\xff'
Q3_FULL = OOB + b'print\nServer is full.\n'
QW_FULL = OOB + b'n\nserver is full\n\n'
NQ_CONNECT = b'\x80\x00\x00\x0c\x01QUAKE\x00\x03'  # CCREQ_CONNECT, protocol 3
NQ_FULL = b'\x80\x00\x00\x0c\x82Full.\n\x00'     # CCREP_REJECT, as long as the request


def silent(c, what, timeout=0.3):
    got = c.recv_one(timeout)
    check(got is None, '%s: expected silence, got %r' % (what, got))


def case_drain_full_reply(h):
    srv = h.echo(V4)
    conf = ('http 127.0.0.1:$P0\ndrain_timeout 20s\n'
            'route q3 {\n    listen 127.0.0.1:$P1\n    server %s\n    protocol q3\n}\n'
            'route qw {\n    listen 127.0.0.1:$P2\n    server %s\n    protocol qw\n}\n'
            'route nq {\n    listen 127.0.0.1:$P3\n    server %s\n    protocol nq\n}\n'
            % (srv.addr, srv.addr, srv.addr))
    px = h.proxy(conf)
    px.http = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    q3, qw, nq = (V4, px.ports[1]), (V4, px.ports[2]), (V4, px.ports[3])
    live = h.client(V4)
    live.send(b'hello 0', q3)
    got = live.recv_one(2.0)
    check(got is not None and b'hello 0' in got[0], 'no echo before the drain: %r' % (got,))
    px.send_signal(signal.SIGTERM)
    wait_status(px.http, '/ready', 503, 1.0)

    # Quake 3: the first handshake datagram gets the game's answer, once a second.
    c = h.client(V4)
    c.send(OOB + b'getchallenge 12345678 Quake3Arena', q3)
    got = c.recv_one(1.0)
    check(got is not None and got[0] == Q3_FULL and got[1] == q3,
          'Quake 3 getchallenge while draining: expected %r from %r, got %r'
          % (Q3_FULL, q3, got))
    c.send(OOB + b'connect ' + b'\x01\x02' + b'u' * 80, q3)
    silent(c, 'a second Quake 3 datagram within the second')
    short = h.client(V4)
    short.send(OOB + b'getchallenge', q3)
    silent(short, 'a getchallenge shorter than the answer (no amplification)')

    # QuakeWorld: a connect gets mvdsv's "server is full" print.
    w = h.client(V4)
    w.send(OOB + b'connect 28 1234 5678 "\\name\\player"\n', qw)
    got = w.recv_one(1.0)
    check(got is not None and got[0] == QW_FULL and got[1] == qw,
          'QuakeWorld connect while draining: expected %r from %r, got %r'
          % (QW_FULL, qw, got))
    w.send(OOB + b'connect 28 1234 5678 "\\name\\player"\n', qw)
    silent(w, 'a second QuakeWorld connect within the second')

    # NetQuake: a plain connect request gets a reject as long as itself.
    q = h.client(V4)
    q.send(NQ_CONNECT, nq)
    got = q.recv_one(1.0)
    check(got is not None and got[0] == NQ_FULL and got[1] == nq,
          'NetQuake connect while draining: expected %r from %r, got %r' % (NQ_FULL, nq, got))

    # The live session goes on.
    for i in range(1, 4):
        live.send(b'hello %d' % i, q3)
        got = live.recv_one(2.0)
        check(got is not None and b'hello %d' % i in got[0],
              'the live session was not relayed while draining: %r' % (got,))
    check(px.alive(), 'slipgate exited while its session was live')
    px.send_signal(signal.SIGTERM)
    rc = px.wait_exit(3)
    check(rc == 0, 'exit status %s after the second SIGTERM' % rc)
    st = px.stats()
    drops = {r['name']: r.get('counters', {}).get('drops', {}).get('shutdown', 0)
             for r in st['routes']}
    check(drops.get('q3', 0) >= 3 and drops.get('qw', 0) >= 2 and drops.get('nq', 0) >= 1,
          'drops.shutdown %r, expected at least 3 (q3), 2 (qw) and 1 (nq)' % drops)
    check(sum(r['sessions_total'] for r in st['routes']) == 1,
          'sessions_total %r: a newcomer got a session' % [r['sessions_total'] for r in st['routes']])
    print('Quake 3, QuakeWorld and NetQuake newcomers answered once; drops.shutdown %r' % drops)


def case_ready_probe(h):
    import threading
    srv = h.udp_socket(V4)
    srv.settimeout(0.05)
    state = {'answer': True, 'stop': False, 'queries': [], 'sources': set()}

    def serve():
        while not state['stop']:
            try:
                data, peer = srv.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            state['queries'].append((time.monotonic(), data))
            state['sources'].add(peer)
            if data == OOB + b'getstatus\n' and state['answer']:
                srv.sendto(OOB + b'statusResponse\n\\sv_hostname\\probe\n', peer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        srv_addr = '127.0.0.1:%d' % srv.getsockname()[1]
        conf = ('http 127.0.0.1:$P0\nready_probe on\nready_probe_timeout 1s\n'
                'route main {\n    listen 127.0.0.1:$P1\n    server %s\n    protocol q3\n}\n'
                % srv_addr)
        px = h.proxy(conf)
        px.http = px.ports[0]
        px.wait_for_log(r'http: serving on', 5)
        wait_status(px.http, '/ready', 200, 3.0)
        # The server stops answering: /ready turns 503 after about a second.
        state['answer'] = False
        t0 = time.monotonic()
        took, body = wait_status(px.http, '/ready', 503, 3.0)
        check('route main' in body and srv_addr in body and 'not answered' in body,
              '/ready while the server is silent: %r' % body)
        check(took >= 0.6, '/ready failed %.2f s after the last answer, before the timeout'
              % took)
        # An answer from anyone but the server does not count.
        check(len(state['sources']) == 1, 'status queries from %r' % state['sources'])
        probe = next(iter(state['sources']))
        other = h.udp_socket(V4)
        for _ in range(10):
            other.sendto(OOB + b'statusResponse\n\\sv_hostname\\spoof\n', probe)
            time.sleep(0.05)
        status, body = request(px.http, '/ready')
        check(status == 503, '/ready after answers from another address: %s %r'
              % (status, body))
        status, _ = request(px.http, '/live')
        check(status == 200, '/live while the server is silent: %s' % status)
        # It answers again: 200.
        state['answer'] = True
        wait_status(px.http, '/ready', 200, 3.0)
        qs = [q for q in state['queries'] if q[0] >= t0]
        span = qs[-1][0] - qs[0][0] if len(qs) > 1 else 0
        check(all(d == OOB + b'getstatus\n' for _, d in state['queries']),
              'the server got other datagrams: %r' % state['queries'][:5])
        check(len(qs) <= span / 0.15 + 2, '%d queries in %.2f s: more than one per 200 ms'
              % (len(qs), span))
        check(px.stop() == 0, 'exit status')
        print('/ready 503 %.2f s after the server went silent; %d queries in %.1f s'
              % (took, len(qs), span))
    finally:
        state['stop'] = True
        t.join(2)


def case_ready_probe_reload(h):
    srv = h.udp_socket(V4)  # never answers
    srv_addr = '127.0.0.1:%d' % srv.getsockname()[1]
    conf = ('http 127.0.0.1:%s\nready_probe_timeout 1s\n'
            'route main {\n    listen 127.0.0.1:%s\n    server ' + srv_addr +
            '\n    protocol q3\n%s}\n')
    px = h.proxy(conf % ('$P0', '$P1', ''))
    px.http = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    status, body = request(px.http, '/ready')
    check(status == 200, '/ready with ready_probe off: %s %r' % (status, body))
    for probe, want in (('on', 503), ('off', 200)):
        mark = px.log_mark()
        px.write_config(conf % (px.ports[0], px.ports[1], '    ready_probe %s\n' % probe))
        px.send_signal(signal.SIGHUP)
        check(px.wait_for_log(r'configuration reloaded', 3, mark), 'no reload')
        _, body = wait_status(px.http, '/ready', want, 3.0)
        if want == 503:
            check('route main' in body and srv_addr in body, '/ready: %r' % body)
    check(px.stop() == 0, 'exit status')
    print('ready_probe on and off by reload: /ready 503, then 200')


def keep_alive(c, px, seconds):
    """Traffic every 50 ms for up to `seconds` or until slipgate exits."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and px.alive():
        c.send(b'tick', px.listen)
        c.recv_one(0.05)


def case_drain_timeout(h):
    srv = h.echo(V4)
    px = proxy(h, srv.port, extra='drain_timeout 1s\n')
    c = live_session(h, px)
    mark = px.log_mark()
    t0 = time.monotonic()
    px.send_signal(signal.SIGTERM)
    keep_alive(c, px, 5)
    rc = px.wait_exit(3)
    took = time.monotonic() - t0
    check(rc == 0, 'exit status %s (expected 0)\n%s' % (rc, px.log_text()[-2000:]))
    check(0.9 <= took <= 3.0, 'stopped %.2f s after SIGTERM, expected about 1 s' % took)
    check(px.count_log(r'drain_timeout passed, 1 session left: shutting down', mark) == 1,
          'no "drain_timeout passed" line:\n' + '\n'.join(px.log_lines(mark)))
    print('stopped %.2f s after SIGTERM' % took)


def stop_with(h, sig_first, sig_then, extra):
    srv = h.echo(V4)
    px = proxy(h, srv.port, extra=extra)
    c = live_session(h, px)
    mark = px.log_mark()
    px.send_signal(sig_first)
    if sig_then is not None:
        wait_status(px.http, '/ready', 503, 1.0)
        exchange(c, px, b'still here')
        px.send_signal(sig_then)
    t0 = time.monotonic()
    rc = px.wait_exit(3)
    took = time.monotonic() - t0
    check(rc == 0, 'exit status %s (expected 0)\n%s' % (rc, px.log_text()[-2000:]))
    ends = px.session_ends(mark)
    check(len(ends) == 1, 'session ends logged: %d, expected 1\n%s'
          % (len(ends), '\n'.join(px.log_lines(mark))))
    return px, mark, took


def case_second_sigterm(h):
    px, mark, took = stop_with(h, signal.SIGTERM, signal.SIGTERM, 'drain_timeout 60s\n')
    check(px.count_log(r'draining', mark) >= 1, 'the first SIGTERM did not drain')
    print('the second SIGTERM stopped slipgate in %.0f ms' % (took * 1000))


def case_sigint_at_once(h):
    px, mark, took = stop_with(h, signal.SIGINT, None, 'drain_timeout 60s\n')
    check(px.count_log(r'draining', mark) == 0, 'SIGINT drained:\n' + px.log_text()[-2000:])
    print('SIGINT stopped slipgate in %.0f ms' % (took * 1000))


def case_no_drain_default(h):
    px, mark, took = stop_with(h, signal.SIGTERM, None, '')
    check(px.count_log(r'draining', mark) == 0, 'SIGTERM drained without drain_timeout')
    print('SIGTERM (no drain_timeout) stopped slipgate in %.0f ms' % (took * 1000))


def case_env_set(h):
    srv = h.echo(V4)
    os.environ['SLIPGATE_SET_DRAIN_TIMEOUT'] = '60s'
    os.environ['SLIPGATE_SET_main__IDLE_TIMEOUT'] = '800ms'
    px = proxy(h, srv.port, args=('+set', 'drain_timeout', '20s'))
    c = live_session(h, px)
    mark = px.log_mark()
    t0 = time.monotonic()
    px.send_signal(signal.SIGTERM)
    check(px.wait_for_log(r'drain_timeout \(20000 ms\)', 2, mark),
          'no drain with the command line\'s 20 s:\n' + '\n'.join(px.log_lines(mark)))
    rc = px.wait_exit(4)
    took = time.monotonic() - t0
    check(rc == 0, 'exit status %s (expected 0)' % rc)
    ends = px.session_ends(mark)
    check(len(ends) == 1 and 'reason=idle' in ends[0].string and took < 3,
          'the session did not end idle after 800 ms (%.1f s): %r' % (took, [m.string for m in ends]))
    print('idle end and exit %.1f s after SIGTERM' % took)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
