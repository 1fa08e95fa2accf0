package netting

import (
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/ledger"
)

// This file is the group commit's pure core, in the style of etcd-io/raft's
// Ready/Advance: a commitStep holds one batch and, asked what to do next
// (next), names one store call (a commitAction); the driver (Session.commit)
// makes the call and reports its result back (wrote, looked, readBack). When
// the step is done it holds every answer to give and the rows that were
// committed; the driver applies them to the session state. The step does
// no I/O, reads no clock, takes no lock and starts no goroutine, so every
// branch is a table test with no store (commitcore_test.go).

// commitItem is one movement of a group commit, as the core sees it.
type commitItem struct {
	key    string
	legs   []ledger.Leg
	deltas []ledger.AccountDelta
}

// commitActionKind names the store call a commit step wants made.
type commitActionKind int

const (
	// commitDone: nothing more to call; apply the step's answers.
	commitDone commitActionKind = iota
	// commitWrite: ReserveAndRecord(reqs, step.build), then wrote.
	commitWrite
	// commitLookup: LookupAnswer of each of keys, in order, then looked.
	commitLookup
	// commitReadBack: ReadJournal of the session, then readBack.
	commitReadBack
)

// commitAction is what the driver must do next.
type commitAction struct {
	kind commitActionKind
	reqs [][]ledger.AccountDelta // commitWrite
	// own (commitWrite) is the session's own pending credits the debits
	// may spend (SharedStore.ReserveAndAppend); the store does not change
	// it.
	own  map[string]int64
	keys []string // commitLookup
}

// commitAnswer is the decision for one item of the batch (its index).
type commitAnswer struct {
	item int
	out  Outcome
	err  error
}

// keyLookup is the result of one LookupAnswer.
type keyLookup struct {
	ans KeyAnswer
	err error
}

// commitStep is one group commit in progress.
type commitStep struct {
	session string
	// nextSeq and head are the committed journal the batch chains onto;
	// nothing commits to it while the step runs (one committer at a time).
	nextSeq int64
	head    string
	items   []commitItem
	// own is the session's committed pending credits on the accounts the
	// batch debits: what the spending rule lets these debits spend beyond
	// the balance.
	own map[string]int64
	// refusedLookup: the lookups under way are of the items the funds
	// check refused (a refused key may be journaled already: its first
	// answer, not a refusal, is owed).
	refusedLookup bool
	// plantFundsFirst is a planted bug for the model's bite test
	// (export_test.go): a refused item is answered REJECTED without
	// looking its key up, as before issue 27.
	plantFundsFirst bool
	// plantForgetRefusals is a planted bug for the model's bite test: the
	// refused keys are not written with the group commit (so only the
	// session that refused one remembers it), as before port v4.
	plantForgetRefusals bool

	// live are the items still to write, in order.
	live []int
	// The last build: whether it ran, the items it granted and their rows.
	built bool
	ok    []int
	recs  []JournalRecord
	// lookups are the items whose keys another row holds, being looked up;
	// after them, rest is written again.
	lookups, rest []int
	// cause is the error whose outcome a commitReadBack resolves.
	cause error

	action commitAction
	// The results, final once action is commitDone.
	answers []commitAnswer
	// accepted items (with their rows, accepted[i] ↔ rows[i]) are
	// committed: the driver moves the journal head to the last row.
	accepted []int
	rows     []JournalRecord
	// closeRecords: the session must stop accepting (the store says it is
	// sealed, or the journal moved under us, or it cannot be read).
	closeRecords bool
}

// newCommitStep starts a group commit of items onto the journal whose next
// seq is nextSeq and whose head hash is head; own is the session's
// committed pending credits (per account) its debits may spend.
func newCommitStep(session string, nextSeq int64, head string, items []commitItem, own map[string]int64) *commitStep {
	c := &commitStep{session: session, nextSeq: nextSeq, head: head, items: items, own: own}
	c.live = make([]int, len(items))
	for i := range items {
		c.live[i] = i
	}
	c.write()
	return c
}

// next returns the store call to make (commitDone: none).
func (c *commitStep) next() commitAction { return c.action }

