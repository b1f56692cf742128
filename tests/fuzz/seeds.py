#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets in tests/fuzz, and their replay.

The seeds are cut from the real test data (../shared/testdata: Quake 3
demos and pcapng captures) and from the project's config files, in each
target's input format (see the comment at the top of each target), into a
scratch directory: they are generated each time and never committed.

  seeds.py gen --testdata DIR --source ROOT OUTDIR [TARGET...]
      write OUTDIR/TARGET/seed-* for each TARGET (default: all)
  seeds.py replay --testdata DIR --source ROOT TARGET EXE
      run EXE once over every seed of TARGET and every file of
      tests/fuzz/regressions/TARGET/
  seeds.py run --testdata DIR --source ROOT [--seconds S] [--work DIR] TARGET EXE
      the replay above, then S seconds of fuzzing (libFuzzer
      -max_total_time) starting from the seeds; fails on a crash, leak,
      timeout, out-of-memory or sanitizer report in either part (the meson
      test fuzz@TARGET, S from the fuzz_seconds option; 0 = replay only)

Python standard library only.
"""

import argparse
import glob
import os
import re
import struct
import subprocess
import sys
import tempfile

TARGETS = ['fuzz_huffman', 'fuzz_q3_message', 'fuzz_q3_client', 'fuzz_q3_netchan',
           'fuzz_q3_filters', 'fuzz_demo_reader', 'fuzz_config', 'fuzz_bmsg',
           'fuzz_qw', 'fuzz_sign', 'fuzz_nq', 'fuzz_q2', 'fuzz_json', 'fuzz_qw_prx',
           'fuzz_q3_spectate']

SERVER_PORT = 27960  # the server port of every Q3 session capture (MANIFEST.md)
SESSIONS = {'ioq68': 1, 'ioq71': 2, 'oa71': 3}  # capture -> fuzz_q3_netchan wire mode
OOB = b'\xff\xff\xff\xff'


# ---- test data readers ----

def read_demo(path):
    """[(sequence, message bytes)] of a demo file, up to its end marker or its end."""
    data = open(path, 'rb').read()
    msgs, pos = [], 0
    while pos + 8 <= len(data):
        seq, n = struct.unpack_from('<ii', data, pos)
        pos += 8
        if n < 0 or pos + n > len(data):
            break
        msgs.append((seq, data[pos:pos + n]))
        pos += n
    return msgs


def demo_file(msgs, end=True):
    out = b''.join(struct.pack('<ii', s, len(m)) + m for s, m in msgs)
    return out + (struct.pack('<ii', -1, -1) if end else b'')


def pcapng_udp(path):
    """[(src port, dst port, payload)] of every IPv4/IPv6 UDP datagram of a
    pcapng file with Ethernet link type, from its enhanced and simple packet blocks."""
    data = open(path, 'rb').read()
    out, pos, e = [], 0, '<'
    while pos + 12 <= len(data):
        btype = struct.unpack_from(e + 'I', data, pos)[0]
        if btype == 0x0A0D0D0A:  # section header: its byte-order magic sets the endianness
            e = '<' if struct.unpack_from('<I', data, pos + 8)[0] == 0x1A2B3C4D else '>'
        blen = struct.unpack_from(e + 'I', data, pos + 4)[0]
        if blen < 12 or pos + blen > len(data):
            break
        body = data[pos + 8:pos + blen - 4]
        pos += blen
        if btype == 6:  # enhanced packet block
            caplen = struct.unpack_from(e + 'I', body, 12)[0]
            frame = body[20:20 + caplen]
        elif btype == 3:  # simple packet block
            frame = body[4:]
        else:
            continue
        udp = ethernet_udp(frame)
        if udp:
            out.append(udp)
    return out


def ethernet_udp(frame):
    if len(frame) < 14:
        return None
    off, etype = 14, struct.unpack_from('>H', frame, 12)[0]
    while etype == 0x8100 and len(frame) >= off + 4:  # VLAN tags
        etype = struct.unpack_from('>H', frame, off + 2)[0]
        off += 4
    if etype == 0x0800 and len(frame) >= off + 20 and frame[off + 9] == 17:
        off += (frame[off] & 15) * 4
    elif etype == 0x86DD and len(frame) >= off + 40 and frame[off + 6] == 17:
        off += 40
    else:
        return None
    if len(frame) < off + 8:
        return None
    sport, dport, ulen = struct.unpack_from('>HHH', frame, off)
    return sport, dport, frame[off + 8:off + max(ulen, 8)]


def session(datagrams):
    """The game session of a capture: [(s2c, payload)] between the server and
    the client that sent `connect`, plus [(s2c, payload)] of everyone else."""
    client = next(s for s, d, p in datagrams if d == SERVER_PORT and p[4:11] == b'connect')
    game, other = [], []
    for s, d, p in datagrams:
        if (s, d) == (client, SERVER_PORT) or (s, d) == (SERVER_PORT, client):
            game.append((s == SERVER_PORT, p))
        else:
            other.append((s == SERVER_PORT, p))
    return game, other


# ---- per-target seeds ----

def spread(items, count):
    """`count` items evenly spread over `items` (all of them if fewer)."""
    if len(items) <= count:
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def demos(testdata):
    paths = sorted(glob.glob(os.path.join(testdata, 'q3', 'demos', '*.dm_*')))
    paths += sorted(glob.glob(os.path.join(testdata, 'q3', 'sessions', '*', 'client_demo.dm_*')))
    return [(os.path.basename(os.path.dirname(p)) + '_' + os.path.basename(p).split('.')[0],
             read_demo(p)) for p in paths]


def captures(testdata):
    out = []
    for name in SESSIONS:
        path = os.path.join(testdata, 'q3', 'sessions', name, 'capture.pcap')
        out.append((name, session(pcapng_udp(path))))
    return out


# fuzz_huffman bit-reader programs: (flags, ops); op = kind | arg << 4 (see fuzz_huffman.c)
PROGRAMS = [
    (0, bytes([0x04, 0xB7, 0xB7, 0x19, 0x00, 0x1f, 0x01, 0x02, 0x03, 0x05, 0x06, 0x0c])),
    (0, bytes([0x04, 0x05, 0x77, 0x0d, 0x2e, 0x88, 0x00, 0x29, 0x00, 0x07])),
    (1, bytes([0x04, 0x03, 0x04, 0x0b, 0x04, 0x04, 0x04, 0x01, 0xB7, 0x00, 0x30])),
]


def seeds_huffman(testdata, source):
    seeds = {}
    # fixed-Huffman messages, also the data of a bit-reader program
    for name, msgs in demos(testdata):
        for i, (_, m) in enumerate(spread(msgs, 6)):
            flags, ops = PROGRAMS[i % len(PROGRAMS)]
            seeds['%s_%d' % (name, i)] = bytes([len(ops), flags]) + ops + m[:4096]
    for name, (game, _) in captures(testdata):
        # adaptive: the compressed body of the real connect
        for s2c, p in game:
            if not s2c and p.startswith(OOB + b'connect '):
                seeds[name + '_connect'] = p[12:]
        # a client datagram read as the netchan does: OOB header, then Huffman
        c2s = [p for s2c, p in game if not s2c and not p.startswith(OOB)]
        flags, ops = PROGRAMS[2]
        seeds[name + '_datagram'] = bytes([len(ops), flags]) + ops + c2s[len(c2s) // 2]
    return seeds


def records(msgs):
    return b''.join(struct.pack('<iH', s, len(m)) + m for s, m in msgs)


def seeds_message(testdata, source):
    seeds = {}
    for name, msgs in demos(testdata):
        for k in (1, 3, 12, 40):
            seeds['%s_first%d' % (name, k)] = records(msgs[:k])
        for start in spread(range(1, len(msgs)), 3):  # mid-stream, no gamestate
            seeds['%s_from%d' % (name, start)] = records(msgs[start:start + 8])
    return seeds


def netchan_header(mode):
    """Length of the netchan header of an unfragmented client datagram."""
    return 10 if mode == 2 else 6  # ioquake3 71 adds the checksum


def seeds_client(testdata, source):
    seeds = {}
    ring = [(5, b'say hello'), (6, b'cs 544 "n\\fuzz"'), (7, b'userinfo "\\name\\x"')]
    ring_bytes = bytes([len(ring)]) + b''.join(struct.pack('<iB', s, len(t)) + t for s, t in ring)
    for name, (game, _) in captures(testdata):
        mode = SESSIONS[name]
        c2s = [p for s2c, p in game if not s2c and not p.startswith(OOB)]
        for i, p in enumerate(spread(c2s, 24)):
            if struct.unpack_from('<I', p, 0)[0] & 0x80000000:
                continue  # a fragment
            msg = p[netchan_header(mode):]
            head = struct.pack('<i', i * 7919) + (ring_bytes if i % 2 else b'\0')
            seeds['%s_%d' % (name, i)] = head + msg
    return seeds


def seeds_netchan(testdata, source):
    seeds = {}
    for name, (game, other) in captures(testdata):
        mode = SESSIONS[name]

        def pack(dgrams, head):
            return head + b''.join(struct.pack('<BH', s2c, len(p)) + p for s2c, p in dgrams)

        cold = struct.pack('<BiH', 0, 0, 0)
        for k in (6, 30, 120):
            seeds['%s_cold%d' % (name, k)] = pack(game[:k], cold)
        seeds[name + '_status'] = pack(other, cold)
        # after the handshake, with the harness's own connect carrying the real keys
        challenge = next(int(p[4:].split()[1]) for s2c, p in game
                         if s2c and p.startswith(OOB + b'challengeResponse'))
        after = [(s2c, p) for s2c, p in game if not p.startswith(OOB)]
        qport = struct.unpack_from('<H', next(p for s2c, p in after if not s2c), 4)[0]
        for variant in (mode, mode | 4):
            head = struct.pack('<BiH', variant, challenge, qport)
            for start in spread(range(0, len(after) - 40), 3):
                seeds['%s_mode%d_%d' % (name, variant, start)] = pack(after[start:start + 40], head)
    return seeds


def seeds_demo(testdata, source):
    seeds = {}
    for name, msgs in demos(testdata):
        whole = demo_file(msgs)
        if len(whole) <= 64 * 1024:
            seeds[name] = whole
        for k in (1, 2, 6, 24):
            seeds['%s_first%d' % (name, k)] = demo_file(msgs[:k])
        cut = demo_file(msgs[:6], end=False)
        seeds[name + '_cut'] = cut[:len(cut) - 5]
        seeds[name + '_mid'] = demo_file(msgs[len(msgs) // 2:len(msgs) // 2 + 6])
    seeds.update(seeds_qw_demo(testdata))
    return seeds


def mvd_blocks(data):
    """The whole blocks of an .mvd file, as bytes (PROTOCOLS.md C7; protocols/qw/offline.c)."""
    blocks, pos = [], 0
    while pos + 2 <= len(data):
        kind = data[pos + 1] & 7
        head = 2 + (4 if kind == 3 else 0)
        if kind == 0:
            n = head + 36
        elif kind == 2:
            n = head + 8
        elif kind == 7 or pos + head + 4 > len(data):
            break
        else:
            n = head + 4 + struct.unpack_from('<I', data, pos + head)[0]
        if pos + n > len(data):
            break
        blocks.append(data[pos:pos + n])
        pos += n
    return blocks


def seeds_qw_demo(testdata):
    """QuakeWorld demos for the same target: pieces of the real .mvd (its
    start with the serverdata, a later stretch, a cut), and a .qwd built
    from the QuakeWorld capture's server datagrams (dem_read blocks), with
    a dem_set and a dem_cmd."""
    seeds = {}
    for path in sorted(glob.glob(os.path.join(testdata, 'qw', 'demos', '*.mvd'))):
        name = 'qw_' + os.path.basename(path).split('.')[0]
        blocks = mvd_blocks(open(path, 'rb').read())
        for k in (1, 3, 12, 40):
            seeds['%s_first%d' % (name, k)] = b''.join(blocks[:k])
        mid = len(blocks) // 2
        seeds[name + '_mid'] = b''.join(blocks[:2] + blocks[mid:mid + 30])
        hidden = [i for i, b in enumerate(blocks) if b[1] & 7 == 3 and b[2:6] == bytes(4)]
        if hidden:
            seeds[name + '_hidden'] = b''.join(blocks[:1] + blocks[hidden[0]:hidden[0] + 8])
        cut = b''.join(blocks[:6])
        seeds[name + '_cut'] = cut[:len(cut) - 5]
    cap = os.path.join(testdata, 'qw', 'sessions', 'ezquake_mvdsv', 'capture.pcap')
    if os.path.isfile(cap):
        grams = pcapng_udp(cap)
        server = 27500
        reads = [struct.pack('<fBI', 0.01 * i, 1, len(p)) + p
                 for i, (s, d, p) in enumerate(grams) if s == server]
        cmd = struct.pack('<fB', 0.5, 0) + struct.pack('<B3x3f3hBB3f', 13, 1.5, 90.0, 0.0,
                                                       320, 0, 0, 1, 0, 1.5, 90.0, 0.0)
        setb = struct.pack('<fBii', 0.5, 2, 1, 0)
        seeds['qw_capture_qwd'] = b''.join(reads[:12]) + setb + cmd + b''.join(reads[12:30])
        seeds['qw_capture_qwd_mid'] = b''.join(reads[len(reads) // 2:len(reads) // 2 + 20])
    return seeds


SETS = [
    [('log_level', 'debug'), ('public.idle_timeout', '2m'), ('main.server', '[::1]:27961')],
    [('tags', 'x'), ('route', 'x'), ('nosuch', '1'), ('ctf.max_sessions', 'lots')],
    [('metrics', '*:9100'), ('main.buffer', '2M'), ('other.listen', 'host:99999')],
]


def seeds_config(testdata, source):
    seeds = {}
    paths = [os.path.join(source, 'config', 'slipgate.conf.example')]
    paths += sorted(glob.glob(os.path.join(source, 'tests', 'config', '*.conf')))
    for i, path in enumerate(paths):
        text = open(path, 'rb').read()
        base = os.path.basename(path).replace('.', '_')
        seeds[base] = text
        sets = SETS[i % len(SETS)]
        seeds[base + '_set'] = text + b'\0\0' + b'\0'.join(
            n.encode() + b'\0' + v.encode() for n, v in sets)
    return seeds


# fuzz_bmsg programs (see fuzz_bmsg.c): op = kind | arg << 4
BMSG_PROGRAMS = [
    b'',  # the target's default program
    bytes([0x04, 0x05, 0x05, 0x05]),  # NQ demo block header: long, 3 float angles
    bytes([0x00, 0xcd]),  # svc byte, string (cap 2048)
    bytes([0x00, 0x02, 0x06, 0x0a, 0x06, 0x0a, 0x06, 0x0a]),  # bits, entity, coord16/angle8
    bytes([0x0f, 0x0f, 0xdd, 0x0e]),  # NQ datagram header, then strings with 0xff / newline stops
    bytes([0x04, 0x00, 0x07, 0x0b, 0x07, 0x0b, 0x08, 0x0c, 0x09, 0x0c]),  # RMQ sizes
]


def seeds_bmsg(testdata, source):
    """NetQuake demo blocks and QuakeWorld datagrams under a few programs."""
    seeds = {}
    for path in sorted(glob.glob(os.path.join(testdata, 'nq', 'demos', '*.dem'))):
        data = open(path, 'rb').read()
        base = os.path.basename(path).split('.')[0]
        pos = data.find(b'\n') + 1
        blocks = []
        while pos + 16 <= len(data):
            n = struct.unpack_from('<i', data, pos)[0]
            if n <= 0 or pos + 16 + n > len(data):
                break
            blocks.append(data[pos:pos + 16 + n])
            pos += 16 + n
        for i, b in enumerate(spread(blocks, 8)):
            prog = BMSG_PROGRAMS[i % len(BMSG_PROGRAMS)]
            seeds['%s_%d' % (base, i)] = bytes([len(prog)]) + prog + b[:4096]
    qw = os.path.join(testdata, 'qw', 'sessions', 'ezquake_mvdsv', 'capture.pcap')
    if os.path.exists(qw):
        dgrams = [p for s, d, p in pcapng_udp(qw)]
        oob = [p for p in dgrams if p.startswith(OOB)]
        game = [p for p in dgrams if not p.startswith(OOB)]
        for i, p in enumerate(oob[:6] + spread(game, 6)):
            prog = BMSG_PROGRAMS[(i + 2) % len(BMSG_PROGRAMS)]
            seeds['qw_%d' % i] = bytes([len(prog)]) + prog + p
    return seeds


def seeds_qw(testdata, source):
    """The QuakeWorld capture's game session (the client that sent
    `connect`, its server), in fuzz_qw's format: from the start, and a few
    slices later on under each extension mode."""
    path = os.path.join(testdata, 'qw', 'sessions', 'ezquake_mvdsv', 'capture.pcap')
    if not os.path.exists(path):
        return {}
    dgrams = pcapng_udp(path)
    conn = next(((s, d) for s, d, p in dgrams if p[4:11] == b'connect'), None)
    if not conn:
        return {}
    client, server = conn
    game = [(s == server, p) for s, d, p in dgrams if (s, d) in ((client, server), (server, client))]

    def pack(mode, items):
        return bytes([mode]) + b''.join(struct.pack('<BH', int(s2c), len(p)) + p
                                        for s2c, p in items)
    seeds = {'start': pack(0, game[:120])}
    step = max(1, len(game) // 8)
    for i in range(1, 8):
        seeds['slice_%d' % i] = pack(2 if i % 2 else 0, game[i * step:i * step + 40])
    return seeds


def seeds_nq(testdata, source):
    """The NetQuake capture (control flow, then the game flow on the port
    the accept names; the client is the side that sent CCREQ_CONNECT), in
    fuzz_nq's format, from the start and in slices; and the .dem files
    (mode bit 7)."""
    seeds = {}
    path = os.path.join(testdata, 'nq', 'sessions', 'quakespasm_darkplaces', 'capture.pcap')
    if os.path.exists(path):
        dgrams = pcapng_udp(path)
        conn = next((s for s, d, p in dgrams if p[:1] == b'\x80' and p[4:10] == b'\x01QUAKE'),
                    None)
        if conn:
            items = [(s != conn, p) for s, d, p in dgrams if conn in (s, d)]

            def pack(mode, its):
                return bytes([mode]) + b''.join(struct.pack('<BH', int(s2c), len(p)) + p
                                                for s2c, p in its)
            seeds['start'] = pack(0, items[:150])
            step = max(1, len(items) // 6)
            for i in range(1, 6):
                seeds['slice_%d' % i] = pack(1 if i % 2 else 2, items[i * step:i * step + 40])
    seeds.update(seeds_nq_dp7())
    seeds.update(seeds_nq_server_info())
    for name in ('vektar_demo1.dem', 'vgio_test.dem'):
        p = os.path.join(testdata, 'nq', 'demos', name)
        if os.path.exists(p):
            with open(p, 'rb') as f:
                d = f.read()
            seeds['dem_' + name.split('.')[0]] = b'\x80' + d[:12000]
    return seeds


def seeds_nq_server_info():
    """CCREP_SERVER_INFO answers (WinQuake net_dgrm.c), server datagrams:
    address, host name, level, players, maximum, version; and one whose
    level has no NUL."""
    def ctl(body):
        return struct.pack('>I', 0x80000000 | (len(body) + 4)) + body
    one = lambda d: struct.pack('<BH', 1, len(d)) + d
    good = ctl(b'\x83127.0.0.1:26000\0Slip Gate\0e1m1\0\x03\x10\x03')
    cut = ctl(b'\x83127.0.0.1:26000\0Slip Gate\0e1m1')
    return {'server_info': bytes([0]) + one(good) + one(cut)}


def seeds_nq_dp7():
    """DarkPlaces' DP7 (fuzz_nq mode 0x0e: its serverinfo first): hand-built
    unreliable datagrams of each DP7 server message (client data, an entity
    frame with every field, a CSQC section and temp entity with texts behind
    them) and a client's move, ackframe and command."""
    def unrel(seq, payload):
        return struct.pack('>II', 0x00100000 | (len(payload) + 8), seq) + payload
    f1 = struct.pack('<f', 1.0)
    s2c = [
        bytes([15, 0x24, 0x82, 0x09, 0x10, 0]) + f1 + f1 + struct.pack('<iH', 7, 255),
        bytes([57]) + struct.pack('<ii', 9, 4) + bytes([1, 0, 0xff, 0xff, 0xff, 0x07, 0x10])
        + f1 * 3 + bytes([1, 0, 2, 0, 3, 0, 5, 1, 6, 1, 2, 1, 2, 3, 4, 9, 10, 11, 3, 0, 1,
                          1, 0, 2, 0, 3, 0, 4, 0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                          1, 1, 0, 2, 0, 10, 0, 20, 0, 128, 127, 7, 0, 2, 0x80, 0, 0x80]),
        bytes([58, 3, 0x80, 5, 0, 1, 0, 0, 2, 0, 0, 51, 16, 35, 8]) + b'hi\0'
        + bytes([57]) + struct.pack('<ii', 10, 5) + bytes([0, 0x80]),
        bytes([23, 100]) + b'ab\0' + bytes([8]) + b'yo\0' + bytes([26]) + b'center\0',
    ]
    c2s = bytes([3]) + struct.pack('<if3h3hib2h6fH', 5, 1.0, 1, 2, 3, 4, 5, 6, 1, 9, 0, 0,
                                   0, 0, 0, 0, 0, 0, 7) \
        + bytes([50]) + struct.pack('<i', 9) + bytes([4]) + b'say x\0'
    items = b''.join(struct.pack('<BH', 1, len(unrel(i, p))) + unrel(i, p)
                     for i, p in enumerate(s2c))
    items += struct.pack('<BH', 0, len(unrel(0, c2s))) + unrel(0, c2s)
    return {'dp7': bytes([0x0e]) + items}


