package zonecoord

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Role is the coord role every zone node registers with.
const Role = "zone"

// JoinConfig describes a zone node joining the cluster. Defaults are filled by
// withDefaults and documented per field.
type JoinConfig struct {
	// Coord is the etcd connection the node registers and watches through.
	// Required. Close does not close it: the caller owns it.
	Coord *coord.Client
	// Name is the node's stable name, the one region tables use
	// (nodename.Check rules). Default: coord derives "node-<id>" from the
	// leased id, which is only as stable as the id; set one in production.
	Name string
	// Addrs and Meta are published with the member record.
	Addrs map[string]string
	Meta  map[string]string
	// TTL is the lease's time to live, whole seconds. Default 0: coord's
	// default (10s). A node is fenced no later than one TTL after its last
	// renewal got through.
	TTL time.Duration
	// Logger receives the node's ownership records. Default: discard.
	Logger *slog.Logger
	// OnChange, if set, is called with every table version the node comes
	// to hold, in version order, once each, from the one goroutine that
	// follows the table, after the version is installed (Owns already
	// answers from it). It holds back the next version while it runs, and
	// must not call Close.
	OnChange func(Change)
}

func (c JoinConfig) withDefaults() JoinConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first field that cannot work, after defaults.
func (c JoinConfig) Validate() error {
	c = c.withDefaults()
	if c.Coord == nil {
		return errcode.Config("JoinConfig.Coord", nil, "required")
	}
	if c.Name != "" {
		if err := nodename.Check("JoinConfig.Name", c.Name); err != nil {
			return err
		}
	}
	if c.TTL != 0 {
		if c.TTL < time.Second {
			return errcode.Config("JoinConfig.TTL", c.TTL, "must be 0 (coord's default) or at least 1s")
		}
		if c.TTL%time.Second != 0 {
			return errcode.Config("JoinConfig.TTL", c.TTL, "must be a whole number of seconds (etcd leases count whole seconds)")
		}
	}
	return nil
}

// Change is one table version the node came to hold.
type Change struct {
	// Old is the table held before (nil for the first one); New the one
	// held now. Their versions are the old and new version.
	Old, New *cells.Table
	// Gained and Lost are the regions this node owns in New and not in
	// Old, and owned in Old and not in New, ascending. After a forced
	// grid change every old region is lost and every new one gained.
	Gained, Lost []cells.RegionID
}

// OldVersion is the version held before, 0 if none.
func (c Change) OldVersion() uint64 {
	if c.Old == nil {
		return 0
	}
	return c.Old.Version()
}

// NewVersion is the version held now.
func (c Change) NewVersion() uint64 { return c.New.Version() }

// Grant is a write permission: the node may write in Region because the
// table of TableVersion gives it Region and its lease (Lease) was live when
// it asked. It is a snapshot, not a lock: derive the write's context from
// Ownership.Context so the write stops with the fence.
type Grant struct {
	Node         string
	Region       cells.RegionID
	TableVersion uint64
	Lease        int64
}

// held is one table version as this node holds it. Immutable once
// published, except next, which is closed when a newer one replaces it.
type held struct {
	table   *cells.Table // nil before the first version arrives
	owned   []bool       // region → owned by this node
	regions []cells.RegionID
	next    chan struct{}
}

func newHeld(t *cells.Table, name string) *held {
	h := &held{table: t, next: make(chan struct{})}
	if t == nil {
		return h
	}
	h.regions = t.RegionsOf(name)
	h.owned = make([]bool, t.Grid().Regions())
	for _, r := range h.regions {
		h.owned[r] = true
	}
	return h
}

func (h *held) version() uint64 {
	if h.table == nil {
		return 0
	}
	return h.table.Version()
}

