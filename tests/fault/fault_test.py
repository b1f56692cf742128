#!/usr/bin/env python3
"""Load and fault tests: the real slipgate binary under floods of malformed
datagrams, a long run at game rates, servers that die or come late, clients
that vanish, a full disk under the demo recorder, and real Quake 3 captures
replayed through it from both ends.

    SLIPGATE=build/proxy/slipgate SG_TESTDATA=../shared/testdata \\
        python3 tests/fault/fault_test.py CASE

Exit 0 pass, 1 fail (saying what differed), 77 skip.  One meson test per
case (fault@CASE, tests/fault/meson.build).  Python 3 standard library only;
the loopback harness (../loopback/harness.py) runs the proxy.  Random cases
print their seed; SLIPGATE_TEST_SEED repeats one.  SG_SOAK_SECONDS (default
20) sets the soaks' length, SG_FLOOD_SECONDS / SG_FLOOD_DATAGRAMS (10 /
20000) the malformed floods'.

Everything talks only to 127.0.0.1.  Every loop is bounded in count and
time; every process is started under a watchdog and killed by PID in a
finally block; temporary files live in the harness's temporary directory.

Replays (replay_*, disk_full_*, malformed_q3, soak_q3): the test plays both
ends of a capture (q3cap.py reads ../shared/testdata/q3/sessions/*/capture.pcap).
Client datagrams go from one socket per capture client endpoint to
slipgate's listen port; server datagrams go from a scripted server socket
(the route's server) to the upstream port of that client's session (read
from slipgate's "session start ... upstream_port=" line), in capture order.
The status tool's getinfo/getstatus queries from other ports are replayed
too, each from its own socket, so they are sessions of their own as in the
capture (soak_q3 leaves them out: it soaks game traffic).  Lock-step: each
datagram must arrive at the other end, byte-identical, before the next one
goes, so slipgate sees the capture's order (the Quake 3 keys depend on it)
whatever the load.  Under `reencode always` slipgate holds the pieces of a
fragmented message until the last one and then sends the rebuilt pieces:
the replay expects them all after the last piece.  With the original peers
replayed, every rebuilt datagram must equal the captured one.
replay_ioq68_repeat replays one capture 20 times and, at each server
datagram the client answers right away, sends the two together while
slipgate is stopped (SIGSTOP/SIGCONT by PID; Replay._cross), so that both
wait in the kernel at once: the decoding must not depend on which socket
the poll reports first.

Malformed floods: 24 bad sessions send 20000 datagrams in about 8 s: random
ones (0..1500 bytes, 1% up to 16 KB), mutated real ones (bit flips,
truncation, splicing, damaged netchan and fragment headers) and real
getchallenge/connect/getinfo/getstatus; the server answers them with
mutated server datagrams.  8 of them ("deep") replay a real session both
ways with 3..60% of the datagrams mutated, so the decoder gets past the
handshake before it gets garbage.  The good sessions on the same route:
under -p q3 (malformed_q3) every session is decoded, so good traffic must
be real Quake 3 to mean anything: the three captures are replayed (paced
over the flood) and must come through byte-identical with zero decode
errors and every rebuilt message identical; two GOOD echo sessions of
arbitrary bytes show that what the codec cannot decode is relayed
untouched.  Under protocol auto (malformed_relay) six echo sessions and one
replay.  A good datagram is sent again only when it went missing *and* the
kernel counted a drop in a full socket buffer on its path (the host could
not keep up; slipgate never saw it); that is reported, and capped.

Memory: VmRSS is sampled from /proc.  The plain relay soak must keep VmRSS
flat (max of the last third <= max of the first third x 1.1 + 2 MB).  A
decoding session's state is a large zeroed allocation (about 1 MB) whose
pages become resident as the game touches them, so there VmRSS climbs for
a while with no new allocation: decoding runs judge growth on VmData (the
memory allocated) instead, and keep VmRSS under 200 MB.  Under
AddressSanitizer the quarantine would hold every freed byte (1 MB here,
appended to ASAN_OPTIONS) and VmData holds the shadow: LeakSanitizer at
exit is the leak check, and every case wants exit 0 after SIGTERM.
"""

import collections
import json
import os
import random
import re
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from harness import (V4, Fail, Skip, check, fmt_addr, parse_hostport,  # noqa: E402
                     free_port, dead_port, udp_ports_bound, main)
import q3cap  # noqa: E402
from q3cap import Capture, Mutator, is_partial  # noqa: E402

TAG = b'ECHO'
COUNTER_KEYS = ('c2s_packets', 'c2s_bytes', 's2c_packets', 's2c_bytes')
WAIT = 3.0            # s, one datagram's way through slipgate in a lock-step replay
REPEAT_SECONDS = 90   # s, replay_ioq68_repeat's runs in all
MAX_RESENDS = 20      # per good session: datagrams sent again after a kernel drop
RSS_LIMIT_KB = 200 * 1024
# The flood's time limit (it aims to be done in 80% of it) and size; the
# environment may make them longer for a leak hunt.
FLOOD_SECONDS = float(os.environ.get('SG_FLOOD_SECONDS', '10'))
IDLE_MIN, IDLE_MAX = 0.85, 2.2  # "ended by idle_timeout 1s", from the last datagram
SESSION_START_RE = re.compile(r'session start client=(\S+) upstream_port=(\d+)')


# ================================================================ helpers

def rng_for(case):
    seed = int(os.environ.get('SLIPGATE_TEST_SEED', '0')) or random.randrange(1, 1 << 30)
    print('%s: random seed %d (set SLIPGATE_TEST_SEED to repeat)' % (case, seed))
    return random.Random(seed)


def describe(data):
    return '%d bytes %s%s' % (len(data), data[:20].hex(), '...' if len(data) > 20 else '')


def big_buffers(sock):
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        except OSError:
            pass


def sanitized(exe):
    """True when the binary is built with AddressSanitizer."""
    try:
        with open(exe, 'rb') as f:
            data = f.read()
    except OSError:
        return False
    return b'__asan_init' in data or b'libasan.so' in data


def vm_status_kb(pid, field):
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def kernel_drops(ports):
    """Datagrams the kernel dropped at the UDP sockets bound to `ports`
    (the last column of /proc/net/udp): a full receive buffer."""
    total = 0
    for name in ('/proc/net/udp', '/proc/net/udp6'):
        try:
            with open(name) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) >= 13 and int(fields[1].rsplit(':', 1)[1], 16) in ports:
                        total += int(fields[-1])
        except (OSError, ValueError):
            pass
    return total


def bound_asan_quarantine(exe):
    """Under AddressSanitizer, freed memory waits in a quarantine of up to
    256 MB before reuse, so RSS climbs with every malloc/free long after
    the warm-up: for the cases that watch RSS, a 1 MB quarantine (appended to
    the inherited ASAN_OPTIONS; LeakSanitizer stays on).  Returns a note."""
    if not sanitized(exe):
        return ''
    opts = os.environ.get('ASAN_OPTIONS', '')
    os.environ['ASAN_OPTIONS'] = (opts + ':' if opts else '') + 'quarantine_size_mb=1'
    return 'AddressSanitizer build: ASAN_OPTIONS=%s' % os.environ['ASAN_OPTIONS']


def yield_cpu():
    """Lower this test's priority (slipgate, started already, keeps its own):
    on a small machine the load generator must not starve the proxy it
    measures."""
    try:
        os.nice(5)
    except OSError:
        pass


