package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
)

// WorldReport is what the world demo found. OK is false when an invariant
// failed; Failures says which. It marshals to JSON as "shardwise demo
// --json" writes it (MarshalJSON): an "ok" beside its fields, every key
// snake_case, durations in nanoseconds, lists [] when empty.
type WorldReport struct {
	Elapsed time.Duration `json:"elapsed_ns"`
	// Played is how long the bots played: Duration, or until Stop
	// (Stopped: a --serve run).
	Played  time.Duration `json:"played_ns"`
	Stopped bool          `json:"stopped"`
	// Zones is every zone node's end state, in Zones order.
	Zones []ZoneNodeReport `json:"zones"`

	// DoubleSimulated counts the times the census saw one entity simulated
	// by two nodes (must be 0); DoubleExamples the first of them.
	DoubleSimulated int      `json:"double_simulated"`
	DoubleExamples  []string `json:"double_examples"`
	// InvariantBreaches counts the ticks after which a zone node's
	// Runtime.CheckInvariants found a breach (must be 0);
	// InvariantExamples the first of them.
	InvariantBreaches int      `json:"invariant_breaches"`
	InvariantExamples []string `json:"invariant_examples"`
	// Players is the end-of-run count of the logged-in accounts' entities
	// (a master and a pet each, each held once); PlayerMismatches the
	// accounts that disagreed at the best instant.
	PlayersLoggedIn  int      `json:"players_logged_in"`
	PlayerEntities   int      `json:"player_entities"`
	PlayerMismatches []string `json:"player_mismatches"`

	// Handoffs are every node's handoff counters summed; HandoffP99Ticks
	// the 99th percentile of their send-to-ack time in ticks: the ack of a
	// handoff sent in tick t was applied by tick t+HandoffP99Ticks of the
	// source (1: at the start of the next tick); 0 when none was acked,
	// and zone.AckTickBuckets when it is in the histogram's last bucket,
	// which means that many ticks or more.
	Handoffs        zone.HandoffStats `json:"handoffs"`
	HandoffP99Ticks int               `json:"handoff_p99_ticks"`
	// RegionMove is the region move (Region -1: none was made).
	RegionMove RegionMoveReport `json:"region_move"`

	// Bots is what the bots did and saw: Blinks must be 0. BotErrors are
	// the errors of the bots that gave up (none may).
	Bots      sim.BotStats `json:"bots"`
	BotErrors []string     `json:"bot_errors"`

	// Economy is the game's economy counters summed over the zone nodes:
	// movements accepted and rejected, loot, purchases, trades.
	Economy game.EconomyStats `json:"economy"`
	// SettlePostings is the ledger postings written during the run (by
	// the economy nodes' settles); NettingRatio is Economy.Accepted /
	// SettlePostings. FundingPostings is the postings written before the
	// play, the bots' allowances (WorldConfig.Allowance): not movements,
	// so counted apart, as the economy demo does.
	SettlePostings  int64   `json:"settle_postings"`
	FundingPostings int64   `json:"funding_postings"`
	NettingRatio    float64 `json:"netting_ratio"`
	// Audit is the money audit of the ledger after the run (money and
	// goods: every asset is a ledger account); Ledger what VerifyLedger
	// proved of the posting chain (LedgerErr the break it found).
	Audit     econ.AuditReport    `json:"audit"`
	Ledger    netting.LedgerProof `json:"ledger"`
	LedgerErr string              `json:"ledger_error,omitempty"`
	// Killed is the economy node killed (halted), its orphans and how
	// many the survivors' sweep settled. KillAt is when the kill was due
	// (negative: none); KillError why it failed, KillNotMade why it was
	// not made (the play ended first).
	Killed         string        `json:"killed,omitempty"`
	Orphans        int           `json:"orphans"`
	OrphansSettled int           `json:"orphans_settled"`
	OrphansAfter   time.Duration `json:"orphans_settled_after_ns"`
	KillAt         time.Duration `json:"kill_at_ns"`
	KillError      string        `json:"kill_error,omitempty"`
	KillNotMade    string        `json:"kill_not_made,omitempty"`
	// ZoneKill is the zone node killed and its failover (Due negative:
	// none asked for).
	ZoneKill ZoneKillReport `json:"zone_kill"`

	// RunErrors are what went wrong around the checks (the sweep's wait,
	// stopping the nodes): not invariants by themselves. Notes are the
	// checks not made, and why (a run stopped early).
	RunErrors []string `json:"run_errors"`
	Notes     []string `json:"notes"`
	Failures  []string `json:"failures"`
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
	// Stopped is set when the node stopped before the demo stopped it (a
	// failure): its Host's error. Killed is set for the node the demo
	// killed (ZoneKill): its numbers are those of its last tick.
	Stopped string `json:"stopped,omitempty"`
	Killed  bool   `json:"killed"`
}

