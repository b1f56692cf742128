// slipgate's live page: polls the JSON API and follows /api/stream.
// Everything that comes from the wire (names, chat, paths) is put in the
// page as text (textContent), never parsed as HTML.
"use strict";

const KINDS = ["chat", "print", "centerprint", "servercmd", "clientcmd", "stufftext",
               "configstring", "disconnect"];
const DEFAULT_KINDS = ["chat", "print", "centerprint", "disconnect"];
const FEED_MAX = 300;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function num(n) { return Number(n || 0).toLocaleString("en-US"); }

function bytes(n) {
  n = Number(n || 0);
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

// a duration in microseconds, as the histograms give it
function us(v) {
  v = Number(v || 0);
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + " ms";
  return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " \u00b5s";
}

function histRow(route, what, h) {
  const bad = h.p999_us >= 1000 ? "bad" : "";
  return row([{t: route}, {t: what}, {t: num(h.count), n: 1}, {t: us(h.p50_us), n: 1},
    {t: us(h.p99_us), n: 1}, {t: us(h.p999_us), n: 1, c: bad}, {t: us(h.max_us), n: 1}]);
}

function dur(ms) {
  let s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
}

// Quake 3 colour codes (^1red) as coloured spans, built from text nodes.
function quakeText(parent, s) {
  // control characters (Quake 3 puts \x19 after a chat name) are not shown
  const parts = String(s).replace(/[\x00-\x09\x0b-\x1f\x7f]/g, "").split(/\^([0-9])/);
  let cls = null;
  for (let i = 0; i < parts.length; i++) {
    if (i % 2) { cls = "q" + parts[i]; continue; }
    if (parts[i]) parent.appendChild(el("span", parts[i], cls));
  }
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = el("td", c.t, c.n ? "n" + (c.c ? " " + c.c : "") : c.c);
    if (c.title) td.title = c.title;
    tr.appendChild(td);
  }
  return tr;
}

function fill(id, rows) {
  const tb = document.querySelector("#" + id + " tbody");
  tb.replaceChildren(...rows);
  const empty = document.getElementById("no-" + id);
  if (empty) empty.hidden = rows.length > 0;
  document.getElementById(id).hidden = rows.length === 0 && !!empty;
}

async function getJSON(path) {
  const r = await fetch(path, {cache: "no-store", credentials: "same-origin"});
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

function setStatus(text, cls) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + cls;
}

