#!/usr/bin/env python3
"""Every config snippet of the documentation is a config slipgate accepts.

  doc_snippets.py SLIPGATE [PLUGIN_DIR]

Where the snippets are:
- README.md and every doc/**/*.md: each fenced block whose info string is
  `conf` (```conf).  An untagged fenced block that opens a `route` or
  `filter` block is an error ("tag it ```conf"), so a new config snippet
  cannot be left out by mistake.
- doc/slipgate.1: each .nf/.fi block that opens a `route` or `filter` block.
- Inline, in both: each `filter ... { ... }` code span (\fB...\fR in the
  man page) that is a whole block without placeholders (no word in
  capitals, no "..."): `filter guard { }` is checked, `filter NAME { ... }`
  is syntax.
- config/slipgate.conf.example, whole.

How each is checked: `slipgate --check-config -c SNIPPET` must exit 0.
- A snippet without a top-level `route` block is a fragment (a `filter`
  block, route directives): it is put inside `route doc { ... }`.
- Every route gets `+set ROUTE.listen 127.0.0.1:0` (the kernel's port) and
  `+set ROUTE.server 127.0.0.1:27960` (as doc_check.py does): the
  documented addresses are checked as written by the file reader, then
  replaced, since their ports may be taken here and their names may not
  resolve offline.
- The snippet runs in a scratch directory (relative paths land there);
  absolute paths under /etc/slipgate/ and /var/lib/slipgate/ are moved
  under it too, where both directories exist (as on an installed system:
  the package makes /etc/slipgate, the unit's StateDirectory
  /var/lib/slipgate), so --check-config's checks of recording directories
  and output files meet what the start would; a `sign_key FILE` gets a key from `slipgate keygen`; a
  `plugin PATH` gets the plugin of that name from PLUGIN_DIR.
- A snippet that is wrong on purpose (to show an error) is marked just
  before it, `<!-- snippet: refused -->` in Markdown or `.\\" snippet:
  refused` in the man page: it must be refused (exit 1, with a
  FILE:LINE:COL: error: message).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
OPENER = re.compile(r'^\s*(route|filter)\b[^#]*\{')
MOVED = ('/etc/slipgate/', '/var/lib/slipgate/')


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def rel(path):
    return os.path.relpath(path, ROOT)


def markdown_snippets(path, problems):
    """(where, text, refused) for each ```conf block; problems for untagged config blocks."""
    lines = read(path).split('\n')
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r'^(\s*)```(\S*)\s*$', lines[i])
        if not m:
            i += 1
            continue
        indent, tag = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(r'^\s*```\s*$', lines[j]):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
        where = '%s:%d' % (rel(path), i + 1)
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        refused = k >= 0 and re.match(r'^\s*<!--\s*snippet:\s*refused\s*-->\s*$', lines[k])
        if tag == 'conf':
            out.append((where, '\n'.join(body) + '\n', bool(refused)))
        elif tag == '' and any(OPENER.match(ln) for ln in body):
            problems.append('%s: an untagged block that opens a route or filter block: tag it '
                            '```conf (it is then checked) or show it another way' % where)
        i = j + 1
    return out


INLINE = re.compile(r'^filter\s[^{}]*\{[^{}]*\}$')


def inline_snippet(span):
    """A checkable one-line filter block, or None for syntax (placeholders)."""
    span = span.strip()
    if not INLINE.match(span) or '...' in span or re.search(r'\b[A-Z]{2,}\b', span):
        return None
    return span + '\n'


def markdown_inline(path):
    # Fenced blocks blanked out (lines kept), then code spans, which may wrap.
    text = re.sub(r'^\s*```.*?^\s*```[^\n]*$', lambda m: '\n' * m.group(0).count('\n'),
                  read(path), flags=re.M | re.S)
    out = []
    for m in re.finditer(r'`([^`]+)`', text):
        snippet = inline_snippet(' '.join(m.group(1).split()))
        if snippet:
            out.append(('%s:%d (inline)' % (rel(path), text.count('\n', 0, m.start()) + 1),
                        snippet, False))
    return out


def man_inline(path):
    out = []
    for n, ln in enumerate(read(path).split('\n'), 1):
        for span in re.findall(r'\\fB(.*?)\\fR', ln):
            text = inline_snippet(span.replace('\\-', '-'))
            if text:
                out.append(('%s:%d (inline)' % (rel(path), n), text, False))
    return out


