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
    if bad:
        print('FAIL:\n  ' + '\n  '.join(bad))
        return 1
    print(f'PASS: {len(modes)} modes')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
