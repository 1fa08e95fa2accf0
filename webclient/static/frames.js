// Decoders of what a Batch and a Terrain message carry: the outbox frames
// (outbox/wire.go), the reference game's component payloads
// (game/components.go, zone.AppendPos) and the terrain chunk encoding
// (terrain/doc.go). No dependencies.
//
// Every decoder here is as strict as its Go counterpart: it accepts the
// bytes the Go encoder writes and refuses everything the Go decoder
// refuses, by throwing FrameError (never anything else). A refused batch
// or chunk is refused whole: nothing of it is returned.

/** FrameError is thrown for bytes that are not a valid frame, payload or chunk. */
export class FrameError extends Error {
  constructor(message) {
    super(message);
    this.name = "FrameError";
  }
}

// ---- varints ------------------------------------------------------------------

// uvarint reads a canonical (minimal) unsigned LEB128 varint at pos as a
// BigInt: [value, bytes read]. Like Go's binary.Uvarint plus the
// minimality check: at most 10 bytes, the 10th at most 1, and a last byte
// of 0x00 only when it is the only byte.
function uvarintBig(b, pos, what) {
  let v = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= b.length) throw new FrameError(`${what} at byte ${pos}: truncated varint`);
    const x = b[pos + i];
    if (i === 9 && x > 1) throw new FrameError(`${what} at byte ${pos}: varint overflows 64 bits`);
    v |= BigInt(x & 0x7f) << BigInt(7 * i);
    if (x < 0x80) {
      if (x === 0 && i > 0) throw new FrameError(`${what} at byte ${pos}: non-minimal varint`);
      return [v, i + 1];
    }
  }
  throw new FrameError(`${what} at byte ${pos}: varint overflows 64 bits`);
}

// uvarint is uvarintBig as a Number: exact below 2^53, which every caller
// compares against a far smaller limit before using it.
function uvarint(b, pos, what) {
  const [v, n] = uvarintBig(b, pos, what);
  return [Number(v), n];
}

// ---- outbox frames --------------------------------------------------------------

/** Frame kinds (outbox.Kind). */
export const KIND_COMPONENT = 1;
export const KIND_APPEAR = 2;
export const KIND_VANISH = 3;

/** Vanish reasons (interest.VanishReason). */
export const VANISH_OUT_OF_SIGHT = 0;
export const VANISH_GONE = 1;
export const VANISH_DEATH = 2;
export const vanishReasons = ["out-of-sight", "gone", "death"];

/** Limits of outbox/wire.go. */
export const MAX_FRAME_BODY = 1 << 20;
export const MAX_BURST_LEN = 1 << 16;
const ENTITY_BYTES = 8;
const MIN_COMPONENT_FRAME = 1 + 1 + ENTITY_BYTES + 1;

function readFrame(b, off) {
  const [size, n] = uvarint(b, off, "frame length");
  if (size > MAX_FRAME_BODY) throw new FrameError(`at byte ${off}: frame body of ${size} bytes exceeds ${MAX_FRAME_BODY}`);
  if (size > b.length - off - n) throw new FrameError(`at byte ${off}: frame body of ${size} bytes, ${b.length - off - n} left`);
  const start = off + n;
  const end = start + size;
  if (size < 1 + ENTITY_BYTES) throw new FrameError(`at byte ${start}: body of ${size} bytes too short`);
  const view = new DataView(b.buffer, b.byteOffset + start, size);
  const kind = b[start];
  const entity = view.getBigUint64(1, true);
  const tail = start + 1 + ENTITY_BYTES;
  switch (kind) {
    case KIND_COMPONENT: {
      if (tail >= end) throw new FrameError(`at byte ${tail}: bad component type`);
      const [type, k] = uvarint(b.subarray(0, end), tail, "component type");
      if (type > 0xffff) throw new FrameError(`at byte ${tail}: bad component type`);
      return [{ kind, entity, type, payload: b.subarray(tail + k, end) }, end];
    }
    case KIND_APPEAR: {
      if (tail >= end) throw new FrameError(`at byte ${tail}: bad appear burst length`);
      const [count, k] = uvarint(b.subarray(0, end), tail, "appear burst length");
      if (tail + k !== end) throw new FrameError(`at byte ${tail}: bad appear burst length`);
      if (count > MAX_BURST_LEN) throw new FrameError(`at byte ${tail}: burst of ${count} frames exceeds ${MAX_BURST_LEN}`);
      return [{ kind, entity, burstLen: count }, end];
    }
    case KIND_VANISH:
      if (end - tail !== 1 || b[tail] > VANISH_DEATH) throw new FrameError(`at byte ${tail}: bad vanish reason`);
      return [{ kind, entity, reason: b[tail] }, end];
  }
  throw new FrameError(`at byte ${start}: unknown frame kind ${kind}`);
}

