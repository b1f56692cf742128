#!/usr/bin/env python3
"""The user documentation stays short at the top and whole underneath.

  doc_pages.py SLIPGATE

- README.md stays a page a newcomer reads in minutes (at most 300 lines);
- every relative link in README.md and doc/**/*.md points at a file that
  exists (an #anchor must be one of that page's headings);
- no user page names an issue number, a test case (`suite@case`) or a path
  under ../shared, which someone with the released sources does not have;
- every directive of the configuration (proxy/conf.c's tables) and every
  filter directive (`slipgate filters --json`) is documented in the README
  or doc/, so that nothing is lost when text moves between pages.
"""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
MAX_README_LINES = 300


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def pages():
    return [os.path.join(ROOT, 'README.md')] + sorted(
        glob.glob(os.path.join(ROOT, 'doc', '**', '*.md'), recursive=True))


def rel(path):
    return os.path.relpath(path, ROOT)


def strip_code(text):
    """The text outside fenced blocks (links in code are not links)."""
    return re.sub(r'^```.*?^```', '', text, flags=re.M | re.S)


def anchor(heading):
    """GitHub's anchor for a heading."""
    h = heading.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')


def anchors(path):
    text = strip_code(read(path))
    return {anchor(m) for m in re.findall(r'^#+\s+(.*)$', text, re.M)}


def check_links(path, problems):
    text = strip_code(read(path))
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target):
            continue
        file_part, _, frag = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
            if file_part else path
        if not os.path.exists(dest):
            problems.append('%s: link to %s: no such file' % (rel(path), target))
        elif frag and dest.endswith('.md') and frag not in anchors(dest):
            problems.append('%s: link to %s: no heading gives #%s' % (rel(path), target, frag))


FORBIDDEN = [
    (re.compile(r'\bissues? \d+', re.I), 'an issue number'),
    (re.compile(r'`(?!slipgate@)[a-z0-9_]+@[^`\s]+`'), 'a test case name'),
    (re.compile(r'\.\./shared'), 'a path under ../shared'),
    (re.compile(r'DESIGN\.md|STYLE\.md|PROTOCOLS\.md'), 'a design note that is not shipped'),
]


def check_words(path, problems):
    for n, line in enumerate(read(path).split('\n'), 1):
        for pattern, what in FORBIDDEN:
            if pattern.search(line):
                problems.append('%s:%d: names %s: %s' % (rel(path), n, what, line.strip()))


def directives():
    names = set(re.findall(r'\.name = "([a-z_]+)"', read(os.path.join(ROOT, 'proxy', 'conf.c'))))
    return sorted(names)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    slipgate = os.path.abspath(sys.argv[1])
    problems = []
    n = len(read(os.path.join(ROOT, 'README.md')).split('\n'))
    if n > MAX_README_LINES:
        problems.append('README.md has %d lines, more than %d: move details to doc/'
                        % (n, MAX_README_LINES))
    docs = ''
    for p in pages():
        check_links(p, problems)
        check_words(p, problems)
        docs += read(p)
    names = directives()
    if len(names) < 20:
        problems.append('only %d directives found in proxy/conf.c: the pattern no longer '
                        'matches its tables' % len(names))
    for d in names:
        if '`%s' % d not in docs:
            problems.append('directive %s is documented nowhere in README.md or doc/' % d)
    out = subprocess.run([slipgate, 'filters', '--json'], capture_output=True, text=True,
                         timeout=10)
    if out.returncode != 0:
        problems.append('slipgate filters --json exited %d' % out.returncode)
    else:
        nfd = 0
        for f in json.loads(out.stdout)['filters']:
            if f.get('plugin'):
                continue
            page = os.path.join(ROOT, 'doc', 'filters', f['name'] + '.md')
            text = read(page) if os.path.exists(page) else ''
            for d in f.get('directives', []):
                nfd += 1
                generic = re.sub(r'_to_(client|server)$', '', d['name']) + '_to_client'
                if d['name'] not in text and not (
                        generic != d['name'] + '_to_client' and 'X_to_client' in text):
                    problems.append('filter %s: directive %s is not in %s'
                                    % (f['name'], d['name'], rel(page)))
        print('%d filter directives checked' % nfd)
    print('README.md: %d lines; %d pages checked; %d directives checked'
          % (n, len(pages()), len(names)))
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
