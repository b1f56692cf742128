#!/usr/bin/env python3
"""Byte-for-byte output comparison of two slipgate binaries (a refactor's proof).

    tests/golden/compare.py OLD_SLIPGATE NEW_SLIPGATE [TESTDATA]

For every file under TESTDATA (default: ../shared/testdata beside the
repository, or $SG_TESTDATA) it runs, with each binary:

  - every demo (.dm_*, .dm2, .dem, .qwd, .mvd):
        slipgate demo dump FILE          (stdout, stderr, exit status)
        slipgate demo dump FILE --json
        slipgate demo reencode FILE OUT  (stdout, stderr, exit status, OUT's bytes)
  - every capture (.pcap, .pcapng):
        slipgate pcap decode FILE
        slipgate pcap decode FILE --json
        slipgate pcap decode FILE --record DIR   (and every file written in DIR)

and reports each run whose stdout, stderr, exit status or written files
differ between the two binaries.  Exit status 0 when nothing differs, 1 when
something does, 2 on a usage error.  It is a script, not a meson test: the
test data lives outside the repository and the point is the comparison of
two builds (e.g. main's binary against a branch's), which stored hashes of
one build would not prove.  Temporary files go to a fresh directory that is
removed at the end; every command has a time limit.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

DEMO_EXT = (".dm_66", ".dm_67", ".dm_68", ".dm_71", ".dm2", ".dem", ".qwd", ".mvd")
PCAP_EXT = (".pcap", ".pcapng")
TIMEOUT_S = 300


def digest_dir(path):
    """Name -> sha256 of every file under path (relative names)."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


def run(binary, args, workdir, outdir):
    """Run one command; returns a comparable record of everything it produced."""
    os.makedirs(outdir, exist_ok=True)
    args = [a.replace("@OUT@", outdir) for a in args]
    try:
        p = subprocess.run([binary] + args, cwd=workdir, capture_output=True, timeout=TIMEOUT_S)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, so, se = "timeout", b"", b""
    # A binary's own path may appear in a usage line: make it neutral.
    se = se.replace(os.fsencode(binary), b"slipgate")
    so = so.replace(os.fsencode(outdir), b"@OUT@")
    se = se.replace(os.fsencode(outdir), b"@OUT@")
    return {"rc": rc, "stdout": so, "stderr": se, "files": digest_dir(outdir)}


def jobs(testdata):
    for root, _dirs, files in sorted(os.walk(testdata)):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(DEMO_EXT):
                ext = name[name.rindex("."):]
                yield [("demo", "dump", path)]
                yield [("demo", "dump", path, "--json")]
                yield [("demo", "reencode", path, "@OUT@/out" + ext)]
            elif name.endswith(PCAP_EXT):
                yield [("pcap", "decode", path)]
                yield [("pcap", "decode", path, "--json")]
                yield [("pcap", "decode", path, "--record", "@OUT@")]


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    old, new = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    here = os.path.dirname(os.path.abspath(__file__))
    testdata = argv[3] if len(argv) == 4 else os.environ.get(
        "SG_TESTDATA", os.path.join(here, "..", "..", "..", "shared", "testdata"))
    testdata = os.path.abspath(testdata)
    if not os.path.isdir(testdata):
        print(f"compare.py: no test data at {testdata}", file=sys.stderr)
        return 2
    runs = diffs = 0
    with tempfile.TemporaryDirectory(prefix="sg-golden-") as tmp:
        for n, (args,) in enumerate(jobs(testdata)):
            args = list(args)
            a = run(old, args, tmp, os.path.join(tmp, f"{n}-old"))
            b = run(new, args, tmp, os.path.join(tmp, f"{n}-new"))
            runs += 1
            shown = " ".join(os.path.relpath(x, testdata) if x.startswith(testdata) else x
                             for x in args)
            bad = [k for k in ("rc", "stdout", "stderr", "files") if a[k] != b[k]]
            if bad:
                diffs += 1
                print(f"DIFFERS  slipgate {shown}: {', '.join(bad)}")
                if "files" in bad:
                    for name in sorted(set(a["files"]) | set(b["files"])):
                        if a["files"].get(name) != b["files"].get(name):
                            print(f"         file {name}: {a['files'].get(name)} vs {b['files'].get(name)}")
            else:
                nfiles = len(a["files"])
                print(f"same     slipgate {shown} (rc {a['rc']}, {len(a['stdout'])} bytes out"
                      f"{f', {nfiles} files' if nfiles else ''})")
    print(f"{runs} runs, {diffs} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
