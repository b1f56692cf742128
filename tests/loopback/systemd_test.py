#!/usr/bin/env python3
"""slipgate under a service manager, without one: the test is the manager.

  systemd_test.py CASE          (SLIPGATE names the binary, SG_SOURCE the tree)

The test binds the AF_UNIX datagram socket that $NOTIFY_SOCKET names and
reads what slipgate tells it (sd_notify's protocol: READY=1, RELOADING=1,
STATUS=, WATCHDOG=1, ERRNO=); sets JOURNAL_STREAM to the device:inode of
the file it gives slipgate as standard error, as systemd does for journald's
stream; runs the units' ExecReload helper (dist/systemd/slipgate-reload)
with RUNTIME_DIRECTORY as systemd would; and reads /metrics.  No root, no
systemd.  Datagrams and HTTP only on 127.0.0.1; every wait is bounded; the
one slipgate process is ended by PID.

  notify_ready        READY=1 once every route's listener is bound (both
                      ports taken when it comes), with STATUS= and MAINPID=
  notify_abstract     an '@' NOTIFY_SOCKET (abstract namespace) works too
  notify_reload       a good SIGHUP: RELOADING=1 with MONOTONIC_USEC, then
                      READY=1 and the new STATUS=; a refused one: RELOADING=1,
                      then READY=1 with STATUS= naming the error and ERRNO=22,
                      and the status line keeps saying so
  notify_watchdog     WATCHDOG_USEC=200000: WATCHDOG=1 about every 100 ms;
                      WATCHDOG_PID of another process: none
  notify_stopping     SIGTERM: STOPPING=1
  reload_helper       slipgate-reload PID exits 0 on a good reload and 1 with
                      the error on a refused one (what fails `systemctl reload`)
  journal_prefix      JOURNAL_STREAM = stderr's dev:inode: "<6>info ..." lines,
                      "<3>error" for a refused reload, no timestamps; another
                      inode: the usual timestamped lines
  unit_commands       the built slipgate.service's own ExecStart (binary and
                      config path moved to the build's and the case's) with
                      its WatchdogSec as WATCHDOG_USEC and RuntimeDirectory:
                      READY=1, pings, and its ExecReload command line with
                      $MAINPID: exit 0 on a good file, 1 on a refused one
  reload_metric       /metrics: slipgate_config_last_reload_successful 1 -> 0
                      on a refused reload, the success timestamp kept, the
                      reloads_total counters
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fail, check  # noqa: E402

SLIPGATE = os.environ.get('SLIPGATE', 'slipgate')
SOURCE = os.environ.get('SG_SOURCE') or os.path.join(os.path.dirname(__file__), '..', '..')
HELPER = os.path.join(SOURCE, 'dist', 'systemd', 'slipgate-reload')
MANAGER_ENV = ('NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'JOURNAL_STREAM',
               'RUNTIME_DIRECTORY', 'SLIPGATE_WORKERS')
TS = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ')


class Run:
    """One slipgate with a config of `nroutes` routes, a notify socket and a
    stderr file; ended by PID in close()."""

    def __init__(self, tmp, nroutes=1, env=None, abstract=False, http=False, notify=True,
                 argv=None):
        self.tmp = tmp
        self.conf = os.path.join(tmp, 'slipgate.conf')
        # Every listener on port 0: slipgate takes its ports from the kernel
        # and lists them in its ports_file, read at each READY=1 (ports,
        # http_port), so that cases can run side by side.
        self.nroutes = nroutes
        self.http = http
        self.ports_path = os.path.join(tmp, 'ports')
        self.ports = []
        self.http_port = None
        self.write_conf()
        self.sock = None
        # What a service manager sets comes only from the case.
        env = dict({k: v for k, v in os.environ.items() if k not in MANAGER_ENV}, **(env or {}))
        if notify:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            if abstract:
                name = 'slipgate-test-%d-%d' % (os.getpid(), time.monotonic_ns())
                self.sock.bind('\0' + name)
                env['NOTIFY_SOCKET'] = '@' + name
            else:
                path = os.path.join(tmp, 'notify')
                self.sock.bind(path)
                env['NOTIFY_SOCKET'] = path
        self.err_path = os.path.join(tmp, 'stderr')
        self.err = open(self.err_path, 'wb')
        st = os.fstat(self.err.fileno())
        self.stderr_id = '%d:%d' % (st.st_dev, st.st_ino)
        if env.get('JOURNAL_STREAM') == 'STDERR':
            env['JOURNAL_STREAM'] = self.stderr_id
        elif env.get('JOURNAL_STREAM') == 'OTHER':
            env['JOURNAL_STREAM'] = '%d:%d' % (st.st_dev, st.st_ino + 1)
        self.proc = subprocess.Popen(argv or [SLIPGATE, '-c', self.conf], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err, env=env,
                                     start_new_session=True)

    def write_conf(self, extra=''):
        text = 'ports_file "%s"\n' % self.ports_path
        if self.http:
            text += 'http 127.0.0.1:0\n'
        for k in range(self.nroutes):
            text += 'route r%d {\n    listen 127.0.0.1:0\n    server 127.0.0.1:9\n}\n' % k
        tmp = self.conf + '.new'
        with open(tmp, 'w') as f:
            f.write(text + extra)
        os.replace(tmp, self.conf)

    def recv(self, timeout=8.0):
        """The next notification as a dict (and its raw text); Fail on timeout."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except socket.timeout:
            raise Fail('no notification within %.1f s; stderr:\n%s' % (timeout, self.log()))
        return dict(l.split('=', 1) for l in data.split('\n') if '=' in l), data

    def recv_until(self, key, timeout=8.0, skip=('WATCHDOG', 'STATUS')):
        """Notifications until one with `key`; others may only carry `skip` keys."""
        end = time.monotonic() + timeout
        while True:
            msg, raw = self.recv(max(0.1, end - time.monotonic()))
            if msg.get('READY') == '1':
                self.read_ports()  # written before READY=1, at the start and each reload
            if key in msg:
                return msg, raw
            check(all(k in skip for k in msg), 'unexpected notification %r before %s' % (raw, key))

    def read_ports(self):
        """self.ports (route r0, r1, ...) and self.http_port from the ports_file."""
        listed = {}
        with open(self.ports_path) as f:
            for line in f:
                name, addr = line.split()
                listed[name] = int(addr.rsplit(':', 1)[1])
        check(all('r%d' % k in listed for k in range(self.nroutes)) and
              (not self.http or 'http' in listed), 'ports_file %r' % listed)
        self.ports = [listed['r%d' % k] for k in range(self.nroutes)]
        self.http_port = listed.get('http')

    def hup(self):
        self.proc.send_signal(signal.SIGHUP)

    def log(self):
        self.err.flush()
        with open(self.err_path, 'rb') as f:
            return f.read().decode(errors='replace')

    def wait_log(self, pattern, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.log(), re.M):
                return
            time.sleep(0.02)
        raise Fail('no log line matching %r in %.1f s:\n%s' % (pattern, timeout, self.log()))

    def close(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)
        if self.sock:
            self.sock.close()
        log = self.log()
        self.err.close()
        check(not re.search(r'runtime error|AddressSanitizer|LeakSanitizer', log),
              'sanitizer report:\n%s' % log[-4000:])


