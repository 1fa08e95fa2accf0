package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/zone"
)

// goodReport is a report every invariant holds on: a 15 s play with the
// move at 4 s (handed over at 5 s), the economy node kill at 7 s and the
// zone node kill at 9 s (its regions re-owned 2.4 s later, simulated
// again 2.5 s later, its players back within 4 s).
func goodReport() WorldReport {
	r := WorldReport{
		Played:          15 * time.Second,
		Zones:           []ZoneNodeReport{{Name: "zone-1", TableVersion: 2}, {Name: "zone-2", TableVersion: 2}},
		PlayersLoggedIn: 4, PlayerEntities: 8,
		Handoffs:        zone.HandoffStats{Acked: 10},
		HandoffP99Ticks: 2,
		RegionMove: RegionMoveReport{Region: 3, From: "zone-1", To: "zone-2", Version: 2, Due: 4 * time.Second, At: 4 * time.Second,
			Finished: true, HandedOver: true, HandedOverAt: 5 * time.Second},
		KillAt: 7 * time.Second, Killed: "econ-1", Orphans: 2, OrphansSettled: 2,
		ZoneKill: goodZoneKill(),
	}
	r.Bots.Logins = 4
	return r
}

func goodZoneKill() ZoneKillReport {
	return ZoneKillReport{
		Due: 9 * time.Second, Node: "zone-2", At: 9 * time.Second, TTL: 2 * time.Second, Controller: true,
		Regions: []int{2, 3}, TableVersion: 2,
		Reowned: true, NewTableVersion: 3, TableWriter: "controller zone-1", TableAfter: 2400 * time.Millisecond, Standbys: []string{"zone-1", "zone-3"},
		Simulated: true, SimulatedAfter: 2500 * time.Millisecond,
		Recovered: true, EntitiesBefore: 120, EntitiesAfter: 90, EntitiesSameID: 0,
		PlayersOnGateway: 4, PlayersReconnected: 4, ReconnectedAfter: 4 * time.Second,
		PlayersSimulated: 3, PlayersBack: 3, BackAfter: 3 * time.Second,
		RestoresPlayers: true, TradesBefore: 2, TradesAfter: 1,
	}
}

func checked(r WorldReport) WorldReport { r.check(); return r }

func TestWorldReportGood(t *testing.T) {
	r := checked(goodReport())
	if !r.OK() || len(r.Notes) > 0 {
		t.Fatalf("failures %q, notes %q: want none", r.Failures, r.Notes)
	}
}

// TestWorldReportStoppedEarly: a --serve run stopped before the moments
// makes neither, and that fails nothing: the report says so.
func TestWorldReportStoppedEarly(t *testing.T) {
	r := goodReport()
	r.Played = 2 * time.Second
	r.RegionMove = RegionMoveReport{Region: -1, Due: 4 * time.Second}
	r.Killed, r.Orphans, r.OrphansSettled = "", 0, 0
	r.ZoneKill = ZoneKillReport{Due: 9 * time.Second, TTL: 2 * time.Second}
	r.Handoffs = zone.HandoffStats{}
	r.HandoffP99Ticks = 0
	r = checked(r)
	if !r.OK() {
		t.Fatalf("failures %q: a run stopped before its moments fails nothing", r.Failures)
	}
	if r.RegionMove.NotMade == "" || r.KillNotMade == "" || r.ZoneKill.NotMade == "" || len(r.Notes) != 4 {
		t.Fatalf("notes %q (move %q, kill %q, zone kill %q): want the move, the kills and the handoffs said not done",
			r.Notes, r.RegionMove.NotMade, r.KillNotMade, r.ZoneKill.NotMade)
	}
	var b strings.Builder
	r.Print(&b)
	for _, want := range []string{"region move               none: the play ended after 2s, before the region move was made (due at 4s)",
		"economy node killed       none: the play ended after 2s", "zone node killed          none: the play ended after 2s, before the zone node kill was made (due at 9s)",
		"p99 none (no handoff acked)", "every invariant holds"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWorldReportMoveNeverHandedOver: a move whose players never all left
// the old owner fails once the play went on moveBound after it, and is a
// note before.
func TestWorldReportMoveNeverHandedOver(t *testing.T) {
	r := goodReport()
	r.RegionMove.HandedOver, r.RegionMove.HandedOverAt = false, 0
	if c := checked(r); c.OK() || !strings.Contains(c.Failures[0], "left players on the old owner") {
		t.Fatalf("failures %q: want the move's players not handed over", c.Failures)
	}
	r.Played = r.RegionMove.At + moveBound - time.Second
	if c := checked(r); !c.OK() || len(c.Notes) != 1 {
		t.Fatalf("failures %q, notes %q: within the bound, want a note only", c.Failures, c.Notes)
	}
	r = goodReport()
	r.RegionMove.Finished = false
	if c := checked(r); c.OK() || !strings.Contains(c.Failures[0], "did not reach every node") {
		t.Fatalf("failures %q: want the table not everywhere", c.Failures)
	}
	r = goodReport()
	r.RegionMove = RegionMoveReport{Region: -1, Due: 4 * time.Second, Error: "demo: region move: etcd down"}
	if c := checked(r); c.OK() || !strings.Contains(c.Failures[0], "etcd down") {
		t.Fatalf("failures %q: want the failed move", c.Failures)
	}
}

// TestWorldReportFailures: bots that gave up, a zone node lost mid-run and
// a failed kill are failures, each said in the text.
func TestWorldReportFailures(t *testing.T) {
	r := goodReport()
	r.BotErrors = []string{"bot 3: gateway gone"}
	r.Zones[1].Stopped = "link: lost"
	r.Killed, r.Orphans, r.OrphansSettled = "", 0, 0
	r.KillError = "demo: kill econ-1: not killed: looking for its open epochs: db closed"
	r = checked(r)
	want := []string{"zone node zone-2 stopped before the end of the run: link: lost", "1 bot gave up (first: bot 3: gateway gone)",
		"the economy node kill failed: demo: kill econ-1: not killed"}
	if len(r.Failures) != len(want) {
		t.Fatalf("failures %q: want %d", r.Failures, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Failures[i], w) {
			t.Errorf("failure %d %q: want %q", i, r.Failures[i], w)
		}
	}
	var b strings.Builder
	r.Print(&b)
	for _, w := range []string{"bots that gave up         1", "zone node lost            zone-2: link: lost", "none, the kill FAILED"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, b.String())
		}
	}
}

