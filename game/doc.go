// Package game is the reference game: a small, deterministic world that
// the demo, the tests and the benchmarks run. It is a zone module
// (zone.Module), written only on the public APIs of zone, ecs, interest,
// outbox and torus, the way a user's game would be: NewModule gives the
// module for any runtime, New runs it alone on a runtime that owns the
// whole world.
//
// What it has:
//   - players: a master (a bot walking paths around its home) and a pet
//     that follows it and heals it; accounts are grouped in parties;
//   - dens, one per spawner cell (a column, chosen by a hash of the seed),
//     created when residency materialises the column and torn down when it
//     dematerialises; a den stocks mobs while a player is near;
//   - mobs that wander around their den, notice players with wrap-aware
//     area queries, chase and attack them, and keep a damage table
//     (Threat): they chase whoever hurt them most, and every attacker in it
//     is credited with the kill;
//   - damage, healing and experience as intents addressed to the target,
//     applied by the target's own system on the next tick: no system writes
//     another entity's health or experience (so the code keeps working when
//     the target lives on another node);
//   - with an economy (Config.Economy: econ's client, or in-process
//     economy nodes), money and goods: loot paid to a mob's killer, shops
//     at the dens' keepers, trades across borders as escrow movements; every
//     change is a movement on the economy node owning its scope, recorded
//     off the tick by the game's own workers (econ.go, shop.go, trade.go),
//     and each player sees its own purse (owner only); a trade whose node
//     dies is decided by the economy within its escrow bound, and a trade
//     resumed from an older checkpoint finishes or learns that decision;
//   - death with a vanish (reason death), paths and speeds sent to clients,
//     and the position itself resent only every 8th movement step.
//
// It owns the game's components (each registered with its wire type,
// audience and handoff codec), its systems, and its own indices (account →
// master, column → den, the player grid). The runtime owns the rest: the
// world, positions and owners, the per-tick pipeline (reindex, views,
// residency, visibility, outbox flush), entity ids and intent delivery. It
// does not own sockets: a Sink per account (an account.ID, the one account
// type from the login token on) receives the batches.
//
// Across nodes: perception finds entities by their look (Visual), so a
// simulation ghost of another node's player or mob is noticed, chased and
// hit like a local one; damage, healing and experience addressed to a
// ghost travel as intents to its owner and are applied there, once, so a
// mob fought from two nodes keeps one damage table on its owner, its
// aggro holds across the border, and the kill credit reaches each
// attacker's master on its own node (a pet's credit goes on to its
// master where the pet lives).
//
// On a runtime that owns only part of the world, Setup logs in only the
// players whose home lies in its regions, and dens are created only for
// columns of its regions (the runtime calls the column hooks for no
// other), each with the id its column derives (zone.DerivedID), so every
// node names a den the same.
//
// Invariants:
//   - Same Config (seed included) and the same boot reading of its Clock →
//     same entity ids, same batches, byte for byte. Simulated time is
//     ticks; the runtime mints ids on a clock it moves to boot + tick ×
//     interval, so a node restarted with the same node part mints none of
//     its earlier ids (a den's id is its column's, the same in every run).
//     Another boot time shifts every minted id by the same amount and
//     changes nothing else: staggering reads zone.Runtime.Phase, an id's
//     offset from the boot, not the id. No map order reaches output.
//   - Every distance, area query and spawner cell key goes through torus,
//     so the game behaves the same across the seam as anywhere else.
//   - Owner-only components (experience) reach only the owning account.
//   - Every system's query is built with the runtime's constructors
//     (zone.Query2 … zone.Query4), which exclude the Ghost and Frozen
//     markers themselves, so a ghost is never written here and a handoff
//     can take an entity out of the simulation without touching the
//     systems.
//   - No component holds a tick number: cooldowns are ticks still to wait
//     (Cooldown), counted down by the entity's own system, so an entity's
//     components mean the same on a node whose tick counter differs.
package game
