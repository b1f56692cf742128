#!/usr/bin/env python3
"""QuakeWorld proxy chains with the real peers: ezQuake through two chained
slipgates (`route_by prx`) to mvdsv + KTX.

    SLIPGATE=... SG_PEERS_DATA=... prx_peers.py chain [--seconds N]

ezQuake is started with `cl_proxyaddr "127.0.0.1:A@127.0.0.1:B"` and
`connect 127.0.0.1:SERVER`, as a player using two qwfwd nodes: it sends its
challenge request and its connect to A with `prx "127.0.0.1:B@SERVER"`.
Both hops decode with `reencode always` and record (`name %server%-...`;
a's route names the server as its `server`, its sessions go to b).  Before
it connects, ezQuake asks each hop `pingstatus` (`sb_proxygetpings`: the
query and the reply parser of `connectbr`'s best-route search), once the
test saw each hop measure its destination.  Passes when ezQuake prints
each hop's answer listing that hop's next hop (a: b, b: the server) with a
ping, the player enters the game, plays N seconds with traffic both ways
every second on both hops, quits normally (the server sees it leave, each
hop ends its demo at the client's drop), each hop decoded its session with
0 errors and rebuilt every message byte-identical, and the server's view of
the player's userinfo carries the `*qwfwd` stamp and no `prx` key; each
hop's recording is one .qwd named after the session's real destination (b
for a, the server for b), of the shape ezQuake writes, read by `slipgate
demo info` with 0 errors, and played to its end by ezQuake.
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import Fail, Procs, free_udp_port, read, run_main, wait_for  # noqa: E402
from relay_peers import (GAMES, check_qw_decoding, check_qwd_shape, check_traffic,  # noqa: E402
                         copy_game_dirs, game_data, play_qwd, qw_rcon, start_qw_server,
                         stats_session)

HOP_CONF = """route {name} {{
    listen 127.0.0.1:{port}
    server 127.0.0.1:{srv}
    protocol qw
    reencode always
    route_by prx
    prx_allow 127.0.0.1:{allow}
    prx_ping_interval 5s
    filter record {{
        directory {demos}
        name %server%-%map%-%client%
    }}
}}
"""


def pingstatus(port, dest):
    """The ping hop `port` reports for `dest` in its `pingstatus` answer
    (None: no answer, not listed, or not measured yet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
        c.settimeout(0.5)
        c.sendto(b"\xff\xff\xff\xffpingstatus", ("127.0.0.1", port))
        try:
            data = c.recv(2048)
        except OSError:
            return None
    if not data.startswith(b"\xff\xff\xff\xffn"):
        return None
    for i in range(5, len(data) - 7, 8):
        p, ms = struct.unpack_from("<HH", data, i + 4)
        if data[i:i + 4] == bytes([127, 0, 0, 1]) and p == dest and ms != 0xffff:
            return ms
    return None


def start_client(work, first, second, srv_port, limit, procs):
    home = os.path.join(work, "ezquake-home")
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy")
    qw = os.path.join(home, ".config", "ezquake", "qw")
    os.makedirs(qw, exist_ok=True)
    # The client leaves on a server print (see relay_peers.start_qw_client).
    with open(os.path.join(qw, "sgquit.cfg"), "w") as f:
        f.write(f'alias sgquit "connect 127.0.0.1:{free_udp_port()}"\n'
                'msg_trigger sgquit "slipgate asks you to leave" -l 3\n')
    log = os.path.join(work, "client.log")
    return procs.start("client", ["xvfb-run", "-a", "-s", "-screen 0 640x480x24",
                                  GAMES["qw"]["client"], "-basedir",
                                  os.path.join(home, ".config", "ezquake"), "-nosound",
                                  "-condebug", os.path.join(work, "console.log"),
                                  "-clientport", str(free_udp_port()),
                                  "+set", "vid_fullscreen", "0", "+set", "vid_width", "320",
                                  "+set", "vid_height", "240", "+set", "name", "peers",
                                  "+exec", "sgquit.cfg",
                                  # the best-route search's query of each node, printed
                                  "+sb_proxygetpings", f"127.0.0.1:{first}",
                                  "+sb_proxygetpings", f"127.0.0.1:{second}",
                                  "+set", "cl_proxyaddr",
                                  f"127.0.0.1:{first}@127.0.0.1:{second}",
                                  "+connect", f"127.0.0.1:{srv_port}"], log, limit, env=env), log


def check_demo(work, data, slipgate, procs, name, demos, dest):
    """Hop `name`'s recording: one .qwd, named (`%server%`) after the
    session's real destination 127.0.0.1:`dest`, of the shape ezQuake
    writes, read by `slipgate demo info` with 0 errors and the player in it,
    played by ezQuake to its end."""
    qwd = sorted(f for f in os.listdir(demos) if f.endswith(".qwd")) if os.path.isdir(demos) else []
    if len(qwd) != 1:
        raise Fail(f"hop {name} recorded {len(qwd)} .qwd, want 1: {qwd}")
    if not qwd[0].startswith(f"127.0.0.1_{dest}-"):
        raise Fail(f"hop {name}'s recording {qwd[0]} does not name its destination "
                   f"127.0.0.1:{dest}")
    path = os.path.join(demos, qwd[0])
    reads, cmds, secs = check_qwd_shape(path, False)
    info = subprocess.run([slipgate, "demo", "info", path], capture_output=True, text=True,
                          timeout=60)
    if info.returncode != 0 or not re.search(r"^errors:\s+0$", info.stdout, re.M) or \
            "peers" not in info.stdout:
        raise Fail(f"slipgate demo info {qwd[0]} (hop {name}): {info.returncode}\n"
                   f"{info.stdout}{info.stderr}")
    text = play_qwd(work, data, path, procs, name)
    frames = re.search(r"(\d+) frames\s+[\d.]+ seconds", text).group(1)
    return (f"{qwd[0]}: {reads} server messages, {cmds} commands, {secs:.1f} s, 0 errors in "
            f"demo info, played to its end ({frames} frames)")


def run(case, seconds):
    if case != "chain":
        raise Fail(f"unknown case {case} (chain)")
    missing = [p for p in (GAMES["qw"]["server"], GAMES["qw"]["client"]) if not os.path.exists(p)]
    if missing:
        raise Fail(f"not installed: {missing}")
    maker = os.environ.get("SG_PEERS_DATA")
    slipgate = os.environ.get("SLIPGATE")
    if not maker or not os.path.exists(maker) or not slipgate:
        raise Fail("SG_PEERS_DATA and SLIPGATE must be set")
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="slipgate-prx-") as work:
        try:
            chain(work, game_data(maker, work), slipgate, seconds, procs)
        finally:
            procs.stop_all()


