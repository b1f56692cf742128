#!/usr/bin/env python3
"""Loopback integration tests: the real slipgate binary between scripted
peers on 127.0.0.1 and ::1.

    SLIPGATE=build/proxy/slipgate python3 relay_test.py CASE

Exit 0 pass, 1 fail (with what differed), 77 skip (IPv6 cases only, when
[::1] cannot be bound).  Set SLIPGATE_TEST_FORCE_NO_IPV6=1 to exercise the
skip path.  Registered one test per case in meson.build.
"""

import collections
import os
import random
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (V4, V6, Fail, check, fmt_addr, parse_hostport, pump,  # noqa: E402
                     require_ipv6, ipv6_unavailable_reason, loopback_mtu, main,
                     dead_port as find_dead_port,
                     END_RE, Proxy)

TAG = b'ECHO'
DROP_KEYS = ('session_limit', 'rate_limit', 'send_error', 'unreachable')
COUNTER_KEYS = ('c2s_packets', 'c2s_bytes', 's2c_packets', 's2c_bytes')

# Bounds for "ended by idle_timeout 1s": measured from the last datagram the
# client saw, which is a little after the proxy's last activity.
IDLE_MIN, IDLE_MAX = 0.85, 2.2


# ---------------------------------------------------------------- helpers

def rng_for(case):
    seed = int(os.environ.get('SLIPGATE_TEST_SEED', '0')) or random.randrange(1, 1 << 30)
    print('%s: random seed %d (set SLIPGATE_TEST_SEED to repeat)' % (case, seed))
    return random.Random(seed)


def describe(data):
    return '%d bytes %r%s' % (len(data), data[:24], '...' if len(data) > 24 else '')


def roundtrip(client, dest, payload, server_tag=TAG, timeout=2.0, what=''):
    """Send one datagram through the proxy; the echo must come back intact
    from the proxy's listen address.  Returns the reply."""
    client.send(payload, dest)
    r = client.recv_one(timeout)
    check(r is not None, '%sclient %s: no echo within %.1f s for %s'
          % (what, fmt_addr(*client.addr), timeout, describe(payload)))
    data, src = r
    check(data == server_tag + payload,
          '%sclient %s: echo differs: sent %s, expected reply %s, got %s'
          % (what, fmt_addr(*client.addr), describe(payload),
             describe(server_tag + payload), describe(data)))
    check(src == dest, '%sclient %s: reply came from %s, not from the proxy address %s'
          % (what, fmt_addr(*client.addr), fmt_addr(*src), fmt_addr(*dest)))
    return data


def expect_silence(client, seconds, what):
    got = client.recv(seconds)
    check(not got, '%s: client %s received %d datagram(s) it should not have: %s'
          % (what, fmt_addr(*client.addr), len(got),
             ', '.join('%s from %s' % (describe(d), fmt_addr(*s)) for d, s in got[:3])))


def route_block(name, listen, server, **opts):
    lines = ['route %s {' % name, '    listen %s' % listen, '    server %s' % server]
    lines += ['    %s %s' % (k, v) for k, v in opts.items()]
    return '\n'.join(lines + ['}', ''])


def stats_route(st, name):
    check(isinstance(st, dict) and isinstance(st.get('routes'), list),
          'stats: no "routes" list: %r' % (st,))
    for r in st['routes']:
        if r.get('name') == name:
            return r
    raise Fail('stats: no route named %r (routes: %r)'
               % (name, [r.get('name') for r in st['routes']]))


def drops(route_or_session):
    c = route_or_session.get('counters')
    check(isinstance(c, dict), 'stats: no "counters" object in %r' % (route_or_session,))
    d = c.get('drops')
    check(isinstance(d, dict), 'stats: no "counters.drops" object in %r' % (c,))
    for k in DROP_KEYS:
        check(isinstance(d.get(k), int), 'stats: counters.drops.%s missing or not an '
              'integer: %r' % (k, d))
    return d


def counters(obj, where):
    c = obj.get('counters')
    check(isinstance(c, dict), 'stats %s: no "counters" object: %r' % (where, obj))
    for k in COUNTER_KEYS:
        check(isinstance(c.get(k), int), 'stats %s: counters.%s missing or not an integer: %r'
              % (where, k, c))
    return c


def expect_counters(obj, where, c2s_p, c2s_b, s2c_p, s2c_b):
    c = counters(obj, where)
    got = tuple(c[k] for k in COUNTER_KEYS)
    want = (c2s_p, c2s_b, s2c_p, s2c_b)
    check(got == want, 'stats %s counters: expected %s, got %s' % (
        where, dict(zip(COUNTER_KEYS, want)), dict(zip(COUNTER_KEYS, got))))


def session_for(route, port):
    """The stats sessions of `route` whose client port is `port`."""
    sess = route.get('sessions')
    check(isinstance(sess, list), 'stats: route %r has no "sessions" list' % route.get('name'))
    out = []
    for s in sess:
        check(isinstance(s.get('client'), str), 'stats: session without "client": %r' % s)
        if parse_hostport(s['client'])[1] == port:
            out.append(s)
    return out


def check_ended_or_active_at_shutdown(s, where):
    state = s.get('state')
    check(state in ('active', 'ended'), '%s: session state %r is neither active nor ended'
          % (where, state))
    if state == 'ended':
        check(s.get('end_reason') == 'shutdown', '%s: session ended with reason %r, '
              'expected shutdown (or still active)' % (where, s.get('end_reason')))


def stop_ok(px, sig=signal.SIGTERM):
    rc = px.stop(sig)
    check(rc == 0, 'slipgate exited with status %d after %s, expected 0'
          % (rc, signal.Signals(sig).name))
    return px.stats()


def payload_set(rng, i, mtu, family_overhead):
    """Payloads for client i: 1 byte, all 256 byte values, random sizes
    2..1400, 1400 bytes, and ~8000 bytes when the loopback MTU allows."""
    rot = i % 256
    allbytes = bytes(range(256))
    p = [bytes([i % 256]), allbytes[rot:] + allbytes[:rot]]
    p += [rng.randbytes(rng.randint(2, 1400)) for _ in range(3)]
    p.append(rng.randbytes(1400))
    if mtu >= 8000 + family_overhead:
        p.append(rng.randbytes(8000))
    if i == 0 and mtu >= 16000 + family_overhead:
        p.append(rng.randbytes(16000))
    return p


# ------------------------------------------------------------ concurrency

def spread_host(i):
    """A loopback source address of its own for client i (127.0.0.2 ...):
    slipgate's worker loops share the clients by source address."""
    return '127.0.%d.%d' % (i // 250, 2 + i % 250)


def run_concurrent(h, host, case, nclients=50, extra_args=(), spread=False):
    """`spread`: each client from its own loopback address (spread_host)."""
    rng = rng_for(case)
    srv = h.echo(host)
    # All clients share one source IP: lift the per-source new-session rate.
    px = h.proxy(args=['-l', fmt_addr(host, '$P0'), '-s', srv.addr, '-p', 'auto',
                       '+set', 'new_sessions_per_source', '1000'] + list(extra_args))
    dest = (host, px.ports[0])
    clients = [h.client(spread_host(i) if spread else host) for i in range(nclients)]
    mtu = loopback_mtu()
    overhead = 48 if host == V6 else 28
    sent = {c: payload_set(rng, i, mtu, overhead) for i, c in enumerate(clients)}
    # Round-robin: every client's first datagram, then every second one, ...
    flows = []
    for r in range(max(len(p) for p in sent.values())):
        for c in clients:
            if r < len(sent[c]):
                flows.append((c, sent[c][r]))
    total = len(flows)
    total_bytes = sum(len(p) for _, p in flows)
    t0 = time.monotonic()
    got = pump(flows, dest, TAG, timeout=20.0)
    elapsed = time.monotonic() - t0

    # Every echo came back intact, exactly once, from the proxy address.
    problems = []
    bad = set()
    for i, c in enumerate(clients):
        want = collections.Counter(TAG + p for p in sent[c])
        have = collections.Counter(d for d, _ in got[c])
        missing = want - have
        extra = have - want
        if missing or extra:
            bad.add(i)
            problems.append('client %d (%s): %d echo(es) missing [%s], %d unexpected [%s]'
                            % (i, fmt_addr(*c.addr), sum(missing.values()),
                               ', '.join(describe(d[len(TAG):]) for d in list(missing)[:3]),
                               sum(extra.values()),
                               ', '.join(describe(d) for d in list(extra)[:3])))
        bad_src = {s for _, s in got[c] if s != dest}
        if bad_src:
            bad.add(i)
            problems.append('client %d got replies from %s, not from the proxy %s'
                            % (i, bad_src, fmt_addr(*dest)))
    check(not problems, '%d of %d clients had wrong echoes:\n  %s'
          % (len(bad), nclients, '\n  '.join(problems[:10])))

    # The server saw each client's datagrams from one source of its own.
    recs = srv.snapshot()
    check(len(recs) == total, 'echo server received %d datagrams, sent %d' % (len(recs), total))
    by_payload = collections.defaultdict(set)
    for _, src, data in recs:
        by_payload[data].add(src)
    client_src = {}
    for i, c in enumerate(clients):
        srcs = set()
        for p in sent[c]:
            srcs |= by_payload.get(p, set())
        check(len(srcs) == 1, 'client %d (%s): the server saw its datagrams from %d '
              'source addresses %s, expected exactly one' % (i, fmt_addr(*c.addr), len(srcs),
                                                             sorted(srcs)[:5]))
        client_src[c] = srcs.pop()
    srv_sources = srv.sources()
    ports = {p for _, p in srv_sources}
    check(len(srv_sources) == nclients and len(ports) == nclients,
          'the server saw %d distinct source addresses (%d distinct ports), expected %d'
          % (len(srv_sources), len(ports), nclients))
    check(len(set(client_src.values())) == nclients,
          'two clients share one upstream source: %d distinct for %d clients'
          % (len(set(client_src.values())), nclients))
    hosts = {a for a, _ in srv_sources}
    check(hosts == {host}, 'the server saw source hosts %s, expected only %s' % (hosts, host))
    client_ports = {c.port for c in clients}
    clash = ports & client_ports
    check(not clash, 'upstream source port(s) %s equal a client port: the proxy must '
          'use its own socket per session' % sorted(clash))
    check(px.ports[0] not in ports, 'the server saw datagrams from the listen port %d'
          % px.ports[0])

    # One "session start" log line per client, naming the client (logged when
    # the server first answers: the echo may reach the client before it).
    wait_starts(px, nclients, 0, 2.0, 'one per client')
    starts = px.session_starts()
    logged = {parse_hostport(m.group('client')) for m in starts}
    client_addrs = {c.addr for c in clients}
    check(len(starts) == nclients and logged == client_addrs,
          'expected %d "session start ... client=IP:PORT" lines naming the clients; got %d '
          'lines, %d clients missing' % (nclients, len(starts), len(client_addrs - logged)))
    check({m.group('route') for m in starts} == {'default'},
          'session start lines name routes %s, expected [default]'
          % {m.group('route') for m in starts})

    st = stop_ok(px)
    r = stats_route(st, 'default')
    check(r.get('sessions_total') == nclients, 'stats: sessions_total %r, expected %d'
          % (r.get('sessions_total'), nclients))
    expect_counters(r, 'route default', total, total_bytes, total,
                    total_bytes + len(TAG) * total)
    d = drops(r)
    check(all(v == 0 for v in d.values()), 'stats: drops should all be 0: %r' % d)
    print('%d clients x %d datagrams (%d bytes, largest %d) relayed in %.2f s'
          % (nclients, total // nclients, total_bytes, max(len(p) for _, p in flows), elapsed))
    return r


def case_concurrent_v4(h):
    run_concurrent(h, V4, 'concurrent_v4')


def case_concurrent_v6(h):
    require_ipv6()
    run_concurrent(h, V6, 'concurrent_v6')


def case_dualstack(h):
    require_ipv6()
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '[::]:$P0', '-s', srv.addr])
    P = px.ports[0]
    c4, c6 = h.client(V4), h.client(V6)
    for k in range(3):
        roundtrip(c4, (V4, P), b'v4-%d' % k + bytes(range(256)), what='IPv4 client: ')
        roundtrip(c6, (V6, P), b'v6-%d' % k + bytes(range(256)), what='IPv6 client: ')
    check(len(srv.sources()) == 2, 'server saw %d sources, expected 2 (one per client)'
          % len(srv.sources()))
    st = stop_ok(px)
    r = stats_route(st, 'default')
    check(r.get('sessions_total') == 2, 'stats: sessions_total %r, expected 2'
          % r.get('sessions_total'))
    s4, s6 = session_for(r, c4.port), session_for(r, c6.port)
    check(len(s4) == 1 and len(s6) == 1, 'stats: expected one session per client port '
          '(%d, %d), got %r' % (c4.port, c6.port, [s.get('client') for s in r['sessions']]))
    h4 = parse_hostport(s4[0]['client'])[0]
    h6 = parse_hostport(s6[0]['client'])[0]
    check(h4 in ('127.0.0.1', '::ffff:127.0.0.1'), 'stats: IPv4 client shown as %r' % h4)
    if h4 != '127.0.0.1':
        print('note: the IPv4 client on a [::] listener is reported as %r '
              '(IPv4-mapped), not 127.0.0.1' % s4[0]['client'])
    check(h6 == '::1', 'stats: IPv6 client shown as %r, expected ::1' % h6)


def case_v6_server_from_v4_client(h):
    require_ipv6()
    srv = h.echo(V6)
    px = h.proxy(config=route_block('mixed', '127.0.0.1:$P0', srv.addr))
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(3)]
    for i, c in enumerate(clients):
        for k in range(3):
            roundtrip(c, dest, b'mixed %d %d ' % (i, k) + bytes(range(256)))
    srcs = srv.sources()
    check(len(srcs) == 3, 'server saw %d sources, expected 3: %s' % (len(srcs), srcs))
    check({a for a, _ in srcs} == {V6}, 'server saw source hosts %s, expected ::1'
          % {a for a, _ in srcs})
    st = stop_ok(px)
    r = stats_route(st, 'mixed')
    check(r.get('sessions_total') == 3, 'stats: sessions_total %r, expected 3'
          % r.get('sessions_total'))


# ------------------------------------------------------------ idle timeout

def wait_idle_end(px, route, mark, t_last, what):
    """Wait for `route`'s "session end ... reason=idle" line after log index
    `mark`; checks it came IDLE_MIN..IDLE_MAX s after `t_last`."""
    rx = r'\[' + re.escape(route) + r'\]\s+\[s\d+\].*session end.*reason=idle'
    hit = px.wait_for_log(rx, max(0.0, t_last + IDLE_MAX + 1.0 - time.monotonic()), start=mark)
    if hit is None:
        ends = [l for l in px.log_lines(mark) if 'session end' in l]
        raise Fail('%s: no "LEVEL [%s] [sN] ... session end ... reason=idle" log line within '
                   '%.1f s of the last packet; session end lines seen: %s'
                   % (what, route, time.monotonic() - t_last, ends or 'none'))
    t, m = hit
    dt = t - t_last
    check(IDLE_MIN <= dt <= IDLE_MAX, '%s: idle end logged %.2f s after the last packet, '
          'expected %.2f..%.2f s for idle_timeout 1s' % (what, dt, IDLE_MIN, IDLE_MAX))
    check(END_RE.search(m.string), '%s: session end line does not look like '
          '"TIMESTAMP LEVEL [ROUTE] [sN] ... session end ... reason=idle": %r'
          % (what, m.string))
    check(re.search(r'c2s', m.string) and re.search(r's2c', m.string),
          '%s: the session end line carries no c2s/s2c counters: %r' % (what, m.string))
    return m.string, dt


def case_idle_timeout(h):
    srv = h.echo(V4)
    px = h.proxy(config=route_block('r1', '127.0.0.1:$P0', srv.addr, idle_timeout='1s'))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    mark = px.log_mark()
    roundtrip(c, dest, b'first')
    t_last = time.monotonic()
    line, dt = wait_idle_end(px, 'r1', mark, t_last, 'idle_timeout 1s')
    first_start = px.session_starts(mark)
    check(len(first_start) == 1, 'expected 1 session start line, got %d' % len(first_start))
    end_sid = END_RE.search(line).group('sid')
    check(end_sid == first_start[0].group('sid'), 'session end names s%s, the start named s%s'
          % (end_sid, first_start[0].group('sid')))
    # The same client again: a new session.
    mark2 = px.log_mark()
    roundtrip(c, dest, b'second', what='after the idle end: ')
    wait_starts(px, 1, mark2, 2.0, 'after the idle end')  # logged as the answer went out
    starts2 = px.session_starts(mark2)
    check(len(starts2) == 1, 'a packet after the idle end should start a new session; '
          'got %d session start lines' % len(starts2))
    check(starts2[0].group('sid') != end_sid, 'the new session reuses id s%s' % end_sid)
    st = stop_ok(px)
    r = stats_route(st, 'r1')
    check(r.get('sessions_total') == 2, 'stats: sessions_total %r, expected 2'
          % r.get('sessions_total'))
    ss = session_for(r, c.port)
    check(len(ss) == 2, 'stats: expected 2 sessions for client port %d, got %d'
          % (c.port, len(ss)))
    idle = [s for s in ss if s.get('state') == 'ended' and s.get('end_reason') == 'idle']
    check(len(idle) == 1, 'stats: expected one session ended with reason idle, got %r'
          % [(s.get('state'), s.get('end_reason')) for s in ss])
    expect_counters(idle[0], 'idle session', 1, 5, 1, 5 + len(TAG))
    other = [s for s in ss if s is not idle[0]][0]
    check_ended_or_active_at_shutdown(other, 'stats: second session')
    check(idle[0].get('id') != other.get('id'), 'stats: both sessions have id %r'
          % other.get('id'))
    print('idle end after %.2f s: %s' % (dt, line))


# ---------------------------------------------------------------- limits

def case_session_cap(h):
    srv = h.echo(V4)
    px = h.proxy(config=route_block('cap', '127.0.0.1:$P0', srv.addr, max_sessions=5,
                                    new_sessions_per_source=1000, idle_timeout='60s'))
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(8)]
    for i, c in enumerate(clients[:5]):
        roundtrip(c, dest, b'cap-%d-a' % i, what='client %d of 5 allowed: ' % i)
    for i, c in enumerate(clients[5:], 5):
        c.send(b'cap-%d-a' % i, dest)
    for i, c in enumerate(clients[5:], 5):
        expect_silence(c, 0.3, 'client %d over max_sessions 5' % i)
    # Second round: the first five still work, the others still get nothing.
    for i, c in enumerate(clients[:5]):
        roundtrip(c, dest, b'cap-%d-b' % i, what='second round, client %d: ' % i)
    for i, c in enumerate(clients[5:], 5):
        c.send(b'cap-%d-b' % i, dest)
    for i, c in enumerate(clients[5:], 5):
        expect_silence(c, 0.3, 'second round, client %d over max_sessions 5' % i)
    got = sorted(d for _, _, d in srv.snapshot())
    check(len(srv.sources()) == 5 and len(got) == 10,
          'server saw %d sources and %d datagrams, expected 5 and 10: %s'
          % (len(srv.sources()), len(got), got))
    check(all(int(d.split(b'-')[1]) < 5 for d in got),
          'the server received datagrams of a refused client: %s' % got)
    st = stop_ok(px)
    r = stats_route(st, 'cap')
    check(r.get('sessions_total') == 5, 'stats: sessions_total %r, expected 5'
          % r.get('sessions_total'))
    d = drops(r)
    check(d['session_limit'] == 6, 'stats: drops.session_limit %r, expected 6 '
          '(3 refused clients x 2 datagrams)' % d['session_limit'])


def case_rate_cap(h):
    srv = h.echo(V4)
    px = h.proxy(config=route_block('rate', '127.0.0.1:$P0', srv.addr, max_sessions=1000,
                                    new_sessions_per_source=3, idle_timeout='60s'))
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(10)]
    t0 = time.monotonic()
    for i, c in enumerate(clients):
        c.send(b'rate-%d' % i, dest)
    burst = time.monotonic() - t0
    ok = []
    deadline = t0 + 0.6
    for i, c in enumerate(clients):
        r = c.recv_one(max(0.0, deadline - time.monotonic()))
        if r is not None:
            check(r[0] == TAG + b'rate-%d' % i, 'client %d: wrong echo %r' % (i, r[0]))
            ok.append(i)
    check(3 <= len(ok) <= 4, '10 clients from one IP within %.0f ms with '
          'new_sessions_per_source 3: %d got a session (%s), expected 3 (burst) to 4'
          % (burst * 1000, len(ok), ok))
    # After the bucket refills, another client succeeds.
    time.sleep(max(0.0, t0 + 1.15 - time.monotonic()))
    late = h.client(V4)
    roundtrip(late, dest, b'rate-late', what='new client 1.15 s later: ')
    st = stop_ok(px)
    r = stats_route(st, 'rate')
    check(r.get('sessions_total') == len(ok) + 1, 'stats: sessions_total %r, expected %d'
          % (r.get('sessions_total'), len(ok) + 1))
    d = drops(r)
    check(d['rate_limit'] == 10 - len(ok), 'stats: drops.rate_limit %r, expected %d '
          '(one per refused datagram)' % (d['rate_limit'], 10 - len(ok)))
    check(d['session_limit'] == 0, 'stats: drops.session_limit %r, expected 0'
          % d['session_limit'])
    print('%d of 10 sessions in the first burst (%.1f ms), rate_limit drops %d'
          % (len(ok), burst * 1000, d['rate_limit']))


