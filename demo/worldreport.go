package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
)

// WorldReport is what the world demo found. OK is false when an invariant
// failed; Failures says which. It marshals to JSON as "shardwise demo
// --json" writes it (durations in nanoseconds, as encoding/json does).
type WorldReport struct {
	Elapsed time.Duration `json:"elapsed_ns"`
	// Zones is every zone node's end state, in Zones order.
	Zones []ZoneNodeReport `json:"zones"`

	// DoubleSimulated counts the times the census saw one entity simulated
	// by two nodes (must be 0); DoubleExamples the first of them.
	DoubleSimulated int      `json:"double_simulated"`
	DoubleExamples  []string `json:"double_examples,omitempty"`
	// Players is the end-of-run count of the logged-in accounts' entities
	// (a master and a pet each, each held once); PlayerMismatches the
	// accounts that disagreed at the best instant.
	PlayersLoggedIn  int      `json:"players_logged_in"`
	PlayerEntities   int      `json:"player_entities"`
	PlayerMismatches []string `json:"player_mismatches,omitempty"`

	// Handoffs are every node's handoff counters summed; HandoffP99Ticks
	// the 99th percentile of their send-to-ack time in ticks: the ack of a
	// handoff sent in tick t was applied by tick t+HandoffP99Ticks of the
	// source (1: at the start of the next tick).
	Handoffs        zone.HandoffStats `json:"handoffs"`
	HandoffP99Ticks int               `json:"handoff_p99_ticks"`
	// RegionMove is the announced move (Region -1: none was made).
	RegionMove RegionMoveReport `json:"region_move"`

	// Bots is what the bots did and saw: Blinks must be 0.
	Bots sim.BotStats `json:"bots"`

	// Economy is the game's economy counters summed over the zone nodes:
	// movements accepted and rejected, loot, purchases, trades.
	Economy game.EconomyStats `json:"economy"`
	// SettlePostings is the ledger postings written during the run;
	// NettingRatio is Economy.Accepted / SettlePostings.
	SettlePostings int64   `json:"settle_postings"`
	NettingRatio   float64 `json:"netting_ratio"`
	// Audit is the money audit of the ledger after the run (money and
	// goods: every asset is a ledger account); Ledger what VerifyLedger
	// proved of the posting chain (LedgerErr the break it found).
	Audit     econ.AuditReport    `json:"audit"`
	Ledger    netting.LedgerProof `json:"ledger"`
	LedgerErr string              `json:"ledger_error,omitempty"`
	// Killed is the economy node killed, its orphans and how many the
	// survivors' sweep settled.
	Killed         string        `json:"killed,omitempty"`
	Orphans        int           `json:"orphans"`
	OrphansSettled int           `json:"orphans_settled"`
	OrphansAfter   time.Duration `json:"orphans_settled_after_ns"`

	// RunErrors are the moments that did not go as planned (not
	// invariants by themselves).
	RunErrors []string `json:"run_errors,omitempty"`
	Failures  []string `json:"failures,omitempty"`
}

// ZoneNodeReport is one zone node at the end of the run.
type ZoneNodeReport struct {
	Name string `json:"name"`
	// Ticks run; TickP50 and TickP99 over the last two seconds.
	Ticks   uint64        `json:"ticks"`
	TickP50 time.Duration `json:"tick_p50_ns"`
	TickP99 time.Duration `json:"tick_p99_ns"`
	// Simulated entities, render ghosts held, regions owned, at the end.
	Simulated    int    `json:"simulated"`
	RenderGhosts int    `json:"render_ghosts"`
	OwnedRegions int    `json:"owned_regions"`
	TableVersion uint64 `json:"table_version"`
	Gateway      string `json:"gateway"`
	Metrics      string `json:"metrics"`
}

// RegionMoveReport is the announced region move.
type RegionMoveReport struct {
	Region   int           `json:"region"`
	From     string        `json:"from,omitempty"`
	To       string        `json:"to,omitempty"`
	Version  uint64        `json:"version,omitempty"`
	At       time.Duration `json:"at_ns,omitempty"`
	Finished bool          `json:"finished"`
}

// OK reports whether every invariant held.
func (r WorldReport) OK() bool { return len(r.Failures) == 0 }

