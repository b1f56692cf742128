#!/usr/bin/env python3
"""`slipgate doctor` against real sockets on 127.0.0.1.

  doctor_test.py CASE          (SLIPGATE names the binary)

Each case writes a small config into a scratch directory, sets up what the
check looks at (a fake game server that answers its status query or does
not, a port held by this process, directories, keys) and checks the
doctor's ok/warn/fail line for it and its exit status.  Datagrams go only
to 127.0.0.1; every socket and thread ends with the case.
"""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading

SLIPGATE = os.environ.get('SLIPGATE', 'slipgate')
FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print('FAIL: ' + msg)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import dead_port  # noqa: E402


def closed_port():
    """A port nothing listens on (the kernel answers ICMP unreachable), outside
    the ephemeral range: no socket of a test running beside this one is
    given it by bind(0) or connect()."""
    return dead_port()


class FakeServer:
    """A UDP server on 127.0.0.1 that answers each datagram with `answer(data)` (None: silence)."""

    def __init__(self, answer):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.got = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        for _ in range(2000):  # bounded: 2000 x 0.1 s at most
            if self.stop.is_set():
                return
            try:
                data, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            self.got.append(data)
            reply = self.answer(data)
            if reply is not None:
                self.sock.sendto(reply, peer)

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


OOB = b'\xff\xff\xff\xff'


def q3_server(data):
    if data == OOB + b'getstatus\n':
        return OOB + b'statusResponse\n\\sv_hostname\\fake\\mapname\\q3dm17\n'
    return None


def qw_server(data):
    if data == OOB + b'status\n':
        return OOB + b'n\\hostname\\fake\\map\\dm4\n'
    return None


def q2_server(data):
    if data == OOB + b'status\n':
        return OOB + b'print\n\\hostname\\fake\\mapname\\q2dm1\n'
    return None


def nq_server(data):
    # CCREQ_SERVER_INFO: NETFLAG_CTL | 12, 0x02, "QUAKE\0", 3.
    if data == struct.pack('>I', 0x80000000 | 12) + b'\x02QUAKE\x00\x03':
        body = b'\x83127.0.0.1:26000\x00fake\x00e1m1\x00\x01\x08\x03'
        return struct.pack('>I', 0x80000000 | (4 + len(body))) + body
    return None


def run_doctor(tmp, text, *extra, user=None):
    conf = os.path.join(tmp, 'doctor.conf')
    with open(conf, 'w') as f:
        f.write(text)
    os.chmod(conf, 0o644)
    pre = None
    if user is not None:
        def pre():
            os.setgid(user)
            os.setuid(user)
    out = subprocess.run([SLIPGATE, 'doctor', '-c', conf, '--timeout', '400ms'] + list(extra),
                         capture_output=True, text=True, timeout=30, preexec_fn=pre)
    print('--- doctor (exit %d):\n%s%s' % (out.returncode, out.stdout, out.stderr))
    return out.returncode, out.stdout


def line(out, pattern):
    """The one line of `out` matching `pattern` (a regex), or ''."""
    found = [ln for ln in out.splitlines() if re.search(pattern, ln)]
    return found[0] if len(found) == 1 else ''


def route(name, server_port, extra=''):
    # Port 0: the kernel's port when the doctor binds it (a port picked here
    # and closed again could be taken by a test running beside this one).
    return ('route %s {\n  listen 127.0.0.1:0\n  server 127.0.0.1:%d\n%s}\n'
            % (name, server_port, extra))


# ---- cases ----

def case_doctor_config(tmp):
    rc, out = run_doctor(tmp, 'route r {\n  listen 127.0.0.1:1\n  idle_timout 5s\n}\n')
    check(rc == 1, 'a broken config exits 1, got %d' % rc)
    check(line(out, r"^fail config .*doctor\.conf:3:3: error: unknown directive 'idle_timout'"),
          'the config error is a fail line with file:line:col')
    check('loads' not in out, 'nothing else is checked after a config error')
    srv = FakeServer(q3_server)
    try:
        rc, out = run_doctor(tmp, route('r', srv.port, '  protocol q3\n'))
    finally:
        srv.close()
    check(rc == 0, 'a good config whose server answers exits 0, got %d' % rc)
    check(line(out, r'^ok   config .*doctor\.conf loads \(1 route\)'), 'ok line for the config')
    check(line(out, r'^doctor: \d+ ok, 0 warnings, 0 failed$'), 'the summary counts no failure')