# ------------------------------------------------------------- admission

def wait_starts(px, n, mark, timeout, what):
    """Wait until `n` "session start" lines follow log index `mark` (those of
    sessions the server has not answered are at debug: the proxy needs -v)."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.02) + 1):
        if len(px.session_starts(mark)) >= n or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    got = len(px.session_starts(mark))
    check(got >= n, '%s: %d "session start" lines within %.1f s, expected %d'
          % (what, got, timeout, n))


def ended_reasons(route):
    """{client port: [end_reason or None, ...]} of a stats route's sessions."""
    out = collections.defaultdict(list)
    for s in route.get('sessions') or []:
        out[parse_hostport(s['client'])[1]].append(s.get('end_reason'))
    return out


def case_flood_evicts(h):
    """A full table of sessions the server never answered makes room for a
    real new player; established sessions are never evicted."""
    srv = h.echo(V4)
    # -v: the start line of a session the server has not answered is at debug (wait_starts)
    px = h.proxy(config=route_block('fl', '127.0.0.1:$P0', srv.addr, max_sessions=20,
                                    new_sessions_per_source=1000, idle_timeout='60s'),
                 args=['-v'])
    dest = (V4, px.ports[0])
    players = [h.client(V4) for _ in range(3)]
    for i, c in enumerate(players):
        roundtrip(c, dest, b'player-%d' % i, what='player %d: ' % i)
    # A flood the server does not answer (1-byte junk), from 40 sources.
    srv.echo = False
    mark = px.log_mark()
    flood = [h.client(V4) for _ in range(40)]
    for c in flood:
        c.send(b'\x01', dest)
    wait_starts(px, 17, mark, 2.0, 'flood')
    time.sleep(0.3)
    check(len(srv.snapshot()) >= 3 + 17, 'the server saw %d datagrams, expected at least 20'
          % len(srv.snapshot()))
    # A real new player gets in at once, and the players keep their sessions.
    srv.echo = True
    newbie = h.client(V4)
    roundtrip(newbie, dest, b'newcomer', what='new player with a full table: ')
    for i, c in enumerate(players):
        roundtrip(c, dest, b'player-%d-again' % i, what='player %d after the flood: ' % i)
    warned = px.count_log(r'(?i)warn\b.*\[fl\].*session table full.*were ended \(reason=evicted\)')
    check(warned == 1, 'expected one (rate-limited) "session table full ... evicted" warning, '
          'got %d' % warned)
    st = stop_ok(px)
    r = stats_route(st, 'fl')
    reasons = ended_reasons(r)
    for c in players + [newbie]:
        check(reasons[c.port] in ([None], ['shutdown']), 'client %d (answered) ended with %r'
              % (c.port, reasons[c.port]))
    evicted = [c.port for c in flood if reasons[c.port] == ['evicted']]
    check(r.get('sessions_total') == 44, 'stats: sessions_total %r, expected 44'
          % r.get('sessions_total'))
    check(len(evicted) == 24 and r.get('sessions_evicted') == 24,
          'expected 24 flood sessions evicted (44 sessions, 20 slots); stats says '
          'sessions_evicted %r, %d sessions ended evicted'
          % (r.get('sessions_evicted'), len(evicted)))
    check(evicted == [c.port for c in flood[:24]], 'the oldest flood sessions should go first')
    check(drops(r)['session_limit'] == 0, 'stats: drops.session_limit %r, expected 0'
          % drops(r)['session_limit'])


def case_handshake_timeout(h):
    """A session the server never answered ends after handshake_timeout;
    an answered one lives on (idle_timeout)."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('hs', '127.0.0.1:$P0', srv.addr, handshake_timeout='1s',
                                    idle_timeout='60s'))
    dest = (V4, px.ports[0])
    player, silent = h.client(V4), h.client(V4)
    roundtrip(player, dest, b'hello')
    srv.echo = False
    silent.send(b'anyone?', dest)
    t0 = time.monotonic()
    time.sleep(2.2)
    srv.echo = True
    roundtrip(player, dest, b'still here', what='answered session after 2.2 s: ')
    check(time.monotonic() - t0 < 3.0, 'the test took too long to be meaningful')
    st = stop_ok(px)
    r = stats_route(st, 'hs')
    check(r.get('sessions_total') == 2, 'stats: sessions_total %r, expected 2 (the player kept '
          'its session)' % r.get('sessions_total'))
    s = session_for(r, silent.port)
    check(len(s) == 1 and s[0].get('end_reason') == 'handshake timeout',
          'the unanswered session: %r, expected one ended with "handshake timeout"' % s)
    dt = (s[0]['ended_ms'] - s[0]['started_ms']) / 1000.0
    check(0.9 <= dt <= 1.8, 'the unanswered session lasted %.2f s, expected about 1 s' % dt)
    p = session_for(r, player.port)
    check(len(p) == 1 and p[0].get('end_reason') in (None, 'shutdown'),
          'the answered session: %r' % p)


OOB = b'\xff\xff\xff\xff'


def established_case(h, protocol, accept, move):
    """A decoding route (`protocol`): an answer alone does not establish a
    session, the handshake does (the server's connectionless `accept`,
    then the client's sequenced traffic, `move(seq)`).  A full table evicts
    sessions the server never answered before those it answered, and never
    the player's."""
    srv = h.echo(V4, tag=OOB)  # every answer is connectionless: OOB + what came
    px = h.proxy(config=route_block(protocol, '127.0.0.1:$P0', srv.addr, protocol=protocol,
                                    max_sessions=4, new_sessions_per_source=1000,
                                    handshake_timeout='1500ms', idle_timeout='60s'),
                 args=['-v'])  # the unanswered sessions' start lines are at debug (wait_starts)
    dest = (V4, px.ports[0])
    # Answered, not in game: a status query.
    query = h.client(V4)
    roundtrip(query, dest, OOB + b'getstatus', server_tag=OOB, what='status query: ')
    # Three the server does not answer fill the table.
    srv.echo = False
    mark = px.log_mark()
    flood = [h.client(V4) for _ in range(3)]
    for c in flood:
        c.send(OOB + b'getinfo', dest)
    wait_starts(px, 3, mark, 2.0, 'unanswered sessions')
    time.sleep(0.1)
    srv.echo = True
    # A newcomer takes the oldest unanswered session's place.
    newbie = h.client(V4)
    roundtrip(newbie, dest, OOB + b'getinfo', server_tag=OOB, what='newcomer: ')
    # A player: the server's accept, then its sequenced datagrams.
    player = h.client(V4)
    roundtrip(player, dest, accept, server_tag=OOB, what='connect: ')
    roundtrip(player, dest, move(1), server_tag=OOB, what='first move: ')
    time.sleep(2.0)
    roundtrip(player, dest, move(2), server_tag=OOB, what='player after 2 s: ')
    st = stop_ok(px)
    r = stats_route(st, protocol)
    reasons = ended_reasons(r)
    want = {query.port: ['handshake timeout'], flood[0].port: ['evicted'],
            flood[1].port: ['evicted'], flood[2].port: ['handshake timeout'],
            newbie.port: ['handshake timeout']}
    got = {p: reasons[p] for p in want}
    check(got == want, '-p %s: end reasons %s, expected %s' % (protocol, got, want))
    check(reasons[player.port] in ([None], ['shutdown']),
          '-p %s: the player in game ended with %r' % (protocol, reasons[player.port]))
    check(r.get('sessions_total') == 6, '-p %s: stats: sessions_total %r, expected 6'
          % (protocol, r.get('sessions_total')))


def case_q3_established(h):
    """Quake 3: connectResponse, then the client's datagrams (sequence, qport)."""
    established_case(h, 'q3', b'connectResponse', lambda seq: struct.pack('<IH', seq, 1234)
                     + b'move')


def case_qw_established(h):
    """QuakeWorld: the server's `j`, then the client's netchan datagrams
    (sequence, ack, qport, a clc_nop)."""
    established_case(h, 'qw', b'j', lambda seq: struct.pack('<IIH', seq, 0, 1234) + b'\x01')


def case_q2_established(h):
    """Quake 2 (34): the server's `client_connect`, then the client's netchan
    datagrams (sequence, ack, qport, a clc_nop)."""
    established_case(h, 'q2', b'client_connect', lambda seq: struct.pack('<IIH', seq, 0, 1234)
                     + b'\x01')


def case_session_limit_warning(h):
    """A table full of established sessions refuses newcomers, and says so
    again (with a count) while it lasts, at most every 10 s."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('lim', '127.0.0.1:$P0', srv.addr, max_sessions=2,
                                    new_sessions_per_source=1000, idle_timeout='60s'))
    dest = (V4, px.ports[0])
    players = [h.client(V4) for _ in range(2)]
    for i, c in enumerate(players):
        roundtrip(c, dest, b'p%d' % i)
    rx = r'(?i)warn\b.*\[lim\].*session limit \(2\) reached'
    count = r'(?i)warn\b.*\[lim\].*session limit \(2\) reached.*?(\d+) datagram'
    late = [h.client(V4) for _ in range(10)]
    late[0].send(b'x', dest)
    hit = px.wait_for_log(rx, 2.0)
    check(hit is not None, 'no "session limit (2) reached" warning')
    mark = px.log_mark()
    for c in late[1:]:
        c.send(b'x', dest)
    for c in late:
        expect_silence(c, 0.05, 'client over max_sessions 2')
    check(px.count_log(rx, mark) == 0, 'the warning was repeated at once (not rate-limited)')
    hit = px.wait_for_log(rx, 13.0, start=mark)
    check(hit is not None, 'the session limit warning was not repeated while it lasted')
    hit = px.wait_for_log(count, 0.0, start=mark)
    check(hit is not None and hit[1].group(1) == '9', 'the repeated warning does not count the '
          '9 datagrams refused since the first: %r' % (hit and hit[1].string))
    for i, c in enumerate(players):
        roundtrip(c, dest, b'p%d-again' % i)
    st = stop_ok(px)
    check(drops(stats_route(st, 'lim'))['session_limit'] == 10, 'stats: drops.session_limit '
          '%r, expected 10' % drops(stats_route(st, 'lim'))['session_limit'])


def case_rate_warning(h):
    """Datagrams refused by new_sessions_per_source: counted per route in
    --stats and reported by one rate-limited warning."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('rw', '127.0.0.1:$P0', srv.addr, max_sessions=1000,
                                    new_sessions_per_source=3, idle_timeout='60s'))
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(10)]
    for c in clients:
        c.send(b'x', dest)
    ok = sum(1 for c in clients if c.recv_one(0.3) is not None)
    rx = r'(?i)warn\b.*\[rw\].*new-session rate limit \(3 per second per source[,)]'
    check(px.wait_for_log(rx, 1.0) is not None, 'no rate limit warning')
    check(px.count_log(rx) == 1, '%d rate limit warnings, expected 1 (rate-limited)'
          % px.count_log(rx))
    st = stop_ok(px)
    d = drops(stats_route(st, 'rw'))
    check(d['rate_limit'] == 10 - ok and ok < 10, 'stats: drops.rate_limit %r, %d sessions '
          'opened of 10' % (d['rate_limit'], ok))


def limit_nofile(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def case_nofile_raise(h):
    """Started with a soft limit of 64 open files (hard 4096), slipgate
    raises it so that max_sessions 200 sessions open."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('nf', '127.0.0.1:$P0', srv.addr, max_sessions=200,
                                    new_sessions_per_source=1000, idle_timeout='60s'),
                 preexec_fn=limit_nofile(64, 4096))
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(200)]
    for i, c in enumerate(clients):
        roundtrip(c, dest, b'c%d' % i, what='client %d of 200: ' % i)
    check(px.count_log(r'cannot open a socket') == 0, 'socket errors logged')
    check(px.count_log(r'cannot be reached') == 0, 'a max_sessions warning with a hard limit '
          'of 4096')
    st = stop_ok(px)
    r = stats_route(st, 'nf')
    check(r.get('sessions_total') == 200 and drops(r)['no_socket'] == 0,
          'stats: sessions_total %r, drops.no_socket %r; expected 200 and 0'
          % (r.get('sessions_total'), drops(r)['no_socket']))


def case_nofile_reload(h):
    """A reload that raises max_sessions raises the open files limit too."""
    srv = h.echo(V4)
    opts = dict(new_sessions_per_source=1000, idle_timeout='60s')
    px = h.proxy(config=route_block('nr', '127.0.0.1:$P0', srv.addr, max_sessions=10, **opts),
                 preexec_fn=limit_nofile(64, 4096))
    P = px.ports[0]
    dest = (V4, P)
    px.write_config(route_block('nr', '127.0.0.1:%d' % P, srv.addr, max_sessions=200, **opts))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'configuration reloaded', 3.0, start=mark) is not None,
          'no "configuration reloaded" line after SIGHUP')
    clients = [h.client(V4) for _ in range(200)]
    for i, c in enumerate(clients):
        roundtrip(c, dest, b'c%d' % i, what='client %d of 200 after the reload: ' % i)
    st = stop_ok(px)
    r = stats_route(st, 'nr')
    check(r.get('sessions_total') == 200 and drops(r)['no_socket'] == 0,
          'stats: sessions_total %r, drops.no_socket %r; expected 200 and 0'
          % (r.get('sessions_total'), drops(r)['no_socket']))


def case_nofile_capped(h):
    """With soft = hard = 64 open files, max_sessions 200 cannot be reached:
    one warning at start saying where the table is full instead, and past
    that bound newcomers meet a full table (here of established sessions:
    refused, drops.session_limit), never a failed socket."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('nc', '127.0.0.1:$P0', srv.addr, max_sessions=200,
                                    new_sessions_per_source=1000, idle_timeout='60s'),
                 preexec_fn=limit_nofile(64, 64))
    dest = (V4, px.ports[0])
    warn = (r'(?i)warn\b.*\[nc\].*max_sessions 200 cannot be reached.*the session table is '
            r'full at (\d+)')
    line = px.wait_for_log(warn, 2.0)
    check(line is not None, 'no "max_sessions 200 cannot be reached ... full at N" warning at '
          'start')
    cap = int(line[1].group(1))
    # One after another, each answered (so established) before the next.
    clients = [h.client(V4) for _ in range(150)]
    answered = 0
    for c in clients:
        c.send(b'y', dest)
        if c.recv_one(1.0) is None:
            break
        answered += 1
    check(answered == cap, '%d clients answered one after another, the table is full at %d'
          % (answered, cap))
    for c in clients[answered:]:
        c.send(b'z', dest)
    for c in clients[answered:]:
        expect_silence(c, 0.01, 'a client past a full table')
    st = stop_ok(px)
    check(px.count_log(r'(?i)error\b.*cannot open a socket towards the server') == 0,
          'a socket failed below the table\'s bound')
    check(1 <= px.count_log(r'(?i)warn\b.*\[nc\].*session limit \(%d\) reached' % cap) <= 2,
          'no "session limit (%d) reached" warning (or not rate-limited)' % cap)
    check(px.count_log(warn) == 1, 'the start warning was repeated')
    r = stats_route(st, 'nc')
    check(10 <= cap < 64 and r.get('sessions_total') == cap,
          'stats: sessions_total %r, the table full at %d' % (r.get('sessions_total'), cap))
    check(r.get('sessions_total') == answered, '%d clients answered, %r sessions'
          % (answered, r.get('sessions_total')))
    check(drops(r)['no_socket'] == 0 and drops(r)['session_limit'] >= 150 - answered,
          'stats: drops.no_socket %r, drops.session_limit %r, expected 0 and at least %d'
          % (drops(r)['no_socket'], drops(r)['session_limit'], 150 - answered))


def q3_flood(h, px, n):
    """n spoofed Quake 3 handshakes (getchallenge) from n sources of their
    own (127.0.x.y), one after another, each answered by the server before
    the next (so each session is answered, not established).  Stops at the
    first one not answered within a second; returns how many were."""
    dest = (V4, px.ports[0])
    for i in range(n):
        c = h.client(spread_host(i))
        c.send(OOB + b'getchallenge', dest)
        got = c.recv_one(1.0)
        c.close()
        if got is None:
            return i
    return n


def case_nofile_flood(h):
    """Soft and hard open files limit 256, max_sessions 1024 (the default):
    the descriptors bound the table first, so it is full where they run
    out, and a newcomer ends the oldest session not yet established, as at
    max_sessions.  A flood of 400 handshakes the server answers, then a new
    real player gets in at once."""
    srv = h.echo(V4, tag=OOB)
    px = h.proxy(config=route_block('nf', '127.0.0.1:$P0', srv.addr, protocol='q3',
                                    handshake_timeout='60s', idle_timeout='60s'),
                 preexec_fn=limit_nofile(256, 256))
    answered = q3_flood(h, px, 400)
    check(answered == 400, 'the server answered %d of the 400 flood handshakes through '
          'slipgate' % answered)
    player = h.client(V4)
    roundtrip(player, (V4, px.ports[0]), OOB + b'getchallenge', server_tag=OOB,
              what='a new player after the flood: ')
    line = px.wait_for_log(r'(?i)warn\b.*\[nf\].*max_sessions 1024 cannot be reached.*the '
                           r'session table is full at (\d+)', 2.0)
    check(line is not None, 'no "max_sessions 1024 cannot be reached ... the session table is '
          'full at N" warning at start')
    cap = int(line[1].group(1))
    check(100 <= cap < 256, 'the table is full at %d sessions with 256 descriptors' % cap)
    st = stop_ok(px)  # every log line is in
    check(px.count_log(r'cannot open a socket') == 0, 'slipgate ran out of descriptors')
    warned = px.count_log(r'(?i)warn\b.*\[nf\].*session table full \(%d sessions, what the open '
                          r'files limit leaves room for; max_sessions 1024\).*reason=evicted'
                          % cap)
    check(1 <= warned <= 2, 'expected one "session table full (%d sessions, what the open '
          'files limit leaves room for ...)" warning per worker loop at most, got %d'
          % (cap, warned))
    r = stats_route(st, 'nf')
    check(r.get('sessions_total') == 401 and r.get('sessions_evicted') == 401 - cap,
          'stats: sessions_total %r, sessions_evicted %r; expected 401 and %d'
          % (r.get('sessions_total'), r.get('sessions_evicted'), 401 - cap))
    check(drops(r)['no_socket'] == 0, 'stats: drops.no_socket %r' % drops(r)['no_socket'])
    print('table full at %d of 256 descriptors; 401 sessions, %d evicted'
          % (cap, r.get('sessions_evicted')))


def case_nofile_emfile(h):
    """Out of descriptors below the table's bound (the limit lowered while
    slipgate runs: prlimit), a newcomer still gets in: the session a full
    table would end (the oldest not yet established) gives its descriptor."""
    srv = h.echo(V4, tag=OOB)
    px = h.proxy(config=route_block('nf', '127.0.0.1:$P0', srv.addr, protocol='q3',
                                    max_sessions=1000, handshake_timeout='60s',
                                    idle_timeout='60s'),
                 preexec_fn=limit_nofile(2048, 2048))
    check(px.wait_for_log(r'slipgate \S+ running', 2.0) is not None, 'no "running" line')
    resource.prlimit(px.proc.pid, resource.RLIMIT_NOFILE, (96, 2048))  # after it fitted its own
    answered = q3_flood(h, px, 150)
    check(answered == 150, 'the server answered %d of the 150 flood handshakes through '
          'slipgate' % answered)
    player = h.client(V4)
    roundtrip(player, (V4, px.ports[0]), OOB + b'getchallenge', server_tag=OOB,
              what='a new player with no descriptor left: ')
    st = stop_ok(px)  # every log line is in
    check(px.count_log(r'(?i)error\b.*cannot open a socket') == 0,
          'a newcomer was refused for want of a descriptor')
    warned = px.count_log(r'(?i)warn\b.*\[nf\].*session table full \(max_sessions 1000\).*'
                          r'reason=evicted')
    check(1 <= warned <= 2, 'expected one "session table full" warning per worker loop at '
          'most, got %d' % warned)
    r = stats_route(st, 'nf')
    check(r.get('sessions_total') == 151 and 0 < r.get('sessions_evicted') < 151,
          'stats: sessions_total %r, sessions_evicted %r; expected 151 and some evicted'
          % (r.get('sessions_total'), r.get('sessions_evicted')))
    check(drops(r)['no_socket'] == 0, 'stats: drops.no_socket %r' % drops(r)['no_socket'])
    print('out of descriptors at 96: 151 sessions, %d evicted' % r.get('sessions_evicted'))


