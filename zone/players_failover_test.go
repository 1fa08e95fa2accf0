package zone_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// The one-player rule across a zone node's failover (issue 30), on the
// runtime's gateway role with no gateway: four nodes of the reference
// game in memory, eight players standing at region corners and walking
// about, each logged in on one node. A node that simulates a master dies:
// it stops (its lease runs on for a drawn while, as a dead process's
// does), then its lease ends and the failover table gives its regions to
// their standbys. Meanwhile the clients whose gateway it was resume on a
// live node (a new session), and about half of the others log out and in
// again on another node. After every step no account has more than its
// master and its pet in the world, and at the end every account has
// both (once none is in a handoff).
//
// This harness found the demo's player twice (a login's wait for a
// standby's records that never ended, ckptplayers.go: 21 of the 998
// seeds of the long sweep broke the rule that way, none since) and a
// pet left behind by a logout right after the failover (an intent's
// route to a dead node's entity, intentfate.go's heirs: 2 of the 998).
// Short mode runs two seeds of each; SHARDWISE_LONG=1 runs 1…1000 but
// the known breaks below (none now); SHARDWISE_SEED replays one seed (a
// known one included).

// playerFailoverKnown are seeds of the long sweep that still break the
// rule, for reasons not fixed yet. SHARDWISE_BREAKER_KNOWN=1 runs them
// (TestPlayersAcrossAFailoverKnown).
var playerFailoverKnown = map[uint64]string{}

// playerFailoverShort are short mode's seeds: two of the 21 of the long
// sweep that broke the rule before the fix of a login's wait (4
// entities of one account), and the two whose pet outlived its master's
// logout before intents found the heir of a dead node's entity (below).
var playerFailoverShort = []uint64{96, 154, 516, 652}

// Seeds 516 and 652 are where a logout right after the failover, of a
// player whose master and pet two nodes adopted, left the pet in the
// world: the master's node sent the pet a Dismiss whose route led to the
// dead node (a went record of its ghost), held it, and dropped it after
// FenceHold, seeing no ghost of the pet from its adopter (seed 652: the
// pet stands 0.8 m past the border into the master's node's region,
// within the handoff margin, where that node receives nothing; in seed
// 516 the band's re-plan alone brings its ghost back). Three
// entities of the account then. The Dismiss now goes to the pet's heir,
// the node whose adoption query named it (intentfate.go), and the
// re-plan covers the band; TestPlayersAcrossAFailoverHeirBites plants
// both back.

func TestPlayersAcrossAFailover(t *testing.T) {
	t.Parallel()
	seeds, replay := playerFailoverShort, false
	switch {
	case os.Getenv("SHARDWISE_SEED") != "":
		s, err := strconv.ParseUint(os.Getenv("SHARDWISE_SEED"), 10, 64)
		if err != nil {
			t.Fatalf("SHARDWISE_SEED: %v", err)
		}
		seeds, replay = []uint64{s}, true
	case os.Getenv("SHARDWISE_LONG") == "1":
		seeds = nil
		for s := uint64(1); s <= 1000; s++ {
			if _, known := playerFailoverKnown[s]; !known {
				seeds = append(seeds, s)
			}
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d (replay: SHARDWISE_SEED=%d go test -run 'TestPlayersAcrossAFailover$' ./zone/)", seed, seed)
			if err := playersAcrossAFailover(t, seed, replay, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPlayersAcrossAFailoverKnown(t *testing.T) {
	if os.Getenv("SHARDWISE_BREAKER_KNOWN") == "" {
		t.Skip("known breaks of the one-player rule across a failover; SHARDWISE_BREAKER_KNOWN=1 runs them")
	}
	for _, seed := range slices.Sorted(func(yield func(uint64) bool) {
		for s := range playerFailoverKnown {
			if !yield(s) {
				return
			}
		}
	}) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if err := playersAcrossAFailover(t, seed, false, ""); err != nil {
				t.Errorf("still breaks (%s): %v", playerFailoverKnown[seed], err)
			}
		})
	}
}

// TestPlayersAcrossAFailoverHeirBites plants the two fixes of seeds 516
// and 652 back and requires the harness to catch
// each: "noheir" (an intent for a dead node's entity waits for a ghost,
// never goes to the node whose adoption query named it) breaks 652, where
// the pet stands where its master's node receives nothing; with
// "nobandreplan" too (the failover table's re-plan leaves out the band
// chunks whose only simulator died) 516 breaks, where the pet stands in
// that node's band.
func TestPlayersAcrossAFailoverHeirBites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		seed  uint64
		plant string
	}{{652, "noheir"}, {516, "noheir,nobandreplan"}} {
		t.Run(fmt.Sprint(tc.seed), func(t *testing.T) {
			err := playersAcrossAFailover(t, tc.seed, false, tc.plant)
			if err == nil {
				t.Fatalf("seed %d: the planted %s went unseen", tc.seed, tc.plant)
			}
			t.Logf("seed %d with %s planted: %v", tc.seed, tc.plant, err)
		})
	}
}

