package game

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonetest"
)

// twoNodes runs the reference game on two nodes: an 8 km torus in 2 km
// regions, zone-0 owning the rows y < 4096 and zone-1 the rows above, so
// that y = 4096 is a border between them (and y = 0 another, across the
// seam).
func twoNodes(t *testing.T, cfg Config) (*zonetest.Cluster, *Game, *Game) {
	t.Helper()
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	cfg.Torus, cfg.RegionEdge = grid.World, 2048
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 2, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return NewModule(cfg) },
	})
	return c, c.Nodes[0].Module.(*Game), c.Nodes[1].Module.(*Game)
}

// player spawns account's master (and pet) at p on g, before a tick. The
// game logs in accounts 1…Players at their homes itself: tests use others.
func (g *Game) player(t *testing.T, a account.ID, p torus.Pos) ecs.ID {
	t.Helper()
	id, err := g.spawnPlayer(a, p)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAMobFoughtFromTwoNodes: a mob standing on zone-0 at the border is
// attacked by a player simulated on zone-1 (a simulation ghost there)
// and then by one on zone-0. Its owner keeps one damage table with both;
// it fights back across the border (its attacks reach the remote player's
// health on zone-1: aggro does not end at the border); when it dies, both
// attackers' masters get the kill credit on their own nodes.
func TestAMobFoughtFromTwoNodes(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 7, DenChance: noDens, Roam: 0.1})
	border := 4096.0
	mob, ok := a.spawnMob(a.w, 0, torus.Pos{X: 1000, Y: border - 1.5})
	if !ok {
		t.Fatal("mob not spawned")
	}
	remote := b.player(t, 102, torus.Pos{X: 1000, Y: border + 1.5})
	// Tick 1 subscribes the band, tick 2 answers with snapshots, tick 3
	// applies them.
	c.StepSync(3)
	if !a.r.Ghosts().Has(remote) {
		t.Fatal("the remote player is no simulation ghost on the mob's node")
	}
	if !b.r.Ghosts().Has(mob) {
		t.Fatal("the mob is no simulation ghost on the remote player's node")
	}

	// Phase 1: only the remote player fights.
	startHP := b.hp(remote)
	chasedRemote := false
	for range 200 {
		c.StepSync(1)
		if m, ok := a.c.mob.Get(mob); ok && m.State == Chasing && m.Target == remote {
			chasedRemote = true
		}
		if b.hp(remote) < startHP {
			break
		}
	}
	if !chasedRemote {
		t.Fatal("the mob never took the remote attacker as its target")
	}
	if b.hp(remote) >= startHP {
		t.Fatalf("the mob's attacks never reached the remote player (hp %d)", b.hp(remote))
	}
	if th, ok := b.c.threat.Get(mob); ok {
		t.Fatalf("the ghost side keeps a damage table too: %+v", th)
	}

	// Phase 2: a local player joins; the mob dies with both in its table.
	local := a.player(t, 101, torus.Pos{X: 1000, Y: border - 4})
	var table Threat
	for i := 0; a.w.Alive(mob); i++ {
		if i > 400 {
			t.Fatalf("the mob still lives after %d ticks (hp %d, table %+v)", i, a.hp(mob), table)
		}
		if th, ok := a.c.threat.Get(mob); ok {
			table = *th
		}
		c.StepSync(1)
	}
	attackers := map[ecs.ID]bool{}
	for _, e := range table.Slots {
		if e.Source != 0 {
			attackers[e.Source] = true
		}
	}
	if !attackers[remote] || !attackers[local] {
		t.Fatalf("damage table %+v lacks one attacker (remote %d, local %d)", table, remote, local)
	}
	// The credit reaches both masters, each on its own node.
	c.StepSync(3)
	if e, _ := a.c.exp.Get(local); e.Points < killExp {
		t.Fatalf("local killer has %d exp, want at least %d", e.Points, killExp)
	}
	if e, _ := b.c.exp.Get(remote); e.Points < killExp {
		t.Fatalf("remote killer has %d exp, want at least %d", e.Points, killExp)
	}
	if st := a.r.ClusterStats(); st.IntentsDropped != 0 {
		t.Fatalf("%d intents dropped on the mob's node", st.IntentsDropped)
	}
}

