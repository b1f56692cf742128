#!/usr/bin/env python3
"""Real-peer test: five real clients through one slipgate to one real
server in its default configuration (nothing set for players who share an
address).

    five_peers.py q3|qw|q2[+pool] [--seconds N]

q3: ioq3ded (OpenArena's data, no bots) and five ioquake3 clients;
qw: mvdsv + KTX (generated placeholder data) and five ezQuake clients;
q2: q2proded and five Q2PRO clients (engines built from ../shared/peers/q2,
placeholder data, cached in $SG_PEERS_CACHE: q2_peers.engines()).
+pool: the route has `upstream_source 127.0.0.2 ... 127.0.0.6`, so each
session reaches the server from an address of its own.

What a pass means: every player reaches the server from slipgate's address
(127.0.0.1, one upstream port per session), and still all five are in the
game at once: the server's own status reply, asked directly, lists the five
players by name (with a live ping on Quake 3), slipgate logged five
sessions from five client ports, each with its own upstream port, all five stay for N seconds, then
each quits normally (Quake 3: its `quit` command; QuakeWorld: each client
leaves on its own when the server says a line, sending its `drop`; Quake 2:
`quit` on its console) and the server logs each one leaving; slipgate
exits 0 on SIGTERM.  Without `upstream_source`, q2proded's default
`sv_iplimit 3` refuses the fourth and fifth player at one address (the
plain q2 case fails, naming the refused clients).

Everything runs on 127.0.0.1 with free ports, at the clients' lowest
settings, under time limits, and is ended by PID.
"""
import os
import re
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import q2_peers  # noqa: E402
from q3_peers import (IOQ3_DIR, OA_CLIENT_BASE, QUIT_CFG, RCON_PASSWORD, VARIANTS,  # noqa: E402
                      Fail, Procs, cvars, free_udp_port, getstatus, read, run_main, slipgate_binary,
                      start_server, wait_for)
import relay_peers  # noqa: E402

N = 5
NAMES = [f"five{i}" for i in range(1, N + 1)]


POOL = [f"127.0.0.{i}" for i in range(2, 2 + N)]


def write_conf(work, px_port, srv_port, proto, pool):
    conf = os.path.join(work, "slipgate.conf")
    with open(conf, "w") as f:
        f.write(f"route five {{\n    listen 127.0.0.1:{px_port}\n"
                f"    server 127.0.0.1:{srv_port}\n    protocol {proto}\n"
                + (f"    upstream_source {' '.join(POOL)}\n" if pool else "") + "}\n")
    return conf


def start_slipgate(procs, work, conf, limit):
    px_log = os.path.join(work, "slipgate.log")
    px = procs.start("slipgate", [slipgate_binary(), "-c", conf], px_log, limit)
    if not wait_for(lambda: "listening on" in read(px_log), 10):
        raise Fail(f"slipgate did not start:\n{read(px_log)}")
    return px, px_log


def check_sessions(px_log):
    """Five sessions, from five client ports, each with its own upstream
    port (the source the server sees): slipgate's `session start` lines."""
    starts = []

    def five():
        starts[:] = re.findall(r"session start client=(\S+) upstream_port=(\d+)", read(px_log))
        return len(starts) >= N
    if not wait_for(five, 5) or len(starts) != N:
        raise Fail(f"slipgate started {len(starts)} sessions, not {N}:\n{read(px_log)[-2000:]}")
    if len({c for c, _ in starts}) != N or len({u for _, u in starts}) != N:
        raise Fail(f"the {N} sessions do not have {N} client and upstream ports: {starts}")
    return sorted(int(u) for _, u in starts)


def watch(procs_list, px, px_log, seconds, alive):
    """All clients, slipgate and the server's view stay up `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for name, p, log in procs_list:
            if p.poll() is not None:
                raise Fail(f"client {name} exited early:\n{read(log)[-1500:]}")
        if px.poll() is not None:
            raise Fail(f"slipgate exited early:\n{read(px_log)[-2000:]}")
        time.sleep(0.5)
    alive()


def rcon_reply(port, line):
    """An out-of-band rcon to the server on 127.0.0.1: its printed answer."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as q:
        q.settimeout(1)
        q.sendto(b"\xff\xff\xff\xffrcon " + line.encode() + b"\n", ("127.0.0.1", port))
        out = b""
        try:
            while True:
                out += q.recv(8192)[4:]
                q.settimeout(0.3)
        except OSError:
            pass
    return out.decode("latin-1")


