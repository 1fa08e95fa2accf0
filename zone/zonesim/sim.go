package zonesim

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/examples/wander"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Boot is the wall time every simulated node reads once at New: the same
// ids on every run.
var Boot = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config is one simulated run. Zero fields take the defaults documented
// on them.
type Config struct {
	// Seed draws everything: the module's wanderers, the faults and their
	// moments, every delivery.
	Seed uint64
	// Nodes is how many nodes share the world. Default 4.
	Nodes int
	// Ticks is how many ticks the run lasts. Default 200.
	Ticks int
	// Until, if above zero and below Ticks, ends the run after that tick:
	// the schedule and every draw stay those of a run of Ticks ticks, so a
	// regression replays the start of a long run's seed for a part of its
	// cost.
	Until int
	// UntilCalm ends the run once its scene is over, if that is before
	// Ticks and Until: the failover (Kill's recovery bound) and every
	// scheduled fault have ended, and the clients' calm checks have had
	// their window after the last of them (calmTicks + stillTicks +
	// missingTicks ticks: long enough to catch an entity not shown, or
	// one shown that is gone). As with Until, the schedule and every
	// draw stay those of a run of Ticks ticks; what a full run adds is
	// the steady state TestSimulation checks. The kill tests use it.
	UntilCalm bool
	// Grid is the world. Default 2048 m square, 512 m regions (4 × 4):
	// small, so that the interaction bands (every border's chunks) stay
	// few and a run costs milliseconds.
	Grid cells.GridConfig
	// Wander is the module every node runs; its Seed is Config.Seed.
	// Default: 48 wanderers of 12 accounts that roam 200 m around spawn
	// points in a 300 m square across the corner of four regions, at
	// 20 m/s, so that they cross borders every few seconds.
	Wander wander.Config
	// Faults are the network's. Default: 10 % drop, 5 % duplicate, 5 %
	// reorder, up to 2 ticks of delay.
	Faults *Faults
	// FourWays gives four nodes the four quadrants of the grid, so that
	// all four meet where the wanderers spawn (a handoff between two is
	// watched by a third), instead of cells.Uniform's rows (two nodes meet
	// there). Off in the short mode, whose traces stay as they were; its
	// 200 seeds all pass with it on since an owner's snapshot that leaves
	// out another source's ghost asks that source again (6 failed before:
	// a zombie on a third node cut from the taker of a region swap;
	// docs/decisions.md, "What clients see across a failover").
	FourWays bool
	// NoSchedule turns off the scheduled faults: a node lagging 1–10
	// ticks, a cut and heal between two nodes, a table change at a random
	// tick, and a lease lost near the end (each drawn from Seed).
	NoSchedule bool
	// NoLeaseLoss keeps every lease (the rest of the schedule stays).
	NoLeaseLoss bool
	// Runtime, if set, adjusts node i's runtime config before New.
	Runtime func(i int, rc *zone.Config)
	// Started, if set, is called with every runtime after New (a test
	// turns a broken variant on there).
	Started func(i int, r *zone.Runtime)
	// SlowControl, if above zero, delays every control message sent in a
	// window of 20–70 ticks drawn from the seed by that many ticks more
	// (Faults.SlowControl; the window counts as a fault for the clients'
	// checks). Off by default and in the short mode: it widens the window
	// in which a peer still counts a chunk as subscribed after this node
	// gave it up, so parkChunk's scene (bite_test.go) happens more often.
	SlowControl int
	// Intents, if above zero, is how many numbered intents the harness
	// sends a tick, each to a random wanderer from a random live node
	// that indexes it (intents.go), until IntentQuiet ticks before the
	// end; the run then requires every one applied at most once, and
	// every one not applied counted in a node's ClusterStats.IntentsDropped
	// (Result.IntentsMissing says how many), but those
	// whose target a lost lease took and those sent within IntentQuiet
	// ticks before a lease is lost (the lost node may hold them). With
	// Kill nothing is excused: the intents never applied are exactly
	// those the nodes count (IntentsDropped, IntentsAwaiting, and the dead
	// node's IntentsInFlight), up to those a confirmation lost with the
	// dead node leaves counted though applied (Result.IntentsCounted,
	// IntentsOverlap). Off by default: the short mode's traces are
	// unchanged.
	Intents int
	// IntentQuiet is how many ticks at the end of the run send no
	// intents, so that those in flight arrive. Default 60.
	IntentQuiet int
	// Trail keeps the network's trail of messages in the Result.
	Trail bool
	// NoChecks skips every property of every tick (the invariants, one
	// simulator, entities conserved, the clients' batches and sight, and
	// Check); the trace is still kept. It is for measuring the runtime
	// apart from the checks (BenchmarkSimulationRuntime4Nodes2000Entities):
	// a run with it proves nothing.
	NoChecks bool
	// Check, if set, runs after each tick's properties with the runtimes
	// (nil for a fenced node).
	Check func(tick uint64, rs []*zone.Runtime) error
	// Kill kills one node at a tick drawn from the seed (half the seeds
	// within a few ticks of the region swap, so in the middle of a region
	// move and its handoffs): it is not stepped again, it is cut from
	// every peer 0–3 ticks later (what it sent before stays on the wire
	// until then), its lease is lost KillTTL ticks after the kill, and
	// 1–3 ticks later the failover controller's table (zone.PlanFailover)
	// is installed by the live nodes, each 0–5 ticks after the other. The
	// scheduled lease loss is off. Properties: one simulator per entity at
	// every tick; by the recovery bound (Result.RecoverBy: the lease loss
	// plus 20 ticks with the default faults, plus twice the control
	// stream's extra delay (an adoption's query and answer), longer while
	// a cut or a lag of live nodes overlaps it: kill.go's recoverSpan)
	// every entity the dead node held is held by exactly one live node
	// again, none lost but in the one losable class (Result.Lost: the
	// dead node was cut from a peer before it died, and what its standby
	// there never received is gone); an entity restored from a
	// checkpoint stands within Speed × (CheckpointEvery + n) steps of
	// where the dead node last had it, n being the dead node's own steps
	// since the last tick whose control messages surely reached a
	// standby (kill.go's lostSteps), at an epoch above it.
	Kill bool
	// KillTTL is the dead node's lease TTL in ticks. Default 20 (1 s).
	KillTTL int
}

