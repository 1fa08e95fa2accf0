package netting

import (
	"strconv"

	"github.com/shardwise/shardwise/ledger"
)

// This file is the session core: the state a session keeps between store
// calls and the pure functions that decide what to write. Nothing here does
// I/O, reads a clock, locks or starts a goroutine; session.go drives it
// against the Store (the etcd-io/raft split: the core decides, the caller
// persists and reports back).

// Status is the answer to one Record.
type Status int

// Statuses of an Outcome.
const (
	// Accepted: the movement is journaled (durably) and reserved; it will be
	// settled by this session's settle.
	Accepted Status = iota + 1
	// Rejected: the movement was refused (Reason says why); nothing is
	// journaled or reserved.
	Rejected
)

func (s Status) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// ReasonInsufficientFunds is the Reason of a movement refused by the
// reservation check.
const ReasonInsufficientFunds = "INSUFFICIENT_FUNDS"

// Movement is one economic event to net: legs as in a ledger posting, and an
// idempotency key unique across all sessions.
type Movement struct {
	Key  string
	Legs []ledger.Leg
}

// Outcome is the answer to Record. Seq is the journal seq of an accepted
// movement (−1 when rejected). A key journaled by an earlier epoch answers
// Accepted with that epoch's seq.
type Outcome struct {
	Status Status
	Seq    int64
	Reason string
}

// Rejection is a movement the ledger refused during a replay, with the
// ledger's code (for example LEDGER.OVERDRAFT).
type Rejection struct {
	Key  string
	Code string
}

// SettleReport describes a session's settle.
type SettleReport struct {
	SessionID string
	// Mode is ModeNetted or ModeReplayed.
	Mode string
	// Postings is the number of ledger postings this session's settle
	// consists of: the chunks when netted; the compensations plus the
	// replayed movements when replayed.
	Postings int
	// Rejected lists the movements a replay could not post. For a session
	// found already settled by another settler, the codes are not known
	// and are left empty.
	Rejected []Rejection
	// Netted is the number of journaled movements settled.
	Netted int
	// JournalHead is the hash of the last journal row (GenesisHash if none).
	JournalHead string
	// AlreadySettled is true when this call found the settle done (by an
	// earlier call or another settler) and wrote nothing.
	AlreadySettled bool
}

// Posting ids of a settle, derived from the session id so every settler of
// the session writes the same ids (that is what makes a resumed or racing
// settle idempotent).
func chunkID(sessionID string, i int) string { return "net_" + sessionID + "_c" + strconv.Itoa(i) }

func compensationID(sessionID string, i int) string { return chunkID(sessionID, i) + "_comp" }

func replayID(sessionID string, seq int64) string {
	return "mv_" + sessionID + "_" + strconv.FormatInt(seq, 10)
}

// reservationDeltas is what a movement adds to the pending counters: the net
// balance change of each wallet account it touches (platform accounts are
// not reserved), zeros dropped, first-touch order.
func reservationDeltas(legs []ledger.Leg) []ledger.AccountDelta {
	var out []ledger.AccountDelta
	for _, d := range ledger.NetDeltas(legs) {
		if d.Delta != 0 && ledger.IsWallet(d.Account) {
			out = append(out, d)
		}
	}
	return out
}

// netPositions nets every journaled leg per account (raw, debit-positive),
// in first-touch order, dropping accounts that net to zero.
func netPositions(recs []JournalRecord) []ledger.Leg {
	pos, _, _ := netPositionsSides(recs)
	return pos
}

