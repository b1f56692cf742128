#!/usr/bin/env python3
"""Real-peer test for Quake 2: the Q2PRO client against the Q2PRO dedicated
server through slipgate with `reencode always`, one wire protocol forced
per case (../shared/peers/q2/README.md).

    q2_peers.py PROTOCOL[+filters] [--seconds N]

PROTOCOL: 34 (original), 35 (R1Q2) or 36 (Q2PRO, new netchan, zlib).
Each protocol also records the session (--record) and plays the .dm2 to
its end in the Q2PRO client (timedemo): a 34 session's demo is the stream
as the client accepted it, a 35 or 36 session's is transcoded to 34.  `+filters` runs FILTERS_CONF: the server's
"entered the game" print rewritten on its way to the client and a print
injected every 2 s; the client's console must show both, never the
original text.

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
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import Fail, Procs, free_udp_port, read, run_main, wait_for  # noqa: E402
from relay_peers import stats_session  # noqa: E402

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

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
              os.path.join(d, "baseq2")):
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
    if protocol not in ("34", "35", "36") or extra not in ("", "filters"):
        raise Fail(f"unknown case {case} (34, 35 or 36, optionally +filters)")
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
        run(protocol, extra == "filters", seconds, work, b, d, slipgate, procs)
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)


def run(protocol, filters, seconds, work, b, d, slipgate, procs):
    limit = seconds + 90
    srv_port, px_port = free_udp_port(), free_udp_port()
    srv_home, cl_home = nobody_dir(os.path.join(work, "srv")), nobody_dir(os.path.join(work, "cl"))
    srv_log = os.path.join(work, "server.log")
    procs.start("q2proded", AS_NOBODY + [
        os.path.join(b, "q2pro", "q2proded"), "+set", "basedir", d, "+set", "libdir",
        os.path.join(b, "q2pro"), "+set", "homedir", srv_home, "+set", "net_ip", "127.0.0.1",
        "+set", "net_port", str(srv_port), "+set", "deathmatch", "1", "+set", "fraglimit", "0",
        "+set", "timelimit", "0", "+map", "box"], srv_log, limit)
    if not wait_for(lambda: "Q2PRO initialized" in read(srv_log), 20):
        raise Fail(f"q2proded did not start:\n{read(srv_log)[-2000:]}")

    px_log, stats = os.path.join(work, "slipgate.log"), os.path.join(work, "stats.json")
    rec_dir = os.path.join(work, "demos")
    record = ["--record", rec_dir] if not filters else []
    where = ["-l", f"127.0.0.1:{px_port}", "-s", f"127.0.0.1:{srv_port}", "-p", "q2",
             "+set", "reencode", "always"]
    if filters:
        conf = os.path.join(work, "slipgate.conf")
        with open(conf, "w") as f:
            f.write(FILTERS_CONF.format(px=px_port, srv=srv_port))
        where = ["-c", conf]
    px = procs.start("slipgate", [slipgate] + where + ["--stats", stats, "+set",
                                                       "stats_interval", "1s"] + record,
                     px_log, limit)
    if not wait_for(lambda: "listening on" in read(px_log), 10):
        raise Fail(f"slipgate did not start:\n{read(px_log)}")

    cl_log = os.path.join(work, "client.log")
    logf = open(cl_log, "wb")
    env = dict(os.environ, HOME=cl_home, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    cli = subprocess.Popen(
        ["timeout", "-k", "5", str(limit)] + AS_NOBODY + [
            "xvfb-run", "-a", "-s", "-screen 0 640x480x24", os.path.join(b, "q2pro", "q2pro"),
            "+set", "basedir", d, "+set", "libdir", os.path.join(b, "q2pro"), "+set", "homedir",
            cl_home, "+set", "sys_console", "1", "+set", "s_enable", "0", "+set",
            "vid_fullscreen", "0", "+set", "vid_geometry", "320x240", "+set", "allow_download",
            "0", "+set", "name", "slipgate", "+set", "cl_protocol", protocol, "+connect",
            f"127.0.0.1:{px_port}"],
        stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT, env=env,
        start_new_session=True)
    procs.procs.append(("q2pro", cli, logf))

    def say(cmd):
        try:
            cli.stdin.write((cmd + "\n").encode())
            cli.stdin.flush()
        except OSError:
            pass

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
    end, i = time.time() + seconds, 0
    while time.time() < end:
        say(steps[i % len(steps)])
        i += 1
        time.sleep(0.5)
        if cli.poll() is not None:
            raise Fail(f"the client exited:\n{read(cl_log)[-1500:]}")
    if re.search(r"slipgate (disconnected|timed out|was kicked)|overflowed", read(srv_log)):
        raise Fail(f"the client left the server:\n{read(srv_log)[-1500:]}")
    say("say slipgate test done")
    time.sleep(1)

    procs.stop(cli, signal.SIGTERM, 5, group=True)
    rc = procs.stop(px, signal.SIGTERM, 10)
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
    if not filters and dd["reencode_identical"] != dd["reencoded"]:
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
    if record:
        played = check_playback(work, b, d, rec_dir, procs)
    print(f"PASS q2_peers@{protocol}{'+filters' if filters else ''}: the Q2PRO client in the game through slipgate for "
          f"{seconds} s with protocol {protocol}; decoded {dd['datagrams']} datagrams "
          f"({dd['messages']} in-game, {dd['rejected']} rejected), 0 errors, "
          f"{dd['reencoded']} rebuilt ({dd['reencode_identical']} byte-identical){played}")


def check_playback(work, b, d, rec_dir, procs):
    """slipgate's .dm2 of the session plays to its end in the real client
    (q2pro, timedemo; the cfg's nextserver alias prints DEMO_FINISHED)."""
    demos = [f for f in os.listdir(rec_dir) if f.endswith(".dm2")] if os.path.isdir(rec_dir) else []
    if len(demos) != 1:
        raise Fail(f"expected one recorded .dm2 in {rec_dir}: {demos}")
    home = nobody_dir(os.path.join(work, "play"))
    nobody_dir(os.path.join(home, "baseq2"))
    nobody_dir(os.path.join(home, "baseq2", "demos"))
    shutil.copy(os.path.join(rec_dir, demos[0]), os.path.join(home, "baseq2", "demos", "rec.dm2"))
    with open(os.path.join(home, "baseq2", "play.cfg"), "w") as f:
        f.write('alias demofin "echo DEMO_FINISHED; quit"\nset nextserver demofin\n')
    subprocess.run(["chmod", "-R", "a+rwX", home], check=False)
    log = os.path.join(work, "play.log")
    env = dict(os.environ, HOME=home, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    p = procs.start("q2pro-play", AS_NOBODY + [
        "env", f"HOME={home}", "xvfb-run", "-a", "-s", "-screen 0 640x480x24",
        os.path.join(b, "q2pro", "q2pro"), "+set", "basedir", d, "+set", "libdir",
        os.path.join(b, "q2pro"), "+set", "homedir", home, "+set", "sys_console", "1", "+set",
        "s_enable", "0", "+set", "vid_geometry", "320x240", "+set", "timedemo", "1", "+exec",
        "play.cfg", "+demo", "rec"], log, 60, env=env)
    if not wait_for(lambda: "DEMO_FINISHED" in read(log), 50):
        raise Fail(f"the recorded demo did not play to its end:\n{read(log)[-2000:]}")
    procs.stop(p, signal.SIGTERM, 5, group=True)
    m = re.search(r"(\d+) frames, [\d.]+ seconds", read(log))
    if not m or int(m.group(1)) < 100:
        raise Fail(f"the recorded demo played too few frames:\n{read(log)[-1500:]}")
    return f"; its recorded {demos[0]} plays to its end in q2pro ({m.group(1)} frames)"


def main():
    return run_main(__doc__, 1, 20, run_case, lambda p: f"q2_peers@{p}")


if __name__ == "__main__":
    sys.exit(main())
