#!/usr/bin/env python3
"""Real-peer test for Quake 2: the Q2PRO client against the Q2PRO dedicated
server through slipgate with `reencode always`, one wire protocol forced
per case (../shared/peers/q2/README.md).

    q2_peers.py PROTOCOL[+all|+filters|+guard|+mapchange|+kill9|+sigterm] [--seconds N]
    q2_peers.py pcaprecord

PROTOCOL: 34 (original), 35 (R1Q2) or 36 (Q2PRO, new netchan, zlib).
Each protocol also records the session (--record) and plays the .dm2 to
its end in the Q2PRO client (timedemo; its console must say "Demo
finished", not "Couldn't read demo") and in Yamagi Quake II's client
(play_dm2_yquake2: with its default settings, in real time, to its end,
no crash): a 34 session's demo is the stream as the client accepted it,
a 35 or 36 session's is transcoded to 34.
`pcaprecord` (no server, no client): `slipgate pcap decode --record` of
each shared Quake 2 capture (../shared/testdata/q2/sessions: Q2PRO's
server with protocols 34, 35, 36; Yamagi's server and client), each .dm2
played to its end in both clients.
`+filters` runs FILTERS_CONF: the server's
"entered the game" print rewritten on its way to the client and a print
injected every 2 s; the client's console must show both, never the
original text.  `+guard` runs GUARD_CONF (guard with its defaults): the
server stuffs (rcon `stuffall`) a harmless `echo` to the client, which must
arrive, then a takeover (`echo ...;quit`), which guard must remove: the
client stays in the game, never echoes it, and slipgate logs the block.
`+all` (the issue's proof, each protocol, 30 s in the suite) runs ALL_CONF:
the rewrite and inject of `+filters` towards the client, the player's chat
rewritten and a chat injected towards the server, guard (the harmless and
the takeover stufftext of `+guard`), the record filter and `sign_key`:
besides `+filters`' and `+guard`'s checks, the server sees the rewritten
and the injected chats, every rebuilt datagram that differs from its
original carries a message a filter changed, injected or removed (the
inspector marks them), the .dm2 plays in q2pro and `slipgate demo verify`
says it is authentic, and "modified" once a byte is edited.
`36+download`: the server (allow_download 1) serves a file of a .pkz in its
homedir that the client lacks and downloads (a model the game precaches):
Q2PRO's compressed download (svc_zdownload, one raw-deflate stream); the
client gets it whole, and the chunks' `inflated` sizes in slipgate's
field dump (inspect) add up to the file's size, 0 decode errors.

Recording endings (34 only, to keep the suite short), each
demo read by `slipgate demo info` (0 blocks that fail to decode) and played
in q2pro:
  +mapchange  the server changes map half-way (rcon `gamemap arena`, as a
              map rotation does); the client reconnects on its netchan: two
              demos, one per map, the first ended at the new serverdata,
              each "Demo finished";
  +kill9      slipgate is killed with SIGKILL mid-game: the demo has no end
              marker, holds whole blocks only (each is flushed as it is
              written), and q2pro plays every one of them (its frames
              counted) until the end of the file;
  +sigterm    slipgate gets SIGTERM while the client is still in the game:
              it exits 0 and the demo ends with its end marker ("Demo
              finished").

The engines are built from the source snapshots in ../shared/peers/q2
(build_q2_peers.sh) and the placeholder data made (make_q2_data.sh) once
per build directory: $SG_PEERS_CACHE keeps them, made again when a file
of ../shared/peers/q2 changes (a lock makes concurrent runs wait).  The
engines refuse to run as root: they run as `nobody`.

What a pass means: the client connected with the forced protocol and
entered the game through slipgate, moved and fired for N seconds, was not
dropped, and slipgate's session was decoded by the q2 codec with zero
decode errors, every in-game message rebuilt from its decoded form and
byte-identical to what came; slipgate exited 0 on SIGTERM.  Everything runs
on 127.0.0.1 with free ports, under time limits, ended by PID.  Exit 77
(skip) only when the build tools or Xvfb are missing, saying so.
"""
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import (Fail, Procs, check_signed, free_udp_port, make_key, read,  # noqa: E402
                      run_main, wait_for)
from relay_peers import stats_session  # noqa: E402

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

# guard alone, with its defaults: the server's operator stuffs commands into
# the client by rcon (`stuffall`, a real svc_stufftext from q2proded): a
# harmless `echo` must arrive, a takeover (`echo ...;quit`) must not.
GUARD_CONF = """\
route default {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q2
    reencode always
    filter guard {{
    }}
}}
"""

RECORD_CASES = ("mapchange", "kill9", "sigterm")
PCAP_SESSIONS = ("q2pro_34", "q2pro_35", "q2pro_36", "yquake2_34")

