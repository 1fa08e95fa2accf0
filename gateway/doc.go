// Package gateway is the gateway role of a zone node: the WebSocket
// endpoint players' clients connect to (any node; the one they reach is
// their gateway for the whole session), speaking the client protocol of
// proto/client.proto, documented in docs/protocol.md.
//
// What it owns:
//   - The socket's life: the WebSocket upgrade (subprotocol Subprotocol),
//     the login (the first message and only the first: an Ed25519 login
//     token checked by logintoken.Verifier, single use across the cluster
//     through the directory), the session in the directory with a new,
//     higher session epoch, Welcome, and the end: Logout, a close by
//     either side, displacement, shutdown.
//   - Resume credentials: after every Welcome the client is handed a
//     fresh one (ResumeCredential: the account, the session epoch and a
//     random secret whose SHA-256 the directory keeps with the session,
//     valid for Config.ResumeWindow after the session's last renewal).
//     A client whose socket dropped without a Logout sends it as its
//     first message (Resume) to any gateway of the cluster, the issuing
//     one dead or not: the directory spends it and issues the next epoch
//     in one compare-and-set (directory.Directory.Resume), and the
//     session goes on like a relogin, with no login token. A refusal is
//     4008 GATEWAY.RESUME_REFUSED; a Logout revokes the credential.
//   - Displacement: a second login of the same account displaces the
//     first — here at once; on another node when that node is told
//     (Gateway.Displaced: the zone runtime's takeover request, or a host's
//     Config.Displace) or, failing that, at the older session's next lease
//     renewal. Session.Superseded tells the World which Leave is a
//     displacement. The displaced socket is told why
//     (SESSION.DISPLACED) and closed; its teardown releases nothing the
//     newer session holds (the directory refuses the older epoch).
//   - The port's HTTP bounds (HTTPServer, Listener): a read timeout per
//     request and an idle timeout per keep-alive connection, which an
//     upgraded socket leaves behind, and a cap on the connections one
//     remote address holds open.
//   - Limits per connection (Limits): a maximum message size, a token
//     bucket over every client message (golang.org/x/time/rate, on the
//     injected clock), an idle timeout and a login timeout (checked by one
//     housekeeping goroutine on the injected clock), and slow-reader
//     protection: at most SendBudget bytes wait for a client, and a write
//     that takes longer than WriteTimeout (on the injected clock) cuts it.
//   - What a client may ask: an Input only for the player's own master or
//     pet (the ids the World named with Session.SetYou); anything else is
//     refused with GATEWAY.NOT_YOURS and reaches no one.
//   - The server messages: one Batch per tick holding the outbox frames
//     byte for byte as the simulating nodes encoded them (never
//     re-encoded: the writer copies them behind the header into one send
//     buffer, so a batch is one WebSocket frame and one write to the
//     socket), You, Terrain, Error, Pong.
//   - Its Prometheus collectors (Metrics).
//
// What it does not own: the world (the World port: the zone runtime,
// served by package zone/zonegate, brings the player in, routes batches
// to the Session, applies inputs on the node that simulates the entity,
// and fences them by the session epoch),
// the directory's storage (package directory), the token format (package
// logintoken), the frame format inside a batch (package outbox) and the
// chunk encoding (package terrain).
//
// Invariants:
//  1. A connection has at most one session, and the session is registered
//     in the directory before the client hears Welcome; an account has at
//     most one session on a gateway, the one with the highest epoch.
//  2. Every message the client sends passes the rate limit before it is
//     decoded; no byte sequence makes the decoder panic
//     (FuzzDecodeClient), and a malformed one closes the socket
//     (GATEWAY.MALFORMED) without reaching the World.
//  3. The bytes waiting for one client never exceed Limits.SendBudget:
//     the delivery that would pass it drops the backlog and cuts the
//     socket. Memory per connection is bounded by that, MaxMessage and the
//     WebSocket library's buffers.
//  4. World.Join is called once per session after Welcome is queued, and
//     World.Leave exactly once for every session Join was called for,
//     whatever ended it; Leave of a displaced session changes nothing the
//     newer one holds (the World's fence).
//  5. Session methods never block: they queue for the connection's writer
//     goroutine. Every connection has exactly two goroutines (its HTTP
//     handler, which reads, and the writer it starts and joins); Close
//     closes every socket and returns after all of them, and the
//     housekeeper, have returned. Close is idempotent.
package gateway
