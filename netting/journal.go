package netting

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/shardwise/shardwise/ledger"
)

// GenesisHash is the prevHash of every session's first journal row.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// JournalCurrency is the currency code written into the hashed form of a leg.
// Our ledger has one currency; economy-lab's hashed legs name theirs
// ("CREDIT"), and keeping the same text keeps the hashes comparable.
const JournalCurrency = "CREDIT"

// ChainHash returns the hex SHA-256 of "prevHash|key|legs", where legs are
// "account:currency:amount" joined by ";" — the hash of one journal row.
func ChainHash(prevHash, key string, legs []ledger.Leg) string {
	var h [hashHexLen]byte
	chainHashHex(&h, prevHash, key, legs)
	return string(h[:])
}

// hashHexLen is the length of a chain hash in hex.
const hashHexLen = 2 * sha256.Size

// chainHashHex writes ChainHash's hex digits to dst. It builds the hashed
// text in a buffer on the stack (a longer row grows it on the heap), so a
// check that only compares the digits (VerifyChain) allocates nothing:
// every group commit hashes each of its rows, and every settle checks its
// whole journal.
func chainHashHex(dst *[hashHexLen]byte, prevHash, key string, legs []ledger.Leg) {
	var stack [384]byte
	b := append(stack[:0], prevHash...)
	b = append(b, '|')
	b = append(b, key...)
	b = append(b, '|')
	for i, l := range legs {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, l.Account...)
		b = append(b, ':')
		b = append(b, JournalCurrency...)
		b = append(b, ':')
		b = strconv.AppendInt(b, l.Amount, 10)
	}
	sum := sha256.Sum256(b)
	hex.Encode(dst[:], sum[:])
}

// chainHashIs reports whether hash is ChainHash(prevHash, key, legs).
func chainHashIs(hash, prevHash, key string, legs []ledger.Leg) bool {
	var h [hashHexLen]byte
	chainHashHex(&h, prevHash, key, legs)
	return string(h[:]) == hash
}

// VerifyChain checks a session's journal as read back from the store: seqs
// 0,1,2… in order, each row's prevHash equal to the previous row's hash (the
// first to GenesisHash), each hash recomputed from its row, each row's legs
// well formed and balanced. It returns the head hash (GenesisHash for an
// empty journal) or a *ChainBrokenError naming the first bad seq.
func VerifyChain(sessionID string, recs []JournalRecord) (head string, err error) {
	head = GenesisHash
	for i, r := range recs {
		seq := int64(i)
		switch {
		case r.SessionID != sessionID:
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "row of session " + r.SessionID}
		case r.Seq != seq:
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "seq " + strconv.FormatInt(r.Seq, 10) + " out of order"}
		case r.PrevHash != head:
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "prevHash does not match the previous row"}
		case !chainHashIs(r.Hash, r.PrevHash, r.Key, r.Legs):
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "hash does not match the row"}
		}
		if err := ledger.ValidateLegs(r.Legs); err != nil {
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "legs invalid: " + err.Error()}
		}
		head = r.Hash
	}
	return head, nil
}
