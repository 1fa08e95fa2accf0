package handoff_test

import (
	"fmt"

	"github.com/shardwise/shardwise/handoff"
)

// A player and its pet move to the next node as one Transfer at epoch 2
// (they had epoch 1 on the source); the target creates both and acks.
func Example() {
	player, _ := handoff.NewSnapshot(101, 2, 7, map[string][]byte{"zone.position": {1, 2, 3}, "health": {100}})
	pet, _ := handoff.NewSnapshot(102, 2, 7, map[string][]byte{"zone.position": {1, 2, 4}, "pet": {101}})
	payload := handoff.Transfer{Entities: []handoff.Snapshot{player, pet}}.Append(nil) // kind handoff.KindTransfer

	in, err := handoff.DecodeTransfer(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	var ack handoff.Ack
	for _, s := range in.Entities {
		fmt.Printf("entity %d at epoch %d: %d components, %d bytes\n", s.Entity, s.Epoch, len(s.Components), s.Size())
		ack.Entities = append(ack.Entities, handoff.Ref{Entity: s.Entity, Epoch: s.Epoch})
	}
	fmt.Printf("ack: %d bytes\n", len(ack.Append(nil))) // kind handoff.KindAck

	_, err = handoff.DecodeTransfer(payload[:len(payload)-1])
	fmt.Println(err)
	// Output:
	// entity 101 at epoch 2: 2 components, 38 bytes
	// entity 102 at epoch 2: 2 components, 35 bytes
	// ack: 20 bytes
	// handoff: malformed payload: Transfer.Entities[1].Components[1].Data at byte 71: 3 bytes, 2 left
}
