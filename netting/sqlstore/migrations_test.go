package sqlstore_test

import (
	"sync"
	"testing"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// testMigrations opens the same database twice: the first open migrates an
// empty database, the second finds it current, applies nothing and keeps the
// data.
func testMigrations(t *testing.T, open func(t *testing.T) *sqlstore.Store) {
	ctx := testCtx(t)
	s := open(t)
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != sqlstore.LatestSchemaVersion {
		t.Fatalf("schema version %d after open, want %d", v, sqlstore.LatestSchemaVersion)
	}
	if err := s.Post(ctx, ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit("a:spendable", 7), ledger.Debit(ledger.Revenue, 7)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	defer s.Close()
	if v, err := s.SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
		t.Fatalf("reopen: version %d, %v", v, err)
	}
	if b, err := s.Balance(ctx, "a:spendable"); err != nil || b != 7 {
		t.Fatalf("reopen lost data: balance %d, %v", b, err)
	}
}

// testConcurrentOpen opens one fresh database from several goroutines at
// once: the migration lock must let exactly one migrate and the rest see the
// result.
func testConcurrentOpen(t *testing.T, url string) {
	ctx := testCtx(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*sqlstore.Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = sqlstore.OpenPostgres(ctx, url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		if v, err := stores[i].SchemaVersion(ctx); err != nil || v != sqlstore.LatestSchemaVersion {
			t.Errorf("open %d: version %d, %v", i, v, err)
		}
		stores[i].Close()
	}
}
