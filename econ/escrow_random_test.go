package econ

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// Random trades whose deciders die, come back from older checkpoints, or
// never come back, on two economy nodes sweeping at random moments of one
// fake clock: every trade ends decided once, as commit or cancel of
// exactly the offers journaled, every escrow and owed account back at
// zero, every decider that finished believing what the journal says, and
// the money audited sound.

// deciderState is what a trade's decider holds: its checkpointed part.
type deciderState struct {
	offer     [2]int // 0 not sent, 1 accepted, 2 refused (funds or expired)
	decided   bool
	commit    bool
	end       bool
	claim     [2]bool
	overruled bool
}

type randTrade struct {
	id      uint64
	players [2]int
	// gives: side a gives coins, side b swords (0: nothing, no movement).
	gives [2]int64
	st    deciderState
	snap  *deciderState
	dead  bool
	// slow deciders step seldom: the bound passes between their steps.
	slow bool
}

type randEconomy struct {
	t     *testing.T
	ctx   context.Context
	rng   *rand.Rand
	clk   *clock.Fake
	st    *netting.MemStore
	nodes [2]*netting.ClusterNode
	bound time.Duration
	watch [2]escrowWatch
	seen  *randFaults
}

// randFaults counts what the runs met, so the test can tell the faults it
// means to cover really happened.
type randFaults struct {
	expired, overruled, lateOffers, resumed, claimed int
}

func (e *randEconomy) record(scope string, m netting.Movement) netting.Outcome {
	e.t.Helper()
	i := 0
	if !e.nodes[0].Owns(scope) {
		i = 1
	}
	out, err := recordEscrow(e.ctx, e.st, e.nodes[i], scope, m)
	if err != nil {
		e.t.Fatalf("record %s in %s: %v", m.Key, scope, err)
	}
	e.watch[i].recorded(m, out, nil)
	return out
}

func randWallet(player int, side int) string {
	if side == 0 {
		return fmt.Sprintf("player:%d:coins", player)
	}
	return fmt.Sprintf("player:%d:good:3", player)
}

func randAsset(side int) string {
	if side == 0 {
		return "coins"
	}
	return "good:3"
}

func (tr *randTrade) reserved(s int) bool { return tr.st.offer[s] == 1 && tr.gives[s] > 0 }

// endLegs is the decider's end for its decision (the game's rule).
func (tr *randTrade) endLegs(commit bool) []ledger.Leg {
	var legs []ledger.Leg
	for s := range 2 {
		if !tr.reserved(s) {
			continue
		}
		to := s
		if commit {
			to = 1 - s
		}
		legs = append(legs, ledger.Debit(EscrowAccount(tr.id, randAsset(s)), tr.gives[s]),
			ledger.Credit(EscrowOwedAccount(tr.id, "ab"[to], randWallet(tr.players[to], s)), tr.gives[s]))
	}
	return legs
}

// claimLegs is side s's claim for the decision.
func (tr *randTrade) claimLegs(s int) []ledger.Leg {
	from := s
	if tr.st.commit {
		from = 1 - s
	}
	if !tr.reserved(from) {
		return nil
	}
	w := randWallet(tr.players[s], from)
	return []ledger.Leg{ledger.Debit(EscrowOwedAccount(tr.id, "ab"[s], w), tr.gives[from]), ledger.Credit(w, tr.gives[from])}
}

// step takes the decider's next action, as the game's drive would.
func (e *randEconomy) step(tr *randTrade) (done bool) {
	st := &tr.st
	if !st.decided {
		for s := range 2 {
			if st.offer[s] != 0 {
				continue
			}
			if tr.gives[s] == 0 {
				st.offer[s] = 1
				continue
			}
			w := randWallet(tr.players[s], s)
			out := e.record(fmt.Sprintf("player:%d", tr.players[s]), netting.Movement{Key: EscrowKey(tr.id, []string{EscrowOfferA, EscrowOfferB}[s]),
				Legs: []ledger.Leg{ledger.Debit(w, tr.gives[s]), ledger.Credit(EscrowAccount(tr.id, randAsset(s)), tr.gives[s])}})
			if st.offer[s] = 1; out.Status != netting.Accepted {
				st.offer[s] = 2
			}
			if out.Reason == ReasonEscrowExpired {
				e.seen.lateOffers++
			}
			return false
		}
		st.decided = true
		st.commit = st.offer[0] == 1 && st.offer[1] == 1 && e.rng.IntN(3) > 0
		return false
	}
	if !st.end {
		legs := tr.endLegs(st.commit)
		if len(legs) > 0 {
			out := e.record(EscrowScope(tr.id), netting.Movement{Key: EscrowKey(tr.id, EscrowEnd), Legs: legs})
			switch {
			case out.Status == netting.Accepted:
			case out.Reason == ReasonEscrowDecided:
				st.commit, st.overruled = !st.commit, true
				e.seen.overruled++
			default:
				e.t.Fatalf("trade %d end: %+v", tr.id, out)
			}
		}
		st.end = true
		return false
	}
	for s := range 2 {
		if st.claim[s] {
			continue
		}
		if legs := tr.claimLegs(s); len(legs) > 0 {
			key := EscrowKey(tr.id, []string{EscrowClaimA, EscrowClaimB}[s])
			if out := e.record(fmt.Sprintf("player:%d", tr.players[s]), netting.Movement{Key: key, Legs: legs}); out.Status != netting.Accepted {
				e.t.Fatalf("trade %d claim %c: %+v", tr.id, "ab"[s], out)
			}
		}
		st.claim[s] = true
		return false
	}
	return true
}

