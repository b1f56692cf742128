#!/usr/bin/env python3
"""The container image (scripts/image.sh) built and run with podman in front
of a scripted or a real Quake 3 server on 127.0.0.1.
Usage: container_test.py CASE

    image_drain   scripts/image.sh builds the image from Debian's packages
                  and this build's slipgate (reused while the binary and the
                  script are the same); `podman run --network=host` with the
                  configuration mounted on /etc/slipgate/slipgate.conf, a
                  SLIPGATE_SET_ variable and a +set argument; /live and
                  /ready answer 200; a Quake 3 capture's client replays
                  through it against our scripted server; SIGTERM (podman
                  kill): /ready 503 at once, the session keeps working, a
                  new client gets nothing; once the session ends (idle) the
                  container exits 0; the demo is in the mounted volume,
                  written by the image's user (10001) and whole (slipgate
                  demo info reads it)
    ioq3ded       the same image in front of a real ioq3ded (OpenArena's
                  data, a bot; ../peers/q3_peers.py starts it and the
                  client): the real ioquake3 client plays through it a few
                  seconds, /ready 200; SIGTERM: /ready 503 at once, the
                  player goes on (the session's packets rise both ways, the
                  server lists the player with a live ping), then quits
                  (its own `quit`); its session ends a few seconds after the
                  client's disconnect (reason "client left", well before
                  idle_timeout), the container exits 0, the demo ended at
                  the client's disconnect; in the volume it reads with 0 errors and
                  plays to its end in ioquake3

Environment: SLIPGATE (the binary, for `demo info`), SG_BUILD_ROOT (the
meson build whose slipgate goes into the image), SG_TESTDATA (captures,
image_drain).
On a machine whose cgroups are v1 or hybrid, podman runs with runc and the
cgroupfs manager; where the hard open-files limit is below what podman
asks, with `default_ulimits = []` (../shared knowledge, detected here, not
assumed).  Without podman or mmdebstrap the test fails: it says why.
"""

import glob
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'http'))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import Fail, check, V4, free_port  # noqa: E402
import httplib_sg  # noqa: E402
from httplib_sg import replay_game, server_socket, q3cap  # noqa: E402

IMAGE_REPO = 'localhost/slipgate'
UID = 10001


def podman_setup(tmp):
    """The podman command line prefix this machine needs, and why."""
    for tool in ('podman', 'mmdebstrap'):
        if not shutil.which(tool):
            raise Fail('%s is not installed: the container tests need podman, mmdebstrap, runc, '
                       'uidmap and slirp4netns (scripts/deps.sh --test)' % tool)
    cmd, env, notes = ['podman'], dict(os.environ), []
    fstype = subprocess.run(['stat', '-fc', '%T', '/sys/fs/cgroup'], capture_output=True,
                            text=True).stdout.strip()
    if fstype != 'cgroup2fs':
        # cgroup v1 or hybrid: crun refuses hybrid mode; runc with cgroupfs works.
        if not shutil.which('runc') and not os.path.exists('/usr/sbin/runc'):
            raise Fail('cgroups are v1/hybrid here (/sys/fs/cgroup is %s): podman needs runc, '
                       'which is not installed' % fstype)
        cmd += ['--runtime', 'runc', '--cgroup-manager=cgroupfs']
        notes.append('cgroups %s: runc + cgroupfs' % fstype)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1048576:
        # podman asks for RLIMIT_NOFILE/NPROC it cannot get here.
        conf = os.path.join(tmp, 'containers.conf')
        with open(conf, 'w') as f:
            f.write('[containers]\ndefault_ulimits = []\n')
        env['CONTAINERS_CONF'] = conf
        notes.append('open files hard limit %d: default_ulimits = []' % hard)
    return cmd, env, notes


