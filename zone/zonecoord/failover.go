package zonecoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/zone"
)

// FailoverElection is the etcd election the zone nodes' failover
// controllers campaign in (coord.Client.Campaign).
const FailoverElection = "zone-failover"

// FailoverConfig configures RunFailover: one zone node's failover
// controller.
type FailoverConfig struct {
	// Coord is the node's etcd client. Required.
	Coord *coord.Client
	// Name is the node's name: the election value, and the controller's
	// name in the tables it writes ("controller NAME"). Required.
	Name string
	// TTL is the candidacy's lease, whole seconds: a controller that dies
	// is replaced TTL after its last renewal. Use the node's lease TTL, so
	// a controller that dies with its node is replaced when the node's
	// regions are re-owned anyway. Default 0: coord's default (10s).
	TTL time.Duration
	// Retry is the pause before a write that failed for a reason other
	// than a version conflict (etcd unavailable, a standby that left
	// meanwhile) is tried again, measured on Clock. Default 200ms.
	Retry time.Duration
	// Clock measures Retry. Default clock.Real().
	Clock clock.Clock
	// Logger receives the controller's records. Default: discard.
	Logger *slog.Logger

	// beforeApply, when set by a test, runs after the controller planned
	// a table and before it writes it.
	beforeApply func(next *cells.Table)
}

const defaultFailoverRetry = 200 * time.Millisecond

func (c FailoverConfig) withDefaults() FailoverConfig {
	if c.Retry == 0 {
		c.Retry = defaultFailoverRetry
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that cannot work, after defaults.
func (c FailoverConfig) Validate() error {
	c = c.withDefaults()
	if c.Coord == nil {
		return errcode.Config("FailoverConfig.Coord", nil, "required: the node's etcd client")
	}
	if err := nodename.Check("FailoverConfig.Name", c.Name); err != nil {
		return err
	}
	if c.TTL != 0 && (c.TTL < time.Second || c.TTL%time.Second != 0) {
		return errcode.Config("FailoverConfig.TTL", c.TTL, "must be 0 (coord's default) or a whole number of seconds, at least 1s")
	}
	if c.Retry < 0 {
		return errcode.Config("FailoverConfig.Retry", c.Retry, "must not be negative")
	}
	return nil
}

// maxConflictRetries bounds how many times in a row a write refused by the
// version compare is planned again from the newer table before the
// controller waits for Retry (someone else writes as fast as it does).
const maxConflictRetries = 8

// RunFailover runs one zone node's failover controller until ctx ends (it
// returns nil then) or the client closes. The node campaigns in
// FailoverElection; the one that leads, on every change of the zone
// membership and of the region table, gives every region of a node that
// has left to that region's zone.Standby among the live zone nodes, in one new
// table version, compare-and-set on the version and fenced by its
// leadership (coord.ApplyOptions.Leader), recording "controller NAME" and
// the reason as the table's provenance. A refused write (an operator, or a
// deposed controller, wrote first) is planned again from the newer table.
//
// A node counts as having left only if this controller saw it as a live
// zone member since it started: a table naming a node that never came up
// (a forced apply before boot) is left to the operator, while a node
// that was up and died is re-owned even if the controller that saw it
// die died too (every candidate follows the membership from its start,
// leading or not). There is no grace beyond the lease: a node has left
// when etcd ends its lease. A node that comes back owns nothing until an
// operator (or a rebalance) gives it regions.
func RunFailover(ctx context.Context, cfg FailoverConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members, err := cfg.Coord.WatchMembers(ctx)
	if err != nil {
		return err
	}
	tables, err := cfg.Coord.WatchRegions(ctx)
	if err != nil {
		return err
	}
	fc := &failoverController{cfg: cfg, live: map[coord.NodeID]string{}, seen: map[string]bool{}}
	won := make(chan *coord.Leadership, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		select {
		case l := <-won: // won as ctx ended: nobody else will resign it
			_ = l.Resign()
		default:
		}
		if fc.lead != nil {
			_ = fc.lead.Resign()
		}
	}()
	campaign := func() {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := cfg.Coord.Campaign(ctx, coord.CampaignConfig{Election: FailoverElection, Value: cfg.Name, TTL: cfg.TTL})
				if err == nil {
					won <- l
					return
				}
				if ctx.Err() == nil {
					cfg.Logger.Warn("zone: failover: campaign failed, retrying", "node", cfg.Name, "err", err)
					_ = clock.Sleep(ctx, cfg.Clock, cfg.Retry)
				}
			}
		})
	}
	campaign()
	retry := cfg.Clock.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var leadDone <-chan struct{}
		if fc.lead != nil {
			leadDone = fc.lead.Done()
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-members:
			if !ok {
				return fc.ended(ctx, "membership")
			}
			fc.member(ev)
		case _, ok := <-tables:
			if !ok {
				return fc.ended(ctx, "region table")
			}
		case l := <-won:
			fc.lead = l
			cfg.Logger.Info("zone: failover: this node is the controller", "node", cfg.Name)
		case <-leadDone:
			cfg.Logger.Warn("zone: failover: leadership ended; campaigning again", "node", cfg.Name)
			_ = fc.lead.Resign()
			fc.lead = nil
			campaign()
			continue
		case <-retry.C():
		}
		if fc.lead == nil {
			continue
		}
		if err := fc.act(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, coord.ErrNotLeader) {
				continue // leadDone follows
			}
			cfg.Logger.Warn("zone: failover: re-owning failed, retrying", "node", cfg.Name, "err", err, "retry", cfg.Retry)
			retry.Reset(cfg.Retry)
		}
	}
}

