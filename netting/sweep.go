package netting

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardwise/shardwise/errcode"
)

// SweepOptions parameterise one SweepOrphans call.
type SweepOptions struct {
	// Now is the instant ages are measured at. Zero (the normal case) means
	// the node's one clock: the store's, unless ClusterConfig.Clock is set.
	// A non-zero Now must be a reading of that same clock.
	Now time.Time
	// Limit caps the sessions looked at; 0 means the configured
	// Sweep.Limit, or DefaultSweepLimit.
	Limit int
}

// Orphan is an unsettled session that is not one of this node's open epochs.
type Orphan struct {
	SessionID string
	// Age is Now minus the session's last journal row's RecordedAt.
	Age time.Duration
}

// SettledOrphan is an orphan the sweep settled (or found settled).
type SettledOrphan struct {
	SessionID string
	Mode      string
}

// FailedOrphan is an orphan whose settle failed, with the error's code.
type FailedOrphan struct {
	SessionID string
	Code      string
	Err       error
}

// SweepSummary reports one sweep.
type SweepSummary struct {
	// Scanned counts the unsettled sessions listed (this node's live ones
	// included, though they are not orphans).
	Scanned int
	Orphans []Orphan
	Settled []SettledOrphan
	Failed  []FailedOrphan
}

// SweepOrphans enumerates unsettled sessions from the journal, oldest
// first, and reports each orphan with its age on the one clock. When the
// node has a Sweep configuration, it settles the orphans strictly older than
// Sweep.SettleOlderThan with their own idempotent, claimed settle — which
// also finishes half-settled sessions (a crash between chunks or mid-replay).
func (n *ClusterNode) SweepOrphans(ctx context.Context, opts SweepOptions) (SweepSummary, error) {
	now := opts.Now
	if now.IsZero() {
		var err error
		if now, err = n.sweepNow(ctx); err != nil {
			return SweepSummary{}, fmt.Errorf("netting: sweep clock: %w", err)
		}
	}
	limit := opts.Limit
	if limit == 0 {
		limit = DefaultSweepLimit
		if n.cfg.Sweep != nil {
			limit = n.cfg.Sweep.Limit
		}
	}
	list, err := n.store.ListUnsettled(ctx, limit)
	if err != nil {
		return SweepSummary{}, fmt.Errorf("netting: sweep: %w", err)
	}
	sum := SweepSummary{Scanned: len(list)}
	for _, u := range list {
		if n.isLive(u.ID) {
			continue
		}
		age := now.Sub(u.LastRecordedAt)
		sum.Orphans = append(sum.Orphans, Orphan{SessionID: u.ID, Age: age})
		if n.cfg.Sweep == nil || age <= n.cfg.Sweep.SettleOlderThan {
			continue
		}
		mode, err := n.settleOrphan(ctx, u.ID)
		if err != nil {
			n.log.Warn("netting: sweep could not settle orphan", "session", u.ID, "code", Code(err), "err", err)
			sum.Failed = append(sum.Failed, FailedOrphan{SessionID: u.ID, Code: Code(err), Err: err})
			continue
		}
		sum.Settled = append(sum.Settled, SettledOrphan{SessionID: u.ID, Mode: mode})
	}
	return sum, nil
}

func (n *ClusterNode) settleOrphan(ctx context.Context, id string) (string, error) {
	s, err := n.Recover(ctx, id)
	if err != nil {
		return "", err
	}
	rep, err := s.Settle(ctx)
	if err != nil {
		return "", err
	}
	return rep.Mode, nil
}

// ReconcileResult reports ReconcileReservations and PlanReconcile.
type ReconcileResult struct {
	// Accounts is the number of accounts with a nonzero pending total
	// after the rebuild.
	Accounts int
	// Adjusted is the number of accounts whose counter was wrong (as the
	// store's write counted them; PlanReconcile: len(Changes)).
	Adjusted int
	// Changes are the counters the rebuild sets to another value, sorted
	// by account: what each held, and what the journals say it should.
	Changes []PendingChange
}

// PendingChange is one reservation counter a rebuild corrects: both sides
// as the store held them, and as the journals say they should be.
type PendingChange struct {
	Account  string
	Was, Now Reserved
}

// ReconcileReservations rebuilds the shared reservation counters from the
// journals of unsettled, unreleased sessions, less what a half-settled
// session's postings already released (its chunks posted and not
// compensated, and its replayed movements). It is an operator action for a
// quiesced cluster (no node recording or settling), never a scheduled
// job: a live node's in-flight movements would race the rebuild.
func ReconcileReservations(ctx context.Context, store Store) (ReconcileResult, error) {
	shared, want, res, err := planReconcile(ctx, store)
	if err != nil {
		return ReconcileResult{}, err
	}
	if res.Adjusted, err = shared.ReplacePending(ctx, want); err != nil {
		return ReconcileResult{}, fmt.Errorf("netting: reconcile: %w", err)
	}
	return res, nil
}

