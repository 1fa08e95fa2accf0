package netting_test

import (
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// A movement may not name the clearing account (econ's wire refuses it;
// so must a node used in process, OpenLocalNode or a ClusterNode as a
// library): accepted, it left platform:netting_clearing off zero after its
// settle, and econ.Audit reported the movement missing from the ledger
// although its chunk had landed (the check leaves the chunks' clearing
// legs out).
func TestRecordRefusesClearingAccount(t *testing.T) {
	ctx := ctxT(t)
	s := netting.NewMemStore()
	n, err := netting.OpenLocalNode(ctx, s, netting.ClusterConfig{})
	must(t, err)
	defer n.Close()
	legs := []ledger.Leg{ledger.Debit(ledger.NettingClearing, 5), ledger.Credit(ledger.Spendable("w"), 5)}
	out, err := n.Record(ctx, "sc", netting.Movement{Key: "k", Legs: legs})
	if netting.Code(err) != ledger.CodeMalformed {
		t.Fatalf("record on the clearing account: %+v, %v; want %s", out, err, ledger.CodeMalformed)
	}
	if _, err := n.SettleAll(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Balance(ctx, ledger.NettingClearing); err != nil || b != 0 {
		t.Errorf("clearing = %d, %v; want 0", b, err)
	}
}
