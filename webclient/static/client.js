// The shardwise client: a WebSocket to a gateway speaking the client
// protocol (proto/client.proto, subprotocol "shardwise.v1"), and the World
// the client knows, kept from the batches. No dependencies, no build step.
//
//   import { Client, InputKind } from "./client.js";
//   const c = new Client();
//   c.on("batch", ({ tick, appeared, updated, vanished }) => draw(c.world));
//   await c.connect("wss://node.example/ws");
//   const welcome = await c.login(token);
//   c.on("you", ({ master }) => c.move(master, 10, 20));

import { ProtoError, decodeServerMessage, encodeClientMessage } from "./proto.js";
import {
  FrameError, KIND_APPEAR, KIND_COMPONENT, KIND_VANISH, WIRE_PATH, WIRE_POSITION, WIRE_SPEED,
  decodeBatch, decodeChunk, decodeComponent, decodePosition,
} from "./frames.js";

// now is the clock Client stamps batches with, for World.tickAt.
const now = () => globalThis.performance?.now() ?? Date.now();

/** SUBPROTOCOL is the WebSocket subprotocol of the client protocol. */
export const SUBPROTOCOL = "shardwise.v1";

/**
 * InputKind is the reference game's input kinds (Input.kind; the gateway
 * passes the kind through and the game checks it): move 1 (walk to a
 * point), attack 2 (a target; the master's), stop 3, mark 4 (a marker of
 * a type 0–255 on the ground at a point within 8 m of the master; 0
 * removes one). This is the one place the client names them: a game that
 * numbers its kinds otherwise changes this line.
 */
export const InputKind = Object.freeze({ MOVE: 1, ATTACK: 2, STOP: 3, MARK: 4 });

/** DEFAULT_TICK_HZ is the tick rate assumed before a Welcome names one. */
export const DEFAULT_TICK_HZ = 20;

// Torus arithmetic as torus.World does it: x and y wrap, z does not.
const f64 = new Float64Array(1);
const i64 = new BigInt64Array(f64.buffer);

// floorMod is torus's floorMod: v mod n in [0, n).
function floorMod(v, n) {
  let r = v % n; // JavaScript's % is Go's math.Mod
  if (r < 0) {
    r += n;
    if (r >= n) {
      f64[0] = n; // the largest float below n (Go's math.Nextafter(n, 0))
      i64[0] -= 1n;
      r = f64[0];
    }
  }
  return r;
}

// shortestDelta is torus.World.DeltaX (or DeltaY): the shortest signed
// distance from a to b on an axis of size n, in (−n/2, n/2].
function shortestDelta(a, b, n) {
  const d = b - a;
  const h = n * 0.5;
  if (d > -h && d <= h) return d;
  const r = floorMod(d, n);
  return r > n / 2 ? r - n : r;
}

// normalise is torus.World.NormaliseX (or NormaliseY): x in [0, n).
function normalise(x, n) {
  return x >= 0 && x < n ? x : floorMod(x, n);
}

/** The close status a client uses for a server message it cannot decode. */
export const CLOSE_MALFORMED = 4000;

