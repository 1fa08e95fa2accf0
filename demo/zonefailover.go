package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone/zonecoord"
)

// ZoneKillReport is the zone node killed at ZoneKillAt and its failover,
// every time measured from the kill (At, since the play began). Due is
// when the kill was due (negative: none); Error why it failed, NotMade
// why it was not made (the play ended first). A figure not reached before
// the play ended is false or zero, with its flag.
type ZoneKillReport struct {
	Due  time.Duration `json:"due_ns"`
	Node string        `json:"node,omitempty"`
	At   time.Duration `json:"at_ns,omitempty"`
	// TTL is the zone nodes' lease: the failover waits for it to expire.
	TTL time.Duration `json:"ttl_ns"`
	// Controller says the killed node was the failover controller (the
	// next one is elected when its candidacy expires).
	Controller bool `json:"controller"`
	// Regions are the regions it owned, in table TableVersion.
	Regions      []int  `json:"regions"`
	TableVersion uint64 `json:"table_version,omitempty"`
	// Reowned says a table giving every one of its regions to another
	// node was stored (NewTableVersion, by TableWriter), TableAfter after
	// the kill; Standbys are the nodes its regions went to.
	Reowned         bool          `json:"reowned"`
	NewTableVersion uint64        `json:"new_table_version,omitempty"`
	TableWriter     string        `json:"table_writer,omitempty"`
	TableAfter      time.Duration `json:"table_after_ns,omitempty"`
	Standbys        []string      `json:"standbys"`
	// Simulated says every one of its regions was simulated again (each
	// region's new owner ticked holding the new table), SimulatedAfter
	// after the kill.
	Simulated      bool          `json:"simulated"`
	SimulatedAfter time.Duration `json:"simulated_after_ns,omitempty"`
	// EntitiesBefore is the entities simulated in its regions at its last
	// tick before the kill; EntitiesAfter those simulated there by the
	// new owners recoveryGrace after Simulated (dens set up again, players
	// back, and what checkpoints brought back), of which EntitiesSameID
	// are entities it simulated before the kill, back under the same id.
	// Recovered says they were counted.
	Recovered      bool `json:"recovered"`
	EntitiesBefore int  `json:"entities_before"`
	EntitiesAfter  int  `json:"entities_after"`
	EntitiesSameID int  `json:"entities_same_id"`
	// PlayersOnGateway are the players whose session its gateway served
	// at the kill; PlayersReconnected those logged in again on another
	// gateway with their master and pet in the world, the last
	// ReconnectedAfter after the kill.
	PlayersOnGateway   int           `json:"players_on_gateway"`
	PlayersReconnected int           `json:"players_reconnected"`
	ReconnectedAfter   time.Duration `json:"reconnected_after_ns,omitempty"`
	// PlayersSimulated are the players whose master or pet it simulated
	// at the kill (whatever their gateway); PlayersBack those with their
	// master and pet simulated by another node again, the last BackAfter
	// after the kill.
	PlayersSimulated int           `json:"players_simulated"`
	PlayersBack      int           `json:"players_back"`
	BackAfter        time.Duration `json:"back_after_ns,omitempty"`
	// PlayersFromStore are the players whose master and pet no
	// checkpoint had (the node made or took them after its last one):
	// their gateways brought them in again from their last save once its
	// lease had ended (zone.PlayerStats.Lost), under new ids.
	PlayersFromStore int `json:"players_from_store"`
	// RestoresPlayers says the run holds the world to bringing the killed
	// node's players back (failoverRestoresPlayers): then a player not
	// back within zoneReconnectBound, or not in the world at the end,
	// fails the run. Without it, PlayersLost are the players not back at
	// the end (logged in, no master or pet in the world), said in a note
	// and not counted by the players' check.
	RestoresPlayers bool `json:"restores_players"`
	PlayersLost     int  `json:"players_lost"`
	// Blinks are the blinks of entities the node simulated or of its
	// players' entities. With BlinksNoted (failoverKeepsView false) they
	// are said in a note and not counted by the blinks' check; without,
	// every blink counts.
	Blinks      int  `json:"blinks"`
	BlinksNoted bool `json:"blinks_noted"`
	// TradesBefore and TradesAfter are the trades the game committed
	// before the kill and after it, to the end of the play.
	TradesBefore int    `json:"trades_before"`
	TradesAfter  int    `json:"trades_after"`
	Error        string `json:"error,omitempty"`
	NotMade      string `json:"not_made,omitempty"`
}

// failoverRestoresPlayers holds the world to bringing every player of a
// killed zone node back (issue 30): a player whose master it simulated
// keeps its socket and resumes on the standby (adopted from checkpoints,
// or brought in again from the store if no checkpoint had it), and a
// player whose gateway it was resumes on another gateway. A player not
// back fails the run. False makes them notes (ZoneKillReport.PlayersLost).
const failoverRestoresPlayers = true

