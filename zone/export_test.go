package zone

import "github.com/shardwise/shardwise/ecs"

// ReplicationFirst makes r apply, at each drain, the replication batches
// queued before the control messages (a transfer among them), as the
// link may deliver them: they travel on different streams.
func (r *Runtime) ReplicationFirst() { r.cluster.replicationFirst = true }

// Breach breaks a runtime invariant on purpose around entity id, for the
// test that sees CheckInvariants catch each: "frozen" freezes a simulated
// entity with no handoff (5), "source" forgets a render ghost's source
// and "parked" parks a ghost from a peer that does not send it (6),
// "band" takes a simulation ghost's chunk out of the band (7).
func (r *Runtime) Breach(kind string, id ecs.ID) {
	c := r.cluster
	switch kind {
	case "frozen":
		_ = r.frozen.Add(id, Frozen{})
	case "source":
		delete(c.source, id)
	case "parked":
		c.parked[id] = parkedGhost{peer: "nobody", until: r.w.CurrentTick().N + ticks(r.cfg.Timers.Park)}
	case "band":
		_, ch, _ := c.rep.Has(uint64(id))
		delete(c.band, ch)
	}
}
