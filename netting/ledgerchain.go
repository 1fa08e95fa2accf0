package netting

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// The ledger's hash chain. Every posting a store commits is chained: it
// gets the next position (Seq) in the store's one chain and a Hash over the
// previous posting's hash and its own contents (PostingHash), computed by
// the store inside the posting's transaction, so the chain's order is the
// order the postings committed in. The store also keeps the chain's head
// (LedgerHead), so that a posting removed from the end is missed too.
// VerifyLedger walks the chain and says whether it is intact.

// ChainedPosting is one posting as the store's chain holds it.
type ChainedPosting struct {
	// Seq is the posting's position in the chain: 0 for the store's first
	// posting, one more for each posting committed after it.
	Seq     int64
	Posting ledger.Posting
	// PostedAt is stamped by the store's clock when the posting commits
	// (microsecond precision); it is hashed with the posting.
	PostedAt time.Time
	// PrevHash is the Hash of the posting at Seq−1 (GenesisHash for Seq 0).
	PrevHash string
	// Hash is PostingHash(PrevHash, Posting, PostedAt).
	Hash string
}

// LedgerHead is the end of a store's chain, as the store keeps it beside
// the postings.
type LedgerHead struct {
	// Len is how many postings are chained: the next one gets Seq Len.
	Len int64
	// Hash is the Hash of the posting at Seq Len−1 (GenesisHash if Len is 0).
	Hash string
	// Postings counts every posting the store holds, chained or not: Len,
	// in a ledger nobody has tampered with.
	Postings int64
}

// PostingLog is the read side of a store's chain, part of LedgerStore:
// what VerifyLedger walks. A store returns what it has stored, without
// checking it.
type PostingLog interface {
	// ReadPostings returns the chained postings with Seq ≥ from, in Seq
	// order, at most limit (≥ 1) of them; fewer than limit means none
	// follow. Legs are in the order posted; an empty Meta is nil. A stored
	// posting the store cannot decode is a *LedgerChainBrokenError naming
	// its Seq.
	ReadPostings(ctx context.Context, from int64, limit int) ([]ChainedPosting, error)
	// LedgerHead returns the chain's head and the posting count, read
	// together (one statement or one lock hold).
	LedgerHead(ctx context.Context) (LedgerHead, error)
}

// postingHashVersion starts the hashed text of every posting, so that a
// later form can be told apart.
const postingHashVersion = "shardwise.posting.v1"