// failoverKeepsView holds the world to showing no blink of a killed zone
// node's entities and its players': the other nodes hold a dead node's
// ghosts from its fence until its standby adopts them (zone
// Timers.FenceHold), so a client that kept them in view sees them stand
// still, never vanish and come back (issue 30). False makes those blinks
// a note (ZoneKillReport.BlinksNoted) instead of failing the blinks'
// check; a blink of any other entity fails either way.
const failoverKeepsView = true

// recoveryGrace is how long after its regions are simulated again the
// entities in them are counted: dens are set up again as the table is
// installed, players come back as their clients reconnect.
const recoveryGrace = time.Second

// zoneFailoverBound is how long past the lease's TTL the failover may take
// before the report fails it: the table is written as the controller sees
// the lease end, and the standbys install it within a tick or two.
const zoneFailoverBound = 5 * time.Second

// zoneReconnectBound is how long the killed gateway's players may take to
// be back in the world before the report fails it: the bots reconnect at
// once, and a takeover that finds no node with their player waits for
// every live node's answer (2 s), the dead one's included until its lease
// expires, before it loads the player from the store.
const zoneReconnectBound = 15 * time.Second

// zoneKillAt kills, at ZoneKillAt, the zone node that simulates the most
// players' entities, and follows its failover until every figure is
// measured or the play ends (d.killedZone holds them).
func (d *worldDemo) zoneKillAt(load context.Context, start time.Time) (err error) {
	defer func() {
		if err != nil && load.Err() != nil {
			err = nil // cut short by the end of the play
		}
	}()
	if !waitUntil(load, start.Add(d.cfg.ZoneKillAt)) {
		return nil
	}
	t, err := d.admin.Regions(load)
	if err != nil {
		return fmt.Errorf("demo: zone node kill: %w", err)
	}
	victim := d.zoneVictim(t)
	if victim == "" {
		return fmt.Errorf("demo: zone node kill: no live zone node owns a region")
	}
	zn := d.nodes[victim]
	leader, _ := d.admin.Leader(load, zonecoord.FailoverElection)
	regions := t.RegionsOf(victim)
	k := ZoneKillReport{Node: victim, Controller: leader == victim, TableVersion: t.Version(), Standbys: []string{}}
	for _, r := range regions {
		k.Regions = append(k.Regions, int(r))
	}
	ids := d.census.simulatedBy(victim)
	k.EntitiesBefore = d.census.entitiesIn(regions, "")
	simulated := d.census.accountsOn(victim)
	onGateway := map[account.ID]bool{}
	for a := account.ID(1); a <= account.ID(d.cfg.Bots); a++ {
		if s, err := d.dir.Lookup(load, a); err == nil && s.Gateway == directory.NodeID(zn.ready.Node) {
			onGateway[a] = true
		}
	}
	k.PlayersOnGateway, k.PlayersSimulated = len(onGateway), len(simulated)
	k.RestoresPlayers, k.BlinksNoted = failoverRestoresPlayers, !failoverKeepsView
	affected := maps.Clone(onGateway)
	maps.Copy(affected, simulated)
	failed := d.census.entitiesOf(affected)
	for id := range ids {
		failed[id] = true
	}
	k.TradesBefore = d.committedTrades()
	controller := ""
	if k.Controller {
		controller = ", the failover controller"
	}
	d.announce(start, "killing zone node %s%s (owner of %s, %d entities there, gateway of %d players, %d players' masters or pets simulated there): "+
		"it stops at once, saving nothing; its lease expires after %s, then the failover controller gives its regions to their standbys; "+
		"its players reconnect through another gateway",
		victim, controller, plural(len(regions), "region", "regions"), k.EntitiesBefore, k.PlayersOnGateway, k.PlayersSimulated, d.cfg.ZoneTTL)
	killed := time.Now()
	k.At = killed.Sub(start)
	d.killZone(zn)
	d.mu.Lock()
	d.zoneKill, d.zoneAffected, d.zoneEntities = k, affected, failed
	d.mu.Unlock()
	return d.followFailover(load, start, killed, zn, regions, ids, onGateway, simulated)
}

// zoneVictim is the live zone node holding the most players' entities
// (the first in Zones order on a tie), sparing the two nodes of a region
// move not yet handed over (on a loaded machine the move can run late):
// killing one would leave the move to the failover, and the move's own
// check would fail for it.
func (d *worldDemo) zoneVictim(t *cells.Table) string {
	d.mu.Lock()
	moving := slices.Clone(d.moving)
	d.mu.Unlock()
	if v := d.mostPlayers(t, moving); v != "" {
		return v
	}
	return d.mostPlayers(t, nil)
}

// mostPlayers is zoneVictim's choice among the nodes not in spare.
func (d *worldDemo) mostPlayers(t *cells.Table, spare []string) string {
	best, most := "", -1
	for _, n := range d.cfg.Zones {
		if slices.Contains(spare, n) {
			continue
		}
		zn := d.nodes[n]
		select {
		case <-zn.exited:
			continue // stopped already (the report says so)
		default:
		}
		if zn.killed.Load() || len(t.RegionsOf(n)) == 0 {
			continue
		}
		if c := len(d.census.accountsOn(n)); c > most {
			best, most = n, c
		}
	}
	return best
}

