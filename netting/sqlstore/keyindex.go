package sqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"

	"github.com/shardwise/shardwise/netting"
)

// maxKeyIndexFaults is how many faults VerifyKeyIndex lists (it counts them
// all).
const maxKeyIndexFaults = 100

// Marker rows in netting_keys: a refused key's entry (rememberRefusals)
// points at batch 0 offset −1, which no batch has.
const (
	markerBatch  = 0
	markerOffset = -1
)

// VerifyKeyIndex checks the journal's key index (netting_keys) against the
// batch bodies (schema 9, batch.go), which the hash chain covers and the
// index does not: every key in a body has its entry, pointing at that
// batch and offset, and every entry points at a batch row holding its key
// at its offset (a refused key's marker, batch 0 offset −1, points
// nowhere, by design). A lost entry would let a resend of its key be
// journaled again — a duplicate movement — since the append's conflict
// check reads the index alone; after such a resend the first batch still
// holds the key without an entry, so this check names it either way.
//
// It returns nil when the index agrees, a *netting.KeyIndexBrokenError
// (JOURNAL.KEY_INDEX_BROKEN) naming each key and batch that disagree
// otherwise (the first maxKeyIndexFaults, and how many in all), and any
// other error when it could not read. A batch whose body does not decode
// is a fault of its own (the journal reads fail on it too). It reads the
// batches and the index in ONE statement, so one snapshot, and holds one
// batch in memory at a time: it writes nothing and may run while the
// cluster runs. Before schema 9 the journal is its own index and there is
// nothing to check. econ.Audit calls it.
func (s *Store) VerifyKeyIndex(ctx context.Context) error {
	if s.schema < schemaBatches {
		return nil
	}
	// One ordered stream: each batch's row (kind 0, with its header and
	// body) followed by the entries pointing at it (kind 1), in offset
	// order; the entries pointing at no batch come where their batch id
	// sorts.
	rs, err := s.rdb.QueryContext(ctx, `SELECT id AS batch, 0 AS kind, 0 AS idx, session_id, first_seq, n, body, NULL AS key FROM netting_batches
		UNION ALL SELECT batch, 1, idx, NULL, NULL, NULL, NULL, key FROM netting_keys
		ORDER BY batch, kind, idx`)
	if err != nil {
		return fmt.Errorf("sqlstore: verify key index: %w", err)
	}
	defer rs.Close()
	v := keyIndexCheck{cur: -1}
	for rs.Next() {
		var (
			batch, kind, idx int64
			sid              sql.NullString
			firstSeq, n      sql.NullInt64
			body             []byte
			key              sql.NullString
		)
		if err := rs.Scan(&batch, &kind, &idx, &sid, &firstSeq, &n, &body, &key); err != nil {
			return fmt.Errorf("sqlstore: verify key index: %w", err)
		}
		if kind == 0 {
			v.endBatch()
			v.startBatch(batch, batchHeader{sessionID: sid.String, firstSeq: firstSeq.Int64, n: n.Int64}, body)
			continue
		}
		v.entry(batch, idx, key.String)
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("sqlstore: verify key index: %w", err)
	}
	v.endBatch()
	if v.total == 0 {
		return nil
	}
	return &netting.KeyIndexBrokenError{Faults: v.faults, Total: v.total}
}

// keyIndexCheck is VerifyKeyIndex's walk along the ordered stream.
type keyIndexCheck struct {
	// cur is the batch whose row was read last (−1 before any), h its
	// header, keys its body's keys (nil when the body did not decode),
	// seen which of them an entry pointed at.
	cur  int64
	h    batchHeader
	keys []string
	seen []bool

	faults []netting.KeyIndexFault
	total  int
}

func (v *keyIndexCheck) fault(f netting.KeyIndexFault) {
	v.total++
	if len(v.faults) < maxKeyIndexFaults {
		v.faults = append(v.faults, f)
	}
}

func (v *keyIndexCheck) startBatch(id int64, h batchHeader, body []byte) {
	v.cur, v.h = id, h
	keys, err := bodyKeys(h, body)
	if err != nil {
		v.keys, v.seen = nil, nil
		v.fault(netting.KeyIndexFault{Batch: id, SessionID: h.sessionID, FirstSeq: h.firstSeq, Offset: -1,
			Reason: "its body does not decode, so its keys cannot be checked: " + err.Error()})
		return
	}
	v.keys, v.seen = keys, make([]bool, len(keys))
}

// endBatch reports the current batch's keys no entry pointed at.
func (v *keyIndexCheck) endBatch() {
	for i, k := range v.keys {
		if !v.seen[i] {
			v.fault(netting.KeyIndexFault{Key: k, Batch: v.cur, SessionID: v.h.sessionID, FirstSeq: v.h.firstSeq, Offset: int64(i),
				Reason: "journaled here, and no index entry points at it (a resend of the key would be journaled again)"})
		}
	}
	v.keys, v.seen = nil, nil
}

// entry checks one index entry against the current batch.
func (v *keyIndexCheck) entry(batch, idx int64, key string) {
	f := netting.KeyIndexFault{Key: key, Batch: batch, Offset: idx}
	switch {
	case batch != v.cur:
		// The stream is past the current batch's entries: its keys
		// without one are reported first, in batch order.
		v.endBatch()
		if batch == markerBatch && idx == markerOffset {
			return // a refused key's marker
		}
		f.Reason = "its index entry points at a batch that does not exist"
	case v.keys == nil:
		return // the batch's body did not decode: reported once, above
	default:
		f.SessionID, f.FirstSeq = v.h.sessionID, v.h.firstSeq
		switch {
		case idx < 0 || idx >= int64(len(v.keys)):
			f.Reason = fmt.Sprintf("its index entry points past the batch's %d rows", len(v.keys))
		case v.keys[idx] != key:
			f.Reason = fmt.Sprintf("its index entry points at a row holding key %q", v.keys[idx])
		default:
			v.seen[idx] = true
			return
		}
	}
	v.fault(f)
}

// bodyKeys returns the keys of a batch body in order: of every row of a
// body in batch form, or the one key of a row the upgrade kept
// undecodable (batchFormatKept).
func bodyKeys(h batchHeader, body []byte) ([]string, error) {
	if len(body) > 0 && body[0] == batchFormatKept {
		n, k := binary.Uvarint(body[1:])
		if k <= 0 || n > uint64(len(body)-1-k) {
			return nil, ErrLegsMalformed.Wrap("batch %s@%d: kept row: key", h.sessionID, h.firstSeq)
		}
		return []string{string(body[1+k : 1+k+int(n)])}, nil
	}
	recs, err := decodeBatch(nil, h, body)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys, nil
}