class RssSampler:
    """VmRSS and VmData of a process every `period` s in a thread (bounded
    by `limit` s).  VmData is the private memory the process has allocated;
    VmRSS what of it (and of its code) is resident."""

    def __init__(self, pid, period=0.2, limit=150.0):
        self.pid = pid
        self.samples = []  # (monotonic time, VmRSS kB, VmData kB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period, limit), daemon=True)
        self._thread.start()

    def _run(self, period, limit):
        end = time.monotonic() + limit
        while not self._stop.is_set() and time.monotonic() < end:
            rss = vm_status_kb(self.pid, 'VmRSS')
            data = vm_status_kb(self.pid, 'VmData')
            if rss is None or data is None:
                return
            self.samples.append((time.monotonic(), rss, data))
            self._stop.wait(period)

    def stop(self):
        self._stop.set()
        self._thread.join(2)

    def window(self, t0, t1, col=1):
        return [x[col] for x in self.samples if t0 <= x[0] <= t1]

    def check_flat(self, t0, t1, what, slack=1.1, extra_kb=2048, col=1):
        """The peak VmRSS under RSS_LIMIT_KB, and (col 1: VmRSS, col 2:
        VmData) the maximum of the last third of [t0, t1] <= the maximum of
        the first third (the warm-up) x slack + extra_kb.  Returns a summary."""
        name = {1: 'VmRSS', 2: 'VmData'}[col]
        span = t1 - t0
        first = self.window(t0, t0 + span / 3, col)
        last = self.window(t1 - span / 3, t1, col)
        allw = self.window(t0, t1, col)
        check(first and last, '%s: too few memory samples (%d)' % (what, len(self.samples)))
        peak = max(x[1] for x in self.samples)
        check(peak < RSS_LIMIT_KB, '%s: slipgate VmRSS reached %.1f MB (limit %.0f MB)'
              % (what, peak / 1024, RSS_LIMIT_KB / 1024))
        bound = max(first) * slack + extra_kb
        check(max(last) <= bound,
              '%s: slipgate %s grows: max %.1f MB in the first third of the run, %.1f MB in '
              'the last third (allowed %.1f MB); samples (MB): %s'
              % (what, name, max(first) / 1024, max(last) / 1024, bound / 1024,
                 ' '.join('%.1f' % (kb / 1024) for kb in allw[::max(1, len(allw) // 30)])))
        return ('%s MB: start %.1f, first third max %.1f, last third max %.1f; peak VmRSS %.1f; '
                'samples: %s' % (name, allw[0] / 1024, max(first) / 1024, max(last) / 1024,
                                 peak / 1024, ' '.join('%.1f' % (kb / 1024) for kb in
                                                       allw[::max(1, len(allw) // 24)])))

    def rss_trend(self, t0, t1):
        w = self.window(t0, t1, 1)
        return 'VmRSS MB: %s' % ' '.join('%.1f' % (kb / 1024) for kb in w[::max(1, len(w) // 24)])

    def check_decoding(self, t0, t1, what, asan):
        """For decoding runs: the decoder's per-session state is a large
        zeroed allocation whose pages become resident as the game uses them,
        so VmRSS climbs for a while without any new allocation.  Growth is
        judged on VmData (allocated memory); VmRSS must stay under the limit.
        Under AddressSanitizer VmData holds the shadow reservation and says
        nothing: LeakSanitizer checks at exit instead."""
        if asan:
            peak = max(x[1] for x in self.samples)
            check(peak < RSS_LIMIT_KB, '%s: slipgate VmRSS reached %.1f MB (limit %.0f MB)'
                  % (what, peak / 1024, RSS_LIMIT_KB / 1024))
            return ('AddressSanitizer: VmData not judged (shadow memory), leaks are checked at '
                    'exit; peak VmRSS %.1f MB; %s' % (peak / 1024, self.rss_trend(t0, t1)))
        return self.check_flat(t0, t1, what, col=2) + '; ' + self.rss_trend(t0, t1)


class UpstreamMap:
    """client port -> upstream port, from slipgate's "session start" lines
    (at debug when the session opens: the proxy needs -v)."""

    def __init__(self, px):
        self.px = px
        self.idx = 0
        self.map = {}
        self.lock = threading.Lock()

    def poll(self):
        with self.lock:
            lines = self.px.log_lines(self.idx)
            self.idx += len(lines)
            for line in lines:
                m = SESSION_START_RE.search(line)
                if m:
                    self.map[parse_hostport(m.group(1))[1]] = int(m.group(2))

    def get(self, client_port, timeout=0.0):
        end = time.monotonic() + timeout
        for _ in range(int(timeout / 0.005) + 2):
            self.poll()
            with self.lock:
                if client_port in self.map:
                    return self.map[client_port]
            if time.monotonic() >= end:
                break
            time.sleep(0.005)
        return None


class ServerSide:
    """A scripted game server: one UDP socket on 127.0.0.1; a thread keeps
    every datagram per source port (except sources in `ignore`, which are only
    counted) and may answer through `responder(src_port, data)` -> reply or
    None.  Anyone may send from it (send())."""

    MAX_LIFETIME = 150.0

    def __init__(self, port=0, responder=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big_buffers(self.sock)
        self.sock.bind((V4, port))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.addr = fmt_addr(V4, self.port)
        self.responder = responder
        self.queues = collections.defaultdict(collections.deque)
        self.counts = collections.Counter()
        self.ignore = set()
        self.errors = []
        self.cond = threading.Condition()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='server-%d' % self.port)
        self._thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        end = time.monotonic() + self.MAX_LIFETIME
        try:
            while not self._stop and time.monotonic() < end:
                for key, _ in sel.select(0.5):
                    if key.fileobj is self._wake_r:
                        return
                    got = []
                    for _ in range(512):
                        try:
                            data, src = self.sock.recvfrom(65536)
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError as e:
                            self.errors.append(repr(e))
                            break
                        got.append((src[1], data))
                    with self.cond:
                        for port, data in got:
                            self.counts[port] += 1
                            if port not in self.ignore:
                                self.queues[port].append(data)
                        self.cond.notify_all()
                    if self.responder:
                        for port, data in got:
                            reply = self.responder(port, data)
                            if reply is not None:
                                self.send(reply, port)
        finally:
            sel.close()

    def send(self, data, port):
        try:
            self.sock.sendto(data, (V4, port))
        except OSError as e:
            self.errors.append('sendto %d: %r' % (port, e))

    def take(self, port, n, timeout):
        """Up to `n` datagrams from source `port`, waiting up to `timeout` s."""
        end = time.monotonic() + timeout
        with self.cond:
            for _ in range(100000):
                if len(self.queues[port]) >= n:
                    break
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 0.1))
            q = self.queues[port]
            return [q.popleft() for _ in range(min(n, len(q)))]

    def pending(self, port):
        with self.cond:
            return len(self.queues[port])

    def set_ignore(self, port):
        with self.cond:
            self.ignore.add(port)
            self.queues.pop(port, None)

    def close(self):
        self._stop = True
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        self._thread.join(5)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


class FixedEcho:
    """An echo server (TAG + payload) on a given port, in a thread; records
    (time, source, payload)."""

    def __init__(self, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big_buffers(self.sock)
        self.sock.bind((V4, port))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.records = []
        self.lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        end = time.monotonic() + 60
        try:
            while not self._stop and time.monotonic() < end:
                for key, _ in sel.select(0.5):
                    if key.fileobj is self._wake_r:
                        return
                    for _ in range(256):
                        try:
                            data, src = self.sock.recvfrom(65536)
                        except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                            break
                        with self.lock:
                            self.records.append((time.monotonic(), src[:2], data))
                        try:
                            self.sock.sendto(TAG + data, src)
                        except OSError:
                            pass
        finally:
            sel.close()

    def snapshot(self):
        with self.lock:
            return list(self.records)

    def close(self):
        if self._stop:
            return
        self._stop = True
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        self._thread.join(5)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


class Resources:
    """Extra things a case owns, closed after the harness's."""

    def __init__(self, h):
        self.h = h
        self.items = []
        self.pids = []

    def add(self, obj):
        self.items.append(obj)
        return obj

    def close(self):
        for obj in reversed(self.items):
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - best effort in teardown
                pass
        for p in self.pids:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass


def with_resources(fn):
    def run(h):
        res = Resources(h)
        try:
            return fn(h, res)
        finally:
            # Proxies first (by PID), then the sockets and threads.
            for p in h.proxies:
                p.kill()
            res.close()
    run.__name__ = fn.__name__
    return run


def stats_route(st):
    check(isinstance(st, dict) and isinstance(st.get('routes'), list) and st['routes'],
          'stats: no "routes" list: %r' % (st,))
    return st['routes'][0]


def sessions_by_port(route):
    out = collections.defaultdict(list)
    for s in route.get('sessions') or []:
        out[parse_hostport(s['client'])[1]].append(s)
    return out


def session_drops(s):
    d = (s.get('counters') or {}).get('drops')
    check(isinstance(d, dict), 'stats: session %r has no counters.drops' % s.get('id'))
    return {k: v for k, v in d.items() if v}


def counters_of(s):
    c = s.get('counters') or {}
    return tuple(c.get(k) for k in COUNTER_KEYS)


def stop_ok(px, what=''):
    rc = px.stop(signal.SIGTERM, timeout=15.0)
    if rc < 0:
        raise Fail('%sslipgate was killed by signal %d (%s) after SIGTERM, expected exit 0'
                   % (what, -rc, signal.Signals(-rc).name))
    check(rc == 0, '%sslipgate exited with status %d after SIGTERM, expected 0 (with '
          'AddressSanitizer a leak report makes the status non-zero)' % (what, rc))
    return px.stats()


def demo_info(exe, path):
    """(returncode, {field: text}, output) of `slipgate demo info PATH`."""
    r = subprocess.run([exe, 'demo', 'info', path], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    out = r.stdout.decode(errors='replace')
    fields = {}
    for line in out.splitlines():
        k, sep, v = line.partition(':')
        if sep:
            fields[k.strip()] = v.strip()
    return r.returncode, fields, out + r.stderr.decode(errors='replace')


def demo_messages(fields):
    m = re.match(r'(\d+) \((\d+) gamestates, (\d+) snapshots\)', fields.get('messages', ''))
    check(m, 'demo info: no "messages: N (G gamestates, S snapshots)" line: %r' % fields)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def demo_boundaries(data):
    """Byte offsets where each whole message of a demo file ends."""
    out = []
    off = 0
    for _ in range(1000000):
        if off + 8 > len(data):
            break
        _seq, n = struct.unpack_from('<ii', data, off)
        if n < 0 or off + 8 + n > len(data):
            break
        off += 8 + n
        out.append(off)
    return out


def offline_demo(exe, workdir, capture):
    """The demo `slipgate pcap decode --record` writes for the capture's game
    session (the reference for the live recordings): its bytes."""
    d = os.path.join(workdir, 'offline-' + capture.name)
    os.makedirs(d, exist_ok=True)
    r = subprocess.run([exe, 'pcap', 'decode', capture.path, '--record', d],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    check(r.returncode == 0, 'slipgate pcap decode %s: exit %d\n%s'
          % (capture.path, r.returncode, r.stderr.decode(errors='replace')[-2000:]))
    files = [os.path.join(d, f) for f in os.listdir(d)]
    check(len(files) == 1, 'slipgate pcap decode --record wrote %d demos: %s' % (len(files), files))
    with open(files[0], 'rb') as f:
        return f.read()


# ================================================================ replays

class Replay:
    """Lock-step replay of a capture's datagrams through slipgate (see the
    module docstring).  `clients`: which capture client endpoints to play
    (default all); `hold`: slipgate holds fragments until the message is whole
    (reencode always)."""

    def __init__(self, h, px, srv, ups, capture, hold, clients=None, name=None,
                 stop_event=None, wait=WAIT, pace=0.0, move_at=None, before=None, cross=(),
                 cross_back=()):
        self.h = h
        # cross: capture indices of server datagrams that go out together with
        # the client datagram right after them (see _cross)
        self.cross = set(cross)
        # cross_back: capture indices of server datagrams that go out together
        # with the client datagrams right before them (see _cross_back)
        self.cross_back = set(cross_back)
        self.crossed = set()
        self.nudge = None
        # before[index](replay): called before capture datagram `index` goes out
        self.before = before or {}
        # NAT rebinding: from capture datagram `move_at` (client to server)
        # on, its client sends from a new socket, and expects replies there.
        self.move_at = move_at
        self.moved_from = None
        self.px = px
        self.srv = srv
        self.ups = ups
        self.cap = capture
        self.hold = hold
        self.clients = set(clients) if clients is not None else set(capture.clients)
        self.name = name or capture.name
        self.stop_event = stop_event
        self.wait = wait
        self.pace = pace  # s between datagrams (spread over a flood); 0 = as fast as lock-step
        self.dest = (V4, px.ports[0])
        self.socks = {}      # capture endpoint -> harness Client
        self.upstream = {}   # capture endpoint -> upstream port
        self.sent = collections.Counter()   # (endpoint, 'c2s'|'s2c') -> datagrams
        self.bytes = collections.Counter()
        self.delivered = 0
        self.problems = []
        self.skipped = 0
        self.held_max = 0
        self.elapsed = 0.0
        self.resent = collections.Counter()  # (endpoint, dir) -> resends after kernel drops
        self.delivered_at = []  # monotonic time of each delivery
        self._drops_seen = None

    def _problem(self, msg):
        self.problems.append(msg)
        if len(self.problems) > 20:
            raise Fail('%s: too many replay problems, first ones:\n  %s'
                       % (self.name, '\n  '.join(self.problems[:20])))

    def _client(self, ep):
        c = self.socks.get(ep)
        if c is None:
            c = self.socks[ep] = self.h.client(V4)
        return c

    def _kernel_dropped(self, d):
        """Did the kernel drop datagrams on this datagram's path (a full
        receive buffer at slipgate's listen or upstream socket, or at ours)
        since the last look?"""
        ports = {self.dest[1], self.srv.port, self._client(d.client).port}
        if d.client in self.upstream:
            ports.add(self.upstream[d.client])
        n = kernel_drops(ports)
        grew = self._drops_seen is not None and n > self._drops_seen
        self._drops_seen = n
        return grew

    def _resend(self, d):
        if d.c2s:
            self._client(d.client).send(d.payload, self.dest)
        else:
            self.srv.send(d.payload, self.upstream[d.client])
        self.resent[(d.client, 'c2s' if d.c2s else 's2c')] += 1

    def _collect(self, d, n, wait):
        if d.c2s:
            return [(g, None) for g in self.srv.take(self.upstream[d.client], n, wait)]
        return self._recv_client(self._client(d.client), n, wait)

    def _recv_client(self, c, n, wait=None):
        out = []
        end = time.monotonic() + (self.wait if wait is None else wait)
        for _ in range(n):
            r = c.recv_one(max(0.0, end - time.monotonic()))
            if r is None:
                break
            out.append(r)
        return out

    def _cross(self, d, a):
        """Server datagram `d` and the client's answer `a` (the capture's next
        datagram) wait in the kernel together, as when a replay does not wait
        for `d` to come through: slipgate is stopped (SIGSTOP, by PID), a
        datagram from another port makes its listening socket readable
        first, then `d` goes to the upstream socket and `a` to the listening
        one, and slipgate goes on (SIGCONT).  Both must come through."""
        pid = self.px.proc.pid
        c = self._client(d.client)
        up = self.upstream[d.client]
        if self.nudge is None:
            self.nudge = self.h.client(V4)
        self._stop_px()
        try:
            self.nudge.send(b'\xff\xff\xff\xffgetinfo cross', self.dest)
            self.srv.send(d.payload, up)
            c.send(a.payload, self.dest)
        finally:
            os.kill(pid, signal.SIGCONT)
        for g in (d, a):
            self._count(g)
        got_d = [g for g, _ in self._recv_client(c, 1)]
        got_a = self.srv.take(up, 1, self.wait)
        if got_d != [d.payload] or got_a != [a.payload]:
            self._problem('%s %r with %r: got %s at the client and %s at the server'
                          % (self.name, d, a, [describe(g) for g in got_d],
                             [describe(g) for g in got_a]))
        else:
            self.delivered += 2
        self.crossed.add(a.index)

    def _stop_px(self):
        pid = self.px.proc.pid
        os.kill(pid, signal.SIGSTOP)
        for _ in range(1000):
            with open('/proc/%d/stat' % pid) as f:
                if f.read().rsplit(')', 1)[1].split()[0] in ('T', 't'):
                    return
            time.sleep(0.001)

    def _count(self, g):
        self.sent[(g.client, 'c2s' if g.c2s else 's2c')] += 1
        self.bytes[(g.client, 'c2s' if g.c2s else 's2c')] += len(g.payload)

    def _cross_back(self, old, group, d):
        """Client datagrams `group` and the server's next datagram `d` wait
        in the kernel together, the upstream socket readable first: slipgate
        is stopped, `old` (a server datagram already through, which the
        client's netchan drops as old and slipgate relays as it is) goes to
        the upstream socket, then `group` to the listening one and `d` to the
        upstream one, and slipgate goes on.  All must come through."""
        c = self._client(d.client)
        up = self.upstream[d.client]
        self._stop_px()
        try:
            self.srv.send(old.payload, up)
            for g in group:
                c.send(g.payload, self.dest)
            self.srv.send(d.payload, up)
        finally:
            os.kill(self.px.proc.pid, signal.SIGCONT)
        for g in [old] + group + [d]:
            self._count(g)
        got_c = [g for g, _ in self._recv_client(c, 2)]
        got_s = self.srv.take(up, len(group), self.wait)
        if got_c != [old.payload, d.payload] or got_s != [g.payload for g in group]:
            self._problem('%s %r after %r: got %s at the client and %s at the server'
                          % (self.name, d, group, [describe(g) for g in got_c],
                             [describe(g) for g in got_s]))
        else:
            self.delivered += 2 + len(group)
        self.crossed.update(g.index for g in group + [d])

    def run(self):
        t0 = time.monotonic()
        mine = [d for d in self.cap.dgrams if d.client in self.clients]
        answer = {d.index: n for d, n in zip(mine, mine[1:])
                  if d.index in self.cross and n.c2s and not d.c2s and n.client == d.client}
        # cross_back: server datagram index -> (the server datagram before,
        # the client datagrams between), keyed by the first of those
        back = {}
        for k, d in enumerate(mine):
            if d.index not in self.cross_back:
                continue
            j = k
            while j > 0 and mine[j - 1].c2s and mine[j - 1].client == d.client:
                j -= 1
            before = mine[j - 1] if j > 0 else None
            if (j < k and before is not None and before.client == d.client
                    and not before.payload.startswith(q3cap.OOB)
                    and not is_partial(before.payload, False, self.cap.checksum)):
                back[mine[j].index] = (mine[j - 1], mine[j:k], d)
        held = collections.defaultdict(list)  # (endpoint, c2s) -> pieces sent, not yet out
        timeouts = 0
        for d in self.cap.dgrams:
            if d.client not in self.clients:
                continue
            if self.pace and not (self.stop_event is not None and self.stop_event.is_set()):
                time.sleep(self.pace)
            if not self.px.alive():
                raise Fail('%s: slipgate exited (status %s) during the replay, at %r'
                           % (self.name, self.px.proc.poll(), d))
            key = (d.client, d.c2s)
            if d.index in self.before:
                self.before[d.index](self)
            if d.index in self.crossed:
                continue
            if d.index in answer and d.client in self.upstream:
                self._cross(d, answer[d.index])
                continue
            if d.index in back and d.client in self.upstream:
                self._cross_back(*back[d.index])
                continue
            if d.c2s:
                if d.index == self.move_at:
                    self.moved_from = self._client(d.client).port
                    self.socks[d.client] = self.h.client(V4)
                c = self._client(d.client)
                c.send(d.payload, self.dest)
                if d.client not in self.upstream:
                    up = self.ups.get(c.port, timeout=self.wait)
                    if up is None:
                        raise Fail('%s: no "session start client=127.0.0.1:%d upstream_port=N" '
                                   'line within %.0f s of its first datagram'
                                   % (self.name, c.port, self.wait))
                    self.upstream[d.client] = up
            else:
                up = self.upstream.get(d.client)
                if up is None:  # a reply to a request outside the replay
                    self.skipped += 1
                    continue
                self.srv.send(d.payload, up)
            self.sent[(d.client, 'c2s' if d.c2s else 's2c')] += 1
            self.bytes[(d.client, 'c2s' if d.c2s else 's2c')] += len(d.payload)
            group = held[key]
            group.append(d)
            if self.hold and is_partial(d.payload, d.c2s, self.cap.checksum):
                self.held_max = max(self.held_max, len(group))
                continue
            want = [g.payload for g in group]
            group.clear()
            if self._drops_seen is None:
                self._kernel_dropped(d)
            rs = self._collect(d, len(want), min(1.0, self.wait))
            if len(rs) < len(want) and len(want) == 1 and self._kernel_dropped(d) \
                    and sum(self.resent.values()) < MAX_RESENDS:
                # Lost in a full socket buffer on the way (the host could not
                # keep up): what slipgate never saw may be sent again.
                self._resend(d)
            if len(rs) < len(want):
                rs += self._collect(d, len(want) - len(rs), self.wait)
            got = [g for g, _ in rs]
            if not d.c2s and not all(src == self.dest for _, src in rs):
                self._problem('%r: reply from %s, not from the listen address %s'
                              % (d, [src for _, src in rs], self.dest))
            if got == want:
                self.delivered += len(want)
                self.delivered_at.append(time.monotonic())
                timeouts = 0
                continue
            if len(got) < len(want):
                timeouts += 1
            diff = ''
            if len(got) == len(want):
                for w, g in zip(want, got):
                    if w != g:
                        i = next((k for k in range(min(len(w), len(g))) if w[k] != g[k]),
                                 min(len(w), len(g)))
                        diff = '; first difference at byte %d (%s vs %s)' % (
                            i, w[i:i + 8].hex(), g[i:i + 8].hex())
                        break
            self._problem('%s %r: %s expected %d datagram(s) %s, got %d %s%s'
                          % (self.name, d, 'server' if d.c2s else 'client', len(want),
                             [describe(w) for w in want], len(got),
                             [describe(g) for g in got], diff))
            if timeouts >= 3:
                raise Fail('%s: three datagrams in a row did not arrive within %.0f s; '
                           'problems so far:\n  %s' % (self.name, self.wait,
                                                       '\n  '.join(self.problems)))
        for key, group in held.items():
            if group:
                self._problem('%s: %d fragment(s) of an unfinished message at the end (%s)'
                              % (self.name, len(group), group))
        # Nothing more may arrive: slipgate makes no datagrams of its own.
        time.sleep(0.05)
        for ep, c in self.socks.items():
            extra = c.recv(0.05)
            if extra:
                self._problem('%s: client %s received %d unexpected datagram(s): %s'
                              % (self.name, ep, len(extra), [describe(x) for x, _ in extra[:3]]))
        for ep, up in self.upstream.items():
            n = self.srv.pending(up)
            if n:
                self._problem('%s: the server received %d unexpected datagram(s) from the '
                              'session of %s' % (self.name, n, ep))
        self.elapsed = time.monotonic() - t0
        return self

    def total_sent(self):
        return sum(self.sent.values())

    def port_of(self, ep):
        return self.socks[ep].port


def check_replay_sessions(rep, route, decoded, reencode):
    """The stats of a replay's sessions: exact counters, no drops; with
    `decoded`, zero decode errors; with `reencode`, every message rebuilt and
    byte-identical.  Returns the game session's stats."""
    by_port = sessions_by_port(route)
    game = None
    for ep in rep.socks:
        port = rep.port_of(ep)
        ss = by_port.get(port, [])
        check(len(ss) == 1, '%s: %d sessions in the stats for client %s (port %d), expected 1'
              % (rep.name, len(ss), ep, port))
        s = ss[0]
        want = (rep.sent[(ep, 'c2s')], rep.bytes[(ep, 'c2s')],
                rep.sent[(ep, 's2c')], rep.bytes[(ep, 's2c')])
        got = counters_of(s)
        rc, rs = rep.resent[(ep, 'c2s')], rep.resent[(ep, 's2c')]
        if rc or rs:
            # a datagram sent again was seen by slipgate once or twice
            ok = want[0] <= got[0] <= want[0] + rc and want[2] <= got[2] <= want[2] + rs
        else:
            ok = got == want
        check(ok, '%s: session of %s: counters %s, expected %s (sent%s)'
              % (rep.name, ep, dict(zip(COUNTER_KEYS, got)), dict(zip(COUNTER_KEYS, want)),
                 ', plus %d/%d sent again' % (rc, rs) if rc or rs else ''))
        check(not session_drops(s), '%s: session of %s counted drops: %s'
              % (rep.name, ep, session_drops(s)))
        if decoded:
            d = s.get('decode')
            check(isinstance(d, dict), '%s: session of %s was not decoded: %r'
                  % (rep.name, ep, s))
            # (a datagram sent again is "old" to the decoder, not an error)
            check(d.get('errors') == 0 and not s.get('first_error'),
                  '%s: session of %s: %s decode errors, first: %r'
                  % (rep.name, ep, d.get('errors'), s.get('first_error')))
            if reencode:
                check(d.get('reencode_identical') == d.get('reencoded')
                      and not d.get('reencode_errors'),
                      '%s: session of %s: %s rebuilt, %s byte-identical, %s rebuild errors'
                      % (rep.name, ep, d.get('reencoded'), d.get('reencode_identical'),
                         d.get('reencode_errors')))
        if ep == rep.cap.game_client:
            game = s
    if decoded and reencode and game is not None:
        d = game['decode']
        check(d.get('messages', 0) > 100 and d.get('reencoded') == d.get('messages'),
              '%s: game session: %s messages, %s rebuilt (expected every one)'
              % (rep.name, d.get('messages'), d.get('reencoded')))
    return game


# ================================================================ malformed floods

def good_echo_driver(name, h, px, srv, ups, idx, rng, stop, out, max_count=20000):
    """A good session: lock-step GOOD datagrams; the server echoes each
    (TAG + payload); every echo must come back intact.  Appends a dict."""
    c = h.client(V4)
    dest = (V4, px.ports[0])
    res = {'name': name, 'port': c.port, 'sent': 0, 'bytes': 0, 'problems': [], 'resent': 0}
    out.append(res)
    ports = [dest[1], srv.port, c.port]
    res['drops_seen'] = kernel_drops(ports)
    for seq in range(max_count):
        if stop.is_set() and seq >= 20:
            break
        n = rng.randint(7000, 8000) if rng.random() < 0.02 else rng.randint(0, 1400)
        payload = b'GOOD' + struct.pack('<HI', idx, seq) + rng.randbytes(n)
        c.send(payload, dest)
        res['sent'] += 1
        res['bytes'] += len(payload)
        r = c.recv_one(1.0)
        if r is None and res['resent'] < MAX_RESENDS:
            n = kernel_drops(ports + [ups.get(c.port) or 0])
            if n > res['drops_seen']:
                res['drops_seen'] = n
                c.send(payload, dest)  # lost in a full socket buffer: send again
                res['resent'] += 1
        if r is None:
            r = c.recv_one(WAIT)
        time.sleep(0.002)  # about 400 round trips a second: leave the CPU to slipgate
        if r is None:
            res['problems'].append('%s: no echo within %.0f s for datagram %d (%s)'
                                   % (name, WAIT + 1, seq, describe(payload)))
            break
        if r != (TAG + payload, dest):
            res['problems'].append('%s: datagram %d: echo %s from %s, expected %s from %s'
                                   % (name, seq, describe(r[0]), r[1],
                                      describe(TAG + payload), dest))
            break
    extra = c.recv(0.05)
    if extra:
        res['problems'].append('%s: %d unexpected datagrams' % (name, len(extra)))


def replay_driver(name, h, px, srv, ups, cap, hold, stop, out, seconds):
    """A good session: the capture replayed once (both ends, lock-step),
    paced to last about `seconds` (the flood), as fast as possible once the
    flood is over.  One replay, so the set of sessions is constant after the
    warm-up and RSS measures the flood, not new sessions."""
    n = sum(1 for _ in cap.dgrams)
    rep = Replay(h, px, srv, ups, cap, hold, name=name, stop_event=stop, pace=seconds / n)
    out.append(rep)
    rep.run()


def run_thread(target, errors, *args):
    def body():
        try:
            target(*args)
        except Fail as e:
            errors.append(str(e))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            import traceback
            errors.append('%s: %r\n%s' % (target.__name__, e, traceback.format_exc()))
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


class Flood:
    """Bad sessions: `noise` ones send random and mutated datagrams (and the
    server answers them with mutated server datagrams); `deep` ones replay a
    real session's handshake and traffic both ways with a share of the
    datagrams mutated, so the decoder gets past the handshake before it is
    fed garbage."""

    def __init__(self, h, px, srv, ups, rng, caps, n_noise=16, n_deep=8):
        self.h, self.px, self.srv, self.ups, self.rng = h, px, srv, ups, rng
        self.dest = (V4, px.ports[0])
        pool_c2s = [p for c in caps for p in c.c2s()]
        pool_s2c = [p for c in caps for p in c.s2c()]
        self.mut_c2s = Mutator(random.Random(rng.random()), pool_c2s)
        self.mut_s2c = Mutator(random.Random(rng.random()), pool_s2c)
        self.real_oob = [p for c in caps for p in
                         c.oob(b'getchallenge') + c.oob(b'connect') + c.oob(b'getinfo')
                         + c.oob(b'getstatus')]
        self.noise = [h.client(V4) for _ in range(n_noise)]
        self.deep = []
        for k in range(n_deep):
            cap = caps[k % len(caps)]
            self.deep.append({'sock': h.client(V4), 'game': cap.game(), 'pos': 0,
                              'p': (0.03, 0.1, 0.3, 0.6)[k % 4]})
        self.bad_ports = {c.port for c in self.noise} | {d['sock'].port for d in self.deep}
        self.upstream = {}   # client port -> upstream port
        self.sent_c2s = 0
        self.sent_s2c = 0
        self.big = 0
        self.elapsed = 0.0
        self.replies = 0
        self.lock = threading.Lock()

    def responder(self, port, data):
        """Server side: answer a bad noise session's datagram now and then
        with a mutated server datagram."""
        with self.lock:
            noise_up = port in self.noise_upstreams
        if noise_up and self.rng_srv.random() < 0.3:
            with self.lock:
                self.sent_s2c += 1
            m = self.mut_srv
            return m.mutate() if self.rng_srv.random() < 0.8 else m.random()
        return None

    def _learn(self):
        self.ups.poll()
        for port in self.bad_ports:
            if port not in self.upstream:
                up = self.ups.get(port)
                if up is not None:
                    self.upstream[port] = up
                    self.srv.set_ignore(up)
                    if port in self.noise_ports:
                        with self.lock:
                            self.noise_upstreams.add(up)

    def prepare(self):
        self.rng_srv = random.Random(self.rng.random())
        self.mut_srv = Mutator(random.Random(self.rng.random()), self.mut_s2c.pool)
        self.noise_ports = {c.port for c in self.noise}
        self.noise_upstreams = set()
        # Noise sessions start with garbage that no codec claims; deep ones
        # with a real getchallenge (so protocol auto decodes them).
        for c in self.noise:
            c.send(b'\x00' + self.rng.randbytes(self.rng.randint(0, 200)), self.dest)
            self.sent_c2s += 1

    def _one(self):
        r = self.rng
        k = r.randrange(len(self.noise) + len(self.deep))
        if k < len(self.noise):
            c = self.noise[k]
            x = r.random()
            if x < 0.40:
                data = self.mut_c2s.random()
                if len(data) > 1500:
                    self.big += 1
                c.send(data, self.dest)
                self.sent_c2s += 1
            elif x < 0.85:
                c.send(self.mut_c2s.mutate(), self.dest)
                self.sent_c2s += 1
            elif x < 0.90:
                c.send(r.choice(self.real_oob), self.dest)
                self.sent_c2s += 1
            else:
                up = self.upstream.get(c.port)
                if up is not None:
                    self.srv.send(self.mut_s2c.mutate(), up)
                    with self.lock:
                        self.sent_s2c += 1
            return
        d = self.deep[k - len(self.noise)]
        g = d['game'][d['pos']]
        d['pos'] = (d['pos'] + 1) % len(d['game'])
        mut = self.mut_c2s if g.c2s else self.mut_s2c
        first = d.setdefault('first', True)
        d['first'] = False  # the first datagram stays real: auto probes it as Quake 3
        data = mut.mutate(g.payload) if not first and r.random() < d['p'] else g.payload
        if g.c2s:
            d['sock'].send(data, self.dest)
            self.sent_c2s += 1
        else:
            up = self.upstream.get(d['sock'].port)
            if up is not None:
                self.srv.send(data, up)
                with self.lock:
                    self.sent_s2c += 1

    def _drain(self):
        for c in self.noise + [d['sock'] for d in self.deep]:
            for _ in range(256):
                try:
                    c.sock.recvfrom(65536)
                    self.replies += 1
                except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                    break

    def run(self, total, seconds, stop):
        t0 = time.monotonic()
        rate = total / (seconds * 0.8 - 0.5)
        n = 0
        for _ in range(int(seconds * 200) + 10):
            now = time.monotonic()
            if now - t0 > seconds or self.sent_c2s + self.sent_s2c >= total:
                break
            if not self.px.alive():
                break
            self._learn()
            el = now - t0
            # ramp up over the first second, then the steady rate
            due = min(total, int((el * el / 2 if el < 1 else el - 0.5) * rate) + 1)
            while self.sent_c2s + self.sent_s2c < due and n < total * 2:
                self._one()
                n += 1
            self._drain()
            time.sleep(0.005)
        self.elapsed = time.monotonic() - t0
        stop.set()
        self._learn()


def malformed(h, res, case, q3):
    rng = rng_for(case)
    caps = [Capture(n) for n in q3cap.CAPTURES]
    flood_holder = {}

    def responder(port, data):
        if data.startswith(b'GOOD'):
            return TAG + data
        f = flood_holder.get('f')
        return f.responder(port, data) if f else None

    srv = res.add(ServerSide(responder=responder))
    note = bound_asan_quarantine(h.exe)
    if note:
        print(note)
    # -v: the "session start" line of a session the server has not answered is at debug
    args = ['-v', '-l', '127.0.0.1:$P0', '-s', srv.addr, '+set', 'new_sessions_per_source', '1000']
    args += ['-p', 'q3', '+set', 'reencode', 'always'] if q3 else ['-p', 'auto']
    px = h.proxy(args=args, lifetime=FLOOD_SECONDS + 80)
    ups = UpstreamMap(px)
    yield_cpu()
    rss = res.add(RssSampler(px.proc.pid, 0.2))
    flood = Flood(h, px, srv, ups, rng, caps)
    flood.prepare()
    flood_holder['f'] = flood
    stop = threading.Event()
    errors = []
    echoes = []
    replays = []
    threads = []
    n_echo = 2 if q3 else 6
    for i in range(n_echo):
        threads.append(run_thread(good_echo_driver, errors, 'good echo %d' % i, h, px, srv, ups, i,
                                  random.Random(rng.random()), stop, echoes))
    for cap in (caps if q3 else caps[1:2]):
        threads.append(run_thread(replay_driver, errors, 'good replay ' + cap.name, h, px, srv,
                                  ups, cap, q3, stop, replays, FLOOD_SECONDS * 0.8))
    t_flood = time.monotonic()
    total = int(os.environ.get('SG_FLOOD_DATAGRAMS', '20000'))
    flood.run(total, FLOOD_SECONDS, stop)
    t_end = time.monotonic()
    for t in threads:
        t.join(60)
    check(not any(t.is_alive() for t in threads), 'a good-session thread did not finish')
    alive = px.alive()
    rss.stop()
    kd_listen = kernel_drops({px.ports[0]})
    kdrops = kd_listen + kernel_drops(set(flood.upstream.values()))
    check(alive, 'slipgate died during the flood (status %s)' % px.proc.poll())
    sent = flood.sent_c2s + flood.sent_s2c
    print('flood: %d bad datagrams (%d client->server, %d server->client, %d over 1500 bytes) '
          'in %.1f s from %d bad sessions; %d replies reached the bad clients'
          % (sent, flood.sent_c2s, flood.sent_s2c, flood.big, flood.elapsed,
             len(flood.bad_ports), flood.replies))
    check(sent >= total // 2, 'the flood sent only %d of %d datagrams in %.1f s (host too slow?)'
          % (sent, total, flood.elapsed))

    # The good sessions: every datagram intact both ways.
    problems = list(errors)
    for e in echoes:
        problems += e['problems']
    for rep in replays:
        problems += rep.problems
    if problems and kdrops:
        problems.append('note: the kernel dropped %d datagrams at slipgate\'s sockets, %d of them '
                        'at the listen socket that all clients share (a full receive buffer: '
                        'slipgate fell behind)' % (kdrops, kd_listen))
    check(not problems, 'good sessions were disturbed by the flood:\n  %s'
          % '\n  '.join(problems[:15]))
    good_sent = sum(e['sent'] for e in echoes) + sum(r.total_sent() for r in replays)
    print('good sessions: %d echo sessions (%d datagrams each way in all), %d capture replays '
          '(%d datagrams), all intact' % (len(echoes), sum(e['sent'] for e in echoes),
                                          len(replays), sum(r.total_sent() for r in replays)))
    check(good_sent > 0, 'no good traffic was exchanged')
    resent = sum(e['resent'] for e in echoes) + sum(sum(r.resent.values()) for r in replays)
    if resent:
        print('WARNING: %d good datagrams were sent again after the kernel dropped datagrams '
              'in a full socket buffer on their path (%d at slipgate\'s listen socket): the '
              'host could not keep up (is something else running?)' % (resent, kd_listen))
    # (with protocol auto the deep bad sessions are decoded too)
    rss_summary = rss.check_decoding(t_flood, t_end, case, sanitized(h.exe))

    st = stop_ok(px)
    route = stats_route(st)
    by_port = sessions_by_port(route)
    # Good echo sessions: exact counters, no drops.
    for e in echoes:
        ss = by_port.get(e['port'], [])
        check(len(ss) == 1, '%s: %d sessions in stats' % (e['name'], len(ss)))
        s = ss[0]
        want = (e['sent'], e['bytes'], e['sent'], e['bytes'] + len(TAG) * e['sent'])
        got = counters_of(s)
        if e['resent']:
            ok = want[0] <= got[0] <= want[0] + e['resent'] and got[0] == got[2]
        else:
            ok = got == want
        check(ok, '%s: counters %s, expected %s%s' % (e['name'], got, want,
                                                       ' (%d sent again)' % e['resent']
                                                       if e['resent'] else ''))
        check(not session_drops(s), '%s: drops %s' % (e['name'], session_drops(s)))
        if not q3:
            check('decode' not in s, '%s: a plain GOOD session was decoded under protocol auto: %r'
                  % (e['name'], s.get('decode')))
    for rep in replays:
        check_replay_sessions(rep, route, decoded=q3, reencode=q3)
    # Bad sessions: decode errors counted (q3 always; auto: the deep ones,
    # whose first datagram is a real getchallenge).
    bad_rows = []
    errs = {}
    for port in sorted(flood.bad_ports):
        ss = by_port.get(port, [])
        check(len(ss) == 1, 'bad session of client port %d: %d sessions in stats' % (port, len(ss)))
        s = ss[0]
        d = s.get('decode')
        deep = port not in flood.noise_ports
        if q3 or deep:
            check(isinstance(d, dict), 'bad session %d (%s) was not decoded: %r'
                  % (port, 'deep' if deep else 'noise', s))
            errs[port] = d.get('errors')
            bad_rows.append('%s:%s' % ('D' if deep else 'n', d.get('errors')))
        else:
            check(d is None, 'noise session %d (first datagram not Quake 3) was decoded under '
                  'protocol auto: %r' % (port, d))
    tot = collections.Counter()
    for port in flood.bad_ports:
        d = by_port[port][0].get('decode') or {}
        for k in ('datagrams', 'messages', 'oob', 'rejected', 'errors', 'reencoded',
                  'reencode_identical', 'reencode_errors'):
            tot[k] += d.get(k, 0) or 0
    print('bad sessions, decoder totals: %s' % dict(tot))
    no_err = [p for p, n in errs.items() if not n]
    check(not no_err, 'decoded bad sessions with zero decode errors counted: ports %s' % no_err)
    check(route.get('sessions_total') == len(route.get('sessions', [])),
          'stats: sessions_total %s but %d sessions listed' % (route.get('sessions_total'),
                                                               len(route.get('sessions', []))))
    print('decode errors of the decoded bad sessions (D deep, n noise): %s' % ' '.join(bad_rows))
    print('route drops: %s; kernel drops at slipgate\'s sockets: %d at the listener, %d at the '
          'bad sessions\' upstream sockets'
          % ({k: v for k, v in route['counters']['drops'].items() if v}, kd_listen,
             kdrops - kd_listen))
    print(rss_summary)


@with_resources
def case_malformed_relay(h, res):
    malformed(h, res, 'malformed_relay', q3=False)


@with_resources
def case_malformed_q3(h, res):
    malformed(h, res, 'malformed_q3', q3=True)


# ================================================================ soak

def soak_seconds():
    try:
        return max(3.0, float(os.environ.get('SG_SOAK_SECONDS', '20')))
    except ValueError:
        raise Fail('SG_SOAK_SECONDS=%r is not a number' % os.environ['SG_SOAK_SECONDS'])


class SoakServer:
    """Game-server shape: records every client datagram (session, seq),
    checks its bytes, and answers every third one with a 100..1300-byte
    snapshot-sized datagram."""

    def __init__(self, block):
        self.block = block
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big_buffers(self.sock)
        self.sock.bind((V4, 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.addr = fmt_addr(V4, self.port)
        self.up_seen = collections.defaultdict(set)
        self.up_src = collections.defaultdict(set)
        self.down_sent = collections.Counter()
        self.bad = []
        self.errors = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        end = time.monotonic() + 300
        try:
            while not self._stop and time.monotonic() < end:
                for key, _ in sel.select(0.5):
                    if key.fileobj is self._wake_r:
                        return
                    for _ in range(512):
                        try:
                            data, src = self.sock.recvfrom(65536)
                        except (BlockingIOError, InterruptedError):
                            break
                        if len(data) < 8 or data[:2] != b'UP':
                            self.bad.append(data[:32])
                            continue
                        s, q = struct.unpack_from('<HI', data, 2)
                        if data != soak_up(self.block, s, q):
                            self.bad.append(data[:32])
                            continue
                        self.up_seen[s].add(q)
                        self.up_src[s].add(src[1])
                        if q % 3 == 2:
                            try:
                                self.sock.sendto(soak_down(self.block, s, q), src)
                                self.down_sent[s] += 1
                            except OSError as e:
                                self.errors.append(repr(e))
        finally:
            sel.close()

    def close(self):
        self._stop = True
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        self._thread.join(5)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


def soak_up(block, s, q):
    n = 40 + (s * 7 + q * 13) % 41           # 40..80 bytes
    off = (s * 131 + q * 17) % 1000
    return b'UP' + struct.pack('<HI', s, q) + block[off:off + n - 8]


def soak_down(block, s, q):
    n = 100 + (s * 97 + q * 31) % 1201       # 100..1300 bytes
    off = (s * 61 + q * 7) % 1000
    return b'DN' + struct.pack('<HI', s, q) + block[off:off + n - 8]


@with_resources
def case_soak(h, res):
    seconds = soak_seconds()
    nsess, up_hz = 64, 60
    rng = rng_for('soak')
    block = rng.randbytes(2400)
    srv = res.add(SoakServer(block))
    note = bound_asan_quarantine(h.exe)
    if note:
        print(note)
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', 'auto',
                       '+set', 'new_sessions_per_source', '1000'],
                 lifetime=seconds + 60)
    dest = (V4, px.ports[0])
    yield_cpu()
    clients = [h.client(V4) for _ in range(nsess)]
    sel = selectors.DefaultSelector()
    for i, c in enumerate(clients):
        sel.register(c.sock, selectors.EVENT_READ, i)
    res.add(sel)
    down_got = collections.defaultdict(set)
    dup = bad = 0
    bad_examples = []
    rss = res.add(RssSampler(px.proc.pid, 0.25, seconds + 30))
    slots = 4  # each 1/60 s tick is spread over 4 slots of 16 sessions
    per_slot = nsess // slots
    period = 1.0 / (up_hz * slots)
    t0 = time.monotonic()
    nslots = int(seconds * up_hz * slots)
    sent = 0
    late_max = 0.0

    def drain(timeout):
        nonlocal dup, bad
        for key, _ in sel.select(timeout):
            i = key.data
            c = clients[i]
            for _ in range(64):
                try:
                    data, src = c.sock.recvfrom(65536)
                except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                    break
                ok = len(data) >= 8 and data[:2] == b'DN' and src[:2] == dest
                if ok:
                    s, q = struct.unpack_from('<HI', data, 2)
                    ok = s == i and data == soak_down(block, s, q)
                if not ok:
                    bad += 1
                    if len(bad_examples) < 3:
                        bad_examples.append('client %d: %s from %s' % (i, describe(data), src))
                    continue
                if q in down_got[i]:
                    dup += 1
                down_got[i].add(q)

    for k in range(nslots):
        due = t0 + k * period
        for _ in range(1000):
            left = due - time.monotonic()
            if left <= 0:
                break
            drain(left)
        late_max = max(late_max, time.monotonic() - due)
        q = k // slots
        for i in range((k % slots) * per_slot, (k % slots + 1) * per_slot):
            clients[i].send(soak_up(block, i, q), dest)
            sent += 1
        if k % (up_hz * slots) == 0 and not px.alive():
            raise Fail('slipgate died during the soak after %.1f s (status %s)'
                       % (time.monotonic() - t0, px.proc.poll()))
    t_end = time.monotonic()
    end = time.monotonic() + 1.0
    for _ in range(1000):
        left = end - time.monotonic()
        if left <= 0:
            break
        drain(left)
    rss.stop()
    check(px.alive(), 'slipgate died during the soak (status %s)' % px.proc.poll())
    qn = nslots // slots
    up_sent = nsess * qn
    check(sent == up_sent, 'internal: %d sent, %d planned' % (sent, up_sent))
    up_recv = sum(len(v) for v in srv.up_seen.values())
    down_sent = sum(srv.down_sent.values())
    down_recv = sum(len(v) for v in down_got.values())
    kd_listen, kd_server = kernel_drops({px.ports[0]}), kernel_drops({srv.port})
    kd = kd_listen + kd_server + kernel_drops({c.port for c in clients})
    rate_up = up_sent / (t_end - t0)
    print('soak: %d sessions, %.1f s, %d up (%.0f/s, 40-80 B), %d down (100-1300 B); '
          'received %d up, %d down; %d corrupt, %d duplicates; worst send lateness %.0f ms; '
          'kernel socket drops %d'
          % (nsess, t_end - t0, up_sent, rate_up, down_sent, up_recv, down_recv, bad, dup,
             late_max * 1000, kd))
    check(not srv.bad and not bad, 'corrupt datagrams: %d at the server (%s), %d at the '
          'clients (%s)' % (len(srv.bad), srv.bad[:3], bad, bad_examples))
    check(dup == 0, '%d duplicated datagrams reached the clients' % dup)
    srcs = {s: v for s, v in srv.up_src.items() if len(v) != 1}
    check(not srcs and len(srv.up_src) == nsess,
          'the server saw %d sessions (expected %d); sessions with several upstream ports: %s'
          % (len(srv.up_src), nsess, srcs))
    lost = (up_sent - up_recv) + (down_sent - down_recv)
    loss = lost / float(up_sent + down_sent)
    if lost:
        msg = ('LOSS: %d of %d datagrams lost (%.4f%%): %d up, %d down; the kernel counted %d '
               'receive-buffer drops at the sockets involved (%d at slipgate\'s listen '
               'socket, %d at the server\'s)'
               % (lost, up_sent + down_sent, loss * 100, up_sent - up_recv,
                  down_sent - down_recv, kd, kd_listen, kd_server))
        # A host that stalls this test's own sender for 50 ms or more stalls
        # the relay and the server's thread too: receive buffers fill and the
        # kernel drops, counted at the socket (2 CPUs shared with other runs
        # did this: 753 drops, 148 ms late).  Then only what the kernel did
        # not count is held to the 0.1%; on a host that kept time, all of it.
        unexplained = lost - min(lost, kd) if late_max >= 0.05 else lost
        check(unexplained < 0.001 * (up_sent + down_sent),
              msg + ' (over the 0.1%% allowed%s)'
              % ('' if unexplained == lost else
                 ' for the %d the kernel did not count as receive-buffer drops' % unexplained))
        print('WARNING: ' + msg + (' (under the 0.1% allowed on loopback)' if unexplained == lost
                                   else '; the host stalled the sender %.0f ms, the kernel '
                                   'counted the drops' % (late_max * 1000)))
    print(rss.check_flat(t0, t_end, 'soak'))
    st = stop_ok(px, 'after the soak: ')
    route = stats_route(st)
    check(route.get('sessions_total') == nsess, 'stats: sessions_total %r, expected %d'
          % (route.get('sessions_total'), nsess))
    c = route['counters']
    # slipgate's counters: what it sent on (with loss on the way, at least what arrived)
    check(c['c2s_packets'] == up_sent and c['s2c_packets'] == down_sent if not lost else
          up_recv <= c['c2s_packets'] <= up_sent and down_recv <= c['s2c_packets'] <= down_sent,
          'stats: c2s_packets %d s2c_packets %d; the clients sent %d (server received %d), the '
          'server sent %d (clients received %d)' % (c['c2s_packets'], c['s2c_packets'], up_sent,
                                                    up_recv, down_sent, down_recv))
    d = {k: v for k, v in c['drops'].items() if v}
    check(not d, 'stats: drops %s' % d)
    print('exit 0 after SIGTERM; stats agree (c2s %d, s2c %d, no drops)'
          % (c['c2s_packets'], c['s2c_packets']))


@with_resources
def case_soak_q3(h, res):
    soak_q3_run(h, res, ['+set', 'reencode', 'always', '--record', h.path('demos')], hold=True)


def soak_q3_run(h, res, extra, hold):
    """64 sessions replay the game sessions of the three captures at their
    recorded pace (about 53 client and 20 server datagrams a second each),
    staggered over the first second, under -p q3 +set reencode always
    --record DIR; one thread drives both ends.  Causal order per session is
    kept (a datagram goes only once the session's previous ones arrived),
    the status-tool queries of the captures are left out (other ports, not
    game traffic)."""
    seconds = soak_seconds()
    nsess = 64
    caps = [Capture(n) for n in q3cap.CAPTURES]
    srv_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    big_buffers(srv_sock)
    srv_sock.bind((V4, 0))
    srv_sock.setblocking(False)
    res.add(srv_sock)
    srv_port = srv_sock.getsockname()[1]
    note = bound_asan_quarantine(h.exe)
    if note:
        print(note)
    px = h.proxy(args=['-v', '-l', '127.0.0.1:$P0', '-s', '127.0.0.1:%d' % srv_port, '-p', 'q3',
                       '+set', 'new_sessions_per_source', '1000'] + list(extra),
                 lifetime=seconds + 90)
    dest = (V4, px.ports[0])
    ups = UpstreamMap(px)
    yield_cpu()
    rss = res.add(RssSampler(px.proc.pid, 0.25, seconds + 60))
    sess = []
    for k in range(nsess):
        cap = caps[k % 3]
        game = [d for d in cap.game() if d.ts - cap.game()[0].ts <= seconds]
        t_first = game[0].ts
        sess.append({'cap': cap, 'game': game, 'pos': 0, 'start': k / nsess - t_first,
                     'c': h.client(V4), 'up': None,
                     'want_srv': collections.deque(), 'want_cli': collections.deque(),
                     'held_c2s': [], 'held_s2c': [],
                     'ok': 0, 'bad': [], 'sent': collections.Counter(),
                     'bytes': collections.Counter()})
    by_up = {}
    sel = selectors.DefaultSelector()
    sel.register(srv_sock, selectors.EVENT_READ, -1)
    for k, s in enumerate(sess):
        sel.register(s['c'].sock, selectors.EVENT_READ, k)
    res.add(sel)
    blocked = 0
    late_max = 0.0

    def arrive(s, data, where):
        q = s['want_srv'] if where == 'srv' else s['want_cli']
        if not q:
            s['bad'].append('unexpected %s at the %s' % (describe(data), where))
        else:
            w = q.popleft()
            if w != data:
                s['bad'].append('%s: expected %s, got %s' % (where, describe(w), describe(data)))
            else:
                s['ok'] += 1

    def drain(timeout):
        for key, _ in sel.select(timeout):
            k = key.data
            sock = srv_sock if k < 0 else sess[k]['c'].sock
            for _ in range(256):
                try:
                    data, src = sock.recvfrom(65536)
                except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                    break
                if k < 0:
                    kk = by_up.get(src[1])
                    end = time.monotonic() + WAIT
                    for _ in range(1000):  # its "session start" line may still be on its way
                        if kk is not None or time.monotonic() > end:
                            break
                        ups.poll()
                        for j, s in enumerate(sess):
                            if s['up'] is None:
                                s['up'] = ups.get(s['c'].port)
                                if s['up'] is not None:
                                    by_up[s['up']] = j
                        kk = by_up.get(src[1])
                        if kk is None:
                            time.sleep(0.002)
                    if kk is None:
                        raise Fail('the server got a datagram from port %d, no session of ours'
                                   % src[1])
                    arrive(sess[kk], data, 'srv')
                else:
                    if src[:2] != dest:
                        sess[k]['bad'].append('reply from %s' % (src,))
                    arrive(sess[k], data, 'cli')

    t0 = time.monotonic()
    total = sum(len(s['game']) for s in sess)
    done = 0
    for _ in range(total * 20 + 100000):
        if done >= total or time.monotonic() - t0 > seconds + 20:
            break
        now = time.monotonic() - t0
        next_due = None
        for k, s in enumerate(sess):
            for _ in range(64):
                if s['pos'] >= len(s['game']):
                    break
                d = s['game'][s['pos']]
                due = s['start'] + d.ts
                if due > now:
                    next_due = due if next_due is None else min(next_due, due)
                    break
                # causal order: the session's earlier datagrams have arrived
                if s['want_srv'] or s['want_cli']:
                    blocked += 1
                    break
                if not d.c2s and s['up'] is None:
                    s['up'] = ups.get(s['c'].port)
                    if s['up'] is None:
                        blocked += 1
                        break
                    by_up[s['up']] = k
                late_max = max(late_max, now - due)
                if d.c2s:
                    s['c'].send(d.payload, dest)
                    held, want = s['held_c2s'], s['want_srv']
                else:
                    srv_sock.sendto(d.payload, (V4, s['up']))
                    held, want = s['held_s2c'], s['want_cli']
                dirn = 'c2s' if d.c2s else 's2c'
                s['sent'][dirn] += 1
                s['bytes'][dirn] += len(d.payload)
                held.append(d.payload)
                if not hold or not is_partial(d.payload, d.c2s, s['cap'].checksum):
                    want.extend(held)
                    held.clear()
                s['pos'] += 1
                done += 1
        timeout = 0.002 if next_due is None else min(0.01, max(0.0, next_due - now))
        drain(timeout)
        if done % 2000 == 0 and not px.alive():
            raise Fail('slipgate died during the soak (status %s)' % px.proc.poll())
    t_end = time.monotonic()
    end = time.monotonic() + 2.0
    for _ in range(2000):
        if all(not s['want_srv'] and not s['want_cli'] for s in sess) \
                or time.monotonic() > end:
            break
        drain(0.05)
    rss.stop()
    check(px.alive(), 'slipgate died during the soak (status %s)' % px.proc.poll())
    missing = sum(len(s['want_srv']) + len(s['want_cli']) for s in sess)
    wrong = [(k, s['bad'][:2]) for k, s in enumerate(sess) if s['bad']]
    sent = sum(sum(s['sent'].values()) for s in sess)
    kd = kernel_drops({px.ports[0], srv_port} | {s['c'].port for s in sess})
    print('soak_q3: %d sessions, %.1f s, %d of %d datagrams replayed (%.0f/s), %d arrived '
          'byte-identical, %d missing, %d sessions with wrong datagrams; waits for causal order '
          '%d; worst lateness %.0f ms; kernel socket drops %d'
          % (nsess, t_end - t0, done, total, sent / (t_end - t0),
             sum(s['ok'] for s in sess), missing, len(wrong), blocked, late_max * 1000, kd))
    check(done == total, 'only %d of %d datagrams were replayed in %.0f s (slipgate too slow, '
          'or lost datagrams held sessions up)' % (done, total, t_end - t0))
    check(not wrong, '%d sessions got datagrams that differ from the capture: %s'
          % (len(wrong), wrong[:4]))
    check(missing == 0, '%d datagrams never arrived (kernel drops %d)' % (missing, kd))
    print(rss.check_decoding(t0, t_end, 'soak_q3', sanitized(h.exe)))
    st = stop_ok(px, 'after the soak: ')
    route = stats_route(st)
    by_port = sessions_by_port(route)
    files = []
    totals = collections.Counter()
    for k, s in enumerate(sess):
        ss = by_port.get(s['c'].port, [])
        check(len(ss) == 1, 'session %d: %d sessions in stats' % (k, len(ss)))
        x = ss[0]
        want = (s['sent']['c2s'], s['bytes']['c2s'], s['sent']['s2c'], s['bytes']['s2c'])
        check(counters_of(x) == want, 'session %d: counters %s, expected %s'
              % (k, counters_of(x), want))
        check(not session_drops(x), 'session %d: drops %s' % (k, session_drops(x)))
        d = x.get('decode') or {}
        check(d.get('errors') == 0 and d.get('reencoded') == d.get('reencode_identical')
              and d.get('reencoded') == (d.get('messages') if hold else 0)
              and d.get('messages', 0) > 0,
              'session %d (%s): decode %r, first error %r'
              % (k, s['cap'].name, d, x.get('first_error')))
        for key in ('messages', 'reencoded', 'reencode_identical', 'errors'):
            totals[key] += d.get(key, 0)
        if '--record' in extra:
            check(x.get('demo') and os.path.exists(x['demo']), 'session %d: no demo: %r'
                  % (k, x.get('demo')))
            files.append(x['demo'])
    if not files:
        print('stats: %d messages decoded, %d decode errors' % (totals['messages'],
                                                              totals['errors']))
        return
    r = subprocess.run([h.exe, 'demo', 'info'] + files, capture_output=True, timeout=60)
    out = r.stdout.decode(errors='replace')
    errs = re.findall(r'^errors:\s+(.*)$', out, re.M)
    check(r.returncode == 0 and len(errs) == nsess and all(e == '0' for e in errs),
          'slipgate demo info on the %d recorded demos: exit %d, errors lines %s'
          % (nsess, r.returncode, collections.Counter(errs)))
    print('stats: %d messages decoded, %d rebuilt, %d byte-identical, %d decode errors; '
          '%d demos read with 0 errors' % (totals['messages'], totals['reencoded'],
                                           totals['reencode_identical'], totals['errors'],
                                           len(files)))


# ================================================================ server faults

def ticker_roundtrips(c, dest, prefix, count, interval, replies):
    """Send `count` datagrams prefix+N every `interval` s; collect replies
    (payload -> time) meanwhile.  Returns [(payload, send time)]."""
    out = []
    for k in range(count):
        p = prefix + b' %d' % k
        c.send(p, dest)
        out.append((p, time.monotonic()))
        end = time.monotonic() + interval
        for _ in range(100):
            left = end - time.monotonic()
            if left <= 0:
                break
            r = c.recv_one(left)
            if r is not None:
                replies.append((r[0], r[1], time.monotonic()))
    return out


def collect(c, replies, seconds):
    for data, src in c.recv(seconds):
        replies.append((data, src, time.monotonic()))


@with_resources
def case_server_restart(h, res):
    srv1 = res.add(FixedEcho(0))
    port = srv1.port
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', '127.0.0.1:%d' % port])
    dest = (V4, px.ports[0])
    c = h.client(V4)
    replies = []
    a = ticker_roundtrips(c, dest, b'before', 25, 0.02, replies)       # 0.5 s up
    time.sleep(0.1)
    collect(c, replies, 0.1)
    up1 = {src for _, src, _ in srv1.snapshot()}
    srv1.close()
    t_down = time.monotonic()
    gap = ticker_roundtrips(c, dest, b'gap', 50, 0.02, replies)        # 1 s down
    check(px.alive(), 'slipgate died while the server was down (status %s)' % px.proc.poll())
    srv2 = None
    for _ in range(20):  # the port was free a moment ago; someone may take it
        try:
            srv2 = res.add(FixedEcho(port))
            break
        except OSError:
            time.sleep(0.05)
    check(srv2 is not None, 'could not bind the server port %d again' % port)
    t_up = time.monotonic()
    b = ticker_roundtrips(c, dest, b'after', 50, 0.02, replies)        # 1 s up again
    collect(c, replies, 0.3)
    check(px.alive(), 'slipgate died after the server restart (status %s)' % px.proc.poll())
    got = {data for data, src, _ in replies if src == dest}
    lost_a = [p for p, _ in a if TAG + p not in got]
    lost_b = [p for p, _ in b if TAG + p not in got]
    gap_echoed = [p for p, _ in gap if TAG + p in got]
    up2 = {src for _, src, _ in srv2.snapshot()}
    print('server down %.2f s: %d datagrams sent meanwhile, %d echoed; before: %d/%d echoed; '
          'after the restart: %d/%d echoed'
          % (t_up - t_down, len(gap), len(gap_echoed), len(a) - len(lost_a), len(a),
             len(b) - len(lost_b), len(b)))
    check(not lost_a, 'before the restart %d datagrams were not echoed: %s'
          % (len(lost_a), lost_a[:5]))
    check(not gap_echoed, 'datagrams sent while no server listened were echoed: %s'
          % gap_echoed[:3])
    check(not lost_b, 'after the server came back %d of %d datagrams were not echoed (first '
          'lost: %s); the session must carry on' % (len(lost_b), len(b), lost_b[:5]))
    check(up1 == up2 and len(up1) == 1, 'the restarted server saw the session from %s, the first '
          'from %s: the session must keep its upstream socket' % (up2, up1))
    check(not px.session_ends(), 'a session ended: %s' % [m.string for m in px.session_ends()])
    st = stop_ok(px)
    route = stats_route(st)
    ss = sessions_by_port(route).get(c.port, [])
    check(len(ss) == 1 and route.get('sessions_total') == 1,
          'stats: %d sessions for the client, sessions_total %s (expected one session throughout)'
          % (len(ss), route.get('sessions_total')))
    s = ss[0]
    cnt = s['counters']
    sent = len(a) + len(gap) + len(b)
    accounted = cnt['c2s_packets'] + sum(cnt['drops'].values())
    check(accounted == sent, 'stats: c2s_packets %d + drops %d = %d, the client sent %d: every '
          'datagram must be either relayed or counted as dropped'
          % (cnt['c2s_packets'], sum(cnt['drops'].values()), accounted, sent))
    check(cnt['s2c_packets'] == len(a) + len(b), 'stats: s2c_packets %d, the servers echoed %d'
          % (cnt['s2c_packets'], len(a) + len(b)))
    print('stats: c2s_packets %d, drops %s (datagrams sent to the dead port are relayed as far '
          'as the kernel: it reports no error for an unconnected socket)'
          % (cnt['c2s_packets'], {k: v for k, v in cnt['drops'].items() if v}))


@with_resources
def case_server_unreachable_then_up(h, res):
    port = dead_port()  # outside the ephemeral range: no client socket of ours can take it
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', '127.0.0.1:%d' % port])
    dest = (V4, px.ports[0])
    c = h.client(V4)
    replies = []
    early = ticker_roundtrips(c, dest, b'nobody', 20, 0.025, replies)  # 0.5 s, nothing listens
    check(px.alive(), 'slipgate died sending to a port nobody listens on (status %s)'
          % px.proc.poll())
    check(not replies, 'replies while no server listened: %s' % replies[:3])
    srv = None
    for _ in range(20):
        try:
            srv = res.add(FixedEcho(port))
            break
        except OSError:
            time.sleep(0.05)
    if srv is None:
        raise Skip('the free port %d was taken by another program before the server started'
                   % port)
    later = ticker_roundtrips(c, dest, b'up', 30, 0.02, replies)
    collect(c, replies, 0.3)
    got = {data for data, src, _ in replies if src == dest}
    lost = [p for p, _ in later if TAG + p not in got]
    print('%d datagrams while nothing listened (none answered), then %d/%d echoed once the '
          'server was up' % (len(early), len(later) - len(lost), len(later)))
    check(not lost, '%d of %d datagrams sent after the server started were not echoed: %s'
          % (len(lost), len(later), lost[:5]))
    check(len({src for _, src, _ in srv.snapshot()}) == 1, 'the server saw several sources')
    st = stop_ok(px)
    route = stats_route(st)
    check(route.get('sessions_total') == 1, 'stats: sessions_total %s, expected 1 (the first '
          'datagrams\' session carries on)' % route.get('sessions_total'))
    s = route['sessions'][0]
    cnt = s['counters']
    accounted = cnt['c2s_packets'] + sum(cnt['drops'].values())
    check(accounted == len(early) + len(later), 'stats: c2s_packets %d + drops %d != %d sent'
          % (cnt['c2s_packets'], sum(cnt['drops'].values()), len(early) + len(later)))
    check(cnt['s2c_packets'] == len(later), 'stats: s2c_packets %d, expected %d'
          % (cnt['s2c_packets'], len(later)))
    print('stats: c2s_packets %d, s2c_packets %d, drops %s'
          % (cnt['c2s_packets'], cnt['s2c_packets'],
             {k: v for k, v in cnt['drops'].items() if v}))


@with_resources
def case_client_vanishes(h, res):
    srv = res.add(ServerSide(responder=lambda port, data: TAG + data))
    px = h.proxy(args=['-l', '127.0.0.1:$P0', '-s', srv.addr, '+set', 'idle_timeout', '1s'])
    dest = (V4, px.ports[0])
    ups = UpstreamMap(px)
    gone = h.client(V4)
    stay = h.client(V4)
    for k in range(5):
        gone.send(b'gone %d' % k, dest)
        r = gone.recv_one(WAIT)
        check(r == (TAG + b'gone %d' % k, dest), 'echo %d for the vanishing client: %r' % (k, r))
    t_last = time.monotonic()
    up = ups.get(gone.port, 2.0)
    check(up is not None, 'no session start line for client port %d' % gone.port)
    check(up in udp_ports_bound(), 'upstream port %d of the live session is not bound' % up)
    # The other client keeps talking (its session must live on).
    mark_ok = []
    end_line = None
    for k in range(60):  # up to 3 s
        stay.send(b'stay %d' % k, dest)
        r = stay.recv_one(WAIT)
        check(r == (TAG + b'stay %d' % k, dest), 'the staying client lost echo %d: %r' % (k, r))
        mark_ok.append(k)
        hit = px.wait_for_log(r'session end reason=idle client=127\.0\.0\.1:%d\b' % gone.port,
                              0.05)
        if hit:
            end_line = hit
            break
    check(end_line is not None, 'no "session end reason=idle client=127.0.0.1:%d" line within '
          '%.1f s of the client\'s last datagram (idle_timeout 1s)'
          % (gone.port, time.monotonic() - t_last))
    dt = end_line[0] - t_last
    check(IDLE_MIN <= dt <= IDLE_MAX, 'idle end logged %.2f s after the last datagram, expected '
          '%.2f..%.2f s' % (dt, IDLE_MIN, IDLE_MAX))
    # Freed: its upstream socket is closed.
    bound = True
    for _ in range(40):
        bound = up in udp_ports_bound()
        if not bound:
            break
        time.sleep(0.05)
    check(not bound, 'upstream port %d still bound 2 s after the session ended' % up)
    # The server answers the dead session's port: nobody gets it.
    for k in range(5):
        srv.send(b'late reply %d' % k, up)
    time.sleep(0.1)
    stray = gone.recv(0.3)
    check(not stray, 'the vanished client received %d datagrams after its session ended: %s'
          % (len(stray), stray[:3]))
    for k in range(5):
        stay.send(b'stay after %d' % k, dest)
        r = stay.recv_one(WAIT)
        check(r == (TAG + b'stay after %d' % k, dest),
              'the staying client after the late replies: %r' % (r,))
    extra = stay.recv(0.2)
    check(not extra, 'the staying client received stray datagrams: %s' % extra[:3])
    check(px.alive(), 'slipgate died (status %s)' % px.proc.poll())
    # The vanished client comes back: a new session.
    gone.send(b'back', dest)
    r = gone.recv_one(WAIT)
    check(r == (TAG + b'back', dest), 'the returning client got %r' % (r,))
    up2 = ups.get(gone.port, 2.0)
    st = stop_ok(px)
    route = stats_route(st)
    ss = sorted(sessions_by_port(route).get(gone.port, []), key=lambda s: s['id'])
    check(len(ss) == 2, 'stats: %d sessions for the vanishing client, expected 2 (ended, then '
          'new)' % len(ss))
    first = ss[0]
    check(first.get('state') == 'ended' and first.get('end_reason') == 'idle',
          'stats: first session state %r reason %r, expected ended / idle'
          % (first.get('state'), first.get('end_reason')))
    check(counters_of(first)[0] == 5 and counters_of(first)[2] == 5,
          'stats: first session counters %s' % (counters_of(first),))
    check(first.get('upstream_port') == up, 'stats: upstream_port %r, log said %d'
          % (first.get('upstream_port'), up))
    drops = {k: v for k, v in route['counters']['drops'].items() if v}
    check(not drops, 'stats: route drops %s (the late replies went to a closed port; nothing '
          'should have reached slipgate)' % drops)
    print('idle end %.2f s after the last datagram; upstream port %d closed; 5 late server '
          'replies to it went nowhere; the client came back as a new session (upstream %s)'
          % (dt, up, up2))


# ================================================================ replay / record

def start_replay_proxy(h, srv, extra, exe=None, prefix=(), name=None, lifetime=60.0):
    # -v: a session's "session start" line (UpstreamMap) is at debug until the server answers
    args = list(prefix) + ['-v', '-l', '127.0.0.1:$P0', '-s', srv.addr, '-p', 'q3',
                           '+set', 'new_sessions_per_source', '1000'] + list(extra)
    if exe is None:
        return h.proxy(args=args, lifetime=lifetime, name=name)
    p = harness.Proxy(exe, h.dir, name or 'proxy%d' % len(h.proxies))
    h.proxies.append(p)
    return p.start(None, args, lifetime=lifetime)


def replay_case(h, res, name):
    cap = Capture(name)
    srv = res.add(ServerSide())
    demos = h.path('demos')
    px = start_replay_proxy(h, srv, ['+set', 'reencode', 'always', '--record', demos])
    ups = UpstreamMap(px)
    rep = Replay(h, px, srv, ups, cap, hold=True).run()
    check(not rep.problems, '%s: %d problems in the replay:\n  %s'
          % (name, len(rep.problems), '\n  '.join(rep.problems)))
    st = stop_ok(px)
    route = stats_route(st)
    game = check_replay_sessions(rep, route, decoded=True, reencode=True)
    check(game is not None, 'no game session in the stats')
    d = game['decode']
    check(game.get('demos') == 1 and game.get('demo'), 'stats: demos %r demo %r, expected one'
          % (game.get('demos'), game.get('demo')))
    rc, fields, out = demo_info(h.exe, game['demo'])
    check(rc == 0 and fields.get('errors') == '0', 'slipgate demo info %s: exit %d\n%s'
          % (game['demo'], rc, out))
    msgs = demo_messages(fields)
    ref = offline_demo(h.exe, h.dir, cap)
    with open(game['demo'], 'rb') as f:
        live = f.read()
    check(live == ref, 'the live demo (%d bytes) differs from `slipgate pcap decode --record`\'s '
          'demo of the same capture (%d bytes); first difference at byte %s'
          % (len(live), len(ref), next((i for i in range(min(len(live), len(ref)))
                                         if live[i] != ref[i]), min(len(live), len(ref)))))
    others = [s for s in route['sessions'] if s is not game]
    print('%s: %d datagrams replayed in %.1f s (%d held fragments at most), all byte-identical '
          'at the other end; %d sessions (%d status queries); game session: %d messages, '
          '%d rebuilt, %d byte-identical, 0 decode errors; demo %d messages (%d gamestates, '
          '%d snapshots), errors 0, identical to the offline decode\'s; %d server datagrams '
          'skipped (answers to ports outside the replay)'
          % (name, rep.total_sent(), rep.elapsed, rep.held_max, len(route['sessions']),
             len(others), d['messages'], d['reencoded'], d['reencode_identical'], msgs[0],
             msgs[1], msgs[2], rep.skipped))


@with_resources
def case_replay_ioq71_nat(h, res):
    """NAT rebinding: the ioquake3 71 capture replayed with the client's
    second half sent from a second socket (a new source port of the same
    host).  The qport in its datagrams names the player: one session
    follows it (upstream socket kept, so the server sees one client),
    decoding goes on with 0 errors, every message is still rebuilt
    byte-identical and the recording is one demo, identical to the offline
    decode of the whole capture."""
    cap = Capture('ioq71')
    game = [d for d in cap.game() if d.c2s and not d.payload.startswith(q3cap.OOB)]
    move = game[len(game) // 2]
    qport = struct.unpack_from('<H', move.payload, 4)[0]
    srv = res.add(ServerSide())
    demos = h.path('demos')
    px = start_replay_proxy(h, srv, ['+set', 'reencode', 'always', '--record', demos])
    ups = UpstreamMap(px)
    rep = Replay(h, px, srv, ups, cap, hold=True, move_at=move.index).run()
    check(rep.moved_from is not None, 'the replay never reached datagram %r' % move)
    check(not rep.problems, '%d problems in the replay:\n  %s'
          % (len(rep.problems), '\n  '.join(rep.problems)))
    new_port = rep.port_of(cap.game_client)
    moved = r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d \(qport %d\)' % (
        rep.moved_from, new_port, qport)
    check(px.wait_count_log(moved, 1) == 1, 'no (or more than one) "%s" line in the log' % moved)
    st = stop_ok(px)
    route = stats_route(st)
    check(not sessions_by_port(route).get(rep.moved_from),
          'a session is still named after the old port %d' % rep.moved_from)
    game_s = check_replay_sessions(rep, route, decoded=True, reencode=True)
    check(game_s is not None, 'no game session in the stats')
    check(game_s.get('demos') == 1 and game_s.get('demo'), 'stats: demos %r demo %r, expected one'
          % (game_s.get('demos'), game_s.get('demo')))
    with open(game_s['demo'], 'rb') as f:
        live = f.read()
    check(live == offline_demo(h.exe, h.dir, cap),
          'the live demo differs from the offline decode of the whole capture')
    d = game_s['decode']
    print('client moved from port %d to %d at %r (qport %d): one session, %d messages, %d '
          'rebuilt, 0 decode errors, one demo identical to the offline decode'
          % (rep.moved_from, new_port, move, qport, d['messages'], d['reencoded']))


def q3_solve_challenge(seq, checksum):
    """The challenge c with c ^ (seq * c) == checksum (mod 2**32), bit by
    bit from the lowest (bit i of seq * c depends on bits <= i of c)."""
    cands = [0]
    for i in range(32):
        mask = (2 << i) - 1
        cands = [c | b for c in cands for b in (0, 1 << i)
                 if ((c | b) ^ (seq * (c | b)) ^ checksum) & mask == 0][:64]
    return [c for c in cands if (c ^ (seq * c)) & 0xffffffff == checksum]


@with_resources
def case_replay_ioq71_nat_forged(h, res):
    """NAT rebinding needs more than the qport: during the ioquake3 71
    replay, datagrams with the player's qport come from another port of the
    same host: an older one of the capture (stale sequence), the next one
    with its checksum spoiled, and one far ahead (+100000) with a checksum
    that verifies.  None moves the session, reaches the server or is
    answered (drops.rebind counts them, a warning says why); the replay goes
    on, and the genuine move later still happens, once."""
    cap = Capture('ioq71')
    check(cap.checksum, 'the ioq71 capture carries no checksum')
    game = [d for d in cap.game() if d.c2s and not d.payload.startswith(q3cap.OOB)]
    at, move = game[len(game) // 4], game[len(game) // 2]
    qport = struct.unpack_from('<H', at.payload, 4)[0]
    seq = struct.unpack_from('<I', at.payload, 0)[0] & 0x7fffffff
    challenge = [c for c in q3_solve_challenge(seq, struct.unpack_from('<I', at.payload, 6)[0])
                 if all((c ^ (s * c)) & 0xffffffff == k for s, k in
                        ((struct.unpack_from('<I', g.payload, 0)[0] & 0x7fffffff,
                          struct.unpack_from('<I', g.payload, 6)[0]) for g in game[:50]))]
    check(len(challenge) == 1, 'cannot recover the challenge from the capture: %r' % challenge)
    c = challenge[0]
    stale = game[len(game) // 4 - 10].payload
    spoiled = bytearray(at.payload)
    spoiled[6] ^= 0x5a
    far = bytearray(at.payload)
    far_seq = seq + 100000
    struct.pack_into('<I', far, 0, far_seq | (struct.unpack_from('<I', at.payload, 0)[0]
                                               & 0x80000000))
    struct.pack_into('<I', far, 6, (c ^ (far_seq * c)) & 0xffffffff)
    forged = [('stale', stale), ('checksum', bytes(spoiled)), ('far ahead', bytes(far))]
    srv = res.add(ServerSide())
    px = start_replay_proxy(h, srv, ['+set', 'reencode', 'always'])
    ups = UpstreamMap(px)
    seen = {}

    def forge(rep):
        f = h.client(V4)
        up = rep.upstream[cap.game_client]
        for what, payload in forged:
            f.send(payload, rep.dest)
            got = srv.take(up, 1, 0.3)
            check(not got, 'the forged (%s) datagram reached the server: %r' % (what, got[:1]))
        got = f.recv(0.2)
        check(not got, 'the forging port was answered: %r' % got[:1])
        check(px.count_log(r'client moved from') == 0,
              'a forged datagram moved the session: %s' % px.log_lines()[-3:])
        seen['port'] = f.port

    rep = Replay(h, px, srv, ups, cap, hold=True, move_at=move.index,
                 before={at.index: forge}).run()
    check('port' in seen, 'the replay never reached datagram %r' % at)
    check(rep.moved_from is not None, 'the replay never reached datagram %r' % move)
    check(not rep.problems, '%d problems in the replay:\n  %s'
          % (len(rep.problems), '\n  '.join(rep.problems)))
    warn = (r'(?i)warn.*datagram\(s\) with a player\'s qport from another port of their host '
            r'dropped.*127\.0\.0\.1:%d' % seen['port'])
    check(px.wait_count_log(warn, 1) == 1, 'expected one "%s" warning' % warn)
    moved = r'client moved from 127\.0\.0\.1:%d to 127\.0\.0\.1:%d \(qport %d\)' % (
        rep.moved_from, rep.port_of(cap.game_client), qport)
    check(px.wait_count_log(moved, 1) == 1 and px.count_log(r'client moved from') == 1,
          'expected exactly one "%s" line' % moved)
    st = stop_ok(px)
    route = stats_route(st)
    drops = route['counters']['drops']
    check(drops.get('rebind') == 3, 'stats: drops.rebind %r, expected 3' % drops.get('rebind'))
    check(route.get('client_moves') == 1, 'stats: client_moves %r' % route.get('client_moves'))
    game_s = check_replay_sessions(rep, route, decoded=True, reencode=True)
    check(game_s is not None, 'no game session in the stats')
    print('3 forged datagrams with qport %d from port %d (stale, bad checksum, +100000) '
          'dropped, the session stayed; the genuine move %d -> %d followed'
          % (qport, seen['port'], rep.moved_from, rep.port_of(cap.game_client)))


def verify_demo(exe, path, keyfile, *extra):
    """`slipgate demo verify PATH --keyfile KEYFILE`: (exit status, the line)."""
    r = subprocess.run([exe, 'demo', 'verify', path, '--keyfile', keyfile] + list(extra),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode(errors='replace').strip(), r.stderr.decode(errors='replace')


def make_key(h, name):
    """`slipgate keygen --out DIR/NAME`: the secret key's path and the public key line."""
    prefix = h.path(name)
    r = subprocess.run([h.exe, 'keygen', '--out', prefix], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    check(r.returncode == 0, 'slipgate keygen: exit %d\n%s' % (r.returncode, r.stderr))
    check(os.stat(prefix).st_mode & 0o777 == 0o600, 'the secret key is not mode 0600')
    line = r.stdout.decode().strip()
    check(line.startswith('slipgate-pub 1 '), 'keygen printed %r' % line)
    return prefix, line


@with_resources
def case_replay_signed(h, res):
    """Signed recordings with real traffic: the ioquake3 71 capture replayed
    through slipgate with `sign_key` (checkpoints every second, the replay
    paced over a few seconds).  The demo is the same as without signing
    (the offline decode's), and `demo verify` says "authentic, whole"; one
    byte edited says "modified"; another key says "signed by another key".
    Then the first 60% of the capture again, and slipgate killed with
    SIGKILL in the middle of the game: the demo verifies "authentic up to
    byte N", N being the bytes of its last checkpoint, short of the file."""
    cap = Capture('ioq71')
    key, pub = make_key(h, 'league')
    other, _ = make_key(h, 'other')
    srv = res.add(ServerSide())
    demos = h.path('demos')
    sign = ['+set', 'reencode', 'always', '--record', demos, '+set', 'sign_key', key,
            '+set', 'sign_interval', '1s']
    px = start_replay_proxy(h, srv, sign)
    rep = Replay(h, px, srv, UpstreamMap(px), cap, hold=True, pace=0.002).run()
    check(not rep.problems, '%d problems in the replay:\n  %s'
          % (len(rep.problems), '\n  '.join(rep.problems)))
    check(px.count_log(r'signing recordings with key %s' % pub.split()[2]) == 1,
          'no "signing recordings with key ID" line in the log')
    st = stop_ok(px)
    game = check_replay_sessions(rep, stats_route(st), decoded=True, reencode=True)
    check(game is not None and game.get('demos') == 1, 'expected one demo')
    path = game['demo']
    with open(path, 'rb') as f:
        live = f.read()
    check(live == offline_demo(h.exe, h.dir, cap),
          'the signed demo differs from the offline decode of the capture')
    with open(path + '.sig') as f:
        sig = f.read()
    cps = sig.count('\ncp ')
    check(cps >= 3, 'the .sig has %d checkpoints over a %.1f s replay; expected one a second'
          % (cps, rep.elapsed))
    rc, line, err = verify_demo(h.exe, path, key + '.pub')
    check(rc == 0 and line.endswith('authentic, whole (%d bytes, ' % len(live)
                                     + line.split('bytes, ')[1]) and 'authentic, whole' in line,
          'verify of the signed demo: exit %d: %s %s' % (rc, line, err))
    rc_pub, line_pub, _ = verify_demo(h.exe, path, key, '--json')  # the secret file's public half
    check(rc_pub == 0 and '"verdict":"whole"' in line_pub, 'verify --json: %s' % line_pub)
    rc2, line2, _ = verify_demo(h.exe, path, other + '.pub')
    check(rc2 == 1 and 'signed by another key (id %s)' % pub.split()[2] in line2,
          'verify with another key: exit %d: %s' % (rc2, line2))

    # One byte edited in the middle.
    edited = h.path('edited.dm_71')
    pos = len(live) // 2
    with open(edited, 'wb') as f:
        f.write(live[:pos] + bytes([live[pos] ^ 0x01]) + live[pos + 1:])
    shutil.copyfile(path + '.sig', edited + '.sig')
    rc3, line3, _ = verify_demo(h.exe, edited, key + '.pub')
    m = re.search(r'modified at or after byte (\d+) ', line3)
    check(rc3 == 1 and m and int(m.group(1)) <= pos,
          'verify of the edited demo: exit %d: %s' % (rc3, line3))
    rc4, line4, _ = verify_demo(h.exe, h.path('league.pub'), key + '.pub')
    check(rc4 == 1 and 'no signature' in line4, 'verify of an unsigned file: %s' % line4)

    # kill -9 in the middle of the game.
    cut = Capture('ioq71')
    cut.dgrams = cut.dgrams[:len(cut.dgrams) * 6 // 10]
    srv2 = res.add(ServerSide())
    demos2 = h.path('demos2')
    sign[4] = demos2
    px2 = start_replay_proxy(h, srv2, sign)
    rep2 = Replay(h, px2, srv2, UpstreamMap(px2), cut, hold=True, pace=0.002).run()
    check(not rep2.problems, 'problems in the cut replay: %s' % rep2.problems[:5])
    px2.kill()
    files = [os.path.join(demos2, f) for f in os.listdir(demos2) if f.endswith('.dm_71')]
    check(len(files) == 1, 'after kill -9: demos %r' % os.listdir(demos2))
    size = os.path.getsize(files[0])
    with open(files[0] + '.sig') as f:
        sig2 = f.read()
    last = [l for l in sig2.split('\n') if l.startswith('cp ')][-1].split()
    check(last[5] == '0', 'the last checkpoint after kill -9 is marked final: %s' % last)
    rc5, line5, _ = verify_demo(h.exe, files[0], key + '.pub')
    check(rc5 == 0 and line5.split(': ', 1)[1].startswith('authentic up to byte %s / message %s '
                                                          '(recording cut at ' % (last[2], last[3])),
          'verify after kill -9: exit %d: %s' % (rc5, line5))
    check(int(last[2]) <= size, 'the last checkpoint signs more than the file holds')
    print('signed demo %d bytes, %d checkpoints: %s; one byte edited at %d: %s; after kill -9: '
          '%d of %d bytes signed: %s' % (len(live), cps, line, pos, line3, int(last[2]), size,
                                         line5))


@with_resources
def case_replay_ioq68(h, res):
    replay_case(h, res, 'ioq68')


@with_resources
def case_replay_ioq68_repeat(h, res):
    """Determinism: the protocol-68 capture replayed SG_REPEAT_RUNS times
    (default 20; at most REPEAT_SECONDS in all) under `reencode always`,
    each time through a fresh slipgate, must decode and rebuild the game
    session the same way, with zero decode and zero rebuild errors.  The
    replay is lock-step except that every server datagram of the game
    that the client answers right away goes out together with that
    answer, while slipgate is stopped and its listening socket is already
    readable (Replay._cross): the poll then reports the client's socket
    first.  Issue 25 item 6: a client datagram was decoded before the
    server datagram it answers, whose server command keys its scrambling
    ("read or write past the end of a message", and a rebuild error)."""
    runs = int(os.environ.get('SG_REPEAT_RUNS', '20'))
    cap = Capture('ioq68')
    game = [d for d in cap.dgrams if d.client == cap.game_client]
    sequenced = [d for d in game if not d.payload.startswith(q3cap.OOB)
                 and not is_partial(d.payload, d.c2s, cap.checksum)]
    # server datagrams the client answers right away (a client datagram next),
    # and those that follow client datagrams (every other one of them)
    cross = [d.index for d, n in zip(sequenced, sequenced[1:]) if not d.c2s and n.c2s]
    cross_back = [n.index for d, n in zip(sequenced, sequenced[1:])
                  if d.c2s and not n.c2s][::2]
    t0 = time.monotonic()
    done = 0
    results = collections.Counter()
    for i in range(runs):
        if time.monotonic() - t0 > REPEAT_SECONDS:
            break
        srv = res.add(ServerSide())
        px = start_replay_proxy(h, srv, ['+set', 'reencode', 'always'], name='run%d' % i)
        ups = UpstreamMap(px)
        rep = Replay(h, px, srv, ups, cap, hold=True, name='ioq68 run %d' % i,
                     cross=cross, cross_back=cross_back).run()
        check(not rep.problems, 'run %d: %d problems in the replay:\n  %s'
              % (i, len(rep.problems), '\n  '.join(rep.problems)))
        st = stop_ok(px, 'run %d: ' % i)
        game_s = check_replay_sessions(rep, stats_route(st), decoded=True, reencode=True)
        check(game_s is not None, 'run %d: no game session in the stats' % i)
        d = game_s['decode']
        results[(d['messages'], d['reencoded'], d['reencode_identical'])] += 1
        srv.close()
        done += 1
    check(done >= min(runs, 5), 'only %d of %d runs within %d s' % (done, runs, REPEAT_SECONDS))
    check(len(results) == 1, 'the runs decoded differently: %s' % dict(results))
    (msgs, rebuilt, same), = results.keys()
    print('ioq68 replayed %d times under reencode always in %.1f s, each time %d server '
          'datagrams sent together with their answer and %d together with the client '
          'datagrams before them: every run %d messages, %d rebuilt, %d byte-identical, 0 '
          'decode errors, 0 rebuild errors'
          % (done, time.monotonic() - t0, len(cross), len(cross_back), msgs, rebuilt, same))


@with_resources
def case_replay_ioq71(h, res):
    replay_case(h, res, 'ioq71')


@with_resources
def case_replay_oa71(h, res):
    replay_case(h, res, 'oa71')


def check_partial_demo(h, path, ref, limit, what):
    """The demo cut by the full disk: a prefix of the reference demo that
    `slipgate demo info` reads up to its last whole message."""
    with open(path, 'rb') as f:
        data = f.read()
    check(0 < len(data) <= limit, '%s: demo is %d bytes, the limit is %d'
          % (what, len(data), limit))
    check(len(data) < len(ref), '%s: the demo (%d bytes) is not shorter than the whole one (%d): '
          'the limit did not cut it' % (what, len(data), len(ref)))
    # A demo cut back to its last whole message may end with the game's
    # end-of-demo marker (-1, -1) written after the cut, where it fits.
    if ref[:len(data)] != data and data.endswith(b'\xff' * 8):
        check(ref[:len(data) - 8] == data[:-8],
              '%s: the cut demo (before its end marker) is not a prefix of the whole recording'
              % what)
        data = data[:-8]
    else:
        check(ref[:len(data)] == data, '%s: the cut demo is not a prefix of the whole recording'
              % what)
    whole = [b for b in demo_boundaries(ref) if b <= len(data)]
    rc, fields, out = demo_info(h.exe, path)
    check('messages' in fields, '%s: slipgate demo info could not read the cut demo (exit %d):\n%s'
          % (what, rc, out))
    msgs = demo_messages(fields)
    check(msgs[0] == len(whole) and msgs[1] == 1,
          '%s: demo info reads %d messages (%d gamestates); the file holds %d whole messages'
          % (what, msgs[0], msgs[1], len(whole)))
    err = fields.get('errors', '')
    check(not re.search(r'failed to decode|missing delta', err),
          '%s: demo info reports damaged messages: %r' % (what, err))
    stray = len(data) - (whole[-1] if whole else 0)
    return len(data), msgs[0], err, stray


def disk_full_run(h, res, what, exe_prefix, record_dir, limit, err_rx, reader=None,
                  before_stop=None):
    """Replay ioq71 with -p q3 --record into a directory that fills up.
    before_stop(px): called after the replay, before SIGTERM."""
    cap = Capture('ioq71')
    ref = offline_demo(h.exe, h.dir, cap)
    check(len(ref) > limit * 1.5, 'the reference demo (%d bytes) is too small for limit %d'
          % (len(ref), limit))
    srv = res.add(ServerSide())
    if exe_prefix:
        px = start_replay_proxy(h, srv, ['--record', record_dir], exe=exe_prefix[0],
                                prefix=list(exe_prefix[1:]) + [h.exe])
    else:
        px = start_replay_proxy(h, srv, ['--record', record_dir])
    ups = UpstreamMap(px)
    rep = Replay(h, px, srv, ups, cap, hold=False)
    try:
        rep.run()
    except Fail as e:
        rc = px.proc.poll()
        if rc is not None and rc < 0:
            raise Fail('%s: slipgate was killed by signal %d (%s) when its demo reached the '
                       'limit: %s' % (what, -rc, signal.Signals(-rc).name, e))
        raise
    rc = px.proc.poll()
    check(rc is None, '%s: slipgate exited with status %s during the replay' % (what, rc))
    check(not rep.problems, '%s: relaying was disturbed:\n  %s' % (what, '\n  '.join(rep.problems)))
    lines = [l for l in px.log_lines() if re.search(r'(?i)record|demo', l)]
    stopped = [l for l in lines if re.search(r'recording stopped', l)]
    check(len(stopped) == 1, '%s: expected one "recording stopped" log line, got %d; demo lines:\n'
          '  %s' % (what, len(stopped), '\n  '.join(lines)))
    m = re.search(r'recording stopped: writing (\S+) failed: (.+)$', stopped[0])
    check(m, '%s: the line does not name the file and the error: %r' % (what, stopped[0]))
    check(re.search(err_rx, m.group(2)), '%s: the error in %r is not the expected one (/%s/)'
          % (what, stopped[0], err_rx))
    path = m.group(1)
    if before_stop:
        before_stop(px)
    st = stop_ok(px, what + ': ')
    route = stats_route(st)
    check_replay_sessions(rep, route, decoded=True, reencode=False)
    local = reader(path) if reader else path
    size, msgs, err, stray = check_partial_demo(h, local, ref, limit, what)
    check(stray == 0, '%s: %d stray bytes after the last whole message: the demo was not cut '
          'back to it' % (what, stray))
    # Relaying carried on after the failure: the demo's messages are the game
    # session's server messages from the gamestate on, so the first one that
    # did not fit is message `msgs` of those; the lock-step replay delivered
    # every datagram after it (checked above).
    server_msgs = [d for d in cap.dgrams if d.client == cap.game_client and not d.c2s
                   and d.payload[:4] != q3cap.OOB and not is_partial(d.payload, False,
                                                                       cap.checksum)]
    check(msgs < len(server_msgs), '%s: %d demo messages for %d server messages'
          % (what, msgs, len(server_msgs)))
    failed_at = server_msgs[msgs].index
    after = sum(1 for d in cap.dgrams if d.index > failed_at)
    check(after >= 50, '%s: the recording failed at capture datagram #%d, only %d datagrams '
          'before the end: the limit should cut the demo well before the end'
          % (what, failed_at, after))
    print('%s: %d datagrams relayed intact, %d of them after the failure; log: %s; the demo '
          'stopped at %d bytes (limit %d): demo info reads %d whole messages (errors: %s), '
          '%d stray bytes after the last whole message; exit 0 after SIGTERM'
          % (what, rep.total_sent(), after, stopped[0].split('] ', 2)[-1], size, limit, msgs, err,
             stray))
    other = [l for l in lines if 'recording stopped' not in l and re.search(r'(?i)error', l)]
    if other:
        print('other demo error lines: %s' % other)


@with_resources
def case_disk_full_recording(h, res):
    """RLIMIT_FSIZE (prlimit --fsize): a write past the limit fails with
    EFBIG -- and raises SIGXFSZ, whose default action kills the process
    unless it is ignored."""
    prlimit = shutil.which('prlimit')
    if not prlimit:
        raise Skip('prlimit (util-linux) not installed')
    limit = 8000  # the whole demo (it ends at the client's disconnect) is about 12.5 kB

    def lift(px):
        # The limit is the process's, not the demo's: lift it (the soft limit
        # up to the hard one) before the stop, so that the --stats file the
        # test reads, larger than the limit, can be written at the exit.
        r = subprocess.run([prlimit, '--pid', str(px.proc.pid), '--fsize=unlimited'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        check(r.returncode == 0, 'prlimit --pid %d --fsize=unlimited: %s'
              % (px.proc.pid, r.stdout.decode(errors='replace').strip()))

    demos = h.path('demos')
    disk_full_run(h, res, 'RLIMIT_FSIZE %d' % limit,
                  [prlimit, '--fsize=%d:unlimited' % limit, '--'],
                  demos, limit, r'(?i)too large|EFBIG', before_stop=lift)


@with_resources
def case_disk_full_tmpfs(h, res):
    """An 8 KiB tmpfs in a private mount namespace: ENOSPC.  A holder process
    keeps the namespace; slipgate runs inside it through nsenter; the demo is
    read back through /proc/HOLDER/root."""
    unshare, nsenter = shutil.which('unshare'), shutil.which('nsenter')
    if os.geteuid() != 0 or not unshare or not nsenter:
        raise Skip('needs root and unshare/nsenter to mount a tmpfs in a private namespace')
    mnt = h.path('tmpfs')
    os.makedirs(mnt)
    limit = 8192
    holder = subprocess.Popen(
        [unshare, '-m', '--propagation', 'private', 'sh', '-c',
         'mount -t tmpfs -o size=8k,mode=0755 slipgate-fault "$1" && echo mounted && exec sleep 90',
         'sh', mnt],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    res.pids.append(holder)
    line = b''
    sel = selectors.DefaultSelector()
    sel.register(holder.stdout, selectors.EVENT_READ)
    if sel.select(5.0):
        line = holder.stdout.readline()
    sel.close()
    if line.strip() != b'mounted':
        err = b''
        if holder.poll() is not None:
            err = holder.stderr.read()
        raise Skip('cannot mount a tmpfs in a private mount namespace: %s'
                   % err.decode(errors='replace').strip())
    check(not os.path.ismount(mnt), 'the tmpfs leaked into the test\'s mount namespace')
    root = '/proc/%d/root' % holder.pid
    disk_full_run(h, res, 'tmpfs 8 KiB', [nsenter, '-t', str(holder.pid), '-m', '--'],
                  mnt, limit, r'(?i)no space|ENOSPC',
                  reader=lambda p: _copy_out(root + p, h.path('cut-demo')))


def _copy_out(src, dst):
    shutil.copyfile(src, dst)
    return dst


# ---------------------------------------------------------------- anonymize

class OrderUpstreamMap(UpstreamMap):
    """With `anonymize yes` the log names no client port: the lock-step
    replay opens one session at a time, so the n-th new client port gets the
    n-th session's upstream port (from its "session start" line)."""

    def __init__(self, px):
        super().__init__(px)
        self.order = []
        self.assigned = {}

    def poll(self):
        with self.lock:
            lines = self.px.log_lines(self.idx)
            self.idx += len(lines)
            for line in lines:
                m = SESSION_START_RE.search(line)
                if m and int(m.group(2)) not in self.order:
                    self.order.append(int(m.group(2)))

    def get(self, client_port, timeout=0.0):
        end = time.monotonic() + timeout
        for _ in range(int(timeout / 0.005) + 2):
            self.poll()
            with self.lock:
                if client_port in self.assigned:
                    return self.assigned[client_port]
                free = [u for u in self.order if u not in self.assigned.values()]
                if free:
                    self.assigned[client_port] = free[0]
                    return free[0]
            if time.monotonic() >= end:
                break
            time.sleep(0.005)
        return None


def client_forms(ports, listen_port):
    """The client's address in the forms a file may hold it: text
    (127.0.0.1:PORT; 127.0.0.1_PORT in demo names) and binary (the 4 IP
    bytes next to the port in network order, either way round: an IP
    header's destination before the UDP source port, a sockaddr's port
    before its address; and the UDP header's pair of ports with the proxy's
    listen port, either direction)."""
    text, binary = [], []
    for p in ports:
        text += ['127.0.0.1:%d' % p, '127.0.0.1_%d' % p]
        pb = struct.pack('>H', p)
        binary += [b'\x7f\x00\x00\x01' + pb, pb + b'\x7f\x00\x00\x01',
                   struct.pack('>HH', p, listen_port), struct.pack('>HH', listen_port, p)]
    return text, binary


def binary_hit(data, b):
    """Is `b` in `data` other than as an IPv4 header's checksum followed by
    its source address?  (A pcap's header checksum of a packet from
    127.0.0.1 -- slipgate's own leg towards the server -- can equal a
    client port's bytes by chance: version 4, 5 words, UDP.)"""
    i = data.find(b)
    while i >= 0:
        if not (i >= 10 and data[i - 10] == 0x45 and data[i - 1] == 17):
            return True
        i = data.find(b, i + 1)
    return False


def find_client(paths, forms):
    """{path: [forms found]} over every file's name and bytes."""
    text, binary = forms
    hits = {}
    for path in paths:
        with open(path, 'rb') as f:
            data = f.read()
        found = [t for t in text if t.encode() in data or t in os.path.basename(path)]
        found += [b.hex() for b in binary if binary_hit(data, b)]
        if found:
            hits[path] = found
    return hits


def checksum16(data):
    if len(data) % 2:
        data += b'\0'
    s = sum(struct.unpack('>%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s


def pcap_packets(path):
    """(src ip, sport, dst ip, dport) of each packet of a libpcap LINKTYPE_RAW
    capture (IPv4), the IP and UDP checksums checked."""
    with open(path, 'rb') as f:
        data = f.read()
    check(len(data) >= 24 and struct.unpack_from('<I', data)[0] == 0xa1b2c3d4 and
          struct.unpack_from('<I', data, 20)[0] == 101, '%s: not a LINKTYPE_RAW pcap' % path)
    out, o = [], 24
    while o + 16 <= len(data):
        caplen, origlen = struct.unpack_from('<II', data, o + 8)
        pkt = data[o + 16:o + 16 + caplen]
        o += 16 + caplen
        check(caplen == origlen and pkt[0] == 0x45 and pkt[9] == 17,
              '%s: packet %d is not a whole IPv4 UDP packet' % (path, len(out)))
        check(checksum16(pkt[:20]) == 0xffff, '%s: packet %d: bad IP checksum' % (path, len(out)))
        pseudo = pkt[12:20] + struct.pack('>BBH', 0, 17, len(pkt) - 20)
        check(checksum16(pseudo + pkt[20:]) == 0xffff,
              '%s: packet %d: bad UDP checksum' % (path, len(out)))
        sport, dport = struct.unpack_from('>HH', pkt, 20)
        out.append((socket.inet_ntoa(pkt[12:16]), sport, socket.inet_ntoa(pkt[16:20]), dport))
    return out


def anonymize_run(h, res, mode, sign_key, anon_key):
    """The ioquake3 71 capture through slipgate with every writer slipgate
    has (log, --stats, demo, .sig, two pcap filters, textlog, inspect text
    and JSON, the HTTP pages) and `anonymize MODE`; the client moves to a
    new port halfway (NAT).  Returns (every file slipgate wrote, the client
    ports, the listen port, the stats' game session, the pcap's packets)."""
    cap = Capture('ioq71')
    game = [d for d in cap.game() if d.c2s and not d.payload.startswith(q3cap.OOB)]
    move = game[len(game) // 2]
    srv = res.add(ServerSide())
    out = h.path('anon-' + mode)
    os.mkdir(out)
    conf = ('anonymize %s\nanonymize_key "%s"\nsign_key "%s"\nsign_interval 1s\n'
            'http 127.0.0.1:$P1\n'
            'route main {\n    listen 127.0.0.1:$P0\n    server %s\n    protocol q3\n'
            '    reencode always\n    new_sessions_per_source 1000\n    record "%s"\n'
            '    filter pcap raw {\n        file "%s/cap.pcap"\n    }\n'
            '    filter pcap ng {\n        file "%s/cap.pcapng"\n        format pcapng\n    }\n'
            '    filter textlog {\n        file "%s/text.log"\n    }\n'
            '    filter inspect text {\n        level packets\n        output "%s/inspect.txt"\n'
            '    }\n'
            '    filter inspect json {\n        format json\n        output "%s/inspect.json"\n'
            '    }\n}\n' % (mode, anon_key, sign_key, srv.addr, out, out, out, out, out, out))
    px = h.proxy(config=conf, args=['-v'], name='anon_' + mode, lifetime=60.0)
    ups = UpstreamMap(px) if mode == 'no' else OrderUpstreamMap(px)
    rep = Replay(h, px, srv, ups, cap, hold=True, move_at=move.index).run()
    check(rep.moved_from is not None, 'the replay never reached datagram %r' % move)
    check(not rep.problems, '%d problems in the replay:\n  %s'
          % (len(rep.problems), '\n  '.join(rep.problems)))
    ports = [rep.moved_from, rep.port_of(cap.game_client)]
    ports += [rep.port_of(ep) for ep in rep.socks if rep.port_of(ep) not in ports]

    # The HTTP pages while the session lives.
    import urllib.request
    for page in ('metrics', 'api/routes', 'api/sessions', 'api/recordings'):
        with urllib.request.urlopen('http://127.0.0.1:%d/%s' % (px.ports[1], page),
                                    timeout=10) as r:
            body = r.read()
        with open(os.path.join(out, 'http-' + page.replace('/', '-')), 'wb') as f:
            f.write(body)
    sessions = json.loads(open(os.path.join(out, 'http-api-sessions'), 'rb').read())
    check(sessions, 'the HTTP API lists no session: %r' % sessions)
    st = stop_ok(px)
    with open(os.path.join(out, 'slipgate.log'), 'w') as f:
        f.write(px.log_text())
    route = stats_route(st)
    games = [s for s in route.get('sessions') or [] if s.get('demos')]
    check(len(games) == 1 and games[0].get('demo'), 'expected one session with a demo: %r'
          % route.get('sessions'))
    files = [px.stats_path, px.config_path, px.stdout_path]
    for root, _, names in os.walk(out):
        files += [os.path.join(root, n) for n in names]
    kinds = {'log': 'slipgate.log', 'stats': os.path.basename(px.stats_path),
             'demo name': os.path.basename(games[0]['demo']),
             '.sig': os.path.basename(games[0]['demo']) + '.sig', 'pcap': 'cap.pcap',
             'pcapng': 'cap.pcapng', 'textlog': 'text.log', 'inspect': 'inspect.txt',
             'inspect json': 'inspect.json', 'http sessions': 'http-api-sessions'}
    for k, name in kinds.items():
        check(any(os.path.basename(p) == name for p in files), 'no %s file (%s) in %r'
              % (k, name, files))
    files.remove(px.config_path)  # ours: it names no client
    return files, ports, px.ports[0], games[0], pcap_packets(os.path.join(out, 'cap.pcap')), kinds


@with_resources
def case_replay_anonymized(h, res):
    """`anonymize yes`: no file slipgate writes holds the client's address.
    The ioquake3 71 capture is replayed twice through slipgate with
    recording, signing, both pcap formats, textlog, inspect (text and JSON),
    --stats, the HTTP pages and the log kept, the client moving to a second
    port halfway.  With `anonymize no` every one of those files holds the
    client's address (127.0.0.1:PORT, or its IP bytes next to its port), so
    the search finds it; with `anonymize yes` none does, the client is
    anon-XXXXXXXX (one pseudonym across the port change) wherever it was
    named, the pcap's client legs come from one pseudonymous address in
    198.18.0.0/15 with valid checksums, and the signed demo verifies."""
    sign_key, pub = make_key(h, 'league')
    anon_key = h.path('state/anonymize.key')

    files, ports, listen, game, pkts, kinds = anonymize_run(h, res, 'no', sign_key, anon_key)
    check(not os.path.exists(anon_key), 'anonymize no made a key file')
    hits = find_client(files, client_forms(ports, listen))
    for k, name in kinds.items():
        check(any(os.path.basename(p) == name for p in hits),
              'anonymize no: the %s (%s) holds no client address: the search cannot find it'
              % (k, name))
    check(game['client'] == '127.0.0.1:%d' % ports[1], 'stats client %r' % game['client'])
    plain = {'%s:%d' % (a, p) for a, p, b, q in pkts} | {'%s:%d' % (b, q) for a, p, b, q in pkts}
    check({'127.0.0.1:%d' % p for p in ports[:2]} <= plain,
          'anonymize no: the pcap does not show the client: %s' % sorted(plain))

    files, ports, listen, game, pkts, _ = anonymize_run(h, res, 'yes', sign_key, anon_key)
    check(os.stat(anon_key).st_mode & 0o777 == 0o600, 'the anonymize key is not mode 0600')
    hits = find_client(files, client_forms(ports, listen))
    check(not hits, 'anonymize yes: the client address is in %s'
          % '; '.join('%s: %s' % (p, f) for p, f in sorted(hits.items())))
    token = game['client']
    check(re.fullmatch(r'anon-[0-9a-f]{8}', token), 'stats client %r, not a pseudonym' % token)
    check(token in os.path.basename(game['demo']), 'demo name %r' % game['demo'])
    with open(game['demo'] + '.sig') as f:
        check('\nmeta client %s\n' % token in f.read(), 'the .sig names another client')
    log = open([p for p in files if p.endswith('slipgate.log')][0]).read()
    check(re.search(r'client moved from %s to %s \(qport \d+\)' % (token, token), log),
          'no "client moved from %s to %s" line: one pseudonym across the port change' % (token, token))
    check('session start client=%s ' % token in log, 'no "session start client=%s"' % token)
    rc, line, err = verify_demo(h.exe, game['demo'], sign_key + '.pub')
    check(rc == 0 and 'authentic, whole' in line, 'verify: exit %d: %s %s' % (rc, line, err))
    client_side = set()
    for a, p, b, q in pkts:
        for addr, port in ((a, p), (b, q)):
            if addr != '127.0.0.1':
                client_side.add((addr, port))
    addrs = {a for a, _ in client_side}
    check(len(addrs) == 1 and all(socket.inet_aton(a)[0] == 198 and
                                  socket.inet_aton(a)[1] & 0xfe == 18 for a in addrs),
          'the pcap client legs: %s, expected one address in 198.18.0.0/15' % sorted(client_side))
    check(len(client_side) == len(set(ports)),
          'the pcap client legs: %s, expected %d ports (one per client port: %s)'
          % (sorted(client_side), len(set(ports)), ports))
    print('anonymized: client %s (ports %s) is %s; pcap client %s; %d files searched'
          % ('127.0.0.1', ports, token, sorted(client_side), len(files)))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