# The proof: every filter of the chain at once, recorded and signed.
ALL_CONF = """\
sign_key "{key}"
sign_interval 5s
route default {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q2
    reencode always
    filter rewrite {{
        replace "entered the game" "came in through slipgate"
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
        after 5s
        every 3s
        count 3
    }}
    filter guard {{
    }}
    filter record {{
        directory "{demos}"
    }}
    filter inspect {{
        level fields
        format json
        show_repeats yes
        output "{inspect}"
    }}
}}
"""

# A compressed download: the server serves a file of its .pkz (Q2PRO's raw
# deflate stream, svc_zdownload) that the client lacks; inspect writes every
# field of the session's messages.
DOWNLOAD_CONF = """\
route default {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q2
    reencode always
    filter inspect {{
        level fields
        kinds game
        direction to_client
        output "{inspect}"
    }}
}}
"""
DOWNLOAD_PATH = "models/weapons/v_blast/tris.md2"  # precached by the game, absent here

FILTERS_CONF = """\
route default {{
    listen 127.0.0.1:{px}
    server 127.0.0.1:{srv}
    protocol q2
    reencode always
    filter rewrite {{
        replace "entered the game" "came in through slipgate"
        kinds print chat
    }}
    filter inject {{
        text "slipgate injected %session%\\n"
        kind print
        every 2s
    }}
}}
"""


def json_lines(text):
    """The lines of a JSON-lines file: split at newlines only (str.splitlines
    also splits at U+0085 and other separators a game's text may hold)."""
    return [x for x in text.split("\n") if x]


def peers_dir():
    d = os.environ.get("SG_Q2_PEERS")
    if not d or not os.path.exists(os.path.join(d, "build_q2_peers.sh")):
        raise Fail(f"SG_Q2_PEERS={d!r}: ../shared/peers/q2 is missing")
    return d


