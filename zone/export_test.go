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
// "band" takes a simulation ghost's chunk out of the band (7), "phase"
// gives id, which must be no entity here, a simulated record (12),
// "index" puts local entity id in the table's outside index without its
// record saying so (13), "refused" parks local entity id, a transition
// its phase refuses (14).
func (r *Runtime) Breach(kind string, id ecs.ID) {
	c := r.cluster
	switch kind {
	case "frozen":
		_ = r.frozen.Add(id, Frozen{})
	case "source":
		e := c.ents.get(id)
		c.ents.setPhase(e, phaseGone) // the record forgets the ghost; the replica keeps it
	case "parked":
		e := c.ents.get(id)
		e.park = &parkedGhost{peer: "nobody", until: r.w.CurrentTick().N + ticks(r.cfg.Timers.Park)}
		c.ents.parked[id] = e
	case "band":
		_, ch, _ := c.rep.Has(uint64(id))
		delete(c.band, ch)
	case "phase":
		c.ents.ensure(id, phaseSimulated).epoch = 3
	case "index":
		e := c.ents.ensure(id, phaseSimulated)
		e.epoch = 3
		c.ents.outside[id] = e
	case "refused":
		c.park(id, "nobody", r.w.CurrentTick().N)
	}
}

// Plant switches a known bug back on in r, for the test that requires
// the simulation to catch each (bite_test.go): "nofreeze" (an outgoing
// entity is not frozen), "noepochguard" (a transfer older than the
// ghost's epoch is taken), "parkasdrop" (parkChunk drops like
// dropChunk), "noheldvanish" (holdVanish never holds), "nounlistedhold"
// (holdUnlisted never holds: a snapshot that leaves a ghost out removes
// it at once), "adoptionvanish" (the adoption tick's out-of-sight vanish is sent to peers that never
// saw the entity here), "dropatfence" (a peer's ghosts are dropped at
// its fence: they vanish, then come back adopted), "nounconfirmed" (the
// intents sent to a peer that then died unconfirmed are not counted),
// "noawait" (an intent for a fenced peer's entity is sent into the void,
// uncounted), "nohandedvanish" (an adopter does not tell the nodes that
// hold the chunk of the handoff but not the entity's that it went),
// "wentunanswered" (a went record counts a subscriber whose first
// snapshot is still to come), "nogaphold" (a ghost its source's snapshot
// leaves out goes while that source's gap is resynced), "noheir" (an
// intent for a fenced peer's entity never goes to the node whose
// adoption query named it: it waits for a ghost), "nobandreplan" (a new
// table's re-plan leaves out the band chunks whose simulators were all
// fenced).
func (r *Runtime) Plant(bug string) {
	b := &r.cluster.bugs
	switch bug {
	case "nofreeze":
		b.noFreeze = true
	case "noepochguard":
		b.noEpochGuard = true
	case "parkasdrop":
		b.parkAsDrop = true
	case "noheldvanish":
		b.noHeldVanish = true
	case "nounlistedhold":
		b.noUnlistedHold = true
	case "adoptionvanish":
		b.adoptionVanish = true
	case "nomoved", "strictrecords", "keepoffered": // checkpoint_export_test.go's, for a scenario script
		r.PlantCheckpoint(bug)
	case "dropatfence":
		b.dropAtFence = true
	case "noheldend":
		b.noHeldEnd = true
	case "snapadopting":
		b.snapAdopting = true
	case "nomoverwait":
		b.noMoverWait = true
	case "fenceretry":
		b.fenceRetry = true
	case "nosourceresync":
		b.noSourceResync = true
	case "nohandonhold":
		b.noHandOnHold = true
	case "notakerecheck":
		b.noTakeRecheck = true
	case "nohandedvanish":
		b.noHandedVanish = true
	case "wentunanswered":
		b.wentUnanswered = true
	case "nogaphold":
		b.noGapHold = true
	case "nounconfirmed":
		b.noUnconfirmed = true
	case "noawait":
		b.noAwait = true
	case "noheir":
		b.noHeir = true
	case "nobandreplan":
		b.noBandReplan = true
	default:
		panic("zone: no such planted bug: " + bug)
	}
}
