#!/usr/bin/env python3
"""Keep the man page's list of built-in filters in step with the binary.

    scripts/man-filters.py SLIPGATE [--check]

Reads `SLIPGATE filters --json` and writes, between the lines
'.\\" BEGIN FILTER LIST' and '.\\" END FILTER LIST' of doc/slipgate.1, one
entry per built-in filter: its name, tap or filter, description, and
every directive with its argument and help.  With --check nothing is
written; the exit status is 1 (with a diff) when the page is out of step,
and when doc/filters/README.md does not show a filter.  The test suite runs the
check (doc@filters_in_step).
"""
import difflib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAN = os.path.join(ROOT, 'doc', 'slipgate.1')
BEGIN, END = '.\\" BEGIN FILTER LIST', '.\\" END FILTER LIST'


def roff(text):
    """Escape text for roff: backslashes, leading dots and quotes, dashes."""
    text = text.replace('\\', '\\e').replace('-', '\\-')
    if text.startswith('.') or text.startswith("'"):
        text = '\\&' + text
    return text


def entries(filters):
    out = []
    for f in filters:
        if f.get('plugin'):
            continue
        out.append('.TP')
        out.append('.B %s' % f['name'])
        out.append('(%s) %s.' % (f['kind'], roff(f['description'].rstrip('.'))))
        for d in f['directives']:
            out.append('.br')
            out.append('\\fB%s\\fR \\fI%s\\fR: %s' % (roff(d['name']), roff(d['argname'] or ''),
                                                      roff(d['help'])))
    return out


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    check = '--check' in sys.argv[2:]
    r = subprocess.run([sys.argv[1], 'filters', '--json'], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        sys.stderr.write('slipgate filters --json failed (%d):\n%s' % (r.returncode, r.stderr))
        return 1
    filters = json.loads(r.stdout)['filters']
    with open(MAN) as f:
        lines = f.read().split('\n')
    if BEGIN not in lines or END not in lines:
        sys.stderr.write('%s: no %r ... %r markers\n' % (MAN, BEGIN, END))
        return 1
    a, b = lines.index(BEGIN), lines.index(END)
    new = lines[:a + 1] + entries(filters) + lines[b:]
    status = 0
    # doc/filters/README.md shows each built-in filter with a snippet, and
    # each has its own page beside it.
    with open(os.path.join(ROOT, 'doc', 'filters', 'README.md')) as f:
        overview = f.read()
    for f in filters:
        if f.get('plugin'):
            continue
        if '**%s**' % f['name'] not in overview:
            sys.stderr.write('doc/filters/README.md does not describe the filter %s\n'
                             % f['name'])
            status = 1
        if not os.path.exists(os.path.join(ROOT, 'doc', 'filters', f['name'] + '.md')):
            sys.stderr.write('doc/filters/%s.md is missing\n' % f['name'])
            status = 1
    if new == lines:
        print('doc/slipgate.1 lists the %d built-in filters of the binary' %
              len([f for f in filters if not f.get('plugin')]))
        return status
    if check:
        sys.stdout.writelines(difflib.unified_diff([l + '\n' for l in lines],
                                                   [l + '\n' for l in new],
                                                   'doc/slipgate.1', 'from the binary'))
        sys.stderr.write('doc/slipgate.1 is out of step with `slipgate filters`: run '
                         'scripts/man-filters.py SLIPGATE\n')
        return 1
    with open(MAN, 'w') as f:
        f.write('\n'.join(new))
    print('doc/slipgate.1 updated')
    return status


if __name__ == '__main__':
    sys.exit(main())
