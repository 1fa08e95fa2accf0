package router

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/hashring"
	"github.com/shardwise/shardwise/internal/testseed"
)

// tinyRange hashes into 2¹⁴ values, so a ring of a few nodes salts often
// and removals regularly hit a label salted against the node that left.
func tinyRange(s string) uint32 { return hashring.SHA1(s) % (1 << 14) }

var propertyPlacements = []struct {
	name string
	fn   PlacementFunc
}{
	{"ring-sha1", RingPlacement(nil)},
	{"ring-tiny-range", RingPlacement(tinyRange)},
	{"rendezvous", RendezvousPlacement()},
}

// samePlacement fails the test unless p places sample keys exactly like a
// placement built from scratch from live, in join order.
func samePlacement(t *testing.T, what string, fn PlacementFunc, p Placement, live []Node, keys []string) {
	t.Helper()
	if len(live) == 0 {
		if _, ok := p.Leader("k"); ok {
			t.Fatalf("%s: empty membership still places keys", what)
		}
		return
	}
	want, err := fn(membersOf(live))
	if err != nil {
		t.Fatalf("%s: rebuild: %v", what, err)
	}
	for _, k := range keys {
		a, _ := p.Leader(k)
		b, _ := want.Leader(k)
		if a != b {
			t.Fatalf("%s: Leader(%s) = %s, rebuild from %v says %s", what, k, a, live, b)
		}
		if a, b := p.Owners(k, 3), want.Owners(k, 3); !slices.Equal(a, b) {
			t.Fatalf("%s: Owners(%s) = %v, rebuild says %v", what, k, a, b)
		}
	}
}

// Random sequences of joins, removals, mark-downs and reconnects leave the
// router with exactly the placement that a rebuild from its final
// membership (in join order) gives, for the ring (including a hash that
// salts often) and for rendezvous. The reconnects rejoin in whatever order
// the router's goroutines reach the lock, which is fine: the property is
// about the membership the router ends up with.
func TestMembershipChangesEqualRebuild(t *testing.T) {
	seed := testseed.Seed(t)
	keys := make([]string, 150)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i*7919)
	}
	for _, pl := range propertyPlacements {
		t.Run(pl.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			c := newCluster()
			clk := clock.NewFake(epoch)
			opts := baseOptions(c, clk)
			opts.Placement = pl.fn
			r := newRouter(t, c, opts)
			var known []Node // added and not removed: live or down
			down := map[Node]bool{}
			for step := range 80 {
				switch op := rng.IntN(10); {
				case op < 4 || len(known) == 0:
					n := Node{Host: "10.1.0." + strconv.Itoa(step), Port: 6379, Vnodes: 20 + rng.IntN(130)}
					if err := r.AddNode(t.Context(), n); err != nil {
						t.Fatalf("step %d: AddNode: %v", step, err)
					}
					known = append(known, n)
				case op < 6:
					k := rng.IntN(len(known))
					if err := r.RemoveNode(t.Context(), known[k]); err != nil {
						t.Fatalf("step %d: RemoveNode: %v", step, err)
					}
					delete(down, known[k])
					known = slices.Delete(known, k, k+1)
				case op < 9:
					n := known[rng.IntN(len(known))]
					r.MarkDown(n)
					down[n] = true
				default:
					// Let every down node reconnect: each loop is waiting
					// its first backoff (at most the base delay).
					waitFor(t, "every reconnect loop to arm its timer", func() bool { return clk.Waiters() == len(down) })
					clk.Advance(time.Second)
					waitFor(t, "every down node to rejoin", func() bool { return len(r.LiveNodes()) == len(known) })
					clear(down)
				}
				live := r.LiveNodes()
				if len(live) != len(known)-len(down) {
					t.Fatalf("step %d: %d live nodes, want %d", step, len(live), len(known)-len(down))
				}
				samePlacement(t, "step "+strconv.Itoa(step), pl.fn, r.snap.Load().placement, live, keys)
			}
		})
	}
}

