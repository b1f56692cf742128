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
  connect();
  refresh();
  setInterval(refresh, 1000);
}

document.addEventListener("DOMContentLoaded", setup);
