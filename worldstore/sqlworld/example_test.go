package sqlworld_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/worldstore/sqlworld"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "world-")
	defer os.RemoveAll(dir)
	url := "sqlite://" + filepath.Join(dir, "world.db") // or "postgres://user@host/db"

	s, err := sqlworld.Open(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.SavePlayer(ctx, worldstore.Player{Account: 1001, Epoch: 5, Pos: torus.Pos{X: 3, Y: 4}, State: []byte("pet=fox")})
	_, _ = s.AppendEdit(ctx, torus.ChunkPos{X: 0, Y: 0}, 0, worldstore.Edit{Kind: 1, Data: []byte("marker"), Account: 1001})
	s.Close()

	// The player logs in again, after a restart.
	s, _ = sqlworld.Open(ctx, url)
	defer s.Close()
	p, _ := s.LoadPlayer(ctx, 1001)
	rev, edits, _ := s.Edits(ctx, torus.ChunkPos{X: 0, Y: 0}, 0)
	fmt.Printf("%v resumes at %v with %s; chunk at revision %d: %s\n", p.Account, p.Pos, p.State, rev, edits[0].Edit.Data)
	// Output:
	// 1001 resumes at {3 4 0} with pet=fox; chunk at revision 1: marker
}