// TestBorderDensHaveOneOwner: dens near a border are created only by the
// owner of their column's region, with the id the column derives; the
// other node sees them (and their mobs) as ghosts with the same ids and
// creates none of its own.
func TestBorderDensHaveOneOwner(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 11, DenChance: 0.5, Roam: 20})
	border := 4096.0
	// A player on each side keeps the columns around the border resident
	// on both nodes, and near enough to the dens for them to stock.
	a.player(t, 101, torus.Pos{X: 2000, Y: border - 10})
	b.player(t, 102, torus.Pos{X: 2000, Y: border + 10})
	c.StepSync(80)
	table := a.r.Table()
	seen := 0
	for _, g := range []*Game{a, b} {
		g.c.den.Each(func(id ecs.ID, d *Den) {
			col := torus.ChunkPos{X: d.Column.X, Y: d.Column.Y}
			if owner := table.OwnerOfChunk(col); owner != g.r.Name() {
				t.Errorf("%s created den %d of column %v, owned by %s", g.r.Name(), id, d.Column, owner)
			}
			if want, _ := g.denID(d.Column); id != want {
				t.Errorf("den of %v has id %d, want the derived %d", d.Column, id, want)
			}
			other := a
			if g == a {
				other = b
			}
			if other.c.den.Has(id) {
				t.Errorf("den %d exists on both nodes", id)
			}
			if _, ok := other.r.ChunkOf(id); ok {
				seen++
			}
			for _, m := range d.Mobs {
				if other.r.Simulated(m) {
					t.Errorf("mob %d of den %d is simulated on both nodes", m, id)
				}
			}
		})
	}
	if seen == 0 {
		t.Fatal("no den was seen across the border: the test exercises nothing")
	}
}

// TestRegionMoveMovesDens: when the operator moves a region between
// running nodes, the node that lost it tears down its dens and the node
// that gained it sets them up, under the same derived ids.
func TestRegionMoveMovesDens(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 5, DenChance: 0.5, Roam: 20})
	border := 4096.0
	at := torus.Pos{X: 3000, Y: border - 40}
	a.player(t, 101, at)
	b.player(t, 102, torus.Pos{X: 3000, Y: border + 40})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	// The dens a's client sees: after the move a's node subscribes to
	// their chunks on b, which keeps them resident there. (A den nobody
	// is near is resident nowhere once its region moves.)
	before := map[ecs.ID]bool{}
	a.c.den.Each(func(id ecs.ID, d *Den) {
		col := torus.ChunkPos{X: d.Column.X, Y: d.Column.Y}
		if c.Grid.RegionOfChunk(col) == moved && a.geo.ChunkDistance(col, a.geo.ChunkOf(at)) <= 3 {
			before[id] = true
		}
	})
	if len(before) == 0 {
		t.Fatal("no den in the region to move: the test exercises nothing")
	}
	next, err := a.r.Table().WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next)
	c.StepSync(5)
	for id := range before {
		if a.c.den.Has(id) {
			t.Errorf("den %d stays on the node that lost its region", id)
		}
		if !b.c.den.Has(id) {
			t.Errorf("den %d was not set up by the node that gained its region", id)
		}
	}
}