def case_loop_source(h):
    """A datagram to the listener from a configured server's own address
    opens no session (it would relay to itself forever)."""
    srv = h.echo(V4)
    srv2 = h.echo(V4, tag=b'TWO')
    px = h.proxy(config=route_block('lp', '127.0.0.1:$P0', srv.addr, idle_timeout='60s')
                 + route_block('other', '127.0.0.1:$P1', srv2.addr), routes=2)
    dest = (V4, px.ports[0])
    srv.sock.sendto(b'loop?', dest)   # this route's server
    srv2.sock.sendto(b'loop?', dest)  # another route's server
    srv.sock.sendto(b'loop?', dest)
    time.sleep(1.0)
    check(len(srv.snapshot()) == 0 and len(srv2.snapshot()) == 0,
          'the servers received %d and %d datagrams from slipgate'
          % (len(srv.snapshot()), len(srv2.snapshot())))
    rx = r'(?i)warn\b.*\[lp\].*datagram from 127\.0\.0\.1:%d.*no session is opened' % srv.port
    check(px.count_log(rx) == 1, 'expected one "no session is opened" warning naming the '
          'server, got %d' % px.count_log(rx))
    c = h.client(V4)
    roundtrip(c, dest, b'a real client')
    st = stop_ok(px)
    r = stats_route(st, 'lp')
    check(drops(r).get('loop') == 3, 'stats: drops.loop %r, expected 3' % drops(r).get('loop'))
    check(r.get('sessions_total') == 1, 'stats: sessions_total %r, expected 1'
          % r.get('sessions_total'))



def case_loop_source_listener(h):
    """A datagram to the listener from one of slipgate's own listening
    addresses (another route's) opens no session either.  Such a source can
    only be made with SO_REUSEPORT, which slipgate sets on its listeners
    with worker loops: this case runs two (-w 2) and joins route 'other's
    port from a socket of its own."""
    srv = h.echo(V4)
    srv2 = h.echo(V4, tag=b'TWO')
    px = h.proxy(config=route_block('lp', '127.0.0.1:$P0', srv.addr, idle_timeout='60s')
                 + route_block('other', '127.0.0.1:$P1', srv2.addr), routes=2,
                 args=['-w', '2'])
    dest = (V4, px.ports[0])
    fake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    h.sockets.append(fake)
    fake.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    fake.bind((V4, px.ports[1]))  # route 'other's listening address
    for _ in range(3):
        fake.sendto(b'loop?', dest)
    time.sleep(1.0)
    check(len(srv.snapshot()) == 0, 'the server received %d datagrams from slipgate'
          % len(srv.snapshot()))
    rx = (r"(?i)warn\b.*\[lp\].*datagram from 127\.0\.0\.1:%d, slipgate's own listener.*"
          r"no session is opened" % px.ports[1])
    check(1 <= px.count_log(rx) <= 2, 'expected one "no session is opened" warning per worker '
          'loop at most, naming slipgate\'s own listener; got %d' % px.count_log(rx))
    c = h.client(V4)
    roundtrip(c, dest, b'a real client')
    st = stop_ok(px)
    r = stats_route(st, 'lp')
    check(drops(r).get('loop') == 3, 'stats: drops.loop %r, expected 3' % drops(r).get('loop'))
    check(r.get('sessions_total') == 1, 'stats: sessions_total %r, expected 1'
          % r.get('sessions_total'))

# ---------------------------------------------------------------- stats

def case_stats_sigterm(h):
    rng = rng_for('stats_sigterm')
    srv = h.echo(V4)
    t_start = time.monotonic()
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', 'auto'])
    P = px.ports[0]
    dest = (V4, P)
    clients = [h.client(V4) for _ in range(3)]
    sizes = {}
    for i, c in enumerate(clients):
        sizes[c] = [10 + 200 * i + 37 * j for j in range(10)]
        for n in sizes[c]:
            roundtrip(c, dest, rng.randbytes(n))
    t_stop = time.monotonic()
    st = stop_ok(px)
    t_end = time.monotonic()
    check(isinstance(st.get('version'), str) and st['version'],
          'stats: "version" missing or empty: %r' % st.get('version'))
    up = st.get('uptime_ms')
    check(isinstance(up, int), 'stats: uptime_ms %r is not an integer' % (up,))
    lo = (t_stop - px.ready_at) * 1000 - 50
    hi = (t_end - t_start) * 1000 + 1000
    check(lo <= up <= hi, 'stats: uptime_ms %d, expected %.0f..%.0f' % (up, lo, hi))
    check(len(st['routes']) == 1, 'stats: %d routes, expected 1' % len(st['routes']))
    r = stats_route(st, 'default')
    check(r.get('listen_addr') == '127.0.0.1:%d' % P,
          'stats: listen_addr %r does not name port %d (listen %r)'
          % (r.get('listen_addr'), P, r.get('listen')))
    check(str(srv.port) in str(r.get('server')), 'stats: server %r does not name port %d'
          % (r.get('server'), srv.port))
    check(r.get('protocol') == 'auto', 'stats: protocol %r, expected "auto"'
          % r.get('protocol'))
    check(r.get('sessions_total') == 3, 'stats: sessions_total %r, expected 3'
          % r.get('sessions_total'))
    check(isinstance(r.get('sessions_active'), int) and 0 <= r['sessions_active'] <= 3,
          'stats: sessions_active %r' % r.get('sessions_active'))
    check(len(r.get('sessions', [])) == 3, 'stats: %d sessions listed, expected 3'
          % len(r.get('sessions', [])))
    ids = set()
    for i, c in enumerate(clients):
        ss = session_for(r, c.port)
        check(len(ss) == 1, 'stats: %d sessions for client %s, expected 1'
              % (len(ss), fmt_addr(*c.addr)))
        s = ss[0]
        check(s['client'] == fmt_addr(*c.addr), 'stats: session client %r, expected %r'
              % (s['client'], fmt_addr(*c.addr)))
        check(isinstance(s.get('id'), int), 'stats: session id %r' % s.get('id'))
        ids.add(s['id'])
        b = sum(sizes[c])
        expect_counters(s, 'session of client %d' % i, 10, b, 10, b + 10 * len(TAG))
        check_ended_or_active_at_shutdown(s, 'stats: session of client %d' % i)
        d = drops(s)
        check(all(v == 0 for v in d.values()), 'stats: session drops not 0: %r' % d)
    check(len(ids) == 3, 'stats: session ids not distinct: %s' % ids)
    b = sum(sum(v) for v in sizes.values())
    expect_counters(r, 'route default', 30, b, 30, b + 30 * len(TAG))
    d = drops(r)
    check(all(v == 0 for v in d.values()), 'stats: route drops not 0: %r' % d)
    print('30 datagrams, %d bytes c2s, %d bytes s2c; uptime_ms %d' % (b, b + 120, up))


def case_two_routes(h):
    a, b = h.echo(V4, tag=b'A:'), h.echo(V4, tag=b'B:')
    cfg = (route_block('alpha', '127.0.0.1:$P0', a.addr)
           + route_block('beta', '127.0.0.1:$P1', b.addr))
    px = h.proxy(config=cfg, routes=2)
    da, db = (V4, px.ports[0]), (V4, px.ports[1])
    ca = [h.client(V4) for _ in range(2)]
    cb = [h.client(V4) for _ in range(2)]
    both = h.client(V4)  # one client address on both routes: two sessions
    sent_a, sent_b = [], []
    for k in range(3):
        for i, c in enumerate(ca + [both]):
            p = b'to-alpha %d %d' % (i, k)
            roundtrip(c, da, p, server_tag=b'A:', what='route alpha: ')
            sent_a.append(p)
        for i, c in enumerate(cb + [both]):
            p = b'to-beta %d %d' % (i, k)
            roundtrip(c, db, p, server_tag=b'B:', what='route beta: ')
            sent_b.append(p)
    got_a = sorted(d for _, _, d in a.snapshot())
    got_b = sorted(d for _, _, d in b.snapshot())
    check(got_a == sorted(sent_a), 'server alpha received %s, expected %s' % (got_a, sorted(sent_a)))
    check(got_b == sorted(sent_b), 'server beta received %s, expected %s' % (got_b, sorted(sent_b)))
    check(len(a.sources()) == 3 and len(b.sources()) == 3,
          'servers saw %d and %d sources, expected 3 and 3'
          % (len(a.sources()), len(b.sources())))
    check(not ({p for _, p in a.sources()} & {p for _, p in b.sources()}),
          'the two routes share an upstream source port')
    st = stop_ok(px)
    check(sorted(r.get('name') for r in st['routes']) == ['alpha', 'beta'],
          'stats: routes %r' % [r.get('name') for r in st['routes']])
    for name, sent, tag in (('alpha', sent_a, b'A:'), ('beta', sent_b, b'B:')):
        r = stats_route(st, name)
        check(r.get('sessions_total') == 3, 'stats: route %s sessions_total %r, expected 3'
              % (name, r.get('sessions_total')))
        n, nb = len(sent), sum(len(p) for p in sent)
        expect_counters(r, 'route ' + name, n, nb, n, nb + n * len(tag))


def case_unreachable_server(h):
    live = h.echo(V4)
    hole = h.udp_socket(V4)  # bound, never read: a silent server
    hole_port = hole.getsockname()[1]
    dead_port = find_dead_port()  # nothing listens there: ICMP port unreachable
    cfg = (route_block('dead', '127.0.0.1:$P0', '127.0.0.1:%d' % dead_port)
           + route_block('hole', '127.0.0.1:$P1', '127.0.0.1:%d' % hole_port)
           + route_block('live', '127.0.0.1:$P2', live.addr))
    px = h.proxy(config=cfg, routes=3)
    ddead, dhole, dlive = [(V4, p) for p in px.ports]
    c = h.client(V4)
    for k in range(50):
        c.send(b'to-dead %d' % k, ddead)
        c.send(b'to-hole %d' % k, dhole)
        if k % 10 == 9:
            time.sleep(0.01)
    expect_silence(c, 0.5, 'no server answers on routes dead and hole')
    check(px.alive(), 'slipgate exited (status %s) after sending to an unreachable server'
          % px.proc.poll())
    # The kernel's "port unreachable" reaches the connected upstream socket:
    # slipgate says so once for the dead route's session, never for the silent one.
    said = px.wait_for_log(r'\[dead\] \[s\d+\] server 127\.0\.0\.1:%d unreachable: nothing '
                           r'listens on that port' % dead_port, 2.0)
    check(said is not None, 'no "server ... unreachable" line for route dead:\n%s'
          % px.log_text())
    check(len(re.findall(r'unreachable: nothing listens', px.log_text())) == 1,
          'the unreachable server was reported more than once, or for the silent server too:\n%s'
          % px.log_text())
    for k in range(5):
        roundtrip(c, dlive, b'live-after %d' % k, what='route live after the dead server: ')
    c2 = h.client(V4)
    roundtrip(c2, dlive, b'live new client', what='route live, new client: ')
    # The silent server did get all 50.
    queued = []
    for _ in range(200):
        try:
            queued.append(hole.recv(65536))
        except BlockingIOError:
            break
    check(sorted(queued) == sorted(b'to-hole %d' % k for k in range(50)),
          'the silent server received %d of 50 datagrams' % len(queued))
    st = stop_ok(px)
    dead = stats_route(st, 'dead')
    dc = counters(dead, 'route dead')
    check(dc['s2c_packets'] == 0, 'stats: route dead s2c_packets %r' % dc['s2c_packets'])
    dd = drops(dead)
    check(dc['c2s_packets'] + dd['send_error'] >= 1,
          'stats: route dead counts neither sent packets nor send errors: %r' % dead['counters'])
    hc = counters(stats_route(st, 'hole'), 'route hole')
    check(hc['c2s_packets'] == 50 and hc['s2c_packets'] == 0,
          'stats: route hole c2s_packets %r s2c_packets %r, expected 50 and 0'
          % (hc['c2s_packets'], hc['s2c_packets']))
    lc = counters(stats_route(st, 'live'), 'route live')
    check(lc['c2s_packets'] == 6 and lc['s2c_packets'] == 6,
          'stats: route live c2s/s2c packets %r/%r, expected 6/6'
          % (lc['c2s_packets'], lc['s2c_packets']))
    print('route dead: c2s_packets %d, send_error %d' % (dc['c2s_packets'], dd['send_error']))


def case_foreign_source(h):
    srv = h.echo(V4)
    px = h.proxy(config=route_block('fs', '127.0.0.1:$P0', srv.addr))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    roundtrip(c, dest, b'hello')
    srcs = srv.sources()
    check(len(srcs) == 1, 'server saw %d sources, expected 1' % len(srcs))
    upstream = srcs.pop()
    intruder = h.udp_socket(V4)
    for k in range(3):
        intruder.sendto(b'FOREIGN %d' % k, upstream)
    expect_silence(c, 0.5, 'datagrams sent to the upstream port %d by %s'
                   % (upstream[1], fmt_addr(*intruder.getsockname()[:2])))
    try:
        back = intruder.recv(65536)
        raise Fail('the intruder got a reply: %r' % back)
    except BlockingIOError:
        pass
    roundtrip(c, dest, b'still works', what='after the foreign datagrams: ')
    check(srv.sources() == {upstream}, 'the session changed upstream source: %s'
          % srv.sources())
    st = stop_ok(px)
    r = stats_route(st, 'fs')
    # The upstream socket is connected to the server: the kernel discards the
    # intruder's datagrams before slipgate sees them, so nothing is counted.
    d = drops(r)
    check(sum(d.values()) == 0, 'stats: drops %r, expected none (the kernel discards '
          'datagrams from %s)' % (d, fmt_addr(*intruder.getsockname()[:2])))
    check('foreign_source' not in d, 'stats: a foreign_source drop counter is still reported')
    ss = session_for(r, c.port)
    check(len(ss) == 1, 'stats: %d sessions for the client' % len(ss))
    sc = counters(ss[0], 'session')
    check(sc['s2c_packets'] == 2, 'stats: session s2c_packets %r, expected 2 (foreign '
          'datagrams must not count as relayed)' % sc['s2c_packets'])


def case_not_open_relay(h):
    srv = h.echo(V4)
    sink4 = h.echo(V4, echo=False)
    sinks = [sink4]
    sink6 = None
    try:
        require_ipv6()
        sink6 = h.echo(V6, echo=False)
        sinks.append(sink6)
    except Exception:
        pass
    px = h.proxy(config=route_block('only', '127.0.0.1:$P0', srv.addr))
    dest = (V4, px.ports[0])
    s4 = sink4.port
    ff = b'\xff\xff\xff\xff'
    tricks = [
        b'127.0.0.1:%d' % s4,
        ff + b'connect 127.0.0.1:%d' % s4,
        ff + b'connect "\\challenge\\1\\ip\\127.0.0.1:%d\\name\\x"' % s4,
        ff + b'getinfo xxx',
        ff + b'getstatus',
        ff + b'getservers 68 empty full',
        ff + b'getchallenge',
        ff + b'rcon pw set sv_master1 127.0.0.1:%d' % s4,
        ff + b'ip 127.0.0.1:%d' % s4,
        ff + b'relay 127.0.0.1 %d' % s4,
        # SOCKS5 UDP request header for 127.0.0.1:s4
        b'\x00\x00\x00\x01' + socket.inet_aton(V4) + s4.to_bytes(2, 'big') + b'payload',
        # a raw sockaddr_in
        b'\x02\x00' + s4.to_bytes(2, 'big') + socket.inet_aton(V4) + b'\x00' * 8,
    ]
    if sink6:
        tricks += [b'[::1]:%d' % sink6.port,
                   ff + b'connect [::1]:%d' % sink6.port,
                   b'\x00\x00\x00\x04' + socket.inet_pton(socket.AF_INET6, V6)
                   + sink6.port.to_bytes(2, 'big') + b'payload']
    clients = [h.client(V4) for _ in range(2)]
    for c in clients:
        for t in tricks:
            roundtrip(c, dest, t, what='address-like payload: ')
    time.sleep(0.3)
    for s in sinks:
        recs = s.snapshot()
        check(not recs, 'the bystander listener %s received %d datagram(s), e.g. %s from %s'
              % (s.addr, len(recs), describe(recs[0][2]), recs[0][1]) if recs else '')
    got = sorted(d for _, _, d in srv.snapshot())
    check(got == sorted(tricks * len(clients)),
          'the configured server did not receive exactly the datagrams sent (%d vs %d)'
          % (len(got), len(tricks) * len(clients)))
    stop_ok(px)
    print('%d address-like payloads x %d clients went only to the configured server'
          % (len(tricks), len(clients)))


# ---------------------------------------------------------------- signals

def case_sighup_reload(h):
    srv = h.echo(V4)
    base = route_block('hup', '127.0.0.1:$P0', srv.addr, idle_timeout='30s')
    px = h.proxy(config=base)
    P = px.ports[0]
    dest = (V4, P)
    c = h.client(V4)
    roundtrip(c, dest, b'before reload')
    upstream = srv.sources()
    px.write_config(route_block('hup', '127.0.0.1:%d' % P, srv.addr, idle_timeout='1s'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    hit = px.wait_for_log(r'(?i)reload|re-?read|config', 1.0, start=mark)
    if hit is None:
        time.sleep(0.2)
        print('note: no log line mentioning the reload after SIGHUP')
    check(px.alive(), 'slipgate exited (status %s) on SIGHUP' % px.proc.poll())
    check(not px.session_ends(), 'a session ended on SIGHUP: %s'
          % [m.string for m in px.session_ends()])
    roundtrip(c, dest, b'after reload', what='right after SIGHUP: ')
    t_last = time.monotonic()
    check(srv.sources() == upstream, 'the session was replaced on reload: server saw %s, '
          'then %s' % (upstream, srv.sources()))
    line, dt = wait_idle_end(px, 'hup', mark, t_last, 'after SIGHUP to idle_timeout 1s')
    st = stop_ok(px)
    r = stats_route(st, 'hup')
    check(r.get('sessions_total') == 1, 'stats: sessions_total %r, expected 1 (the reload '
          'must keep the live session)' % r.get('sessions_total'))
    ss = session_for(r, c.port)
    check(len(ss) == 1 and ss[0].get('end_reason') == 'idle',
          'stats: session %r, expected one ended with reason idle' % ss)
    expect_counters(ss[0], 'session', 2, 25, 2, 25 + 2 * len(TAG))
    print('reload kept the session; idle end %.2f s after the last packet' % dt)


def proc_status_kb(pid, field):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise Fail('/proc/%d/status has no %s' % (pid, field))


def case_reload_churn(h):
    """Routes that a reload removes, or that fail to start at a reload, are
    freed once closed: 200 reloads whose new route cannot bind (its port is
    taken) and 200 that add and remove a route (some with a live session)
    leave the proxy's memory flat, and --stats lists only the last 64
    retired routes and counts the others."""
    # Under AddressSanitizer freed memory waits in a quarantine (256 MB by
    # default) before reuse; a small one keeps use-after-free checks on recent
    # frees and lets these figures measure slipgate.  No effect otherwise.
    opts = os.environ.get('ASAN_OPTIONS', '')
    os.environ['ASAN_OPTIONS'] = (opts + ':' if opts else '') + 'quarantine_size_mb=2'
    srv = h.echo(V4)
    busy = h.udp_socket(V4)  # holds the port route 'b' wants
    busy_port = busy.getsockname()[1]
    base = route_block('a', '127.0.0.1:$P0', srv.addr)
    px = h.proxy(config=base, lifetime=55.0)
    pa = px.ports[0]
    a_only = route_block('a', '127.0.0.1:%d' % pa, srv.addr)
    with_b = a_only + route_block('b', '127.0.0.1:%d' % busy_port, srv.addr)
    # Route c on port 0: each add gets a port from the kernel (the ports_file
    # says which), none that a test running beside this one could take
    # between two reloads.
    with_c = a_only + route_block('c', '127.0.0.1:0', srv.addr, idle_timeout='30s')
    pid = px.proc.pid
    deadline = time.monotonic() + 40

    def reload(text, what):
        px.write_config(text)
        mark = px.log_mark()
        px.send_signal(signal.SIGHUP)
        check(px.wait_for_log(r'configuration reloaded', 5.0, start=mark) is not None,
              '%s: no "configuration reloaded" within 5 s' % what)
        check(time.monotonic() < deadline, '%s: the reloads took over 40 s' % what)

    # Failing reloads: route b cannot listen; a warm-up first.
    failing, churn = 200, 200
    for i in range(20):
        reload(with_b, 'failing reload %d' % i)
    check(px.count_log(r'cannot listen on') >= 20, 'route b did not fail to listen')
    data0, rss0 = proc_status_kb(pid, 'VmData'), proc_status_kb(pid, 'VmRSS')
    for i in range(20, failing):
        reload(with_b, 'failing reload %d' % i)
    data1, rss1 = proc_status_kb(pid, 'VmData'), proc_status_kb(pid, 'VmRSS')

    # Route c comes and goes; every 20th time a client has a session on it.
    c = h.client(V4)
    sessions_c = 0
    for i in range(churn):
        if i % 2 == 0:
            reload(with_c, 'adding route c (%d)' % i)
            if i % 20 == 0:
                roundtrip(c, (V4, px.listed_ports()['c'][1]), b'churn %d' % i,
                          what='route c: ')
                sessions_c += 1
        else:
            reload(a_only, 'removing route c (%d)' % i)
    data2, rss2 = proc_status_kb(pid, 'VmData'), proc_status_kb(pid, 'VmRSS')
    roundtrip(c, (V4, pa), b'route a still relays')
    print('VmData %d kB after 20 failing reloads, %d kB after %d, %d kB after %d add/remove; '
          'VmRSS %d, %d, %d kB' % (data0, data1, failing, data2, churn, rss0, rss1, rss2))
    grow = max(data1, data2) - data0
    check(grow < 8 * 1024, 'VmData grew by %d kB over %d reloads (retired routes are kept)'
          % (grow, failing - 20 + churn))
    grow = max(rss1, rss2) - rss0
    check(grow < 8 * 1024, 'VmRSS grew by %d kB over %d reloads' % (grow, failing - 20 + churn))

    st = stop_ok(px)
    retired = [r for r in st['routes'] if r.get('retired')]
    total = failing + churn // 2
    check(len(retired) == 64, '--stats lists %d retired routes, expected the last 64 of %d'
          % (len(retired), total))
    check(st.get('retired_routes_omitted') == total - 64,
          '--stats: retired_routes_omitted %r, expected %d'
          % (st.get('retired_routes_omitted'), total - 64))
    check(all(r.get('name') == 'c' and r.get('retired_reason') == 'route removed'
              for r in retired), 'the last 64 retired routes are not route c\'s removals: %r'
          % [(r.get('name'), r.get('retired_reason')) for r in retired][:8])
    listed_adds = list(range(0, churn, 2))[-64:]  # the adds whose removal is listed
    want = sum(1 for i in listed_adds if i % 20 == 0)
    got = [r.get('sessions_total') for r in retired]
    check(sum(got) == want and set(got) <= {0, 1},
          'retired route c summaries count sessions %r (sum %d), expected %d of the %d made'
          % (got, sum(got), want, sessions_c))
    stamps = [r.get('retired_ms', 0) for r in retired]
    check(stamps == sorted(stamps) and stamps[0] > 0,
          'retired routes are not listed oldest first with retired_ms: %r' % stamps[:8])
    live = [r.get('name') for r in st['routes'] if not r.get('retired')]
    check(live == ['a'], 'serving routes at exit: %r, expected [\'a\']' % live)
    print('%d retired routes: %d listed, %d omitted' % (total, len(retired),
                                                        st['retired_routes_omitted']))


def case_second_signal(h):
    srv = h.echo(V4)
    # A single SIGINT: clean exit 0 with stats.
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr], name='sigint')
    c = h.client(V4)
    roundtrip(c, (V4, px.ports[0]), b'x')
    st = stop_ok(px, signal.SIGINT)
    check(stats_route(st, 'default').get('sessions_total') == 1,
          'stats after SIGINT: sessions_total %r' % stats_route(st, 'default').get('sessions_total'))
    # Two SIGTERMs 20 ms apart while traffic flows: gone within 2 s.
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr], name='twice')
    dest = (V4, px.ports[0])
    cs = [h.client(V4) for _ in range(5)]
    for k, cl in enumerate(cs):
        roundtrip(cl, dest, b'busy %d' % k)
    for cl in cs:
        cl.send(b'x' * 1000, dest)
    t0 = time.monotonic()
    px.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    px.send_signal(signal.SIGTERM)
    rc = px.wait_exit(2.0)
    dt = time.monotonic() - t0
    check(rc is not None, 'slipgate still running %.1f s after two SIGTERMs' % dt)
    print('SIGINT: exit 0; two SIGTERMs: exit status %d after %.0f ms' % (rc, dt * 1000))