// PostingHash returns the hex SHA-256 of a posting's canonical text, the
// Hash of a chained posting. The text is a sequence of netstrings (decimal
// byte length, ':', the bytes, ','), so no field's content can be mistaken
// for a separator:
//
//	"shardwise.posting.v1", prevHash, p.ID, postedAt as decimal unix
//	microseconds, the number of legs, then each leg's account and decimal
//	amount (debit-positive, in the order posted), the number of meta
//	entries, then each entry's key and value in byte order of the keys.
//
// The chain position (Seq) is not hashed: the order is fixed by prevHash,
// and a posting moved to another position still hashes as itself, which
// lets VerifyLedger tell a reordered chain from a rewritten posting.
func PostingHash(prevHash string, p ledger.Posting, postedAt time.Time) string {
	b := make([]byte, 0, 64+len(prevHash)+len(p.ID)+48*len(p.Legs)+32*len(p.Meta))
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ',')
	}
	number := func(n int64) { field(strconv.FormatInt(n, 10)) }
	field(postingHashVersion)
	field(prevHash)
	field(p.ID)
	number(postedAt.UnixMicro())
	number(int64(len(p.Legs)))
	for _, l := range p.Legs {
		field(l.Account)
		number(l.Amount)
	}
	keys := make([]string, 0, len(p.Meta))
	for k := range p.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	number(int64(len(keys)))
	for _, k := range keys {
		field(k)
		field(p.Meta[k])
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Kinds of LedgerChainBrokenError.
const (
	// LedgerTampered: a posting's contents (id, legs, meta, time) or hash
	// were changed, or the head or the posting count disagree with the
	// chain.
	LedgerTampered = "tampered"
	// LedgerMissing: a posting is absent: a gap in the chain's positions,
	// or the head counts postings past the last one found.
	LedgerMissing = "missing"
	// LedgerReordered: a posting is intact but not in its place: it was
	// chained after a posting found elsewhere in the chain.
	LedgerReordered = "reordered"
	// LedgerBalanceMismatch: an account's balance as stored differs from
	// the sum of the chained postings' legs.
	LedgerBalanceMismatch = "balances"
)

// LedgerChainBrokenError is VerifyLedger's finding: the first place where
// the stored ledger is not what its postings committed.
type LedgerChainBrokenError struct {
	// Kind is LedgerTampered, LedgerMissing, LedgerReordered or
	// LedgerBalanceMismatch.
	Kind string
	// Seq is the chain position of the break: the posting found there, or
	// the first position found empty. −1 when the break is not at one
	// position (a balance, postings outside the chain).
	Seq int64
	// PostingID is the id of the posting at Seq ("" if none is there).
	PostingID string
	// Account is the account whose balance disagrees (LedgerBalanceMismatch).
	Account string
	Reason  string
}

func (e *LedgerChainBrokenError) Error() string {
	switch {
	case e.Account != "":
		return fmt.Sprintf("netting: ledger broken: %s: account %s: %s", e.Kind, e.Account, e.Reason)
	case e.Seq < 0:
		return fmt.Sprintf("netting: ledger broken: %s: %s", e.Kind, e.Reason)
	case e.PostingID == "":
		return fmt.Sprintf("netting: ledger chain broken at seq %d: %s: %s", e.Seq, e.Kind, e.Reason)
	}
	return fmt.Sprintf("netting: ledger chain broken at seq %d (posting %s): %s: %s", e.Seq, e.PostingID, e.Kind, e.Reason)
}

// ErrorCode returns LEDGER.CHAIN_BROKEN.
func (e *LedgerChainBrokenError) ErrorCode() string { return CodeLedgerChainBroken }

// Is makes errors.Is(err, ErrLedgerChainBroken) true.
func (e *LedgerChainBrokenError) Is(target error) bool { return target == ErrLedgerChainBroken }

// LedgerProof is what VerifyLedger proved.
type LedgerProof struct {
	// Head is the head the chain was walked to: Len postings, all intact,
	// the last one's Hash. An operator who keeps it can later check that
	// the chain still passes through it.
	Head LedgerHead
	// Accounts is how many accounts' balances were checked against the
	// postings' legs.
	Accounts int
}

// verifyPageSize is how many postings VerifyLedger reads per call.
const verifyPageSize = 1000

// verifyRounds bounds how often VerifyLedger reads the balances again
// because postings landed while it read them.
const verifyRounds = 32

// VerifyLedger proves a store's ledger: it walks the chain from Seq 0 and
// checks that every posting is where it belongs (no gap, each chained
// after the one before it), that each hash matches its posting's
// contents and each posting's legs are valid, that the head the store
// keeps is the last posting and the store holds no posting outside the
// chain, and that every balance the store keeps equals the sum of the
// chained postings' legs. It returns what it proved, or the first break as
// a *LedgerChainBrokenError (LEDGER.CHAIN_BROKEN); any other error is a
// failure to read the store.
//
// It writes nothing and may run while postings land: the balances are
// compared with the chain as it stood when they were read (it reads them
// again, and walks the new postings, until no posting landed in between).
// Its cost is one pass over the chain (a second one to classify a broken
// link) and memory for one balance per account.
func VerifyLedger(ctx context.Context, s LedgerStore) (LedgerProof, error) {
	w := newLedgerWalk()
	// walk reads and checks every posting from w.next on.
	walk := func() error {
		for {
			page, err := s.ReadPostings(ctx, w.next, verifyPageSize)
			var brk *LedgerChainBrokenError
			if errors.As(err, &brk) {
				return brk // a posting the store could not decode
			}
			if err != nil {
				return fmt.Errorf("netting: verify ledger: %w", err)
			}
			for _, p := range page {
				found, linkBroken := w.step(p)
				if linkBroken {
					return resolveLink(ctx, s, w, p)
				}
				if found != nil {
					return found
				}
			}
			if len(page) < verifyPageSize {
				return nil
			}
		}
	}
	if err := walk(); err != nil {
		return LedgerProof{}, err
	}
	for round := 1; ; round++ {
		balances, err := s.Balances(ctx)
		if err != nil {
			return LedgerProof{}, fmt.Errorf("netting: verify ledger: %w", err)
		}
		// The head is read after the balances: if it ends where the walk
		// ended, no posting committed after the walked ones before the
		// balances were read, so they are the walked postings' sums.
		head, err := s.LedgerHead(ctx)
		if err != nil {
			return LedgerProof{}, fmt.Errorf("netting: verify ledger: %w", err)
		}
		if head.Len != w.next {
			if head.Len < w.next {
				brk := &LedgerChainBrokenError{Kind: LedgerTampered, Seq: head.Len,
					Reason: fmt.Sprintf("the chain head records %d postings, the chain holds %d", head.Len, w.next)}
				if page, err := s.ReadPostings(ctx, max(head.Len, 0), 1); err == nil && len(page) == 1 {
					brk.Seq, brk.PostingID = page[0].Seq, page[0].Posting.ID
				}
				return LedgerProof{}, brk
			}
			if round == verifyRounds {
				return LedgerProof{}, fmt.Errorf("netting: verify ledger: postings kept landing through %d rounds; retry when fewer are posted", verifyRounds)
			}
			before := w.next
			if err := walk(); err != nil {
				return LedgerProof{}, err
			}
			if w.next == before {
				// The head was read before this walk, so every posting it
				// counts had committed: they are gone.
				return LedgerProof{}, &LedgerChainBrokenError{Kind: LedgerMissing, Seq: w.next,
					Reason: fmt.Sprintf("the chain head records %d postings; %s", head.Len, absent(w.next, head.Len))}
			}
			continue
		}
		if brk := w.finish(head, balances); brk != nil {
			return LedgerProof{}, brk
		}
		return LedgerProof{Head: head, Accounts: w.accounts(balances)}, nil
	}
}

// resolveLink classifies a posting p whose PrevHash is not the hash of the
// posting before it: if another posting of the chain has that hash, p was
// moved (reordered); otherwise the posting p was chained after is gone —
// rewritten with a fresh hash (the one before p, when p's position follows
// it), or removed and the positions after it renumbered.
func resolveLink(ctx context.Context, s PostingLog, w *ledgerWalk, p ChainedPosting) error {
	for from := int64(0); ; {
		page, err := s.ReadPostings(ctx, from, verifyPageSize)
		if err != nil {
			return fmt.Errorf("netting: verify ledger: %w", err)
		}
		for _, q := range page {
			if q.Hash == p.PrevHash && q.Seq != p.Seq {
				return &LedgerChainBrokenError{Kind: LedgerReordered, Seq: p.Seq, PostingID: p.Posting.ID,
					Reason: fmt.Sprintf("chained after posting %s, which is at seq %d", q.Posting.ID, q.Seq)}
			}
		}
		if len(page) < verifyPageSize {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	return w.unknownPrev(p)
}

// ledgerWalk is VerifyLedger's pure part: the state of a walk along the
// chain and the checks of each posting, the head and the balances.
type ledgerWalk struct {
	next     int64            // the Seq expected next
	head     string           // the Hash of the last posting walked
	lastID   string           // its id
	balances map[string]int64 // the legs walked, summed per account
}

func newLedgerWalk() *ledgerWalk {
	return &ledgerWalk{head: GenesisHash, balances: map[string]int64{}}
}

// step checks the next posting read and, if it is sound, adds it to the
// walk. linkBroken reports a posting sound but for its link to the
// previous one, which only a second pass can classify (resolveLink).
func (w *ledgerWalk) step(p ChainedPosting) (found *LedgerChainBrokenError, linkBroken bool) {
	switch {
	case p.Seq > w.next:
		return &LedgerChainBrokenError{Kind: LedgerMissing, Seq: w.next,
			Reason: fmt.Sprintf("%s; the chain goes on at posting %s", absent(w.next, p.Seq), p.Posting.ID)}, false
	case p.Seq < w.next:
		return &LedgerChainBrokenError{Kind: LedgerReordered, Seq: p.Seq, PostingID: p.Posting.ID,
			Reason: fmt.Sprintf("read after seq %d", w.next-1)}, false
	case PostingHash(p.PrevHash, p.Posting, p.PostedAt) != p.Hash:
		return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: p.Seq, PostingID: p.Posting.ID,
			Reason: "its hash does not match its contents (id, legs, meta, time or hash changed)"}, false
	}
	if err := ledger.Validate(p.Posting); err != nil {
		return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: p.Seq, PostingID: p.Posting.ID, Reason: "invalid posting: " + err.Error()}, false
	}
	if p.PrevHash != w.head {
		return nil, true
	}
	for _, l := range p.Posting.Legs {
		w.balances[l.Account] += l.BalanceDelta()
	}
	w.head, w.lastID = p.Hash, p.Posting.ID
	w.next++
	return nil, false
}

// absent says that the positions from to end (exclusive) are empty.
func absent(from, end int64) string {
	if end == from+1 {
		return fmt.Sprintf("seq %d is absent", from)
	}
	return fmt.Sprintf("seqs %d to %d are absent", from, end-1)
}

// unknownPrev is the finding for p chained after a hash no posting of the
// chain has.
func (w *ledgerWalk) unknownPrev(p ChainedPosting) *LedgerChainBrokenError {
	if p.Seq == 0 {
		return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: 0, PostingID: p.Posting.ID,
			Reason: "the first posting is chained after " + p.PrevHash + ", not the genesis hash"}
	}
	return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: p.Seq - 1, PostingID: w.lastID,
		Reason: fmt.Sprintf("the next posting (%s) was chained after a hash no posting has: this one was rewritten with a new hash, or postings after it were removed and the chain renumbered", p.Posting.ID)}
}

