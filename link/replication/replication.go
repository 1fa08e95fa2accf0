// Package replication is the record the node link's replication stream
// carries: Entry, one replicated update about one entity.
//
// What it owns: the Entry type, nothing else. It imports nothing, so a
// package that produces or consumes entries (the zone runtime's protocol
// core, an in-memory network in a simulation) names them without
// importing the link and, through it, gRPC. Package link carries them
// (link.Entry is this type) and never reads Payload.
package replication

// Entry is one replicated update: opaque payload about one entity, stamped
// with the entity's ownership epoch and its per-entity sequence.
type Entry struct {
	Entity   uint64
	Epoch    uint64
	Sequence uint64
	Kind     uint32
	Payload  []byte
}
