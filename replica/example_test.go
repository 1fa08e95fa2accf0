package replica_test

import (
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/replica"
	"github.com/shardwise/shardwise/torus"
)

func Example() {
	s, _ := replica.New(replica.Config{})
	chunk := torus.ChunkPos{X: 7, Y: 3}
	// A batch from the owner: a gap is reported, the batch applied anyway.
	var gap *replica.GapError
	_ = s.Batch("zone-a", 1)
	if err := s.Batch("zone-a", 3); errors.As(err, &gap) {
		fmt.Println("resubscribe the chunks of", gap.Source)
	}
	b := outbox.AppendAppearFrame(nil, 42, 1)
	b = outbox.AppendComponentFrame(b, 42, 1, []byte("pos"))
	_, _ = s.Apply(replica.Update{Entity: 42, Stamp: replica.Stamp{Epoch: 1, Seq: 1}, Chunk: chunk, Frames: b})
	fmt.Println(s.AppendResidents(nil, chunk))
	for _, ev := range s.Drain(nil) {
		fmt.Println(ev.Kind, ev.Entity)
	}
	// The snapshot after the resubscribe: 42 is no longer there.
	_ = s.Replace(chunk, nil)
	fmt.Println(s.Len(), s.Drain(nil)[0].Kind)
	// Output:
	// resubscribe the chunks of zone-a
	// [42]
	// appeared 42
	// 0 vanished
}
