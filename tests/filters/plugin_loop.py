"""Loopback tests of filter plugins (`plugin PATH`) through the real binary.

The plugins in tests/filters/plugin/ are compiled here with the C compiler
($CC, default cc) against the source tree's headers, or, for
`installed_headers`, against the headers `meson install --destdir` puts in a
temporary directory (the out-of-tree plugin author's view).

    loads_and_runs     the example plugin loads, its filter counts real
                       relayed traffic (its log lines, its summary at session
                       end, its --stats counters), `slipgate filters -c`
                       lists it (text and JSON), and slipgate exits 0 after
                       SIGTERM (under AddressSanitizer: no leak)
    wrong_abi          refused at start-up: the file and both ABI versions
                       named, exit 1, nothing listening
    missing_file       a clear message naming the path, exit 1
    not_a_plugin       a shared object without the entry point: named, exit 1
    installed_headers  the example builds with only the installed headers and
                       loads

Only 127.0.0.1 is used; every process is killed by PID at the end.
"""

import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'loopback'))

import harness  # noqa: E402
from harness import V4, Fail, Skip, check  # noqa: E402

N = 30


def filter_abi():
    with open(os.path.join(ROOT, 'filters', 'filter.h')) as f:
        m = re.search(r'#define SG_FILTER_ABI (\d+)', f.read())
    check(m, 'no SG_FILTER_ABI in filters/filter.h')
    return int(m.group(1))


def build(h, name, include=ROOT):
    """Compile tests/filters/plugin/NAME.c into a shared object; its path."""
    cc = os.environ.get('CC') or shutil.which('cc') or shutil.which('gcc')
    if not cc:
        raise Skip('no C compiler to build the plugins with')
    out = h.path(name + '.so')
    r = subprocess.run([cc, '-shared', '-fPIC', '-std=c11', '-Wall', '-Wextra', '-Werror',
                        '-I', include, '-o', out, os.path.join(HERE, 'plugin', name + '.c')],
                       capture_output=True, timeout=60)
    check(r.returncode == 0, 'building %s failed:\n%s' % (name, r.stderr.decode(errors='replace')))
    return out


CONFIG = '''plugin "%(plugin)s"
route main {
    listen 127.0.0.1:$P0
    server %(server)s
    filter example_counter counter {
        every 10
    }
}
'''


def run_example(h, so):
    srv = h.echo(V4)
    px = h.proxy(config=CONFIG % {'plugin': so, 'server': srv.addr})
    c = h.client(V4)
    got = harness.pump([(c, b'frame %d' % i) for i in range(N)], (V4, px.ports[0]), b'ECHO')
    check(len(got[c]) == N, 'got %d of %d echoes through the plugin' % (len(got[c]), N))
    rc = px.stop()
    check(rc == 0, 'slipgate exited %d after SIGTERM (with AddressSanitizer, a leak report '
          'makes it non-zero)\n%s' % (rc, px.log_text()[-3000:]))
    log = px.log_text()
    running = re.findall(r'counter: (\d+) frames so far', log)
    check(running == [str(k) for k in range(10, 2 * N + 1, 10)],
          'running counts logged: %r, expected every 10 frames up to %d' % (running, 2 * N))
    m = re.search(r'example_counter: session (\d+) \(127\.0\.0\.1:%d\): to server (\d+) frames '
                  r'(\d+) messages, to client (\d+) frames (\d+) messages, (\d+) undecoded'
                  % c.port, log)
    check(m, 'no end-of-session summary from the plugin:\n%s' % log[-2000:])
    check(m.group(2) == str(N) and m.group(4) == str(N) and m.group(6) == str(2 * N),
          'summary %r, expected %d frames each way, all undecoded' % (m.group(0), N))
    st = px.stats()
    f = st['routes'][0]['filters']
    check([(x['label'], x['name'], x['tap'], x['seen'], x['passed'], x['errors']) for x in f]
          == [('counter', 'example_counter', False, 2 * N, 2 * N, 0)],
          '--stats filters %r' % f)
    return px, m.group(0)


