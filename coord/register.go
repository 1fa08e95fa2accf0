package coord

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
)

// RegisterConfig describes the node that registers. Defaults are filled by
// withDefaults and documented per field.
type RegisterConfig struct {
	// Name is the node's stable name, the one region tables use and its
	// link certificate carries (nodename.Check rules). It is held exclusively under the lease:
	// while a node named "zone-a" lives, no other node can register as
	// "zone-a" (*NameTakenError). Default "node-<id>" with the claimed id,
	// which is only as stable as the id: set a Name in production.
	Name string
	// Role says what the node does ("zone", "econ", …). Required.
	Role string
	// Addrs are the node's named addresses, published to other members.
	Addrs map[string]string
	// Meta is free-form metadata published with the record.
	Meta map[string]string
	// TTL is the lease's time to live: how long after the node stops
	// renewing (crash, partition) its id and membership are freed. etcd
	// counts whole seconds and may raise a short TTL to its minimum (1.5
	// election timeouts); the granted TTL is what Registration.TTL reports.
	// Default 10s.
	TTL time.Duration
}

const (
	defaultTTL = 10 * time.Second
	// revokeTimeout bounds the lease revoke in Registration.Close. If it
	// does not get through, the lease simply expires after its TTL.
	revokeTimeout = 2 * time.Second
)

func (c RegisterConfig) withDefaults() RegisterConfig {
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	return c
}

// Validate reports the first field that cannot work, after defaults.
func (c RegisterConfig) Validate() error {
	c = c.withDefaults()
	if c.Name != "" {
		if err := nodename.Check("RegisterConfig.Name", c.Name); err != nil {
			return err
		}
	}
	if c.Role == "" {
		return errcode.Config("RegisterConfig.Role", c.Role, "required (for example \"zone\" or \"econ\")")
	}
	if c.TTL < time.Second {
		return errcode.Config("RegisterConfig.TTL", c.TTL, "must be at least 1s (etcd leases count whole seconds)")
	}
	if c.TTL%time.Second != 0 {
		return errcode.Config("RegisterConfig.TTL", c.TTL, "must be a whole number of seconds (etcd leases count whole seconds)")
	}
	return nil
}

// Registration is a node's membership: a leased node id and member record.
// While it lives, no other node can hold the same id. It ends when the lease
// is lost (expired, revoked, or not renewed within the TTL) or when Close is
// called; then Lost is closed and Context is cancelled, and the node must
// stop every write it was authorised to make as this member. When the lease
// runs out because renewals stopped getting through (a partition, etcd
// unreachable), this happens before etcd can let anyone else claim the id
// (see Deadline). A revoke by someone else frees the id at
// once; the node is told within a round trip, through a watch on its member
// key, and coord's own writes are refused by the compare on the lease. It
// never comes back: re-register.
type Registration struct {
	c     *Client
	clock clock.Clock
	id    NodeID
	name  string
	lease clientv3.LeaseID
	ttl   time.Duration
	key   string
	incar int64

	ctx    context.Context // cancelled with the reason when the registration ends
	cancel context.CancelCauseFunc
	lost   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	member   Member
	err      error     // why it ended; nil while live
	deadline time.Time // local time at which we give up: fenceDeadline of the last renewal

	closeOnce sync.Once
}

