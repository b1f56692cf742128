#!/usr/bin/env python3
"""The documentation stays in step with the binary.

  doc_check.py options SLIPGATE    every option --help lists is in the man
                                   page and in the README or doc/; the games
                                   -p takes (from the codec registry) are the
                                   man page's and the README's list
  doc_check.py example SLIPGATE    the example config passes --check-config,
                                   and each directive it uses is in the man page
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
MAN = os.path.join(ROOT, 'doc', 'slipgate.1')
README = os.path.join(ROOT, 'README.md')
EXAMPLE = os.path.join(ROOT, 'config', 'slipgate.conf.example')


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def check_options(slipgate):
    out = subprocess.run([slipgate, '--help'], capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        return ['--help exited %d' % out.returncode]
    opts = re.findall(r'^\s+(?:(-[a-z]), )?(--[a-z][a-z-]*)', out.stdout, re.M)
    if len(opts) < 5:
        return ['--help lists only %r: the pattern no longer matches its layout' % opts]
    man = read(MAN)
    # The user documentation: the README and every page under doc/.
    readme = read(README) + ''.join(
        read(p) for p in sorted(glob.glob(os.path.join(ROOT, 'doc', '**', '*.md'),
                                          recursive=True)))
    problems = []
    for short, o in opts:
        if o.replace('-', '\\-') not in man:
            problems.append('%s is in --help but not in doc/slipgate.1' % o)
        # The option block may abbreviate to the short form.
        if o not in readme and not (short and re.search(r'(^|\s)%s\b' % short, readme, re.M)):
            problems.append('%s is in --help but not in README.md or doc/' % o)
    print('%d options checked: %s' % (len(opts), ' '.join(o for _, o in opts)))
    # The games `-p` takes come from the codec registry: every list the docs
    # give of them is that list, in its order.
    m = re.search(r'--protocol PROTO\s+(auto(?:\|[a-z0-9]+)+)', out.stdout)
    if not m:
        problems.append('--help: no "-p, --protocol PROTO auto|..." list')
    else:
        games = m.group(1).split('|')
        lists = [('doc/slipgate.1 (-p)', r'One of (auto(?:, [a-z0-9]+)+)', ', ', man),
                 ('doc/slipgate.1 (protocol)', r'\\fBprotocol\\fR \\fI(auto(?:\|[a-z0-9]+)+)', '|',
                  man),
                 ('README.md', r'--protocol PROTO\s+(auto(?:\|[a-z0-9]+)+)', '|', read(README))]
        for where, rx, sep, text in lists:
            found = re.search(rx, text)
            if not found or found.group(1).split(sep) != games:
                problems.append('%s lists the games as %r, --help (the codec registry) as %r'
                                % (where, found and found.group(1), '|'.join(games)))
        print('the games of -p: %s, as in the man page and the README' % '|'.join(games))
    # `slipgate doctor --help`: each of its options is in the man page too.
    out = subprocess.run([slipgate, 'doctor', '--help'], capture_output=True, text=True,
                         timeout=10)
    dopts = re.findall(r'^\s+(?:-[a-z], )?(--[a-z][a-z-]*)', out.stdout, re.M)
    if out.returncode != 0 or len(dopts) < 3:
        problems.append('doctor --help exited %d listing %r' % (out.returncode, dopts))
    for o in dopts:
        if o.replace('-', '\\-') not in man:
            problems.append('%s is in doctor --help but not in doc/slipgate.1' % o)
    if 'slipgate doctor' not in readme:
        problems.append('neither README.md nor doc/ mentions slipgate doctor')
    print('%d doctor options checked: %s' % (len(dopts), ' '.join(dopts)))
    return problems


def check_example(slipgate):
    # --check-config also resolves each server and binds each listen address.
    # The example is installed as /etc/slipgate/slipgate.conf, so it must pass
    # as shipped: its servers are checked as written (they must resolve,
    # offline too); only its listen ports, which may be taken on this machine,
    # are replaced with loopback port 0 (the kernel picks a free one).
    sets = []
    for name in re.findall(r'^\s*route\s+"?([A-Za-z0-9_.-]+)"?\s*\{', read(EXAMPLE), re.M):
        sets += ['+set', '%s.listen' % name, '127.0.0.1:0']
    out = subprocess.run([slipgate, '--check-config', '-c', EXAMPLE] + sets, capture_output=True,
                         text=True, timeout=10)
    problems = []
    if out.returncode != 0:
        problems.append('--check-config refused the example (exit %d): %s'
                        % (out.returncode, (out.stdout + out.stderr).strip()))
    man = read(MAN)
    words = set()
    depth = 0
    for line in read(EXAMPLE).splitlines():
        # A directive, or a commented-out one ("# NAME VALUE  # why"); prose
        # comments have more than one word after the name.
        m = re.match(r'\s*([a-z_]+)\b', line)
        if not m:
            m = re.match(r'\s*# ([a-z_]+) ("[^"]*"|\S+)\s*(#.*)?$', line)
        if m and depth <= 1 and not line.lstrip().startswith('}'):
            words.add(m.group(1))
        if not line.lstrip().startswith(('#', '//')):
            depth += line.count('{') - line.count('}')
    for w in sorted(words):
        if not re.search(r'(\\fB|\.BI? )%s\b' % re.escape(w), man):
            problems.append('the example config uses "%s", which doc/slipgate.1 does not '
                            'describe' % w)
    print('example: %d directives checked: %s' % (len(words), ' '.join(sorted(words))))
    return problems


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ('options', 'example'):
        print(__doc__, file=sys.stderr)
        return 2
    problems = (check_options if sys.argv[1] == 'options' else check_example)(sys.argv[2])
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
