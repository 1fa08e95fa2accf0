// The play view's drawing: the ground the client was sent (a shaded
// heightmap of every Terrain chunk column), the region grid, the markers,
// and the entities the client knows where they have walked by now, with
// health bars, the player's own master and pet marked apart from the
// others; and picking (which entity lies under a point of the canvas).
// No dependencies but the client's own modules; nothing here touches the
// socket.
//
// What the client cannot know: the protocol tells a client neither the
// regions nor which node owns them (docs/protocol.md, "Regions, borders
// and handoffs"). The view draws the documented region grid (square
// regions aligned on (0, 0), 8 km by default: View.regionEdge), not node
// borders; a border between two regions of one node is drawn alike.

import { TERRAIN_CELLS, TERRAIN_SIDE, VISUAL_DEN, VISUAL_MOB, VISUAL_PET, VISUAL_PLAYER } from "./frames.js";

/** DEFAULT_REGION_EDGE is the documented default region edge, metres (cells.GridConfig.RegionEdge). */
export const DEFAULT_REGION_EDGE = 8000;

/** TEXTURE is the side, in pixels, of the image a chunk column's ground is drawn from. */
export const TEXTURE = 64;

// Colours, in one place: the tests read pixels of the canvas and compare
// them with these.
export const COLOURS = Object.freeze({
  unknown: "#1b2418", // ground not sent (yet)
  master: "#ffd23f", // the player's own master
  pet: "#38c6ff", // the player's own pet
  player: "#f2f2f2",
  otherPet: "#9fb4c2",
  mob: "#e53935",
  den: "#8e5bd0",
  entity: "#bdbdbd",
  region: "rgba(255, 255, 255, 0.75)",
  target: "#ff7043",
});

// The hypsometric tint, low to high: [t, r, g, b].
const RAMP = [
  [0.0, 46, 84, 58],
  [0.3, 88, 128, 66],
  [0.6, 158, 150, 88],
  [0.85, 140, 112, 80],
  [1.0, 214, 206, 194],
];

function tint(t) {
  if (!(t > 0)) t = 0;
  if (t > 1) t = 1;
  for (let k = 1; k < RAMP.length; k++) {
    const [t1, r1, g1, b1] = RAMP[k];
    if (t <= t1) {
      const [t0, r0, g0, b0] = RAMP[k - 1];
      const f = (t - t0) / (t1 - t0);
      return [r0 + (r1 - r0) * f, g0 + (g1 - g0) * f, b0 + (b1 - b0) * f];
    }
  }
  return RAMP[RAMP.length - 1].slice(1);
}

/**
 * shadeChunk renders one chunk column's heights (289 samples in
 * decimetres, sample (i, j) at 17j + i, j south→north) into size × size
 * RGBA pixels, row 0 the north edge: a tint by height between lo and hi
 * (decimetres; the range of the ground the client holds, so that gentle
 * ground still shows), lit from the north-west by the slope (heights
 * exaggerated, the ground being gentle), with a contour line every
 * contour decimetres. edge is the column's edge in metres. around(i, j)
 * is the height of sample (i, j) for i or j up to 2 outside [0, 16] (the
 * neighbouring columns' samples; default: the nearest of this column's),
 * so that the slope at a column's edge is the one its neighbour finds.
 */