def case_doctor_port_in_use(tmp):
    held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held.bind(('127.0.0.1', 0))
    port = held.getsockname()[1]
    srv = FakeServer(q3_server)
    try:
        text = ('route busy {\n  listen 127.0.0.1:%d\n  server 127.0.0.1:%d\n  protocol q3\n}\n'
                % (port, srv.port)) + route('free', srv.port, '  protocol q3\n')
        rc, out = run_doctor(tmp, text)
    finally:
        held.close()
        srv.close()
    check(rc == 1, 'a port in use exits 1, got %d' % rc)
    me = r'\(pid %d\)' % os.getpid()
    conf = re.escape(os.path.join(tmp, 'doctor.conf'))
    check(line(out, r"^fail %s:2:10: route 'busy': cannot listen on 127\.0\.0\.1:%d: Address "
                    r"already in use by \S+ %s$" % (conf, port, me)),
          'the port in use names this process (pid %d) as its holder, and where it is '
          'configured' % os.getpid())
    check(line(out, r"^ok   %s:\d+:\d+: route 'free': listen 127\.0\.0\.1:\d+ can be bound$"
                    % conf), 'a free port is ok')


def case_doctor_server_answers(tmp):
    for game, answer in (('q3', q3_server), ('qw', qw_server), ('q2', q2_server),
                         ('nq', nq_server)):
        for proto in (game, 'auto'):
            srv = FakeServer(answer)
            try:
                rc, out = run_doctor(tmp, route('r', srv.port, '  protocol %s\n' % proto))
            finally:
                srv.close()
            check(rc == 0, '%s server, protocol %s: exit 0, got %d' % (game, proto, rc))
            # QuakeWorld and Quake 2 send the same query; the answer tells them apart.
            check(line(out, r'^ok   route r: server 127\.0\.0\.1:%d answered a %s status query '
                            r'\(.+\) in \d+ ms$' % (srv.port, game)),
                  '%s server, protocol %s: the ok line names %s' % (game, proto, game))
            if proto == game:
                # The fake server answers only its game's exact query bytes.
                check(len(srv.got) == 1 and answer(srv.got[0]) is not None,
                      '%s: one query, the game\'s own, got %r' % (game, srv.got))


def case_doctor_server_silent(tmp):
    silent = FakeServer(lambda d: None)
    babble = FakeServer(lambda d: b'hello')
    dead = closed_port()
    try:
        text = (route('silent', silent.port, '  protocol q3\n') +
                route('babble', babble.port, '  protocol qw\n') +
                route('dead', dead, '  protocol nq\n'))
        rc, out = run_doctor(tmp, text)
    finally:
        silent.close()
        babble.close()
    check(rc == 1, 'servers that do not answer exit 1, got %d' % rc)
    check(line(out, r'^fail route silent: server 127\.0\.0\.1:%d did not answer a status query '
                    r'within 400 ms \(asked: q3 getstatus\)$' % silent.port),
          'a silent server fails after the timeout')
    check(len(silent.got) == 1, 'the silent server got the query')
    check(line(out, r'^warn route babble: server 127\.0\.0\.1:%d answered 1 datagram, but not as '
                    r'a status reply' % babble.port), 'an answer that is no status reply warns')
    check(line(out, r'^fail route dead: server 127\.0\.0\.1:%d refused the status query' % dead),
          'a closed port is a refusal')


def fs_state(path, min_free):
    st = os.statvfs(path)
    avail = st.f_bavail * st.f_frsize
    pct = 100.0 * avail / (st.f_blocks * st.f_frsize)
    return avail < min_free or pct < 5


