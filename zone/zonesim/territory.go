package zonesim

import (
	"maps"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/zone"
)

// Leases is the simulation's stand-in for coord's membership: each node's
// lease, and which were lost. It answers the runtimes' Config.Accept and
// Config.LivePeers, as a host answers them from coord.
type Leases struct {
	lease map[string]int64
	lost  map[string]bool
	terr  map[string]*Territory
}

// NewLeases returns the membership of nodes, lease i+1 for nodes[i].
func NewLeases(nodes []string) *Leases {
	l := &Leases{lease: make(map[string]int64), lost: make(map[string]bool), terr: make(map[string]*Territory)}
	for i, n := range nodes {
		l.lease[n] = int64(i + 1)
	}
	return l
}

// Accept is Config.Accept: the lease must be the peer's and not lost.
func (l *Leases) Accept(peer string, lease int64) bool {
	return !l.lost[peer] && l.lease[peer] == lease && lease != 0
}

// LivePeers returns Config.LivePeers for node self.
func (l *Leases) LivePeers(self string) func() map[string]int64 {
	return func() map[string]int64 {
		m := make(map[string]int64, len(l.lease))
		for n, lease := range l.lease {
			if n != self && !l.lost[n] {
				m[n] = lease
			}
		}
		return m
	}
}

// Lose ends node's lease: its territory is fenced and its peers refuse
// it from now on.
func (l *Leases) Lose(node string) {
	if l.lost[node] {
		return
	}
	l.lost[node] = true
	if t := l.terr[node]; t != nil {
		close(t.fenced)
	}
}

// Lost reports whether node lost its lease.
func (l *Leases) Lost(node string) bool { return l.lost[node] }

// Live returns the nodes whose lease is live.
func (l *Leases) Live() map[string]int64 {
	m := maps.Clone(l.lease)
	for n := range l.lost {
		delete(m, n)
	}
	return m
}

// Territory is one node's zone.Territory in the simulation: the table it
// holds (Install, as its coord watch would deliver a new one) and its
// lease's fence.
type Territory struct {
	name   string
	table  *cells.Table
	lease  int64
	fenced chan struct{}
}

var _ zone.Territory = (*Territory)(nil)

// Territory returns node's territory holding table.
func (l *Leases) Territory(node string, table *cells.Table) *Territory {
	t := &Territory{name: node, table: table, lease: l.lease[node], fenced: make(chan struct{})}
	if l.lost[node] {
		close(t.fenced)
	}
	l.terr[node] = t
	return t
}

// Table is the held table.
func (t *Territory) Table() *cells.Table { return t.table }

// Fenced is closed once the node's lease is lost.
func (t *Territory) Fenced() <-chan struct{} { return t.fenced }

// Lease is the lease the node's messages carry.
func (t *Territory) Lease() int64 { return t.lease }

// Install makes the node hold table, if it is newer than the one held.
func (t *Territory) Install(table *cells.Table) {
	if table.Version() > t.table.Version() {
		t.table = table
	}
}