// TestAMovedRegionsDensNeverRunOnTwoNodes: the node that gains a region
// sets up its dens only once the node that lost it shows (in its fences)
// that it follows the new table, so it has torn them down: a den, whose id
// its column derives, is never simulated by both. The gaining node steps
// first and alone, several times, before the losing node takes the new
// table into its columns: without the wait it would set the dens up at once.
func TestAMovedRegionsDensNeverRunOnTwoNodes(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 5, DenChance: 0.5, Roam: 20})
	border := 4096.0
	at := torus.Pos{X: 3000, Y: border - 40}
	a.player(t, 101, at)
	b.player(t, 102, torus.Pos{X: 3000, Y: border + 40})
	c.StepSync(20)
	moved := c.Grid.RegionOf(at)
	dens := func(g *Game) map[ecs.ID]bool {
		m := map[ecs.ID]bool{}
		g.c.den.Each(func(id ecs.ID, d *Den) {
			col := torus.ChunkPos{X: d.Column.X, Y: d.Column.Y}
			if c.Grid.RegionOfChunk(col) == moved && g.r.Simulated(id) {
				m[id] = true
			}
		})
		return m
	}
	before := dens(a)
	if len(before) == 0 {
		t.Fatal("no den in the region to move: the test exercises nothing")
	}
	check := func(when string) {
		t.Helper()
		onB := dens(b)
		for id := range dens(a) {
			if onB[id] {
				t.Fatalf("%s: den %d is simulated by both nodes", when, id)
			}
		}
	}
	next, err := a.r.Table().WithOwners(2, map[cells.RegionID]string{moved: b.r.Name()})
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(next) // both hold it; neither has stepped with it
	for i := range 5 {
		b.r.Step()
		c.Sync(10 * time.Second)
		check(fmt.Sprintf("gainer's step %d", i+1))
	}
	if len(dens(b)) != 0 {
		t.Fatal("the gaining node set up the dens before the losing node let go")
	}
	for i := range 3 {
		a.r.Step()
		c.Sync(10 * time.Second)
		check(fmt.Sprintf("loser's step %d", i+1))
		b.r.Step()
		c.Sync(10 * time.Second)
		check(fmt.Sprintf("gainer's step %d after the loser's", i+1))
	}
	for id := range before {
		if !dens(b)[id] {
			t.Errorf("den %d was not set up by the node that gained its region", id)
		}
	}
}

// TestALeavingPlayersPetOnAnotherNodeGoes: a player leaves while its pet
// stands on another node (past the margin of a border its master has not
// crossed): the pet's node removes the pet too, rather than keeping it in
// the world with no master.
func TestALeavingPlayersPetOnAnotherNodeGoes(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 5, DenChance: noDens})
	border := 4096.0
	master := a.player(t, 103, torus.Pos{X: 3000, Y: border - 5})
	m, _ := a.c.master.Get(master)
	pet := m.Pet
	p, _ := a.c.pos.Get(pet)
	p.Pos = torus.Pos{X: 3000, Y: border + 40} // past zone-1's margin
	a.r.Reindex(pet)
	stepUntilSim(t, c, 10*time.Second, "the pet handed to zone-1", func() bool { return b.r.Simulated(pet) && a.r.Simulated(master) })
	a.removePlayer(master)
	stepUntilSim(t, c, 10*time.Second, "the pet gone from zone-1", func() bool { return !b.r.World().Alive(pet) || b.r.Ghosts().Has(pet) })
	if b.c.pet.Has(pet) && b.r.Simulated(pet) {
		t.Fatal("the pet is still simulated on zone-1")
	}
}

// stepUntilSim steps c in lockstep until cond holds, or fails after limit.
func stepUntilSim(t *testing.T, c *zonetest.Cluster, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		c.StepSync(1)
	}
}

// TestIntentsFromTwoNodesInOneTickApplyOnce: two attackers on two nodes
// hit one mob in the same tick; its owner applies each hit exactly once
// and its one damage table records both.
func TestIntentsFromTwoNodesInOneTickApplyOnce(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 3, DenChance: noDens, Roam: 0.1})
	border := 4096.0
	mob, _ := a.spawnMob(a.w, 0, torus.Pos{X: 1000, Y: border - 1.5})
	local := a.player(t, 101, torus.Pos{X: 1000, Y: border - 60}) // out of the mob's notice
	remote := b.player(t, 102, torus.Pos{X: 1000, Y: border + 60})
	c.StepSync(3)
	if !b.r.Ghosts().Has(mob) {
		t.Fatal("the mob is no simulation ghost on the remote node")
	}
	hp := a.hp(mob)
	const hit = 5
	a.send(Damage, local, mob, hit)
	b.send(Damage, remote, mob, hit)
	c.StepSync(3)
	if got := a.hp(mob); got != hp-2*hit {
		t.Fatalf("mob hp %d after two hits of %d from %d, want %d (each applied once)", got, hit, hp, hp-2*hit)
	}
	th, _ := a.c.threat.Get(mob)
	got := map[ecs.ID]int32{}
	for _, e := range th.Slots {
		got[e.Source] = e.Damage
	}
	if got[local] != hit || got[remote] != hit {
		t.Fatalf("damage table %+v, want %d from the local (%d) and the remote (%d) attacker", th, hit, local, remote)
	}
}