def image_for(build_root, exe, cmd, env, work):
    """The image of this build's slipgate: built, or reused when the binary
    and scripts/image.sh are the ones it was built from."""
    h = hashlib.sha256()
    for p in (exe, os.path.join(ROOT, 'scripts', 'image.sh')):
        with open(p, 'rb') as f:
            h.update(hashlib.sha256(f.read()).digest())
    tag = '%s:test-%s' % (IMAGE_REPO, h.hexdigest()[:16])
    have = subprocess.run(cmd + ['image', 'exists', tag], env=env).returncode == 0
    t0 = time.monotonic()
    if not have:
        r = subprocess.run([os.path.join(ROOT, 'scripts', 'image.sh'), '--build', build_root,
                            '--work', work, '--tag', tag], env=env, capture_output=True,
                           text=True, timeout=240)
        check(r.returncode == 0, 'scripts/image.sh failed (%d):\n%s' % (r.returncode,
                                                                         r.stderr[-3000:]))
        print(r.stderr.strip().splitlines()[-1])
        # The older test images go.
        old = subprocess.run(cmd + ['images', '--format', '{{.Repository}}:{{.Tag}}',
                                    IMAGE_REPO], env=env, capture_output=True, text=True).stdout
        for t in old.split():
            if ':test-' in t and t != tag:
                subprocess.run(cmd + ['rmi', '-f', t], env=env, capture_output=True)
    size = int(subprocess.run(cmd + ['image', 'inspect', '--format', '{{.Size}}', tag], env=env,
                              capture_output=True, text=True).stdout.strip() or 0)
    print('image %s: %s, %.1f MB, %.1f s' % (tag, 'reused' if have else 'built', size / 1e6,
                                             time.monotonic() - t0))
    check(0 < size < 40 * 1000 * 1000, 'image size %d bytes: not under 40 MB' % size)
    return tag


def http_get(port, path, timeout=2.0):
    """(status, body text) of a GET, (None, '') when nothing answers."""
    try:
        status, _, body = httplib_sg.request(port, path, timeout=timeout)
    except (OSError, ValueError, IndexError):
        return None, ''
    return status, body.decode(errors='replace')


def wait_http(port, path, want, timeout):
    t0 = time.monotonic()
    got = (None, '')
    for _ in range(2000):
        got = http_get(port, path)
        if got[0] == want or time.monotonic() - t0 > timeout:
            break
        time.sleep(0.05)
    check(got[0] == want, '%s: %r, expected %d within %.0f s' % (path, got, want, timeout))
    return time.monotonic() - t0


class Part:
    """The part [start, end) of a capture's game."""

    def __init__(self, cap, start, end):
        self.checksum = cap.checksum
        game = cap.game()
        self._game = game[int(len(game) * start):int(len(game) * end)]

    def game(self):
        return self._game


class Container:
    """`podman run --rm --network=host` of the image with the configuration
    `conf` mounted on /etc/slipgate/slipgate.conf and the folder `demos` on
    /var/lib/slipgate/demos; its output collected by a thread."""

    def __init__(self, cmd, env, image, conf, demos, args=(), variables=()):
        self.cmd, self.env = cmd, env
        self.name = 'slipgate-test-%d' % os.getpid()
        argv = cmd + ['run', '--rm', '--name', self.name, '--network=host',
                      '-v', '%s:/etc/slipgate/slipgate.conf:ro' % conf,
                      '-v', '%s:/var/lib/slipgate/demos' % demos]
        for v in variables:
            argv += ['-e', v]
        argv += [image] + list(args)
        self.lines = []
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors='replace').rstrip())

    def log(self):
        return '\n'.join(self.lines)

    def wait_ready(self, http_port, timeout=20):
        """Seconds until /ready answers 200; fails if podman exits first."""
        t0 = time.monotonic()
        for _ in range(400):
            if http_get(http_port, '/ready')[0] == 200:
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                self.reader.join(5)
                raise Fail('podman run exited %s before slipgate was ready: podman cannot run '
                           'the image here\n%s' % (self.proc.returncode, self.log()[-3000:]))
            check(time.monotonic() - t0 < timeout, 'slipgate in the container not ready after '
                  '%.0f s\n%s' % (timeout, self.log()[-3000:]))
            time.sleep(0.05)
        raise Fail('slipgate in the container not ready\n' + self.log()[-3000:])

    def kill(self, sig):
        subprocess.run(self.cmd + ['kill', '--signal', sig, self.name], env=self.env,
                       capture_output=True, timeout=20)

    def wait(self, timeout):
        """The exit status, or None after `timeout` s."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        if self.proc.poll() is None:
            self.kill('KILL')
            self.proc.wait(10)
        self.reader.join(5)


def volume(tmp):
    """The folder mounted for recordings, writable by the image's user."""
    demos = os.path.join(tmp, 'demos')
    os.mkdir(demos)
    os.chmod(demos, 0o777)
    return demos


