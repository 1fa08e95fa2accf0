package sqlstore

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
)

// batchRecs chains n rows of session "s" from seq first after prev.
func batchRecs(first int64, prev string, legs ...[]ledger.Leg) []netting.JournalRecord {
	var out []netting.JournalRecord
	for i, l := range legs {
		key := "k" + string(rune('a'+i))
		h := netting.ChainHash(prev, key, l)
		out = append(out, netting.JournalRecord{SessionID: "s", Seq: first + int64(i), Key: key, Legs: l, PrevHash: prev, Hash: h})
		prev = h
	}
	return out
}

// A batch body decodes back into exactly the rows encoded: keys, legs
// (unicode, extreme amounts), hashes in both forms, the chain from the
// batch's prev hash, the batch's time.
func TestBatchCodec(t *testing.T) {
	at := time.UnixMicro(1_700_000_000_123_456).UTC()
	recs := batchRecs(7, netting.GenesisHash,
		[]ledger.Leg{ledger.Debit("ünïcode:spendable", math.MaxInt64), ledger.Credit("platform:revenue", 1)},
		[]ledger.Leg{{Account: `quote"and\back`, Amount: math.MinInt64}},
		[]ledger.Leg{ledger.Debit("a:spendable", 5), ledger.Credit("b:earned", 3), ledger.Credit("c:earned", 2)},
	)
	// A hash that is not ChainHash's lowercase hex (an old row, tampered
	// with) is kept as it was.
	recs[2].Hash = "NOT-HEX"
	for i := range recs {
		recs[i].RecordedAt = at
	}
	body := encodeBatch(recs)
	got, err := decodeBatch(nil, batchHeader{sessionID: "s", firstSeq: 7, n: 3, prevHash: netting.GenesisHash, at: at}, body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, recs)
	}
	// Appended after rows already there.
	more, err := decodeBatch(got[:1:1], batchHeader{sessionID: "s", firstSeq: 7, n: 3, prevHash: netting.GenesisHash, at: at}, body)
	if err != nil || len(more) != 4 || !reflect.DeepEqual(more[1:], recs) {
		t.Fatalf("decode after a row: %d rows, %v", len(more), err)
	}
}

// A body that is not what encodeBatch wrote is STORE.CORRUPT, never a
// panic: every cut of a valid body, a wrong row count, another format.
func TestBatchCodecRefuses(t *testing.T) {
	recs := batchRecs(0, netting.GenesisHash,
		[]ledger.Leg{ledger.Debit("a:spendable", 5), ledger.Credit("b:earned", 5)},
		[]ledger.Leg{ledger.Debit("a:spendable", 7), ledger.Credit("b:earned", 7)})
	body := encodeBatch(recs)
	h := batchHeader{sessionID: "s", n: 2, prevHash: netting.GenesisHash}
	for cut := range len(body) {
		if _, err := decodeBatch(nil, h, body[:cut]); !errors.Is(err, ErrLegsMalformed) {
			t.Fatalf("body cut at %d of %d: %v, want ErrLegsMalformed", cut, len(body), err)
		}
	}
	for _, n := range []int64{0, 1, 3, -1, math.MaxInt64} {
		h := h
		h.n = n
		if _, err := decodeBatch(nil, h, body); !errors.Is(err, ErrLegsMalformed) {
			t.Errorf("%d rows claimed of 2: %v, want ErrLegsMalformed", n, err)
		}
	}
	other := append([]byte{2}, body[1:]...)
	if _, err := decodeBatch(nil, h, other); !errors.Is(err, ErrLegsMalformed) {
		t.Errorf("format 2: %v, want ErrLegsMalformed", err)
	}
	if _, err := decodeBatch(nil, h, append(body, 0)); !errors.Is(err, ErrLegsMalformed) {
		t.Errorf("a trailing byte: %v, want ErrLegsMalformed", err)
	}
}

// FuzzDecodeBatch feeds arbitrary bodies to the decoder: it must never
// panic, and whatever it accepts must re-encode to a body that decodes to
// the same rows.
func FuzzDecodeBatch(f *testing.F) {
	recs := batchRecs(0, netting.GenesisHash,
		[]ledger.Leg{ledger.Debit("a:spendable", 5), ledger.Credit("b:earned", 5)},
		[]ledger.Leg{{Account: "x", Amount: math.MinInt64}})
	f.Add(encodeBatch(recs), int64(2))
	f.Add(encodeBatch(recs[:1]), int64(1))
	f.Add([]byte{1, 1, 'k', 0, 1, 3, 'a', 'b', 'c'}, int64(1))
	f.Fuzz(func(t *testing.T, body []byte, n int64) {
		h := batchHeader{sessionID: "s", firstSeq: 3, n: n, prevHash: "p"}
		got, err := decodeBatch(nil, h, body)
		if err != nil {
			if !errors.Is(err, ErrLegsMalformed) {
				t.Fatalf("error %v is not ErrLegsMalformed", err)
			}
			return
		}
		again, err := decodeBatch(nil, h, encodeBatch(got))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoded body decodes to %+v, %v; want %+v", again, err, got)
		}
	})
}
