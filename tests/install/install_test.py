"""What an operator installs, checked from the installed files (doc/install.md).

    install_test.py CASE     (SG_BUILD: the meson build directory,
                              SG_SOURCE: the source tree)

    layout               `meson install --destdir` puts the binary, the man
                         page, SYSCONFDIR/slipgate/slipgate.conf (the
                         example), the example beside the docs, the plugin
                         headers, slipgate-filter.pc and both systemd units
                         where they belong; the installed binary runs and
                         accepts the installed configuration
    keeps_edited_config  a second `meson install` over an edited
                         slipgate.conf keeps the operator's file
    plugin_pkgconfig     the installed example plugin builds out of tree with
                         only `pkg-config --cflags slipgate-filter` (the .pc
                         found through PKG_CONFIG_PATH, --define-prefix) and
                         the installed slipgate loads it (--check-config,
                         `slipgate filters -c`)
    systemd_units        `systemd-analyze verify` accepts both installed
                         units without a warning (with their paths moved into
                         the destdir), `systemd-analyze security` rates them
                         at most 3.0, and they run the installed binary with
                         the installed config, hardened as doc/install.md says
    deb                  dpkg-buildpackage -b (DEB_BUILD_OPTIONS=nocheck) in a
                         copy of the source tree builds slipgate and
                         slipgate-dev, lintian finds no error, and the
                         packages install and run (see case_deb)

Nothing is sent on the network; every listen address checked is loopback
port 0 (the kernel picks a free one).
"""