// RegionMoveReport is the region move: due at Due (negative: none), made
// at At (Region -1: not made; Error says why it failed, NotMade why it was
// not tried). Finished says every node's last tick held the new table;
// HandedOver that its entities were handed over (the old owner held no
// player in the region, every node the new table), at HandedOverAt.
type RegionMoveReport struct {
	Region       int           `json:"region"`
	From         string        `json:"from,omitempty"`
	To           string        `json:"to,omitempty"`
	Version      uint64        `json:"version,omitempty"`
	Due          time.Duration `json:"due_ns"`
	At           time.Duration `json:"at_ns,omitempty"`
	Finished     bool          `json:"finished"`
	HandedOver   bool          `json:"handed_over"`
	HandedOverAt time.Duration `json:"handed_over_at_ns,omitempty"`
	Error        string        `json:"error,omitempty"`
	NotMade      string        `json:"not_made,omitempty"`
}

// moveBound is how long the play must go on after the region move for its
// completion to be checked: the table on every node and the region's
// players all handed over (a mass handoff, each abandoned after 2 s at
// worst, zone's handoff deadline). A run that ends sooner gets a note.
const moveBound = 5 * time.Second

// runEnd is what the run hands the report.
type runEnd struct {
	bots             sim.BotStats
	botErr           error
	players          playerCount
	played           time.Duration
	stopped          bool
	moveErr, killErr error
	zoneKillErr      error
	runErr           error
}

// OK reports whether every invariant held.
func (r WorldReport) OK() bool { return len(r.Failures) == 0 }

