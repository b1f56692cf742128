#!/usr/bin/env python3
"""`slipgate demo` / `slipgate pcap decode`: which game's reader gets a file or a flow.

usage: offline_test.py SLIPGATE CASE   (SG_TESTDATA points at the test data)
Exit codes checked: 0 ok, 1 errors found or nothing can read it, 2 usage.
"""
import json
import os
import re
import struct
import shutil
import subprocess
import sys
import tempfile

SLIPGATE = sys.argv[1]
CASE = sys.argv[2]
DATA = os.environ.get("SG_TESTDATA", "")
KNOWN = "known: q3 (.dm_66, .dm_67, .dm_68, .dm_71)"


def data(rel):
    path = os.path.join(DATA, rel)
    if not os.path.isfile(path):
        sys.exit("missing test data: " + path)
    return path


def run(*args):
    p = subprocess.run([SLIPGATE, *args], capture_output=True, text=True, errors="replace",
                       timeout=100)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def copy(tmp, src, name):
    dst = os.path.join(tmp, name)
    shutil.copyfile(src, dst)
    return dst


def case_demo_help():
    rc, out, _ = run("demo", "--help")
    expect(rc == 0 and "usage:" in out, "--help")
    expect("  q3   .dm_66, .dm_67, .dm_68, .dm_71\n" in out, "help lists the q3 reader:\n" + out)
    expect("  qw   .qwd, .mvd (no cut)\n" in out, "help lists the qw reader:\n" + out)
    expect("--protocol NAME" in out, "help shows --protocol")


def case_demo_unknown_type():
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "notes.xyz")
        with open(f, "w") as fp:
            fp.write("these are not the demos you are looking for\n")
        rc, out, err = run("demo", "info", f)
        expect(rc == 1 and out == "", "unknown file: exit 1, nothing on stdout (%d)" % rc)
        expect("no codec reads %s: its extension .xyz and its first bytes match no known demo "
               "format; %s" % (f, KNOWN) in err, "clear message: " + err)
        expect("not readable yet" not in err and "; nq (.dem)" in err,
               "every game's reader is named, none is to come: " + err)
        expect("; q2 (.dm2)" in err, "names the Quake 2 reader among the known ones: " + err)
        out_path = os.path.join(tmp, "out.dm_68")
        rc, out, err = run("demo", "reencode", f, out_path)
        expect(rc == 1 and "no codec reads" in err, "reencode refuses it")
        expect(not os.path.exists(out_path), "no output file is created")
        nodot = copy(tmp, f, "README")
        rc, _, err = run("demo", "dump", nodot)
        expect(rc == 1 and "its extension (none) and" in err, "no extension: " + err)


def case_demo_extension_lies():
    with tempfile.TemporaryDirectory() as tmp:
        # a Quake 2 demo and a text file, both named like Quake 3 demos
        for src, name in ((data("q2/demos/libq2_test.dm2"), "q2.dm_68"),
                          (data("MANIFEST.md"), "text.dm_71")):
            f = copy(tmp, src, name)
            ext = name.split(".")[1]
            for sub in (["info", f], ["dump", f], ["reencode", f, os.path.join(tmp, "o")]):
                rc, out, err = run("demo", *sub)
                expect(rc == 1 and out == "", "%s %s: exit 1, no output (%d)" % (sub[0], name, rc))
                expect("%s: its extension .%s says a Quake 3 demo, but its first bytes are not "
                       "one" % (f, ext) in err, "says the extension lies: " + err)
            expect(not os.path.exists(os.path.join(tmp, "o")), "reencode wrote nothing")
        # the real thing under its own name still reads
        rc, out, _ = run("demo", "info", data("q3/demos/osp_chat.dm_68"))
        expect(rc == 0 and "map:          cpm3a" in out, "a true .dm_68 reads")


def case_demo_content_decides():
    with tempfile.TemporaryDirectory() as tmp:
        f = copy(tmp, data("q3/demos/osp_chat.dm_68"), "match.bin")
        rc, out, err = run("demo", "info", f)
        expect(rc == 0, "an unknown extension with a Quake 3 demo inside: exit 0 (%s)" % err)
        expect("protocol:     68 (file name: 0)" in out and "map:          cpm3a" in out, out)


def case_demo_protocol_forced():
    with tempfile.TemporaryDirectory() as tmp:
        # a Quake 3 demo named like a NetQuake one: refused, unless --protocol q3 says so
        f = copy(tmp, data("q3/demos/osp_chat.dm_68"), "osp.dem")
        rc, out, err = run("demo", "info", f)
        expect(rc == 1 and "its extension .dem says a NetQuake demo, but its first bytes are not "
               "one" in err, err)
        for opt in ("--protocol", "-p"):
            rc, out, err = run("demo", "info", opt, "q3", f)
            expect(rc == 0 and "map:          cpm3a" in out, "%s q3 reads it: %s" % (opt, err))
            rc, out, err = run("demo", "dump", f, opt, "q3")
            expect(rc == 0 and out.splitlines()[-1] == "# end marker", "dump with %s q3" % opt)
        out_path = os.path.join(tmp, "re.dm_68")
        rc, out, _ = run("demo", "-p", "q3", "reencode", f, out_path)
        expect(rc == 0 and "533 messages, 533 byte-identical" in out, "reencode with -p q3")
        # forcing Quake 2 on a Quake 3 demo: its reader finds no block it can decode
        rc, out, err = run("demo", "info", "-p", "q2", data("q3/demos/osp_chat.dm_68"))
        expect(rc == 1 and "1 blocks failed to decode" in out, out + err)
        # forcing NetQuake on a Quake 3 demo: its reader finds no cd-track line
        rc, out, err = run("demo", "info", "-p", "nq", data("q3/demos/osp_chat.dm_68"))
        expect(rc == 1 and "not a NetQuake demo: no cd-track line" in out, out + err)
        # forcing QuakeWorld on a Quake 3 demo: its reader says where the file stops making sense
        rc, out, err = run("demo", "info", "-p", "qw", data("q3/demos/osp_chat.dm_68"))
        expect(rc == 1 and "errors:       1, at offset 0: block #0 has type" in out, out + err)