def write_conf(tmp, text):
    conf = os.path.join(tmp, 'slipgate.conf')
    with open(conf, 'w') as f:
        f.write(text)
    os.chmod(conf, 0o644)
    return conf


def volume_demo(exe, demos, ext):
    """The one demo in the volume: written by the image's user, and read
    whole by `slipgate demo info` with 0 errors.  Returns (path, size,
    info's output)."""
    files = glob.glob(os.path.join(demos, '**', '*.' + ext), recursive=True)
    check(len(files) == 1, 'demos in the volume: %r' % files)
    st = os.stat(files[0])
    check(st.st_uid == UID and st.st_size > 1000, '%s: owner %d, %d bytes' % (files[0], st.st_uid,
                                                                             st.st_size))
    r = subprocess.run([exe, 'demo', 'info', files[0]], capture_output=True, text=True,
                       timeout=20)
    check(r.returncode == 0 and re.search(r'errors:\s+0\b', r.stdout),
          'slipgate demo info: %d\n%s%s' % (r.returncode, r.stdout, r.stderr))
    return files[0], st.st_size, r.stdout


def image_setup(h):
    exe = os.environ.get('SLIPGATE')
    build_root = os.environ.get('SG_BUILD_ROOT')
    check(exe and build_root, 'SLIPGATE and SG_BUILD_ROOT must be set (run through meson test)')
    cmd, env, notes = podman_setup(h.dir)
    print('podman: %s' % ('; '.join(notes) or 'no workaround needed'))
    work = os.path.join(build_root, 'container-cache')
    return exe, cmd, env, image_for(build_root, exe, cmd, env, work)


def case_image_drain(h):
    t_all = time.monotonic()
    exe, cmd, env, image = image_setup(h)

    srv = server_socket()
    h.sockets.append(srv)
    http_port, listen_port = free_port(), free_port()
    conf = write_conf(h.dir, 'http 127.0.0.1:%d\ndrain_timeout 60s\nroute game {\n'
                      '    listen 127.0.0.1:%d\n    server 127.0.0.1:%d\n    protocol q3\n'
                      '    record /var/lib/slipgate/demos\n}\n'
                      % (http_port, listen_port, srv.getsockname()[1]))
    demos = volume(h.dir)
    box = Container(cmd, env, image, conf, demos, ['+set', 'drain_timeout', '20s'],
                    ['SLIPGATE_SET_IDLE_TIMEOUT=1500ms'])
    keep = {}
    rc = None
    try:
        started = box.wait_ready(http_port)
        check(http_get(http_port, '/live')[0] == 200, '/live is not 200')
        cap = q3cap.Capture('ioq71')
        sent, got = replay_game(Part(cap, 0, 0.4), listen_port, srv, keep=keep)
        check(sent > 50 and got >= sent - 10, 'before SIGTERM: %d sent, %d arrived' % (sent, got))
        box.kill('TERM')
        took = wait_http(http_port, '/ready', 503, 2)
        check(http_get(http_port, '/live')[0] == 200, '/live is not 200 while draining')
        sent2, got2 = replay_game(Part(cap, 0.4, 0.7), listen_port, srv, keep=keep)
        check(sent2 > 50 and got2 >= sent2 - 10, 'while draining: %d sent, %d arrived'
              % (sent2, got2))
        newcomer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        newcomer.bind((V4, 0))
        newcomer.sendto(b'\xff\xff\xff\xffgetchallenge 1', (V4, listen_port))
        srv.settimeout(0.5)
        try:
            data, _ = srv.recvfrom(65536)
            raise Fail('a new client reached the server while draining: %r' % data[:40])
        except socket.timeout:
            pass
        finally:
            newcomer.close()
        keep['cli'].close()
        rc = box.wait(15)
    finally:
        box.close()
    log = box.log()
    check(rc == 0, 'the container exited %s, expected 0 once the session ended\n%s'
          % (rc, log[-3000:]))
    check('drained (no session left)' in log, 'no "drained" line:\n' + log[-3000:])
    demo, size, _ = volume_demo(exe, demos, 'dm_*')
    print('ready %.1f s after podman run; /ready 503 %.0f ms after SIGTERM; %d + %d datagrams '
          'relayed; demo %s (%d bytes); %.1f s in all'
          % (started, took * 1000, got, got2, os.path.basename(demo), size,
             time.monotonic() - t_all))


