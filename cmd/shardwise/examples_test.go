package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/torus"
)

// TestExampleRegionFilesApply: every file in examples/regions applies as
// "shardwise regions apply" reads it (parsed, validated and stored in a
// real etcd), over the grid "shardwise zone" runs, so the nodes the file
// names accept it; four-nodes.yaml splits the world into the quadrants
// its comment promises.
func TestExampleRegionFilesApply(t *testing.T) {
	files, err := filepath.Glob("../../examples/regions/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example region files: %v", err)
	}
	zoneGrid, err := cells.NewGrid(game.Config{}.RuntimeConfig().Grid)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			eps, c := etcdForCmdTest(t)
			out, err := runCmd(t, newRootCmd(), "", "regions", "apply", "--endpoints", eps, "--force", f)
			if err != nil {
				t.Fatalf("regions apply %s: %v\n%s", f, err, out)
			}
			if !strings.HasPrefix(out, "applied region table version 1: 256 regions") {
				t.Errorf("regions apply %s printed %q", f, out)
			}
			stored, err := c.Regions(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := coord.ParseRegionsFile(data)
			if err != nil {
				t.Fatal(err)
			}
			if !stored.Equal(parsed) {
				t.Errorf("etcd holds a table other than the file's")
			}
			if stored.Grid() != zoneGrid {
				t.Errorf("grid %+v, want the zone nodes' %+v", stored.Grid(), zoneGrid)
			}
		})
	}
	data, err := os.ReadFile("../../examples/regions/four-nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := coord.ParseRegionsFile(data)
	if err != nil {
		t.Fatal(err)
	}
	// The quadrants, and the four owners around the origin.
	for _, c := range []struct {
		x, y float64
		want string
	}{
		{1, 1, "zone-a"}, {-1, 1, "zone-b"}, {1, -1, "zone-c"}, {-1, -1, "zone-d"},
		{63_999, 63_999, "zone-a"}, {64_001, 63_999, "zone-b"}, {63_999, 64_001, "zone-c"}, {64_001, 64_001, "zone-d"},
	} {
		p := zoneGrid.World().Normalise(torus.Pos{X: c.x, Y: c.y})
		if got := tb.OwnerOf(p); got != c.want {
			t.Errorf("owner at (%v, %v) = %s, want %s", c.x, c.y, got, c.want)
		}
	}
}
