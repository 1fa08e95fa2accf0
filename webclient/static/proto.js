// A minimal protobuf wire reader and writer for exactly the messages of
// proto/client.proto (package shardwise.client.v1). No dependencies.
//
// Representation: uint64 and fixed64 fields are BigInt (entity ids are
// snowflakes with their high bits set; a Number would round them), uint32
// fields are Number, double is Number, bytes are Uint8Array views into the
// message (copy what you keep beyond the message), strings are decoded as
// UTF-8. A field left out has its proto3 default (0, 0n, "", an empty
// Uint8Array); a message field left out is null.
//
// Decoding follows protobuf's rules (as protobuf-go applies them): unknown
// fields, and known fields of the wrong wire type, are skipped by wire
// type (varint, 64-bit, length-delimited, groups, 32-bit), a scalar seen
// twice keeps its last value, a message field seen twice is merged, and of
// a oneof the last field seen wins. Malformed input (a truncated field, a
// varint over 10 bytes, wire type 6 or 7, field number 0, an unmatched
// group) throws ProtoError; nothing else is thrown.

/** ProtoError is thrown for bytes that are not a valid protobuf message. */
export class ProtoError extends Error {
  constructor(message) {
    super(message);
    this.name = "ProtoError";
  }
}

// Wire types.
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const SGROUP = 3;
export const EGROUP = 4;
export const I32 = 5;

const utf8Decoder = new TextDecoder("utf-8", { fatal: false });
const utf8Encoder = new TextEncoder();