func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 4
	}
	if c.Ticks == 0 {
		c.Ticks = 200
	}
	if c.Grid == (cells.GridConfig{}) {
		c.Grid = cells.GridConfig{RegionEdge: 512}
		c.Grid.World.Width, c.Grid.World.Height = 2048, 2048
	}
	c.Grid = c.Grid.WithDefaults()
	if c.Wander == (wander.Config{}) {
		c.Wander = wander.Config{Entities: 48, Accounts: 12, Area: 300, Roam: 200, Speed: 20}
	}
	c.Wander.Seed = c.Seed
	if c.Faults == nil {
		c.Faults = &Faults{Drop: 0.1, Duplicate: 0.05, Reorder: 0.05, MaxDelay: 2}
	}
	if c.IntentQuiet == 0 {
		c.IntentQuiet = 60
	}
	if c.KillTTL == 0 {
		c.KillTTL = 20
	}
	return c
}

// Result is what a run did.
type Result struct {
	Seed  uint64
	Trace uint64 // the trace hash: every message sent and client batch delivered
	// Ticks is how many ticks ran before the end or the first breach.
	Ticks int
	// Handoffs counts the handoffs acknowledged across the cluster.
	Handoffs int
	Net      NetStats
	// Events lists the scheduled faults, with their ticks.
	Events []string
	// IntentsSent counts the harness's intents (Config.Intents),
	// IntentsMissing those never applied (but those a lost lease may
	// have taken); IntentsDropped sums the nodes' ClusterStats.IntentsDropped.
	IntentsSent, IntentsMissing, IntentsDropped int
	// With Config.Kill, IntentsCounted is what the nodes count as not
	// delivered (dropped, held for a fenced node's entity at the end, and
	// the dead node's in flight when it died), and IntentsOverlap how
	// many intents applied once may be counted too (intentLog.checkKill).
	IntentsCounted, IntentsOverlap int
	// Trail is the network's, with Config.Trail.
	Trail []string
	// With Config.Kill: the node killed and the tick; the tick by which
	// its entities must be back (0 if the run ended first); how many came
	// back from a checkpoint (Restored), how many from a live node's
	// frozen copy or a transfer in flight (Handed), and how many were
	// lost, in the one class the property allows: the dead node was cut
	// from a peer (its standby) before it died.
	Killed              string
	KillTick, RecoverBy uint64
	Restored, Handed    int
	Lost                int
	CheckpointBytes     int // checkpoint payload bytes sent, over the nodes
	CheckpointsRestored int // entities the standbys created from records (CheckpointStats.Adopted)
}

