package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func openCacheTest(t *testing.T) (*Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "netting.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ctx
}

// cached reports whether text is prepared in s's cache.
func (c *stmtCache) cached(text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[text] != nil
}

func (c *stmtCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stmts)
}

// countKeys runs a cached statement in a write transaction.
func countKeys(ctx context.Context, s *Store, text string) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return s.queryRowTx(ctx, tx, text, "k").Scan(&n)
	})
	return n, err
}

// TestStatementsPreparedOnUse checks the issue-28 rule: opening a store
// prepares nothing; a text's first use runs unprepared and the next write
// transaction prepares it; Close closes the cache.
func TestStatementsPreparedOnUse(t *testing.T) {
	s, ctx := openCacheTest(t)
	if n := s.stmts.size(); n != 0 {
		t.Fatalf("open prepared %d statements, want none", n)
	}
	const text = `SELECT count(*) FROM netting_keys WHERE key = ?`
	if _, err := countKeys(ctx, s, text); err != nil {
		t.Fatal(err)
	}
	if s.stmts.cached(text) {
		t.Fatal("prepared inside the transaction that first ran it")
	}
	for range 2 {
		if _, err := countKeys(ctx, s, text); err != nil {
			t.Fatal(err)
		}
		if !s.stmts.cached(text) {
			t.Fatal("not prepared after its first use")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.stmts.size(); n != 0 {
		t.Fatalf("%d statements left after Close", n)
	}
}

// TestStatementPrepareFails checks that a text that does not prepare fails
// every call that runs it with the statement's own error, and is asked
// for once.
func TestStatementPrepareFails(t *testing.T) {
	s, ctx := openCacheTest(t)
	const bad = `SELECT count(*) FROM no_such_table WHERE key = ?`
	_, first := countKeys(ctx, s, bad)
	if first == nil {
		t.Fatal("a statement on a missing table ran")
	}
	for range 2 {
		_, err := countKeys(ctx, s, bad)
		if err == nil || err.Error() != first.Error() {
			t.Fatalf("later call: %v, want %v", err, first)
		}
	}
	s.stmts.mu.Lock()
	_, wanted := s.stmts.wanted[bad]
	s.stmts.mu.Unlock()
	if wanted || s.stmts.cached(bad) {
		t.Fatal("a text that failed to prepare is asked for again")
	}
}

// TestStatementCacheConcurrent runs many texts from many goroutines and
// closes the store while they run (under -race: the cache's locking).
func TestStatementCacheConcurrent(t *testing.T) {
	s, ctx := openCacheTest(t)
	texts := make([]string, 6)
	for i := range texts {
		texts[i] = fmt.Sprintf(`SELECT count(*) + %d FROM netting_keys WHERE key = ?`, i)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				n, err := countKeys(ctx, s, texts[(g+i)%len(texts)])
				if err != nil {
					t.Error(err)
					return
				}
				if want := (g + i) % len(texts); n != want {
					t.Errorf("text %d returned %d", want, n)
				}
			}
		})
	}
	wg.Wait()
	for _, text := range texts {
		if !s.stmts.cached(text) {
			t.Errorf("%q not prepared after 20 uses", text)
		}
	}
	var closing sync.WaitGroup
	for g := range 4 {
		closing.Go(func() {
			// Errors are expected here: the store closes under them.
			_, _ = countKeys(ctx, s, texts[g])
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closing.Wait()
	if n := s.stmts.size(); n != 0 {
		t.Fatalf("%d statements cached after Close", n)
	}
}