// report gathers the end state and checks the invariants.
func (d *worldDemo) report(ctx context.Context, bots sim.BotStats, players playerCount, runErr error) (WorldReport, error) {
	r := WorldReport{Bots: bots, PlayersLoggedIn: players.LoggedIn, PlayerEntities: players.Entities, PlayerMismatches: players.Mismatches}
	if runErr != nil {
		for _, e := range unjoin(runErr) {
			r.RunErrors = append(r.RunErrors, e.Error())
		}
	}
	d.mu.Lock()
	for _, name := range d.cfg.Zones {
		n := d.nodes[name]
		r.Zones = append(r.Zones, ZoneNodeReport{
			Name: name, Ticks: n.last.Tick, TickP50: quantile(n.ticks, 0.5), TickP99: quantile(n.ticks, 0.99),
			Simulated: n.last.Simulated, RenderGhosts: n.last.RenderGhosts, OwnedRegions: n.last.OwnedRegions,
			TableVersion: n.last.TableVersion, Gateway: n.ready.GatewayAddr, Metrics: n.ready.MetricsAddr,
		})
		r.Handoffs = r.Handoffs.Plus(n.last.Handoff)
		r.Economy = sumEconomy(r.Economy, n.econ)
	}
	r.RegionMove = RegionMoveReport{Region: -1}
	if d.moved.Version != 0 {
		r.RegionMove = RegionMoveReport{Region: int(d.moved.Region), From: d.moved.From, To: d.moved.To, Version: d.moved.Version, At: d.moved.At}
		r.RegionMove.Finished = true
		for _, z := range r.Zones {
			if z.TableVersion < d.moved.Version {
				r.RegionMove.Finished = false
			}
		}
	}
	d.mu.Unlock()
	if q, ok := r.Handoffs.AckQuantile(0.99); ok {
		r.HandoffP99Ticks = q + 1 // AckTicks counts the ticks begun in between
	}
	r.DoubleSimulated, r.DoubleExamples = d.census.doubles()

	after, err := d.ledger.PostingCount(ctx)
	if err != nil {
		return r, err
	}
	r.SettlePostings = after - d.postingsBefore
	if r.SettlePostings > 0 {
		r.NettingRatio = float64(r.Economy.Accepted) / float64(r.SettlePostings)
	}
	if r.Audit, err = econ.Audit(ctx, d.ledger); err != nil {
		return r, err
	}
	var lerr error
	r.Ledger, lerr = netting.VerifyLedger(ctx, d.ledger)
	var broken *netting.LedgerChainBrokenError
	if lerr != nil && !errors.As(lerr, &broken) {
		return r, lerr
	}
	if lerr != nil {
		r.LedgerErr = lerr.Error()
	}
	o := d.watch.counts()
	r.Killed, r.Orphans, r.OrphansSettled, r.OrphansAfter = o.Killed, o.Orphans, o.Settled, o.SettledAfter

	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if r.DoubleSimulated > 0 {
		fail("%d times an entity was simulated by two nodes (first: %s)", r.DoubleSimulated, r.DoubleExamples[0])
	}
	if len(r.PlayerMismatches) > 0 {
		fail("players not conserved: %d accounts disagree (first: %s)", len(r.PlayerMismatches), r.PlayerMismatches[0])
	}
	if r.PlayersLoggedIn == 0 {
		fail("no bot was logged in at the end")
	}
	if r.Bots.Blinks > 0 {
		fail("clients saw %d blinks", r.Bots.Blinks)
	}
	if r.Bots.Leaks > 0 {
		fail("clients were sent %d owner-only frames about another account's entities", r.Bots.Leaks)
	}
	if r.Bots.LoginFailures > 0 && r.Bots.Logins == 0 {
		fail("no bot could log in (%d failures)", r.Bots.LoginFailures)
	}
	if r.Handoffs.Acked == 0 {
		fail("no handoff happened: the bots never crossed a border")
	}
	if d.cfg.MoveAt >= 0 && !r.RegionMove.Finished {
		fail("the region move did not reach every node")
	}
	r.Failures = append(r.Failures, r.Audit.Problems(true)...)
	if r.LedgerErr != "" {
		fail("the ledger does not prove itself: %s", r.LedgerErr)
	}
	if r.Economy.Failed > 0 {
		fail("%d movements refused as malformed", r.Economy.Failed)
	}
	if d.cfg.KillAt >= 0 && r.OrphansSettled != r.Orphans {
		fail("the sweep settled %d of the killed node's %d orphans", r.OrphansSettled, r.Orphans)
	}
	if r.Economy.Accepted > 0 && r.SettlePostings == 0 {
		fail("%d movements accepted but no settle postings written", r.Economy.Accepted)
	}
	return r, nil
}

