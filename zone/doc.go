// Package zone is the zone node runtime: it hosts a game (a Module) on one
// node's share of a torus world, runs that world together with the other
// zone nodes through a transport port, simulates the regions its
// Territory gives it (the region table, fenced by the lease: package
// zone/zonecoord's Ownership in a hosted node), and hands
// entities over to the node whose region they walk into (handoff.go; on by
// default, Config.NoHandoff turns it off), and serves as the gateway of
// the clients that connect to it (players.go, terrain.go; the sockets are
// package gateway's, handed to the runtime by package zone/zonegate).
//
// What it owns:
//   - The Runtime (New): the ecs world, entity ids (minted from the wall
//     clock at boot, or derived from a key, the same on every node:
//     DerivedID), the built-in components (Position, Owner, and the Ghost
//     and Frozen markers every module query excludes), intent
//     delivery to the target's own module code (Send, OnIntent), and the
//     tick-end pipeline: reindex moved entities, keep each account's view
//     on its viewer entity, commit residency (column hooks fire only for
//     regions the node owns), fold visibility into the outbox, flush one
//     batch per subscriber.
//   - The module contract: Register declares a component with its wire
//     type, audience (Public, OwnerOnly, OwnerAndParty or a function),
//     payload encoder and decoder, and its handoff codec or its mark that it
//     is not handed over (Local); one with neither is a boot error
//     (ZONE.NO_HANDOFF_CODEC), so a new component cannot be forgotten by
//     the handoff. Query1 … Query4 build a system's queries over the
//     entities the node simulates: the runtime adds the exclusion of
//     ghosts and frozen entities itself, so a system cannot write an
//     entity another node simulates by forgetting a term.
//   - The protocol's waits (Config.Timers), counted in ticks, with their
//     relations (the handoff timeout and the held vanish within the table
//     grace, the grace within the went record, the fence hold at least
//     the held vanish) checked at New.
//   - The transport port (transport.go): Transport, what the runtime
//     sends through (an ordered, reliable control stream: Send; a lossy
//     replication stream: Replicate; neither blocks), and Arrivals, what
//     the transport delivers into (queued for the next Step).
//     zone/zonelink's LinkTransport is the port over the node link;
//     zone/zonesim's Network is an in-memory one where a
//     test decides every delivery from a seed and runs the whole cluster
//     on one goroutine in virtual ticks.
//   - Node-level chunk subscription (Config.Transport): the node subscribes to
//     the foreign chunks its clients hold and the foreign chunks within the
//     interaction band of its regions, batched per peer and tick on the
//     control stream, from every node that may simulate an entity standing
//     there (the chunk's owner and the owners of regions within the handoff
//     margin: pull, see docs/decisions.md). The simulating node keys each
//     peer as one interest.Node subscriber, answers a subscribe with a
//     snapshot of the chunk, and sends each public update once per
//     subscribed node: one replication entry per entity per tick, stamped
//     with the entity's epoch and the tick's sequence, after a fence entry.
//   - Render ghosts: the replica store, fed by those batches, indexed in
//     the node's own visibility, so local clients see foreign entities
//     through the same outbox (a ghost's frames are re-sent byte for byte
//     as its owner encoded them). A gap in a peer's batch sequence
//     resubscribes every chunk held from it (Resync: a snapshot each). A
//     vanish that says a ghost walked into a chunk this node holds but
//     does not yet receive from the sender (its subscription in flight,
//     or a re-plan after a table change still to come) is held until the
//     sender's snapshot of that chunk, at most 20 ticks, so no client
//     sees the ghost blink. Likewise a ghost that its sender's snapshot
//     of its chunk leaves out stays while the node awaits the sender's
//     snapshot of a neighbouring chunk it holds (at most 20 ticks): after
//     a handoff the new owner did not yet count this node as an observer
//     and may not have told it that the entity walked on into that
//     chunk; or while a gap in the sender's batches is resynced (the lost
//     batches may have moved it into a neighbouring chunk). A node that
//     adopts a handed-over entity sends its vanish to the peers that hold
//     the chunk of the handoff but not the one it walked into before its
//     first flush: their ghost came from the old owner, which says
//     nothing of a handoff. The ghosts of a chunk the node stops holding
//     altogether are parked, unseen, for 8 ticks rather than dropped: the
//     sender may still send a delta as one walks into a chunk the node
//     receives. The ghosts of a peer whose lease ended are held at its
//     fence (fencehold.go), standing as they were, until the standby's
//     adoption reaches this node (see the states below).
//   - Simulation ghosts: a render ghost standing in the interaction band is
//     also a real entity with the Ghost marker and its decoded public
//     components; only the runtime writes it.
//   - Routing by account: each node announces the accounts attached to it
//     (Attach: the client's node; Routes); owner-only and party frames for an account routed
//     elsewhere are forwarded already encoded, one message per peer per
//     tick whatever the number of accounts, and delivered to the account's
//     local sink there; an account routed nowhere is dropped and counted.
//   - Intents addressed to a ghost go to the node that sends it and are
//     applied there, once. Each node confirms to its peers the intents it
//     took from them (wire.IntentsAck); an intent a node cannot deliver is
//     dropped and counted by reason (ClusterStats.IntentsDropped and the
//     fields after it; intentfate.go): those sent to a peer that died
//     before confirming them (it may have applied some) at its fence, and
//     none is sent again. One whose route leads to a peer already fenced
//     (never sent there) waits for the standby's adoption and goes to the
//     adopter.
//   - The world side of the gateway role, which is cluster protocol
//     (Sessions, with the module's Players; the runtime talks to a client
//     and its gateway through its own ports, Session and Gateway, and
//     imports neither the gateway nor its WebSocket stack): a login
//     asks every live node for the account's player (KindPlayer takeover);
//     the older session's gateway or the node that simulates the master
//     hands it over, whatever became of the gateway that brought it in;
//     only when none has it, and no logout's save of it is still on its
//     way to Config.WorldStore (the save fence), is the record loaded and
//     the player brought in on the owner of its position (ids minted by
//     the gateway). One player per account: a login's takeover reaching a
//     node before an older session's join there leaves a mark, and that
//     join brings nothing in. The account's view follows the master's
//     ghost (a view hint until it arrives); inputs, logouts and takeovers
//     are reserved intents (FirstReservedIntent and up) carrying the
//     session epoch, fenced by Owner.Session; the simulating node saves
//     players every SaveEvery and at logout, on its own goroutine; each
//     session gets one batch per tick, local and forwarded frames
//     together.
//   - The ground (terrain.go): columns' base from Config.WorldSeed, their
//     edits from the world store, sent to each client as its view reaches
//     them and again when edited (EditTerrain; KindTerrain tells the other
//     nodes).
//   - Failover planning (failover.go): a region's standby, derived from
//     the live zone members by rendezvous (Standby), and the table that
//     gives a dead node's regions to their standbys (PlanFailover), both
//     pure; zone/zonecoord's RunFailover writes that table.
//   - Replicated checkpoints (checkpoint.go): every Timers.CheckpointEvery
//     ticks (1 s) a node streams the state of the entities it holds in
//     each region, in the handoff codec, to the region's Standby on the
//     ordered control stream (KindCheckpoint: a snapshot, then numbered
//     deltas of the new, changed and gone); the standby keeps one record
//     per entity, passively (not in the world: nothing simulates or shows
//     it), fenced by the sender's lease and the held table. A node that
//     holds a table giving a dead node's region away adopts that node's
//     records of it: it asks every live peer which of them it holds
//     (KindAdoptQuery, answered only once the peer refuses the dead
//     node), creates the rest under the same ids, as a handoff's target
//     does, at the checkpointed epoch + 4, and sets up the region's columns
//     after. So the dead node's entities come back within the lease TTL
//     plus a few ticks, each at most a checkpoint interval behind.
//   - The fence on messages: every message carries the sender's node
//     number, lease and table version; Config.Accept refuses a sender
//     whose lease is not live. A fenced node (Fenced) steps and sends
//     nothing.
//   - Not the process around it: package zone/zonehost's Host runs one
//     node as its own process (the runtime, its link, its coord
//     registration, metrics, the gateway's sockets); package
//     zone/zonecoord's Ownership (Join) is the Territory a hosted node
//     runs on, and its RunFailover the controller every Host runs.
//     Package zone/zonegate adapts the runtime's Sessions to a gateway
//     (zonegate.World) and a gateway to its Gateway port
//     (zonegate.SetGateway).
//
// It does not own the table's storage, versions or compare-and-set (coord),
// its geometry and derivation rules (cells), the link's connections and
// certificates (link: the host adds the peers), the wire encodings
// (zone/internal/wire), or the handoff's byte format (package handoff).
//
// Runtime invariants:
//  1. Every entity is simulated (a real, non-Ghost, non-Frozen entity) on
//     at most one node at every tick, the one holding it at the highest
//     epoch (Epoch); a node creates entities only where its held table
//     gives it the region (modules check Table().OwnerOf), and the column
//     hooks fire only for its own columns, so a den has one owner. The
//     nodes apply a table at different moments, and a den's id is its
//     column's on all of them: so a region a node gains (by a new table,
//     at its first table, or with a new grid) has its columns set up only
//     once every live peer (Config.LivePeers) has shown, in the fence of a
//     message under its current lease, that its columns follow the same
//     table version, so it has torn down what that table takes from it
//     (game/columnfence_test.go). An entity that walks a margin past its
//     node's regions (checked at every tick while it stands in another
//     node's region), or stands in a region a new table gives another
//     node (whatever the margin), is handed over (handoff.go); while a
//     handoff waits for its answer the source holds it frozen.
//  2. A node never sends a ghost on to another node: node subscribers are
//     told only of entities the node simulates.
//  3. A client sees the same as on one node, within 2 ticks: messages sent
//     in tick T are applied at the start of the receiver's tick T+1; a
//     subscription takes one round trip (test: TestClusterIsOneNodeAsAClientSeesIt);
//     within 4 with handoffs (TestClusterWithHandoffsIsOneNode).
//  4. All state of the runtime is owned by the goroutine that calls Step;
//     the transport (Config.Transport: zone/zonelink's over the link, or
//     zone/zonesim's) only queues what arrives into an inbox drained at the
//     start of Step (Arrivals). The tick loop and every protocol decision
//     start no goroutine and read no wall clock: they count ticks, and
//     send through the transport, which never blocks. The goroutines a
//     LinkTransport starts (one control-message sender per peer) are its
//     own, joined by its Close, which Runtime.Close calls (from the
//     goroutine that steps it). The player saver and the ground's loader
//     are host-side I/O goroutines, outside the protocol (docs/decisions.md).
//
// Between two ticks, on every node (Runtime.CheckInvariants checks 5–14;
// zonetest and zonesim run it after every Step, and check 1 across the
// cluster):
//  5. An entity is Frozen exactly while a handoff of it is in flight: it
//     is outgoing (its source waits for the answer) or adopted and not
//     yet thawed (its target waits for the source's last tick to pass).
//     A known hole: the module may destroy an outgoing entity (a den
//     whose region a new table moved is sent and, later in the same tick
//     end, torn down by its column's Dematerialise), and the handoff then
//     waits for its answer about an entity that is gone here while its
//     target adopts it (docs/decisions.md, issue 28).
//  6. The render ghosts are exactly the entities with a source (the peer
//     that sends them), and none of them is a local entity. A parked
//     ghost, and a ghost whose vanish is held, is a render ghost of the
//     peer it was parked or held from.
//  7. A simulation ghost (the Ghost marker) is a render ghost standing in
//     the interaction band.
//  8. A simulated entity standing in another node's region is checked at
//     every tick; one past the margin (or in a region a new table moved)
//     is queued to go, waits for a retry after a refusal, or its target
//     has lost its lease.
//  9. A standby's stream of records for a region started from the node
//     its held table (or the table before it: a move in flight) named as
//     the region's owner; it goes on only under that node's lease. (A
//     stream from a sender the table did not name yet is held back, no
//     standby's records, until the next table names the sender.)
//  10. A record a standby holds of an entity it holds itself is never at
//     a higher epoch than its own copy, simulated or adopted: records are
//     older than what lives. (A copy frozen in a handoff it offered is
//     not held to it: while its ack is held up the target may hand the
//     entity on, and the next taker's record come here; only the target
//     raises the epoch past the offer, by taking it, and then answers
//     the abort with Ack.)
//  11. A ghost held at a fence is a render ghost of the peer it was held
//     from, that peer is fenced here (so nothing more of it is taken),
//     and Timers.FenceHold has not passed since the fence; every render
//     ghost of a fenced peer is held at its fence.
//  12. An entity's record (below) agrees with the world: simulated is a
//     local entity without the Frozen marker; adopted a local entity;
//     outgoing one with its handoff (or, destroyed since it was sent,
//     the hole of 5); gone is neither frozen nor a render ghost.
//  13. The record table is well formed: its indexes (outgoing, adopted,
//     outside, parked, held, fence-held, went) hold exactly the records
//     that say so, a record holds only its phase's fields, and none is
//     empty (a simulated entity at the first epoch with nothing pending
//     has no record; a gone one without a went record neither): the
//     table is bounded by the entities and ghosts held and the went
//     records.
//  14. Every transition found its entity in a phase it leaves.
//     A transition that does not is refused (the record stays as it
//     was), counted (ClusterStats.PhaseErrors) and logged; the check
//     reports the first as breaches, so the tests and the simulation
//     fail on it (docs/decisions.md).
//
// One record per entity (entity.go): what the protocol knows of an
// entity on this node is one record in one table, with a phase, changed
// only by the named transitions, each checking the phase it leaves:
//
//	phase      on this node                          ECS                  leaves by
//	(none)     a local entity at the first epoch     simulated            a local transition → simulated (or send
//	           with nothing pending, or unknown here                      → outgoing); becomeGhost → ghost;
//	                                                                      freezeAdopted → adopted
//	simulated  a local entity: epoch, retry wait,    simulated            send → outgoing; forgetLocal → gone
//	           outside/rehomed flags
//	outgoing   frozen, its handoff in flight         Frozen               handedOver → gone (+ becomeGhost);
//	                                                                      giveUp → simulated at e+2
//	adopted    taken from a handoff, frozen until    Frozen               thawDue → simulated
//	           the source's last tick has passed
//	ghost      a render ghost from its source;       Ghost while in the   vanish → gone (+ went);
//	           parked (park/unpark), held            interaction band     takeOver → gone (adopt, restore);
//	           (holdVanishOf/unhold) and held at                          dropGhost → gone (ClaimID)
//	           its source's fence (holdAtFence/
//	           endFenceHold) on the side
//	gone       only a went record: intents follow    none                 its went record expires → (none);
//	                                                                      becomeGhost → ghost; freezeAdopted;
//	                                                                      restored; created (a module's entity)
//
// A simulation ghost is not a phase of its own: it is a render ghost
// standing in the band, and the Ghost marker says so (syncSimGhost; 7).
// A parked ghost, a held vanish and a fence hold are holds on a render
// ghost, not phases: a held and a parked one can stand on one ghost for
// a tick (a held ghost whose chunk this node stops holding), and each
// ends by itself; a vanish ends them all with the ghost. The went
// record rides on any phase: kept beside the ghost of an entity handed
// over, and beside a local entity recreated under its id. Per-tick
// scratch (parting, goneGhosts, wasGhost) is no entity state: filled in a
// tick, used by its flush, cleared (clearTick, clearVanishScratch).
//
// The traps of a handoff, each closed by a transition: a persistence
// snapshot is lossy, and a client message is not a copy of the entity,
// so send carries every component's handoff codec (handoffSnapshot; a
// component with neither a codec nor the Local mark is a boot error);
// World.destroy would tell every client the entity vanished, so
// handedOver is followed by an eviction (no vanish) and becomeGhost, the
// source keeping a render ghost in place; a second writer is what the
// Frozen marker of outgoing and adopted, and the epoch that send and
// giveUp raise, rule out (1).
//
// An entity's state on its standby, beside the phases above (the records
// are not entities: nothing simulates them, no ghost comes of them):
//
//	state      record on the standby          how it leaves
//	streamed   one per entity, newest wins    "gone" in a delta (handed on, destroyed); "moved" (walked into another
//	                                          region's stream): kept, claimed older, for 2 more checkpoints;
//	                                          the stream dropped (the standby changes; the owner moved the region
//	                                          and handed everything there over)
//	candidate  in an adoption round           a live peer answers that it holds the entity (or adopts it under a
//	                                          newer checkpoint), or this node takes it (a handoff, another round)
//	                                          at the record's epoch or later: dropped (none is made of a record
//	                                          whose entity this node simulates at a newer epoch as the round
//	                                          starts); every live peer has answered: adopted
//	adopted    a simulated entity, epoch e+4  (an entity like any other)
//
// A dead node's entity on the nodes that showed it, as a ghost, across the
// failover (fencehold.go; no client that sees it is sent a vanish unless
// it never comes back):
//
//	state      ghost here                          how it leaves
//	ghost      from the dead node, updated         its lease ends here (Config.Accept refuses it): held
//	held       as it stood, frozen; nothing more   a live node sends it at a higher epoch (the standby's adoption at
//	(fence)    is taken from the dead node         e+4, a live source taking back what it offered the dead node): that
//	                                               node's ghost, in place; this node adopts it: a local entity, in
//	                                               place; Timers.FenceHold passes, or no client or band here holds its
//	                                               chunk, or every simulator there sends the chunk without it after the
//	                                               failover table (an adopter once it adopted): vanishes (not there)
//
// The rule against two copies on failover: a peer answers the adoption
// query only once it refuses the dead node (its lease ended), so what it
// holds then is all it will ever hold of the dead node's (a transfer
// from the dead node is taken before the fence or never; a source that
// offered an entity to the dead node unfreezes it at the fence and
// answers that it holds it); the adopter creates only what no live peer
// holds, and between two adopters of one entity (it crossed between two
// of the dead node's regions) the newer checkpoint wins, on a tie the
// greater node name, which both compute alike. What a node takes (a
// handoff, before its ack; an adoption) is checkpointed at once, so an
// entity is in a standby's record from the moment its new owner
// simulates it. What can still be lost: every adopted entity's last
// checkpoint interval of simulation, and what a node cut from a standby
// sent it since the cut if it dies before the heal (zonesim's
// Config.Kill allows only that class; checkpoint.go lists the rarer
// ones); and the intents sent to the dead node that it never confirmed,
// counted where they were sent (ClusterStats.IntentsUnconfirmed; some
// may have been applied just before it died).
//
// Ownership invariants: package zone/zonecoord's doc.
//
// Failover timing: a node that is only cut off (a partition, a paused
// process), not dead, has stopped simulating before any standby starts
// its regions. With T the lease TTL (zonehost.HostConfig.TTL, whole seconds), s
// the send time of the node's last renewal that got through (coord renews
// every T/3), and ε the lateness of the node's timer plus one Step (a
// tick already running when the fence closes finishes; the next does not
// start: zonehost.Host's loop and Step both read the fence):
//
//	node stops        ≤ s + T − T/10 + ε    coord's fence deadline (coord, invariant 2)
//	etcd frees lease  ≥ s + T               the renewal's receipt + T; etcd checks expiry
//	                                        every 500 ms, so up to 0.5 s later
//	controller writes ≥ etcd frees + w      w: the member's deletion reaching the
//	                                        controller's watch, and the compare-and-set
//	standby starts    ≥ write + a + one tick  a: the table reaching the standby's watch;
//	                                        its regions run from its next Step
//
// so standby starts − node stops ≥ T/10 − ε + w + a + one tick > 0 while
// ε < T/10 (100 ms at T = 1 s: a tick of 50 ms, late by under 50 ms). The
// node's clock and etcd's may drift apart by less than the same tenth.
// Messages the cut node sent before it stopped and that arrive later are
// refused by their receivers (Config.Accept: its lease is no longer live).
// From a crash (no fence needed) the failover time is etcd's expiry, T
// less the part of a renewal interval that had passed (between 2T/3 and
// T after the crash), plus up to 0.5 s of etcd's expiry check, plus w, a
// and one tick: measured 1.1–1.7 s at T = 1 s, 1.7–2.3 s at 2 s and
// 4.0–5.0 s at 5 s with four processes (TestZoneFailoverSIGKILL, two runs
// of scripts/bench-failover at a load average near 18 on two cores:
// docs/bench/failover.md); and a cut node stopped 0.24–0.66 s before the
// table changed, at T = 1, 2 and 5 s, in network namespaces
// (TestZonePartitionStopsBeforeStandby).
package zone