// report gathers the end state and checks the invariants. It runs after
// joinHosts.
func (d *worldDemo) report(ctx context.Context, end runEnd) (WorldReport, error) {
	r := WorldReport{Played: end.played, Stopped: end.stopped, Bots: end.bots, PlayersLoggedIn: end.players.LoggedIn, PlayerEntities: end.players.Entities, PlayerMismatches: end.players.Mismatches}
	r.RunErrors = errStrings(end.runErr)
	r.BotErrors = errStrings(end.botErr)
	d.mu.Lock()
	for _, name := range d.cfg.Zones {
		n := d.nodes[name]
		z := ZoneNodeReport{
			Name: name, Ticks: n.last.Tick, TickP50: quantile(n.ticks, 0.5), TickP99: quantile(n.ticks, 0.99),
			Simulated: n.last.Simulated, RenderGhosts: n.last.RenderGhosts, OwnedRegions: n.last.OwnedRegions,
			TableVersion: n.last.TableVersion, Gateway: n.ready.GatewayAddr, Metrics: n.ready.MetricsAddr,
		}
		if n.killed.Load() {
			z.Killed = true
		} else if n.early {
			z.Stopped = fmt.Sprint(n.err)
		}
		r.Zones = append(r.Zones, z)
		r.Handoffs = r.Handoffs.Plus(n.last.Handoff)
		r.Economy = sumEconomy(r.Economy, n.econ)
	}
	r.RegionMove = RegionMoveReport{Region: -1}
	if m := d.moved; m.Version != 0 {
		r.RegionMove = RegionMoveReport{Region: int(m.Region), From: m.From, To: m.To, Version: m.Version, At: m.At, HandedOver: m.HandedOver, HandedOverAt: m.HandedOverAt}
		r.RegionMove.Finished = true
		for _, z := range r.Zones {
			if !z.Killed && z.TableVersion < m.Version {
				r.RegionMove.Finished = false
			}
		}
	}
	r.ZoneKill = d.zoneKill
	for _, n := range d.nodes {
		if !n.killed.Load() {
			r.ZoneKill.PlayersFromStore += n.fromStore
		}
	}
	trades := 0
	for _, n := range d.nodes {
		trades += n.econ.Committed
	}
	d.mu.Unlock()
	r.ZoneKill.Due, r.ZoneKill.TTL = d.cfg.ZoneKillAt, d.cfg.ZoneTTL
	if r.ZoneKill.Node != "" {
		r.ZoneKill.TradesAfter = trades - r.ZoneKill.TradesBefore
		r.ZoneKill.PlayersLost = end.players.Lost
		d.mu.Lock()
		for _, b := range r.Bots.BlinkLog {
			if d.zoneEntities[ecs.ID(b.Entity)] {
				r.ZoneKill.Blinks++
			}
		}
		d.mu.Unlock()
	}
	if end.zoneKillErr != nil {
		r.ZoneKill.Error = end.zoneKillErr.Error()
	}
	r.RegionMove.Due, r.KillAt = d.cfg.MoveAt, d.cfg.KillAt
	if end.moveErr != nil {
		r.RegionMove.Error = end.moveErr.Error()
	}
	if end.killErr != nil {
		r.KillError = end.killErr.Error()
	}
	if q, ok := r.Handoffs.AckQuantile(0.99); ok {
		r.HandoffP99Ticks = q + 1 // AckTicks counts the ticks begun in between
	}
	r.DoubleSimulated, r.DoubleExamples = d.census.doubles()
	d.mu.Lock()
	r.InvariantBreaches, r.InvariantExamples = d.breaches, slices.Clone(d.breachExamples)
	d.mu.Unlock()

	after, err := d.ledger.PostingCount(ctx)
	if err != nil {
		return r, err
	}
	r.SettlePostings, r.FundingPostings = after-d.postingsBefore, d.fundingPostings
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
	r.check()
	return r, nil
}

