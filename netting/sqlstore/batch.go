package sqlstore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// The journal in batch form (schema version 9): one netting_batches row per
// append — a group commit's rows — holding them in one body, and one small
// netting_keys row per movement, key → (batch, offset), for the key lookups
// (a resend's first answer, the conflict check of every append).
//
// A batch row keeps the session, the first seq, the row count, the prev
// hash of its first row and the rows' RecordedAt (one per append); the
// body keeps each row's key, legs and hash, in order. The rows inside chain
// as they always did: the first row's prev hash is the batch's, each next
// row's is the hash before it, so the body decodes back into exactly the
// JournalRecords that were appended, and VerifyChain checks them as before.
//
// The body (format 1), all integers varints (encoding/binary):
//
//	byte 1 (the format)
//	per row: uvarint len(key), key,
//	         uvarint len(legs), per leg: uvarint len(account), account, varint amount,
//	         hash: byte 0 and its 32 bytes (a lowercase-hex SHA-256, as
//	         netting.ChainHash writes), or byte 1, uvarint len, the bytes
//	         (any other string, kept as it was: an upgrade keeps every
//	         journal readable exactly as it was written)
//
// The column is outside input as far as this package is concerned (an
// operator, a restore or a bug may have written it): decodeBatch checks
// every length against what is left and FuzzDecodeBatch fuzzes it.

// batchFormat is the body's first byte.
const batchFormat = 1

// Hash forms in a body.
const (
	hashBinary = 0
	hashString = 1
)

// encodeBatch writes recs' keys, legs and hashes as one body.
func encodeBatch(recs []netting.JournalRecord) []byte {
	size := 1
	for _, r := range recs {
		size += 2 + len(r.Key) + 1 + 33
		for _, l := range r.Legs {
			size += 2 + len(l.Account) + 10
		}
	}
	b := make([]byte, 0, size)
	b = append(b, batchFormat)
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = binary.AppendUvarint(b, uint64(len(r.Legs)))
		for _, l := range r.Legs {
			b = binary.AppendUvarint(b, uint64(len(l.Account)))
			b = append(b, l.Account...)
			b = binary.AppendVarint(b, l.Amount)
		}
		b = appendHash(b, r.Hash)
	}
	return b
}