async function refresh() {
  try {
    const [routes, sessions, recs] = await Promise.all([
      getJSON("/api/routes"), getJSON("/api/sessions"), getJSON("/api/recordings")]);
    document.getElementById("version").textContent = "v" + routes.version;
    document.getElementById("uptime").textContent = "up " + dur(routes.uptime_ms);
    fill("routes", routes.routes.filter(r => !r.retired).map(r => {
      const c = r.counters;
      const drops = Object.values(c.drops).reduce((a, b) => a + b, 0);
      return row([{t: r.name}, {t: r.listen_addr || r.listen}, {t: r.server},
        {t: r.protocol}, {t: num(r.sessions_active), n: 1}, {t: num(r.sessions_total), n: 1},
        {t: num(c.c2s_packets), n: 1}, {t: num(c.s2c_packets), n: 1},
        {t: bytes(c.c2s_bytes + c.s2c_bytes), n: 1}, {t: num(drops), n: 1, c: drops ? "bad" : ""},
        {t: num(r.listener.kernel_drops), n: 1, c: r.listener.kernel_drops ? "bad" : ""}]);
    }));
    const res = [];
    for (const r of routes.routes.filter(r => !r.retired && r.residence && r.residence.on)) {
      res.push(histRow(r.name, "client \u2192 server", r.residence.c2s));
      res.push(histRow(r.name, "server \u2192 client", r.residence.s2c));
    }
    if (routes.loop && routes.loop.turn) res.push(histRow("(every route)", "loop turns",
      routes.loop.turn));
    fill("residence", res);
    const spect = [];
    for (const r of routes.routes.filter(r => !r.retired && r.spectators)) {
      for (const v of r.spectators.list) {
        spect.push(row([{t: v.id}, {t: r.name}, {t: v.name}, {t: v.address},
          {t: v.session ? "#" + v.session + " " + v.player : "-"},
          {t: dur(v.seconds * 1000)}, {t: num(v.datagrams_in), n: 1},
          {t: num(v.datagrams_out), n: 1}]));
      }
    }
    fill("spectators", spect);
    const now = Date.now();
    fill("sessions", sessions.sessions.map(s => {
      const c = s.counters, d = s.decode;
      let health = {t: "not decoded", c: "dim"};
      if (d) {
        health = d.errors ? {t: num(d.errors) + " errors", c: "bad", title: s.first_error}
                          : {t: "ok", c: "ok"};
      }
      return row([{t: s.id}, {t: s.route}, {t: s.client}, {t: s.codec || "-"},
        {t: dur(now - s.started_ms)}, {t: num(c.c2s_packets), n: 1}, {t: num(c.s2c_packets), n: 1},
        {t: bytes(c.c2s_bytes + c.s2c_bytes), n: 1}, {t: d ? num(d.datagrams) : "-", n: 1},
        {t: d ? num(d.messages) : "-", n: 1}, health, {t: num(s.demos), n: 1}]);
    }));
    fill("recordings", recs.recordings.map(r => row([{t: r.session}, {t: r.route},
      {t: r.map || "-"}, {t: r.path.split("/").pop(), title: r.path}, {t: bytes(r.bytes), n: 1},
      {t: dur(r.duration_ms)}])));
    if (!source || source.readyState !== 2) setStatus("live", "live");
  } catch (e) {
    setStatus("no answer", "down");
  }
}

// ---- the message feed ----

let source = null;
let shown = 0;

function chosenKinds() {
  return KINDS.filter(k => document.getElementById("kind-" + k).checked);
}

// What the filters did to a message: the receiver never saw a removed one
// (a message a filter removed, or one of a datagram a filter dropped whole),
// saw a changed one as shown here, and got an injected one from slipgate.
function markOf(ev, m) {
  if (ev.dropped) {
    return {mark: "removed", text: "dropped",
            title: "a filter dropped the whole datagram" +
                   (ev.drop_label ? " (" + ev.drop_label + ")" : "") +
                   ": the receiver never saw this"};
  }
  if (m.removed) {
    return {mark: "removed", text: "removed",
            title: "a filter removed this message: the receiver never saw it"};
  }
  if (m.injected) {
    return {mark: "injected", text: "injected", title: "a filter injected this message"};
  }
  if (m.changed) {
    return {mark: "changed", text: "changed",
            title: "a filter changed this message: the receiver saw it as shown"};
  }
  return null;
}

function addMessage(ev, m) {
  const feed = document.getElementById("feed");
  const li = el("li");
  const mark = markOf(ev, m);
  li.dataset.kind = m.kind;
  li.appendChild(el("span", ev.time, "dim"));
  li.appendChild(el("span", "s" + ev.session, "dim"));
  li.appendChild(el("span", ev.dir === "c2s" ? "c>s" : "s>c", "dir-" + ev.dir));
  li.appendChild(el("span", m.kind, "kind"));
  const badge = el("span", mark ? mark.text : "", "mark");
  if (mark) {
    li.dataset.mark = mark.mark;
    li.classList.add(mark.mark);
    li.title = mark.title;
  }
  li.appendChild(badge);
  const text = el("span", null, "text");
  const body = m.text !== null ? m.text : m.name;
  if (body) quakeText(text, body);
  else text.appendChild(el("span", "(empty)", "dim"));
  li.appendChild(text);
  const stick = feed.scrollTop + feed.clientHeight >= feed.scrollHeight - 4;
  feed.appendChild(li);
  while (feed.children.length > FEED_MAX) feed.removeChild(feed.firstChild);
  if (stick) feed.scrollTop = feed.scrollHeight;
  shown++;
  document.getElementById("feed-count").textContent = "(" + num(shown) + ")";
}

