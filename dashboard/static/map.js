// The torus map: regions coloured by owner, the ghost and interaction
// bands along every border between two owners (and the handoff margin
// past it, dashed), entities as dots by kind, handoffs flashing where
// they were seen. Wheel zooms about the cursor, a drag pans; the world
// wraps, so the view's centre is kept on the torus and the world is drawn
// as many times, side by side, as the view needs (tiled copies).

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
const MAX_TILES = 36;

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
    // What the last frame drew, for window.dashboard.state().
    this.drawn = { regions: {}, entities: 0, kinds: {}, handoffs: 0, tiles: 0 };
    this.bindInput();
  }

  setSnapshot(s) {
    const first = !this.snap || !this.snap.world?.width;
    this.snap = s;
    this.receivedAt = performance.now();
    if (first && s.world?.width) this.fit();
  }

  fit() {
    const w = this.snap?.world;
    if (!w?.width) return;
    const { width, height } = this.size();
    this.view = { cx: w.width / 2, cy: w.height / 2, scale: 0.95 * Math.min(width / w.width, height / w.height) };
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
      this.view.scale = Math.min(40, Math.max(this.minScale(), this.view.scale * f));
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
      drag = { x: ev.clientX, y: ev.clientY };
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
    return Date.parse(this.snap.at) + (performance.now() - this.receivedAt);
  }

  draw() {
    const { width, height, dpr } = this.size();
    const g = this.ctx;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#0d1012";
    g.fillRect(0, 0, width, height);
    const drawn = { regions: {}, entities: 0, kinds: {}, handoffs: 0, tiles: 0 };
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

    for (const [ox, oy] of tiles) {
      for (const r of s.regions) {
        const left = sx(r.minX + ox), right = sx(r.maxX + ox), top = sy(r.maxY + oy), bottom = sy(r.minY + oy);
        if (right < 0 || left > width || bottom < 0 || top > height) continue;
        g.globalAlpha = 0.55;
        g.fillStyle = ownerColour(s.owners, r.owner);
        g.fillRect(left, top, right - left, bottom - top);
        g.globalAlpha = 1;
        drawn.regions[r.owner] = (drawn.regions[r.owner] ?? 0) + 1;
        this.drawBands(g, s, r, regionAt, left, right, top, bottom, v.scale);
        g.strokeStyle = "rgba(0,0,0,0.35)";
        g.lineWidth = 1;
        g.strokeRect(left + 0.5, top + 0.5, right - left - 1, bottom - top - 1);
        if (right - left > 90) {
          g.fillStyle = "rgba(255,255,255,0.55)";
          g.font = "11px system-ui, sans-serif";
          g.fillText(`${r.owner} · r${r.id}`, left + 6, top + 14);
        }
      }
    }
    // Entities, by kind, then the handoffs' flashes over them.
    const rad = { player: 3.2, pet: 2.2, mob: 2.4, den: 3.6, entity: 2 };
    for (const [ox, oy] of tiles) {
      for (const e of s.entities) {
        const x = sx(e.x + ox), y = sy(e.y + oy);
        if (x < -5 || x > width + 5 || y < -5 || y > height + 5) continue;
        const kind = KIND_COLOURS[e.kind] ? e.kind : "entity";
        g.fillStyle = KIND_COLOURS[kind];
        const rr = rad[kind];
        if (kind === "den") {
          g.fillRect(x - rr, y - rr, 2 * rr, 2 * rr);
        } else {
          g.beginPath();
          g.arc(x, y, rr, 0, 2 * Math.PI);
          g.fill();
        }
        drawn.entities++;
        drawn.kinds[kind] = (drawn.kinds[kind] ?? 0) + 1;
      }
    }
    const now = this.serverNow();
    for (const h of s.handoffs) {
      const age = (now - Date.parse(h.at)) / 1000;
      if (age < 0 || age > FLASH_SECONDS) continue;
      const t = age / FLASH_SECONDS;
      for (const [ox, oy] of tiles) {
        const x = sx(h.x + ox), y = sy(h.y + oy);
        if (x < -30 || x > width + 30 || y < -30 || y > height + 30) continue;
        g.globalAlpha = 1 - t;
        g.strokeStyle = "#ffffff";
        g.lineWidth = 2;
        g.beginPath();
        g.arc(x, y, 5 + 22 * t, 0, 2 * Math.PI);
        g.stroke();
        g.strokeStyle = ownerColour(s.owners, h.to);
        g.lineWidth = 3;
        g.beginPath();
        g.arc(x, y, 3 + 12 * t, 0, 2 * Math.PI);
        g.stroke();
        g.globalAlpha = 1;
        drawn.handoffs++;
      }
    }
  }

  // regionIndex returns a lookup of the region at (col, row), wrapping.
  regionIndex(s) {
    const cols = s.world.cols, rows = s.world.rows;
    const byCell = new Map();
    for (const r of s.regions) byCell.set(r.row * cols + r.col, r);
    return (col, row) => byCell.get(mod(row, rows) * cols + mod(col, cols));
  }

  // drawBands shades, inside region r, the strips along each side whose
  // neighbour has another owner: the ghost band (render ghosts of this
  // region's entities are kept by the neighbour within it), the
  // interaction band (simulation ghosts) and, dashed, the handoff margin
  // (an entity of the neighbour's walking this far in is handed over).
  drawBands(g, s, r, regionAt, left, right, top, bottom, scale) {
    const b = s.bands;
    if (!b?.ghost) return;
    const sides = [
      [regionAt(r.col - 1, r.row), "w"],
      [regionAt(r.col + 1, r.row), "e"],
      [regionAt(r.col, r.row + 1), "n"],
      [regionAt(r.col, r.row - 1), "s"],
    ];
    for (const [n, side] of sides) {
      if (!n || n.owner === r.owner) continue;
      for (const [width, style] of [[b.ghost, "rgba(255,255,255,0.10)"], [b.interaction, "rgba(255,255,255,0.22)"]]) {
        const px = Math.max(1, width * scale);
        g.fillStyle = style;
        if (side === "w") g.fillRect(left, top, px, bottom - top);
        if (side === "e") g.fillRect(right - px, top, px, bottom - top);
        if (side === "n") g.fillRect(left, top, right - left, px);
        if (side === "s") g.fillRect(left, bottom - px, right - left, px);
      }
      const m = b.handoffMargin * scale;
      if (m < 2) continue;
      g.strokeStyle = "rgba(255,255,255,0.45)";
      g.lineWidth = 1;
      g.setLineDash([4, 4]);
      g.beginPath();
      if (side === "w") { g.moveTo(left + m, top); g.lineTo(left + m, bottom); }
      if (side === "e") { g.moveTo(right - m, top); g.lineTo(right - m, bottom); }
      if (side === "n") { g.moveTo(left, top + m); g.lineTo(right, top + m); }
      if (side === "s") { g.moveTo(left, bottom - m); g.lineTo(right, bottom - m); }
      g.stroke();
      g.setLineDash([]);
    }
  }
}
