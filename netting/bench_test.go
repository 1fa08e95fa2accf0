package netting_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

func benchNode(b *testing.B, users int) (*netting.MemStore, *netting.ClusterNode) {
	b.Helper()
	s := netting.NewMemStore()
	ctx := context.Background()
	for i := range users {
		u := fmt.Sprintf("u%d", i)
		if err := s.Post(ctx, ledger.Posting{ID: "fund-" + u, Legs: []ledger.Leg{
			ledger.Credit(ledger.Spendable(u), 1<<40), ledger.Debit(ledger.Revenue, 1<<40)}}); err != nil {
			b.Fatal(err)
		}
	}
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: []string{"econ-1"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return s, n
}

// BenchmarkRecordParallel measures durable Records through one session from
// many goroutines (group commit batches them).
func BenchmarkRecordParallel(b *testing.B) {
	_, n := benchNode(b, 100)
	sess, err := n.OpenSession(context.Background(), "wrld_0")
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			out, err := sess.Record(context.Background(), netting.Movement{Key: fmt.Sprint(i), Legs: []ledger.Leg{
				ledger.Debit(ledger.Spendable(fmt.Sprintf("u%d", i%100)), 1), ledger.Credit(ledger.Earned("shop"), 1)}})
			if err != nil || out.Status != netting.Accepted {
				b.Fatal(out, err)
			}
		}
	})
}

// BenchmarkSettle10k settles 10,000 movements over 1,000 accounts.
func BenchmarkSettle10k(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, n := benchNode(b, 1000)
		sess, err := n.OpenSession(context.Background(), "wrld_0")
		if err != nil {
			b.Fatal(err)
		}
		for k := range 10000 {
			if _, err := sess.Record(context.Background(), netting.Movement{Key: fmt.Sprint(k), Legs: []ledger.Leg{
				ledger.Debit(ledger.Spendable(fmt.Sprintf("u%d", k%1000)), 1), ledger.Credit(ledger.Earned(fmt.Sprintf("u%d", (k+1)%1000)), 1)}}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		rep, err := sess.Settle(context.Background())
		if err != nil || rep.Mode != netting.ModeNetted {
			b.Fatal(rep, err)
		}
		b.ReportMetric(float64(rep.Postings)/10, "postings/1k-movements")
	}
}

// BenchmarkBaselinePostEach is the peer of BenchmarkRecordParallel: every
// movement posted as its own ledger transaction on the same store. On the
// memory store this measures CPU overhead only (nothing is durable); the
// durable comparison runs on sqlstore.
func BenchmarkBaselinePostEach(b *testing.B) {
	s, _ := benchNode(b, 100)
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			if err := s.Post(context.Background(), ledger.Posting{ID: fmt.Sprint(i), Legs: []ledger.Leg{
				ledger.Debit(ledger.Spendable(fmt.Sprintf("u%d", i%100)), 1), ledger.Credit(ledger.Earned("shop"), 1)}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCrossScopeSpend measures what the spending rule of issue 27
// costs a workload that spends across scopes: each round mints coins to 100
// wallets in one scope ("loot") and spends them in another ("shop") before
// either settles, then settles the shop first. rule=old plants the rule
// before issue 27 back (a debit may spend other sessions' pending
// credits). Reported: the share of spends accepted, the accepted spends
// the settle then refused (money an accepted movement lost), and the
// netting ratio (ledger postings per 1,000 movements).
func BenchmarkCrossScopeSpend(b *testing.B) {
	for _, old := range []bool{false, true} {
		name := "rule=new"
		if old {
			name = "rule=old"
		}
		b.Run(name, func(b *testing.B) {
			s := netting.NewMemStore()
			n, err := netting.OpenClusterNode(s, netting.ClusterConfig{NodeID: "econ-1", Nodes: []string{"econ-1"},
				MaxMovements: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			netting.PlantBugs(n, old, false, false)
			ctx := context.Background()
			var spends, accepted, refusedAtSettle, movements, postings int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for u := range 100 {
					w := ledger.Spendable(fmt.Sprintf("u%d", u))
					if _, err := n.Record(ctx, "loot", netting.Movement{Key: fmt.Sprintf("loot-%d-%d", i, u), Legs: []ledger.Leg{
						ledger.Debit("platform:mint", 10), ledger.Credit(w, 10)}}); err != nil {
						b.Fatal(err)
					}
					out, err := n.Record(ctx, "a-shop", netting.Movement{Key: fmt.Sprintf("buy-%d-%d", i, u), Legs: []ledger.Leg{
						ledger.Debit(w, 10), ledger.Credit("platform:sink", 10)}})
					if err != nil {
						b.Fatal(err)
					}
					spends++
					movements += 2
					if out.Status == netting.Accepted {
						accepted++
					}
				}
				// SettleAll settles in scope order: the shop ("a-shop") first.
				reps, err := n.SettleAll(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range reps {
					refusedAtSettle += len(r.Rejected)
					postings += r.Postings
				}
			}
			b.ReportMetric(100*float64(accepted)/float64(spends), "%spends-accepted")
			b.ReportMetric(float64(refusedAtSettle)/float64(b.N), "accepted-lost/round")
			b.ReportMetric(1000*float64(postings)/float64(movements), "postings/1k-movements")
		})
	}
}
