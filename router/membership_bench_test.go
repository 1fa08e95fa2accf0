package router_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/router"
)

// The membership benchmarks use only the router's public API (and no
// name added since), so scripts/bench-router can run this same file
// against an older commit and show both side by side.

// events turns the router's log into signals: a benchmark waits for "node
// rejoined" or "node marked down" instead of polling.
type events struct {
	rejoined, markedDown chan struct{}
}

func (e *events) Enabled(context.Context, slog.Level) bool { return true }
func (e *events) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "router: node rejoined":
		e.rejoined <- struct{}{}
	case "router: node marked down":
		e.markedDown <- struct{}{}
	}
	return nil
}
func (e *events) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *events) WithGroup(string) slog.Handler      { return e }

func benchNode(i int) router.Node {
	return router.Node{Host: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 6379}
}

// membershipRouter returns a router of n nodes (100 vnodes each) on a fake
// clock, with reconnects after 1 ms of that clock.
func membershipRouter(b *testing.B, n int, placement router.PlacementFunc) (*router.Router[int], *clock.Fake, *events) {
	b.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ev := &events{rejoined: make(chan struct{}, 1), markedDown: make(chan struct{}, 1)}
	r, err := router.New(router.Options[int]{
		Connect:   func(context.Context, router.Node) (int, error) { return 1, nil },
		Placement: placement,
		Clock:     clk,
		Rand:      rand.NewPCG(1, 2),
		Retry:     &router.Retry{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Logger:    slog.New(ev),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	for i := range n {
		if err := r.AddNode(b.Context(), benchNode(i)); err != nil {
			b.Fatal(err)
		}
	}
	return r, clk, ev
}

// rejoin lets a marked-down node's reconnect loop run and waits until the
// node is back.
func rejoin(b *testing.B, clk *clock.Fake, ev *events) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		b.Fatal("reconnect loop never armed its timer")
	}
	clk.Advance(time.Millisecond)
	select {
	case <-ev.rejoined:
	case <-ctx.Done():
		b.Fatal("node never rejoined")
	}
}

var membershipSizes = []int{10, 100, 400, 1000}

var membershipPlacements = []struct {
	name string
	fn   router.PlacementFunc
}{{"ring", nil}, {"rendezvous", router.RendezvousPlacement()}}

// BenchmarkMembership measures one membership change of a router that then
// has N nodes: the Nth node joining (AddNode), a node marked down
// (MarkDown), and a marked-down node reconnecting (from the reconnect
// loop's wake-up to the rejoin published).
func BenchmarkMembership(b *testing.B) {
	for _, pl := range membershipPlacements {
		for _, n := range membershipSizes {
			b.Run(fmt.Sprintf("%s/join/nodes=%d", pl.name, n), func(b *testing.B) {
				r, _, _ := membershipRouter(b, n-1, pl.fn)
				last := benchNode(n - 1)
				b.ReportAllocs()
				b.ResetTimer() // the setup above is not the change measured
				for i := 0; i < b.N; i++ {
					if err := r.AddNode(b.Context(), last); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if err := r.RemoveNode(b.Context(), last); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
			b.Run(fmt.Sprintf("%s/mark-down/nodes=%d", pl.name, n), func(b *testing.B) {
				r, clk, ev := membershipRouter(b, n, pl.fn)
				victim := benchNode(n / 2)
				b.ReportAllocs()
				b.ResetTimer() // the setup above is not the change measured
				for i := 0; i < b.N; i++ {
					r.MarkDown(victim)
					b.StopTimer()
					<-ev.markedDown
					rejoin(b, clk, ev)
					b.StartTimer()
				}
			})
			b.Run(fmt.Sprintf("%s/reconnect/nodes=%d", pl.name, n), func(b *testing.B) {
				r, clk, ev := membershipRouter(b, n, pl.fn)
				victim := benchNode(n / 2)
				b.ReportAllocs()
				b.ResetTimer() // the setup above is not the change measured
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					r.MarkDown(victim)
					<-ev.markedDown
					b.StartTimer()
					rejoin(b, clk, ev)
				}
			})
		}
	}
}

var errNodeDown = errors.New("connection refused")

// BenchmarkFailoverLatency measures an Execute whose leader fails: the
// failed attempt, the mark-down the router starts, and the replica's
// attempt; fn itself does nothing. ns-to-replica/op is the part before the
// replica's attempt starts: the router's own work between the leader's
// failure and the next try. Off the clock, the node is put back between
// iterations.
func BenchmarkFailoverLatency(b *testing.B) {
	for _, n := range []int{3, 400, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			r, clk, ev := membershipRouter(b, n, nil)
			const key = "user:1"
			lead, err := r.Route(key)
			if err != nil {
				b.Fatal(err)
			}
			var failed time.Time
			var toReplica time.Duration
			fn := func(_ context.Context, _ int, node router.Node) error {
				if node == lead.Node {
					failed = time.Now()
					return errNodeDown
				}
				toReplica += time.Since(failed)
				return nil
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := r.Execute(b.Context(), key, fn); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				<-ev.markedDown
				rejoin(b, clk, ev)
				b.StartTimer()
			}
			b.ReportMetric(float64(toReplica.Nanoseconds())/float64(b.N), "ns-to-replica/op")
		})
	}
}
