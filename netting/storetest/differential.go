package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// testMatchesMemStore drives the store under test and a MemStore with one
// random sequence — Records over sessions of three nodes that share
// wallets (mints, sinks, transfers, a wallet credited and debited in one
// movement, an account named twice), resends of earlier keys (same or
// other legs, same or other scope), settles in any order — and requires
// every answer, every settle's mode and refusals, the reservations after
// each step and the final balances to be the memory store's: the SQL
// stores' one-statement and speculative paths decide as the port's rule.
func testMatchesMemStore(t *testing.T, s netting.SharedStore) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 27))
	ref := netting.NewMemStore()
	stores := []netting.SharedStore{s, ref}
	wallets := []string{ledger.Spendable("a"), ledger.Spendable("b"), ledger.Earned("a"), ledger.Spendable("c")}
	for i, st := range stores {
		for j, u := range []string{"a", "b"} {
			fund(t, st, fmt.Sprintf("fund-%d-%d", i, j), u, int64(30+20*j))
		}
	}
	clusters := []*cluster{newCluster(t, stores[0], threeNodes, nil), newCluster(t, stores[1], threeNodes, nil)}
	type slot struct{ node, scope string }
	var slots []slot
	for _, n := range threeNodes {
		for i := range 2 {
			slots = append(slots, slot{n, clusters[0].scopeOf(n, i)})
		}
	}
	open := make([][2]*netting.Session, len(slots))
	for i, sl := range slots {
		for c := range clusters {
			open[i][c] = clusters[c].open(sl.node, sl.scope)
		}
	}
	type sent struct {
		legs []ledger.Leg
		slot int
	}
	var keys []string
	var rejected, settles int
	byKey := map[string]sent{}
	randLegs := func() []ledger.Leg {
		w := func() string { return wallets[rng.IntN(len(wallets))] }
		amt := func() int64 { return 1 + rng.Int64N(40) }
		switch rng.IntN(5) {
		case 0: // mint
			a := amt()
			return []ledger.Leg{ledger.Debit("platform:mint", a), ledger.Credit(w(), a)}
		case 1: // sink
			a := amt()
			return []ledger.Leg{ledger.Debit(w(), a), ledger.Credit("platform:sink", a)}
		case 2: // transfer
			a := amt()
			return []ledger.Leg{ledger.Debit(w(), a), ledger.Credit(w(), a)}
		case 3: // credit and debit of one wallet, and another's debit
			x, y := w(), w()
			a, b := amt(), amt()
			return []ledger.Leg{ledger.Credit(x, a), ledger.Debit(x, b), ledger.Debit(y, a), ledger.Credit(y, b)}
		default: // an account named twice
			x := w()
			a, b := amt(), amt()
			return []ledger.Leg{ledger.Debit(x, a), ledger.Debit(x, b), ledger.Credit("platform:sink", a+b)}
		}
	}
	for step := range 300 {
		desc := fmt.Sprintf("seed %d step %d", seed, step)
		switch r := rng.IntN(10); {
		case r < 6 || len(keys) == 0:
			i := rng.IntN(len(slots))
			key := fmt.Sprintf("k%d", step)
			legs := randLegs()
			var outs [2]netting.Outcome
			for c := range clusters {
				outs[c] = record(t, open[i][c], key, legs...)
			}
			if outs[0] != outs[1] {
				t.Fatalf("%s: record %s %v in %s: store %+v, memory %+v", desc, key, legs, slots[i].scope, outs[0], outs[1])
			}
			if outs[0].Status == netting.Rejected {
				rejected++
			}
			keys = append(keys, key)
			byKey[key] = sent{legs, i}
		case r < 8:
			key := keys[rng.IntN(len(keys))]
			first := byKey[key]
			i, legs := first.slot, first.legs
			if rng.IntN(3) == 0 {
				i = rng.IntN(len(slots))
			}
			if rng.IntN(3) == 0 {
				legs = randLegs()
			}
			var outs [2]netting.Outcome
			for c := range clusters {
				outs[c] = record(t, open[i][c], key, legs...)
			}
			if outs[0] != outs[1] {
				t.Fatalf("%s: resend %s %v in %s: store %+v, memory %+v", desc, key, legs, slots[i].scope, outs[0], outs[1])
			}
		default:
			i := rng.IntN(len(slots))
			settles++
			var reps [2]netting.SettleReport
			for c := range clusters {
				reps[c] = settle(t, open[i][c])
				open[i][c] = clusters[c].open(slots[i].node, slots[i].scope)
			}
			if reps[0].Mode != reps[1].Mode || fmt.Sprint(reps[0].Rejected) != fmt.Sprint(reps[1].Rejected) || reps[0].Netted != reps[1].Netted {
				t.Fatalf("%s: settle of %s: store %+v, memory %+v", desc, slots[i].scope, reps[0], reps[1])
			}
			if len(reps[0].Rejected) > 0 {
				t.Fatalf("%s: settle of %s refused accepted movements: %v", desc, slots[i].scope, reps[0].Rejected)
			}
		}
		if got, want := fmt.Sprint(reserved(t, s)), fmt.Sprint(reserved(t, ref)); got != want {
			t.Fatalf("%s: reservations: store %s, memory %s", desc, got, want)
		}
	}
	if rejected == 0 || settles == 0 {
		t.Fatalf("seed %d: %d refusals and %d settles: the sequence tested nothing", seed, rejected, settles)
	}
	for i := range slots {
		for c := range clusters {
			settle(t, open[i][c])
		}
	}
	for _, w := range wallets {
		if got, want := balance(t, s, w), balance(t, ref, w); got != want {
			t.Errorf("seed %d: %s: store %d, memory %d", seed, w, got, want)
		}
	}
	checkMoney(t, s, true)
}
