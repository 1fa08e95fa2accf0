package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/internal/testenv"
)

// failoverRecovers says the standby brings a dead node's entities back
// (replicated checkpoints, issue 30). Until it does, TestZoneFailoverSIGKILL
// reports the entities and players it recovered and lost, and checks only
// what failover does today: the regions re-owned by the controller and
// simulated again, no entity twice, money conserved, the dead gateway's
// bots back in. The lead sets it to true when the checkpoints are merged;
// the test then also requires the dead node's entities and players back,
// each player having lost at most about the checkpoint interval.
const failoverRecovers = true

var (
	zoneReadyRE = regexp.MustCompile(`(zone-\w+): node \d+, link \S+, gateway (ws://\S+/ws) \(browser client \S+\), dashboard (http://\S+/)`)
)

// e2eZoneArgs are the flags every zone node of the end-to-end tests runs
// with: the reference game, its start square 200 m wide around the
// quadrants' meeting point, ticks of 50 ms (the game's rate), its
// dashboard (the census reads it) at dashboard. gameBots is how many of
// the game's own bots play; 0 runs none (clients are the players, accounts
// 1 to 64).
func e2eZoneArgs(eps, certs, name, ttl, dashboard string, gameBots int) []string {
	args := []string{"zone", "--endpoints", eps, "--name", name, "--certs", certs, "--ttl", ttl,
		"--tick", "50ms", "--area", "200", "--dashboard", dashboard}
	if gameBots == 0 {
		return append(args, "--no-bots", "--players", "64")
	}
	return append(args, "--players", strconv.Itoa(gameBots))
}

