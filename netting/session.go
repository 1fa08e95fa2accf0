package netting

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// Session is the single writer of one scope for one epoch. Record is safe
// for concurrent use: concurrent Records are batched into one reservation
// call and one journal append (group commit), and each returns only after
// the append that holds it has committed. Settle may run concurrently with
// Record (Records arriving after it starts answer SESSION.SETTLED).
type Session struct {
	store  SharedStore
	meta   SessionMeta
	owner  string // this object's identity in settle claims
	lease  time.Duration
	log    *slog.Logger
	opened time.Time // on the node's clock; for rotation only
	// now is the node's clock, used only for durations (epoch age, how long
	// a settle claim has been held).
	now func() time.Time
	// commitTimeout bounds one group commit's store calls. A commit runs on
	// behalf of every waiter, so it does not use any one caller's context.
	commitTimeout time.Duration

	mu sync.Mutex
	st *sessionState

	settleMu sync.Mutex // one settle at a time on this object

	// onBreach counts a settle's invariant breach (the node's Breaches).
	onBreach func()
	// plant holds the planted bugs of the model's bite test (zero in
	// production; export_test.go sets them).
	plant plantedBugs
}

// plantedBugs put back, for a test only, the bugs issue 27 removed, so the
// model of the economy (model_test.go) can show it catches them.
type plantedBugs struct {
	// oldRule: a debit may spend every session's pending credits.
	oldRule bool
	// fundsFirst: a refused resent key answers REJECTED without a lookup.
	fundsFirst bool
	// forgetRefusals: a group commit does not write its refused keys, so
	// a refusal is remembered by its session only (before port v4).
	forgetRefusals bool
}

// plantedOldRuleOwn is the old spending rule on the new port: every
// pending credit of an account counts as the session's own.
func (s *Session) plantedOldRuleOwn(ctx context.Context, own map[string]int64) map[string]int64 {
	all, err := s.store.ReservedAll(ctx)
	if err != nil {
		return own
	}
	out := map[string]int64{}
	for a, r := range all {
		out[a] = r.Credits
	}
	return out
}

// ID returns the session id (sess:<scope>:<nonce>-<n>).
func (s *Session) ID() string { return s.meta.ID }

// Scope returns the scope the session writes.
func (s *Session) Scope() string { return s.meta.Scope }

// ChunkWidth returns the chunk width stored with the session.
func (s *Session) ChunkWidth() int { return s.meta.ChunkWidth }

// Accepted returns the number of movements journaled so far.
func (s *Session) Accepted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.accepted()
}

// Waiting returns the number of Records queued or being committed: the
// size of the next group commit (an observability hook).
func (s *Session) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.inflight)
}

// WasSettled reports whether this session is known settled (by this object's
// settle, or, for a recovered session, by the store).
func (s *Session) WasSettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.settled
}