def case_loads_and_runs(h):
    so = build(h, 'example_plugin')
    px, summary = run_example(h, so)
    # `slipgate filters -c` lists the plugin's filter after the built-ins
    r = h.run(['filters', '-c', px.config_path])
    out = r.stdout.decode(errors='replace')
    check(r.returncode == 0, 'slipgate filters -c: exit %d\n%s' % (r.returncode, r.stderr))
    check(re.search(r'^example_counter  \(filter, plugin %s\)\n    count each session' %
                    re.escape(so), out, re.M) and
          re.search(r'^    every\s+N\s+also log a running count', out, re.M),
          'slipgate filters -c does not list the plugin\'s filter:\n%s' % out)
    plain = h.run(['filters']).stdout.decode(errors='replace')
    check('example_counter' not in plain and re.search(r'^record  \(tap\)', plain, re.M),
          'slipgate filters without -c:\n%s' % plain)
    r = h.run(['filters', '--json', '-c', px.config_path])
    check(r.returncode == 0, 'slipgate filters --json: exit %d' % r.returncode)
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise Fail('slipgate filters --json is not JSON (%s): %r' % (e, r.stdout[:500]))
    by = {x['name']: x for x in doc['filters']}
    ex = by.get('example_counter')
    check(ex and ex['plugin'] == so and ex['kind'] == 'filter'
          and ex['directives'] == [{'name': 'every', 'type': 'integer', 'argname': 'N',
                                    'help': 'also log a running count every N frames of a '
                                            'session (default 0: never)'}],
          'JSON entry %r' % ex)
    check(by.get('record', {}).get('kind') == 'tap' and by['record']['plugin'] is None
          and [d['name'] for d in by['record']['directives']] ==
          ['directory', 'name', 'split_on_map_change', 'max_size', 'at_max_size'],
          'JSON record entry %r' % by.get('record'))
    print('%s; %d filters listed' % (summary, len(doc['filters'])))


def refused(h, path, patterns):
    px = harness.Proxy(h.exe, h.dir, 'bad')
    h.proxies.append(px)
    px.start('plugin "%s"\nroute r {\n    listen 127.0.0.1:$P0\n    server 127.0.0.1:9\n}\n'
             % path, ready=False, stats=False)
    rc = px.wait_exit(10)
    err = px.log_text()
    check(rc == 1, 'slipgate exited %r, expected 1\n%s' % (rc, err))
    check(not re.search(r'listening', err), 'slipgate started listening:\n%s' % err)
    check(len(err.splitlines()) == 1, 'expected one line, got:\n%s' % err)
    for p in patterns:
        check(re.search(p, err), 'the message does not match /%s/:\n%s' % (p, err))
    return err.strip()


def case_wrong_abi(h):
    so = build(h, 'wrong_abi_plugin')
    abi = filter_abi()
    err = refused(h, so, [r'^' + re.escape(h.path('bad.conf')) + r':1:8: error: plugin',
                          r"plugin '%s' was built for filter ABI %d, this slipgate has ABI %d"
                          % (re.escape(so), abi + 1, abi)])
    print(err)


def case_missing_file(h):
    path = h.path('no-such-plugin.so')
    err = refused(h, path, [r"cannot load plugin '%s'" % re.escape(path),
                            r'No such file or directory'])
    print(err)


def case_not_a_plugin(h):
    so = build(h, 'not_a_plugin')
    err = refused(h, so, [r"'%s' is not a slipgate plugin: it has no 'slipgate_filter_plugin' "
                          r"function" % re.escape(so)])
    print(err)


def case_installed_headers(h):
    build_dir = os.environ.get('SG_BUILD')
    if not build_dir:
        raise Skip('SG_BUILD (the meson build directory) is not set')
    dest = h.path('destdir')
    r = subprocess.run(['meson', 'install', '-C', build_dir, '--destdir', dest, '--no-rebuild',
                        '--quiet'], capture_output=True, timeout=120)
    check(r.returncode == 0, 'meson install --destdir failed:\n%s%s'
          % (r.stdout.decode(errors='replace'), r.stderr.decode(errors='replace')))
    found = [d for d, _, files in os.walk(dest) if 'filter.h' in files]
    check(len(found) == 1 and found[0].endswith(os.path.join('slipgate', 'filters')),
          'installed filter.h: %r' % found)
    inc = os.path.dirname(found[0])
    for hdr in ('filters/filter.h', 'protocols/codec.h', 'config/config.h'):
        check(os.path.exists(os.path.join(inc, hdr)), '%s not installed under %s' % (hdr, inc))
    so = build(h, 'example_plugin', include=inc)
    _, summary = run_example(h, so)
    print('built against %s only: %s' % (os.path.relpath(inc, dest), summary))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
