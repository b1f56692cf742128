#!/usr/bin/env python3
"""Real-peer test of `master`: dpmaster (built from source), ioq3ded behind
slipgate with its own heartbeats off, qstat, and the real ioquake3 client.

    master_peers.py q3 [--seconds N]

What a pass means: dpmaster, told of the server by slipgate's heartbeat
alone (the server's sv_master1..3 are empty, and it runs `dedicated 1`,
which sends none), lists slipgate's listening address and port:
`quakestat -q3m` against dpmaster shows 127.0.0.1:PORT-of-slipgate with the
server's map, and not the server's own port; then the real client
connects to that listed address, is in the game N seconds later (the
server lists it with a live ping) and quits normally (the server logs its
disconnect); before it quits, an rcon `map oa_dm2` on the server makes
slipgate heartbeat at once (it sees the new level in the player's traffic)
and the listing shows the new map; slipgate exits 0 on SIGTERM.

dpmaster is built once into SG_DPMASTER_DIR (the build directory) from
../shared/peers/master with its build script (SG_DPMASTER_BUILD); it runs
with --allow-loopback on 127.0.0.1.  Everything runs on 127.0.0.1 with free
ports, under time limits, and is ended by PID.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from q3_peers import (IOQ3_DIR, VARIANTS, Fail, Procs, free_udp_port, getstatus,  # noqa: E402
                      quit_client, rcon, read, run_main, slipgate_binary, start_client,
                      start_server, wait_for)


def dpmaster_binary():
    out = os.environ.get("SG_DPMASTER_DIR")
    script = os.environ.get("SG_DPMASTER_BUILD")
    if not out or not script:
        raise Fail("SG_DPMASTER_DIR and SG_DPMASTER_BUILD are not set (run through meson test)")
    exe = os.path.join(out, "dpmaster")
    if not os.access(exe, os.X_OK):
        r = subprocess.run(["bash", script, out], capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.access(exe, os.X_OK):
            raise Fail(f"cannot build dpmaster with {script}:\n{r.stdout}{r.stderr}")
    return exe


def listed(master_port):
    """The servers quakestat -q3m reads from dpmaster: (address, map) pairs."""
    r = subprocess.run(["quakestat", "-q3m", f"127.0.0.1:{master_port}", "-raw", ","],
                       capture_output=True, text=True, timeout=20)
    out = []
    for line in r.stdout.splitlines():
        f = line.split(",")
        if len(f) >= 3 and f[0] == "Q3S":
            out.append((f[1], f[3] if len(f) > 3 else "", line))
    return out, r.stdout + r.stderr


def run_case(game, seconds):
    if game != "q3":
        raise Fail(f"unknown case {game} (only q3)")
    for exe in (os.path.join(IOQ3_DIR, "ioq3ded"), os.path.join(IOQ3_DIR, "ioquake3")):
        if not os.access(exe, os.X_OK):
            raise Fail(f"{exe} is not installed (apt-get install ioquake3 ioquake3-server "
                       "openarena openarena-server)")
    for tool in ("xvfb-run", "quakestat"):
        if not shutil.which(tool):
            raise Fail(f"{tool} is not installed (scripts/deps.sh --test)")
    dpmaster = dpmaster_binary()
    srv_cvars, cli_cvars = VARIANTS["ioq68"]
    work = tempfile.mkdtemp(prefix="sg-peers-master-")
    procs = Procs()
    keep = False
    try:
        jail = os.path.join(work, "jail")  # dpmaster's chroot when run as root
        os.makedirs(jail)
        srv_port, px_port, cli_port, m_port = (free_udp_port() for _ in range(4))
        limit = seconds + 45

        # The master.
        m_log = os.path.join(work, "dpmaster.log")
        procs.start("dpmaster", [dpmaster, "--allow-loopback", "-l", "127.0.0.1", "-p",
                                 str(m_port), "-j", jail, "-v"], m_log, limit)

        # The real server, its own heartbeats off.
        srv, srv_log = start_server(procs, work, srv_cvars, srv_port, limit, bots=2)

        # slipgate in front of it, registering with the master.
        conf = os.path.join(work, "slipgate.conf")
        with open(conf, "w") as f:
            f.write(f"route q3 {{\n    listen 127.0.0.1:{px_port}\n"
                    f"    server 127.0.0.1:{srv_port}\n    protocol q3\n"
                    f"    master 127.0.0.1:{m_port}\n}}\n")
        px_log = os.path.join(work, "slipgate.log")
        px = procs.start("slipgate", [slipgate_binary(), "-c", conf, "-v"], px_log, limit)
        if not wait_for(lambda: "listening on" in read(px_log), 10):
            raise Fail(f"slipgate did not start:\n{read(px_log)}")

        # qstat lists slipgate's address, with the server's map.
        ours = f"127.0.0.1:{px_port}"
        servers, qout = [], ""

        def is_listed():
            nonlocal servers, qout
            servers, qout = listed(m_port)
            return any(a == ours for a, _, _ in servers)
        if not wait_for(is_listed, 15, step=0.5):
            raise Fail(f"quakestat -q3m does not list {ours}:\n{qout}\n--- dpmaster\n"
                       f"{read(m_log)[-1500:]}\n--- slipgate\n{read(px_log)[-1500:]}")
        line = next(l for a, _, l in servers if a == ours)
        if any(a.endswith(f":{srv_port}") for a, _, _ in servers) or "oa_dm1" not in line:
            raise Fail(f"the listing is not slipgate's with the server's map: {servers}")

        # The real client connects to the listed address and plays.
        listed_port = int(ours.rsplit(":", 1)[1])
        cli, cli_log, home_cli = start_client(procs, work, cli_cvars, cli_port, listed_port,
                                              limit)
        if not wait_for(lambda: "peers^7 entered the game" in read(srv_log), 30):
            raise Fail("the client never entered the game\n--- server\n"
                       f"{read(srv_log)[-1500:]}\n--- client\n{read(cli_log)[-1500:]}\n"
                       f"--- slipgate\n{read(px_log)[-1500:]}")
        entered = time.monotonic()
        while time.monotonic() - entered < seconds:
            if cli.poll() is not None:
                raise Fail(f"the client exited early:\n{read(cli_log)[-2000:]}")
            if px.poll() is not None:
                raise Fail(f"slipgate exited early:\n{read(px_log)[-2000:]}")
            time.sleep(0.5)
        # A map change: slipgate sees the new level in the player's traffic
        # and heartbeats at once; the master asks again and lists the new map.
        beats = read(m_log).count("heartbeat QuakeArena-1")
        rcon(srv_port, "map oa_dm2")
        if not wait_for(lambda: "changed level to oa_dm2: master heartbeat" in read(px_log), 20):
            raise Fail(f"no heartbeat at the map change:\n{read(px_log)[-2000:]}")
        if not wait_for(lambda: read(m_log).count("heartbeat QuakeArena-1") > beats, 5):
            raise Fail(f"dpmaster did not get the map change's heartbeat:\n{read(m_log)[-1500:]}")
        if not wait_for(lambda: any(a == ours and m == "oa_dm2" for a, m, _ in listed(m_port)[0]),
                        10, step=0.5):
            raise Fail(f"quakestat does not list {ours} on oa_dm2: {listed(m_port)}")
        if not wait_for(lambda: read(srv_log).count("peers^7 entered the game") >= 2, 30):
            raise Fail(f"the client did not come back after the map change:\n"
                       f"{read(srv_log)[-2000:]}")
        status = getstatus(srv_port)
        players = [l for l in status.split("\n")[2:] if '"peers' in l]
        if not players or players[0].split()[1] == "999":
            raise Fail(f"after {seconds}s the server does not list a live 'peers':\n{status}")
        quit_client(cli, home_cli, srv_log, procs)
        rc = procs.stop(px)
        if rc != 0:
            raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
        hb = len(re.findall(r"heartbeat QuakeArena-1 sent to master", read(px_log)))
        print(f"PASS master q3: quakestat -q3m lists {ours} (the server is on {srv_port}): "
              f"{line}; the client played {seconds}s through it, followed a map change (a "
              f"heartbeat at once, listed on oa_dm2) and quit; {hb} heartbeat(s) logged")
    except Fail:
        keep = True
        print(f"(work files kept in {work})")
        raise
    finally:
        procs.stop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    return run_main(__doc__, 1, 8, run_case, lambda game: f"master {game}")


if __name__ == "__main__":
    sys.exit(main())