func TestWorldReportHandoffP99(t *testing.T) {
	for _, c := range []struct {
		ticks int
		want  string
	}{{0, "p99 none"}, {3, "p99 acked within 3 ticks"}, {zone.AckTickBuckets, fmt.Sprintf("p99 acked %d or more ticks", zone.AckTickBuckets)}} {
		r := WorldReport{HandoffP99Ticks: c.ticks}
		if got := r.handoffP99(); !strings.HasPrefix(got, c.want) {
			t.Errorf("p99 ticks %d: %q, want %q", c.ticks, got, c.want)
		}
	}
}

// TestWorldReportExplainsItsCounts: the funding postings are counted apart
// from the settles' (the netting ratio is over the settles'), and the
// bots' purchases and the game's agree once the purchases a bot never saw
// the outcome of are told apart from those not shown within the wait.
func TestWorldReportExplainsItsCounts(t *testing.T) {
	r := goodReport()
	r.SettlePostings, r.FundingPostings, r.NettingRatio = 24, 40, 28.0/24
	r.Ledger.Head.Len = 64
	r.Economy.Accepted, r.Economy.Bought = 28, 9
	r.Bots.Purchases, r.Bots.PurchasesUnseen = 8, 1
	var b strings.Builder
	checked(r).Print(&b)
	for _, want := range []string{
		"ledger postings           24 by the play's settles (netting ratio 1.2 movements per posting), and 40 funding postings before it",
		"ledger chain              64 postings proved (the whole ledger: funding, settles",
		"8 purchases (0 not shown within the wait, 1 whose outcome the bot did not see)",
		"9 purchases accepted, 0 refused for want of coins",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWorldReportZoneKill: the zone node kill's figures are printed from
// the kill; a failover or a reconnect not done is a failure once the play
// went on past its bound after the kill, and a note before; a failed kill
// is a failure; and the good report's figures are all said.
func TestWorldReportZoneKill(t *testing.T) {
	var b strings.Builder
	checked(goodReport()).Print(&b)
	for _, want := range []string{
		"zone node killed          zone-2, the failover controller at 9.0s: 2 regions of table version 2, lease 2s",
		"regions re-owned        version 3 by controller zone-1, 2.4s after the kill, to zone-1 zone-3",
		"simulated again         2.5s after the kill",
		"entities in its regions 120 before the kill, 90 1s after they were simulated again (0 of them back under the same id)",
		"its gateway's players   4 of 4 back in the world through another gateway, the last 4.0s after the kill",
		"players it simulated    3 of 3 back in the world on another node, the last 3.0s after the kill",
		"trades committed        2 before the kill, 1 after it",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	for _, c := range []struct {
		name   string
		change func(*ZoneKillReport)
		after  time.Duration // how long the play went on after the kill
		fail   string        // "": a note only
	}{
		{"not re-owned", func(k *ZoneKillReport) { k.Reowned, k.Simulated, k.Recovered = false, false, false }, 8 * time.Second,
			"the killed zone node zone-2's regions were not re-owned: the play went on 8s after the kill"},
		{"not re-owned yet", func(k *ZoneKillReport) { k.Reowned, k.Simulated, k.Recovered = false, false, false }, 6 * time.Second, ""},
		{"not simulated", func(k *ZoneKillReport) { k.Simulated, k.Recovered = false, false }, 8 * time.Second,
			"the killed zone node zone-2's regions were not all simulated again"},
		{"gateway players missing", func(k *ZoneKillReport) { k.PlayersReconnected = 3 }, 16 * time.Second,
			"1 of the 4 players of the killed gateway zone-2 were not back in the world: the play went on 16s"},
		{"gateway players missing early", func(k *ZoneKillReport) { k.PlayersReconnected = 3 }, 6 * time.Second, ""},
		{"simulated players missing", func(k *ZoneKillReport) { k.PlayersBack = 1 }, 16 * time.Second,
			"2 of the 3 players simulated on the killed zone node zone-2 were not back in the world"},
		{"kill failed", func(k *ZoneKillReport) {
			*k = ZoneKillReport{Due: 9 * time.Second, Error: "demo: zone node kill: etcd down"}
		}, 6 * time.Second,
			"the zone node kill failed: demo: zone node kill: etcd down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := goodReport()
			c.change(&r.ZoneKill)
			r.Played = 9*time.Second + c.after
			r = checked(r)
			if c.fail == "" {
				if !r.OK() || len(r.Notes) != 1 {
					t.Fatalf("failures %q, notes %q: want a note only", r.Failures, r.Notes)
				}
				return
			}
			if r.OK() || !strings.HasPrefix(r.Failures[0], c.fail) {
				t.Fatalf("failures %q: want %q", r.Failures, c.fail)
			}
		})
	}
	// Without failoverRestoresPlayers the players it lost are notes,
	// without failoverKeepsView the blinks of its entities are; a blink of
	// another entity still fails.
	r := goodReport()
	r.ZoneKill.RestoresPlayers, r.ZoneKill.BlinksNoted, r.ZoneKill.PlayersReconnected, r.ZoneKill.PlayersBack = false, true, 1, 1
	r.ZoneKill.PlayersLost, r.ZoneKill.Blinks, r.Bots.Blinks = 2, 3, 3
	r.Played = 9*time.Second + 30*time.Second
	if c := checked(r); !c.OK() || len(c.Notes) != 2 || !strings.Contains(c.Notes[0], "2 players of the killed zone node zone-2 logged in at the end without their master, their pet or both") {
		t.Fatalf("players lost, blinks of its entities: failures %q, notes %q; want two notes", c.Failures, c.Notes)
	}
	var b2 strings.Builder
	checked(r).Print(&b2)
	if want := "players conserved         yes: 4 logged in, 8 entities (a master and a pet each); not counted: 2 players of the killed zone node missing their master or pet (see below)"; !strings.Contains(b2.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b2.String())
	}
	r.Bots.Blinks = 4
	if c := checked(r); c.OK() || c.Failures[0] != "clients saw 4 blinks (3 of them of the killed zone node's entities or players')" {
		t.Fatalf("a blink of another entity: failures %q", c.Failures)
	}
	r.ZoneKill.RestoresPlayers, r.Bots.Blinks = true, 3
	if c := checked(r); c.OK() || len(c.Failures) != 2 || len(c.Notes) != 1 || !strings.HasPrefix(c.Notes[0], "3 blinks of the killed zone node") {
		t.Fatalf("restoring players, blinks noted: failures %q, notes %q; want both players' checks and the blinks' note", c.Failures, c.Notes)
	}
	r.ZoneKill.BlinksNoted = false
	if c := checked(r); c.OK() || len(c.Failures) != 3 || c.Failures[0] != "clients saw 3 blinks" {
		t.Fatalf("restoring players: failures %q; want the blinks and both players' checks", c.Failures)
	}

	// No trade after the kill is said, not failed.
	r = goodReport()
	r.ZoneKill.TradesAfter = 0
	if c := checked(r); !c.OK() || len(c.Notes) != 1 || c.Notes[0] != "no trade committed after the zone node kill (2 before it)" {
		t.Fatalf("no trade after the kill: failures %q, notes %q", c.Failures, c.Notes)
	}

	r = goodReport()
	r.ZoneKill = ZoneKillReport{Due: -1}
	if r = checked(r); !r.OK() || len(r.Notes) != 0 {
		t.Fatalf("no zone kill asked for: failures %q, notes %q", r.Failures, r.Notes)
	}
}
