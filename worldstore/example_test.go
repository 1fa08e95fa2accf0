package worldstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
)

func Example() {
	ctx := context.Background()
	s := worldstore.NewMemory(nil)
	defer s.Close()

	// Session epoch 2 saves alice at logout; a late save of her old
	// session (epoch 1) is refused instead of rolling her back.
	_ = s.SavePlayer(ctx, worldstore.Player{Account: 1001, Epoch: 2, Pos: torus.Pos{X: 10, Y: 20}, State: []byte("xp=40")})
	err := s.SavePlayer(ctx, worldstore.Player{Account: 1001, Epoch: 1, Pos: torus.Pos{X: 0, Y: 0}})
	fmt.Println("stale save refused:", errors.Is(err, worldstore.ErrStaleEpoch))
	p, _ := s.LoadPlayer(ctx, 1001)
	fmt.Printf("alice at %v with %s\n", p.Pos, p.State)

	// She places a marker; a node that read the chunk at revision 0 and
	// tries to append there too loses the compare-and-set.
	chunk := torus.Default().ChunkOf(p.Pos)
	rev, _ := s.AppendEdit(ctx, chunk, 0, worldstore.Edit{Kind: 1, Data: []byte("marker"), Account: 1001})
	fmt.Println("marker is revision", rev)
	_, err = s.AppendEdit(ctx, chunk, 0, worldstore.Edit{Kind: 1, Data: []byte("other")})
	var conflict *worldstore.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict, chunk now at revision", conflict.Current)
	}
	rev, edits, _ := s.Edits(ctx, chunk, 0)
	fmt.Printf("revision %d: %s by %v\n", rev, edits[0].Edit.Data, edits[0].Edit.Account)
	// Output:
	// stale save refused: true
	// alice at {10 20 0} with xp=40
	// marker is revision 1
	// conflict, chunk now at revision 1
	// revision 1: marker by 1001
}