func (c *commitStep) write() {
	if len(c.live) == 0 {
		c.action = commitAction{kind: commitDone}
		return
	}
	reqs := make([][]ledger.AccountDelta, len(c.live))
	for i, it := range c.live {
		reqs[i] = c.items[it].deltas
	}
	c.built, c.ok, c.recs = false, nil, nil
	c.action = commitAction{kind: commitWrite, reqs: reqs, own: c.own}
}

// build is the pure function the store calls inside its transaction (again
// on a retry; the last call is the one that committed, if any did): the
// granted live items chained onto the committed head, and the refused
// ones' keys, remembered in the same transaction as their first answer.
func (c *commitStep) build(granted []bool) ([]JournalRecord, []RefusedKey) {
	c.built = true
	c.ok, c.recs = nil, nil
	var refused []RefusedKey
	prev := c.head
	for i, it := range c.live {
		if i >= len(granted) || !granted[i] {
			if !c.plantForgetRefusals {
				refused = append(refused, RefusedKey{Key: c.items[it].key, SessionID: c.session, Reason: ReasonInsufficientFunds})
			}
			continue
		}
		m := c.items[it]
		h := ChainHash(prev, m.key, m.legs)
		c.recs = append(c.recs, JournalRecord{SessionID: c.session, Seq: c.nextSeq + int64(len(c.ok)), Key: m.key, Legs: m.legs, PrevHash: prev, Hash: h})
		c.ok = append(c.ok, it)
		prev = h
	}
	return c.recs, refused
}

func (c *commitStep) answer(it int, out Outcome, err error) {
	c.answers = append(c.answers, commitAnswer{item: it, out: out, err: err})
}

func (c *commitStep) failLive(err error) {
	for _, it := range c.live {
		c.answer(it, Outcome{}, err)
	}
	c.live = nil
	c.action = commitAction{kind: commitDone}
}

// landed decides the live items as the last build did: its granted items
// accepted with its rows; every other live item was refused by the funds
// check (and its refusal written with the rows, unless the key already had
// a first answer), and is answered only once its key is looked up
// (refusedLookup): a key already decided — by any session, node or epoch,
// settled or not — answers its first outcome, ACCEPTED with its seq or
// its first refusal, never the refusal of a funds check it should not have
// been put to.
func (c *commitStep) landed() {
	granted := make(map[int]bool, len(c.ok))
	for _, it := range c.ok {
		granted[it] = true
	}
	var refused []int
	for _, it := range c.live {
		if !granted[it] {
			refused = append(refused, it)
		}
	}
	c.accepted, c.rows = c.ok, c.recs
	c.live = nil
	c.action = commitAction{kind: commitDone}
	if len(refused) == 0 {
		return
	}
	if c.plantFundsFirst {
		for _, it := range refused {
			c.answer(it, Outcome{Status: Rejected, Seq: -1, Reason: ReasonInsufficientFunds}, nil)
		}
		return
	}
	c.lookups, c.refusedLookup = refused, true
	keys := make([]string, len(refused))
	for i, it := range refused {
		keys[i] = c.items[it].key
	}
	c.action = commitAction{kind: commitLookup, keys: keys}
}

// lookedRefused answers the refused items from their keys' lookups: a
// key found answers its first answer (ACCEPTED with its row's seq, or its
// remembered refusal), a key absent the refusal, and a failed lookup an
// error (outcome unknown to the caller, who retries with the same key:
// never a guessed refusal).
func (c *commitStep) lookedRefused(res []keyLookup) {
	for i, it := range c.lookups {
		var r keyLookup
		if i < len(res) {
			r = res[i]
		} else {
			r.err = fmt.Errorf("netting: no lookup result")
		}
		key := c.items[it].key
		switch {
		case r.err != nil:
			c.answer(it, Outcome{}, fmt.Errorf("netting: lookup of refused key %q: %w", key, r.err))
		case r.ans.Found:
			c.answer(it, r.ans.outcome(), nil)
		default:
			c.answer(it, Outcome{Status: Rejected, Seq: -1, Reason: ReasonInsufficientFunds}, nil)
		}
	}
	c.lookups, c.refusedLookup = nil, false
	c.action = commitAction{kind: commitDone}
}

