// Package ecs is the entity-component world of one node: entities
// with typed component stores, queries with required and excluded terms,
// systems on a fixed-step tick, and a command queue for other goroutines.
//
// It owns entity existence (CreateEntity, Destroy, Evict), component
// storage, the moved and dirty logs, deferred structural changes, the
// system schedule and the tick. It does not own positions, chunks, interest,
// audiences or the wire: those layers read the logs and listen to the hooks.
// There is no global registry: component types are registered per World,
// with a name and free metadata, and Components enumerates them (the hook a
// handoff codec registry and its boot check need).
//
// Why the shape fits ghosts and handoff later:
//   - CreateEntity(id) takes the id, so a handoff target recreates an
//     entity under the id it had;
//   - Evict removes an entity without destroy listeners, so nobody sees a
//     vanish, while OnForget hooks keep indices clean;
//   - queries have negative terms (Without), so a Ghost or Frozen marker
//     takes an entity out of every system without touching the systems.
//
// Invariants:
//   - One goroutine owns a World: the one calling Run, or Step. Only Do,
//     Post, Close, QueuedCommands and Stats are safe from elsewhere;
//     commands run at the start of a tick, in arrival order.
//   - While the World is deferring (during a tick's systems, or inside any
//     iteration), adding a component an entity lacks, Remove, Destroy and
//     Evict are queued and applied in call order when deferral ends, so a
//     pointer handed to a callback stays valid for the whole callback.
//     Replacing an existing value, MarkDirty and MarkMoved are immediate;
//     CreateEntity is never deferred.
//   - Destroy runs the destroy listeners, then removes the entity from
//     every store, then runs the forget hooks. Evict skips the listeners.
//   - Simulated time is ticks × interval; no system reads a clock, so a run
//     is reproducible. Run runs at most MaxCatchUpSteps ticks after a stall
//     and counts the dropped rest.
package ecs