// appendHash writes a hash in its binary form when it is lowercase hex of
// 32 bytes (what ChainHash writes), as itself otherwise.
func appendHash(b []byte, h string) []byte {
	if len(h) == 64 && lowerHex(h) {
		b = append(b, hashBinary)
		var raw [32]byte
		hex.Decode(raw[:], []byte(h)) // checked above: cannot fail
		return append(b, raw[:]...)
	}
	b = append(b, hashString)
	b = binary.AppendUvarint(b, uint64(len(h)))
	return append(b, h...)
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// batchHeader is a batch row's columns beside its body.
type batchHeader struct {
	sessionID string
	firstSeq  int64
	n         int64
	prevHash  string
	at        time.Time
}

// maxBatchRows bounds a stored row count a decode believes: every row takes
// at least four bytes of body, so a larger count than the body can hold is
// refused before anything is allocated for it.
func maxBatchRows(body []byte) int64 { return int64(len(body)) / 4 }

// decodeBatch parses a body written by encodeBatch into h.n records of
// session h.sessionID from seq h.firstSeq, chained from h.prevHash, stamped
// h.at, appended to out. It refuses anything else — another format, a row
// count that is not the body's, a length past the end, an empty account
// (as decodeLegs does), trailing bytes — with ErrLegsMalformed
// (STORE.CORRUPT). An empty key is a key like any other: Append takes one
// and schema 8 kept it, so refusing it here would make a journal that
// committed unreadable. Keys,
// accounts and hashes share one string per body (the strings of a settle's
// million rows would otherwise be millions of allocations).
func decodeBatch(out []netting.JournalRecord, h batchHeader, body []byte) ([]netting.JournalRecord, error) {
	if len(body) == 0 || body[0] != batchFormat {
		return nil, ErrLegsMalformed.Wrap("batch %s@%d: unknown body format", h.sessionID, h.firstSeq)
	}
	if h.n < 1 || h.n > maxBatchRows(body) {
		return nil, ErrLegsMalformed.Wrap("batch %s@%d: %d rows in %d bytes", h.sessionID, h.firstSeq, h.n, len(body))
	}
	// text is the body as a string, then the rows' hashes in hex: keys,
	// accounts and hashes are all substrings of it.
	buf := make([]byte, len(body), len(body)+int(h.n)*64)
	copy(buf, body)
	type span struct{ at, n int }
	hashes := make([]span, h.n)
	// First pass: validate, count legs, lay the hashes out after the body.
	p := 1
	legs := 0
	fail := func(row int64, what string) error {
		return ErrLegsMalformed.Wrap("batch %s@%d: row %d: %s", h.sessionID, h.firstSeq, h.firstSeq+row, what)
	}
	str := func() (int, int, bool) {
		n, k := binary.Uvarint(body[p:])
		if k <= 0 || n > uint64(len(body)-p-k) {
			return 0, 0, false
		}
		p += k
		at := p
		p += int(n)
		return at, int(n), true
	}
	for i := range h.n {
		if _, _, ok := str(); !ok {
			return nil, fail(i, "key")
		}
		nl, k := binary.Uvarint(body[p:])
		if k <= 0 || nl > uint64(len(body)-p-k)/2 {
			return nil, fail(i, "leg count")
		}
		p += k
		for range nl {
			if _, n, ok := str(); !ok || n == 0 {
				return nil, fail(i, "leg account")
			}
			_, k := binary.Varint(body[p:])
			if k <= 0 {
				return nil, fail(i, "leg amount")
			}
			p += k
		}
		legs += int(nl)
		if p >= len(body) {
			return nil, fail(i, "hash")
		}
		form := body[p]
		p++
		switch form {
		case hashBinary:
			if len(body)-p < 32 {
				return nil, fail(i, "hash")
			}
			hashes[i] = span{len(buf), 64}
			buf = hex.AppendEncode(buf, body[p:p+32])
			p += 32
		case hashString:
			at, n, ok := str()
			if !ok {
				return nil, fail(i, "hash")
			}
			hashes[i] = span{at, n}
		default:
			return nil, fail(i, "hash form")
		}
	}
	if p != len(body) {
		return nil, ErrLegsMalformed.Wrap("batch %s@%d: trailing bytes", h.sessionID, h.firstSeq)
	}
	text := string(buf)
	allLegs := make([]ledger.Leg, legs)
	out = slices.Grow(out, int(h.n))
	// Second pass: build the rows (every length was checked above).
	p = 1
	sub := func() string {
		n, k := binary.Uvarint(body[p:])
		p += k
		s := text[p : p+int(n)]
		p += int(n)
		return s
	}
	prev := h.prevHash
	for i := range h.n {
		r := netting.JournalRecord{SessionID: h.sessionID, Seq: h.firstSeq + i, PrevHash: prev, RecordedAt: h.at}
		r.Key = sub()
		nl, k := binary.Uvarint(body[p:])
		p += k
		r.Legs = allLegs[:nl:nl]
		allLegs = allLegs[nl:]
		for j := range r.Legs {
			r.Legs[j].Account = sub()
			amount, k := binary.Varint(body[p:])
			p += k
			r.Legs[j].Amount = amount
		}
		if body[p] == hashBinary {
			p += 33
		} else {
			p++
			sub()
		}
		r.Hash = text[hashes[i].at : hashes[i].at+hashes[i].n]
		prev = r.Hash
		out = append(out, r)
	}
	return out, nil
}

// batchFormatKept marks the body of a schema-8 journal row whose legs
// column did not decode (tampered with, or written by a bug), moved by the
// upgrade as a batch of its own: the row's key, legs text and hash, each a
// uvarint length and the bytes. decodeBatch refuses it (an unknown
// format), so the row reads as STORE.CORRUPT, as it read before, and only
// its session's journal and its own key's lookup fail, as before.
const batchFormatKept = 0

// keepUndecodable moves r, whose legs column legs did not decode, into a
// batch of its own in the kept form (batchFormatKept).
func keepUndecodable(ctx context.Context, s *Store, tx *sql.Tx, r netting.JournalRecord, legs string, at int64) error {
	body := []byte{batchFormatKept}
	for _, f := range []string{r.Key, legs, r.Hash} {
		body = binary.AppendUvarint(body, uint64(len(f)))
		body = append(body, f...)
	}
	h := batchHeader{sessionID: r.SessionID, firstSeq: r.Seq, n: 1, prevHash: r.PrevHash}
	wrote, err := s.d.insertBatch(ctx, s, tx, h, body, []string{r.Key}, at)
	if err != nil {
		return err
	}
	if len(wrote) != 1 {
		return fmt.Errorf("batch %s@%d: its key not written", h.sessionID, h.firstSeq)
	}
	return nil
}

// schemaBatches is the schema version that keeps journals in batch form.
const schemaBatches = 9

// keysTable is the table whose key column lists the journaled keys.
func (s *Store) keysTable() string {
	if s.schema >= schemaBatches {
		return "netting_keys"
	}
	return "netting_journal"
}

// appendBatchTx inserts recs — one session's contiguous rows, whose seqs
// the session row has just granted — as one batch row stamped now, and
// their keys. A key already journaled (or repeated in recs) is not
// written, and the refusal names it (collision).
func (s *Store) appendBatchTx(ctx context.Context, tx *sql.Tx, recs []netting.JournalRecord, now int64) error {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	h := batchHeader{sessionID: recs[0].SessionID, firstSeq: recs[0].Seq, n: int64(len(recs)), prevHash: recs[0].PrevHash}
	wrote, err := s.d.insertBatch(ctx, s, tx, h, encodeBatch(recs), keys, now)
	if err != nil {
		return fmt.Errorf("sqlstore: append %s: %w", h.sessionID, err)
	}
	if len(wrote) != len(recs) {
		return s.collision(ctx, tx, recs, wrote)
	}
	return nil
}

// readBatches reads the session's batches whose first seq is in [lo, hi),
// ordered by seq, decoded into rows.
func (s *Store) readBatches(ctx context.Context, sessionID string, lo, hi int64, size int) ([]netting.JournalRecord, error) {
	rs, err := s.rdb.QueryContext(ctx, s.d.q(`SELECT first_seq, n, prev_hash, recorded_at, body FROM netting_batches
		WHERE session_id = ? AND first_seq >= ? AND first_seq < ? ORDER BY first_seq`), sessionID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	defer rs.Close()
	out := make([]netting.JournalRecord, 0, size)
	for rs.Next() {
		h := batchHeader{sessionID: sessionID}
		var at int64
		var body []byte
		if err := rs.Scan(&h.firstSeq, &h.n, &h.prevHash, &at, &body); err != nil {
			return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
		}
		h.at = fromMicros(at)
		if out, err = decodeBatch(out, h, body); err != nil {
			return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
		}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: read journal %s: %w", sessionID, err)
	}
	return out, nil
}

// lookupBatchKey returns the journal row carrying key: its batch, decoded,
// at the key's offset.
func (s *Store) lookupBatchKey(ctx context.Context, key string) (netting.JournalRecord, bool, error) {
	var h batchHeader
	var at, idx int64
	var body []byte
	err := s.rdb.QueryRowContext(ctx, s.d.q(`SELECT b.session_id, b.first_seq, b.n, b.prev_hash, b.recorded_at, b.body, k.idx
		FROM netting_keys k JOIN netting_batches b ON b.id = k.batch WHERE k.key = ?`), key).
		Scan(&h.sessionID, &h.firstSeq, &h.n, &h.prevHash, &at, &body, &idx)
	if errors.Is(err, sql.ErrNoRows) {
		return netting.JournalRecord{}, false, nil
	}
	if err != nil {
		return netting.JournalRecord{}, false, fmt.Errorf("sqlstore: lookup key %q: %w", key, err)
	}
	h.at = fromMicros(at)
	recs, err := decodeBatch(nil, h, body)
	if err != nil {
		return netting.JournalRecord{}, false, fmt.Errorf("sqlstore: lookup key %q: %w", key, err)
	}
	if idx < 0 || idx >= int64(len(recs)) || recs[idx].Key != key {
		return netting.JournalRecord{}, false, ErrLegsMalformed.Wrap("lookup key %q: its index names offset %d of a batch of %d rows without it", key, idx, len(recs))
	}
	return recs[idx], true, nil
}

// migrationBatchRows is the most rows journalToBatches puts in one batch,
// and reads per statement.
const migrationBatchRows = 4096

// journalToBatches is schema 9's step: it moves every journal row into the
// batch form, each session's rows in seq order, and drops the old table. A
// batch ends where the rows stop running on — another session, a seq gap,
// a row whose prev hash is not the hash before it, another RecordedAt —
// or at migrationBatchRows, so that every row reads back exactly as it was
// written, chain breaks included: an upgraded journal proves what it
// proved before, no more and no less. A row whose legs column does not
// decode goes into a batch of its own in the kept form (keepUndecodable),
// so it reads as STORE.CORRUPT as it did, instead of failing the upgrade.
func journalToBatches(ctx context.Context, s *Store, tx *sql.Tx) error {
	var cur []netting.JournalRecord
	var curAt int64
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		keys := make([]string, len(cur))
		for i, r := range cur {
			keys[i] = r.Key
		}
		h := batchHeader{sessionID: cur[0].SessionID, firstSeq: cur[0].Seq, n: int64(len(cur)), prevHash: cur[0].PrevHash}
		wrote, err := s.d.insertBatch(ctx, s, tx, h, encodeBatch(cur), keys, curAt)
		if err != nil {
			return err
		}
		if len(wrote) != len(cur) {
			return fmt.Errorf("batch %s@%d: %d of %d keys written", h.sessionID, h.firstSeq, len(wrote), len(cur))
		}
		cur = cur[:0]
		return nil
	}
	afterSID, afterSeq := "", int64(math.MinInt64)
	moved := 0
	for {
		rs, err := tx.QueryContext(ctx, s.d.q(`SELECT session_id, seq, key, legs, prev_hash, hash, recorded_at FROM netting_journal
			WHERE session_id > ? OR (session_id = ? AND seq > ?) ORDER BY session_id, seq LIMIT ?`), afterSID, afterSID, afterSeq, migrationBatchRows)
		if err != nil {
			return err
		}
		type row struct {
			r  netting.JournalRecord
			at int64
			// kept is the row's legs column when it does not decode.
			kept *string
		}
		var page []row
		for rs.Next() {
			var w row
			var legs string
			if err := rs.Scan(&w.r.SessionID, &w.r.Seq, &w.r.Key, &legs, &w.r.PrevHash, &w.r.Hash, &w.at); err != nil {
				rs.Close()
				return err
			}
			if w.r.Legs, err = decodeLegs(legs); err != nil {
				w.kept = &legs
			}
			page = append(page, w)
		}
		if err := rs.Close(); err != nil {
			return err
		}
		if err := rs.Err(); err != nil {
			return err
		}
		// The page is read whole first: a connection serves one statement
		// at a time (pgx), and the batches are written between pages.
		for _, w := range page {
			r, at := w.r, w.at
			afterSID, afterSeq = r.SessionID, r.Seq
			if w.kept != nil {
				if err := flush(); err != nil {
					return err
				}
				if err := keepUndecodable(ctx, s, tx, r, *w.kept, at); err != nil {
					return err
				}
				continue
			}
			if k := len(cur); k > 0 {
				last := cur[k-1]
				if r.SessionID != last.SessionID || r.Seq != last.Seq+1 || r.PrevHash != last.Hash || at != curAt || k >= migrationBatchRows {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			cur, curAt = append(cur, r), at
		}
		n := len(page)
		moved += n
		if n < migrationBatchRows {
			break
		}
	}
	if err := flush(); err != nil {
		return err
	}
	// Every refused key gets its marker (rememberRefusals); a key both
	// journaled and refused (two nodes racing, doc.go) keeps its journal
	// row, as its lookups always did.
	// The old name stays as a view of what SQL can read without decoding a
	// body — each movement's session, seq, key and time — for the readers
	// of the table outside this package (a SQL shell, a test that counts a
	// key's rows).
	stmts := []string{`DROP TABLE netting_journal`,
		`CREATE VIEW netting_journal AS SELECT b.session_id AS session_id, b.first_seq + k.idx AS seq, k.key AS key, b.recorded_at AS recorded_at
			FROM netting_keys k JOIN netting_batches b ON b.id = k.batch`,
		`INSERT INTO netting_keys (key, batch, idx) SELECT key, 0, -1 FROM netting_refusals WHERE true ON CONFLICT (key) DO NOTHING`}
	if moved > 0 {
		// Statistics for the moved rows, as the old table had: a table
		// left unanalyzed is probed by a scan in plans cached before
		// autovacuum comes by (version 5). Not on an empty journal, which
		// would record the tables as analyzed and empty.
		stmts = append(stmts, `ANALYZE netting_batches`, `ANALYZE netting_keys`)
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
