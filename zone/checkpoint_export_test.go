package zone

// PlantCheckpoint switches a known bug of the checkpoint protocol on in
// r, for the test that requires the kill simulation to catch each
// (checkpoint_bite_test.go): "noquery" (a standby adopts without asking
// the live peers which entities they hold), "noraise" (it adopts at the
// checkpointed epoch, not above it), "nofence" (a standby starts a stream
// from a node that is not the region's owner in its table), "notake"
// (what a node takes by handoff or adoption waits for its next
// checkpoint), "nomoved" (an entity that walked into another region's
// stream is said gone from the old one: a checkpoint that arrives in
// part loses it), "nolaterclaim" (a peer answers an adoption query from
// its rounds only, not from the records it adopts once its table comes).
func (r *Runtime) PlantCheckpoint(bug string) {
	b := &r.cluster.ckpt.bugs
	switch bug {
	case "noquery":
		b.noQuery = true
	case "noraise":
		b.noRaise = true
	case "nofence":
		b.noFence = true
	case "notake":
		b.noTake = true
	case "nomoved":
		b.noMoved = true
	case "nolaterclaim":
		b.noLaterClaim = true
	default:
		panic("zone: no such planted checkpoint bug: " + bug)
	}
}
