// The play page: log in with a token and play. The canvas (view.js)
// shows the ground the client was sent, shaded, the region grid, and the
// entities the client knows where they have walked by now (World.where
// at World.tickAt: the server does not resend the position of a straight
// walk), the player's own master and pet marked, with health bars; the
// side panel shows the player's health, its pet's and its experience; a
// click on the ground moves the master there, a click on a mob attacks
// it (and walks up to it); hovering names what is under the pointer. The
// log keeps what happened, one line per event, with the Terrain messages
// counted on their own line rather than logged one by one.
//
// The page exposes window.shardwise = {client, log, drawn, view, hover}
// for tests and the console: drawn maps each entity id drawn in the last
// frame to {x, y, z, sx, sy, r} (metres; canvas position in CSS pixels
// and radius); view is the View (view.js); hover is {id, text} of what
// the pointer is over, or null. The query ?region=METRES sets the region
// edge the grid is drawn at (default 8000, the documented default; the
// protocol does not send it).

import { Client } from "./client.js";
import { VISUAL_MOB } from "./frames.js";
import { DEFAULT_REGION_EDGE, View, describe } from "./view.js";

const $ = (id) => document.getElementById(id);
const form = $("login");
const canvas = $("view");
const hoverBox = $("hover");
const ctx = canvas.getContext("2d");
const params = new URLSearchParams(location.search);
const scheme = location.protocol === "https:" ? "wss:" : "ws:";
form.url.value = params.get("gateway") ?? `${scheme}//${location.host}/ws`;

const regionEdge = Number(params.get("region")) > 0 ? Number(params.get("region")) : DEFAULT_REGION_EDGE;
$("regionedge").textContent = regionEdge % 1000 === 0 ? `${regionEdge / 1000} km` : `${regionEdge} m`;
const view = new View({ regionEdge });
const state = { client: null, log: [], drawn: view.drawn, view, hover: null };
window.shardwise = state;

// ---- the log -------------------------------------------------------------------

const MAX_LOG = 200;
let terrainMessages = 0;

// note adds a line to the log; the same line again counts up on the last.
function note(line) {
  const last = state.log.length - 1;
  const m = last >= 0 && /^(.*?)(?: ×(\d+))?$/.exec(state.log[last]);
  if (m && m[1] === line) state.log[last] = `${line} ×${Number(m[2] ?? 1) + 1}`;
  else state.log.push(line);
  if (state.log.length > MAX_LOG) state.log.splice(0, state.log.length - MAX_LOG);
  const el = $("log");
  el.textContent = state.log.slice(-40).join("\n");
  el.scrollTop = el.scrollHeight;
}

function showTerrain(c, chunk) {
  terrainMessages++;
  $("terrain").textContent = `terrain: ${c.world.terrain.size} columns held (${terrainMessages} received, last (${chunk.x}, ${chunk.y}) revision ${chunk.revision})`;
}

// ---- the side panel -------------------------------------------------------------

function bar(text, barEl, h) {
  $(text).textContent = h ? `${h.hp} / ${h.max}` : "–";
  const f = h && h.max > 0 ? Math.max(0, Math.min(1, h.hp / h.max)) : 0;
  const b = $(barEl);
  b.style.width = `${(f * 100).toFixed(1)}%`;
  b.style.background = f > 0.5 ? "#43c443" : f > 0.25 ? "#ffb300" : "#ff3b30";
}

function panel(c, tick) {
  const w = c.world;
  const me = w.entities.get(w.master);
  const pet = w.entities.get(w.pet);
  bar("hp", "hpbar", me?.components.health);
  bar("pethp", "pethpbar", pet?.components.health);
  $("exp").textContent = me?.components.exp ? String(me.components.exp.points) : "–";
  const p = w.master ? w.where(w.master, tick) : null;
  const where = p ? ` · (${p.x.toFixed(0)}, ${p.y.toFixed(0)}) in region (${Math.floor(p.x / regionEdge)}, ${Math.floor(p.y / regionEdge)})` : "";
  const closed = c.closed ? ` · closed ${c.closed.code} ${c.closed.reason}` : "";
  $("status").textContent = c.welcome
    ? `account ${c.welcome.account} on ${c.welcome.gateway} · tick ${w.tick}${where}${closed}`
    : c.closed ? `not connected${closed}` : "connecting…";
}

// ---- drawing ---------------------------------------------------------------------

// fit sizes the canvas's pixels to its box (at the device's pixel ratio)
// and returns the box's size in CSS pixels.
function fit() {
  const r = canvas.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(Math.round(r.width), 1), h = Math.max(Math.round(r.height), 1);
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return [w, h];
}

