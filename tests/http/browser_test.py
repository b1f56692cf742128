#!/usr/bin/env python3
"""The web page in a real browser: headless Chromium (Debian `chromium`)
loads slipgate's `/` while a real Quake 3 session (the ioquake3 capture,
replayed lock-step from both ends) flows through a route that records it
and rewrites a player's name into HTML, and an `inject` filter sends the
client a chat line holding a script.  The test drives Chromium through the
DevTools protocol on a pipe (--remote-debugging-pipe: no port opened) and
checks the DOM: the session is listed with its codec, its counters rise,
the print lines of the game and the chat line show in the feed, the
hostile name and chat show as text (no element made of them, no script
run), the recording is listed with its map and size, and the feed marks
what the filters did: a print the `drop` filter removed is struck through
and labelled `removed` (the client never saw it), the rewritten name
`changed`, the injected chat `injected`, an untouched print not at all.
It saves a screenshot (browser.png in the test's directory, or
$SG_SCREENSHOT).  Usage: browser_test.py page
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from httplib_sg import Fail, check, request, replay_game, server_socket, q3cap  # noqa: E402
import harness  # noqa: E402

HOSTILE = "<img src=x onerror=document.title='pwned'>"
CHAT = "<script>document.title='pwned'</script>good game"


class Chromium:
    """Chromium with the DevTools protocol on fds 3 (commands in) and 4 (out)."""

    def __init__(self, workdir):
        exe = shutil.which('chromium') or shutil.which('chromium-browser')
        if not exe:
            raise Fail('chromium is not installed (scripts/deps.sh --test)')
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()

        def fds():
            os.dup2(cmd_r, 3, inheritable=True)
            os.dup2(out_w, 4, inheritable=True)

        self.proc = subprocess.Popen(
            [exe, '--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe',
             '--user-data-dir=' + os.path.join(workdir, 'chromium'), '--no-first-run',
             '--disable-extensions', '--disable-background-networking', '--disable-sync',
             '--disable-component-update', '--disable-default-apps', '--mute-audio',
             '--hide-scrollbars', '--window-size=1400,1100', 'about:blank'],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(workdir, 'chromium.log'), 'wb'),
            close_fds=False, preexec_fn=fds, start_new_session=True)
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b''
        self.next_id = 0
        self.session = None
        self.watchdog = threading.Timer(60, self.kill)
        self.watchdog.daemon = True
        self.watchdog.start()

    def _read_message(self, deadline):
        while b'\0' not in self.buf:
            if time.monotonic() > deadline:
                raise Fail('chromium did not answer in time')
            import select
            r, _, _ = select.select([self.out_r], [], [], 0.5)
            if r:
                chunk = os.read(self.out_r, 1 << 20)
                if not chunk:
                    raise Fail('chromium closed its DevTools pipe (exit %s)' % self.proc.poll())
                self.buf += chunk
        msg, self.buf = self.buf.split(b'\0', 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=15.0):
        self.next_id += 1
        msg = {'id': self.next_id, 'method': method, 'params': params or {}}
        if session and self.session:
            msg['sessionId'] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b'\0')
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get('id') == self.next_id:
                if 'error' in m:
                    raise Fail('chromium: %s: %s' % (method, m['error']))
                return m.get('result', {})

    def open(self, url):
        target = self.call('Target.createTarget', {'url': 'about:blank'}, session=False)
        att = self.call('Target.attachToTarget', {'targetId': target['targetId'], 'flatten': True},
                        session=False)
        self.session = att['sessionId']
        self.call('Page.enable')
        self.call('Runtime.enable')
        self.call('Emulation.setDeviceMetricsOverride',
                  {'width': 1400, 'height': 1100, 'deviceScaleFactor': 1, 'mobile': False})
        self.call('Page.navigate', {'url': url})

    def eval(self, expr):
        r = self.call('Runtime.evaluate', {'expression': expr, 'returnByValue': True})
        if 'exceptionDetails' in r:
            raise Fail('page script error in %r: %s' % (expr, r['exceptionDetails']))
        return r['result'].get('value')

    def wait(self, expr, timeout, what):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.2)
        raise Fail('the page did not show %s within %.0f s' % (what, timeout))

    def screenshot(self, path):
        # the page's content, not the empty viewport below it
        h = self.eval("Math.ceil(document.querySelector('main').getBoundingClientRect().bottom)")
        r = self.call('Page.captureScreenshot', {'format': 'png', 'clip': {
            'x': 0, 'y': 0, 'width': 1400, 'height': min(max(h or 1100, 300), 1100), 'scale': 1}})
        with open(path, 'wb') as f:
            f.write(base64.b64decode(r['data']))

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own group, started here
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def close(self):
        try:
            if self.proc.poll() is None:
                self.call('Browser.close', session=False, timeout=3)
                self.proc.wait(3)
        except Exception:
            pass
        self.watchdog.cancel()
        self.kill()
        for fd in (self.cmd_w, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass


def cells(row_selector):
    return ('Array.from(document.querySelectorAll(%s)).map(tr => Array.from(tr.cells)'
            '.map(td => td.textContent))' % json.dumps(row_selector))


# Every feed line: its text, its mark (data-mark), its label and how its text is drawn.
MARKS_JS = """Array.from(document.querySelectorAll('#feed li')).map(li => {
  const t = li.querySelector('.text'), st = getComputedStyle(t);
  return {text: t.textContent, mark: li.dataset.mark || null,
          badge: (li.querySelector('.mark') || {textContent: null}).textContent,
          decoration: st.textDecorationLine, opacity: st.opacity};
}).filter(() => document.querySelectorAll('#feed li[data-mark]').length >= 3)"""


def case_page(h):
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    conf = '''http 127.0.0.1:$P0
route arena {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    protocol q3
    record %s
    filter rewrite {
        replace "Assassin" "%s"
    }
    filter inject {
        kind chat
        text "%s"
        after 3s
        count 1
    }
    filter drop {
        kinds print
        match "Garg.7 connected"
    }
}
''' % (srv.getsockname()[1], demos, HOSTILE, CHAT)
    px = h.proxy(conf)
    port = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    browser = Chromium(h.dir)
    stop = threading.Event()
    try:
        browser.open('http://127.0.0.1:%d/' % port)
        browser.wait("document.querySelector('#routes tbody tr') !== null", 15, 'the route')
        # the page's stream is connected before the game starts
        end = time.monotonic() + 10
        while b'slipgate_http_stream_clients 1' not in request(port, '/metrics')[2]:
            check(time.monotonic() < end, 'the page never opened /api/stream')
            time.sleep(0.2)

        result = {}

        def play():
            try:
                result['sent'] = replay_game(cap, px.ports[1], srv, pace=0.004, stop=stop)
            except Exception as e:  # reported below
                result['error'] = e

        t = threading.Thread(target=play, daemon=True)
        t.start()
        rows = browser.wait("(%s).filter(r => r[1] === 'arena' && r[3] === 'q3')" %
                            cells('#sessions tbody tr'), 10, 'the session with its codec')
        first = int(rows[0][5].replace(',', ''))
        time.sleep(2.0)
        rows = browser.eval(cells('#sessions tbody tr'))
        later = int(rows[0][5].replace(',', ''))
        check(later > first, 'the c>s counter did not rise: %d then %d' % (first, later))
        # the residence table: both directions of the route, with a count, and the loop turns
        res = browser.wait("(%s).filter(r => r[0] === 'arena' && r[2] !== '0')" %
                           cells('#residence tbody tr'), 10, 'the residence rows')
        check(len(res) == 2 and all(r[3].endswith(('\u00b5s', 'ms')) for r in res),
              'residence rows: %r' % (res,))
        turns = browser.eval("(%s).filter(r => r[1] === 'loop turns')" %
                             cells('#residence tbody tr'))
        check(len(turns) == 1, 'no loop turns row: %r' % (turns,))
        # The recording while the game goes on (it ends at the client's disconnect,
        # the replay's last datagram).
        recs = browser.wait(cells('#recordings tbody tr') + '.filter(r => r[2] !== "-")', 10,
                            'the recording with its map')
        check(recs[0][2] == 'oa_dm1' and recs[0][4] != '0 B', 'recording row %r' % recs[0])
        browser.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                     "li.textContent.includes('entered the game'))", 15,
                     'a print line of the game ("entered the game")')
        browser.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                     "li.dataset.kind === 'chat' && li.textContent.includes(%s))"
                     % json.dumps(CHAT), 15, 'the chat line (injected), as text')
        t.join(30)
        check('error' not in result, 'replay: %r' % result.get('error'))
        check(browser.eval("document.querySelectorAll('#feed script').length") == 0,
              'a <script> element was made from a chat line')
        # the hostile name: shown as text, never parsed into an element
        shown = browser.wait("Array.from(document.querySelectorAll('#feed li .text'))"
                             ".map(e => e.textContent).filter(t => t.includes(%s))"
                             % json.dumps(HOSTILE), 10, 'the rewritten name as text')
        check(browser.eval("document.querySelectorAll('#feed img, #sessions img').length") == 0,
              'an <img> element was made from wire data')
        check(browser.eval('document.title') == 'slipgate', 'the page title changed: %r'
              % browser.eval('document.title'))
        # What the filters did is shown: the print the drop filter removed (the
        # client never saw it) struck through and labelled, the rewritten name
        # and the injected chat labelled, an untouched line plain.
        marks = browser.wait(MARKS_JS, 10, 'the marked lines')
        by_text = {}
        for m in marks:
            by_text.setdefault(m['text'], m)

        def line(part):
            found = [m for t, m in by_text.items() if part in t]
            check(found, 'no feed line holding %r: %r' % (part, list(by_text)))
            return found[0]

        removed = line('Cyber-Garg connected')
        check(removed['mark'] == 'removed' and removed['badge'] == 'removed'
              and 'line-through' in removed['decoration'] and float(removed['opacity']) < 1,
              'the removed print is not shown as removed: %r' % removed)
        changed = line(HOSTILE + ' connected')
        check(changed['mark'] == 'changed' and changed['badge'] == 'changed'
              and 'line-through' not in changed['decoration'],
              'the rewritten print is not shown as changed: %r' % changed)
        injected = line(CHAT)
        check(injected['mark'] == 'injected' and injected['badge'] == 'injected',
              'the injected chat is not shown as injected: %r' % injected)
        plain = line('peers entered the game')
        check(plain['mark'] is None and plain['badge'] == ''
              and 'line-through' not in plain['decoration'],
              'an untouched print is marked: %r' % plain)
        time.sleep(1.2)  # one more refresh with the final counters
        out = os.environ.get('SG_SCREENSHOT') or h.path('browser.png')
        browser.screenshot(out)
        # The kind filter: unticking `chat` opens the stream again without it.
        before = browser.eval('decodeURIComponent(source.url)')
        check('chat' in before and 'print' in before, 'the stream asked for %r' % before)
        browser.eval("document.getElementById('kind-chat').click()")
        after = browser.wait("source && source.readyState === 1 && "
                             "!decodeURIComponent(source.url).includes('chat') && "
                             "decodeURIComponent(source.url)", 10,
                             'the stream opened again without chat')
        check('print' in after, 'the stream without chat asked for %r' % after)
        end = time.monotonic() + 5
        while b'slipgate_http_stream_clients 1' not in request(port, '/metrics')[2]:
            check(time.monotonic() < end, 'the page has no stream after the kinds changed')
            time.sleep(0.2)
        keep = os.environ.get('MESON_BUILD_ROOT')
        print('shown %d hostile lines as text; recording %r; kinds %r then %r; screenshot %s'
              % (len(shown), recs[0], before, after, out))
        if keep:
            shutil.copy(out, os.path.join(keep, 'http-browser.png'))
    finally:
        stop.set()
        browser.close()


def png_pixels(path):
    """(width, height, rows) of an 8-bit RGB or RGBA PNG; rows[y][x] = (r, g, b)."""
    import struct
    import zlib
    with open(path, 'rb') as f:
        data = f.read()
    check(data[:8] == b'\x89PNG\r\n\x1a\n', '%s: not a PNG' % path)
    pos, idat, w = 8, b'', None
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b'IHDR':
            w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
            check(depth == 8 and ctype in (2, 6), 'PNG depth %d type %d' % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b'IDAT':
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


TOKEN = 't0ken-for-the-page'


def case_admin(h):
    """The admin parts of the page, with http_token and the page logged in by
    /?token=: the servers table (name, map, players from the game), the
    player's name, loss and ping, a rate graph that grows, a screenshot checked (size,
    the header's accent line), the last messages shown on a reload with no
    traffic, and the buttons: kick ends the session (listed as ended, reason
    banned; its demo, finished, listed and downloadable), unban lifts it, a
    second unban shows the error."""
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    demos = h.path('demos')
    conf = """http 127.0.0.1:$P0
