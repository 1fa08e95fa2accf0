package netting_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

func chainOf(session string, n int) []netting.JournalRecord {
	prev := netting.GenesisHash
	out := make([]netting.JournalRecord, n)
	for i := range out {
		key := fmt.Sprintf("k%d", i)
		legs := buy("alice", "bob", int64(i+1))
		h := netting.ChainHash(prev, key, legs)
		out[i] = netting.JournalRecord{SessionID: session, Seq: int64(i), Key: key, Legs: legs, PrevHash: prev, Hash: h}
		prev = h
	}
	return out
}

func TestChainHashReference(t *testing.T) {
	legs := []ledger.Leg{ledger.Debit("alice:spendable", 250), ledger.Credit("bob:earned", 250)}
	sum := sha256.Sum256([]byte(netting.GenesisHash + "|buy-1|alice:spendable:CREDIT:250;bob:earned:CREDIT:-250"))
	if got, want := netting.ChainHash(netting.GenesisHash, "buy-1", legs), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("ChainHash = %s, want %s", got, want)
	}
	if len(netting.GenesisHash) != 64 {
		t.Errorf("genesis is %d chars", len(netting.GenesisHash))
	}
}

func TestVerifyChain(t *testing.T) {
	good := chainOf("s", 4)
	head, err := netting.VerifyChain("s", good)
	if err != nil || head != good[3].Hash {
		t.Fatalf("VerifyChain(good) = %s, %v", head, err)
	}
	if head, err := netting.VerifyChain("s", nil); err != nil || head != netting.GenesisHash {
		t.Errorf("empty: %s, %v", head, err)
	}
	tamper := map[string]func([]netting.JournalRecord){
		"amount":       func(r []netting.JournalRecord) { r[2].Legs = buy("alice", "bob", 99) },
		"key":          func(r []netting.JournalRecord) { r[2].Key = "other" },
		"hash":         func(r []netting.JournalRecord) { r[2].Hash = netting.GenesisHash },
		"prevHash":     func(r []netting.JournalRecord) { r[2].PrevHash = r[0].Hash },
		"seq":          func(r []netting.JournalRecord) { r[2].Seq = 7 },
		"session":      func(r []netting.JournalRecord) { r[2].SessionID = "t" },
		"unbalanced":   func(r []netting.JournalRecord) { r[2].Legs[0].Amount++; rehash(r, 2) },
		"swapped rows": func(r []netting.JournalRecord) { r[2], r[3] = r[3], r[2] },
	}
	for name, f := range tamper {
		recs := chainOf("s", 4)
		f(recs)
		_, err := netting.VerifyChain("s", recs)
		var cb *netting.ChainBrokenError
		if !errors.As(err, &cb) || cb.Seq != 2 || netting.Code(err) != "CHAIN.BROKEN" {
			t.Errorf("%s: %v, want CHAIN.BROKEN at seq 2", name, err)
		}
	}
}

// rehash recomputes the chain from row i, as a forger who also rewrote the
// hashes would.
func rehash(r []netting.JournalRecord, i int) {
	for ; i < len(r); i++ {
		if i > 0 {
			r[i].PrevHash = r[i-1].Hash
		}
		r[i].Hash = netting.ChainHash(r[i].PrevHash, r[i].Key, r[i].Legs)
	}
}

// FuzzVerifyChain feeds VerifyChain journal rows as a store might return
// them after someone edited the database: it must never panic, and it may
// accept a modified journal only if the modification is invisible to the
// chain (the rows still hash to what they claim).
func FuzzVerifyChain(f *testing.F) {
	f.Add(2, "k2", "alice:spendable", int64(3), int64(2), "")
	f.Add(0, "", "", int64(0), int64(0), "x")
	f.Add(3, "k3", "platform:revenue", int64(-9), int64(3), netting.GenesisHash)
	f.Fuzz(func(t *testing.T, row int, key, account string, amount, seq int64, prev string) {
		recs := chainOf("s", 4)
		i := ((row % 4) + 4) % 4
		recs[i].Key = key
		recs[i].Legs = append(recs[i].Legs, ledger.Leg{Account: account, Amount: amount})
		recs[i].Seq = seq
		if prev != "" {
			recs[i].PrevHash = prev
		}
		head, err := netting.VerifyChain("s", recs)
		if err != nil {
			var cb *netting.ChainBrokenError
			if !errors.As(err, &cb) || cb.Seq > int64(i) {
				t.Fatalf("error %v does not name a seq at or before the edited row %d", err, i)
			}
			return
		}
		for j, r := range recs {
			if r.Seq != int64(j) || netting.ChainHash(r.PrevHash, r.Key, r.Legs) != r.Hash {
				t.Fatalf("accepted a journal whose row %d does not verify", j)
			}
		}
		if head != recs[3].Hash {
			t.Fatalf("head %s, want %s", head, recs[3].Hash)
		}
	})
}

// BenchmarkVerifyChain: the chain check of a settle's read-back, per row
// (10,000 rows of two legs).
func BenchmarkVerifyChain(b *testing.B) {
	recs := chainOf("s", 10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := netting.VerifyChain("s", recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(recs)), "ns/row")
}

// BenchmarkChainHash: one journal row's hash, as the group commit makes it.
func BenchmarkChainHash(b *testing.B) {
	legs := buy("alice", "bob", 250)
	b.ReportAllocs()
	for b.Loop() {
		_ = netting.ChainHash(netting.GenesisHash, "purchase:alice:0001", legs)
	}
}
