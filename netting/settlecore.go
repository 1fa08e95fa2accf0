package netting

import (
	"fmt"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// This file is the settle's pure core, in the style of etcd-io/raft's
// Ready/Advance: a settleStep, asked what to do next (next, given the
// node's clock reading), names one call (a settleAction: flush, read,
// claim, post, release…); the driver (Session.Settle) makes it and reports
// the result back (advance). Every decision of a settle — whether there is
// anything to settle, netted or replayed, what each refusal means, when to
// renew the claim, what to release — is made here; the driver only does
// the I/O. The step does no I/O, reads no clock, takes no lock and starts
// no goroutine, so every branch is a table test with no store
// (settlecore_test.go). The steps it walks are the package doc's "Settle".

// settleActionKind names the call a settle step wants made.
type settleActionKind int

const (
	// settleDone: nothing more to call; the step holds the result.
	settleDone settleActionKind = iota
	// settleFlush: wait for the Records in flight (Session.Flush; result:
	// journaled).
	settleFlush
	// settleReadJournal: Store.ReadJournal of the session (result: recs).
	settleReadJournal
	// settleReadSession: Store.Session (result: meta).
	settleReadSession
	// settleClaim: Store.ClaimSettle (result: fence); also a renewal.
	settleClaim
	// settleHasPostings: Store.HasPosting of each of ids, in order
	// (result: posted, one per id).
	settleHasPostings
	// settlePost: SharedStore.PostFencedReleasing(fence, posting, release).
	settlePost
	// settleMarkReplaying: Store.MarkReplaying(fence).
	settleMarkReplaying
	// settleRelease: ReservationStore.ReleaseSession(fence, release).
	settleRelease
	// settleFinish: Store.FinishSettle(fence, mode).
	settleFinish
	// settleHandBack: Store.ClaimSettle with a lease of 0, so the claim
	// just taken lapses at once (result: err only, for the driver's log).
	settleHandBack
)

// settleAction is what the driver must do next.
type settleAction struct {
	kind    settleActionKind
	fence   Fence
	ids     []string
	posting ledger.Posting
	release []ReservedChange
	// deltas (settleRelease) are what ReleaseSession takes off.
	deltas []ledger.AccountDelta
	mode   string
}

// settleResult is the result of a settleAction: err, and the field the
// action's kind names.
type settleResult struct {
	recs   []JournalRecord
	meta   SessionMeta
	fence  Fence
	posted []bool
	// journaled (settleFlush) is how many rows the session object knows
	// are in the journal once its Records are decided: its own commits,
	// or the rows it was recovered from.
	journaled int64
	err       error
}

type settlePhase int

const (
	phStart settlePhase = iota
	phFlush
	phProbe       // read: is there anything to settle?
	phProbeMeta   // empty journal: is the session sealed?
	phClaim       // take the claim (seals the journal)
	phRead        // the final read, under the claim
	phMeta        // settled already? replaying?
	phSettledScan // rebuild the report of a settle someone else finished
	phChunks      // post chunk i
	phMark        // durably mark replaying
	phCompScan    // which chunks are posted?
	phComp        // compensate comps[i]
	phReplay      // post movement recs[i] alone
	phRelease     // release what no posting moved
	phFinish      // mark settled
	phHandBack    // the read under the claim failed: let the claim lapse
	phDone
)

// breach is an accepted movement the ledger refused during replay.
type breach struct {
	seq int64
	rej Rejection
	err error
}

// chunkRefusal is the ledger refusal that turned a settle to replay.
type chunkRefusal struct {
	chunk int
	err   error
}

// settleStep is one Settle call in progress.
type settleStep struct {
	id    string
	lease time.Duration
	phase settlePhase
	// known is how many rows the session object knows are journaled
	// (settleFlush): the journal read under the claim must hold them.
	known int64
	// i indexes the loop of the current phase (chunks, comps, recs).
	i int

	recs []JournalRecord
	// sides[k] is what the movements hold reserved on the account of
	// position k (chunk i carries positions i·width…): what a chunk's
	// posting releases; zeroNet the sides of the accounts that net to
	// zero, which no chunk carries (netPositionsSides).
	sides   []Reserved
	zeroNet []ReservedChange
	head    string
	meta    SessionMeta
	chunks  []ledger.Posting
	comps   []int // chunk indices to compensate, newest first

	fence     Fence
	claimedAt time.Time // node clock when fence was asked for
	askedAt   time.Time // node clock when the pending claim was asked for
	renewing  bool      // the pending claim is a renewal
	renewed   bool      // renewed for the current write: do not check again

	asked settleActionKind
	// rejectedDeltas are the deltas of the movements replay could not
	// post, each movement's own (never netted across movements: the sides
	// of the counter keep them apart), released at the end.
	rejectedDeltas []ledger.AccountDelta

	// The result, final once next returns settleDone.
	rep SettleReport
	err error
	// replaying: the session has fallen back to replay (as given, or since):
	// the driver remembers it, so this object never nets again (ours #7).
	replaying bool
	// settled: rep is the session's settle (the driver keeps it and closes
	// the session); reopen: nothing to settle and the journal is not
	// sealed, so the session takes Records again.
	settled, reopen bool
	// already: the settle was found done (by another settler); this call
	// wrote nothing.
	already bool
	// refused is the chunk refusal that turned the settle to replay.
	refused *chunkRefusal
	// breaches are the ledger's refusals of accepted movements during
	// replay: impossible under the spending rule, so invariant breaches,
	// for the driver to log and count.
	breaches []breach
	// readErr is the failed read's error while the claim is handed back;
	// handBackErr the hand-back's own error (the claim then lapses with
	// its lease), for the driver to log.
	readErr, handBackErr error
}

// newSettleStep starts a settle of session id with claims of lease. prior
// is the session's earlier settle report, if it has one; replaying whether
// the session object already fell back to replay.
func newSettleStep(id string, lease time.Duration, prior *SettleReport, replaying bool) *settleStep {
	c := &settleStep{id: id, lease: lease, replaying: replaying}
	if prior != nil {
		c.rep = *prior
		c.rep.AlreadySettled = true
		c.phase = phDone
		return c
	}
	c.phase = phFlush
	return c
}

// next returns the call to make now (settleDone: none); now is the node's
// clock, which decides claim renewals only.
func (c *settleStep) next(now time.Time) settleAction {
	a := c.action(now)
	c.asked = a.kind
	return a
}

func (c *settleStep) action(now time.Time) settleAction {
	switch c.phase {
	case phFlush:
		return settleAction{kind: settleFlush}
	case phProbe, phRead:
		return settleAction{kind: settleReadJournal}
	case phProbeMeta, phMeta:
		return settleAction{kind: settleReadSession}
	case phClaim:
		c.askedAt = now
		return settleAction{kind: settleClaim}
	case phSettledScan:
		return settleAction{kind: settleHasPostings, ids: settledScanIDs(c.meta, c.chunks, c.recs)}
	case phCompScan:
		ids := make([]string, len(c.chunks))
		for i, ch := range c.chunks {
			ids[i] = ch.ID
		}
		return settleAction{kind: settleHasPostings, ids: ids}
	case phChunks, phMark, phComp, phReplay, phRelease:
		// Every write but the last is preceded by a renewal once half the
		// lease has passed, so that a healthy settler is not taken over;
		// one that stalls longer is, and its next write is fenced.
		if !c.renewed && now.Sub(c.claimedAt) >= c.lease/2 {
			c.renewing = true
			c.askedAt = now
			return settleAction{kind: settleClaim}
		}
		c.renewed = false
		return c.write()
	case phFinish:
		return settleAction{kind: settleFinish, fence: c.fence, mode: c.rep.Mode}
	case phHandBack:
		return settleAction{kind: settleHandBack, fence: c.fence}
	}
	return settleAction{kind: settleDone}
}

// chunkRelease is what chunk i's posting moves out of the counters: the
// sides of the positions it carries.
func (c *settleStep) chunkRelease(i int) []ReservedChange {
	w := c.meta.ChunkWidth
	var out []ReservedChange
	for k := i * w; k < min((i+1)*w, len(c.sides)); k++ {
		if !c.sides[k].Zero() {
			out = append(out, ReservedChange{Account: c.chunks[i].Legs[k-i*w].Account, Reserved: c.sides[k]})
		}
	}
	return out
}

// write is the write of the current phase (after any renewal).
func (c *settleStep) write() settleAction {
	// Each posting's own reservations leave pending as it lands: a chunk's
	// accounts' sides, or a replayed movement's deltas; a compensation puts
	// its chunk's back.
	post := func(p ledger.Posting, release []ReservedChange) settleAction {
		return settleAction{kind: settlePost, fence: c.fence, posting: p, release: release}
	}
	switch c.phase {
	case phChunks:
		return post(c.chunks[c.i], c.chunkRelease(c.i))
	case phMark:
		return settleAction{kind: settleMarkReplaying, fence: c.fence}
	case phComp:
		i := c.comps[c.i]
		return post(compensation(c.id, i, c.chunks[i]), negated(c.chunkRelease(i)))
	case phReplay:
		return post(replayPosting(c.recs[c.i]), changesOf(reservationDeltas(c.recs[c.i].Legs)))
	default: // phRelease
		// What is still reserved: each posting moved its own deltas as it
		// landed, so only the movements replay refused are left — and, of a
		// netted settle, the accounts that net to zero, which no chunk
		// carries but whose two sides are reserved all the same.
		left := c.rejectedDeltas
		if c.rep.Mode == ModeNetted {
			for _, z := range c.zeroNet {
				left = append(left, ledger.AccountDelta{Account: z.Account, Delta: z.Credits}, ledger.AccountDelta{Account: z.Account, Delta: z.Debits})
			}
		}
		return settleAction{kind: settleRelease, fence: c.fence, deltas: left}
	}
}

// advance reports the result of the action next returned.
func (c *settleStep) advance(r settleResult) {
	if c.asked == settleClaim && c.renewing {
		c.renewing = false
		if r.err != nil {
			c.fail(c.writeErr(r.err))
			return
		}
		if r.fence.Token != c.fence.Token+1 {
			// Someone claimed in between (and may have finished, perhaps by
			// replay): our view of the session is stale. Stop as if fenced.
			c.fail(c.writeErr(&FencedError{SessionID: c.id, Token: c.fence.Token, Current: r.fence.Token}))
			return
		}
		c.fence, c.claimedAt, c.renewed = r.fence, c.askedAt, true
		return
	}
	switch c.phase {
	case phFlush:
		if r.err != nil {
			c.fail(r.err)
			return
		}
		// The journal is read once, under the claim, which seals it: a
		// read before the claim could miss rows another object of the
		// session appends before the seal. Only a session object that
		// knows no rows first asks whether there is anything to settle
		// (an empty journal is not claimed, so it stays open); when that
		// probe finds rows (another object's, or an unresolved commit's),
		// they are read again under the claim.
		c.phase, c.known = phProbe, r.journaled
		if r.journaled > 0 {
			c.phase = phClaim
		}
	case phProbe, phRead:
		if r.err != nil {
			c.failRead(fmt.Errorf("netting: read journal %s: %w", c.id, r.err))
			return
		}
		head, err := VerifyChain(c.id, r.recs)
		if err != nil {
			c.failRead(err)
			return
		}
		if c.phase == phRead && int64(len(r.recs)) < c.known {
			// The store lost rows this object committed (a chain check
			// cannot see a cut-off end): settling the rest would leave
			// accepted movements never posted.
			c.failRead(&ChainBrokenError{SessionID: c.id, Seq: int64(len(r.recs)),
				Reason: fmt.Sprintf("journal ends at %d rows, below the %d this session committed", len(r.recs), c.known)})
			return
		}
		c.recs, c.head = r.recs, head
		switch {
		case len(r.recs) == 0:
			// Nothing to settle (under a claim: the rows this object
			// committed are not in the store; the sealed session stays
			// closed).
			c.phase = phProbeMeta
		case c.phase == phRead:
			c.phase = phMeta
		default:
			c.phase = phClaim
		}
	case phProbeMeta:
		if r.err != nil {
			c.fail(r.err)
			return
		}
		// Nothing to settle: an unsealed session stays open for Records.
		c.reopen = !r.meta.Sealed
		c.rep = SettleReport{SessionID: c.id, Mode: ModeNetted, JournalHead: GenesisHash}
		c.phase = phDone
	case phClaim:
		if r.err != nil {
			c.fail(r.err)
			return
		}
		c.fence, c.claimedAt = r.fence, c.askedAt
		c.phase = phRead
	case phMeta:
		if r.err != nil {
			c.fail(r.err)
			return
		}
		c.meta = r.meta
		var pos []ledger.Leg
		pos, c.sides, c.zeroNet = netPositionsSides(c.recs)
		c.chunks = chunkPostings(c.id, pos, r.meta.ChunkWidth, len(c.recs), c.head)
		if r.meta.Settled {
			if r.meta.SettleMode == ModeNetted {
				c.alreadyDone(settledReport(r.meta, c.recs, c.head, c.chunks, nil))
				return
			}
			c.phase = phSettledScan
			return
		}
		c.replaying = c.replaying || r.meta.Replaying
		c.rep = SettleReport{SessionID: c.id, Netted: len(c.recs), JournalHead: c.head}
		switch {
		case c.replaying:
			c.phase = phMark
		case len(c.chunks) == 0:
			// Every account nets to zero (a trade and its return): nothing
			// to post; the settle is netted, with no postings.
			c.rep.Mode = ModeNetted
			c.phase = phRelease
		default:
			c.phase = phChunks
		}
	case phSettledScan:
		if r.err != nil {
			c.fail(r.err)
			return
		}
		c.alreadyDone(settledReport(c.meta, c.recs, c.head, c.chunks, r.posted))
	case phChunks:
		switch {
		case r.err == nil:
			c.i++
			if c.i == len(c.chunks) {
				c.rep.Mode, c.rep.Postings = ModeNetted, len(c.chunks)
				c.phase = phRelease
			}
		case isLedgerRefusal(r.err):
			// Remember first, durably: from here on no settle nets this
			// session.
			c.refused = &chunkRefusal{chunk: c.i, err: r.err}
			c.replaying = true
			c.phase = phMark
		default:
			c.fail(c.writeErr(r.err))
		}
	case phMark:
		if r.err != nil {
			c.fail(c.writeErr(r.err))
			return
		}
		c.rep.Mode = ModeReplayed
		c.phase = phCompScan
	case phCompScan:
		if r.err != nil {
			c.fail(fmt.Errorf("netting: settle %s: %w", c.id, r.err))
			return
		}
		// Reverse, newest first, every chunk of the session that is in
		// the ledger.
		c.comps = nil
		for i := len(c.chunks) - 1; i >= 0; i-- {
			if i < len(r.posted) && r.posted[i] {
				c.comps = append(c.comps, i)
			}
		}
		c.i = 0
		c.toComp()
	case phComp:
		if r.err != nil {
			c.fail(c.writeErr(r.err))
			return
		}
		c.i++
		c.toComp()
	case phReplay:
		switch {
		case r.err == nil:
			c.rep.Postings++
		case isLedgerRefusal(r.err):
			// The ledger refused an accepted movement: under the spending
			// rule this cannot happen (doc.go), so it is an invariant
			// breach — a posting outside the sessions (an operator's Post)
			// spent reserved money, or a store broke the rule. It is
			// reported in Rejected, logged at error level and counted by
			// the driver (breaches), and its release returned at the end.
			rec := c.recs[c.i]
			rej := Rejection{Key: rec.Key, Code: Code(r.err)}
			c.rep.Rejected = append(c.rep.Rejected, rej)
			c.breaches = append(c.breaches, breach{seq: rec.Seq, rej: rej, err: r.err})
			c.rejectedDeltas = append(c.rejectedDeltas, reservationDeltas(rec.Legs)...)
		default:
			c.fail(c.writeErr(r.err))
			return
		}
		c.i++
		c.toReplay()
	case phRelease:
		if r.err != nil {
			c.fail(c.writeErr(r.err))
			return
		}
		c.phase = phFinish
	case phFinish:
		if r.err != nil {
			c.fail(fmt.Errorf("netting: settle %s: finish: %w", c.id, r.err))
			return
		}
		c.settled = true
		c.phase = phDone
	case phHandBack:
		c.handBackErr = r.err
		c.fail(c.readErr)
	}
}

// failRead ends the step on a journal that could not be read or whose
// chain is broken. After the claim (phRead) the claim is handed back
// first: a failure that a read before claiming used to find then keeps no
// other settler out for a lease, as it did not before.
func (c *settleStep) failRead(err error) {
	if c.phase != phRead {
		c.fail(err)
		return
	}
	c.readErr = err
	c.phase = phHandBack
}

// toComp moves past the compensations when they are all posted.
func (c *settleStep) toComp() {
	c.phase = phComp
	if c.i == len(c.comps) {
		c.rep.Postings = len(c.comps)
		c.i = 0
		c.toReplay()
	}
}

// toReplay moves past the replay when every movement has been posted.
func (c *settleStep) toReplay() {
	c.phase = phReplay
	if c.i == len(c.recs) {
		c.phase = phRelease
	}
}

// writeErr wraps an error of the current write phase's write (or of the
// renewal before it) with what was being written.
func (c *settleStep) writeErr(err error) error {
	switch c.phase {
	case phChunks:
		return fmt.Errorf("netting: settle %s chunk %d: %w", c.id, c.i, err)
	case phMark:
		return fmt.Errorf("netting: settle %s: mark replaying: %w", c.id, err)
	case phComp:
		return fmt.Errorf("netting: settle %s: compensate chunk %d: %w", c.id, c.comps[c.i], err)
	case phReplay:
		return fmt.Errorf("netting: settle %s replay seq %d: %w", c.id, c.recs[c.i].Seq, err)
	default: // phRelease
		return fmt.Errorf("netting: settle %s: release reservations: %w", c.id, err)
	}
}

func (c *settleStep) fail(err error) {
	c.err = err
	c.rep = SettleReport{}
	c.phase = phDone
}

// alreadyDone ends the step with the report of a settle another settler
// finished.
func (c *settleStep) alreadyDone(rep SettleReport) {
	c.rep = rep
	c.settled, c.already = true, true
	c.phase = phDone
}

// report returns the step's result once next has returned settleDone: the
// report to return (AlreadySettled set when this call wrote nothing because
// the settle was done) and the error.
func (c *settleStep) report() (SettleReport, error) {
	if c.err != nil {
		return SettleReport{}, c.err
	}
	rep := c.rep
	rep.AlreadySettled = rep.AlreadySettled || c.already
	return rep, nil
}

// settledScanIDs are the postings whose presence tells how a replayed
// settle ended: each chunk's compensation, each movement's replay.
func settledScanIDs(meta SessionMeta, chunks []ledger.Posting, recs []JournalRecord) []string {
	ids := make([]string, 0, len(chunks)+len(recs))
	for i := range chunks {
		ids = append(ids, compensationID(meta.ID, i))
	}
	for _, r := range recs {
		ids = append(ids, replayID(meta.ID, r.Seq))
	}
	return ids
}

// settledReport rebuilds the report of a settled session: posted answers
// settledScanIDs (unused for a netted settle). The codes of a replay's
// rejections are not stored, so they are left empty.
func settledReport(meta SessionMeta, recs []JournalRecord, head string, chunks []ledger.Posting, posted []bool) SettleReport {
	rep := SettleReport{SessionID: meta.ID, Mode: meta.SettleMode, Netted: len(recs), JournalHead: head}
	if meta.SettleMode == ModeNetted {
		rep.Postings = len(chunks)
		return rep
	}
	at := func(i int) bool { return i < len(posted) && posted[i] }
	for i := range chunks {
		if at(i) {
			rep.Postings++
		}
	}
	for j, r := range recs {
		if at(len(chunks) + j) {
			rep.Postings++
		} else {
			rep.Rejected = append(rep.Rejected, Rejection{Key: r.Key})
		}
	}
	return rep
}
