#!/usr/bin/env python3
"""`slipgate doctor` against real game servers on 127.0.0.1: each answers
the status query slipgate's codec table sends for its game.

    doctor_peers.py GAME

GAME: `q3` (ioq3ded with OpenArena's data), `qw` (mvdsv + KTX) or `nq`
(quakespasm's dedicated server), the last two on the placeholder data of
../shared/peers/make_synthetic_quake_data.sh (SG_PEERS_DATA, cached in
SG_PEERS_CACHE, as relay_peers.py does).  The doctor runs twice, with
`protocol GAME` and with `protocol auto` (every game's query), and must
say "answered a GAME status query" and exit 0 both times.  Every process
is started under a time limit and ended by PID.  Exit 77 (skip) only when
the game packages are not installed, saying so.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from q3_peers import (IOQ3_DIR, OA_SERVER_BASE, Fail, Procs, free_udp_port,  # noqa: E402
                      getstatus, read, run_main, wait_for)
from relay_peers import (GAMES, copy_game_dirs, game_data, start_nq_server,  # noqa: E402
                         start_qw_server)


def start_q3_server(work, port, limit, procs):
    home = os.path.join(work, "srv")
    os.makedirs(home)
    log = os.path.join(work, "server.log")
    procs.start("server", [
        os.path.join(IOQ3_DIR, "ioq3ded"), "+set", "com_basegame", "baseoa",
        "+set", "fs_basepath", OA_SERVER_BASE, "+set", "fs_homepath", home,
        "+set", "dedicated", "1", "+set", "net_enabled", "1", "+set", "net_ip", "127.0.0.1",
        "+set", "net_port", str(port), "+set", "sv_master1", "", "+set", "sv_master2", "",
        "+set", "sv_master3", "", "+map", "oa_dm1"], log, limit)
    if not wait_for(lambda: "sv_hostname" in getstatus(port, 0.3), 20):
        raise Fail(f"the server did not answer getstatus:\n{read(log)[-2000:]}")


def run_case(game, seconds):
    if game not in ("q3", "qw", "nq"):
        raise Fail(f"unknown game {game} (q3, qw or nq)")
    need = [os.path.join(IOQ3_DIR, "ioq3ded"), OA_SERVER_BASE] if game == "q3" else \
        [GAMES[game]["server"], shutil.which("fteqcc")]
    missing = [p for p in need if not p or not os.path.exists(p)]
    if missing:
        print(f"SKIP: not installed: {missing}")
        sys.exit(77)
    slipgate = os.environ.get("SLIPGATE")
    if not slipgate or not os.access(slipgate, os.X_OK):
        raise Fail("SLIPGATE is not set to the slipgate binary")

    procs = Procs()
    limit = seconds + 60
    with tempfile.TemporaryDirectory(prefix=f"slipgate-doctor-{game}-") as work:
        try:
            port = free_udp_port()
            if game == "q3":
                start_q3_server(work, port, limit, procs)
            else:
                maker = os.environ.get("SG_PEERS_DATA")
                if not maker or not os.path.exists(maker):
                    raise Fail(f"SG_PEERS_DATA={maker!r}: the game data generator is missing")
                data = game_data(maker, work)
                if game == "nq":
                    copy_game_dirs(data, work, ["nq-base"])
                    start_nq_server(work, port, limit, procs)
                else:
                    copy_game_dirs(data, work, ["mvdsv-base"])
                    start_qw_server(work, port, limit, procs)
            for proto in (game, "auto"):
                conf = os.path.join(work, "doctor.conf")
                with open(conf, "w") as f:
                    f.write(f"route {game} {{ listen 127.0.0.1:{free_udp_port()}; "
                            f"server 127.0.0.1:{port}; protocol {proto} }}\n")
                out = subprocess.run([slipgate, "doctor", "-c", conf, "--timeout", "3s"],
                                     capture_output=True, text=True, timeout=30)
                print(f"--- doctor, protocol {proto} (exit {out.returncode}):\n{out.stdout}"
                      f"{out.stderr}")
                want = (rf"^ok   route {game}: server 127\.0\.0\.1:{port} answered a {game} "
                        r"status query \(.+\) in \d+ ms$")
                if out.returncode != 0 or not re.search(want, out.stdout, re.M):
                    raise Fail(f"protocol {proto}: the real {game} server's answer was not "
                               f"recognised (exit {out.returncode})")
        finally:
            procs.stop_all()
    print(f"ok: the real {game} server answered the doctor's status query")


def main():
    return run_main(__doc__, 1, 10, run_case, lambda game: f"doctor_peers@{game}")


if __name__ == "__main__":
    sys.exit(main())
