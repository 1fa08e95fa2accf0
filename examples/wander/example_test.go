package wander_test

import (
	"fmt"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Eight wanderers of two accounts in a 100 m square run on a runtime that
// owns the whole world; account 1's client reads its first batch.
func ExampleNew() {
	mod, err := wander.New(wander.Config{Seed: 1, Entities: 8, Accounts: 2, Area: 100, Centre: torus.Pos{X: 4000, Y: 4000}})
	if err != nil {
		panic(err)
	}
	r, err := zone.New(zone.Config{Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}, mod)
	if err != nil {
		panic(err)
	}
	var batch []byte
	r.Attach(1, outbox.SinkFunc(func(tick uint64, frames [][]byte) {
		for _, f := range frames {
			batch = append(batch, f...)
		}
	}))
	r.Step()

	appeared, secrets := 0, 0
	err = outbox.DecodeBatch(batch, func(m outbox.Message) error {
		switch {
		case m.Kind == outbox.KindAppear:
			appeared++
		case m.Kind == outbox.KindComponent && m.Component == wander.WireSecret:
			secrets++ // owner only: account 1's four wanderers
		case m.Kind == outbox.KindComponent && m.Component == wander.WirePosition && m.Entity == 1:
			p, _ := zone.DecodePos(m.Payload)
			fmt.Printf("wanderer 0 (id 1) at (%.1f, %.1f)\n", p.X, p.Y)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("account 1 sees", appeared, "wanderers and", secrets, "secrets")
	// Output:
	// wanderer 0 (id 1) at (3971.1, 3994.2)
	// account 1 sees 8 wanderers and 4 secrets
}