def case_demo_protocol_unknown():
    rc, _, err = run("demo", "info", "--protocol", "quake9", data("q3/demos/osp_chat.dm_68"))
    m = re.search(r"unknown protocol 'quake9'; known: ([a-z0-9 ]+)", err)
    expect(rc == 2 and m and sorted(m.group(1).split()) == ["nq", "q2", "q3", "qw"], err)
    rc, _, err = run("demo", "info", data("q3/demos/osp_chat.dm_68"), "-p")
    expect(rc == 2 and "-p needs a game name" in err, err)


def case_demo_nq():
    """NetQuake .dem (protocols 15 and 666): info, dump and a byte-identical reencode."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, proto, level in (("nq/demos/vektar_demo1.dem", "15", "bg"),
                                  ("nq/demos/vgio_test.dem", "666", "test")):
            f = data(rel)
            rc, out, err = run("demo", "info", f)
            expect(rc == 0 and "protocol:     %s\n" % proto in out and
                   "map:          %s\n" % level in out and "errors:       0 decode" in out,
                   "info %s: %s %s" % (rel, out, err))
            rc, out, err = run("demo", "dump", f)
            expect(rc == 0 and out.startswith("# cd track ") and "  svc_serverinfo protocol=%s "
                   % proto in out and out.endswith("# end of file\n"), "dump " + rel)
            rc, out, err = run("demo", "dump", "--json", f)
            expect(rc == 0 and '"name":"svc_serverinfo","fields":[["protocol",%s]' % proto in out,
                   "dump --json " + rel)
            re_path = os.path.join(tmp, "re.dem")
            rc, out, err = run("demo", "reencode", f, re_path)
            expect(rc == 0 and "blocks byte-identical" in out, "reencode %s: %s" % (rel, err))
            with open(f, "rb") as a, open(re_path, "rb") as b:
                expect(a.read() == b.read(), "reencode %s gives the same bytes" % rel)
        # demo cut: the serverinfo and signon first, then the span; it reads back cleanly
        span = os.path.join(tmp, "span.dem")
        rc, out, err = run("demo", "cut", data("nq/demos/vektar_demo1.dem"), span,
                           "--from", "20000", "--to", "40000")
        expect(rc == 0 and "3 of the preamble" in out, "demo cut .dem: " + out + err)
        rc, out, err = run("demo", "info", span)
        expect(rc == 0 and "server time 1.400 .. 39.996" in out and "errors:       0 decode" in out,
               "the cut .dem reads back: " + out + err)
        rc, out, err = run("demo", "dump", span)
        first = out.split("block 2 ")[0]
        expect(rc == 0 and "svc_serverinfo protocol=15" in first and "svc_signonnum value=1" in first,
               "the cut .dem starts with the serverinfo: " + out[:400] + err)
        # cut inside a block: read to the last whole one, exit 1
        with open(data("nq/demos/vgio_test.dem"), "rb") as fp:
            whole = fp.read()
        cut = os.path.join(tmp, "cut.dem")
        with open(cut, "wb") as fp:
            fp.write(whole[:5000])
        rc, out, err = run("demo", "info", cut)
        expect(rc == 1 and "the file ends inside a block" in out, "cut: " + out + err)
        # the content decides under an unknown name
        other = copy(tmp, data("nq/demos/vgio_test.dem"), "vgio.bin")
        rc, out, err = run("demo", "info", other)
        expect(rc == 0 and "protocol:     666" in out, "a .dem under another name: " + err)


def pcap(*args):
    return run("pcap", "decode", *args)


def case_pcap_protocol_forced():
    cap = data("q3/sessions/ioq71/capture.pcap")
    auto = pcap(cap)
    expect(auto[0] == 0, "auto decodes the Quake 3 capture")
    for opt in ("--protocol", "-p"):
        forced = pcap(cap, opt, "q3")
        expect(forced == auto, "%s q3 gives the same lines and summary" % opt)
    # a Quake 3 capture forced to QuakeWorld is decoded as QuakeWorld (and fails there)
    rc, out, err = pcap(cap, "--protocol", "qw")
    expect(rc == 1 and " seq=" in out and "not decoded" not in out, err[-400:])
    rc, _, err = pcap(cap, "--protocol", "quake9")
    expect(rc == 2 and "unknown protocol 'quake9'" in err, err)
    # a QuakeWorld capture forced to Quake 3 is decoded as Quake 3 (and fails there)
    rc, out, err = pcap(data("qw/sessions/ezquake_mvdsv/capture.pcap"), "-p", "q3")
    expect(rc == 1 and "wire unknown" in err and "not decoded" not in out, err[-400:])


def case_pcap_record_dir():
    """`pcap decode --record DIR` refuses a DIR that is missing, not a
    directory or not writable before it decodes anything (exit 1, the reason
    named once), instead of failing at each game flow's first message."""
    cap = data("qw/sessions/ezquake_mvdsv/capture.pcap")
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "file")
        with open(f, "w") as fp:
            fp.write("x")
        ro = os.path.join(tmp, "ro")
        os.mkdir(ro, 0o500)
        cases = [(os.path.join(tmp, "missing"), "No such file or directory"),
                 (f, "not a directory")]
        if os.geteuid() != 0:  # root writes anywhere
            cases.append((ro, "not writable"))
        for d, why in cases:
            rc, out, err = pcap(cap, "--record", d)
            expect(rc == 1 and out == "" and err.count(why) == 1 and
                   err.startswith("slipgate pcap: --record %s: " % d),
                   "--record %s: exit %d, %r" % (d, rc, err[-300:]))


