#!/usr/bin/env python3
"""The container image (scripts/image.sh) built and run with podman in front
of a scripted Quake 3 server on 127.0.0.1.  Usage: container_test.py CASE

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

Environment: SLIPGATE (the binary, for `demo info`), SG_BUILD_ROOT (the
meson build whose slipgate goes into the image), SG_TESTDATA (captures).
On a machine whose cgroups are v1 or hybrid, podman runs with runc and the
cgroupfs manager; where the hard open-files limit is below what podman
asks, with `default_ulimits = []` (../shared knowledge, detected here, not
assumed).  Without podman or mmdebstrap the test fails: it says why.
"""

import glob
import hashlib
import os
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
    try:
        s = socket.create_connection((V4, port), timeout=timeout)
    except OSError:
        return None, ''
    try:
        s.sendall(('GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' % path).encode())
        data = b''
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b'\r\n\r\n')
    try:
        return int(head.split(b' ', 2)[1]), body.decode(errors='replace')
    except (IndexError, ValueError):
        return None, ''


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


def case_image_drain(h):
    exe = os.environ.get('SLIPGATE')
    build_root = os.environ.get('SG_BUILD_ROOT')
    check(exe and build_root, 'SLIPGATE and SG_BUILD_ROOT must be set (run through meson test)')
    t_all = time.monotonic()
    cmd, env, notes = podman_setup(h.dir)
    print('podman: %s' % ('; '.join(notes) or 'no workaround needed'))
    work = os.path.join(build_root, 'container-cache')
    image = image_for(build_root, exe, cmd, env, work)

    srv = server_socket()
    h.sockets.append(srv)
    http_port, listen_port = free_port(), free_port()
    conf = os.path.join(h.dir, 'slipgate.conf')
    with open(conf, 'w') as f:
        f.write('http 127.0.0.1:%d\ndrain_timeout 60s\nroute game {\n'
                '    listen 127.0.0.1:%d\n    server 127.0.0.1:%d\n    protocol q3\n'
                '    record /var/lib/slipgate/demos\n}\n'
                % (http_port, listen_port, srv.getsockname()[1]))
    os.chmod(conf, 0o644)
    demos = os.path.join(h.dir, 'demos')
    os.mkdir(demos)
    os.chmod(demos, 0o777)  # the image's user writes there
    name = 'slipgate-test-%d' % os.getpid()
    argv = cmd + ['run', '--rm', '--name', name, '--network=host',
                  '-v', '%s:/etc/slipgate/slipgate.conf:ro' % conf,
                  '-v', '%s:/var/lib/slipgate/demos' % demos,
                  '-e', 'SLIPGATE_SET_IDLE_TIMEOUT=1500ms',
                  image, '+set', 'drain_timeout', '20s']
    lines = []
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)

    def read():
        for raw in proc.stdout:
            lines.append(raw.decode(errors='replace').rstrip())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    keep = {}
    try:
        t0 = time.monotonic()
        for _ in range(400):
            if http_get(http_port, '/ready')[0] == 200:
                break
            if proc.poll() is not None:
                reader.join(5)
                raise Fail('podman run exited %s before slipgate was ready: podman cannot run '
                           'the image here\n%s' % (proc.returncode, '\n'.join(lines)[-3000:]))
            check(time.monotonic() - t0 < 20, 'slipgate in the container not ready after 20 s\n'
                  + '\n'.join(lines)[-3000:])
            time.sleep(0.05)
        started = time.monotonic() - t0
        check(http_get(http_port, '/live')[0] == 200, '/live is not 200')
        cap = q3cap.Capture('ioq71')
        sent, got = replay_game(Part(cap, 0, 0.4), listen_port, srv, keep=keep)
        check(sent > 50 and got >= sent - 10, 'before SIGTERM: %d sent, %d arrived' % (sent, got))
        subprocess.run(cmd + ['kill', '--signal', 'TERM', name], env=env, capture_output=True,
                       timeout=20)
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
        rc = proc.wait(15)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        if proc.poll() is None:
            subprocess.run(cmd + ['kill', '--signal', 'KILL', name], env=env, capture_output=True,
                           timeout=20)
            proc.wait(10)
        reader.join(5)
    log = '\n'.join(lines)
    check(rc == 0, 'the container exited %s, expected 0 once the session ended\n%s'
          % (rc, log[-3000:]))
    check('drained (no session left)' in log, 'no "drained" line:\n' + log[-3000:])
    files = glob.glob(os.path.join(demos, '**', '*.dm_*'), recursive=True)
    check(len(files) == 1, 'demos in the volume: %r' % files)
    st = os.stat(files[0])
    check(st.st_uid == UID and st.st_size > 1000, '%s: owner %d, %d bytes' % (files[0], st.st_uid,
                                                                             st.st_size))
    r = subprocess.run([exe, 'demo', 'info', files[0]], capture_output=True, text=True,
                       timeout=20)
    check(r.returncode == 0, 'slipgate demo info: %d\n%s%s' % (r.returncode, r.stdout,
                                                              r.stderr))
    print('ready %.1f s after podman run; /ready 503 %.0f ms after SIGTERM; %d + %d datagrams '
          'relayed; demo %s (%d bytes); %.1f s in all'
          % (started, took * 1000, got, got2, os.path.basename(files[0]), st.st_size,
             time.monotonic() - t_all))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