export function shadeChunk(heights, lo, hi, edge, size = TEXTURE, contour = 20, around = null) {
  const n = TERRAIN_SIDE;
  const step = edge / (n - 1); // metres between samples
  const clamp = (k) => Math.max(0, Math.min(n - 1, k));
  const at2 = (i, j) =>
    i >= 0 && i < n && j >= 0 && j < n ? heights[j * n + i] : around ? around(i, j) : heights[clamp(j) * n + clamp(i)];
  // The slope at each sample, metres per metre, over four samples: the
  // heights are whole decimetres, so a slope over one sample (2 m) would
  // show their rounding as stripes.
  const gx = new Float32Array(n * n);
  const gy = new Float32Array(n * n);
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < n; i++) {
      gx[j * n + i] = (at2(i + 2, j) - at2(i - 2, j)) / 10 / (4 * step);
      gy[j * n + i] = (at2(i, j + 2) - at2(i, j - 2)) / 10 / (4 * step);
    }
  }
  const bilinear = (f, u, v) => {
    const i = Math.min(Math.floor(u), n - 2), j = Math.min(Math.floor(v), n - 2);
    const fu = u - i, fv = v - j;
    const k = j * n + i;
    return (f[k] * (1 - fu) + f[k + 1] * fu) * (1 - fv) + (f[k + n] * (1 - fu) + f[k + n + 1] * fu) * fv;
  };
  // Heights at the pixels' centres, with one more row and column for the
  // contour test (clamped to the column's edge).
  const h = new Float32Array((size + 1) * (size + 1));
  const at = (p) => Math.min(((p + 0.5) * (n - 1)) / size, n - 1);
  for (let py = 0; py <= size; py++) {
    const v = n - 1 - at(py);
    for (let px = 0; px <= size; px++) h[py * (size + 1) + px] = bilinear(heights, at(px), Math.max(v, 0));
  }
  const span = Math.max(hi - lo, 1);
  const exaggerate = 14;
  const lx = -0.55, ly = 0.55, lz = 0.63; // towards the sun: north-west, 40° up
  const out = new Uint8ClampedArray(size * size * 4);
  for (let py = 0; py < size; py++) {
    const v = Math.max(n - 1 - at(py), 0);
    for (let px = 0; px < size; px++) {
      const u = at(px);
      const hv = h[py * (size + 1) + px];
      const sx = -exaggerate * bilinear(gx, u, v), sy = -exaggerate * bilinear(gy, u, v);
      const shade = Math.max(0, (sx * lx + sy * ly + lz) / Math.hypot(sx, sy, 1));
      let light = 0.45 + 0.75 * shade;
      const band = Math.floor(hv / contour);
      if (band !== Math.floor(h[py * (size + 1) + px + 1] / contour) || band !== Math.floor(h[(py + 1) * (size + 1) + px] / contour)) {
        light *= 0.8;
      }
      const [r, g, b] = tint((hv - lo) / span);
      const o = (py * size + px) * 4;
      out[o] = r * light;
      out[o + 1] = g * light;
      out[o + 2] = b * light;
      out[o + 3] = 255;
    }
  }
  return out;
}

// wrapDelta is the shortest signed offset d on an axis of size (the torus
// wraps); size 0 leaves d as it is.
function wrapDelta(d, size) {
  if (!size) return d;
  d %= size;
  if (d > size / 2) d -= size;
  if (d < -size / 2) d += size;
  return d;
}

/** kindName is what the view calls an entity of a visual kind. */
export function kindName(kind) {
  switch (kind) {
    case VISUAL_PLAYER: return "Player";
    case VISUAL_PET: return "Pet";
    case VISUAL_MOB: return "Mob";
    case VISUAL_DEN: return "Den";
  }
  return "Entity";
}

/**
 * describe is the name the view shows for entity e of world w (the
 * protocol sends no names: kind and id), with its health when known.
 */
export function describe(w, e) {
  let name;
  if (e.id === w.master) name = `You (player ${e.id})`;
  else if (e.id === w.pet) name = `Your pet (${e.id})`;
  else name = `${kindName(e.components.visual?.kind)} ${e.id}`;
  const hp = e.components.health;
  return hp ? `${name} · HP ${hp.hp}/${hp.max}` : name;
}

/**
 * View draws a World on a 2D canvas context, centred on the master.
 * Coordinates on the canvas are CSS pixels; metresAcross is the width of
 * the canvas in metres of the world (the zoom). After each draw, drawn
 * maps each entity id drawn to {x, y, z, sx, sy, r} (world metres, the
 * canvas position and the radius it was drawn with), and stats says what
 * was drawn: {chunks, regionLines, entities, bars, markers}.
 */
export class View {
  constructor({ regionEdge = DEFAULT_REGION_EDGE, metresAcross = 70 } = {}) {
    this.regionEdge = regionEdge;
    this.metresAcross = metresAcross;
    this.contour = 20; // decimetres between contour lines
    this.textures = new Map(); // "x,y" → {chunk, key, canvas}
    this.drawn = new Map();
    this.target = 0n; // the mob the master was last told to attack
    this.hover = 0n;
    this.stats = { chunks: 0, regionLines: 0, entities: 0, bars: 0, markers: 0 };
    this.range = null; // [lo, hi] decimetres of the ground held
  }

  scale(width) {
    return width / this.metresAcross;
  }