function connect() {
  if (source) source.close();
  const kinds = chosenKinds();
  if (!kinds.length) { source = null; return; }
  source = new EventSource("/api/stream?kinds=" + encodeURIComponent(kinds.join(",")));
  source.onmessage = e => {
    let ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    for (const m of ev.msgs || []) if (kinds.includes(m.kind)) addMessage(ev, m);
  };
  source.onerror = () => setStatus("stream reconnecting", "down");
  source.onopen = () => setStatus("live", "live");
}

// ---- the admin section: servers, players (names, rate graphs, actions),
// ended sessions, demos, the last messages on load ----

const RATE_WINDOW_MS = 5 * 60 * 1000; // the graphs' span
const ENDED_SHOWN = 20;
const rates = new Map(); // session id -> [{t, c2s, s2c}] (cumulative bytes)
let adminToken = sessionStorage.getItem("slipgate-token") || "";

function authHeaders() {
  return adminToken ? {Authorization: "Bearer " + adminToken} : {};
}

async function adminJSON(path) {
  const r = await fetch(path, {cache: "no-store", credentials: "same-origin",
                               headers: authHeaders()});
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

function showResult(text, ok) {
  const e = document.getElementById("admin-result");
  e.textContent = text;
  e.className = "admin-result " + (ok ? "ok" : "bad");
}

// A live action (kick, mute, unban): POST, then the answer or the error shown.
async function act(path, params) {
  const q = new URLSearchParams(params).toString();
  let r;
  try {
    r = await fetch(path + "?" + q, {method: "POST", cache: "no-store",
                                     credentials: "same-origin", headers: authHeaders()});
  } catch (e) {
    showResult(path + ": no answer", false);
    return null;
  }
  const body = await r.text();
  if (r.status === 401) {
    showResult("the token is required: enter http_token above", false);
    document.getElementById("admin-token").focus();
    return null;
  }
  if (!r.ok) {
    showResult(path.replace("/api/", "") + ": " + body.trim(), false);
    return null;
  }
  let doc = null;
  try { doc = JSON.parse(body); } catch (e) { /* shown as text */ }
  if (doc && doc.action === "kick") {
    showResult("kicked session " + doc.session + " (" + doc.client + ") for " + doc.minutes +
               " min", true);
  } else if (doc && doc.action === "mute") {
    showResult("session " + doc.session + (doc.muted ? " muted" : " unmuted"), true);
  } else if (doc && doc.action === "unban") {
    showResult("unbanned " + doc.addr + " (" + doc.lifted + " lifted)", true);
  } else {
    showResult(body.trim(), true);
  }
  refreshAdmin();
  return doc;
}

function button(text, onclick, cls) {
  const b = el("button", text, cls);
  b.type = "button";
  b.addEventListener("click", onclick);
  return b;
}

// The session's byte rates (c>s and s>c, bytes/s) over the window, as an SVG.
function rateGraph(hist) {
  const NS = "http://www.w3.org/2000/svg", W = 160, H = 26;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("class", "rate");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const pts = {c2s: [], s2c: []};
  let max = 1;
  const now = hist.length ? hist[hist.length - 1].t : 0;
  // the span drawn: what was sampled, at least a minute, at most the window
  const span = Math.min(RATE_WINDOW_MS, Math.max(60000, hist.length ? now - hist[0].t : 0));
  for (let i = 1; i < hist.length; i++) {
    const dt = (hist[i].t - hist[i - 1].t) / 1000;
    if (dt <= 0) continue;
    for (const d of ["c2s", "s2c"]) {
      const v = Math.max(0, hist[i][d] - hist[i - 1][d]) / dt;
      pts[d].push([hist[i].t, v]);
      max = Math.max(max, v);
    }
  }
  for (const d of ["c2s", "s2c"]) {
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("class", d);
    line.setAttribute("points", pts[d].map(([t, v]) =>
      (W - (now - t) / span * W).toFixed(1) + "," +
      (H - 1 - v / max * (H - 2)).toFixed(1)).join(" "));
    svg.appendChild(line);
  }
  const title = document.createElementNS(NS, "title");
  title.textContent = "last " + dur(span) + ", peak " + bytes(Math.round(max)) +
    "/s (c>s blue, s>c purple)";
  svg.appendChild(title);
  return svg;
}

function lastRate(hist) {
  if (hist.length < 2) return "-";
  const a = hist[hist.length - 2], b = hist[hist.length - 1];
  const dt = (b.t - a.t) / 1000;
  return dt > 0 ? bytes(Math.round((b.c2s - a.c2s + b.s2c - a.s2c) / dt)) + "/s" : "-";
}

function fillRows(id, rows) {
  const tb = document.querySelector("#" + id + " tbody");
  tb.replaceChildren(...rows);
  document.getElementById("no-" + id).hidden = rows.length > 0;
  document.getElementById(id).hidden = rows.length === 0;
}

function textRow(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    if (c instanceof Node) {
      const td = el("td");
      td.appendChild(c);
      tr.appendChild(td);
    } else {
      tr.appendChild(el("td", c.t, c.c));
    }
  }
  return tr;
}