// Register grants a lease, claims the lowest free node id under it (falling
// back to a spread choice when other nodes race for the same ids), publishes
// the member record, and keeps the lease alive until Close or loss. It fails
// with *NodeIDsExhaustedError when all ids are held, or when it lost every
// one of a bounded number of claims to nodes registering at the same time.
func (c *Client) Register(ctx context.Context, cfg RegisterConfig) (_ *Registration, err error) {
	defer func() { c.met.registered(err) }()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := c.checkOpen(); err != nil {
		return nil, err
	}

	sent := c.clock.Now()
	grant, err := c.cli.Grant(ctx, int64(cfg.TTL/time.Second))
	if err != nil {
		return nil, ErrUnavailable.Wrap("grant lease: %v", err)
	}
	lease := grant.ID
	ttl := time.Duration(grant.TTL) * time.Second
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
		defer cancel()
		_, _ = c.cli.Revoke(rctx, lease)
	}

	m := Member{
		Role:     cfg.Role,
		Addrs:    maps.Clone(cfg.Addrs),
		Meta:     maps.Clone(cfg.Meta),
		Lease:    int64(lease),
		JoinedAt: sent,
	}
	m, err = c.claimID(ctx, lease, m, cfg.Name)
	if err != nil {
		revoke()
		return nil, err
	}
	id, incar := m.ID, m.Incarnation

	r := &Registration{
		c:     c,
		clock: c.clock,
		id:    id,
		name:  m.Name,
		lease: lease,
		ttl:   ttl,
		key:   c.memberKey(id),
		incar: incar,
		lost:  make(chan struct{}),
		// The grant was sent at `sent`; etcd started the TTL no earlier,
		// so until sent+ttl the lease is certainly alive. We give up a
		// guard earlier (see fenceDeadline).
		deadline: fenceDeadline(sent, ttl),
		member:   m,
	}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	if !r.clock.Now().Before(r.deadline) {
		// The claim took longer than the TTL: the lease may already be
		// gone, and with it our id.
		err := ErrLeaseLost.Wrap("registration took longer than the %v TTL", ttl)
		r.cancel(err)
		revoke()
		return nil, err
	}
	// Start the keepalive before the client can see r: Client.Close calls
	// r.Close, whose wg.Wait must not race this wg.Go.
	r.wg.Go(r.keepAlive)
	r.wg.Go(r.watchOwnKey)
	if err := c.track(r); err != nil {
		r.end(err)
		r.wg.Wait()
		revoke()
		return nil, err
	}
	c.log.Info("coord: registered", "node", id, "name", m.Name, "role", cfg.Role, "lease", fmt.Sprintf("%x", int64(lease)), "ttl", ttl)
	return r, nil
}

// maxClaimAttempts bounds how many id claims one registration tries (and
// loses) before it gives up with *NodeIDsExhaustedError. Losing is normal
// when nodes boot together: after the first attempt claimers spread over
// the free ids (pickFree), so each further loss is unlikely, and 32 in a
// row means something other than bad luck (a few hundred nodes booting at
// once, or every free id's derived name squatted by a named member).
const maxClaimAttempts = 32

// claimID takes a free node id, and the node's name, under lease with one
// transaction that succeeds only if neither key exists: two claimers can
// never both win an id or a name. It returns m completed with id, name and
// incarnation.
//
// With no name given, the name is derived from the id ("node-<id>"), so a
// claimer that loses the race for an id also finds "its" name taken: that
// is a lost race, and it tries another id. An explicit name that is held
// is the one failure no other id can fix (*NameTakenError).
func (c *Client) claimID(ctx context.Context, lease clientv3.LeaseID, m Member, name string) (Member, error) {
	// lost holds the ids this registration claimed and lost. One that
	// still looks free at the next read had its derived name held by a
	// member that chose the name explicitly; trying it again would lose
	// again.
	var lost [NodeIDCount]bool
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return m, ErrUnavailable.Wrap("claim node id: %v", context.Cause(ctx))
		}
		resp, err := c.cli.Get(ctx, c.membersPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return m, ErrUnavailable.Wrap("claim node id: list members: %v", err)
		}
		var taken [NodeIDCount]bool
		n := 0
		for _, kv := range resp.Kvs {
			if id, ok := c.idFromMemberKey(kv.Key); ok && !taken[id] {
				taken[id] = true
				n++
			}
		}
		free := make([]NodeID, 0, NodeIDCount-n)
		for i := range NodeIDCount {
			if !taken[i] && !lost[i] {
				free = append(free, NodeID(i))
			}
		}
		if len(free) == 0 || attempt == maxClaimAttempts {
			return m, &NodeIDsExhaustedError{Role: m.Role, Taken: n, Free: NodeIDCount - n, Attempts: attempt}
		}
		m.ID = pickFree(free, lease, attempt)
		m.Name = name
		if m.Name == "" {
			m.Name = defaultName(m.ID)
		}
		val, err := encodeMember(m)
		if err != nil {
			return m, fmt.Errorf("coord: encode member record: %w", err)
		}
		idKey, nameKey := c.memberKey(m.ID), c.nameKey(m.Name)
		txn, err := c.cli.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(idKey), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(nameKey), "=", 0),
			).
			Then(
				clientv3.OpPut(idKey, string(val), clientv3.WithLease(lease)),
				clientv3.OpPut(nameKey, m.ID.String(), clientv3.WithLease(lease)),
			).
			Else(clientv3.OpGet(nameKey)).
			Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return m, ErrLeaseLost.Wrap("lease expired while claiming a node id")
			}
			return m, ErrUnavailable.Wrap("claim node id %d: %v", m.ID, err)
		}
		if txn.Succeeded {
			m.Incarnation = txn.Header.Revision
			return m, nil
		}
		if kvs := txn.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 && name != "" {
			return m, &NameTakenError{Name: m.Name, HeldBy: string(kvs[0].Value)}
		}
		// Someone claimed the id (and with it, for a derived name, the
		// name) between our read and our write, or holds the derived name
		// under another id: look again, elsewhere.
		lost[m.ID] = true
		c.log.Debug("coord: node id claim lost; trying another", "node", m.ID, "name", m.Name, "attempt", attempt+1)
	}
}