def session_counters(http_port):
    """(c2s, s2c) packets of the one live session, from /api/sessions."""
    code, body = http_get(http_port, '/api/sessions')
    check(code == 200, '/api/sessions: %r' % code)
    sessions = json.loads(body)['sessions']
    check(len(sessions) == 1, 'expected one live session: %s' % body[:2000])
    c = sessions[0]['counters']
    return c['c2s_packets'], c['s2c_packets']


# The real-peer case: the game's time in seconds before and during the drain.
PLAY_S = 4
DRAIN_PLAY_S = 4
IDLE_S = 5


def case_ioq3ded(h):
    """A real ioq3ded (OpenArena's data, bots) on 127.0.0.1, the image in
    front of it, the real ioquake3 client playing through it across a
    SIGTERM: the drain keeps its session, the player quits, the container
    exits 0, the demo in the volume plays in ioquake3."""
    sys.path.insert(0, os.path.join(HERE, '..', 'peers'))
    import q3_peers as q3
    for p in (os.path.join(q3.IOQ3_DIR, 'ioq3ded'), os.path.join(q3.IOQ3_DIR, 'ioquake3')):
        check(os.access(p, os.X_OK), '%s is not installed (apt-get install ioquake3 '
              'ioquake3-server openarena openarena-server)' % p)
    check(shutil.which('xvfb-run'), 'xvfb-run is not installed (scripts/deps.sh --test)')
    t_all = time.monotonic()
    exe, cmd, env, image = image_setup(h)
    t_game = time.monotonic()

    srv_cvars, cli_cvars = q3.VARIANTS['ioq71']
    work = os.path.join(h.dir, 'peers')
    os.mkdir(work)
    srv_port, px_port, cli_port = (q3.free_udp_port() for _ in range(3))
    http_port = free_port()
    limit = 120
    procs = q3.Procs()
    box = None
    rc = None
    try:
        _, srv_log = q3.start_server(procs, work, srv_cvars, srv_port, limit, bots=2)
        conf = write_conf(h.dir, 'http 127.0.0.1:%d\ndrain_timeout 30s\nroute game {\n'
                          '    listen 127.0.0.1:%d\n    server 127.0.0.1:%d\n    protocol q3\n'
                          '    idle_timeout %ds\n    record /var/lib/slipgate/demos\n}\n'
                          % (http_port, px_port, srv_port, IDLE_S))
        demos = volume(h.dir)
        box = Container(cmd, env, image, conf, demos)
        started = box.wait_ready(http_port)

        cli, cli_log, home_cli = q3.start_client(procs, work, cli_cvars, cli_port, px_port, limit)

        def alive(what):
            check(cli.poll() is None, 'the client exited %s:\n%s'
                  % (what, q3.read(cli_log)[-2000:]))
            check(box.proc.poll() is None, 'the container exited %s:\n%s'
                  % (what, box.log()[-2000:]))

        if not q3.wait_for(lambda: 'peers^7 entered the game' in q3.read(srv_log), 30):
            raise Fail('the client never entered the game\n--- server\n%s\n--- client\n%s\n'
                       '--- slipgate\n%s' % (q3.read(srv_log)[-1500:], q3.read(cli_log)[-1500:],
                                             box.log()[-1500:]))
        entered = time.monotonic()
        while time.monotonic() - entered < PLAY_S:
            alive('before SIGTERM')
            time.sleep(0.25)
        check(http_get(http_port, '/ready')[0] == 200, '/ready is not 200 with a player in')
        before = session_counters(http_port)

        box.kill('TERM')
        took = wait_http(http_port, '/ready', 503, 2)
        check(http_get(http_port, '/live')[0] == 200, '/live is not 200 while draining')
        draining = time.monotonic()
        while time.monotonic() - draining < DRAIN_PLAY_S:
            alive('while draining')
            time.sleep(0.25)
        after = session_counters(http_port)
        # ~60 packets/s from the client and 20/s from the server in the game
        up, down = after[0] - before[0], after[1] - before[1]
        check(up >= 20 * DRAIN_PLAY_S and down >= 10 * DRAIN_PLAY_S,
              'while draining the session carried %d c>s and %d s>c packets in %d s'
              % (up, down, DRAIN_PLAY_S))
        status = q3.getstatus(srv_port)
        players = [l for l in status.split('\n')[2:] if '"peers' in l]
        check(players and players[0].split()[1] != '999',
              'while draining the server does not list a live player:\n' + status)
        for bad in ('timed out', 'peers^7 disconnected', 'Connection Interrupted'):
            check(bad not in q3.read(srv_log), 'server log says %r:\n%s'
                  % (bad, q3.read(srv_log)[-2000:]))

        q3.quit_client(cli, home_cli, srv_log, procs)
        quit_at = time.monotonic()
        rc = box.wait(IDLE_S + 15)
        ended = time.monotonic() - quit_at

        log = box.log()
        check(rc == 0, 'the container exited %s, expected 0 once the session ended\n%s'
              % (rc, log[-3000:]))
        check('drained (no session left)' in log, 'no "drained" line:\n' + log[-3000:])
        check(re.search(r'session end reason=client left', log),
              'the session did not end at the client\'s disconnect (the container exited '
              '%.1f s after its quit):\n%s' % (ended, log[-3000:]))
        check(re.search(r'demo \S+ finished .*; the client disconnected', log),
              'the recording did not end at the client\'s disconnect:\n' + log[-3000:])
        demo, size, info = volume_demo(exe, demos, 'dm_*')
        frames, secs, _ = q3.play_demo(demo, work, cli_cvars, procs, limit)
    except q3.Fail as e:
        raise Fail(str(e))
    finally:
        procs.stop_all()
        if box:
            box.close()
    msgs = re.search(r'messages:\s+(\d+)', info)
    print('ready %.1f s after podman run; in the game %d s, SIGTERM: /ready 503 after %.0f ms, '
          'the player went on %d s (%d c>s, %d s>c packets), quit, the container exited 0 '
          '%.1f s later; demo %s (%d bytes, %s messages, 0 errors) played: %d frames in %s s; '
          'the game %.1f s, %.1f s in all'
          % (started, PLAY_S, took * 1000, DRAIN_PLAY_S, up, down, ended,
             os.path.basename(demo), size, msgs.group(1) if msgs else '?', frames, secs,
             time.monotonic() - t_game, time.monotonic() - t_all))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