// failoverClient is one account's client: its session, on node, and
// what it does during the failover (at leaveAt it leaves, at joinAt it
// logs in again on joinOn; 0: never).
type failoverClient struct {
	a       account.ID
	node    string
	s       *fakeSession
	leaveAt uint64
	joinAt  uint64
	joinOn  string
}

// playersAcrossAFailover runs one seed; the error names the first breaks.
// verbose logs the failover's plan and every leave and login; plant
// lists known bugs (comma-separated) planted in every node
// (Runtime.Plant).
func playersAcrossAFailover(t *testing.T, seed uint64, verbose bool, plant string) error {
	rng := rand.New(rand.NewPCG(seed, 0x7715e))
	store := newSteppedStore()
	grid := cells.GridConfig{RegionEdge: 512}
	grid.World.Width, grid.World.Height = 2048, 2048
	gc := game.Config{Seed: seed, NoBots: true, RegionEdge: 512}
	gc.Torus.Width, gc.Torus.Height = 2048, 2048
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 4, Memory: true, Grid: grid, Seed: seed,
		Module:  func(int, string) (zone.Module, error) { return game.NewModule(gc) },
		Runtime: func(_ int, rc *zone.Config) { rc.WorldStore = store },
	})
	t.Cleanup(func() { store.setOpen(true) }) // before the runtimes close: their savers drain
	names := []string{"zone-0", "zone-1", "zone-2", "zone-3"}
	sessions := map[string]*zone.Sessions{}
	for _, n := range names {
		for bug := range strings.FieldsFuncSeq(plant, func(r rune) bool { return r == ',' }) {
			c.Node(n).Runtime.Plant(bug)
		}
		s, err := c.Node(n).Runtime.Sessions()
		if err != nil {
			return err
		}
		sessions[n] = s
	}
	geo := c.Node("zone-0").Runtime.Geometry()
	epoch := uint64(1000)
	newSession := func(a account.ID) *fakeSession {
		epoch += 1 + uint64(rng.IntN(3))
		return &fakeSession{account: a, epoch: epoch}
	}
	var clients []*failoverClient
	for i := range 8 {
		a := account.ID(100 + i)
		corner := torus.Pos{X: float64(512 * rng.IntN(4)), Y: float64(512 * rng.IntN(4))}
		at := geo.Translate(corner, torus.Pos{X: rng.Float64()*40 - 20, Y: rng.Float64()*40 - 20})
		if err := store.SavePlayer(context.Background(), worldstore.Player{Account: a, Epoch: 1, Pos: at}); err != nil {
			return err
		}
		cl := &failoverClient{a: a, node: names[rng.IntN(len(names))], s: newSession(a)}
		if err := sessions[cl.node].Join(cl.s); err != nil {
			return err
		}
		clients = append(clients, cl)
	}

	down := map[string]bool{} // stopped (halted, then killed): not counted
	killed := ""
	var tick uint64
	var breaks []string
	count := func() map[account.ID]int {
		n := map[account.ID]int{}
		for _, name := range names {
			if down[name] {
				continue
			}
			rt := c.Node(name).Runtime
			rt.Owners().Each(func(id ecs.ID, o *zone.Owner) {
				if o.Session != 0 && rt.Simulated(id) {
					n[o.Account]++
				}
			})
		}
		return n
	}
	step := func() {
		tick++
		// The store answers between the steps only, and every node's
		// saver has answered before the next: its answers land at the
		// same tick in every run.
		store.setOpen(true)
		for _, n := range names {
			if n != killed {
				c.Node(n).Runtime.SaverBarrier()
			}
		}
		store.setOpen(false)
		c.Step()
		for a, n := range count() {
			if n > 2 && len(breaks) < 5 {
				breaks = append(breaks, fmt.Sprintf("tick %d: account %d has %d entities in the world", tick, a, n))
			}
		}
	}
	walk := func() {
		for _, cl := range clients {
			if cl.s == nil || cl.s.master == 0 || down[cl.node] || rng.IntN(10) != 0 {
				continue
			}
			for _, n := range names {
				if down[n] {
					continue
				}
				if p, ok := c.Node(n).Runtime.Positions().Get(ecs.ID(cl.s.master)); ok {
					dest := geo.Translate(p.Pos, torus.Pos{X: rng.Float64()*40 - 20, Y: rng.Float64()*40 - 20})
					_ = sessions[cl.node].Input(cl.s, clientinput.Input{Seq: uint32(tick), Entity: cl.s.master, Kind: game.InputMove, Point: dest, HasPoint: true})
					break
				}
			}
		}
	}
	for range 60 + rng.IntN(60) {
		walk()
		step()
	}

	// The victim simulates a master.
	victim := ""
	for _, n := range names {
		for _, cl := range clients {
			if c.Node(n).Runtime.Simulated(ecs.ID(cl.s.master)) {
				victim = n
			}
		}
		if victim != "" && rng.IntN(2) == 0 {
			break
		}
	}
	if victim == "" {
		return fmt.Errorf("no node simulates a master after %d ticks", tick)
	}
	live := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == victim })
	table := c.Node(live[0]).Runtime.Table()
	killAt, lease := tick, uint64(rng.IntN(100))
	failoverAt := killAt + lease + uint64(rng.IntN(20))
	c.Halt(victim)
	down[victim] = true
	c.Node(victim).Runtime.AbandonSessions()
	for _, cl := range clients {
		switch {
		case cl.node == victim:
			// Its socket closed: it resumes on a live node.
			cl.joinAt = killAt + uint64(rng.IntN(int(lease)+40))
			cl.joinOn = live[rng.IntN(len(live))]
		case rng.IntN(2) == 0:
			// It logs out and in again on another node.
			cl.leaveAt = killAt + uint64(rng.IntN(int(lease)+40))
			cl.joinAt = cl.leaveAt + uint64(rng.IntN(30))
			others := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == cl.node })
			cl.joinOn = others[rng.IntN(len(others))]
		}
	}
	if verbose {
		t.Logf("%s stops at tick %d, its lease ends at %d, the failover table at %d", victim, killAt, killAt+lease, failoverAt)
	}
	// A planted run (a bite) needs one break only: it ends at the first
	// (the two bites break 250–300 ticks in, of about 540).
	for tick < failoverAt+400 && (plant == "" || len(breaks) == 0) {
		if tick == killAt+lease {
			store.setOpen(true) // its saver drains as it closes
			c.Kill(victim)
			store.setOpen(false)
			killed = victim
		}
		if tick == failoverAt {
			next, _, err := zone.PlanFailover(table, live, []string{victim})
			if err != nil {
				return err
			}
			c.Apply(next)
		}
		for _, cl := range clients {
			if cl.leaveAt != 0 && tick == cl.leaveAt {
				if verbose {
					t.Logf("tick %d: account %d leaves %s (session %d)", tick, cl.a, cl.node, cl.s.epoch)
				}
				sessions[cl.node].Leave(cl.s)
				cl.s = nil
			}
			if cl.joinAt != 0 && tick == cl.joinAt {
				cl.s, cl.node = newSession(cl.a), cl.joinOn
				if verbose {
					t.Logf("tick %d: account %d logs in on %s (session %d)", tick, cl.a, cl.node, cl.s.epoch)
				}
				if err := sessions[cl.node].Join(cl.s); err != nil {
					return err
				}
			}
		}
		walk()
		step()
	}
	if len(breaks) > 0 && plant != "" {
		return fmt.Errorf("%s died at tick %d:\n%s", victim, killAt, strings.Join(breaks, "\n"))
	}
	// At the end every account has its master and pet, once none is in
	// a handoff (frozen on its source, not yet taken by its target).
	n := count()
	for range 20 {
		if !slices.ContainsFunc(clients, func(cl *failoverClient) bool { return n[cl.a] < 2 }) {
			break
		}
		step()
		n = count()
	}
	for _, cl := range clients {
		if n[cl.a] != 2 && len(breaks) < 10 {
			breaks = append(breaks, fmt.Sprintf("the end (tick %d): account %d has %d entities in the world, want its master and pet", tick, cl.a, n[cl.a]))
		}
	}
	if len(breaks) > 0 {
		return fmt.Errorf("%s died at tick %d:\n%s", victim, killAt, strings.Join(breaks, "\n"))
	}
	return nil
}

// steppedStore is the world store answering only while open: the test
// opens it between the cluster's steps, so that a load or save a node
// queues during a step is answered before the next one, never during a
// step (its answer would land a tick early or not, as the goroutines
// race).
type steppedStore struct {
	*worldstore.Memory
	mu   sync.Mutex
	cond *sync.Cond
	open bool
}

func newSteppedStore() *steppedStore {
	s := &steppedStore{Memory: worldstore.NewMemory(nil), open: true}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *steppedStore) setOpen(open bool) {
	s.mu.Lock()
	s.open = open
	s.mu.Unlock()
	s.cond.Broadcast()
}

func (s *steppedStore) wait() {
	s.mu.Lock()
	for !s.open {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

func (s *steppedStore) LoadPlayer(ctx context.Context, a account.ID) (worldstore.Player, error) {
	s.wait()
	return s.Memory.LoadPlayer(ctx, a)
}

func (s *steppedStore) SavePlayer(ctx context.Context, p worldstore.Player) error {
	s.wait()
	return s.Memory.SavePlayer(ctx, p)
}
