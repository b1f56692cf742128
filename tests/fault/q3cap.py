"""Quake 3 captures for the fault tests (Python 3 standard library only).

    read_capture(path)   the UDP datagrams of a pcapng (or classic pcap) file
                         with Ethernet link type, IPv4 + UDP
    Capture              one of ../shared/testdata/q3/sessions/*/capture.pcap
                         split into endpoints around the server port 27960
    frag_info()          the netchan fragment fields of a datagram, if any
    Mutator              bit flips, truncation, splicing, ... of real datagrams

The captures are read from $SG_TESTDATA (never copied).
"""

import os
import struct

SERVER_PORT = 27960
FRAGMENT_SIZE = 1300
FRAGMENT_BIT = 0x80000000
OOB = b'\xff\xff\xff\xff'

# The wire format of each capture (../shared/testdata/MANIFEST.md): does the
# netchan header carry the ioquake3-71 checksum?
CHECKSUM = {'ioq68': False, 'ioq71': True, 'oa71': False}
CAPTURES = ('ioq68', 'ioq71', 'oa71')


class CaptureError(Exception):
    pass


def testdata_dir():
    d = os.environ.get('SG_TESTDATA')
    if not d:
        here = os.path.dirname(os.path.abspath(__file__))
        d = os.path.join(here, '..', '..', '..', 'shared', 'testdata')
    return d


def capture_path(name):
    return os.path.join(testdata_dir(), 'q3', 'sessions', name, 'capture.pcap')


# ------------------------------------------------------------------ reading

def _udp_of_ethernet(frame):
    """(src, dst, payload) of an Ethernet/IPv4/UDP frame, else None."""
    if len(frame) < 14 + 20 + 8:
        return None
    ethertype = struct.unpack_from('>H', frame, 12)[0]
    off = 14
    if ethertype == 0x8100:  # one VLAN tag
        ethertype = struct.unpack_from('>H', frame, 16)[0]
        off = 18
    if ethertype != 0x0800:
        return None
    ip = frame[off:]
    if ip[0] >> 4 != 4:
        return None
    ihl = (ip[0] & 15) * 4
    total = struct.unpack_from('>H', ip, 2)[0]
    flags_frag = struct.unpack_from('>H', ip, 6)[0]
    if ip[9] != 17:
        return None
    if flags_frag & 0x3fff:
        raise CaptureError('IPv4 fragment in the capture (not supported)')
    if total > len(ip):
        raise CaptureError('IPv4 packet cut short in the capture (%d of %d bytes)'
                           % (len(ip), total))
    src = '.'.join(str(b) for b in ip[12:16])
    dst = '.'.join(str(b) for b in ip[16:20])
    sport, dport, ulen = struct.unpack_from('>HHH', ip, ihl)
    if ulen < 8 or ihl + ulen > total:
        raise CaptureError('bad UDP length %d' % ulen)
    return (src, sport), (dst, dport), bytes(ip[ihl + 8:ihl + ulen])


