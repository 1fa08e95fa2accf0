// The dashboard page: the state stream (Server-Sent Events at "events",
// one "snapshot" event per change) drawn as the torus map (map.js) and
// the per-node tables, the economy, the events and the play view. With
// "?still" in its address the page draws one snapshot (snapshot.json)
// as of its time and opens no stream: a picture for a screenshot, which
// a stream that never ends would hold up.
//
// window.dashboard is a read-only hook for tests and the console:
// state() summarises what the page holds and what its last frame drew
// (the view: its centre, its scale and its width and height in metres;
// down: the nodes declared down; deadRegionsDrawn and changesDrawn: the
// regions the last frame drew hatched as a dead node's and outlined as
// having changed owner; changesSeen: every region change received),
// positions() maps every entity id to [x, y, node, kind] as last
// received.

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
const followButton = document.getElementById("follow");
const still = new URLSearchParams(location.search).has("still");

const page = { snap: null, received: 0, connected: false, handoffsSeen: new Set(), changesSeen: new Set() };

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
  const down = new Map(s.nodes.filter((n) => n.down).map((n) => [n.name, n.downWhy || "down"]));
  for (const o of s.owners) {
    const span = el("span");
    span.append(swatch(ownerColour(s.owners, o)), down.has(o) ? `${o} (${down.get(o)})` : o);
    if (down.has(o)) span.className = "down";
    legend.append(span);
  }
  for (const [k, c] of Object.entries(KIND_COLOURS)) {
    if (k === "entity") continue;
    const span = el("span");
    const i = swatch(c, true);
    i.className = `dot mark ${k}`;
    span.append(i, k);
    legend.append(span);
  }
  if (s.bands?.ghost) {
    for (const [cls, name, title] of [
      ["ghost", `ghost band ${s.bands.ghost} m`, "render ghosts: the neighbour shows this region's entities within it"],
      ["interaction", `interaction ${s.bands.interaction} m`, "simulation ghosts: the neighbour simulates against this region's entities within it"],
    ]) {
      const span = el("span", undefined, { title });
      const i = el("i");
      i.className = `band ${cls}`;
      span.append(i, name);
      legend.append(span);
    }
  }
  zones.replaceChildren();
  for (const n of s.nodes) {
    zones.append(row([
      named(ownerColour(s.owners, n.name), n.name + (n.down ? ` (${n.downWhy || "down"})` : n.stale ? " (stale)" : "")),
      `${f2(n.tickP50ms)} / ${f2(n.tickP99ms)}`,
      n.frozen ? `${n.simulated} (${n.frozen})` : `${n.simulated}`,
      `${n.renderGhosts} / ${n.simGhosts}`,
      `${f1(n.linkInPerSec)} / ${f1(n.linkOutPerSec)}`,
      `${n.sessions}`,
      `${n.handoffsSeenIn} / ${n.handoffsSeenOut} (${n.handoff?.Sent ?? 0}/${n.handoff?.Adopted ?? 0})`,
      `${n.ownedRegions}`,
    ], n.down ? "down" : n.stale ? "stale" : ""));
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

function showConn(text, ok) {
  conn.textContent = text;
  conn.className = ok ? "ok" : "bad";
}

const clock = (at) => new Date(at).toLocaleTimeString([], { hour12: false });

function apply(s) {
  page.snap = s;
  page.received++;
  for (const h of s.handoffs) page.handoffsSeen.add(`${h.id}@${h.at}`);
  for (const c of s.regionChanges ?? []) page.changesSeen.add(`${c.region}@${c.version}`);
  map.setSnapshot(s);
  render(s);
}

if (still) {
  // One snapshot, drawn as of its time (the flashes of its handoffs
  // included), and no stream.
  map.frozen = true;
  fetch("snapshot.json")
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.statusText))))
    .then((s) => {
      apply(s);
      showConn(`still · ${clock(s.at)}`, true);
    })
    .catch((err) => showConn(`no snapshot: ${err.message}`, false));
} else {
  const source = new EventSource("events");
  source.addEventListener("snapshot", (ev) => apply(JSON.parse(ev.data)));
  source.addEventListener("open", () => {
    page.connected = true;
    showConn("live", true);
  });
  source.addEventListener("error", () => {
    // EventSource tries again by itself; the page keeps the last
    // snapshot meanwhile, and says of when.
    page.connected = false;
    showConn(page.snap ? `reconnecting… (showing ${clock(page.snap.at)})` : "reconnecting…", false);
  });
}

followButton.addEventListener("click", () => map.setFollow(!map.follow));
map.onFollow = (on) => followButton.setAttribute("aria-pressed", String(on));

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

// viewSpan is the view's width and height in metres.
function viewSpan() {
  const r = document.getElementById("map").getBoundingClientRect();
  return { width: r.width / map.view.scale, height: r.height / map.view.scale };
}

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
      down: (s?.nodes ?? []).filter((n) => n.down).map((n) => n.name),
      deadRegionsDrawn: map.drawn.dead,
      changesDrawn: map.drawn.changed,
      changesSeen: page.changesSeen.size,
      tiles: map.drawn.tiles,
      follow: map.follow,
      view: map.view ? { ...map.view, ...viewSpan() } : null,
      play: !!s?.play,
    };
  },
  positions() {
    const out = {};
    for (const e of page.snap?.entities ?? []) out[e.id] = [e.x, e.y, e.node, e.kind];
    return out;
  },
};