// finish checks the head and the balances once the walk has reached
// head.Len.
func (w *ledgerWalk) finish(head LedgerHead, balances map[string]int64) *LedgerChainBrokenError {
	if head.Hash != w.head {
		last := w.next - 1
		return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: last, PostingID: w.lastID,
			Reason: fmt.Sprintf("the chain head records hash %s for the last posting, which hashes to %s", head.Hash, w.head)}
	}
	if head.Postings != head.Len {
		return &LedgerChainBrokenError{Kind: LedgerTampered, Seq: -1,
			Reason: fmt.Sprintf("the store holds %d postings, %d of them chained", head.Postings, head.Len)}
	}
	accounts := make([]string, 0, len(balances)+len(w.balances))
	for a := range balances {
		accounts = append(accounts, a)
	}
	for a := range w.balances {
		if _, ok := balances[a]; !ok {
			accounts = append(accounts, a)
		}
	}
	slices.Sort(accounts)
	for _, a := range accounts {
		if stored, summed := balances[a], w.balances[a]; stored != summed {
			return &LedgerChainBrokenError{Kind: LedgerBalanceMismatch, Seq: -1, Account: a,
				Reason: fmt.Sprintf("balance %d stored, %d by the chained postings' legs", stored, summed)}
		}
	}
	return nil
}

// accounts is how many accounts finish compared.
func (w *ledgerWalk) accounts(balances map[string]int64) int {
	n := len(balances)
	for a := range w.balances {
		if _, ok := balances[a]; !ok {
			n++
		}
	}
	return n
}
