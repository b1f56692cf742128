#!/usr/bin/env python3
"""Loopback tests of `upstream_source`: each new session's server-side
socket binds the route's next address, so the server sees its players at
different addresses (the pool turns; addresses of the other family are
skipped; a reload changes it for new sessions; bad addresses are refused
with file, line and column).

Run one case:  SLIPGATE=build/proxy/slipgate tests/loopback/source_test.py CASE
"""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import V4, V6, check, main, parse_hostport, require_ipv6  # noqa: E402
from relay_test import roundtrip, route_block, stats_route, steer_worker, stop_ok  # noqa: E402


def read(path):
    with open(path) as f:
        return f.read()


def server_hosts(srv, clients):
    """The source address the server saw for each client's payload, in order."""
    out = []
    for c in clients:
        tag = ('from %d' % c.addr[1]).encode()
        hosts = {src[0] for _, src, d in srv.snapshot() if d == tag}
        check(len(hosts) == 1, 'client %d: the server saw it from %r' % (c.addr[1], hosts))
        out.append(hosts.pop())
    return out


def sessions(h, host, dest, n):
    clients = []
    for _ in range(n):
        c = h.client(host)
        roundtrip(c, dest, ('from %d' % c.addr[1]).encode())
        clients.append(c)
    return clients


def case_upstream_source_v4(h):
    """Five sessions to an IPv4 server through `upstream_source 127.0.0.2
    ::1 127.0.0.3`: the server sees them from .2, .3, .2, .3, .2 (::1, not
    the server's family, is skipped), every echo comes back; after a reload
    to `upstream_source 127.0.0.4` a new session comes from .4 while a live
    one keeps its address; without the directive, from 127.0.0.1."""
    srv = h.echo(V4)
    conf = route_block('src', '127.0.0.1:$P0', srv.addr,
                       upstream_source='127.0.0.2 ::1 127.0.0.3')
    px = h.proxy(config=conf)
    dest = (V4, px.ports[0])
    clients = sessions(h, V4, dest, 5)
    got = server_hosts(srv, clients)
    want = ['127.0.0.2', '127.0.0.3', '127.0.0.2', '127.0.0.3', '127.0.0.2']
    check(got == want, 'sources %r, not %r' % (got, want))
    # A reload: new sessions take the new pool, live ones keep theirs.
    px.write_config(read(px.config_path).replace('upstream_source 127.0.0.2 ::1 127.0.0.3',
                                             'upstream_source 127.0.0.4'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'upstream_source reloaded: 1 address', 3.0, start=mark),
          'no "upstream_source reloaded" after SIGHUP')
    new = sessions(h, V4, dest, 1)
    check(server_hosts(srv, new) == ['127.0.0.4'], 'after the reload: %r'
          % server_hosts(srv, new))
    roundtrip(clients[0], dest, b'still here')
    check({src[0] for _, src, d in srv.snapshot() if d == b'still here'} == {'127.0.0.2'},
          'a live session changed its source at the reload')
    stop_ok(px)
    # Without the directive: the system's choice, 127.0.0.1.
    px2 = h.proxy(config=route_block('plain', '127.0.0.1:$P0', srv.addr), name='plain')
    plain = sessions(h, V4, (V4, px2.ports[0]), 2)
    check(server_hosts(srv, plain) == ['127.0.0.1'] * 2, 'without upstream_source: %r'
          % server_hosts(srv, plain))
    print('sources %s; after reload 127.0.0.4; without it 127.0.0.1' % got)


def case_upstream_source_v6(h):
    """An IPv6 server through `upstream_source 127.0.0.2 ::1`: every
    session binds ::1 (the IPv4 address is skipped), echoes come back."""
    require_ipv6()
    srv = h.echo(V6)
    conf = route_block('src6', '[::1]:$P0', srv.addr, upstream_source='127.0.0.2 ::1')
    px = h.proxy(config=conf)
    clients = sessions(h, V6, (V6, px.ports[0]), 3)
    got = server_hosts(srv, clients)
    check(got == ['::1'] * 3, 'sources %r, not ::1' % got)
    stop_ok(px)
    print('IPv6 sources %s' % got)