// TestZoneFailoverSIGKILL runs the cluster as an operator does, one
// process per node: an economy node and four "shardwise zone" nodes of the
// reference game with gateways, sharing a Redis directory and a SQLite
// world store, each owning a quadrant around the players' start square;
// sim bots play through all four gateways (walking across the borders,
// fighting, trading). Then it SIGKILLs the zone node simulating the most
// players and measures, from the kill:
//   - the new table written by the failover controller, and the last of
//     the dead node's regions simulated again (every node that gained one
//     holds that table and has ticked since: read from its dashboard);
//   - the dead node's entities seen again on the survivors, and each of
//     its players' rollback (how long before the kill the player stood
//     where it reappeared), from a census of every node's simulated
//     entities every 100 ms, which also checks that no entity is
//     simulated by two nodes at any round (beyond a handoff's overlap
//     between two nodes' samples);
//   - the bots: none gave up, and those whose gateway was the dead node
//     logged in again on another (when the last of them was back);
//   - the money: the economy's audit sound (every accepted movement in
//     the ledger once, balances summing to 0).
//
// SHARDWISE_FAILOVER_TTL sets the lease TTL (default 2s): scripts/bench-
// failover runs it at 1, 2 and 5 s and collects its "failover:" line.
// SHARDWISE_LONG=1 plays longer with more bots.
func TestZoneFailoverSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes: not in -short")
	}
	// TTL 2 s by default: at 1 s a survivor starved of CPU by the rest of
	// the suite for 0.9 s would be fenced too.
	ttl := durationEnv(t, "SHARDWISE_FAILOVER_TTL", 2*time.Second)
	botCount, play, after, endEarly := 12, 4*time.Second, 4*time.Second, true
	if os.Getenv("SHARDWISE_LONG") == "1" {
		botCount, play, after, endEarly = 40, 15*time.Second, 10*time.Second, false
	}
	bin := e2eBinary(t)
	eps, cl := etcdForCmdTest(t)
	redis := testenv.StartRedis(t)
	keyFile, pub := keygen(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	names := []string{"zone-a", "zone-b", "zone-c", "zone-d"}
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", certs, "--nodes", strings.Join(names, ",")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := cl.ApplyRegions(ctx, quadrantTable(t, names), coord.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	econStore := "sqlite://" + filepath.Join(dir, "econ.db")
	ep := startE2E(t, "econ-a", bin, "econ", "--endpoints", eps, "--name", "econ-a", "--store", econStore, "--ttl", "2s", "--epoch", "5s")
	ep.waitLine(t, econReadyRE, 30*time.Second)

	ttlFlag := fmt.Sprintf("%ds", int(ttl/time.Second))
	procs := map[string]*e2eProc{}
	for _, n := range names {
		args := append(e2eZoneArgs(eps, certs, n, ttlFlag, "127.0.0.1:0", 0),
			"--gateway", "127.0.0.1:0", "--login-pub", pub, "--directory", "redis://"+redis.Addr,
			"--world-store", "sqlite://"+filepath.Join(dir, "world.db"), "--economy", "plaintext")
		procs[n] = startE2E(t, n, append([]string{bin}, args...)...)
	}
	gateways, dashboards := map[string]string{}, map[string]string{}
	for _, n := range names {
		m := procs[n].waitLine(t, zoneReadyRE, 60*time.Second)
		gateways[n], dashboards[n] = m[2], m[3]
	}
	c := newCensus(dashboards, nil)
	startCensus(t, c, 100*time.Millisecond)

	gws := make([]string, len(names))
	for i, n := range names {
		gws[i] = gateways[n]
	}
	bots := startSimBots(t, gws, keyFile, botCount)
	waitBots(t, bots, botCount)
	// Play: the bots walk across the quadrants' borders, handed over.
	<-time.After(play) // the play's length, not a synchronisation

	// The victim: the node simulating the most players.
	before := c.snapshot()
	victim, most := "", -1
	for _, n := range names {
		k := 0
		for _, e := range before[n].Entities {
			if e.Kind == game.KindNamePlayer {
				k++
			}
		}
		if k > most {
			victim, most = n, k
		}
	}
	v0, err := cl.Regions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := v0.RegionsOf(victim)
	onVictim := before[victim].Entities
	tables, err := cl.WatchRegions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The bots whose gateway dies: bot i logs in first on gateway i mod 4
	// (sim.BotsConfig.Gateways), and none has logged in again yet.
	onGateway := 0
	for i := range botCount {
		if names[i%len(names)] == victim {
			onGateway++
		}
	}
	r0 := bots.Stats().Reconnects
	var backAt time.Time // when the last of them was back in
	rctx, rcancel := context.WithCancel(ctx)
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		for rctx.Err() == nil {
			if bots.Stats().Reconnects >= r0+onGateway {
				backAt = time.Now()
				return
			}
			select {
			case <-rctx.Done():
			case <-time.After(20 * time.Millisecond): // polling the bots' counters
			}
		}
	}()
	defer func() { rcancel(); <-rdone }()
	kill := procs[victim].kill(t)
	<-procs[victim].done
	c.drop(victim)
	t.Logf("killed %s (%d regions, %d entities, %d players at its last sample) at %s",
		victim, len(lost), len(onVictim), most, kill.Format(time.RFC3339Nano))

	// The controller's table: the first version past v0.
	var next *cells.Table
	var tableAt time.Time
	limit := time.After(ttl + 10*time.Second)
	for next == nil {
		select {
		case u := <-tables:
			if u.Table.Version() > v0.Version() {
				next, tableAt = u.Table, time.Now()
			}
		case <-limit:
			t.Fatalf("no new region table %v after killing %s (lease TTL %v)", ttl+10*time.Second, victim, ttl)
		}
	}
	_, prov, err := cl.RegionsProvenance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gainers := map[string]int{}
	for _, r := range lost {
		owner := next.Owner(r)
		if owner == victim {
			t.Fatalf("table %d still gives region %d to %s", next.Version(), r, victim)
		}
		gainers[owner]++
	}
	// Simulated again: every node that gained a region holds the table and
	// ticked after first showing it.
	firstTick := map[string]uint64{}
	var simAt time.Time
	testenv.PollUntil(t, 10*time.Second, "the nodes that gained regions ticking with the new table", func() bool {
		s := c.snapshot()
		for n := range gainers {
			if s[n].TableVersion < next.Version() {
				return false
			}
			if _, ok := firstTick[n]; !ok {
				firstTick[n] = s[n].Tick
			}
			if s[n].Tick <= firstTick[n] {
				return false
			}
		}
		simAt = time.Now()
		return true
	})
	// Recovery: what the survivors show of the victim's entities while the
	// bots play on, for after at most. But for SHARDWISE_LONG=1, the play
	// ends at the event: once the survivors show what the checks below
	// require (two thirds of the victim's entities, all its players) and
	// the census has watched for twice dupPersist since the regions were
	// simulated again, so that an entity restored on two nodes stays in
	// sight as long as a duplicate takes to count.
	recoveredEnough := func() bool {
		if !failoverRecovers || !endEarly {
			return false
		}
		seen := map[uint64]bool{}
		for n, s := range c.snapshot() {
			if n != victim {
				for id := range s.Entities {
					seen[id] = true
				}
			}
		}
		recovered, players, back := 0, 0, 0
		for id, e := range onVictim {
			if seen[id] {
				recovered++
			}
			if e.Kind == game.KindNamePlayer {
				players++
				if seen[id] {
					back++
				}
			}
		}
		return recovered >= len(onVictim)*2/3 && back == players
	}
	for playEnd := time.Now().Add(after); time.Now().Before(playEnd); {
		if time.Since(simAt) >= 2*dupPersist && recoveredEnough() {
			break
		}
		<-time.After(100 * time.Millisecond) // the census's period
	}
	// The bots of the dead gateway log in again once a login's takeover no
	// longer waits for the dead node (its lease): give them until TTL +
	// 20 s after the kill.
	select {
	case <-rdone:
	case <-time.After(time.Until(kill.Add(ttl + 20*time.Second))):
	}
	rcancel()
	<-rdone
	st, botsErr := bots.Stop()
	reconnected := "never"
	if !backAt.IsZero() {
		reconnected = fmt.Sprintf("%dms", backAt.Sub(kill).Milliseconds())
	}
	now := c.snapshot()
	seen := map[uint64]bool{}
	for n, s := range now {
		if n == victim {
			continue
		}
		for id := range s.Entities {
			seen[id] = true
		}
	}
	recovered, players, playersBack := 0, 0, 0
	var losses []time.Duration
	for id, e := range onVictim {
		if seen[id] {
			recovered++
		}
		if e.Kind != game.KindNamePlayer {
			continue
		}
		players++
		if seen[id] {
			playersBack++
		}
		if d, _, ok := rollback(c.trailOf(id), kill, victim); ok {
			losses = append(losses, d)
		}
	}
	slices.Sort(losses)
	transient, dups := c.duplicates()

	audit, auditErr := runCmd(t, newRootCmd(), "", "econ", "audit", "--store", econStore, "--json")
	var aj econ.AuditJSON[json.RawMessage]
	if err := json.Unmarshal([]byte(audit), &aj); err != nil {
		t.Fatalf("econ audit --json: %v\n%s", err, audit)
	}

	lossText := "none seen"
	if len(losses) > 0 {
		lossText = fmt.Sprintf("p50 %v max %v over %d", losses[len(losses)/2].Round(time.Millisecond), losses[len(losses)-1].Round(time.Millisecond), len(losses))
	}
	line := fmt.Sprintf("failover: ttl=%v victim=%s regions=%d kill-to-table=%dms kill-to-simulated=%dms entities=%d recovered=%d players=%d players-back=%d rollback=[%s] bots=%d on-gateway=%d reconnected=%s reconnects=%d login-failures=%d dup-transient=%d dup=%d money-ok=%v",
		ttl, victim, len(lost), tableAt.Sub(kill).Milliseconds(), simAt.Sub(kill).Milliseconds(),
		len(onVictim), recovered, players, playersBack, lossText, st.Bots, onGateway, reconnected, st.Reconnects, st.LoginFailures, transient, len(dups), aj.OK)
	t.Log(line)
	fmt.Println(line) // scripts/bench-failover collects it
	t.Logf("table %d written by %q: %s", prov.Version, prov.Writer, prov.Reason)
	t.Logf("bots: logins %d (failed %d), reconnects %d, legs %d, errors %v, closes %v",
		st.Logins, st.LoginFailures, st.Reconnects, st.Legs, st.Errors, st.Closes)

	// What failover guarantees today.
	if !strings.HasPrefix(prov.Writer, "controller ") || prov.Version != next.Version() {
		t.Errorf("table %d: written by %q (version %d), want the failover controller", next.Version(), prov.Writer, prov.Version)
	}
	// The goal, TTL + 1 s, is the benchmark's to judge (scripts/bench-
	// failover): on a machine that runs the whole suite at once the nodes
	// may miss it without anything being wrong. The test's bounds are
	// liveness: the table within TTL + 10 s, the regions 10 s after it.
	if got := simAt.Sub(kill); got > ttl+time.Second {
		t.Logf("the last of %s's regions simulated again %v after the kill: over the goal of the TTL %v + 1 s", victim, got, ttl)
	}
	if len(dups) > 0 {
		t.Errorf("entities simulated by two nodes: %s", strings.Join(dups, "; "))
	}
	if !aj.OK || aj.SumBalances != 0 {
		t.Errorf("the money audit after the kill: ok %v (%v), sum of balances %d, problems %v", aj.OK, auditErr, aj.SumBalances, aj.Problems)
	}
	if botsErr != nil {
		t.Errorf("bots gave up: %v", botsErr)
	}
	if backAt.IsZero() {
		t.Errorf("the %d bots whose gateway was %s did not all log in again elsewhere (reconnects %d)", onGateway, victim, st.Reconnects-r0)
	}
	for _, n := range names {
		if n != victim && procs[n].exited() {
			t.Errorf("%s exited after %s was killed: %v", n, victim, procs[n].err)
		}
	}
	if !failoverRecovers {
		t.Logf("failoverRecovers is false: the dead node's entities (%d of %d back) and players (%d of %d back) are reported, not required",
			recovered, len(onVictim), playersBack, players)
		return
	}
	// With replicated checkpoints: the dead node's entities back (but for
	// those it made, took by handoff or destroyed after its last
	// checkpoint), every player back, each having lost at most about a
	// second. Without checkpoints 3–5 of about 220 came back; with them
	// 181–211 of 219–228 (83–96 %) under load. What may be lost is the
	// kill simulation's to bound exactly (zone/zonesim, TestKillNode
	// counts it per seed); here two thirds tell the path works end to end.
	if recovered < len(onVictim)*2/3 {
		t.Errorf("%d of the %d entities %s simulated came back", recovered, len(onVictim), victim)
	}
	if playersBack < players {
		t.Errorf("%d of the %d players %s simulated came back", playersBack, players, victim)
	}
	// The goal (at most the checkpoint interval, 1 s) is the benchmark's;
	// here a player may lose no more than two intervals and a sample (the
	// trail is sampled every 250 ms by each node), on a loaded machine.
	if len(losses) > 0 && losses[len(losses)-1] > 2250*time.Millisecond {
		t.Errorf("a player lost %v of its walk: more than two checkpoint intervals (1 s) and one sample", losses[len(losses)-1])
	}
}
