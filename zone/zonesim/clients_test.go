package zonesim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/torus"
)

// sightNaive is client.sight as first written: every entity, every
// tick. TestSightMatchesNaive holds the fast one to it.
func (c *client) sightNaive(tick uint64, geo torus.World, ids []ecs.ID, chunks []torus.ChunkPos, ok []bool, calm bool) {
	defer func() { c.vanished = c.vanished[:0] }()
	if c.in == nil {
		c.in, c.out = make([]int32, len(ids)), make([]int32, len(ids))
	}
	vi := index(ids, c.viewer)
	if vi < 0 || !ok[vi] {
		return
	}
	vc := chunks[vi]
	for _, e := range c.vanished {
		if i := index(ids, ecs.ID(e)); i >= 0 && ok[i] && !c.isShown(e) && geo.ChunkDistance(vc, chunks[i]) <= deepInside {
			c.fail(tick, e, "entity %d vanished %d chunks from the viewer: a blink", e, geo.ChunkDistance(vc, chunks[i]))
		}
	}
	if vc == c.vchunk {
		c.still++
	} else {
		c.vchunk, c.still = vc, 0
	}
	still := calm && c.still >= stillTicks
	for i, id := range ids {
		if !ok[i] || !calm {
			c.in[i], c.out[i] = 0, 0
			continue
		}
		d := geo.ChunkDistance(vc, chunks[i])
		if d > radius && d < beyond {
			c.in[i], c.out[i] = 0, 0
			continue
		}
		e := uint64(id)
		shown := c.isShown(e)
		if !shown && (d <= inside || still && d <= radius) {
			c.in[i]++
		} else {
			c.in[i] = 0
		}
		if shown && still && d >= beyond {
			c.out[i]++
		} else {
			c.out[i] = 0
		}
		if c.in[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and was not shown for %d ticks", e, d, c.in[i])
		}
		if c.out[i] >= missingTicks {
			c.fail(tick, e, "entity %d stands %d chunks from the viewer and is still shown after %d ticks: a zombie", e, d, c.out[i])
		}
	}
}

// TestSightMatchesNaive: the sight that visits only the entities near
// the viewer, shown or counting keeps the same counts and reports the
// same first breach as the one that visits every entity, tick by tick,
// over random walks, shows, vanishes and calm spells, on a world wider
// than the view and on one narrower (the view wraps onto itself).
// SHARDWISE_SEED=N replays seed N.
func TestSightMatchesNaive(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if s, replay, err := Seeds(); err != nil {
		t.Fatal(err)
	} else if replay {
		seeds = s
	}
	breaches, zombies := 0, 0
	for _, seed := range seeds {
		for _, size := range []int{256, 640} {
			t.Run(fmt.Sprintf("seed=%d/world=%d", seed, size), func(t *testing.T) {
				geo, err := torus.New(torus.Config{Width: size, Height: size - 64, ChunkEdge: 32})
				if err != nil {
					t.Fatal(err)
				}
				b, z := checkSightAgainstNaive(t, seed, geo)
				breaches, zombies = breaches+b, zombies+z
			})
		}
	}
	// The guard: the walks broke the properties and ran zombie counts, so
	// the comparison compared something.
	if !t.Failed() && (breaches == 0 || zombies == 0) {
		t.Fatalf("%d breaches and %d zombie counts over the walks: they test nothing", breaches, zombies)
	}
}

// checkSightAgainstNaive runs one walk and returns how many ticks the
// naive sight found a breach at and how many zombie counts it kept.
func checkSightAgainstNaive(t *testing.T, seed uint64, geo torus.World) (breaches, zombies int) {
	t.Logf("seed %d (replay: SHARDWISE_SEED=%d go test -run TestSightMatchesNaive ./zone/zonesim)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5167))
	const n = 150
	ids := make([]ecs.ID, n)
	for i := range ids {
		ids[i], _ = wander.ID(i)
	}
	chunks := make([]torus.ChunkPos, n)
	ok := make([]bool, n)
	for i := range chunks {
		chunks[i] = torus.ChunkPos{X: int32(rng.IntN(geo.ChunksX())), Y: int32(rng.IntN(geo.ChunksY()))}
		ok[i] = true
	}
	// fast files the entities by column, scan scans them (columns.near's
	// two ways).
	fast, scan, naive := newClient(account.ID(1), 0), newClient(account.ID(1), 0), newClient(account.ID(1), 0)
	var visit bitset
	cols := columns{scanBelow: 0}
	scanCols := columns{scanBelow: 1 << 30}
	filed := 0
	calm := true
	for tick := uint64(1); tick <= 400; tick++ {
		// Entities walk a chunk at times (the viewer less often, so that
		// it stands still long enough for the still checks), drop out of
		// the truth and come back, and are shown and vanished at random.
		for i := range chunks {
			p := 0.3
			if i == 0 {
				p = 0.05
			}
			if rng.Float64() >= p {
				continue
			}
			chunks[i] = geo.NormaliseChunk(torus.ChunkPos{X: chunks[i].X + int32(rng.IntN(3)-1), Y: chunks[i].Y + int32(rng.IntN(3)-1)})
		}
		for i := range ok {
			if rng.Float64() < 0.01 {
				ok[i] = !ok[i]
			}
		}
		ok[0] = ok[0] || rng.Float64() < 0.5
		for range 4 {
			e := uint64(ids[rng.IntN(n)])
			if fast.isShown(e) {
				for _, c := range []*client{fast, scan, naive} {
					c.setShown(e, false)
					c.vanished = append(c.vanished, e)
				}
			} else {
				for _, c := range []*client{fast, scan, naive} {
					c.setShown(e, true)
				}
			}
		}
		if rng.Float64() < 0.03 {
			calm = !calm
		}
		cols.reset(geo, chunks, ok)
		scanCols.reset(geo, chunks, ok)
		fast.sight(tick, geo, ids, chunks, ok, &cols, calm, nil, &visit)
		scan.sight(tick, geo, ids, chunks, ok, &scanCols, calm, nil, &visit)
		naive.sightNaive(tick, geo, ids, chunks, ok, calm)
		if scanCols.built {
			t.Fatalf("tick %d: the scanning sight filed the entities", tick)
		}
		if cols.built {
			filed++
		}
		for _, f := range []*client{fast, scan} {
			if fmt.Sprint(f.bad) != fmt.Sprint(naive.bad) {
				t.Fatalf("tick %d: breach %v, the naive sight's %v", tick, f.bad, naive.bad)
			}
		}
		if naive.bad != nil {
			breaches++
		}
		for i := range ids {
			if naive.out[i] > 0 {
				zombies++
			}
			for _, f := range []*client{fast, scan} {
				if f.in[i] != naive.in[i] || f.out[i] != naive.out[i] {
					t.Fatalf("tick %d, entity %d: counts in %d out %d, the naive sight's in %d out %d", tick, ids[i], f.in[i], f.out[i], naive.in[i], naive.out[i])
				}
			}
		}
		// A breach sticks (the first is reported): start again to go on
		// comparing.
		fast.bad, scan.bad, naive.bad = nil, nil, nil
	}
	if filed == 0 {
		t.Fatal("the filing sight never filed the entities")
	}
	return breaches, zombies
}