// The netchan's loss each way (sequence numbers skipped), or unknown.
function lossText(s) {
  if (!s.sequenced || !(s.sequenced.c2s + s.sequenced.s2c)) return {t: "unknown", c: "n dim"};
  const pct = d => {
    const all = s.sequenced[d] + s.lost[d];
    return all ? (100 * s.lost[d] / all).toFixed(1) + "%" : "-";
  };
  return {t: pct("c2s") + " / " + pct("s2c"), c: "n" + (s.lost.c2s + s.lost.s2c ? " bad" : "")};
}

// The round trip slipgate times, or unknown.
function pingText(p) {
  if (p.ping_ms === null || p.ping_ms === undefined) return {t: "unknown", c: "n dim ping"};
  return {t: p.ping_ms + " ms", c: "n ping"};
}

function playerCell(name) {
  const td = el("span");
  if (name) quakeText(td, name);
  else td.appendChild(el("span", "unknown", "dim"));
  return td;
}

async function refreshAdmin() {
  let routes, all, players;
  try {
    [routes, all, players] = await Promise.all([
      getJSON("/api/routes"), getJSON("/api/sessions?ended=1"), adminJSON("/api/players")]);
  } catch (e) {
    return; // refresh() shows the status
  }
  const tb = document.querySelector("#servers tbody");
  tb.replaceChildren(...routes.routes.filter(r => !r.retired).map(r => {
    const g = r.game || {}, p = r.probe || {};
    // the players through slipgate; with a fresh status answer (ready_probe),
    // the server's own count and slots after them
    let players = num(g.players);
    if (p.fresh && p.players != null)
      players += " (server " + num(p.players) + "/" +
                 (p.max_players != null ? num(p.max_players) : "?") + ")";
    return textRow([{t: r.name}, g.hostname ? playerCell(g.hostname) : {t: "unknown", c: "dim"},
                    {t: g.map || "unknown", c: g.map ? "" : "dim"},
                    {t: players, c: "n"}]);
  }));
  const now = Date.now();
  const live = all.sessions.filter(s => s.state === "active");
  const byId = new Map(live.map(s => [s.id, s]));
  for (const s of live) {
    const h = rates.get(s.id) || [];
    h.push({t: now, c2s: s.counters.c2s_bytes, s2c: s.counters.s2c_bytes});
    while (h.length && now - h[0].t > RATE_WINDOW_MS) h.shift();
    rates.set(s.id, h);
  }
  for (const id of [...rates.keys()]) if (!byId.has(id)) rates.delete(id);
  fillRows("players", players.players.map(p => {
    const s = byId.get(p.session) || {};
    const h = rates.get(p.session) || [];
    const tr = textRow([{t: p.session}, {t: p.route}, playerCell(p.name || s.player),
                        {t: p.client}, lossText(p.sequenced ? p : s), pingText(p), rateGraph(h),
                        {t: lastRate(h), c: "n"}]);
    tr.dataset.session = p.session;
    const td = el("td", null, "actions");
    td.appendChild(button("kick", () => act("/api/kick", {
      session: p.session, minutes: document.getElementById("kick-minutes").value || "10"}),
      "kick"));
    td.appendChild(button(p.muted ? "unmute" : "mute", () => act("/api/mute", {
      session: p.session, on: p.muted ? "0" : "1"}), "mute"));
    tr.appendChild(td);
    return tr;
  }));
  const ended = all.sessions.filter(s => s.state === "ended")
    .sort((a, b) => b.ended_ms - a.ended_ms).slice(0, ENDED_SHOWN);
  fillRows("ended", ended.map(s => textRow([{t: s.id}, {t: s.route}, playerCell(s.player),
    {t: s.client}, {t: new Date(s.ended_ms).toLocaleTimeString("en-GB")},
    {t: dur(s.ended_ms - s.started_ms)}, {t: s.end_reason}])));
}

