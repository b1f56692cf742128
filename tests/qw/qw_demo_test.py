#!/usr/bin/env python3
"""`slipgate demo info|dump|reencode` on QuakeWorld demos (.mvd and .qwd).

usage: qw_demo_test.py SLIPGATE CASE [GOLDEN]   (SG_TESTDATA points at the test data)

The .mvd is the real one in the test data; there is no real .qwd there, so
the .qwd cases build one from the ezQuake <-> mvdsv capture: every datagram
the server sent as a dem_read block (netchan header included, the
connectionless ones with their -1), a dem_cmd block for every in-game
datagram of the client and one dem_set, with the capture's times.
With SG_UPDATE_GOLDEN=1 the golden cases (re)write their golden file.
"""
import json
import lzma
import os
import struct
import subprocess
import sys
import tempfile

SLIPGATE = sys.argv[1]
CASE = sys.argv[2]
GOLDEN = sys.argv[3] if len(sys.argv) > 3 else None
DATA = os.environ.get("SG_TESTDATA", "")
MVD = "qw/demos/mvdparser_1on1.mvd"
CAPTURE = "qw/sessions/ezquake_mvdsv/capture.pcap"
SERVER_PORT = 27500
JSON_LINES = 200  # the JSON golden pins the format on the first blocks


def data(rel):
    path = os.path.join(DATA, rel)
    if not os.path.isfile(path):
        sys.exit("missing test data: " + path)
    return path


def run(*args, binary=False):
    p = subprocess.run([SLIPGATE, *args], capture_output=True, timeout=120)
    if p.returncode < 0:
        sys.exit("FAILED: slipgate %s died with signal %d" % (" ".join(args), -p.returncode))
    out = p.stdout if binary else p.stdout.decode("utf-8", "replace")
    return p.returncode, out, p.stderr.decode("utf-8", "replace")


def expect(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, b):
    with open(path, "wb") as f:
        f.write(b)


# ---- a .qwd from the capture ----

def udp_datagrams(path):
    """(time, src port, dst port, payload) of every IPv4 UDP packet of a pcapng file."""
    d = read(path)
    pos, links, out = 0, [], []
    while pos + 12 <= len(d):
        btype, blen = struct.unpack("<II", d[pos:pos + 8])
        body = d[pos + 8:pos + blen - 4]
        pos += blen
        if btype == 1:
            links.append(struct.unpack("<H", body[:2])[0])
        elif btype == 6:
            iid, th, tl, cap = struct.unpack("<IIII", body[:16])
            pkt = body[20:20 + cap]
            expect(links[iid] == 1, "the capture is Ethernet")
            if struct.unpack(">H", pkt[12:14])[0] != 0x0800 or pkt[23] != 17:
                continue
            ip = pkt[14:]
            udp = ip[(ip[0] & 15) * 4:]
            sport, dport, ulen = struct.unpack(">HHH", udp[:6])
            out.append((((th << 32) | tl) / 1e6, sport, dport, udp[8:ulen]))
    return out


def capture_qwd():
    grams = udp_datagrams(data(CAPTURE))
    t0 = grams[0][0]
    blocks, cmd_no, set_done = [], 0, False
    for t, sport, dport, payload in grams:
        stamp = struct.pack("<f", t - t0)
        if sport == SERVER_PORT:
            blocks.append(stamp + b"\x01" + struct.pack("<I", len(payload)) + payload)
        elif dport == SERVER_PORT and payload[:4] != b"\xff\xff\xff\xff":
            if not set_done:
                blocks.append(stamp + b"\x02" + struct.pack("<ii", 1, 0))
                set_done = True
            cmd_no += 1
            # usercmd_t: msec, 3 pad, 3 float angles, forward/side/up, buttons, impulse; view angles
            cmd = struct.pack("<B3x3f3hBB3f", 13, 1.5, cmd_no * 0.25, 0.0, 320, -320, 0, 1, 0,
                              1.5, cmd_no * 0.25, 0.0)
            blocks.append(stamp + b"\x00" + cmd)
    expect(cmd_no > 100 and set_done, "the capture has client moves")
    return b"".join(blocks)


# ---- checks shared by the formats ----

def check_reencode_same(path, tmp):
    out_path = os.path.join(tmp, "re" + os.path.splitext(path)[1])
    rc, out, err = run("demo", "reencode", path, out_path)
    expect(rc == 0, "reencode %s: exit 0 (%d): %s%s" % (path, rc, out, err))
    expect(read(out_path) == read(path), "reencode %s gives the same bytes" % path)
    return out