def case_doctor_record_dir(tmp):
    srv = FakeServer(q3_server)
    good = os.path.join(tmp, 'demos')
    os.mkdir(good)
    later = os.path.join(tmp, 'later')
    nowhere = os.path.join(tmp, 'no', 'such')
    locked = os.path.join(tmp, 'locked')
    os.mkdir(locked)
    try:
        text = (route('good', srv.port, '  protocol q3\n  record %s\n' % good) +
                route('later', srv.port, '  protocol q3\n  filter record { directory %s }\n'
                      % later) +
                route('nowhere', srv.port, '  protocol q3\n  record %s\n' % nowhere))
        rc, out = run_doctor(tmp, text)
        low = fs_state(good, 1 << 30)
        check(rc == 1, 'a directory that cannot be created exits 1, got %d' % rc)
        conf = re.escape(os.path.join(tmp, 'doctor.conf'))
        if low:
            check(line(out, r"^warn %s:5: route 'good': record directory %s is nearly full"
                            % (conf, good)), 'this filesystem is nearly full: the doctor says so')
        else:
            check(line(out, r"^ok   %s:5: route 'good': record directory %s is writable, .* free"
                            % (conf, good)), 'a writable directory with room is ok')
        check(line(out, r"^warn %s:11: route 'later': record directory %s does not exist yet"
                        % (conf, later)) or low, 'a missing directory the recorder can create warns')
        check(line(out, r"^fail %s:17: route 'nowhere': record directory %s is missing, and so is "
                        r"%s" % (conf, nowhere, os.path.dirname(nowhere))), 'a missing parent fails')

        # --min-free above what the disk has: nearly full, and which threshold.
        rc, out = run_doctor(tmp, route('good', srv.port, '  protocol q3\n  record %s\n' % good),
                             '--min-free', '1000000T')
        check(rc == 0, 'a nearly full directory only warns, got exit %d' % rc)
        check(line(out, r"^warn %s:5: route 'good': record directory %s is nearly full: .* free, "
                        r"under 1024000000\.0 GiB, " % (conf, good)),
              'under --min-free warns and names the threshold')

        # Not writable for the user slipgate runs as (root writes anywhere: run as nobody).
        text = route('locked', srv.port, '  protocol q3\n  record %s\n' % locked)
        if os.geteuid() == 0:
            os.chmod(tmp, 0o755)
            os.chmod(locked, 0o755)
            rc, out = run_doctor(tmp, text, user=65534)
        else:
            os.chmod(locked, 0o555)
            rc, out = run_doctor(tmp, text)
        check(rc == 1, 'an unwritable directory exits 1, got %d' % rc)
        check(line(out, r"^fail %s:5: route 'locked': record directory %s is not writable: "
                        r"Permission denied$" % (conf, locked)), 'an unwritable directory fails')
    finally:
        srv.close()
        os.chmod(locked, 0o755)


def case_doctor_socket_buffer(tmp):
    caps = [int(open('/proc/sys/net/core/%s_max' % k).read()) for k in ('rmem', 'wmem')]
    srv = FakeServer(q3_server)
    try:
        text = route('small', srv.port, '  protocol q3\n  socket_buffer 64k\n')
        above = min(caps) + 4096
        if above <= 1 << 30:
            text += route('big', srv.port, '  protocol q3\n  socket_buffer %d\n' % above)
        rc, out = run_doctor(tmp, text)
    finally:
        srv.close()
    check(rc == 0, 'buffer caps only warn, got exit %d' % rc)
    if 65536 <= min(caps):
        check(line(out, r'^ok   route small: socket_buffer 65536 is within net\.core\.rmem_max '
                        r'%d and wmem_max %d$' % tuple(caps)), 'a buffer within the caps is ok')
    if above <= 1 << 30:
        check(line(out, r'^warn route big: socket_buffer %d is above the kernel\'s cap '
                        r'\(net\.core\.rmem_max %d, wmem_max %d\)' % ((above,) + tuple(caps))),
              'a buffer above the caps warns with both caps')
    else:
        print('note: the caps here (%r) are above socket_buffer\'s 1 GiB maximum' % caps)


