package zone

import (
	"bytes"
	"fmt"

	"github.com/shardwise/shardwise/ecs"
)

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
// its rounds only, not from the records it adopts once its table comes),
// "nosupersede" (an adoption round restores the stale record of an entity
// its node took at a newer epoch during the round and handed on),
// "nonewest" (a round restores the record of the streams it adopts though
// its node holds a newer one of the entity in another dead owner's
// stream, adopted in a later round), "rounddeadonly" (a round takes a
// render ghost from a node that died before the round's owners for a
// sign that a live peer holds the entity),
// "strictrecords" (invariant 10 holds a copy frozen in a handoff this
// node offered to it too: a false breach while the ack is held up),
// "keepoffered" (an adoption round counts such a frozen copy as held
// here, and the entity is lost when the ack comes).
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
	case "nosupersede":
		b.noSupersede = true
	case "nonewest":
		b.noNewest = true
	case "rounddeadonly":
		b.roundDeadOnly = true
	case "strictrecords":
		b.strictRecords = true
	case "keepoffered":
		b.keepOffered = true
	default:
		panic("zone: no such planted checkpoint bug: " + bug)
	}
}

// VerifyCheckpointEncoding makes r check, for every entity its
// checkpoints encode, that the bytes are those of the handoff's own
// snapshot (handoffSnapshot): the checkpoint's reused buffers build the
// same snapshot a handoff would carry. It returns how many it checked
// and the first difference.
func (r *Runtime) VerifyCheckpointEncoding() func() (checked int, diff string) {
	v := &ckptVerify{}
	r.cluster.ckpt.enc.verify = func(id ecs.ID, epoch, tick uint64, got []byte, err error) {
		v.check(r, id, epoch, tick, got, err)
	}
	return func() (int, string) { return v.checked, v.diff }
}

type ckptVerify struct {
	checked int
	diff    string
}

func (v *ckptVerify) check(r *Runtime, id ecs.ID, epoch, tick uint64, got []byte, gotErr error) {
	want, wantErr := r.handoffSnapshot(id, epoch, tick)
	v.checked++
	if v.diff == "" && ((gotErr == nil) != (wantErr == nil) || gotErr == nil && !bytes.Equal(got, want.Append(nil))) {
		v.diff = fmt.Sprintf("entity %d at tick %d: checkpoint %x (%v), handoff %x (%v)", id, tick, got, gotErr, want.Append(nil), wantErr)
	}
}