// toId converts an entity id to a BigInt: a BigInt as it is, a decimal
// string, or a Number that is a safe integer (a larger Number has already
// lost digits, so it is refused).
function toId(v) {
  if (typeof v === "bigint") return BigInt.asUintN(64, v);
  if (typeof v === "string") return BigInt.asUintN(64, BigInt(v));
  if (Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw new TypeError(`entity id ${v}: pass a BigInt or a decimal string`);
}

/**
 * Entity is one entity the client knows: its raw component payloads by
 * wire type (the last sent of each) and the decoded ones by name
 * (position, path, speed, visual, health, exp). components.position is
 * the last Position as sent; World.where is where the entity has walked
 * since.
 */
export class Entity {
  constructor(id) {
    this.id = id;
    this.raw = new Map(); // wire type → Uint8Array (a copy)
    this.components = {}; // name → decoded value
    // The dead-reckoning anchor (World.where): where the entity stood at
    // the end of tick anchorAt. Null until a Position arrives.
    this.anchor = null;
    this.anchorAt = 0;
  }

  set(type, payload) {
    const decoded = decodeComponent(type, payload);
    this.raw.set(type, payload.slice());
    if (decoded) this.components[decoded[0]] = decoded[1];
  }
}

/**
 * World is what the client knows: the entities in view (id → Entity), its
 * own master and pet (You), the world geometry (Welcome), the chunks of
 * terrain it was sent, and the last tick applied.
 *
 * Invariants: a batch is applied whole or not at all (applyBatch decodes
 * every frame and payload before it changes anything); an appear adds its
 * burst to what is known of the entity (after a vanish: nothing); a
 * vanish forgets it; a component of an entity not known starts one with
 * that component alone; a You with new ids forgets every entity.
 */
export class World {
  constructor() {
    this.entities = new Map();
    this.master = 0n;
    this.pet = 0n;
    this.geometry = null;
    this.tick = 0n;
    this.tickHz = 0; // from Welcome; 0 until then (DEFAULT_TICK_HZ is assumed)
    this.receivedAt = null; // the caller's clock (ms) when the last batch arrived
    this.terrain = new Map(); // "x,y" → decoded chunk
  }

  /**
   * where is where entity id stands at tick `at` (a Number, fractional
   * for a point between ticks, or a BigInt; default the last batch's
   * tick) as far as the client can tell: {x, y, z} metres, or null for
   * an entity not known or never sent a Position. It animates as
   * docs/protocol.md ("Animating") says and sim's View.Where does: from
   * the last Position, towards the Path target at Speed / tickHz metres a
   * tick, the shortest way on the torus, stopping at the target. The
   * server does not resend the position of a straight walk, so a page
   * draws this, not components.position. For a tick from the wall clock
   * between batches, pass tickAt(now).
   */
  where(id, at = this.tick) {
    const e = this.entities.get(toId(id));
    if (!e || !e.anchor) return null;
    return this.reckon(e, Number(at));
  }

  /**
   * tickAt is the tick (fractional) at time now, by the caller's clock in
   * milliseconds (the one it passed to applyBatch, performance.now() for
   * Client): the last batch's tick plus the ticks elapsed since it
   * arrived, at tickHz. Before any batch it is the world's tick.
   */
  tickAt(now) {
    const t = Number(this.tick);
    if (this.receivedAt === null || !(now > this.receivedAt)) return t;
    return t + ((now - this.receivedAt) * (this.tickHz || DEFAULT_TICK_HZ)) / 1000;
  }

  // anchor keeps e's dead-reckoning anchor as a component of tick arrives,
  // before its payload replaces the old one (sim's Client.anchor). A
  // Position is where the entity stood at the end of tick. A new Path or
  // Speed took effect in tick (the reference game moves entities after it
  // decides where they go), so the entity walked the old one until the
  // tick before: anchor there.
  anchor(e, type, payload, tick) {
    if (type === WIRE_POSITION) {
      e.anchor = decodePosition(payload);
      e.anchorAt = tick;
    } else if ((type === WIRE_PATH || type === WIRE_SPEED) && e.anchor && e.anchorAt + 1 < tick) {
      e.anchor = this.reckon(e, tick - 1);
      e.anchorAt = tick - 1;
    }
  }

  // reckon is where e stands at tick (sim's Client.reckon): from its
  // anchor, the distance its Speed covers in the ticks since, along its
  // Path the shortest way on the torus, stopping at the target.
  reckon(e, tick) {
    const p = e.anchor;
    const g = this.geometry;
    if (!(tick > e.anchorAt) || !g || !g.sizeX || !g.sizeY) return { ...p };
    const { path, speed } = e.components;
    if (!path?.active || !speed) return { ...p };
    const travel = (speed.mps / (this.tickHz || DEFAULT_TICK_HZ)) * (tick - e.anchorAt);
    const dx = shortestDelta(p.x, path.target.x, g.sizeX);
    const dy = shortestDelta(p.y, path.target.y, g.sizeY);
    const dist = Math.hypot(dx, dy);
    if (dist <= travel) return { ...path.target };
    const f = travel / dist;
    return { x: normalise(p.x + dx * f, g.sizeX), y: normalise(p.y + dy * f, g.sizeY), z: p.z };
  }

  /**
   * applyBatch applies one Batch's frames and returns what changed:
   * {tick, appeared, updated, vanished} (arrays of ids; updated lists
   * each entity once). receivedAt is the caller's clock in milliseconds
   * when the batch arrived, for tickAt (optional). Throws FrameError,
   * changing nothing, for a malformed batch.
   */
  applyBatch(tick, frames, receivedAt = null) {
    const decoded = decodeBatch(frames);
    // Decode every payload first, so a malformed one refuses the batch
    // before anything is applied.
    for (const f of decoded) if (f.kind === KIND_COMPONENT) decodeComponent(f.type, f.payload);
    const appeared = [];
    const updated = new Set();
    const vanished = [];
    for (const f of decoded) {
      switch (f.kind) {
        case KIND_APPEAR:
          // An entity known only by what its owner was sent out of sight
          // (owner-only and party components, routed by account) keeps
          // those; the burst brings the visible ones.
          if (!this.entities.has(f.entity)) this.entities.set(f.entity, new Entity(f.entity));
          appeared.push(f.entity);
          break;
        case KIND_COMPONENT: {
          // A component of an entity that never appeared is kept: the
          // reference game sends a party member's health to the party
          // wherever the member is, with no appear before it. Such an
          // entity has only what it was sent (no position, say).
          let e = this.entities.get(f.entity);
          if (!e) {
            e = new Entity(f.entity);
            this.entities.set(f.entity, e);
          }
          this.anchor(e, f.type, f.payload, Number(tick));
          e.set(f.type, f.payload);
          updated.add(f.entity);
          break;
        }
        case KIND_VANISH:
          this.entities.delete(f.entity);
          updated.delete(f.entity);
          vanished.push(f.entity);
          break;
      }
    }
    for (const id of appeared) updated.delete(id);
    this.tick = tick;
    if (receivedAt !== null) this.receivedAt = receivedAt;
    return { tick, appeared, updated: [...updated], vanished };
  }

  /**
   * you takes the master and pet a You names. A You naming other ids than
   * the ones held (the player came back from its last save after its node
   * died: docs/protocol.md) starts the view afresh: the server sends no
   * vanish for the old view and every entity of the new one appears
   * again, so every entity known is forgotten. The terrain stays: the
   * server does not send it again. The first You, or the same ids again,
   * forgets nothing.
   */
  you(master, pet) {
    if ((this.master !== 0n || this.pet !== 0n) && (master !== this.master || pet !== this.pet)) this.entities.clear();
    this.master = master;
    this.pet = pet;
  }

  /** applyTerrain decodes and keeps one chunk; returns it. Throws FrameError. */
  applyTerrain(bytes) {
    const c = decodeChunk(bytes);
    c.heights = c.heights.slice(); // keep nothing that aliases the socket's buffer
    c.edits = c.edits.map((e) => ({ ...e, data: e.data.slice() }));
    this.terrain.set(`${c.x},${c.y}`, c);
    return c;
  }

  /** snapshot returns the world as plain JSON-able data (ids as decimal strings). */
  snapshot() {
    const entities = [];
    for (const e of this.entities.values()) {
      entities.push({ id: e.id.toString(), ...e.components, where: this.where(e.id) });
    }
    return {
      tick: this.tick.toString(),
      master: this.master.toString(),
      pet: this.pet.toString(),
      geometry: this.geometry,
      entities,
      terrain: [...this.terrain.values()].map((c) => ({
        x: c.x, y: c.y, revision: c.revision.toString(), heights: [...c.heights],
        markers: [...c.markers], edits: c.edits.length,
      })),
    };
  }
}

/**
 * Close statuses after which a client does not resume on its own: a
 * Logout (1000), a protocol error (4000), a refused login (4001), a newer
 * login of the account (4002) and a refused resume (4008). After any other
 * drop (1006 when the socket broke, 4005 when the node stops, …) the
 * session can be resumed.
 */
export const NO_RESUME = Object.freeze(new Set([1000, 4000, 4001, 4002, 4008]));

/** CLOSE_RESUME_REFUSED is the close status of a refused Resume. */
export const CLOSE_RESUME_REFUSED = 4008;

/**
 * Client is one session with the cluster, over one socket at a time.
 * Events (on(name, fn), which returns a function that removes fn):
 *   open      ()
 *   welcome   ({account, sessionEpoch, gateway, world, tickHz})   after a login or a resume
 *   you       ({master, pet})   after the World took them (new ids: its entities forgotten, World.you)
 *   batch     ({tick, appeared, updated, vanished})   after the World applied it
 *   terrain   (chunk)                                 after the World kept it
 *   error     ({code, message, inputSeq})             a server Error message
 *   pong      ({nonce, tick})
 *   protocolerror (Error)   a server message this client cannot decode; the socket is closed
 *   close     ({code, reason, wasClean})
 *   reconnecting ({code, reason})   the socket dropped without a Logout: resuming
 *   resumed   (welcome)      the session goes on over a new socket (its World starts afresh)
 *   reconnectfailed (Error)  no gateway took the credential (nor a new login)
 *
 * Resume: the server hands a resume credential after every Welcome. When
 * the socket drops without a Logout (a status not in NO_RESUME), the
 * client opens a socket to the next of its gateways (the one it used
 * last tried last: it may be dead) and sends Resume with the credential,
 * within the credential's window; on a refusal (4008), or after the
 * window, it logs in with a new token if it has a source of them, and
 * otherwise gives up (reconnectfailed).
 *
 * Options: WebSocket (the constructor, default globalThis.WebSocket),
 * keepAlive (milliseconds without sending after which a Ping is sent, so
 * the gateway's idle timeout never fires; default 10000, 0 for none),
 * gateways (the URLs to resume on; default the one connect was given),
 * token (an async function returning a new login token, for a login when a
 * resume is refused; default none), autoResume (default true),
 * resumeAttempts (sockets tried per drop, default 2 per gateway, at least
 * 2) and resumeBackoff (milliseconds between tries, default 250).
 */
export class Client {
  constructor(options = {}) {
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
    this.keepAlive = options.keepAlive ?? 10000;
    this.gateways = options.gateways ?? [];
    this.tokenSource = options.token ?? null;
    this.autoResume = options.autoResume ?? true;
    this.resumeAttempts = options.resumeAttempts ?? 0;
    this.resumeBackoff = options.resumeBackoff ?? 250;
    this.world = new World();
    this.welcome = null;
    this.ws = null;
    this.url = null;
    this.seq = 0;
    this.nonce = 0n;
    this.lastSent = 0;
    this.timer = null;
    this.closed = null; // {code, reason} once closed
    this.credential = null; // {credential, windowMs}: the last ResumeCredential
    this.credentialAt = 0; // Date.now() when it came
    this.ending = false; // logout or close was called: no resume
    this.recovering = false;
    this.handlers = new Map();
    this.pings = new Map(); // nonce → resolve
  }

  on(name, fn) {
    if (!this.handlers.has(name)) this.handlers.set(name, new Set());
    this.handlers.get(name).add(fn);
    return () => this.handlers.get(name).delete(fn);
  }

  emit(name, value) {
    for (const fn of this.handlers.get(name) ?? []) {
      try {
        fn(value);
      } catch (err) {
        console.error(`shardwise: ${name} handler`, err); // a handler's bug must not break the socket
      }
    }
  }

  /** connect opens the socket; resolves once it is open. */
  connect(url) {
    if (this.ws) throw new Error("shardwise: connect called twice");
    return this.open(url);
  }

  // open opens a socket to url and makes it the client's.
  open(url) {
    return new Promise((resolve, reject) => {
      const ws = new this.WebSocket(url, SUBPROTOCOL);
      ws.binaryType = "arraybuffer";
      this.ws = ws;
      this.url = url;
      ws.onopen = () => {
        this.lastSent = Date.now();
        clearInterval(this.timer);
        if (this.keepAlive > 0) {
          this.timer = setInterval(() => {
            if (this.ws === ws && ws.readyState === 1 && Date.now() - this.lastSent >= this.keepAlive) this.ping();
          }, Math.max(this.keepAlive / 4, 50));
        }
        this.emit("open");
        resolve();
      };
      ws.onmessage = (ev) => {
        if (this.ws === ws) this.receive(ev.data);
      };
      ws.onclose = (ev) => {
        if (this.ws !== ws) return;
        clearInterval(this.timer);
        this.closed = { code: ev.code, reason: ev.reason, wasClean: ev.wasClean };
        reject(new Error(`shardwise: socket closed (${ev.code} ${ev.reason})`));
        this.emit("close", this.closed);
        if (this.canResume(this.closed)) this.recover(this.closed);
      };
    });
  }

  // canResume says whether a drop is resumed on the client's own.
  canResume(closed) {
    return this.autoResume && !this.ending && !this.recovering && this.welcome !== null &&
      (this.credential !== null || this.tokenSource !== null) && !NO_RESUME.has(closed.code);
  }

  /**
   * login sends the token; resolves with Welcome, or rejects with the
   * close (a refused token closes the socket with 4001 and the reason).
   */
  login(token) {
    return this.start({ login: { token } }, "login");
  }

  /**
   * resume sends a resume credential as the socket's first message (in
   * place of login); resolves with Welcome, or rejects with the close
   * (4008 GATEWAY.RESUME_REFUSED: log in with a new token).
   */
  resume(credential) {
    return this.start({ resume: { credential } }, "resume");
  }

  start(m, what) {
    return new Promise((resolve, reject) => {
      const offs = [];
      const done = () => offs.forEach((off) => off());
      offs.push(this.on("welcome", (w) => (done(), resolve(w))));
      offs.push(this.on("close", (c) => (done(), reject(Object.assign(new Error(`shardwise: ${what} failed (${c.code} ${c.reason})`), c)))));
      this.send(m);
    });
  }

  // recover resumes the session after a drop: the credential on the next
  // gateways in turn (the last one used tried last), then, if it is
  // refused or its window has passed, a login with a new token.
  async recover(closed) {
    this.recovering = true;
    this.emit("reconnecting", { code: closed.code, reason: closed.reason });
    const urls = this.gateways.length > 0 ? this.gateways : [this.url];
    let at = Math.max(urls.indexOf(this.url), 0);
    let cred = this.credential;
    const until = this.credentialAt + (cred?.windowMs ?? 0);
    const attempts = Math.max(this.resumeAttempts || 2 * urls.length, 2);
    let last = null;
    try {
      for (let i = 0; i < attempts; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, this.resumeBackoff));
        at = (at + 1) % urls.length;
        if (cred && Date.now() >= until) cred = null;
        if (!cred && !this.tokenSource) break;
        this.world = new World(); // the new session's view starts empty: every entity appears again
        this.welcome = null;
        try {
          await this.open(urls[at]);
          const w = cred ? await this.resume(cred.credential) : await this.login(await this.tokenSource());
          this.emit("resumed", w);
          return;
        } catch (err) {
          last = err;
          if (err.code === CLOSE_RESUME_REFUSED) cred = null; // spent, superseded or expired: log in
          else if (err.code === 4002 || err.code === 4001) break; // another login took over, or no token is good
        }
      }
      this.emit("reconnectfailed", last ?? new Error("shardwise: no resume credential and no token source"));
    } finally {
      this.recovering = false;
    }
  }

  send(m) {
    if (!this.ws || this.ws.readyState !== 1) throw new Error("shardwise: the socket is not open");
    this.ws.send(encodeClientMessage(m));
    this.lastSent = Date.now();
  }

  input(entity, kind, fields = {}) {
    const seq = ++this.seq >>> 0;
    this.send({ input: { seq, entity: toId(entity), kind, ...fields } });
    return seq;
  }

  /** move asks entity (the master or pet) to walk to (x, y) metres; returns the input's seq. */
  move(entity, x, y) {
    return this.input(entity, InputKind.MOVE, { point: { x, y } });
  }

  /** attack asks entity to attack target; returns the input's seq. */
  attack(entity, target) {
    return this.input(entity, InputKind.ATTACK, { target: toId(target) });
  }

  /** mark asks the master to place a marker of type (0–255; 0 removes) at (x, y); returns the input's seq. */
  mark(entity, x, y, type) {
    return this.input(entity, InputKind.MARK, { point: { x, y }, target: BigInt(type) });
  }

  /** stop asks entity to stop what it is doing; returns the input's seq. */
  stop(entity) {
    return this.input(entity, InputKind.STOP);
  }

  /** ping sends a Ping; resolves with its Pong. */
  ping() {
    const nonce = ++this.nonce;
    const p = new Promise((resolve) => this.pings.set(nonce, resolve));
    this.send({ ping: { nonce } });
    return p;
  }

  /** logout ends the session cleanly; the server closes with 1000. */
  logout() {
    this.ending = true;
    this.send({ logout: {} });
  }

  /** close closes the socket from this side, and the session with it (no resume). */
  close(code = 1000, reason = "") {
    this.ending = true;
    if (this.ws && this.ws.readyState < 2) this.ws.close(code, reason);
  }

  receive(data) {
    if (!(data instanceof ArrayBuffer)) {
      this.fail(new ProtoError("a text message: the protocol sends binary messages only"));
      return;
    }
    let msg;
    try {
      msg = decodeServerMessage(new Uint8Array(data));
      this.dispatch(msg);
    } catch (err) {
      if (err instanceof ProtoError || err instanceof FrameError) {
        this.fail(err);
        return;
      }
      throw err;
    }
  }

  dispatch({ kind, value }) {
    switch (kind) {
      case "welcome":
        this.welcome = value;
        this.world.geometry = value.world;
        this.world.tickHz = value.tickHz;
        this.emit("welcome", value);
        return;
      case "you":
        this.world.you(value.master, value.pet);
        this.emit("you", value);
        return;
      case "batch":
        this.emit("batch", this.world.applyBatch(value.tick, value.frames, now()));
        return;
      case "terrain":
        this.emit("terrain", this.world.applyTerrain(value.chunk));
        return;
      case "error":
        this.emit("error", value);
        return;
      case "resumeCredential":
        this.credential = value;
        this.credentialAt = Date.now();
        return;
      case "pong": {
        const resolve = this.pings.get(value.nonce);
        this.pings.delete(value.nonce);
        if (resolve) resolve(value);
        this.emit("pong", value);
        return;
      }
    }
    // A body this client does not know (a newer server's): ignored.
  }

  fail(err) {
    this.emit("protocolerror", err);
    this.close(CLOSE_MALFORMED, "CLIENT.MALFORMED");
  }
}