def seeds_q2(testdata, source):
    """The Quake 2 captures' sessions (protocols 34, 35, 36) in fuzz_q2's
    format: from the start (the handshake teaches the codec), and slices
    later on with a synthetic connect of the session's protocol."""
    seeds = {}
    for path in sorted(glob.glob(os.path.join(testdata, 'q2', 'sessions', '*', 'capture.pcap'))):
        name = os.path.basename(os.path.dirname(path))
        dgrams = pcapng_udp(path)
        conn = next(((s, d, p) for s, d, p in dgrams if p[4:11] == b'connect'), None)
        if not conn:
            continue
        client, server, p = conn
        proto = int(p[12:14])
        game = [(s == server, p) for s, d, p in dgrams
                if (s, d) in ((client, server), (server, client))]

        def pack(mode, items):
            return bytes([mode]) + b''.join(struct.pack('<BH', int(s2c), len(p)) + p
                                            for s2c, p in items)
        seeds[name + '_start'] = pack(0, game[:60])
        mode = (proto - 33) | (4 if proto == 36 else 0)
        step = max(1, len(game) // 4)
        for i in range(1, 4):
            seeds['%s_slice_%d' % (name, i)] = pack(mode, game[i * step:i * step + 30])
    seeds.update(seeds_q2_zdownload())
    seeds.update(seeds_q2_kex())
    seeds.update(seeds_q2_status())
    return seeds


def seeds_q2_status():
    """Answers to "status" (no capture has one), built from the layout
    (yquake2 SV_StatusString): serverinfo and player lines, the serverinfo
    alone, and one cut inside a player line; each a server datagram."""
    full = (b'\xff\xff\xff\xffprint\n\\maxclients\\8\\hostname\\Slip Gate\\mapname\\q2dm1'
            b'\\protocol\\34\n0 25 "alice"\n-2 40 "bob"\n')
    bare = b'\xff\xff\xff\xffprint\n\\hostname\\solo\\mapname\\base1\n'
    one = lambda d: struct.pack('<BH', 1, len(d)) + d
    return {'status_answer': bytes([0]) + one(full) + one(bare),
            'status_cut': bytes([0]) + one(full[:-6])}


def seeds_q2_kex():
    """Rerelease (KEX) layouts, BUILT FROM THE SEED'S DOCUMENTED LAYOUTS
    (PROTOCOLS.md B), not a real recording: a 34 session whose server
    announces 2022 / 2023 in its serverdata (the parser switches to the KEX
    layout: zlib-wrapped blasts, 36-bit entity bits, float origins), and a
    `connect 2023` session (relayed, not decoded)."""
    import zlib
    f32 = lambda v: struct.pack('<f', v)

    def blast(op, plain):
        z = zlib.compress(plain)
        return struct.pack('<BHH', op, len(z), len(plain)) + z

    def blocks(protocol):
        b0 = (struct.pack('<BiiBB', 12, protocol, 7, 0, 40) + b'baseq2\0' +
              struct.pack('<h', 0) + b'q2dm1\0')
        b0 += blast(22, struct.pack('<H', 1) + b'q2dm1.bsp\0')
        b0 += blast(23, bytes([0x81, 0x88, 0x80, 0x08, 1, 5]) + struct.pack('<I', 1) + f32(1.5))
        b1 = struct.pack('<BiiBBBB', 20, 10, 9, 0, 1, 0xff, 17)
        b1 += struct.pack('<HH', 0x8002, 0x0002) + f32(1) + f32(2) + f32(3)
        b1 += struct.pack('<IhIB', 1, 100, 0, 3)
        b1 += bytes([18, 0x81, 0x80, 0x80, 0x80, 0x0f, 1]) + f32(2.75) + struct.pack('<BBHH', 16, 1, 2, 9)
        b1 += b'\0\0' + bytes([26, 0]) + b'{0}\0' + bytes([1]) + b'x\0'
        b1 += struct.pack('<BBHI', 9, 0x48, 3, 5000 << 3)
        return b0, b1

    seeds = {}
    for protocol in (2022, 2023):
        b0, b1 = blocks(protocol)
        d = b''
        for seq, b in ((1, b0), (2, b1)):
            dg = struct.pack('<II', seq | 0x80000000, 0) + b
            d += struct.pack('<BH', 1, len(dg)) + dg
        seeds['kex_%d_in_34' % protocol] = bytes([1]) + d
    conn = b'\xff\xff\xff\xffconnect 2023 1 "\\name\\kex"\n'
    d = bytes([0]) + struct.pack('<BH', 0, len(conn)) + conn
    for k in range(4):
        dg = struct.pack('<II', k + 1, k) + bytes([0xfe, 0xff]) * 5
        d += struct.pack('<BH', k & 1, len(dg)) + dg
    seeds['kex_connect'] = d
    return seeds


def seeds_q2_zdownload():
    """Compressed downloads (no capture has one): Q2PRO's one raw-deflate
    stream cut into svc_zdownload chunks (36, new netchan), R1Q2's chunks
    with their sizes (35), and a chunk that would inflate to 8 MiB."""
    import zlib

    def deflate(data):
        z = zlib.compressobj(9, zlib.DEFLATED, -15)
        return z.compress(data) + z.flush()

    def datagrams(mode, chunks, r1q2):
        out, seq = bytes([mode]), 1
        for k, (data, size) in enumerate(chunks):
            pct = 100 if k == len(chunks) - 1 else 50
            msg = struct.pack('<BhB', 22, len(data), pct)
            if r1q2:
                msg += struct.pack('<h', size)
            d = struct.pack('<II', seq | 0x80000000, 0) + msg + data
            out += struct.pack('<BH', 1, len(d)) + d
            seq += 1
        return out

    text = b''.join(b'slipgate q2 download %d\n' % i for i in range(400))
    packed = deflate(text)
    seeds = {'zdownload_36': datagrams(7, [(packed[i:i + 200], -1)
                                          for i in range(0, len(packed), 200)], False)}
    thirds = [text[i:i + len(text) // 3] for i in range(0, len(text), len(text) // 3)]
    seeds['zdownload_35'] = datagrams(2, [(deflate(t), len(t)) for t in thirds], True)
    seeds['zdownload_bomb'] = datagrams(7, [(deflate(bytes(8 << 20)), -1)], False)
    return seeds


def sign_input(flags, sig, data):
    """A fuzz_sign input: u8 flags, le32 siglen, the .sig, the recording."""
    return bytes([flags]) + struct.pack('<I', len(sig)) + sig + data


def seeds_sign(testdata, source):
    """Well-formed .sig texts (doc/signatures.md) over a real demo; the
    signatures are not valid (no Ed25519 in the standard library): the
    committed regressions/fuzz_sign inputs carry real ones."""
    import base64
    import hashlib
    seeds = {}
    pk = hashlib.sha256(b'slipgate fuzz key').digest()
    kid = hashlib.blake2b(pk, digest_size=32).hexdigest()[:16]
    data = b''
    for path in sorted(glob.glob(os.path.join(testdata, 'q3', 'demos', '*')))[:1]:
        data = open(path, 'rb').read()[:8192]
    head = (b'slipgate-sig 1\nkey %s %s\n' % (kid.encode(), base64.b64encode(pk)) +
            b'meta slipgate 0.1.0\nmeta kind demo\nmeta file a.dm_68\nmeta map q3dm17\n'
            b'meta client 127.0.0.1%3A5000\nmeta start_ms 1764000000000\nbegin ' +
            b'00' * 16 + b'\n')
    sig = base64.b64encode(bytes(64))
    cps = b''
    for i, n in enumerate([len(data) // 3, 2 * len(data) // 3, len(data)]):
        h = hashlib.blake2b(data[:n], digest_size=32).hexdigest().encode()
        cps += b'cp %d %d %d %d %d %s %s\n' % (i, n, i + 1, 1764000000000 + i, i == 2, h, sig)
        seeds['cp%d' % i] = sign_input(0, head + cps, data)
    seeds['header'] = sign_input(0, head, data)
    seeds['otherkey'] = sign_input(1, head + cps, data)
    seeds['cut'] = sign_input(0, (head + cps)[:-30], data)
    return seeds


def seeds_json(testdata, source):
    """fuzz_json's paths (mode bits 0-1) over the games (bits 2-3, q3 qw nq
    q2): strings that are and are not UTF-8, the demo seeds of the other
    targets as `demo dump --json` input, and their sessions' datagrams
    through the capture decoder and the live codec's inspector dump."""
    seeds = {'str_utf8': b'\x00d\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "\\\n\t\x7f',
             'str_bronze': b'\x00\xc8\xe5\xec\xec\xef \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf'}
    game_of = {'q3': 0, 'qw': 1, 'nq': 2, 'q2': 3}
    for name, data in seeds_demo(testdata, source).items():
        game = 'qw' if name.startswith('qw') else 'q3'
        if game == 'qw':
            ext = 0 if 'qwd' in name else 1  # qwd, mvd
        else:
            ext = 3 if '71' in name else 2  # dm_68, dm_71
        seeds['demo_' + name] = bytes([1 | game_of[game] << 2 | ext << 4]) + data
    for game, gen in (('qw', seeds_qw), ('nq', seeds_nq), ('q2', seeds_q2)):
        for name, data in gen(testdata, source).items():
            if game == 'nq' and data[0] & 0x80:
                seeds['demo_nq_' + name] = bytes([1 | game_of[game] << 2]) + data[1:]
                continue
            for path in (2, 3):
                seeds['%s_%d_%s' % (game, path, name)] = bytes([path | game_of[game] << 2]) + data[1:]
    for name, (game, other) in captures(testdata):
        body = b''.join(struct.pack('<BH', int(s2c), len(p)) + p for s2c, p in game[:80])
        for path in (2, 3):
            seeds['q3_%d_%s' % (path, name)] = bytes([path]) + body
    return seeds


def seeds_qw_prx(testdata, source):
    """fuzz_qw_prx: connects as ezQuake sends them through qwfwd nodes (a
    chain of one, two and three hops, none, a long one, extension lines)."""
    def connect(ui, tail=b'\n'):
        return b'\xff\xff\xff\xffconnect 28 4321 1234 "' + ui + b'"' + tail
    return {
        'none': connect(b'\\name\\p\\team\\red'),
        'one': connect(b'\\name\\p\\prx\\10.0.0.1:27500'),
        'two': connect(b'\\prx\\10.0.0.2:30000@10.0.0.1\\name\\p'),
        'three': connect(b'\\name\\p\\prx\\[::1]:1@10.0.0.2:2@10.0.0.1:27500'),
        'long': connect(b'\\name\\p\\prx\\' + b'@'.join(b'10.0.0.%d:27500' % i
                                                              for i in range(1, 12))),
        'ext': connect(b'\\prx\\1.2.3.4', b'\n0x58455446 0x2\n0x3144564d 0x1\n'),
        'empty': connect(b'\\name\\p\\prx\\@1.2.3.4'),
        'challenge': b'\xff\xff\xff\xffc-123\x00',
    }


def seeds_spectate(testdata, source):
    """fuzz_q3_spectate: a captured session as the watched one (its
    handshake, gamestate and snapshots), the spectator's datagrams taken
    from the same client's (kind 0), the spectators' own client messages
    after each server datagram (kind 64, now and then a `follownext`), and
    a few strangers' (kind 4)."""
    seeds = {}
    for name, (game, other) in captures(testdata):
        recs = []
        for i, (s2c, p) in enumerate(game[:160]):
            recs.append(struct.pack('<BH', 3 if s2c else 1, len(p)) + p)
            if not s2c and i % 3 == 0:
                recs.append(struct.pack('<BH', 0 if i % 2 else 8, len(p)) + p)
            if s2c:
                # each spectator's client answers as a game client does (kind 64)
                cmd = b'\x00\x02follownext' if i % 40 == 39 else b'\x00\x00'
                recs.append(struct.pack('<BH', 64, len(cmd)) + cmd)
                recs.append(struct.pack('<BH', 64 | 8, 2) + b'\x00\x00')
        for s2c, p in other[:4]:
            if not s2c:
                recs.append(struct.pack('<BH', 4, len(p)) + p)
        for flags in (0, 1):
            seeds['%s_%d' % (name, flags)] = struct.pack('<BH', flags, 4321) + b''.join(recs)
    return seeds


GENERATORS = {
    'fuzz_huffman': seeds_huffman,
    'fuzz_q3_message': seeds_message,
    'fuzz_q3_client': seeds_client,
    'fuzz_q3_netchan': seeds_netchan,
    'fuzz_q3_filters': seeds_netchan,  # the same input format
    'fuzz_demo_reader': seeds_demo,
    'fuzz_config': seeds_config,
    'fuzz_bmsg': seeds_bmsg,
    'fuzz_qw': seeds_qw,
    'fuzz_sign': seeds_sign,
    'fuzz_nq': seeds_nq,
    'fuzz_q2': seeds_q2,
    'fuzz_json': seeds_json,
    'fuzz_qw_prx': seeds_qw_prx,
    'fuzz_q3_spectate': seeds_spectate,
}


def generate(target, testdata, source, outdir):
    """Write the seeds of `target` into outdir; returns their paths."""
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for name, data in sorted(GENERATORS[target](testdata, source).items()):
        path = os.path.join(outdir, 'seed-' + name)
        with open(path, 'wb') as f:
            f.write(data)
        paths.append(path)
    return paths


# Longest input per target: room for the oversized messages and datagrams
# each decoder must refuse (MAX_MSGLEN is 16384); the others keep libFuzzer's
# default (the largest seed, at least 4096).  scripts/fuzz.sh uses the same.
MAX_LEN = {'fuzz_q3_client': 20000, 'fuzz_q3_message': 40000, 'fuzz_q3_netchan': 40000,
           'fuzz_q3_filters': 40000, 'fuzz_q3_spectate': 65536}

# What a sanitizer, libFuzzer or a target's property check prints on a failure.
REPORTS = re.compile(r'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)'
                     r'|runtime error:|property failed')


def regression_inputs(target, source):
    paths = sorted(glob.glob(os.path.join(source, 'tests', 'fuzz', 'regressions', target, '*')))
    return [p for p in paths if os.path.isfile(p)]


def check_run(what, rc, log_path):
    """0 if a libFuzzer run exited 0 and printed no report, else 1 (with the
    first report line and the log's tail on stdout)."""
    with open(log_path, errors='replace') as f:
        text = f.read()
    m = REPORTS.search(text)
    if rc == 0 and not m:
        return 0
    first = text[m.start():text.find('\n', m.start())] if m else '(no report line)'
    print('%s: FAILED (exit %d): %s' % (what, rc, first))
    print('---- last lines of %s ----' % log_path)
    print('\n'.join(text.splitlines()[-40:]))
    return 1


def run(target, exe, testdata, source, seconds, work):
    """Replay seeds and regressions, then fuzz for `seconds`; returns 0 or 1."""
    os.makedirs(work, exist_ok=True)
    artifacts = os.path.join(work, 'artifacts-' + target)
    os.makedirs(artifacts, exist_ok=True)
    regressions = regression_inputs(target, source)
    common = ['-rss_limit_mb=2048', '-timeout=10', '-artifact_prefix=' + artifacts + '/']
    if target in MAX_LEN:
        common.append('-max_len=%d' % MAX_LEN[target])
    with tempfile.TemporaryDirectory(prefix=target + '-', dir=work) as tmp:
        seeds = generate(target, testdata, source, os.path.join(tmp, 'seeds'))
        print('%s: %d seeds, %d regression inputs, then %d s of fuzzing'
              % (target, len(seeds), len(regressions), seconds), flush=True)

        # 1. Every seed and regression input once (individual files: run once each).
        log = os.path.join(work, target + '-replay.log')
        with open(log, 'w') as f:
            rc = subprocess.call([exe] + common + seeds + regressions, stdout=f,
                                 stderr=subprocess.STDOUT)
        if check_run(target + ' replay', rc, log):
            return 1
        print('%s: replay ok (%d inputs)' % (target, len(seeds) + len(regressions)), flush=True)
        if seconds <= 0:
            return 0

        # 2. Bounded fuzzing from the seeds; new inputs go to a scratch corpus.
        corpus = os.path.join(tmp, 'corpus')
        os.makedirs(corpus)
        log = os.path.join(work, target + '-fuzz.log')
        with open(log, 'w') as f:
            rc = subprocess.call([exe] + common + ['-max_total_time=%d' % seconds,
                                                   '-print_final_stats=1', corpus,
                                                   os.path.dirname(seeds[0])],
                                 stdout=f, stderr=subprocess.STDOUT,
                                 timeout=seconds + 300)
        if check_run(target + ' fuzzing', rc, log):
            print('%s: crash input kept in %s' % (target, artifacts))
            return 1
        with open(log, errors='replace') as f:
            lines = f.read().splitlines()
        done = [ln for ln in lines if re.match(r'#[0-9]+\s+DONE', ln)]
        stats = [ln for ln in lines if ln.startswith('stat::')]
        if not done:
            print('%s: FAILED: libFuzzer did not finish its run (no DONE line); see %s'
                  % (target, log))
            return 1
        print('%s: fuzzing ok: %s' % (target, done[-1]))
        for ln in stats:
            print('  ' + ln)
    return 0


def replay(target, exe, testdata, source):
    regressions = regression_inputs(target, source)
    with tempfile.TemporaryDirectory(prefix=target + '-seeds-') as tmp:
        inputs = generate(target, testdata, source, tmp) + regressions
        print('%s: %d seeds, %d regression inputs' % (target, len(inputs) - len(regressions),
                                                      len(regressions)), flush=True)
        # individual files: each runs once, nothing is written next to them
        rc = subprocess.call([exe, '-rss_limit_mb=2048', '-timeout=10'] + inputs)
    # libFuzzer exits 77 after a crash, which meson would count as a skip
    return 1 if rc else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--testdata', required=True)
    ap.add_argument('--source', required=True, help='the source tree (for config files)')
    sub = ap.add_subparsers(dest='cmd', required=True)
    g = sub.add_parser('gen')
    g.add_argument('outdir')
    g.add_argument('targets', nargs='*')
    r = sub.add_parser('replay')
    r.add_argument('target', choices=TARGETS)
    r.add_argument('exe')
    f = sub.add_parser('run')
    f.add_argument('--seconds', type=int, default=60)
    f.add_argument('--work', default='.', help='logs and crash artifacts go here')
    f.add_argument('target', choices=TARGETS)
    f.add_argument('exe')
    args = ap.parse_args()

    if not os.path.isdir(os.path.join(args.testdata, 'q3')):
        sys.exit('seeds.py: no test data at %s' % args.testdata)
    if args.cmd == 'replay':
        sys.exit(replay(args.target, args.exe, args.testdata, args.source))
    if args.cmd == 'run':
        sys.exit(run(args.target, args.exe, args.testdata, args.source, args.seconds,
                     os.path.abspath(args.work)))
    for t in args.targets or TARGETS:
        if t not in GENERATORS:
            sys.exit('seeds.py: unknown target %s' % t)
        n = len(generate(t, args.testdata, args.source, os.path.join(args.outdir, t)))
        print('%s: %d seeds' % (t, n))


if __name__ == '__main__':
    main()