def case_pcap_qw():
    """The ezQuake + mvdsv capture: its flows decoded as QuakeWorld, 0 errors,
    every message rebuilt identical."""
    rc, out, err = pcap(data("qw/sessions/ezquake_mvdsv/capture.pcap"))
    expect(rc == 0 and err.rstrip().endswith(" 0 errors"), err[-600:])
    expect(re.search(r"messages (\d+), rebuilt identical \1/\1, dropped as old 0, errors 0", err),
           "the QuakeWorld session's summary: " + err[-600:])
    expect("not decoded" not in out and " svc_serverdata" in out, out[:400])


def dem_blocks(path):
    """A .dem file's cd-track line and its blocks (message, angle bytes)."""
    with open(path, "rb") as f:
        d = f.read()
    i = d.index(b"\n") + 1
    out = []
    while i + 16 <= len(d):
        n = struct.unpack("<I", d[i:i + 4])[0]
        out.append((d[i + 16:i + 16 + n], d[i + 4:i + 16]))
        i += 16 + n
    expect(i == len(d), "%s: no partial block at the end" % path)
    return d[:d.index(b"\n") + 1], out


def case_pcap_nq():
    """A quakespasm + DarkPlaces capture: both flows (control port, game
    port) decoded as NetQuake with 0 errors, every message rebuilt
    byte-identical; --record writes a .dem whose blocks are the client's
    own demo of the session (client_demo.dem), message and angles."""
    cap = data("nq/sessions/quakespasm_darkplaces/capture.pcap")
    rc, out, err = pcap(cap)
    expect(rc == 0 and "0 errors" in err, "exit 0, 0 errors: " + err[-800:])
    m = re.search(r"session 2: \S+ -> \S+: (\d+) datagrams, (\d+) messages \((\d+) rebuilt "
                  r"byte-identical\)", err)
    expect(m and int(m.group(2)) > 1000 and m.group(2) == m.group(3), "every message rebuilt: "
           + err[-800:])
    expect("CCREQ_CONNECT" in out and "CCREP_ACCEPT" in out and "svc_print" in out,
           "control packets and texts are shown")
    rc, out, err = pcap(cap, "--json")
    expect(rc == 0 and '"kind":"message"' in out and '"identical":false' not in out, "JSON")
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = pcap(cap, "--record", tmp)
        dems = [f for f in os.listdir(tmp) if f.endswith(".dem")]
        expect(rc == 0 and len(dems) == 1, "one demo recorded: %s %s" % (dems, err[-500:]))
        rec = os.path.join(tmp, dems[0])
        head, ours = dem_blocks(rec)
        chead, theirs = dem_blocks(data("nq/sessions/quakespasm_darkplaces/client_demo.dem"))
        expect(head == chead, "the cd-track line: %r vs %r" % (head, chead))
        expect(len(ours) >= len(theirs) and ours[:len(theirs)] == theirs,
               "the client's demo is the start of the recording (%d vs %d blocks)"
               % (len(ours), len(theirs)))
        expect(ours[-1][0] == b"\x02", "the recording ends with svc_disconnect")
        rc, out, _ = run("demo", "info", rec)
        expect(rc == 0 and "errors:       0 decode" in out and "map:          box" in out, out)


def _udp_frame(src, dst, payload):
    """An Ethernet + IPv4 + UDP frame (checksums 0: nothing checks them)."""
    def ip4(a):
        return bytes(int(x) for x in a.split("."))
    udp = struct.pack(">HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, ip4(src[0]),
                     ip4(dst[0])) + udp
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + ip


