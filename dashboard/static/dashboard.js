// The dashboard page: the state stream (Server-Sent Events at "events",
// one "snapshot" event per change) drawn as the torus map (map.js) and
// the per-node tables, the economy, the events and the play view.
//
// window.dashboard is a read-only hook for tests and the console:
// state() summarises what the page holds and what its last frame drew,
// positions() maps every entity id to [x, y, node] as last received.

import { TorusMap, KIND_COLOURS, ownerColour } from "./map.js";

const map = new TorusMap(document.getElementById("map"));
const conn = document.getElementById("conn");
const summary = document.getElementById("summary");
const legend = document.getElementById("legend");
const zones = document.querySelector("#zones tbody");
const econ = document.querySelector("#econ tbody");
const events = document.getElementById("events");
const playbox = document.getElementById("playbox");
const playframe = document.getElementById("playframe");

const page = { snap: null, received: 0, connected: false, handoffsSeen: new Set() };

function el(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function row(cells, cls) {
  const tr = el("tr");
  if (cls) tr.className = cls;
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.append(c);
    else td.textContent = c;
    tr.append(td);
  }
  return tr;
}

function swatch(colour, dot) {
  const i = el("i");
  i.style.background = colour;
  if (dot) i.className = "dot";
  return i;
}

function named(colour, name) {
  const span = el("span");
  span.append(swatch(colour), name);
  return span;
}

const f1 = (v) => (v ?? 0).toFixed(1);
const f2 = (v) => (v ?? 0).toFixed(2);

function render(s) {
  summary.textContent = `table v${s.tableVersion} · ${s.entities.length} entities · ${s.handoffs.length} handoffs in the last seconds`;
  legend.replaceChildren();
  for (const o of s.owners) {
    const span = el("span");
    span.append(swatch(ownerColour(s.owners, o)), o);
    legend.append(span);
  }
  for (const [k, c] of Object.entries(KIND_COLOURS)) {
    if (k === "entity") continue;
    const span = el("span");
    span.append(swatch(c, true), k);
    legend.append(span);
  }
  zones.replaceChildren();
  for (const n of s.nodes) {
    zones.append(row([
      named(ownerColour(s.owners, n.name), n.name + (n.stale ? " (stale)" : "")),
      `${f2(n.tickP50ms)} / ${f2(n.tickP99ms)}`,
      n.frozen ? `${n.simulated} (${n.frozen})` : `${n.simulated}`,
      `${n.renderGhosts} / ${n.simGhosts}`,
      `${f1(n.linkInPerSec)} / ${f1(n.linkOutPerSec)}`,
      `${n.sessions}`,
      `${n.handoffsSeenIn} / ${n.handoffsSeenOut} (${n.handoff?.Sent ?? 0}/${n.handoff?.Adopted ?? 0})`,
      `${n.ownedRegions}`,
    ], n.stale ? "stale" : ""));
  }
  econ.replaceChildren();
  for (const e of s.econ) {
    const state = e.fenced ? "fenced" : e.closed ? "stopped" : e.ready ? "ready" : "re-forming";
    econ.append(row([
      e.name, state, `${e.sessionsOpen}`, f1(e.movementsPerSec),
      e.nettingRatio ? f1(e.nettingRatio) : "–", `${e.orphansSwept}`, `${e.accepted} / ${e.rejected}`,
    ], e.closed || e.fenced || e.stale ? "stale" : ""));
  }
  events.replaceChildren();
  for (const ev of [...s.events].reverse()) {
    const li = el("li");
    const t = new Date(ev.at);
    li.append(el("time", t.toLocaleTimeString([], { hour12: false })), ev.text);
    events.append(li);
  }
  playbox.hidden = !s.play;
}

function apply(s) {
  page.snap = s;
  page.received++;
  for (const h of s.handoffs) page.handoffsSeen.add(`${h.id}@${h.at}`);
  map.setSnapshot(s);
  render(s);
}

const source = new EventSource("events");
source.addEventListener("snapshot", (ev) => apply(JSON.parse(ev.data)));
source.addEventListener("open", () => {
  page.connected = true;
  conn.textContent = "live";
  conn.className = "ok";
});
source.addEventListener("error", () => {
  page.connected = false;
  conn.textContent = "reconnecting…";
  conn.className = "bad";
});

document.getElementById("play").addEventListener("click", () => {
  // A fresh player every time: /play mints a new token.
  playframe.hidden = false;
  playframe.src = "play?" + Date.now();
});

function frame() {
  map.draw();
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);

window.dashboard = {
  state() {
    const s = page.snap;
    return {
      connected: page.connected,
      received: page.received,
      version: s?.version ?? 0,
      tableVersion: s?.tableVersion ?? 0,
      owners: s?.owners ?? [],
      nodes: (s?.nodes ?? []).map((n) => n.name),
      regionsDrawn: { ...map.drawn.regions },
      entitiesDrawn: map.drawn.entities,
      kindsDrawn: { ...map.drawn.kinds },
      handoffsDrawn: map.drawn.handoffs,
      handoffsSeen: page.handoffsSeen.size,
      tiles: map.drawn.tiles,
      view: map.view ? { ...map.view } : null,
      play: !!s?.play,
    };
  },
  positions() {
    const out = {};
    for (const e of page.snap?.entities ?? []) out[e.id] = [e.x, e.y, e.node];
    return out;
  },
};
