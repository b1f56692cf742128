#!/usr/bin/env python3
"""Real-peer test for the DarkPlaces protocol family: Nexuiz (Debian's
`nexuiz` and `nexuiz-server`, ../shared/PEERS.md), whose server speaks
DarkPlaces' own protocol DP7 by default, through slipgate.

    nexuiz_peers.py CASE [--seconds N]

CASE: `nq` (`-p nq`) or `auto` (protocol auto: DarkPlaces' client sends a
bare `getchallenge` first, then its connectionless `connect`; the server
answers with a connectionless `accept`), or `quake`: the server speaks the
Quake protocol (`sv_protocolname QUAKE`, protocol 15 with DarkPlaces' own
messages inside it) and slipgate runs `-p nq` with `reencode always` and a
`record` filter, or `dp7`: the server's default protocol DP7 with `-p nq`,
`reencode always`, a filter chain (rewrite and inject both ways), `record`
and `pcap`.

The server (`darkplaces-server -nexuiz`, two bots, map aggressor) and the
real client (`darkplaces -nexuiz`, headless under Xvfb, moving and firing
through a config of its own) talk through slipgate on 127.0.0.1 with an
`inspect` filter writing JSON.  What a pass means: the client entered the
game through slipgate (it comes in as a spectator and joins: the server
says it is playing, and its `status` lists it at slipgate's address), stayed for N seconds with traffic both ways every second, then
left as a player does (`disconnect`, `quit`: the server drops it); slipgate
decoded the session with its NetQuake codec (never Quake 3), counted 0
decode errors, and said once what it decoded: the session's end line and
`--stats` name DP7 (and count the CSQC bodies it keeps raw), nothing relayed
undecoded; inspect shows the connectionless handshake and the server's
texts; slipgate exited 0 on SIGTERM.  Everything runs on 127.0.0.1 with free ports, under time limits,
ended by PID.  For `quake`, instead of the relayed report: slipgate decoded
protocol 15 with 0 errors and nothing relayed undecoded (the CSQC section
and the game's temp entities placed as on DP7), every datagram it rebuilt came out identical
(no filter changes anything), inspect saw the server's texts past the
sign-on, and the recorded .dem (one) plays to its end headless in DarkPlaces
(`-benchmark`: a frame count near the demo's svc_time count, no
Host_Error).  For `dp7`: slipgate decoded DP7 (protocol 3504) with 0
errors and nothing relayed undecoded (the CSQC bodies, which only the
game's QuakeC reads, counted and named once); every rebuilt datagram is
identical to what its sender sent unless it carries a message a filter
changed, injected or removed; the player's rewritten chat and the injected
chats reached the server, the rewritten and injected prints the client;
the recording plays to its end as above; the capture decodes with
`slipgate pcap decode` with 0 errors, every message rebuilt identical; and
the client's own demo reads with `slipgate demo info` with 0 errors and
`demo reencode` writes it back byte for byte.  `dp6`: the same chain and
checks with the Nexuiz server on DP6 (`sv_protocolname DP6`, protocol 3503).
`dpserver`: DarkPlaces' own server on Quake's placeholder data (relay_peers'
game_data from ../shared/peers, the map `box` loaded by the server's
console) on its default protocol DP7, with a DarkPlaces client in Quake mode
(relay_peers' rounds: moving, firing, chatting), the same chain and checks
(the rewritten print is the game's "entered the box", rewritten every time
it comes); `dpserver-quake`: the same with the server on protocol 15
(`sv_protocolname QUAKE`).  (SG_PEERS_DATA names the data generator,
SG_PEERS_CACHE where its output is kept.)
Exit 77 (skip) only when Nexuiz or Xvfb is not installed,
saying so.
"""
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import Fail, Procs, free_udp_port, read, run_main, wait_for  # noqa: E402
from relay_peers import (NQ_QUIT_CFG, check_traffic, copy_game_dirs, game_data,  # noqa: E402
                         nq_console as console, nq_move_cfg, stats_session)

SERVER = "/usr/games/darkplaces-server"
CLIENT = "/usr/games/darkplaces"
BASEDIR = "/usr/share/games/nexuiz"

CONF = """route nexuiz {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
{protocol}    filter inspect {{
        level messages
        format json
        output "{work}/inspect.json"
    }}
{record}}}
"""