// check checks the invariants on what the report holds, filling Failures
// and Notes. A moment due after the play ended is not made, and is no
// failure: a Note says so; so are the checks that depend on it.
func (r *WorldReport) check() {
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, args...)) }
	stoppedFirst := func(what string, due time.Duration) string {
		return fmt.Sprintf("the play ended after %s, before %s was made (due at %s)", r.Played.Round(100*time.Millisecond), what, due)
	}
	for _, z := range r.Zones {
		if z.Stopped != "" {
			fail("zone node %s stopped before the end of the run: %s", z.Name, z.Stopped)
		}
	}
	if r.DoubleSimulated > 0 {
		fail("%d times an entity was simulated by two nodes (first: %s)", r.DoubleSimulated, r.DoubleExamples[0])
	}
	if r.InvariantBreaches > 0 {
		fail("%d ticks broke a runtime invariant (first: %s)", r.InvariantBreaches, r.InvariantExamples[0])
	}
	if len(r.BotErrors) > 0 {
		fail("%s up (first: %s)", plural(len(r.BotErrors), "bot gave", "bots gave"), r.BotErrors[0])
	}
	if len(r.PlayerMismatches) > 0 {
		fail("players not conserved: %d accounts disagree (first: %s)", len(r.PlayerMismatches), r.PlayerMismatches[0])
	}
	switch {
	case r.PlayersLoggedIn > 0:
	case r.Stopped && r.Bots.Logins == 0 && r.Bots.LoginFailures == 0:
		note("no bot had logged in yet when the play was stopped, after %s", r.Played.Round(100*time.Millisecond))
	default:
		fail("no bot was logged in at the end")
	}
	switch k := r.ZoneKill; {
	case r.Bots.Blinks == 0:
	case k.Node != "" && k.BlinksNoted && k.Blinks >= r.Bots.Blinks:
		// Every blink is of the killed node's entities or players' (the
		// blink log holds the first 16; more than that are failures).
	case k.Node != "" && k.BlinksNoted:
		fail("clients saw %d blinks (%d of them of the killed zone node's entities or players')", r.Bots.Blinks, k.Blinks)
	default:
		fail("clients saw %d blinks", r.Bots.Blinks)
	}
	if r.Bots.Leaks > 0 {
		fail("clients were sent %d owner-only frames about another account's entities", r.Bots.Leaks)
	}
	if r.Bots.LoginFailures > 0 && r.Bots.Logins == 0 {
		fail("no bot could log in (%d failures)", r.Bots.LoginFailures)
	}
	m := &r.RegionMove
	moveSkipped := false
	switch {
	case m.Due < 0: // none asked for
	case m.Error != "":
		fail("the region move failed: %s", m.Error)
	case m.Region < 0:
		moveSkipped = true
		m.NotMade = stoppedFirst("the region move", m.Due)
		note("no region move: %s", m.NotMade)
	case !m.Finished || !m.HandedOver:
		what := "did not reach every node"
		if m.Finished {
			what = "left players on the old owner"
		}
		if after := r.Played - m.At; after >= moveBound {
			fail("the region move %s: the play went on %s after it", what, after.Round(100*time.Millisecond))
		} else {
			note("the region move %s when the play ended, %s after it (checked from %s on)", what, after.Round(100*time.Millisecond), moveBound)
		}
	}
	switch {
	case r.Handoffs.Acked > 0:
	case moveSkipped:
		note("no handoff happened in the %s played, before the region move", r.Played.Round(100*time.Millisecond))
	default:
		fail("no handoff happened: the bots never crossed a border")
	}
	r.Failures = append(r.Failures, r.Audit.Problems(true)...)
	if r.LedgerErr != "" {
		fail("the ledger does not prove itself: %s", r.LedgerErr)
	}
	if r.Economy.Failed > 0 {
		fail("%d movements refused as malformed", r.Economy.Failed)
	}
	switch {
	case r.KillAt < 0: // none asked for
	case r.KillError != "":
		fail("the economy node kill failed: %s", r.KillError)
	case r.Killed == "":
		r.KillNotMade = stoppedFirst("the economy node kill", r.KillAt)
		note("no economy node killed: %s", r.KillNotMade)
	case r.OrphansSettled != r.Orphans:
		fail("the sweep settled %d of the killed node's %d orphans", r.OrphansSettled, r.Orphans)
	}
	r.checkZoneKill(fail, note, stoppedFirst)
	if r.Economy.Accepted > 0 && r.SettlePostings == 0 {
		fail("%d movements accepted but no settle postings written", r.Economy.Accepted)
	}
}

