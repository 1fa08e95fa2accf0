package demo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
)

// announce prints a moment of the run and hands it to the observer, one
// moment at a time.
func (d *worldDemo) announce(start time.Time, format string, args ...any) {
	d.eventMu.Lock()
	defer d.eventMu.Unlock()
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(start).Seconds(), msg)
	if d.dash != nil {
		d.dash.col.Event(msg)
	}
	if d.cfg.OnEvent != nil {
		d.cfg.OnEvent(msg)
	}
}

// waitUntil waits until at, or until ctx ends (false).
func waitUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// moveAt moves, at MoveAt, the region where the most players stand to the
// next zone node (in Zones order) and reports when its entities were
// handed over: an online region move, one table version, a mass handoff.
// The play ending first is no error: the move is not made, or it is left
// where it got to (regionMove.HandedOver false), and the report judges.
func (d *worldDemo) moveAt(load context.Context, start time.Time) (err error) {
	defer func() {
		if err != nil && load.Err() != nil {
			err = nil // cut short by the end of the play
		}
	}()
	if !waitUntil(load, start.Add(d.cfg.MoveAt)) {
		return nil
	}
	t, err := d.admin.Regions(load)
	if err != nil {
		return fmt.Errorf("demo: region move: %w", err)
	}
	region, players := d.census.busiestRegion()
	from := t.Owner(region)
	i := slices.Index(d.cfg.Zones, from)
	to := d.cfg.Zones[(i+1)%len(d.cfg.Zones)]
	for j := 2; d.nodes[to].killed.Load() && j < len(d.cfg.Zones); j++ {
		to = d.cfg.Zones[(i+j)%len(d.cfg.Zones)] // the next live one
	}
	next, err := t.WithOwners(t.Version()+1, map[cells.RegionID]string{region: to})
	if err != nil {
		return fmt.Errorf("demo: region move: %w", err)
	}
	col, row := d.grid.Coords(region)
	before := d.handoffs()
	d.announce(start, "region move: region %d (column %d, row %d; %d player entities) from %s to %s, table version %d",
		region, col, row, players, from, to, next.Version())
	d.mu.Lock()
	d.moving = []string{from, to} // the zone node kill spares them until it is done
	d.mu.Unlock()
	if err := d.admin.ApplyRegions(load, next, coord.ApplyOptions{}); err != nil {
		return fmt.Errorf("demo: region move: %w", err)
	}
	d.mu.Lock()
	d.moved = regionMove{Region: region, From: from, To: to, Version: next.Version(), At: time.Since(start)}
	d.mu.Unlock()
	// Done when every node holds the new table and the old owner keeps no
	// entity in the region.
	for load.Err() == nil {
		if d.tableEverywhere(next.Version()) && d.census.playersIn(from, region) == 0 {
			d.mu.Lock()
			d.moved.HandedOver, d.moved.HandedOverAt = true, time.Since(start)
			d.moving = nil
			d.mu.Unlock()
			after := d.handoffs()
			d.announce(start, "region move done: every node holds version %d; %d handoffs since the move",
				next.Version(), after.Acked-before.Acked)
			return nil
		}
		if err := clock.Sleep(load, clock.Real(), 50*time.Millisecond); err != nil {
			break
		}
	}
	return nil
}

// tableEverywhere reports whether every zone node's last tick held table
// version v or later.
func (d *worldDemo) tableEverywhere(v uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.nodes {
		if !n.killed.Load() && n.last.TableVersion < v {
			return false
		}
	}
	return true
}

// handoffs sums the nodes' last handoff counters.
func (d *worldDemo) handoffs() zone.HandoffStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s zone.HandoffStats
	for _, n := range d.nodes {
		s = s.Plus(n.last.Handoff)
	}
	return s
}

// killAt kills, at KillAt, the economy node owning the most of the bots'
// wallet scopes, mid-epoch (orphanWatch.kill).
func (d *worldDemo) killAt(ctx, load context.Context, start time.Time) error {
	if !waitUntil(load, start.Add(d.cfg.KillAt)) {
		return nil
	}
	owner, err := netting.ScopeRouter(d.cfg.Econs)
	if err != nil {
		return err
	}
	count := map[string]int{}
	for a := 1; a <= d.cfg.Bots; a++ {
		count[owner(game.PlayerScope(account.ID(a)))]++
	}
	victim := d.cfg.Econs[0]
	for _, n := range d.cfg.Econs {
		if count[n] > count[victim] {
			victim = n
		}
	}
	d.announce(start, "killing economy node %s (owner of %d of the %d players' wallets) once it has an open epoch", victim, count[victim], d.cfg.Bots)
	if err := d.watch.kill(ctx, load, victim); err != nil {
		return fmt.Errorf("demo: kill %s: %w", victim, err)
	}
	if n := d.watch.counts().Orphans; n > 0 {
		d.announce(start, "killed %s mid-epoch with %s: the survivors re-form and serve its scopes; their sweep settles the orphans", victim, plural(n, "open epoch", "open epochs"))
	} else {
		d.announce(start, "killed %s with no open epoch left (the play ended before it had one, or its last settled as it died): the survivors re-form and serve its scopes; no orphans to sweep", victim)
	}
	return nil
}

