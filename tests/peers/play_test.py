#!/usr/bin/env python3
"""The playground, run as a newcomer runs it: `slipgate play --with-client
--seconds 30` headless (what `./run.sh --with-client --seconds 30` runs
after installing and building).

It must set up the whole scene by itself (a real OpenArena server with
bots, slipgate in front with `inspect`, recording and its web page, a
headless real client), and then:
  - say how to connect (`connect 127.0.0.1:PORT`), where the demos go and
    the web page's address, which answers while it runs;
  - show decoded traffic on its output: the server's prints (`newcomer
    entered the game`, a bot entering) and the client's chat, as the
    inspect filter writes them;
  - stop by itself after 30 s, exit 0, list what it recorded with the
    sizes the files really have, and that demo plays to its end in the
    real ioquake3 client (timedemo);
  - leave no process it started: every process seen in its process tree
    while it ran (server, slipgate, xvfb-run, Xvfb, ioquake3) and every
    PID it reports are gone afterwards.

Case `sigint`: without a client, SIGINT (Ctrl-C) once it is up stops it
(exit 0): the server's and slipgate's PIDs are reported stopped, it says
nothing was recorded, and no process of its tree is left.

Case `fresh_clone`: the same as the first, but as the README's first
command: `./run.sh --with-client --seconds 30` in a fresh copy of the
source tree (git's tracked files), which installs what is missing, builds
and runs the playground.

Case `missing`: with ioquake3's files hidden (a mount namespace), it starts
nothing, exits 1 and prints the apt-get line that installs them.

Exit 77 (skip) only when the game packages are not installed, saying so.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

IOQ3_DIR = "/usr/lib/ioquake3"
OA_CLIENT_BASE = "/usr/lib/openarena"
SECONDS = 30


class Fail(Exception):
    pass


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("latin-1")
    except OSError:
        return ""


def start_time(pid):
    """The start time of `pid` (field 22 of /proc/PID/stat), None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return fields[19]