# The player's rounds: join the game (a Nexuiz client comes in as a
# spectator), run and fire, strafe, jump, turn; each step schedules the next
# with `defer` (seconds), so the console never waits.
MOVE_CFG = """\
alias peers1 "cmd join;+forward;+attack;defer 1 peers2"
alias peers2 "-attack;-forward;+moveleft;+jump;defer 1 peers3"
alias peers3 "-moveleft;-jump;+right;+back;defer 1 peers4"
alias peers4 "-right;-back;+moveright;defer 1 peers5"
alias peers5 "-moveright;exec peersquit.cfg;defer 1 peers1"
"""
# dp7: the player also chats (rewritten on the way to the server).
MOVE_CFG_DP7 = MOVE_CFG.replace('alias peers4 "', 'alias peers4 "say hello badword;')

DP7_FILTERS = """    reencode always
    filter rewrite {{
        replace "{greeting}" "{greeting} through slipgate"
        kinds print chat
        direction to_client
    }}
    filter rewrite {{
        replace "badword" "goodword"
        kinds chat
        direction to_server
    }}
    filter inject {{
        text "slipgate injected %session%\\n"
        kind print
        every 2s
    }}
    filter inject {{
        text "slipgate says hi %session%"
        kind chat
        direction to_server
        after 3s
        every 3s
        count 3
    }}
    filter pcap {{
        file "{work}/capture.pcap"
    }}
"""


RECORD = """    filter record {{
        directory {work}/demos
    }}
"""


def json_lines(text):
    """The lines of a JSON-lines file: split at newlines only (str.splitlines
    also splits at U+0085 and other separators a game's text may hold)."""
    return [x for x in text.split("\n") if x]


# The games: Nexuiz's own data, or (dpserver) the placeholder Quake data of
# ../shared/peers (relay_peers' game_data) under DarkPlaces' Quake mode: its
# base directory, the engine's game option, the game directory of a
# -userdir, the server's line for a player who joined, the server's print
# the dp7 chain rewrites on its way to the client.
NEXUIZ = {"base": BASEDIR, "args": ["-nexuiz"], "dir": "data", "name": "Nexuiz",
          "joined": r"peers\S* is playing now", "greeting": "playing now"}
QUAKE_DATA = {"args": [], "dir": "id1", "name": "DarkPlaces-Quake",
              "joined": r"peers entered the box", "greeting": "entered the box"}
# The cases run through the dp7 chain, and the protocol each server speaks
# (its sv_protocolname, none for the default DP7).
# (No DP5: this DarkPlaces' server drops its own client on DP5 a few seconds
# in, without slipgate too: "SV_ReadClientMessage: unknown command char 0";
# the client's DP5 move is followed by moves in DP6's form, cl_input.c's
# DP5 case falling through into DP6's.)
CHAIN_PROTOCOLS = {"dp7": (3504, None), "dp6": (3503, "DP6"),
                   "dpserver": (3504, None), "dpserver-quake": (15, "QUAKE")}
CASES = ("nq", "auto", "quake") + tuple(CHAIN_PROTOCOLS)


def run_case(case, seconds):
    if case not in CASES:
        raise Fail(f"unknown case {case} ({', '.join(CASES)})")
    need = [SERVER, CLIENT, shutil.which("xvfb-run")] + \
        ([shutil.which("fteqcc")] if case.startswith("dpserver")
         else [os.path.join(BASEDIR, "data")])
    missing = [p for p in need if not p or not os.path.exists(p)]
    if missing:
        print(f"SKIP: not installed: {missing} (apt-get install darkplaces darkplaces-server "
              f"{'fteqcc' if case.startswith('dpserver') else 'nexuiz nexuiz-server'} "
              "xvfb xauth)")
        sys.exit(77)
    slipgate = os.environ.get("SLIPGATE")
    if not slipgate or not os.access(slipgate, os.X_OK):
        raise Fail("SLIPGATE is not set to the slipgate binary")
    maker = os.environ.get("SG_PEERS_DATA")
    if case.startswith("dpserver") and (not maker or not os.path.exists(maker)):
        raise Fail(f"SG_PEERS_DATA={maker!r}: the game data generator is missing")
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="slipgate-nexuiz-") as work:
        try:
            g = NEXUIZ
            if case.startswith("dpserver"):
                copy_game_dirs(game_data(maker, work), work, ["nq-base"])
                g = dict(QUAKE_DATA, base=os.path.join(work, "nq-base"))
            run(case, seconds, work, slipgate, procs, g)
        finally:
            procs.stop_all()