def read_capture(path):
    """[(time_ns, src, dst, payload)] of every IPv4/UDP datagram in a pcapng
    (SHB, IDB, EPB; SPB) or classic pcap file with Ethernet link type."""
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < 24:
        raise CaptureError('%s: too short for a capture' % path)
    magic = data[:4]
    out = []
    if magic in (b'\xd4\xc3\xb2\xa1', b'\xa1\xb2\xc3\xd4', b'\x4d\x3c\xb2\xa1',
                 b'\xa1\xb2\x3c\x4d'):
        e = '<' if magic[0] in (0xd4, 0x4d) else '>'
        nano = magic in (b'\x4d\x3c\xb2\xa1', b'\xa1\xb2\x3c\x4d')
        linktype = struct.unpack_from(e + 'I', data, 20)[0]
        if linktype != 1:
            raise CaptureError('%s: link type %d, only Ethernet (1) is read' % (path, linktype))
        off = 24
        for _ in range(10 ** 7):
            if off + 16 > len(data):
                break
            sec, frac, incl, orig = struct.unpack_from(e + 'IIII', data, off)
            frame = data[off + 16:off + 16 + incl]
            off += 16 + incl
            if incl != orig:
                raise CaptureError('%s: a frame was cut by the snap length' % path)
            u = _udp_of_ethernet(frame)
            if u:
                out.append((sec * 10 ** 9 + frac * (1 if nano else 1000),) + u)
        return out

    if magic != b'\x0a\x0d\x0d\x0a':
        raise CaptureError('%s: neither pcapng nor pcap (magic %r)' % (path, magic))
    e = '<'
    ifaces = []  # (linktype, ns per tick)
    off = 0
    for _ in range(10 ** 7):
        if off + 12 > len(data):
            break
        if data[off:off + 4] == b'\x0a\x0d\x0d\x0a':
            bom = data[off + 8:off + 12]
            if bom == b'\x4d\x3c\x2b\x1a':
                e = '<'
            elif bom == b'\x1a\x2b\x3c\x4d':
                e = '>'
            else:
                raise CaptureError('%s: bad byte-order magic at %d' % (path, off))
            ifaces = []
        btype, blen = struct.unpack_from(e + 'II', data, off)
        if blen < 12 or blen % 4 or off + blen > len(data):
            raise CaptureError('%s: bad block length %d at offset %d' % (path, blen, off))
        if struct.unpack_from(e + 'I', data, off + blen - 4)[0] != blen:
            raise CaptureError('%s: block at %d: trailing length differs' % (path, off))
        body = data[off + 8:off + blen - 4]
        if btype == 1:  # Interface Description Block
            linktype = struct.unpack_from(e + 'H', body, 0)[0]
            tick = 1000  # default resolution: microseconds
            o = 8
            while o + 4 <= len(body):
                code, olen = struct.unpack_from(e + 'HH', body, o)
                if code == 0:
                    break
                if code == 9 and olen >= 1:  # if_tsresol
                    r = body[o + 4]
                    tick = (10 ** 9) // (2 ** (r & 0x7f) if r & 0x80 else 10 ** r) or 1
                o += 4 + olen + (-olen % 4)
            ifaces.append((linktype, tick))
        elif btype in (6, 3):  # Enhanced / Simple Packet Block
            if btype == 6:
                ifid, th, tl, incl, orig = struct.unpack_from(e + 'IIIII', body, 0)
                frame = body[20:20 + incl]
                if ifid >= len(ifaces):
                    raise CaptureError('%s: packet on undeclared interface %d' % (path, ifid))
                linktype, tick = ifaces[ifid]
                ts = ((th << 32) | tl) * tick
            else:
                orig = struct.unpack_from(e + 'I', body, 0)[0]
                incl = min(orig, len(body) - 4)
                frame = body[4:4 + incl]
                linktype, ts = ifaces[0][0], 0
            if incl != orig:
                raise CaptureError('%s: a frame was cut by the snap length' % path)
            if linktype != 1:
                raise CaptureError('%s: link type %d, only Ethernet (1) is read'
                                   % (path, linktype))
            u = _udp_of_ethernet(frame)
            if u:
                out.append((ts,) + u)
        off += blen
    return out


# ------------------------------------------------------------------ model

class Dgram:
    __slots__ = ('index', 'ts', 'c2s', 'client', 'payload')

    def __init__(self, index, ts, c2s, client, payload):
        self.index = index
        self.ts = ts          # seconds since the first datagram
        self.c2s = c2s        # True: client -> server
        self.client = client  # the client endpoint (ip, port) in the capture
        self.payload = payload

    def __repr__(self):
        return '#%d %s %s %d bytes' % (self.index, 'C>S' if self.c2s else 'S>C',
                                       self.client[1], len(self.payload))


