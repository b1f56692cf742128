#!/usr/bin/env python3
"""Spectators with real peers: a real ioq3ded with bots, slipgate in front
of it with a spectator port, a real ioquake3 player through slipgate, and a
second real ioquake3 client connected to the spectator port.

    spectate_peers.py VARIANT [--seconds N]

VARIANT: PLAYER-SPECTATOR wire protocols, `68-68`, `71-71` or `68-71`
(the spectator speaks its own protocol whatever the player speaks); or
`delay`: `spectate_delay 4s` (68): as 68-68, and when the spectator quits
its last snapshot is 4 s (+-1.5 s) behind the player's view; or
`map`: one player (68), and a third of the way the server changes map:
the spectator loads the new map, records a second demo, and each of its
demos matches the player's demo of the same map; or
`leave`: as `follow`, but half-way the watched player quits: the
spectator is moved to the other player, with the same checks, and its
client executes the centerprint "NAME left" (its console, developer 1); or
`follow`: two players (68), and half-way the spectator runs `follownext`
on its console: slipgate logs the switch to the other session, and the
spectator's demo shows both players' views (each snapshot compared with
the demo of the player whose client number it carries; the new gamestate
starts a second demo in the spectator's client, as a map change does).

What a pass means: both clients record their own demo (cl_autoRecordDemo);
the spectator stays connected for N seconds with no error in its console
(no dropped gamestate, delta or command errors, no disconnect), slipgate logs
one start and one end line for it and exits 0; the server never hears of
the spectator (its log names one human player); the spectator's demo
decodes with 0 errors (`slipgate demo dump`); its snapshots carry the
watched player's client number with PMF_FOLLOW set, and for every server
time found in both demos the player-state origin in the spectator's demo
equals the one in the player's own demo, over at least half of the
spectator's snapshots.

Everything on 127.0.0.1 with free ports; every process under a time limit
and ended by PID (q3_peers.Procs).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import q3_peers  # noqa: E402
from q3_peers import (Fail, Procs, free_udp_port, read, slipgate_binary, start_client,  # noqa: E402
                      start_server, wait_for)

PROTO = {
    "68": ["com_protocol", "68", "com_legacyprotocol", "68"],
    "71": ["com_protocol", "71", "com_legacyprotocol", "68"],
}
SRV_CVARS = ["com_protocol", "71", "com_legacyprotocol", "68"]
PMF_FOLLOW = 4096

# What ioquake3 prints when a server stream goes wrong (cl_parse.c, cl_main.c, net_chan.c).
CLIENT_ERRORS = re.compile(
    r"^ERROR|Delta frame too old|Delta parseEntitiesNum too old|Delta from invalid frame|"
    r"Server command overflow|Illegible server message|Server disconnected|"
    r"dropped gamestate|CL_ParseServerMessage|Bad connectResponse|Invalid password|"
    r"Server is full|Connection Interrupted|^Server: .*disconnect", re.M)


def demos_of(home):
    """The client's own demos, oldest first (a new gamestate starts a new one)."""
    d = os.path.join(home, "baseoa", "demos")
    files = sorted(os.listdir(d)) if os.path.isdir(d) else []
    files = [os.path.join(d, f) for f in files if re.search(r"\.dm_(68|71)$", f)]
    if not files:
        raise Fail(f"no demo in {d}")
    return files


def demo_of(home):
    return demos_of(home)[-1]


def origins(path):
    tool = os.environ["SG_Q3_DEMO_ORIGINS"]
    r = subprocess.run([tool, path], capture_output=True, timeout=30)
    if r.returncode != 0:
        raise Fail(f"{tool} {path}: exit {r.returncode}: {r.stderr.decode()[-500:]}")
    out = {}
    for line in r.stdout.decode().splitlines():
        t, cn, flags, x, y, z = line.split()
        out[int(t)] = (int(cn), int(flags), (x, y, z))
    return out


def watched(px_log):
    """The session ids the spectator watched, in order."""
    return re.findall(r"spectator 1 \(.*\) watches session (\d+)", read(px_log))


