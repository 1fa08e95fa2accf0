package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// testChainSQL is what only direct SQL can do to the chain: a posting row
// outside the chain, a deleted head row, a meta that does not decode.
func testChainSQL(t *testing.T, open func(t *testing.T) *sqlstore.Store) {
	fixture := func(t *testing.T) (*sqlstore.Store, context.Context) {
		ctx := testCtx(t)
		s := open(t)
		for i, u := range []string{"alice", "bob", "carol"} {
			if err := s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("fund-%d", i), Legs: []ledger.Leg{
				ledger.Credit(ledger.Spendable(u), 10), ledger.Debit(ledger.Revenue, 10)}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := netting.VerifyLedger(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s, ctx
	}
	cases := []struct {
		name   string
		tamper []string
		kind   string
		seq    int64
		id     string
	}{
		{"PostingOutsideTheChain", []string{`INSERT INTO ledger_postings (id, meta, posted_at) VALUES ('forged', '{}', 0)`}, netting.LedgerTampered, -1, ""},
		{"HeadRowDeleted", []string{`DELETE FROM ledger_chain`}, netting.LedgerTampered, 0, "fund-0"},
		{"HeadRewound", []string{`UPDATE ledger_chain SET chain_len = 2`}, netting.LedgerTampered, 2, "fund-2"},
		{"MetaUndecodable", []string{`UPDATE ledger_postings SET meta = '{"a":' WHERE chain_seq = 1`}, netting.LedgerTampered, 1, "fund-1"},
		{"EntriesDeleted", []string{`DELETE FROM ledger_entries WHERE posting_id = 'fund-1'`}, netting.LedgerTampered, 1, "fund-1"},
		{"EntryAdded", []string{`INSERT INTO ledger_entries (posting_id, idx, account, amount) VALUES ('fund-2', 2, 'mallory:spendable', 0)`}, netting.LedgerTampered, 2, "fund-2"},
		{"TimeChanged", []string{`UPDATE ledger_postings SET posted_at = posted_at + 1 WHERE chain_seq = 0`}, netting.LedgerTampered, 0, "fund-0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ctx := fixture(t)
			for _, q := range c.tamper {
				if err := s.ExecForTest(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			_, err := netting.VerifyLedger(ctx, s)
			var brk *netting.LedgerChainBrokenError
			if !errors.As(err, &brk) || brk.Kind != c.kind || brk.Seq != c.seq || brk.PostingID != c.id {
				t.Fatalf("VerifyLedger: %v (%+v), want kind %s at seq %d (%q)", err, brk, c.kind, c.seq, c.id)
			}
			t.Logf("found: %v", err)
		})
	}
}

func TestChainSQLite(t *testing.T) {
	testChainSQL(t, func(t *testing.T) *sqlstore.Store { return openSQLite(t) })
}

// testUpgradeChains writes postings on a store at schema 5 (unchained),
// upgrades it, and checks that schema 6 chained them in the order they were
// posted, that the upgraded ledger proves itself, and that the next posting
// is chained after them.
func testUpgradeChains(t *testing.T, openAt func(ctx context.Context, version int) (*sqlstore.Store, error), open func(ctx context.Context) (*sqlstore.Store, error)) {
	ctx := testCtx(t)
	old, err := openAt(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// More than one backfill page, many in the same millisecond (ties
	// broken by id), and meta.
	const n = 600
	for i := range n {
		p := ledger.Posting{ID: fmt.Sprintf("fund-%03d", n-i), Legs: []ledger.Leg{
			ledger.Credit(ledger.Spendable(fmt.Sprintf("u%d", i%17)), int64(1+i)), ledger.Debit(ledger.Revenue, int64(1+i))}}
		if i%3 == 0 {
			p.Meta = map[string]string{"batch": fmt.Sprint(i / 3), "by": "ops"}
		}
		must(old.Post(ctx, p))
	}
	// Half of them posted in the same microsecond: their order is their
	// ids', and the backfill's pages must neither skip nor repeat them.
	must(old.ExecForTest(ctx, `UPDATE ledger_postings SET posted_at = (SELECT MIN(posted_at) FROM ledger_postings) WHERE id >= ?`, "fund-300"))
	must(old.Close())

	s, err := open(ctx)
	must(err)
	t.Cleanup(func() { s.Close() })
	proof, err := netting.VerifyLedger(ctx, s)
	if err != nil {
		t.Fatalf("the upgraded ledger does not prove itself: %v", err)
	}
	if proof.Head.Len != n || proof.Accounts != 18 {
		t.Errorf("proof after the upgrade %+v, want %d postings over 18 accounts", proof, n)
	}
	var chain []netting.ChainedPosting
	for from := int64(0); ; from += 100 {
		page, err := s.ReadPostings(ctx, from, 100)
		must(err)
		chain = append(chain, page...)
		if len(page) < 100 {
			break
		}
	}
	if !slices.IsSortedFunc(chain, func(a, b netting.ChainedPosting) int {
		if c := a.PostedAt.Compare(b.PostedAt); c != 0 {
			return c
		}
		return compareStrings(a.Posting.ID, b.Posting.ID)
	}) {
		t.Error("the upgrade did not chain the postings in (posted_at, id) order")
	}
	ties := 0
	for i := 1; i < len(chain); i++ {
		if chain[i].PostedAt.Equal(chain[i-1].PostedAt) {
			ties++
		}
	}
	if ties < n/2-1 {
		t.Errorf("%d postings posted in the same microsecond as the one before, want at least %d", ties, n/2-1)
	}
	must(s.Post(ctx, ledger.Posting{ID: "after", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("late"), 1), ledger.Debit(ledger.Revenue, 1)}}))
	if proof, err := netting.VerifyLedger(ctx, s); err != nil || proof.Head.Len != n+1 {
		t.Errorf("after one more posting: %+v, %v", proof, err)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestSQLiteUpgradeChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netting.db")
	testUpgradeChains(t,
		func(ctx context.Context, version int) (*sqlstore.Store, error) {
			return sqlstore.OpenSQLiteAtVersion(ctx, path, version)
		},
		func(ctx context.Context) (*sqlstore.Store, error) { return sqlstore.OpenSQLite(ctx, path) })
}