/**
 * decodeBatch decodes the frames of one Batch (its frames field) into an
 * array of frames: {kind: KIND_COMPONENT, entity, type, payload},
 * {kind: KIND_APPEAR, entity, burstLen} or {kind: KIND_VANISH, entity,
 * reason}; entity is a BigInt, payload a view into b. An appear head must
 * be followed by exactly burstLen component frames of its entity.
 */
export function decodeBatch(b) {
  const out = [];
  let off = 0;
  let burstEntity = 0n;
  let burstLeft = 0;
  while (off < b.length) {
    const [m, next] = readFrame(b, off);
    if (burstLeft > 0) {
      if (m.kind !== KIND_COMPONENT || m.entity !== burstEntity) {
        throw new FrameError(`at byte ${off}: appear burst of entity ${burstEntity} cut short`);
      }
      burstLeft--;
    } else if (m.kind === KIND_APPEAR) {
      if (m.burstLen * MIN_COMPONENT_FRAME > b.length - next) {
        throw new FrameError(`at byte ${off}: burst of ${m.burstLen} frames, ${b.length - next} bytes left`);
      }
      burstEntity = m.entity;
      burstLeft = m.burstLen;
    }
    out.push(m);
    off = next;
  }
  if (burstLeft > 0) throw new FrameError(`at byte ${off}: batch ends inside an appear burst of entity ${burstEntity}`);
  return out;
}

// ---- the reference game's components -----------------------------------------

/** Wire types of the reference game's synced components (game/components.go). */
export const WIRE_POSITION = 1;
export const WIRE_PATH = 2;
export const WIRE_SPEED = 3;
export const WIRE_VISUAL = 4;
export const WIRE_HEALTH = 5;
export const WIRE_EXP = 6;

/** Visual kinds (game.Kind). */
export const VISUAL_PLAYER = 1;
export const VISUAL_PET = 2;
export const VISUAL_MOB = 3;
export const VISUAL_DEN = 4;

function f32(p, i) {
  return new DataView(p.buffer, p.byteOffset, p.byteLength).getFloat32(i, true);
}

/** decodePosition decodes zone.AppendPos: three little-endian float32, finite. */
export function decodePosition(p) {
  if (p.length !== 12) throw new FrameError(`position payload of ${p.length} bytes, want 12`);
  const pos = { x: f32(p, 0), y: f32(p, 4), z: f32(p, 8) };
  if (![pos.x, pos.y, pos.z].every(Number.isFinite)) throw new FrameError("position is not finite");
  return pos;
}

/** decodePath: 0 (no path), or 1 and the target position. */
export function decodePath(p) {
  if (p.length === 1 && p[0] === 0) return { active: false, target: null };
  if (p.length !== 13 || p[0] !== 1) throw new FrameError(`path of ${p.length} bytes`);
  return { active: true, target: decodePosition(p.subarray(1)) };
}

/** decodeSpeed: metres per second, a little-endian float32, finite and ≥ 0. */
export function decodeSpeed(p) {
  if (p.length !== 4) throw new FrameError(`speed of ${p.length} bytes`);
  const mps = f32(p, 0);
  if (!Number.isFinite(mps) || mps < 0) throw new FrameError(`speed ${mps}`);
  return { mps };
}

/** decodeVisual: one byte, the kind. */
export function decodeVisual(p) {
  if (p.length !== 1) throw new FrameError(`visual of ${p.length} bytes`);
  return { kind: p[0] };
}

/** decodeHealth: hp and max as uvarints, each at most 2^31 − 1. */
export function decodeHealth(p) {
  const [hp, n] = uvarint(p, 0, "health hp");
  if (hp > 0x7fffffff) throw new FrameError("health hp");
  const [max, m] = uvarint(p, n, "health max");
  if (max > 0x7fffffff || n + m !== p.length) throw new FrameError("health max");
  return { hp, max };
}

/**
 * decodeExp: experience points, a zigzag varint (Go's binary.AppendVarint)
 * of an int64. Returned as a Number: exact up to 2^53, far beyond any
 * game's experience.
 */
export function decodeExp(p) {
  const [u, n] = uvarintBig(p, 0, "exp");
  if (n !== p.length) throw new FrameError(`exp of ${p.length} bytes`);
  return { points: Number((u >> 1n) ^ -(u & 1n)) };
}

/** componentDecoders maps each wire type to [name, decoder]. */
export const componentDecoders = new Map([
  [WIRE_POSITION, ["position", decodePosition]],
  [WIRE_PATH, ["path", decodePath]],
  [WIRE_SPEED, ["speed", decodeSpeed]],
  [WIRE_VISUAL, ["visual", decodeVisual]],
  [WIRE_HEALTH, ["health", decodeHealth]],
  [WIRE_EXP, ["exp", decodeExp]],
]);

/**
 * decodeComponent decodes one component payload by its wire type: [name,
 * value], or null for a type the reference game does not define (a
 * caller keeps its raw payload). Throws FrameError for a malformed one.
 */
export function decodeComponent(type, payload) {
  const d = componentDecoders.get(type);
  return d ? [d[0], d[1](payload)] : null;
}