// PropertyError is a property of the whole cluster broken at a tick.
type PropertyError struct {
	Seed     uint64
	Tick     uint64
	Property string
	Detail   string
}

func (e *PropertyError) Error() string {
	return fmt.Sprintf("zonesim: seed %d, tick %d: %s: %s", e.Seed, e.Tick, e.Property, e.Detail)
}

// schedule is the faults' moments, drawn from the seed.
type schedule struct {
	lagNode        int
	lagFrom, lagN  uint64 // skips lagN steps from lagFrom
	catchFrom      uint64 // then steps twice a tick lagN times from here
	cutA, cutB     int
	cutFrom, cutTo uint64
	tableAt        uint64
	tableDelay     []uint64 // per node: the ticks after tableAt it installs the new table
	swapA, swapB   cells.RegionID
	loseNode       int
	loseAt         uint64
	lossyFrom      uint64 // the lossy stream\'s faults run from here
	lossyTo        uint64 // to here
	slowFrom       uint64 // the control stream is slow from here
	slowTo         uint64 // to here
	kill           bool
	killNode       int
	killAt         uint64
	killCut        uint64   // ticks after the kill the node is cut off
	ctrlDelay      uint64   // ticks after the lease loss the controller writes
	installDelay   []uint64 // per node: ticks after that it installs the table
	noLag, noCut   bool
	noTbl, noLose  bool
}