def write_pcap(path, events):
    """A classic pcap of (client, server, 'c2s' or 's2c', payload) events."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, (client, server, way, payload) in enumerate(events):
            frame = _udp_frame(client, server, payload) if way == "c2s" else \
                _udp_frame(server, client, payload)
            f.write(struct.pack("<IIII", 1000 + i // 100, (i % 100) * 10000, len(frame),
                                len(frame)))
            f.write(frame)


NQ_DATA, NQ_ACK, NQ_EOM, NQ_UNREL = 0x00010000, 0x00020000, 0x00080000, 0x00100000


def nq_dgram(flags, seq, payload=b""):
    return struct.pack(">II", flags | (8 + len(payload)), seq) + payload


def case_pcap_nq_resent_signon():
    """A server that resends its sign-on to a lossy client: the resent
    reliable message that carries svc_serverinfo (the same sequence) is
    the same message, not a new level: `pcap decode --record` writes one
    .dem, and no file that no player can play (empty, or the sign-on
    alone: quakespasm calls an empty .dem invalid and hangs).  A second
    client that leaves after the serverinfo leaves no file at all."""
    server = ("10.0.0.1", 26001)
    lossy, quitter = ("10.0.0.2", 40000), ("10.0.0.3", 40001)
    info = (b"\x0b" + struct.pack("<i", 15) + b"\x01\x00" + b"box\x00" +
            b"maps/box.bsp\x00\x00" + b"\x00" + b"\x19\x01")        # + svc_signonnum 1
    ev = []

    def s2c(client, *d):
        ev.extend((client, server, "s2c", x) for x in d)

    def c2s(client, *d):
        ev.extend((client, server, "c2s", x) for x in d)

    s2c(lossy, nq_dgram(NQ_DATA | NQ_EOM, 0, info))
    for _ in range(6):  # the client's copies were lost: the same message again, and again
        c2s(lossy, nq_dgram(NQ_UNREL, 0 + len(ev), b"\x01"))
        s2c(lossy, nq_dgram(NQ_DATA | NQ_EOM, 0, info))
    c2s(lossy, nq_dgram(NQ_ACK, 0), nq_dgram(NQ_DATA | NQ_EOM, 0, b"\x04prespawn\x00"))
    s2c(lossy, nq_dgram(NQ_ACK, 0), nq_dgram(NQ_DATA | NQ_EOM, 1, b"\x19\x02"))
    s2c(lossy, nq_dgram(NQ_DATA | NQ_EOM, 1, b"\x19\x02"))  # resent too
    c2s(lossy, nq_dgram(NQ_ACK, 1), nq_dgram(NQ_DATA | NQ_EOM, 1, b"\x04spawn\x00"))
    s2c(lossy, nq_dgram(NQ_ACK, 1),
        nq_dgram(NQ_DATA | NQ_EOM, 2, b"\x07" + struct.pack("<f", 1.0) + b"\x19\x03"))
    c2s(lossy, nq_dgram(NQ_ACK, 2), nq_dgram(NQ_DATA | NQ_EOM, 2, b"\x04begin\x00"))
    for k in range(5):  # the game
        s2c(lossy, nq_dgram(NQ_UNREL, k, b"\x07" + struct.pack("<f", 1.1 + k / 10) + b"\x01"))
    c2s(lossy, nq_dgram(NQ_UNREL, 100, b"\x02"))  # clc_disconnect
    s2c(quitter, nq_dgram(NQ_DATA | NQ_EOM, 0, info))
    c2s(quitter, nq_dgram(NQ_ACK, 0), nq_dgram(NQ_UNREL, 0, b"\x02"))
    with tempfile.TemporaryDirectory() as tmp:
        cap = os.path.join(tmp, "lossy.pcap")
        rec = os.path.join(tmp, "rec")
        os.mkdir(rec)
        write_pcap(cap, ev)
        rc, out, err = pcap(cap, "-p", "nq", "--record", rec)
        expect(rc == 0 and " 0 errors" in err, "exit 0, 0 errors: %d %s" % (rc, err[-800:]))
        dems = sorted(os.listdir(rec))
        sizes = {f: os.path.getsize(os.path.join(rec, f)) for f in dems}
        expect(len(dems) == 1, "one demo, the lossy client's, and no other file: %s" % sizes)
        path = os.path.join(rec, dems[0])
        expect(dems[0].startswith("10.0.0.2"), "the lossy client's demo: %s" % dems)
        head, blocks = dem_blocks(path)
        msgs = [b for b, _ in blocks]
        expect(head == b"-1\n" and msgs[0] == info and msgs.count(info) == 1,
               "the serverinfo once, at the start: %r" % msgs[:3])
        expect(msgs[1:3] == [b"\x19\x02", b"\x07" + struct.pack("<f", 1.0) + b"\x19\x03"],
               "the sign-on, once each: %r" % msgs[:4])
        expect(len(msgs) == 1 + 2 + 5 + 1 and msgs[-1] == b"\x02",
               "the game's 5 frames and the end: %d blocks" % len(msgs))
        rc, out, _ = run("demo", "info", path)
        expect(rc == 0 and "errors:       0 decode" in out and "map:          box" in out, out)


def crc16_ccitt(data):
    """Quake's CRC_Block: CRC-16-CCITT from 0xffff, no final xor."""
    crc = 0xffff
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xffff
    return crc


def dp_csprogs_demo(path, size=100000):
    """A DarkPlaces client demo as CL_VM_Init writes it when the CSQC
    program loads while recording (csprogs.c MakeDownloadPacket, cut in at
    the file's start): the cd-track line, a stufftext
    "\\ncl_downloadbegin SIZE NAME\\n", csprogs.dat in blocks of one
    svc_downloaddata (50: long offset, short size, the bytes; NET_MAXMESSAGE
    65536 makes a whole block 65 536 bytes, 65 529 of data), a stufftext
    "\\ncl_downloadfinished SIZE CRC\\n"; then the game (protocol 15)."""
    prog = bytes((i * 7 + (i >> 8)) & 0xff for i in range(size))
    blocks = [b"\x09\ncl_downloadbegin %d csprogs.dat\n\x00" % size]
    for off in range(0, size, 65529):
        part = prog[off:off + 65529]
        blocks.append(b"\x32" + struct.pack("<iH", off, len(part)) + part)
    blocks.append(b"\x09\ncl_downloadfinished %d %d\n\x00" % (size, crc16_ccitt(prog)))
    blocks.append(b"\x0b" + struct.pack("<i", 15) + b"\x01\x00" + b"dp\x00" +
                  b"maps/dp.bsp\x00\x00" + b"\x00" + b"\x19\x01")
    blocks.append(b"\x19\x02")
    blocks.append(b"\x07" + struct.pack("<f", 1.0) + b"\x19\x03")
    for k in range(3):
        blocks.append(b"\x07" + struct.pack("<f", 1.1 + k / 10) + b"\x01")
    blocks.append(b"\x02")
    with open(path, "wb") as f:
        f.write(b"-1\n")
        for b in blocks:
            f.write(struct.pack("<I3f", len(b), 0.0, 90.0, 0.0) + b)
    return blocks