function frame() {
  const [width, height] = fit();
  const c = state.client;
  if (c) {
    const tick = c.world.tickAt(performance.now());
    view.draw(ctx, c.world, tick, width, height);
    panel(c, tick);
    refreshHover(c);
  } else {
    view.draw(ctx, { geometry: null, entities: new Map(), terrain: new Map() }, 0, width, height);
    ctx.fillStyle = "#9aa58f";
    ctx.font = "14px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.fillText("paste a login token above and connect", width / 2, height / 2);
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);

// ---- hovering ---------------------------------------------------------------------

let pointer = null; // {sx, sy} on the canvas, CSS pixels

// hoverReach is how far (CSS pixels past its disc) the pointer may be
// from what it names: a little more to keep a name than to take one, so
// that a walking mob stays named while the pointer follows it.
const hoverReach = { take: 6, keep: 18 };

function refreshHover(c) {
  let id = 0n;
  if (pointer) {
    const held = view.hover && view.drawn.get(view.hover);
    const keep = held && Math.hypot(held.sx - pointer.sx, held.sy - pointer.sy) <= held.r + hoverReach.keep;
    id = keep ? view.hover : view.pick(pointer.sx, pointer.sy, hoverReach.take);
  }
  const e = id ? c.world.entities.get(id) : null;
  view.hover = e ? id : 0n;
  if (!e) {
    state.hover = null;
    hoverBox.hidden = true;
    return;
  }
  const text = describe(c.world, e);
  state.hover = { id: id.toString(), text };
  if (hoverBox.textContent !== text) hoverBox.textContent = text;
  const d = view.drawn.get(id);
  // Up and to the right, clear of the entity's bar and label.
  hoverBox.style.left = `${d.sx + 16}px`;
  hoverBox.style.top = `${d.sy - 36}px`;
  hoverBox.hidden = false;
}

function canvasPoint(ev) {
  const r = canvas.getBoundingClientRect();
  return { sx: ev.clientX - r.left, sy: ev.clientY - r.top };
}

canvas.addEventListener("mousemove", (ev) => {
  pointer = canvasPoint(ev);
});
canvas.addEventListener("mouseleave", () => {
  pointer = null;
});

canvas.addEventListener("wheel", (ev) => {
  ev.preventDefault();
  const f = Math.exp(ev.deltaY * 0.001);
  view.metresAcross = Math.min(Math.max(view.metresAcross * f, 30), 400);
}, { passive: false });

// ---- connecting ------------------------------------------------------------------

form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  state.client?.close();
  const c = new Client();
  state.client = c;
  terrainMessages = 0;
  view.target = 0n;
  $("terrain").textContent = "no terrain yet";
  // Tells listeners (tests, a console user) of the new client before it
  // connects, so they can subscribe to its first events.
  window.dispatchEvent(new CustomEvent("shardwise-client", { detail: c }));
  c.on("you", (y) => note(`you: master ${y.master}, pet ${y.pet}`));
  c.on("error", (e) => note(`error ${e.code}: ${e.message}`));
  c.on("protocolerror", (e) => note(`protocol error: ${e.message}`));
  c.on("close", (e) => note(`closed: ${e.code} ${e.reason}`));
  c.on("reconnecting", () => note("the connection dropped: resuming the session"));
  c.on("resumed", (w) => note(`resumed: epoch ${w.sessionEpoch}, gateway ${w.gateway}`));
  c.on("reconnectfailed", (e) => note(`could not resume (${e.message ?? e}): log in again`));
  c.on("terrain", (t) => showTerrain(c, t));
  c.on("batch", (b) => {
    if (view.target && b.vanished.includes(view.target)) {
      note(`target ${view.target} is gone`);
      view.target = 0n;
    }
  });
  try {
    await c.connect(form.url.value);
    const w = await c.login(form.token.value);
    form.token.value = ""; // spent: a token logs in once
    note(`welcome: account ${w.account}, epoch ${w.sessionEpoch}, gateway ${w.gateway}, ${w.tickHz} Hz`);
  } catch (err) {
    note(String(err.message ?? err));
  }
});

// A click on a mob attacks it and walks up to it (the reference game's
// master hits its target only within reach, and walks only where told);
// a click anywhere else walks there.
canvas.addEventListener("click", (ev) => {
  const c = state.client;
  if (!c?.welcome || !c.world.master) return;
  const { sx, sy } = canvasPoint(ev);
  const r = canvas.getBoundingClientRect();
  const id = view.pick(sx, sy);
  const target = id ? c.world.entities.get(id) : null;
  if (target && target.components.visual?.kind === VISUAL_MOB) {
    const seq = c.attack(c.world.master, id);
    view.target = id;
    const p = view.drawn.get(id);
    c.move(c.world.master, p.x, p.y);
    note(`attack #${seq}: mob ${id}`);
    return;
  }
  const tick = c.world.tickAt(performance.now());
  const { x, y } = view.toWorld(c.world, tick, sx, sy, r.width, r.height);
  const seq = c.move(c.world.master, x, y); // the server normalises onto the torus
  note(`move #${seq} to (${x.toFixed(1)}, ${y.toFixed(1)})`);
});

// A token in the URL's fragment (#token=…: the dashboard's play link; a
// fragment is never sent to a server) logs in at once. Tokens are single
// use, so it is taken out of the address bar before it is spent.
const linked = new URLSearchParams(location.hash.slice(1)).get("token");
if (linked) {
  form.token.value = linked;
  history.replaceState(null, "", location.pathname + location.search);
  form.requestSubmit();
}