def check_cut(path, cut, tmp):
    """A copy of `path` cut after `cut` bytes: every command says where it stops, exit 1."""
    whole = read(path)
    ext = os.path.splitext(path)[1]
    f = os.path.join(tmp, "cut%d%s" % (cut, ext))
    write(f, whole[:cut])
    rc, out, err = run("demo", "info", f)
    expect(rc == 1 and "errors:       1, at offset " in out and "the file ends inside block #" in out,
           "info of %s cut at %d: %d\n%s%s" % (path, cut, rc, out, err))
    at = int(out.split("at offset ")[1].split(":")[0])
    expect(at <= cut, "the offset told (%d) is inside the file (%d)" % (at, cut))
    rc, out, err = run("demo", "dump", f)
    expect(rc == 1 and ("# error at offset %d: the file ends inside block #" % at) in out
           and ("at offset %d" % at) in err, "dump of %s cut at %d: %d %s" % (path, cut, rc, err))
    rc, out, err = run("demo", "dump", "--json", f)
    last = json.loads(out.splitlines()[-1])
    expect(rc == 1 and last["offset"] == at and "the file ends" in last["error"],
           "dump --json of the cut file ends with its error object")
    out_path = os.path.join(tmp, "re" + ext)
    rc, out, err = run("demo", "reencode", f, out_path)
    expect(rc == 1 and ("input stops at offset %d" % at) in out, "reencode of the cut file: " + out)
    expect(read(out_path) == whole[:at], "reencode wrote the whole blocks before the cut")


# ---- cases ----

def case_mvd_reencode():
    with tempfile.TemporaryDirectory() as tmp:
        out = check_reencode_same(data(MVD), tmp)
        expect("24648 blocks, 39953 messages; 24537 message blocks rebuilt, 24537 byte-identical, "
               "0 failed to decode" in out, out)


def case_mvd_info():
    rc, out, err = run("demo", "info", data(MVD))
    expect(rc == 0, "info exit 0: " + err)
    for line in ("format:       mvd (server multi-view demo)",
                 "game:         QuakeWorld, gamedir qw",
                 "protocol:     28 (FTE 0x0, FTE2 0x0, MVD1 0x20)",
                 "map:          tron (\"Megatron _ by alice\")",
                 "server:       MVDSV 1.01-dev, nl.quake.world:27501 [QW-Group]",
                 "players:      0:mushi, 1:Milton",
                 "duration:     174.609 s",
                 "blocks:       24648 (multiple 111, single 830, stats 607, all 23100)",
                 "messages:     39953 (1 serverdata, 118 hidden blocks)",
                 "errors:       0"):
        expect(line + "\n" in out, "info says %r:\n%s" % (line, out))


def compare(got, want, what):
    if got == want:
        return
    g, w = got.splitlines(), want.splitlines()
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            sys.exit("FAILED: %s differs from %s at line %d\n-%s\n+%s" % (what, GOLDEN, i + 1,
                                                                        b[:300], a[:300]))
    sys.exit("FAILED: %s differs from %s in length (%d lines, golden %d)" % (what, GOLDEN, len(g),
                                                                            len(w)))


def case_mvd_golden():
    rc, out, err = run("demo", "dump", data(MVD), binary=True)
    expect(rc == 0, "dump exit 0: " + err)
    if os.environ.get("SG_UPDATE_GOLDEN"):
        write(GOLDEN, lzma.compress(out, preset=9 | lzma.PRESET_EXTREME))
        return
    want = lzma.decompress(read(GOLDEN))
    compare(out.decode("latin-1"), want.decode("latin-1"), "demo dump")


def case_mvd_golden_json():
    rc, out, err = run("demo", "dump", "--json", data(MVD), binary=True)
    expect(rc == 0, "dump --json exit 0: " + err)
    lines = out.decode("utf-8").splitlines(keepends=True)
    expect(len(lines) == 24648, "one JSON line per block (%d)" % len(lines))
    for line in lines:
        json.loads(line)  # every line is one JSON object
    head = "".join(lines[:JSON_LINES])
    if os.environ.get("SG_UPDATE_GOLDEN"):
        write(GOLDEN, head.encode())
        return
    compare(head, read(GOLDEN).decode(), "demo dump --json (first %d lines)" % JSON_LINES)


