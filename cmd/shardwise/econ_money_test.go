package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// TestEconIssue27Sequences runs the two sequences of issue 27 against three
// real "shardwise econ" processes over gRPC (the Go client), with epochs
// long enough (60 s) that only the operator's Settle settles:
//
//  1. a credit accepted in scope S1 (on econ-a's side) is spent in scope
//     S2 (on another node) before S1 settles; S2 settles first. The
//     spend must either be refused at Record, or, if accepted, be in the
//     ledger after both settle. Before issue 27 it was accepted and then
//     dropped by S2's settle (sink 0, the wallet 100).
//  2. a debit accepted and settled, its funds gone, resent with the same
//     key: it must answer ACCEPTED with its first seq. Before issue 27 it
//     answered REJECTED INSUFFICIENT_FUNDS.
func TestEconIssue27Sequences(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	storeURL := "sqlite://" + filepath.Join(t.TempDir(), "econ.db")
	eps, cl := etcdForCmdTest(t)
	names := []string{"econ-a", "econ-b", "econ-c"}
	procs := map[string]*shardwiseProcess{}
	for _, name := range names {
		procs[name] = startShardwise(t, "econ", "--endpoints", eps, "--name", name, "--store", storeURL, "--epoch", "60s", "--ttl", "2s")
	}
	for _, name := range names {
		p := procs[name]
		testenv.PollUntil(t, 30*time.Second, name+"'s ready line", func() bool {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", name, p.err, p.out.String())
			}
			return econReadyRE.MatchString(p.out.String())
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client, err := econ.NewClient(ctx, econ.ClientConfig{Members: cl, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	testenv.PollUntil(t, 30*time.Second, "the client's view of all three members", func() bool {
		return slices.Equal(client.View(), names)
	})
	store, err := sqlstore.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// scopeOn finds a scope the client places on member.
	scopeOn := func(member, prefix string) string {
		for i := range 1000 {
			s := fmt.Sprintf("%s-%d", prefix, i)
			if o, ok := client.OwnerOf(s); ok && o == member {
				return s
			}
		}
		t.Fatalf("no %s scope on %s", prefix, member)
		return ""
	}
	record := func(scope, key string, legs ...ledger.Leg) netting.Outcome {
		t.Helper()
		out, err := client.Record(ctx, scope, netting.Movement{Key: key, Legs: legs})
		if err != nil {
			t.Fatalf("record %s in %s: %v", key, scope, err)
		}
		return out
	}
	settle := func(member string) {
		t.Helper()
		reps, err := client.SettleAll(ctx, member)
		if err != nil {
			t.Fatalf("settle on %s: %v", member, err)
		}
		for _, r := range reps {
			if len(r.Rejected) > 0 {
				t.Errorf("settle on %s of %s refused accepted movements %v", member, r.SessionID, r.Rejected)
			}
		}
	}
	balance := func(account string) int64 {
		t.Helper()
		b, err := store.Balance(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("Sequence1_CrossScopeCreditThenSettle", func(t *testing.T) {
		w := ledger.Spendable("w1")
		s1, s2 := scopeOn("econ-a", "loot"), scopeOn("econ-b", "shop")
		if out := record(s1, "K1", ledger.Debit("platform:mint", 100), ledger.Credit(w, 100)); out.Status != netting.Accepted {
			t.Fatalf("K1 = %+v, want ACCEPTED", out)
		}
		k2 := record(s2, "K2", ledger.Debit(w, 100), ledger.Credit("platform:sink", 100))
		settle("econ-b")
		settle("econ-a")
		switch {
		case k2.Status == netting.Accepted && balance("platform:sink") != 100:
			t.Fatalf("K2 was answered ACCEPTED but is not in the ledger: %s = %d, sink = %d", w, balance(w), balance("platform:sink"))
		case k2.Status == netting.Rejected && balance(w) != 100:
			t.Fatalf("K2 rejected, but %s = %d, want 100", w, balance(w))
		}
		t.Logf("K2 (spending S1's unsettled credit in S2) answered %v; after both settles %s = %d, sink = %d", k2.Status, w, balance(w), balance("platform:sink"))
	})

	t.Run("Sequence2_ResendAfterSettle", func(t *testing.T) {
		w := ledger.Spendable("w2")
		if err := store.Post(ctx, ledger.Posting{ID: "fund-w2", Legs: []ledger.Leg{ledger.Credit(w, 100), ledger.Debit(ledger.Revenue, 100)}}); err != nil {
			t.Fatal(err)
		}
		s := scopeOn("econ-c", "shop")
		legs := []ledger.Leg{ledger.Debit(w, 100), ledger.Credit("platform:sink2", 100)}
		first := record(s, "K", legs...)
		if first.Status != netting.Accepted {
			t.Fatalf("K = %+v, want ACCEPTED", first)
		}
		settle("econ-c")
		if b := balance(w); b != 0 {
			t.Fatalf("%s = %d after the settle, want 0", w, b)
		}
		again := record(s, "K", legs...)
		if again.Status != netting.Accepted || again.Seq != first.Seq {
			t.Fatalf("resent K = %+v, want ACCEPTED with seq %d (its first answer)", again, first.Seq)
		}
		// On another node too (another scope's session looks it up).
		if other := record(scopeOn("econ-a", "shop"), "K", legs...); other.Status != netting.Accepted || other.Seq != first.Seq {
			t.Fatalf("K resent through econ-a = %+v, want ACCEPTED with seq %d", other, first.Seq)
		}
		if b := balance("platform:sink2"); b != 100 {
			t.Fatalf("sink2 = %d, want 100 (K once)", b)
		}
	})

	for _, name := range names {
		if err := procs[name].stop(30 * time.Second); err != nil {
			t.Fatalf("%s did not stop cleanly: %v", name, err)
		}
	}
	rep, err := econ.Audit(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Problems(true); len(p) > 0 {
		t.Fatalf("audit after the nodes stopped: %v", p)
	}
}