// Ownership is a zone node's membership and the regions it owns: a coord
// registration with role "zone" and the region table it holds, followed by
// a watch. Every answer comes from the table version it holds, never from a
// remote lookup, and none says "owner" once the lease is lost. Safe for
// concurrent use.
type Ownership struct {
	reg      *coord.Registration
	name     string
	log      *slog.Logger
	onChange func(Change)
	met      *metrics

	cur       atomic.Pointer[held] // written only by follow
	closed    atomic.Bool
	stopWatch context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var _ zone.Territory = (*Ownership)(nil)

// Join registers the node in coord with role "zone" and starts following
// the region table. It returns once the registration is live and the watch
// is open; the stored table (if any) arrives just after, so Owns may answer
// false until then (WaitVersion waits for it). ctx bounds only the joining.
func Join(ctx context.Context, cfg JoinConfig) (*Ownership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	reg, err := cfg.Coord.Register(ctx, coord.RegisterConfig{
		Name:  cfg.Name,
		Role:  Role,
		Addrs: cfg.Addrs,
		Meta:  cfg.Meta,
		TTL:   cfg.TTL,
	})
	if err != nil {
		return nil, err
	}
	o := &Ownership{
		reg:      reg,
		name:     reg.Member().Name,
		log:      cfg.Logger,
		onChange: cfg.OnChange,
		met:      newMetrics(),
	}
	o.cur.Store(newHeld(nil, o.name))

	// The watch lives as long as the registration (its context ends with
	// the fence), and is bounded by ctx only while it opens.
	wctx, stop := context.WithCancel(reg.Context())
	o.stopWatch = stop
	unbind := context.AfterFunc(ctx, stop)
	updates, err := cfg.Coord.WatchRegions(wctx)
	if !unbind() && err == nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		stop()
		_ = reg.Close()
		if updates != nil {
			for range updates { // joined: the watch ends with wctx
			}
		}
		return nil, err
	}
	o.wg.Go(func() { o.follow(updates) })
	o.log.Info("zone: joined", "node", o.name, "id", reg.ID(), "lease_ttl", reg.TTL())
	return o, nil
}

// follow installs every table version the watch delivers, in order, until
// the watch ends with the registration (fence or Close).
func (o *Ownership) follow(updates <-chan coord.RegionsUpdate) {
	for u := range updates {
		o.install(u.Table)
	}
	o.met.owned.Set(0)
	o.met.fenced.Set(1)
	if !o.closed.Load() {
		o.log.Warn("zone: fenced: lease lost, owning nothing", "node", o.name, "table_version", o.Version(), "err", o.reg.Err())
	}
}

func (o *Ownership) install(t *cells.Table) {
	if o.isFenced() {
		// Keep the last table held before the fence: nothing learnt after
		// it can authorise anything.
		return
	}
	old := o.cur.Load()
	if t.Version() <= old.version() {
		return // coord delivers in increasing order; a stale one never replaces
	}
	h := newHeld(t, o.name)
	// The gauges first: whoever waits for this version (WaitVersion) sees
	// them set.
	o.met.version.Set(float64(t.Version()))
	o.met.owned.Set(float64(len(h.regions)))
	o.cur.Store(h)
	close(old.next)

	ch := Change{Old: old.table, New: t}
	if old.table != nil && old.table.Grid() == t.Grid() {
		for r := range h.owned {
			switch {
			case h.owned[r] && !old.owned[r]:
				ch.Gained = append(ch.Gained, cells.RegionID(r))
			case !h.owned[r] && old.owned[r]:
				ch.Lost = append(ch.Lost, cells.RegionID(r))
			}
		}
	} else {
		ch.Lost = append([]cells.RegionID(nil), old.regions...)
		ch.Gained = append([]cells.RegionID(nil), h.regions...)
	}
	o.log.Info("zone: region table held", "node", o.name, "old_version", ch.OldVersion(), "version", t.Version(),
		"owned", len(h.regions), "gained", len(ch.Gained), "lost", len(ch.Lost))
	if o.onChange != nil {
		o.onChange(ch)
	}
}

// isFenced reports whether the node may no longer write: the lease is lost
// or the node was closed. It reads coord's channel, so it turns true the
// instant coord gives up, with no goroutine of ours in between.
func (o *Ownership) isFenced() bool {
	select {
	case <-o.reg.Lost():
		return true
	default:
		return o.closed.Load()
	}
}

// Name is the node's name, the one region tables use.
func (o *Ownership) Name() string { return o.name }

// NodeID is the node id leased with the name.
func (o *Ownership) NodeID() coord.NodeID { return o.reg.ID() }

// Lease is the etcd lease the node's membership lives under.
func (o *Ownership) Lease() int64 { return o.reg.LeaseID() }

// Context is cancelled the moment the node is fenced or closed. Derive
// every write's context from it.
func (o *Ownership) Context() context.Context { return o.reg.Context() }