def case_demo_dp_csprogs():
    """A DarkPlaces client demo that holds csprogs.dat in 65 536-byte
    svc_downloaddata blocks: `demo info` reads them as the CSQC program
    they are (no decode error, its size and CRC checked), `demo dump`
    shows them, `demo reencode` writes the file back byte-identical and
    exits 0, and `demo cut` keeps them with the preamble."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "dp.dem")
        blocks = dp_csprogs_demo(src)
        expect(len(blocks[1]) == 65536, "a whole csprogs block is 65 536 bytes")
        rc, out, err = run("demo", "info", src)
        expect(rc == 0 and "errors:       0 decode" in out and "map:          dp" in out,
               "info: exit %d\n%s%s" % (rc, out, err))
        expect(re.search(r"csprogs: +csprogs\.dat, 100000 bytes in 2 blocks, CRC \d+ matches", out),
               "info names the CSQC program: " + out)
        rc, out, err = run("demo", "dump", src)
        expect(rc == 0 and out.count("svc_downloaddata") == 2 and "offset=65529" in out,
               "dump: exit %d\n%s%s" % (rc, out[:1500], err))
        rc, out, err = run("demo", "dump", src, "--json")
        expect(rc == 0 and out.count('"svc_downloaddata"') == 2, "dump --json: %d %s" % (rc, err))
        dst = os.path.join(tmp, "re.dem")
        rc, out, err = run("demo", "reencode", src, dst)
        with open(src, "rb") as a, open(dst, "rb") as b:
            same = a.read() == b.read()
        expect(same, "reencode writes the demo back byte-identical")
        expect(rc == 0, "reencode exits 0 when its output is identical: %d %s %s" % (rc, out, err))
        cut = os.path.join(tmp, "cut.dem")
        rc, out, err = run("demo", "cut", src, cut, "--from", "1050", "--to", "1150")
        expect(rc == 0, "cut: %d %s %s" % (rc, out, err))
        _, kept = dem_blocks(cut)
        expect([b for b, _ in kept[:3]] == blocks[:3], "the cut keeps the CSQC program first")


def demo_ends_whole(game, d):
    """Where the last whole block of a demo ends, and whether that is its end."""
    i = 0
    if game == "nq":
        i = d.index(b"\n") + 1
        while i + 16 <= len(d) and i + 16 + struct.unpack_from("<I", d, i)[0] <= len(d):
            i += 16 + struct.unpack_from("<I", d, i)[0]
    elif game == "qw":
        while i + 5 <= len(d):
            kind = d[i + 4]
            n = 36 if kind == 0 else 8 if kind == 2 else \
                (4 + struct.unpack_from("<I", d, i + 5)[0] if i + 9 <= len(d) else 1 << 30)
            if kind > 2 or i + 5 + n > len(d):
                break
            i += 5 + n
    elif game == "q2":
        while i + 4 <= len(d):
            n = struct.unpack_from("<i", d, i)[0]
            if n == -1 or i + 4 + n > len(d):
                i += 4 if n == -1 else 0
                break
            i += 4 + n
    else:  # q3
        while i + 8 <= len(d):
            n = struct.unpack_from("<i", d, i + 4)[0]
            if n == -1 or i + 8 + n > len(d):
                i += 8 if n == -1 else 0
                break
            i += 8 + n
    return i, i == len(d)


def case_pcap_record_full_disk():
    """`pcap decode --record` onto a full disk (an 8 KiB tmpfs in a mount
    namespace of its own: `unshare -rm`; the case fails where that cannot
    be set up): every game's demo ends on a whole block, cut back to its
    last whole message, and the error says there is no space left."""
    caps = {"nq": "nq/sessions/quakespasm_darkplaces/capture.pcap",
            "qw": "qw/sessions/ezquake_mvdsv/capture.pcap",
            "q2": "q2/sessions/q2pro_34/capture.pcap",
            "q3": "q3/sessions/ioq71/capture.pcap"}
    import io
    import tarfile
    for game, rel in sorted(caps.items()):
        cap = data(rel)
        with tempfile.TemporaryDirectory() as tmp:
            script = ('mount -t tmpfs -o size=8k tmpfs "$1" || exit 99; '
                      '"$2" pcap decode "$3" --record "$1" >/dev/null; echo "rc=$?" >&2; '
                      'tar -C "$1" -cf - .')
            p = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", tmp, SLIPGATE, cap],
                               capture_output=True, timeout=100)
            err = p.stderr.decode("utf-8", "replace")
            expect(p.returncode == 0 and "rc=" in err,
                   "%s: a private tmpfs (unshare -rm, mount): exit %d %s" % (game, p.returncode,
                                                                           err[-400:]))
            expect("rc=1" in err and "No space left on device" in err,
                   "%s: the error says no space left: %s" % (game, err[-600:]))
            files = {}
            with tarfile.open(fileobj=io.BytesIO(p.stdout)) as t:
                for m in t.getmembers():
                    if m.isfile():
                        files[m.name] = t.extractfile(m).read()
            expect(len(files) == 1, "%s: one demo: %s" % (game, sorted(files)))
            for name, d in files.items():
                at, whole = demo_ends_whole(game, d)
                expect(whole and at > 0, "%s: %s ends on a whole block: %d of %d bytes"
                       % (game, name, at, len(d)))


def case_nq_golden():
    """Golden dumps (tests/nq/golden): `demo dump` of the 666 demo and
    `pcap decode` of the quakespasm + DarkPlaces capture, line for line.
    SG_UPDATE_GOLDEN=1 rewrites them (review the diff)."""
    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nq", "golden")
    for name, args in (("vgio_test.dump", ["demo", "dump", data("nq/demos/vgio_test.dem")]),
                       ("quakespasm_darkplaces.pcap.txt",
                        ["pcap", "decode",
                         data("nq/sessions/quakespasm_darkplaces/capture.pcap")])):
        rc, out, err = run(*args)
        expect(rc == 0, "%s: exit %d: %s" % (name, rc, err[-500:]))
        path = os.path.join(golden, name)
        if os.environ.get("SG_UPDATE_GOLDEN"):
            with open(path, "w") as f:
                f.write(out)
        with open(path) as f:
            want = f.read()
        if out != want:
            a, b = want.splitlines(), out.splitlines()
            k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            expect(False, "%s differs from its golden dump at line %d:\n- %s\n+ %s"
                   % (name, k + 1, a[k] if k < len(a) else "(end)", b[k] if k < len(b) else "(end)"))


def case_demo_q2():
    """Quake 2 .dm2: info, dump and reencode (to the same bytes) through the binary."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, blocks, level in (("q2/demos/libq2_test.dm2", 29, "The Edge"),
                                   ("q2/sessions/q2pro_35/client_demo.dm2", 296,
                                    "peers synthetic q2 box")):
            f = data(rel)
            rc, out, err = run("demo", "info", f)
            expect(rc == 0 and "protocol:     34\n" in out and "map:          %s\n" % level in out
                   and "errors:       0\n" in out, "info %s: %s%s" % (rel, out, err))
            rc, out, err = run("demo", "dump", f)
            expect(rc == 0 and out.count("#block ") == blocks and "svc_serverdata" in out
                   and "svc_frame" in out, "dump %s: %d, %s" % (rel, rc, err))
            rc, out, err = run("demo", "dump", "--json", f)
            expect(rc == 0 and all(line.startswith("{") for line in out.splitlines()), "dump --json")
            o = os.path.join(tmp, "o.dm2")
            rc, out, err = run("demo", "reencode", f, o)
            expect(rc == 0 and "%d blocks, %d byte-identical, 0 failed" % (blocks, blocks) in out,
                   "reencode %s: %s%s" % (rel, out, err))
            with open(f, "rb") as a, open(o, "rb") as b:
                expect(a.read() == b.read(), "%s re-encodes to the same bytes" % rel)