func defaultName(id NodeID) string { return "node-" + id.String() }

// pickFree chooses which free id to try. The first attempt takes the lowest
// (ids stay small and stable in a quiet cluster); after losing a race it
// spreads claimers over the free ids by their lease, so many nodes booting
// together do not all fight over the same lowest id again and again.
func pickFree(free []NodeID, lease clientv3.LeaseID, attempt int) NodeID {
	if attempt == 0 {
		return free[0]
	}
	h := fnv.New64a()
	var b [16]byte
	for i := range 8 {
		b[i] = byte(uint64(lease) >> (8 * i))
		b[8+i] = byte(uint64(attempt) >> (8 * i))
	}
	_, _ = h.Write(b[:])
	return free[h.Sum64()%uint64(len(free))]
}

// ID is the node id this registration holds.
func (r *Registration) ID() NodeID { return r.id }

// Incarnation is the etcd revision of the id claim; larger for every later
// claim of any id, so it orders holders of the same id.
func (r *Registration) Incarnation() int64 { return r.incar }

// LeaseID is the etcd lease the registration lives under.
func (r *Registration) LeaseID() int64 { return int64(r.lease) }

// TTL is the lease TTL etcd granted.
func (r *Registration) TTL() time.Duration { return r.ttl }

// Member returns the record as last published.
func (r *Registration) Member() Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.member
	m.Addrs = maps.Clone(m.Addrs)
	m.Meta = maps.Clone(m.Meta)
	return m
}

// Lost is closed when the registration ends, by loss or by Close.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// Context is cancelled when the registration ends; context.Cause gives the
// reason (ErrLeaseLost or ErrMemberClosed). Derive every write's context
// from it so in-flight work stops with the fence.
func (r *Registration) Context() context.Context { return r.ctx }

// Err is nil while the registration lives, then why it ended: an error
// matching ErrLeaseLost or ErrMemberClosed.
func (r *Registration) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Deadline is the local time at which the registration gives up unless a
// renewal gets through first: the send time of the last successful renewal
// plus nine tenths of the TTL. etcd cannot expire the lease before that
// send time plus the whole TTL, so the node is told with a tenth of the TTL
// to spare. Past it, the registration is lost even if etcd cannot be asked.
func (r *Registration) Deadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadline
}

// Update replaces the published addresses and metadata. The write is fenced:
// it succeeds only while this registration's lease still holds the id.
func (r *Registration) Update(ctx context.Context, addrs, meta map[string]string) error {
	if err := r.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	m := r.member
	r.mu.Unlock()
	m.Addrs = maps.Clone(addrs)
	m.Meta = maps.Clone(meta)
	if err := r.putFenced(ctx, m); err != nil {
		return err
	}
	r.mu.Lock()
	r.member = m
	r.mu.Unlock()
	return nil
}

// putFenced writes m as this member's record, in etcd only if this
// registration's lease still holds the id, whatever the local state says:
// the local flag can lag behind etcd, the compare cannot.
func (r *Registration) putFenced(ctx context.Context, m Member) error {
	val, err := encodeMember(m)
	if err != nil {
		return fmt.Errorf("coord: encode member record: %w", err)
	}
	txn, err := r.c.cli.Txn(ctx).
		If(r.holdsID()).
		Then(clientv3.OpPut(r.key, string(val), clientv3.WithLease(r.lease))).
		Commit()
	if err != nil {
		return ErrUnavailable.Wrap("update member %d: %v", r.id, err)
	}
	if !txn.Succeeded {
		return ErrLeaseLost.Wrap("node id %d is no longer held by lease %x", r.id, int64(r.lease))
	}
	return nil
}

