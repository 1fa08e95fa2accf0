package netting

import (
	"context"
	"errors"
	"fmt"
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
//   - Malformed or unbalanced legs, or an empty key: an error
//     (OP.MALFORMED / LEDGER.UNBALANCED), nothing recorded.
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

// commit is one group commit: one SharedStore.ReserveAndAppend (one store
// transaction) for the batch. Every error of ReserveAndAppend means nothing
// was applied, so no failure path unreserves anything; only an error that
// leaves the outcome unknown (a lost commit reply) needs the journal read
// back.
func (s *Session) commit(ctx context.Context, batch []*proposal) {
	for len(batch) > 0 {
		reqs := make([][]ledger.AccountDelta, len(batch))
		for i, p := range batch {
			reqs[i] = p.deltas
		}
		// The store calls build inside its transaction (again on a retry);
		// the last call is the one that committed, if any did.
		var ok []*proposal
		var recs []JournalRecord
		built := false
		build := func(granted []bool) []JournalRecord {
			built = true
			ok, recs = nil, nil
			for i, p := range batch {
				if i < len(granted) && granted[i] {
					ok = append(ok, p)
				}
			}
			if len(ok) > 0 {
				s.mu.Lock()
				recs = s.st.chain(ok)
				s.mu.Unlock()
			}
			return recs
		}
		granted, err := s.store.ReserveAndAppend(ctx, reqs, build)
		if err == nil && (len(granted) != len(batch) || !built) {
			err = fmt.Errorf("netting: store granted %d of %d reservation requests", len(granted), len(batch))
		}
		var kc *KeyConflictError
		switch {
		case err == nil:
			s.mu.Lock()
			for i, p := range batch {
				if !granted[i] {
					s.st.decide(p, Outcome{Status: Rejected, Seq: -1, Reason: ReasonInsufficientFunds}, nil)
				}
			}
			s.st.commit(ok, recs)
			s.mu.Unlock()
			return
		case errors.As(err, &kc):
			// Nothing applied: answer the keys journaled elsewhere, retry the rest.
			batch = s.resolveConflicts(ctx, batch, kc.Keys)
		case errors.Is(err, ErrSessionSettled):
			s.mu.Lock()
			s.st.closedForRecords = true
			s.mu.Unlock()
			s.failAll(batch, err)
			return
		case errors.Is(err, ErrSeqConflict):
			// Another writer extended this session's journal: stop, do not
			// guess.
			s.mu.Lock()
			s.st.closedForRecords = true
			s.mu.Unlock()
			s.failAll(batch, fmt.Errorf("netting: reserve and append: %w", err))
			return
		case errors.Is(err, ErrSessionNotFound):
			s.failAll(batch, fmt.Errorf("netting: reserve and append: %w", err))
			return
		default:
			s.resolveUnknown(ctx, batch, ok, recs, err)
			return
		}
	}
}

// resolveConflicts answers the proposals whose keys another row already
// holds with that row's outcome and returns the rest. Nothing was reserved
// for them (the transaction that found the conflict applied nothing).
func (s *Session) resolveConflicts(ctx context.Context, ps []*proposal, keys []string) []*proposal {
	dup, rest := splitConflicts(ps, keys)
	if len(dup) == 0 {
		// The store named keys we did not send: do not loop.
		s.failAll(ps, fmt.Errorf("netting: append: key conflict on unknown keys %v", keys))
		return nil
	}
	s.answerFromJournal(ctx, dup)
	return rest
}

// splitConflicts separates the proposals whose keys are in keys (already
// journaled by another row) from the rest, keeping their order.
func splitConflicts(ps []*proposal, keys []string) (dup, rest []*proposal) {
	conflict := make(map[string]bool, len(keys))
	for _, k := range keys {
		conflict[k] = true
	}
	for _, p := range ps {
		if conflict[p.key] {
			dup = append(dup, p)
		} else {
			rest = append(rest, p)
		}
	}
	return dup, rest
}

// answerFromJournal decides each proposal whose key another row already
// holds with that row's outcome, so a retried key answers as before.
func (s *Session) answerFromJournal(ctx context.Context, dup []*proposal) {
	for _, p := range dup {
		rec, found, err := s.store.LookupKey(ctx, p.key)
		s.mu.Lock()
		switch {
		case err != nil:
			s.st.decide(p, Outcome{}, fmt.Errorf("netting: lookup of conflicting key %q: %w", p.key, err))
		case !found:
			s.st.decide(p, Outcome{}, fmt.Errorf("netting: key %q reported journaled but not found", p.key))
		default:
			s.st.decide(p, Outcome{Status: Accepted, Seq: rec.Seq}, nil)
		}
		s.mu.Unlock()
	}
}

// resolveUnknown handles a commit error that does not say whether the
// transaction committed (a dropped connection around COMMIT): ok and recs
// are what the last build produced. Rows present mean the whole
// transaction committed (reservations included); rows absent mean none of
// it did, so nothing is unreserved. If the journal cannot be read, the
// session stops accepting (a committed reservation may be left: overstated
// pending is safe and ReconcileReservations repairs it).
func (s *Session) resolveUnknown(ctx context.Context, batch, ok []*proposal, recs []JournalRecord, cause error) {
	if len(recs) == 0 {
		// Nothing granted or nothing built: no row to look for, no
		// reservation that could have been added.
		s.failAll(batch, fmt.Errorf("netting: reserve and append: %w", cause))
		return
	}
	journal, err := s.store.ReadJournal(ctx, s.meta.ID)
	if err != nil {
		s.mu.Lock()
		s.st.closedForRecords = true
		s.mu.Unlock()
		s.failAll(batch, fmt.Errorf("netting: append outcome unknown (%v): %w", err, cause))
		return
	}
	first, last := recs[0].Seq, recs[len(recs)-1]
	if int64(len(journal)) > last.Seq && journal[last.Seq].Hash == last.Hash {
		granted := make(map[*proposal]bool, len(ok))
		for _, p := range ok {
			granted[p] = true
		}
		s.mu.Lock()
		for _, p := range batch {
			if !granted[p] {
				s.st.decide(p, Outcome{Status: Rejected, Seq: -1, Reason: ReasonInsufficientFunds}, nil)
			}
		}
		s.st.commit(ok, recs)
		s.mu.Unlock()
		return
	}
	if int64(len(journal)) != first {
		// Someone else wrote this session's journal: stop, do not guess.
		s.mu.Lock()
		s.st.closedForRecords = true
		s.mu.Unlock()
	}
	s.failAll(batch, fmt.Errorf("netting: append: %w", cause))
}

func (s *Session) failAll(ps []*proposal, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		s.st.decide(p, Outcome{}, err)
	}
}

