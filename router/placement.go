package router

import (
	"github.com/shardwise/shardwise/hashring"
	"github.com/shardwise/shardwise/rendezvous"
)

// Placement answers which live nodes own a key. A Placement is immutable:
// the router builds a new one on every membership change and publishes it
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
type PlacementFunc func(members []Member) (Placement, error)

// RingPlacement places keys on a consistent-hash ring (package hashring)
// with each member's weight as its vnode count. A nil hash means
// hashring.SHA1, compatible with the TypeScript router.
//
// The ring is rebuilt from the live members in join order on every change,
// rather than patched in place. The result is the ring a freshly started
// process gets when it adds the same live nodes in the same order, which is
// what lets processes agree; it differs from an in-place patch only when a
// vnode point was salted against a node that has since left (a 32-bit
// collision, about one in 10⁵ for a few hundred points).
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

// RendezvousPlacement places keys by highest random weight (package
// rendezvous), compatible with economy-lab's scopeRouter when every node
// has the same weight (the default). A node's Vnodes becomes its weight, so
// a node with twice the vnodes gets about twice the keys, as on the ring.
// Owners beyond the leader are the next-highest scores. On an exact score
// tie the node that joined earlier wins.
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

// noPlacement is the placement of an empty router.
type noPlacement struct{}

func (noPlacement) Leader(string) (string, bool) { return "", false }
func (noPlacement) Owners(string, int) []string  { return nil }
