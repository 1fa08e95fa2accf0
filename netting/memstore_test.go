package netting_test

import (
	"context"
	"maps"
	"slices"

	"testing"

	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/storetest"
)

func TestMemStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) netting.Store {
		s := netting.NewMemStore()
		t.Cleanup(func() { s.Close() })
		return memTamperer{s}
	})
}

// memTamperer is a MemStore with storetest.Tamperer, through the
// test-only hook TamperLedger (export_test.go).
type memTamperer struct{ *netting.MemStore }

var _ storetest.Tamperer = memTamperer{}

// at runs fn on the posting at seq.
func (m memTamperer) at(seq int64, fn func(c *netting.ChainedPosting)) {
	m.TamperLedger(func(chain []netting.ChainedPosting, _ map[string]int64) []netting.ChainedPosting {
		for i := range chain {
			if chain[i].Seq == seq {
				fn(&chain[i])
			}
		}
		return chain
	})
}

func (m memTamperer) SetLegAmount(_ context.Context, seq int64, idx int, amount int64) error {
	m.at(seq, func(c *netting.ChainedPosting) { c.Posting.Legs[idx].Amount = amount })
	return nil
}

func (m memTamperer) SetMeta(_ context.Context, seq int64, key, value string) error {
	m.at(seq, func(c *netting.ChainedPosting) {
		meta := maps.Clone(c.Posting.Meta)
		if meta == nil {
			meta = map[string]string{}
		}
		meta[key] = value
		c.Posting.Meta = meta
	})
	return nil
}

func (m memTamperer) SetHash(_ context.Context, seq int64, hash string) error {
	m.at(seq, func(c *netting.ChainedPosting) { c.Hash = hash })
	return nil
}

func (m memTamperer) DeletePosting(_ context.Context, seq int64) error {
	m.TamperLedger(func(chain []netting.ChainedPosting, _ map[string]int64) []netting.ChainedPosting {
		return slices.DeleteFunc(chain, func(c netting.ChainedPosting) bool { return c.Seq == seq })
	})
	return nil
}

func (m memTamperer) SwapPostings(_ context.Context, a, b int64) error {
	m.TamperLedger(func(chain []netting.ChainedPosting, _ map[string]int64) []netting.ChainedPosting {
		for i := range chain {
			switch chain[i].Seq {
			case a:
				chain[i].Seq = b
			case b:
				chain[i].Seq = a
			}
		}
		return chain
	})
	return nil
}

func (m memTamperer) SetBalance(_ context.Context, account string, balance int64) error {
	m.TamperLedger(func(chain []netting.ChainedPosting, balances map[string]int64) []netting.ChainedPosting {
		balances[account] = balance
		return chain
	})
	return nil
}