def in_netns(case):
    """Run `case` again in a user and network namespace of its own (unshare
    -rn), with lo up; True here when this is that run."""
    if os.environ.get('SG_IN_NETNS') == '1':
        subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True, timeout=5)
        return True
    unshare, ip = shutil.which('unshare'), shutil.which('ip')
    check(unshare and ip, 'needs unshare and ip (util-linux, iproute2)')
    env = dict(os.environ, SG_IN_NETNS='1')
    r = subprocess.run([unshare, '-rn', sys.executable, os.path.abspath(__file__), case],
                       env=env, timeout=50)
    check(r.returncode == 0, 'the case in its network namespace failed (%d)' % r.returncode)
    return False


def case_upstream_source_one_port(h):
    """Sockets bound to given addresses may be given one port by the kernel:
    in a private network namespace (unshare -rn) whose ephemeral range is two
    ports, three sessions through `upstream_source 127.0.0.2 127.0.0.3` would
    hold both ports on .2 and one of them on .3 too.  Each port stays one
    socket: the sessions the server sees come from distinct ports (the .3
    one takes the port .2 does not hold; a third, with no port left, is
    refused), every echo of those comes back."""
    if not in_netns('upstream_source_one_port'):
        return
    srv = h.echo(V4)
    conf = route_block('one', '127.0.0.1:$P0', srv.addr, upstream_source='127.0.0.2 127.0.0.3')
    px = h.proxy(config=conf)
    dest = (V4, px.ports[0])
    clients = [h.client(V4) for _ in range(3)]
    with open('/proc/sys/net/ipv4/ip_local_port_range', 'w') as f:
        f.write('40100 40101')  # free: nothing here holds them yet
    for c in clients[:2]:
        roundtrip(c, dest, ('from %d' % c.addr[1]).encode())
    clients[2].send(('from %d' % clients[2].addr[1]).encode(), dest)
    for _ in range(40):  # its echo, or its refusal logged (2 s at most)
        if clients[2].recv_one(0.05) or px.count_log(r'cannot open a socket towards'):
            break
    seen = {}
    for _, src, d in srv.snapshot():
        seen.setdefault(d, set()).add(src)
    srcs = sorted(a for v in seen.values() for a in v)
    ports = [p for _, p in srcs]
    check(len(srcs) >= 2, 'the server saw %r' % srcs)
    check(len(set(ports)) == len(ports), 'two upstream sockets share a port: %r' % srcs)
    stop_ok(px)
    print('sources %r' % srcs)


def case_upstream_source_bad(h):
    """Refused with FILE:LINE:COL and why: a port, a name, an address this
    host does not have, no address at all; a reload to such a file keeps the
    old configuration."""
    path = h.path('bad.conf')
    for value, why in [('127.0.0.2:27960', r"without a port, not '127\.0\.0\.2:27960'"),
                       ('localhost', r"without a port, not 'localhost'"),
                       ('127.0.0.2 192.0.2.1', r"cannot bind 192\.0\.2\.1 here"),
                       ('', r"takes one or more local addresses")]:
        with open(path, 'w') as f:
            f.write(route_block('x', '127.0.0.1:1', '127.0.0.1:2', upstream_source=value))
        r = h.run(['--check-config', '-c', path])
        err = r.stderr.decode(errors='replace')
        col = 5 if not value else 21 + (value.rfind(' ') + 1)  # the directive, or the bad value
        check(r.returncode != 0, '--check-config accepted upstream_source %r' % value)
        check(('%s:4:%d: error:' % (path, col)) in err, 'no "%s:4:%d:" for %r in:\n%s'
              % (path, col, value, err))
        check(re.search(why, err), 'no %r for %r in:\n%s' % (why, value, err))
    srv = h.echo(V4)
    px = h.proxy(config=route_block('src', '127.0.0.1:$P0', srv.addr,
                                    upstream_source='127.0.0.2'))
    px.write_config(read(px.config_path).replace('upstream_source 127.0.0.2',
                                             'upstream_source 192.0.2.1'))
    mark = px.log_mark()
    px.send_signal(signal.SIGHUP)
    check(px.wait_for_log(r'reload failed; the old configuration stays', 3.0, start=mark),
          'the bad upstream_source did not refuse the reload')
    c = sessions(h, V4, (V4, px.ports[0]), 1)
    check(server_hosts(srv, c) == ['127.0.0.2'], 'after the refused reload: %r'
          % server_hosts(srv, c))
    stop_ok(px)
    print('bad addresses refused by file, line and column; the reload kept 127.0.0.2')


