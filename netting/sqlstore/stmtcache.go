package sqlstore

import (
	"context"
	"database/sql"
	"math/bits"
	"sync"
)

// stmtCache keeps prepared statements on the SQLite writer connection, so a
// group commit's statements are parsed once per store instead of once per
// commit (parsing was a fifth of a group commit's CPU). Multi-row statements
// come in power-of-two row counts (rowChunks), so a handful of texts serve
// every batch size. PostgreSQL passes batches as arrays and needs none.
//
// Texts are prepared lazily, not when the store opens: preparing all of
// them (mostly the large multi-row inserts) was most of an open's CPU, and
// most stores never run most of them. Preparing on the database inside a
// transaction would wait for the writer connection the transaction holds,
// so a text's first use runs unprepared in its transaction and marks the
// text wanted; the next write transaction prepares the wanted texts before
// it begins (prepareWanted), and every later use runs prepared.
type stmtCache struct {
	mu sync.Mutex
	// enabled is set on a SQLite store at the latest schema. A store
	// opened at an older schema is a test's, to write data an upgrade must
	// keep: its texts run unprepared.
	enabled bool
	closed  bool
	stmts   map[string]*sql.Stmt
	// wanted holds the texts run unprepared since the last prepareWanted.
	wanted map[string]struct{}
}

// enable lets the cache prepare the texts it is asked for.
func (c *stmtCache) enable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enabled = true
	c.stmts = map[string]*sql.Stmt{}
	c.wanted = map[string]struct{}{}
}

// prepareWanted prepares on db the texts run unprepared so far. It must
// not run inside a transaction on db (it waits for the writer). A text that
// fails to prepare is not asked again: it runs unprepared, and any error of
// its own surfaces from the statement that runs it, as every statement's
// does; if ctx ended, the texts left stay wanted.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	if len(c.wanted) == 0 {
		c.mu.Unlock()
		return
	}
	texts := make([]string, 0, len(c.wanted))
	for text := range c.wanted {
		texts = append(texts, text)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for i, text := range texts {
		// Not under mu: a transaction holding the writer may be asking
		// stmt for a text meanwhile.
		st, err := db.PrepareContext(ctx, text)
		c.mu.Lock()
		if err != nil {
			if ctx.Err() != nil && !c.closed {
				for _, left := range texts[i:] {
					c.wanted[left] = struct{}{}
				}
				c.mu.Unlock()
				return
			}
			c.failed(text)
			c.mu.Unlock()
			continue
		}
		if c.closed || c.stmts[text] != nil {
			// Closed meanwhile, or prepared by a concurrent caller.
			c.mu.Unlock()
			_ = st.Close()
			continue
		}
		c.stmts[text] = st
		c.mu.Unlock()
	}
}

// failed records that text would not prepare: a nil entry, so stmt runs it
// unprepared without asking for it again. Called with mu held.
func (c *stmtCache) failed(text string) {
	if !c.closed {
		c.stmts[text] = nil
	}
}

// stmt returns the prepared text bound to tx, or nil — the caller then runs
// it unprepared — if it is not prepared yet (it is then wanted), will not
// prepare, the cache is not enabled, or the store is closed.
func (c *stmtCache) stmt(ctx context.Context, tx *sql.Tx, text string) *sql.Stmt {
	c.mu.Lock()
	if !c.enabled || c.closed {
		c.mu.Unlock()
		return nil
	}
	st, ok := c.stmts[text]
	if !ok {
		c.wanted[text] = struct{}{}
	}
	c.mu.Unlock()
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// close closes every cached statement once; later calls to stmt return nil
// (the caller runs the text unprepared, on a store that is closing).
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, st := range c.stmts {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.stmts, c.wanted = nil, nil
	c.closed = true
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
// store has it cached. Each text passed is cached for the store's life, so
// only the fixed texts of the hot path go through them (multi-row ones in
// rowChunks sizes).
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