def run(case, seconds, work, slipgate, procs, g):
    # (dp5, dp6, dpserver, dpserver-quake: through the dp7 chain)
    chain = "dp7" if case in CHAIN_PROTOCOLS else case
    protocol_name = CHAIN_PROTOCOLS.get(case, (0, "QUAKE" if case == "quake" else None))[1]
    limit = seconds + 150
    srv_port, px_port = free_udp_port(), free_udp_port()

    # The server, its console on a pipe (`status`), its own home.
    srv_home = os.path.join(work, "srv-home")
    os.makedirs(srv_home)
    srv_log = os.path.join(work, "server.log")
    f = open(srv_log, "wb")
    srv = subprocess.Popen(["timeout", "-k", "5", str(limit), "stdbuf", "-oL", SERVER]
                           + g["args"] + ["-basedir", g["base"], "-userdir", srv_home,
                                          "+set", "net_address", "127.0.0.1",
                                          "+set", "port", str(srv_port), "+set", "sv_public", "0"]
                           + (["+set", "minplayers", "3", "+set", "bot_number", "2"]
                              if g is NEXUIZ else [])
                           + (["+set", "sv_protocolname", protocol_name] if protocol_name
                              else [])
                           # (dp7: the chats through slipgate are not a flood)
                           + (["+set", "g_chat_flood_spl", "0"]
                              if chain == "dp7" and g is NEXUIZ else [])
                           # (the Quake data has no quake.rc whose `stuffcmds` would
                           # run a `+map`: the map comes by the console below)
                           + (["+map", "aggressor"] if g is NEXUIZ else []),
                           stdin=subprocess.PIPE, stdout=f, stderr=subprocess.STDOUT,
                           env=dict(os.environ, HOME=srv_home), start_new_session=True)
    procs.procs.append(("server", srv, f))
    if not wait_for(lambda: re.search(r"Server listening on address 127\.0\.0\.1:%d" % srv_port,
                                      read(srv_log)), 60):
        raise Fail(f"the {g['name']} server did not start:\n{read(srv_log)[-2000:]}")

    def status():
        mark = len(read(srv_log))
        console(srv, "status")
        time.sleep(1)
        return read(srv_log)[mark:]

    if g is not NEXUIZ:
        console(srv, "map box")
        if not wait_for(lambda: re.search(r"map:\s+box", status()), 15):
            raise Fail(f"the server did not load the map:\n{read(srv_log)[-2000:]}")

    conf = os.path.join(work, "slipgate.conf")
    with open(conf, "w") as cf:
        if chain in ("quake", "dp7"):
            os.makedirs(os.path.join(work, "demos"))
        cf.write(CONF.format(px=px_port, srv=srv_port, work=work,
                             protocol={"nq": "    protocol nq\n", "auto": "",
                                       "quake": "    protocol nq\n    reencode always\n",
                                       "dp7": "    protocol nq\n"
                                       + DP7_FILTERS.format(work=work,
                                                            greeting=g["greeting"])}[chain],
                             record=RECORD.format(work=work) if chain in ("quake", "dp7")
                             else ""))
    px_log, stats = os.path.join(work, "slipgate.log"), os.path.join(work, "stats.json")
    px = procs.start("slipgate", [slipgate, "-c", conf, "--stats", stats, "+set",
                                  "stats_interval", "1s"], px_log, limit)
    if not wait_for(lambda: "listening on" in read(px_log), 10):
        raise Fail(f"slipgate did not start:\n{read(px_log)}")

    # The client, with a home of its own (its config and the player's rounds).
    cl_home = os.path.join(work, "cl-home")
    data = os.path.join(cl_home, g["dir"])
    os.makedirs(data)
    with open(os.path.join(data, "peersmove.cfg"), "w") as mf:
        # (Quake's game has no `cmd join`: relay_peers' rounds, which chat too)
        mf.write(nq_move_cfg() if g is not NEXUIZ else MOVE_CFG_DP7 if chain == "dp7"
                 else MOVE_CFG)
    quit_cfg = os.path.join(data, NQ_QUIT_CFG)
    with open(quit_cfg, "w") as qf:
        qf.write("\n")
    cl_log = os.path.join(work, "client.log")
    cli = procs.start("client", ["xvfb-run", "-a", "-s", "-screen 0 640x480x24", CLIENT]
                      + g["args"] + ["-basedir", g["base"], "-userdir", cl_home,
                                 "-nosound", "-window", "-width", "320", "-height", "240",
                                 "+set", "cl_maxfps", "20", "+set", "_cl_name", "peers",
                                 # (dp7: the client records its own demo too)
                                 "+set", "cl_autodemo", "1" if chain == "dp7" else "0",
                                 "+set", "cl_port", str(free_udp_port()),
                                 "+exec", "peersmove.cfg", "+connect", f"127.0.0.1:{px_port}",
                                 "+peers1"],
                      cl_log, limit, env=dict(os.environ, HOME=cl_home,
                                              SDL_AUDIODRIVER="dummy"))

    entered = None
    end = time.time() + 90
    while time.time() < end and cli.poll() is None:
        st = status()
        m = re.search(r"127\.0\.0\.1:(\d+)\s+\d+\s+\d+\s+\d+\s+#\d+\s+peers", st) or \
            re.search(r"peers.*\n?.*127\.0\.0\.1:(\d+)", st)
        if m and re.search(g["joined"], read(srv_log)):
            entered = int(m.group(1))
            break
    if entered is None:
        raise Fail(f"the client did not enter the game through slipgate\n--- server ---\n"
                   f"{read(srv_log)[-2500:]}\n--- slipgate ---\n{read(px_log)[-2000:]}\n"
                   f"--- client ---\n{read(cl_log)[-2000:]}")
    if entered == px_port:
        raise Fail("the server sees the client at slipgate's listening port?")

    # In the game: traffic both ways every second; the player stays.
    mark = len(read(px_log).splitlines())
    time.sleep(seconds)
    try:
        check_traffic(px_log, mark, seconds, window=3, slack=3)  # (software GL: slow frames)
    except Fail as e:  # whether the client or the server went quiet: their own words
        raise Fail(f"{e}\n--- client ---\n{read(cl_log)[-1500:]}\n--- server ---\n"
                   f"{read(srv_log)[-1500:]}")
    st = status()
    if "peers" not in st or cli.poll() is not None:
        raise Fail(f"the client left the game early (client exit status {cli.poll()}):\n"
                   f"{st}\n{read(srv_log)[-1500:]}")

    # The player leaves: `disconnect`, `quit`.
    with open(quit_cfg, "w") as qf:
        qf.write("disconnect\nquit\n")
    exited = wait_for(lambda: cli.poll() is not None, 30)
    procs.stop(cli, signal.SIGTERM, 5, group=True)
    if not exited:
        raise Fail(f"the client did not quit:\n{read(cl_log)[-1500:]}")
    if not wait_for(lambda: "peers" not in status(), 15):
        raise Fail(f"the server still lists the player:\n{read(srv_log)[-1500:]}")
    rc = procs.stop(px, signal.SIGTERM, 10)
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    console(srv, "quit")
    procs.stop(srv, signal.SIGTERM, 10)

    route, sessions = stats_session(stats)
    for x in sessions:
        if x.get("codec") not in (None, "nq"):
            raise Fail(f"a session was taken for {x.get('codec')}: {x}")
    s = max(sessions, key=lambda x: x["counters"]["c2s_packets"])
    d = s.get("decode")
    if s.get("codec") != "nq" or not d:
        raise Fail(f"the game's session was not decoded by the NetQuake codec: {s}")
    if d["errors"] or s.get("first_error"):
        raise Fail(f"decode errors: {d}, first: {s.get('first_error')}")
    info = s.get("decode_info", "")
    if case == "quake":
        return check_quake(work, slipgate, procs, s, d, info, seconds, entered)
    if chain == "dp7":
        return check_dp7(case, g, work, slipgate, procs, s, d, info, seconds, entered, srv_log,
                         cl_log, px_log)
    m = re.search(r"NetQuake protocol (3504) \(DarkPlaces\)", info)
    if not m or "not decoded" in info or "undecoded" in info:
        raise Fail(f"--stats does not report DP7 decoded: {info!r}")
    said = re.findall(r"NetQuake protocol 3504 \(DarkPlaces\)", read(px_log))
    if len(said) != 1:
        raise Fail(f"the log says {len(said)} times what is not decoded (once expected):\n"
                   f"{read(px_log)[-2000:]}")
    frames = []
    for ln in json_lines(read(os.path.join(work, "inspect.json"))):
        frames.append(json.loads(ln))
    names = [m.get("name") for f in frames for m in f.get("msgs", [])]
    texts = [m.get("text") for f in frames if f.get("dir") == "s2c"
             for m in f.get("msgs", []) if m.get("text")]
    if "connectionless" not in names or not texts:
        raise Fail(f"inspect shows no handshake or no server text: {sorted(set(names))[:20]}")
    print(f"PASS nexuiz_peers@{case}: the Nexuiz client in the game through slipgate for "
          f"{seconds} s ({'-p nq' if case == 'nq' else 'protocol auto'}), then disconnect and "
          f"quit; the server saw it at 127.0.0.1:{entered}; {s['counters']['c2s_packets']} "
          f"datagrams up, {s['counters']['s2c_packets']} down; decoded by the NetQuake codec "
          f"with 0 errors, said once as {info!r}; {len(texts)} server texts seen "
          f"(the first: {texts[0][:60]!r})")


