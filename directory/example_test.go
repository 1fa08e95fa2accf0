package directory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
)

func Example() {
	ctx := context.Background()
	d, _ := directory.NewMemory(directory.MemoryConfig{})
	const alice account.ID = 1001

	first, _, _ := d.Connect(ctx, alice, 1)    // alice logs in through node 1
	second, old, _ := d.Connect(ctx, alice, 2) // and again through node 2
	fmt.Println("displaced gateway:", old.Gateway, "newer epoch:", second.Epoch > first.Epoch)

	// The old gateway's late teardown changes nothing.
	err := d.Release(ctx, alice, first.Epoch)
	fmt.Println("stale release refused:", errors.Is(err, directory.ErrStaleEpoch))

	_, _ = d.SetMaster(ctx, alice, second.Epoch, directory.Route{Node: 7, Version: 1})
	s, _ := d.Lookup(ctx, alice)
	fmt.Println("gateway", s.Gateway, "master", s.Master.Node)
	// Output:
	// displaced gateway: 1 newer epoch: true
	// stale release refused: true
	// gateway 2 master 7
}