http_token %s
route arena {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    protocol q3
    record %s
}
""" % (TOKEN, srv.getsockname()[1], demos)
    auth = {'Authorization': 'Bearer ' + TOKEN}
    px = h.proxy(conf)
    port = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    browser = Chromium(h.dir)
    stop = threading.Event()
    try:
        browser.open('http://127.0.0.1:%d/?token=%s' % (port, TOKEN))
        browser.wait("document.querySelector('#servers tbody tr') !== null", 15, 'the servers')
        first = browser.eval(cells('#servers tbody tr'))
        check(first == [['arena', 'unknown', 'unknown', '0']], 'servers before a client: %r'
              % first)
        end = time.monotonic() + 10
        while b'slipgate_http_stream_clients 1' not in request(port, '/metrics', headers=auth)[2]:
            check(time.monotonic() < end, 'the page never opened /api/stream')
            time.sleep(0.2)
        result = {}

        def play():
            try:
                result['sent'] = replay_game(cap, px.ports[1], srv, pace=0.004, stop=stop)
            except Exception as e:  # reported below
                result['error'] = e

        t = threading.Thread(target=play, daemon=True)
        t.start()
        servers = browser.wait("(%s).filter(r => r[2] !== 'unknown')" % cells('#servers tbody tr'),
                               15, 'the server name and map')
        check(servers == [['arena', 'peers-oa', 'oa_dm1', '1']], 'servers %r' % servers)
        players = browser.wait("(%s).filter(r => r[2] === 'peers')" % cells('#players tbody tr'),
                               10, "the player's name")
        check(players[0][0] == '1' and players[0][1] == 'arena' and players[0][4] == '0.0% / 0.0%',
              'players %r' % players)
        # the ping slipgate times (the client acknowledging the server's messages)
        pinged = browser.wait("(%s).filter(r => /^[0-9]+ ms$/.test(r[5]))" % cells('#players tbody tr'),
                              10, "the player's ping")
        check(len(pinged) == 1, 'ping %r' % pinged)
        npts = ("(document.querySelector('#players tr[data-session] svg.rate polyline.s2c')"
                ".getAttribute('points').trim().split(/\\s+/).filter(Boolean).length)")
        p1 = browser.wait(npts + " >= 2 && " + npts, 10, 'a rate graph')
        p2 = browser.wait(npts + " > %d && " % p1 + npts, 10, 'the rate graph growing')
        check(p2 > p1, 'graph points %d then %d' % (p1, p2))
        # the game stops half-way: the session stays, for the buttons
        browser.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                     "li.textContent.includes('entered the game'))", 15, 'a print of the game')
        stop.set()
        t.join(30)
        check('error' not in result, 'replay: %r' % result.get('error'))
        time.sleep(1.2)  # one more refresh
        out = os.environ.get('SG_SCREENSHOT_ADMIN') or h.path('admin.png')
        browser.screenshot(out)
        w, ht, rows = png_pixels(out)
        hb = browser.eval("Math.round(document.querySelector('header').getBoundingClientRect()"
                          ".bottom)")
        check(w == 1400 and 300 <= ht <= 1100, 'screenshot %dx%d' % (w, ht))
        accent = rows[hb - 1][700]
        check(all(abs(x - y) <= 8 for x, y in zip(accent, (0xe0, 0xa0, 0x30))),
              'the header line at y=%d is %r, not the accent colour' % (hb - 1, accent))
        check(len({rows[y][x] for y in range(0, ht, 7) for x in range(0, w, 13)}) > 20,
              'the screenshot is nearly blank')
        # a reload with no traffic: the feed shows the last messages at once
        browser.call('Page.navigate', {'url': 'http://127.0.0.1:%d/' % port})
        browser.wait("Array.from(document.querySelectorAll('#feed li')).some(li => "
                     "li.textContent.includes('entered the game'))", 10,
                     'the last messages after a reload')
        # kick: the session ends (ended, banned), its address is refused
        browser.wait("document.querySelector('#players tr[data-session] button.kick') !== null", 10,
                     'the kick button')
        browser.eval("document.getElementById('kick-minutes').value = '3'; "
                     "document.querySelector('#players tr[data-session] button.kick').click()")
        res = browser.wait("document.getElementById('admin-result').textContent", 10,
                           'the kick result')
        check('kicked session 1' in res and '3 min' in res, 'kick result %r' % res)
        ended = browser.wait("(%s).filter(r => r[0] === '1')" % cells('#ended tbody tr'), 10,
                             'the kicked session among the ended')
        check(ended[0][6] == 'banned' and ended[0][2] == 'peers', 'ended %r' % ended)
        browser.wait("document.querySelectorAll('#players tbody tr').length === 0", 10,
                     'the players table empty')
        # the demo the kick finished: listed with its map and player, and served
        demo = browser.wait("(%s).filter(r => r[2] === 'oa_dm1')" % cells('#demos tbody tr'), 10,
                            'the finished demo')
        files = os.listdir(demos)
        check(len(files) == 1 and demo[0][0] == files[0] and demo[0][3] == 'peers',
              'demos %r, on disk %r' % (demo, files))
        got = browser.call('Runtime.evaluate', {'expression': (
            "fetch(document.querySelector('#demos a').href).then(r => r.arrayBuffer())"
            ".then(b => b.byteLength)"), 'awaitPromise': True, 'returnByValue': True})
        size = got['result'].get('value')
        check(size == os.path.getsize(os.path.join(demos, files[0])), 'download: %r bytes' % size)
        browser.eval("document.getElementById('unban-addr').value = '127.0.0.1'; "
                     "document.getElementById('unban-button').click()")
        res = browser.wait("(t => t.includes('unbanned') && t)(document.getElementById("
                           "'admin-result').textContent)", 10, 'the unban result')
        check('unbanned 127.0.0.1 ' in res and '1 lifted' in res, 'unban result %r' % res)
        browser.eval("document.getElementById('unban-button').click()")
        res = browser.wait("(e => e.className.includes('bad') && e.textContent)(document."
                           "getElementById('admin-result'))", 10, 'the second unban error')
        check('no kick' in res, 'second unban %r' % res)
        print('servers %r, players %r, graph %d -> %d points, demo %s (%d bytes), kicked, '
              'ended %r, %s; screenshot %s' % (servers, players, p1, p2, files[0], size, ended,
                                              res, out))
        keep = os.environ.get('MESON_BUILD_ROOT')
        if keep:
            shutil.copy(out, os.path.join(keep, 'http-browser-admin.png'))
    finally:
        stop.set()
        browser.close()


WATCHER = '<i>watcher</i>'


def spectator_connect(port, name):
    """A scripted spectator on 127.0.0.1: getchallenge, then the game's
    Huffman-coded connect (tests/q3/q3_connect_packet); returns its socket."""
    import re
    import socket
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.bind(('127.0.0.1', 0))
    c.settimeout(3.0)
    c.sendto(b'\xff\xff\xff\xffgetchallenge 77 ', ('127.0.0.1', port))
    got = c.recv(2048)
    m = re.match(rb'\xff\xff\xff\xffchallengeResponse (-?\d+) ', got)
    check(m is not None, 'not a challengeResponse: %r' % got[:60])
    ch = int(m.group(1))
    info = '\\name\\%s\\protocol\\71\\qport\\4321\\challenge\\%d' % (name, ch)
    pkt = subprocess.run([os.environ['SG_Q3_CONNECT'], 'connect "%s"' % info],
                         stdout=subprocess.PIPE, timeout=10, check=True).stdout
    c.sendto(pkt, ('127.0.0.1', port))
    got = c.recv(2048)
    check(got == b'\xff\xff\xff\xffconnectResponse %d' % ch, 'the connect got %r' % got[:60])
    return c


def case_spectators(h):
    """The spectators table: a Quake 3 game replayed through a route with a
    spectator port, a scripted spectator (its name holding HTML) connects and
    is listed with its route, name (as text), address and the session it
    watches with the player's name, its datagrams in and out (its connect)
    and a time that rises; a screenshot is saved."""
    cap = q3cap.Capture('ioq71')
    srv = server_socket()
    h.sockets.append(srv)
    conf = """http 127.0.0.1:$P0
