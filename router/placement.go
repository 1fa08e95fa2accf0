package router

import (
	"github.com/shardwise/shardwise/hashring"
	"github.com/shardwise/shardwise/rendezvous"
)

// Placement answers which live nodes own a key. A Placement is immutable:
// the router derives a new one on every membership change and publishes it
// together with the client table in one atomic store, so Route and Execute
// read both without a lock and never see one without the other.
type Placement interface {
	// Leader returns the owner of key; ok is false when there are no nodes.
	// It is on Execute's hot path and should not allocate.
	Leader(key string) (id string, ok bool)
	// Owners returns up to n distinct owners of key, leader first.
	Owners(key string, n int) []string
}

// Member is a live node as a placement sees it.
type Member struct {
	ID     string
	Weight int // the node's vnodes
}

// PlacementFunc builds the placement of a set of live nodes, given in the
// order they joined (a rejoining node goes last). It is called with at least
// one member, under the router's membership lock, so it must not block.
//
// When the placement it returns is an IncrementalPlacement, the router calls
// PlacementFunc only for the first node and derives every later placement
// with With and Without; otherwise it calls PlacementFunc on every change.
type PlacementFunc func(members []Member) (Placement, error)

// IncrementalPlacement is a Placement that derives the placement of one
// member more or one fewer in time proportional to that member's share,
// not to the whole membership. Both must return exactly what the
// PlacementFunc that built it returns for the resulting members in join
// order, so a router that saw many changes places keys like one that just
// started with the same live nodes.
type IncrementalPlacement interface {
	Placement
	// With returns the placement with m joined after every current member.
	With(m Member) (Placement, error)
	// Without returns the placement without member id, which is present
	// and not the only member.
	Without(id string) (Placement, error)
}

// appendOwners is implemented by placements that can list a key's owners
// into a caller's buffer; the multi-key calls use it to group keys without
// allocating per key.
type appendOwners interface {
	AppendOwners(dst []string, key string, n int) []string
}

// RingPlacement places keys on a consistent-hash ring (package hashring)
// with each member's weight as its vnode count. A nil hash means
// hashring.SHA1, compatible with the TypeScript router.
//
// It is incremental: a join adds the node's points to a copy of the ring
// that shares everything else, a leave removes them. The ring is always the
// one a freshly started process gets when it adds the same live nodes in
// join order (hashring.Ring.Without guarantees it even when a point was
// salted against the node that left), which is what lets processes agree.
func RingPlacement(hash hashring.HashFunc) PlacementFunc {
	return func(members []Member) (Placement, error) {
		ring := hashring.New(hash)
		for _, m := range members {
			if err := ring.Add(m.ID, m.Weight); err != nil {
				return nil, err
			}
		}
		return ringPlacement{ring}, nil
	}
}

type ringPlacement struct{ ring *hashring.Ring }

func (p ringPlacement) Leader(key string) (string, bool)  { return p.ring.Get(key) }
func (p ringPlacement) Owners(key string, n int) []string { return p.ring.GetN(key, n) }
func (p ringPlacement) AppendOwners(dst []string, key string, n int) []string {
	return p.ring.AppendN(dst, key, n)
}

func (p ringPlacement) With(m Member) (Placement, error) {
	ring := p.ring.Clone()
	if err := ring.Add(m.ID, m.Weight); err != nil {
		return nil, err
	}
	return ringPlacement{ring}, nil
}

func (p ringPlacement) Without(id string) (Placement, error) {
	return ringPlacement{p.ring.Without(id)}, nil
}

// RendezvousPlacement places keys by highest random weight (package
// rendezvous), compatible with economy-lab's scopeRouter when every node
// has the same weight (the default). A node's Vnodes becomes its weight, so
// a node with twice the vnodes gets about twice the keys, as on the ring.
// Owners beyond the leader are the next-highest scores. On an exact score
// tie the node that joined earlier wins. It is incremental: a change copies
// one 16-byte entry per node and hashes only the node that changed.
func RendezvousPlacement() PlacementFunc {
	return func(members []Member) (Placement, error) {
		nodes := make([]rendezvous.Weighted, len(members))
		for i, m := range members {
			nodes[i] = rendezvous.Weighted{Node: m.ID, Weight: float64(m.Weight)}
		}
		t, err := rendezvous.NewWeighted(nodes)
		if err != nil {
			return nil, err
		}
		return rendezvousPlacement{t}, nil
	}
}

type rendezvousPlacement struct{ t *rendezvous.Table }

func (p rendezvousPlacement) Leader(key string) (string, bool) {
	id := p.t.Owner(key)
	return id, id != ""
}
func (p rendezvousPlacement) Owners(key string, n int) []string { return p.t.TopN(key, n) }

func (p rendezvousPlacement) With(m Member) (Placement, error) {
	t, err := p.t.With(m.ID, float64(m.Weight))
	if err != nil {
		return nil, err
	}
	return rendezvousPlacement{t}, nil
}

func (p rendezvousPlacement) Without(id string) (Placement, error) {
	return rendezvousPlacement{p.t.Without(id)}, nil
}

// noPlacement is the placement of an empty router.
type noPlacement struct{}

func (noPlacement) Leader(string) (string, bool) { return "", false }
func (noPlacement) Owners(string, int) []string  { return nil }
