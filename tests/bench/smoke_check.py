#!/usr/bin/env python3
"""bench@smoke*: run slipgate-bench (--quick --json and the given
arguments) and assert what a smoke run can: every mode ran (status ok,
traffic delivered), every decoding mode decoded messages with 0 errors,
every re-encoded message was identical to the original, every recording
mode wrote demos.  The ratios to the minimal relay are printed, never
asserted (a loaded machine moves them).

    smoke_check.py SLIPGATE_BENCH [ARGS...]
Exit 0 pass, 1 fail.
"""
import json
import subprocess
import sys


def residence_check(name, m):
    """slipgate's own residence times (start burst, steady state) and loop
    turns: present, counting datagrams, percentiles in order, and the steady
    residence's median under the end-to-end one's (a datagram's time inside
    slipgate is part of its trip; the histogram's bucket edge can overstate
    it by 28 %%, hence the margin)."""
    res, lat = m.get('residence'), m.get('latency') or {}
    if not isinstance(res, dict):
        return [f'{name}: no residence figures']
    out = []
    rounds = len(lat.get('round_p99_us') or [])
    for part in ('start', 'steady', 'loop_turn'):
        if part == 'steady' and rounds < 2 and res.get(part) is None:
            continue  # one latency round: all of it is the start
        x = res.get(part) or {}
        q = [x.get(k) for k in ('p50_us', 'p99_us', 'p999_us', 'max_us')]
        if not x.get('count') or any(not isinstance(v, (int, float)) for v in q):
            out.append(f'{name}: residence.{part} {x!r}')
        elif not 0 < q[0] <= q[1] <= q[2] <= q[3]:
            out.append(f'{name}: residence.{part} p50/p99/p99.9/max not in order: {q}')
    steady = res.get('steady') or res.get('start') or {}
    if lat.get('p50_us') and steady.get('p50_us') and steady['p50_us'] > lat['p50_us'] * 1.3:
        out.append(f'{name}: residence p50 {steady["p50_us"]} us above the end-to-end p50 '
                   f'{lat["p50_us"]} us')
    if not out:
        print(f'  residence start p99 {res["start"]["p99_us"]} us, steady (or start) p50 '
              f'{steady["p50_us"]} p99 {steady["p99_us"]} p99.9 {steady["p999_us"]} max '
              f'{steady["max_us"]} us ({res["start"]["count"]} + {steady["count"]} datagrams); '
              f'loop turn p99 {res["loop_turn"]["p99_us"]} us')
    return out


def main(argv):
    cmd = [argv[1], '--quick', '--json'] + argv[2:]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    sys.stderr.write(p.stderr[-4000:])
    if p.returncode != 0:
        print(f'FAIL: {" ".join(cmd)} exited {p.returncode}')
        return 1
    try:
        d = json.loads(p.stdout)
    except ValueError as e:
        print(f'FAIL: the JSON is malformed: {e}\n{p.stdout[-2000:]}')
        return 1
    bad = []
    modes = d.get('modes') or {}
    if not modes:
        bad.append('no modes in the JSON')
    print(f'{"mode":20} {"pkt/s x min":>11} {"p99 x min":>10}  decode')
    for name, m in modes.items():
        tp, lat, dec = m.get('throughput') or {}, m.get('latency') or {}, m.get('decode')
        if m.get('status') != 'ok':
            bad.append(f'{name}: status {m.get("status")!r}')
            continue
        if not tp.get('pps'):
            bad.append(f'{name}: no traffic delivered')
        if not lat.get('samples'):
            bad.append(f'{name}: no latency samples')
        line = f'{name:20} {tp.get("ratio_minrelay")!s:>11} {lat.get("p99_ratio_minrelay")!s:>10}'
        if dec is not None:
            line += (f'  {dec["messages"]} messages, {dec["errors"]} errors, '
                     f'{dec["reencode_identical"]}/{dec["reencoded"]} re-encoded identical, '
                     f'{dec["demos"]} demos')
            if dec['messages'] <= 0:
                bad.append(f'{name}: decoded no message')
            if dec['errors'] != 0:
                bad.append(f'{name}: {dec["errors"]} decode errors')
            if dec['reencode_errors'] != 0 or dec['reencoded'] != dec['reencode_identical']:
                bad.append(f'{name}: {dec["reencoded"]} re-encoded, {dec["reencode_identical"]} '
                           f'identical, {dec["reencode_errors"]} errors')
            if 'reencode' in name and dec['reencoded'] <= 0:
                bad.append(f'{name}: re-encoded nothing')
            if name in ('slipgate-record', 'slipgate-signed') and dec['demos'] <= 0:
                bad.append(f'{name}: wrote no demo')
        print(line)
        if name.startswith('slipgate'):
            bad += residence_check(name, m)
    if bad:
        print('FAIL:\n  ' + '\n  '.join(bad))
        return 1
    print(f'PASS: {len(modes)} modes')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
