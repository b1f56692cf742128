#!/usr/bin/env python3
"""`slipgate --version` names slipgate's version and the run-time versions
of the libraries it is linked with.

  version_check.py SLIPGATE VERSION

Each library line is compared with what that very library file (the one
`ldd SLIPGATE` resolves) answers when asked through ctypes, so a line that
printed the build-time header's version, or another library's, fails.
"""
import ctypes
import re
import subprocess
import sys

# library line name -> (ldd soname prefix, version function, text to strip)
LIBS = [
    ('libuv', 'libuv.so', 'uv_version_string', ''),
    ('zlib', 'libz.so', 'zlibVersion', ''),
    ('libsodium', 'libsodium.so', 'sodium_version_string', ''),
    ('libpcap', 'libpcap.so', 'pcap_lib_version', 'libpcap version '),
    ('libmicrohttpd', 'libmicrohttpd.so', 'MHD_get_version', ''),
]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    slipgate, version = sys.argv[1], sys.argv[2]
    out = subprocess.run([slipgate, '--version'], capture_output=True, text=True, timeout=10)
    print(out.stdout, end='')
    problems = []
    if out.returncode != 0 or out.stderr:
        problems.append('exit %d, stderr %r' % (out.returncode, out.stderr))
    lines = out.stdout.splitlines()
    if not lines or lines[0] != 'slipgate ' + version:
        problems.append('first line %r, want %r' % (lines[:1], 'slipgate ' + version))
    ldd = subprocess.run(['ldd', slipgate], capture_output=True, text=True, timeout=10).stdout
    said = dict(ln.split(' ', 1) for ln in lines[1:] if ' ' in ln)
    for name, soname, func, strip in LIBS:
        m = re.search(r'^\s*(%s[^\s]*) => (\S+)' % re.escape(soname), ldd, re.M)
        if not m:
            problems.append('ldd does not show %s linked' % soname)
            continue
        fn = getattr(ctypes.CDLL(m.group(2)), func)
        fn.restype = ctypes.c_char_p
        want = fn().decode()
        if want.startswith(strip):
            want = want[len(strip):]
        if said.get(name) != want:
            problems.append('%s: --version says %r, %s (%s) says %r'
                            % (name, said.get(name), func, m.group(2), want))
    if len(lines) != 1 + len(LIBS):
        problems.append('%d lines, want %d' % (len(lines), 1 + len(LIBS)))
    for p in problems:
        print('FAIL: ' + p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