// holdsID is the compare that fences writes made as this member.
func (r *Registration) holdsID() clientv3.Cmp {
	return clientv3.Compare(clientv3.LeaseValue(r.key), "=", r.lease)
}

// Close ends the registration: Lost is closed first (the node stops
// writing), then, if the registration was still live, the lease is revoked
// so the id and member record are freed at once instead of after the TTL.
// Idempotent; returns after the keepalive goroutine has stopped.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() {
		wasLive := r.end(ErrMemberClosed)
		r.wg.Wait()
		defer r.c.untrack(r)
		if !wasLive {
			// Lost already: etcd said the lease is gone, or no renewal got
			// through and etcd expires it within the fence guard of our
			// giving up. A revoke would free nothing sooner, and with etcd
			// out of reach it would only hold Close up for revokeTimeout.
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
		defer cancel()
		if _, err := r.c.cli.Revoke(ctx, r.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.c.log.Debug("coord: revoke lease on close failed; it will expire after its TTL", "node", r.id, "err", err)
		}
	})
	return nil
}

// end records why the registration ended, closes Lost and cancels Context.
// Only the first call counts; it reports whether this call was it.
func (r *Registration) end(cause error) bool {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return false
	}
	r.err = cause
	// Under mu, as keepAlive's setHeadroom is: no series can reappear for
	// a registration that has ended.
	r.c.met.forgetNode(r.name)
	r.mu.Unlock()
	// Context first: whoever sees Lost closed also sees Context done.
	r.cancel(cause)
	close(r.lost)
	return true
}

// fenceGuardDivisor sets the guard between the local fence deadline and the
// earliest moment etcd can expire the lease: the registration gives up
// TTL/fenceGuardDivisor before "sent + TTL". "sent + TTL" alone is exact
// only if our timer fires on time, the node's clock runs no slower than
// etcd's, and the node stops writing the instant it is told; none of these
// holds on a loaded machine (a timer delivered late under CPU starvation, a
// GC pause, clock-rate skew). A tenth of the TTL (100ms at etcd's 1s
// minimum, 1s at the 10s default) absorbs that, and costs nothing while
// renewals succeed: two more renewals (every TTL/3) still fit before it.
const fenceGuardDivisor = 10

// fenceDeadline is the local time at which a lease renewed (or granted) by
// a request sent at sent, for ttl, must be given up.
func fenceDeadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/fenceGuardDivisor)
}

type renewal struct {
	sent time.Time
	ttl  time.Duration
	err  error
}

// keepAlive renews the lease every TTL/3 and ends the registration when the
// lease is gone or the local deadline passes without a renewal.
//
// Why not clientv3's KeepAlive: it moves its deadline to "response received
// + TTL" and checks it every 500ms, so a partitioned node can believe it
// holds its id after etcd has already expired the lease and handed the id to
// another node. Here the deadline is "request sent + TTL − guard": etcd
// renews on receipt, which is later, so the node always gives up first, with
// the guard to spare (fenceGuardDivisor).
func (r *Registration) keepAlive() {
	interval := r.ttl / 3
	results := make(chan renewal, 1)
	var renewWG sync.WaitGroup
	defer renewWG.Wait()

	renewTimer := r.clock.NewTimer(interval)
	defer renewTimer.Stop()
	fence := r.clock.NewTimer(r.Deadline().Sub(r.clock.Now()))
	defer fence.Stop()
	inFlight := false

	for {
		select {
		case <-r.ctx.Done():
			return

		case <-fence.C():
			left := r.Deadline().Sub(r.clock.Now())
			if left <= 0 {
				if r.end(ErrLeaseLost.Wrap("node %d: lease %x not renewed within its %v TTL (etcd unreachable)", r.id, int64(r.lease), r.ttl)) {
					r.c.log.Warn("coord: lease not renewed within its TTL; giving up node id", "node", r.id, "ttl", r.ttl)
					r.c.met.leaseLost(LostUnreachable)
				}
				return
			}
			fence.Reset(left)

		case <-renewTimer.C():
			renewTimer.Reset(interval)
			if inFlight {
				continue
			}
			inFlight = true
			sent := r.clock.Now()
			renewWG.Go(func() {
				// Each attempt is bounded by the renew interval so a
				// stuck request does not hold back a fresh one (whose
				// send time would give a later deadline).
				ctx, cancel := context.WithTimeout(r.ctx, interval)
				defer cancel()
				resp, err := r.c.cli.KeepAliveOnce(ctx, r.lease)
				res := renewal{sent: sent, err: err}
				if err == nil {
					res.ttl = time.Duration(resp.TTL) * time.Second
				}
				results <- res
			})

		case res := <-results:
			inFlight = false
			r.c.met.renewal(res.err == nil)
			if res.err != nil {
				if errors.Is(res.err, rpctypes.ErrLeaseNotFound) {
					if r.end(ErrLeaseLost.Wrap("node %d: lease %x expired in etcd", r.id, int64(r.lease))) {
						r.c.log.Warn("coord: lease expired in etcd; giving up node id", "node", r.id)
						r.c.met.leaseLost(LostExpired)
					}
					return
				}
				// Transient: the fence timer decides when to give up.
				r.c.log.Debug("coord: lease renewal failed; will retry", "node", r.id, "err", res.err)
				continue
			}
			r.mu.Lock()
			if r.err == nil {
				if d := fenceDeadline(res.sent, res.ttl); d.After(r.deadline) {
					r.deadline = d
				}
				r.c.met.setHeadroom(r.name, r.deadline.Sub(r.clock.Now()).Seconds())
			}
			r.mu.Unlock()
		}
	}
}