// netPositionsSides is netPositions with, beside each position, what the
// movements hold reserved on its account (both sides apart: a wallet's
// debits and credits; zero for a platform account) — so chunk i's release
// is the sides of the positions it carries — and the sides of the wallet
// accounts that net to zero, which no chunk carries. One pass, no
// allocation per movement: a movement that names each account once (the
// common case) is its own net.
func netPositionsSides(recs []JournalRecord) (pos []ledger.Leg, sides []Reserved, zero []ReservedChange) {
	idx := map[string]int{}
	at := func(account string) int {
		i, ok := idx[account]
		if !ok {
			i = len(pos)
			idx[account] = i
			pos = append(pos, ledger.Leg{Account: account})
			sides = append(sides, Reserved{})
		}
		return i
	}
	for _, r := range recs {
		repeats := repeatsAccount(r.Legs)
		for _, l := range r.Legs {
			i := at(l.Account)
			pos[i].Amount += l.Amount
			if d := l.BalanceDelta(); !repeats && d != 0 && ledger.IsWallet(l.Account) {
				sides[i] = sides[i].add(d)
			}
		}
		if repeats {
			for _, d := range reservationDeltas(r.Legs) {
				i := idx[d.Account]
				sides[i] = sides[i].add(d.Delta)
			}
		}
	}
	keptPos, keptSides := pos[:0], sides[:0]
	for i, p := range pos {
		switch {
		case p.Amount != 0:
			keptPos, keptSides = append(keptPos, p), append(keptSides, sides[i])
		case !sides[i].Zero():
			zero = append(zero, ReservedChange{Account: p.Account, Reserved: sides[i]})
		}
	}
	return keptPos, keptSides, zero
}

// chunkPostings cuts positions into postings of at most width positions,
// each balanced by a platform:netting_clearing leg (omitted when the chunk
// already sums to zero). Over all chunks the clearing legs sum to zero,
// because the positions do.
func chunkPostings(sessionID string, positions []ledger.Leg, width int, netted int, head string) []ledger.Posting {
	n := (len(positions) + width - 1) / width
	out := make([]ledger.Posting, 0, n)
	for i := 0; i < n; i++ {
		part := positions[i*width : min((i+1)*width, len(positions))]
		legs := make([]ledger.Leg, 0, len(part)+1)
		var sum int64
		for _, p := range part {
			legs = append(legs, p)
			sum += p.Amount
		}
		if sum != 0 {
			legs = append(legs, ledger.Leg{Account: ledger.NettingClearing, Amount: -sum})
		}
		out = append(out, ledger.Posting{ID: chunkID(sessionID, i), Legs: legs, Meta: map[string]string{
			"kind":        "netting_chunk",
			"session":     sessionID,
			"chunk":       strconv.Itoa(i+1) + "/" + strconv.Itoa(n),
			"netted":      strconv.Itoa(netted),
			"journalHead": head,
		}})
	}
	return out
}

// compensation reverses chunk i.
func compensation(sessionID string, i int, chunk ledger.Posting) ledger.Posting {
	legs := make([]ledger.Leg, len(chunk.Legs))
	for j, l := range chunk.Legs {
		legs[j] = ledger.Leg{Account: l.Account, Amount: -l.Amount}
	}
	return ledger.Posting{ID: compensationID(sessionID, i), Legs: legs, Meta: map[string]string{
		"kind": "netting_chunk_compensation", "session": sessionID, "compensates": chunk.ID,
	}}
}

// replayPosting is one journaled movement posted on its own.
func replayPosting(r JournalRecord) ledger.Posting {
	return ledger.Posting{ID: replayID(r.SessionID, r.Seq), Legs: r.Legs, Meta: map[string]string{
		"kind": "netting_replay", "session": r.SessionID, "key": r.Key, "seq": strconv.FormatInt(r.Seq, 10),
	}}
}

// proposal is one Record waiting for the group commit that decides it.
type proposal struct {
	key    string
	legs   []ledger.Leg
	deltas []ledger.AccountDelta
	done   chan struct{}
	out    Outcome
	err    error
	// lead is closed when the committer hands its role to this proposal's
	// caller (handed set under the session lock). abandoned marks a caller
	// that stopped waiting (its context ended): it is never handed the role.
	lead      chan struct{}
	handed    bool
	abandoned bool
}