def case_second_signal_wedged(h):
    """The second signal is the way out of a shutdown that hangs.  Wedge the
    proxy the simplest way: stop reading its stderr until its log writes
    block (a pipe holds 64 KB; every new session logs a line), then send
    SIGTERM twice: it must be gone within 2 s."""
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr,
                       '+set', 'new_sessions_per_source', '1000000',
                       '+set', 'max_sessions', '1000000'])
    dest = (V4, px.ports[0])
    px.pause_stderr()
    wedged = False
    sent = 0
    t0 = time.monotonic()
    for batch in range(12):  # at most 12 x 100 new sessions, at most ~3 s
        socks = []
        try:
            for _ in range(100):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind((V4, 0))
                s.sendto(b'wedge', dest)
                sent += 1
        finally:
            for s in socks:
                s.close()
        before = len(srv.snapshot())
        time.sleep(0.2)
        if len(srv.snapshot()) == before and before < sent:
            wedged = True
            break
        if time.monotonic() - t0 > 10:
            break
    relayed = len(srv.snapshot())
    print('stderr not drained: %d new clients sent, %d relayed, proxy %s'
          % (sent, relayed, 'stalled' if wedged else 'kept relaying'))
    t1 = time.monotonic()
    px.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    px.send_signal(signal.SIGTERM)
    rc = px.wait_exit(2.0)
    dt = time.monotonic() - t1
    px.resume_stderr()
    check(rc is not None, 'slipgate still running %.1f s after two SIGTERMs while its '
          'stderr was blocked (%s after %d of %d new sessions): the second signal does not '
          'exit at once' % (dt, 'relaying had stalled' if wedged else 'relaying went on',
                            relayed, sent))
    print('two SIGTERMs: exit status %d after %.0f ms' % (rc, dt * 1000))
    # Logging never stalls relaying: lines that cannot be written are dropped.
    check(not wedged and relayed == sent,
          'relaying stalled while stderr was not read (%d of %d relayed)' % (relayed, sent))


# ---------------------------------------------------------------- config

GOOD_CONFIG = '''\
# slipgate test configuration
// both comment styles
log_level info
stats_file "%(dir)s/stats file.json"

route alpha {
    listen 127.0.0.1:%(p1)d      # trailing comment
    server 127.0.0.1:27961
    protocol auto
    idle_timeout 60s
    max_sessions 1024
    new_sessions_per_source 10
}

route "beta" {
    listen %(any6)s:%(p2)d
    server [::1]:27971
    protocol q3
    idle_timeout 500ms
    max_sessions 4
    new_sessions_per_source 1
}

route gamma {
    listen %(lo6)s:%(p3)d
    server localhost:27981
    protocol qw
    idle_timeout 2m
}
'''

# (name, text, line of the error or None, required regex in the message)
BAD_CONFIGS = [
    ('bad_duration', 'route a {\n    listen 127.0.0.1:1\n    server 127.0.0.1:2\n'
     '    idle_timeout 5 parsecs\n}\n', 4, None),
    ('bad_duration_unit', 'route a {\n    listen 127.0.0.1:1\n    server 127.0.0.1:2\n'
     '    idle_timeout 5x\n}\n', 4, None),
    ('unknown_route_directive', 'log_level info\nroute a {\n    listen 127.0.0.1:1\n'
     '    server 127.0.0.1:2\n    idle_timout 5s\n}\n', 5, r'did you mean.*idle_timeout'),
    ('unknown_top_directive', '# top\nlog_levle debug\n', 2, r'did you mean.*log_level'),
    ('bad_enum', 'route a {\n    listen 127.0.0.1:1\n    server 127.0.0.1:2\n'
     '    protocol q9\n}\n', 4, None),
    ('bad_port', 'route a {\n    listen 127.0.0.1:99999\n    server 127.0.0.1:2\n}\n', 2, None),
    ('bad_log_level', 'log_level loud\n', 1, None),
    ('bad_int', 'route a {\n    listen 127.0.0.1:1\n    server 127.0.0.1:2\n'
     '    max_sessions many\n}\n', 4, None),
    ('unclosed_block', 'route a {\n    listen 127.0.0.1:1\n    server 127.0.0.1:2\n', None, None),
    ('unterminated_string', 'stats_file "oops\n', 1, None),
]


def case_check_config(h):
    good = h.path('good.conf')
    with open(good, 'w') as f:
        # Port 0: --check-config binds each listen address to see it is free
        # (the kernel's port: none that a test running beside this one holds).
        v6 = ipv6_unavailable_reason() is None
        if not v6:
            print('note: no IPv6 loopback (%s): the IPv6 routes listen on IPv4'
                  % ipv6_unavailable_reason())
        f.write(GOOD_CONFIG % {'dir': h.dir, 'p1': 0, 'p2': 0,
                               'p3': 0, 'any6': '[::]' if v6 else '0.0.0.0',
                               'lo6': '[::1]' if v6 else '127.0.0.1'})
    t0 = time.monotonic()
    r = h.run(['--check-config', '-c', good])
    check(r.returncode == 0, '--check-config on a valid file: exit %d, expected 0\n%s'
          % (r.returncode, r.stderr.decode(errors='replace')[-2000:]))
    check(time.monotonic() - t0 < 5, '--check-config took %.1f s' % (time.monotonic() - t0))
    check(not os.path.exists(h.path('stats file.json')),
          '--check-config started the proxy (stats_file was written)')
    failures = []
    for name, text, line, must in BAD_CONFIGS:
        path = h.path(name + '.conf')
        with open(path, 'w') as f:
            f.write(text)
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        if r.returncode != 1:
            failures.append('%s: exit %d, expected 1; stderr: %r' % (name, r.returncode, err[:300]))
            continue
        m = re.search(re.escape(path) + r':(\d+):(\d+): error:', err)
        if not m:
            failures.append('%s: stderr lacks "%s:LINE:COL: error:": %r' % (name, path, err[:300]))
            continue
        ln, col = int(m.group(1)), int(m.group(2))
        lines = text.split('\n')
        if line is not None and ln != line:
            failures.append('%s: error on line %d, expected line %d: %r' % (name, ln, line, err[:300]))
        elif 1 <= ln <= len(lines) and not 1 <= col <= len(lines[ln - 1]) + 1:
            failures.append('%s: column %d outside line %d (%r)' % (name, col, ln, lines[ln - 1]))
        if must and not re.search(must, err):
            failures.append('%s: stderr lacks /%s/: %r' % (name, must, err[:300]))
    check(not failures, '%d of %d bad configs were not reported as specified:\n  %s'
          % (len(failures), len(BAD_CONFIGS), '\n  '.join(failures)))


def case_check_config_system(h):
    """--check-config checks what the start would meet, not only the file:
    a server's port 0 and malformed IPv6 addresses are refused when the file
    is read (a listener's port 0 is a port from the kernel: port0_* cases);
    a host that does not resolve, a listen port another socket holds and a
    stats file that cannot be written are reported with where they were
    given, and exit 1."""
    busy = h.udp_socket(V4)
    busy_port = busy.getsockname()[1]
    free = 0  # a listener's port from the kernel
    # One port the check binds twice (--check-config only, no proxy), outside the
    # ephemeral range: no bind(0) of a test running beside this one takes it.
    pair = find_dead_port()
    cases = [
        # (name, file text, line, column, required regex)
        ('server_port_0', 'route a {\n    listen 127.0.0.1:%d\n    server 127.0.0.1:0\n}\n'
         % free, 3, 12, r"'server' expects a port between 1 and 65535.*port 0"),
        ('colons_v6', 'route a {\n    listen [:::::]:%d\n    server 127.0.0.1:27960\n}\n' % free,
         2, 12, r"'listen' expects ADDR:PORT.*\[:::::\]"),
        ('unresolvable', 'route a {\n    listen 127.0.0.1:%d\n\n'
         '    server nonexistent.invalid:27960\n}\n' % free, 4, 12, r"route 'a': server: cannot resolve 'nonexistent\.invalid:27960'"),
        ('listen_in_use', 'route a {\n    server 127.0.0.1:27960\n    listen 127.0.0.1:%d\n}\n'
         % busy_port, 3, 12, r"route 'a': cannot listen on 127\.0\.0\.1:%d: .*in use by \S+ "
         r"\(pid %d\)" % (busy_port, os.getpid())),
        ('two_routes_one_port', 'route a {\n    listen 0.0.0.0:%d\n    server 127.0.0.1:27960\n}\n'
         'route b {\n    listen 127.0.0.1:%d\n    server 127.0.0.1:27960\n}\n' % (pair, pair),
         6, 12, r"route 'b': cannot listen on 127\.0\.0\.1:%d: .*in use" % pair),
        ('stats_dir_missing', 'stats_file %s\nroute a {\n    listen 127.0.0.1:%d\n'
         '    server 127.0.0.1:27960\n}\n' % (h.path('no/such/dir/stats.json'), free), None, None,
         r'stats_file: cannot write the stats file .*no/such/dir/stats\.json'),
    ]
    failures = []
    for name, text, line, col, must in cases:
        path = h.path(name + '.conf')
        with open(path, 'w') as f:
            f.write(text)
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        if r.returncode != 1:
            failures.append('%s: exit %d, expected 1; stdout %r stderr %r'
                            % (name, r.returncode, r.stdout[:200], err[:300]))
            continue
        if line is not None and not re.search(r'%s:%d:%d: error:' % (re.escape(path), line, col),
                                              err):
            failures.append('%s: stderr lacks "%s:%d:%d: error:": %r' % (name, path, line, col,
                                                                         err[:300]))
        if not re.search(must, err):
            failures.append('%s: stderr lacks /%s/: %r' % (name, must, err[:300]))
    # The same from the command line, and --stats.
    r = h.run(['--check-config', '-l', '127.0.0.1:%d' % busy_port, '-s', '127.0.0.1:27960',
               '--stats', h.path('missing/stats.json')])
    err = r.stderr.decode(errors='replace')
    if r.returncode != 1 or not re.search(r'command line: error: .*in use', err) \
            or not re.search(r'--stats: error: cannot write the stats file .*missing/stats', err):
        failures.append('command line: exit %d, stderr %r' % (r.returncode, err[:400]))
    check(not failures, '%d problems over %d configurations:\n  %s'
          % (len(failures), len(cases) + 1, '\n  '.join(failures)))
    print('%d configurations refused with where and why' % (len(cases) + 1))


def case_stats_path_checked(h):
    """A --stats or stats_file path that cannot be written fails the start
    (exit 1, saying why) instead of losing the run's figures at exit; the
    stats_file in force at start still gets the figures after a reload has
    replaced the configuration."""
    srv = h.echo(V4)
    for what, args in (('--stats in a missing directory',
                        ['--stats', h.path('missing/stats.json')]),
                       ('--stats naming a directory', ['--stats', h.dir])):
        r = h.run(['-l', '127.0.0.1:0', '-s', srv.addr] + args, timeout=5.0)
        err = r.stderr.decode(errors='replace')
        check(r.returncode == 1, '%s: exit %d, expected 1 at once; stderr %r'
              % (what, r.returncode, err[-500:]))
        check(re.search(r'cannot write the stats file', err) and 'listening on' not in err,
              '%s: no clear message before starting: %r' % (what, err[-500:]))
    cfg_path = h.path('stats_missing.conf')
    with open(cfg_path, 'w') as f:
        f.write('stats_file %s\n' % h.path('gone/s.json') + route_block(
            'a', '127.0.0.1:0', srv.addr))
    r = h.run(['-c', cfg_path], timeout=5.0)
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and 'cannot write the stats file' in err,
          'stats_file in a missing directory: exit %d, stderr %r' % (r.returncode, err[-500:]))
    # stats_file survives a reload (the configuration that named it is freed).
    target = h.path('from-file.json')
    cfg = 'stats_file %s\n' % target + route_block('a', '127.0.0.1:$P0', srv.addr)
    px = h.proxy(config=cfg, stats=False)
    c = h.client(V4)
    roundtrip(c, (V4, px.ports[0]), b'before')
    px.write_config('stats_file %s\n' % target
                    + route_block('a', '127.0.0.1:%d' % px.ports[0], srv.addr, idle_timeout='30s'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'configuration reloaded', 5.0, start=mark) is not None,
          'no "configuration reloaded" after SIGHUP')
    rc = px.stop()
    check(rc == 0, 'exit status %d after SIGTERM' % rc)
    check(os.path.exists(target), 'stats_file %s not written after a reload' % target)
    print('unwritable stats paths refused at start; stats_file kept across a reload')



def case_check_config_paths(h):
    """--check-config checks what a session's first recording and the
    start need, with where each was configured, and the start refuses the
    same (exit 1 before it listens): a record directory that is a file, one
    missing two levels deep, one that cannot be written (in /proc: refused
    for root too), one that cannot be made there; textlog, pcap and inspect
    files in a missing directory, a textlog file that is a directory.  A
    record directory the recorder can make (one level) passes."""
    afile = h.path('a-file')
    with open(afile, 'w') as f:
        f.write('x')
    missing = h.path('missing')
    cases = [
        # (name, route body, line, required regex)
        ('record_is_file', '    record %s\n' % afile, 4,
         r"route 'a': record directory %s is not a directory" % re.escape(afile)),
        ('record_two_deep', '    record %s/deeper/demos\n' % missing, 4,
         r"route 'a': record directory %s/deeper/demos is missing, and so is %s/deeper"
         % (re.escape(missing), re.escape(missing))),
        ('record_under_file', '    filter record { directory %s/demos }\n' % afile, 4,
         r"route 'a': record directory %s/demos cannot be made: a part of %s is not a "
         r"directory" % (re.escape(afile), re.escape(afile))),
        ('record_unwritable', '    filter record {\n        directory /proc\n    }\n', 4,
         r"route 'a': record directory /proc is not writable"),
        ('record_cannot_make', '    record /proc/slipgate-demos\n', 4,
         r"route 'a': record directory /proc/slipgate-demos is missing and cannot be made in "
         r"/proc"),
        ('textlog_dir_missing', '    filter textlog { file %s/chat.log }\n' % missing, 4,
         r"route 'a': textlog file %s/chat\.log: its directory %s: No such file"
         % (re.escape(missing), re.escape(missing))),
        ('textlog_is_dir', '    filter textlog { file %s }\n' % h.dir, 4,
         r"route 'a': textlog file %s is a directory" % re.escape(h.dir)),
        ('pcap_dir_missing', '    filter pcap { file %s/c.pcap }\n' % missing, 4,
         r"route 'a': pcap file %s/c\.pcap: its directory %s: No such file"
         % (re.escape(missing), re.escape(missing))),
        ('inspect_dir_missing', '    filter inspect { output %s/i.txt }\n' % missing, 4,
         r"route 'a': inspect output %s/i\.txt: its directory %s: No such file"
         % (re.escape(missing), re.escape(missing))),
    ]
    failures = []
    for name, body, line, must in cases:
        path = h.path(name + '.conf')
        with open(path, 'w') as f:
            f.write('route a {\n    listen 127.0.0.1:0\n    server 127.0.0.1:27960\n%s}\n'
                    % body)
        where = r'%s:%d: error: ' % (re.escape(path), line)
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        if r.returncode != 1 or not re.search(where + must, err):
            failures.append('--check-config %s: exit %d (expected 1), stderr %r, expected /%s/'
                            % (name, r.returncode, err[-400:], where + must))
        r = h.run(['-c', path], timeout=5.0)
        err = r.stderr.decode(errors='replace')
        if r.returncode != 1 or not re.search(where + must, err) or 'listening on' in err:
            failures.append('start %s: exit %d (expected 1 before listening), stderr %r'
                            % (name, r.returncode, err[-400:]))
    # One level missing under a writable directory: the recorder makes it.
    path = h.path('record_one_level.conf')
    with open(path, 'w') as f:
        f.write('route a {\n    listen 127.0.0.1:0\n    server 127.0.0.1:27960\n'
                '    record %s/demos\n    filter textlog { file %s/chat.log }\n}\n'
                % (h.dir, h.dir))
    r = h.run(['--check-config', '-c', path])
    if r.returncode != 0:
        failures.append('a record directory one level deep and a new textlog file: exit %d, %r'
                        % (r.returncode, r.stderr.decode(errors='replace')[-400:]))
    check(not os.path.exists(h.path('demos')) and not os.path.exists(h.path('chat.log')),
          '--check-config made the record directory or the textlog file')
    check(not failures, '%d problems:\n  %s' % (len(failures), '\n  '.join(failures)))
    print('%d unusable paths refused by --check-config and the start, with file:line'
          % len(cases))


