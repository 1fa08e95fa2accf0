package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The read side of the ledger's chain (netting.PostingLog) and the
// migration step that chains the postings of a database older than schema
// 6. The write side is chainTx (ledger.go), the last step of every
// posting's transaction.

// ReadPostings implements netting.PostingLog: one statement, so the page is
// one snapshot of the postings and their entries.
func (s *Store) ReadPostings(ctx context.Context, from int64, limit int) ([]netting.ChainedPosting, error) {
	if limit < 1 {
		return nil, nil
	}
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT p.chain_seq, p.id, p.meta, p.posted_at, p.prev_hash, p.hash, e.account, e.amount
		FROM (SELECT id, chain_seq, meta, posted_at, prev_hash, hash FROM ledger_postings
			WHERE chain_seq >= ? ORDER BY chain_seq LIMIT ?) AS p
		LEFT JOIN ledger_entries AS e ON e.posting_id = p.id
		ORDER BY p.chain_seq, e.idx`), from, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read postings from %d: %w", from, err)
	}
	out, err := scanChainedPostings(rs)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read postings from %d: %w", from, err)
	}
	return out, nil
}

// scanChainedPostings reads rows of (seq, id, meta, posted_at, prev_hash,
// hash, account, amount), one per entry (account NULL for a posting
// without entries), grouped by posting in the order given.
func scanChainedPostings(rs *sql.Rows) ([]netting.ChainedPosting, error) {
	defer rs.Close()
	var out []netting.ChainedPosting
	for rs.Next() {
		var (
			seq             sql.NullInt64
			id, meta        string
			at              int64
			prev, hash, acc sql.NullString
			amount          sql.NullInt64
		)
		if err := rs.Scan(&seq, &id, &meta, &at, &prev, &hash, &acc, &amount); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].Posting.ID != id {
			m, err := decodeMeta(meta)
			if err != nil {
				return nil, &netting.LedgerChainBrokenError{Kind: netting.LedgerTampered, Seq: seq.Int64, PostingID: id,
					Reason: "its stored meta does not decode: " + err.Error()}
			}
			out = append(out, netting.ChainedPosting{Seq: seq.Int64, Posting: ledger.Posting{ID: id, Meta: m},
				PostedAt: fromMicros(at), PrevHash: prev.String, Hash: hash.String})
		}
		if acc.Valid {
			p := &out[len(out)-1].Posting
			p.Legs = append(p.Legs, ledger.Leg{Account: acc.String, Amount: amount.Int64})
		}
	}
	return out, rs.Err()
}

// LedgerHead implements netting.PostingLog: the head row and the posting
// count in one statement. A missing head row reads as an empty chain
// (Len 0, Hash ""), which VerifyLedger reports against the postings.
func (s *Store) LedgerHead(ctx context.Context) (netting.LedgerHead, error) {
	var n, count sql.NullInt64
	var hash sql.NullString
	err := s.rdb.QueryRowContext(ctx, `SELECT (SELECT chain_len FROM ledger_chain WHERE id = 1),
		(SELECT head_hash FROM ledger_chain WHERE id = 1), (SELECT COUNT(*) FROM ledger_postings)`).Scan(&n, &hash, &count)
	if err != nil {
		return netting.LedgerHead{}, fmt.Errorf("sqlstore: ledger head: %w", err)
	}
	return netting.LedgerHead{Len: n.Int64, Hash: hash.String, Postings: count.Int64}, nil
}

// chainBackfillPage is how many postings chainExistingPostings reads, and
// writes back, per statement.
const chainBackfillPage = 250

// chainExistingPostings is schema 6's step: it chains the postings a
// database already holds, in the order they were posted (posted_at, then
// id), as if each had been chained when it committed, and writes the head.
// The hashes are computed here (SQLite has no SHA-256), into a temporary
// table, and written to the postings by one UPDATE.
func chainExistingPostings(ctx context.Context, s *Store, tx *sql.Tx) error {
	// Created from the postings table, so its id column has that column's
	// collation (COLLATE "C" on PostgreSQL): the join compares alike.
	for _, stmt := range []string{
		`CREATE TEMPORARY TABLE ledger_chain_backfill AS SELECT id, chain_seq, prev_hash, hash FROM ledger_postings WHERE 1 = 0`,
		`CREATE INDEX ledger_chain_backfill_id ON ledger_chain_backfill (id)`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	head := netting.GenesisHash
	var seq int64
	// Keyset pages: the postings after (afterAt, afterID) in chain order.
	afterAt, afterID := int64(math.MinInt64), ""
	for {
		rs, err := tx.QueryContext(ctx, s.d.q(`SELECT p.chain_seq, p.id, p.meta, p.posted_at, p.prev_hash, p.hash, e.account, e.amount
			FROM (SELECT id, chain_seq, meta, posted_at, prev_hash, hash FROM ledger_postings
				WHERE posted_at > ? OR (posted_at = ? AND id > ?) ORDER BY posted_at, id LIMIT ?) AS p
			LEFT JOIN ledger_entries AS e ON e.posting_id = p.id
			ORDER BY p.posted_at, p.id, e.idx`), afterAt, afterAt, afterID, chainBackfillPage)
		if err != nil {
			return err
		}
		page, err := scanChainedPostings(rs)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		args := make([]any, 0, 4*len(page))
		for _, p := range page {
			hash := netting.PostingHash(head, p.Posting, p.PostedAt)
			args = append(args, p.Posting.ID, seq, head, hash)
			head = hash
			seq++
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO ledger_chain_backfill (id, chain_seq, prev_hash, hash) VALUES `+
			repeatJoin("(?, ?, ?, ?)", len(page))), args...); err != nil {
			return err
		}
		last := page[len(page)-1]
		afterAt, afterID = last.PostedAt.UnixMicro(), last.Posting.ID
		if len(page) < chainBackfillPage {
			break
		}
	}
	for _, stmt := range []string{
		`ANALYZE ledger_chain_backfill`,
		`UPDATE ledger_postings SET chain_seq = b.chain_seq, prev_hash = b.prev_hash, hash = b.hash
			FROM ledger_chain_backfill AS b WHERE b.id = ledger_postings.id`,
		`DROP TABLE ledger_chain_backfill`,
		`CREATE UNIQUE INDEX ledger_postings_chain ON ledger_postings (chain_seq)`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO ledger_chain (id, chain_len, head_hash) VALUES (1, ?, ?)`), seq, head)
	return err
}