  /** centre is where the view is centred at tick: the master where it has walked, else (0, 0). */
  centre(w, tick) {
    return (w.master && w.where(w.master, tick)) ?? { x: 0, y: 0, z: 0 };
  }

  /** toWorld is the world point (x, y) under canvas point (sx, sy), for a canvas width × height. */
  toWorld(w, tick, sx, sy, width, height) {
    const at = this.centre(w, tick);
    const s = this.scale(width);
    return { x: at.x + (sx - width / 2) / s, y: at.y - (sy - height / 2) / s };
  }

  /** pick is the id of the entity drawn nearest canvas point (sx, sy) within reach, or 0n. */
  pick(sx, sy, reach = 6) {
    let best = 0n;
    let bestD = Infinity;
    for (const [id, d] of this.drawn) {
      const dist = Math.hypot(d.sx - sx, d.sy - sy);
      if (dist <= d.r + reach && dist < bestD) {
        best = id;
        bestD = dist;
      }
    }
    return best;
  }

  // texture is the canvas chunk c's ground is drawn from, made again when
  // the chunk (a new Terrain), one of its four neighbours (whose samples
  // its edges' slopes read) or the range of the ground held changes.
  texture(w, c, edge) {
    const g = w.geometry;
    const nx = Math.round(g.sizeX / edge), ny = Math.round(g.sizeY / edge);
    const get = (dx, dy) => w.terrain.get(`${(((c.x + dx) % nx) + nx) % nx},${(((c.y + dy) % ny) + ny) % ny}`) ?? null;
    const nb = [get(-1, 0), get(1, 0), get(0, -1), get(0, 1)];
    const k = `${c.x},${c.y}`;
    const key = `${this.range[0]},${this.range[1]},${this.contour}`;
    const t = this.textures.get(k);
    if (t && t.chunk === c && t.key === key && t.nb.every((x, i) => x === nb[i])) return t.canvas;
    const last = TERRAIN_SIDE - 1;
    // A sample outside c: the neighbour's across that edge (the corners'
    // from the nearer axis), or c's nearest when that column is not held.
    const around = (i, j) => {
      const ci = Math.max(0, Math.min(last, i)), cj = Math.max(0, Math.min(last, j));
      if (i < 0 && nb[0]) return nb[0].heights[cj * TERRAIN_SIDE + last + i];
      if (i > last && nb[1]) return nb[1].heights[cj * TERRAIN_SIDE + i - last];
      if (j < 0 && nb[2]) return nb[2].heights[(last + j) * TERRAIN_SIDE + ci];
      if (j > last && nb[3]) return nb[3].heights[(j - last) * TERRAIN_SIDE + ci];
      return c.heights[cj * TERRAIN_SIDE + ci];
    };
    const canvas = t?.canvas ?? new OffscreenCanvas(TEXTURE, TEXTURE);
    const px = shadeChunk(c.heights, this.range[0], this.range[1], edge, TEXTURE, this.contour, around);
    canvas.getContext("2d").putImageData(new ImageData(px, TEXTURE, TEXTURE), 0, 0);
    this.textures.set(k, { chunk: c, key, nb, canvas });
    return canvas;
  }