def engines():
    """(build dir, data dir): cached per build directory, keyed by the
    contents of ../shared/peers/q2."""
    src = peers_dir()
    cache = os.environ.get("SG_PEERS_CACHE") or tempfile.mkdtemp(prefix="sg-q2-")
    os.makedirs(cache, exist_ok=True)
    h = hashlib.sha256()
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    digest = h.hexdigest()
    b, d, stamp = os.path.join(cache, "B"), os.path.join(cache, "D"), os.path.join(cache, "stamp")
    with open(os.path.join(cache, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if read(stamp) != digest:
            for x in (b, d):
                shutil.rmtree(x, ignore_errors=True)
            for script, out, limit in (("build_q2_peers.sh", b, 900), ("make_q2_data.sh", d, 120)):
                r = subprocess.run(["bash", os.path.join(src, script), out], capture_output=True,
                                   text=True, timeout=limit)
                if r.returncode != 0:
                    raise Fail(f"{script} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            with open(stamp, "w") as f:
                f.write(digest)
    for x in (os.path.join(b, "q2pro", "q2pro"), os.path.join(b, "q2pro", "q2proded"),
              os.path.join(b, "yquake2", "quake2"), os.path.join(d, "baseq2")):
        if not os.path.exists(x):
            raise Fail(f"{x} was not built")
    # nobody reads them: every directory on the way must be searchable
    p = os.path.abspath(cache)
    while p != "/":
        st = os.stat(p)
        if st.st_uid == os.getuid() and not st.st_mode & 0o001:
            os.chmod(p, st.st_mode | 0o001)
        p = os.path.dirname(p)
    subprocess.run(["chmod", "-R", "a+rX", b, d], check=False)
    return b, d


def nobody_dir(path):
    os.makedirs(path, exist_ok=True)
    pw = pwd.getpwnam("nobody")
    os.chown(path, pw.pw_uid, pw.pw_gid)
    return path


def run_case(case, seconds):
    protocol, _, extra = case.partition("+")
    if case == "pcaprecord":
        protocol, extra = "34", case
    elif protocol not in ("34", "35", "36") or \
            extra not in ("", "all", "filters", "guard", "download") + RECORD_CASES:
        raise Fail(f"unknown case {case} (34, 35 or 36, optionally +all, +filters or +guard; "
                   f"34+mapchange, 34+kill9, 34+sigterm, 36+download; pcaprecord)")
    if extra in RECORD_CASES and protocol != "34":
        raise Fail(f"{case}: slipgate records protocol 34 sessions only")
    missing = [p for p in ("xvfb-run", "setpriv", "meson", "ninja", "make", "gcc")
               if not shutil.which(p)]
    if missing:
        print(f"SKIP: not installed: {missing} (scripts/deps.sh --test)")
        sys.exit(77)
    if os.getuid() != 0:
        print("SKIP: the engines run as nobody, which needs root (setpriv)")
        sys.exit(77)
    slipgate = os.environ.get("SLIPGATE")
    if not slipgate or not os.path.exists(slipgate):
        raise Fail(f"SLIPGATE={slipgate!r}: no binary")
    b, d = engines()
    work = tempfile.mkdtemp(prefix="sg-q2p-")
    os.chmod(work, 0o755)
    procs = Procs()
    try:
        if extra == "pcaprecord":
            run_pcaprecord(work, b, d, slipgate, procs)
            return
        run(protocol, extra, seconds, work, b, d, slipgate, procs)
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def rcon(port, password, command):
    """One rcon command to the server on 127.0.0.1:port (no answer awaited)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\xff\xff\xff\xffrcon " + password.encode() + b" " + command.encode() + b"\n",
                 ("127.0.0.1", port))


def start_q2proded(procs, b, d, home, port, log, limit, args=()):
    """q2proded as nobody on 127.0.0.1:port with `home` (nobody's), a
    deathmatch with no frag or time limit, rcon password sgrcon, then
    `args`, on map box; returns once it is ready."""
    procs.start("q2proded", AS_NOBODY + [
        os.path.join(b, "q2pro", "q2proded"), "+set", "basedir", d, "+set", "libdir",
        os.path.join(b, "q2pro"), "+set", "homedir", home, "+set", "net_ip", "127.0.0.1",
        "+set", "net_port", str(port), "+set", "deathmatch", "1", "+set", "fraglimit", "0",
        "+set", "timelimit", "0", "+set", "rcon_password", "sgrcon"] + list(args)
        + ["+map", "box"], log, limit)
    if not wait_for(lambda: "Q2PRO initialized" in read(log), 20):
        raise Fail(f"q2proded did not start:\n{read(log)[-2000:]}")


def start_q2pro_client(procs, b, d, home, log, to, limit, args=(), screen="640x480x24"):
    """The Q2PRO client as nobody under Xvfb with `home` (nobody's), sound
    off, a 320x240 window, then `args`, connecting to 127.0.0.1:to; it reads
    console commands from stdin (sys_console 1).  Returns (its process,
    say(command))."""
    logf = open(log, "wb")
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    cli = subprocess.Popen(
        ["timeout", "-k", "5", str(limit)] + AS_NOBODY + [
            "xvfb-run", "-a", "-s", f"-screen 0 {screen}", os.path.join(b, "q2pro", "q2pro"),
            "+set", "basedir", d, "+set", "libdir", os.path.join(b, "q2pro"), "+set", "homedir",
            home, "+set", "sys_console", "1", "+set", "s_enable", "0", "+set",
            "vid_fullscreen", "0", "+set", "vid_geometry", "320x240"] + list(args)
        + ["+connect", f"127.0.0.1:{to}"],
        stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT, env=env,
        start_new_session=True)
    procs.procs.append(("q2pro", cli, logf))

    def say(cmd):
        try:
            cli.stdin.write((cmd + "\n").encode())
            cli.stdin.flush()
        except OSError:
            pass
    return cli, say


def run(protocol, extra, seconds, work, b, d, slipgate, procs):
    filters = extra in ("filters", "all")
    limit = seconds + 90
    srv_port, px_port = free_udp_port(), free_udp_port()
    srv_home, cl_home = nobody_dir(os.path.join(work, "srv")), nobody_dir(os.path.join(work, "cl"))
    srv_log = os.path.join(work, "server.log")
    dl_data = None
    if extra == "download":
        dl_data = b"".join(b"slipgate zdownload line %05d %s\n" % (k, b"x" * (k % 37))
                           for k in range(3000))
        pkz = os.path.join(nobody_dir(os.path.join(srv_home, "baseq2")), "sgdl.pkz")
        with zipfile.ZipFile(pkz, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(DOWNLOAD_PATH, dl_data)
        os.chmod(pkz, 0o644)
    start_q2proded(procs, b, d, srv_home, srv_port, srv_log, limit,
                   ["+set", "allow_download", "1" if dl_data else "0",
                    "+set", "developer", "1" if dl_data else "0"])

    px_log, stats = os.path.join(work, "slipgate.log"), os.path.join(work, "stats.json")
    rec_dir = os.path.join(work, "demos")
    record = ["--record", rec_dir] if extra in ("",) + RECORD_CASES else []
    recording = bool(record) or extra == "all"
    sign = ["+set", "sign_key", make_key(work), "+set", "sign_interval", "2s"] \
        if extra == "kill9" else []
    where = ["-l", f"127.0.0.1:{px_port}", "-s", f"127.0.0.1:{srv_port}", "-p", "q2",
             "+set", "reencode", "always"]
    inspect = os.path.join(work, "inspect.txt")
    if extra in ("all", "filters", "guard", "download"):
        conf = os.path.join(work, "slipgate.conf")
        text = {"all": ALL_CONF, "filters": FILTERS_CONF, "guard": GUARD_CONF,
                "download": DOWNLOAD_CONF}[extra]
        with open(conf, "w") as f:
            f.write(text.format(px=px_port, srv=srv_port, inspect=inspect, demos=rec_dir,
                                key=make_key(work) if extra == "all" else ""))
        where = ["-c", conf]
    px = procs.start("slipgate", [slipgate] + where + ["--stats", stats, "+set",
                                                       "stats_interval", "1s"] + record + sign,
                     px_log, limit)
    if not wait_for(lambda: "listening on" in read(px_log), 10):
        raise Fail(f"slipgate did not start:\n{read(px_log)}")

    cl_log = os.path.join(work, "client.log")
    cli, say = start_q2pro_client(procs, b, d, cl_home, cl_log, px_port, limit, [
        "+set", "allow_download", "1" if dl_data else "0", "+set", "name", "slipgate",
        "+set", "cl_protocol", protocol])

    if not wait_for(lambda: "slipgate entered the game" in read(srv_log), 45):
        raise Fail(f"the client did not enter the game through slipgate\n--- server ---\n"
                   f"{read(srv_log)[-1500:]}\n--- slipgate ---\n{read(px_log)[-2000:]}\n"
                   f"--- client ---\n{read(cl_log)[-1500:]}")
    if f"(protocol {protocol})" not in read(cl_log):
        raise Fail(f"the client did not connect with protocol {protocol}:\n{read(cl_log)[-1500:]}")

    # Move and fire for `seconds`.
    steps = ["+forward", "+attack", "-attack", "-forward", "+left", "+moveup", "-moveup",
             "-left", "+back", "+attack", "-attack", "-back", "+right", "+lookup", "-lookup",
             "-right", "+moveleft", "-moveleft"]
    i = 0

    def play(secs):
        nonlocal i
        end = time.time() + secs
        while time.time() < end:
            say(steps[i % len(steps)])
            if extra == "all" and i % 12 == 11:
                say("say hello badword from slipgate")
            i += 1
            time.sleep(0.5)
            if cli.poll() is not None:
                raise Fail(f"the client exited:\n{read(cl_log)[-1500:]}")

    if extra == "mapchange":
        # Half the time on box, then the server changes map: the client
        # reconnects on its netchan ("changing", "reconnect", a new serverdata).
        play(seconds / 2)
        rcon(srv_port, "sgrcon", "gamemap arena")
        if not wait_for(lambda: read(srv_log).count("slipgate entered the game") >= 2, 30):
            raise Fail(f"the client did not come back after the map change:\n"
                       f"--- server ---\n{read(srv_log)[-1500:]}\n--- client ---\n"
                       f"{read(cl_log)[-1500:]}")
        play(seconds / 2)
    elif extra in ("guard", "all"):
        play(seconds / 2)
        rcon(srv_port, "sgrcon", 'stuffall "echo slipgate harmless stuff"')
        if not wait_for(lambda: "slipgate harmless stuff" in read(cl_log), 10):
            raise Fail(f"guard (or something) kept a harmless stufftext from the client:\n"
                       f"--- slipgate ---\n{read(px_log)[-1500:]}\n--- client ---\n"
                       f"{read(cl_log)[-1500:]}")
        time.sleep(1)
        rcon(srv_port, "sgrcon", 'stuffall "echo slipgate takeover ran;quit"')
        play(seconds / 2)
    else:
        play(seconds)
    if re.search(r"slipgate (disconnected|timed out|was kicked)|overflowed", read(srv_log)):
        raise Fail(f"the client left the server:\n{read(srv_log)[-1500:]}")
    say("say slipgate test done")
    time.sleep(1)

    if extra == "kill9":
        # slipgate dies mid-game: the demo ends after its last whole block
        os.kill(Procs.children(px.pid)[0], signal.SIGKILL)
        procs.stop(px, signal.SIGTERM, 5)
        procs.stop(cli, signal.SIGTERM, 5, group=True)
        played = check_recordings(work, b, d, slipgate, rec_dir, extra, px_log, procs)
        print(f"PASS q2_peers@34+kill9: slipgate killed with SIGKILL after {seconds} s in "
              f"the game{played}")
        return
    if extra == "sigterm":
        # slipgate ends first, the client still in the game
        rc = procs.stop(px, signal.SIGTERM, 10)
        procs.stop(cli, signal.SIGTERM, 5, group=True)
        ending = "; slipgate stopped first (SIGTERM)"
    else:
        # The player leaves as players do: disconnect (the client's clc
        # stringcmd "disconnect"), then quit; the server sees it go, and
        # slipgate ends the demo at the client's disconnect.
        say("disconnect")
        if not wait_for(lambda: "slipgate disconnected" in read(srv_log), 10):
            raise Fail(f"the server did not see the client disconnect:\n{read(srv_log)[-1500:]}")
        if recording and not wait_for(lambda: "; the client disconnected" in read(px_log), 10):
            raise Fail(f"slipgate did not end the demo at the client's disconnect:\n"
                       f"{read(px_log)[-2000:]}")
        # its session ends once quiet five seconds after the disconnect, not at idle_timeout
        if not wait_for(lambda: "session end reason=client left" in read(px_log), 15):
            raise Fail(f"slipgate did not end the session at the client's disconnect:\n"
                       f"{read(px_log)[-2000:]}")
        say("quit")
        if not wait_for(lambda: cli.poll() is not None, 10):
            raise Fail(f"the client did not quit:\n{read(cl_log)[-1500:]}")
        procs.stop(cli, signal.SIGTERM, 5, group=True)
        rc = procs.stop(px, signal.SIGTERM, 10)
        ending = "; the client disconnected and quit"
    if rc != 0:
        raise Fail(f"slipgate exited {rc} on SIGTERM:\n{read(px_log)[-2000:]}")
    route, sessions = stats_session(stats)
    if not sessions:
        raise Fail("--stats lists no session")
    s = max(sessions, key=lambda x: x["counters"]["c2s_packets"])
    dd = s.get("decode")
    if s.get("codec") != "q2" or not dd:
        raise Fail(f"the game's session was not decoded as Quake 2: {s}")
    if dd["errors"] or s.get("first_error"):
        raise Fail(f"decode errors: {dd}, first: {s.get('first_error')}")
    if dd["messages"] < seconds * 10:
        raise Fail(f"too few in-game messages decoded: {dd}")
    if dd["reencoded"] != dd["messages"] or dd["reencode_errors"]:
        raise Fail(f"not every message was rebuilt: {dd}")
    if extra not in ("all", "filters", "guard") and dd["reencode_identical"] != dd["reencoded"]:
        raise Fail(f"rebuilt messages differ from the originals: {dd}")
    if any(route["counters"]["drops"].values()):
        raise Fail(f"drops: {route['counters']['drops']}")
    played = ""
    if filters:
        texts = read(cl_log)
        if "slipgate came in through slipgate" not in texts:
            raise Fail(f"the rewritten print is not in the client's console:\n{texts[-2500:]}")
        if "slipgate entered the game" in texts:
            raise Fail(f"the original print reached the client:\n{texts[-2500:]}")
        injected = len(re.findall(r"slipgate injected \d+", texts))
        if injected < 3:
            raise Fail(f"{injected} injected prints in the client's console:\n{texts[-2500:]}")
        played = f"; the client saw the rewritten print and {injected} injected prints"
    if extra in ("guard", "all"):
        played += check_guard(cl_log, px_log)
    if extra == "all":
        played += check_all(dd, inspect, srv_log, cl_log)
    if extra == "download":
        played = check_download(cl_home, cl_log, srv_log, inspect, dl_data)
    if recording:
        played += check_recordings(work, b, d, slipgate, rec_dir, extra, px_log, procs)
    print(f"PASS q2_peers@{protocol}{'+' + extra if extra else ''}: the Q2PRO client in the game "
          f"through slipgate for "
          f"{seconds} s with protocol {protocol}; decoded {dd['datagrams']} datagrams "
          f"({dd['messages']} in-game, {dd['rejected']} rejected), 0 errors, "
          f"{dd['reencoded']} rebuilt ({dd['reencode_identical']} byte-identical){played}{ending}")


def check_all(dd, inspect, srv_log, cl_log):
    """What +all shows besides +filters' and +guard's checks: every
    in-game datagram rebuilt, and each one that differs from what its sender
    sent carries a message a filter changed, injected or removed (the
    inspector marks them); the server saw the player's chat rewritten and
    the injected chats, which came back to the client."""
    frames = [json.loads(x) for x in json_lines(read(inspect))]
    rebuilt = [f for f in frames if f["frame"] == "message" and f["reencoded"]]
    marked = [f for f in rebuilt if any(m["changed"] or m["injected"] or m["removed"]
                                        for m in f.get("msgs", []))]
    if len(rebuilt) != dd["reencoded"]:
        raise Fail(f"inspect shows {len(rebuilt)} rebuilt frames, --stats {dd}")
    if dd["reencoded"] - dd["reencode_identical"] != len(marked):
        raise Fail(f"{dd['reencoded'] - dd['reencode_identical']} rebuilt datagrams differ "
                   f"from their originals, but filters changed {len(marked)}: {dd}")
    srv, cli = read(srv_log), read(cl_log)
    said = len(re.findall(r"slipgate: hello goodword from slipgate", srv))
    hi_srv = len(re.findall(r"slipgate: slipgate says hi \d+", srv))
    hi_cli = len(re.findall(r"slipgate: slipgate says hi \d+", cli))
    if said < 3 or "badword" in srv or hi_srv < 3 or hi_cli < 3:
        raise Fail(f"chat towards the server: {said} rewritten lines at the server (badword "
                   f"there: {'badword' in srv}), injected chats {hi_srv} at the server, "
                   f"{hi_cli} back at the client\n--- server ---\n{srv[-2000:]}")
    return (f"; {len(marked)} datagrams changed by filters, the other "
            f"{dd['reencode_identical']} rebuilt byte-identical; the server saw {said} "
            f"rewritten chats and {hi_srv} injected ones")


def check_guard(cl_log, px_log):
    """The stuffed takeover never ran: guard removed that stufftext (logged
    once), and the client, still in the game, never echoed it."""
    texts = read(cl_log)
    blocked = re.findall(r"guard: blocked '(\w+)' in a stufftext", read(px_log))
    if "slipgate takeover ran" in texts:
        raise Fail(f"the stuffed takeover ran in the client:\n{texts[-2500:]}")
    if "quit" not in blocked:
        raise Fail(f"guard did not block the takeover (blocked {blocked}):\n"
                   f"{read(px_log)[-2500:]}")
    if len(blocked) != 1:
        raise Fail(f"guard blocked {blocked}: one takeover was stuffed")
    return (f"; the harmless stufftext arrived, guard blocked {blocked} in the stuffed "
            f"takeover, the client stayed")


def check_download(cl_home, cl_log, srv_log, inspect, data):
    """The client downloaded the file whole through slipgate, compressed
    (the server says so), and slipgate inflated the chunks as the client
    did: their `inflated` fields add up to the file's size."""
    got = os.path.join(cl_home, "baseq2", DOWNLOAD_PATH)
    if f"[UDP] {DOWNLOAD_PATH} [DONE]" not in read(cl_log) or read(got).encode("latin-1") != data:
        raise Fail(f"the client did not download {DOWNLOAD_PATH} whole:\n{read(cl_log)[-2000:]}")
    if "Serving compressed download to slipgate" not in read(srv_log):
        raise Fail(f"the server did not serve it compressed:\n{read(srv_log)[-1500:]}")
    chunks = [ln for ln in json_lines(read(inspect)) if "svc_zdownload" in ln]
    sizes = [int(x) for ln in chunks for x in re.findall(r" inflated=(\d+)", ln)]
    if len(sizes) != len(chunks) or len(chunks) < 2 or sum(sizes) != len(data):
        raise Fail(f"{len(chunks)} svc_zdownload chunks, inflated sizes {sizes} (sum "
                   f"{sum(sizes)}), the file has {len(data)} bytes:\n" + "\n".join(chunks[:5]))
    return (f"; the client downloaded {DOWNLOAD_PATH} ({len(data)} bytes) in {len(chunks)} "
            f"compressed chunks, which slipgate inflated to {sum(sizes)} bytes")


def dm2_blocks(path):
    """The blocks of a .dm2: (lengths of the whole blocks, end marker seen,
    bytes after the last whole block)."""
    with open(path, "rb") as f:
        data = f.read()
    lens, at = [], 0
    while at + 4 <= len(data):
        (n,) = struct.unpack_from("<i", data, at)
        if n == -1:
            return lens, True, len(data) - at - 4
        if n < 0 or n > 0x8000:
            raise Fail(f"{path}: block length {n} at offset {at}")
        if at + 4 + n > len(data):
            break
        lens.append(n)
        at += 4 + n
    return lens, False, len(data) - at


def demo_info(slipgate, path):
    """`slipgate demo info` of the file: its output (0 blocks that fail to
    decode, or a Fail)."""
    r = subprocess.run([slipgate, "demo", "info", path], capture_output=True, text=True,
                       timeout=30)
    if "failed to decode" in r.stdout or "protocol:     34" not in r.stdout:
        raise Fail(f"slipgate demo info {path}:\n{r.stdout}{r.stderr}")
    return r


def play_dm2(work, b, d, path, procs, tag):
    """Play a .dm2 in q2pro (timedemo, no nextserver): returns (clean, frames):
    clean when its console says "Demo finished", not when it says "Couldn't
    read demo" (a file that ends without the end marker)."""
    home = nobody_dir(os.path.join(work, f"play-{tag}"))
    nobody_dir(os.path.join(home, "baseq2"))
    nobody_dir(os.path.join(home, "baseq2", "demos"))
    shutil.copy(path, os.path.join(home, "baseq2", "demos", "rec.dm2"))
    subprocess.run(["chmod", "-R", "a+rwX", home], check=False)
    log = os.path.join(work, f"play-{tag}.log")
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    p = procs.start(f"q2pro-play-{tag}", AS_NOBODY + [
        "env", f"HOME={home}", "xvfb-run", "-a", "-s", "-screen 0 640x480x24",
        os.path.join(b, "q2pro", "q2pro"), "+set", "basedir", d, "+set", "libdir",
        os.path.join(b, "q2pro"), "+set", "homedir", home, "+set", "sys_console", "1", "+set",
        "s_enable", "0", "+set", "vid_geometry", "320x240", "+set", "timedemo", "1",
        "+demo", "rec"], log, 60, env=env)
    frames = r"(\d+) frames, [\d.]+ seconds"
    ended = wait_for(lambda: re.search(r"Demo finished|Couldn't read demo", read(log)) and
                     re.search(frames, read(log)), 50)
    procs.stop(p, signal.SIGTERM, 5, group=True)
    text = read(log)
    if not ended:
        raise Fail(f"q2pro did not play {os.path.basename(path)} to its end:\n{text[-2000:]}")
    m = re.search(frames, text)
    return "Demo finished" in text and "Couldn't read demo" not in text, int(m.group(1)), text


def play_dm2_yquake2(work, b, d, path, procs, tag, frames):
    """Play a .dm2 in Yamagi Quake II's client with its default settings
    (movement prediction on, downloads allowed; only the frame rates capped
    so it does not spin a core, and sound off) through `demomap`: its
    local demo server sends each block to the client as one datagram.  It
    plays in real time only (timedemo is a cheat there), `frames` server
    frames at 10 a second; the end of the demo runs `nextdemo`, which
    prints DEMO_FINISHED and quits.  Passes when it got there and exited 0
    after at least half the demo's time, with no crash, no dropped block
    ("dumped unreliable"), no error and no download attempt.  Returns the
    seconds it played."""
    return yq2_finish(procs, yq2_start(work, b, d, path, procs, tag, frames))


def yq2_start(work, b, d, path, procs, tag, frames):
    """Start Yamagi Quake II on `path` (see play_dm2_yquake2); returns what
    yq2_finish() needs.  Several may play at once: each has its own home."""
    home = nobody_dir(os.path.join(work, f"yplay-{tag}"))
    base = os.path.join(home, ".local", "share", "YamagiQ2", "baseq2")
    for x in (os.path.join(home, ".local"), os.path.join(home, ".local", "share"),
              os.path.dirname(base), base, os.path.join(base, "demos")):
        nobody_dir(x)
    shutil.copy(path, os.path.join(base, "demos", "rec.dm2"))
    with open(os.path.join(base, "play.cfg"), "w") as f:
        f.write('alias demofin "echo DEMO_FINISHED; quit"\nset nextdemo demofin\n')
    subprocess.run(["chmod", "-R", "a+rwX", home], check=False)
    log = os.path.join(work, f"yplay-{tag}.log")
    length = frames / 10
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy")
    start = time.monotonic()
    p = procs.start(f"yquake2-play-{tag}", AS_NOBODY + [
        "env", f"HOME={home}", "SDL_AUDIODRIVER=dummy", "xvfb-run", "-a", "-s",
        "-screen 0 640x480x24", "stdbuf", "-oL", os.path.join(b, "yquake2", "quake2"),
        "-datadir", d, "+set", "vid_renderer", "soft", "+set", "vid_fullscreen", "0", "+set",
        "r_mode", "0", "+set", "s_initsound", "0", "+set", "vid_maxfps", "60", "+set",
        "cl_maxfps", "60", "+exec", "play.cfg", "+demomap", "rec.dm2"], log,
        int(length) + 90, env=env)
    return p, log, start, length, path


def yq2_finish(procs, started):
    """Wait for a yq2_start() play to end and check it (play_dm2_yquake2)."""
    p, log, start, length, path = started
    wait_for(lambda: p.poll() is not None, length + 60, step=0.25)
    took = time.monotonic() - start
    rc = procs.stop(p, signal.SIGTERM, 5, group=True)
    text = read(log)
    name = os.path.basename(path)
    bad = [x for x in ("crashed", "Segmentation fault", "dumped unreliable", "ERROR:",
                       "Downloading", "msglen > MAX_MSGLEN") if x in text]
    if bad or rc != 0 or "DEMO_FINISHED" not in text:
        raise Fail(f"Yamagi Quake II did not play {name} to its end (exit {rc}, {took:.0f} s, "
                   f"{bad}):\n{text[-2500:]}")
    if took < length / 2:
        raise Fail(f"Yamagi Quake II ended {name} after {took:.1f} s, the demo lasts "
                   f"{length:.0f} s:\n{text[-2000:]}")
    return took


def run_pcaprecord(work, b, d, slipgate, procs):
    """Each shared Quake 2 capture recorded by `slipgate pcap decode
    --record` plays to its end in q2pro and in Yamagi Quake II."""
    td = os.environ.get("SG_TESTDATA")
    if not td or not os.path.isdir(os.path.join(td, "q2", "sessions")):
        raise Fail(f"SG_TESTDATA={td!r}: ../shared/testdata is missing")
    out, played = [], []
    for name in PCAP_SESSIONS:
        rec = os.path.join(work, "rec-" + name)
        os.makedirs(rec)
        r = subprocess.run([slipgate, "pcap", "decode", "--record", rec,
                            os.path.join(td, "q2", "sessions", name, "capture.pcap")],
                           capture_output=True, text=True, timeout=120)
        demos = sorted(f for f in os.listdir(rec) if f.endswith(".dm2"))
        if r.returncode != 0 or ", 0 errors" not in r.stderr or len(demos) != 1:
            raise Fail(f"{name}: pcap decode --record: exit {r.returncode}, {demos}:\n"
                       f"{r.stderr[-1500:]}")
        path = os.path.join(rec, demos[0])
        lens, marker, tail = dm2_blocks(path)
        info = demo_info(slipgate, path)
        if not marker or tail or "errors:       0" not in info.stdout:
            raise Fail(f"{name}: not ended cleanly:\n{info.stdout}")
        clean, frames, text = play_dm2(work, b, d, path, procs, name)
        if not clean or frames < 250:
            raise Fail(f"{name}: q2pro played {frames} frames, clean {clean}:\n{text[-1500:]}")
        played.append((name, path, len(lens), frames))
    # Yamagi plays in real time only: the four at once, each in its own home
    # (one after the other's first line: xvfb-run -a picks a free display by its lock file)
    started = []
    for name, path, _, frames in played:
        started.append(yq2_start(work, b, d, path, procs, name, frames))
        log = started[-1][1]
        wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 0, 15, step=0.1)
    for (name, _, blocks, frames), st in zip(played, started):
        took = yq2_finish(procs, st)
        out.append(f"{name}: {blocks} blocks, {frames} frames in q2pro, {took:.0f} s "
                   f"to its end in Yamagi Quake II")
    print("PASS q2_peers@pcaprecord: " + "; ".join(out))


def check_recordings(work, b, d, slipgate, rec_dir, extra, px_log, procs):
    """slipgate's .dm2 files of the session: one per map (two for
    mapchange), each read by `slipgate demo info` and played in q2pro to its
    end: cleanly ("Demo finished", the end marker there) unless slipgate was
    killed (kill9: no end marker, whole blocks, every one of them played);
    and each played to its end in Yamagi Quake II (play_dm2_yquake2)."""
    demos = sorted(os.path.join(rec_dir, f) for f in os.listdir(rec_dir)
                   if f.endswith(".dm2")) if os.path.isdir(rec_dir) else []
    signed = extra in ("all", "kill9")
    sigs = sorted(f for f in os.listdir(rec_dir) if f.endswith(".sig")) \
        if os.path.isdir(rec_dir) else []
    if sigs != ([os.path.basename(p) + ".sig" for p in demos] if signed else []):
        raise Fail(f"signatures {sigs} beside the demos {demos} (signed: {signed})")
    want = 2 if extra == "mapchange" else 1
    if len(demos) != want:
        raise Fail(f"expected {want} recorded .dm2 in {rec_dir}: {demos}\n{read(px_log)[-2000:]}")
    out, maps = [], []
    for k, path in enumerate(demos):
        lens, marker, tail = dm2_blocks(path)
        info = demo_info(slipgate, path)
        maps.append(re.search(r"map:\s+(.*)", info.stdout).group(1))
        clean, frames, text = play_dm2(work, b, d, path, procs, str(k))
        name = os.path.basename(path)
        if extra == "kill9":
            if marker or "without end marker" not in info.stdout:
                raise Fail(f"{name}: a killed slipgate wrote an end marker?\n{info.stdout}")
            if tail:
                # each block goes out whole with one flush (one write of < 4 KiB)
                raise Fail(f"{name}: {tail} bytes of a cut block after {len(lens)} whole ones: "
                           f"the blocks are not flushed one by one")
            if "Couldn't read demo: Unexpected end of file" not in text:
                raise Fail(f"{name}: q2pro did not read it up to the end of the file:\n"
                           f"{text[-1500:]}")
            how = f"no end marker, {len(lens)} whole blocks, played"
        else:
            if not marker or tail or info.returncode != 0 or "errors:       0" not in info.stdout:
                raise Fail(f"{name}: not ended cleanly (marker {marker}, {tail} bytes after "
                           f"it):\n{info.stdout}")
            if not clean:
                raise Fail(f"{name}: q2pro did not finish it cleanly:\n{text[-1500:]}")
            how = "ended cleanly, Demo finished"
        if frames < 30:
            raise Fail(f"{name}: q2pro played only {frames} frames:\n{text[-1500:]}")
        if signed:
            how += check_signed(work, path, extra != "kill9")
        took = play_dm2_yquake2(work, b, d, path, procs, str(k), frames)
        out.append(f"{name} ({maps[-1]}): {len(lens)} blocks, {how} in q2pro ({frames} frames), "
                   f"to its end in Yamagi Quake II ({took:.0f} s)")
    if extra == "mapchange":
        if sorted(maps) != sorted(set(maps)) or not any("arena" in m for m in maps):
            raise Fail(f"the two demos are not of box and arena: {maps}")
        if "demo " not in read(px_log) or len(re.findall(r"demo .* finished", read(px_log))) < 2:
            raise Fail(f"slipgate did not finish both demos:\n{read(px_log)[-2000:]}")
    return "; recorded " + "; ".join(out)


def main():
    return run_main(__doc__, 1, 20, run_case, lambda p: f"q2_peers@{p}")


if __name__ == "__main__":
    sys.exit(main())
