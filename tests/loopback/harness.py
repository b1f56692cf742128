"""Helpers for the slipgate loopback tests (Python 3 standard library only).

Everything here talks only to 127.0.0.1 and ::1.  Every loop is bounded in
iterations and wall time, every process is started with a watchdog and is
killed by PID in a finally block (see Harness.close).

    EchoServer     in-process UDP peer (thread) that records every datagram and
                   its source address and, unless echo=False, answers with
                   tag + payload to the sender
    Client         one UDP socket bound to 127.0.0.1:0 or [::1]:0
    Proxy          the real slipgate binary: start with a config template or
                   arguments ($P0, $P1 ... are replaced by free listen ports),
                   stderr captured line by line, wait_for_log(), stop(), stats()
    free_port()    a UDP port that was free a moment ago (bind port 0, close)
    dead_port()    a free UDP port outside the ephemeral range (for "port unreachable")
    Harness        owns all of the above; close() tears everything down
"""

import errno
import json
import random
import os
import re
import selectors
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time

V4 = '127.0.0.1'
V6 = '::1'

SKIP = 77


class Fail(Exception):
    """A test assertion failed; the message says what differed."""


class Skip(Exception):
    """The case cannot run here (only used when ::1 cannot be bound)."""


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def family(host):
    return socket.AF_INET6 if ':' in host else socket.AF_INET


def fmt_addr(host, port):
    """ADDR:PORT as slipgate wants it: 127.0.0.1:P, [::1]:P."""
    if ':' in host:
        return '[%s]:%s' % (host, port)
    return '%s:%s' % (host, port)


def parse_hostport(text):
    """'127.0.0.1:5' -> ('127.0.0.1', 5); '[::1]:5' -> ('::1', 5)."""
    text = text.strip()
    if text.startswith('['):
        end = text.index(']')
        host, rest = text[1:end], text[end + 1:]
        check(rest.startswith(':'), 'no port in %r' % text)
        return host, int(rest[1:])
    host, sep, port = text.rpartition(':')
    check(sep == ':' and port.isdigit(), 'no port in %r' % text)
    return host, int(port)


def ipv6_unavailable_reason():
    """None when a UDP socket can be bound to [::1]:0, else why not."""
    if os.environ.get('SLIPGATE_TEST_FORCE_NO_IPV6'):
        return 'SLIPGATE_TEST_FORCE_NO_IPV6 is set'
    if not socket.has_ipv6:
        return 'Python was built without IPv6 support'
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    except OSError as e:
        return 'cannot create an AF_INET6 socket: %s' % e
    try:
        s.bind((V6, 0))
    except OSError as e:
        return 'cannot bind [::1]:0: %s' % e
    finally:
        s.close()
    return None


def require_ipv6():
    why = ipv6_unavailable_reason()
    if why:
        raise Skip('IPv6 loopback unavailable: ' + why)


