// The demo page: log in with a token, draw the entities the client knows
// as dots around the player's master (the master highlighted), click to
// move the master there. Each animation frame draws every entity where
// it has walked by now (World.where at World.tickAt: the server does not
// resend the position of a straight walk). The page exposes
// window.shardwise = {client, log, drawn} for tests and the console;
// drawn maps each entity id drawn in the last frame to its {x, y, z}.

import { Client } from "./client.js";
import { VISUAL_DEN, VISUAL_MOB, VISUAL_PET } from "./frames.js";

const VIEW_METRES = 80; // the canvas's width, in metres of the world

const form = document.getElementById("login");
const canvas = document.getElementById("view");
const status = document.getElementById("status");
const ctx = canvas.getContext("2d");
const params = new URLSearchParams(location.search);
const scheme = location.protocol === "https:" ? "wss:" : "ws:";
form.url.value = params.get("gateway") ?? `${scheme}//${location.host}/ws`;

const state = { client: null, log: [], drawn: new Map() };
window.shardwise = state;

function note(line) {
  state.log.push(line);
  status.textContent = state.log.slice(-6).join("\n");
}

// The view is centred on the master where it has walked to by tick; the
// torus wraps, so each offset is taken the short way round.
function centre(world, tick) {
  return (world.master && world.where(world.master, tick)) ?? { x: 0, y: 0 };
}

function wrapDelta(d, size) {
  if (!size) return d;
  d %= size;
  if (d > size / 2) d -= size;
  if (d < -size / 2) d += size;
  return d;
}

function draw() {
  const c = state.client;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (!c) return;
  const w = c.world;
  const g = w.geometry ?? {};
  const tick = w.tickAt(performance.now());
  const at = centre(w, tick);
  const scale = canvas.width / VIEW_METRES;
  state.drawn.clear();
  for (const e of w.entities.values()) {
    const p = w.where(e.id, tick);
    if (!p) continue;
    state.drawn.set(e.id, p);
    const sx = canvas.width / 2 + wrapDelta(p.x - at.x, g.sizeX) * scale;
    const sy = canvas.height / 2 - wrapDelta(p.y - at.y, g.sizeY) * scale; // y grows north, up the screen
    const kind = e.components.visual?.kind;
    const own = e.id === w.master;
    ctx.fillStyle = own ? "#ffd23f" : e.id === w.pet ? "#8fd3ff" : kind === VISUAL_MOB ? "#e85d5d" : kind === VISUAL_DEN ? "#a070d0" : kind === VISUAL_PET ? "#7fb0c8" : "#e8e8e8";
    ctx.beginPath();
    ctx.arc(sx, sy, own ? 7 : 4, 0, 2 * Math.PI);
    ctx.fill();
    if (own) {
      ctx.strokeStyle = "#fff";
      ctx.lineWidth = 2;
      ctx.stroke();
    }
  }
}

function frame() {
  draw();
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);

form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  state.client?.close();
  const c = new Client();
  state.client = c;
  // Tells listeners (tests, a console user) of the new client before it
  // connects, so they can subscribe to its first events.
  window.dispatchEvent(new CustomEvent("shardwise-client", { detail: c }));
  c.on("you", (y) => note(`you: master ${y.master}, pet ${y.pet}`));
  c.on("error", (e) => note(`error ${e.code}: ${e.message}`));
  c.on("protocolerror", (e) => note(`protocol error: ${e.message}`));
  c.on("close", (e) => note(`closed: ${e.code} ${e.reason}`));
  c.on("terrain", (t) => note(`terrain chunk (${t.x}, ${t.y}) revision ${t.revision}`));
  try {
    await c.connect(form.url.value);
    const w = await c.login(form.token.value);
    note(`welcome: account ${w.account}, epoch ${w.sessionEpoch}, gateway ${w.gateway}, ${w.tickHz} Hz`);
  } catch (err) {
    note(String(err.message ?? err));
  }
});

canvas.addEventListener("click", (ev) => {
  const c = state.client;
  if (!c?.welcome || !c.world.master) return;
  const r = canvas.getBoundingClientRect();
  const scale = canvas.width / VIEW_METRES;
  const at = centre(c.world, c.world.tickAt(performance.now()));
  const x = at.x + (ev.clientX - r.left - canvas.width / 2) / scale;
  const y = at.y - (ev.clientY - r.top - canvas.height / 2) / scale;
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