// watchOwnKey ends the registration as soon as etcd removes the member key
// or the key stops being ours (a revoke by an operator, an expiry noticed by
// etcd before our fence, a record overwritten around coord). Renewals would
// notice too, but only up to TTL/3 later; the watch tells the node within a
// round trip. Writes stay fenced in etcd either way (holdsID); this only
// shortens how long the node keeps working for nothing. While etcd is out of
// reach the watch waits and the fence deadline decides.
func (r *Registration) watchOwnKey() {
	rev := r.incar
	for r.ctx.Err() == nil {
		var ok bool
		if rev, ok = r.watchOwnKeyFrom(rev); !ok {
			return
		}
		if r.ctx.Err() != nil {
			return
		}
		// The watch broke (compaction past rev, or the client closing):
		// look at the key itself, then watch again from there.
		resp, err := r.c.cli.Get(r.ctx, r.key)
		if err != nil {
			if !r.c.pause(r.ctx, watchRetryPause) {
				return
			}
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].Lease != int64(r.lease) {
			r.ownKeyGone(resp.Header.Revision)
			return
		}
		rev = resp.Header.Revision
	}
}

// watchOwnKeyFrom watches the member key after rev. It returns false once
// the registration has ended (by this watch or otherwise), else the last
// revision handled when the watch broke.
func (r *Registration) watchOwnKeyFrom(rev int64) (int64, bool) {
	wctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	for resp := range r.c.cli.Watch(wctx, r.key, clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			r.c.log.Debug("coord: member key watch interrupted", "node", r.id, "err", err)
			return rev, true
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete || ev.Kv.Lease != int64(r.lease) {
				r.ownKeyGone(ev.Kv.ModRevision)
				return rev, false
			}
		}
		rev = resp.Header.Revision
	}
	return rev, r.ctx.Err() == nil
}

func (r *Registration) ownKeyGone(rev int64) {
	if r.end(ErrLeaseLost.Wrap("node %d: member key no longer held by lease %x (revision %d): lease revoked or expired", r.id, int64(r.lease), rev)) {
		r.c.log.Warn("coord: member key removed in etcd; giving up node id", "node", r.id)
		r.c.met.leaseLost(LostExpired)
	}
}

// WaitNameFree returns once no live member holds name (at once if none
// does), or with ctx's error. A node restarting after a crash uses it before
// Register: its previous incarnation's lease holds the name for up to one
// TTL. Another node may still win the name between the wait and Register;
// Register then fails with *NameTakenError, never with a clash. A name no
// node could register with (nodename.Check) is refused at once with a
// configuration error.
func (c *Client) WaitNameFree(ctx context.Context, name string) error {
	if err := nodename.Check("name", name); err != nil {
		return err // no member can hold it: waiting would be forever or a mistake
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	key := c.nameKey(name)
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return ErrUnavailable.Wrap("read name %q: %v", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return ErrUnavailable.Wrap("watch name %q: %v", name, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	return ErrUnavailable.Wrap("watch name %q ended", name)
}