def free_port():
    """A UDP port that is free on every loopback address right now.

    Binding [::]:0 with IPV6_V6ONLY off checks the IPv4 and IPv6 port spaces
    at once; without IPv6, 0.0.0.0:0.  The socket is closed again, so the
    port can be taken by someone else before slipgate binds it: Proxy.start
    retries with fresh ports when the proxy fails to bind.
    """
    if ipv6_unavailable_reason() is None:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(('::', 0))
            return s.getsockname()[1]
        finally:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(('0.0.0.0', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def port0_slots(config, args):
    """{k: route name or 'http'} for each $Pk that names only one listener.

    A `listen` line inside `route NAME {` (outside any block: the route
    `default`), `-l`/`--listen` in args (`default`), an `http` line or
    `+set http`.  Such a port can be 0: slipgate's ports_file says which
    port the kernel gave.
    """
    uses = {}

    def use(k, what):
        uses.setdefault(int(k), []).append(what)

    route, depth = 'default', 0
    for line in (config or '').splitlines():
        words = line.split('//')[0].split()
        m = re.match(r'\s*route\s+(\S+)\s*\{', line)
        if m and depth == 0:
            route = m.group(1)
        for k in re.findall(r'\$P(\d+)', line):
            if words and words[0] == 'listen':
                use(k, route)
            elif words and words[0] == 'http':
                use(k, 'http')
            else:
                use(k, None)
        depth += line.count('{') - line.count('}')
        if depth <= 0:
            route, depth = 'default', 0
    args = list(args)
    for i, a in enumerate(args):
        for k in re.findall(r'\$P(\d+)', a):
            prev = args[i - 1] if i else ''
            if prev in ('-l', '--listen'):
                use(k, 'default')
            elif prev == 'http' and i >= 2 and args[i - 2] == '+set':
                use(k, 'http')
            else:
                use(k, None)
    names = [w[0] for w in uses.values() if len(w) == 1 and w[0]]
    return {k: w[0] for k, w in uses.items()
            if len(w) == 1 and w[0] and names.count(w[0]) == 1}


def ephemeral_range():
    """The kernel's ephemeral port range (where bind(0) and connect pick)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def dead_port():
    """A UDP port nothing listens on, outside the ephemeral range.

    free_port() hands back an ephemeral port, which the next client socket
    the test opens may be given: a test that wants "port unreachable" from a
    dead server would then talk to its own client.  This picks a port below
    the ephemeral range (or above it) that is free now; only an explicit
    bind can take it afterwards.
    """
    lo, hi = ephemeral_range()
    spans = [(max(1024, lo - 8192), lo - 1), (hi + 1, min(65535, hi + 4096))]
    spans = [(a, b) for a, b in spans if a <= b]
    bound = udp_ports_bound()
    rng = random.Random()
    for _ in range(200):
        a, b = rng.choice(spans)
        port = rng.randint(a, b)
        if port in bound:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(('127.0.0.1', port))
        except OSError:
            continue
        finally:
            s.close()
        return port
    raise RuntimeError('no free UDP port outside the ephemeral range %d-%d' % (lo, hi))


def loopback_mtu():
    try:
        with open('/sys/class/net/lo/mtu') as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 0


def udp_ports_bound():
    """Local UDP ports bound on this host (from /proc/net/udp{,6})."""
    ports = set()
    for name in ('/proc/net/udp', '/proc/net/udp6'):
        try:
            with open(name) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 1 and ':' in fields[1]:
                        ports.add(int(fields[1].rsplit(':', 1)[1], 16))
        except OSError:
            pass
    return ports


def _big_buffers(sock):
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        except OSError:
            pass


class EchoServer:
    """A UDP "game server" on host:0 in a thread.

    Records (time, source, payload) of every datagram.  With echo=True it
    answers each datagram with tag + payload to its source.
    """

    MAX_LIFETIME = 120.0

    def __init__(self, host, tag=b'ECHO', echo=True):
        self.host = host
        self.tag = tag
        self.echo = echo
        self.sock = socket.socket(family(host), socket.SOCK_DGRAM)
        _big_buffers(self.sock)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.addr = fmt_addr(host, self.port)
        self.records = []
        self.errors = []
        self.lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='echo-%d' % self.port)
        self._thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        deadline = time.monotonic() + self.MAX_LIFETIME
        try:
            while not self._stop and time.monotonic() < deadline:
                for key, _ in sel.select(0.5):
                    if key.fileobj is self._wake_r:
                        return
                    for _ in range(256):  # bounded drain per wakeup
                        try:
                            data, src = self.sock.recvfrom(65536)
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError as e:
                            with self.lock:
                                self.errors.append(repr(e))
                            break
                        with self.lock:
                            self.records.append((time.monotonic(), src[:2], data))
                        if self.echo:
                            try:
                                self.sock.sendto(self.tag + data, src)
                            except OSError as e:
                                with self.lock:
                                    self.errors.append('sendto %s: %r' % (src, e))
        finally:
            sel.close()

    def snapshot(self):
        with self.lock:
            return list(self.records)

    def sources(self):
        return {src for _, src, _ in self.snapshot()}

    def close(self):
        self._stop = True
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        self._thread.join(5)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()


class Client:
    """One UDP socket bound to host:0 (not connected: replies are checked
    for their source address)."""

    def __init__(self, host):
        self.host = host
        self.sock = socket.socket(family(host), socket.SOCK_DGRAM)
        _big_buffers(self.sock)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.addr = (host, self.port)

    def send(self, data, dest):
        n = self.sock.sendto(data, dest)
        check(n == len(data), 'short send %d of %d bytes' % (n, len(data)))

    def recv(self, timeout):
        """All datagrams that arrive within `timeout` s after the first one,
        or [] if none does; a list of (payload, source)."""
        out = []
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        try:
            for _ in range(10000):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if not sel.select(left):
                    break
                try:
                    data, src = self.sock.recvfrom(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionRefusedError:
                    continue
                out.append((data, src[:2]))
        finally:
            sel.close()
        return out

    def recv_one(self, timeout):
        """The first datagram within `timeout` s, or None."""
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        try:
            for _ in range(1000):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                try:
                    data, src = self.sock.recvfrom(65536)
                    return data, src[:2]
                except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                    continue
        finally:
            sel.close()
        return None

    def close(self):
        self.sock.close()


def pump(flows, dest, tag, window=64 * 1024, max_packets=32, timeout=15.0, stall=3.0):
    """Send every (client, payload) of `flows` to `dest` in order, keeping at
    most `window` payload bytes and `max_packets` datagrams outstanding (so no
    socket buffer on the path overflows, however slow the proxy is), and
    collect the replies.

    Returns {client: [(reply, source), ...]}.  Stops at `timeout` overall or
    when nothing arrives for `stall` s while replies are outstanding.
    """
    clients = []
    for c, _ in flows:
        if c not in clients:
            clients.append(c)
    got = {c: [] for c in clients}
    sel = selectors.DefaultSelector()
    for c in clients:
        sel.register(c.sock, selectors.EVENT_READ, c)
    outstanding = 0
    i = 0
    received = 0
    start = time.monotonic()
    last_progress = start
    try:
        for _ in range(1000000):
            now = time.monotonic()
            if now - start > timeout:
                break
            while i < len(flows) and (outstanding == 0 or (
                    outstanding + len(flows[i][1]) <= window
                    and i - received < max_packets)):
                c, p = flows[i]
                c.send(p, dest)
                outstanding += len(p)
                i += 1
                last_progress = time.monotonic()
            if i == len(flows) and received >= len(flows):
                break
            if time.monotonic() - last_progress > stall:
                break
            for key, _ in sel.select(0.2):
                c = key.data
                for _ in range(64):
                    try:
                        data, src = c.sock.recvfrom(65536)
                    except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                        break
                    got[c].append((data, src[:2]))
                    received += 1
                    outstanding = max(0, outstanding - max(0, len(data) - len(tag)))
                    last_progress = time.monotonic()
    finally:
        sel.close()
    if i < len(flows):
        raise Fail('pump: replies stalled for %.0f s after %d of %d datagrams were sent '
                   'and %d replies received' % (stall, i, len(flows), received))
    # A short extra wait (all clients at once) to catch duplicates or strays.
    sel = selectors.DefaultSelector()
    for c in clients:
        sel.register(c.sock, selectors.EVENT_READ, c)
    try:
        deadline = time.monotonic() + 0.1
        for _ in range(10000):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                try:
                    data, src = key.data.sock.recvfrom(65536)
                except (BlockingIOError, InterruptedError, ConnectionRefusedError):
                    continue
                got[key.data].append((data, src[:2]))
    finally:
        sel.close()
    return got


LEVELS = r'(?:ERROR|ERR|WARN|WARNING|INFO|DEBUG|TRACE)'
START_RE = re.compile(r'\b' + LEVELS + r'\b.*\[(?P<route>[^\]\s]+)\]\s+\[s(?P<sid>\d+)\]\s+'
                      r'.*session start.*\bclient=(?P<client>\S+)', re.I)
END_RE = re.compile(r'\b' + LEVELS + r'\b.*\[(?P<route>[^\]\s]+)\]\s+\[s(?P<sid>\d+)\]\s+'
                    r'.*session end.*\breason=(?P<reason>[A-Za-z_-]+)', re.I)


class Proxy:
    """The real slipgate binary under test."""

    def __init__(self, exe, workdir, name='proxy'):
        self.exe = exe
        self.workdir = workdir
        self.name = name
        self.proc = None
        self.lines = []  # (monotonic time, text) of each stderr line
        self.cond = threading.Condition()
        self.config_path = os.path.join(workdir, name + '.conf')
        self.stats_path = os.path.join(workdir, name + '.stats.json')
        self.stdout_path = os.path.join(workdir, name + '.stdout')
        self.ports_path = os.path.join(workdir, name + '.ports')
        self._kernel = {}
        self.ports = []
        self.argv = []
        self.warnings = []
        self._readers = []
        self._watchdog = None
        self.started_at = None
        self.ready_at = None
        self._draining = threading.Event()
        self._draining.set()

    # ---- start -------------------------------------------------------
    def start(self, config=None, args=(), routes=1, stats=True, ready=True,
              lifetime=50.0, attempts=3, ready_timeout=8.0, preexec_fn=None):
        """Start slipgate.  `config` (a string) is written to a file passed
        with -c; `$P0`, `$P1`, ... in it and in `args` become free ports
        (self.ports).  Waits until `routes` "listening" lines are logged (or,
        failing that, the ports show up bound in /proc/net/udp*).  `preexec_fn`
        runs in the child before exec (resource limits)."""
        text = (config or '') + ' ' + ' '.join(args)
        nports = len(set(re.findall(r'\$P(\d+)', text)))
        # $Pk that only name a listener (a route's listen, http) become port
        # 0: slipgate takes the port from the kernel and says which in its
        # ports_file.  Any other $Pk (a server's port, a port named twice)
        # still needs a free port chosen here.
        kernel = self._kernel = port0_slots(config, args) if ready else {}
        for attempt in range(attempts):
            self.ports = [0 if k in kernel else free_port() for k in range(nports)]
            subst = {'P%d' % k: str(p) for k, p in enumerate(self.ports)}
            argv = [self.exe]
            if config is not None:
                self.write_config(string.Template(config).safe_substitute(subst))
                argv += ['-c', self.config_path]
            argv += [string.Template(a).safe_substitute(subst) for a in args]
            if stats:
                argv += ['--stats', self.stats_path]
            if kernel:
                try:
                    os.unlink(self.ports_path)
                except FileNotFoundError:
                    pass
                argv += ['+set', 'ports_file', self.ports_path]
            self._spawn(argv, lifetime, preexec_fn)
            if not ready:
                return self
            status = self._wait_ready(routes, ready_timeout)
            if status == 'ready' and kernel:
                status = self._read_ports(kernel, ready_timeout)
            if status == 'ready':
                self.ready_at = time.monotonic()
                return self
            log = self.log_text()
            self.kill()
            if status == 'exited' and re.search(r'in use|EADDRINUSE', log, re.I) \
                    and attempt + 1 < attempts:
                self.warnings.append('listen port taken, retrying: %s' % self.ports)
                continue
            raise Fail('slipgate did not become ready (%s); argv=%s\n--- stderr ---\n%s'
                       % (status, argv, log[-4000:]))
        raise Fail('slipgate could not bind a listen port in %d attempts' % attempts)

    def listed_ports(self):
        """slipgate's ports_file as {route name or 'http': (host, port)}."""
        out = {}
        with open(self.ports_path) as f:
            for line in f:
                name, addr = line.split()
                host, port = addr.rsplit(':', 1)
                out[name] = (host.strip('[]'), int(port))
        return out

    def _read_ports(self, kernel, timeout):
        """Wait (bounded) for the ports file, then fill self.ports."""
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.ports_path):
            if self.proc.poll() is not None:
                return 'exited'
            if time.monotonic() > deadline:
                return 'timeout (no ports_file %s)' % self.ports_path
            time.sleep(0.01)
        listed = self.listed_ports()
        for k, name in kernel.items():
            if name not in listed:
                return 'no %r in the ports_file: %r' % (name, listed)
            self.ports[k] = listed[name][1]
        return 'ready'

    def write_config(self, text):
        tmp = self.config_path + '.tmp'
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, self.config_path)

    def _spawn(self, argv, lifetime, preexec_fn=None):
        self.lines = []
        self.argv = argv
        try:
            os.unlink(self.stats_path)
        except FileNotFoundError:
            pass
        out = open(self.stdout_path, 'wb')
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         preexec_fn=preexec_fn)
        finally:
            out.close()
        self.started_at = time.monotonic()
        proc = self.proc
        t = threading.Thread(target=self._read_stderr, args=(proc,), daemon=True)
        t.start()
        self._readers.append(t)
        # The process's time limit: killed by PID when it outlives `lifetime`.
        self._watchdog = threading.Timer(lifetime, self._kill_pid, args=(proc,))
        self._watchdog.daemon = True
        self._watchdog.start()

    def pause_stderr(self):
        """Stop draining the proxy's stderr pipe (after the current line):
        once the pipe buffer is full, its log writes block."""
        self._draining.clear()

    def resume_stderr(self):
        self._draining.set()

    def _read_stderr(self, proc):
        for raw in iter(proc.stderr.readline, b''):
            self._draining.wait(60)
            line = raw.decode('utf-8', 'replace').rstrip('\n')
            with self.cond:
                self.lines.append((time.monotonic(), line))
                self.cond.notify_all()
        proc.stderr.close()
        with self.cond:
            self.cond.notify_all()

    @staticmethod
    def _kill_pid(proc):
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _wait_ready(self, routes, timeout):
        deadline = time.monotonic() + timeout
        bound_since = None
        for _ in range(int(timeout / 0.02) + 10):
            if self.count_log(r'listening') >= routes:
                return 'ready'
            if self._kernel and os.path.exists(self.ports_path):
                return 'ready'  # written once every listener is bound (-q hides the lines)
            if self.proc.poll() is not None:
                self.wait_exit(0)  # the reader has collected the last lines
                return 'exited'
            known = [p for p in self.ports if p]
            if known and len(known) == len(self.ports) and set(known) <= udp_ports_bound():
                if bound_since is None:
                    bound_since = time.monotonic()
                elif time.monotonic() - bound_since > 1.0:
                    self.warnings.append(
                        'no "listening" log line for each of %d route(s) within 1 s '
                        'of the ports being bound; used /proc/net/udp instead' % routes)
                    return 'ready'
            if time.monotonic() > deadline:
                return 'timeout'
            time.sleep(0.02)
        return 'timeout'

    # ---- logs --------------------------------------------------------
    def log_lines(self, start=0):
        with self.cond:
            return [l for _, l in self.lines[start:]]

    def log_text(self):
        return '\n'.join(self.log_lines())

    def log_mark(self):
        with self.cond:
            return len(self.lines)

    def count_log(self, pattern, start=0):
        rx = re.compile(pattern)
        return sum(1 for l in self.log_lines(start) if rx.search(l))

    def wait_count_log(self, pattern, n, timeout=2.0, start=0):
        """count_log once at least `n` lines match or `timeout` passed: a
        reply can reach the test before the harness has read the line that
        slipgate logged for it."""
        deadline = time.monotonic() + timeout
        for _ in range(100000):
            count = self.count_log(pattern, start)
            left = deadline - time.monotonic()
            if count >= n or left <= 0:
                return count
            with self.cond:
                self.cond.wait(min(left, 0.1))
        return self.count_log(pattern, start)

    def wait_for_log(self, pattern, timeout, start=0):
        """Wait for a stderr line (from index `start`) matching `pattern`.
        Returns (monotonic time the line was read, re.Match) or None."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        idx = start
        with self.cond:
            for _ in range(100000):
                while idx < len(self.lines):
                    t, line = self.lines[idx]
                    idx += 1
                    m = rx.search(line)
                    if m:
                        return t, m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.1))
        return None

    def session_starts(self, start=0):
        return [m for m in (START_RE.search(l) for l in self.log_lines(start)) if m]

    def session_ends(self, start=0):
        return [m for m in (END_RE.search(l) for l in self.log_lines(start)) if m]

    # ---- stop --------------------------------------------------------
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        check(self.proc is not None, 'proxy not started')
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait_exit(self, timeout):
        """Wait for the exit; returns the exit status, None at `timeout`.
        Once it exited, also waits for the stderr reader to reach the end of
        the pipe (unless pause_stderr() holds it), so that log_text() then
        holds every line it wrote: the exit can be seen before the reader
        thread has run."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._draining.is_set():
            self._join_readers(max(timeout, 10.0))
        return rc

    def _join_readers(self, timeout):
        """Join the stderr reader threads (they end at end of file)."""
        deadline = time.monotonic() + timeout
        for t in self._readers:
            t.join(max(0.0, deadline - time.monotonic()))
        check(not any(t.is_alive() for t in self._readers),
              'slipgate exited but its stderr was not at end of file within %.0f s' % timeout)

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        """Send `sig`, wait for the exit; returns the exit status."""
        check(self.alive(), 'slipgate exited before it was asked to stop (status %s)\n'
              '--- stderr ---\n%s' % (self.proc.poll(), self.log_text()[-3000:]))
        self.send_signal(sig)
        rc = self.wait_exit(timeout)
        check(rc is not None, 'slipgate did not exit within %.1f s of %s'
              % (timeout, signal.Signals(sig).name))
        return rc

    def stats(self):
        check(os.path.exists(self.stats_path),
              'no --stats file written at %s' % self.stats_path)
        with open(self.stats_path) as f:
            text = f.read()
        try:
            return json.loads(text)
        except ValueError as e:
            raise Fail('--stats file is not valid JSON (%s): %r' % (e, text[:2000]))

    def kill(self):
        """Kill by PID if still running, and reap.  Safe to call twice."""
        if self._watchdog:
            self._watchdog.cancel()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._draining.set()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for t in self._readers:
            t.join(2)