def kex_demo(protocol):
    """A small rerelease (KEX) .dm2 BUILT FROM THE SEED'S DOCUMENTED LAYOUTS
    (PROTOCOLS.md B), not a real recording: none was available.  Block 0:
    serverdata, a zlib-wrapped configblast and baselineblast; blocks 1-2:
    frames with 36-bit entity bits and float origins; a locprint; a sound
    from entity 5000."""
    import zlib
    f32 = lambda v: struct.pack("<f", v)
    def blast(op, plain):
        z = zlib.compress(plain)
        return struct.pack("<BHH", op, len(z), len(plain)) + z
    b0 = (struct.pack("<BiiBB", 12, protocol, 7, 0, 40) + b"baseq2\0" + struct.pack("<h", 0)
          + b"q2dm1\0")
    b0 += blast(22, struct.pack("<H", 0) + b"The Edge\0" + struct.pack("<H", 1) + b"q2dm1.bsp\0")
    b0 += blast(23, bytes([0x81, 0x88, 0x80, 0x08, 1, 5]) + struct.pack("<I", 0x1234) + f32(1.5)
                + bytes([0x01, 2]) + (struct.pack("<h", 80) if protocol == 2022 else f32(10.0)))

    def frame(n):
        d = struct.pack("<BiiBBBB", 20, n, n - 1, 0, 1, 0xff, 17)
        d += struct.pack("<HH", 0x8002, 0x0002) + f32(100.25) + f32(-64.0) + f32(24.5)
        d += struct.pack("<IhhIhB", 3, 100, 42, 1, 7, 3)
        d += bytes([18, 0x81, 0x80, 0x80, 0x80, 0x0f, 1]) + f32(2.75) + struct.pack("<BBHH", 16, 1, 2, 9)
        d += bytes([0x01, 2]) + (struct.pack("<h", 96) if protocol == 2022 else f32(12.0))
        return d + b"\0\0"
    b1 = frame(10) + bytes([26, 2]) + b"{0} fragged {1}\0" + bytes([2]) + b"Alpha\0Beta\0"
    b1 += struct.pack("<BBHI", 9, 0x48, 300, 5000 << 3 | 2)
    out = b""
    for b in (b0, b1, frame(11)):
        out += struct.pack("<i", len(b)) + b
    return out + struct.pack("<i", -1)


def case_demo_q2_kex():
    """`slipgate demo info|dump` on a rerelease (KEX) demo the test writes
    (2022 as shipped, 2023): the protocol named as the rerelease, map,
    frames, messages; the dump's fields (floats, the blasts' contents);
    reencode says unsupported."""
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in (2022, 2023):
            f = os.path.join(tmp, "kex%d.dm2" % protocol)
            with open(f, "wb") as fh:
                fh.write(kex_demo(protocol))
            rc, out, err = run("demo", "info", f)
            expect(rc == 0 and "protocol:     %d (Quake 2 rerelease (KEX) demo" % protocol in out
                   and "map:          q2dm1\n" in out and "game:         baseq2\n" in out
                   and "(1 serverdata, 2 frames" in out and "errors:       0\n" in out
                   and "server frames 10 .. 11" in out, "info %d: %s%s" % (protocol, out, err))
            rc, out, err = run("demo", "dump", f)
            expect(rc == 0 and out.count("#block ") == 3 and "svc_configblast" in out
                   and '  svc_configstring index=1 string="q2dm1.bsp"' in out
                   and "svc_spawnbaselineblast compressed=" in out and "bits4=15" in out
                   and "deflated=<" in out and not re.search(r"svc_configblast .*index=", out)
                   and "origin0=2.75" in out and "svc_locprint" in out
                   and 'arg="Beta"' in out and "entchan=%d" % (5000 << 3 | 2) in out,
                   "dump %d: %d %s%s" % (protocol, rc, out, err))
            rc, out, err = run("demo", "dump", "--json", f)
            expect(rc == 0 and all(line.startswith("{") for line in out.splitlines())
                   and '"in":"svc_configblast"' in out, "dump --json %d: %s" % (protocol, out))
            rc, out, err = run("demo", "reencode", f, os.path.join(tmp, "o.dm2"))
            expect(rc != 0 and "unsupported" in (out + err), "reencode %d: %d %s%s"
                   % (protocol, rc, out, err))


