package netting

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

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
	var b strings.Builder
	b.Grow(len(prevHash) + len(key) + 2 + 48*len(legs))
	b.WriteString(prevHash)
	b.WriteByte('|')
	b.WriteString(key)
	b.WriteByte('|')
	for i, l := range legs {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(l.Account)
		b.WriteByte(':')
		b.WriteString(JournalCurrency)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(l.Amount, 10))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
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
		case ChainHash(r.PrevHash, r.Key, r.Legs) != r.Hash:
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "hash does not match the row"}
		}
		if err := ledger.ValidateLegs(r.Legs); err != nil {
			return "", &ChainBrokenError{SessionID: sessionID, Seq: seq, Reason: "legs invalid: " + err.Error()}
		}
		head = r.Hash
	}
	return head, nil
}