// checkZoneKill checks the zone node kill: its regions re-owned and
// simulated again within the lease's TTL and zoneFailoverBound, its
// gateway's players and those it simulated back in the world within
// zoneReconnectBound, each once the play went on that long after the
// kill (a note before). The census (no entity twice), the players' count
// at the end and the money audit are the run's own checks, which hold
// through the kill.
func (r *WorldReport) checkZoneKill(fail, note func(string, ...any), stoppedFirst func(string, time.Duration) string) {
	k := &r.ZoneKill
	if k.Regions == nil {
		k.Regions = []int{}
	}
	if k.Standbys == nil {
		k.Standbys = []string{}
	}
	after := r.Played - k.At
	late := func(bound time.Duration, format string, args ...any) {
		if after >= bound {
			fail(format+": the play went on %s after the kill", append(args, after.Round(100*time.Millisecond))...)
		} else {
			note(format+" when the play ended, %s after the kill (checked from %s on)", append(args, after.Round(100*time.Millisecond), bound)...)
		}
	}
	switch {
	case k.Due < 0: // none asked for
		return
	case k.Error != "":
		fail("the zone node kill failed: %s", k.Error)
		return
	case k.Node == "":
		k.NotMade = stoppedFirst("the zone node kill", k.Due)
		note("no zone node killed: %s", k.NotMade)
		return
	}
	bound := k.TTL + zoneFailoverBound
	switch {
	case !k.Reowned:
		late(bound, "the killed zone node %s's regions were not re-owned", k.Node)
	case !k.Simulated:
		late(bound, "the killed zone node %s's regions were not all simulated again", k.Node)
	}
	if k.TradesBefore > 0 && k.TradesAfter == 0 {
		// Not a failure: a few trades commit in a run, and a short play
		// after the kill may see none by chance.
		note("no trade committed after the zone node kill (%d before it)", k.TradesBefore)
	}
	if !k.RestoresPlayers && k.PlayersLost > 0 {
		// What happened to them is said, not failed
		// (failoverRestoresPlayers).
		note("%s of the killed zone node %s logged in at the end without their master, their pet or both in the world (not counted by the players' check: they died with the node, and the failover does not restore every player yet)",
			plural(k.PlayersLost, "player", "players"), k.Node)
	}
	if k.BlinksNoted && k.Blinks > 0 {
		// The zone nodes still show a dead node's ghosts vanish at its
		// fence (failoverKeepsView): said, not failed.
		note("%s of the killed zone node %s's entities or players' seen by clients (not counted by the blinks' check: the failover does not restore them without a vanish yet)",
			plural(k.Blinks, "blink", "blinks"), k.Node)
	}
	if !k.RestoresPlayers {
		return
	}
	if k.PlayersReconnected < k.PlayersOnGateway {
		late(zoneReconnectBound, "%d of the %d players of the killed gateway %s were not back in the world",
			k.PlayersOnGateway-k.PlayersReconnected, k.PlayersOnGateway, k.Node)
	}
	if k.PlayersBack < k.PlayersSimulated {
		late(zoneReconnectBound, "%d of the %d players simulated on the killed zone node %s were not back in the world",
			k.PlayersSimulated-k.PlayersBack, k.PlayersSimulated, k.Node)
	}
}

// unjoin lists the errors errors.Join joined (or err alone; none for nil).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// errStrings is unjoin as text.
func errStrings(err error) []string {
	var s []string
	for _, e := range unjoin(err) {
		s = append(s, e.Error())
	}
	return s
}

// handoffP99 says the handoffs' p99 for a person.
func (r WorldReport) handoffP99() string {
	switch {
	case r.HandoffP99Ticks == 0:
		return "p99 none (no handoff acked)"
	case r.HandoffP99Ticks >= zone.AckTickBuckets:
		return fmt.Sprintf("p99 acked %d or more ticks after the send", r.HandoffP99Ticks)
	}
	return fmt.Sprintf("p99 acked within %d ticks of the send", r.HandoffP99Ticks)
}