  // updateRange keeps the range of the ground held, in steps of 2 m so
  // that a chunk that changes it by a little does not redraw them all.
  updateRange(w) {
    let lo = Infinity, hi = -Infinity;
    for (const c of w.terrain.values()) {
      for (const v of c.heights) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    if (lo > hi) return;
    lo = Math.floor(lo / 20) * 20;
    hi = Math.ceil(hi / 20) * 20;
    if (!this.range || this.range[0] !== lo || this.range[1] !== hi) this.range = [lo, hi];
  }

  /** draw draws world w at tick (fractional) on ctx, a canvas of width × height CSS pixels. */
  draw(ctx, w, tick, width, height) {
    const g = w.geometry ?? {};
    const at = this.centre(w, tick);
    const s = this.scale(width);
    const toScreen = (x, y) => [width / 2 + wrapDelta(x - at.x, g.sizeX) * s, height / 2 - wrapDelta(y - at.y, g.sizeY) * s];
    const stats = { chunks: 0, regionLines: 0, entities: 0, bars: 0, markers: 0 };
    ctx.fillStyle = COLOURS.unknown;
    ctx.fillRect(0, 0, width, height);
    this.drawn.clear();
    this.stats = stats;
    if (!w.geometry) return;

    // The ground: each chunk column held that lies in the canvas.
    const edge = g.chunkEdge;
    if (edge > 0 && w.terrain.size > 0) {
      this.updateRange(w);
      ctx.imageSmoothingEnabled = true;
      ctx.imageSmoothingQuality = "high";
      const side = edge * s;
      for (const c of w.terrain.values()) {
        const [cx, cy] = toScreen(c.x * edge + edge / 2, c.y * edge + edge / 2);
        const left = cx - side / 2, top = cy - side / 2;
        if (left > width || top > height || left + side < 0 || top + side < 0) continue;
        // Half a pixel over each neighbour, so no seam shows between columns.
        ctx.drawImage(this.texture(w, c, edge), left - 0.5, top - 0.5, side + 1, side + 1);
        stats.chunks++;
        stats.markers += this.drawMarkers(ctx, c, left, top, side);
      }
    }

    // The region grid: dashed lines at the multiples of the region edge.
    this.drawRegions(ctx, at, s, width, height, g, stats);

    // The entities, the player's own last (on top).
    const order = [];
    for (const e of w.entities.values()) if (e.id !== w.master && e.id !== w.pet) order.push(e);
    const rank = (e) => ({ [VISUAL_DEN]: 0, [VISUAL_MOB]: 1, [VISUAL_PET]: 2, [VISUAL_PLAYER]: 3 })[e.components.visual?.kind] ?? 1;
    order.sort((a, b) => rank(a) - rank(b));
    const own = [w.entities.get(w.pet), w.entities.get(w.master)].filter(Boolean); // the master on top
    // The pet's leash, under the entities.
    const mp = w.master && w.where(w.master, tick), pp = w.pet && w.where(w.pet, tick);
    if (mp && pp) {
      const [mx, my] = toScreen(mp.x, mp.y), [px, py] = toScreen(pp.x, pp.y);
      ctx.strokeStyle = "rgba(56, 198, 255, 0.5)";
      ctx.lineWidth = 1;
      ctx.setLineDash([2, 3]);
      ctx.beginPath();
      ctx.moveTo(mx, my);
      ctx.lineTo(px, py);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    // Each entity with its health bar, so that the master's is on top of
    // everything.
    const placed = [];
    for (const e of [...order, ...own]) {
      const p = w.where(e.id, tick);
      if (!p) continue;
      const [sx, sy] = toScreen(p.x, p.y);
      const r = this.drawEntity(ctx, w, e, sx, sy);
      if (this.drawBar(ctx, e, sx, sy, r)) stats.bars++;
      this.drawn.set(e.id, { x: p.x, y: p.y, z: p.z, sx, sy, r });
      placed.push([e, sx, sy, r]);
      stats.entities++;
    }
    // Labels beside the player's own: "you" right of the master, "your
    // pet" left of the pet (the reference game's pet keeps south-west of
    // its master, so neither label covers the other entity).
    ctx.font = "bold 12px system-ui, sans-serif";
    ctx.lineWidth = 3;
    ctx.strokeStyle = "rgba(0, 0, 0, 0.7)";
    for (const [e, sx, sy, r] of placed) {
      if (e.id !== w.master && e.id !== w.pet) continue;
      const own = e.id === w.master;
      const x = own ? sx + r + 5 : sx - r - 5;
      ctx.textAlign = own ? "left" : "right";
      ctx.strokeText(own ? "you" : "your pet", x, sy + 4);
      ctx.fillStyle = own ? COLOURS.master : COLOURS.pet;
      ctx.fillText(own ? "you" : "your pet", x, sy + 4);
    }
  }

  drawMarkers(ctx, c, left, top, side) {
    let n = 0;
    const cell = side / TERRAIN_CELLS;
    const half = Math.max(Math.min(cell * 0.35, 8), 2);
    for (let k = 0; k < c.markers.length; k++) {
      const type = c.markers[k];
      if (!type) continue;
      const i = k % TERRAIN_CELLS, j = Math.floor(k / TERRAIN_CELLS); // cell (i, j), j south→north
      const x = left + (i + 0.5) * cell, y = top + side - (j + 0.5) * cell;
      ctx.fillStyle = `hsl(${(type * 47) % 360} 85% 60%)`;
      ctx.strokeStyle = "rgba(0, 0, 0, 0.6)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, y - half);
      ctx.lineTo(x + half, y);
      ctx.lineTo(x, y + half);
      ctx.lineTo(x - half, y);
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
      n++;
    }
    return n;
  }

  drawRegions(ctx, at, s, width, height, g, stats) {
    const R = this.regionEdge;
    if (!(R > 0)) return;
    const halfW = width / 2 / s, halfH = height / 2 / s;
    ctx.strokeStyle = COLOURS.region;
    ctx.lineWidth = 2;
    ctx.setLineDash([10, 6]);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = COLOURS.region;
    // The view's x (and y) run from at − half to at + half, perhaps past
    // the seam; the torus's size is a multiple of R, so every multiple of
    // R there is a region border.
    for (let x = Math.ceil((at.x - halfW) / R) * R; x <= at.x + halfW; x += R) {
      const sx = width / 2 + (x - at.x) * s;
      ctx.beginPath();
      ctx.moveTo(sx, 0);
      ctx.lineTo(sx, height);
      ctx.stroke();
      ctx.textAlign = "left";
      ctx.fillText(`region border x = ${g.sizeX ? ((x % g.sizeX) + g.sizeX) % g.sizeX : x} m`, sx + 4, 14);
      stats.regionLines++;
    }
    for (let y = Math.ceil((at.y - halfH) / R) * R; y <= at.y + halfH; y += R) {
      const sy = height / 2 - (y - at.y) * s;
      ctx.beginPath();
      ctx.moveTo(0, sy);
      ctx.lineTo(width, sy);
      ctx.stroke();
      ctx.textAlign = "right";
      ctx.fillText(`region border y = ${g.sizeY ? ((y % g.sizeY) + g.sizeY) % g.sizeY : y} m`, width - 4, sy - 4);
      stats.regionLines++;
    }
    ctx.setLineDash([]);
  }

  // drawEntity draws e at (sx, sy) and returns the radius it took.
  drawEntity(ctx, w, e, sx, sy) {
    const kind = e.components.visual?.kind;
    const ring = (r, colour, width) => {
      ctx.beginPath();
      ctx.arc(sx, sy, r, 0, 2 * Math.PI);
      ctx.strokeStyle = colour;
      ctx.lineWidth = width;
      ctx.stroke();
    };
    const disc = (r, colour) => {
      ctx.beginPath();
      ctx.arc(sx, sy, r, 0, 2 * Math.PI);
      ctx.fillStyle = colour;
      ctx.fill();
    };
    if (e.id === this.target) ring(11, COLOURS.target, 2);
    if (e.id === this.hover) ring(13, "rgba(255, 255, 255, 0.8)", 1);
    if (e.id === w.master) {
      ring(10, "rgba(255, 210, 63, 0.35)", 4);
      disc(8, COLOURS.master);
      ring(8, "#ffffff", 2);
      return 8;
    }
    if (e.id === w.pet) {
      disc(6, COLOURS.pet);
      ring(6, "#ffffff", 1.5);
      return 6;
    }
    switch (kind) {
      case VISUAL_PLAYER:
        disc(6, COLOURS.player);
        ring(6, "#333", 1.5);
        return 6;
      case VISUAL_PET:
        disc(4, COLOURS.otherPet);
        return 4;
      case VISUAL_MOB:
        disc(5, COLOURS.mob);
        ring(5, "#400", 1);
        return 5;
      case VISUAL_DEN:
        ctx.fillStyle = COLOURS.den;
        ctx.fillRect(sx - 7, sy - 7, 14, 14);
        ctx.strokeStyle = "#201030";
        ctx.lineWidth = 1.5;
        ctx.strokeRect(sx - 7, sy - 7, 14, 14);
        return 7;
    }
    disc(4, COLOURS.entity);
    return 4;
  }

  // drawBar draws e's health bar above it, if its health is known.
  drawBar(ctx, e, sx, sy, r) {
    const h = e.components.health;
    if (!h || !(h.max > 0)) return false;
    const f = Math.max(0, Math.min(1, h.hp / h.max));
    const bw = 26, bh = 4;
    const x = sx - bw / 2, y = sy - r - 8;
    ctx.fillStyle = "rgba(0, 0, 0, 0.65)";
    ctx.fillRect(x - 1, y - 1, bw + 2, bh + 2);
    ctx.fillStyle = f > 0.5 ? "#43c443" : f > 0.25 ? "#ffb300" : "#ff3b30";
    ctx.fillRect(x, y, bw * f, bh);
    return true;
  }
}
