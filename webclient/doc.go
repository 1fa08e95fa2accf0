// Package webclient is a small JavaScript client of the client protocol
// (proto/client.proto, docs/protocol.md), embedded in the binary, and the
// http.Handler that serves it.
//
// What it owns: the files under static/, ES modules with no dependencies
// and no build step, which a browser loads as they are:
//   - proto.js: the protobuf wire reader and writer for exactly the
//     messages of client.proto (uint64 and fixed64 as BigInt; unknown
//     fields skipped by wire type).
//   - frames.js: the outbox batch decoder (appear with its burst,
//     component, vanish; outbox/wire.go), the reference game's component
//     decoders (position, path, speed, visual, health, exp;
//     game/components.go) and the terrain chunk decoder (terrain/doc.go).
//   - client.js: Client (connect, login, resume — on its own after a
//     socket drops without a logout, with the server's resume
//     credential, on the next of its gateways — events, move, attack,
//     stop, ping, logout) and World (the entities the client knows, its own
//     master and pet, the terrain it was sent, and where each has walked:
//     where(id, tick) animates from the last Position along the Path at
//     the Speed as docs/protocol.md "Animating" says, the same estimate
//     as sim's View.Where; tickAt(now) is the fractional tick between
//     batches by the clock). InputKind holds the input kinds the client
//     sends (move 1, attack 2, stop 3), in one place.
//   - view.js: the play view's drawing (View): the ground the client
//     was sent as a shaded heightmap (a tint by height over the range of
//     the ground held, lit by the slope, contour lines every 2 m; each
//     column's edges read its neighbours' samples so no seam shows), the
//     markers, the region grid (the client is told neither regions nor
//     owners: the documented grid of 8 km regions, ?region=METRES for
//     another edge), the entities where they have walked by now with
//     health bars, the player's own master and pet apart from the
//     others; and picking (the entity under a point).
//   - index.html and play.js: the play page (token, connect, the view
//     centred on the master, a one-line instruction, a panel with the
//     player's health, its pet's and its experience, names on hover, a
//     log in which Terrain messages are one counted line; click to move,
//     click a mob to attack it, wheel to zoom); opened at /#token=… (the
//     dashboard's play link) it logs in with that token at once and
//     takes it out of the address bar.
//
// What it does not own: the protocol (proto/client.proto and
// docs/protocol.md are the contract; the gateway is the server side), the
// game's meaning of an input kind (the game checks it), or a dashboard.
//
// Invariants:
//  1. The decoders are as strict as their Go counterparts: they accept
//     what the Go encoders write and refuse, with FrameError or
//     ProtoError and never another exception, what the Go decoders
//     refuse. The tests in this package run them in Chromium against
//     bytes the Go encoders produced.
//  2. World applies a batch whole or not at all: every frame and payload
//     is decoded before anything changes. A server message the client
//     cannot decode closes the socket with 4000 CLIENT.MALFORMED.
//  3. Handler serves every file with a fixed content type, never one
//     guessed from the host's MIME table: JavaScript as text/javascript,
//     or a browser would refuse the modules.
//  4. The package imports only the standard library; the JavaScript
//     imports nothing but its own modules.
//  5. World.where and sim's View.Where agree on the same frames (the
//     server resends a walker's Position only as a correction, so a page
//     that drew positions as sent would show walkers standing still);
//     TestPageAnimatesWalkersAsSimDoes checks every case of "Animating".
package webclient