// wrote reports ReserveAndAppend's result.
func (c *commitStep) wrote(granted []bool, err error) {
	if err == nil && (len(granted) != len(c.live) || !c.built) {
		err = fmt.Errorf("netting: store granted %d of %d reservation requests", len(granted), len(c.live))
	}
	var kc *KeyConflictError
	switch {
	case err == nil:
		c.landed()
	case errors.As(err, &kc):
		// Nothing applied: look up the keys decided elsewhere (their first
		// answers are the answers), then write the rest again.
		c.lookups, c.rest = c.splitConflicts(kc.Keys)
		if len(c.lookups) == 0 {
			// The store named keys we did not send: do not loop.
			c.failLive(fmt.Errorf("netting: append: key conflict on unknown keys %v", kc.Keys))
			return
		}
		keys := make([]string, len(c.lookups))
		for i, it := range c.lookups {
			keys[i] = c.items[it].key
		}
		c.action = commitAction{kind: commitLookup, keys: keys}
	case errors.Is(err, ErrSessionSettled):
		c.closeRecords = true
		c.failLive(err)
	case errors.Is(err, ErrSeqConflict):
		// Another writer extended this session's journal: stop, do not
		// guess.
		c.closeRecords = true
		c.failLive(fmt.Errorf("netting: reserve and append: %w", err))
	case errors.Is(err, ErrSessionNotFound):
		c.failLive(fmt.Errorf("netting: reserve and append: %w", err))
	case len(c.recs) == 0:
		// The outcome is unknown, but nothing was granted or built: no row
		// to look for and no reservation that could have been added.
		c.failLive(fmt.Errorf("netting: reserve and append: %w", err))
	default:
		// The outcome is unknown (a lost commit reply): do not guess, read
		// the journal back.
		c.cause = err
		c.action = commitAction{kind: commitReadBack}
	}
}

// outcome is the answer a found key's first answer gives again.
func (a KeyAnswer) outcome() Outcome {
	if a.Refused {
		return Outcome{Status: Rejected, Seq: -1, Reason: a.Refusal.Reason}
	}
	return Outcome{Status: Accepted, Seq: a.Record.Seq}
}

// splitConflicts separates the live items whose keys are in keys (already
// journaled by another row) from the rest, keeping their order.
func (c *commitStep) splitConflicts(keys []string) (dup, rest []int) {
	conflict := make(map[string]bool, len(keys))
	for _, k := range keys {
		conflict[k] = true
	}
	for _, it := range c.live {
		if conflict[c.items[it].key] {
			dup = append(dup, it)
		} else {
			rest = append(rest, it)
		}
	}
	return dup, rest
}

// looked reports the LookupKey results of the keys of a commitLookup, in
// order: each item whose key another row holds answers with that row's
// outcome (a retried key answers as before); then the rest is written.
func (c *commitStep) looked(res []keyLookup) {
	if c.refusedLookup {
		c.lookedRefused(res)
		return
	}
	for i, it := range c.lookups {
		var r keyLookup
		if i < len(res) {
			r = res[i]
		} else {
			r.err = fmt.Errorf("netting: no lookup result")
		}
		key := c.items[it].key
		switch {
		case r.err != nil:
			c.answer(it, Outcome{}, fmt.Errorf("netting: lookup of conflicting key %q: %w", key, r.err))
		case !r.ans.Found:
			c.answer(it, Outcome{}, fmt.Errorf("netting: key %q reported journaled but not found", key))
		default:
			c.answer(it, r.ans.outcome(), nil)
		}
	}
	c.live, c.lookups, c.rest = c.rest, nil, nil
	c.write()
}

// readBack reports the session's journal as read after a write whose
// outcome was unknown. The last built row present (by seq and hash) means
// the whole transaction committed, reservations included; absent means none
// of it did, so nothing is to be undone. If the journal cannot be read the
// session stops accepting (a committed reservation may be left: overstated
// pending is safe, and ReconcileReservations repairs it).
func (c *commitStep) readBack(journal []JournalRecord, err error) {
	cause := c.cause
	if err != nil {
		c.closeRecords = true
		c.failLive(fmt.Errorf("netting: append outcome unknown (%v): %w", err, cause))
		return
	}
	first, last := c.recs[0].Seq, c.recs[len(c.recs)-1]
	if int64(len(journal)) > last.Seq && journal[last.Seq].Hash == last.Hash {
		c.landed()
		return
	}
	if int64(len(journal)) != first {
		// Someone else wrote this session's journal: stop, do not guess.
		c.closeRecords = true
	}
	c.failLive(fmt.Errorf("netting: append: %w", cause))
}
