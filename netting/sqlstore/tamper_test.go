package sqlstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/shardwise/shardwise/netting/sqlstore"
	"github.com/shardwise/shardwise/netting/storetest"
)

// tamperable is a store with storetest.Tamperer: direct SQL on its
// tables, behind its back.
type tamperable struct{ *sqlstore.Store }

var _ storetest.Tamperer = tamperable{}

func (s tamperable) exec(ctx context.Context, stmts ...string) func(args ...any) error {
	return func(args ...any) error {
		for _, q := range stmts {
			if err := s.ExecForTest(ctx, q, args...); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
}

func (s tamperable) SetLegAmount(ctx context.Context, seq int64, idx int, amount int64) error {
	return s.exec(ctx, `UPDATE ledger_entries SET amount = ? WHERE idx = ? AND posting_id = (SELECT id FROM ledger_postings WHERE chain_seq = ?)`)(amount, idx, seq)
}

func (s tamperable) SetMeta(ctx context.Context, seq int64, key, value string) error {
	page, err := s.ReadPostings(ctx, seq, 1)
	if err != nil || len(page) == 0 || page[0].Seq != seq {
		return fmt.Errorf("no posting at seq %d (%v)", seq, err)
	}
	meta := maps.Clone(page[0].Posting.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[key] = value
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	return s.exec(ctx, `UPDATE ledger_postings SET meta = ? WHERE chain_seq = ?`)(string(b), seq)
}

func (s tamperable) SetHash(ctx context.Context, seq int64, hash string) error {
	return s.exec(ctx, `UPDATE ledger_postings SET hash = ? WHERE chain_seq = ?`)(hash, seq)
}

func (s tamperable) DeletePosting(ctx context.Context, seq int64) error {
	return s.exec(ctx, `DELETE FROM ledger_entries WHERE posting_id = (SELECT id FROM ledger_postings WHERE chain_seq = ?)`,
		`DELETE FROM ledger_postings WHERE chain_seq = ?`)(seq)
}

func (s tamperable) SwapPostings(ctx context.Context, a, b int64) error {
	return errors.Join(
		s.exec(ctx, `UPDATE ledger_postings SET chain_seq = -1 WHERE chain_seq = ?`)(a),
		s.exec(ctx, `UPDATE ledger_postings SET chain_seq = ? WHERE chain_seq = ?`)(a, b),
		s.exec(ctx, `UPDATE ledger_postings SET chain_seq = ? WHERE chain_seq = -1`)(b))
}

func (s tamperable) SetBalance(ctx context.Context, account string, balance int64) error {
	return s.exec(ctx, `INSERT INTO ledger_balances (account, balance) VALUES (?, ?)
		ON CONFLICT (account) DO UPDATE SET balance = excluded.balance`)(account, balance)
}