/** Reader reads protobuf wire primitives from a Uint8Array. */
export class Reader {
  constructor(bytes) {
    this.buf = bytes;
    this.pos = 0;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get done() {
    return this.pos >= this.buf.length;
  }

  need(n) {
    if (this.buf.length - this.pos < n) {
      throw new ProtoError(`truncated at byte ${this.pos}: need ${n} bytes, ${this.buf.length - this.pos} left`);
    }
  }

  /** varint64 reads a varint as a BigInt in [0, 2^64). */
  varint64() {
    let v = 0n;
    for (let i = 0; i < 10; i++) {
      this.need(1);
      const b = this.buf[this.pos++];
      if (i === 9 && b > 1) throw new ProtoError(`varint overflows 64 bits at byte ${this.pos - 10}`);
      v |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (b < 0x80) return v;
    }
    throw new ProtoError(`varint longer than 10 bytes at byte ${this.pos - 10}`);
  }

  /** varint32 reads a varint and keeps its low 32 bits, unsigned (uint32). */
  varint32() {
    let v = 0;
    const start = this.pos;
    for (let i = 0; i < 10; i++) {
      this.need(1);
      const b = this.buf[this.pos++];
      if (i === 9 && b > 1) throw new ProtoError(`varint overflows 64 bits at byte ${start}`);
      if (i < 5) v += (b & 0x7f) * 2 ** (7 * i); // exact below 2^35; the mod below drops the rest
      if (b < 0x80) return v % 2 ** 32;
    }
    throw new ProtoError(`varint longer than 10 bytes at byte ${start}`);
  }

  fixed64() {
    this.need(8);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }

  double() {
    this.need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** bytes reads a length-delimited field: a view into the buffer. */
  bytes() {
    const n = this.varint64();
    if (n > BigInt(this.buf.length - this.pos)) {
      throw new ProtoError(`truncated at byte ${this.pos}: a field of ${n} bytes, ${this.buf.length - this.pos} left`);
    }
    const out = this.buf.subarray(this.pos, this.pos + Number(n));
    this.pos += Number(n);
    return out;
  }

  string() {
    return utf8Decoder.decode(this.bytes());
  }

  /** tag reads a field's key: [field number, wire type]. */
  tag() {
    const at = this.pos;
    const key = this.varint64();
    const field = key >> 3n;
    const wire = Number(key & 7n);
    if (field === 0n || field > 0x1fffffffn) throw new ProtoError(`field number ${field} at byte ${at}`);
    if (wire > I32) throw new ProtoError(`wire type ${wire} at byte ${at}`);
    return [Number(field), wire];
  }

  /** skip skips the value of a field of the given wire type. */
  skip(field, wire, depth = 0) {
    switch (wire) {
      case VARINT:
        this.varint64();
        return;
      case I64:
        this.need(8);
        this.pos += 8;
        return;
      case LEN:
        this.bytes();
        return;
      case I32:
        this.need(4);
        this.pos += 4;
        return;
      case SGROUP:
        if (depth > 64) throw new ProtoError("groups nested too deep");
        for (;;) {
          this.need(1);
          const [f, w] = this.tag();
          if (w === EGROUP) {
            if (f !== field) throw new ProtoError(`group ${field} ended by ${f}`);
            return;
          }
          this.skip(f, w, depth + 1);
        }
      case EGROUP:
        throw new ProtoError(`end of group ${field} without a start`);
    }
    throw new ProtoError(`wire type ${wire}`);
  }
}

/** Writer builds protobuf bytes. */
export class Writer {
  constructor() {
    this.chunks = [];
    this.len = 0;
  }

  push(bytes) {
    this.chunks.push(bytes);
    this.len += bytes.length;
  }

  /** varint writes v (a Number that is a non-negative integer, or a BigInt). */
  varint(v) {
    let x = BigInt.asUintN(64, BigInt(v));
    const out = [];
    while (x >= 0x80n) {
      out.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    out.push(Number(x));
    this.push(Uint8Array.from(out));
  }

  tag(field, wire) {
    this.varint((field << 3) | wire);
  }

  fixed64(v) {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, BigInt(v)), true);
    this.push(b);
  }

  double(v) {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.push(b);
  }

  bytes(b) {
    this.varint(b.length);
    this.push(b);
  }

  string(s) {
    this.bytes(utf8Encoder.encode(s));
  }

  finish() {
    const out = new Uint8Array(this.len);
    let off = 0;
    for (const c of this.chunks) {
      out.set(c, off);
      off += c.length;
    }
    return out;
  }
}

// ---- ClientMessage (encode) -------------------------------------------------

// encodeMessage writes a nested message field: its tag, length and body.
function nested(w, field, body) {
  const inner = new Writer();
  body(inner);
  w.tag(field, LEN);
  w.bytes(inner.finish());
}

// Scalars equal to their default are left out, as proto3 does.
function u32(w, field, v) {
  if (v) {
    w.tag(field, VARINT);
    w.varint(v >>> 0);
  }
}
function u64(w, field, v) {
  if (v !== undefined && BigInt(v) !== 0n) {
    w.tag(field, VARINT);
    w.varint(BigInt(v));
  }
}
function f64(w, field, v) {
  if (v !== undefined && BigInt(v) !== 0n) {
    w.tag(field, I64);
    w.fixed64(BigInt(v));
  }
}
function dbl(w, field, v) {
  if (v !== undefined && (v !== 0 || Object.is(v, -0))) {
    w.tag(field, I64);
    w.double(v);
  }
}

/**
 * encodeClientMessage encodes a ClientMessage with exactly one body:
 * {login: {token}}, {input: {seq, entity, kind, point: {x, y} | null,
 * target}}, {ping: {nonce}}, {logout: {}} or {resume: {credential}}. A
 * point that is given is sent even at (0, 0): its presence is what says
 * "go there".
 */
export function encodeClientMessage(m) {
  const w = new Writer();
  const set = ["login", "input", "ping", "logout", "resume"].filter((k) => m[k] != null);
  if (set.length !== 1) throw new TypeError(`a ClientMessage has exactly one body, got ${set.length}`);
  if (m.login) {
    nested(w, 1, (b) => {
      if (m.login.token) {
        b.tag(1, LEN);
        b.string(m.login.token);
      }
    });
  } else if (m.input) {
    const i = m.input;
    nested(w, 2, (b) => {
      u32(b, 1, i.seq);
      f64(b, 2, i.entity);
      u32(b, 3, i.kind);
      if (i.point) {
        nested(b, 4, (p) => {
          dbl(p, 1, i.point.x);
          dbl(p, 2, i.point.y);
        });
      }
      f64(b, 5, i.target);
    });
  } else if (m.ping) {
    nested(w, 3, (b) => u64(b, 1, m.ping.nonce));
  } else if (m.resume) {
    nested(w, 5, (b) => {
      if (m.resume.credential) {
        b.tag(1, LEN);
        b.string(m.resume.credential);
      }
    });
  } else {
    nested(w, 4, () => {});
  }
  return w.finish();
}

// ---- ServerMessage (decode) -------------------------------------------------

// decodeFields calls fn(reader, field, wire) for each field of bytes; fn
// returns false for a field it does not read, which is then skipped.
function decodeFields(bytes, fn) {
  const r = new Reader(bytes);
  while (!r.done) {
    const [field, wire] = r.tag();
    if (!fn(r, field, wire)) r.skip(field, wire);
  }
}

// want reports whether a known field has its wire type. One with another
// wire type is kept as an unknown field by protobuf-go, not refused; so
// it is skipped here too.
function want(field, wire, expected) {
  return wire === expected;
}

function world(bytes, into) {
  const m = into ?? { sizeX: 0, sizeY: 0, chunkEdge: 0 };
  decodeFields(bytes, (r, f, w) => {
    switch (f) {
      case 1: return want(f, w, I64) && ((m.sizeX = r.double()), true);
      case 2: return want(f, w, I64) && ((m.sizeY = r.double()), true);
      case 3: return want(f, w, I64) && ((m.chunkEdge = r.double()), true);
    }
    return false;
  });
  return m;
}

const decoders = {
  welcome(bytes, into) {
    const m = into ?? { account: 0n, sessionEpoch: 0n, gateway: "", world: null, tickHz: 0 };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, VARINT) && ((m.account = r.varint64()), true);
        case 2: return want(f, w, VARINT) && ((m.sessionEpoch = r.varint64()), true);
        case 3: return want(f, w, LEN) && ((m.gateway = r.string()), true);
        case 4: return want(f, w, LEN) && ((m.world = world(r.bytes(), m.world)), true);
        case 5: return want(f, w, VARINT) && ((m.tickHz = r.varint32()), true);
      }
      return false;
    });
    return m;
  },
  you(bytes, into) {
    const m = into ?? { master: 0n, pet: 0n };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, I64) && ((m.master = r.fixed64()), true);
        case 2: return want(f, w, I64) && ((m.pet = r.fixed64()), true);
      }
      return false;
    });
    return m;
  },
  batch(bytes, into) {
    const m = into ?? { tick: 0n, frames: new Uint8Array(0) };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, VARINT) && ((m.tick = r.varint64()), true);
        case 2: return want(f, w, LEN) && ((m.frames = r.bytes()), true);
      }
      return false;
    });
    return m;
  },
  terrain(bytes, into) {
    const m = into ?? { chunk: new Uint8Array(0) };
    decodeFields(bytes, (r, f, w) => (f === 1 ? want(f, w, LEN) && ((m.chunk = r.bytes()), true) : false));
    return m;
  },
  error(bytes, into) {
    const m = into ?? { code: "", message: "", inputSeq: 0 };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, LEN) && ((m.code = r.string()), true);
        case 2: return want(f, w, LEN) && ((m.message = r.string()), true);
        case 3: return want(f, w, VARINT) && ((m.inputSeq = r.varint32()), true);
      }
      return false;
    });
    return m;
  },
  resumeCredential(bytes, into) {
    const m = into ?? { credential: "", windowMs: 0 };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, LEN) && ((m.credential = r.string()), true);
        case 2: return want(f, w, VARINT) && ((m.windowMs = r.varint32()), true);
      }
      return false;
    });
    return m;
  },
  pong(bytes, into) {
    const m = into ?? { nonce: 0n, tick: 0n };
    decodeFields(bytes, (r, f, w) => {
      switch (f) {
        case 1: return want(f, w, VARINT) && ((m.nonce = r.varint64()), true);
        case 2: return want(f, w, VARINT) && ((m.tick = r.varint64()), true);
      }
      return false;
    });
    return m;
  },
};

// The oneof body of ServerMessage, by field number.
const serverBodies = [null, "welcome", "you", "batch", "terrain", "error", "pong", "resumeCredential"];

/**
 * decodeServerMessage decodes one ServerMessage into {kind, value}: kind
 * is the body's name ("welcome", "you", "batch", "terrain", "error",
 * "pong", "resumeCredential"), or null for a message with no body this client knows (a newer
 * server's), which a caller ignores. Throws ProtoError.
 */
export function decodeServerMessage(bytes) {
  let kind = null;
  let value = null;
  decodeFields(bytes, (r, f, w) => {
    const name = serverBodies[f];
    if (!name || !want(f, w, LEN)) return false;
    const body = r.bytes();
    value = decoders[name](body, kind === name ? value : null);
    kind = name;
    return true;
  });
  return { kind, value };
}
