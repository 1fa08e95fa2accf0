package router

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/hashring"
)

var benchKeys = func() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	return keys
}()

func benchRouter(b *testing.B, hash hashring.HashFunc, nodes int) *Router[*client] {
	b.Helper()
	c := newCluster()
	opts := baseOptions(c, clock.NewFake(epoch))
	opts.Hash = hash
	r, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	for i := 1; i <= nodes; i++ {
		if err := r.AddNode(context.Background(), node(i)); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// sink keeps the compiler from proving fn does nothing.
var sink int

func noop(_ context.Context, c *client, _ Node) error {
	sink += c.gen
	return nil
}

// BenchmarkExecute compares calling fn directly with calling it through
// Execute (leader healthy, steady state); the difference is the router's
// overhead per call: snapshot load, hash, ring search, client lookup,
// routes counter. hash-only isolates the key hash, the largest part with
// the compatible SHA-1.
func BenchmarkExecute(b *testing.B) {
	ctx := context.Background()
	for _, h := range []struct {
		name string
		hash hashring.HashFunc
	}{{"sha1", nil}, {"xxhash", hashring.XXHash}} {
		r := benchRouter(b, h.hash, 3)
		rt, _ := r.Route("x")
		b.Run("direct/"+h.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = benchKeys[i&1023]
				if err := noop(ctx, rt.Client, rt.Node); err != nil {
					b.Fatal(err)
				}
			}
		})
		hash := h.hash
		if hash == nil {
			hash = hashring.SHA1
		}
		b.Run("hash-only/"+h.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				sink += int(hash(benchKeys[i&1023]) & 1)
			}
		})
		b.Run("execute/"+h.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := r.Execute(ctx, benchKeys[i&1023], noop); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("execute-parallel/"+h.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					if err := r.Execute(ctx, benchKeys[i&1023], func(context.Context, *client, Node) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkRoute(b *testing.B) {
	for _, nodes := range []int{3, 30} {
		r := benchRouter(b, nil, nodes)
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := r.Route(benchKeys[i&1023]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRouteAll(b *testing.B) {
	r := benchRouter(b, nil, 3)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := r.RouteAll(benchKeys[i&1023], 3); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailover measures, in process, the time from the first call
// that meets a dead leader to the success served by its replica: the failed
// attempt, the mark-down (ring rebuild, disconnect handed off), and the
// replica's attempt. The node is put back between iterations, off the clock.
func BenchmarkFailover(b *testing.B) {
	ctx := context.Background()
	r := benchRouter(b, nil, 3)
	key := "user:1"
	lead, _ := r.Route(key)
	dead := lead.Node
	fn := func(_ context.Context, _ *client, n Node) error {
		if n == dead {
			return errRefused
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Execute(ctx, key, fn); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := r.RemoveNode(ctx, dead); err != nil {
			b.Fatal(err)
		}
		if err := r.AddNode(ctx, dead); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
