package netting_test

import (
	"context"
	"fmt"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

func Example() {
	ctx := context.Background()
	store := netting.NewMemStore() // or sqlstore.OpenSQLite / OpenPostgres
	store.Post(ctx, ledger.Posting{ID: "fund-alice", Legs: []ledger.Leg{
		ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}})

	node, err := netting.OpenClusterNode(store, netting.ClusterConfig{
		NodeID: "econ-1", Nodes: []string{"econ-1"}})
	if err != nil {
		panic(err)
	}
	sess, _ := node.OpenSession(ctx, "wrld_0")
	for i := range 10 {
		out, _ := sess.Record(ctx, netting.Movement{Key: fmt.Sprintf("buy-%d", i), Legs: []ledger.Leg{
			ledger.Debit(ledger.Spendable("alice"), 10), ledger.Credit(ledger.Earned("bob"), 10)}})
		_ = out // Accepted, durably journaled
	}
	out, _ := sess.Record(ctx, netting.Movement{Key: "one-too-many", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("alice"), 10), ledger.Credit(ledger.Earned("bob"), 10)}})
	fmt.Println(out.Status, out.Reason)

	rep, _ := sess.Settle(ctx)
	bob, _ := store.Balance(ctx, ledger.Earned("bob"))
	fmt.Println(rep.Mode, rep.Netted, "movements in", rep.Postings, "posting; bob has", bob)
	// Output:
	// rejected INSUFFICIENT_FUNDS
	// netted 10 movements in 1 posting; bob has 100
}