def case_doctor_sign_key(tmp):
    key = os.path.join(tmp, 'league')
    subprocess.run([SLIPGATE, 'keygen', '--out', key], check=True, capture_output=True,
                   timeout=10)
    srv = FakeServer(q3_server)
    try:
        text = 'sign_key %s\n' % key + route('r', srv.port, '  protocol q3\n')
        rc, out = run_doctor(tmp, text)
        check(rc == 0, 'a private key is fine, got exit %d' % rc)
        conf = re.escape(os.path.join(tmp, 'doctor.conf'))
        check(line(out, r'^ok   %s:1: sign_key %s: mode 0600, only its owner can read it$'
                        % (conf, key)),
              'the key\'s mode is reported ok')
        os.chmod(key, 0o644)
        rc, out = run_doctor(tmp, text)
        check(rc == 1, 'a key others can read exits 1, got %d' % rc)
        check(line(out, r'^fail config .*sign_key %s is readable or writable by group or others '
                        r'\(mode 0644\)' % key), 'a readable key fails, naming its mode')
        if os.geteuid() == 0:
            os.chmod(key, 0o600)
            os.chown(key, 65534, 65534)
            rc, out = run_doctor(tmp, text)
            check(rc == 0, 'a key of another user only warns, got exit %d' % rc)
            check(line(out, r'^warn %s:1: sign_key %s \(mode 0600\) belongs to uid 65534'
                            % (conf, key)),
                  'a key owned by another user warns')
    finally:
        srv.close()


def case_doctor_http_in_use(tmp):
    """The `http` TCP port held by another socket is a failure naming its
    holder and where `http` is configured, as for --check-config."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(('127.0.0.1', 0))
    held.listen(1)
    port = held.getsockname()[1]
    srv = FakeServer(q3_server)
    try:
        rc, out = run_doctor(tmp, 'http 127.0.0.1:%d\n' % port + route('r', srv.port,
                                                                       '  protocol q3\n'))
        held.close()
        rc_free, out_free = run_doctor(tmp, 'http 127.0.0.1:%d\n' % port +
                                       route('r', srv.port, '  protocol q3\n'))
    finally:
        held.close()
        srv.close()
    conf = re.escape(os.path.join(tmp, 'doctor.conf'))
    check(rc == 1, 'the http port in use exits 1, got %d' % rc)
    check(line(out, r'^fail %s:1:6: http: cannot listen on 127\.0\.0\.1:%d: Address already in '
                    r'use by \S+ \(pid %d\)$' % (conf, port, os.getpid())),
          'the http port in use is a fail line naming this process and http\'s line')
    check(rc_free == 0 and line(out_free, r'^ok   %s:1:6: http: 127\.0\.0\.1:%d can be listened on$'
                                          % (conf, port)),
          'a free http port is ok (exit %d)' % rc_free)


def case_doctor_paths(tmp):
    """The checks --check-config makes of recording directories and output
    files, as fail lines with file:line: a record directory that is a file,
    one in /proc (not writable, for root too), textlog and pcap files in a
    missing directory."""
    afile = os.path.join(tmp, 'a-file')
    with open(afile, 'w') as f:
        f.write('x')
    missing = os.path.join(tmp, 'missing')
    srv = FakeServer(q3_server)
    try:
        text = (route('file', srv.port, '  protocol q3\n  record %s\n' % afile) +
                route('proc', srv.port, '  protocol q3\n  filter record { directory /proc }\n') +
                route('logs', srv.port, '  protocol q3\n  filter textlog { file %s/t.log }\n'
                      '  filter pcap { file %s/c.pcap }\n' % (missing, missing)))
        rc, out = run_doctor(tmp, text)
    finally:
        srv.close()
    conf = re.escape(os.path.join(tmp, 'doctor.conf'))
    check(rc == 1, 'unusable paths exit 1, got %d' % rc)
    check(line(out, r"^fail %s:5: route 'file': record directory %s is not a directory$"
                    % (conf, re.escape(afile))), 'a record directory that is a file fails')
    check(line(out, r"^fail %s:11: route 'proc': record directory /proc is not writable: "
               % conf), 'a record directory in /proc fails')
    check(line(out, r"^fail %s:17: route 'logs': textlog file %s/t\.log: its directory %s: "
                    r"No such file or directory$" % (conf, re.escape(missing), re.escape(missing))),
          'a textlog file in a missing directory fails')
    check(line(out, r"^fail %s:18: route 'logs': pcap file %s/c\.pcap: its directory %s: "
                    r"No such file or directory$" % (conf, re.escape(missing), re.escape(missing))),
          'a pcap file in a missing directory fails')


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print('usage: doctor_test.py CASE\ncases: ' + ' '.join(sorted(CASES)), file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix='sg-doctor-')
    try:
        CASES[sys.argv[1]](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print('%d check(s) failed' % len(FAILED))
        return 1
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
