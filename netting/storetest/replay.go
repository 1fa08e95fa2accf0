package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// runReplayable is a property schedule that is a pure function of its
// seed, and returns its trace: one line per step with every outcome (no
// session ids, which carry a node's random nonce), so that two runs of one
// seed can be compared line by line.
//
// What makes it replayable:
//   - one goroutine: every Record, settle, sweep and fault happens in the
//     order the seed draws;
//   - the nodes run on a fake clock (clock.Fake) that only the schedule
//     moves ("time passes" steps), so epoch ages and claim renewals are
//     decided by the seed;
//   - the store keeps its own clock (a SQL store's cannot be faked from
//     here), so wherever an outcome would depend on how fast it runs the
//     schedule waits it out: before every step every settle claim taken so
//     far has lapsed (the lease is 1 ms of store time), and after every
//     Record the store's clock has ticked (journal times, and so the
//     sweep's order, never tie);
//   - every choice among sessions is made in an order the seed fixes (the
//     order the schedule first saw them), never in a map's or by id.
func runReplayable(t *testing.T, s netting.SharedStore, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	width := 1 + r.IntN(4)
	maxMov := 3 + r.IntN(6)
	const lease = time.Millisecond
	nodeClock := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newCluster(t, s, threeNodes, func(cfg *netting.ClusterConfig) {
		cfg.ChunkWidth = width
		cfg.MaxMovements = maxMov
		cfg.SettleLease = lease
		cfg.EpochMaxAge = time.Minute
		cfg.Sweep = &netting.SweepConfig{SettleOlderThan: 2 * time.Minute}
		cfg.Clock = nodeClock
	})
	var tr []string
	step := 0
	logf := func(format string, args ...any) {
		tr = append(tr, fmt.Sprintf("%03d ", step)+fmt.Sprintf(format, args...))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: chunk width %d, max movements %d; trace:\n%s", seed, width, maxMov, strings.Join(tr, "\n"))
		}
	})
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	m := newModel(t, s, r, users)
	scopes := []string{"wrld_a", "wrld_b", "wrld_c", "wrld_d", "wrld_e"}
	// seen numbers the sessions in the order the schedule first saw them.
	seen := map[string]int{}
	see := func(id string) int {
		if _, ok := seen[id]; !ok {
			seen[id] = len(seen)
		}
		return seen[id]
	}
	movement := func() (string, []ledger.Leg) { return m.movement(r, seed, step, users) }
	// unsettled lists the unsettled sessions in the order they were seen.
	unsettled := func() []string {
		u, err := s.ListUnsettled(ctxT(t), 0)
		must(t, err)
		out := make([]string, 0, len(u))
		for _, x := range u {
			see(x.ID)
			out = append(out, x.ID)
		}
		sort.Slice(out, func(i, j int) bool { return seen[out[i]] < seen[out[j]] })
		return out
	}
	settleOK := func(err error) bool {
		return err == nil || errors.Is(err, errInjected)
	}
	// lapsed is store time after which every claim taken so far has lapsed.
	lapsed := mustNow(t, s)
	oneShot := func() func() error {
		var once sync.Once
		return func() error {
			fail := false
			once.Do(func() { fail = true })
			if fail {
				return errInjected
			}
			return nil
		}
	}
	ctx := ctxT(t)
	// after spins until the store's clock reads past at (a lapse is 1 ms
	// of it; waiting on a timer would be coarser than that).
	after := func(at time.Time) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := s.Now(ctx)
			must(t, err)
			if n.After(at) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("store clock stuck at %v", n)
			}
		}
	}
	now := func() time.Time {
		n, err := s.Now(ctx)
		must(t, err)
		return n
	}
	for step = 0; step < 160; step++ {
		after(lapsed)
		switch op := r.IntN(100); {
		case op < 55:
			scope := scopes[r.IntN(len(scopes))]
			k, legs := movement()
			n := c.nodes[c.nodes["econ-1"].OwnerOf(scope)]
			out, err := n.Record(ctxT(t), scope, netting.Movement{Key: k, Legs: legs})
			switch {
			case err == nil:
				if out.Status == netting.Accepted {
					m.accept(k)
					rec, found, lerr := s.LookupKey(ctxT(t), k)
					must(t, lerr)
					if !found {
						t.Fatalf("step %d: %s accepted and not journaled", step, k)
					}
					see(rec.SessionID)
				}
				logf("record %s %s: %v seq %d %s", scope, k, out.Status, out.Seq, out.Reason)
			case errors.Is(err, errInjected), errors.Is(err, netting.ErrSessionSettled):
				logf("record %s %s: %s", scope, k, outcomeCode(err))
			default:
				t.Errorf("step %d: record %s: %v", step, k, err)
			}
			after(now())
		case op < 59:
			u := users[r.IntN(len(users))]
			amt := int64(1 + r.IntN(30))
			p := ledger.Posting{ID: fmt.Sprintf("spend-%d", step), Legs: []ledger.Leg{ledger.Debit(ledger.Spendable(u), amt), ledger.Credit("platform:outside", amt)}}
			err := s.Post(ctxT(t), p)
			switch {
			case err == nil:
				m.direct = append(m.direct, p.Legs...)
			case !errors.Is(err, ledger.ErrOverdraft):
				t.Errorf("step %d: direct spend: %v", step, err)
			}
			logf("spend %s %d: %s", u, amt, outcomeCode(err))
		case op < 65:
			node := threeNodes[r.IntN(3)]
			c.restart(node)
			logf("crash %s", node)
		case op < 70:
			n := threeNodes[r.IntN(3)]
			sum, err := c.nodes[n].SweepOrphans(ctxT(t), netting.SweepOptions{Now: mustNow(t, s).Add(time.Hour)})
			if err != nil {
				t.Errorf("step %d: sweep: %v", step, err)
			}
			logf("sweep %s: %s", n, sweepTrace(sum))
		case op < 76:
			if ids := unsettled(); len(ids) > 0 {
				id := ids[r.IntN(len(ids))]
				n := threeNodes[r.IntN(3)]
				rec, err := c.nodes[n].Recover(ctxT(t), id)
				must(t, err)
				rep, err := rec.Settle(ctxT(t))
				if !settleOK(err) {
					t.Errorf("step %d: settle: %v", step, err)
				}
				logf("settle #%d on %s: %s", seen[id], n, reportTrace(rep, err))
			}
		case op < 81:
			// One session settled from every node in turn: the first
			// settles it, the others find it settled.
			if ids := unsettled(); len(ids) > 0 {
				id := ids[r.IntN(len(ids))]
				var outs []string
				for _, n := range threeNodes {
					rec, err := c.nodes[n].Recover(ctxT(t), id)
					must(t, err)
					rep, err := rec.Settle(ctxT(t))
					if !settleOK(err) {
						t.Errorf("step %d: settle on %s: %v", step, n, err)
					}
					outs = append(outs, reportTrace(rep, err))
					after(now().Add(lease))
				}
				logf("settle #%d on all: %s", seen[id], strings.Join(outs, " | "))
			}
		case op < 86:
			fail := oneShot()
			c.store.setPostFencedHook(func(netting.Fence, ledger.Posting) error { return fail() })
			logf("fault: next settle posting")
		case op < 88:
			c.store.setFinishHook(oneShot())
			logf("fault: next finish")
		case op < 91:
			fail := oneShot()
			c.store.setAppendHook(func([]netting.JournalRecord) error { return fail() })
			logf("fault: next commit")
		case op < 94:
			nodeClock.Advance(time.Minute)
			logf("time passes")
		default:
			n := threeNodes[r.IntN(3)]
			reps, err := c.nodes[n].RotateDue(ctxT(t))
			if err != nil && !settleOK(errors.Unwrap(err)) && !settleOK(err) {
				t.Errorf("step %d: rotate: %v", step, err)
			}
			logf("rotate %s: %d settled, %s", n, len(reps), outcomeCode(err))
			if r.IntN(2) == 0 {
				reps, err := c.nodes[n].SettleAll(ctxT(t))
				if err != nil && !settleOK(errors.Unwrap(err)) && !settleOK(err) {
					t.Errorf("step %d: settle all: %v", step, err)
				}
				logf("settle all %s: %d settled, %s", n, len(reps), outcomeCode(err))
			}
		}
		lapsed = now().Add(lease)
	}
	// Quiesce: no more faults; settle every live epoch; sweep what is left.
	c.store.setPostFencedHook(nil)
	c.store.setAppendHook(nil)
	c.store.setFinishHook(nil)
	for _, id := range threeNodes {
		reps, err := c.nodes[id].SettleAll(ctxT(t))
		logf("final settle all %s: %d settled, %s", id, len(reps), outcomeCode(err))
	}
	after(now().Add(lease))
	sum, err := c.nodes["econ-2"].SweepOrphans(ctxT(t), netting.SweepOptions{Now: mustNow(t, s).Add(time.Hour)})
	if err != nil {
		t.Fatalf("final sweep: %v", err)
	}
	logf("final sweep: %s", sweepTrace(sum))
	bal := checkMoney(t, s, true)
	checkPaths(t, s, m, bal)
	var accounts []string
	for a := range bal {
		accounts = append(accounts, a)
	}
	sort.Strings(accounts)
	for _, a := range accounts {
		if bal[a] != 0 {
			logf("balance %s %d", a, bal[a])
		}
	}
	return tr
}

// outcomeCode is an error as the trace shows it: its stable code, never
// its text (which names sessions).
func outcomeCode(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errInjected):
		return "INJECTED"
	case netting.Code(err) != "":
		return netting.Code(err)
	}
	return "ERROR"
}

func reportTrace(rep netting.SettleReport, err error) string {
	if err != nil {
		return outcomeCode(err)
	}
	return fmt.Sprintf("%s netted=%d postings=%d rejected=%d already=%v", rep.Mode, rep.Netted, rep.Postings, len(rep.Rejected), rep.AlreadySettled)
}

func sweepTrace(sum netting.SweepSummary) string {
	var failed []string
	for _, f := range sum.Failed {
		failed = append(failed, f.Code)
	}
	var modes []string
	for _, so := range sum.Settled {
		modes = append(modes, so.Mode)
	}
	return fmt.Sprintf("scanned=%d orphans=%d settled=%v failed=%v", sum.Scanned, len(sum.Orphans), modes, failed)
}

// diffTraces returns the first difference of two traces, or "".
func diffTraces(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d:\n  first: %s\n  again: %s", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d lines, then %d", len(a), len(b))
	}
	return ""
}