// With and Without on the placements alone, over longer random sequences
// than the router test can afford.
func TestIncrementalPlacementsEqualRebuild(t *testing.T) {
	seed := testseed.Seed(t)
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	for _, pl := range propertyPlacements {
		t.Run(pl.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			var p Placement = noPlacement{}
			var live []Node
			for step := range 150 {
				if len(live) > 1 && rng.IntN(5) < 2 {
					k := rng.IntN(len(live))
					next, err := p.(IncrementalPlacement).Without(live[k].ID())
					if err != nil {
						t.Fatal(err)
					}
					p, live = next, slices.Delete(live, k, k+1)
				} else {
					n := Node{Host: "h" + strconv.Itoa(step), Port: 1, Vnodes: 1 + rng.IntN(100)}
					var err error
					if ip, ok := p.(IncrementalPlacement); ok {
						p, err = ip.With(Member{ID: n.ID(), Weight: n.Vnodes})
					} else {
						p, err = pl.fn([]Member{{ID: n.ID(), Weight: n.Vnodes}})
					}
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, n)
				}
				samePlacement(t, "step "+strconv.Itoa(step), pl.fn, p, live, keys)
			}
		})
	}
}

// A failing Execute never waits for the membership lock: with the lock
// held (as by a slow membership change), a call whose leader fails still
// moves on to the next replica and returns, and the mark-down is applied
// once the lock is free.
func TestFailoverDoesNotWaitForMembershipLock(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1), node(2), node(3))
	lead, _ := r.Route("user:1")
	fn := func(_ context.Context, _ *client, n Node) error {
		if n == lead.Node {
			return errRefused
		}
		return nil
	}

	r.mu.Lock()
	done := make(chan error, 3)
	go func() {
		done <- r.Execute(t.Context(), "user:1", fn)
		// The node is skipped at once by the calls that follow.
		done <- r.Execute(t.Context(), "user:1", fn)
		_, err := r.ExecuteAll(t.Context(), "user:1", fn)
		done <- err
	}()
	for range 3 {
		select {
		case err := <-done:
			if err != nil {
				r.mu.Unlock()
				t.Fatalf("Execute with the lock held: %v", err)
			}
		case <-time.After(10 * time.Second):
			r.mu.Unlock()
			t.Fatal("Execute waited for the membership lock")
		}
	}
	if !isLive(r, lead.Node) {
		r.mu.Unlock()
		t.Fatal("the mark-down was published while the lock was held")
	}
	r.mu.Unlock()
	waitFor(t, "the failed leader to leave the ring", func() bool { return !isLive(r, lead.Node) })
	if v := metricValue(t, r.metrics.markDowns.WithLabelValues(lead.Node.ID(), ReasonExecute)); v != 1 {
		t.Fatalf("mark-downs = %v, want 1 (the later calls skipped the node)", v)
	}
}

// The worker stops with the router; a failure seen after Close changes
// nothing.
func TestMarkDownAfterCloseIsIgnored(t *testing.T) {
	c := newCluster()
	r := newRouter(t, c, baseOptions(c, clock.NewFake(epoch)))
	addNodes(t, r, node(1))
	s := r.snap.Load()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cn := range s.conns {
		r.markDownLater(cn, errRefused)
	}
	if err := r.Execute(t.Context(), "k", func(context.Context, *client, Node) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute after Close = %v", err)
	}
}

// failingWithout is an incremental placement whose Without always fails.
type failingWithout struct{ Placement }

func (f failingWithout) With(m Member) (Placement, error) {
	p, err := f.Placement.(IncrementalPlacement).With(m)
	return failingWithout{p}, err
}
func (failingWithout) Without(string) (Placement, error) { return nil, errRefused }

// A custom placement whose Without fails is rebuilt from the others on a
// leave, so the node can rejoin later (it used to keep a placement that
// still held the node, and a rendezvous rejoin then failed for ever).
func TestFailingWithoutFallsBackToARebuild(t *testing.T) {
	rdv := RendezvousPlacement()
	c := newCluster()
	clk := clock.NewFake(epoch)
	opts := baseOptions(c, clk)
	opts.Placement = func(ms []Member) (Placement, error) {
		p, err := rdv(ms)
		return failingWithout{p}, err
	}
	r := newRouter(t, c, opts)
	addNodes(t, r, node(1), node(2), node(3))
	r.MarkDown(node(2))
	if isLive(r, node(2)) {
		t.Fatal("node 2 still live after MarkDown")
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	samePlacement(t, "after the leave", opts.Placement, r.snap.Load().placement, r.LiveNodes(), keys)
	waitFor(t, "the reconnect loop to arm its timer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(time.Second)
	waitFor(t, "node 2 to rejoin", func() bool { return isLive(r, node(2)) })
	samePlacement(t, "after the rejoin", opts.Placement, r.snap.Load().placement, r.LiveNodes(), keys)
}