// Settle nets the journal into the ledger (see the package doc for the
// steps). It is idempotent: settling a settled session posts nothing and
// reports the settle with AlreadySettled. An empty journal reports
// ModeNetted with no postings and leaves the session open. If another
// settler holds the session's claim, Settle returns ErrSettleClaimed and
// writes nothing; if a newer claim supersedes this one midway, ErrFenced.
func (s *Session) Settle(ctx context.Context) (SettleReport, error) {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	s.mu.Lock()
	if s.st.report != nil {
		r := *s.st.report
		r.AlreadySettled = true
		s.mu.Unlock()
		return r, nil
	}
	s.st.closedForRecords = true
	s.mu.Unlock()
	if err := s.Flush(ctx); err != nil {
		return SettleReport{}, err
	}
	// This read only asks whether there is anything to settle (verifying the
	// chain on the way); the head that goes into the report is read below,
	// after the claim has sealed the journal.
	recs, _, err := s.readVerified(ctx)
	if err != nil {
		return SettleReport{}, err
	}
	if len(recs) == 0 {
		meta, err := s.store.Session(ctx, s.meta.ID)
		if err != nil {
			return SettleReport{}, err
		}
		if !meta.Sealed {
			// Nothing to settle: the session stays open for Records.
			s.mu.Lock()
			s.st.closedForRecords = false
			s.mu.Unlock()
		}
		return SettleReport{SessionID: s.meta.ID, Mode: ModeNetted, JournalHead: GenesisHash}, nil
	}
	claim, err := s.claim(ctx)
	if err != nil {
		return SettleReport{}, err
	}
	// The claim sealed the journal: this read is final.
	recs, head, err := s.readVerified(ctx)
	if err != nil {
		return SettleReport{}, err
	}
	meta, err := s.store.Session(ctx, s.meta.ID)
	if err != nil {
		return SettleReport{}, err
	}
	if meta.Settled {
		rep, err := s.reportSettled(ctx, meta, recs, head)
		if err != nil {
			return SettleReport{}, err
		}
		s.finish(rep)
		rep.AlreadySettled = true
		return rep, nil
	}
	s.mu.Lock()
	replaying := s.st.replaying || meta.Replaying
	s.mu.Unlock()
	width := meta.ChunkWidth
	chunks := chunkPostings(s.meta.ID, netPositions(recs), width, len(recs), head)
	rep := SettleReport{SessionID: s.meta.ID, Netted: len(recs), JournalHead: head}
	if !replaying {
		failed := -1
		for i, c := range chunks {
			err := claim.post(ctx, c)
			if err == nil {
				continue
			}
			if !isLedgerRefusal(err) {
				return SettleReport{}, fmt.Errorf("netting: settle %s chunk %d: %w", s.meta.ID, i, err)
			}
			s.log.Info("netting: chunk refused, replaying", "session", s.meta.ID, "chunk", i, "err", err)
			failed = i
			break
		}
		if failed < 0 {
			rep.Mode = ModeNetted
			rep.Postings = len(chunks)
		} else {
			replaying = true
		}
	}
	var rejectedLegs []ledger.Leg // the legs of movements replay refused
	if replaying {
		// Remember first, durably: from here on no settle nets this session.
		s.mu.Lock()
		s.st.replaying = true
		s.mu.Unlock()
		if err := claim.renew(ctx); err != nil {
			return SettleReport{}, err
		}
		if err := s.store.MarkReplaying(ctx, claim.fence); err != nil {
			return SettleReport{}, fmt.Errorf("netting: settle %s: mark replaying: %w", s.meta.ID, err)
		}
		rep.Mode = ModeReplayed
		n, err := s.compensate(ctx, claim, chunks)
		if err != nil {
			return SettleReport{}, err
		}
		rep.Postings = n
		for _, r := range recs {
			err := claim.post(ctx, replayPosting(r))
			switch {
			case err == nil:
				rep.Postings++
			case isLedgerRefusal(err):
				rep.Rejected = append(rep.Rejected, Rejection{Key: r.Key, Code: Code(err)})
				rejectedLegs = append(rejectedLegs, r.Legs...)
			default:
				return SettleReport{}, fmt.Errorf("netting: settle %s replay seq %d: %w", s.meta.ID, r.Seq, err)
			}
		}
	}
	if err := claim.renew(ctx); err != nil {
		return SettleReport{}, err
	}
	// What is still reserved: everything, when the postings left pending
	// alone; with a SettlePoster each posting moved its own deltas as it
	// landed (a compensation moved its chunk's back), so only the movements
	// replay refused are left.
	release := reservationDeltas(rejectedLegs)
	if _, err := s.store.ReleaseSession(ctx, claim.fence, release); err != nil {
		return SettleReport{}, fmt.Errorf("netting: settle %s: release reservations: %w", s.meta.ID, err)
	}
	if err := s.store.FinishSettle(ctx, claim.fence, rep.Mode); err != nil {
		return SettleReport{}, fmt.Errorf("netting: settle %s: finish: %w", s.meta.ID, err)
	}
	s.finish(rep)
	return rep, nil
}