V6_NET1 = ['2001:db8:1:1::%x' % i for i in range(1, 7)]  # one /64
V6_NET2 = '2001:db8:1:2::1'                              # the next /64


def first_contacts(h, hosts, dest):
    """One new client from each host sends one datagram; the hosts answered."""
    clients = [h.client(a) for a in hosts]
    for c in clients:
        c.send(('from %s' % c.host).encode(), dest)
    return [c.host for c in clients if c.recv_one(0.5) is not None]


def case_source_prefix_v6(h):
    """One IPv6 host commonly holds a whole /64: the per-source limit counts
    an IPv6 source by its /64.  In a network namespace with six addresses
    of one /64 and one of the next on lo, `new_sessions_per_source 2` lets
    two of the six open a session in the same second (on two worker loops
    together: the loops steer a /64 to one of them; each address to its own
    loop would let four in), and the other /64 its own, each /64 on the
    loop the steering program names for it (the two /64s on two loops);
    with `source_prefix_v6 128` all six open theirs."""
    if not in_netns('source_prefix_v6'):
        return
    for a in V6_NET1 + [V6_NET2]:
        subprocess.run(['ip', '-6', 'addr', 'add', a + '/128', 'dev', 'lo', 'nodad'],
                       check=True, timeout=5)
    srv = h.echo(V6)
    px = h.proxy(config='workers 2\n' + route_block('p64', '[::1]:$P0', srv.addr,
                                                     new_sessions_per_source=2, max_sessions=100))
    dest = (V6, px.ports[0])
    got = first_contacts(h, V6_NET1, dest)
    check(len(got) == 2, 'one /64, 2 new sessions a second: %d of 6 opened (%r)'
          % (len(got), got))
    other = first_contacts(h, [V6_NET2], dest)
    check(other == [V6_NET2], 'the next /64 was refused too: %r' % other)
    st = stop_ok(px)
    r = stats_route(st, 'p64')
    rl = r['counters']['drops']['rate_limit']
    check(rl == 4, 'drops.rate_limit %r, expected 4' % rl)
    # Worker w of 2 numbers its sessions w+1, w+3, ...
    loops = {}
    for x in r.get('sessions') or []:
        a = parse_hostport(x['client'])[0]
        loops[a] = ((x['id'] - 1) % 2, steer_worker(a, 2))
    check(len(loops) == 3 and all(on == want for on, want in loops.values())
          and len({want for _, want in loops.values()}) == 2,
          'sessions by address, (loop, steered to): %r' % loops)
    px2 = h.proxy(config=route_block('p128', '[::1]:$P0', srv.addr, new_sessions_per_source=2,
                                     max_sessions=100, source_prefix_v6=128), name='p128')
    each = first_contacts(h, V6_NET1, (V6, px2.ports[0]))
    check(len(each) == 6, 'source_prefix_v6 128: %d of 6 addresses opened a session (%r)'
          % (len(each), each))
    stop_ok(px2)
    print('one /64: 2 of 6 in a second, the next /64 its own; with /128: 6 of 6')


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