def case_check_config_http(h):
    """--check-config checks the `http` address as the start would meet it:
    a TCP port another socket listens on and a host that does not resolve
    are errors (exit 1); a free address passes, with worker loops too (the
    start serves http from worker 0).  The real start refuses the port in
    use too."""
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    h.sockets.append(busy)
    busy.bind((V4, 0))
    busy.listen(1)
    busy_port = busy.getsockname()[1]
    route = route_block('a', '127.0.0.1:0', '127.0.0.1:27960')
    cases = [
        ('in_use', 'http 127.0.0.1:%d\n' % busy_port, 1,
         r"error: http: cannot listen on 127\.0\.0\.1:%d: .*in use" % busy_port),
        ('unresolvable', 'http nonexistent.invalid:8080\n', 1,
         r"error: http: cannot resolve 'nonexistent\.invalid:8080'"),
        ('workers', 'workers 2\nhttp 127.0.0.1:0\n', 0, r'configuration OK'),
        ('free', 'http 127.0.0.1:0\n', 0, r'configuration OK'),
    ]
    failures = []
    for name, top, rc, must in cases:
        path = h.path('http_%s.conf' % name)
        with open(path, 'w') as f:
            f.write(top + route)
        r = h.run(['--check-config', '-c', path])
        out = (r.stdout + r.stderr).decode(errors='replace')
        if r.returncode != rc or not re.search(must, out):
            failures.append('%s: exit %d (expected %d), output %r' % (name, r.returncode, rc,
                                                                      out[-300:]))
    check(not failures, '--check-config and http:\n  ' + '\n  '.join(failures))
    # What --check-config foretold: the start fails on the port in use.
    r = h.run(['-c', h.path('http_in_use.conf')], timeout=5.0)
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and re.search(r'http 127\.0\.0\.1:%d: cannot listen' % busy_port, err),
          'the start with the http port in use: exit %d, %r' % (r.returncode, err[-300:]))
    print('http address checked by --check-config (in use, unresolvable, workers, free)')

def case_set_override(h):
    srv = h.echo(V4)
    cfg = (route_block('a', '127.0.0.1:$P0', srv.addr, idle_timeout='60s')
           + route_block('b', '127.0.0.1:$P1', srv.addr, idle_timeout='60s'))
    # 1: +set NAME VALUE applies to every route.
    px = h.proxy(config=cfg, args=['+set', 'idle_timeout', '1s'], routes=2, name='all')
    ca, cb = h.client(V4), h.client(V4)
    mark = px.log_mark()
    roundtrip(ca, (V4, px.ports[0]), b'a1')
    roundtrip(cb, (V4, px.ports[1]), b'b1')
    t_last = time.monotonic()
    wait_idle_end(px, 'a', mark, t_last, '+set idle_timeout 1s, route a')
    wait_idle_end(px, 'b', mark, t_last, '+set idle_timeout 1s, route b')
    stop_ok(px)
    # 2: +set ROUTE.NAME VALUE applies to that route only; +set of a
    # top-level directive (stats_file) overrides the file's.
    cfg2 = 'stats_file %s\n' % h.path('from-config.json') + cfg
    override = h.path('from-set.json')
    px = h.proxy(config=cfg2, args=['+set', 'b.idle_timeout', '1s',
                                    '+set', 'stats_file', override],
                 routes=2, stats=False, name='one')
    ca, cb = h.client(V4), h.client(V4)
    mark = px.log_mark()
    roundtrip(ca, (V4, px.ports[0]), b'a2')
    roundtrip(cb, (V4, px.ports[1]), b'b2')
    t_last = time.monotonic()
    wait_idle_end(px, 'b', mark, t_last, '+set b.idle_timeout 1s, route b')
    time.sleep(max(0.0, t_last + IDLE_MAX - time.monotonic()))
    ends_a = [m.string for m in px.session_ends(mark) if m.group('route') == 'a']
    check(not ends_a, '+set b.idle_timeout 1s also ended route a\'s session: %s' % ends_a)
    rc = px.stop()
    check(rc == 0, 'exit status %d after SIGTERM' % rc)
    check(os.path.exists(override), '+set stats_file %s: no stats written there' % override)
    check(not os.path.exists(h.path('from-config.json')),
          '+set stats_file did not override the config\'s stats_file')


def case_cli_errors(h):
    problems = []
    for bad in (['--no-such-option'], ['-Z']):
        r = h.run(bad)
        out = (r.stderr + r.stdout).decode(errors='replace')
        if r.returncode != 2:
            problems.append('%s: exit %d, expected 2' % (bad[0], r.returncode))
        if not re.search(r'(?i)usage|--help', out):
            problems.append('%s: no usage hint in the output: %r' % (bad[0], out[:300]))
    r = h.run(['--version'])
    out = r.stdout.decode(errors='replace')
    if r.returncode != 0:
        problems.append('--version: exit %d' % r.returncode)
    if not re.search(r'\d+\.\d+', out):
        problems.append('--version: no version number on stdout: %r' % out[:200])
    r = h.run(['--help'])
    out = (r.stdout + r.stderr).decode(errors='replace')
    if r.returncode != 0:
        problems.append('--help: exit %d' % r.returncode)
    for opt in ('-c', '--config', '-l', '--listen', '-s', '--server', '-p', '--protocol',
                '--check-config', '--stats', '-v', '-q', '--version', '--help', '+set'):
        if not re.search(r'(?<![\w+-])' + re.escape(opt) + r'(?![\w-])', out):
            problems.append('--help does not mention %s' % opt)
    check(not problems, 'command line:\n  ' + '\n  '.join(problems))


def case_protocol_names(h):
    """The games `-p` and `protocol` take are the codec registry's: each name
    --help lists starts a route of that game, and a wrong one is refused
    with the same list."""
    r = h.run(['--help'])
    m = re.search(r'--protocol PROTO\s+(auto(?:\|[a-z0-9]+)+)', r.stdout.decode())
    check(m is not None, '--help has no "--protocol PROTO auto|..." list')
    names = m.group(1).split('|')
    check(len(names) >= 5, '--help lists %r' % names)
    srv = h.echo(V4)
    for name in names:
        px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', name.upper()])
        check(px.wait_for_log(r'listening on 127\.0\.0\.1:%d, relaying to %s \(%s\)'
                              % (px.ports[0], re.escape(srv.addr), name), 5.0) is not None,
              '-p %s: no "listening ... (%s)" line' % (name.upper(), name))
        stop_ok(px)
    r = h.run(['-l', '127.0.0.1:1', '-s', srv.addr, '-p', 'q4', '--check-config'])
    err = r.stderr.decode(errors='replace')
    want = "'protocol' expects one of %s, got 'q4'" % ', '.join(names)
    check(r.returncode != 0 and want in err, '-p q4: exit %d, expected %r in:\n%s'
          % (r.returncode, want, err[:600]))
    print('-p takes %s' % ', '.join(names))


def case_quiet_flag(h):
    srv = h.echo(V4)
    px = h.proxy(args=['-q', '-l', '127.0.0.1:$P0', '-s', srv.addr])
    c = h.client(V4)
    roundtrip(c, (V4, px.ports[0]), b'quiet')
    time.sleep(0.2)
    info = [l for l in px.log_lines() if re.search(r'(?i)\binfo\b', l)]
    check(not info, '-q still logs info lines: %s' % info[:3])
    stop_ok(px)


def case_auto_probe(h):
    """protocol auto: a session is decoded as Quake 3 when a Quake 3
    getchallenge arrives, even after other connectionless packets (a client
    asking for the server's info from its game port first); a session whose
    first datagram is in-game traffic of no known game is never decoded.
    Either way every datagram is relayed byte-identical."""
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr])
    dest = (V4, px.ports[0])
    q3, other = h.client(V4), h.client(V4)
    for payload in (b'\xff\xff\xff\xffgetinfo xxx',
                    b'\xff\xff\xff\xffgetchallenge 1234 Quake3Arena',
                    b'\x01\x00\x00\x00' + bytes(range(40))):
        roundtrip(q3, dest, payload)
    for payload in (bytes(range(1, 60)), b'\xff\xff\xff\xffgetchallenge 1 Quake3Arena'):
        roundtrip(other, dest, payload)
    r = stats_route(stop_ok(px), 'default')
    s_q3, s_other = session_for(r, q3.port)[0], session_for(r, other.port)[0]
    check(s_q3.get('codec') == 'q3', 'the Quake 3 client was not decoded: %r' % s_q3)
    # Decoding starts with the getchallenge that claimed the session.
    check(s_q3['decode']['oob'] == 1 and s_q3['decode']['datagrams'] == 4,
          'expected the getchallenge and the 3 datagrams after it decoded, got %r'
          % s_q3['decode'])
    check('codec' not in s_other, 'a non-Quake session was decoded: %r' % s_other)
    print('q3 session decoded (%r); other session relayed without decoding'
          % s_q3['decode'])


def case_auto_probe_other_games(h):
    """protocol auto gives each game's handshake to its own codec: Quake 3
    does not take QuakeWorld's or Quake 2's text getchallenge and connect
    (found with the real ezQuake client, whose "connect 28 ..." was taken
    for Quake 3's); QuakeWorld's connect goes to the qw decoder, Quake 2's
    to the q2 decoder; a Quake 3 connect (a length, then
    Huffman-coded userinfo) is claimed by q3."""
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr])
    dest = (V4, px.ports[0])
    qw, q2, q3 = h.client(V4), h.client(V4), h.client(V4)
    oob = b'\xff\xff\xff\xff'
    for payload in (oob + b'getchallenge\n',
                    oob + b'connect 28 4321 98765 "\\name\\peers\\topcolor\\0"\n',
                    struct.pack('<II', 1, 0) + b'\x05\x10\x00'):
        roundtrip(qw, dest, payload)
    for payload in (oob + b'getchallenge\n',
                    oob + b'connect 34 4321 12345 "\\name\\peers\\rate\\25000"\n',
                    struct.pack('<II', 1, 0) + b'\x04\x10\x00'):
        roundtrip(q2, dest, payload)
    roundtrip(q3, dest, oob + b'connect \x00\x2a' + bytes(range(0x80, 0xa0)))
    r = stats_route(stop_ok(px), 'default')
    s = session_for(r, qw.port)[0]
    check(s.get('codec') == 'qw', 'the QuakeWorld connect was not given to qw: %r' % s)
    s = session_for(r, q2.port)[0]
    check(s.get('codec') == 'q2', 'the Quake 2 connect was not given to q2: %r' % s)
    s = session_for(r, q3.port)[0]
    check(s.get('codec') == 'q3', 'the Quake 3 connect was not claimed: %r' % s)
    print('QuakeWorld connect decoded by qw, Quake 2 by q2; Quake 3 claimed')


# ------------------------------------------------------ socket buffers

def sysctl_int(name):
    with open('/proc/sys/' + name.replace('.', '/')) as f:
        return int(f.read().split()[0])


def has_cap_net_admin():
    """Whether this process (so the slipgate it starts) may pass the
    net.core.[rw]mem_max caps (CAP_NET_ADMIN, bit 12 of CapEff)."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('CapEff:'):
                return bool(int(line.split()[1], 16) >> 12 & 1)
    return False


def can_force_buffers():
    """Whether the kernel lets this process (so the slipgate it starts) pass
    net.core.[rw]mem_max, probed the way slipgate asks (SO_RCVBUFFORCE):
    CAP_NET_ADMIN in CapEff is not enough inside a user namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.setsockopt(socket.SOL_SOCKET, 33, 2 * sysctl_int('net.core.rmem_max'))  # FORCE
        except PermissionError:
            return False
    return True


def kernel_view(port):
    """What ss(8) reads from the kernel for the UDP socket bound to `port`
    (each worker loop's, summed): (rb, tb, drops), the buffer sizes as the
    kernel counts them (twice what was asked) and the datagrams it dropped.
    ss is independent of slipgate."""
    check(shutil.which('ss') is not None, 'ss (iproute2) is not installed')
    out = subprocess.run(['ss', '-u', '-a', '-m', '-n', '-H', 'sport', '= :%d' % port],
                         capture_output=True, text=True, timeout=10).stdout
    socks = [tuple(int(g) for g in m.groups())
             for m in re.finditer(r'skmem:\(r\d+,rb(\d+),t\d+,tb(\d+),.*?d(\d+)\)', out)]
    check(socks, 'ss shows no socket on port %d:\n%s' % (port, out))
    # worker loops (SLIPGATE_WORKERS): one socket each, sized alike; drops add up
    check(len({s[:2] for s in socks}) == 1, 'the sockets on port %d differ in buffers: %s'
          % (port, socks))
    return socks[0][0], socks[0][1], sum(s[2] for s in socks)


def kib(n):
    return '%d MiB' % (n >> 20) if n % (1 << 20) == 0 else \
        '%d KiB' % (n >> 10) if n % 1024 == 0 else '%d bytes' % n


def case_socket_buffer(h):
    """socket_buffer sizes the listener (checked with ss), a reload resizes
    it, and datagrams the kernel drops for a full buffer are counted exactly
    (relayed + kernel_drops == sent), logged and in --stats."""
    srv = h.echo(V4)
    want = 3 << 20
    rmax, wmax = sysctl_int('net.core.rmem_max'), sysctl_int('net.core.wmem_max')
    forced = can_force_buffers()
    exp_r = want if forced else min(want, rmax)
    exp_s = want if forced else min(want, wmax)
    px = h.proxy(config=route_block('buf', '127.0.0.1:$P0', srv.addr, socket_buffer='3M'))
    P = px.ports[0]
    dest = (V4, P)
    if (exp_r, exp_s) == (want, want):
        check(px.count_log(r'\[buf\] listener buffers: receive 3 MiB, send 3 MiB') == 1,
              'no "listener buffers: receive 3 MiB, send 3 MiB" line')
    else:
        check(px.count_log(r'socket_buffer 3 MiB: the kernel capped the listener at receive '
                           + re.escape(kib(exp_r)) + ', send ' + re.escape(kib(exp_s))) == 1,
              'no warning that the kernel capped the buffers at %s/%s' % (exp_r, exp_s))
    rb, tb, d = kernel_view(P)
    check((rb, tb) == (2 * exp_r, 2 * exp_s), 'kernel: rb %d tb %d, expected %d %d'
          % (rb, tb, 2 * exp_r, 2 * exp_s))
    c = h.client(V4)
    roundtrip(c, dest, b'first')

    # A reload shrinks the buffer at once (no new socket: same port, same session).
    small = 16 << 10
    px.write_config(route_block('buf', '127.0.0.1:%d' % P, srv.addr, socket_buffer='16k'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'\[buf\] listener buffers: receive 16 KiB, send 16 KiB', 5.0,
                          start=mark) is not None, 'no "receive 16 KiB" line after the reload')
    rb, tb, d0 = kernel_view(P)
    check((rb, tb) == (2 * small, 2 * small), 'kernel after reload: rb %d tb %d, expected %d'
          % (rb, tb, 2 * small))

    # Stopped, slipgate reads nothing: all but a buffer's worth is dropped.
    px.send_signal(signal.SIGSTOP)
    sent = 0
    try:
        for burst in range(6):  # bursts stay under the loopback backlog (1000)
            for i in range(50):
                c.send(b'flood %03d ' % sent + bytes(200), dest)
                sent += 1
            time.sleep(0.005)
        rb, tb, d1 = kernel_view(P)
    finally:
        px.send_signal(signal.SIGCONT)
    dropped = d1 - d0
    check(0 < dropped < sent, 'kernel dropped %d of %d datagrams with a 16 KiB buffer'
          % (dropped, sent))
    line = px.wait_for_log(r'\[buf\] the kernel dropped (\d+) datagrams at the listener '
                           r'\((\d+) in all\): its receive buffer \(16 KiB\) was full; '
                           r'raise socket_buffer', 5.0, start=mark)
    check(line is not None, 'no warning about the kernel drops')
    line = line[1]
    check(int(line.group(1)) == dropped and int(line.group(2)) == dropped,
          'warning says %s (%s in all), ss says %d' % (line.group(1), line.group(2), dropped))
    echoes = c.recv(1.0)  # what got through came back
    check(len(echoes) == sent - dropped, 'client got %d echoes of the flood, expected %d sent '
          '- %d dropped' % (len(echoes), sent, dropped))
    roundtrip(c, dest, b'after the flood')
    st = stop_ok(px)
    r = stats_route(st, 'buf')
    li = r.get('listener', {})
    check(li.get('kernel_drops') == dropped, 'stats: listener.kernel_drops %r, expected %d'
          % (li.get('kernel_drops'), dropped))
    check((li.get('rcvbuf'), li.get('sndbuf')) == (small, small),
          'stats: listener buffers %r, expected %d' % (li, small))
    relayed = r['counters']['c2s_packets']
    check(relayed == 2 + sent - dropped, 'stats: c2s_packets %d; expected 2 + %d sent - %d '
          'dropped by the kernel' % (relayed, sent, dropped))
    print('buffers %d/%d (forced: %s); flood of %d: %d dropped by the kernel, %d relayed'
          % (exp_r, exp_s, forced, sent, dropped, relayed - 2))