// compensate reverses, newest first, every chunk of the session that is in
// the ledger, and returns how many compensations the session has.
func (s *Session) compensate(ctx context.Context, claim *settleClaim, chunks []ledger.Posting) (int, error) {
	n := 0
	for i := len(chunks) - 1; i >= 0; i-- {
		posted, err := s.store.HasPosting(ctx, chunks[i].ID)
		if err != nil {
			return 0, fmt.Errorf("netting: settle %s: %w", s.meta.ID, err)
		}
		if !posted {
			continue
		}
		if err := claim.post(ctx, compensation(s.meta.ID, i, chunks[i])); err != nil {
			return 0, fmt.Errorf("netting: settle %s: compensate chunk %d: %w", s.meta.ID, i, err)
		}
		n++
	}
	return n, nil
}

// reportSettled rebuilds the report of a settle another settler finished.
func (s *Session) reportSettled(ctx context.Context, meta SessionMeta, recs []JournalRecord, head string) (SettleReport, error) {
	rep := SettleReport{SessionID: meta.ID, Mode: meta.SettleMode, Netted: len(recs), JournalHead: head}
	chunks := chunkPostings(meta.ID, netPositions(recs), meta.ChunkWidth, len(recs), head)
	if meta.SettleMode == ModeNetted {
		rep.Postings = len(chunks)
		return rep, nil
	}
	for i := range chunks {
		ok, err := s.store.HasPosting(ctx, compensationID(meta.ID, i))
		if err != nil {
			return SettleReport{}, err
		}
		if ok {
			rep.Postings++
		}
	}
	for _, r := range recs {
		ok, err := s.store.HasPosting(ctx, replayID(meta.ID, r.Seq))
		if err != nil {
			return SettleReport{}, err
		}
		if ok {
			rep.Postings++
		} else {
			rep.Rejected = append(rep.Rejected, Rejection{Key: r.Key})
		}
	}
	return rep, nil
}