def check_dp7(case, g, work, slipgate, procs, s, d, info, seconds, entered, srv_log, cl_log,
              px_log):
    """The DP7 session: decoded, rebuilt identical but for the filters'
    changes, the filters' work seen by both peers, recorded and played,
    the capture decoded."""
    number = CHAIN_PROTOCOLS[case][0]
    proto = fr"NetQuake protocol {number}" + (r" \(DarkPlaces\)" if number != 15 else r"\b")
    if not re.search(proto, info) or "not decoded" in info or "undecoded" in info:
        raise Fail(f"--stats does not report protocol {number} decoded: {info!r}")
    said = re.findall(proto + r"[^\n]*", read(px_log))
    if len(said) != 1 or (re.search(r"CSQC bodies", info) and "CSQC bodies" not in said[0]):
        raise Fail(f"the log says {len(said)} times what it decoded (once expected): {said}")
    frames = [json.loads(x) for x in json_lines(read(os.path.join(work, "inspect.json")))]
    marked = [f for f in frames if f.get("frame") == "message" and f.get("reencoded") and
              any(m.get("changed") or m.get("injected") or m.get("removed")
                  for m in f.get("msgs", []))]
    if d.get("reencoded", 0) == 0 or d["reencoded"] - d["reencode_identical"] > len(marked):
        raise Fail(f"{d['reencoded'] - d['reencode_identical']} rebuilt datagrams differ from "
                   f"their originals, but filters changed {len(marked)}: {d}")
    srv, cli = read(srv_log), read(cl_log)
    good, hi = len(re.findall(r"hello goodword", srv)), len(re.findall(r"slipgate says hi", srv))
    inj = len(re.findall(r"slipgate injected", cli))
    # (the greeting rewritten every time it came)
    rew = f"{g['greeting']} through slipgate" in cli and \
        not re.search(re.escape(g["greeting"]) + "(?! through slipgate)", cli)
    if good < 1 or "badword" in srv or hi < 3 or inj < 3 or not rew:
        raise Fail(f"filters: {good} rewritten chats at the server (badword there: "
                   f"{'badword' in srv}), {hi} injected chats there; {inj} injected prints at "
                   f"the client, rewritten print there: {rew}\n--- server ---\n{srv[-1500:]}"
                   f"\n--- client ---\n{cli[-1500:]}")
    cap = os.path.join(work, "capture.pcap")
    r = subprocess.run([slipgate, "pcap", "decode", cap], capture_output=True, text=True,
                       timeout=60)
    sess = re.findall(r"(\d+) messages \((\d+) rebuilt byte-identical\), \d+ control, "
                      r"\d+ rejected, (\d+) errors; " + proto + r"([^\n]*)", r.stderr)
    if r.returncode != 0 or not sess or any(x[0] != x[1] or x[2] != "0" or "undecoded" in x[3]
                                            for x in sess) \
            or not r.stderr.rstrip().endswith(" 0 errors"):
        raise Fail(f"pcap decode of the capture (exit {r.returncode}):\n{r.stderr[-2000:]}")
    m = sess[0]
    played = play_demo(work, slipgate, procs, g)
    own = client_demo(work, slipgate, g, number)
    print(f"PASS nexuiz_peers@{case}: the {g['name']} client in the game through slipgate for "
          f"{seconds} s on protocol {number} ({CHAIN_PROTOCOLS[case][1] or 'DP7'}"
          f"{', darkplaces-server on Quake data' if g is not NEXUIZ else ''}) "
          f"(-p nq, reencode always, rewrite and inject both ways, record, "
          f"pcap); the server saw it at 127.0.0.1:{entered}; {s['counters']['c2s_packets']} "
          f"datagrams up, {s['counters']['s2c_packets']} down; decoded as {info!r} with 0 "
          f"errors; {d['reencoded']} datagrams rebuilt, {d['reencode_identical']} identical, "
          f"{len(marked)} changed by filters; {good} rewritten and {hi} injected chats at the "
          f"server, {inj} injected prints at the client; the capture decoded ({len(sess)} "
          f"sessions, the first {m[0]} messages, {m[1]} rebuilt identical, 0 errors); "
          f"{played}; {own}")


