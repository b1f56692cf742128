#!/usr/bin/env python3
"""Loopback tests of the 'drop' and 'rewrite' filters with real Quake 3
traffic: the ioquake3-71 capture replayed through the real slipgate binary
(-p q3), the client's side written to a pcap and decoded offline.

    drop_prints     'drop { kinds print }' removes every print from what the
                    client receives (renumbered: the other server commands
                    still arrive, in order, with no gap); no datagram is lost
    drop_datagrams  'whole_datagram yes': the datagrams that bring a print
                    the first time are dropped (loss to the game; counted in
                    --stats as drops.filter): the client receives exactly that
                    many datagrams fewer, everything else byte for byte (a
                    replayed capture cannot show the server's resends; the
                    real-peer netem test shows real games recovering)
    rewrite_prints  'rewrite' changes the prints' text: every print arrives
                    rewritten, nothing else changes

The ioquake3-71 capture is used because its client messages carry no XOR:
the capture's client never saw the changed stream, so with the protocol-68
XOR its replayed messages would not decode (a real client would; the
real-peer tests cover that with every wire variant).  Only 127.0.0.1;
bounded loops; processes killed by PID.  Exit 0 pass, 1 fail, 77 skip.
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import textlog_loop as tl  # noqa: E402
from textlog_loop import check, main  # noqa: E402


def replay(h, filters):
    """Replay ioq71 through `filters`; (server commands the client's wire
    decodes to as [(number, text)], --stats session, replay)."""
    cap = tl.capture('ioq71')
    srv = tl.fault_test.ServerSide()
    try:
        px = tl.start_proxy(h, srv, filters)
        rep = tl.LooseReplay(h, px, srv, cap).run()
        check(px.stop() == 0, 'slipgate did not exit cleanly')
    finally:
        srv.close()
    with open(px.stats_path) as f:
        st = json.load(f)
    sessions = [s for r in st['routes'] for s in r['sessions'] if s.get('decode')]
    check(sessions, 'no decoded session in --stats: %s' % st)
    game = max(sessions, key=lambda s: s['decode']['messages'])
    check(game['decode']['errors'] == 0, 'decode errors: %s' % game)
    pcap = h.path('client.pcap')
    tl.write_pcap(pcap, rep.events)
    rc, out, err = tl.decode_lines(h, pcap)
    cmds = tl.reliable_commands(out)
    sv = [(num, t) for (op, num), t in sorted(cmds.items()) if op == 'svc_serverCommand']
    check(len(sv) >= 5, 'the client\'s wire decodes to only %d server commands (exit %d): %s'
          % (len(sv), rc, err[-1500:]))
    return sv, game, rep


def baseline(h, with_replay=False):
    """The server commands of the capture's client side, unchanged."""
    sv, game, rep = replay(h, '')
    return (sv, rep) if with_replay else sv


def numbers_contiguous(sv):
    nums = [n for n, _ in sv]
    return all(b == a + 1 for a, b in zip(nums, nums[1:]))


def case_drop_prints(h):
    orig = baseline(h)
    prints = [t for _, t in orig if t.startswith('print')]
    check(len(prints) >= 3, 'the capture has only %d prints' % len(prints))
    sv, game, rep = replay(h, '    filter drop {\n        kinds print\n    }')
    check(not [t for _, t in sv if t.startswith('print')],
          'prints reached the client: %s' % sv)
    want = [t for _, t in orig if not t.startswith('print')]
    got = [t for _, t in sv]
    check(got == want, 'the other server commands changed:\n  want %s\n  got  %s' % (want, got))
    check(numbers_contiguous(sv), 'the client sees a gap in command numbers: %s'
          % [n for n, _ in sv])
    check(game['counters']['drops'].get('filter', 0) == 0,
          'whole datagrams were dropped: %s' % game['counters'])
    print('%d prints removed, the other %d server commands arrive renumbered without a gap'
          % (len(prints), len(got)))


def case_drop_datagrams(h):
    orig, orep = baseline(h, with_replay=True)
    prints = [t for _, t in orig if t.startswith('print')]
    sv, game, rep = replay(h, '    filter drop {\n        kinds print\n'
                              '        whole_datagram yes\n        direction to_client\n    }')
    lost = game['counters']['drops'].get('filter', 0)
    check(1 <= lost <= len(prints), 'drops.filter is %d, expected 1..%d (one per datagram '
          'bringing a print first): %s' % (lost, len(prints), game['counters']))
    before = [bytes(d) for d in orep.to_client]
    after = [bytes(d) for d in rep.to_client]
    check(len(after) == len(before) - lost, 'the client received %d datagrams, expected %d - %d'
          % (len(after), len(before), lost))
    missing = list(before)
    for d in after:
        check(d in missing, 'the client received a datagram the plain relay did not deliver')
        missing.remove(d)
    check(len(missing) == lost, 'missing %d datagrams, dropped %d' % (len(missing), lost))
    check(game['counters']['s2c_packets'] == len(after),
          '--stats s2c_packets %d, client received %d' % (game['counters']['s2c_packets'],
                                                          len(after)))
    print('%d datagrams dropped as loss (counted as drops.filter); the client received the '
          'other %d byte for byte' % (lost, len(after)))


def case_rewrite_prints(h):
    orig = baseline(h)
    sv, game, rep = replay(h, '    filter rewrite {\n        kinds print\n'
                              '        replace "([a-z])" "<\\\\1>"\n    }')
    check(len(sv) == len(orig), 'commands count changed: %d vs %d' % (len(sv), len(orig)))
    changed = 0
    for (n0, t0), (n1, t1) in zip(orig, sv):
        check(n0 == n1, 'numbering changed without drops or injections: %d vs %d' % (n0, n1))
        if t0.startswith('print'):
            check('<' in t1 and t1 != t0, 'a print arrived unchanged: %r' % t1)
            changed += 1
        else:
            check(t1 == t0, 'a non-print command changed: %r -> %r' % (t0, t1))
    check(changed >= 3, 'only %d prints in the capture' % changed)
    check(game['decode']['reencoded'] > 0, 'nothing was rebuilt: %s' % game['decode'])
    print('%d prints rewritten, the other %d commands unchanged; %d messages rebuilt'
          % (changed, len(sv) - changed, game['decode']['reencoded']))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