def case_pcap_q2():
    """Every Quake 2 session capture: 0 errors, every message rebuilt byte-identical."""
    for name, proto in (("q2pro_34", 34), ("q2pro_35", 35), ("q2pro_36", 36),
                        ("yquake2_34", 34)):
        rc, out, err = pcap(data("q2/sessions/%s/capture.pcap" % name))
        expect(rc == 0, "%s: exit 0: %s" % (name, err))
        expect("Quake 2 protocol %d" % proto in err and ", 0 errors\n" in err, name + ": " + err)
        expect(" CHANGED" not in out and "error=" not in out, name + ": nothing rebuilt differently")
        expect(out.count(" identical\n") > 1000, name + ": messages rebuilt identical")
        rc, out, err = pcap(data("q2/sessions/%s/capture.pcap" % name), "--json")
        expect(rc == 0 and '"identical":true' in out and '"identical":false' not in out,
               name + " --json")


def case_sign_key_checked():
    """`sign_key` is checked at start-up: a key readable by others, a
    malformed key and a missing one each stop slipgate with FILE:LINE."""
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "league")
        rc, out, err = run("keygen", "--out", key)
        expect(rc == 0 and out.startswith("slipgate-pub 1 "), "keygen: " + out + err)
        expect(os.stat(key).st_mode & 0o777 == 0o600, "the secret key is mode 0600")
        rc, out, err = run("keygen", "--out", key)
        expect(rc == 1 and "File exists" in err, "keygen never overwrites a key: " + err)
        conf = os.path.join(tmp, "s.conf")
        with open(conf, "w") as f:
            f.write("# signed\nroute main {\n    server 127.0.0.1:27961\n"
                    "    sign_key %s\n}\n" % key)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc == 0, "a 0600 key is accepted: " + err)
        os.chmod(key, 0o644)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:4: error: sign_key %s is readable or writable by group or others "
               "(mode 0644)" % (conf, key) in err, "a 0644 key is refused with file:line: " + err)
        with open(key, "w") as f:
            f.write("not a key\n")
        os.chmod(key, 0o600)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:4: error: sign_key %s is not a slipgate secret key" % (conf, key)
               in err, "a malformed key is refused with file:line: " + err)
        with open(conf, "w") as f:
            f.write("sign_key %s.missing\nroute main {\n    server 127.0.0.1:27961\n}\n" % key)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:1: error: sign_key %s.missing: No such file" % (conf, key) in err,
               "a missing top-level key is refused with file:line: " + err)


def case_demo_verify_usage():
    """`demo verify`: usage errors exit 2; a file without a .sig is "no signature", exit 1."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.dm_68")
        with open(path, "wb") as f:
            f.write(b"abc")
        rc, out, err = run("demo", "verify", path)
        expect(rc == 1 and out.startswith(path + ": no signature ("), "no .sig: " + out + err)
        rc, out, err = run("demo", "verify", path, "--json")
        expect(rc == 1 and '"verdict":"none","authentic":false' in out, "--json: " + out)
        rc, out, err = run("demo", "verify")
        expect(rc == 2 and "usage: slipgate demo verify" in err, "no file: " + err)
        rc, out, err = run("demo", "verify", path, "--key", "nonsense")
        expect(rc == 2 and "not a public key" in err, "bad --key: " + err)
        rc, out, err = run("demo", "--help")
        expect("demo verify FILE" in out, "demo --help lists verify")


def case_demo_verify_json_bytes():
    """`demo verify --json` names a file whose name is not UTF-8 in strict
    JSON and UTF-8: a well-formed sequence as it is, every other byte as
    its Latin-1 character (protocols/json.h)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(os.fsencode(tmp), b"d\xc3\xa9-\xe9\xff\x01.dm_68")
        with open(path, "wb") as f:
            f.write(b"abc")
        p = subprocess.run([SLIPGATE, "demo", "verify", path, "--json"], capture_output=True,
                           timeout=100)
        try:
            doc = json.loads(p.stdout.decode("utf-8"))  # strict UTF-8, then strict JSON
        except ValueError as e:
            sys.exit("FAILED: --json output is not UTF-8 JSON (%s): %r" % (e, p.stdout))
        want = tmp + "/d\u00e9-\u00e9\u00ff\u0001.dm_68"
        expect(p.returncode == 1 and doc.get("file") == want,
               "file %r, expected %r (rc %d)" % (doc.get("file"), want, p.returncode))


def case_anonymize_checked():
    """`anonymize yes|no` and `anonymize_key FILE` are checked at start-up:
    a bad value, a key file readable by others and one that is not a key
    each stop slipgate with FILE:LINE and what is wrong; a missing key file
    is made (0600, its directory too), and a route's `anonymize no` needs
    none."""
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "state", "anon.key")
        conf = os.path.join(tmp, "a.conf")

        def write(text):
            with open(conf, "w") as f:
                f.write(text)

        write("route main {\n    server 127.0.0.1:27961\n    anonymize maybe\n}\n")
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:3:15: error: 'anonymize' expects one of no, yes, got 'maybe'"
               % conf in err, "a bad value is refused with file:line: " + err)
        write("anonymize yes\nanonymize_key %s\nroute main {\n    server 127.0.0.1:27961\n}\n"
              % key)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc == 0, "a missing key file is made: " + err)
        expect(os.stat(key).st_mode & 0o777 == 0o600, "the key file is mode 0600")
        expect(os.stat(os.path.dirname(key)).st_mode & 0o777 == 0o700, "its directory is 0700")
        with open(key) as f:
            made = f.read()
        expect(made.startswith("slipgate-anonymize-key 1\n"), "the key file: %r" % made[:30])
        rc, out, err = run("-c", conf, "--check-config")
        with open(key) as f:
            expect(rc == 0 and f.read() == made, "an existing key is kept: " + err)
        os.chmod(key, 0o644)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:2: error: anonymize_key %s is readable or writable by group or "
               "others (mode 0644)" % (conf, key) in err,
               "a 0644 key is refused with file:line: " + err)
        with open(key, "w") as f:
            f.write("not a key\n")
        os.chmod(key, 0o600)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:2: error: anonymize_key %s is not a slipgate anonymize key"
               % (conf, key) in err, "a malformed key is refused with file:line: " + err)
        # The route's own key file, and its line.
        write("anonymize yes\nroute main {\n    server 127.0.0.1:27961\n"
              "    anonymize_key %s\n}\n" % key)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc != 0 and "%s:4: error: anonymize_key %s is not a slipgate anonymize key"
               % (conf, key) in err, "a route's bad key is refused at its line: " + err)
        # `anonymize no` in the route: the top level's bad key is not needed.
        write("anonymize yes\nanonymize_key %s\nroute main {\n    server 127.0.0.1:27961\n"
              "    anonymize no\n}\n" % key)
        rc, out, err = run("-c", conf, "--check-config")
        expect(rc == 0, "a route with anonymize no needs no key: " + err)