// TestAnEntityInsideTheMarginIsSeenWhereItStands: an entity simulated by
// zone-0 that stands past the border, inside the handoff margin, in a
// chunk zone-1 owns, is seen by zone-1's clients that hold that chunk:
// observers pull it from every node that may simulate an entity there.
func TestAnEntityInsideTheMarginIsSeenWhereItStands(t *testing.T) {
	c, a, b := twoNodes(t, Config{Seed: 9, DenChance: noDens, Roam: 0.1})
	border := 4096.0
	stray := a.player(t, 101, torus.Pos{X: 1000, Y: border + 20}) // in zone-1's region, 20 m past
	if owner := a.r.Table().OwnerOf(torus.Pos{X: 1000, Y: border + 20}); owner != b.r.Name() {
		t.Fatalf("the stray stands in %s's region, want %s's", owner, b.r.Name())
	}
	watcher := b.player(t, 102, torus.Pos{X: 1000, Y: border + 100})
	seen := &sink{}
	b.Attach(102, seen)
	c.StepSync(4)
	shown := false
	for _, m := range seen.msgs {
		if m.Kind == outbox.KindAppear && m.Entity == uint64(stray) {
			shown = true
		}
	}
	if !shown {
		t.Fatalf("zone-1's client (master %d) was never shown zone-0's entity %d standing in its chunk", watcher, stray)
	}
}

// TestAPartyOnThreeNodesCostsOneMessagePerNode: a party of four accounts
// on three nodes (one on zone-0, two on zone-1, one on zone-2); a change
// of the zone-0 member's health (a party component) costs zone-0 one
// forward to each other node, not one per member, and reaches every
// member's client.
func TestAPartyOnThreeNodesCostsOneMessagePerNode(t *testing.T) {
	grid := cells.GridConfig{RegionEdge: 2048}
	grid.World.Width, grid.World.Height = 8192, 8192
	cfg := Config{Seed: 1, DenChance: noDens, Roam: 0.1, Torus: grid.World, RegionEdge: 2048}
	c := zonetest.Start(t, zonetest.Config{
		Nodes: 3, Grid: grid,
		Module: func(int, string) (zone.Module, error) { return NewModule(cfg) },
	})
	party := func(dst []account.ID, owner account.ID) []account.ID {
		for a := account.ID(11); a <= 14; a++ {
			if a != owner {
				dst = append(dst, a)
			}
		}
		return dst
	}
	games := make([]*Game, 3)
	for i, n := range c.Nodes {
		games[i] = n.Module.(*Game)
		games[i].r.SetParty(party)
	}
	// A spot in each node's territory, far from the others.
	spot := func(name string) torus.Pos {
		for _, r := range games[0].r.Table().RegionsOf(name) {
			x0, y0, x1, y1 := c.Grid.Bounds(r)
			return torus.Pos{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}
		}
		t.Fatalf("%s owns no region", name)
		return torus.Pos{}
	}
	// Accounts 11–14: the game logs its own players (1–8) in at their
	// homes.
	home := map[account.ID]int{11: 0, 12: 1, 13: 1, 14: 2}
	sinks := map[account.ID]*sink{}
	masters := map[account.ID]ecs.ID{}
	for a := account.ID(11); a <= 14; a++ {
		g := games[home[a]]
		p := spot(g.r.Name())
		p.X += float64(a) * 10
		masters[a] = g.player(t, a, p)
		sinks[a] = &sink{}
		g.Attach(a, sinks[a])
	}
	c.StepSync(5) // views, routes, the first private sends
	before := games[0].r.ClusterStats().Forwards
	for _, s := range sinks {
		s.msgs = nil
	}
	games[0].send(Damage, 0, masters[11], 5)
	c.StepSync(3)
	if got := games[0].r.ClusterStats().Forwards - before; got != 2 {
		t.Fatalf("zone-0 sent %d forwards for one party update, want 2 (one per other node)", got)
	}
	for a, s := range sinks {
		saw := false
		for _, m := range s.msgs {
			saw = saw || (m.Kind == outbox.KindComponent && m.Entity == uint64(masters[11]) && m.Component == WireHealth)
		}
		if !saw {
			t.Errorf("account %d (on zone-%d) did not get its party member's health", a, home[a])
		}
	}
}