def seen_from(rows, pool, text):
    """The addresses the server's `status` shows its five players at (rows
    of name, address): one each from the pool, or all slipgate's 127.0.0.1."""
    addrs = sorted(a for n, a in rows if n in NAMES)
    want = POOL if pool else ["127.0.0.1"] * N
    if addrs != want:
        raise Fail(f"the server sees its players at {addrs}, not {want}:\n{text}")
    return sorted(set(addrs))


def q3_seen(srv_port, pool):
    text = rcon_reply(srv_port, f"{RCON_PASSWORD} status")
    rows = re.findall(r"^ *\d+ +-?\d+ +\d+ (\S+) +(?:\^7)?(\d+\.\d+\.\d+\.\d+)", text, re.M)
    return seen_from([(re.sub(r"\^.", "", n), a) for n, a in rows], pool, text)


def qw_seen(srv_port, pool):
    """mvdsv's status (redirected): per player a line with its name, one
    with its address, one with its `realip` (where the client's own probe
    came from: here straight from the client, 127.0.0.1)."""
    text = rcon_reply(srv_port, f"{relay_peers.RCON} status")
    lines = [l.strip() for l in text.split("\n")]
    rows, real = [], []
    for i, l in enumerate(lines[:-2]):
        if l.split() and l.split()[0] in NAMES:
            rows.append((l.split()[0], lines[i + 1]))
            real.append(lines[i + 2])
    if real != ["127.0.0.1"] * N:
        raise Fail(f"mvdsv's realip of the five is {real}, not the clients' 127.0.0.1:\n{text}")
    return seen_from(rows, pool, text)


# --- Quake 3 -------------------------------------------------------------

def q3_players(srv_port):
    """(name, ping) of the players the server's getstatus lists."""
    out = []
    for line in getstatus(srv_port).split("\n")[2:]:
        m = re.match(r'(-?\d+) (\d+) "(.*)"', line)
        if m:
            out.append((re.sub(r"\^.", "", m.group(3)), int(m.group(2))))
    return out


