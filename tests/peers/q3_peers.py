#!/usr/bin/env python3
"""Real-peer tests for Quake 3: a real ioquake3 dedicated server (OpenArena
data, bots), slipgate in front of it, and the real ioquake3 client
connecting through slipgate, for each wire variant (../shared/PEERS.md).

    q3_peers.py CASE [--seconds N]

CASE is VARIANT or VARIANT+MODE: VARIANT one of ioq68, ioq71, oa71;
MODE (optional) selects extra slipgate arguments (see MODES).

What a pass means: the client entered the game (server log), is still in
it after N seconds of moving and firing (a getstatus to the server lists
it with a live ping), then quits normally (its `quit` command: it
sends its `disconnect`, the server log says it disconnected), slipgate
relayed traffic both ways with no drops and exited 0 on SIGTERM, and its
--stats file says so.  A demo slipgate recorded ends where the client's
own demo ends: at the client's disconnect, without the server's answer,
so it plays to its end (a timedemo result, no "peers disconnected").

Everything runs on 127.0.0.1 with free ports; every process is started
under a time limit and ended by PID.  Exit 77 (skip) only when the game
packages are not installed, saying so.
"""
import json
import re
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

IOQ3_DIR = "/usr/lib/ioquake3"
OA_SERVER_BASE = "/usr/lib/openarena-server"
OA_CLIENT_BASE = "/usr/lib/openarena"

VARIANTS = {
    # name: (server cvars, client cvars)
    "ioq68": (["com_protocol", "71", "com_legacyprotocol", "68"],
              ["com_protocol", "68", "com_legacyprotocol", "68"]),
    "ioq71": (["com_protocol", "71", "com_legacyprotocol", "68"],
              ["com_protocol", "71", "com_legacyprotocol", "68"]),
    "oa71": (["com_protocol", "71", "com_legacyprotocol", "71"],
             ["com_protocol", "71", "com_legacyprotocol", "71"]),
}

MODES = {
    # plain relay, no decoding
    "relay": [],
    # decode everything, rebuild every message, record the session's demo
    "full": ["-p", "q3", "+set", "reencode", "always", "--record", "{work}/demos"],
    # protocol auto: the session must be recognised as Quake 3 and decoded
    "auto": ["+set", "reencode", "always", "--record", "{work}/demos"],
    # as full, and the server changes map mid-session: a second demo file
    "mapchange": ["-p", "q3", "+set", "reencode", "always", "--record", "{work}/demos"],
    # as full, but slipgate is killed with SIGKILL: the demo reads and plays
    # up to its last whole message
    "kill9": ["-p", "q3", "--record", "{work}/demos"],
    # from a config file without recording; a SIGHUP reload turns recording
    # on mid-level: the demo starts from tracked state
    "midrecord": ["-c", "{work}/slipgate.conf"],
    # filters on the real stream (FILTERS_CONF): chat rewritten both ways, a
    # print injected to the client every few seconds, the session recorded
    "filters": ["-c", "{work}/slipgate.conf"],
    # network emulation: 10% loss both ways (NETEM_CONF); the session
    # survives and the recorded demo plays
    "netem": ["-c", "{work}/slipgate.conf"],
    # NAT rebinding: the client talks through UdpNat, which moves to a new
    # source port mid-game; as full, and the one session follows the qport
    "nat": ["-p", "q3", "+set", "reencode", "always", "--record", "{work}/demos"],
    # the filters mode's config with `http` on: headless Chromium loads the
    # page during the game (check_web)
    "web": ["-c", "{work}/slipgate.conf"],
    # as full, with sign_key (a key made by `slipgate keygen`): the demo
    # plays and `slipgate demo verify` says "authentic, whole"
    "signed": ["-p", "q3", "+set", "reencode", "always", "--record", "{work}/demos",
               "+set", "sign_key", "{work}/league", "+set", "sign_interval", "2s"],
    # as kill9, signed: the cut demo verifies "authentic up to byte N", N the
    # last checkpoint's, and a copy with one byte edited says "modified"
    "signedkill9": ["-p", "q3", "--record", "{work}/demos",
                    "+set", "sign_key", "{work}/league", "+set", "sign_interval", "2s"],
    # `anonymize yes` with every writer (ANON_CONF): record, pcap, textlog,
    # sign_key, --stats, the log, the HTTP API; afterwards no file slipgate
    # wrote holds the client's address (127.0.0.1 and its net_port) in any
    # form, and the demo plays and verifies (check_anon)
    "anon": ["-c", "{work}/slipgate.conf"],
}

ANON_CONF = """anonymize yes
anonymize_key "{work}/state/anonymize.key"
sign_key "{work}/league"
sign_interval 2s
http 127.0.0.1:{http}
route q3 {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q3
    reencode always
    record "{work}/out/demos"
    filter pcap {{
        file "{work}/out/capture.pcap"
    }}
    filter textlog {{
        file "{work}/out/text.log"
    }}
}}
"""

FILTERS_CONF = """route q3 {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q3
    record "{work}/demos"
    filter rewrite {{
        replace "badword" "*******"
        kinds chat
    }}
    filter inject {{
        text "slipgate injected %session%"
        kind print
        every 3s
    }}
}}
"""

NETEM_CONF = """route q3 {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q3
    record "{work}/demos"
    filter netem {{
        loss 10
        seed 7
    }}
}}
"""

# filters mode: the client says a line with a word the rewrite filter replaces
SAY_CFG = ('set mv1 "+forward;+attack;wait 40;-attack;-forward;+moveleft;wait 40;'
           '-moveleft;vstr mv2"\n'
           'set mv2 "+right;wait 15;-right;+moveup;wait 5;-moveup;say hello badword from peers;'
           'wait 120;execq peersquit.cfg;vstr mv1"\n')

