package hashring

import (
	"errors"
	"slices"
	"strconv"
)

// naiveRing is the deliberately simple model the Ring is checked against:
// points in plain per-node lists, every lookup a linear scan over all of
// them, no snapshot, no index.
type naiveRing struct {
	hash  HashFunc
	nodes []naiveNode
}

type naiveNode struct {
	id     string
	points []uint32
}

var errModelVNodes = errors.New("model: bad vnodes")
var errModelFull = errors.New("model: no free point")

func (m *naiveRing) taken(p uint32, extra []uint32) bool {
	for _, n := range m.nodes {
		if slices.Contains(n.points, p) {
			return true
		}
	}
	return slices.Contains(extra, p)
}

func (m *naiveRing) add(id string, vnodes int) error {
	if vnodes < 1 || vnodes > MaxVNodes {
		return errModelVNodes
	}
	for _, n := range m.nodes {
		if n.id == id {
			return nil
		}
	}
	var pts []uint32
	for i := 0; i < vnodes; i++ {
		base := id + "-" + strconv.Itoa(i)
		p := m.hash(base)
		salt := 0
		for m.taken(p, pts) {
			salt++
			if salt > maxSalt {
				return errModelFull
			}
			p = m.hash(base + "#" + strconv.Itoa(salt))
		}
		pts = append(pts, p)
	}
	m.nodes = append(m.nodes, naiveNode{id: id, points: pts})
	return nil
}

// remove drops id's points and moves no other, like the TypeScript ring.
func (m *naiveRing) remove(id string) {
	m.nodes = slices.DeleteFunc(m.nodes, func(n naiveNode) bool { return n.id == id })
}

// without rebuilds the model from the remaining nodes in order, which is
// what Ring.Without promises to equal.
func (m *naiveRing) without(id string) {
	old := m.nodes
	m.nodes = nil
	for _, n := range old {
		if n.id == id {
			continue
		}
		if err := m.add(n.id, len(n.points)); err != nil {
			panic("model: a rebuild cannot run out of points: " + err.Error())
		}
	}
}

func (m *naiveRing) ids() []string {
	out := []string{}
	for _, n := range m.nodes {
		out = append(out, n.id)
	}
	return out
}

type ownedPoint struct {
	p  uint32
	id string
}

func (m *naiveRing) sorted() []ownedPoint {
	var all []ownedPoint
	for _, n := range m.nodes {
		for _, p := range n.points {
			all = append(all, ownedPoint{p, n.id})
		}
	}
	slices.SortFunc(all, func(a, b ownedPoint) int { return int(int64(a.p) - int64(b.p)) })
	return all
}

func (m *naiveRing) get(key string) (string, bool) {
	h := m.hash(key)
	var best, lowest *ownedPoint
	for _, n := range m.nodes {
		for _, p := range n.points {
			op := ownedPoint{p, n.id}
			if p > h && (best == nil || p < best.p) {
				best = &op
			}
			if lowest == nil || p < lowest.p {
				lowest = &op
			}
		}
	}
	switch {
	case best != nil:
		return best.id, true
	case lowest != nil:
		return lowest.id, true
	}
	return "", false
}

// getN walks all, the model's points sorted by sorted().
func (m *naiveRing) getN(all []ownedPoint, key string, n int) []string {
	out := []string{}
	if len(all) == 0 || n < 1 {
		return out
	}
	h := m.hash(key)
	start := 0
	for start < len(all) && all[start].p <= h {
		start++
	}
	for k := range all {
		id := all[(start+k)%len(all)].id
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
		if len(out) == n {
			break
		}
	}
	return out
}
