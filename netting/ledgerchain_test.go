package netting_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The canonical text of PostingHash, written out by hand: another
// implementation (an auditor's script) must reproduce it byte for byte.
func TestPostingHashReference(t *testing.T) {
	p := ledger.Posting{
		ID:   "net_s1_c0",
		Legs: []ledger.Leg{ledger.Debit("alice:spendable", 250), ledger.Credit("bob:earned", 250)},
		Meta: map[string]string{"session": "s1", "chunk": "0"},
	}
	at := time.UnixMicro(1700000000123456)
	text := "20:shardwise.posting.v1," + "64:" + netting.GenesisHash + "," + "9:net_s1_c0," + "16:1700000000123456," +
		"1:2," + "15:alice:spendable," + "3:250," + "10:bob:earned," + "4:-250," +
		"1:2," + "5:chunk," + "1:0," + "7:session," + "2:s1,"
	sum := sha256.Sum256([]byte(text))
	if got, want := netting.PostingHash(netting.GenesisHash, p, at), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("PostingHash = %s, want %s (sha256 of %q)", got, want, text)
	}
}

// Every part of a posting is hashed, meta in key order whatever the map's,
// and fields cannot run into each other.
func TestPostingHashCoversEverything(t *testing.T) {
	at := time.UnixMicro(42)
	base := ledger.Posting{ID: "p", Legs: []ledger.Leg{ledger.Debit("a", 5), ledger.Credit("b", 5)}, Meta: map[string]string{"k": "v"}}
	h := netting.PostingHash(netting.GenesisHash, base, at)
	same := ledger.Posting{ID: "p", Legs: base.Legs, Meta: map[string]string{"k": "v"}}
	if netting.PostingHash(netting.GenesisHash, same, at) != h {
		t.Fatal("equal postings hash differently")
	}
	empty := netting.PostingHash(netting.GenesisHash, ledger.Posting{ID: "p", Legs: base.Legs}, at)
	if netting.PostingHash(netting.GenesisHash, ledger.Posting{ID: "p", Legs: base.Legs, Meta: map[string]string{}}, at) != empty {
		t.Error("nil and empty meta hash differently")
	}
	variants := map[string]func() (string, ledger.Posting, time.Time){
		"prevHash": func() (string, ledger.Posting, time.Time) { return "1" + netting.GenesisHash[1:], base, at },
		"id":       func() (string, ledger.Posting, time.Time) { p := base; p.ID = "q"; return netting.GenesisHash, p, at },
		"time":     func() (string, ledger.Posting, time.Time) { return netting.GenesisHash, base, at.Add(time.Microsecond) },
		"amount": func() (string, ledger.Posting, time.Time) {
			p := base
			p.Legs = []ledger.Leg{ledger.Debit("a", 6), ledger.Credit("b", 6)}
			return netting.GenesisHash, p, at
		},
		"leg order": func() (string, ledger.Posting, time.Time) {
			p := base
			p.Legs = []ledger.Leg{base.Legs[1], base.Legs[0]}
			return netting.GenesisHash, p, at
		},
		"meta value": func() (string, ledger.Posting, time.Time) {
			p := base
			p.Meta = map[string]string{"k": "w"}
			return netting.GenesisHash, p, at
		},
		"no meta": func() (string, ledger.Posting, time.Time) {
			p := base
			p.Meta = nil
			return netting.GenesisHash, p, at
		},
		// Naive concatenation would make these equal: id "p" + leg
		// account "a" against id "pa" + account "".
		"id runs into account": func() (string, ledger.Posting, time.Time) {
			p := base
			p.ID = "p1:a"
			p.Legs = []ledger.Leg{{Account: "", Amount: 5}, ledger.Credit("b", 5)}
			return netting.GenesisHash, p, at
		},
		"meta key runs into value": func() (string, ledger.Posting, time.Time) {
			p := base
			p.Meta = map[string]string{"k1:": "v"}
			return netting.GenesisHash, p, at
		},
	}
	for name, v := range variants {
		prev, p, at := v()
		if netting.PostingHash(prev, p, at) == h {
			t.Errorf("%s: changing it leaves the hash unchanged", name)
		}
	}
}

func TestLedgerChainBrokenError(t *testing.T) {
	err := error(&netting.LedgerChainBrokenError{Kind: netting.LedgerTampered, Seq: 3, PostingID: "p3", Reason: "x"})
	if !errors.Is(err, netting.ErrLedgerChainBroken) || netting.Code(err) != "LEDGER.CHAIN_BROKEN" {
		t.Errorf("errors.Is %v, code %q", errors.Is(err, netting.ErrLedgerChainBroken), netting.Code(err))
	}
	wrapped := fmt.Errorf("verify: %w", err)
	var brk *netting.LedgerChainBrokenError
	if !errors.As(wrapped, &brk) || brk.Seq != 3 || netting.Code(wrapped) != netting.CodeLedgerChainBroken {
		t.Errorf("wrapped: %v, %+v", wrapped, brk)
	}
}

// landingStore posts one more posting each time the balances are read, in
// its first landings reads: the postings a live cluster commits while
// VerifyLedger compares balances.
type landingStore struct {
	*netting.MemStore
	landings int
	landed   int
}

func (s *landingStore) Balances(ctx context.Context) (map[string]int64, error) {
	b, err := s.MemStore.Balances(ctx)
	if err == nil && s.landed < s.landings {
		s.landed++
		err = s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("landed-%d", s.landed), Legs: []ledger.Leg{
			ledger.Credit(ledger.Spendable("late"), 1), ledger.Debit(ledger.Revenue, 1)}})
	}
	return b, err
}

// Postings that land between the walk and the balances are walked too and
// the balances read again; a chain that never stops growing is an error,
// not a break.
func TestVerifyLedgerWhilePostingsLand(t *testing.T) {
	ctx := context.Background()
	s := &landingStore{MemStore: netting.NewMemStore(), landings: 5}
	for i := range 3 {
		if err := s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("fund-%d", i), Legs: []ledger.Leg{
			ledger.Credit(ledger.Spendable("u"), 10), ledger.Debit(ledger.Revenue, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	proof, err := netting.VerifyLedger(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if proof.Head.Len != 8 || proof.Accounts != 3 {
		t.Errorf("proof %+v, want 8 postings over 3 accounts", proof)
	}
	s.landings = 1 << 30
	_, err = netting.VerifyLedger(ctx, s)
	if err == nil || errors.Is(err, netting.ErrLedgerChainBroken) {
		t.Errorf("verify of an ever-growing chain: %v, want a plain error", err)
	}
}