route arena {
    listen 127.0.0.1:$P1
    server 127.0.0.1:%d
    protocol q3
    spectate 127.0.0.1:$P2
}
""" % srv.getsockname()[1]
    px = h.proxy(conf)
    port = px.ports[0]
    px.wait_for_log(r'http: serving on', 5)
    browser = Chromium(h.dir)
    stop = threading.Event()
    spect = None
    try:
        browser.open('http://127.0.0.1:%d/' % port)
        browser.wait("document.querySelector('#routes tbody tr') !== null", 15, 'the route')
        check(not browser.eval("document.getElementById('no-spectators').hidden"),
              'no "No spectator" line before any spectator')
        result = {}

        def play():
            try:
                result['sent'] = replay_game(cap, px.ports[1], srv, pace=0.004, stop=stop)
            except Exception as e:  # reported below
                result['error'] = e

        t = threading.Thread(target=play, daemon=True)
        t.start()
        browser.wait("(%s).filter(r => r[0] === '1')" % cells('#sessions tbody tr'), 15,
                     'the session')
        spect = spectator_connect(px.ports[2], WATCHER)
        rows = browser.wait("(%s).filter(r => r[2] === %s)" % (cells('#spectators tbody tr'),
                                                               json.dumps(WATCHER)),
                            10, 'the spectator')
        check(len(rows) == 1, 'spectators %r' % rows)
        r = rows[0]
        check(r[0] == '1' and r[1] == 'arena' and r[3] == '127.0.0.1:%d' % spect.getsockname()[1],
              'the spectator row %r' % r)
        check(r[4] == '#1 peers', 'watching %r, not session 1 (peers)' % r[4])
        check(browser.eval("document.querySelectorAll('#spectators i').length") == 0,
              'the name was drawn as HTML')
        # since it was admitted: its connect in, the connectResponse out
        check(r[6] == '1' and r[7] == '1', 'datagrams in/out %r/%r, not 1/1' % (r[6], r[7]))
        # the "for" column counts up with the page's refreshes
        later = browser.wait("(%s).filter(r => r[5] !== %s)" % (cells('#spectators tbody tr'),
                                                               json.dumps(r[5])),
                             10, "the spectator's time rising")
        check(browser.eval("document.getElementById('no-spectators').hidden"),
              'the "No spectator" line still shows')
        out = os.environ.get('SG_SCREENSHOT_SPECTATORS') or h.path('spectators.png')
        browser.screenshot(out)
        stop.set()
        t.join(30)
        check('error' not in result, 'replay: %r' % result.get('error'))
        print('spectator row %r, then %r; screenshot %s' % (r, later[0], out))
    finally:
        stop.set()
        if spect is not None:
            spect.close()
        browser.close()


def case_servers_probe(h):
    """The servers table for a Quake 2 route with `ready_probe on`: a
    scripted server answers the probe's "status" with a hostile hostname
    (markup and a script), its map, two players and 8 slots; the page shows
    the name as text (no element made of it), the map, and the players
    through slipgate followed by the server's own count."""
    import socket
    srv = h.udp_socket('127.0.0.1')
    srv.settimeout(0.05)
    answer = (b'\xff\xff\xff\xffprint\n\\hostname\\' + HOSTILE.encode() +
              b'\\mapname\\q2dm1\\maxclients\\8\n0 25 "alice"\n3 40 "bob"\n')
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                data, peer = srv.recvfrom(2048)
            except socket.timeout:
                continue
            except OSError:
                return
            if data == b'\xff\xff\xff\xffstatus\n':
                srv.sendto(answer, peer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    conf = ('http 127.0.0.1:$P0\nready_probe on\nroute main {\n    listen 127.0.0.1:$P1\n'
            '    server 127.0.0.1:%d\n    protocol q2\n}\n' % srv.getsockname()[1])
    px = h.proxy(conf)
    px.wait_for_log(r'http: serving on', 5)
    browser = Chromium(h.dir)
    try:
        browser.open('http://127.0.0.1:%d/' % px.ports[0])
        rows = browser.wait("(%s).filter(r => r[2] !== 'unknown')" % cells('#servers tbody tr'),
                            15, "the server's name from its status answer")
        check(rows == [['main', HOSTILE, 'q2dm1', '0 (server 2/8)']], 'servers %r' % rows)
        check(browser.eval("document.querySelectorAll('#servers img, #servers script').length")
              == 0 and browser.eval('document.title') != 'pwned',
              'the hostname became markup')
        print('servers %r' % rows)
    finally:
        stop.set()
        browser.close()
        t.join(2)


CASES = {'page': case_page, 'admin': case_admin, 'spectators': case_spectators,
         'servers_probe': case_servers_probe}

if __name__ == '__main__':
    sys.exit(harness.main(CASES, sys.argv))