func (s *Session) finish(rep SettleReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.settled = true
	s.st.closedForRecords = true
	r := rep
	s.st.report = &r
}

// readVerified reads the journal back from the store (never trusting
// memory) and verifies the chain.
func (s *Session) readVerified(ctx context.Context) ([]JournalRecord, string, error) {
	recs, err := s.store.ReadJournal(ctx, s.meta.ID)
	if err != nil {
		return nil, "", fmt.Errorf("netting: read journal %s: %w", s.meta.ID, err)
	}
	head, err := VerifyChain(s.meta.ID, recs)
	if err != nil {
		return nil, "", err
	}
	return recs, head, nil
}

// settleClaim is a held settle claim. A long settle (a replay of thousands
// of movements) renews it before half the lease has passed, so that a
// healthy settler is not taken over; a settler that stalls longer is, and
// its next write is fenced.
type settleClaim struct {
	s     *Session
	fence Fence
	at    time.Time // when fence was granted, on the node's clock
}

func (s *Session) claim(ctx context.Context) (*settleClaim, error) {
	at := s.now()
	f, err := s.store.ClaimSettle(ctx, s.meta.ID, s.owner, s.lease)
	if err != nil {
		return nil, err
	}
	return &settleClaim{s: s, fence: f, at: at}, nil
}

// renew re-claims (same owner: granted unless another settler took over)
// once half the lease has passed.
func (c *settleClaim) renew(ctx context.Context) error {
	if c.s.now().Sub(c.at) < c.s.lease/2 {
		return nil
	}
	fresh, err := c.s.claim(ctx)
	if err != nil {
		return err
	}
	if fresh.fence.Token != c.fence.Token+1 {
		// Someone claimed in between (and may have finished, perhaps by
		// replay): our view of the session is stale. Stop as if fenced.
		return &FencedError{SessionID: c.fence.SessionID, Token: c.fence.Token, Current: fresh.fence.Token}
	}
	*c = *fresh
	return nil
}

// post writes one settle posting under the claim. On a SettlePoster the
// posting's wallet deltas leave pending in the same transaction: a chunk's
// or a replayed movement's promise ends as its posting lands, and a
// compensation (whose legs are the chunk's, reversed) puts its chunk's
// back.
func (c *settleClaim) post(ctx context.Context, p ledger.Posting) error {
	if err := c.renew(ctx); err != nil {
		return err
	}
	return c.s.store.PostFencedReleasing(ctx, c.fence, p, reservationDeltas(p.Legs))
}
