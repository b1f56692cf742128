#!/usr/bin/env python3
"""`slipgate demo ...` from the outside: exit codes, outputs, files.

usage: cmd_demo_test.py SLIPGATE CASE   (SG_TESTDATA points at the test data)
Exit codes checked: 0 ok, 1 errors found, 2 usage.
"""
import json
import os
import subprocess
import sys
import tempfile

SLIPGATE = sys.argv[1]
CASE = sys.argv[2]
DATA = os.environ.get("SG_TESTDATA", "")


def data(rel):
    path = os.path.join(DATA, rel)
    if not os.path.isfile(path):
        sys.exit("missing test data: " + path)
    return path


def run(*args):
    p = subprocess.run([SLIPGATE, "demo", *args], capture_output=True, text=True,
                       errors="replace", timeout=60)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def case_usage():
    for args in ([], ["frobnicate"], ["info"], ["dump"], ["dump", "a", "b"],
                 ["dump", "--xml", "f"], ["reencode", "in"],
                 ["cut", "in", "out", "--from", "1"], ["cut", "in", "out", "--from", "x", "--to", "2"],
                 ["cut", "in", "out", "--from", "5", "--to", "2"]):
        rc, out, err = run(*args)
        expect(rc == 2, "exit 2 for %r, got %d" % (args, rc))
        expect("usage:" in err, "usage text for %r" % (args,))
    rc, out, _ = run("--help")
    expect(rc == 0 and "usage:" in out, "--help")
    rc, _, err = run("info", "/nonexistent/x.dm_68")
    expect(rc == 1 and "nonexistent" in err, "missing file is exit 1")


def case_info():
    rc, out, _ = run("info", data("q3/sessions/ioq71/client_demo.dm_71"),
                     data("q3/demos/osp_team_chat.dm_68"))
    expect(rc == 0, "info exit 0, got %d" % rc)
    for want in ("protocol:     71", "map:          oa_dm1", "game:         baseoa",
                 "messages:     401 (1 gamestates, 400 snapshots)", "errors:       0",
                 "protocol:     68", "map:          ospdm1", "0:myT, 1:Anarki, 2:arQon, 3:Biker",
                 "duration:     54.186 s"):
        expect(want in out, "info shows %r" % want)
    rc, out, _ = run("info", data("q3/demos/truncated.dm_68"))
    expect(rc == 1, "truncated demo: exit 1")
    expect("messages:     238" in out and "without end marker" in out, "truncation reported")


def case_dump():
    rc, out, _ = run("dump", data("q3/demos/cpma_core_gameplay.dm_68"))
    lines = out.splitlines()
    expect(rc == 0 and len(lines) == 73 and lines[-1] == "# end marker", "text dump")
    rc, out, _ = run("dump", "--json", data("q3/demos/cpma_core_gameplay.dm_68"))
    objs = [json.loads(line) for line in out.splitlines()]
    expect(rc == 0 and len(objs) == 73 and objs[-1] == {"end": "marker"}, "json dump")
    expect(objs[0]["ops"][0]["op"] == "svc_gamestate", "first op is the gamestate")
    expect(all(o["ops"][-1]["op"] == "svc_snapshot" for o in objs[1:-1]), "snapshots follow")
    rc, out, _ = run("dump", data("q3/demos/truncated.dm_68"))
    expect(rc == 1 and out.splitlines()[-1] == "# end SG_E_TRUNCATED partial=0",
           "truncated dump ends with the truncation")


def case_reencode():
    src = data("q3/demos/osp_chat.dm_68")
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "re.dm_68")
        rc, out, _ = run("reencode", src, out_path)
        expect(rc == 0, "reencode exit 0")
        expect("533 messages, 533 byte-identical, 0 failed to decode" in out, out)
        expect(open(src, "rb").read() == open(out_path, "rb").read(), "same file")


def case_cut():
    src = data("q3/demos/osp_team_chat.dm_68")
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "cut.dm_68")
        rc, out, _ = run("cut", src, out_path, "--from", "100000", "--to", "120000")
        expect(rc == 0 and out.startswith("wrote "), "cut exit 0: " + out)
        rc, out, _ = run("info", out_path)
        expect(rc == 0 and "errors:       0" in out, "the cut is clean")
        expect("(server time 100027 .. 119992)" in out, "the cut spans the asked time")
        rc, out, _ = run("dump", "--json", out_path)
        objs = [json.loads(line) for line in out.splitlines()]
        expect([o["op"] for o in objs[0]["ops"]] == ["svc_gamestate"], "gamestate first")
        snap = objs[1]["ops"][-1]
        expect(snap["op"] == "svc_snapshot" and snap["deltaNum"] == 0, "non-delta snapshot")
        expect(objs[1]["seq"] == objs[0]["seq"] + 1, "gamestate one sequence before")
        rc, out, _ = run("cut", src, out_path, "--from", "900000", "--to", "990000")
        expect(rc == 1 and "no snapshot" in out, "an empty span is an error")


CASES = {"usage": case_usage, "info": case_info, "dump": case_dump,
         "reencode": case_reencode, "cut": case_cut}
if CASE not in CASES:
    sys.exit("unknown case " + CASE)
CASES[CASE]()
