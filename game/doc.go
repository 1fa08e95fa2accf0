// Package game is the reference game: a small, deterministic world that
// the demo, the tests and the benchmarks run, written only on the public
// APIs of ecs, interest, outbox, torus and entityid, the way a user's game
// would be.
//
// What it has:
//   - players: a master (a bot walking paths around its home) and a pet
//     that follows it and heals it; accounts are grouped in parties;
//   - dens, one per spawner cell (a column, chosen by a hash of the seed),
//     created when residency materialises the column and torn down when it
//     dematerialises; a den stocks mobs while a player is near;
//   - mobs that wander around their den, notice players with wrap-aware
//     area queries, chase and attack them;
//   - damage, healing and experience as intents addressed to the target,
//     applied by the target's own system on the next tick: no system writes
//     another entity's health or experience (so the code keeps working when
//     the target lives on another node);
//   - death with a vanish (reason death), paths and speeds sent to clients,
//     and the position itself resent only every 8th movement step.
//
// It owns the game's components, systems and the per-tick output pipeline
// (reindex moved entities, keep every player's 11 × 11 view, commit
// residency, fold visibility into the outbox, flush one batch per
// subscriber). It does not own sockets: a Sink per account (an
// account.ID, the one account type from the login token on) receives the
// batches.
//
// Invariants:
//   - Same Config (seed included) and the same boot reading of its Clock →
//     same entity ids, same batches, byte for byte. Simulated time is
//     ticks; ids come from an entityid.Generator on a clock the game moves
//     to boot + tick × interval, so a node restarted with the same node
//     part mints none of its earlier ids. Another boot time shifts every id
//     by the same amount and changes nothing else: staggering reads an
//     id's offset from the boot, not the id. No map order reaches output.
//   - Every distance, area query and spawner cell key goes through torus,
//     so the game behaves the same across the seam as anywhere else.
//   - Owner-only components (experience) reach only the owning account.
//   - Every system's query excludes the Frozen marker, so a handoff can
//     take an entity out of the simulation without touching the systems.
//   - No component holds a tick number: cooldowns are ticks still to wait
//     (Cooldown), counted down by the entity's own system, so an entity's
//     components mean the same on a node whose tick counter differs.
package game