async function refreshDemos() {
  let doc;
  try { doc = await adminJSON("/api/demos"); } catch (e) { return; }
  fillRows("demos", doc.demos.map(d => {
    const a = el("a", d.name);
    a.href = "/api/demo?path=" + encodeURIComponent(d.path);
    a.setAttribute("download", d.name);
    if (adminToken) { // a header, not a cookie: fetched here and saved
      a.addEventListener("click", async ev => {
        ev.preventDefault();
        const r = await fetch(a.href, {headers: authHeaders(), credentials: "same-origin"});
        if (!r.ok) { showResult(d.name + ": " + (await r.text()).trim(), false); return; }
        const url = URL.createObjectURL(await r.blob());
        const tmp = el("a");
        tmp.href = url;
        tmp.download = d.name;
        tmp.click();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      });
    }
    return textRow([a, {t: d.route || "-"}, {t: d.map || "unknown", c: d.map ? "" : "dim"},
      playerCell(d.player), {t: bytes(d.bytes), c: "n"},
      {t: new Date(d.mtime_ms).toLocaleString("en-GB")}]);
  }));
}

// The messages kept before the page opened, then the live stream's.
async function loadRecent() {
  try {
    const doc = await adminJSON("/api/recent");
    const kinds = chosenKinds();
    for (const ev of doc.events)
      for (const m of ev.msgs || []) if (kinds.includes(m.kind)) addMessage(ev, m);
  } catch (e) { /* the stream still comes */ }
}

function setupAdmin() {
  const tok = document.getElementById("admin-token");
  tok.value = adminToken;
  tok.addEventListener("change", () => {
    adminToken = tok.value.trim();
    if (adminToken) sessionStorage.setItem("slipgate-token", adminToken);
    else sessionStorage.removeItem("slipgate-token");
    refreshAdmin();
    refreshDemos();
  });
  document.getElementById("unban-button").addEventListener("click", () => {
    const addr = document.getElementById("unban-addr").value.trim();
    if (!addr) { showResult("unban: an address or ADDR/BITS", false); return; }
    act("/api/unban", {addr: addr});
  });
  refreshAdmin();
  refreshDemos();
  setInterval(refreshAdmin, 1000);
  setInterval(refreshDemos, 5000);
}

function setup() {
  const box = document.getElementById("kinds");
  for (const k of KINDS) {
    const label = el("label");
    const cb = document.createElement("input");
    cb.type = "checkbox";
    cb.id = "kind-" + k;
    cb.checked = DEFAULT_KINDS.includes(k);
    cb.addEventListener("change", connect);
    label.appendChild(cb);
    label.appendChild(document.createTextNode(" " + k));
    box.appendChild(label);
  }
  loadRecent().then(connect);
  refresh();
  setInterval(refresh, 1000);
  setupAdmin();
}

document.addEventListener("DOMContentLoaded", setup);
