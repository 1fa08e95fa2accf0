package sqlstore_test

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// TestFencedSettlesTwoProcessesSQLite is the two-process race on one SQLite
// file: two Stores (two connection pools, as two processes would have)
// contend through SQLite's file lock and busy timeout.
func TestFencedSettlesTwoProcessesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	open := func(t *testing.T) *sqlstore.Store {
		s, err := sqlstore.OpenSQLite(testCtx(t), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	testFencedSettlesTwoProcesses(t, open(t), open(t))
}

func testFencedSettlesTwoProcessesPostgres(t *testing.T, pg *testenv.PostgresServer) {
	url := pg.NewDatabase(t)
	open := func(t *testing.T) *sqlstore.Store {
		s, err := sqlstore.OpenPostgres(testCtx(t), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	testFencedSettlesTwoProcesses(t, open(t), open(t))
}

// testFencedSettlesTwoProcesses is "Ours" #2 (settles are fenced; see
// netting/storetest/ours.go) across real processes'
// worth of connections: econ-1 (on store a) and econ-2 (on store b) settle
// the same session at the same moment from real goroutines, again and
// again, with a settle lease short enough that claims lapse and change
// hands in the middle of a settle. Whatever the interleaving, the ledger
// must hold exactly one set of the session's chunk postings, no
// compensation and no replay (under the original, the loser compensated the
// winner's chunks), the balances of one settle, and no pending left.
func testFencedSettlesTwoProcesses(t *testing.T, a, b *sqlstore.Store) {
	ctx := testCtx(t)
	nodes := []string{"econ-1", "econ-2"}
	open := func(s *sqlstore.Store, id string) *netting.ClusterNode {
		n, err := netting.OpenClusterNode(s, netting.ClusterConfig{
			NodeID: id, Nodes: nodes, ChunkWidth: 3,
			SettleLease: time.Millisecond, // lapses mid-settle: takeovers and fencing
			Logger:      slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nodeA, nodeB := open(a, "econ-1"), open(b, "econ-2")
	owner, err := netting.ScopeRouter(nodes)
	if err != nil {
		t.Fatal(err)
	}
	const buyers, sellers, perRound, rounds = 12, 5, 40, 6
	for i := range buyers {
		u := fmt.Sprintf("racer-%d", i)
		if err := a.Post(ctx, ledger.Posting{ID: "fund-" + u, Legs: []ledger.Leg{ledger.Credit(ledger.Spendable(u), 10_000), ledger.Debit(ledger.Revenue, 10_000)}}); err != nil {
			t.Fatal(err)
		}
	}
	var wantEarned int64
	for round := range rounds {
		scope := ""
		for i := 0; scope == ""; i++ {
			if s := fmt.Sprintf("race-%d-%d", round, i); owner(s) == "econ-1" {
				scope = s
			}
		}
		sess, err := nodeA.OpenSession(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		for i := range perRound {
			amount := int64(1 + (round*perRound+i)%23)
			out, err := sess.Record(ctx, netting.Movement{
				Key: fmt.Sprintf("%s-m%d", sess.ID(), i),
				Legs: []ledger.Leg{
					ledger.Debit(ledger.Spendable(fmt.Sprintf("racer-%d", i%buyers)), amount),
					ledger.Credit(ledger.Earned(fmt.Sprintf("shop-%d", i%sellers)), amount),
				},
			})
			if err != nil || out.Status != netting.Accepted {
				t.Fatalf("record: %+v, %v", out, err)
			}
			wantEarned += amount
		}

		// Both nodes settle until one reports the session settled; a
		// refused claim or a fenced write is the clean loss, and the loser
		// tries again (by recovery, as a sweeper would).
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var reports []netting.SettleReport
		outcomes := map[string]int{}
		settler := func(first *netting.Session, node *netting.ClusterNode) {
			<-start
			s := first
			deadline := time.Now().Add(time.Minute)
			for {
				rep, err := s.Settle(ctx)
				mu.Lock()
				switch {
				case err == nil:
					reports = append(reports, rep)
					outcomes["settled"]++
				case errors.Is(err, netting.ErrSettleClaimed), errors.Is(err, netting.ErrFenced):
					outcomes[netting.Code(err)]++
				default:
					t.Errorf("settle: %v", err)
				}
				mu.Unlock()
				if err == nil || time.Now().After(deadline) || t.Failed() {
					return
				}
				if s, err = node.Recover(ctx, sess.ID()); err != nil {
					t.Errorf("recover: %v", err)
					return
				}
			}
		}
		other, err := nodeB.Recover(ctx, sess.ID())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { settler(sess, nodeA) })
		wg.Go(func() { settler(other, nodeB) })
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		chunks, err := a.PostingIDsWithPrefix(ctx, "net_"+sess.ID()+"_c")
		if err != nil {
			t.Fatal(err)
		}
		var comps int
		for _, id := range chunks {
			if strings.HasSuffix(id, "_comp") {
				comps++
			}
		}
		replays, err := a.PostingIDsWithPrefix(ctx, "mv_"+sess.ID())
		if err != nil {
			t.Fatal(err)
		}
		var fresh []netting.SettleReport
		for _, r := range reports {
			if !r.AlreadySettled {
				fresh = append(fresh, r)
			}
		}
		if comps != 0 || len(replays) != 0 {
			t.Fatalf("round %d: %d compensations and %d replay postings (outcomes %v)", round, comps, len(replays), outcomes)
		}
		if len(reports) == 0 || reports[0].Mode != netting.ModeNetted {
			t.Fatalf("round %d: reports %+v (outcomes %v)", round, reports, outcomes)
		}
		// 40 movements over 12 buyers and 5 sellers: 17 positions, width 3.
		if want := (buyers + sellers + 2) / 3; len(chunks) != want {
			t.Fatalf("round %d: %d chunk postings, want exactly one set of %d: %v", round, len(chunks), want, chunks)
		}
		t.Logf("round %d: outcomes %v, %d settle reports (%d not already settled)", round, outcomes, len(reports), len(fresh))
	}
	var earned int64
	for i := range sellers {
		bal, err := b.Balance(ctx, ledger.Earned(fmt.Sprintf("shop-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		earned += bal
	}
	if earned != wantEarned {
		t.Errorf("sellers earned %d, want %d (one settle of every movement)", earned, wantEarned)
	}
	for _, check := range []func() (int64, error){
		func() (int64, error) { return a.SumBalances(ctx) },
		func() (int64, error) { return a.SumEntries(ctx) },
		func() (int64, error) { return a.Balance(ctx, ledger.NettingClearing) },
	} {
		if v, err := check(); err != nil || v != 0 {
			t.Errorf("money check = %d, %v; want 0", v, err)
		}
	}
	if p, err := a.PendingAll(ctx); err != nil || len(p) != 0 {
		t.Errorf("pending left: %v, %v", p, err)
	}
}