// TestAWalkerNearAnotherNodeIsResentEveryEighthStep: nodes do not animate
// the ghosts they keep, so a mob within the ghost band of another node's
// region has its position resent every 8th step of a straight walk, while
// one farther in, seen only by its own node's clients (which animate), is
// not resent at all. A client of zone-0 sees both.
func TestAWalkerNearAnotherNodeIsResentEveryEighthStep(t *testing.T) {
	c, a, _ := twoNodes(t, Config{Seed: 11, DenChance: noDens, Roam: 0.1, WanderChance: 1})
	border := 4096.0
	band := cells.DefaultBands(a.r.Grid()).Ghost
	near, ok1 := a.spawnMob(a.w, 0, torus.Pos{X: 1000, Y: border - band/4})
	far, ok2 := a.spawnMob(a.w, 0, torus.Pos{X: 1000, Y: border - band - 40})
	if !ok1 || !ok2 {
		t.Fatal("mobs not spawned")
	}
	a.player(t, 101, torus.Pos{X: 1000, Y: border - band*5/8 - 20}) // about 3 columns from each
	seen := &tickSink{}
	a.Attach(101, seen)
	c.StepSync(1000)
	resends, legs := map[uint64]int{}, map[uint64]int{}
	for _, b := range seen.batches {
		pos, path := map[uint64]bool{}, map[uint64]bool{}
		for _, m := range b {
			if m.Kind == outbox.KindComponent && m.Component == WirePosition {
				pos[m.Entity] = true
			}
			if m.Kind == outbox.KindComponent && m.Component == WirePath {
				path[m.Entity] = true
			}
		}
		for e := range pos {
			if !path[e] {
				resends[e]++
			}
		}
		for e := range path {
			legs[e]++
		}
	}
	if legs[uint64(near)] < 4 || legs[uint64(far)] < 4 {
		t.Fatalf("paths of the near mob %d, of the far one %d: they hardly walked", legs[uint64(near)], legs[uint64(far)])
	}
	t.Logf("near: %d paths, %d resends; far: %d paths, %d resends", legs[uint64(near)], resends[uint64(near)], legs[uint64(far)], resends[uint64(far)])
	// 1,000 ticks of walking at 2 m/s: over 100 resends at every 8th step.
	if n := resends[uint64(near)]; n < 80 {
		t.Errorf("the mob %.0f m from zone-1's region was resent %d times, want every 8th step", band/4, n)
	}
	if n := resends[uint64(far)]; n != 0 {
		t.Errorf("the mob %.0f m from zone-1's region was resent %d times, want none", band+40, n)
	}
}

// tickSink keeps each batch's frames apart.
type tickSink struct{ batches [][]outbox.Message }

func (s *tickSink) Deliver(_ uint64, frames [][]byte) {
	var batch []byte
	for _, f := range frames {
		batch = append(batch, f...)
	}
	var b []outbox.Message
	_ = outbox.DecodeBatch(batch, func(m outbox.Message) error {
		b = append(b, m)
		return nil
	})
	s.batches = append(s.batches, b)
}