// Record validates, reserves and durably journals m, or refuses it.
//
//   - On a settled or settling session: ErrSessionSettled (SESSION.SETTLED).
//   - A key seen before by this session (or journaled by any session)
//     returns the earlier outcome; a key still being decided waits for it.
//   - Malformed or unbalanced legs, a leg on the clearing account
//     (ledger.NettingClearing), or an empty key: an error (OP.MALFORMED /
//     LEDGER.UNBALANCED), nothing recorded.
//   - Otherwise Accepted with its seq once the journal row has committed,
//     or Rejected with INSUFFICIENT_FUNDS by the shared reservation check.
//
// A store failure returns an error and leaves no reservation behind (when
// the store can still say what happened; see doc.go). If ctx ends first,
// Record returns ctx.Err() while the commit it joined completes.
func (s *Session) Record(ctx context.Context, m Movement) (Outcome, error) {
	if m.Key == "" {
		return Outcome{}, &ledger.MalformedError{Index: -1, Reason: "empty idempotency key"}
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	// The movement's own work — validation, the copy, its reservation
	// deltas — is done before the session's lock: under a burst of callers
	// (every caller a group commit answers records again at once) the lock
	// is the queue they all pass through. It is wasted only for a key that
	// already has an outcome or is in flight, which then answers as before,
	// whatever its legs.
	verr := ledger.ValidateLegs(m.Legs)
	if verr == nil {
		verr = clearingLeg(m.Legs)
	}
	var fresh *proposal
	if verr == nil {
		legs := append([]ledger.Leg(nil), m.Legs...)
		fresh = &proposal{key: m.Key, legs: legs, deltas: reservationDeltas(legs), done: make(chan struct{}), lead: make(chan struct{})}
	}
	s.mu.Lock()
	if s.st.closedForRecords || s.st.settled {
		s.mu.Unlock()
		return Outcome{}, ErrSessionSettled.Wrap("%s", s.meta.ID)
	}
	if out, ok := s.st.outcomes[m.Key]; ok {
		s.mu.Unlock()
		return out, nil
	}
	p, waiting := s.st.inflight[m.Key]
	if !waiting {
		if verr != nil {
			s.mu.Unlock()
			return Outcome{}, verr
		}
		p = fresh
		s.st.inflight[m.Key] = p
		s.st.queue = append(s.st.queue, p)
	}
	leader := !s.st.flushing
	if leader {
		s.st.flushing = true
	}
	s.mu.Unlock()
	if leader {
		// The caller that found no commit running commits batches until its
		// own proposal is decided, then hands the role to a waiter (so no
		// caller serves others indefinitely).
		s.runCommits(ctx, p)
	}
	// Only the caller that created the proposal can be handed the committer
	// role; callers repeating an in-flight key just wait for its outcome.
	var lead chan struct{}
	if !waiting {
		lead = p.lead
	}
	for {
		select {
		case <-p.done:
			return p.out, p.err
		case <-lead:
			lead = nil // a closed channel stays ready: take the role once
			s.runCommits(ctx, p)
		case <-ctx.Done():
			if lead == nil {
				return Outcome{}, ctx.Err()
			}
			s.mu.Lock()
			handed := p.handed
			p.abandoned = !handed
			s.mu.Unlock()
			if handed {
				// The committer role reached us as we gave up: serve it,
				// or the queue would stall.
				s.runCommits(ctx, p)
			}
			return Outcome{}, ctx.Err()
		}
	}
}

// clearingLeg refuses a movement that names the clearing account: only a
// settle's chunks post to it (their balancing leg), which is what brings it
// back to zero after every settle, and what lets an audit tell a session's
// chunks from its journal. A movement on it would leave it off zero for
// ever and make an audit report the movement missing although it landed.
func clearingLeg(legs []ledger.Leg) error {
	for i, l := range legs {
		if l.Account == ledger.NettingClearing {
			return &ledger.MalformedError{Index: i, Reason: ledger.NettingClearing + " is reserved for settles"}
		}
	}
	return nil
}

// Flush returns once every Record started before it has been decided.
func (s *Session) Flush(ctx context.Context) error {
	s.mu.Lock()
	if !s.st.flushing && len(s.st.queue) == 0 {
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.st.idle = append(s.st.idle, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Session) runCommits(ctx context.Context, own *proposal) {
	for {
		// Let the callers just answered by the previous commit (or woken
		// with this role) run first: most of them Record again at once, and
		// queueing them now puts them in this batch instead of the next —
		// without it, a closed loop of C callers settles into alternating
		// batches of about C/2 (the new committer is scheduled before the
		// callers its predecessor woke).
		runtime.Gosched()
		s.mu.Lock()
		batch := s.st.takeBatch()
		if len(batch) == 0 {
			s.st.flushing = false
			for _, ch := range s.st.idle {
				close(ch)
			}
			s.st.idle = nil
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.commitTimeout)
		s.commit(cctx, batch)
		cancel()
		if s.handOff(own) {
			return
		}
	}
}

// handOff passes the committer role to a waiting proposal once own is
// decided. It reports whether it did; if every queued caller has gone, the
// current committer keeps the role.
func (s *Session) handOff(own *proposal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-own.done:
	default:
		return false
	}
	for _, q := range s.st.queue {
		if !q.abandoned && !q.handed {
			q.handed = true
			close(q.lead)
			return true
		}
	}
	return false
}

// commit is one group commit: the pure commitStep decides, this drives it
// against the store (one ReserveAndAppend, and the lookups or the read-back
// it asks for) and applies its answers.
func (s *Session) commit(ctx context.Context, batch []*proposal) {
	items := make([]commitItem, len(batch))
	for i, p := range batch {
		items[i] = commitItem{key: p.key, legs: p.legs, deltas: p.deltas}
	}
	s.mu.Lock()
	step := newCommitStep(s.meta.ID, s.st.nextSeq, s.st.head, items, s.st.ownFor(items))
	s.mu.Unlock()
	step.plantFundsFirst = s.plant.fundsFirst
	step.plantForgetRefusals = s.plant.forgetRefusals
	for {
		a := step.next()
		switch a.kind {
		case commitWrite:
			own := a.own
			if s.plant.oldRule {
				own = s.plantedOldRuleOwn(ctx, a.own)
			}
			step.wrote(s.store.ReserveAndRecord(ctx, own, a.reqs, step.build))
		case commitLookup:
			res := make([]keyLookup, len(a.keys))
			for i, k := range a.keys {
				res[i].ans, res[i].err = s.store.LookupAnswer(ctx, k)
			}
			step.looked(res)
		case commitReadBack:
			step.readBack(s.store.ReadJournal(ctx, s.meta.ID))
		default:
			s.mu.Lock()
			s.st.apply(step, batch)
			s.mu.Unlock()
			return
		}
	}
}

// Settle nets the journal into the ledger (see the package doc for the
// steps). It is idempotent: settling a settled session posts nothing and
// reports the settle with AlreadySettled. An empty journal reports
// ModeNetted with no postings and leaves the session open. If another
// settler holds the session's claim, Settle returns ErrSettleClaimed and
// writes nothing; if a newer claim supersedes this one midway, ErrFenced.
//
// The pure settleStep (settlecore.go) makes every decision; Settle only
// makes the calls it names and reports their results back.
func (s *Session) Settle(ctx context.Context) (SettleReport, error) {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	s.mu.Lock()
	step := newSettleStep(s.meta.ID, s.lease, s.st.report, s.st.replaying)
	s.st.closedForRecords = true
	s.mu.Unlock()
	for {
		a := step.next(s.now())
		if a.kind == settleDone {
			break
		}
		step.advance(s.do(ctx, a))
	}
	if r := step.refused; r != nil {
		// Under the spending rule no chunk is refused either: the replay
		// that follows posts every movement, or stops at a breach.
		s.log.Error("netting: invariant breach: the ledger refused a netted chunk; replaying", "session", s.meta.ID, "chunk", r.chunk, "code", Code(r.err), "err", r.err)
		if s.onBreach != nil {
			s.onBreach()
		}
	}
	for _, b := range step.breaches {
		s.log.Error("netting: invariant breach: the ledger refused an accepted movement at settle; it is not in the ledger", "session", s.meta.ID, "seq", b.seq, "key", b.rej.Key, "code", b.rej.Code, "err", b.err)
		if s.onBreach != nil {
			s.onBreach()
		}
	}
	if err := step.handBackErr; err != nil {
		s.log.Warn("netting: settle claim not handed back; it lapses with its lease", "session", s.meta.ID, "lease", s.lease, "err", err)
	}
	rep, err := step.report()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.replaying = s.st.replaying || step.replaying
	switch {
	case step.settled:
		s.st.finish(step.rep)
	case step.reopen:
		s.st.closedForRecords = false
	}
	return rep, err
}

// do makes one call of a settle step.
func (s *Session) do(ctx context.Context, a settleAction) settleResult {
	var r settleResult
	switch a.kind {
	case settleFlush:
		r.err = s.Flush(ctx)
		s.mu.Lock()
		r.journaled = s.st.accepted()
		s.mu.Unlock()
	case settleReadJournal:
		r.recs, r.err = s.store.ReadJournal(ctx, s.meta.ID)
	case settleReadSession:
		r.meta, r.err = s.store.Session(ctx, s.meta.ID)
	case settleClaim:
		r.fence, r.err = s.store.ClaimSettle(ctx, s.meta.ID, s.owner, s.lease)
	case settleHasPostings:
		r.posted, r.err = s.hasPostings(ctx, a.ids)
	case settlePost:
		r.err = s.store.PostFencedReleasing(ctx, a.fence, a.posting, a.release)
	case settleMarkReplaying:
		r.err = s.store.MarkReplaying(ctx, a.fence)
	case settleRelease:
		_, r.err = s.store.ReleaseSession(ctx, a.fence, a.deltas)
	case settleFinish:
		r.err = s.store.FinishSettle(ctx, a.fence, a.mode)
	case settleHandBack:
		// Cleanup after a failed read, which may be ctx's own end: bounded
		// like a commit, not by ctx.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.commitTimeout)
		_, r.err = s.store.ClaimSettle(hctx, s.meta.ID, s.owner, 0)
		cancel()
	}
	return r
}

func (s *Session) hasPostings(ctx context.Context, ids []string) ([]bool, error) {
	posted := make([]bool, len(ids))
	for i, id := range ids {
		ok, err := s.store.HasPosting(ctx, id)
		if err != nil {
			return nil, err
		}
		posted[i] = ok
	}
	return posted, nil
}

// reportSettled rebuilds the report of a settle another settler finished
// (settledReport, from the postings it finds).
func (s *Session) reportSettled(ctx context.Context, meta SessionMeta, recs []JournalRecord, head string) (SettleReport, error) {
	chunks := chunkPostings(meta.ID, netPositions(recs), meta.ChunkWidth, len(recs), head)
	var posted []bool
	if meta.SettleMode != ModeNetted {
		var err error
		if posted, err = s.hasPostings(ctx, settledScanIDs(meta, chunks, recs)); err != nil {
			return SettleReport{}, err
		}
	}
	return settledReport(meta, recs, head, chunks, posted), nil
}