class Harness:
    """Owns the temp dir, servers, clients and proxies of one case."""

    def __init__(self):
        exe = os.environ.get('SLIPGATE')
        if not exe:
            raise Fail('SLIPGATE is not set (path of the slipgate binary); '
                       'run through meson test, or SLIPGATE=build/proxy/slipgate')
        if not os.access(exe, os.X_OK):
            raise Fail('SLIPGATE=%s is not an executable file' % exe)
        self.exe = exe
        self.tmp = tempfile.TemporaryDirectory(prefix='slipgate-loopback-')
        self.dir = self.tmp.name
        self.servers = []
        self.clients = []
        self.proxies = []
        self.sockets = []

    def echo(self, host, tag=b'ECHO', echo=True):
        s = EchoServer(host, tag, echo)
        self.servers.append(s)
        return s

    def client(self, host):
        c = Client(host)
        self.clients.append(c)
        return c

    def udp_socket(self, host):
        s = socket.socket(family(host), socket.SOCK_DGRAM)
        s.bind((host, 0))
        s.setblocking(False)
        self.sockets.append(s)
        return s

    def proxy(self, config=None, args=(), name=None, **kw):
        p = Proxy(self.exe, self.dir, name or 'proxy%d' % len(self.proxies))
        self.proxies.append(p)
        return p.start(config, args, **kw)

    def run(self, args, timeout=10.0):
        """Run slipgate to completion (killed after `timeout` s)."""
        try:
            return subprocess.run([self.exe] + list(args), stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail('slipgate %s did not exit within %.0f s' % (' '.join(args), timeout))

    def path(self, name):
        return os.path.join(self.dir, name)

    def diagnostics(self):
        out = []
        for p in self.proxies:
            for w in p.warnings:
                out.append('warning (%s): %s' % (p.name, w))
            if p.proc is not None:
                out.append('--- %s: %s (exit %s) ---' % (p.name, ' '.join(p.argv), p.proc.poll()))
                lines = p.log_lines()
                if len(lines) > 80:
                    out.append('... %d earlier lines' % (len(lines) - 80))
                out.extend(lines[-80:])
        for s in self.servers:
            if s.errors:
                out.append('echo server %s errors: %s' % (s.addr, s.errors[:5]))
        return '\n'.join(out)

    def close(self):
        for p in self.proxies:
            p.kill()
        for s in self.servers:
            s.close()
        for c in self.clients:
            c.close()
        for s in self.sockets:
            s.close()
        self.tmp.cleanup()


def main(cases, argv):
    """Run the case named argv[1]; exit 0 pass, 1 fail, 77 skip."""
    if len(argv) != 2 or argv[1] not in cases:
        sys.stderr.write('usage: %s CASE\ncases: %s\n' % (argv[0], ' '.join(cases)))
        return 2

    def on_term(signum, frame):
        raise Fail('test interrupted by signal %d (meson timeout?)' % signum)

    signal.signal(signal.SIGTERM, on_term)
    name = argv[1]
    h = None
    t0 = time.monotonic()
    try:
        h = Harness()
        cases[name](h)
        for p in h.proxies:
            for w in p.warnings:
                print('warning: %s' % w)
        print('PASS %s (%.1f s)' % (name, time.monotonic() - t0))
        return 0
    except Skip as e:
        print('SKIP %s: %s' % (name, e))
        return SKIP
    except Fail as e:
        print('FAIL %s: %s' % (name, e))
        if h:
            print(h.diagnostics())
        return 1
    except Exception:
        import traceback
        print('FAIL %s: unexpected exception' % name)
        traceback.print_exc(file=sys.stdout)
        if h:
            print(h.diagnostics())
        return 1
    finally:
        if h:
            h.close()
        sys.stdout.flush()