// unjoin lists the errors errors.Join joined (or err alone).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Print writes the report for a person.
func (r WorldReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nworld demo report (%s)\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  %-8s %6s %9s %9s %9s %7s %7s %7s\n", "node", "ticks", "tick p50", "tick p99", "entities", "ghosts", "regions", "table")
	for _, z := range r.Zones {
		fmt.Fprintf(w, "  %-8s %6d %7.1fms %7.1fms %9d %7d %7d %7d\n", z.Name, z.Ticks, ms(z.TickP50), ms(z.TickP99), z.Simulated, z.RenderGhosts, z.OwnedRegions, z.TableVersion)
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	fmt.Fprintf(w, "  simulated by two nodes    %d times (census at every tick end)\n", r.DoubleSimulated)
	fmt.Fprintf(w, "  players conserved         %s: %d logged in, %d entities (a master and a pet each)\n", yes(len(r.PlayerMismatches) == 0), r.PlayersLoggedIn, r.PlayerEntities)
	fmt.Fprintf(w, "  handoffs                  %d acked, %d refused, %d aborted; p99 acked within %d ticks of the send\n", r.Handoffs.Acked, r.Handoffs.Refused, r.Handoffs.Aborted, r.HandoffP99Ticks)
	if r.RegionMove.Region >= 0 {
		fmt.Fprintf(w, "  region move               region %d from %s to %s at %.1fs (table version %d), on every node: %s\n",
			r.RegionMove.Region, r.RegionMove.From, r.RegionMove.To, r.RegionMove.At.Seconds(), r.RegionMove.Version, yes(r.RegionMove.Finished))
	}
	b := r.Bots
	fmt.Fprintf(w, "  bots                      %d: %d logins (%d relogs, %d resumed in place), %d legs, %d attacks, %d heals\n", b.Bots, b.Logins, b.Relogs, b.Resumed, b.Legs, b.Attacks, b.Heals)
	fmt.Fprintf(w, "  blinks seen by clients    %d\n", b.Blinks)
	fmt.Fprintf(w, "  owner-only leaks          %d (another account's experience or purse sent to a client)\n", b.Leaks)
	fmt.Fprintf(w, "  bots' shopping, trading   %d purchases (%d refused), %d trades committed (each side counts its own), %d cancelled, %d timed out, %d skipped\n",
		b.Purchases, b.PurchasesRefused, b.TradesCommitted, b.TradesCancelled, b.TradeTimeouts, b.TradeSkips)
	e := r.Economy
	fmt.Fprintf(w, "  movements                 %d accepted, %d rejected, %d unknown (%d kills looted, %d bought, %d refused, %d trades committed, %d cancelled)\n",
		e.Accepted, e.Rejected, e.Unknown, e.Loot, e.Bought, e.Refused, e.Committed, e.Cancelled)
	fmt.Fprintf(w, "  ledger postings           %d (netting ratio %.1f movements per posting)\n", r.SettlePostings, r.NettingRatio)
	a := r.Audit
	fmt.Fprintf(w, "  sum of balances           %d (money and goods; clearing %d, wallets below zero %d, pending %d, unsettled %d)\n",
		a.SumBalances, a.Clearing, len(a.NegativeWallets), len(a.Pending), len(a.Unsettled))
	if r.LedgerErr == "" {
		fmt.Fprintf(w, "  ledger chain              %d postings proved\n", r.Ledger.Head.Len)
	}
	switch {
	case r.Killed != "" && r.Orphans == 0:
		fmt.Fprintf(w, "  economy node killed       %s: no open epoch at the kill, so no orphans to sweep\n", r.Killed)
	case r.Killed != "":
		fmt.Fprintf(w, "  economy node killed       %s: %d orphans, %d settled by the survivors' sweep (the last %s after the kill)\n",
			r.Killed, r.Orphans, r.OrphansSettled, r.OrphansAfter.Round(time.Millisecond))
	}
	for _, e := range r.RunErrors {
		fmt.Fprintf(w, "  note: %s\n", e)
	}
	if r.OK() {
		fmt.Fprintf(w, "  every invariant holds\n")
		return
	}
	fmt.Fprintf(w, "  INVARIANTS FAILED:\n")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "    - %s\n", f)
	}
}
