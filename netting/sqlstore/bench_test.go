package sqlstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// benchAccounts is the number of buyers and of sellers (so 2×benchAccounts
// wallet accounts are touched).
const benchAccounts = 500

type benchStore struct {
	name string
	open func(b *testing.B) *sqlstore.Store
}

// benchStores are SQLite in a temp dir and a durable (fsync on) PostgreSQL
// started once for the calling benchmark.
func benchStores(b *testing.B) []benchStore {
	pg := testenv.StartPostgresWith(b, testenv.PostgresOptions{Durable: true})
	return []benchStore{
		{"sqlite", func(b *testing.B) *sqlstore.Store { return openSQLite(b) }},
		{"postgres", func(b *testing.B) *sqlstore.Store { return openPostgres(b, pg) }},
	}
}

// benchCallers are the concurrency levels of the throughput benchmark
// (scripts/bench-netting reports the same list).
var benchCallers = []int{16, 64, 256, 1024}

// BenchmarkNettingThroughput measures, side by side in one run, on SQLite
// and on a durable PostgreSQL, durable movements per second through one
// netting session (Record returns once its journal row committed) against
// the baseline: the same movements, each posted as its own ledger
// transaction on the same store. Both get the same number of concurrent
// callers — a busy node serves many players at once, and group commit is
// what turns concurrent callers into one journal transaction — at several
// levels of concurrency. The session also reports movements/commit: how
// many Records its group commits carried on average.
//
// scripts/bench-netting runs it and writes docs/bench/netting.md.
func BenchmarkNettingThroughput(b *testing.B) {
	for _, st := range benchStores(b) {
		for _, callers := range benchCallers {
			prefix := fmt.Sprintf("%s/callers=%d/", st.name, callers)
			b.Run(prefix+"Session", func(b *testing.B) { benchSession(b, st.open(b), callers) })
			b.Run(prefix+"Baseline", func(b *testing.B) { benchBaseline(b, st.open(b), callers) })
		}
	}
}

// BenchmarkNettingSettle times settling one session of 10,000 movements over
// 1,000 accounts and reports the postings written per 1,000 movements.
func BenchmarkNettingSettle(b *testing.B) {
	for _, st := range benchStores(b) {
		b.Run(st.name, func(b *testing.B) { benchSettle(b, st.open(b)) })
	}
}

func benchNode(b *testing.B, s *sqlstore.Store) *netting.ClusterNode {
	b.Helper()
	return benchNodeOn(b, s)
}

func benchNodeOn(b *testing.B, s netting.SharedStore) *netting.ClusterNode {
	b.Helper()
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{
		NodeID: "bench", Nodes: []string{"bench"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// fundBuyers gives every buyer enough credits for any benchmark run, in one
// posting.
func fundBuyers(b *testing.B, s *sqlstore.Store) {
	b.Helper()
	legs := []ledger.Leg{ledger.Debit(ledger.Revenue, benchAccounts<<40)}
	for i := range benchAccounts {
		legs = append(legs, ledger.Credit(ledger.Spendable(fmt.Sprintf("buyer-%d", i)), 1<<40))
	}
	if err := s.Post(testCtx(b), ledger.Posting{ID: "fund-buyers", Legs: legs}); err != nil {
		b.Fatal(err)
	}
}

func purchaseLegs(i int) []ledger.Leg {
	amount := int64(1 + i%97)
	return []ledger.Leg{
		ledger.Debit(ledger.Spendable(fmt.Sprintf("buyer-%d", i%benchAccounts)), amount),
		ledger.Credit(ledger.Earned(fmt.Sprintf("seller-%d", (i/benchAccounts+i)%benchAccounts)), amount),
	}
}

// runCallers runs n calls of fn over callers goroutines.
func runCallers(b *testing.B, callers, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		b.Fatal(err)
	}
}

var benchRun atomic.Int64 // keeps keys unique across a benchmark's repeated runs

// countingStore counts the group commits (ReserveAndAppend calls) of the
// sessions on it; everything else is the store's own.
type countingStore struct {
	*sqlstore.Store
	commits atomic.Int64
}

func (c *countingStore) ReserveAndAppend(ctx context.Context, reqs [][]ledger.AccountDelta, build func([]bool) []netting.JournalRecord) ([]bool, error) {
	c.commits.Add(1)
	return c.Store.ReserveAndAppend(ctx, reqs, build)
}

func benchSession(b *testing.B, s *sqlstore.Store, callers int) {
	ctx := testCtx(b)
	fundBuyers(b, s)
	counted := &countingStore{Store: s}
	node := benchNodeOn(b, counted)
	sess, err := node.OpenSession(ctx, "bench-scope")
	if err != nil {
		b.Fatal(err)
	}
	run := benchRun.Add(1)
	b.ReportAllocs()
	b.ResetTimer()
	runCallers(b, callers, b.N, func(i int) error {
		out, err := sess.Record(ctx, netting.Movement{Key: fmt.Sprintf("r%d-m%d", run, i), Legs: purchaseLegs(i)})
		if err == nil && out.Status != netting.Accepted {
			err = fmt.Errorf("movement %d: %+v", i, out)
		}
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "movements/s")
	if n := counted.commits.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "movements/commit")
	}
}

func benchBaseline(b *testing.B, s *sqlstore.Store, callers int) {
	ctx := testCtx(b)
	fundBuyers(b, s)
	run := benchRun.Add(1)
	b.ReportAllocs()
	b.ResetTimer()
	runCallers(b, callers, b.N, func(i int) error {
		return s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("r%d-p%d", run, i), Legs: purchaseLegs(i)})
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "movements/s")
}

// benchSettle times Settle of a session holding settleMovements movements
// between benchAccounts buyers and benchAccounts sellers. Recording them is
// setup, outside the timer.
func benchSettle(b *testing.B, s *sqlstore.Store) {
	const settleMovements = 10_000
	ctx := testCtx(b)
	fundBuyers(b, s)
	node := benchNode(b, s)
	var postings, movements int
	var settling time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sess, err := node.OpenSession(ctx, "settle-scope")
		if err != nil {
			b.Fatal(err)
		}
		run := benchRun.Add(1)
		runCallers(b, 64, settleMovements, func(i int) error {
			_, err := sess.Record(ctx, netting.Movement{Key: fmt.Sprintf("s%d-m%d", run, i), Legs: purchaseLegs(i)})
			return err
		})
		b.StartTimer()
		start := time.Now()
		rep, err := sess.Settle(ctx)
		if err != nil {
			b.Fatal(err)
		}
		settling += time.Since(start)
		if rep.Mode != netting.ModeNetted || rep.Netted != settleMovements {
			b.Fatalf("settle report %+v", rep)
		}
		postings += rep.Postings
		movements += rep.Netted
	}
	b.ReportMetric(float64(settling.Milliseconds())/float64(b.N), "settle-ms")
	b.ReportMetric(1000*float64(postings)/float64(movements), "postings/1k-movements")
}