// failoverController is RunFailover's state, owned by its goroutine.
type failoverController struct {
	cfg  FailoverConfig
	lead *coord.Leadership
	// live is the live zone members by node id; seen every name that has
	// been a live zone member since the controller started.
	live map[coord.NodeID]string
	seen map[string]bool
}

func (fc *failoverController) ended(ctx context.Context, what string) error {
	if ctx.Err() != nil {
		return nil
	}
	return coord.ErrUnavailable.Wrap("zone: failover: the %s watch ended (client closed)", what)
}

func (fc *failoverController) member(ev coord.MembershipEvent) {
	if ev.Member.Role != Role {
		return
	}
	switch ev.Kind {
	case coord.MemberJoined, coord.MemberUpdated:
		fc.live[ev.Member.ID] = ev.Member.Name
		fc.seen[ev.Member.Name] = true
	case coord.MemberLeft:
		delete(fc.live, ev.Member.ID)
	}
}

// gone returns the names seen live that are not live now, sorted.
func (fc *failoverController) gone() (live, gone []string) {
	isLive := map[string]bool{}
	for _, n := range fc.live {
		isLive[n] = true
		live = append(live, n)
	}
	for n := range fc.seen {
		if !isLive[n] {
			gone = append(gone, n)
		}
	}
	slices.Sort(live)
	slices.Sort(gone)
	return live, gone
}

// act writes the table that re-owns the regions of the nodes that left, if
// any, planning again from the newer table when the write loses the
// compare-and-set.
func (fc *failoverController) act(ctx context.Context) error {
	live, gone := fc.gone()
	if len(gone) == 0 {
		return nil
	}
	for range maxConflictRetries {
		t, err := fc.cfg.Coord.Regions(ctx)
		if errors.Is(err, coord.ErrRegionsNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		next, moved, err := zone.PlanFailover(t, live, gone)
		if err != nil || next == nil {
			return err
		}
		if fc.cfg.beforeApply != nil {
			fc.cfg.beforeApply(next)
		}
		reason := failoverReason(moved)
		err = fc.cfg.Coord.ApplyRegions(ctx, next, coord.ApplyOptions{
			Writer: "controller " + fc.cfg.Name, Reason: reason, Leader: fc.lead,
		})
		if errors.Is(err, coord.ErrRegionsConflict) {
			fc.cfg.Logger.Info("zone: failover: the table changed under the write; planning again", "node", fc.cfg.Name, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		fc.cfg.Logger.Warn("zone: failover: re-owned the regions of nodes that left", "controller", fc.cfg.Name,
			"version", next.Version(), "reason", reason)
		return nil
	}
	return coord.ErrRegionsConflict.Wrap("zone: failover: %d writes in a row lost the compare-and-set", maxConflictRetries)
}

// failoverReason says which nodes left and how many regions each lost,
// in name order: "zone-1 left (lease ended): 12 regions to their standbys".
func failoverReason(moved map[string][]cells.RegionID) string {
	names := slices.Sorted(maps.Keys(moved))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s left (lease ended): %d regions to their standbys", n, len(moved[n]))
	}
	return strings.Join(parts, "; ")
}