// Run runs one simulated cluster from cfg.Seed and checks its properties
// at every tick: every node's CheckInvariants; one simulator per entity
// across the nodes; no entity created or destroyed by the protocol (the
// wanderers all exist, on a live node, but those a lost lease took).
// It returns the first breach as a *PropertyError (or an invariant error
// wrapped in one), with the Result so far.
func Run(cfg Config) (res Result, err error) {
	cfg = cfg.withDefaults()
	res = Result{Seed: cfg.Seed}
	grid, err := cells.NewGrid(cfg.Grid)
	if err != nil {
		return res, err
	}
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%d", i)
	}
	table, err := cells.Uniform(grid, 1, names)
	if cfg.FourWays {
		table, err = quadrants(grid, names)
	}
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7a6f6e6573696d))
	net := NewNetwork(rng.Uint64(), *cfg.Faults)
	if cfg.Trail {
		net.KeepTrail()
		defer func() { res.Trail = net.Trail() }()
	}
	leases := NewLeases(names)
	sc := drawSchedule(rng, cfg, grid, table)
	if cfg.NoSchedule {
		sc.noLag, sc.noCut, sc.noTbl, sc.noLose = true, true, true, true
	}
	if cfg.NoLeaseLoss || sc.kill {
		sc.noLose = true
	}

	rts := make([]*zone.Runtime, cfg.Nodes)
	terrs := make([]*Territory, cfg.Nodes)
	defer func() {
		for _, r := range rts {
			if r != nil {
				_ = r.Close()
			}
		}
	}()
	for i, name := range names {
		terrs[i] = leases.Territory(name, table)
		rc := zone.Config{
			Name: name, Node: i + 1, Grid: cfg.Grid, Territory: terrs[i], Transport: net.Endpoint(name),
			Clock: clock.NewFake(Boot), Logger: slog.New(slog.DiscardHandler),
			Accept: leases.Accept, LivePeers: leases.LivePeers(name),
		}
		if cfg.Runtime != nil {
			cfg.Runtime(i, &rc)
		}
		mod, err := wander.New(cfg.Wander)
		if err != nil {
			return res, err
		}
		if rts[i], err = zone.New(rc, mod); err != nil {
			return res, fmt.Errorf("zonesim: %s: %w", name, err)
		}
		if cfg.Started != nil {
			cfg.Started(i, rts[i])
		}
	}
	var intents *intentLog
	if cfg.Intents > 0 {
		intents = newIntentLog(rng.Uint64())
		intents.quiet = uint64(cfg.IntentQuiet)
		for i, r := range rts {
			intents.hook(names[i], r)
		}
	}
	// Each account's client is on the node that made its viewer.
	w := cfg.Wander.WithDefaults()
	var clients []*client
	for a := 1; a <= w.Accounts; a++ {
		for i, r := range rts {
			if _, ok := r.Viewer(account.ID(a)); ok {
				cl := newClient(account.ID(a), i)
				clients = append(clients, cl)
				r.Attach(account.ID(a), clientSink(net, names[i], cl, !cfg.NoChecks))
				break
			}
		}
	}
	geo := rts[0].Geometry()
	lossy := *cfg.Faults
	calmSince := uint64(0)
	ids := make([]ecs.ID, w.Entities)
	for i := range ids {
		ids[i], _ = wander.ID(i)
	}
	lost := make(map[ecs.ID]bool)
	latest := table // the newest table written
	var newTable *cells.Table
	kill := newKillState(cfg, sc, names)
	tr := truth{cols: columns{scanBelow: -1}}
	event := func(t uint64, format string, args ...any) {
		res.Events = append(res.Events, fmt.Sprintf("tick %d: ", t)+fmt.Sprintf(format, args...))
	}

	last := uint64(cfg.Ticks)
	if cfg.Until > 0 {
		last = min(last, uint64(cfg.Until))
	}
	if cfg.UntilCalm {
		last = min(last, sceneEnd(cfg, sc, kill)+calmTicks+stillTicks+missingTicks)
	}
	for t := uint64(1); t <= last; t++ {
		// The schedule.
		if !sc.noCut && t == sc.cutFrom {
			net.Cut(names[sc.cutA], names[sc.cutB])
			event(t, "cut %s from %s", names[sc.cutA], names[sc.cutB])
		}
		if !sc.noCut && t == sc.cutTo && !kill.isDead(sc.cutA) && !kill.isDead(sc.cutB) {
			net.Heal(names[sc.cutA], names[sc.cutB])
			event(t, "heal %s and %s", names[sc.cutA], names[sc.cutB])
		}
		if !sc.noTbl && t == sc.tableAt {
			a, b := latest.Owner(sc.swapA), latest.Owner(sc.swapB)
			if kill.killed(t) && (a == names[sc.killNode] || b == names[sc.killNode]) {
				sc.noTbl = true
				event(t, "the swap of regions %d and %d is not written: %s is dead", sc.swapA, sc.swapB, names[sc.killNode])
			} else {
				if newTable, err = latest.WithOwners(latest.Version()+1, map[cells.RegionID]string{sc.swapA: b, sc.swapB: a}); err != nil {
					return res, err
				}
				latest = newTable
			}
		}
		if !sc.noTbl {
			for i := range terrs {
				if t == sc.tableAt+sc.tableDelay[i] && !kill.isDead(i) {
					terrs[i].Install(newTable)
					event(t, "%s installs table %d (regions %d and %d swap owners)", names[i], newTable.Version(), sc.swapA, sc.swapB)
				}
			}
		}
		if sc.kill {
			if err := kill.schedule(t, net, leases, terrs, rts, &latest, ids, lost, event); err != nil {
				return res, err
			}
		}
		if !sc.noLose && t == sc.loseAt {
			victim := rts[sc.loseNode]
			for _, id := range ids {
				if victim.World().Alive(id) && !victim.Ghosts().Has(id) {
					lost[id] = true
				}
			}
			leases.Lose(names[sc.loseNode])
			if intents != nil {
				intents.lossAt = t
			}
			event(t, "%s loses its lease (%d entities lost with it)", names[sc.loseNode], len(lost))
		}

		if !sc.noLag && t == sc.lagFrom {
			event(t, "%s skips %d steps, and makes them up from tick %d", names[sc.lagNode], sc.lagN, sc.catchFrom)
		}
		if t == sc.lossyFrom {
			event(t, "the replication stream is lossy until tick %d", sc.lossyTo)
		}
		faulty := false
		if t >= sc.lossyFrom && t <= sc.lossyTo {
			net.SetFaults(lossy)
			faulty = true
		} else {
			net.SetFaults(Faults{})
		}
		slow := cfg.SlowControl > 0 && !cfg.NoSchedule
		if slow && t == sc.slowFrom {
			event(t, "the control stream is %d ticks slower until tick %d", cfg.SlowControl, sc.slowTo)
		}
		if slow && t >= sc.slowFrom && t <= sc.slowTo {
			f := net.faults
			f.SlowControl = cfg.SlowControl
			net.SetFaults(f)
			faulty = true
		}
		if !sc.noCut && t >= sc.cutFrom && t <= sc.cutTo ||
			!sc.noLag && t >= sc.lagFrom && t < sc.catchFrom+sc.lagN ||
			!sc.noLose && t == sc.loseAt || kill.recovering(t) {
			faulty = true
		}
		if faulty {
			calmSince = t
		}

		kill.sent(t, net.faults)
		net.Deliver(t)
		if intents != nil {
			intents.tick = t
		}
		if intents != nil && t+uint64(cfg.IntentQuiet) <= last {
			intents.send(t, cfg.Intents, rts, names, leases, ids, kill.isDead)
		}
		for i, r := range rts {
			steps := 1
			if !sc.noLag && i == sc.lagNode {
				switch {
				case t >= sc.lagFrom && t < sc.lagFrom+sc.lagN:
					steps = 0
				case t >= sc.catchFrom && t < sc.catchFrom+sc.lagN:
					steps = 2
				}
			}
			if kill.isDead(i) {
				steps = 0
			}
			for range steps {
				r.Step()
			}
		}
		res.Ticks = int(t)
		if cfg.NoChecks {
			continue
		}
		err := check(cfg, t, names, rts, leases, ids, lost)
		if err == nil && sc.kill {
			err = kill.check(cfg, t, geo, rts, leases, ids, lost)
		}
		if err == nil {
			err = checkClients(cfg, t, geo, names, rts, leases, ids, lost, clients, t > calmSince+calmTicks, kill, &tr)
		}
		if err != nil {
			kill.result(&res, rts)
			res.Trace, res.Net = net.Trace(), net.Stats()
			return res, err
		}
	}
	for _, r := range rts {
		res.Handoffs += r.HandoffStats().Acked
		res.IntentsDropped += r.ClusterStats().IntentsDropped
	}
	kill.result(&res, rts)
	res.Trace, res.Net = net.Trace(), net.Stats()
	if intents != nil && sc.kill {
		res.IntentsSent = int(intents.sent)
		since := sc.killAt
		if !sc.noCut && (sc.cutA == sc.killNode || sc.cutB == sc.killNode) && sc.cutFrom < sc.killAt && sc.cutTo >= sc.killAt {
			since = sc.cutFrom // its confirmations to that peer wait for a heal
		}
		since -= min(since, uint64(3+cfg.Faults.MaxDelay+cfg.SlowControl))
		missing, twice, counted, overlap := intents.checkKill(rts, names[sc.killNode], since, sc.killAt)
		res.IntentsMissing = len(missing)
		res.IntentsCounted, res.IntentsOverlap = counted, overlap
		if len(twice) > 0 || counted < len(missing) || counted > len(missing)+overlap {
			return res, &PropertyError{Seed: cfg.Seed, Tick: last, Property: "intents applied at most once, every one lost counted",
				Detail: fmt.Sprintf("%d of %d not applied, %d counted by the nodes (up to %d may be counted twice or though applied: their confirmation died with the node), %d applied twice; first: %v", len(missing), intents.sent, counted, overlap, len(twice), append(missing[:min(len(missing), 3):min(len(missing), 3)], twice[:min(len(twice), 3)]...))}
		}
	} else if intents != nil {
		res.IntentsSent = int(intents.sent)
		missing, twice := intents.check(lost)
		res.IntentsMissing = len(missing)
		// A node drops an intent only with a count (a frozen entity's
		// buffer full, a target it knows nothing of): one missing beyond
		// the count was lost silently.
		if len(missing) > res.IntentsDropped || len(twice) > 0 {
			return res, &PropertyError{Seed: cfg.Seed, Tick: last, Property: "intents applied exactly once",
				Detail: fmt.Sprintf("%d of %d not applied (%d dropped by the nodes), %d applied twice; first: %v", len(missing), intents.sent, res.IntentsDropped, len(twice), append(missing[:min(len(missing), 3):min(len(missing), 3)], twice[:min(len(twice), 3)]...))}
		}
	}
	return res, nil
}