def man_snippets(path):
    lines = read(path).split('\n')
    out = []
    for i, ln in enumerate(lines):
        if ln.strip() != '.nf':
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != '.fi':
            j += 1
        body = [b for b in lines[i + 1:j] if not b.startswith('.')]
        if not any(OPENER.match(b) for b in body):
            continue
        text = '\n'.join(body).replace('\\-', '-').replace('\\e', '\\') + '\n'
        k = i - 1
        while k >= 0 and lines[k].strip() in ('.PP', ''):
            k -= 1
        refused = k >= 0 and re.match(r'^\.\\"\s*snippet:\s*refused\s*$', lines[k].strip())
        out.append(('%s:%d' % (rel(path), i + 1), text, bool(refused)))
    return out


def has_route(text):
    return re.search(r'^route\b', text, re.M) is not None


def prepare(slipgate, text, tmp, plugin_dir):
    """The snippet as it is run in `tmp`, and its +set arguments."""
    if not has_route(text):
        text = 'route doc {\n' + text + '}\n'
    for prefix in MOVED:
        text = text.replace(prefix, tmp + prefix)
        os.makedirs(tmp + prefix, exist_ok=True)
    for m in re.finditer(r'^\s*sign_key\s+"?([^"\s]+)', text, re.M):
        key = os.path.join(tmp, m.group(1))
        if not os.path.exists(key):
            os.makedirs(os.path.dirname(key), exist_ok=True)
            subprocess.run([slipgate, 'keygen', '--out', key], check=True, capture_output=True,
                           timeout=10, cwd=tmp)
    for m in re.finditer(r'^\s*plugin\s+"?([^"\s]+)', text, re.M):
        target = os.path.join(tmp, m.group(1))
        source = os.path.join(plugin_dir or '', os.path.basename(m.group(1)))
        if plugin_dir and os.path.exists(source) and not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy(source, target)
    sets = []
    for name in re.findall(r'^\s*route\s+"?([A-Za-z0-9_-]+)"?\s*\{', text, re.M):
        sets += ['+set', '%s.listen' % name, '127.0.0.1:0',
                 '+set', '%s.server' % name, '127.0.0.1:27960']
    return text, sets


def check(slipgate, where, text, refused, plugin_dir):
    tmp = tempfile.mkdtemp(prefix='sg-snippet-')
    try:
        run_text, sets = prepare(slipgate, text, tmp, plugin_dir)
        conf = os.path.join(tmp, 'snippet.conf')
        with open(conf, 'w', encoding='utf-8') as f:
            f.write(run_text)
        out = subprocess.run([slipgate, '--check-config', '-c', conf] + sets, capture_output=True,
                             text=True, timeout=20, cwd=tmp)
        said = (out.stdout + out.stderr).strip().replace(tmp + '/', '')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if refused:
        if out.returncode != 1 or not re.search(r'snippet\.conf:\d+:\d+: error: ', said):
            return ['%s: marked refused, but --check-config said (exit %d): %s'
                    % (where, out.returncode, said)]
        return []
    if out.returncode != 0:
        return ['%s: --check-config refused this snippet (exit %d):\n    %s\n  the snippet as '
                'run:\n    %s' % (where, out.returncode, said.replace('\n', '\n    '),
                                  run_text.rstrip().replace('\n', '\n    '))]
    return []


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    slipgate = os.path.abspath(sys.argv[1])
    plugin_dir = os.path.abspath(sys.argv[2]) if len(sys.argv) == 3 else None
    problems = []
    snippets = []
    for md in [os.path.join(ROOT, 'README.md')] + sorted(
            glob.glob(os.path.join(ROOT, 'doc', '**', '*.md'), recursive=True)):
        snippets += markdown_snippets(md, problems) + markdown_inline(md)
    man = os.path.join(ROOT, 'doc', 'slipgate.1')
    snippets += man_snippets(man) + man_inline(man)
    example = os.path.join(ROOT, 'config', 'slipgate.conf.example')
    snippets.append((rel(example), read(example), False))
    for where, text, refused in snippets:
        problems += check(slipgate, where, text, refused, plugin_dir)
    print('%d config snippets checked (%d refused on purpose)'
          % (len(snippets), sum(1 for s in snippets if s[2])))
    for where, _, refused in snippets:
        print('  %s%s' % (where, ' (refused)' if refused else ''))
    if len(snippets) < 10:
        problems.append('only %d snippets found: the extraction no longer matches the docs'
                        % len(snippets))
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