// ---- terrain chunks -------------------------------------------------------------

/** Constants of the terrain chunk encoding (terrain/doc.go). */
export const TERRAIN_VERSION = 1;
export const TERRAIN_SIDE = 17;
export const TERRAIN_CELLS = 16;
export const TERRAIN_MAX_EDITS = 1024;
export const TERRAIN_MAX_EDIT_DATA = 1024;
export const TERRAIN_MAX_CHUNK_BYTES = 1 + 5 + 5 + 10 + 17 * 17 * 3 + 2 + 1024 * (3 + 10 + 2 + 1024);
export const TERRAIN_KIND_MARKER = 1;
const MAX_DELTA = 2 * 65535;
const MIN_EDIT = 3;

/**
 * decodeChunk decodes a terrain chunk encoding (a Terrain message's chunk)
 * into {x, y, revision (BigInt), heights (Int16Array of 289 samples in
 * decimetres, sample (i, j) at 17j + i), edits: [{kind, account (BigInt),
 * data (a view into b)}], markers (Uint8Array of 16 × 16 marker types, the
 * edits applied in order: what terrain.Apply gives)}.
 */
export function decodeChunk(b) {
  if (b.length > TERRAIN_MAX_CHUNK_BYTES) throw new FrameError(`chunk of ${b.length} bytes exceeds ${TERRAIN_MAX_CHUNK_BYTES}`);
  if (b.length === 0) throw new FrameError("chunk: empty, no version byte");
  if (b[0] !== TERRAIN_VERSION) throw new FrameError(`chunk: unknown version ${b[0]}`);
  let off = 1;
  const next = (what) => {
    const [v, n] = uvarint(b, off, `chunk ${what}`);
    off += n;
    return v;
  };
  const column = (what) => {
    const at = off;
    const v = next(what);
    if (v > 0x7fffffff) throw new FrameError(`chunk ${what} at byte ${at}: ${v} exceeds 2^31-1`);
    return v;
  };
  const x = column("X");
  const y = column("Y");
  const [revision, rn] = uvarintBig(b, off, "chunk Revision");
  off += rn;
  const heights = new Int16Array(TERRAIN_SIDE * TERRAIN_SIDE);
  for (let k = 0; k < heights.length; k++) {
    const at = off;
    const u = next(`Heights[${k}]`);
    if (u > MAX_DELTA) throw new FrameError(`chunk Heights[${k}] at byte ${at}: delta exceeds any two heights`);
    const d = u % 2 === 0 ? u / 2 : -(u + 1) / 2;
    const pred = k % TERRAIN_SIDE !== 0 ? heights[k - 1] : k !== 0 ? heights[k - TERRAIN_SIDE] : 0;
    const v = pred + d;
    if (v < -32768 || v > 32767) throw new FrameError(`chunk Heights[${k}] at byte ${at}: height ${v} dm outside int16`);
    heights[k] = v;
  }
  const countAt = off;
  const count = next("Edits");
  if (count > TERRAIN_MAX_EDITS) throw new FrameError(`chunk Edits at byte ${countAt}: count ${count} exceeds ${TERRAIN_MAX_EDITS}`);
  if (count > Math.floor((b.length - off) / MIN_EDIT)) throw new FrameError(`chunk Edits at byte ${countAt}: count ${count}, ${b.length - off} bytes left`);
  const edits = [];
  const markers = new Uint8Array(TERRAIN_CELLS * TERRAIN_CELLS);
  for (let i = 0; i < count; i++) {
    const at = off;
    const kind = next(`Edits[${i}].Kind`);
    if (kind === 0 || kind > 0xffff) throw new FrameError(`chunk Edits[${i}].Kind at byte ${at}: kind ${kind}`);
    const [acct, an] = uvarintBig(b, off, `chunk Edits[${i}].Account`);
    off += an;
    const lenAt = off;
    const len = next(`Edits[${i}].Data`);
    if (len > TERRAIN_MAX_EDIT_DATA) throw new FrameError(`chunk Edits[${i}].Data at byte ${lenAt}: ${len} bytes exceed ${TERRAIN_MAX_EDIT_DATA}`);
    if (len > b.length - off) throw new FrameError(`chunk Edits[${i}].Data at byte ${lenAt}: ${len} bytes, ${b.length - off} left`);
    const data = b.subarray(off, off + len);
    off += len;
    if (kind === TERRAIN_KIND_MARKER) {
      if (len !== 2) throw new FrameError(`chunk Edits[${i}].Data at byte ${off - len}: marker data of ${len} bytes, want 2`);
      markers[(data[0] >> 4) * TERRAIN_CELLS + (data[0] & 0x0f)] = data[1];
    }
    edits.push({ kind, account: acct, data });
  }
  if (off !== b.length) throw new FrameError(`chunk at byte ${off}: ${b.length - off} trailing bytes`);
  return { x, y, revision, heights, edits, markers };
}