def tree(root):
    """{pid: (start time, command)} of `root` and all its descendants."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        st = start_time(pid)
        if st is None:
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                cmd = f.read().strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd += ": " + f.read().replace(b"\0", b" ").decode("latin-1").strip()
        except OSError:
            cmd = "?"
        out[pid] = (st, cmd)
        todo += children.get(pid, [])
    return out


def play_demo(demo, work):
    """Play `demo` in the real client with timedemo; (frames, seconds)."""
    home = os.path.join(work, "playback-home")
    os.makedirs(os.path.join(home, "baseoa", "demos"))
    name = os.path.basename(demo)
    shutil.copy(demo, os.path.join(home, "baseoa", "demos", name))
    log = os.path.join(work, "playback.log")
    env = dict(os.environ, SDL_AUDIODRIVER="dummy", LIBGL_ALWAYS_SOFTWARE="1")
    with open(log, "wb") as f:
        p = subprocess.Popen(
            ["timeout", "-k", "5", "70", "xvfb-run", "-a", "-s", "-screen 0 640x480x24",
             os.path.join(IOQ3_DIR, "ioquake3"), "+set", "com_basegame", "baseoa",
             "+set", "fs_basepath", OA_CLIENT_BASE, "+set", "fs_homepath", home,
             "+set", "cl_motd", "0", "+set", "net_enabled", "0", "+set", "cl_renderer", "opengl1",
             "+set", "r_mode", "-1", "+set", "r_customwidth", "320", "+set", "r_customheight", "240",
             "+set", "r_fullscreen", "0", "+set", "s_initsound", "0", "+set", "com_introplayed", "1",
             "+set", "timedemo", "1", "+demo", name],
            stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    pat = re.compile(r"(\d+) frames,? +([\d.]+) seconds")
    end = time.monotonic() + 60
    while time.monotonic() < end and not pat.search(read(log)) and p.poll() is None:
        time.sleep(0.25)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    m = pat.search(read(log))
    if not m or int(m.group(1)) < 20:
        raise Fail(f"the recorded demo {name} did not play to its end:\n{read(log)[-2500:]}")
    return int(m.group(1)), m.group(2)


def fresh_clone(work):
    """The project's files as a fresh clone has them (git's tracked files,
    no build directory) copied into WORK/clone; its path."""
    src = os.environ.get("SG_SOURCE_ROOT", "")
    if not os.path.isfile(os.path.join(src, "run.sh")):
        raise Fail(f"SG_SOURCE_ROOT does not name the source tree: {src!r}")
    dst = os.path.join(work, "clone")
    r = subprocess.run(["git", "-C", src, "ls-files", "-z"], capture_output=True)
    if r.returncode == 0:
        files = r.stdout.decode().split("\0")
    else:
        # not a git checkout (a source archive): every file but build directories
        files = []
        for top, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if top != src or not (d.startswith("build") or
                                                               d.startswith("."))]
            files += [os.path.relpath(os.path.join(top, n), src) for n in names]
    for rel in files:
        if rel and os.path.isfile(os.path.join(src, rel)):
            os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
            shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel))
    return dst


def run_fresh(slipgate, work):
    """`./run.sh --with-client --seconds 30` in a fresh copy of the source:
    what a newcomer's first command does (scripts/deps.sh --play, a release
    build into build/, then the playground)."""
    clone = fresh_clone(work)
    return run(slipgate, work, [os.path.join(clone, "run.sh")], build_time=900) + \
        "; from a fresh copy of the source tree through ./run.sh (built there)"


def run(slipgate, work, cmd=None, build_time=0):
    out_path = os.path.join(work, "play.out")
    play_dir = os.path.join(work, "play")
    limit = SECONDS + 60 + build_time
    with open(out_path, "wb") as out:
        p = subprocess.Popen(["timeout", "-k", "5", str(limit)] + (cmd or [slipgate, "play"]) +
                             ["--with-client", "--seconds", str(SECONDS), "--dir", play_dir],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
    seen = {}
    web = None
    try:
        end = time.monotonic() + limit
        while p.poll() is None and time.monotonic() < end:
            for pid, v in tree(p.pid).items():
                seen.setdefault(pid, v)
            m = re.search(r"web page: +(http://127\.0\.0\.1:\d+/)", read(out_path))
            if m and web is None and "started a headless" in read(out_path):
                try:
                    with urllib.request.urlopen(m.group(1), timeout=5) as r:
                        web = (r.status, r.read(200))
                except OSError as e:
                    web = (str(e), b"")
            time.sleep(0.3)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise Fail(f"slipgate play did not end by itself after --seconds {SECONDS}:\n"
                       f"{read(out_path)[-3000:]}")
    text = read(out_path)
    # nothing it started is left (checked first: a failing test leaves nothing either)
    time.sleep(0.5)
    left = [f"{pid} {cmd}" for pid, (st, cmd) in seen.items() if start_time(pid) == st]
    if left:
        for pid, (st, _) in seen.items():
            if start_time(pid) == st:
                os.kill(pid, signal.SIGKILL)
        raise Fail("processes the playground started are still running:\n  " + "\n  ".join(left))
    if p.returncode != 0:
        raise Fail(f"slipgate play exited {p.returncode}:\n{text[-3000:]}")

    # how to connect, where the demos go, the web page
    m = re.search(r"connect a client: +connect 127\.0\.0\.1:(\d+)\n", text)
    if not m:
        raise Fail(f"no `connect 127.0.0.1:PORT` line:\n{text[:3000]}")
    m = re.search(r"demos go to: +(\S+)\n", text)
    if not m or os.path.realpath(m.group(1)) != os.path.realpath(os.path.join(play_dir, "demos")):
        raise Fail(f"no `demos go to: {play_dir}/demos` line:\n{text[:3000]}")
    demos = m.group(1)
    if not web or web[0] != 200 or b"<html" not in web[1].lower() and b"<!doctype" not in web[1].lower():
        raise Fail(f"the web page did not answer while the playground ran: {web}")

    # decoded traffic, as inspect writes it
    prints = re.findall(r" s>c +print +svc_serverCommand +#\d+ +(\S+) entered the game\\n", text)
    if "newcomer" not in prints:
        raise Fail(f"no decoded `newcomer entered the game` print on the output:\n{text[-3000:]}")
    bots = [n for n in prints if n != "newcomer"]
    if not bots:
        raise Fail(f"no bot's `entered the game` print on the output:\n{text[-3000:]}")
    if not re.search(r" c>s +chat +clc_clientCommand +#\d+ +hello from the slipgate playground",
                     text):
        raise Fail(f"no decoded chat from the client on the output:\n{text[-3000:]}")

    # what it says it recorded is there, with those sizes, and plays
    listed = re.findall(r"\n(?:play: )? +(\S+\.dm_\d+) \((\d+) bytes\)", text)
    if not listed:
        raise Fail(f"the playground listed no recorded demo:\n{text[-3000:]}")
    for name, size in listed:
        path = os.path.join(demos, name)
        if not os.path.isfile(path) or os.path.getsize(path) != int(size):
            raise Fail(f"{path}: listed with {size} bytes, but it holds "
                       f"{os.path.getsize(path) if os.path.exists(path) else 'nothing'}")
    frames, secs = play_demo(os.path.join(demos, listed[0][0]), work)

    # the PIDs it reports stopped are those of its tree
    m = re.search(r"stopped: (.*)\n", text)
    reported = [int(x) for x in re.findall(r"\(pid (\d+)\)", m.group(1))] if m else []
    if len(reported) != 3:
        raise Fail(f"the playground did not report the 3 PIDs it stopped: {m and m.group(0)}")
    for pid in reported:
        if pid not in seen:
            raise Fail(f"reported PID {pid} was never in its process tree")
    names = sorted({c.split(":")[0] for _, c in seen.values()})
    return (f"{len(prints)} `entered the game` prints ({', '.join(bots)} bots), chat decoded; "
            f"web page answered; demo {listed[0][0]} ({listed[0][1]} bytes) played "
            f"{frames} frames in {secs} s; {len(seen)} processes ({', '.join(names)}) all gone")


def run_sigint(slipgate, work):
    """`slipgate play` without a client, stopped by SIGINT (Ctrl-C) once up."""
    out_path = os.path.join(work, "play.out")
    with open(out_path, "wb") as out:
        p = subprocess.Popen([slipgate, "play", "--dir", os.path.join(work, "play")],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
    seen = {}
    try:
        end = time.monotonic() + 30
        while p.poll() is None and time.monotonic() < end and \
                "chat and prints going through slipgate" not in read(out_path):
            time.sleep(0.2)
        if p.poll() is not None:
            raise Fail(f"slipgate play exited {p.returncode} before it was up:\n{read(out_path)}")
        time.sleep(1)
        seen = tree(p.pid)
        os.kill(p.pid, signal.SIGINT)
        p.wait(30)
    except subprocess.TimeoutExpired:
        raise Fail(f"slipgate play did not stop within 30 s of SIGINT:\n{read(out_path)[-3000:]}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    text = read(out_path)
    time.sleep(0.5)
    left = [f"{pid} {cmd}" for pid, (st, cmd) in seen.items() if start_time(pid) == st]
    if left:
        for pid, (st, _) in seen.items():
            if start_time(pid) == st:
                os.kill(pid, signal.SIGKILL)
        raise Fail("processes the playground started are still running:\n  " + "\n  ".join(left))
    if p.returncode != 0:
        raise Fail(f"slipgate play exited {p.returncode} after SIGINT:\n{text[-3000:]}")
    if not re.search(r"connect a client: +connect 127\.0\.0\.1:\d+\n", text):
        raise Fail(f"no `connect 127.0.0.1:PORT` line:\n{text[:3000]}")
    m = re.search(r"stopped: (.*)\n", text)
    reported = [int(x) for x in re.findall(r"\(pid (\d+)\)", m.group(1))] if m else []
    if len(reported) != 2 or any(pid not in seen for pid in reported):
        raise Fail(f"the server's and slipgate's PIDs are not reported as stopped: "
                   f"{m and m.group(0)}; tree {seen}")
    if "recorded nothing" not in text:
        raise Fail(f"no word on what was recorded:\n{text[-2000:]}")
    return f"stopped by SIGINT, exit 0; {len(seen)} processes all gone"


def run_missing(slipgate, work):
    """Without the game packages (ioquake3's directory hidden by an empty
    tmpfs in a mount namespace of its own), `slipgate play --with-client`
    starts nothing and says which apt-get command installs what it needs."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        print("SKIP: cannot make a mount namespace here (unshare -m needs root) to hide "
              "the game packages")
        sys.exit(77)
    r = subprocess.run(
        ["timeout", "-k", "5", "30", "unshare", "-m", "sh", "-c",
         'mount -t tmpfs none "$1" && exec "$2" play --with-client --seconds 5 --dir "$3"',
         "sh", IOQ3_DIR, slipgate, os.path.join(work, "play")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True)
    want = "apt-get install -y --no-install-recommends ioquake3-server ioquake3\n"
    if r.returncode != 1 or want not in r.stderr:
        raise Fail(f"exit {r.returncode} (want 1) and no `{want.strip()}` on stderr:\n"
                   f"stdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}")
    if "started" in r.stdout:
        raise Fail(f"it started something without its packages:\n{r.stdout[-2000:]}")
    return "without ioquake3: exit 1, " + want.strip()


def main():
    slipgate = os.environ.get("SLIPGATE")
    if not slipgate or not os.access(slipgate, os.X_OK):
        print("SLIPGATE does not name the slipgate binary", file=sys.stderr)
        return 1
    for path in (os.path.join(IOQ3_DIR, "ioq3ded"), os.path.join(IOQ3_DIR, "ioquake3"),
                 "/usr/lib/openarena-server/baseoa", OA_CLIENT_BASE + "/baseoa"):
        if not os.path.exists(path):
            print(f"SKIP: {path} is not installed (scripts/deps.sh --play installs it)")
            return 77
    work = tempfile.mkdtemp(prefix="sg-play-test-")
    try:
        case = sys.argv[1] if len(sys.argv) > 1 else "with_client"
        print("ok: " + {"with_client": run, "sigint": run_sigint, "missing": run_missing,
                          "fresh_clone": run_fresh}[case](slipgate, work))
        shutil.rmtree(work, ignore_errors=True)
        return 0
    except Fail as e:
        print(f"FAIL: {e}\n(work directory kept: {work})")
        return 1


if __name__ == "__main__":
    sys.exit(main())