// PlanReconcile is ReconcileReservations without its write: what the
// rebuild would change, for an operator to read first. It writes nothing.
func PlanReconcile(ctx context.Context, store Store) (ReconcileResult, error) {
	_, _, res, err := planReconcile(ctx, store)
	return res, err
}

func planReconcile(ctx context.Context, store Store) (SharedStore, map[string]Reserved, ReconcileResult, error) {
	shared, ok := store.(SharedStore)
	if !ok {
		return nil, nil, ReconcileResult{}, errcode.Config("store", fmt.Sprintf("%T", store), "has no shared reservation counter (netting.ReservationStore)")
	}
	want, err := UnsettledReservations(ctx, shared)
	if err != nil {
		return nil, nil, ReconcileResult{}, fmt.Errorf("netting: reconcile: %w", err)
	}
	have, err := shared.ReservedAll(ctx)
	if err != nil {
		return nil, nil, ReconcileResult{}, fmt.Errorf("netting: reconcile: %w", err)
	}
	res := ReconcileResult{Accounts: len(want)}
	for a, now := range want {
		if have[a] != now {
			res.Changes = append(res.Changes, PendingChange{Account: a, Was: have[a], Now: now})
		}
	}
	for a, was := range have {
		if _, kept := want[a]; !kept && was != (Reserved{}) {
			res.Changes = append(res.Changes, PendingChange{Account: a, Was: was})
		}
	}
	slices.SortFunc(res.Changes, func(x, y PendingChange) int { return strings.Compare(x.Account, y.Account) })
	res.Adjusted = len(res.Changes)
	return shared, want, res, nil
}

// settledSoFar is what the settle postings of a session in the ledger have
// moved out of pending (PostFencedReleasing): each chunk posted and not
// compensated (its accounts' sides over the whole journal), and each
// replayed movement.
func settledSoFar(ctx context.Context, store ReservationSource, meta SessionMeta, recs []JournalRecord) ([]ReservedChange, error) {
	var out []ReservedChange
	sides := sidesOf(recs)
	has := func(id string) (bool, error) { return store.HasPosting(ctx, id) }
	for i, c := range chunkPostings(meta.ID, netPositions(recs), meta.ChunkWidth, len(recs), "") {
		posted, err := has(c.ID)
		if err != nil {
			return nil, err
		}
		if !posted {
			continue
		}
		comp, err := has(compensationID(meta.ID, i))
		if err != nil {
			return nil, err
		}
		if !comp {
			out = append(out, chunkRelease(sides, c)...)
		}
	}
	for _, r := range recs {
		posted, err := has(replayID(meta.ID, r.Seq))
		if err != nil {
			return nil, err
		}
		if posted {
			out = append(out, changesOf(reservationDeltas(r.Legs))...)
		}
	}
	return out, nil
}

// MissingFromLedger returns the journaled (accepted) movements of session
// id that its finished settle left out of the ledger — the hook for an
// audit of accepted against posted. For a session settled by netting,
// every chunk (net_<id>_c<i>) must be posted; if one is not, every movement
// is returned (the positions are cut by account, not by movement). For a
// session settled by replay, each movement whose own posting
// (mv_<id>_<seq>) is absent is returned. Under the spending rule the
// result is always empty; anything else is an invariant breach (the settle
// that caused it logged it and counted it, ClusterNode.Breaches). A session
// not settled yet returns nil: its movements are still pending.
func MissingFromLedger(ctx context.Context, store Store, sessionID string) ([]JournalRecord, error) {
	meta, err := store.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if !meta.Settled {
		return nil, nil
	}
	recs, err := store.ReadJournal(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("netting: missing from ledger %s: %w", sessionID, err)
	}
	if meta.SettleMode == ModeNetted {
		for _, c := range chunkPostings(meta.ID, netPositions(recs), meta.ChunkWidth, len(recs), "") {
			ok, err := store.HasPosting(ctx, c.ID)
			if err != nil {
				return nil, fmt.Errorf("netting: missing from ledger %s: %w", sessionID, err)
			}
			if !ok {
				return recs, nil
			}
		}
		return nil, nil
	}
	var missing []JournalRecord
	for _, r := range recs {
		ok, err := store.HasPosting(ctx, replayID(sessionID, r.Seq))
		if err != nil {
			return nil, fmt.Errorf("netting: missing from ledger %s: %w", sessionID, err)
		}
		if !ok {
			missing = append(missing, r)
		}
	}
	return missing, nil
}
