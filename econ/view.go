package econ

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/netting"
)

// view is a set of live economy members: what a generation routes over.
type view struct {
	names []string // sorted
	// incarnations[i] is names[i]'s claim revision: a node that died and
	// registered again under its name makes a different view.
	incarnations []int64
	id           string
	owner        func(scope string) string
}

// viewOf returns the view of the econ members among members (by id).
func viewOf(members map[coord.NodeID]coord.Member) view {
	var ms []coord.Member
	for _, m := range members {
		if m.Role == Role {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b coord.Member) int { return cmp.Compare(a.Name, b.Name) })
	v := view{}
	h := sha256.New()
	for _, m := range ms {
		v.names = append(v.names, m.Name)
		v.incarnations = append(v.incarnations, m.Incarnation)
		h.Write([]byte(m.Name + "@" + strconv.FormatInt(m.Incarnation, 10) + "\n"))
	}
	v.id = hex.EncodeToString(h.Sum(nil)[:8])
	if len(v.names) > 0 {
		// Names are unique under coord's leases, so the list is valid.
		v.owner, _ = netting.ScopeRouter(v.names)
	}
	return v
}

// adoptedBy reports whether every member of v publishes v's id.
func (v view) adoptedBy(members map[coord.NodeID]coord.Member) bool {
	byName := map[string]coord.Member{}
	for _, m := range members {
		byName[m.Name] = m
	}
	for i, name := range v.names {
		m, ok := byName[name]
		if !ok || m.Incarnation != v.incarnations[i] || m.Meta[ViewMetaKey] != v.id {
			return false
		}
	}
	return true
}

// membership is the node's one writer of the view: it follows the member
// watch, re-forms the node on every change of the econ member set, publishes
// the view it adopted and marks the generation ready once every member has
// adopted it. A lost lease fences the node.
func (n *Node) membership(events <-chan coord.MembershipEvent) {
	members := map[coord.NodeID]coord.Member{}
	self := n.reg.Member()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.reg.Lost():
			return // the fence goroutine stops the node
		case ev, ok := <-events:
			if !ok {
				return
			}
			switch ev.Kind {
			case coord.MemberLeft:
				delete(members, ev.Member.ID)
			default:
				members[ev.Member.ID] = ev.Member
			}
			// The watch delivers the member set before the first change
			// after it; drain what is already queued so a starting node
			// forms one view, not one per member it learns of.
			drained := true
			for drained {
				select {
				case ev, ok := <-events:
					if !ok {
						return
					}
					if ev.Kind == coord.MemberLeft {
						delete(members, ev.Member.ID)
					} else {
						members[ev.Member.ID] = ev.Member
					}
				default:
					drained = false
				}
			}
			if m, ok := members[self.ID]; !ok || m.Incarnation != self.Incarnation {
				// Our record is gone (revoked, expired): the registration
				// reports it lost within a round trip; wait for that.
				continue
			}
			n.step(members)
		}
	}
}

// step re-forms the node if the member set changed and marks the current
// generation ready when every member has adopted it.
func (n *Node) step(members map[coord.NodeID]coord.Member) {
	v := viewOf(members)
	n.gate.RLock()
	g := n.cur
	n.gate.RUnlock()
	if g == nil || g.view.id != v.id {
		if !n.reform(v) {
			return
		}
		n.gate.RLock()
		g = n.cur
		n.gate.RUnlock()
	}
	if !g.isReady() && g.view.adoptedBy(members) {
		close(g.ready)
		n.met.ready.Set(1)
		n.log.Info("econ: view ready", "view", g.view.id, "members", g.view.names)
		n.signal()
	}
}

// reform replaces the current generation with one for v: stop recording
// under the old view, settle its sessions, then publish v as adopted. It
// reports false if the node is stopping or fenced.
func (n *Node) reform(v view) bool {
	cn, err := netting.OpenClusterNode(n.cfg.Store, netting.ClusterConfig{
		NodeID:       n.cfg.Name,
		Nodes:        v.names,
		EpochMaxAge:  n.cfg.EpochMaxAge,
		MaxMovements: n.cfg.MaxMovements,
		SettleLease:  n.cfg.SettleLease,
		Sweep:        &netting.SweepConfig{SettleOlderThan: n.cfg.SweepBound},
		Logger:       n.log,
	})
	if err != nil {
		// Validated at Start with the same values; only a view without
		// this node could fail, and step never passes one.
		n.log.Error("econ: open cluster node for view", "view", v.id, "err", err)
		return false
	}
	g := &generation{view: v, node: cn, ready: make(chan struct{})}
	n.met.watchBreaches(cn)
	n.gate.Lock()
	if err := n.stoppedLocked(); err != nil {
		n.gate.Unlock()
		return false
	}
	old := n.cur
	n.cur = g
	n.gate.Unlock()
	n.met.ready.Set(0)
	n.met.views.Inc()
	n.met.members.Set(float64(len(v.names)))
	n.signal()
	if old != nil {
		n.log.Info("econ: view changed; settling the old view's sessions", "from", old.view.names, "to", v.names)
		_ = n.retire(old, false)
	}
	return n.publish(v)
}

// publish writes v's id into the node's member record, retrying until it
// lands or the node stops. The write is fenced by the lease.
func (n *Node) publish(v view) bool {
	self := n.reg.Member()
	meta := maps.Clone(self.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[ViewMetaKey] = v.id
	backoff := 50 * time.Millisecond
	for {
		err := n.reg.Update(n.ctx, self.Addrs, meta)
		if err == nil {
			return true
		}
		if n.ctx.Err() != nil {
			return false
		}
		n.log.Warn("econ: publish adopted view", "view", v.id, "err", err)
		t := n.cfg.Clock.NewTimer(backoff)
		select {
		case <-n.ctx.Done():
			t.Stop()
			return false
		case <-n.reg.Lost():
			t.Stop()
			return false
		case <-t.C():
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// fence stops the node for good after its lease was lost: no Record
// returns from it any more, and its open sessions are settled (settles are
// claimed in the store, so racing a sweeper is safe).
func (n *Node) fence() {
	n.gate.Lock()
	n.fenced = true
	g := n.cur
	n.gate.Unlock()
	n.met.ready.Set(0)
	n.signal()
	n.log.Error("econ: membership lease lost; node fenced", "err", n.reg.Err())
	if g != nil {
		_ = n.retire(g, false)
	}
}
