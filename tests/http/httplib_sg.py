"""Helpers for the `http` tests: plain HTTP/1.1 over a socket (so a test
controls what it sends and reads, or does not read), Server-Sent Events,
and a lock-step replay of a Quake 3 capture through slipgate.  Only
127.0.0.1 is ever contacted; every wait is bounded."""

import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))
sys.path.insert(0, os.path.join(HERE, '..', 'fault'))

from harness import Fail, check, V4  # noqa: E402
import q3cap  # noqa: E402


def request(port, path, method='GET', headers=None, timeout=5.0, body=b''):
    """(status, headers dict (lower-case names), body bytes) of one request."""
    s = socket.create_connection((V4, port), timeout=timeout)
    try:
        lines = ['%s %s HTTP/1.1' % (method, path), 'Host: 127.0.0.1:%d' % port,
                 'Connection: close']
        for k, v in (headers or {}).items():
            lines.append('%s: %s' % (k, v))
        if body:
            lines.append('Content-Length: %d' % len(body))
        s.sendall(('\r\n'.join(lines) + '\r\n\r\n').encode() + body)
        data = b''
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    return parse_response(data)


def parse_response(data):
    if b'\r\n\r\n' not in data:
        return None, {}, data
    head, body = data.split(b'\r\n\r\n', 1)
    lines = head.decode('latin-1').split('\r\n')
    status = int(lines[0].split()[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(':')
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get('transfer-encoding') == 'chunked':
        body = dechunk(body)
    return status, hdrs, body


def dechunk(body):
    out = b''
    while body:
        size, _, rest = body.partition(b'\r\n')
        n = int(size.split(b';')[0], 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return out


def get_json(port, path, headers=None):
    import json
    status, _, body = request(port, path, headers=headers)
    check(status == 200, 'GET %s: status %s, body %r' % (path, status, body[:300]))
    try:
        return json.loads(body)
    except ValueError as e:
        raise Fail('GET %s: not JSON (%s): %r' % (path, e, body[:500]))


class Stream:
    """An /api/stream client on a thread: every `data:` event, parsed."""

    def __init__(self, port, query='', headers=None):
        import json
        self.json = json
        self.events = []
        self.comments = 0
        self.status = None
        self.error = None
        self.cond = threading.Condition()
        self.sock = socket.create_connection((V4, port), timeout=5.0)
        lines = ['GET /api/stream%s HTTP/1.1' % query, 'Host: 127.0.0.1:%d' % port,
                 'Accept: text/event-stream']
        for k, v in (headers or {}).items():
            lines.append('%s: %s' % (k, v))
        self.sock.sendall(('\r\n'.join(lines) + '\r\n\r\n').encode())
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        buf = b''
        head = None
        pending = b''
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + 60
        while not self.stop and time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as e:
                self.error = str(e)
                break
            if not chunk:
                break
            buf += chunk
            if head is None:
                if b'\r\n\r\n' not in buf:
                    continue
                head, buf = buf.split(b'\r\n\r\n', 1)
                with self.cond:
                    self.status = int(head.split()[1])
                    self.chunked = b'chunked' in head.lower()
                    self.cond.notify_all()
            # de-chunk what is complete
            if self.chunked:
                while True:
                    if b'\r\n' not in buf:
                        break
                    size, _, rest = buf.partition(b'\r\n')
                    n = int(size.split(b';')[0], 16)
                    if len(rest) < n + 2:
                        break
                    pending += rest[:n]
                    buf = rest[n + 2:]
                    if n == 0:
                        break
            else:
                pending += buf
                buf = b''
            while b'\n\n' in pending:
                ev, pending = pending.split(b'\n\n', 1)
                self._event(ev)

    def _event(self, ev):
        data = []
        for line in ev.decode('utf-8', 'replace').split('\n'):
            if line.startswith(':'):
                self.comments += 1
            elif line.startswith('data: '):
                data.append(line[6:])
        if data:
            obj = self.json.loads('\n'.join(data))
            with self.cond:
                self.events.append(obj)
                self.cond.notify_all()

    def wait_status(self, timeout=5.0):
        with self.cond:
            self.cond.wait_for(lambda: self.status is not None, timeout)
        return self.status

    def wait_events(self, n, timeout):
        with self.cond:
            self.cond.wait_for(lambda: len(self.events) >= n, timeout)
            return list(self.events)

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


def replay_game(cap, listen_port, server_sock, pace=0.0, wait=1.0, stop=None, keep=None,
                host=V4):
    """Play the game client of capture `cap` through slipgate, lock-step:
    client datagrams from a socket of ours (bound to `host`, a loopback
    address) to `listen_port`, server datagrams from `server_sock` (the
    route's server) to the session's upstream address.  Returns (datagrams
    sent, datagrams received).  `keep` (a dict) carries the client socket
    and the upstream address from one call to the next (a game replayed in
    parts, one session); the caller closes keep['cli']."""
    if keep is not None and 'cli' in keep:
        cli, upstream = keep['cli'], keep['upstream']
    else:
        cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        cli.bind((host, 0))
        upstream = None
    sent = got = 0
    try:
        for d in cap.game():
            if stop is not None and stop.is_set():
                break
            if pace:
                time.sleep(pace)
            if d.c2s:
                cli.sendto(d.payload, (V4, listen_port))
                rx = server_sock
            else:
                if upstream is None:
                    continue
                server_sock.sendto(d.payload, upstream)
                rx = cli
            sent += 1
            if q3cap.is_partial(d.payload, d.c2s, cap.checksum):
                continue
            rx.settimeout(wait)
            try:
                _, src = rx.recvfrom(65536)
                got += 1
                if d.c2s and upstream is None:
                    upstream = src
            except socket.timeout:
                pass
            # anything else already there (a held message's pieces)
            rx.settimeout(0.0)
            while True:
                try:
                    rx.recvfrom(65536)
                    got += 1
                except (BlockingIOError, socket.timeout):
                    break
    finally:
        if keep is None:
            cli.close()
        else:
            keep['cli'], keep['upstream'] = cli, upstream
    return sent, got


def server_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((V4, 0))
    return s