// killZone throws the node's four switches (zonekill.go): its stores
// refuse it, its gateway's sessions hand nothing to the world, its etcd is
// cut, its Host is stopped.
func (d *worldDemo) killZone(zn *zoneNode) {
	zn.killed.Store(true) // the stores refuse it from now; its stop is no failure
	if rt := zn.rt.Load(); rt != nil {
		rt.AbandonSessions()
	}
	zn.proxy.Cut()
	zn.stop()
	if d.dash != nil {
		d.dash.col.NodeDown(zn.name, "killed")
	}
}

// followFailover measures the failover of the killed node until every
// figure is in or the play ends, announcing the table and the regions
// simulated again.
func (d *worldDemo) followFailover(load context.Context, start, killed time.Time, zn *zoneNode, regions []cells.RegionID,
	ids map[ecs.ID]bool, onGateway, simulated map[account.ID]bool) error {
	victim := zn.name
	var (
		next        *cells.Table
		simulatedAt time.Time
		reconnected = map[account.ID]bool{}
		back        = map[account.ID]bool{}
	)
	update := func(f func(k *ZoneKillReport)) {
		d.mu.Lock()
		f(&d.zoneKill)
		d.mu.Unlock()
	}
	for {
		now := time.Now()
		since := now.Sub(killed)
		if next == nil {
			t, prov, err := d.admin.RegionsProvenance(load)
			if err == nil && t.Version() > 0 && len(t.RegionsOf(victim)) == 0 {
				next = t
				var standbys []string
				for _, r := range regions {
					if o := t.Owner(r); !slices.Contains(standbys, o) {
						standbys = append(standbys, o)
					}
				}
				slices.Sort(standbys)
				update(func(k *ZoneKillReport) {
					k.Reowned, k.NewTableVersion, k.TableWriter, k.TableAfter, k.Standbys = true, t.Version(), prov.Writer, since, standbys
				})
				d.announce(start, "failover: table version %d by %s, %.1fs after the kill: %s's regions go to %s",
					t.Version(), orUnknown(prov.Writer), since.Seconds(), victim, strings.Join(standbys, " "))
			}
		}
		if next != nil && simulatedAt.IsZero() && d.regionsSimulated(next, regions) {
			simulatedAt = now
			update(func(k *ZoneKillReport) { k.Simulated, k.SimulatedAfter = true, since })
			d.announce(start, "failover: every region of %s is simulated again, %.1fs after the kill", victim, since.Seconds())
		}
		if !simulatedAt.IsZero() && now.Sub(simulatedAt) >= recoveryGrace {
			after, same := d.census.entitiesIn(regions, victim), d.census.simulatedElsewhere(ids, victim)
			update(func(k *ZoneKillReport) {
				if !k.Recovered {
					k.Recovered, k.EntitiesAfter, k.EntitiesSameID = true, after, same
				}
			})
		}
		players := d.census.playersExcept(victim)
		for a := range onGateway {
			if reconnected[a] || players[a] != 2 {
				continue
			}
			if s, err := d.dir.Lookup(load, a); err == nil && s.Gateway != directory.NodeID(zn.ready.Node) {
				reconnected[a] = true
				update(func(k *ZoneKillReport) { k.PlayersReconnected, k.ReconnectedAfter = len(reconnected), since })
			}
		}
		for a := range simulated {
			if !back[a] && players[a] == 2 {
				back[a] = true
				update(func(k *ZoneKillReport) { k.PlayersBack, k.BackAfter = len(back), since })
			}
		}
		d.mu.Lock()
		done := d.zoneKill.Recovered && len(reconnected) == len(onGateway) && len(back) == len(simulated)
		d.mu.Unlock()
		if done {
			d.announce(start, "failover done: %d of %d players reconnected, %d of %d players simulated there back in the world, %.1fs after the kill",
				len(reconnected), len(onGateway), len(back), len(simulated), since.Seconds())
			return nil
		}
		if clock.Sleep(load, clock.Real(), 20*time.Millisecond) != nil {
			return nil
		}
	}
}

// regionsSimulated reports whether each of regions' owner in t has ticked
// holding t (or a later table).
func (d *worldDemo) regionsSimulated(t *cells.Table, regions []cells.RegionID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range regions {
		n := d.nodes[t.Owner(r)]
		if n == nil || n.killed.Load() || n.last.TableVersion < t.Version() {
			return false
		}
	}
	return true
}

// committedTrades sums the trades the nodes' games committed.
func (d *worldDemo) committedTrades() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, z := range d.nodes {
		n += z.econ.Committed
	}
	return n
}

func orUnknown(s string) string {
	if s == "" {
		return "an unnamed writer"
	}
	return s
}