MIDRECORD_CONF = """route q3 {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q3
{extra}}}
"""

RCON_PASSWORD = "slipgate-test"

MOVE_CFG = ('set mv1 "+forward;+attack;wait 40;-attack;-forward;+moveleft;wait 40;'
            '-moveleft;+right;wait 15;-right;+moveup;wait 5;-moveup;execq peersquit.cfg;'
            'vstr mv1"\n')

# Run by the move loops each round: empty while playing, `quit` to leave.
QUIT_CFG = "peersquit.cfg"


class Fail(Exception):
    pass


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_tcp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cvars(pairs):
    out = []
    for i in range(0, len(pairs), 2):
        out += ["+set", pairs[i], pairs[i + 1]]
    return out


def getstatus(port, timeout=2.0):
    """Ask the server directly for its status; returns the raw reply text."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(b"\xff\xff\xff\xffgetstatus", ("127.0.0.1", port))
        data, _ = s.recvfrom(65536)
        return data[4:].decode("latin-1")
    except OSError:
        return ""
    finally:
        s.close()


def rcon(port, command):
    """Send an rcon command straight to the server (not through slipgate)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"\xff\xff\xff\xffrcon " + RCON_PASSWORD.encode() + b" " + command.encode(),
                 ("127.0.0.1", port))
    finally:
        s.close()


def wait_for(pred, timeout, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("latin-1")
    except OSError:
        return ""


class UdpNat:
    """A tiny NAT on 127.0.0.1 between the client and slipgate: the client
    sends to `port`; what it sends leaves from an outward socket, whose
    replies go back to the client.  rebind() opens a new outward socket
    (a new source port, as a NAT that lost its mapping); replies that still
    reach the old one are dropped, as the NAT would.  One thread, bounded
    by `limit` seconds."""

    def __init__(self, dest, limit):
        self.dest = dest
        self.inside = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.inside.bind(("127.0.0.1", 0))
        self.port = self.inside.getsockname()[1]
        self.outs = [self._outward()]
        self.client = None
        self.late = 0
        self.stop_at = time.monotonic() + limit
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.inside, selectors.EVENT_READ)
        self.sel.register(self.outs[0], selectors.EVENT_READ)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _outward():
        o = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        o.bind(("127.0.0.1", 0))
        return o

    def ports(self):
        return [o.getsockname()[1] for o in self.outs] if self.stop_at else self.closed_ports

    def rebind(self):
        o = self._outward()
        with self.lock:
            self.outs.append(o)
            self.sel.register(o, selectors.EVENT_READ)

    def _run(self):
        while time.monotonic() < self.stop_at:
            with self.lock:
                ready = self.sel.select(0.2)
                out = self.outs[-1]
            for key, _ in ready:
                try:
                    data, src = key.fileobj.recvfrom(65536)
                except OSError:
                    continue
                try:
                    if key.fileobj is self.inside:
                        self.client = src
                        out.sendto(data, self.dest)
                    elif key.fileobj is out and self.client:
                        self.inside.sendto(data, self.client)
                    else:
                        self.late += 1
                except OSError:
                    pass

    def close(self):
        self.closed_ports = self.ports()
        self.stop_at = 0
        self.thread.join(2)
        for o in [self.inside] + self.outs:
            o.close()