// sceneEnd is the last tick of the run's faults: the failover's
// recovery bound, the lossy and slow windows, the cut's heal, the lag's
// catch-up, the table's last install and the lease lost (Config.UntilCalm).
func sceneEnd(cfg Config, sc schedule, kill *killState) uint64 {
	end := sc.lossyTo
	if sc.kill {
		end = max(end, kill.by)
	}
	if cfg.SlowControl > 0 && !cfg.NoSchedule {
		end = max(end, sc.slowTo)
	}
	if !sc.noCut {
		end = max(end, sc.cutTo)
	}
	if !sc.noLag {
		end = max(end, sc.catchFrom+sc.lagN)
	}
	if !sc.noTbl {
		end = max(end, sc.tableAt+slices.Max(sc.tableDelay))
	}
	if !sc.noLose {
		end = max(end, sc.loseAt)
	}
	return end
}

func drawSchedule(rng *rand.Rand, cfg Config, grid cells.Grid, table *cells.Table) schedule {
	ticks := uint64(cfg.Ticks)
	sc := schedule{lagNode: rng.IntN(cfg.Nodes)}
	sc.lagN = 1 + uint64(rng.IntN(10))
	sc.lagFrom = 10 + uint64(rng.IntN(int(max(ticks/2, 1))))
	sc.catchFrom = sc.lagFrom + sc.lagN + uint64(rng.IntN(20))
	sc.cutA = rng.IntN(cfg.Nodes)
	sc.cutB = (sc.cutA + 1 + rng.IntN(max(cfg.Nodes-1, 1))) % cfg.Nodes
	sc.cutFrom = 10 + uint64(rng.IntN(int(max(ticks/2, 1))))
	sc.cutTo = sc.cutFrom + 5 + uint64(rng.IntN(35))
	sc.tableAt = 20 + uint64(rng.IntN(int(max(ticks/2, 1))))
	sc.tableDelay = make([]uint64, cfg.Nodes)
	for i := range sc.tableDelay {
		sc.tableDelay[i] = uint64(rng.IntN(6))
	}
	// Swap two regions of different owners, among those near the spawn
	// corner (the four around the origin), where the wanderers are.
	corner := cornerRegions(grid)
	for {
		sc.swapA, sc.swapB = corner[rng.IntN(len(corner))], corner[rng.IntN(len(corner))]
		if table.Owner(sc.swapA) != table.Owner(sc.swapB) {
			break
		}
	}
	sc.lossyFrom = uint64(rng.IntN(int(max(ticks/2, 1))))
	sc.lossyTo = sc.lossyFrom + 20 + uint64(rng.IntN(int(max(ticks/3, 1))))
	sc.loseNode = rng.IntN(cfg.Nodes)
	sc.loseAt = ticks - ticks/5 + uint64(rng.IntN(int(max(ticks/10, 1))))
	if cfg.SlowControl > 0 { // drawn last, and only then: the default runs' schedules stay as they were
		sc.slowFrom = 1 + uint64(rng.IntN(int(max(ticks/2, 1))))
		sc.slowTo = sc.slowFrom + 20 + uint64(rng.IntN(int(max(ticks/3, 1))))
	}
	if cfg.Kill { // likewise
		sc.kill = true
		sc.killNode = rng.IntN(cfg.Nodes)
		last := max(int(ticks)-cfg.KillTTL-45, 31)
		if rng.IntN(2) == 0 {
			sc.killAt = min(sc.tableAt+uint64(rng.IntN(12)), uint64(last))
		} else {
			sc.killAt = 30 + uint64(rng.IntN(last-30+1))
		}
		sc.killCut = uint64(rng.IntN(4))
		sc.ctrlDelay = 1 + uint64(rng.IntN(3))
		sc.installDelay = make([]uint64, cfg.Nodes)
		for i := range sc.installDelay {
			sc.installDelay[i] = uint64(rng.IntN(6))
		}
	}
	return sc
}