def run(variant, seconds):
    for exe in ("ioq3ded", "ioquake3"):
        if not os.access(os.path.join(q3_peers.IOQ3_DIR, exe), os.X_OK):
            print(f"SKIP: {exe} is not installed")
            sys.exit(77)
    follow = variant in ("follow", "leave")
    leave = variant == "leave"
    mapchange = variant == "map"
    delay = 4 if variant == "delay" else 0
    pv, _, sv = ("68-68" if follow or delay or mapchange else variant).partition("-")
    if pv not in PROTO or sv not in PROTO:
        raise Fail(f"unknown variant {variant}")
    work = tempfile.mkdtemp(prefix=f"sg-spect-{variant}-")
    procs = Procs()
    keep = False
    try:
        srv_port, px_port, sp_port = free_udp_port(), free_udp_port(), free_udp_port()
        cli_port, spc_port = free_udp_port(), free_udp_port()
        limit = seconds + 60
        srv, srv_log = start_server(procs, work, SRV_CVARS, srv_port, limit, bots=2)

        px_log = os.path.join(work, "slipgate.log")
        conf = os.path.join(work, "slipgate.conf")
        with open(conf, "w") as f:
            f.write(f"route spect {{\n    listen 127.0.0.1:{px_port}\n"
                    f"    server 127.0.0.1:{srv_port}\n    protocol q3\n"
                    f"    spectate 127.0.0.1:{sp_port}\n    spectate_password watch\n"
                    f"    spectate_delay {delay}s\n"
                    f"    record {work}/demos\n}}\n")
        os.makedirs(os.path.join(work, "demos"))
        px = procs.start("slipgate", [slipgate_binary(), "-c", conf], px_log, limit)
        if not wait_for(lambda: "spectators on" in read(px_log), 10):
            raise Fail(f"slipgate did not start:\n{read(px_log)}")

        # The players, through slipgate.
        players, ports = [], []
        for i in range(2 if follow else 1):
            pwork = os.path.join(work, f"player{i}")
            os.makedirs(pwork)
            port = free_udp_port()
            players.append(start_client(procs, pwork, PROTO[pv], port, px_port, limit))
            ports.append(port)
            # (the second is renamed UnnamedPlayer: the name is taken)
            if not wait_for(lambda: len(re.findall(r"(peers|UnnamedPlayer)\^7 entered the game",
                                                   read(srv_log))) > i, 30):
                raise Fail(f"player {i} never entered the game\n{read(players[-1][1])[-1500:]}\n"
                           f"--- slipgate\n{read(px_log)[-1500:]}")

        # The spectator, on the spectator port, with the password.
        swork = os.path.join(work, "spectator")
        os.makedirs(swork)
        # (developer 1: its console shows each server command it executes)
        spc, spc_log, home_spc = start_client(
            procs, swork, PROTO[sv] + ["password", "watch"] + (["developer", "1"] if leave else []),
            spc_port, sp_port, limit)
        if not wait_for(lambda: re.search(r"spectator 1 \(.*\) watches session", read(px_log)),
                        30):
            raise Fail(f"the spectator was not admitted\n--- slipgate\n{read(px_log)[-2000:]}"
                       f"\n--- spectator\n{read(spc_log)[-2000:]}")
        t0 = time.monotonic()
        asked = False
        while time.monotonic() - t0 < seconds:
            time.sleep(0.5)
            if spc.poll() is not None:
                raise Fail(f"the spectator's client exited:\n{read(spc_log)[-3000:]}")
            # half-way: `follownext` on the spectator's console (its move loop runs the file)
            if mapchange and not asked and time.monotonic() - t0 > seconds / 3:
                q3_peers.rcon(srv_port, "map oa_dm2")
                if not wait_for(lambda: read(srv_log).count("peers^7 entered the game") >= 2, 40):
                    raise Fail(f"the player did not come back after the map change:\n"
                               f"{read(srv_log)[-2000:]}")
                asked = True
            if leave and not asked and time.monotonic() - t0 > seconds / 2:
                # the watched player quits: the spectator goes to the other one
                sid = watched(px_log)[-1]
                m = re.search(r"\[s%s\] session start client=127\.0\.0\.1:(\d+)" % sid,
                              read(px_log))
                gone = ports.index(int(m.group(1)))
                cli, _, home_cli = players.pop(gone)
                with open(os.path.join(home_cli, "baseoa", q3_peers.QUIT_CFG), "w") as f:
                    f.write("quit\n")
                if not wait_for(lambda: cli.poll() is not None, 20):
                    raise Fail("the watched player did not quit")
                if not wait_for(lambda: len(watched(px_log)) > 1, 10):
                    raise Fail(f"the spectator stayed on the player who left:\n"
                               f"{read(px_log)[-2000:]}")
                left_demo = origins(demo_of(home_cli))
                asked = True
            if follow and not leave and not asked and time.monotonic() - t0 > seconds / 2:
                with open(os.path.join(home_spc, "baseoa", q3_peers.QUIT_CFG), "w") as f:
                    f.write("follownext\n")
                if not wait_for(lambda: len(watched(px_log)) > 1, 10):
                    raise Fail(f"follownext did not switch:\n{read(px_log)[-2000:]}")
                with open(os.path.join(home_spc, "baseoa", q3_peers.QUIT_CFG), "w") as f:
                    f.write("\n")
                asked = True
        # End the spectator first (its `quit` sends its disconnect), then the player.
        with open(os.path.join(home_spc, "baseoa", q3_peers.QUIT_CFG), "w") as f:
            f.write("quit\n")
        if not wait_for(lambda: spc.poll() is not None, 20):
            raise Fail("the spectator did not quit")
        spc_quit = time.monotonic()
        if not wait_for(lambda: re.search(r"spectator 1 .* ended: disconnected", read(px_log)),
                        10):
            raise Fail(f"no end line for the spectator:\n{read(px_log)[-2000:]}")
        for cli, _, home_cli in players:
            q3_peers.quit_client(cli, home_cli, srv_log, procs)
        players_quit = time.monotonic()
        rc = procs.stop(px)
        if rc != 0:
            raise Fail(f"slipgate exited {rc}:\n{read(px_log)[-2000:]}")

        # The spectator's console: no error.
        bad = [ln for ln in read(spc_log).splitlines() if CLIENT_ERRORS.search(ln)
               and "peers disconnected" not in ln]
        if bad:
            raise Fail("the spectator's console says:\n" + "\n".join(bad[:20]))
        # The server knew one human player only.
        if len(re.findall(r"ClientConnect: \d+", read(srv_log))) > 2 + (2 if follow else 1):
            raise Fail("the server saw more clients than the player and two bots")

        # The spectator's demo: whole, decodable, the player's view.
        sdemos = demos_of(home_spc)
        so, total = {}, 0
        for sdemo in sdemos:
            r = subprocess.run([slipgate_binary(), "demo", "dump", sdemo], capture_output=True,
                               timeout=60)
            if r.returncode != 0:
                raise Fail(f"slipgate demo dump {sdemo}: exit {r.returncode}\n"
                           f"{r.stderr.decode()[-1000:]}{r.stdout.decode()[-1000:]}")
            one = origins(sdemo)
            total += len(one)
            so = one if mapchange else {**so, **one}  # server time restarts with a map
        if len(sdemos) != (2 if follow or mapchange else 1):
            raise Fail(f"the spectator recorded {len(sdemos)} demos")
        # the player who left is named in the middle of the spectator's screen
        if leave and not re.search(r'serverCommand: \d+ : cp "\S+ left', read(spc_log)):
            raise Fail("the spectator's client executed no centerprint naming the player "
                       "who left")
        if mapchange:  # one demo per map on both sides: compared map by map
            pdemos = demos_of(players[0][2])
            if len(pdemos) != 2:
                raise Fail(f"the player recorded {len(pdemos)} demos over a map change")
            for sd, pd in zip(sdemos, pdemos):
                a, b = origins(sd), origins(pd)
                both = [t for t in a if t in b]
                bad = [t for t in both if a[t][2] != b[t][2]]
                if len(both) < len(a) // 2 or bad or not a:
                    raise Fail(f"{os.path.basename(sd)}: {len(a)} snapshots, {len(both)} at "
                               f"the player's server times, {len(bad)} origins differ")
            if "oa_dm2" not in read(spc_log):
                raise Fail("the spectator never loaded the new map")
        by_cn = {}  # each player's own demo, by its client number
        for po in [origins(demo_of(h)) for _, _, h in players] + ([left_demo] if leave else []):
            cns = {po[t][0] for t in po}
            if len(cns) != 1:
                raise Fail(f"a player's demo has client numbers {cns}")
            by_cn[cns.pop()] = po
        # 20 a second, less the map loads
        if total < seconds * 8:
            raise Fail(f"the spectator's demos have {total} snapshots in {seconds} s")
        unfollowed = [t for t in so if not so[t][1] & PMF_FOLLOW]
        if unfollowed:
            raise Fail(f"{len(unfollowed)} spectator snapshots without PMF_FOLLOW")
        seen = {so[t][0] for t in so}
        if not seen <= set(by_cn) or len(seen) != len(by_cn):
            raise Fail(f"client numbers {seen} in the spectator's demo, the players' {set(by_cn)}")
        common = [t for t in so if t in by_cn[so[t][0]]]
        diff = [t for t in common if so[t][2] != by_cn[so[t][0]][t][2]]
        if len(common) < len(so) // 2:
            raise Fail(f"only {len(common)} of {len(so)} spectator snapshots have a server time "
                       "of the watched player's demo")
        if diff:
            t = diff[0]
            raise Fail(f"{len(diff)} of {len(common)} origins differ, first at {t}: "
                       f"{so[t][2]} vs {by_cn[so[t][0]][t][2]}")
        # the delay: when the spectator quit, its view was `delay` s behind
        # the player's (server time runs with the wall clock)
        if delay:
            po = by_cn[next(iter(by_cn))]
            at_quit = max(po) - (players_quit - spc_quit) * 1000
            lag = at_quit - max(so)
            if not delay * 1000 - 1500 <= lag <= delay * 1000 + 1500:
                raise Fail(f"the spectator was {lag:.0f} ms behind the player, not {delay} s")
            print(f"the spectator was {lag:.0f} ms behind the player (spectate_delay {delay}s)")
        # and it plays in the real client to its end
        frames, secs, _ = q3_peers.play_demo(sdemo, work, PROTO[sv], procs, limit)
        print(f"PASS spectate_peers {variant}: {len(so)} spectator snapshots, {len(common)} "
              f"compared with the player's demo, all origins equal; the spectator's demo "
              f"plays ({frames} frames in {secs} s)")
        return 0
    except Fail:
        keep = True
        print(f"(work directory kept: {work})")
        raise
    finally:
        procs.stop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    args = sys.argv[1:]
    seconds = 15
    if "--seconds" in args:
        i = args.index("--seconds")
        seconds = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    try:
        return run(args[0], seconds)
    except Fail as e:
        print(f"FAIL: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
