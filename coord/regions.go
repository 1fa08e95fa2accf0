package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/cells"
)

// ApplyOptions tune ApplyRegions.
type ApplyOptions struct {
	// Force stores the table even if it names nodes that are not live
	// members, or changes the grid, or replaces a stored value that does
	// not parse. It never skips the version compare-and-set.
	Force bool
	// Writer and Reason say who stores the table and why ("operator
	// alice@ops-1", "controller zone-2"; "zone-1 lease expired"). They are
	// stored beside the table, in the same transaction, and read back by
	// RegionsProvenance. Default "": not said.
	Writer, Reason string
	// Leader, if set, fences the write by that leadership: the table is
	// stored only while it still leads (ErrNotLeader otherwise), so a
	// controller whose lease ended cannot write even if it has not noticed.
	Leader *Leadership
}

// Provenance says who stored a version of the region table and why
// (ApplyOptions.Writer and Reason).
type Provenance struct {
	// Version is the table version it describes.
	Version uint64 `json:"version"`
	Writer  string `json:"writer,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// At is the writer's clock when it wrote; informational.
	At time.Time `json:"at"`
}

// maxNameCompares bounds how many "this name is held" compares ApplyRegions
// adds to its transaction; etcd refuses transactions of more than 128
// operations by default (--max-txn-ops). Tables naming more nodes are
// checked against a member listing just before the write instead.
const maxNameCompares = 100

// Regions returns the stored region table, or ErrRegionsNotFound.
func (c *Client) Regions(ctx context.Context) (*cells.Table, error) {
	t, _, err := c.regions(ctx)
	return t, err
}

// regions returns the stored table and the key's mod revision (0 if none).
// A stored value that does not parse is returned as an error with the
// revision, so a forced apply can still replace it.
func (c *Client) regions(ctx context.Context) (*cells.Table, int64, error) {
	if err := c.checkOpen(); err != nil {
		return nil, 0, err
	}
	resp, err := c.cli.Get(ctx, c.regionsKey())
	if err != nil {
		return nil, 0, ErrUnavailable.Wrap("read region table: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrRegionsNotFound
	}
	kv := resp.Kvs[0]
	t, err := cells.ParseTable(kv.Value)
	if err != nil {
		return nil, kv.ModRevision, invalidTable(fmt.Errorf("the stored table at revision %d does not parse: %w", kv.ModRevision, err))
	}
	return t, kv.ModRevision, nil
}

// ApplyRegions stores t as the region table. It is a compare-and-set on
// the version: a table of version V replaces exactly version V−1 (the first
// table has version 1). When two operators apply at once, one wins and the
// other gets *RegionsConflictError naming the version it found.
//
// Unless opts.Force is set it also refuses (with *UnknownNodesError) a table
// naming a node that no live member holds; for tables naming up to
// maxNameCompares nodes that check is part of the same transaction, so a
// member leaving between the check and the write cannot slip through.
func (c *Client) ApplyRegions(ctx context.Context, t *cells.Table, opts ApplyOptions) (err error) {
	defer func() { c.met.applied(err) }()
	if err := t.Validate(); err != nil {
		return invalidTable(err)
	}
	cur, curRev, err := c.regions(ctx)
	var curVersion uint64
	switch {
	case errors.Is(err, ErrRegionsNotFound):
	case errors.Is(err, ErrRegionsInvalid) && curRev != 0:
		if !opts.Force {
			return fmt.Errorf("%w (apply with force to replace it)", err)
		}
		// Replacing garbage: whatever version the new table has is fine.
		curVersion = t.Version() - 1
	case err != nil:
		return err
	default:
		curVersion = cur.Version()
		if cur.Grid() != t.Grid() && !opts.Force {
			return ErrRegionsInvalid.Wrap("the table's grid %+v differs from the stored table's %+v (apply with force to change the grid)", t.Grid().Config(), cur.Grid().Config())
		}
	}
	if t.Version() != curVersion+1 {
		return &RegionsConflictError{Expected: t.Version() - 1, Actual: curVersion}
	}
	names := t.Nodes()
	if !opts.Force {
		if missing, err := c.missingNames(ctx, names); err != nil {
			return err
		} else if len(missing) > 0 {
			return &UnknownNodesError{Nodes: missing}
		}
	}

	val, err := t.MarshalJSON()
	if err != nil {
		return invalidTable(err)
	}
	prov, err := json.Marshal(Provenance{Version: t.Version(), Writer: opts.Writer, Reason: opts.Reason, At: c.clock.Now().UTC()})
	if err != nil {
		return invalidTable(err)
	}
	key := c.regionsKey()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", curRev)}
	if opts.Leader != nil {
		cmps = append(cmps, opts.Leader.isLeader())
	}
	if !opts.Force && len(names) <= maxNameCompares {
		for _, n := range names {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.nameKey(n)), ">", 0))
		}
	}
	if c.beforeApplyTxn != nil {
		c.beforeApplyTxn()
	}
	txn, err := c.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(val)), clientv3.OpPut(c.provenanceKey(), string(prov))).Commit()
	if err != nil {
		return ErrUnavailable.Wrap("write region table: %v", err)
	}
	if txn.Succeeded {
		c.log.Info("coord: region table applied", "version", t.Version(), "nodes", names, "forced", opts.Force, "writer", opts.Writer, "reason", opts.Reason)
		return nil
	}
	if opts.Leader != nil {
		if err := c.checkLeader(ctx, opts.Leader); err != nil {
			return err
		}
	}
	return c.explainFailedApply(ctx, t, curRev, names)
}

// checkLeader returns ErrNotLeader if l no longer leads.
func (c *Client) checkLeader(ctx context.Context, l *Leadership) error {
	resp, err := c.cli.Get(ctx, l.el.Key())
	if err != nil {
		return ErrUnavailable.Wrap("read the election key: %v", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.el.Rev() {
		return ErrNotLeader.Wrap("election %q: the leadership of %q has ended", l.election, l.value)
	}
	return nil
}

// RegionsProvenance returns the stored region table and who stored it and
// why. A table stored without a provenance record (by a version of coord
// that kept none, or around coord) has a zero Provenance but for Version.
func (c *Client) RegionsProvenance(ctx context.Context) (*cells.Table, Provenance, error) {
	if err := c.checkOpen(); err != nil {
		return nil, Provenance{}, err
	}
	// One read of both keys, so the record and the table are of one moment.
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(c.regionsKey()), clientv3.OpGet(c.provenanceKey())).Commit()
	if err != nil {
		return nil, Provenance{}, ErrUnavailable.Wrap("read region table: %v", err)
	}
	tkvs := resp.Responses[0].GetResponseRange().Kvs
	if len(tkvs) == 0 {
		return nil, Provenance{}, ErrRegionsNotFound
	}
	t, err := cells.ParseTable(tkvs[0].Value)
	if err != nil {
		return nil, Provenance{}, invalidTable(fmt.Errorf("the stored table at revision %d does not parse: %w", tkvs[0].ModRevision, err))
	}
	p := Provenance{Version: t.Version()}
	if pkvs := resp.Responses[1].GetResponseRange().Kvs; len(pkvs) > 0 {
		var got Provenance
		// A record of another version (the table written around coord)
		// says nothing about this one.
		if json.Unmarshal(pkvs[0].Value, &got) == nil && got.Version == t.Version() {
			p = got
		}
	}
	return t, p, nil
}

// explainFailedApply finds out which compare of ApplyRegions failed.
func (c *Client) explainFailedApply(ctx context.Context, t *cells.Table, curRev int64, names []string) error {
	now, nowRev, err := c.regions(ctx)
	if err != nil && !errors.Is(err, ErrRegionsNotFound) && !errors.Is(err, ErrRegionsInvalid) {
		// Could not look: say so rather than guess a conflict.
		return err
	}
	if nowRev != curRev {
		actual := uint64(0)
		if err == nil {
			actual = now.Version()
		}
		return &RegionsConflictError{Expected: t.Version() - 1, Actual: actual}
	}
	missing, err := c.missingNames(ctx, names)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &UnknownNodesError{Nodes: missing}
	}
	// A member left and another took its name back between the two reads.
	return ErrRegionsUnknownNode.Wrap("membership changed while applying; apply again")
}

// missingNames returns the names (sorted) that no live member holds.
func (c *Client) missingNames(ctx context.Context, names []string) ([]string, error) {
	members, err := c.Members(ctx)
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !live[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// RegionsUpdate is one version of the region table seen by a watch.
type RegionsUpdate struct {
	Table *cells.Table
	// Revision is the etcd revision that stored it.
	Revision int64
}

// WatchRegions returns a channel that delivers the stored table (if any),
// then every later version, in version order, each exactly once. Tables
// that do not parse (written around coord) are skipped and logged. A watch
// broken while etcd keeps the history (no leader, a cut stream) resumes
// after the last revision delivered, so nothing is skipped. If etcd has
// compacted history past the watcher, the versions in the compacted range
// cannot be replayed: the watcher then receives the current table, still in
// increasing version order. The channel is closed when ctx ends or
// the client closes.
func (c *Client) WatchRegions(ctx context.Context) (<-chan RegionsUpdate, error) {
	resp, err := c.cli.Get(ctx, c.regionsKey())
	if err != nil {
		return nil, ErrUnavailable.Wrap("read region table: %v", err)
	}
	out := make(chan RegionsUpdate)
	err = c.goWithClient(ctx, func(ctx context.Context) {
		defer close(out)
		var last uint64
		rev := resp.Header.Revision
		deliver := func(kv *mvccpb.KeyValue) bool {
			t, err := cells.ParseTable(kv.Value)
			if err != nil {
				c.log.Warn("coord: skipping a stored region table that does not parse", "revision", kv.ModRevision, "err", err)
				return true
			}
			if t.Version() <= last {
				return true
			}
			select {
			case out <- RegionsUpdate{Table: t, Revision: kv.ModRevision}:
				last = t.Version()
				return true
			case <-ctx.Done():
				return false
			}
		}
		if len(resp.Kvs) > 0 && !deliver(resp.Kvs[0]) {
			return
		}
		for ctx.Err() == nil {
			var (
				ok   bool
				werr error
			)
			rev, werr, ok = c.watchRegionsFrom(ctx, rev, deliver)
			if !ok || ctx.Err() != nil {
				return
			}
			if !errors.Is(werr, rpctypes.ErrCompacted) {
				// The watch broke but etcd still has the history (no
				// leader, a cut stream): resume after the last revision
				// handled, so no version is skipped. Paced, because a
				// member without a leader fails a new watch at once.
				if !c.pause(ctx, watchRetryPause) {
					return
				}
				continue
			}
			// The versions after rev are compacted away: catch up from
			// the current value and watch again from there.
			cur, err := c.cli.Get(ctx, c.regionsKey())
			if err != nil {
				c.log.Warn("coord: region watch: re-read failed, retrying", "err", err)
				if !c.pause(ctx, watchRetryPause) {
					return
				}
				continue
			}
			if len(cur.Kvs) > 0 && !deliver(cur.Kvs[0]) {
				return
			}
			rev = cur.Header.Revision
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// watchRegionsFrom watches the table key after rev and delivers each put. It
// returns the last revision fully handled, the error that broke the watch
// (nil if it just ended), and false if delivery stopped.
func (c *Client) watchRegionsFrom(ctx context.Context, rev int64, deliver func(*mvccpb.KeyValue) bool) (int64, error, bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	if c.beforeWatch != nil {
		if err := c.beforeWatch(); err != nil {
			return rev, err, true
		}
	}
	for resp := range c.cli.Watch(wctx, c.regionsKey(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			c.log.Warn("coord: region watch interrupted", "err", err, "revision", rev)
			return rev, err, true
		}
		for _, ev := range resp.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				if !deliver(ev.Kv) {
					return rev, nil, false
				}
			case clientv3.EventTypeDelete:
				c.log.Warn("coord: the region table key was deleted outside coord; keeping the last table", "revision", ev.Kv.ModRevision)
			}
		}
		rev = resp.Header.Revision
	}
	return rev, nil, true
}