def port_bound(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(('127.0.0.1', port))
        return False
    except OSError:
        return True
    finally:
        s.close()


def case_notify_ready(tmp):
    r = Run(tmp, nroutes=2)
    try:
        msg, raw = r.recv_until('READY')
        check(msg['READY'] == '1', 'READY=%r' % msg['READY'])
        for p in r.ports:
            check(port_bound(p), 'READY=1 came before 127.0.0.1:%d was bound' % p)
        check(msg.get('STATUS') == '2 routes, 0 sessions', 'STATUS=%r' % msg.get('STATUS'))
        check(msg.get('MAINPID') == str(r.proc.pid), 'MAINPID=%r, pid %d'
              % (msg.get('MAINPID'), r.proc.pid))
        print('READY=1 after both listeners: %r' % raw)
    finally:
        r.close()


def case_notify_abstract(tmp):
    r = Run(tmp, abstract=True)
    try:
        msg, raw = r.recv_until('READY')
        check(msg.get('STATUS') == '1 route, 0 sessions', 'STATUS=%r' % msg.get('STATUS'))
        print('abstract socket: %r' % raw)
    finally:
        r.close()


def case_notify_reload(tmp):
    r = Run(tmp)
    try:
        r.recv_until('READY')
        # A good reload: one more route.
        r.nroutes += 1
        r.write_conf()
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        r.hup()
        msg, raw = r.recv_until('RELOADING')
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        check(msg['RELOADING'] == '1', 'RELOADING=%r' % msg['RELOADING'])
        usec = int(msg.get('MONOTONIC_USEC', '0'))
        check(before <= usec <= after, 'MONOTONIC_USEC=%d not in [%d, %d]' % (usec, before, after))
        msg, raw = r.recv_until('READY')
        check('ERRNO' not in msg, 'a good reload sent ERRNO: %r' % raw)
        msg, raw2 = r.recv_until('STATUS', skip=('WATCHDOG',)) if 'STATUS' not in msg \
            else (msg, raw)
        check(msg['STATUS'] == '2 routes, 0 sessions', 'after the good reload: %r' % raw2)
        check(port_bound(r.ports[1]), 'the new route does not listen')
        print('good reload: RELOADING=1, MONOTONIC_USEC, READY=1, %r' % msg['STATUS'])

        # A refused one: the old configuration stays, and the manager is told.
        r.write_conf('bogus_directive 1\n')
        r.hup()
        msg, raw = r.recv_until('RELOADING')
        msg, raw = r.recv_until('READY')
        check(msg.get('ERRNO') == '22', 'refused reload: ERRNO=%r in %r' % (msg.get('ERRNO'), raw))
        check(re.search(r"reload refused, the old configuration stays: .*slipgate\.conf:\d+:\d+: "
                        r"error: unknown directive 'bogus_directive'", msg.get('STATUS', '')),
              'refused reload: STATUS=%r' % msg.get('STATUS'))
        print('refused reload: %r' % raw)
        check(r.proc.poll() is None, 'slipgate exited on a refused reload')
        check(port_bound(r.ports[1]), 'the refused reload changed the routes')
    finally:
        r.close()


def case_notify_watchdog(tmp):
    r = Run(tmp, env={'WATCHDOG_USEC': '200000'})
    try:
        r.recv_until('READY')
        times = []
        end = time.monotonic() + 5.0
        while len(times) < 5 and time.monotonic() < end:
            msg, raw = r.recv(5.0)
            if 'WATCHDOG' in msg:
                check(msg['WATCHDOG'] == '1', 'WATCHDOG=%r' % msg['WATCHDOG'])
                times.append(time.monotonic())
        check(len(times) == 5, '%d WATCHDOG=1 pings in 5 s (WATCHDOG_USEC=200000)' % len(times))
        gaps = [b - a for a, b in zip(times, times[1:])]
        mean = (times[-1] - times[0]) / (len(times) - 1)
        # Half of 200 ms on average (a timer runs late on a loaded machine,
        # never early; one ping read late makes the next gap short): not
        # the full interval, nor much faster than half of it.
        check(0.09 <= mean <= 0.17, 'mean ping gap %.3f s, want ~0.1 s (gaps %r)' % (mean, gaps))
        print('WATCHDOG=1 gaps: %s' % ', '.join('%.3f' % g for g in gaps))
    finally:
        r.close()
    # The watchdog of another process (WATCHDOG_PID): no pings.
    sub = os.path.join(tmp, 'other')
    os.mkdir(sub)
    r = Run(sub, env={'WATCHDOG_USEC': '100000', 'WATCHDOG_PID': '1'})
    try:
        r.recv_until('READY')
        r.sock.settimeout(0.6)
        got = []
        try:
            while True:
                got.append(r.sock.recv(4096))
        except socket.timeout:
            pass
        check(not any(b'WATCHDOG' in g for g in got), 'pings for WATCHDOG_PID=1: %r' % got)
        print('WATCHDOG_PID=1: no pings in 0.6 s')
    finally:
        r.close()


def case_notify_stopping(tmp):
    r = Run(tmp)
    try:
        r.recv_until('READY')
        r.proc.send_signal(signal.SIGTERM)
        msg, raw = r.recv_until('STOPPING')
        check(msg['STOPPING'] == '1', 'STOPPING=%r' % msg['STOPPING'])
        check(r.proc.wait(10) == 0, 'exit status %r' % r.proc.returncode)
        print('SIGTERM: %r' % raw)
    finally:
        r.close()


def helper(rundir, pid):
    return subprocess.run(['sh', HELPER, str(pid)], capture_output=True, text=True, timeout=40,
                          env=dict(os.environ, RUNTIME_DIRECTORY=rundir))


def case_reload_helper(tmp):
    rundir = os.path.join(tmp, 'run')
    os.mkdir(rundir)
    r = Run(tmp, env={'RUNTIME_DIRECTORY': rundir}, notify=False)
    status = os.path.join(rundir, 'reload-status')
    try:
        end = time.monotonic() + 8
        while not os.path.exists(status) and time.monotonic() < end:
            time.sleep(0.02)
        with open(status) as f:
            check(f.read() == '0 started\n', 'at the start: %r' % open(status).read())
        res = helper(rundir, r.proc.pid)
        check(res.returncode == 0, 'good reload: helper exit %d: %s' % (res.returncode, res.stderr))
        check(open(status).read() == '1 applied\n', 'after a good reload: %r' % open(status).read())
        print('good reload: slipgate-reload exit 0')
        r.write_conf('bogus_directive 1\n')
        res = helper(rundir, r.proc.pid)
        check(res.returncode == 1, 'refused reload: helper exit %d' % res.returncode)
        check(re.search(r"slipgate: reload refused: .*unknown directive 'bogus_directive'",
                        res.stderr), 'refused reload: helper said %r' % res.stderr)
        print('refused reload: slipgate-reload exit 1: %s' % res.stderr.strip())
        r.write_conf()
        res = helper(rundir, r.proc.pid)
        check(res.returncode == 0, 'fixed file: helper exit %d: %s' % (res.returncode, res.stderr))
        check(r.proc.poll() is None, 'slipgate exited')
    finally:
        r.close()


def case_journal_prefix(tmp):
    r = Run(tmp, env={'JOURNAL_STREAM': 'STDERR'}, notify=False)
    try:
        r.wait_log(r'running \(pid')
        r.write_conf('bogus_directive 1\n')
        r.hup()
        r.wait_log(r'reload failed')
        lines = r.log().splitlines()
        check(lines, 'no log lines')
        for line in lines:
            check(re.match(r'<[3467]>(error|warn |info |debug|trace) ', line),
                  'line without a priority prefix: %r' % line)
            check(not re.search(r'\d{4}-\d\d-\d\dT\d\d:', line), 'timestamp in %r' % line)
        check(any(l.startswith('<6>info  ') and 'running (pid' in l for l in lines),
              'no <6>info running line:\n%s' % '\n'.join(lines))
        check(any(l.startswith('<3>error reload: ') for l in lines),
              'no <3>error reload line:\n%s' % '\n'.join(lines))
        print('JOURNAL_STREAM=%s: %s' % (r.stderr_id, ' | '.join(lines[:4])))
    finally:
        r.close()
    # JOURNAL_STREAM naming another stream: lines as they always were.
    sub = os.path.join(tmp, 'other')
    os.mkdir(sub)
    r = Run(sub, env={'JOURNAL_STREAM': 'OTHER'}, notify=False)
    try:
        r.wait_log(r'running \(pid')
        lines = r.log().splitlines()
        check(all(TS.match(l) for l in lines), 'another stream, yet: %r' % lines)
        print('JOURNAL_STREAM of another inode: timestamped lines')
    finally:
        r.close()


def unit_lines(path):
    """KEY -> value of a unit file's assignments (the last one of each)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(('#', '[')) and '=' in line:
                k, v = line.split('=', 1)
                out[k] = v
    return out


def case_unit_commands(tmp):
    build = os.environ.get('SG_BUILD')
    check(build, 'SG_BUILD (the meson build directory) is not set')
    unit = unit_lines(os.path.join(build, 'dist', 'slipgate.service'))
    check(unit.get('Type') == 'notify', 'Type=%r' % unit.get('Type'))
    m = re.fullmatch(r'(\S+)/slipgate -c (\S+)', unit['ExecStart'])
    check(m, 'ExecStart=%r' % unit['ExecStart'])
    argv = unit['ExecStart'].split()
    argv[0] = SLIPGATE
    argv[argv.index(m.group(2))] = os.path.join(tmp, 'slipgate.conf')
    wd = re.fullmatch(r'(\d+)s', unit.get('WatchdogSec', ''))
    check(wd, 'WatchdogSec=%r' % unit.get('WatchdogSec'))
    rundir = os.path.join(tmp, 'run', unit['RuntimeDirectory'])
    os.makedirs(rundir)
    # The manager's environment for this unit: its watchdog (a tenth of it,
    # so that the case sees pings soon: the ratio is what is tested), its
    # RuntimeDirectory.
    usec = int(wd.group(1)) * 1000000 // 100
    r = Run(tmp, env={'WATCHDOG_USEC': str(usec), 'RUNTIME_DIRECTORY': rundir}, argv=argv)
    try:
        msg, raw = r.recv_until('READY')
        check(port_bound(r.ports[0]), 'READY=1 before the route listens')
        t0 = time.monotonic()
        msg, raw = r.recv_until('WATCHDOG', timeout=usec / 1e6)
        check(time.monotonic() - t0 < usec / 1e6, 'no WATCHDOG=1 within WatchdogSec/100')
        reload_cmd = unit['ExecReload'].replace('$MAINPID', str(r.proc.pid)).split()
        check(reload_cmd[0].endswith('/slipgate/slipgate-reload'), 'ExecReload=%r'
              % unit['ExecReload'])
        reload_cmd[0] = HELPER
        env = dict(os.environ, RUNTIME_DIRECTORY=rundir)
        res = subprocess.run(['sh'] + reload_cmd, capture_output=True, text=True, timeout=40,
                             env=env)
        check(res.returncode == 0, 'ExecReload on a good file: exit %d %s'
              % (res.returncode, res.stderr))
        r.write_conf('bogus_directive 1\n')
        res = subprocess.run(['sh'] + reload_cmd, capture_output=True, text=True, timeout=40,
                             env=env)
        check(res.returncode == 1 and 'refused' in res.stderr,
              'ExecReload on a refused file: exit %d %s' % (res.returncode, res.stderr))
        print('ExecStart %s: READY=1, WATCHDOG=1; ExecReload exit 0, then 1: %s'
              % (' '.join(argv[1:]), res.stderr.strip()))
    finally:
        r.close()


def metrics(port):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(slipgate_config_\w+(?:\{[^}]*\})?) (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def case_reload_metric(tmp):
    r = Run(tmp, http=True)
    ok = 'slipgate_config_last_reload_successful'
    ts = 'slipgate_config_last_reload_success_timestamp_seconds'
    applied = 'slipgate_config_reloads_total{result="applied"}'
    refused = 'slipgate_config_reloads_total{result="refused"}'
    try:
        r.recv_until('READY')
        m = metrics(r.http_port)
        check(m.get(ok) == 1 and m.get(applied) == 0 and m.get(refused) == 0,
              'at the start: %r' % m)
        start_ts = m.get(ts, 0)
        check(abs(start_ts - time.time()) < 60, 'start timestamp %r' % start_ts)
        time.sleep(0.01)  # the clock's millisecond moves on (the next timestamp must differ)
        r.hup()
        r.recv_until('RELOADING')
        r.recv_until('READY')
        m = metrics(r.http_port)
        check(m.get(ok) == 1 and m.get(applied) == 1 and m.get(refused) == 0,
              'after a good reload: %r' % m)
        good_ts = m.get(ts, 0)
        check(good_ts > start_ts, 'success timestamp %r not after the start %r'
              % (good_ts, start_ts))
        r.write_conf('bogus_directive 1\n')
        r.hup()
        r.recv_until('RELOADING')
        r.recv_until('READY')
        m = metrics(r.http_port)
        check(m.get(ok) == 0 and m.get(applied) == 1 and m.get(refused) == 1,
              'after a refused reload: %r' % m)
        check(m.get(ts) == good_ts, 'a refused reload moved the success timestamp: %r' % m)
        print('metrics after applied + refused: %r' % m)
    finally:
        r.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print('usage: systemd_test.py {%s}' % ','.join(sorted(CASES)), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix='slipgate-systemd-') as tmp:
        try:
            CASES[sys.argv[1]](tmp)
        except Fail as e:
            print('FAIL: %s' % e)
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