func (e *randEconomy) sweep(i int) {
	e.t.Helper()
	ids, scan := e.watch[i].take(e.nodes[i])
	sum, open, finished, err := sweepEscrows(e.ctx, e.st, e.nodes[i], fmt.Sprint("econ-", i), e.bound, time.Time{}, ids, scan)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range sum.Failed {
		e.t.Fatalf("sweep of node %d: escrow %d: %v", i, f.ID, f.Err)
	}
	e.watch[i].finish(e.nodes[i], scan, open, finished)
	e.seen.expired += len(sum.Expired)
	e.seen.claimed += sum.Claimed
}

func TestRandomTradesWithDyingDeciders(t *testing.T) {
	var seen randFaults
	for range 40 {
		seed := testseed.Seed(t)
		if !t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) { runRandomTrades(t, seed, &seen) }) {
			return
		}
	}
	t.Logf("met: %+v", seen)
	if seen.expired == 0 || seen.overruled == 0 || seen.lateOffers == 0 || seen.resumed == 0 || seen.claimed == 0 {
		t.Fatalf("the runs did not meet every case they are meant to: %+v", seen)
	}
}

func runRandomTrades(t *testing.T, seed uint64, seen *randFaults) {
	rng := rand.New(rand.NewPCG(seed, 30))
	clk := clock.NewFake(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
	st := netting.NewMemStoreWithClock(clk)
	e := &randEconomy{t: t, ctx: context.Background(), rng: rng, clk: clk, st: st, bound: DefaultEscrowBound, seen: seen}
	for i := range 2 {
		cn, err := netting.OpenClusterNode(st, netting.ClusterConfig{NodeID: fmt.Sprint("econ-", i), Nodes: []string{"econ-0", "econ-1"}, Clock: clk,
			EpochMaxAge: 20 * time.Second, Sweep: &netting.SweepConfig{SettleOlderThan: 40 * time.Second}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cn.Close() })
		e.nodes[i] = cn
	}
	const players = 4
	for p := range players {
		for s := range 2 {
			e.record(fmt.Sprintf("player:%d", p), netting.Movement{Key: fmt.Sprintf("grant:%d:%d", p, s),
				Legs: []ledger.Leg{ledger.Debit("platform:grant", 60), ledger.Credit(randWallet(p, s), 60)}})
		}
	}
	var trades []*randTrade
	for i := range 8 {
		a := rng.IntN(players)
		b := (a + 1 + rng.IntN(players-1)) % players
		trades = append(trades, &randTrade{id: uint64(100 + i), players: [2]int{a, b}, gives: [2]int64{int64(rng.IntN(40)), int64(rng.IntN(3) * 10)}, slow: rng.IntN(3) == 0})
	}
	for range 300 {
		tr := trades[rng.IntN(len(trades))]
		switch r := rng.IntN(100); {
		case r < 55:
			if !tr.dead && rng.IntN(4) == 0 {
				snap := tr.st
				tr.snap = &snap // a checkpoint
			}
			if !tr.dead && (!tr.slow || rng.IntN(8) == 0) {
				e.step(tr)
			}
		case r < 70:
			clk.Advance(time.Duration(rng.IntN(8000)) * time.Millisecond)
		case r < 85:
			e.sweep(rng.IntN(2))
		case r < 92:
			tr.dead = true // its node dies
		case tr.dead && tr.snap != nil:
			tr.st, tr.dead = *tr.snap, false // its standby resumes it
			e.seen.resumed++
		}
	}
	// Some deciders never come back; the economy decides their trades.
	clk.Advance(e.bound + time.Second)
	e.sweep(0)
	e.sweep(1)
	for _, tr := range trades {
		for !tr.dead && !e.step(tr) {
		}
	}
	clk.Advance(e.bound + time.Second)
	e.sweep(0)
	e.sweep(1)

	for _, tr := range trades {
		offers := [2]bool{}
		var journaledOffer bool
		for s, step := range []string{EscrowOfferA, EscrowOfferB} {
			a, err := st.LookupAnswer(e.ctx, EscrowKey(tr.id, step))
			if err != nil {
				t.Fatal(err)
			}
			offers[s] = accepted(a)
			journaledOffer = journaledOffer || accepted(a)
		}
		end, err := st.LookupAnswer(e.ctx, EscrowKey(tr.id, EscrowEnd))
		if err != nil {
			t.Fatal(err)
		}
		if !journaledOffer {
			continue
		}
		if !accepted(end) {
			t.Errorf("trade %d: offers journaled %v and no end", tr.id, offers)
			continue
		}
		// The journal's decision, over the offers journaled.
		j := *tr
		for s := range 2 {
			if j.st.offer[s] = 2; offers[s] {
				j.st.offer[s] = 1
			}
		}
		commit, cancel := j.endLegs(true), j.endLegs(false)
		isCommit, isCancel := sameMovement(end.Record.Legs, commit), sameMovement(end.Record.Legs, cancel)
		if !isCommit && !isCancel {
			t.Errorf("trade %d: end %+v is neither the commit nor the cancel of the offers journaled %v", tr.id, end.Record.Legs, offers)
		}
		if !tr.dead && tr.st.claim[1] && !isCommit == tr.st.commit && !(isCommit && isCancel) {
			t.Errorf("trade %d: its decider believes commit=%v, the journal says otherwise", tr.id, tr.st.commit)
		}
	}
	for i := range 2 {
		if _, err := e.nodes[i].SettleAll(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.nodes[0].SweepOrphans(e.ctx, netting.SweepOptions{Now: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(e.ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems(true) {
		t.Errorf("audit: %s", p)
	}
	bals, err := st.Balances(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for acct, b := range bals {
		if strings.HasPrefix(acct, escrowAccountPrefix) && b != 0 {
			t.Errorf("trade account %s holds %d", acct, b)
		}
	}
}