// Print writes the report for a person.
func (r WorldReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nworld demo report (%s)\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  %-8s %6s %9s %9s %9s %7s %7s %7s\n", "node", "ticks", "tick p50", "tick p99", "entities", "ghosts", "regions", "table")
	for _, z := range r.Zones {
		killed := ""
		if z.Killed {
			killed = "  killed (its last tick)"
		}
		fmt.Fprintf(w, "  %-8s %6d %7.1fms %7.1fms %9d %7d %7d %7d%s\n", z.Name, z.Ticks, ms(z.TickP50), ms(z.TickP99), z.Simulated, z.RenderGhosts, z.OwnedRegions, z.TableVersion, killed)
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	fmt.Fprintf(w, "  simulated by two nodes    %d times (census at every tick end)\n", r.DoubleSimulated)
	fmt.Fprintf(w, "  runtime invariants        broken after %d ticks (zone.Runtime.CheckInvariants at every tick end)\n", r.InvariantBreaches)
	lost := ""
	if n := r.ZoneKill.PlayersLost; n > 0 {
		lost = fmt.Sprintf("; not counted: %s of the killed zone node missing their master or pet (see below)", plural(n, "player", "players"))
	}
	fmt.Fprintf(w, "  players conserved         %s: %d logged in, %d entities (a master and a pet each)%s\n", yes(len(r.PlayerMismatches) == 0), r.PlayersLoggedIn, r.PlayerEntities, lost)
	fmt.Fprintf(w, "  handoffs                  %d acked, %d refused, %d aborted; %s\n", r.Handoffs.Acked, r.Handoffs.Refused, r.Handoffs.Aborted, r.handoffP99())
	switch m := r.RegionMove; {
	case m.Region >= 0:
		handed := "NO"
		if m.HandedOver {
			handed = fmt.Sprintf("yes, at %.1fs", m.HandedOverAt.Seconds())
		}
		fmt.Fprintf(w, "  region move               region %d from %s to %s at %.1fs (table version %d), on every node: %s; its players handed over: %s\n",
			m.Region, m.From, m.To, m.At.Seconds(), m.Version, yes(m.Finished), handed)
	case m.Error != "":
		fmt.Fprintf(w, "  region move               FAILED: %s\n", m.Error)
	case m.NotMade != "":
		fmt.Fprintf(w, "  region move               none: %s\n", m.NotMade)
	}
	b := r.Bots
	fmt.Fprintf(w, "  bots                      %d: %d logins (%d relogs, %d resumed in place), %d legs, %d attacks, %d heals\n", b.Bots, b.Logins, b.Relogs, b.Resumed, b.Legs, b.Attacks, b.Heals)
	if len(r.BotErrors) > 0 {
		fmt.Fprintf(w, "  bots that gave up         %d (first: %s)\n", len(r.BotErrors), r.BotErrors[0])
	}
	fmt.Fprintf(w, "  blinks seen by clients    %d\n", b.Blinks)
	fmt.Fprintf(w, "  owner-only leaks          %d (another account's experience or purse sent to a client)\n", b.Leaks)
	// The bots say what their purses showed; the movements line is the
	// game's own account of the same purchases and trades. They differ
	// only by what a purse never showed, which the bots' line says.
	fmt.Fprintf(w, "  bots' purses showed       %d purchases (%d not shown within the wait, %d whose outcome the bot did not see), %d trades committed (each side counts its own), %d cancelled, %d timed out, %d skipped\n",
		b.Purchases, b.PurchasesRefused, b.PurchasesUnseen, b.TradesCommitted, b.TradesCancelled, b.TradeTimeouts, b.TradeSkips)
	e := r.Economy
	fmt.Fprintf(w, "  movements                 %d accepted, %d rejected, %d unknown (%d kills looted, %d purchases accepted, %d refused for want of coins, %d trades committed, %d cancelled)\n",
		e.Accepted, e.Rejected, e.Unknown, e.Loot, e.Bought, e.Refused, e.Committed, e.Cancelled)
	fmt.Fprintf(w, "  ledger postings           %d by the play's settles (netting ratio %.1f movements per posting), and %d funding postings before it (the bots' allowances)\n",
		r.SettlePostings, r.NettingRatio, r.FundingPostings)
	a := r.Audit
	fmt.Fprintf(w, "  sum of balances           %d (money and goods; clearing %d, wallets below zero %d, pending %d, unsettled %d)\n",
		a.SumBalances, a.Clearing, len(a.NegativeWallets), len(a.Pending), len(a.Unsettled))
	if r.LedgerErr == "" {
		fmt.Fprintf(w, "  ledger chain              %d postings proved (the whole ledger: funding, settles, and earlier runs' with --data)\n", r.Ledger.Head.Len)
	}
	switch {
	case r.Killed != "" && r.KillError != "":
		fmt.Fprintf(w, "  economy node killed       %s, but its orphans are unknown: %s\n", r.Killed, r.KillError)
	case r.Killed != "" && r.Orphans == 0:
		fmt.Fprintf(w, "  economy node killed       %s: no open epoch at the kill, so no orphans to sweep\n", r.Killed)
	case r.Killed != "":
		fmt.Fprintf(w, "  economy node killed       %s: %d orphans, %d settled by the survivors' sweep (the last %s after the kill)\n",
			r.Killed, r.Orphans, r.OrphansSettled, r.OrphansAfter.Round(time.Millisecond))
	case r.KillError != "":
		fmt.Fprintf(w, "  economy node killed       none, the kill FAILED: %s\n", r.KillError)
	case r.KillNotMade != "":
		fmt.Fprintf(w, "  economy node killed       none: %s\n", r.KillNotMade)
	}
	r.printZoneKill(w)
	for _, z := range r.Zones {
		if z.Stopped != "" {
			fmt.Fprintf(w, "  zone node lost            %s: %s\n", z.Name, z.Stopped)
		}
	}
	for _, e := range r.RunErrors {
		fmt.Fprintf(w, "  run error: %s\n", e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
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

// printZoneKill writes the zone node kill's lines: the failover's figures,
// each from the kill.
func (r WorldReport) printZoneKill(w io.Writer) {
	k := r.ZoneKill
	after := func(ok bool, d time.Duration) string {
		if !ok {
			return "NOT by the end of the play"
		}
		return fmt.Sprintf("%.1fs after the kill", d.Seconds())
	}
	switch {
	case k.Node != "":
		controller := ""
		if k.Controller {
			controller = ", the failover controller"
		}
		fmt.Fprintf(w, "  zone node killed          %s%s at %.1fs: %s of table version %d, lease %s\n",
			k.Node, controller, k.At.Seconds(), plural(len(k.Regions), "region", "regions"), k.TableVersion, k.TTL)
		table := after(k.Reowned, k.TableAfter)
		if k.Reowned {
			table = fmt.Sprintf("version %d by %s, %s, to %s", k.NewTableVersion, orUnknown(k.TableWriter), table, strings.Join(k.Standbys, " "))
		}
		fmt.Fprintf(w, "    regions re-owned        %s\n", table)
		fmt.Fprintf(w, "    simulated again         %s\n", after(k.Simulated, k.SimulatedAfter))
		if k.Recovered {
			fmt.Fprintf(w, "    entities in its regions %d before the kill, %d %s after they were simulated again (%d of them back under the same id)\n",
				k.EntitiesBefore, k.EntitiesAfter, recoveryGrace, k.EntitiesSameID)
		} else {
			fmt.Fprintf(w, "    entities in its regions %d before the kill, not counted again by the end of the play\n", k.EntitiesBefore)
		}
		last := func(n int, d time.Duration) string {
			if n == 0 {
				return ""
			}
			return fmt.Sprintf(", the last %.1fs after the kill", d.Seconds())
		}
		fmt.Fprintf(w, "    its gateway's players   %d of %d back in the world through another gateway%s\n",
			k.PlayersReconnected, k.PlayersOnGateway, last(k.PlayersReconnected, k.ReconnectedAfter))
		fromStore := ""
		if k.PlayersFromStore > 0 {
			fromStore = fmt.Sprintf("; %d brought in again from their last save (no checkpoint had them)", k.PlayersFromStore)
		}
		fmt.Fprintf(w, "    players it simulated    %d of %d back in the world on another node%s%s\n",
			k.PlayersBack, k.PlayersSimulated, last(k.PlayersBack, k.BackAfter), fromStore)
		if !k.RestoresPlayers {
			fmt.Fprintf(w, "    players lost with it    %d logged in at the end without their master, their pet or both (the failover does not restore players yet)\n",
				k.PlayersLost)
		}
		if k.BlinksNoted {
			fmt.Fprintf(w, "    blinks of its entities  %d of its entities or its players' seen by clients (said, not counted: the failover does not keep them in view yet)\n",
				k.Blinks)
		}
		fmt.Fprintf(w, "    trades committed        %d before the kill, %d after it\n", k.TradesBefore, k.TradesAfter)
	case k.Error != "":
		fmt.Fprintf(w, "  zone node killed          none, the kill FAILED: %s\n", k.Error)
	case k.NotMade != "":
		fmt.Fprintf(w, "  zone node killed          none: %s\n", k.NotMade)
	}
}
