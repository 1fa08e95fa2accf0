package demo

import (
	"context"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/zone"
)

// TestWorldSaysItStartsAtOnce: the demo's first line comes before any of
// its start-up work (the stores, etcd, the nodes), which can take seconds:
// a run whose context is over before it starts stops in that work, and
// has printed the line all the same.
func TestWorldSaysItStartsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out testenv.Buffer
	hosted := false
	_, err := runWorld(ctx, WorldConfig{Bots: 2, DataDir: t.TempDir()}, &out, func(context.Context, zone.HostConfig) error {
		hosted = true
		return nil
	})
	if err == nil {
		t.Fatal("a run with its context over started")
	}
	if hosted {
		t.Fatal("a run with its context over started a zone node")
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if !strings.HasPrefix(first, "shardwise demo: starting an embedded etcd, 4 zone nodes and 3 economy nodes") {
		t.Fatalf("first line %q, want the start said before the start-up work (err %v)", first, err)
	}
}
