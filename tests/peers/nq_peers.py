#!/usr/bin/env python3
"""Real-peer test for NetQuake (protocol 15): the real quakespasm dedicated
server and the real DarkPlaces client through slipgate (../shared/PEERS.md),
on generated placeholder game data (../shared/peers/make_synthetic_quake_data.sh).

    nq_peers.py CASE [--seconds N]

CASE: `auto` (protocol auto) or `nq` (-p nq).

The server's connect accept moves the client to a port of its own; slipgate
must keep the client on its listening port and follow the server there.
What a pass means: the client entered the game (server log), slipgate said
where the server moved the session, the game traffic kept flowing through
slipgate for N seconds (both ways, every second), nothing was dropped, the
session was not mistaken for Quake 3, and slipgate exited 0 on SIGTERM.

Everything runs on 127.0.0.1 with free ports; every process is started
under a time limit and ended by PID.  Exit 77 (skip) only when the game
packages are not installed, saying so.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import Fail, Procs, free_udp_port, read, wait_for  # noqa: E402

SERVER = "/usr/games/quakespasm"
CLIENT = "/usr/games/darkplaces"
MODES = {"auto": [], "nq": ["-p", "nq"]}


def stats_session(path):
    with open(path) as f:
        st = json.load(f)
    sessions = st["routes"][0]["sessions"]
    if len(sessions) != 1:
        raise Fail(f"expected one session, --stats lists {len(sessions)}: {sessions}")
    return st["routes"][0], sessions[0]


def run_case(case, seconds):
    if case not in MODES:
        raise Fail(f"unknown case {case!r} (one of {', '.join(MODES)})")
    missing = [p for p in (SERVER, CLIENT, shutil.which("xvfb-run"), shutil.which("fteqcc"))
               if not p or not os.path.exists(p)]
    if missing:
        print(f"SKIP: not installed: {missing} (apt-get install quakespasm darkplaces "
              "fteqcc xvfb xauth)")
        sys.exit(77)
    maker = os.environ.get("SG_PEERS_DATA")
    if not maker or not os.path.exists(maker):
        raise Fail(f"SG_PEERS_DATA={maker!r}: the game data generator is missing")
    slipgate = os.environ.get("SLIPGATE")
    if not slipgate or not os.access(slipgate, os.X_OK):
        raise Fail("SLIPGATE is not set to the slipgate binary")

    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="slipgate-nq-") as work:
        try:
            run(case, seconds, work, maker, slipgate, procs)
        finally:
            procs.stop_all()


def run(case, seconds, work, maker, slipgate, procs):
    data = os.path.join(work, "data")
    gen = subprocess.run(["bash", maker, data], capture_output=True, text=True, timeout=400)
    if gen.returncode != 0:
        raise Fail(f"the game data generator failed:\n{gen.stdout[-2000:]}{gen.stderr[-2000:]}")
    base = os.path.join(data, "nq-base")
    srv_port, px_port, cl_port = free_udp_port(), free_udp_port(), free_udp_port()
    limit = seconds + 90

    srv_log = os.path.join(work, "server.log")
    procs.start("server", ["stdbuf", "-oL", SERVER, "-dedicated", "4", "-basedir", base,
                           "-port", str(srv_port), "-protocol", "15", "+map", "box"],
                srv_log, limit)
    if not wait_for(lambda: "Quake Initialized" in read(srv_log), 20):
        raise Fail(f"the server did not start:\n{read(srv_log)[-2000:]}")

    px_log, stats = os.path.join(work, "slipgate.log"), os.path.join(work, "stats.json")
    px = procs.start("slipgate", [slipgate, "-l", f"127.0.0.1:{px_port}", "-s",
                                  f"127.0.0.1:{srv_port}", "--stats", stats, "+set",
                                  "stats_interval", "1s"] + MODES[case], px_log, limit)
    if not wait_for(lambda: "listening on" in read(px_log), 10):
        raise Fail(f"slipgate did not start:\n{read(px_log)}")

    home = os.path.join(work, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy")
    cli_log = os.path.join(work, "client.log")
    cli = procs.start("client", ["xvfb-run", "-a", "-s", "-screen 0 640x480x24", CLIENT,
                                 "-basedir", base, "-nosound", "+set", "vid_width", "320",
                                 "+set", "vid_height", "240", "+set", "cl_port", str(cl_port),
                                 "+set", "_cl_name", "peers", "+connect",
                                 f"127.0.0.1:{px_port}"], cli_log, limit, env=env)
    if not wait_for(lambda: "peers entered the game" in read(srv_log), 45):
        raise Fail(f"the client did not enter the game through slipgate\n--- server ---\n"
                   f"{read(srv_log)[-1500:]}\n--- slipgate ---\n{read(px_log)[-2000:]}\n"
                   f"--- client ---\n{read(cli_log)[-1500:]}")
    moved = re.search(r"NetQuake accept: the server moved this client to 127\.0\.0\.1:(\d+); "
                      r"the client stays on port (\d+)", read(px_log))
    if not moved or int(moved.group(2)) != px_port or int(moved.group(1)) == srv_port:
        raise Fail(f"no (right) NetQuake accept line in slipgate's log:\n{read(px_log)}")

    # In the game: the traffic keeps flowing through slipgate, every second.
    mark = len(read(px_log).splitlines())
    time.sleep(seconds)
    lines = read(px_log).splitlines()[mark:]
    counts = [tuple(int(x) for x in m.groups()) for m in
              (re.search(r"stats: sessions_active=1 sessions_total=1 c2s_packets=(\d+) "
                         r"c2s_bytes=\d+ s2c_packets=(\d+)", ln) for ln in lines) if m]
    if len(counts) < seconds - 2:
        raise Fail(f"{len(counts)} stats lines in {seconds} s:\n" + "\n".join(lines[-20:]))
    for a, b in zip(counts, counts[1:]):
        if b[0] <= a[0] or b[1] <= a[1]:
            raise Fail(f"the traffic stalled between two stats lines: {a} -> {b}")
    if "peers left" in read(srv_log) or re.search(r"timed out|Client .* removed",
                                                  read(srv_log)):
        raise Fail(f"the client left the server:\n{read(srv_log)[-1500:]}")

    procs.stop(cli, signal.SIGTERM, 5, group=True)
    rc = procs.stop(px, signal.SIGTERM, 10)
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    route, s = stats_session(stats)
    c = s["counters"]
    per_s = (counts[-1][0] - counts[0][0]) / max(1, len(counts) - 1)
    if any(route["counters"]["drops"].values()) or any(c["drops"].values()):
        raise Fail(f"drops: route {route['counters']['drops']}, session {c['drops']}")
    if s.get("codec") or s.get("decode"):
        raise Fail(f"the session was taken for {s.get('codec')}: {s}")
    print(f"PASS nq_peers@{case}: in the game through slipgate for {seconds} s; the server "
          f"moved the client to port {moved.group(1)}; {c['c2s_packets']} datagrams up, "
          f"{c['s2c_packets']} down (~{per_s:.0f}/s up)")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    seconds = 10
    if "--seconds" in sys.argv:
        seconds = int(sys.argv[sys.argv.index("--seconds") + 1])
    try:
        run_case(sys.argv[1], seconds)
    except Fail as e:
        print(f"FAIL nq_peers@{sys.argv[1]}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
