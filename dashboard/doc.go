// Package dashboard is a live web page of a shardwise cluster: a map of
// the torus with its regions, bands, entities and handoffs, and the
// numbers of every zone and economy node, fed by the processes that run
// the nodes: package demo's whole-cluster run (every node), or one zone
// node's process ("shardwise zone --dashboard": that node's view).
//
// What it owns:
//   - Collector (NewCollector): takes each zone node's tick reports
//     (Zone, from zonehost.HostConfig.OnTick, on the runtime's goroutine), the
//     economy nodes' stats (Econ, econ.Node.Stats pushed about once a
//     second) and announced events (Event), and answers Snapshot, the
//     JSON-able state the page draws. Every report keeps its numbers and
//     its tick time (tick p50/p99 over CollectorConfig.Window); once per
//     SampleEvery (250 ms) a node's simulated entities are sampled (id,
//     position, kind by CollectorConfig.Kinds: game.KindOf for the
//     reference game), with the region table it holds and its link
//     message counters (zone.Runtime.Progress; the link's bytes are not
//     reported to the runtime, so the page shows messages).
//   - Handoffs seen, not told: an entity in one node's sample and in a
//     later sample of another node has changed hands, recorded with both
//     nodes, where the new owner's sample found it and when, and counted
//     per node; the page flashes each for a few seconds.
//   - Regions changing owner: each newer table a node's sample holds is
//     compared with the one before, and every region whose owner changed
//     (a region move, a failover) is kept as a RegionChange for
//     KeepHandoffs; NodeDown declares a node dead (package demo's killed
//     zone node) at once, where Stale only says it stopped reporting.
//   - Server (Listen): Handler on its own listener, with Close ending the
//     open streams first; what "shardwise zone --dashboard" serves.
//   - Handler: the page at / (static/: index.html, dashboard.js, map.js,
//     dashboard.css; ES modules and a canvas, embedded, no build step, no
//     CDN), /snapshot.json, the stream at /events (Server-Sent Events, a
//     "snapshot" event per change, every HandlerConfig.Every at most) and,
//     with HandlerConfig.Play, /play: a redirect to a gateway's browser
//     client (package webclient) logged in with a fresh token (PlayURL
//     puts the token in the URL's fragment, where webclient's page reads
//     it).
//   - The page: regions coloured by owner with a legend (a node down
//     struck through, its regions hatched dark until a table gives them
//     to another node, each region that changed owner outlined in its new
//     owner's colour and labelled from → to for a few seconds), the ghost and
//     interaction bands (translucent white) inside every border between
//     two owners and the handoff margin dashed, entities as marks by kind
//     sized for the zoom (players ringed discs, pets small discs, mobs
//     diamonds, dens hollow squares), handoffs flashing, zoom (wheel) and
//     pan (drag) over a wrapping torus drawn as tiled copies. The view
//     follows the action: fitted to the players', pets' and mobs' extent
//     on the torus (at least 300 m and both ghost bands of a border
//     across) and re-fitted gently until the user zooms or pans; a double
//     click shows the whole world, the follow button the action again.
//     Per zone node tick p50/p99, entities, render and simulation ghosts,
//     link messages a second in and out, clients, handoffs; per economy
//     node its state, open sessions, movements a second, netting ratio,
//     orphans swept; the events; the play view. /?still draws one
//     snapshot as of its time with no stream (for screenshots:
//     scripts/dashboard-screenshot writes docs/dashboard.png).
//     window.dashboard.state() and positions() are a read-only hook for
//     tests and the console (state() counts the dead regions and the
//     changes drawn).
//
// What it does not own: running the nodes, the numbers' meaning (zone's
// HostReport, econ's Stats), the browser client (webclient) or the login
// tokens (the caller's Play mints them).
//
// Invariants:
//  1. Zone reads the runtime only during the call, on the runtime's
//     goroutine, and never keeps it; the entity walk runs off the
//     collector's lock, so a node's tick waits on no other node.
//  2. A sample holds only entities the node simulates (not frozen in a
//     handoff, not ghosts): no entity is in two nodes' samples of one
//     moment, so a handoff is never seen where none happened; one that
//     goes and comes back between two samples is not seen.
//  3. A Snapshot is a copy: the caller may keep and encode it while the
//     collector goes on.
//  4. Every stream the Handler serves ends with its request; the Handler
//     starts no goroutine of its own.
package dashboard