def start_q3_client(procs, work, name, cli_cvars, to, limit):
    home = os.path.join(work, name)
    os.makedirs(os.path.join(home, "baseoa"))
    with open(os.path.join(home, "baseoa", "fivewait.cfg"), "w") as f:
        # Stand still; run QUIT_CFG (empty, then `quit`) every ~2 s.
        f.write(f'set w1 "wait 120;execq {QUIT_CFG};vstr w1"\n')
    with open(os.path.join(home, "baseoa", QUIT_CFG), "w") as f:
        f.write("\n")
    log = os.path.join(work, f"{name}.log")
    env = dict(os.environ, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    p = procs.start(name, [
        "xvfb-run", "-a", "-s", "-screen 0 320x240x24",
        os.path.join(IOQ3_DIR, "ioquake3"), "+set", "com_basegame", "baseoa",
        "+set", "fs_basepath", OA_CLIENT_BASE, "+set", "fs_homepath", home]
        + cvars(cli_cvars) + [
        "+set", "cl_motd", "0", "+set", "net_enabled", "1",
        "+set", "net_port", str(free_udp_port()),
        "+set", "cl_renderer", "opengl1", "+set", "r_mode", "-1",
        "+set", "r_customwidth", "160", "+set", "r_customheight", "120",
        "+set", "r_fullscreen", "0", "+set", "s_initsound", "0", "+set", "com_maxfps", "20",
        "+set", "r_picmip", "16", "+set", "r_lodbias", "2", "+set", "cg_drawFPS", "0",
        "+set", "name", name, "+set", "com_introplayed", "1", "+exec", "fivewait.cfg",
        "+connect", f"127.0.0.1:{to}", "+wait", "100", "+vstr", "w1"], log, limit, env=env)
    return p, log, home


def run_q3(seconds, work, procs, pool):
    for exe in ("ioq3ded", "ioquake3"):
        if not os.access(os.path.join(IOQ3_DIR, exe), os.X_OK):
            raise Fail(f"{IOQ3_DIR}/{exe} is not installed (apt-get install ioquake3 "
                       "ioquake3-server openarena openarena-server)")
    srv_cvars, cli_cvars = VARIANTS["ioq71"]
    srv_port, px_port = free_udp_port(), free_udp_port()
    limit = seconds + 60
    # The server as shipped: nothing about shared addresses, no bots.
    srv, srv_log = start_server(procs, work, srv_cvars, srv_port, limit, bots=0)
    px, px_log = start_slipgate(procs, work, write_conf(work, px_port, srv_port, "q3", pool),
                                       limit)
    clients = []
    for name in NAMES:
        p, log, home = start_q3_client(procs, work, name, cli_cvars, px_port, limit)
        clients.append((name, p, log, home))
    if not wait_for(lambda: all(f"{n}^7 entered the game" in read(srv_log) for n in NAMES), 30,
                    step=0.5):
        raise Fail("not all five entered the game\n--- server\n"
                   f"{read(srv_log)[-2500:]}\n--- slipgate\n{read(px_log)[-1500:]}")
    upstream = check_sessions(px_log)

    def live():
        players = q3_players(srv_port)
        return sorted(n for n, _ in players) == NAMES and all(p != 999 for _, p in players)

    def alive():
        if not live():
            raise Fail(f"the server's status does not list the five live players: "
                       f"{q3_players(srv_port)}\n{read(srv_log)[-1500:]}")
    wait_for(live, 5, step=0.5)  # a ping is 999 until the server has measured it
    alive()
    addrs = q3_seen(srv_port, pool)
    watch([(n, p, log) for n, p, log, _ in clients], px, px_log, seconds, alive)
    players = q3_players(srv_port)
    for name, p, log, home in clients:
        with open(os.path.join(home, "baseoa", QUIT_CFG), "w") as f:
            f.write("quit\n")
    for name, p, log, home in clients:
        said = wait_for(lambda: f"{name}^7 disconnected" in read(srv_log), 15)
        gone = wait_for(lambda: p.poll() is not None, 10)
        procs.stop(p, group=True)
        if not said or not gone:
            raise Fail(f"{name} did not quit normally (exited: {gone}, server saw the "
                       f"disconnect: {said}):\n{read(srv_log)[-1500:]}")
    if q3_players(srv_port):
        raise Fail(f"players left on the server: {q3_players(srv_port)}")
    rc = procs.stop(px)
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    return (f"ioq3ded (default limits) listed {players} at {addrs}, "
            f"sessions' upstream ports {upstream}; each quit and the server logged it")


# --- QuakeWorld ----------------------------------------------------------

def status_reply(srv_port):
    """The server's answer to an out-of-band `status` (QuakeWorld, Quake 2),
    after its 0xff 0xff 0xff 0xff, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as q:
        q.settimeout(1)
        try:
            q.sendto(b"\xff\xff\xff\xffstatus\n", ("127.0.0.1", srv_port))
            return q.recv(8192)[4:].decode("latin-1")
        except OSError:
            return None


def qw_players(srv_port):
    """(name, ping) of the players mvdsv's status reply lists."""
    data = status_reply(srv_port)
    if data is None:
        return None
    out = []
    for line in data[1:].split("\n")[1:]:
        m = re.match(r'\d+ -?\d+ \d+ (\d+) "([^"]*)"', line)
        if m:
            out.append((m.group(2), int(m.group(1))))
    return out


def start_qw_client(procs, work, name, px_port, limit):
    """An ezQuake client with its own home (a copy of the generated one),
    leaving by itself when the server says "slipgate asks you to leave" (a
    message trigger connects to a port where nobody listens: ezQuake sends
    its `drop` first)."""
    home = os.path.join(work, f"home-{name}")
    shutil.copytree(os.path.join(work, "ezquake-home"), home, symlinks=True)
    base = os.path.join(home, ".config", "ezquake")
    os.makedirs(os.path.join(base, "qw"), exist_ok=True)
    with open(os.path.join(base, "qw", "sgquit.cfg"), "w") as f:
        f.write(f'alias sgquit "connect 127.0.0.1:{free_udp_port()}"\n'
                'msg_trigger sgquit "slipgate asks you to leave" -l 3\n')
    log = os.path.join(work, f"{name}.log")
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy")
    p = procs.start(name, ["xvfb-run", "-a", "-s", "-screen 0 320x240x24",
                           relay_peers.GAMES["qw"]["client"], "-basedir", base, "-nosound",
                           "-condebug", os.path.join(work, f"{name}-console.log"),
                           "-clientport", str(free_udp_port()),
                           "+set", "vid_fullscreen", "0", "+set", "vid_width", "160",
                           "+set", "vid_height", "120", "+set", "cl_maxfps", "30",
                           "+set", "name", name, "+exec", "sgquit.cfg",
                           "+connect", f"127.0.0.1:{px_port}"], log, limit, env=env)
    return p, log


def run_qw(seconds, work, procs, pool):
    g = relay_peers.GAMES["qw"]
    missing = [p for p in (g["server"], g["client"], shutil.which("fteqcc"))
               if not p or not os.path.exists(p)]
    if missing:
        raise Fail(f"not installed: {missing} (apt-get install {g['packages']} fteqcc)")
    maker = os.environ.get("SG_PEERS_DATA")
    if not maker or not os.path.exists(maker):
        raise Fail(f"SG_PEERS_DATA={maker!r}: the game data generator is missing")
    relay_peers.copy_game_dirs(relay_peers.game_data(maker, work), work,
                               ["mvdsv-base", "ezquake-home"])
    srv_port, px_port = free_udp_port(), free_udp_port()
    limit = seconds + 60
    # mvdsv + KTX as generated: sv_getrealip (1) and the rest at their defaults.
    srv_log = relay_peers.start_qw_server(work, srv_port, limit, procs)
    px, px_log = start_slipgate(procs, work, write_conf(work, px_port, srv_port, "qw", pool),
                                       limit)
    clients = []
    for name in NAMES:
        p, log = start_qw_client(procs, work, name, px_port, limit)
        clients.append((name, p, log))
    if not wait_for(lambda: all(f"{n} entered the game" in read(srv_log) for n in NAMES), 35,
                    step=0.5):
        raise Fail("not all five entered the game\n--- server\n"
                   f"{read(srv_log)[-2500:]}\n--- slipgate\n{read(px_log)[-1500:]}")
    upstream = check_sessions(px_log)

    def alive():
        players = qw_players(srv_port) or []
        if sorted(n for n, _ in players) != NAMES:
            raise Fail(f"the server's status does not list the five players: {players}\n"
                       f"{read(srv_log)[-1500:]}")
    alive()
    addrs = qw_seen(srv_port, pool)
    watch(clients, px, px_log, seconds, alive)
    players = qw_players(srv_port)
    relay_peers.qw_rcon(srv_port, "say slipgate asks you to leave")
    for name, p, log in clients:
        if not wait_for(lambda: re.search(rf"{name} left the game|{name} dropped|"
                                          rf"Client {name} removed", read(srv_log)), 15):
            raise Fail(f"the server did not see {name} leave:\n{read(srv_log)[-1500:]}")
    if not wait_for(lambda: qw_players(srv_port) == [], 10):
        raise Fail(f"players left on the server: {qw_players(srv_port)}")
    # ezQuake keeps running (it spins once its X server is gone): by PID.
    for name, p, log in clients:
        procs.stop(p, group=True, wait=3)
    rc = procs.stop(px)
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    return (f"mvdsv (default limits) listed {players} at {addrs} (realip 127.0.0.1), "
            f"sessions' upstream ports {upstream}; each left and the server logged it")


# --- Quake 2 -------------------------------------------------------------

def q2_players(srv_port):
    """(name, ping) of the players q2proded's status reply lists (after
    "print" and its serverinfo line: `score ping "name"` a player)."""
    data = status_reply(srv_port)
    if data is None or not data.startswith("print\n"):
        return None
    out = []
    for line in data.split("\n")[2:]:
        m = re.match(r'-?\d+ (\d+) "([^"]*)"', line)
        if m:
            out.append((m.group(2), int(m.group(1))))
    return out


def q2_seen(srv_port, pool):
    """q2proded's `status` (rcon): a row per player with its address."""
    text = rcon_reply(srv_port, "sgrcon status")
    rows = re.findall(r"^ *\d+ +-?\d+ +\S+ (\S+) +\d+ (\d+\.\d+\.\d+\.\d+):\d+", text, re.M)
    return seen_from(rows, pool, text)


def run_q2(seconds, work, procs, pool):
    """q2proded as built, in its default configuration but for what makes
    it a deathmatch server with rcon (q2_peers.start_q2proded): sv_iplimit
    3, so with the five at slipgate's one address the fourth and fifth are
    refused; five Q2PRO clients (their default protocol, 36)."""
    missing = [p for p in ("setpriv", "meson", "ninja", "make", "gcc") if not shutil.which(p)]
    if missing:
        raise Fail(f"not installed: {missing} (scripts/deps.sh --test)")
    if os.getuid() != 0:
        raise Fail("the Quake 2 engines run as nobody, which needs root (setpriv)")
    b, d = q2_peers.engines()
    os.chmod(work, 0o755)
    srv_port, px_port = free_udp_port(), free_udp_port()
    limit = seconds + 60
    srv_log = os.path.join(work, "server.log")
    q2_peers.start_q2proded(procs, b, d, q2_peers.nobody_dir(os.path.join(work, "srv")),
                            srv_port, srv_log, limit)
    px, px_log = start_slipgate(procs, work, write_conf(work, px_port, srv_port, "q2", pool),
                                limit)
    clients = []
    for name in NAMES:
        log = os.path.join(work, f"{name}.log")
        p, say = q2_peers.start_q2pro_client(
            procs, b, d, q2_peers.nobody_dir(os.path.join(work, name)), log, px_port, limit,
            ["+set", "name", name, "+set", "allow_download", "0", "+set", "cl_maxfps", "20",
             "+set", "r_maxfps", "10"], screen="320x240x24")
        clients.append((name, p, log, say))
    if not wait_for(lambda: all(f"{n} entered the game" in read(srv_log) for n in NAMES), 30,
                    step=0.5):
        refused = [n for n, _, log, _ in clients if "Too many connections" in read(log)]
        raise Fail(f"not all five entered the game (refused with \"Too many connections\": "
                   f"{refused})\n--- server\n{read(srv_log)[-2500:]}\n--- slipgate\n"
                   f"{read(px_log)[-1500:]}")
    upstream = check_sessions(px_log)

    def alive():
        players = q2_players(srv_port) or []
        if sorted(n for n, _ in players) != NAMES:
            raise Fail(f"the server's status does not list the five players: {players}\n"
                       f"{read(srv_log)[-1500:]}")
    alive()
    addrs = q2_seen(srv_port, pool)
    watch([(n, p, log) for n, p, log, _ in clients], px, px_log, seconds, alive)
    players = q2_players(srv_port)
    for name, p, log, say in clients:
        say("quit")
    for name, p, log, say in clients:
        said = wait_for(lambda: re.search(rf"^{name}\[[\d.:]+\] disconnected", read(srv_log),
                                          re.M), 15)
        gone = wait_for(lambda: p.poll() is not None, 10)
        procs.stop(p, group=True)
        if not said or not gone:
            raise Fail(f"{name} did not quit normally (exited: {gone}, server saw the "
                       f"disconnect: {bool(said)}):\n{read(srv_log)[-1500:]}")
    if q2_players(srv_port):
        raise Fail(f"players left on the server: {q2_players(srv_port)}")
    rc = procs.stop(px)
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    return (f"q2proded (default limits, sv_iplimit 3) listed {players} at {addrs}, "
            f"sessions' upstream ports {upstream}; each quit and the server logged it")


def run_case(game, seconds):
    runs = {"q3": run_q3, "qw": run_qw, "q2": run_q2}
    game, _, extra = game.partition("+")
    if game not in runs or extra not in ("", "pool"):
        raise Fail(f"unknown case {game} (q3, qw or q2, optionally +pool)")
    if not shutil.which("xvfb-run"):
        raise Fail("xvfb-run is not installed (scripts/deps.sh --test)")
    procs = Procs()
    work = tempfile.mkdtemp(prefix=f"sg-peers-five-{game}-")
    keep = False
    try:
        t0 = time.monotonic()
        what = runs[game](seconds, work, procs, extra == "pool")
        print(f"PASS five {game} in {time.monotonic() - t0:.0f}s: {what}")
    except Fail:
        keep = True
        print(f"(work files kept in {work})")
        raise
    finally:
        procs.stop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    return run_main(__doc__, 1, 8, run_case, lambda game: f"five {game}")


if __name__ == "__main__":
    sys.exit(main())