def case_socket_buffer_capped(h):
    """Without CAP_NET_ADMIN the kernel caps socket_buffer at
    net.core.[rw]mem_max: slipgate says so and runs with what it got."""
    import harness
    rmax, wmax = sysctl_int('net.core.rmem_max'), sysctl_int('net.core.wmem_max')
    want = (2 * max(rmax, wmax) + 1023) // 1024 * 1024
    if want > 1 << 30:
        raise harness.Skip('net.core.rmem_max/wmem_max are %d/%d: socket_buffer cannot ask for '
                           'more (1G at most)' % (rmax, wmax))
    exe = h.exe
    if has_cap_net_admin() or can_force_buffers():
        check(shutil.which('setpriv') is not None, 'setpriv (util-linux) is not installed')
        exe = h.path('no-net-admin.sh')
        with open(exe, 'w') as f:
            f.write('#!/bin/sh\nexec setpriv --inh-caps -net_admin --bounding-set -net_admin '
                    '"%s" "$@"\n' % h.exe)
        os.chmod(exe, 0o755)
    srv = h.echo(V4)
    p = harness.Proxy(exe, h.dir, 'capped')
    h.proxies.append(p)
    px = p.start(config=route_block('cap', '127.0.0.1:$P0', srv.addr,
                                    socket_buffer='%dk' % (want // 1024)))
    hit = px.wait_for_log(r'\[cap\] socket_buffer (.+?): the kernel capped the listener at '
                          r'receive (.+?), send (.+?); raise net.core.rmem_max and '
                          r'net.core.wmem_max \(sysctl\) or run with CAP_NET_ADMIN', 3.0)
    check(hit is not None, 'no warning that the kernel capped the buffers')
    hit = hit[1]
    check(hit.groups() == (kib(want), kib(rmax), kib(wmax)),
          'warning says %s, expected %s' % (hit.groups(), (kib(want), kib(rmax), kib(wmax))))
    rb, tb, _ = kernel_view(px.ports[0])
    check((rb, tb) == (2 * rmax, 2 * wmax), 'kernel: rb %d tb %d, expected %d %d'
          % (rb, tb, 2 * rmax, 2 * wmax))
    roundtrip(h.client(V4), (V4, px.ports[0]), b'capped but relaying')
    st = stop_ok(px)
    li = stats_route(st, 'cap').get('listener', {})
    check((li.get('rcvbuf'), li.get('sndbuf')) == (rmax, wmax),
          'stats: listener %r, expected rcvbuf %d sndbuf %d' % (li, rmax, wmax))
    print('asked %s, got %s/%s' % hit.groups())


# --------------------------------------------------- NetQuake handshake

def nq_control(body):
    """A NetQuake control packet: NETFLAG_CTL | length, big-endian, then `body`."""
    return struct.pack('>I', 0x80000000 | (4 + len(body))) + body


# The status queries slipgate's own probe socket sends a Quake 2 or
# NetQuake server for the page (`http` on) or for `ready_probe`.
PROBE_QUERIES = (b'\xff\xff\xff\xffstatus\n', b'\x80\x00\x00\x0c\x02QUAKE\x00\x03')


def recv_from(sock, timeout, what):
    """The next datagram at a scripted server, the status queries of
    slipgate's probe left out."""
    sock.settimeout(timeout)
    try:
        for _ in range(100):
            data, peer = sock.recvfrom(65536)
            if data not in PROBE_QUERIES:
                return data, peer
        raise Fail('only status queries arrived: %s' % what)
    except socket.timeout:
        raise Fail('nothing arrived: %s' % what)
    finally:
        sock.setblocking(False)


def nq_handshake(h, protocol, host=V4):
    """A scripted NetQuake server: a lobby socket answers the client's
    CCREQ_CONNECT with CCREP_ACCEPT naming a second socket (the game).
    Returns (the accept's port as the client saw it, proxy, lobby, game,
    client, upstream source seen by the lobby)."""
    game = h.echo(host, tag=b'GAME')
    lobby = h.udp_socket(host)
    args = ['-l', fmt_addr(host, '$P0'), '-s', fmt_addr(host, lobby.getsockname()[1])]
    px = h.proxy(args=args + (['-p', protocol] if protocol != 'auto' else []))
    dest = (host, px.ports[0])
    c = h.client(host)
    # DarkPlaces opens with a bare getchallenge (Quake 3's form), then connects.
    c.send(b'\xff\xff\xff\xffgetchallenge', dest)
    data, up = recv_from(lobby, 2.0, 'the getchallenge at the server')
    connect = nq_control(b'\x01QUAKE\x00\x03')
    c.send(connect, dest)
    data, src = recv_from(lobby, 2.0, 'the connect request at the server')
    check(data == connect and src == up, 'server got %r from %s, expected %r from %s'
          % (data, src, connect, up))
    lobby.sendto(nq_control(b'\x81' + struct.pack('<I', game.port)), up)
    got = c.recv_one(2.0)
    check(got is not None, 'the accept did not reach the client')
    payload, source = got
    check(source[:2] == dest, 'the accept came from %s, not slipgate %s' % (source, dest))
    check(len(payload) == 9 and payload[:5] == b'\x80\x00\x00\x09\x81',
          'the accept changed shape: %r' % payload)
    return struct.unpack('<I', payload[5:])[0], px, lobby, game, c, up


def nq_in_game(h, protocol, host=V4):
    port, px, lobby, game, c, up = nq_handshake(h, protocol, host)
    dest = (host, px.ports[0])
    check(port == px.ports[0], 'the client was told port %d, expected slipgate\'s %d (the '
          'server\'s game socket is %d)' % (port, px.ports[0], game.port))
    check(px.wait_for_log(r'NetQuake accept: the server moved this client to %s; '
                          r'the client stays on port %d' % (re.escape(fmt_addr(host, game.port)),
                                                            port), 2.0) is not None,
          'no "NetQuake accept" line in the log')
    # The client stays on slipgate's port; its game traffic reaches the game
    # socket from the same upstream address the lobby saw, and comes back.
    for k in range(5):
        dgram = struct.pack('>II', 0x00100000 | 13, k) + b'move%d' % k
        roundtrip(c, dest, dgram, server_tag=b'GAME', what='in game: ')
    check([src for src in game.sources()] == [up[:2]],
          'the game socket saw %s, expected only %s' % (game.sources(), up[:2]))
    st = stop_ok(px)
    s = stats_route(st, 'default')['sessions']
    check(len(s) == 1, 'stats: %d sessions, expected 1' % len(s))
    check(s[0].get('codec') == 'nq', 'stats: the session was decoded as %r, expected nq'
          % s[0].get('codec'))
    expect_counters(s[0], 'session', 7, 16 + 12 + 5 * 13, 6, 9 + 5 * (13 + 4))
    print('accept rewritten to %d, game socket %d reached from %s' % (port, game.port, up))


def case_nq_accept_auto(h):
    """protocol auto: a DarkPlaces-style handshake (bare getchallenge, then a
    NetQuake connect) is not taken for Quake 3, and the accept's port is
    rewritten so the client stays on slipgate."""
    nq_in_game(h, 'auto')


def case_nq_accept_nq(h):
    """protocol nq: the same, with no probing at all."""
    nq_in_game(h, 'nq')


def case_nq_reconnect(h):
    """The same client connects again after the server moved it: the new
    request goes to the server's control port (not the game port it was
    moved to), and the second accept is rewritten and followed too."""
    port, px, lobby, game, c, up = nq_handshake(h, 'nq')
    dest = (V4, px.ports[0])
    roundtrip(c, dest, struct.pack('>II', 0x00100000 | 12, 0) + b'move', server_tag=b'GAME',
              what='first game: ')
    game2 = h.echo(V4, tag=b'GAME2')
    connect = nq_control(b'\x01QUAKE\x00\x03')
    c.send(connect, dest)
    data, src = recv_from(lobby, 2.0, 'the second connect request at the control port')
    check(data == connect and src == up, 'control port got %r from %s' % (data, src))
    lobby.sendto(nq_control(b'\x81' + struct.pack('<I', game2.port)), up)
    got = c.recv_one(2.0)
    check(got is not None, 'the second accept did not reach the client')
    check(struct.unpack('<I', got[0][5:])[0] == px.ports[0],
          'the second accept was not rewritten: %r' % got[0])
    roundtrip(c, dest, struct.pack('>II', 0x00100000 | 12, 1) + b'move', server_tag=b'GAME2',
              what='second game: ')
    check(game2.sources() == {up[:2]}, 'the second game socket saw %s' % game2.sources())
    check(px.wait_count_log(r'NetQuake accept: the server moved', 2) == 2,
          'expected two "NetQuake accept" log lines')
    stop_ok(px)


def nq_accept_burst(h, protocol):
    """The server's first datagram from the port its accept names comes
    right behind the accept (quakespasm sends the serverinfo at once): it
    reaches the client at once too, not after the server's resend (it
    used to be dropped by the kernel: the upstream socket was still
    connected to the control port).  While the answer is awaited, a
    datagram from another port of the server's host is not relayed
    (drops.foreign)."""
    game = h.udp_socket(V4)
    lobby = h.udp_socket(V4)
    other = h.udp_socket(V4)
    args = ['-l', fmt_addr(V4, '$P0'), '-s', fmt_addr(V4, lobby.getsockname()[1])]
    px = h.proxy(args=args + (['-p', protocol] if protocol != 'auto' else []))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    connect = nq_control(b'\x01QUAKE\x00\x03')
    c.send(connect, dest)
    data, up = recv_from(lobby, 2.0, 'the connect request at the server')
    check(data == connect, 'server got %r' % data)
    other.sendto(struct.pack('>II', 0x00100000 | 13, 0) + b'other', up)
    time.sleep(0.2)
    first = struct.pack('>II', 0x00100000 | 13, 0) + b'first'
    lobby.sendto(nq_control(b'\x81' + struct.pack('<I', game.getsockname()[1])), up)
    game.sendto(first, up)
    got = [c.recv_one(1.0) for _ in range(2)]
    check(got[0] is not None and got[0][0][:5] == b'\x80\x00\x00\x09\x81',
          'the accept did not reach the client: %r' % (got,))
    check(got[1] is not None and got[1][0] == first,
          'the game port\'s first datagram did not reach the client: %r' % (got,))
    expect_silence(c, 0.3, 'nothing else (the other port\'s datagram)')
    # The session talks to the game port from now on, with the kernel's filter.
    c.send(struct.pack('>II', 0x00100000 | 12, 1) + b'move', dest)
    data, src = recv_from(game, 2.0, 'the client\'s datagram at the game port')
    check(src == up and data.endswith(b'move'), 'game port got %r from %s' % (data, src))
    stats = stop_ok(px)
    drops = stats['routes'][0]['counters']['drops']
    check(drops.get('foreign') == 1, 'drops: %s, expected foreign 1' % drops)


def case_nq_accept_burst(h):
    nq_accept_burst(h, 'nq')


def case_nq_accept_burst_auto(h):
    nq_accept_burst(h, 'auto')


def case_nq_accept_v6(h):
    """The same over IPv6: the session follows the server to its new port
    on ::1."""
    nq_in_game(h, 'nq', V6)


def case_nq_accept_q3_untouched(h):
    """A route declared Quake 3 leaves a NetQuake-looking accept alone."""
    port, px, lobby, game, c, up = nq_handshake(h, 'q3')
    check(port == game.port, 'a q3 route rewrote the accept to port %d' % port)
    check(px.count_log(r'NetQuake accept') == 0, 'a q3 route logged a NetQuake accept')
    stop_ok(px)


def nq_echo_attack(h, protocol, accept_first):
    """A NetQuake accept that only echoes the client: the server sends back
    whatever it gets (many do), so a client that sends an accept-shaped
    datagram naming port P, around a connect request, gets it handed back
    as the server's 'accept'.  Followed, it would point the session at any
    port of the server's host (here a bystander socket).  The server here
    echoes both datagrams once it has them both, so that the echoed accept
    always answers a connect request slipgate forwarded."""
    srv = h.udp_socket(V4)
    bystander = h.udp_socket(V4)
    victim = bystander.getsockname()[1]
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', fmt_addr(V4, srv.getsockname()[1])]
                 + (['-p', protocol] if protocol != 'auto' else []))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    connect = nq_control(b'\x01QUAKE\x00\x03')
    forged = nq_control(b'\x81' + struct.pack('<I', victim))
    sent = [forged, connect] if accept_first else [connect, forged]
    for d in sent:
        c.send(d, dest)
    got_srv = [recv_from(srv, 5.0, 'datagram %d at the server' % k) for k in range(2)]
    check([d for d, _ in got_srv] == sent, 'the server got %r' % got_srv)
    up = got_srv[0][1]
    for d, _ in got_srv:
        srv.sendto(d, up)
    # Both echoes, however loaded the machine (recv(1.0) alone lost one under load).
    got, deadline = [], time.monotonic() + 5.0
    while len(got) < 2 and time.monotonic() < deadline:
        one = c.recv_one(deadline - time.monotonic())
        if one is not None:
            got.append(one)
    check(len(got) == 2, 'expected both datagrams echoed back, got %d' % len(got))
    check(px.count_log(r'NetQuake accept: the server moved') == 0,
          'slipgate followed an echoed accept to port %d' % victim)
    # The session still talks to the server, and nothing reached the bystander.
    still = b'\x00\x01\x00\x0cstill'
    c.send(still, dest)
    data, src = recv_from(srv, 2.0, 'the datagram after the echo at the server')
    check(data == still and src == up, 'after the echo the server got %r from %s' % (data, src))
    bystander.settimeout(0.3)
    try:
        data, src = bystander.recvfrom(65536)
        raise Fail('the bystander port %d got %r from %s' % (victim, data, src))
    except socket.timeout:
        pass
    check(px.wait_for_log(r'NetQuake accept naming port %d refused: the client itself sent '
                          r'server replies' % victim, 2.0) is not None,
          'no "NetQuake accept ... refused" line in the log')
    stop_ok(px)
    print('%s: the echoed accept naming %d was relayed, not followed' % (protocol, victim))


def case_nq_accept_echo(h):
    """Item 3 of issue 13: an accept-shaped datagram the client itself sent
    (after or before its connect request) and an echoing server handed back
    never moves the session, on auto and nq routes."""
    for protocol in ('auto', 'nq'):
        for accept_first in (False, True):
            nq_echo_attack(h, protocol, accept_first)


def case_nq_accept_ports(h):
    """nq_accept_ports: a genuine accept naming a port outside the range is
    relayed as it came and the session stays; once per connect: a second
    accept without a new request is not followed either."""
    game = h.echo(V4, tag=b'GAME')
    lobby = h.udp_socket(V4)
    low = 1 if game.port > 1000 else game.port + 1
    px = h.proxy(config=route_block('nq', '127.0.0.1:$P0', fmt_addr(V4, lobby.getsockname()[1]),
                                    protocol='nq', nq_accept_ports='%d-%d' % (low, low + 999)))
    dest = (V4, px.ports[0])
    c = h.client(V4)
    c.send(nq_control(b'\x01QUAKE\x00\x03'), dest)
    data, up = recv_from(lobby, 2.0, 'the connect request at the server')
    accept = nq_control(b'\x81' + struct.pack('<I', game.port))
    lobby.sendto(accept, up)
    got = c.recv_one(2.0)
    check(got is not None and got[0] == accept, 'the refused accept was not relayed as it came: %r'
          % (got,))
    check(px.wait_for_log(r'NetQuake accept naming port %d refused: the port is outside '
                          r'nq_accept_ports' % game.port, 2.0) is not None,
          'no refusal in the log')
    c.send(b'\x00\x01\x00\x0cstay', dest)
    data, src = recv_from(lobby, 2.0, 'the next datagram at the control port')
    check(data == b'\x00\x01\x00\x0cstay' and src == up, 'control port got %r from %s'
          % (data, src))
    # No new connect request: a second accept is not an answer.
    lobby.sendto(accept, up)
    got = c.recv_one(2.0)
    check(got is not None and got[0] == accept, 'the second accept changed: %r' % (got,))
    check(px.count_log(r'the server moved') == 0, 'slipgate moved the session')
    check(game.sources() == set(), 'the game socket was reached: %s' % game.sources())
    stop_ok(px)
    # The directive's values: LOW-HIGH or one port, within 1-65535.
    for value, ok in (('27000-27100', True), ('26001', True), ('2000-1000', False),
                      ('0-5', False), ('1-65536', False), ('x', False), ('5-', False),
                      ('"1 - 2"', False)):
        path = h.path('ports.conf')
        with open(path, 'w') as f:
            f.write(route_block('a', '127.0.0.1:1', '127.0.0.1:2', nq_accept_ports=value))
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        check(r.returncode == (0 if ok else 1) and (ok or re.search(
            re.escape(path) + r":4:\d+: error: 'nq_accept_ports' wants ports LOW-HIGH", err)),
              'nq_accept_ports %s: exit %d, stderr %r' % (value, r.returncode, err[:300]))
    print('accept naming %d outside %d-%d relayed unchanged; the session stayed'
          % (game.port, low, low + 999))


def case_nq_accept_self(h):
    """A server whose accept names slipgate's own listening port (inside
    nq_accept_ports) would point the session's socket at slipgate itself,
    and the listener would open a second session whose client is that
    socket.  The accept is refused (relayed as it came, logged), the session
    stays on the server's control port, no second session opens, and the
    proxy keeps serving: a genuine accept still moves the next client."""
    lobby = h.udp_socket(V4)
    game = h.echo(V4, tag=b'GAME')
    px = h.proxy(config=route_block('nq', '127.0.0.1:$P0', fmt_addr(V4, lobby.getsockname()[1]),
                                    protocol='nq', nq_accept_ports='1-65535',
                                    idle_timeout='60s'))
    P = px.ports[0]
    dest = (V4, P)
    connect = nq_control(b'\x01QUAKE\x00\x03')
    c = h.client(V4)
    c.send(connect, dest)
    data, up = recv_from(lobby, 2.0, 'the connect request at the server')
    accept = nq_control(b'\x81' + struct.pack('<I', P))
    lobby.sendto(accept, up)
    got = c.recv_one(2.0)
    check(got is not None and got[0] == accept, 'the refused accept was not relayed as it came: '
          '%r' % (got,))
    # The client's in-game datagrams still reach the server's control port,
    # from the session's own socket (not through a second session).
    for k in range(3):
        dgram = struct.pack('>II', 0x00100000 | 12, k) + b'self'
        c.send(dgram, dest)
        data, src = recv_from(lobby, 2.0, 'in-game datagram %d at the control port' % k)
        check(data == dgram and src == up, 'the server got %r from %s, expected %r from the '
              'session\'s socket %s' % (data, src, dgram, up))
    check(px.wait_for_log(r"(?i)warn\b.*\[nq\].*NetQuake accept naming port %d refused: the "
                          r"port is one of slipgate's own sockets" % P, 2.0) is not None,
          'no refusal naming slipgate\'s own port in the log')
    # The proxy keeps working: another client is moved by a genuine accept.
    c2 = h.client(V4)
    c2.send(connect, dest)
    data, up2 = recv_from(lobby, 2.0, 'the second client\'s connect request')
    lobby.sendto(nq_control(b'\x81' + struct.pack('<I', game.port)), up2)
    got = c2.recv_one(2.0)
    check(got is not None and got[0] == nq_control(b'\x81' + struct.pack('<I', P)),
          'the second client\'s accept: %r' % (got,))
    roundtrip(c2, dest, struct.pack('>II', 0x00100000 | 12, 0) + b'move', server_tag=b'GAME',
              what='second client in game: ')
    st = stop_ok(px)
    r = stats_route(st, 'nq')
    check(r.get('sessions_total') == 2, 'stats: sessions_total %r, expected 2 (no session '
          'from slipgate\'s own socket)' % r.get('sessions_total'))
    check(drops(r).get('loop') == 0, 'stats: drops.loop %r, expected 0 (nothing reached the '
          'listener from slipgate)' % drops(r).get('loop'))
    print('accept naming slipgate\'s port %d refused; one session per client' % P)


def case_loop_source_upstream(h):
    """A datagram to a listener from one of slipgate's own sessions' sockets
    opens no session: route 'a' relays to route 'b's listening address, so
    'a's upstream socket writes to 'b's listener; 'b' drops it (drops.loop,
    one warning) and the server behind 'b' is never reached."""
    srv = h.echo(V4)
    px = h.proxy(config=route_block('a', '127.0.0.1:$P0', '127.0.0.1:$P1', idle_timeout='60s')
                 + route_block('b', '127.0.0.1:$P1', srv.addr, idle_timeout='60s'), routes=2)
    c = h.client(V4)
    for k in range(3):
        c.send(b'through a and b? %d' % k, (V4, px.ports[0]))
    expect_silence(c, 1.0, 'client of route a, whose server is route b')
    check(len(srv.snapshot()) == 0, 'the server behind route b got %d datagrams'
          % len(srv.snapshot()))
    rx = r"(?i)warn\b.*\[b\].*datagram from 127\.0\.0\.1:\d+, one of slipgate's own sockets.*" \
         r"no session is opened"
    check(px.count_log(rx) == 1, 'expected one "no session is opened" warning on route b '
          'naming slipgate\'s own socket, got %d' % px.count_log(rx))
    roundtrip(h.client(V4), (V4, px.ports[1]), b'a real client of b')
    # Another local address with the port of a session's socket (connected
    # from 127.0.0.1) is someone else: it gets a session.
    up = srv.snapshot()[-1][1]
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    h.sockets.append(other)
    other.bind(('127.0.0.2', up[1]))
    other.sendto(b'same port, other host', (V4, px.ports[1]))
    data, src = recv_from(other, 2.0, 'the echo for 127.0.0.2:%d (the port of a session\'s '
                          'socket)' % up[1])
    check(data == TAG + b'same port, other host', 'echo differs: %r' % data)
    st = stop_ok(px)
    a, b = stats_route(st, 'a'), stats_route(st, 'b')
    check(a.get('sessions_total') == 1, 'stats: route a sessions_total %r, expected 1'
          % a.get('sessions_total'))
    check(drops(b).get('loop') == 3 and b.get('sessions_total') == 2,
          'stats: route b drops.loop %r, sessions_total %r; expected 3 and 2'
          % (drops(b).get('loop'), b.get('sessions_total')))


# ------------------------------------------------- logs under a flood

def case_flood_log_bounded(h):
    """A flood of one-byte datagrams from N distinct sources to a server
    that never answers them opens N sessions but logs O(1) lines at info
    and above: each "session start" (and end) line is at debug until the
    server answers the session, and one rate-limited line counts the
    sessions that ended unanswered.  A session the server answers still
    gets its "session start" line at info, once, and its end line.  The
    same flood towards a server that is down (ICMP port unreachable for
    each session) gives one "unreachable" warning, not one per session."""
    n = 150
    srv = h.echo(V4, echo=False)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr,
                       '+set', 'new_sessions_per_source', '1000', '+set', 'max_sessions', '1000'])
    dest = (V4, px.ports[0])
    mark = px.log_mark()
    flood = [h.client(V4) for _ in range(n)]
    for c in flood:
        c.send(b'\x01', dest)
    end = time.monotonic() + 5.0
    while len(srv.snapshot()) < n and time.monotonic() < end:
        time.sleep(0.02)
    check(len(srv.snapshot()) == n, 'the server got %d of the %d flood datagrams'
          % (len(srv.snapshot()), n))
    # One real player, whom the server answers.
    real = h.client(V4)
    real.send(b'REAL', dest)
    end = time.monotonic() + 3.0
    up = None
    while up is None and time.monotonic() < end:
        up = next((src for _, src, d in srv.snapshot() if d == b'REAL'), None)
        time.sleep(0.01)
    check(up is not None, 'the real client\'s datagram did not reach the server')
    srv.sock.sendto(b'ANSWER', up)
    got = real.recv_one(2.0)
    check(got is not None and got[0] == b'ANSWER', 'the server\'s answer did not reach the '
          'real client: %r' % (got,))
    check(px.wait_for_log(r'\binfo\b.*session start client=127\.0\.0\.1:%d ' % real.port, 2.0)
          is not None, 'no info "session start" line for the answered session')
    st = stop_ok(px)
    check(len(stats_route(st, 'default')['sessions']) == n + 1,
          'stats: %d sessions, expected %d' % (len(stats_route(st, 'default')['sessions']), n + 1))
    loud = [l for l in px.log_lines(mark) if re.search(r'\b(info|warn|error)\b', l)]
    starts = [l for l in loud if 'session start' in l]
    check(len(starts) == 1 and 'client=127.0.0.1:%d ' % real.port in starts[0],
          'expected one info "session start" line, for the real client; got %d: %s'
          % (len(starts), starts[:3]))
    check(len([l for l in loud if re.search(r'session end .*client=127\.0\.0\.1:%d '
                                            % real.port, l)]) == 1,
          'no info "session end" line for the real client')
    counted = sum(int(m.group(1)) for m in (re.search(
        r'(\d+) (?:more )?session\(s\) ended that (?:the )?server.* never answered', l)
        for l in loud) if m)
    check(counted == n, 'the lines counting the sessions ended unanswered add up to %d, '
          'expected %d' % (counted, n))
    check(len(loud) <= 8, '%d flood sources gave %d lines at info and above (expected at most '
          '8):\n  %s' % (n, len(loud), '\n  '.join(loud[:12])))
    print('%d spoofed sources, %d sessions: %d lines at info and above, the real session\'s '
          'start line once:\n  %s' % (n, n + 1, len(loud), '\n  '.join(loud)))

    # A server that is down: each session meets "port unreachable"; the
    # warning is said once for the lot, not once per session.
    dead_port = find_dead_port()
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', '127.0.0.1:%d' % dead_port,
                       '+set', 'new_sessions_per_source', '1000', '+set', 'max_sessions', '1000'],
                 name='dead')
    dest = (V4, px.ports[0])
    mark = px.log_mark()
    flood = [h.client(V4) for _ in range(n)]
    for k in range(3):
        for c in flood:
            c.send(b'\x01', dest)
        time.sleep(0.05)
    check(px.wait_for_log(r'unreachable: nothing listens', 2.0) is not None,
          'no "unreachable" warning for the dead server')
    time.sleep(0.3)
    st = stop_ok(px)
    check(len(stats_route(st, 'default')['sessions']) == n,
          'stats: %d sessions towards the dead server, expected %d'
          % (len(stats_route(st, 'default')['sessions']), n))
    loud = [l for l in px.log_lines(mark) if re.search(r'\b(info|warn|error)\b', l)]
    check(len(re.findall(r'unreachable: nothing listens', '\n'.join(loud))) == 1,
          'the unreachable server was reported more than once')
    check(len(loud) <= 8, '%d flood sources towards a dead server gave %d lines at info and '
          'above (expected at most 8):\n  %s' % (n, len(loud), '\n  '.join(loud[:12])))
    print('towards a dead server: %d lines at info and above:\n  %s'
          % (len(loud), '\n  '.join(loud)))

    # Routes that decode: each flood session's first datagram fails to
    # decode; the warning is the route's, rate-limited, with its count, and
    # the decoders' end-of-session summaries of unanswered sessions are at
    # debug.
    # Each game's datagram that does not decode: Quake 3's runt, then a
    # netchan header with an opcode no client sends (QuakeWorld and Quake 2:
    # sequence, ack and a qport of each source's own, since one qport from
    # one host is one player; NetQuake: an unreliable datagram).
    junk = {'q3': lambda k: b'\x01',
            'qw': lambda k: struct.pack('<IIH', 1, 0, 1000 + k) + b'\xff',
            'q2': lambda k: struct.pack('<IIH', 1, 0, 1000 + k) + b'\xff',
            'nq': lambda k: struct.pack('>II', 0x00100009, 0) + b'\xff'}
    for proto in ('q3', 'qw', 'q2', 'nq'):
        srv = h.echo(V4, echo=False)
        px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', proto,
                           '+set', 'new_sessions_per_source', '1000',
                           '+set', 'max_sessions', '1000'], name='decode_' + proto)
        dest = (V4, px.ports[0])
        mark = px.log_mark()
        flood = [h.client(V4) for _ in range(n)]
        for k, c in enumerate(flood):
            c.send(junk[proto](k), dest)
        end = time.monotonic() + 5.0
        while len(srv.snapshot()) < n and time.monotonic() < end:
            time.sleep(0.02)
        check(len(srv.snapshot()) == n, '-p %s: the server got %d of the %d flood datagrams'
              % (proto, len(srv.snapshot()), n))
        st = stop_ok(px)
        errors = sum(s['decode']['errors'] for s in stats_route(st, 'default')['sessions']
                     if s.get('decode'))
        check(errors == n, '-p %s: %d decode errors counted, expected %d' % (proto, errors, n))
        loud = [l for l in px.log_lines(mark) if re.search(r'\b(info|warn|error)\b', l)]
        counted = sum(int(m.group(1)) for m in (re.search(
            r'(\d+) session\(s\) the server has not answered sent what does not decode', l)
            for l in loud) if m)
        check(counted >= 1 and not any('first decode error' in l for l in loud),
              '-p %s: the undecodable flood was not reported by the rate-limited line:\n  %s'
              % (proto, '\n  '.join(loud[:12])))
        check(len(loud) <= 8, '-p %s: %d flood sources gave %d lines at info and above '
              '(expected at most 8):\n  %s' % (proto, n, len(loud), '\n  '.join(loud[:12])))
        print('-p %s: %d undecodable sources, %d lines at info and above' % (proto, n, len(loud)))


