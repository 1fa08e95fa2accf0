package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"sync"
)

// stmtCache keeps prepared statements on the SQLite writer connection, so a
// group commit's statements are parsed once per store instead of once per
// commit (parsing was a fifth of a group commit's CPU). Multi-row statements
// come in power-of-two row counts (rowChunks), so a handful of texts serve
// every batch size. They are all prepared when the store opens: preparing
// on the database inside a transaction would wait for the writer connection
// the transaction holds. PostgreSQL passes batches as arrays and needs none.
type stmtCache struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// prepare prepares every text on db.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, texts []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	for _, text := range texts {
		if _, ok := c.stmts[text]; ok {
			continue
		}
		st, err := db.PrepareContext(ctx, text)
		if err != nil {
			return fmt.Errorf("sqlstore: prepare: %w", err)
		}
		c.stmts[text] = st
	}
	return nil
}

// stmt returns the prepared text bound to tx, or nil if text was never
// prepared (or the store is closed): the caller then runs it unprepared.
func (c *stmtCache) stmt(ctx context.Context, tx *sql.Tx, text string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.stmts[text]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// close closes every cached statement; later calls to stmt return nil (the
// caller runs the text unprepared, on a store that is closing).
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, st := range c.stmts {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.stmts = nil
	return first
}

// maxChunkRows is the largest row count of one cached multi-row statement:
// at 7 parameters a row (the journal) it stays far below SQLite's 32766.
const maxChunkRows = 128

// rowChunks splits n rows into statement sizes: as many maxChunkRows as fit,
// then the remainder's binary digits, largest first — at most
// log2(maxChunkRows) extra statements, from log2(maxChunkRows)+1 texts.
func rowChunks(n int) []int {
	var out []int
	for n >= maxChunkRows {
		out = append(out, maxChunkRows)
		n -= maxChunkRows
	}
	for n > 0 {
		size := 1 << (bits.Len(uint(n)) - 1)
		out = append(out, size)
		n -= size
	}
	return out
}

// queryTx, execTx and queryRowTx run a statement in tx, prepared when the
// store has it cached.
func (s *Store) queryTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.stmts.stmt(ctx, tx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

func (s *Store) execTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.stmts.stmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

func (s *Store) queryRowTx(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := s.stmts.stmt(ctx, tx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}
