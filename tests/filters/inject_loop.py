#!/usr/bin/env python3
"""Loopback tests of the 'inject' filter with real Quake 3 traffic: a
capture's game session replayed through the real slipgate binary (-p q3)
at a tenth of its real pace, with inject sending a print to the client
every 200 ms, at most 5 times.  What the client received is written as a
pcap of the client's wire and decoded offline (`slipgate pcap decode`):
the prints must be there as reliable server commands of their own, 5 of
them, numbered in sequence with the server's own commands.

Only the ioquake3 protocol-71 capture is used: it has no XOR scrambling.
With protocol 68 and OpenArena 71 the client scrambles each datagram with
the text of the server command it acknowledges; a replayed client never
saw the injected commands, so from the first injection on its datagrams
are keyed to the wrong text (a real client, which does see them, is keyed
right) and slipgate rightly fails to decode them.

Shares its helpers with textlog_loop.py.  Only 127.0.0.1; bounded loops;
processes killed by PID.  Exit 0 pass, 1 fail, 77 skip.
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import textlog_loop as tl  # noqa: E402
from textlog_loop import check, main, fault_test  # noqa: E402


def prints_to_client(h, name):
    cap = tl.capture(name)
    srv = fault_test.ServerSide()
    try:
        px = tl.start_proxy(h, srv,
                            '    filter inject {\n'
                            '        text "^3slipgate: hello %client%"\n'
                            '        every 200ms\n'
                            '        count 5\n'
                            '    }\n'
                            '    filter inspect {\n'
                            '        format json\n'
                            '        kinds print\n'
                            '        show_repeats yes\n'
                            '        output "' + h.path('inspect.jsonl') + '"\n'
                            '    }')
        rep = tl.LooseReplay(h, px, srv, cap, pace=0.1).run()
        check(px.stop() == 0, 'slipgate did not exit cleanly')
    finally:
        srv.close()
    errors = [l for l in px.log_lines() if 'first decode error' in l]
    check(not errors, 'slipgate could not decode the session: %s' % errors)
    check(rep.silent == 0, '%d datagrams went through slipgate without anything arriving at '
          'the other end' % rep.silent)
    pcap = h.path('client.pcap')
    tl.write_pcap(pcap, rep.events)
    rc, out, err = tl.decode_lines(h, pcap)
    cmds = tl.reliable_commands(out)
    sv = sorted((num, t) for (op, num), t in cmds.items() if op == 'svc_serverCommand')
    want = 'print \\"^3slipgate: hello 127.0.0.1:%d\\n\\"' % rep.client.port
    mine = [num for num, t in sv if t == want]
    check(len(mine) == 5, 'the client received %d distinct injected prints, expected 5; server '
          'commands on its wire: %s\n(decode exit %d) %s' % (len(mine), sv, rc, err[-1500:]))
    nums = [num for num, _ in sv]
    check(nums == list(range(nums[0], nums[0] + len(nums))),
          'the client\'s server commands are not numbered in sequence: %s' % nums)
    check_inspected(h.path('inspect.jsonl'), rep.client.port, mine)
    theirs = [t for _, t in sv if t.startswith('print') and t != want]
    check(len(theirs) == 6, 'the server\'s own 6 prints did not all arrive: %s' % theirs)
    print('%s: the client received the 5 injected prints as commands %s among %d server '
          'commands numbered %d..%d, and the server\'s 6 prints; replay %.1f s'
          % (name, mine, len(sv), nums[0], nums[-1], rep.elapsed))


def check_inspected(path, port, numbers):
    """The inspector shows each injected print once as new (injected, not
    repeat) with the number the client got, resends marked repeat, and
    never marks a server print injected."""
    text = '^3slipgate: hello 127.0.0.1:%d\n' % port
    first, resent, others = [], 0, 0
    with open(path, encoding='utf-8') as f:
        for line in f:
            obj = json.loads(line)
            for m in obj.get('msgs', []):
                check('injected' in m, 'inspect: message without "injected": %s' % m)
                if not m['injected']:
                    check(m['text'] != text, 'inspect: an injected print not marked: %s' % m)
                    others += 1
                    continue
                check(obj['dir'] == 's2c' and m['kind'] == 'print' and
                      m['name'] == 'svc_serverCommand' and m['text'] == text,
                      'inspect: unexpected injected message %s in %s' % (m, line.strip()))
                check(obj['reencoded'], 'inspect: a frame carrying an injection is not '
                      'marked re-encoded: %s' % line.strip())
                if m['repeat']:
                    resent += 1
                else:
                    first.append(m['num'])
    check(sorted(first) == sorted(numbers), 'inspect showed the injected prints as new with '
          'numbers %s; the client received them as %s' % (first, numbers))
    print('inspect: 5 injected prints shown as numbers %s, %d resends marked repeat, %d '
          'server prints' % (first, resent, others))


def case_print_ioq71(h):
    prints_to_client(h, 'ioq71')


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