class Procs:
    """Processes started by this test, ended by PID whatever happens."""

    def __init__(self):
        self.procs = []

    def start(self, name, argv, log, limit, env=None):
        f = open(log, "wb")
        p = subprocess.Popen(["timeout", "-k", "5", str(limit)] + argv, stdout=f,
                             stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append((name, p, f))
        return p

    @staticmethod
    def children(pid):
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def stop(self, p, sig=signal.SIGTERM, wait=10, group=False):
        """Signal the program that `timeout` runs (so its exit status is the
        program's), or with `group` every process of its group (a game under
        xvfb-run), then kill whatever is left of the group."""
        if p.poll() is None:
            kids = [] if group else self.children(p.pid)
            try:
                if kids:
                    for k in kids:
                        os.kill(k, sig)
                else:
                    os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            rc = p.wait(wait)
        except subprocess.TimeoutExpired:
            rc = None
        # Whatever is left in the group (xvfb-run does not pass the signal on
        # to the game, which would run on alone) is killed.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return rc if rc is not None else p.wait(5)

    def stop_all(self):
        for name, p, f in reversed(self.procs):
            self.stop(p, signal.SIGTERM, 5, group=True)
            f.close()


def check_nat(st, nat, px_log):
    """NAT mode: the client moved once, and one session followed it."""
    old, new = nat.ports()
    if len(nat.outs) != 2:
        raise Fail(f"the NAT never moved: outward ports {nat.ports()}")
    m = re.findall(r"client moved from 127\.0\.0\.1:(\d+) to 127\.0\.0\.1:(\d+) "
                   r"\(qport (\d+)\)", px_log)
    if [(int(a), int(b)) for a, b, _ in m] != [(old, new)]:
        raise Fail(f"expected one move {old} -> {new} in slipgate's log, got {m}")
    sessions = [s for r in st["routes"] for s in r["sessions"]]
    if len(sessions) != 1:
        raise Fail(f"expected one session, stats have {len(sessions)}: {sessions}")
    return f"; NAT moved {old} -> {new} (qport {m[0][2]}), one session followed"


def start_server(procs, work, srv_cvars, srv_port, limit, bots=3):
    """The real server on 127.0.0.1:srv_port with OpenArena's data and
    bots (bot_minplayers `bots`), home WORK/srv, log WORK/server.log,
    under a time limit of `limit` s; returns (process, log) once it answers
    a getstatus."""
    home_srv = os.path.join(work, "srv")
    os.makedirs(home_srv, exist_ok=True)
    srv_log = os.path.join(work, "server.log")
    srv = procs.start("server", [
        os.path.join(IOQ3_DIR, "ioq3ded"), "+set", "com_basegame", "baseoa",
        "+set", "fs_basepath", OA_SERVER_BASE, "+set", "fs_homepath", home_srv]
        + cvars(srv_cvars) + [
        "+set", "dedicated", "1", "+set", "net_enabled", "1", "+set", "net_ip", "127.0.0.1",
        "+set", "net_port", str(srv_port), "+set", "sv_master1", "", "+set", "sv_master2", "",
        "+set", "sv_master3", "", "+set", "bot_enable", "1", "+set", "bot_minplayers", str(bots),
        "+set", "g_gametype", "0", "+set", "timelimit", "0", "+set", "fraglimit", "0",
        "+set", "rconpassword", RCON_PASSWORD, "+map", "oa_dm1"], srv_log, limit)
    if not wait_for(lambda: "sv_hostname" in getstatus(srv_port, 0.3), 20):
        raise Fail(f"the server did not answer getstatus:\n{read(srv_log)[-2000:]}")
    return srv, srv_log


def start_client(procs, work, cli_cvars, cli_port, to, limit, move_cfg=MOVE_CFG):
    """The real client, named `peers`, on 127.0.0.1:cli_port (home WORK/cli,
    log WORK/client.log), recording its own demo and connecting to
    127.0.0.1:to, then running `move_cfg`'s loop (moving and firing) until
    quit_client; returns (process, log, home)."""
    home_cli = os.path.join(work, "cli")
    os.makedirs(os.path.join(home_cli, "baseoa"), exist_ok=True)
    with open(os.path.join(home_cli, "baseoa", "peersmove.cfg"), "w") as f:
        f.write(move_cfg)
    with open(os.path.join(home_cli, "baseoa", QUIT_CFG), "w") as f:
        f.write("\n")
    cli_log = os.path.join(work, "client.log")
    env = dict(os.environ, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    cli = procs.start("client", [
        "xvfb-run", "-a", "-s", "-screen 0 640x480x24",
        os.path.join(IOQ3_DIR, "ioquake3"), "+set", "com_basegame", "baseoa",
        "+set", "fs_basepath", OA_CLIENT_BASE, "+set", "fs_homepath", home_cli]
        + cvars(cli_cvars) + [
        "+set", "cl_motd", "0", "+set", "net_enabled", "1", "+set", "net_port", str(cli_port),
        "+set", "cl_renderer", "opengl1", "+set", "r_mode", "-1",
        "+set", "r_customwidth", "320", "+set", "r_customheight", "240",
        "+set", "r_fullscreen", "0", "+set", "s_initsound", "0", "+set", "com_maxfps", "60",
        "+set", "name", "peers", "+set", "cl_autoRecordDemo", "1",
        "+set", "com_introplayed", "1", "+exec", "peersmove.cfg",
        "+connect", f"127.0.0.1:{to}", "+wait", "400", "+vstr", "mv1"],
        cli_log, limit, env=env)
    return cli, cli_log, home_cli


def quit_client(cli, home_cli, srv_log, procs):
    """Make the real client quit as a player does, with its `quit` command:
    CL_Shutdown ends its own demo, sends its `disconnect` and the game exits
    (xvfb-run then ends).  The command comes from QUIT_CFG, which the move
    loop runs each round (a command typed on its console would wait behind
    the endless loop in the command buffer).  The server must log the
    disconnect.  (Not SIGTERM: ioquake3 runs the same shutdown inside its
    signal handler, which hung once here before sending anything.)"""
    with open(os.path.join(home_cli, "baseoa", QUIT_CFG), "w") as f:
        f.write("quit\n")
    said = wait_for(lambda: "peers^7 disconnected" in read(srv_log), 20)
    gone = wait_for(lambda: cli.poll() is not None, 15)
    procs.stop(cli, group=True)
    if not gone or not said:
        raise Fail(f"the client did not quit normally (exited: {gone}, server saw the "
                   f"disconnect: {said}):\n{read(srv_log)[-1500:]}")


def check_demo_end(session, home_cli, px_log):
    """The last demo slipgate recorded ends at the client's disconnect, as
    the client's own (cl_autoRecordDemo) does: slipgate says so, no server
    `disconnect` command is in it, and it holds the client's own last
    message (it may hold one or two more: messages slipgate relayed while
    the client was quitting)."""
    demo = session.get("demo")
    if not demo or not os.path.exists(demo):
        raise Fail(f"no recorded demo: {session}")
    if not re.search(r"demo " + re.escape(demo) + r" finished .*; the client disconnected",
                     read(px_log)):
        raise Fail(f"slipgate did not end {demo} at the client's disconnect:\n"
                   f"{read(px_log)[-2000:]}")
    dump = subprocess.run([slipgate_binary(), "demo", "dump", demo], capture_output=True,
                          text=True, timeout=60)
    lines = dump.stdout.splitlines()
    bad = [l for l in lines if re.search(r'svc_serverCommand \d+ "disconnect', l)]
    if dump.returncode != 0 or bad:
        raise Fail(f"the demo holds the server's disconnect (exit {dump.returncode}): "
                   f"{bad[:2]}")
    seqs = [int(m.group(1)) for m in (re.match(r"(-?\d+) len=", l) for l in lines) if m]
    own_dir = os.path.join(home_cli, "baseoa", "demos")
    own = sorted((os.path.join(own_dir, f) for f in os.listdir(own_dir)) if
                 os.path.isdir(own_dir) else [], key=os.path.getmtime)
    if not own or not seqs:
        raise Fail(f"no client demo in {own_dir} or no message in {demo}")
    own_dump = subprocess.run([slipgate_binary(), "demo", "dump", own[-1]], capture_output=True,
                              text=True, timeout=60).stdout.splitlines()
    own_seqs = [int(m.group(1)) for m in (re.match(r"(-?\d+) len=", l) for l in own_dump) if m]
    if not own_seqs or own_seqs[-1] not in seqs:
        raise Fail(f"{demo} (last message {seqs[-1]}) lacks the client's own last message "
                   f"{own_seqs[-1:]} ({own[-1]})")
    return (f"; the demo ends at the client's disconnect: last message {seqs[-1]}, the "
            f"client's own {own_seqs[-1]}")


def check_decoding(session, work, home_cli, cli_cvars, procs, limit):
    """Zero decode errors, every rebuilt message byte-identical, and the
    demo slipgate recorded plays to its end in the real client."""
    d = session.get("decode")
    if not d:
        raise Fail(f"the session was not decoded: {session}")
    if d["errors"] or session["first_error"]:
        raise Fail(f"decode errors: {d}, first: {session['first_error']}")
    if d["messages"] < 100 or d["reencoded"] != d["messages"]:
        raise Fail(f"not every message was rebuilt: {d}")
    if d["reencode_identical"] != d["reencoded"]:
        raise Fail(f"rebuilt messages differ from the originals: {d}")
    demo = session.get("demo")
    if not demo or not os.path.exists(demo) or os.path.getsize(demo) < 1000:
        raise Fail(f"no recorded demo: {session}")
    frames, secs, name = play_demo(demo, work, cli_cvars, procs, limit)
    return (f"; decoded {d['datagrams']} datagrams, rebuilt {d['reencoded']} messages "
            f"byte-identical, demo {name} played: {frames} frames in {secs} s")


def check_filters(session, work, cli_out, srv_out, said, cli_cvars, procs, limit):
    """The client saw the injected prints and the server's chat rewritten;
    the server saw the client's chat rewritten; nothing failed to decode;
    the recorded demo (with renumbered commands) plays."""
    d = session.get("decode") or {}
    if d.get("errors") or session.get("first_error"):
        raise Fail(f"decode errors: {d} {session.get('first_error')}")
    injected = len(re.findall(r"slipgate injected \d+", cli_out))
    if injected < 5:
        raise Fail(f"the client shows {injected} injected prints (expected one every 3 s):\n"
                   f"{cli_out[-3000:]}")
    seen = re.findall(r"the server says \*+ (\d+)", cli_out)
    if "badword" in cli_out or len(seen) < said - 1 or said < 5:
        raise Fail(f"server chat not rewritten in the client ({len(seen)} of {said} rewritten):"
                   f"\n{cli_out[-3000:]}")
    mine = re.findall(r"hello \*+ from peers", srv_out)
    if "badword from peers" in srv_out or len(mine) < 3:
        raise Fail(f"client chat not rewritten at the server ({len(mine)} lines):\n"
                   f"{srv_out[-3000:]}")
    if d.get("reencoded", 0) < 100:
        raise Fail(f"the changed stream was not rebuilt: {d}")
    demo = session.get("demo")
    if not demo or not os.path.exists(demo):
        raise Fail(f"no recorded demo: {session}")
    frames, secs, name = play_demo(demo, work, cli_cvars, procs, limit)
    return (f"; {injected} injected prints shown, {len(seen)} server chats and {len(mine)} "
            f"client chats rewritten, {d.get('reencoded')} messages rebuilt, demo played: "
            f"{frames} frames in {secs} s")


def check_web(http_port, srv_port, work):
    """The live page in headless Chromium during the real game: the session
    listed with codec q3 and decode health ok, its counters rising, the
    server's chat (rewritten by the filter) and the injected prints in the
    feed; a screenshot saved (web.png in the work folder, or $SG_SCREENSHOT)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
    import browser_test
    ch = browser_test.Chromium(work)
    try:
        ch.open(f"http://127.0.0.1:{http_port}/")
        rows = ch.wait("(%s).filter(r => r[3] === 'q3' && r[10] === 'ok')"
                       % browser_test.cells("#sessions tbody tr"), 15,
                       "the session, decoded without errors")
        first = int(rows[0][5].replace(",", ""))
        wait_for(lambda: "slipgate_http_stream_clients 1" in http_get(http_port, "/metrics"), 10)
        rcon(srv_port, "say the page shows badword")
        ch.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                "li.dataset.kind === 'chat' && li.textContent.includes('the page shows *******'))",
                15, "the server's chat line, rewritten")
        ch.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                "li.textContent.includes('slipgate injected'))", 15, "an injected print")
        # The page refreshes its tables once a second, and the feed's lines can
        # come sooner: wait for a refresh that shows the client's packets rising.
        rows = ch.wait("(%s).filter(r => r[3] === 'q3' && "
                       "parseInt(r[5].replace(/,/g, ''), 10) > %d)"
                       % (browser_test.cells("#sessions tbody tr"), first), 10,
                       f"the session's c>s counter rising past {first}")
        later = int(rows[0][5].replace(",", ""))
        shot = os.environ.get("SG_SCREENSHOT") or os.path.join(work, "web.png")
        ch.screenshot(shot)
        return f"; the page listed the session ({first} -> {later} c>s) and the chat, {shot}"
    except browser_test.Fail as e:
        raise Fail(str(e))
    finally:
        ch.close()


def http_get(port, path):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data.decode("utf-8", "replace")
                data += chunk
    except OSError:
        return ""


def check_netem(session, work, lost, cli_cvars, procs, limit):
    """Under 10% loss: no decode errors and the recorded demo plays."""
    d = session.get("decode") or {}
    if d.get("errors") or session.get("first_error"):
        raise Fail(f"decode errors: {d} {session.get('first_error')}")
    demo = session.get("demo")
    if not demo or not os.path.exists(demo):
        raise Fail(f"no recorded demo: {session}")
    frames, secs, name = play_demo(demo, work, cli_cvars, procs, limit)
    return f"; {lost} datagrams lost by netem, demo played: {frames} frames in {secs} s"


def check_midrecord(session, work, cli_cvars, procs, limit):
    """A recording begun mid-level: no decode errors; the file starts with a
    (synthesized) gamestate, decodes cleanly and plays in the real client."""
    d = session.get("decode") or {}
    if d.get("errors") or session.get("demos") != 1:
        raise Fail(f"decode errors or no demo: {session}")
    demo = session["demo"]
    info = subprocess.run([slipgate_binary(), "demo", "info", demo], capture_output=True,
                          text=True, timeout=60)
    out = info.stdout + info.stderr
    m = re.search(r"messages:\s+(\d+) \((\d+) gamestates", out)
    if info.returncode != 0 or not m or int(m.group(1)) < 30 or m.group(2) != "1" or \
            not re.search(r"errors:\s+0\b", out):
        raise Fail(f"demo info on the mid-level recording:\n{out}")
    dump = subprocess.run([slipgate_binary(), "demo", "dump", demo], capture_output=True,
                          text=True, timeout=60).stdout.splitlines()
    if not dump or "gamestate" not in dump[0]:
        raise Fail(f"the demo does not start with a gamestate: {dump[:2]}")
    frames, secs, name = play_demo(demo, work, cli_cvars, procs, limit)
    return (f"; recording turned on by SIGHUP mid-level: {m.group(1)} messages, "
            f"played: {frames} frames in {secs} s")


def check_killed_demo(work, home_cli, cli_cvars, procs, limit):
    """After SIGKILL the demo has no end marker: slipgate's reader must say
    it is truncated yet decode every message before the cut with no error,
    and the real client must play it to its end."""
    demos = [f for f in os.listdir(os.path.join(work, "demos")) if not f.endswith(".sig")]
    if len(demos) != 1:
        raise Fail(f"expected one demo, found {demos}")
    demo = os.path.join(work, "demos", demos[0])
    info = subprocess.run([slipgate_binary(), "demo", "info", demo], capture_output=True,
                          text=True, timeout=60)
    out = info.stdout + info.stderr
    m = re.search(r"messages:\s+(\d+)", out)
    # The only error is the missing end marker, and no partial message follows.
    if not m or int(m.group(1)) < 100 or \
            not re.search(r"errors:\s+1, file ends without end marker \(SG_E_TRUNCATED, "
                          r"0 stray bytes\)", out):
        raise Fail(f"demo info on the killed recording:\n{out}")
    frames, secs, name = play_demo(demo, work, cli_cvars, procs, limit)
    return (f"; demo {name}: {m.group(1)} whole messages, reported truncated, "
            f"played: {frames} frames in {secs} s")


def check_anon(work, files, cli_port, px_port, srv_port, token):
    """No file slipgate wrote holds the client's address: text
    (127.0.0.1:PORT, 127.0.0.1_PORT as in demo names) or binary (the 4 IP
    bytes next to the port in network order, either way round; the UDP
    header's pair of ports with the listen port).  The same search finds
    the server's address (which slipgate keeps) in the log, the stats, the
    .sig and the capture, so it does find what is there."""
    def forms(port, peer):
        pb = port.to_bytes(2, "big")
        return ([f"127.0.0.1:{port}", f"127.0.0.1_{port}"],
                [b"\x7f\x00\x00\x01" + pb, pb + b"\x7f\x00\x00\x01",
                 pb + peer.to_bytes(2, "big"), peer.to_bytes(2, "big") + pb])

    def hits(path, text, binary):
        data = open(path, "rb").read()
        return ([t for t in text if t.encode() in data or t in os.path.basename(path)]
                + [b.hex() for b in binary if b in data])

    ctext, cbin = forms(cli_port, px_port)
    leaks = {p: h for p in files for h in [hits(p, ctext, cbin)] if h}
    if leaks:
        raise Fail(f"anonymize yes: the client 127.0.0.1:{cli_port} is in "
                   + "; ".join(f"{p}: {h}" for p, h in sorted(leaks.items())))
    stext, sbin = forms(srv_port, 0)
    control = [p for p in files if os.path.basename(p) in ("slipgate.log", "stats.json")
               or p.endswith(".sig") or p.endswith(".pcap")]
    missing = [p for p in control if not hits(p, stext, sbin[:1])]
    if len(control) < 5 or missing:
        raise Fail(f"the search does not find the server 127.0.0.1:{srv_port} in {missing} "
                   f"(of {control})")
    named = [p for p in files if token in open(p, "rb").read().decode(errors="replace")
             or token in os.path.basename(p)]
    return (f"; anonymized as {token}: client 127.0.0.1:{cli_port} in none of {len(files)} "
            f"files (the server's address found in {len(control)}), the pseudonym in "
            f"{len(named)}")


def make_key(work):
    """`slipgate keygen --out WORK/league`: the signing key for `sign_key`
    (WORK/league) and its public half (WORK/league.pub) for check_signed."""
    kg = subprocess.run([slipgate_binary(), "keygen", "--out", os.path.join(work, "league")],
                        capture_output=True, text=True, timeout=30)
    if kg.returncode != 0:
        raise Fail(f"slipgate keygen: {kg.stderr}")
    return os.path.join(work, "league")


def check_signed(work, demo, whole):
    """`slipgate demo verify` on the recorded demo with the key's .pub:
    authentic (whole, or up to the last checkpoint of its .sig); the same
    demo with one byte edited: modified."""
    pub = os.path.join(work, "league.pub")
    v = subprocess.run([slipgate_binary(), "demo", "verify", demo, "--keyfile", pub],
                       capture_output=True, text=True, timeout=60)
    line = v.stdout.strip()
    sig = read(demo + ".sig")
    last = [l.split() for l in sig.splitlines() if l.startswith("cp ")]
    if not last:
        raise Fail(f"no checkpoint in {demo}.sig:\n{sig}")
    want = ("authentic, whole" if whole else
            f"authentic up to byte {last[-1][2]} / message {last[-1][3]} (recording cut at ")
    if v.returncode != 0 or want not in line:
        raise Fail(f"demo verify {demo}: exit {v.returncode}: {line} {v.stderr}; expected {want}")
    data = bytearray(open(demo, "rb").read())
    data[len(data) // 3] ^= 0x20
    edited = os.path.join(work, "edited-" + os.path.basename(demo))
    with open(edited, "wb") as f:
        f.write(data)
    shutil.copyfile(demo + ".sig", edited + ".sig")
    e = subprocess.run([slipgate_binary(), "demo", "verify", edited, "--keyfile", pub],
                       capture_output=True, text=True, timeout=60)
    if e.returncode != 1 or "modified at or after byte" not in e.stdout:
        raise Fail(f"demo verify on the edited demo: exit {e.returncode}: {e.stdout}")
    return f"; {line} ({len(last)} checkpoints); one byte edited: {e.stdout.strip()}"


def play_demo(demo, work, cli_cvars, procs, limit):
    """Play `demo` in the real client with timedemo; it prints frames and seconds."""
    home = os.path.join(work, "play-" + os.path.basename(demo))
    os.makedirs(os.path.join(home, "baseoa", "demos"))
    name = os.path.basename(demo)
    shutil.copy(demo, os.path.join(home, "baseoa", "demos", name))
    log = os.path.join(work, "playback-" + name + ".log")
    env = dict(os.environ, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    play = procs.start("playback", [
        "xvfb-run", "-a", "-s", "-screen 0 640x480x24",
        os.path.join(IOQ3_DIR, "ioquake3"), "+set", "com_basegame", "baseoa",
        "+set", "fs_basepath", OA_CLIENT_BASE, "+set", "fs_homepath", home] + cvars(cli_cvars) + [
        "+set", "cl_motd", "0", "+set", "net_enabled", "0", "+set", "cl_renderer", "opengl1",
        "+set", "r_mode", "-1", "+set", "r_customwidth", "320", "+set", "r_customheight", "240",
        "+set", "r_fullscreen", "0", "+set", "s_initsound", "0", "+set", "com_introplayed", "1",
        "+set", "timedemo", "1", "+demo", name], log, limit, env=env)
    pat = re.compile(r"(\d+) frames,? +([\d.]+) seconds")
    ok = wait_for(lambda: pat.search(read(log)) or play.poll() is not None, 60, 0.25)
    procs.stop(play, group=True)
    m = pat.search(read(log))
    if not ok or not m or int(m.group(1)) < 20:
        raise Fail(f"the recorded demo {name} did not play to its end:\n{read(log)[-2500:]}")
    # the server's answer to the player's quit is not part of the player's demo
    if "peers^7 disconnected" in read(log):
        raise Fail(f"the demo {name} shows the server's answer to the client's disconnect")
    return int(m.group(1)), m.group(2), name


def slipgate_binary():
    path = os.environ.get("SLIPGATE")
    if not path or not os.access(path, os.X_OK):
        raise Fail("SLIPGATE does not name the slipgate binary")
    return path


def run_cut(variant):
    """`slipgate demo cut` of the middle third of the real client's own demo
    of that session (../shared/testdata) must play to its end in the real
    client."""
    src_dir = os.path.join(os.environ.get("SG_TESTDATA", ""), "q3", "sessions", variant)
    srcs = [f for f in os.listdir(src_dir) if f.startswith("client_demo.")] \
        if os.path.isdir(src_dir) else []
    if not srcs:
        raise Fail(f"no client demo in {src_dir} (set SG_TESTDATA)")
    src = os.path.join(src_dir, srcs[0])
    info = subprocess.run([slipgate_binary(), "demo", "info", src], capture_output=True,
                          text=True, timeout=60).stdout
    m = re.search(r"server time (\d+) \.\. (\d+)", info)
    if not m:
        raise Fail(f"demo info gave no server time span:\n{info}")
    t0, t1 = int(m.group(1)), int(m.group(2))
    cut_from, cut_to = t0 + (t1 - t0) // 3, t0 + 2 * (t1 - t0) // 3
    work = tempfile.mkdtemp(prefix=f"sg-cut-{variant}-")
    procs = Procs()
    keep = False
    try:
        out = os.path.join(work, "cut." + src.rsplit(".", 1)[1])
        cut = subprocess.run([slipgate_binary(), "demo", "cut", src, out, "--from", str(cut_from),
                              "--to", str(cut_to)], capture_output=True, text=True, timeout=60)
        if cut.returncode != 0 or not os.path.exists(out):
            raise Fail(f"demo cut failed ({cut.returncode}):\n{cut.stdout}{cut.stderr}")
        frames, secs, name = play_demo(out, work, VARIANTS[variant][1], procs, 120)
        print(f"PASS cut-{variant}: server time {cut_from}..{cut_to} of {t0}..{t1} cut from "
              f"{os.path.basename(src)}; played: {frames} frames in {secs} s")
    except Fail:
        keep = True
        print(f"(work files kept in {work})")
        raise
    finally:
        procs.stop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def run_case(case, seconds):
    if case.startswith("cut-"):
        return run_cut(case[4:])
    variant, _, mode = case.partition("+")
    mode = mode or "relay"
    if variant not in VARIANTS or mode not in MODES:
        raise Fail(f"unknown case {case}")
    for exe in ("ioq3ded", "ioquake3"):
        if not os.access(os.path.join(IOQ3_DIR, exe), os.X_OK):
            print(f"SKIP: {IOQ3_DIR}/{exe} is not installed (apt-get install ioquake3 "
                  "ioquake3-server openarena openarena-server)")
            sys.exit(77)
    if not shutil.which("xvfb-run"):
        print("SKIP: xvfb-run is not installed (apt-get install xvfb xauth)")
        sys.exit(77)

    srv_cvars, cli_cvars = VARIANTS[variant]
    if mode == "anon":
        seconds = min(seconds, 12)  # the game is not the point: what slipgate wrote is
    work = tempfile.mkdtemp(prefix=f"sg-peers-{variant}-")
    procs = Procs()
    keep = False
    try:
        srv_port, px_port, cli_port = free_udp_port(), free_udp_port(), free_udp_port()
        limit = seconds + 60

        # The real server, with bots.
        srv, srv_log = start_server(procs, work, srv_cvars, srv_port, limit)

        # slipgate in front of it.
        stats = os.path.join(work, "stats.json")
        px_log = os.path.join(work, "slipgate.log")
        conf = os.path.join(work, "slipgate.conf")
        if mode == "midrecord":
            with open(conf, "w") as f:
                f.write(MIDRECORD_CONF.format(px=px_port, srv=srv_port, extra=""))
            where = []
        elif mode == "anon":
            os.makedirs(os.path.join(work, "out"))
            http_port = free_tcp_port()
            with open(conf, "w") as f:
                f.write(ANON_CONF.format(px=px_port, srv=srv_port, work=work, http=http_port))
            where = []
        elif mode in ("filters", "netem", "web"):
            with open(conf, "w") as f:
                if mode == "web":
                    http_port = free_tcp_port()
                    f.write(f"http 127.0.0.1:{http_port}\n")
                f.write((NETEM_CONF if mode == "netem" else FILTERS_CONF).format(
                    px=px_port, srv=srv_port, work=work))
            where = []
        else:
            where = ["-l", f"127.0.0.1:{px_port}", "-s", f"127.0.0.1:{srv_port}"]
        if mode in ("signed", "signedkill9", "anon"):
            make_key(work)
        px = procs.start("slipgate", [slipgate_binary()] + where + ["--stats", stats]
                         + [a.replace("{work}", work) for a in MODES[mode]], px_log, limit)
        if not wait_for(lambda: "listening on" in read(px_log), 10):
            raise Fail(f"slipgate did not start:\n{read(px_log)}")

        # NAT mode: the client talks to slipgate through UdpNat.
        nat = UdpNat(("127.0.0.1", px_port), limit) if mode == "nat" else None
        to = nat.port if nat else px_port

        # The real client, through slipgate, moving and firing.
        cli, cli_log, home_cli = start_client(
            procs, work, cli_cvars, cli_port, to, limit,
            SAY_CFG if mode in ("filters", "web") else MOVE_CFG)

        # In the game, then still in it after `seconds`.
        if not wait_for(lambda: "peers^7 entered the game" in read(srv_log), 30):
            raise Fail("the client never entered the game\n--- server\n"
                       f"{read(srv_log)[-1500:]}\n--- client\n{read(cli_log)[-1500:]}\n"
                       f"--- slipgate\n{read(px_log)[-1500:]}")
        entered = time.monotonic()
        if mode == "midrecord":
            time.sleep(min(3, seconds / 2))
            with open(conf, "w") as f:
                f.write(MIDRECORD_CONF.format(px=px_port, srv=srv_port,
                                              extra=f'    record "{work}/demos"\n'))
            for k in procs.children(px.pid):
                os.kill(k, signal.SIGHUP)
            if not wait_for(lambda: "recording to" in read(px_log), 10):
                raise Fail(f"no recording after the reload:\n{read(px_log)[-2000:]}")
        said = 0
        while time.monotonic() - entered < seconds:
            if nat and len(nat.outs) == 1 and time.monotonic() - entered > seconds / 2:
                nat.rebind()
            if mode in ("filters", "web") and time.monotonic() - entered > 2 + 4 * said:
                rcon(srv_port, f"say the server says badword {said}")
                said += 1
            if cli.poll() is not None:
                raise Fail(f"the client exited early:\n{read(cli_log)[-2000:]}")
            if px.poll() is not None:
                raise Fail(f"slipgate exited early:\n{read(px_log)[-2000:]}")
            time.sleep(0.5)
        if mode == "mapchange":
            rcon(srv_port, "map oa_dm2")
            if not wait_for(lambda: read(srv_log).count("peers^7 entered the game") >= 2, 40):
                raise Fail(f"the client did not come back after the map change:\n"
                           f"{read(srv_log)[-2000:]}")
            time.sleep(5)
        web = check_web(http_port, srv_port, work) if mode == "web" else ""
        if mode == "anon":
            for page in ("metrics", "api/sessions", "api/routes", "api/recordings"):
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/{page}",
                                            timeout=10) as r:
                    with open(os.path.join(work, "out", "http-" + page.replace("/", "-")),
                              "wb") as f:
                        f.write(r.read())
        status = getstatus(srv_port)
        players = [l for l in status.split("\n")[2:] if '"peers' in l]
        if not players or players[0].split()[1] == "999":
            raise Fail(f"after {seconds}s the server does not list a live 'peers':\n{status}")
        for bad in ("timed out", "peers^7 disconnected", "Connection Interrupted"):
            if bad in read(srv_log):
                raise Fail(f"server log says '{bad}':\n{read(srv_log)[-2000:]}")

        # Stop the client, then slipgate; check what slipgate counted.
        if mode in ("kill9", "signedkill9"):
            rc = procs.stop(px, signal.SIGKILL)
            procs.stop(cli, group=True)
            extra = check_killed_demo(work, home_cli, cli_cvars, procs, limit)
            if mode == "signedkill9":
                demos = [f for f in os.listdir(os.path.join(work, "demos"))
                         if not f.endswith(".sig")]
                extra += check_signed(work, os.path.join(work, "demos", demos[0]), False)
            print(f"PASS {case}: in the game {seconds}s; slipgate killed with SIGKILL ({rc}){extra}")
            return
        quit_client(cli, home_cli, srv_log, procs)
        rc = procs.stop(px)
        if rc != 0:
            raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
        st = json.loads(read(stats))
        if nat:
            nat.close()
            cli_port = nat.ports()[-1]
            extra = check_nat(st, nat, read(px_log))
        sessions = [s for r in st["routes"] for s in r["sessions"]
                    if s["client"] == f"127.0.0.1:{cli_port}"
                    or (mode == "anon" and re.fullmatch(r"anon-[0-9a-f]{8}", s["client"]))]
        if len(sessions) != 1:
            raise Fail(f"expected one session for the client, stats have {sessions}")
        c = sessions[0]["counters"]
        drops = sum(c["drops"].values())
        lost = c["drops"].get("filter", 0)
        if mode == "netem":
            # 10% of each direction, within a wide statistical margin
            sent = c["c2s_packets"] + c["s2c_packets"] + lost
            if not 0.05 * sent < lost < 0.15 * sent:
                raise Fail(f"netem 10% loss dropped {lost} of {sent}: {c}")
            drops -= lost
        # ~60 packets/s up and 20/s down while in the game.
        if c["c2s_packets"] < 20 * seconds or c["s2c_packets"] < 10 * seconds or drops:
            raise Fail(f"unexpected counters: {c}")
        extra = extra if nat else ""
        if mode in ("full", "mapchange", "auto", "nat", "signed"):
            extra += check_decoding(sessions[0], work, home_cli, cli_cvars, procs, limit)
        if mode == "signed":
            extra += check_signed(work, sessions[0]["demo"], True)
        if mode == "anon":
            extra += check_decoding(sessions[0], work, home_cli, cli_cvars, procs, limit)
            extra += check_signed(work, sessions[0]["demo"], True)
            files = [stats, px_log]
            for root, _, names in os.walk(os.path.join(work, "out")):
                files += [os.path.join(root, n) for n in names]
            extra += check_anon(work, files, cli_port, px_port, srv_port, sessions[0]["client"])
        if mode == "midrecord":
            extra = check_midrecord(sessions[0], work, cli_cvars, procs, limit)
        if mode == "filters":
            extra = check_filters(sessions[0], work, read(cli_log), read(srv_log), said,
                                  cli_cvars, procs, limit)
        if mode == "netem":
            extra = check_netem(sessions[0], work, lost, cli_cvars, procs, limit)
        if mode in ("full", "mapchange", "auto", "midrecord", "filters", "netem", "signed"):
            extra += check_demo_end(sessions[0], home_cli, px_log)
        extra += web
        if mode == "mapchange":
            files = sorted(os.listdir(os.path.join(work, "demos")))
            maps = sorted(f.split("-")[0] for f in files)
            if sessions[0]["demos"] != 2 or maps != ["oa_dm1", "oa_dm2"]:
                raise Fail(f"expected one demo per map, got {files} ({sessions[0]['demos']})")
            extra += f"; demos per map: {files}"
        print(f"PASS {case}: in the game {seconds}s; c2s {c['c2s_packets']} packets, "
              f"s2c {c['s2c_packets']} packets, 0 drops; player line: {players[0]}{extra}")
    except Fail:
        keep = True
        print(f"(work files kept in {work})")
        raise
    finally:
        procs.stop_all()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def run_main(doc, nargs, default_seconds, run, label):
    """The peers scripts' command line: `nargs` case words, then an optional
    `--seconds N`; run(*words, seconds); a Fail prints "FAIL label: why"
    and exits 1."""
    args = sys.argv[1:]
    seconds = default_seconds
    if "--seconds" in args:
        i = args.index("--seconds")
        seconds = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < nargs:
        print(doc)
        return 2
    try:
        run(*args[:nargs], seconds)
    except Fail as e:
        print(f"FAIL {label(*args[:nargs])}: {e}")
        return 1
    return 0


def main():
    return run_main(__doc__, 1, 30, run_case, lambda case: case)


if __name__ == "__main__":
    sys.exit(main())
