// The torus map: regions coloured by owner, the ghost and interaction
// bands along every border between two owners (and the handoff margin
// past it, dashed), entities as marks by kind, handoffs flashing where
// they were seen. A region whose owner is down (killed) is hatched dark
// until a new table gives it to another node; a region that changed owner
// (a region move, a failover) is outlined in its new owner's colour,
// pulsing, and labelled "from → to" for CHANGE_SECONDS. Wheel zooms about the cursor, a drag pans; the world
// wraps, so the view's centre is kept on the torus and the world is drawn
// as many times, side by side, as the view needs (tiled copies).
//
// The view follows the action: the first snapshot with entities fits it
// to where the moving entities are (players, pets, mobs: dens are the
// world's furniture, spread over all of it), measured on the torus, and
// later snapshots re-fit it gently, until the user zooms or pans.
// A double click shows the whole world; setFollow(true) goes back.

export const KIND_COLOURS = {
  player: "#ffd23f",
  pet: "#8fd3ff",
  mob: "#e85d5d",
  den: "#b58cf0",
  entity: "#e8e8e8",
};

// Owner colours: a node keeps its colour as long as the sorted owner list
// keeps its place (the legend shows the mapping).
const PALETTE = ["#3f7fbf", "#3fa56b", "#c0873a", "#a04fa0", "#3aa0a8", "#b5504a", "#7d8a3a", "#5a62c0", "#a86f8f", "#4f8f8f"];

export function ownerColour(owners, name) {
  const i = owners.indexOf(name);
  return i < 0 ? "#555" : PALETTE[i % PALETTE.length];
}

const FLASH_SECONDS = 2.5;
const CHANGE_SECONDS = 8;
const MAX_TILES = 36;
const MAX_SCALE = 40; // pixels per metre
// Following: the entities' extent plus FOLLOW_MARGIN of it on each side
// (and FOLLOW_PAD metres), never less than FOLLOW_MIN_SPAN metres nor
// than both sides' ghost bands of a border with some room, so the
// borders near the entities and their bands are in view.
const FOLLOW_MARGIN = 0.12;
const FOLLOW_PAD = 20;
const FOLLOW_MIN_SPAN = 300;
const FOLLOW_EASE_SECONDS = 0.6; // time constant of the gentle re-fit

// The marks: a radius in pixels at the follow zoom, shrunk at far zooms
// but never below MIN_RADIUS (no sub-pixel dots).
const RADIUS = { player: 5, pet: 3, mob: 4, den: 4.5, entity: 3 };
const MIN_RADIUS = { player: 2.2, pet: 1.3, mob: 1.6, den: 1.2, entity: 1.3 };

function zoomFactor(scale) {
  // 1 from about a metre a pixel up, ~0.45 at a whole 128 km world.
  return Math.min(1.3, Math.max(0.4, 1 + 0.18 * Math.log2(Math.max(scale, 1e-9) / 1.0)));
}

