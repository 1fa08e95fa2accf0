package sim_test

import (
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// playCluster is a zonetest cluster of the reference game with a gateway
// on every node, one directory, one token issuer and one world store (a
// world, play_test.go): the setup of the bot tests.
type playCluster struct {
	*zonetest.Cluster
	URLs  []string
	Store *worldstore.Memory
	w     *world
}

// startPlayCluster starts nodes nodes of the game gc over an 8 km torus
// of 2 km regions (zone-0 owns the rows north of y = 0, zone-1 those
// south of it), serves a gateway on each, and steps the cluster every
// 5 ms until the test ends.
func startPlayCluster(t *testing.T, nodes int, gc game.Config) *playCluster {
	t.Helper()
	return startPlayClusterWith(t, nodes, gc, nil)
}

// startPlayClusterWith is startPlayCluster with mod adjusting the
// zonetest configuration (world.cluster).
func startPlayClusterWith(t *testing.T, nodes int, gc game.Config, mod func(*zonetest.Config)) *playCluster {
	t.Helper()
	w := newWorld(t)
	c := w.cluster(nodes, gc, mod)
	pc := &playCluster{Cluster: c, Store: w.store, w: w}
	for _, n := range c.Nodes {
		pc.URLs = append(pc.URLs, w.serve(n.Runtime, directory.NodeID(n.Number)))
	}
	runSteps(t, c.Step)
	return pc
}

// Token issues a login token for a, as a bot's token source.
func (pc *playCluster) Token(a account.ID) (string, error) {
	tok, _, err := pc.w.issuer.Issue(a, gateway.Audience)
	return tok, err
}

// PlayerStats sums the nodes' player counters, each read on its world
// goroutine.
func (pc *playCluster) PlayerStats() zone.PlayerStats {
	var sum zone.PlayerStats
	for _, n := range pc.Nodes {
		ch := make(chan zone.PlayerStats, 1)
		n.Runtime.Post(func() { ch <- n.Runtime.PlayerStats() })
		s := <-ch
		sum.Joined += s.Joined
		sum.Spawned += s.Spawned
		sum.TakenOver += s.TakenOver
		sum.Inputs += s.Inputs
		sum.StaleSession += s.StaleSession
		sum.Saved += s.Saved
		sum.SaveErrors += s.SaveErrors
		sum.Removed += s.Removed
		sum.AwaitedSaves += s.AwaitedSaves
	}
	return sum
}

// HandoffStats sums the nodes' handoff counters, each read on its world
// goroutine.
func (pc *playCluster) HandoffStats() zone.HandoffStats {
	var sum zone.HandoffStats
	for _, n := range pc.Nodes {
		ch := make(chan zone.HandoffStats, 1)
		n.Runtime.Post(func() { ch <- n.Runtime.HandoffStats() })
		sum = sum.Plus(<-ch)
	}
	return sum
}

// runSteps runs step every 5 ms on its own goroutine until the test
// ends: the world's clock (ten times the game's 20 Hz), not a
// synchronisation (tests wait on what clients see).
//
// Every test that starts a cluster calls t.Parallel: the package's tests
// spend most of their wall time waiting for these ticks (about 40 s of
// CPU in 107 s under -race on an idle 2-core machine), so two at a time
// (go test's -parallel, GOMAXPROCS by default) about halve its wall time.
// A test waits for ticks and for what clients see, with deadlines far
// above what it needs, and its leases (6 s for a zone node, 2 s for an
// economy node) are renewed off the tick, so a busier core only slows it.
func runSteps(t *testing.T, step func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				step()
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}