// progress prints a line every Progress until ctx ends.
func (d *worldDemo) progress(ctx context.Context, start time.Time, bots *sim.Bots) {
	every(ctx, d.cfg.Progress, func() {
		fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(start).Seconds(), d.progressLine(bots.Stats()))
	})
}

// every calls fn once per period until ctx ends; a period of 0 or less
// never calls it.
func every(ctx context.Context, period time.Duration, fn func()) {
	if period <= 0 {
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

func (d *worldDemo) progressLine(b sim.BotStats) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var (
		ents, ghosts, sessions int
		ho                     zone.HandoffStats
		es                     game.EconomyStats
		p99                    []string
	)
	for _, name := range d.cfg.Zones {
		n := d.nodes[name]
		ho = ho.Plus(n.last.Handoff) // counters: a dead node's count too
		es = sumEconomy(es, n.econ)
		if n.killed.Load() {
			p99 = append(p99, name+" dead")
			continue
		}
		ents += n.last.Simulated
		ghosts += n.last.RenderGhosts
		sessions += n.last.Sessions
		p99 = append(p99, fmt.Sprintf("%s %.1fms", name, ms(quantile(n.ticks, 0.99))))
	}
	o := d.watch.counts()
	econ := fmt.Sprintf("econ %d/%d ready", d.ec.ready(), len(d.cfg.Econs))
	if o.Killed != "" {
		econ += fmt.Sprintf(" orphans %d/%d", o.Settled, o.Orphans)
	}
	return fmt.Sprintf("players %d entities %d ghosts %d handoffs %d movements %d/%d (bought %d, trades %d) %s | tick p99 %s | blinks %d leaks %d",
		sessions, ents, ghosts, ho.Acked, es.Accepted, es.Rejected, es.Bought, es.Committed, econ, strings.Join(p99, " "), b.Blinks, b.Leaks)
}

// countPlayers checks, while the bots are still logged in, that every
// logged-in account has exactly its master and its pet in the world, each
// held by one node: polled for up to five seconds for an instant at which
// every account agrees (the nodes tick apart, and an entity in a handoff
// or a bot between logins is briefly elsewhere). It returns what it found
// at the best instant.
func (d *worldDemo) countPlayers(ctx context.Context, bots *sim.Bots) playerCount {
	deadline := time.Now().Add(5 * time.Second)
	var best playerCount
	for first := true; ; first = false {
		c := d.playerCountNow(ctx)
		if first || len(c.Mismatches) < len(best.Mismatches) {
			best = c
		}
		if len(c.Mismatches) == 0 || time.Now().After(deadline) {
			return best
		}
		if clock.Sleep(ctx, clock.Real(), 20*time.Millisecond) != nil {
			return best
		}
	}
}

// playerCount is the end-of-run count of the players' entities. Lost are
// the killed zone node's players missing their master, their pet or both,
// left out of Mismatches unless the failover restores players
// (failoverRestoresPlayers).
type playerCount struct {
	LoggedIn, Entities int
	Mismatches         []string
	Lost               int
}

func (d *worldDemo) playerCountNow(ctx context.Context) playerCount {
	per := d.census.players()
	d.mu.Lock()
	affected := d.zoneAffected
	d.mu.Unlock()
	var c playerCount
	for a := account.ID(1); a <= account.ID(d.cfg.Bots); a++ {
		want := 0
		if _, err := d.dir.Lookup(ctx, a); err == nil {
			want = 2 // a master and its pet
			c.LoggedIn++
		}
		c.Entities += per[a]
		if per[a] < want && want == 2 && affected[a] && !failoverRestoresPlayers {
			c.Lost++
			continue
		}
		if per[a] != want {
			of := ""
			if affected[a] {
				of = " (a player of the killed zone node)"
			}
			c.Mismatches = append(c.Mismatches, fmt.Sprintf("account %v%s: %d entities in the world, want %d", a, of, per[a], want))
		}
	}
	return c
}

func sumEconomy(a, b game.EconomyStats) game.EconomyStats {
	a.Submitted += b.Submitted
	a.Accepted += b.Accepted
	a.Rejected += b.Rejected
	a.Unknown += b.Unknown
	a.Failed += b.Failed
	a.Dropped += b.Dropped
	a.Retries += b.Retries
	a.Kills += b.Kills
	a.Loot += b.Loot
	a.Bought += b.Bought
	a.Refused += b.Refused
	a.Committed += b.Committed
	a.Cancelled += b.Cancelled
	a.Forwarded += b.Forwarded
	a.Resubmitted += b.Resubmitted
	return a
}

// quantile returns the q quantile of ds (0 when empty).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(i, len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// plural is "n one" for n == 1 and "n many" otherwise.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