def case_qwd_capture():
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "capture.qwd")
        write(f, capture_qwd())
        out = check_reencode_same(f, tmp)
        expect(" 0 failed to decode" in out, out)
        rc, out, err = run("demo", "info", f)
        expect(rc == 0 and "format:       qwd (client demo)\n" in out and "errors:       0\n" in out
               and "map:          ?" not in out and "connectionless" in out, out + err)
        rc, out, err = run("demo", "dump", f)
        expect(rc == 0 and " cmd msec=13 " in out and " set outgoing=1 incoming=0" in out
               and " seq=" in out and "svc_serverdata" in out and "(error" not in out, err)
        # under another name, the first bytes say what it is
        g = os.path.join(tmp, "capture.bin")
        write(g, read(f))
        rc, out2, err = run("demo", "info", g)
        expect(rc == 0 and "format:       qwd (client demo)\n" in out2, "content decides: " + out2 + err)


def case_truncated():
    with tempfile.TemporaryDirectory() as tmp:
        mvd = os.path.join(tmp, "m.mvd")
        write(mvd, read(data(MVD)))
        size = os.path.getsize(mvd)
        for cut in (1, 3, 7, 300, 487 + 3, size // 2, size - 1):
            check_cut(mvd, cut, tmp)
        qwd = os.path.join(tmp, "q.qwd")
        write(qwd, capture_qwd())
        size = os.path.getsize(qwd)
        for cut in (2, 5, 9, 100, size // 2, size - 1):
            check_cut(qwd, cut, tmp)


def case_corrupt():
    with tempfile.TemporaryDirectory() as tmp:
        whole = bytearray(read(data(MVD)))
        # block #1 starts at 487 (6-byte header + 481): type 7 does not exist
        bad = bytearray(whole)
        bad[488] = (bad[488] & ~7) | 7
        f = os.path.join(tmp, "type.mvd")
        write(f, bad)
        rc, out, err = run("demo", "info", f)
        expect(rc == 1 and "at offset 487: block #1 has type 7, which no player reads" in out,
               out + err)
        # a length no player reads
        bad = bytearray(whole)
        bad[489:493] = struct.pack("<I", 0x7fffffff)
        f = os.path.join(tmp, "len.mvd")
        write(f, bad)
        rc, out, err = run("demo", "dump", f)
        expect(rc == 1 and "# error at offset 487: block #1 (all) says 2147483647 bytes" in out,
               out[-300:] + err)
        # a message that does not decode: counted, copied as it was, the rest goes on
        bad = bytearray(whole)
        bad[493] = 0  # svc_bad where block #1's svc_soundlist was
        f = os.path.join(tmp, "msg.mvd")
        write(f, bad)
        out_path = os.path.join(tmp, "re.mvd")
        rc, out, err = run("demo", "reencode", f, out_path)
        expect(rc == 1 and "1 failed to decode" in out and read(out_path) == bytes(bad),
               out + err)
        # a .qwd whose time is not a number: the JSON dump stays JSON (null)
        f = os.path.join(tmp, "nan.qwd")
        write(f, struct.pack("<IBii", 0x7fc00000, 2, 1, 0) + struct.pack("<fBii", 1.0, 2, 2, 0))
        rc, out, err = run("demo", "dump", "--json", f)
        lines = [json.loads(line) for line in out.splitlines()]
        expect(rc == 0 and lines[0]["time"] is None and lines[1]["incoming"] == 0, out + err)


def case_big_blocks():
    """Blocks of up to 8192 bytes of small messages (more messages and fields
    than one datagram can hold) decode and re-encode whole."""
    whole = read(data(MVD))
    first = whole[:487]  # block #0: the serverdata
    stats = b"".join(bytes([3, i % 32, i % 256]) for i in range(2730))  # svc_updatestat x 2730
    nops = bytes([1]) * 8192  # svc_nop x 8192
    demo = first + b"\x00\x06" + struct.pack("<I", len(stats)) + stats
    demo += b"\x00\x06" + struct.pack("<I", len(nops)) + nops
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "big.mvd")
        write(f, demo)
        out = check_reencode_same(f, tmp)
        expect("3 message blocks rebuilt, 3 byte-identical, 0 failed to decode" in out, out)
        rc, out, err = run("demo", "info", f)
        expect(rc == 0 and "messages:     %d " % (3 + 2730 + 8192) in out,
               out + err)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if CASE not in CASES:
        sys.exit("unknown case " + CASE)
    CASES[CASE]()