def chain(work, data, slipgate, seconds, procs):
    limit = seconds + 90
    srv, pa, pb = free_udp_port(), free_udp_port(), free_udp_port()
    copy_game_dirs(data, work, ["mvdsv-base", "ezquake-home"])
    srv_log = start_qw_server(work, srv, limit, procs)
    hops = {}
    # B (the second hop) reaches the server; A (the first) reaches only B.
    for name, port, allow in (("b", pb, srv), ("a", pa, pb)):
        conf, log = os.path.join(work, f"{name}.conf"), os.path.join(work, f"{name}.log")
        stats, demos = os.path.join(work, f"{name}.json"), os.path.join(work, f"demos-{name}")
        with open(conf, "w") as f:
            f.write(HOP_CONF.format(name=name, port=port, srv=srv, allow=allow, demos=demos))
        p = procs.start(name, [slipgate, "-c", conf, "--stats", stats, "+set",
                               "stats_interval", "1s"], log, limit)
        if not wait_for(lambda: "listening on" in read(log), 10):
            raise Fail(f"slipgate {name} did not start:\n{read(log)}")
        hops[name] = (p, log, stats, demos)
    # Each hop pings its allowed destination (a the hop b, b the server) as
    # soon as it starts: ezQuake asks once both are measured.
    for name, port, dest in (("b", pb, srv), ("a", pa, pb)):
        if not wait_for(lambda: pingstatus(port, dest) is not None, 15, 0.3):
            raise Fail(f"hop {name} reports no ping to 127.0.0.1:{dest} in its pingstatus:\n"
                       f"{read(hops[name][1])[-1500:]}")
    cli, cli_log = start_client(work, pa, pb, srv, limit, procs)
    if not wait_for(lambda: "peers entered the game" in read(srv_log), 45):
        raise Fail(f"the client did not enter the game through the chain\n--- server ---\n"
                   f"{read(srv_log)[-1500:]}\n--- a ---\n{read(hops['a'][1])[-2000:]}\n"
                   f"--- b ---\n{read(hops['b'][1])[-2000:]}\n--- client ---\n"
                   f"{read(cli_log)[-1500:]}")
    dests = {"a": pb, "b": srv}
    for name, dest in (("a", f"127.0.0.1:{pb}"), ("b", f"127.0.0.1:{srv}")):
        if not re.search(r"prx chain: .* -> " + re.escape(dest), read(hops[name][1])):
            raise Fail(f"hop {name} does not name its next hop {dest}:\n{read(hops[name][1])}")
    # ezQuake printed each node's pingstatus answer (its own parser's view).
    con = read(os.path.join(work, "console.log"))
    lists = re.findall(r"List:\n(.*?)End of list\.", con, re.S)
    probes = []
    for (name, dest), text in zip((("a", pb), ("b", srv)), lists):
        m = re.search(r"127\.\s*0\.\s*0\.\s*1:\s*(\d+)\s+(\d+)", text)
        if not m or int(m.group(1)) != dest:
            raise Fail(f"ezQuake's sb_proxygetpings of hop {name} does not list 127.0.0.1:{dest}: "
                       f"{text!r}")
        probes.append(f"{name} -> {dest}: {m.group(2)} ms")
    if len(probes) != 2:
        raise Fail(f"ezQuake printed {len(lists)} pingstatus lists, want 2:\n{con[-2000:]}")
    marks = {n: len(read(h[1]).splitlines()) for n, h in hops.items()}
    # The server's view of the player's userinfo (mvdsv's `user` command).
    info = ""
    for uid in range(1, 9):  # mvdsv's `user` takes a userid; the player is one of the first
        info = qw_rcon(srv, f"user {uid}").decode("latin-1", "replace")
        if "peers" in info:
            break
    time.sleep(seconds)
    counts = {n: check_traffic(h[1], marks[n], seconds) for n, h in hops.items()}
    if re.search(r"peers left|timed out|Client .* removed|peers dropped", read(srv_log)):
        raise Fail(f"the client left the server early:\n{read(srv_log)[-1500:]}")
    # The player quits normally: the server sees it leave, each hop its drop.
    qw_rcon(srv, "say slipgate asks you to leave")
    if not wait_for(lambda: re.search(r"peers left the game|peers dropped|Client peers removed",
                                      read(srv_log)), 10):
        raise Fail(f"the server did not see the client leave:\n{read(srv_log)[-1500:]}")
    for name, h in hops.items():
        if not wait_for(lambda: "; the client disconnected" in read(h[1]), 10):
            raise Fail(f"hop {name} did not see the client's drop:\n{read(h[1])[-2000:]}")
    procs.stop(cli, signal.SIGTERM, 5, group=True)
    out = []
    for name in ("a", "b"):
        p, log, stats, demos = hops[name]
        rc = procs.stop(p, signal.SIGTERM, 10)
        if rc != 0:
            raise Fail(f"slipgate {name} exited {rc}:\n{read(log)[-2000:]}")
        route, sessions = stats_session(stats)
        s = max(sessions, key=lambda x: x["counters"]["c2s_packets"])
        drops = dict(route["counters"]["drops"])
        # The quit connects (through the chain) to a port no hop allows: B refuses it.
        refused = drops.pop("prx_not_allowed")
        if any(drops.values()) or refused != (1 if name == "b" else 0):
            raise Fail(f"hop {name} drops: {route['counters']['drops']}")
        got = check_qw_decoding(s, sessions, "full")
        out.append(f"hop {name}: {s['counters']['c2s_packets']} up, "
                   f"{s['counters']['s2c_packets']} down{got}, "
                   + check_demo(work, data, slipgate, procs, name, demos, dests[name]))
    if "qwfwd" not in info or "prx" in info:
        raise Fail(f"the server's view of the player's userinfo has no *qwfwd stamp "
                   f"(or still a prx key): {info!r}")
    print(f"PASS prx_peers@chain: ezQuake -> a -> b -> mvdsv for {seconds} s "
          f"({len(counts['a'])} stats lines on a, {len(counts['b'])} on b); "
          + "; ".join(out) + "; the server saw "
          + repr(re.search(r"\*qwfwd\W+\S+", info).group(0)) + "; the quit's reconnect to an unlisted "
          "port refused by b; ezQuake's pingstatus queries: " + ", ".join(probes))


if __name__ == "__main__":
    sys.exit(run_main(__doc__, 1, 20, run, lambda case: f"prx_peers@{case}"))