def client_demo(work, slipgate, g, number):
    """The client's own demo of the session (DarkPlaces writes the CSQC
    program into it as blocks of its own): `slipgate demo info` reads it
    with 0 errors and `demo reencode` writes it back byte for byte."""
    data = os.path.join(work, "cl-home", g["dir"])
    own = [os.path.join(d, n) for d, _, names in os.walk(data) for n in names
           if n.endswith(".dem")]
    if len(own) != 1:
        raise Fail(f"the client wrote {own} (its one demo expected)")
    r = subprocess.run([slipgate, "demo", "info", own[0]], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0 or "errors:       0 decode" not in r.stdout or \
            str(number) not in r.stdout:
        raise Fail(f"slipgate demo info reads the client's demo with errors:\n{r.stdout}")
    again = os.path.join(work, "own-again.dem")
    r = subprocess.run([slipgate, "demo", "reencode", own[0], again], capture_output=True,
                       text=True, timeout=60)
    with open(own[0], "rb") as a, open(again, "rb") as b:
        same = a.read() == b.read()
    if r.returncode != 0 or not same:
        raise Fail(f"demo reencode of the client's demo (exit {r.returncode}, identical "
                   f"{same}):\n{r.stdout}{r.stderr}")
    return (f"the client's own demo ({os.path.getsize(own[0])} bytes) read with 0 errors and "
            f"rebuilt byte for byte ({(r.stdout + r.stderr).strip()})")


def play_demo(work, slipgate, procs, g):
    """The one recording: read by `slipgate demo info` with 0 errors, played
    to its end headless by DarkPlaces; what it was, in words."""
    demos = [os.path.join(work, "demos", n) for n in os.listdir(os.path.join(work, "demos"))
             if n.endswith(".dem")]
    if len(demos) != 1:
        raise Fail(f"record wrote {demos} (one .dem expected)")
    info_out = subprocess.run([slipgate, "demo", "info", demos[0]], capture_output=True,
                              text=True, timeout=60)
    if info_out.returncode != 0 or "errors:       0 decode" not in info_out.stdout:
        raise Fail(f"slipgate demo info reads the recording with errors:\n{info_out.stdout}")
    dump = subprocess.run([slipgate, "demo", "dump", demos[0]], capture_output=True, text=True,
                          timeout=60).stdout
    times = len(re.findall(r"\bsvc_time\b", dump))
    home = os.path.join(work, "play-home")
    os.makedirs(os.path.join(home, g["dir"]))
    shutil.copy(demos[0], os.path.join(home, g["dir"], "sgplay.dem"))
    log = os.path.join(work, "play.log")
    p = procs.start("play", ["xvfb-run", "-a", "-s", "-screen 0 640x480x24", CLIENT]
                    + g["args"] + ["-basedir", g["base"], "-userdir", home, "-nosound", "-window",
                             "-width", "320", "-height", "240", "+scr_refresh", "0",
                             "-benchmark", "sgplay"],
                    log, 150, env=dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy"))
    ended = wait_for(lambda: p.poll() is not None, 140)
    procs.stop(p, signal.SIGTERM, 5, group=True)
    m = re.search(r"(\d+) frames\s+([\d.]+) seconds", read(log))
    if not ended or not m or int(m.group(1)) < times - 5 or "Host_Error" in read(log):
        raise Fail(f"DarkPlaces did not play the recording to its end ({times} svc_time):\n"
                   f"{read(log)[-2500:]}")
    return (f"the recording ({os.path.getsize(demos[0])} bytes, {times} svc_time) played "
            f"headless by DarkPlaces: {m.group(1)} frames")


def check_quake(work, slipgate, procs, s, d, info, seconds, entered):
    """The Quake-protocol session: decoded, rebuilt identical, recorded, played."""
    if not re.search(r"NetQuake protocol 15\b", info) or "not decoded" in info \
            or "undecoded" in info:
        raise Fail(f"--stats does not report protocol 15 decoded, all of it: {info!r}")
    if d.get("reencoded", 0) == 0 or d.get("reencoded") != d.get("reencode_identical"):
        raise Fail(f"rebuilt datagrams not all identical (no filter changes any): {d}")
    texts = []
    for ln in json_lines(read(os.path.join(work, "inspect.json"))):
        f = json.loads(ln)
        if f.get("dir") == "s2c":
            texts += [m["text"] for m in f.get("msgs", []) if m.get("text")]
    if not any("csqc_progname" in t for t in texts) or len(texts) < 5:
        raise Fail(f"inspect shows too few server texts: {texts[:10]}")
    demos = [os.path.join(work, "demos", n) for n in os.listdir(os.path.join(work, "demos"))
             if n.endswith(".dem")]
    if len(demos) != 1:
        raise Fail(f"record wrote {demos} (one .dem expected)")
    info_out = subprocess.run([slipgate, "demo", "info", demos[0]], capture_output=True,
                              text=True, timeout=60)
    if info_out.returncode != 0 or "errors:       0 decode" not in info_out.stdout:
        raise Fail(f"slipgate demo info reads the recording with errors:\n{info_out.stdout}")
    # its svc_time messages (a frame each in playback), as slipgate's dump names them
    dump = subprocess.run([slipgate, "demo", "dump", demos[0]], capture_output=True, text=True,
                          timeout=60).stdout
    times = len(re.findall(r"\bsvc_time\b", dump))
    home = os.path.join(work, "play-home")
    os.makedirs(os.path.join(home, "data"))
    shutil.copy(demos[0], os.path.join(home, "data", "sgplay.dem"))
    log = os.path.join(work, "play.log")
    p = procs.start("play", ["xvfb-run", "-a", "-s", "-screen 0 640x480x24", CLIENT, "-nexuiz",
                             "-basedir", BASEDIR, "-userdir", home, "-nosound", "-window",
                             "-width", "320", "-height", "240", "+scr_refresh", "0",
                             "-benchmark", "sgplay"],
                    log, 150, env=dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy"))
    ended = wait_for(lambda: p.poll() is not None, 140)
    procs.stop(p, signal.SIGTERM, 5, group=True)
    m = re.search(r"(\d+) frames\s+([\d.]+) seconds", read(log))
    if not ended or not m or int(m.group(1)) < times - 5 or "Host_Error" in read(log):
        raise Fail(f"DarkPlaces did not play the recording to its end ({times} svc_time):\n"
                   f"{read(log)[-2500:]}")
    print(f"PASS nexuiz_peers@quake: the Nexuiz client in the game through slipgate for "
          f"{seconds} s on the Quake protocol (`sv_protocolname QUAKE`, -p nq, reencode always, "
          f"record); the server saw it at 127.0.0.1:{entered}; {s['counters']['c2s_packets']} "
          f"datagrams up, {s['counters']['s2c_packets']} down; decoded as {info!r} with 0 "
          f"errors, {d['reencoded']} datagrams rebuilt, all identical; {len(texts)} server texts "
          f"seen; the recording ({os.path.getsize(demos[0])} bytes, {times} svc_time) played "
          f"headless by DarkPlaces: {m.group(1)} frames")


def main():
    return run_main(__doc__, 1, 20, run_case, lambda case: f"nexuiz_peers@{case}")


if __name__ == "__main__":
    sys.exit(main())