# ------------------------------------------------- NAT rebinding (qport)

def two_players(h, srv, dest, connect, header, qa, qb):
    """Players A and B of one host (qports qa, qb) connect through `dest` and
    send three in-game datagrams each (sequences 0-2); the server sees two
    sources.  Their client sockets."""
    a, b = h.client(V4), h.client(V4)
    roundtrip(a, dest, connect(qa), what='A connect: ')
    roundtrip(b, dest, connect(qb), what='B connect: ')
    for k in range(3):
        roundtrip(a, dest, header(k, qa) + b'a-move', what='A in game: ')
        roundtrip(b, dest, header(k, qb) + b'b-move', what='B in game: ')
    check(len(srv.sources()) == 2, 'the server saw %d sources, expected 2' % len(srv.sources()))
    return a, b


def qport_rebind(h, protocol, connect, header, qports):
    """Clients that change source port mid-game keep their session when
    their datagrams carry the same qport (header(seq, qport) builds one);
    two players of one host with different qports are not merged."""
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr]
                 + (['-p', protocol] if protocol != 'auto' else []))
    dest = (V4, px.ports[0])
    qa, qb = qports
    a1, b = two_players(h, srv, dest, connect, header, qa, qb)
    up_a = {src for _, src, d in srv.snapshot() if d.endswith(b'a-move')}

    # A's NAT picks a new port: same host, same qport.
    a2 = h.client(V4)
    for k in range(3, 6):
        roundtrip(a2, dest, header(k, qa) + b'a-move', what='A from its new port: ')
    moved = r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d \(qport %d\)' % (
        a1.port, a2.port, qa)
    check(px.wait_for_log(moved, 2.0) is not None, 'no "%s" line' % moved)
    check({src for _, src, d in srv.snapshot() if d.endswith(b'a-move')} == up_a,
          'the server saw A from a new upstream socket: %s, before %s'
          % ({src for _, src, d in srv.snapshot() if d.endswith(b'a-move')}, up_a))
    # A late datagram from the old port goes to the server in A's session;
    # the answer goes to where A is now.
    a1.send(header(2, qa) + b'a-late', dest)
    got = a2.recv_one(2.0)
    check(got is not None and got[0] == b'ECHO' + header(2, qa) + b'a-late',
          'the late datagram\'s echo did not reach A\'s new port: %r' % (got,))
    expect_silence(a1, 0.3, 'A\'s old port after the move')
    roundtrip(a2, dest, header(6, qa) + b'a-move', what='A after the late one: ')
    # B sends from a new port with its own qport: its own session moves, not A's.
    b2 = h.client(V4)
    roundtrip(b2, dest, header(3, qb) + b'b-move', what='B from its new port: ')
    # The echo can come back before the harness has read slipgate's log line.
    moved_b = r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d ' % (b.port, b2.port)
    check(px.wait_for_log(moved_b, 2.0) is not None, 'no "%s" line' % moved_b)
    # A third player of the same host with an unknown qport: a new session.
    c = h.client(V4)
    roundtrip(c, dest, header(0, (qa ^ qb ^ 0x55) & 0xff or 1) + b'c-move', what='C: ')
    check(len(srv.sources()) == 3, 'the server saw %d sources, expected 3 (A, B, C)'
          % len(srv.sources()))
    check(px.count_log(r'client moved from') == 2, 'expected two "client moved" lines')
    st = stop_ok(px)
    sess = stats_route(st, 'default')['sessions']
    check(len(sess) == 3, 'stats: %d sessions, expected 3' % len(sess))
    check(stats_route(st, 'default').get('client_moves') == 2,
          'stats: client_moves %r, expected 2' % stats_route(st, 'default').get('client_moves'))
    check(len(session_for(stats_route(st, 'default'), a2.port)) == 1
          and not session_for(stats_route(st, 'default'), a1.port),
          'stats: A\'s session is not named after its new port')
    print('%s: A moved %d -> %d (qport %d), B (qport %d) moved on its own, C apart'
          % (protocol, a1.port, a2.port, qa, qb))


def qw_connect(qport):
    return b'\xff\xff\xff\xffconnect 28 %d 1234 "\\name\\p%d"\n' % (qport, qport)


def qw_header(seq, qport):
    return struct.pack('<IIH', seq, seq, qport)


def case_client_left(h):
    """A QuakeWorld client's `drop` (clc_stringcmd, ezQuake's disconnect,
    sent three times; here once as three copies of one datagram, which the
    netchan takes as duplicates) ends its session once five seconds pass
    with nothing either way (the echoes of the drops are the server's last
    words), reason "client left", not at idle_timeout (60 s here); a client that says
    more after its drop (a reconnect from the same port) keeps its
    session."""
    srv = h.echo(V4)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', 'qw',
                       '+set', 'idle_timeout', '60s', '+set', 'handshake_timeout', '60s'])
    dest = (V4, px.ports[0])
    drop = b'\x04drop\x00'
    gone, back = h.client(V4), h.client(V4)
    roundtrip(gone, dest, qw_connect(700))
    roundtrip(back, dest, qw_connect(701))
    for k in range(1, 4):
        roundtrip(gone, dest, qw_header(k, 700) + b'\x01')  # clc_nop
        roundtrip(back, dest, qw_header(k, 701) + b'\x01')
    mark = px.log_mark()
    t0 = time.monotonic()
    for k in range(4, 7):
        gone.send(qw_header(4, 700) + drop, dest)  # one datagram three times (Q2PRO's way)
        back.send(qw_header(k, 701) + drop, dest)
    for c in (gone, back):
        check(len(c.recv(0.3)) == 3, 'the drops were not relayed (three echoes)')
    roundtrip(back, dest, qw_connect(701))  # it comes back at once
    end = px.wait_for_log(r'session end reason=client left client=127\.0\.0\.1:%d\b'
                          % gone.port, 8.0, start=mark)
    check(end is not None, 'no "session end reason=client left" for the client that dropped:\n'
          + '\n'.join(px.log_lines(mark)))
    took = end[0] - t0
    check(4.9 <= took <= 7.5, 'the session ended %.2f s after the drop, expected 5-6 s' % took)
    ends = [m.string for m in px.session_ends(mark)]
    check(len(ends) == 1, 'sessions ended: %r (the one that came back must stay)' % ends)
    roundtrip(back, dest, qw_header(7, 701) + b'\x01', what='the client that came back: ')
    st = stop_ok(px)
    ss = stats_route(st, 'default').get('sessions') or []
    left = [x for x in ss if x.get('end_reason') == 'client left']
    check(len(left) == 1 and left[0].get('client') == '127.0.0.1:%d' % gone.port,
          'stats: sessions ended as "client left": %r' % left)
    print('dropped: ended %.2f s after its drop; came back: kept its session' % took)


def case_qport_qw(h):
    """QuakeWorld (qw route, and auto from its connect): the 16-bit qport
    at bytes 8-9 of a client's datagram keeps its session across a new
    source port."""
    qport_rebind(h, 'qw', qw_connect, qw_header, (4242, 4243))
    qport_rebind(h, 'auto', qw_connect, qw_header, (517, 32000))


def case_qport_q2(h):
    """Quake 2: protocol 34 carries a 16-bit qport at byte 8; R1Q2 (35) and
    Q2PRO (36) one byte (qport & 0xff), learnt from the connect string."""
    def connect(proto):
        return lambda q: b'\xff\xff\xff\xffconnect %d %d 99 "\\name\\x"\n' % (proto, q)

    def header(proto):
        if proto == 34:
            return lambda seq, q: struct.pack('<IIH', seq, seq, q)
        return lambda seq, q: struct.pack('<IIB', seq, seq, q & 0xff)
    qport_rebind(h, 'q2', connect(34), header(34), (1000, 1001))
    qport_rebind(h, 'q2', connect(35), header(35), (17, 18))
    qport_rebind(h, 'auto', connect(36), header(36), (200, 201))


def qport_forged(h, protocol, connect, header, qport):
    """A player's qport from another port of their host moves their session
    only with a sequence that continues theirs (newer, at most 500 ahead):
    a stale one, a repeated one and one far ahead are dropped (drops.rebind,
    one rate-limited warning saying why), never reach the server and leave
    the session where it is.  The genuine move then works; a second move
    within a second of it (ping-pong) is refused, one a second later is not."""
    srv = h.echo(V4)
    # -v: each refusal is logged at debug (the warning is rate-limited)
    px = h.proxy(args=['-v', '-l', '127.0.0.1:$P0', '-s', srv.addr]
                 + (['-p', protocol] if protocol != 'auto' else []))
    dest = (V4, px.ports[0])
    a1 = h.client(V4)
    roundtrip(a1, dest, connect(qport), what='connect: ')
    for k in range(1000, 1005):
        roundtrip(a1, dest, header(k, qport) + b'a-move', what='in game: ')
    f = h.client(V4)
    last = 1004
    for what in ('stale', 'repeated', 'far ahead'):
        seq, why = {'stale': (990, r'sequence 990 is not newer than the client\'s %d' % last),
                    'repeated': (last, r'sequence %d is not newer' % last),
                    'far ahead': (last + 100000, r'sequence %d is 100000 ahead of the client\'s %d'
                                  % (last + 100000, last))}[what]
        f.send(header(seq, qport) + b'forged', dest)
        check(px.wait_for_log(r'refused: ' + why, 2.0) is not None,
              '%s: no "refused: %s" line' % (what, why))
        last += 1
        roundtrip(a1, dest, header(last, qport) + b'a-move', what='after the %s one: ' % what)
    expect_silence(f, 0.2, 'the forging port')
    check(not [d for _, _, d in srv.snapshot() if d.endswith(b'forged')],
          'a forged datagram reached the server')
    check(px.count_log(r'client moved from') == 0, 'a forged datagram moved the session')
    check(px.count_log(r'(?i)\bwarn\b.*datagram\(s\) with a player\'s qport from another port '
                       r'of their host dropped.*127\.0\.0\.1:%d.*not newer' % f.port) == 1,
          'expected one rate-limited warning naming the forging port and why')
    # The genuine move.
    a2 = h.client(V4)
    roundtrip(a2, dest, header(last + 2, qport) + b'a-move', what='A from its new port: ')
    check(px.wait_for_log(r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d'
                          % (a1.port, a2.port), 2.0) is not None, 'the genuine move did not happen')
    # Ping-pong: another port right away is refused, the session stays at a2.
    a3 = h.client(V4)
    a3.send(header(last + 3, qport) + b'a-move', dest)
    check(px.wait_for_log(r'refused: the session moved less than 1000 ms ago', 2.0) is not None,
          'no "moved less than 1000 ms ago" refusal')
    expect_silence(a3, 0.2, 'a third port right after a move')
    roundtrip(a2, dest, header(last + 4, qport) + b'a-move', what='A still at its new port: ')
    time.sleep(1.1)
    roundtrip(a3, dest, header(last + 5, qport) + b'a-move', what='A\'s third port a second later: ')
    check(px.wait_for_log(r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d'
                          % (a2.port, a3.port), 2.0) is not None,
          'the move a second later did not happen')
    check(px.count_log(r'client moved from') == 2, 'expected two "client moved" lines')
    st = stop_ok(px)
    route = stats_route(st, 'default')
    check(route['counters']['drops'].get('rebind') == 4,
          'stats: drops.rebind %r, expected 4' % route['counters']['drops'].get('rebind'))
    check(len(route['sessions']) == 1, 'stats: %d sessions, expected 1' % len(route['sessions']))
    print('%s: stale, repeated and far-ahead forgeries from port %d dropped; moved %d -> %d, '
          'a move right after refused, one a second later followed'
          % (protocol, f.port, a1.port, a2.port))


def case_qport_forged_qw(h):
    """QuakeWorld: a move needs the client's sequence window (no decoder)."""
    qport_forged(h, 'qw', qw_connect, qw_header, 4242)


def case_qport_forged_q2(h):
    """Quake 2 (34, and 36 with its one-byte qport): the same."""
    qport_forged(h, 'q2', lambda q: b'\xff\xff\xff\xffconnect 34 %d 99 "\\name\\x"\n' % q,
                 lambda seq, q: struct.pack('<IIH', seq, seq, q), 1000)
    qport_forged(h, 'auto', lambda q: b'\xff\xff\xff\xffconnect 36 %d 99 "\\name\\x"\n' % q,
                 lambda seq, q: struct.pack('<IIB', seq | 0x80000000, seq, q & 0xff), 200)


def case_qport_ambiguous_qw(h):
    """Two players of one host with the same qport (two clients started in
    the same second can draw it): a datagram from a third port of the host
    with that qport and a sequence that continues both streams moves
    neither session (which player moved cannot be told, and a wrong guess
    would send one player's game to the other): dropped as a refused move,
    saying why; both players play on from their own ports."""
    srv = h.echo(V4)
    px = h.proxy(args=['-v', '-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', 'qw'])
    dest = (V4, px.ports[0])
    qport = 4242
    a, b = two_players(h, srv, dest, qw_connect, qw_header, qport, qport)
    m = h.client(V4)
    m.send(qw_header(3, qport) + b'm-move', dest)
    why = r'refused: it would continue two sessions of that host with qport %d' % qport
    check(px.wait_for_log(why, 2.0) is not None, 'no "%s" line' % why)
    expect_silence(m, 0.2, 'the third port')
    check(not [d for _, _, d in srv.snapshot() if d.endswith(b'm-move')],
          'the ambiguous datagram reached the server')
    roundtrip(a, dest, qw_header(3, qport) + b'a-move', what='A after it: ')
    roundtrip(b, dest, qw_header(3, qport) + b'b-move', what='B after it: ')
    check(px.count_log(r'client moved from') == 0, 'a session moved')
    st = stop_ok(px)
    route = stats_route(st, 'default')
    check(route['counters']['drops'].get('rebind') == 1,
          'stats: drops.rebind %r, expected 1' % route['counters']['drops'].get('rebind'))
    check(len(route['sessions']) == 2, 'stats: %d sessions, expected 2' % len(route['sessions']))
    check(len(session_for(route, a.port)) == 1 and len(session_for(route, b.port)) == 1,
          'stats: the sessions are not named after A\'s and B\'s own ports')
    print('qport %d on two sessions of one host: a third port\'s datagram moved neither'
          % qport)


def case_workers_spread(h):
    """64 clients through `-w 2`: every client keeps one session (one upstream
    source, every echo back: run_concurrent's checks), the sessions spread
    over both worker loops (--stats "workers"), and session ids are unique."""
    n = 64
    r = run_concurrent(h, V4, 'workers_spread', nclients=n, extra_args=['-w', '2'], spread=True)
    w = r.get('workers')
    check(isinstance(w, list) and len(w) == 2, 'stats: "workers" is %r, expected 2 entries' % (w,))
    shares = [x.get('sessions_total') for x in w]
    check(sum(shares) == n and all(x > 0 for x in shares),
          'sessions per worker %r: expected both loops to take some of the %d' % (shares, n))
    ids = [s.get('id') for s in r.get('sessions') or []]
    check(len(ids) == n and len(set(ids)) == n, 'stats: %d sessions with %d distinct ids'
          % (len(ids), len(set(ids))))
    print('sessions per worker: %s' % shares)


def case_kex_relayed_q2(h):
    """Quake 2 rerelease (KEX): a `connect 2023 ...` (and 2022) through a q2
    and an auto route; the transport below the connect is not public, so
    the datagrams after it go through untouched both ways, the session says
    "Quake 2 rerelease (KEX) protocol N: relayed, not decoded" once in the
    log (its end line) and in --stats ("decode_info"), and nothing counts
    as a decode error."""
    for protocol, route in ((2023, 'q2'), (2022, 'auto')):
        srv = h.echo(V4)
        px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr]
                     + (['-p', route] if route != 'auto' else []))
        dest = (V4, px.ports[0])
        c = h.client(V4)
        roundtrip(c, dest, b'\xff\xff\xff\xffconnect %d 1 "\\name\\kex"\n' % protocol,
                  what='connect: ')
        # What a 34/35/36 decoder would read as a netchan header and bad opcodes.
        for k in range(5):
            roundtrip(c, dest, struct.pack('<II', k + 1, k) + bytes([0xfe, 0xff, 0x20 + k]) * 7,
                      what='kex datagram %d: ' % k)
        st = stop_ok(px)
        sessions = stats_route(st, 'default').get('sessions') or []
        check(len(sessions) == 1, 'stats: %d sessions, expected 1' % len(sessions))
        s = sessions[0]
        want = 'Quake 2 rerelease (KEX) protocol %d: relayed, not decoded' % protocol
        check(s.get('codec') == 'q2', '%s route: codec %r, expected q2' % (route, s.get('codec')))
        check(s.get('decode_info') == want, 'stats: decode_info %r, expected %r'
              % (s.get('decode_info'), want))
        check((s.get('decode') or {}).get('errors') == 0,
              'stats: decode errors %r, expected 0' % ((s.get('decode') or {}).get('errors'),))
        check(s.get('first_error') == '', 'stats: first_error %r' % s.get('first_error'))
        check(px.count_log(re.escape(want)) == 1, 'expected the KEX line once in the log, got %d'
              % px.count_log(re.escape(want)))
        check(px.count_log(r'first decode error') == 0, 'a decode error was logged')
        recs = [d for _, _, d in srv.snapshot()]
        check(len(recs) == 6 and recs[1] == struct.pack('<II', 1, 0) + bytes([0xfe, 0xff, 0x20]) * 7,
              'the server did not get the datagrams untouched')
        print('%d via %s route: relayed untouched, reported as not decoded' % (protocol, route))