import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ.get('SG_BUILD', '')
SOURCE = os.environ.get('SG_SOURCE') or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(cmd, timeout=120, **kw):
    """Run cmd; its CompletedProcess (text), output captured."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError as e:
        raise Fail('%s: not installed (scripts/deps.sh --test installs it): %s' % (cmd[0], e))


def ok(cmd, what, timeout=120, **kw):
    r = run(cmd, timeout=timeout, **kw)
    check(r.returncode == 0, '%s failed (exit %d): %s\n%s%s'
          % (what, r.returncode, ' '.join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
    return r


def loopback_sets(conf_text):
    """+set overrides that move each route's listen address of a config onto
    loopback port 0 (the kernel's pick): the example's own listen ports may
    be taken on this machine.  Its servers stay as shipped: the installed slipgate.conf must
    pass --check-config as it is, so they must resolve, offline too
    (tests/doc_check.py does the same)."""
    sets = []
    for name in re.findall(r'^\s*route\s+"?([A-Za-z0-9_.-]+)"?\s*\{', conf_text, re.M):
        sets += ['+set', '%s.listen' % name, '127.0.0.1:0']
    return sets


def read(path):
    with open(path) as f:
        return f.read()


def meson_opt(name):
    """A meson option of the build directory, from `meson introspect`."""
    r = ok(['meson', 'introspect', '--buildoptions', BUILD], 'meson introspect')
    for o in json.loads(r.stdout):
        if o['name'] == name:
            return o['value']
    raise Fail('no meson option %r' % name)


class Tree:
    """A `meson install --destdir` of the build directory, and its paths."""

    def __init__(self, dest):
        check(BUILD, 'SG_BUILD (the meson build directory) is not set')
        self.dest = dest
        self.prefix = meson_opt('prefix')
        self.install()

        def at(opt):
            v = meson_opt(opt)
            return v if os.path.isabs(v) else os.path.join(self.prefix, v)
        self.bindir, self.mandir = at('bindir'), at('mandir')
        self.sysconfdir, self.datadir = at('sysconfdir'), at('datadir')
        self.includedir, self.libexecdir = at('includedir'), at('libexecdir')

    @property
    def unitdir(self):
        # -Dsystemdsystemunitdir, or dist/meson.build's default: the
        # installed units are found.
        found = glob.glob(os.path.join(self.dest + '/', '**', 'slipgate.service'), recursive=True)
        check(len(found) == 1, 'slipgate.service installed %d times: %r' % (len(found), found))
        return os.path.dirname(found[0])[len(self.dest):]

    def install(self):
        ok(['meson', 'install', '-C', BUILD, '--destdir', self.dest, '--no-rebuild'],
           'meson install --destdir')

    def real(self, path):
        """The destdir path of an installed absolute path."""
        return self.dest + path

    def slipgate(self):
        return self.real(os.path.join(self.bindir, 'slipgate'))

    def conf(self):
        return os.path.join(self.sysconfdir, 'slipgate', 'slipgate.conf')


EXAMPLE = os.path.join(SOURCE, 'config', 'slipgate.conf.example')


def case_layout(tmp):
    t = Tree(os.path.join(tmp, 'dest'))
    want = {
        os.path.join(t.bindir, 'slipgate'): None,
        os.path.join(t.mandir, 'man1', 'slipgate.1'): os.path.join(SOURCE, 'doc', 'slipgate.1'),
        t.conf(): EXAMPLE,
        os.path.join(t.datadir, 'doc', 'slipgate', 'slipgate.conf.example'): EXAMPLE,
        os.path.join(t.datadir, 'doc', 'slipgate', 'examples', 'example_plugin.c'):
            os.path.join(SOURCE, 'tests', 'filters', 'plugin', 'example_plugin.c'),
        os.path.join(t.includedir, 'slipgate', 'filters', 'filter.h'):
            os.path.join(SOURCE, 'filters', 'filter.h'),
        os.path.join(t.includedir, 'slipgate', 'protocols', 'codec.h'):
            os.path.join(SOURCE, 'protocols', 'codec.h'),
        os.path.join(t.includedir, 'slipgate', 'config', 'config.h'):
            os.path.join(SOURCE, 'config', 'config.h'),
        os.path.join(t.datadir, 'pkgconfig', 'slipgate-filter.pc'): None,
        os.path.join(t.unitdir, 'slipgate.service'): None,
        os.path.join(t.unitdir, 'slipgate@.service'): None,
        os.path.join(t.libexecdir, 'slipgate', 'slipgate-play'):
            os.path.join(SOURCE, 'scripts', 'slipgate-play'),
    }
    for path, same_as in sorted(want.items()):
        real = t.real(path)
        check(os.path.isfile(real), '%s is not installed (looked for %s)' % (path, real))
        if same_as:
            check(read(real) == read(same_as), '%s differs from %s' % (path, same_as))
        print('installed %s' % path)
    check(os.access(t.slipgate(), os.X_OK), '%s is not executable' % t.slipgate())
    check(oct(os.stat(t.real(t.conf())).st_mode & 0o777) == oct(0o644),
          '%s has mode %o' % (t.conf(), os.stat(t.real(t.conf())).st_mode & 0o777))
    if t.prefix == '/usr':
        check(t.sysconfdir == '/etc', 'prefix /usr but sysconfdir %s' % t.sysconfdir)
    r = ok([t.slipgate(), '--version'], 'the installed slipgate --version')
    check(re.search(r'\b0\.\d+\.\d+\b', r.stdout + r.stderr), '--version printed %r' % r.stdout)
    conf = t.real(t.conf())
    r = ok([t.slipgate(), '--check-config', '-c', conf] + loopback_sets(read(conf)),
           '--check-config of the installed %s' % t.conf())
    print('installed slipgate: %s; --check-config %s: exit 0' % (r.stdout.strip() or 'ok', t.conf()))
    # The installed `slipgate play` finds its playground script beside it.
    play = t.real(os.path.join(t.libexecdir, 'slipgate', 'slipgate-play'))
    check(os.access(play, os.X_OK), '%s is not executable' % play)
    r = ok([t.slipgate(), 'play', '--help'], 'the installed slipgate play --help')
    check('usage: slipgate play' in r.stdout, 'slipgate play --help printed %r' % r.stdout[:300])
    print('installed slipgate play --help: %s' % r.stdout.splitlines()[0])


def case_keeps_edited_config(tmp):
    t = Tree(os.path.join(tmp, 'dest'))
    conf = t.real(t.conf())
    check(os.path.isfile(conf), '%s is not installed' % t.conf())
    check(read(conf) == read(EXAMPLE), 'the first install did not put the example in %s' % t.conf())
    edited = read(conf).replace('idle_timeout 60s', 'idle_timeout 75s') + '\n# edited by the operator\n'
    with open(conf, 'w') as f:
        f.write(edited)
    t.install()
    check(read(conf) == edited, 'a second meson install overwrote the edited %s' % t.conf())
    shown = t.real(os.path.join(t.datadir, 'doc', 'slipgate', 'slipgate.conf.example'))
    check(read(shown) == read(EXAMPLE), 'the example beside the docs is not the new one')
    os.unlink(conf)
    t.install()
    check(read(conf) == read(EXAMPLE), 'a deleted %s was not installed again' % t.conf())
    print('an edited %s survives meson install; a missing one is installed' % t.conf())


def pkg_config(pcdir, *args, define_prefix=True):
    """pkg-config seeing only the .pc files in pcdir."""
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_LIBDIR=pcdir)
    env.pop('PKG_CONFIG_SYSROOT_DIR', None)
    cmd = ['pkg-config'] + (['--define-prefix'] if define_prefix else []) + list(args)
    return ok(cmd, 'pkg-config', env=env).stdout.strip()


def build_plugin(cflags, src, out):
    cc = os.environ.get('CC') or shutil.which('cc') or shutil.which('gcc')
    check(cc, 'no C compiler (cc) to build the plugin with')
    # Only pkg-config's flags: the source tree is not on the include path.
    ok([cc, '-std=c11', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC'] + cflags.split()
       + ['-o', out, src], 'building %s out of tree' % os.path.basename(src), cwd=os.path.dirname(out))


def check_plugin_loads(slipgate, so, tmp):
    """--check-config with a config that loads the plugin and uses its
    filter, and `slipgate filters -c` listing it."""
    conf = os.path.join(tmp, 'plugin.conf')
    with open(conf, 'w') as f:
        f.write('plugin "%s"\nroute main {\n    listen 127.0.0.1:0\n    server 127.0.0.1:27960\n'
                '    filter example_counter counter {\n        every 100\n    }\n}\n' % so)
    ok([slipgate, '--check-config', '-c', conf], '--check-config of a config loading %s' % so)
    r = ok([slipgate, 'filters', '-c', conf], 'slipgate filters -c')
    check(re.search(r'^example_counter\b', r.stdout, re.M),
          '`slipgate filters -c` does not list example_counter:\n%s' % r.stdout)
    # The same config with a filter the plugin does not have is refused: the
    # check above really loaded the plugin's filters.
    with open(conf, 'w') as f:
        f.write('plugin "%s"\nroute main {\n    listen 127.0.0.1:0\n    server 127.0.0.1:27960\n'
                '    filter example_nonesuch { }\n}\n' % so)
    r = run([slipgate, '--check-config', '-c', conf])
    check(r.returncode != 0, '--check-config accepted a filter no plugin has')


def case_plugin_pkgconfig(tmp):
    t = Tree(os.path.join(tmp, 'dest'))
    pcdir = t.real(os.path.join(t.datadir, 'pkgconfig'))
    cflags = pkg_config(pcdir, '--cflags', 'slipgate-filter')
    inc = t.real(os.path.join(t.includedir, 'slipgate'))
    check(cflags.split() == ['-I' + inc],
          'pkg-config --define-prefix --cflags slipgate-filter: %r, want -I%s' % (cflags, inc))
    # Without --define-prefix the .pc names the real prefix.
    plain = pkg_config(pcdir, '--cflags', 'slipgate-filter', define_prefix=False)
    check(plain == '-I' + os.path.join(t.includedir, 'slipgate'), 'the .pc says %r' % plain)
    abi = pkg_config(pcdir, '--variable=filter_abi', 'slipgate-filter')
    want = re.search(r'#define SG_FILTER_ABI (\d+)', read(os.path.join(SOURCE, 'filters', 'filter.h')))
    check(abi == want.group(1), 'filter_abi=%r, filter.h has %s' % (abi, want.group(1)))
    version = pkg_config(pcdir, '--modversion', 'slipgate-filter')
    # The installed example, built in a directory of its own.
    work = os.path.join(tmp, 'plugin-src')
    os.mkdir(work)
    src = os.path.join(work, 'example_plugin.c')
    shutil.copy(t.real(os.path.join(t.datadir, 'doc', 'slipgate', 'examples', 'example_plugin.c')), src)
    so = os.path.join(work, 'example_plugin.so')
    build_plugin(cflags, src, so)
    check_plugin_loads(t.slipgate(), so, tmp)
    print('slipgate-filter %s (ABI %s): cc %s -shared -fPIC built the example; the installed '
          'slipgate loads it' % (version, abi, cflags))


HARDENING = ['DynamicUser=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes',
             'NoNewPrivileges=yes', 'CapabilityBoundingSet=', 'AmbientCapabilities=',
             'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX',
             'SystemCallFilter=@system-service', 'Type=notify', 'NotifyAccess=main',
             'WatchdogSec=30s', 'Restart=on-failure']


def case_systemd_units(tmp):
    t = Tree(os.path.join(tmp, 'dest'))
    exe = os.path.join(t.bindir, 'slipgate')
    moved = os.path.join(tmp, 'units')
    os.mkdir(moved)
    env = dict(os.environ, MANPATH=t.real(t.mandir))
    for unit, conf, instance in [('slipgate.service', t.conf(), 'slipgate.service'),
                                 ('slipgate@.service',
                                  os.path.join(t.sysconfdir, 'slipgate', '%i.conf'),
                                  'slipgate@demo.service')]:
        text = read(t.real(os.path.join(t.unitdir, unit)))
        lines = set(text.splitlines())
        want = 'ExecStart=%s -c %s' % (exe, conf)
        check(want in lines, '%s: no line %r' % (unit, want))
        for h in HARDENING:
            check(h in lines, '%s: no line %r' % (unit, h))
        state = 'StateDirectory=slipgate' + ('/%i' if '@' in unit else '')
        check(state in lines, '%s: no line %r' % (unit, state))
        # ExecReload: the helper that waits for the outcome in RuntimeDirectory.
        helper = os.path.join(t.libexecdir, 'slipgate', 'slipgate-reload')
        for want in ('ExecReload=%s $MAINPID' % helper,
                     'RuntimeDirectory=slipgate' + ('/%i' if '@' in unit else '')):
            check(want in lines, '%s: no line %r' % (unit, want))
        check(os.access(t.real(helper), os.X_OK), '%s is not installed executable' % helper)
        # CAP_NET_ADMIN only through the documented drop-in.
        check('CAP_NET_ADMIN' not in ''.join(l for l in lines if not l.startswith('#')),
              '%s grants CAP_NET_ADMIN' % unit)
        dropin = os.path.join(t.datadir, 'doc', 'slipgate', 'systemd', 'socket-buffer.conf')
        check(dropin in text, '%s does not name the drop-in %s' % (unit, dropin))
        dl = set(read(t.real(dropin)).splitlines())
        for want in ('[Service]', 'CapabilityBoundingSet=CAP_NET_ADMIN',
                     'AmbientCapabilities=CAP_NET_ADMIN'):
            check(want in dl, '%s: no line %r' % (dropin, want))
        # The destdir stands in for /: the unit runs the binary meson
        # installed (systemd-analyze checks that it is executable).
        check(os.access(t.real(exe), os.X_OK), '%s is not installed' % exe)
        with open(os.path.join(moved, instance), 'w') as f:
            f.write(text.replace('ExecStart=' + exe, 'ExecStart=' + t.real(exe))
                    .replace('ExecReload=' + helper, 'ExecReload=' + t.real(helper)))
        r = run(['systemd-analyze', 'verify', os.path.join(moved, instance)], env=env, timeout=60)
        check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
              'systemd-analyze verify %s (exit %d):\n%s%s'
              % (unit, r.returncode, r.stdout, r.stderr))
        r = run(['systemd-analyze', 'security', '--offline=true', '--threshold=30',
                 os.path.join(moved, instance)], env=env, timeout=60)
        score = re.search(r'Overall exposure level for \S+: (\d+\.\d+)', r.stdout)
        check(r.returncode == 0 and score, 'systemd-analyze security %s (exit %d):\n%s%s'
              % (unit, r.returncode, r.stdout[-3000:], r.stderr))
        print('%s: systemd-analyze verify: clean; security: exposure %s' % (unit, score.group(1)))


def copy_source(dst):
    """The source tree without its build directories and .git."""
    def ignore(d, names):
        skip = {n for n in names if n == '.git' or n == '__pycache__'}
        if os.path.samefile(d, SOURCE):
            skip |= {n for n in names
                     if os.path.isdir(os.path.join(d, n, 'meson-private'))
                     or os.path.exists(os.path.join(d, n, 'build.ninja'))}
        if os.path.basename(d) == 'debian' and os.path.samefile(os.path.dirname(d), SOURCE):
            # leftovers of an in-tree dpkg-buildpackage
            skip |= {n for n in names if n in ('tmp', '.debhelper', 'files', 'slipgate',
                                               'slipgate-dev') or n.endswith(
                                                   ('.substvars', '.debhelper.log'))}
        return skip
    shutil.copytree(SOURCE, dst, symlinks=True, ignore=ignore)


def installed_version(pkg):
    r = run(['dpkg-query', '-W', '-f=${Status}', pkg])
    return r.returncode == 0 and 'installed' in r.stdout and 'not-installed' not in r.stdout


def case_deb(tmp):
    """
    Build, lint and install the Debian packages.

    Install: as root on a machine where no slipgate package, /usr/bin/slipgate
    or /etc/slipgate exists (the CI machine), the packages are installed for
    real with `dpkg -i` (their maintainer scripts run; the unit is neither
    enabled nor started), the installed /usr/bin/slipgate runs --version and
    --check-config -c /etc/slipgate/slipgate.conf, the example plugin builds
    with the system's pkg-config, and `dpkg -P` removes everything again
    (checked).  Anywhere else (not root, or an operator's slipgate is there
    and must be left alone) the packages are unpacked with `dpkg -x` into a
    temporary root and the same checks run there; the output says which.
    """
    src = os.path.join(tmp, 'pkg', 'slipgate')
    copy_source(src)
    env = dict(os.environ, DEB_BUILD_OPTIONS='nocheck parallel=%d' % min(os.cpu_count() or 1, 2))
    for v in ('CFLAGS', 'LDFLAGS', 'CPPFLAGS', 'MESON_TESTTHREADS', 'DESTDIR'):
        env.pop(v, None)
    ok(['dpkg-buildpackage', '-b', '-us', '-uc'], 'dpkg-buildpackage -b -us -uc', cwd=src, env=env,
       timeout=1500)
    debs = sorted(glob.glob(os.path.join(tmp, 'pkg', '*.deb')))
    names = sorted(os.path.basename(d).split('_')[0] for d in debs)
    check(names == ['slipgate', 'slipgate-dbgsym', 'slipgate-dev'] or names == ['slipgate', 'slipgate-dev'],
          'dpkg-buildpackage made %r' % names)
    debs = [d for d in debs if '-dbgsym_' not in d]
    for d in debs:
        r = ok(['dpkg-deb', '-c', d], 'dpkg-deb -c')
        print('%s:\n%s' % (os.path.basename(d), '\n'.join(
            '  ' + line.split()[-1] for line in r.stdout.splitlines() if not line.endswith('/'))))
    changes = glob.glob(os.path.join(tmp, 'pkg', '*.changes'))
    check(len(changes) == 1, 'changes files: %r' % changes)
    r = run(['lintian', '--allow-root', '--no-cfg', '--tag-display-limit', '0', changes[0]],
            timeout=600)
    tags = [line for line in r.stdout.splitlines() if re.match(r'^[EWIPNX]: ', line)]
    errors = [line for line in tags if line.startswith('E: ')]
    print('lintian: %d errors, %d warnings' % (len(errors), sum(1 for t in tags if t.startswith('W: '))))
    for line in tags:
        print('  ' + line)
    check(not errors, 'lintian errors:\n' + '\n'.join(errors) + '\n' + r.stderr)
    check(r.returncode == 0, 'lintian exit %d: %s' % (r.returncode, r.stderr))

    real = (os.geteuid() == 0 and not installed_version('slipgate')
            and not installed_version('slipgate-dev') and not os.path.exists('/usr/bin/slipgate')
            and not os.path.exists('/etc/slipgate'))
    lock = None
    if real:
        # Two test runs on one machine (two checkouts) take turns; the one
        # that finds the other's package installed unpacks instead.
        lock = open(os.path.join(tempfile.gettempdir(), 'slipgate-install-test.lock'), 'w')
        fcntl.flock(lock, fcntl.LOCK_EX)
        real = not installed_version('slipgate') and not os.path.exists('/usr/bin/slipgate')
    if real:
        print('installing with dpkg -i on this machine (root, no slipgate installed)')
        try:
            ok(['dpkg', '-i'] + debs, 'dpkg -i', timeout=300,
               env=dict(os.environ, DEBIAN_FRONTEND='noninteractive'))
            check_installed(tmp, '', system_pkg_config=True)
        finally:
            r = run(['dpkg', '-P', 'slipgate-dev', 'slipgate'], timeout=300)
            lock.close()
        check(r.returncode == 0, 'dpkg -P failed: %s%s' % (r.stdout, r.stderr))
        left = [p for p in ('/usr/bin/slipgate', '/etc/slipgate', '/usr/include/slipgate',
                            '/lib/systemd/system/slipgate.service',
                            '/usr/share/pkgconfig/slipgate-filter.pc') if os.path.lexists(p)]
        check(not left, 'dpkg -P left %r behind' % left)
        print('dpkg -P removed both packages and every file')
    else:
        if lock:
            lock.close()
        print('unpacking with dpkg -x into a temporary root (%s)'
              % ('not root' if os.geteuid() != 0 else 'a slipgate is installed here: left alone'))
        root = os.path.join(tmp, 'root')
        for d in debs:
            ok(['dpkg', '-x', d, root], 'dpkg -x')
        check_installed(tmp, root, system_pkg_config=False)


def check_installed(tmp, root, system_pkg_config):
    """The packaged files under root ('' for /) run and build a plugin."""
    exe = root + '/usr/bin/slipgate'
    conf = root + '/etc/slipgate/slipgate.conf'
    for p in (exe, conf, root + '/usr/share/man/man1/slipgate.1.gz',
              root + '/lib/systemd/system/slipgate.service',
              root + '/lib/systemd/system/slipgate@.service',
              root + '/usr/libexec/slipgate/slipgate-reload',
              root + '/usr/share/doc/slipgate/systemd/socket-buffer.conf',
              root + '/usr/include/slipgate/filters/filter.h',
              root + '/usr/share/pkgconfig/slipgate-filter.pc',
              root + '/usr/share/doc/slipgate-dev/examples/example_plugin.c'):
        check(os.path.exists(p), '%s is not in the packages' % p)
    check(read(conf) == read(EXAMPLE), '/etc/slipgate/slipgate.conf is not the example')
    r = ok([exe, '--version'], 'the packaged slipgate --version')
    print('%s --version: %s' % (exe, (r.stdout + r.stderr).strip().splitlines()[0]))
    ok([exe, '--check-config', '-c', conf] + loopback_sets(read(conf)),
       '--check-config -c /etc/slipgate/slipgate.conf')
    print('%s --check-config -c %s: exit 0' % (exe, conf))
    text = read(root + '/lib/systemd/system/slipgate.service')
    check('ExecStart=/usr/bin/slipgate -c /etc/slipgate/slipgate.conf' in text.splitlines(),
          'the packaged unit does not run /usr/bin/slipgate -c /etc/slipgate/slipgate.conf')
    check('ExecReload=/usr/libexec/slipgate/slipgate-reload $MAINPID' in text.splitlines(),
          'the packaged unit does not reload through /usr/libexec/slipgate/slipgate-reload')
    check(os.access(root + '/usr/libexec/slipgate/slipgate-reload', os.X_OK),
          'the packaged slipgate-reload is not executable')
    if system_pkg_config:
        r = ok(['pkg-config', '--cflags', 'slipgate-filter'], 'pkg-config --cflags slipgate-filter')
        cflags = r.stdout.strip()
        check(cflags == '-I/usr/include/slipgate', 'pkg-config: %r' % cflags)
    else:
        cflags = pkg_config(root + '/usr/share/pkgconfig', '--cflags', 'slipgate-filter')
        check(cflags == '-I%s/usr/include/slipgate' % root, 'pkg-config --define-prefix: %r' % cflags)
    work = os.path.join(tmp, 'deb-plugin')
    os.mkdir(work)
    src = os.path.join(work, 'example_plugin.c')
    shutil.copy(root + '/usr/share/doc/slipgate-dev/examples/example_plugin.c', src)
    so = os.path.join(work, 'example_plugin.so')
    build_plugin(cflags, src, so)
    check_plugin_loads(exe, so, tmp)
    print('the packaged example plugin builds with %s and the packaged slipgate loads it' % cflags)


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print('usage: install_test.py CASE (%s)' % ' '.join(CASES), file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix='sg-install-') as tmpdir:
        try:
            CASES[sys.argv[1]](tmpdir)
        except Fail as e:
            print('FAIL: %s' % e, file=sys.stderr)
            sys.exit(1)
    print('ok')