// Fenced is closed when the node may no longer write: its lease was lost
// (expired, revoked, or not renewed in time) or it was closed. It never
// reopens.
func (o *Ownership) Fenced() <-chan struct{} { return o.reg.Lost() }

// Err is nil while the node may write; then a *zone.FencedError (zone.ErrFenced) if
// the lease was lost, or an error matching zone.ErrClosed if it was closed.
//
// A node fenced first and closed later keeps reporting the fence: that is
// why it stopped.
func (o *Ownership) Err() error {
	cause := o.reg.Err()
	switch {
	case cause == nil && o.closed.Load():
		return zone.ErrClosed // Close has begun; the registration ends next
	case cause == nil:
		return nil
	case errors.Is(cause, coord.ErrMemberClosed):
		if o.closed.Load() {
			return zone.ErrClosed
		}
		// Closed under us, by the coord client's Close.
		return zone.ErrClosed.Wrap("%v", cause)
	}
	return &zone.FencedError{Node: o.name, TableVersion: o.Version(), Cause: cause}
}

// Table returns the region table the node holds, nil before the first
// version arrives. After the fence it is the last one held before it.
func (o *Ownership) Table() *cells.Table { return o.cur.Load().table }

// Version is the version of the held table, 0 if none.
func (o *Ownership) Version() uint64 { return o.cur.Load().version() }

// Owns reports whether the held table gives region r to this node and the
// node is not fenced. A region newly given by the operator is not owned
// until the watch delivered the version that gives it.
func (o *Ownership) Owns(r cells.RegionID) bool {
	if o.isFenced() {
		return false
	}
	h := o.cur.Load()
	return r >= 0 && int(r) < len(h.owned) && h.owned[r]
}

// OwnedRegions returns the regions Owns is true for, ascending (a fresh
// slice; nil when fenced or holding no table).
func (o *Ownership) OwnedRegions() []cells.RegionID {
	if o.isFenced() {
		return nil
	}
	return append([]cells.RegionID(nil), o.cur.Load().regions...)
}

// OwnerOf returns the node the held table derives as the owner of p, ""
// if no table is held. It is a derivation for routing, not a permission:
// after the fence it still answers from the last table held, which may
// name this node (use Owns or CheckWrite for "may I write").
func (o *Ownership) OwnerOf(p torus.Pos) string {
	t := o.cur.Load().table
	if t == nil {
		return ""
	}
	return t.OwnerOf(p)
}

// CheckWrite asks for permission to write in region r. It returns the
// Grant naming the table version that allows it, or *zone.FencedError
// (zone.ErrFenced) once the lease is lost, zone.ErrClosed after Close, zone.ErrNoTable
// before the first table, or *zone.NotOwnerError (ErrNotOwner) naming the owner
// the held table derives.
func (o *Ownership) CheckWrite(r cells.RegionID) (Grant, error) {
	if o.isFenced() {
		return Grant{}, o.Err()
	}
	h := o.cur.Load()
	if h.table == nil {
		return Grant{}, zone.ErrNoTable.Wrap("node %q", o.name)
	}
	if r < 0 || int(r) >= len(h.owned) {
		return Grant{}, &zone.NotOwnerError{Node: o.name, Region: r, TableVersion: h.version()}
	}
	if !h.owned[r] {
		return Grant{}, &zone.NotOwnerError{Node: o.name, Region: r, Owner: h.table.Owner(r), TableVersion: h.version()}
	}
	return Grant{Node: o.name, Region: r, TableVersion: h.version(), Lease: o.reg.LeaseID()}, nil
}

// WaitVersion returns when the node holds a table of version v or later,
// or with ctx's cause, or with Err once the node is fenced or closed.
func (o *Ownership) WaitVersion(ctx context.Context, v uint64) error {
	for {
		h := o.cur.Load()
		if h.table != nil && h.version() >= v {
			return nil
		}
		select {
		case <-h.next:
		case <-o.reg.Lost():
			return o.Err()
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Close fences the node (Owns turns false, Fenced closes), revokes its
// lease so its name and id are freed at once, and returns after the
// goroutine that follows the table has stopped. It does not close the
// coord client. Idempotent.
func (o *Ownership) Close() error {
	o.closeOnce.Do(func() {
		o.closed.Store(true)
		_ = o.reg.Close()
		o.stopWatch()
		o.wg.Wait()
		o.log.Info("zone: closed", "node", o.name)
	})
	return nil
}