class Capture:
    """The datagrams of one capture around the server port, in capture order."""

    def __init__(self, name):
        self.name = name
        self.path = capture_path(name)
        if not os.path.exists(self.path):
            raise CaptureError('capture %s not found (SG_TESTDATA=%s)' % (self.path,
                                                                          testdata_dir()))
        self.checksum = CHECKSUM[name]
        raw = read_capture(self.path)
        if not raw:
            raise CaptureError('%s: no UDP datagrams' % self.path)
        t0 = raw[0][0]
        self.dgrams = []
        self.skipped = 0
        for ts, src, dst, payload in raw:
            if dst[1] == SERVER_PORT and src[1] != SERVER_PORT:
                self.dgrams.append(Dgram(len(self.dgrams), (ts - t0) / 1e9, True, src, payload))
            elif src[1] == SERVER_PORT and dst[1] != SERVER_PORT:
                self.dgrams.append(Dgram(len(self.dgrams), (ts - t0) / 1e9, False, dst, payload))
            else:
                self.skipped += 1
        counts = {}
        for d in self.dgrams:
            counts[d.client] = counts.get(d.client, 0) + 1
        # The game client: the endpoint with the most datagrams; the others are
        # status tools (getinfo / getstatus from their own ports).
        self.game_client = max(counts, key=counts.get)
        self.clients = sorted(counts, key=lambda c: min(d.index for d in self.dgrams
                                                        if d.client == c))

    def game(self):
        return [d for d in self.dgrams if d.client == self.game_client]

    def c2s(self):
        return [d.payload for d in self.dgrams if d.c2s]

    def s2c(self):
        return [d.payload for d in self.dgrams if not d.c2s]

    def oob(self, prefix):
        """Payloads of out-of-band datagrams whose text starts with `prefix`."""
        return [d.payload for d in self.dgrams
                if d.payload.startswith(OOB + prefix)]


def frag_info(payload, c2s, checksum):
    """(sequence, start, length) of a netchan fragment, or None for an
    out-of-band packet, an unfragmented message or a datagram too short."""
    if len(payload) < 4 or payload[:4] == OOB:
        return None
    word = struct.unpack_from('<I', payload, 0)[0]
    if not word & FRAGMENT_BIT:
        return None
    off = 4 + (2 if c2s else 0) + (4 if checksum else 0)
    if len(payload) < off + 4:
        return None
    start, length = struct.unpack_from('<HH', payload, off)
    return word & ~FRAGMENT_BIT, start, length


def is_partial(payload, c2s, checksum):
    """A piece that does not end its message (the receiver waits for more)."""
    fi = frag_info(payload, c2s, checksum)
    return fi is not None and fi[2] == FRAGMENT_SIZE


# ------------------------------------------------------------------ mutation

class Mutator:
    """Damaged versions of real datagrams, and random ones."""

    def __init__(self, rng, pool):
        self.rng = rng
        self.pool = [p for p in pool if p]

    def random(self, big_ratio=0.01):
        r = self.rng
        n = r.randint(1025, 16384) if r.random() < big_ratio else r.randint(0, 1500)
        data = r.randbytes(n)
        if n >= 4 and r.random() < 0.2:
            data = OOB + data[4:]  # an out-of-band marker and garbage
        return data

    def mutate(self, data=None):
        r = self.rng
        if data is None:
            data = r.choice(self.pool)
        b = bytearray(data)
        for _ in range(r.randint(1, 3)):
            op = r.randrange(9)
            if op == 0 and b:  # flip 1..8 bits
                for _ in range(r.randint(1, 8)):
                    i = r.randrange(len(b))
                    b[i] ^= 1 << r.randrange(8)
            elif op == 1 and b:  # truncate
                del b[r.randrange(len(b)):]
            elif op == 2:  # splice with another real datagram
                other = r.choice(self.pool)
                cut = r.randint(0, len(b))
                b = b[:cut] + other[r.randint(0, len(other)):]
            elif op == 3 and len(b) >= 8:  # damage the header (sequence, qport, fragment fields)
                i = r.randrange(min(len(b), 14))
                b[i] = r.randrange(256)
            elif op == 4 and len(b) >= 4:  # set or clear the fragment bit
                b[3] ^= 0x80
            elif op == 5:  # random bytes appended
                b += r.randbytes(r.randint(1, 64))
            elif op == 6 and len(b) > 8:  # fragment fields at every header offset
                off = r.choice((4, 6, 8, 10))
                if off + 4 <= len(b):
                    struct.pack_into('<HH', b, off, r.choice((0, 1300, 65535, r.randrange(65536))),
                                     r.choice((0, 1299, 1300, 1301, 65535, r.randrange(65536))))
            elif op == 7 and b:  # a run of 0x00 or 0xff
                i = r.randrange(len(b))
                b[i:i + r.randint(1, 32)] = bytes([r.choice((0, 255))]) * r.randint(1, 32)
            elif op == 8 and len(b) > 4:  # shuffle a slice
                i = r.randrange(len(b))
                j = min(len(b), i + r.randint(2, 16))
                s = list(b[i:j])
                r.shuffle(s)
                b[i:j] = bytes(s)
        return bytes(b[:16384])
