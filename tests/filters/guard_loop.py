#!/usr/bin/env python3
"""Loopback tests of the 'guard' filter with real Quake 3 traffic: the
captures replayed through the real slipgate binary (-p q3).

    clean_*           a real session passes byte-identical and guard logs nothing
    blocks_rewritten  a 'rewrite' before guard turns the server's real
                      "respawn N" commands into "exec evil.cfg; respawn N":
                      guard removes exactly those, logs each once, and the
                      client's wire (decoded offline) carries no exec while
                      every print still arrives

Shares its helpers with textlog_loop.py.  Only 127.0.0.1; bounded loops;
processes killed by PID.  Exit 0 pass, 1 fail, 77 skip.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import textlog_loop as tl  # noqa: E402
from textlog_loop import check, main, fault_test  # noqa: E402


def clean(h, name):
    cap = tl.capture(name)
    srv = fault_test.ServerSide()
    try:
        px = tl.start_proxy(h, srv, '    filter guard {\n    }')
        ups = fault_test.UpstreamMap(px)
        rep = fault_test.Replay(h, px, srv, ups, cap, hold=False).run()
        check(not rep.problems, 'the replay through guard was not byte-identical:\n  %s'
              % '\n  '.join(rep.problems[:10]))
        check(px.stop() == 0, 'slipgate did not exit cleanly')
    finally:
        srv.close()
    blocked = [l for l in px.log_lines() if 'guard:' in l]
    check(not blocked, 'guard logged on a clean session:\n  %s' % '\n  '.join(blocked))
    print('%s: %d datagrams byte-identical through guard, nothing logged by it'
          % (name, rep.total_sent()))


def case_clean_ioq68(h):
    clean(h, 'ioq68')


def case_clean_ioq71(h):
    clean(h, 'ioq71')


def case_clean_oa71(h):
    clean(h, 'oa71')


def case_blocks_rewritten(h):
    cap = tl.capture('ioq71')
    srv = fault_test.ServerSide()
    log = h.path('text.log')
    try:
        px = tl.start_proxy(h, srv,
                            '    filter rewrite {\n'
                            '        kinds servercmd\n'
                            '        replace "^respawn" "exec evil.cfg; respawn"\n'
                            '    }\n'
                            '    filter guard {\n    }\n'
                            '    filter textlog {\n        file "%s"\n    }' % log)
        rep = tl.LooseReplay(h, px, srv, cap).run()
        check(px.stop() == 0, 'slipgate did not exit cleanly')
    finally:
        srv.close()
    blocked = [l for l in px.log_lines() if 'guard: blocked' in l]
    check(len(blocked) == 2, 'guard logged %d blocks, expected 2 (the two respawn commands):\n  %s'
          % (len(blocked), '\n  '.join(blocked)))
    for l in blocked:
        check(" warn " in l.lower() and "blocked 'exec' in a servercmd from the server to "
              "127.0.0.1:%d: \"exec evil.cfg; respawn " % rep.client.port in l,
              'unexpected block line: %s' % l)
    lines = tl.read_log(log)
    check(not [x for x in lines if 'exec' in x[5] or 'respawn' in x[5]],
          'textlog saw a removed command: %s' % lines)
    prints = [x[5] for x in lines if x[4] == 'print']
    check(len(prints) == 6, 'textlog saw %d prints, expected the capture\'s 6: %s'
          % (len(prints), prints))
    pcap = h.path('client.pcap')
    tl.write_pcap(pcap, rep.events)
    rc, out, err = tl.decode_lines(h, pcap)
    cmds = tl.reliable_commands(out)
    sv = [t for (op, _), t in sorted(cmds.items()) if op == 'svc_serverCommand']
    check(len(sv) >= 10, 'the client\'s wire decodes to only %d server commands (exit %d): %s'
          % (len(sv), rc, err[-1500:]))
    check(not [t for t in sv if t.startswith('exec') or t.startswith('respawn')],
          'the client received a removed command: %s' % sv)
    got_prints = [t for t in sv if t.startswith('print')]
    check(len(got_prints) == 6, 'the client received %d prints, expected 6: %s'
          % (len(got_prints), got_prints))
    print('guard removed the 2 rewritten respawn commands and logged each once; the client\'s '
          'wire, decoded offline, has %d server commands, none of them exec/respawn, all 6 prints; '
          'replay: %d datagrams to the client, %d to the server'
          % (len(sv), len(rep.to_client), len(rep.to_server)))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith('case_')}

if __name__ == '__main__':
    sys.exit(main(CASES, sys.argv))