// arc is the smallest arc of a circle of length L covering every value:
// its middle (on [0, L)) and its length. The largest gap between two
// neighbours (the wrap included) is what it leaves out.
export function arc(values, L) {
  const v = values.map((x) => mod(x, L)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  let gap = v[0] + L - v[v.length - 1], start = v[0];
  for (let i = 1; i < v.length; i++) {
    if (v[i] - v[i - 1] > gap) {
      gap = v[i] - v[i - 1];
      start = v[i];
    }
  }
  const len = L - gap;
  return { mid: mod(start + len / 2, L), len };
}

function mod(v, m) {
  return ((v % m) + m) % m;
}

export class TorusMap {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.snap = null;
    this.receivedAt = 0;
    this.view = null; // {cx, cy, scale}: world point at the centre, pixels per metre
    this.follow = true; // fit the view to the action until the user moves it
    this.followed = false; // the view has been fitted to entities once
    this.goal = null; // the view following is easing towards
    this.lastFrame = 0;
    this.frozen = false; // a still: the clock stops at the snapshot's time
    this.onFollow = () => {}; // told when follow changes
    // What the last frame drew, for window.dashboard.state().
    this.drawn = { regions: {}, entities: 0, kinds: {}, handoffs: 0, tiles: 0, dead: 0, changed: 0 };
    this.bindInput();
  }

  setSnapshot(s) {
    this.snap = s;
    this.receivedAt = performance.now();
    if (!s.world?.width) return;
    if (!this.view) this.view = this.worldView();
    if (!this.follow) return;
    const g = this.actionView();
    if (!g) return;
    if (!this.followed) {
      this.followed = true;
      this.view = { ...g };
      this.goal = g;
      return;
    }
    // Zoom only for a real change (out at once to keep everyone in, in
    // when the action has drawn together): no breathing at every step.
    const prev = this.goal ?? this.view;
    if (g.scale > prev.scale * 0.97 && g.scale < prev.scale * 1.3) g.scale = prev.scale;
    this.goal = g;
  }

  // worldView is the whole world, centred.
  worldView() {
    const w = this.snap.world;
    const { width, height } = this.size();
    return { cx: w.width / 2, cy: w.height / 2, scale: 0.95 * Math.min(width / w.width, height / w.height) };
  }

  // fit shows the whole world and stops following (the double click).
  fit() {
    if (!this.snap?.world?.width) return;
    this.view = this.worldView();
    this.setFollow(false);
  }

  setFollow(on) {
    if (on === this.follow) return;
    this.follow = on;
    this.goal = null;
    if (on && this.snap?.world?.width) {
      this.followed = false; // jump to the action, then follow
      this.setSnapshot(this.snap);
    }
    this.onFollow(on);
  }

  // actionView is the view that fits the moving entities (every entity
  // if all are dens), measured on the torus per axis, or null if there
  // are none.
  actionView() {
    const s = this.snap;
    let pts = s.entities.filter((e) => e.kind !== "den");
    if (pts.length === 0) pts = s.entities;
    if (pts.length === 0) return null;
    const W = s.world.width, H = s.world.height;
    const ax = arc(pts.map((e) => e.x), W), ay = arc(pts.map((e) => e.y), H);
    const min = Math.max(FOLLOW_MIN_SPAN, 2.5 * (s.bands?.ghost ?? 0));
    const span = (len) => Math.max(min, len * (1 + 2 * FOLLOW_MARGIN) + 2 * FOLLOW_PAD);
    const { width, height } = this.size();
    const whole = 0.95 * Math.min(width / W, height / H);
    const scale = Math.min(MAX_SCALE, Math.max(whole, Math.min(width / span(ax.len), height / span(ay.len))));
    return { cx: ax.mid, cy: ay.mid, scale };
  }

  // ease moves the view towards the follow goal, dt seconds of it: the
  // centre the short way round the torus, the zoom in log scale.
  ease(dt) {
    const g = this.goal, v = this.view, w = this.snap?.world;
    if (!this.follow || !g || !v || !w?.width) return;
    const k = 1 - Math.exp(-Math.max(0, dt) / FOLLOW_EASE_SECONDS);
    const short = (d, L) => mod(d + L / 2, L) - L / 2;
    v.cx = mod(v.cx + k * short(g.cx - v.cx, w.width), w.width);
    v.cy = mod(v.cy + k * short(g.cy - v.cy, w.height), w.height);
    v.scale = v.scale * Math.pow(g.scale / v.scale, k);
  }

  size() {
    const dpr = window.devicePixelRatio || 1;
    const r = this.canvas.getBoundingClientRect();
    const width = Math.max(1, Math.round(r.width)), height = Math.max(1, Math.round(r.height));
    if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(height * dpr)) {
      this.canvas.width = Math.round(width * dpr);
      this.canvas.height = Math.round(height * dpr);
    }
    return { width, height, dpr };
  }

  // The smallest zoom shows a few copies of the world, not thousands.
  minScale() {
    const w = this.snap?.world;
    const { width, height } = this.size();
    return w?.width ? Math.min(width / w.width, height / w.height) / 3 : 1e-6;
  }

  bindInput() {
    const c = this.canvas;
    c.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      if (!this.view) return;
      const r = c.getBoundingClientRect();
      const px = ev.clientX - r.left, py = ev.clientY - r.top;
      const before = this.toWorld(px, py);
      const f = Math.exp(-ev.deltaY * 0.0015);
      this.setFollow(false);
      this.view.scale = Math.min(MAX_SCALE, Math.max(this.minScale(), this.view.scale * f));
      const after = this.toWorld(px, py);
      this.pan(before.x - after.x, before.y - after.y);
    }, { passive: false });
    let drag = null;
    c.addEventListener("pointerdown", (ev) => {
      drag = { x: ev.clientX, y: ev.clientY };
      try {
        c.setPointerCapture(ev.pointerId);
      } catch {
        // a synthetic pointer (a test's) cannot be captured; the drag works without
      }
      c.classList.add("dragging");
    });
    c.addEventListener("pointermove", (ev) => {
      if (!drag || !this.view) return;
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (dx === 0 && dy === 0) return;
      drag = { x: ev.clientX, y: ev.clientY };
      this.setFollow(false);
      this.pan(-dx / this.view.scale, dy / this.view.scale);
    });
    const end = () => {
      drag = null;
      c.classList.remove("dragging");
    };
    c.addEventListener("pointerup", end);
    c.addEventListener("pointercancel", end);
    c.addEventListener("dblclick", () => this.fit());
  }

  // pan moves the view by (dx, dy) metres and keeps its centre on the torus.
  pan(dx, dy) {
    const w = this.snap?.world;
    if (!this.view || !w?.width) return;
    this.view.cx = mod(this.view.cx + dx, w.width);
    this.view.cy = mod(this.view.cy + dy, w.height);
  }

  toWorld(px, py) {
    const { width, height } = this.size();
    return { x: this.view.cx + (px - width / 2) / this.view.scale, y: this.view.cy - (py - height / 2) / this.view.scale };
  }

  // The server's clock now, from the snapshot's time and the time since
  // it arrived.
  serverNow() {
    if (this.frozen) return Date.parse(this.snap.at);
    return Date.parse(this.snap.at) + (performance.now() - this.receivedAt);
  }

  draw() {
    const { width, height, dpr } = this.size();
    const g = this.ctx;
    const t = performance.now();
    this.ease(this.lastFrame ? (t - this.lastFrame) / 1000 : 0);
    this.lastFrame = t;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#0d1012";
    g.fillRect(0, 0, width, height);
    const drawn = { regions: {}, entities: 0, kinds: {}, handoffs: 0, tiles: 0, dead: 0, changed: 0 };
    this.drawn = drawn;
    const s = this.snap;
    if (!s || !s.world?.width || !this.view) return;
    const W = s.world.width, H = s.world.height, v = this.view;
    // The world copies the view overlaps: copy (kx, ky) is the world
    // shifted by (kx·W, ky·H).
    const x0 = v.cx - width / 2 / v.scale, x1 = v.cx + width / 2 / v.scale;
    const y0 = v.cy - height / 2 / v.scale, y1 = v.cy + height / 2 / v.scale;
    const tiles = [];
    for (let kx = Math.floor(x0 / W); kx <= Math.floor(x1 / W); kx++) {
      for (let ky = Math.floor(y0 / H); ky <= Math.floor(y1 / H); ky++) {
        if (tiles.length < MAX_TILES) tiles.push([kx * W, ky * H]);
      }
    }
    drawn.tiles = tiles.length;
    const sx = (x) => width / 2 + (x - v.cx) * v.scale;
    const sy = (y) => height / 2 - (y - v.cy) * v.scale; // north is up
    const regionAt = this.regionIndex(s);
    const now = this.serverNow();
    const down = new Set((s.nodes ?? []).filter((n) => n.down).map((n) => n.name));
    // The newest change of each region still young enough to show.
    const changed = new Map();
    for (const c of s.regionChanges ?? []) {
      const age = (now - Date.parse(c.at)) / 1000;
      if (age >= 0 && age <= CHANGE_SECONDS) changed.set(c.region, { ...c, age });
    }

    // Regions (fill and outline), then the bands over all of them, then
    // the labels, so that no region's fill covers a neighbour's band.
    const visible = [];
    for (const [ox, oy] of tiles) {
      for (const r of s.regions) {
        const left = sx(r.minX + ox), right = sx(r.maxX + ox), top = sy(r.maxY + oy), bottom = sy(r.minY + oy);
        if (right < 0 || left > width || bottom < 0 || top > height) continue;
        visible.push([r, left, right, top, bottom]);
        g.globalAlpha = 0.55;
        g.fillStyle = ownerColour(s.owners, r.owner);
        g.fillRect(left, top, right - left, bottom - top);
        g.globalAlpha = 1;
        drawn.regions[r.owner] = (drawn.regions[r.owner] ?? 0) + 1;
        g.strokeStyle = "rgba(0,0,0,0.35)";
        g.lineWidth = 1;
        g.strokeRect(left + 0.5, top + 0.5, right - left - 1, bottom - top - 1);
        if (down.has(r.owner)) {
          this.hatch(g, left, right, top, bottom);
          drawn.dead++;
        }
      }
    }
    for (const [r, left, right, top, bottom] of visible) this.drawBands(g, s, r, regionAt, left, right, top, bottom, v.scale);
    for (const [r, left, right, top, bottom] of visible) {
      const c = changed.get(r.id);
      if (!c) continue;
      // A pulse that fades over CHANGE_SECONDS: white outside, the new
      // owner's colour inside.
      const pulse = 0.55 + 0.45 * Math.cos(c.age * 2 * Math.PI * 1.2);
      g.globalAlpha = Math.max(0.15, (1 - c.age / CHANGE_SECONDS) * pulse);
      g.lineWidth = 6;
      g.strokeStyle = "#ffffff";
      g.strokeRect(left + 3, top + 3, right - left - 6, bottom - top - 6);
      g.lineWidth = 3;
      g.strokeStyle = ownerColour(s.owners, c.to);
      g.strokeRect(left + 7, top + 7, right - left - 14, bottom - top - 14);
      g.globalAlpha = 1;
      drawn.changed++;
    }
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "rgba(255,255,255,0.7)";
    for (const [r, left, right, top, bottom] of visible) {
      // The label goes in the corner of the region's visible part.
      const l = Math.max(left, 0), rt = Math.min(right, width), tp = Math.max(top, 0), b = Math.min(bottom, height);
      const c = changed.get(r.id);
      let label = `${r.owner} · r${r.id}`;
      if (c) label = `r${r.id}: ${c.from} → ${c.to}`;
      else if (down.has(r.owner)) label = `${r.owner} (dead) · r${r.id}`;
      if (rt - l > 90 && b - tp > 22) g.fillText(label, l + 6, tp + 14);
    }

    // Entities, dens under the rest and pets (smaller, at their masters'
    // heels) over the players, then the handoffs' flashes over them.
    const f = zoomFactor(v.scale);
    const far = v.scale < 0.05; // a whole big world: dens are specks
    const kindOf = (e) => (KIND_COLOURS[e.kind] ? e.kind : "entity");
    for (const kind of ["den", "entity", "mob", "player", "pet"]) {
      const rr = Math.max(MIN_RADIUS[kind], RADIUS[kind] * f);
      const m = rr + 3;
      g.fillStyle = g.strokeStyle = KIND_COLOURS[kind];
      for (const [ox, oy] of tiles) {
        for (const e of s.entities) {
          if (kindOf(e) !== kind) continue;
          const x = sx(e.x + ox), y = sy(e.y + oy);
          if (x < -m || x > width + m || y < -m || y > height + m) continue;
          this.mark(g, kind, x, y, rr, far);
          drawn.entities++;
          drawn.kinds[kind] = (drawn.kinds[kind] ?? 0) + 1;
        }
      }
    }
    g.globalAlpha = 1;
    for (const h of s.handoffs) {
      const age = (now - Date.parse(h.at)) / 1000;
      if (age < 0 || age > FLASH_SECONDS) continue;
      const t = age / FLASH_SECONDS;
      for (const [ox, oy] of tiles) {
        const x = sx(h.x + ox), y = sy(h.y + oy);
        if (x < -40 || x > width + 40 || y < -40 || y > height + 40) continue;
        g.globalAlpha = 1 - 0.8 * t;
        g.strokeStyle = "#ffffff";
        g.lineWidth = 2.5;
        g.beginPath();
        g.arc(x, y, 7 + 26 * t, 0, 2 * Math.PI);
        g.stroke();
        g.strokeStyle = ownerColour(s.owners, h.to);
        g.lineWidth = 3.5;
        g.beginPath();
        g.arc(x, y, 4 + 14 * t, 0, 2 * Math.PI);
        g.stroke();
        g.globalAlpha = 1;
        drawn.handoffs++;
      }
    }
  }

  // mark draws one entity of kind at (x, y), rr pixels in radius: a
  // player a ringed disc, a pet a small ringed disc, a mob a diamond, a den a
  // hollow square (a speck when far).
  mark(g, kind, x, y, rr, far) {
    switch (kind) {
      case "player":
        g.beginPath();
        g.arc(x, y, rr, 0, 2 * Math.PI);
        g.fill();
        if (rr >= 3) {
          g.lineWidth = 1.5;
          g.strokeStyle = "#111";
          g.stroke();
          g.strokeStyle = KIND_COLOURS.player;
        }
        return;
      case "mob":
        g.beginPath();
        g.moveTo(x, y - rr * 1.2);
        g.lineTo(x + rr, y);
        g.lineTo(x, y + rr * 1.2);
        g.lineTo(x - rr, y);
        g.closePath();
        g.fill();
        return;
      case "den":
        if (far) {
          // Hundreds of dens line the borders of a big world: specks,
          // or they would hide the bands.
          g.globalAlpha = 0.4;
          g.fillRect(x - 0.75, y - 0.75, 1.5, 1.5);
          g.globalAlpha = 1;
          return;
        }
        g.lineWidth = 1.5;
        g.strokeRect(x - rr, y - rr, 2 * rr, 2 * rr);
        return;
      case "pet":
        g.beginPath();
        g.arc(x, y, rr, 0, 2 * Math.PI);
        g.fill();
        if (rr >= 2) {
          g.lineWidth = 1;
          g.strokeStyle = "#111";
          g.stroke();
        }
        return;
      default:
        g.beginPath();
        g.arc(x, y, rr, 0, 2 * Math.PI);
        g.fill();
    }
  }

  // hatch covers a dead node's region: darkened, with diagonal lines.
  hatch(g, left, right, top, bottom) {
    g.save();
    g.beginPath();
    g.rect(left, top, right - left, bottom - top);
    g.clip();
    g.fillStyle = "rgba(0,0,0,0.45)";
    g.fillRect(left, top, right - left, bottom - top);
    g.strokeStyle = "rgba(232,93,93,0.55)";
    g.lineWidth = 2;
    g.beginPath();
    const h = bottom - top;
    for (let x = left - h; x < right; x += 14) {
      g.moveTo(x, bottom);
      g.lineTo(x + h, top);
    }
    g.stroke();
    g.restore();
  }

  // regionIndex returns a lookup of the region at (col, row), wrapping.
  regionIndex(s) {
    const cols = s.world.cols, rows = s.world.rows;
    const byCell = new Map();
    for (const r of s.regions) byCell.set(r.row * cols + r.col, r);
    return (col, row) => byCell.get(mod(row, rows) * cols + mod(col, cols));
  }

  // drawBands shades, inside region r, the strips along each side whose
  // neighbour has another owner, in translucent white (no entity is
  // white): the ghost band (render ghosts of this region's entities are
  // kept by the neighbour within it), the interaction band (simulation
  // ghosts), and lines at the border, the ghost band's inner edge and,
  // dashed, the handoff margin (an entity of the neighbour's walking
  // this far in is handed over). Far out a band is a thin bright line.
  drawBands(g, s, r, regionAt, left, right, top, bottom, scale) {
    const b = s.bands;
    if (!b?.ghost) return;
    const sides = [
      [regionAt(r.col - 1, r.row), "w"],
      [regionAt(r.col + 1, r.row), "e"],
      [regionAt(r.col, r.row + 1), "n"],
      [regionAt(r.col, r.row - 1), "s"],
    ];
    // strip fills the band of depth px inside side; line strokes the
    // line at depth px.
    const strip = (side, px) => {
      if (side === "w") g.fillRect(left, top, px, bottom - top);
      if (side === "e") g.fillRect(right - px, top, px, bottom - top);
      if (side === "n") g.fillRect(left, top, right - left, px);
      if (side === "s") g.fillRect(left, bottom - px, right - left, px);
    };
    const line = (side, px) => {
      g.beginPath();
      if (side === "w") { g.moveTo(left + px, top); g.lineTo(left + px, bottom); }
      if (side === "e") { g.moveTo(right - px, top); g.lineTo(right - px, bottom); }
      if (side === "n") { g.moveTo(left, top + px); g.lineTo(right, top + px); }
      if (side === "s") { g.moveTo(left, bottom - px); g.lineTo(right, bottom - px); }
      g.stroke();
    };
    for (const [n, side] of sides) {
      if (!n || n.owner === r.owner) continue;
      const ghost = b.ghost * scale, inter = b.interaction * scale, m = b.handoffMargin * scale;
      g.fillStyle = "rgba(255,255,255,0.08)";
      strip(side, Math.max(1, ghost));
      g.fillStyle = "rgba(255,255,255,0.16)";
      strip(side, Math.max(1, inter));
      g.lineWidth = 1;
      g.strokeStyle = "rgba(255,255,255,0.55)";
      line(side, 0.5);
      if (ghost >= 6) {
        g.strokeStyle = "rgba(255,255,255,0.45)";
        g.setLineDash([2, 3]);
        line(side, ghost);
      }
      if (m >= 2) {
        g.strokeStyle = "rgba(255,255,255,0.6)";
        g.setLineDash([6, 4]);
        line(side, m);
      }
      g.setLineDash([]);
    }
  }
}
