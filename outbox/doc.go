// Package outbox turns one tick of world changes into one batch per
// subscriber: it collects dirty components and appear/vanish events during
// the tick, and at Flush evaluates each component's audience, encodes each
// message once, and hands every subscriber's Sink a single batch.
//
// It owns the audience rules (PublicInRange, OwnerOnly, Accounts,
// OwnerAndParty), the batch wire format (length-prefixed frames: component,
// appear burst head, vanish; see wire.go) and its decoder. It does not own
// sockets or links (a Sink does), the entity store (an Encoder reads it),
// or who sees whom (World.AppendObserversOf, usually interest.Visibility).
//
// Invariants:
//
//  1. An OwnerOnly component reaches the entity's owner and nobody else; an
//     entity with no owner sends it to no one.
//  2. Each (entity, component) is encoded at most once per Flush, however
//     many recipients and appear bursts carry it; every recipient gets the
//     same immutable bytes. A vanish frame is encoded once per (entity,
//     reason), an appear head once per (entity, burst size).
//  3. Each subscriber's Sink is called at most once per Flush. Inside a
//     batch: vanishes, then appear bursts, then updates. A subscriber that
//     got an entity's appear burst this tick gets no separate update of it.
//  4. Audiences are evaluated at Flush, once per (entity, component).
//  5. Output order depends only on the order of calls, never on map order.
//
// A World that also implements IndexedWorld (interest.Visibility does)
// lets the flush resolve observers through dense subscriber indices; the
// batches are the same either way (the property test runs both).
//
// The caller's obligations: call MarkDirty, Appear/Vanish (or
// AddDeliveries with a Visibility drain) during or right after the tick,
// then Flush once, on the goroutine that owns the world. The package imports
// only the standard library, errcode and interest, and does no I/O itself.
package outbox