// quadrants gives the nodes the grid's regions in blocks (four nodes: the
// four quadrants), so that the four meet at the origin, where the
// wanderers spawn: an entity handed between two of them is watched by a
// third. Other node counts: cells.Uniform.
func quadrants(grid cells.Grid, names []string) (*cells.Table, error) {
	cols, rows := grid.Cols(), grid.Rows()
	if len(names) != 4 || cols%2 != 0 || rows%2 != 0 {
		return cells.Uniform(grid, 1, names)
	}
	owners := make([]string, cols*rows)
	for r := range owners {
		row, col := r/cols, r%cols
		owners[r] = names[row/(rows/2)*2+col/(cols/2)]
	}
	return cells.NewTable(grid, 1, owners)
}

// cornerRegions are the four regions around the origin.
func cornerRegions(grid cells.Grid) []cells.RegionID {
	geo := grid.World()
	e := float64(grid.RegionEdge()) / 2
	var out []cells.RegionID
	for _, p := range [][2]float64{{e, e}, {-e, e}, {e, -e}, {-e, -e}} {
		out = append(out, grid.RegionOf(geo.Normalise(torus.Pos{X: p[0], Y: p[1]})))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// clientSink records every batch a client is delivered in the trace,
// and hands it to the client to check when checked.
func clientSink(net *Network, node string, c *client, checked bool) outbox.Sink {
	name := fmt.Sprintf("%d@%s", c.acct, node)
	return outbox.SinkFunc(func(tick uint64, frames [][]byte) {
		net.Record(name, tick, frames)
		if checked {
			c.deliver(tick, frames)
		}
	})
}

// truth is checkClients' buffers, kept from tick to tick: where each
// entity a live node holds for real stands, and the sight's scratch.
type truth struct {
	chunks []torus.ChunkPos
	held   []bool
	cols   columns
	visit  bitset
}

// checkClients checks every client of a live node against the truth: the
// positions of the entities live nodes hold for real.
func checkClients(cfg Config, t uint64, geo torus.World, names []string, rts []*zone.Runtime, leases *Leases, ids []ecs.ID, lost map[ecs.ID]bool, clients []*client, calm bool, kill *killState, tr *truth) error {
	tr.chunks = slices.Grow(tr.chunks[:0], len(ids))[:len(ids)]
	tr.held = slices.Grow(tr.held[:0], len(ids))[:len(ids)]
	chunks, held := tr.chunks, tr.held
	clear(held)
	// Node by node through what each holds, in node order, so that the
	// first node holding an entity for real gives its position.
	for i, r := range rts {
		if leases.Lost(names[i]) || kill.isDead(i) {
			continue
		}
		w, ghosts := r.World(), r.Ghosts()
		r.Positions().Each(func(id ecs.ID, p *zone.Position) {
			k := index(ids, id)
			if k < 0 || held[k] || len(lost) > 0 && lost[id] || !w.Alive(id) || ghosts.Has(id) {
				return
			}
			chunks[k], held[k] = geo.ChunkOf(p.Pos), true
		})
	}
	tr.cols.reset(geo, chunks, held)
	for _, c := range clients {
		if leases.Lost(names[c.node]) || kill.isDead(c.node) {
			continue
		}
		c.sight(t, geo, ids, chunks, held, &tr.cols, calm, kill, &tr.visit)
		if c.bad != nil {
			return &PropertyError{Seed: cfg.Seed, Tick: t, Property: "clients", Detail: fmt.Sprintf("%s (on %s; %s)", c.bad, names[c.node], census(names, rts, c.badEntity))}
		}
	}
	return nil
}

// census says where id is, node by node, for an error.
func census(names []string, rts []*zone.Runtime, id ecs.ID) string {
	var b []byte
	for i, r := range rts {
		if !r.World().Alive(id) {
			continue
		}
		ep, _ := r.Epoch(id)
		p, _ := r.Positions().Get(id)
		ch, _ := r.ChunkOf(id)
		b = fmt.Appendf(b, "%s: simulated %v, ghost %v, frozen %v, epoch %d, at %v filed %v; ", names[i], r.Simulated(id), r.Ghosts().Has(id), r.Frozen().Has(id), ep, p.Pos, ch)
	}
	return fmt.Sprintf("entity %d: %s", id, b)
}

// check is the properties of one tick.
func check(cfg Config, t uint64, names []string, rts []*zone.Runtime, leases *Leases, ids []ecs.ID, lost map[ecs.ID]bool) error {
	fail := func(prop, format string, args ...any) error {
		return &PropertyError{Seed: cfg.Seed, Tick: t, Property: prop, Detail: fmt.Sprintf(format, args...)}
	}
	live := make([]*zone.Runtime, len(rts))
	for i, r := range rts {
		if leases.Lost(names[i]) {
			continue
		}
		live[i] = r
		if err := r.CheckInvariants(); err != nil {
			return errors.Join(fail("invariants", "%s", names[i]), err)
		}
	}
	for _, id := range ids {
		// Counted, and named only on a breach: this runs for every
		// entity at every tick.
		sims, real := 0, 0
		for _, r := range live {
			if r == nil || !r.World().Alive(id) {
				continue
			}
			if r.Simulated(id) {
				sims++
			}
			if !r.Ghosts().Has(id) {
				real++
			}
		}
		if sims > 1 {
			var on []string
			for i, r := range live {
				if r != nil && r.Simulated(id) {
					on = append(on, names[i])
				}
			}
			return fail("one simulator", "entity %d is simulated on %v", id, on)
		}
		if real == 0 && !lost[id] {
			return fail("entities conserved", "entity %d exists on no live node", id)
		}
	}
	for i, r := range live {
		if r == nil {
			continue
		}
		if n := r.World().Len() - r.Ghosts().Len(); n > len(ids) {
			return fail("entities conserved", "%s holds %d entities, more than the %d the world has", names[i], n, len(ids))
		}
	}
	if cfg.Check != nil {
		if err := cfg.Check(t, live); err != nil {
			return errors.Join(fail("check", "harness check"), err)
		}
	}
	return nil
}

// ShortSeeds is how many seeds the short mode runs (Seeds); LongSeeds,
// with SHARDWISE_LONG=1.
const (
	ShortSeeds = 200
	LongSeeds  = 10000
)

// Seeds returns the seeds a test runs: the one SHARDWISE_SEED names
// (replay is then true), or 1…LongSeeds with SHARDWISE_LONG=1, or
// 1…ShortSeeds. The seeds are fixed, not drawn, so that the short mode
// is the same test on every run and a count of seeds to a catch means
// the same thing twice.
func Seeds() (seeds []uint64, replay bool, err error) {
	if v := os.Getenv("SHARDWISE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("zonesim: SHARDWISE_SEED=%q: %w", v, err)
		}
		return []uint64{s}, true, nil
	}
	n := ShortSeeds
	if os.Getenv("SHARDWISE_LONG") == "1" {
		n = LongSeeds
	}
	for i := range n {
		seeds = append(seeds, uint64(i+1))
	}
	return seeds, false, nil
}

// KnownFailure says whether seed is one of the short mode's seeds that
// find a bug not fixed yet, and which. Tests require these seeds to fail
// still, and leave them out of the count of seeds a planted bug needs.
// None now: seeds 98, 122 and 192 (a client blinked after a region swap
// across the seam) pass since the old owner keeps a ghost that a
// snapshot leaves out while the next chunk's is awaited
// (docs/decisions.md).
func KnownFailure(seed uint64) (string, bool) {
	_ = seed
	return "", false
}