def workers_of(st, route):
    """{worker: sessions_total} of a --stats route (its "workers" list)."""
    return {w['worker']: w['sessions_total'] for w in stats_route(st, route).get('workers') or []}


def case_workers_rebind(h):
    """Under `-w 2`, 12 QuakeWorld players, each from a loopback address of
    its own (so that both loops have some), change source port 8 times
    each: every move is followed (DESIGN rule 8), the server sees one
    source per player, and no player's datagrams ever open a second
    session (each client address stays on one loop, whatever its port)."""
    workers_rebind(h, V4, [spread_host(i) for i in range(12)], both_loops=True)


def case_workers_rebind_v6(h):
    """The same over IPv6 (the steering program's other branch): 4 players
    on [::1] change port 8 times each under `-w 4` and keep their session,
    on the loop the steering function names for ::1 (its /64 is zero: loop
    0; that the branch reads the /64 is shown by source_test.py's
    source_prefix_v6, whose two /64s steer to two loops)."""
    require_ipv6()
    workers_rebind(h, V6, [V6] * 4, both_loops=False, nworkers=4)


def steer_worker(host, n):
    """The loop slipgate's steering program (proxy/udp.c) picks for a client
    address among n: the address (IPv6: the two words of its /64 XORed)
    mixed by xor-shift 16, multiply by 0x45d9f3b, xor-shift 16, modulo n."""
    a = socket.inet_pton(socket.AF_INET6 if ':' in host else socket.AF_INET, host)[:8]
    x = 0
    for i in range(0, len(a), 4):
        x ^= int.from_bytes(a[i:i + 4], 'big')
    x ^= x >> 16
    x = (x * 0x45d9f3b) & 0xffffffff
    x ^= x >> 16
    return x % n


def workers_rebind(h, host, hosts, both_loops, nworkers=2):
    srv = h.echo(host)
    # the echo server never completes QuakeWorld's handshake: lift handshake_timeout
    px = h.proxy(args=['-w', str(nworkers), '-l', fmt_addr(host, '$P0'), '-s', srv.addr,
                       '-p', 'qw', '+set', 'handshake_timeout', '60s'])
    dest = (host, px.ports[0])
    nplayers, nmoves = len(hosts), 8
    qports = [3000 + i for i in range(nplayers)]
    cur = [h.client(a) for a in hosts]
    seq = [0] * nplayers
    for i, c in enumerate(cur):
        roundtrip(c, dest, qw_connect(qports[i]), what='player %d connect: ' % i)
    first_ports = [c.port for c in cur]
    for move in range(nmoves + 1):
        for i in range(nplayers):
            if move:
                old = cur[i]
                cur[i] = h.client(hosts[i])
                old.sock.close()
                h.clients.remove(old)
            for _ in range(2):
                seq[i] += 1
                roundtrip(cur[i], dest, qw_header(seq[i], qports[i]) + b'p%d' % i,
                          what='player %d after %d moves: ' % (i, move))
        if move:
            time.sleep(1.05)  # a second move within 1 s of the last is refused (ping-pong)
    by_player = collections.defaultdict(set)
    for _, src, d in srv.snapshot():
        m = re.search(rb'p(\d+)$', d)
        if m:
            by_player[int(m.group(1))].add(src)
    multi = {i: sorted(v) for i, v in by_player.items() if len(v) != 1}
    check(len(by_player) == nplayers and not multi,
          'the server saw %d players; players seen from more than one source: %s'
          % (len(by_player), multi))
    moves = px.count_log(r'client moved from')
    st = stop_ok(px)
    r = stats_route(st, 'default')
    check(r.get('sessions_total') == nplayers, 'stats: sessions_total %r, expected %d (one per '
          'player, every move followed)' % (r.get('sessions_total'), nplayers))
    check(r.get('client_moves') == nplayers * nmoves and moves == nplayers * nmoves,
          'stats: client_moves %r, %d "client moved" lines; expected %d'
          % (r.get('client_moves'), moves, nplayers * nmoves))
    w = workers_of(st, 'default')
    check(len(w) == nworkers and (all(v > 0 for v in w.values()) or not both_loops),
          'sessions per worker %r: expected every loop to hold players' % w)
    # Worker w of N numbers its sessions w+1, w+1+N, ...: each player on the
    # loop its address steers to.
    wrong = ['%s on loop %d, steered to %d' % (x['client'], (x['id'] - 1) % nworkers,
                                               steer_worker(parse_hostport(x['client'])[0],
                                                            nworkers))
             for x in r.get('sessions') or []
             if (x['id'] - 1) % nworkers != steer_worker(parse_hostport(x['client'])[0],
                                                         nworkers)]
    check(not wrong, 'sessions on another loop than their address steers to: %s' % wrong)
    check(drops(r).get('rebind', 0) == 0, 'stats: drops.rebind %r, expected 0'
          % drops(r).get('rebind'))
    print('%d players x %d moves under -w %d (first ports %s...), sessions per worker %s'
          % (nplayers, nmoves, nworkers, first_ports[:3], w))


def case_workers_session_cap(h):
    """Under `-w 2`, max_sessions 5 holds for both loops together: clients
    from 12 loopback addresses (both loops get some) are admitted in their
    order until 5 sessions exist, whichever loop they reach; the others are
    refused.  Once those sessions end (idle_timeout), their slots are free
    again: 5 of the refused clients get in, 2 do not."""
    srv = h.echo(V4)
    px = h.proxy(args=['-w', '2'], config=route_block(
        'wcap', '127.0.0.1:$P0', srv.addr, max_sessions=5, new_sessions_per_source=1000,
        idle_timeout='2s'))
    dest = (V4, px.ports[0])
    clients = [h.client(spread_host(i)) for i in range(12)]
    for i, c in enumerate(clients[:5]):
        roundtrip(c, dest, b'w-%d-a' % i, what='client %d of max_sessions 5: ' % i)
    for i, c in enumerate(clients[5:], 5):
        c.send(b'w-%d-a' % i, dest)
    for i, c in enumerate(clients[5:], 5):
        expect_silence(c, 0.05 if i > 5 else 0.3, 'client %d over max_sessions 5' % i)
    check(len(srv.sources()) == 5, 'the server saw %d sources, expected 5'
          % len(srv.sources()))
    # The five sessions end (idle); five of the seven refused get their slots.
    time.sleep(3.0)
    late = clients[5:]
    answered = []
    for i, c in enumerate(late):  # one after the other: each answered before the next
        c.send(b'late', dest)
        answered.append(c.recv_one(0.5) is not None)
    check(answered == [True] * 5 + [False] * 2, 'the 7 refused clients again, once the first '
          '5 ended: answered %s, expected the first 5' % answered)
    st = stop_ok(px)
    r = stats_route(st, 'wcap')
    check(r.get('sessions_total') == 10, 'stats: sessions_total %r, expected 10'
          % r.get('sessions_total'))
    check(drops(r)['session_limit'] == 7 + 2, 'stats: drops.session_limit %r, expected 9'
          % drops(r)['session_limit'])
    w = workers_of(st, 'wcap')
    check(len(w) == 2 and all(v > 0 for v in w.values()),
          'sessions per worker %r: expected both loops to admit some' % w)
    print('max_sessions 5 over 2 loops: sessions per worker %s' % w)


def case_workers_port_in_use(h):
    """A second slipgate with worker loops on the address of a first one
    (both set SO_REUSEPORT, which would let them share it) fails with
    "address in use", as with one loop, and the first keeps every client."""
    srv = h.echo(V4)
    px = h.proxy(args=['-w', '2', '-l', '127.0.0.1:$P0', '-s', srv.addr])
    P = px.ports[0]
    r = h.run(['-w', '2', '-l', '127.0.0.1:%d' % P, '-s', srv.addr], timeout=10.0)
    err = r.stderr.decode(errors='replace')
    check(r.returncode == 1 and re.search(r'cannot listen on 127\.0\.0\.1:%d: .*in use' % P, err),
          'a second slipgate -w 2 on port %d: exit %d, expected 1 with "in use":\n%s'
          % (P, r.returncode, err))
    dest = (V4, P)
    for i in range(8):
        roundtrip(h.client(spread_host(i)), dest, b'still mine %d' % i,
                  what='client %d of the first slipgate: ' % i)
    stop_ok(px)


def case_workers_default(h):
    """Without `workers`, -w or SLIPGATE_WORKERS, slipgate runs one loop per
    CPU it may use, at most 8 (--stats "workers" lists them), `http` too
    (served from worker 0: /metrics counts every loop's sessions)."""
    os.environ.pop('SLIPGATE_WORKERS', None)  # the children inherit it
    cpus = min(len(os.sched_getaffinity(0)), 8)
    srv = h.echo(V4)
    for with_http in (False, True):
        conf = ('http 127.0.0.1:$P1\n' if with_http else '') + route_block(
            'dflt', '127.0.0.1:$P0', srv.addr, new_sessions_per_source=1000)
        px = h.proxy(config=conf)
        for i in range(4):
            roundtrip(h.client(spread_host(i)), (V4, px.ports[0]), b'default %d' % i)
        if with_http:
            body = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % px.ports[1],
                                          timeout=5).read()
            check(b'slipgate_sessions_total{route="dflt"} 4' in body,
                  '/metrics does not count the 4 sessions:\n%s' % body[:400])
        line = px.wait_for_log(r'(\d+) worker loops \(one per CPU, the default\)', 0.5)
        st = stop_ok(px)
        w = workers_of(st, 'dflt')
        if cpus > 1:
            check(line is not None and int(line[1].group(1)) == cpus,
                  'no "%d worker loops (one per CPU, the default)" line' % cpus)
            check(len(w) == cpus, 'stats: "workers" %r, expected %d loops' % (w, cpus))
        else:
            check(line is None and not w, 'one CPU: expected one loop, got %r' % (w,))
    print('%d CPU(s): %s loops by default, with http too' % (cpus, len(w) or 1))

def case_exit_log_complete(h):
    """The harness's wait_exit() returns once the log is complete: slipgate
    refusing a bad config writes one line and exits at once, and the exit
    can be seen before the stderr reader thread has read that line (then a
    test reading the log right after the exit sees it empty; about 1 start
    in 20 on a loaded machine).  Many starts, each one checked."""
    bad = 'route r {\n    listen 127.0.0.1:$P0\n    server 127.0.0.1:9\n    no_such_directive 1\n}\n'
    t0 = time.monotonic()
    n = 0
    for n in range(1, 151):  # at most 150 starts and about 20 s
        px = Proxy(h.exe, h.dir, 'bad%d' % n)
        h.proxies.append(px)
        px.start(bad, ready=False, stats=False)
        rc = px.wait_exit(10)
        log = px.log_text()
        check(rc == 1 and re.search(r"unknown directive 'no_such_directive'", log),
              'start %d: exit %r, log right after the exit: %r' % (n, rc, log))
        px.kill()
        if time.monotonic() - t0 > 20:
            break
    print('%d starts refused, each one\'s error line read by the time wait_exit returned'
          ' (%.1f s)' % (n, time.monotonic() - t0))


# ---- port 0: listeners take their ports from the kernel --------------------

def udp_sockets_on(port):
    """How many UDP sockets on this host are bound to local `port`."""
    n = 0
    for name in ('/proc/net/udp', '/proc/net/udp6'):
        try:
            with open(name) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 1 and int(fields[1].rsplit(':', 1)[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


def port0_start(h, host, workers=1, extra=''):
    """slipgate with `listen HOST:0` (no $P: the test picks no port) and a
    ports_file; returns the proxy and the file's {name: (host, port)}."""
    srv = h.echo(V6 if ':' in host else V4)
    px = h.proxy(config='workers %d\n' % workers + extra
                 + route_block('zero', fmt_addr(host, 0), srv.addr),
                 args=['+set', 'ports_file', os.path.join(h.dir, 'ports')])
    path = os.path.join(h.dir, 'ports')
    deadline = time.monotonic() + 5.0
    while not os.path.exists(path):
        check(time.monotonic() < deadline, 'no ports_file within 5 s of the listening line')
        check(px.alive(), 'slipgate exited: %s' % px.log_text()[-2000:])
        time.sleep(0.01)
    with open(path) as f:
        text = f.read()
    listed = {}
    for line in text.splitlines():
        name, addr = line.split()
        listed[name] = parse_hostport(addr)
    return srv, px, listed, text


def port0_check(h, host, workers):
    srv, px, listed, text = port0_start(h, host, workers)
    check(list(listed) == ['zero'], 'ports_file %r, expected one line for route zero' % text)
    lhost, port = listed['zero']
    check(lhost == host and 0 < port < 65536, 'ports_file says %r for %s:0' % (text, host))
    check(px.count_log(r'listening on %s, ' % re.escape(fmt_addr(host, port))) == 1,
          'the listening line does not name the port of the ports_file (%d): %s'
          % (port, px.log_text()[-2000:]))
    n = udp_sockets_on(port)
    check(n == workers, '%d sockets on port %d, expected %d (one per worker loop, all on '
          'the port the kernel gave the first)' % (n, port, workers))
    clients = [h.client(V6 if ':' in host else V4) for _ in range(8)]
    for k, c in enumerate(clients):
        roundtrip(c, (host, port), b'zero-%d' % k)
    st = stop_ok(px)
    r = stats_route(st, 'zero')
    check(r.get('sessions_total') == len(clients), 'stats: sessions_total %r, expected %d'
          % (r.get('sessions_total'), len(clients)))
    print('port 0 -> %s:%d, %d socket(s)' % (host, port, n))


def case_port0_v4(h):
    port0_check(h, V4, 1)


def case_port0_v6(h):
    require_ipv6()
    port0_check(h, V6, 1)


def case_port0_workers(h):
    port0_check(h, V4, 2)


def case_port0_http(h):
    """`http 127.0.0.1:0`: the ports_file's http line is where the page answers."""
    srv, px, listed, text = port0_start(h, V4, 1, extra='http 127.0.0.1:0\n')
    check(sorted(listed) == ['http', 'zero'], 'ports_file %r: expected zero and http' % text)
    hhost, hport = listed['http']
    check(px.count_log(r'serving on http://127\.0\.0\.1:%d/' % hport) == 1,
          'the http line does not name port %d: %s' % (hport, px.log_text()[-2000:]))
    with socket.create_connection((hhost, hport), timeout=2.0) as s:
        s.sendall(b'GET /api/routes HTTP/1.0\r\nHost: x\r\n\r\n')
        body = b''
        while len(body) < 1 << 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    check(body.startswith(b'HTTP/1.') and b'zero' in body,
          'GET /api/routes on the listed http port: %r' % body[:200])
    stop_ok(px)


def case_port0_reload(h):
    """A reload that adds a port-0 route rewrites the ports_file (whole) with it,
    and keeps the first route's port."""
    srv, px, listed, text = port0_start(h, V4, 2)
    first = listed['zero'][1]
    path = os.path.join(h.dir, 'ports')
    px.write_config('workers 2\n' + route_block('zero', '127.0.0.1:0', srv.addr)
                    + route_block('more', '[::1]:0' if ipv6_unavailable_reason() is None
                                  else '127.0.0.1:0', srv.addr))
    before = os.stat(path).st_ino
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'configuration reloaded', 5.0, start=mark) is not None,
          'no "configuration reloaded" within 5 s: %s' % px.log_text()[-2000:])
    check(os.stat(path).st_ino != before, 'the ports_file was not replaced on reload')
    with open(path) as f:
        lines = f.read().splitlines()
    got = dict((ln.split()[0], parse_hostport(ln.split()[1])) for ln in lines)
    check(sorted(got) == ['more', 'zero'], 'ports_file after reload: %r' % lines)
    check(got['zero'][1] == first, 'route zero moved from port %d to %d on reload'
          % (first, got['zero'][1]))
    mport = got['more'][1]
    check(mport != 0 and udp_sockets_on(mport) == 2,
          'route more: port %d, %d sockets (expected 2, one per loop)'
          % (mport, udp_sockets_on(mport)))
    roundtrip(h.client(V6 if ':' in got['more'][0] else V4), got['more'], b'more')
    stop_ok(px)


# Run in a network namespace of its own (unshare -rn) whose ephemeral range is
# two ports: 40000 held by an SO_REUSEPORT socket of this user, 40001 free.
# A bind(0) with SO_REUSEPORT may be given either (the kernel lets it join a
# group of the same user), so slipgate with two loops is started 20 times
# (by chance alone, port 40001 all 20 times: one in a million).
PORT0_NOT_SHARED = r"""
import os, socket, subprocess, sys, time
exe, d = sys.argv[1], sys.argv[2]
with open('/proc/sys/net/ipv4/ip_local_port_range', 'w') as f:
    f.write('40000 40001')
shared = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
shared.bind(('127.0.0.1', 40000))
ports, conf = os.path.join(d, 'ports'), os.path.join(d, 'ns.conf')
with open(conf, 'w') as f:
    f.write('workers 2\nports_file %s\nroute zero {\n    listen 127.0.0.1:0\n'
            '    server 127.0.0.1:27960\n}\n' % ports)
for run in range(20):
    if os.path.exists(ports):
        os.unlink(ports)
    with open(os.path.join(d, 'ns%d.log' % run), 'w') as log:
        p = subprocess.Popen([exe, '-c', conf], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    while p.poll() is None and not os.path.exists(ports) and time.monotonic() < deadline:
        time.sleep(0.01)
    listed = 'none'
    if os.path.exists(ports):
        with open(ports) as f:
            listed = f.read().split()[1]
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    print('run %d: %s, exit %d' % (run, listed, p.returncode))
"""


def case_port0_not_shared(h):
    """With worker loops, a port-0 route's sockets are bound with SO_REUSEPORT
    on a port nobody holds: never one where another process of this user has
    SO_REUSEPORT sockets (a bind(0) with SO_REUSEPORT may be given such a
    port and join their group, which then shares the route's clients).  In a
    network namespace whose ephemeral range is one such port and one free
    one, every start takes the free one."""
    unshare = shutil.which('unshare')
    check(unshare is not None, 'needs unshare (util-linux) for a network namespace of its own')
    r = subprocess.run([unshare, '-rn', sys.executable, '-c', PORT0_NOT_SHARED,
                        os.environ['SLIPGATE'], h.dir], capture_output=True, timeout=60)
    out = r.stdout.decode(errors='replace')
    check(r.returncode == 0, 'unshare -rn (a user and network namespace): exit %d, %s'
          % (r.returncode, r.stderr.decode(errors='replace')[-1000:]))
    runs = re.findall(r'run (\d+): (\S+), exit (-?\d+)', out)
    check(len(runs) == 20, 'expected 20 starts, got:\n%s' % out)
    shared = [n for n, addr, _ in runs if addr.endswith(':40000')]
    check(not shared, 'starts %s took port 40000, where this user\'s SO_REUSEPORT socket is '
          '(the loops joined its group):\n%s' % (shared, out))
    bad = [(n, addr, rc) for n, addr, rc in runs if addr != '127.0.0.1:40001' or rc != '0']
    check(not bad, 'every start should listen on the free port 40001 and exit 0: %s\n%s'
          % (bad, out))
    print('20 starts in a namespace with one free port: all on it, none joined the shared one')


def case_no_bind_close_ports(h):
    """No test hands slipgate a listen port picked by bind-and-close: every
    `$Pk` in a listen line, `-l` or `http` of the tests becomes port 0
    (harness.port0_slots), and no test file calls free_port() for a
    running proxy's listener."""
    import harness
    check(harness.port0_slots('route a {\n  listen 127.0.0.1:$P0\n  filter x {\n  }\n'
                              '  listen_x 1\n}\nhttp 127.0.0.1:$P1\n', ['-l', '[::]:$P2'])
          == {0: 'a', 1: 'http', 2: 'default'}, 'port0_slots: %r' % harness.port0_slots(
              'route a {\n  listen 127.0.0.1:$P0\n}\nhttp 127.0.0.1:$P1\n', []))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = []
    for root, _, files in os.walk(tests):
        for name in files:
            if not name.endswith('.py') or name == 'harness.py':
                continue
            with open(os.path.join(root, name)) as f:
                for n, line in enumerate(f, 1):
                    if 'free_port()' in line and 'proxy(' in line and "'free_port" not in line:
                        bad.append('%s:%d' % (os.path.relpath(os.path.join(root, name), tests), n))
    check(not bad, 'a proxy started on a bind-and-close port: %s' % bad)


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
