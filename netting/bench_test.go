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
