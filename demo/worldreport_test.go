package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/zone"
)

// goodReport is a report every invariant holds on: a 15 s play with the
// move at 4 s (handed over at 5 s) and the kill at 7 s.
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
	}
	r.Bots.Logins = 4
	return r
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
	r.Handoffs = zone.HandoffStats{}
	r.HandoffP99Ticks = 0
	r = checked(r)
	if !r.OK() {
		t.Fatalf("failures %q: a run stopped before its moments fails nothing", r.Failures)
	}
	if r.RegionMove.NotMade == "" || r.KillNotMade == "" || len(r.Notes) != 3 {
		t.Fatalf("notes %q (move %q, kill %q): want the move, the kill and the handoffs said not done", r.Notes, r.RegionMove.NotMade, r.KillNotMade)
	}
	var b strings.Builder
	r.Print(&b)
	for _, want := range []string{"region move               none: the play ended after 2s, before the region move was made (due at 4s)",
		"economy node killed       none: the play ended after 2s", "p99 none (no handoff acked)", "every invariant holds"} {
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