// sessionState is the session core's memory. The driver holds its lock
// around every method.
type sessionState struct {
	id string
	// nextSeq and head are the journal as committed: the seq and prevHash
	// the next accepted movement gets.
	nextSeq int64
	head    string
	// outcomes answers repeated keys; inflight are keys proposed and not
	// yet decided; queue is what the next group commit takes.
	outcomes map[string]Outcome
	inflight map[string]*proposal
	queue    []*proposal
	flushing bool
	// closedForRecords is set when a settle starts, or when the store says
	// the session is sealed; Record then answers SESSION.SETTLED.
	closedForRecords bool
	settled          bool
	// replaying remembers a live fallback to replay (ours #7) even before
	// the store confirms it, so this object never nets again.
	replaying bool
	report    *SettleReport
	idle      []chan struct{}
	// own is the credits this session's committed rows hold per wallet
	// account: the pending credits the spending rule lets its own debits
	// spend (they settle with them), and nobody else's.
	own map[string]int64
}

func newSessionState(id string) *sessionState {
	return &sessionState{id: id, head: GenesisHash, outcomes: map[string]Outcome{}, inflight: map[string]*proposal{}, own: map[string]int64{}}
}

// restore replays a verified journal into the state (recovery).
func (st *sessionState) restore(recs []JournalRecord, head string) {
	for _, r := range recs {
		st.outcomes[r.Key] = Outcome{Status: Accepted, Seq: r.Seq}
		st.addOwn(reservationDeltas(r.Legs))
	}
	st.nextSeq = int64(len(recs))
	st.head = head
}

// apply applies a finished group commit's decisions to the state: its
// answers, its accepted rows (the journal head moves to the last), and
// whether the session stops accepting. batch[i] is the step's item i.
func (st *sessionState) apply(c *commitStep, batch []*proposal) {
	if c.closeRecords {
		st.closedForRecords = true
	}
	for _, a := range c.answers {
		st.decide(batch[a.item], a.out, a.err)
	}
	ps := make([]*proposal, len(c.accepted))
	for i, it := range c.accepted {
		ps[i] = batch[it]
	}
	st.commit(ps, c.rows)
}

// finish records the session's settle report and closes it.
func (st *sessionState) finish(rep SettleReport) {
	st.settled = true
	st.closedForRecords = true
	r := rep
	st.report = &r
}

// commit records that recs (rows of ps, in order) are durably journaled.
func (st *sessionState) commit(ps []*proposal, recs []JournalRecord) {
	for i, p := range ps {
		st.decide(p, Outcome{Status: Accepted, Seq: recs[i].Seq}, nil)
		st.addOwn(p.deltas)
	}
	if n := len(recs); n > 0 {
		st.nextSeq = recs[n-1].Seq + 1
		st.head = recs[n-1].Hash
	}
}

// addOwn adds a committed movement's credits to own.
func (st *sessionState) addOwn(deltas []ledger.AccountDelta) {
	for _, d := range deltas {
		if d.Delta > 0 {
			st.own[d.Account] += d.Delta
		}
	}
}

// ownFor is own on the accounts items debit (the only ones the rule reads
// it for): the snapshot a group commit passes to the store.
func (st *sessionState) ownFor(items []commitItem) map[string]int64 {
	out := map[string]int64{}
	for _, it := range items {
		for _, d := range it.deltas {
			if v := st.own[d.Account]; d.Delta < 0 && v > 0 {
				out[d.Account] = v
			}
		}
	}
	return out
}

// decide answers a proposal. Errors are not remembered: the caller may retry
// the key. Outcomes are.
func (st *sessionState) decide(p *proposal, out Outcome, err error) {
	p.out, p.err = out, err
	if err == nil {
		st.outcomes[p.key] = out
	}
	delete(st.inflight, p.key)
	close(p.done)
}

// maxGroupCommit bounds one group commit: it keeps a commit's statements
// within the engines' parameter limits and its latency bounded; the rest
// stay queued for the next commit.
const maxGroupCommit = 1024

// takeBatch hands the queued proposals (at most maxGroupCommit, oldest
// first) to the group commit.
func (st *sessionState) takeBatch() []*proposal {
	n := min(len(st.queue), maxGroupCommit)
	b := st.queue[:n:n]
	st.queue = st.queue[n:]
	if len(st.queue) == 0 {
		st.queue = nil
	}
	return b
}

func (st *sessionState) accepted() int64 { return st.nextSeq }
