package outbox_test

import (
	"bytes"
	"fmt"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// world answers the outbox's questions: observers come from interest,
// ownership from the game (entity 1 is account 7's pet).
type world struct {
	vis *interest.Visibility[uint64, uint64]
}

func (w world) AppendObserversOf(dst []uint64, e uint64) []uint64 {
	return w.vis.AppendObserversOf(dst, e)
}
func (w world) OwnerOf(e uint64) (uint64, bool)                 { return 7, e == 1 }
func (w world) AppendParty(dst []uint64, owner uint64) []uint64 { return dst }

func Example() {
	subs := interest.NewSubscriptions[uint64](torus.Default())
	vis := interest.NewVisibility[uint64, uint64](subs)
	ob := outbox.New[uint64, uint64](world{vis})
	_ = ob.Register(outbox.EncoderFuncs[uint64, uint64]{ // public
		WireType:     1,
		AudienceFunc: func(uint64) outbox.Audience[uint64] { return outbox.Public[uint64]() },
		PayloadFunc:  func(dst []byte, e uint64) []byte { return append(dst, "pos"...) },
	})
	_ = ob.Register(outbox.EncoderFuncs[uint64, uint64]{ // owner only
		WireType:     2,
		AudienceFunc: func(uint64) outbox.Audience[uint64] { return outbox.Owner[uint64]() },
		PayloadFunc:  func(dst []byte, e uint64) []byte { return append(dst, "bag"...) },
	})
	for _, account := range []uint64{7, 8} {
		ob.Attach(account, outbox.SinkFunc(func(tick uint64, frames [][]byte) {
			_ = outbox.DecodeBatch(bytes.Join(frames, nil), func(m outbox.Message) error {
				switch m.Kind {
				case outbox.KindAppear:
					fmt.Printf("tick %d account %d: entity %d appears with %d components\n", tick, account, m.Entity, m.BurstLen)
				case outbox.KindComponent:
					fmt.Printf("tick %d account %d: entity %d type %d = %s\n", tick, account, m.Entity, m.Component, m.Payload)
				}
				return nil
			})
		}))
		subs.Announce(account, interest.ChunkPos{})
		subs.MarkSent(account, interest.ChunkPos{})
	}
	vis.Reindex(1, interest.ChunkPos{})
	ob.AddDeliveries(vis.Drain())
	ob.Flush(1)
	// Output:
	// tick 1 account 7: entity 1 appears with 2 components
	// tick 1 account 7: entity 1 type 1 = pos
	// tick 1 account 7: entity 1 type 2 = bag
	// tick 1 account 8: entity 1 appears with 1 components
	// tick 1 account 8: entity 1 type 1 = pos
}
