"""Loopback tests of the 'pcap' filter through the real slipgate binary,
read back with tshark (installed by scripts/deps.sh --test; a missing
tshark fails the case with a message saying so).

Two routes in one proxy, each writing its own file (%route% in the name):
an IPv4 client relayed to an IPv6 server, and an IPv6 client relayed to an
IPv4 server, so each file holds IPv4 and IPv6 packets:

    pcap      format pcap (libpcap's writer)
    pcapng    format pcapng (slipgate's own writer; per-packet comments)

Checked: tshark reads the file without complaint; the packet count equals
(c2s_packets + s2c_packets) x 2 legs from slipgate's --stats; every packet
has the addresses and ports of its leg, good IP and UDP checksums, and
each payload appears on both of its legs.  Only 127.0.0.1 and ::1 are used.
"""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import V4, V6, Fail, check, pump  # noqa: E402

TAG = b'ECHO'

CONFIG = '''
route four {
    listen 127.0.0.1:$P0
    server %(server6)s
    filter pcap {
        file "%(dir)s/cap-%%route%%.%(fmt)s"
        format %(fmt)s
    }
}
route six {
    listen [::1]:$P1
    server %(server4)s
    filter pcap {
        file "%(dir)s/cap-%%route%%.%(fmt)s"
        format %(fmt)s
    }
}
'''

FIELDS = ['ip.src', 'ip.dst', 'ipv6.src', 'ipv6.dst', 'udp.srcport', 'udp.dstport',
          'udp.payload', 'udp.checksum.status', 'ip.checksum.status', 'frame.comment']


def tshark(path):
    exe = shutil.which('tshark')
    check(exe is not None, 'tshark is not installed: run scripts/deps.sh --test '
          '(apt-get install tshark) to read the captures back')
    argv = [exe, '-n', '-r', path, '-o', 'udp.check_checksum:TRUE', '-o',
            'ip.check_checksum:TRUE', '-T', 'fields', '-E', 'separator=|', '-E', 'occurrence=f']
    for f in FIELDS:
        argv += ['-e', f]
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise Fail('tshark -r %s did not finish within 60 s' % path)
    err = p.stderr.decode('utf-8', 'replace')
    err = '\n'.join(l for l in err.splitlines() if 'Running as user' not in l)
    check(p.returncode == 0 and not err.strip(), 'tshark -r %s: exit %d: %s'
          % (path, p.returncode, err[-2000:]))
    rows = []
    for line in p.stdout.decode().splitlines():
        vals = line.split('|')
        check(len(vals) == len(FIELDS), 'tshark line %r' % line)
        rows.append(dict(zip(FIELDS, vals)))
    return rows


def route_stats(st, name):
    for r in st.get('routes', []):
        if r.get('name') == name:
            return r
    raise Fail('stats: no route %r' % name)


def check_file(h, path, route, client, listen, server, upstream_port, ng):
    rows = tshark(path)
    cnt = route['counters']
    want = 2 * (cnt['c2s_packets'] + cnt['s2c_packets'])
    print('%s: tshark reads %d packets; --stats c2s %d + s2c %d, x 2 legs = %d'
          % (os.path.basename(path), len(rows), cnt['c2s_packets'], cnt['s2c_packets'], want))
    check(len(rows) == want, '%s: %d packets, expected %d' % (path, len(rows), want))

    def ends(r):
        src = r['ip.src'] or r['ipv6.src']
        dst = r['ip.dst'] or r['ipv6.dst']
        return (src, int(r['udp.srcport'])), (dst, int(r['udp.dstport']))

    payloads = {}
    for i, r in enumerate(rows):
        check(r['udp.checksum.status'] == '1', 'packet %d: UDP checksum status %r'
              % (i + 1, r['udp.checksum.status']))
        if r['ip.src']:
            check(r['ip.checksum.status'] == '1', 'packet %d: IPv4 checksum status %r'
                  % (i + 1, r['ip.checksum.status']))
        a, b = ends(r)
        if (a, b) == (client, listen):
            leg = 'client->proxy'
        elif (a, b) == (listen, client):
            leg = 'proxy->client'
        elif b == server and a[1] == upstream_port:
            leg = 'proxy->server'
        elif a == server and b[1] == upstream_port:
            leg = 'server->proxy'
        else:
            raise Fail('packet %d: %s -> %s belongs to no leg (client %s, listen %s, server %s, '
                       'upstream port %d)' % (i + 1, a, b, client, listen, server, upstream_port))
        if ng:
            check(r['frame.comment'].endswith(leg), 'packet %d: comment %r, leg %s'
                  % (i + 1, r['frame.comment'], leg))
        payloads.setdefault(bytes.fromhex(r['udp.payload']), []).append(leg)
    for p, seen in payloads.items():
        want = (['client->proxy', 'proxy->server'] if not p.startswith(TAG)
                else ['server->proxy', 'proxy->client'])
        check(seen == want, 'payload %r seen on %s, expected %s' % (p[:20], seen, want))