def q2_dump_states(path):
    """`slipgate demo dump` of a protocol 34 .dm2 read back into the state a
    player of it has after each svc_frame: (player state, {entity: fields}),
    fields at 0 left out, the old origin left out (a 34 writer may send it or
    let the player derive it)."""
    rc, out, err = run("demo", "dump", path)
    expect(rc == 0, "dump %s: %s" % (path, err))

    def pairs(line):
        return [t.split("=", 1) for t in line.split()[1:] if "=" in t]

    def entity(ts, i):
        bits = int(ts[i][1])
        i += 1
        for s in (1, 2, 3):
            if i < len(ts) and ts[i][0] == "bits%d" % s:
                bits |= int(ts[i][1]) << (8 * s)
                i += 1
        num = int(ts[i][1])
        fields = {}
        i += 1
        while i < len(ts) and ts[i][0] != "bits":
            fields["frame" if ts[i][0] == "frame16" else ts[i][0]] = ts[i][1]
            i += 1
        return bits, num, fields, i

    base, frames, prev = {}, [], ({}, {})
    for line in out.splitlines():
        if line.startswith("svc_spawnbaseline "):
            _, num, fields, _ = entity(pairs(line), 0)
            base[num] = fields
        elif line.startswith("svc_frame "):
            ts = pairs(line)
            delta = int(dict(ts[:2])["deltaframe"])
            ps = dict(prev[0]) if delta > 0 else {}
            ents = {n: dict(e) for n, e in prev[1].items()} if delta > 0 else {}
            for e in ents.values():
                e.pop("event", None)
            i = [k for k, _ in ts].index("svc_playerinfo") + 1
            while ts[i][0] != "svc_packetentities":
                if ts[i][0] not in ("psflags", "statbits"):
                    ps[ts[i][0]] = ts[i][1]
                i += 1
            i += 1
            while i < len(ts):
                bits, num, fields, i = entity(ts, i)
                if num == 0:
                    break
                if bits & 0x40:
                    ents.pop(num, None)
                    continue
                e = dict(ents[num]) if num in ents else dict(base.get(num, {}))
                e.pop("event", None)
                e.update(fields)
                ents[num] = e
            prev = (ps, ents)
            frames.append(({k: v for k, v in ps.items() if v != "0"},
                           {n: {k: v for k, v in e.items()
                                if v != "0" and not k.startswith("oldorigin")}
                            for n, e in ents.items()}))
    return frames


def case_pcap_q2_record():
    """`slipgate pcap decode --record` of every Quake 2 capture writes a
    protocol 34 .dm2 (34: the stream as the client took it; R1Q2 35 and
    Q2PRO 36: transcoded, as Q2PRO's client writes its own): `demo info`
    reads it with 0 errors, the map and game are the client demo's, it has
    at least the client demo's frames, and from the client demo's first
    frame on each frame holds the same player state and entity states, field
    by field (Q2PRO's client renumbers its frames; Yamagi's is raw)."""
    for name in ("q2pro_34", "yquake2_34", "q2pro_35", "q2pro_36"):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out, err = pcap(data("q2/sessions/%s/capture.pcap" % name), "--record", tmp)
            dm2 = [f for f in os.listdir(tmp) if f.endswith(".dm2")]
            expect(rc == 0 and ", 0 errors\n" in err and len(dm2) == 1,
                   "%s: one .dm2 recorded: %s %s" % (name, dm2, err[-500:]))
            rec = os.path.join(tmp, dm2[0])
            client = data("q2/sessions/%s/client_demo.dm2" % name)
            info = {}
            for path in (rec, client):
                rc, out, err = run("demo", "info", path)
                expect(rc == 0 and "protocol:     34\n" in out and "errors:       0\n" in out,
                       "%s: info %s: %s%s" % (name, path, out, err))
                info[path] = out
            for key in ("map:", "game:"):
                line = [l for l in info[client].splitlines() if l.startswith(key)]
                expect(line and line[0] + "\n" in info[rec], "%s: the same %s %s"
                       % (name, key, info[rec]))
            ours, theirs = q2_dump_states(rec), q2_dump_states(client)
            expect(len(theirs) > 250 and len(ours) >= len(theirs),
                   "%s: %d frames recorded, %d in the client's demo" % (name, len(ours), len(theirs)))
            m = re.search(r"serverdata, (\d+) frames", info[rec])
            expect(m and int(m.group(1)) == len(ours), "%s: info counts the frames: %s"
                   % (name, info[rec]))
            start = [j for j in range(len(ours)) if ours[j] == theirs[0]]
            expect(start, "%s: the client demo's first frame is one of the recording's" % name)
            j = start[0]
            same = sum(1 for i in range(len(theirs))
                       if j + i < len(ours) and ours[j + i] == theirs[i])
            expect(same == len(theirs), "%s: %d of the client's %d frames are the same"
                   % (name, same, len(theirs)))
            ps = theirs[len(theirs) // 2][0]
            expect("origin0" in ps and "viewangle1" in ps and "fov" in ps,
                   "%s: the player state sample has a position, view angles, fov: %s" % (name, ps))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
if CASE not in CASES:
    sys.exit("unknown case " + CASE)
CASES[CASE]()