def run(h, fmt):
    srv4 = h.echo(V4, TAG)
    srv6 = h.echo(V6, TAG)
    px = h.proxy(config=CONFIG % {'server6': srv6.addr, 'server4': srv4.addr, 'dir': h.dir,
                                  'fmt': fmt}, routes=2)
    c4 = h.client(V4)
    c6 = h.client(V6)
    flows = []
    for i in range(60):
        flows.append((c4, b'four-%03d' % i + b'.' * (i * 7)))
    got4 = pump(flows, (V4, px.ports[0]), TAG)
    flows = [(c6, b'six-%03d' % i + b':' * (i * 5)) for i in range(40)]
    got6 = pump(flows, (V6, px.ports[1]), TAG)
    check(len(got4[c4]) == 60 and len(got6[c6]) == 40, 'echoes: %d of 60, %d of 40'
          % (len(got4[c4]), len(got6[c6])))
    check(px.stop() == 0, 'slipgate did not exit cleanly')
    st = px.stats()
    for name, client, listen, srv in (('four', c4, (V4, px.ports[0]), srv6),
                                      ('six', c6, (V6, px.ports[1]), srv4)):
        route = route_stats(st, name)
        check(len(route['sessions']) == 1, 'route %s: %d sessions' % (name,
                                                                      len(route['sessions'])))
        up = route['sessions'][0]['upstream_port']
        check(px.count_log(r'\[%s\] \[s\d+\] pcap: capturing into %s/cap-%s\.%s'
                           % (name, h.dir, name, fmt)) == 1, 'no "capturing into" line')
        check_file(h, os.path.join(h.dir, 'cap-%s.%s' % (name, fmt)), route,
                   (client.host, client.port), listen, (srv.host, srv.port), up,
                   fmt == 'pcapng')


def pcap(h):
    harness.require_ipv6()
    run(h, 'pcap')


def pcapng(h):
    harness.require_ipv6()
    run(h, 'pcapng')


SIGNED_CONFIG = '''
sign_key %(key)s
sign_interval 1s
route plain {
    listen 127.0.0.1:$P0
    server %(server)s
    filter pcap {
        file "%(dir)s/fixed.pcap"
    }
}
route ng {
    listen 127.0.0.1:$P1
    server %(server)s
    filter pcap {
        file "%(dir)s/cap-%%route%%.pcapng"
        format pcapng
    }
}
'''


def signed(h):
    """`sign_key` at the top level: both captures (a file opened at start-up,
    made again signed at the first datagram, and one opened then) get a
    .sig with a checkpoint a second while traffic flows over ~3 s, and
    `slipgate demo verify` says "authentic, whole"; tshark still reads
    them, every packet there."""
    key = os.path.join(h.dir, 'league')
    r = subprocess.run([h.exe, 'keygen', '--out', key], capture_output=True, timeout=30)
    check(r.returncode == 0, 'keygen failed: %r' % r.stderr)
    srv = h.echo(V4, TAG)
    px = h.proxy(config=SIGNED_CONFIG % {'server': srv.addr, 'dir': h.dir, 'key': key}, routes=2)
    c1 = h.client(V4)
    c2 = h.client(V4)
    for rnd in range(6):
        got1 = pump([(c1, b'plain-%d-%03d' % (rnd, i)) for i in range(10)], (V4, px.ports[0]), TAG)
        got2 = pump([(c2, b'ng-%d-%03d' % (rnd, i)) for i in range(10)], (V4, px.ports[1]), TAG)
        check(len(got1[c1]) == 10 and len(got2[c2]) == 10, 'echoes lost')
        time.sleep(0.5)
    check(px.stop() == 0, 'slipgate did not exit cleanly')
    st = px.stats()
    for name, path, client, port in (('plain', 'fixed.pcap', c1, px.ports[0]),
                                      ('ng', 'cap-ng.pcapng', c2, px.ports[1])):
        path = os.path.join(h.dir, path)
        with open(path + '.sig') as f:
            sig = f.read()
        cps = sig.count('\ncp ')
        check(cps >= 3 and 'meta kind pcap\n' in sig and 'meta route %s\n' % name in sig,
              '%s.sig: %d checkpoints over ~3 s of traffic (expected one a second and the '
              'final one):\n%s' % (path, cps, sig))
        v = subprocess.run([h.exe, 'demo', 'verify', path, '--keyfile', key + '.pub'],
                           capture_output=True, timeout=30)
        line = v.stdout.decode().strip()
        check(v.returncode == 0 and ': authentic, whole (%d bytes' % os.path.getsize(path) in line,
              'verify %s: exit %d: %s %s' % (path, v.returncode, line, v.stderr))
        print(line + ', %d checkpoints' % cps)
        route = route_stats(st, name)
        up = route['sessions'][0]['upstream_port']
        check_file(h, path, route, (client.host, client.port), (V4, port), (srv.host, srv.port),
                   up, name == 'ng')


CASES = {
    'pcap': pcap,
    'pcapng': pcapng,
    'signed': signed,
}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
