package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardwise/shardwise/nodename"
)

// NodeID is a node's cluster-unique number, leased from etcd. It fits in a
// byte so it can be the node part of snowflake-style ids.
type NodeID uint8

// MaxNodeID is the largest node id; ids run 0..MaxNodeID.
const MaxNodeID = 255

// NodeIDCount is how many node ids exist.
const NodeIDCount = MaxNodeID + 1

func (id NodeID) String() string { return strconv.Itoa(int(id)) }

// Member is one live node as etcd records it. The record exists exactly as
// long as the node's lease: it is written under the lease and deleted by
// etcd when the lease ends.
type Member struct {
	ID NodeID `json:"id"`
	// Name is the node's stable name, the one region tables use to say who
	// owns a region. Like the id it is held exclusively under the lease.
	Name string `json:"name"`
	// Role says what the node does ("zone", "econ", …).
	Role string `json:"role"`
	// Addrs are the node's named addresses ("link": "10.0.0.5:7100").
	Addrs map[string]string `json:"addrs,omitempty"`
	// Meta is free-form metadata (build, region hint, …).
	Meta map[string]string `json:"meta,omitempty"`
	// Lease is the etcd lease the record lives under.
	Lease int64 `json:"lease"`
	// JoinedAt is the node's own clock when it registered; informational.
	JoinedAt time.Time `json:"joined_at"`
	// Incarnation is the etcd revision at which this node claimed its id.
	// It is not stored in the value but read from etcd: every claim of an
	// id gets a larger one, so it tells two holders of the same id apart.
	Incarnation int64 `json:"-"`
}

// maxMemberRecord bounds a member record we are willing to decode; etcd
// caps values at 1.5 MiB by default, a member record is a few hundred bytes.
const maxMemberRecord = 64 << 10

// encodeMember returns the stored form of m.
func encodeMember(m Member) ([]byte, error) {
	return json.Marshal(m)
}

// decodeMember parses a stored member record. The bytes come from etcd, which
// anyone with access can write, so everything is checked.
func decodeMember(b []byte) (Member, error) {
	var m Member
	if len(b) > maxMemberRecord {
		return m, fmt.Errorf("coord: member record of %d bytes exceeds %d", len(b), maxMemberRecord)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var raw struct {
		ID       *int              `json:"id"`
		Name     string            `json:"name"`
		Role     string            `json:"role"`
		Addrs    map[string]string `json:"addrs"`
		Meta     map[string]string `json:"meta"`
		Lease    int64             `json:"lease"`
		JoinedAt time.Time         `json:"joined_at"`
	}
	if err := dec.Decode(&raw); err != nil {
		return m, fmt.Errorf("coord: decode member record: %w", err)
	}
	if dec.More() {
		return m, fmt.Errorf("coord: decode member record: trailing data")
	}
	if raw.ID == nil {
		return m, fmt.Errorf("coord: member record has no id")
	}
	if *raw.ID < 0 || *raw.ID > MaxNodeID {
		return m, fmt.Errorf("coord: member record id %d outside 0..%d", *raw.ID, MaxNodeID)
	}
	if err := nodename.Check("name", raw.Name); err != nil {
		return m, fmt.Errorf("coord: member record %d: %w", *raw.ID, err)
	}
	if raw.Role == "" {
		return m, fmt.Errorf("coord: member record %d has no role", *raw.ID)
	}
	m = Member{
		ID:       NodeID(*raw.ID),
		Name:     raw.Name,
		Role:     raw.Role,
		Addrs:    raw.Addrs,
		Meta:     raw.Meta,
		Lease:    raw.Lease,
		JoinedAt: raw.JoinedAt,
	}
	return m, nil
}

// memberFromKV decodes a member record and checks that it sits under the key
// of its own id (a record copied to another key is not that member).
func (c *Client) memberFromKV(kv *mvccpb.KeyValue) (Member, error) {
	m, err := decodeMember(kv.Value)
	if err != nil {
		return m, fmt.Errorf("%w (key %s)", err, kv.Key)
	}
	if string(kv.Key) != c.memberKey(m.ID) {
		return m, fmt.Errorf("coord: member record for id %d stored under key %s", m.ID, kv.Key)
	}
	m.Incarnation = kv.CreateRevision
	return m, nil
}

// Members lists the live members, ordered by node id.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	ms, _, err := c.members(ctx)
	return ms, err
}

func (c *Client) members(ctx context.Context) ([]Member, int64, error) {
	if err := c.checkOpen(); err != nil {
		return nil, 0, err
	}
	resp, err := c.cli.Get(ctx, c.membersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, ErrUnavailable.Wrap("list members: %v", err)
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := c.memberFromKV(kv)
		if err != nil {
			c.log.Warn("coord: skipping unreadable member record", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out, resp.Header.Revision, nil
}

// MembershipEventKind says what happened to a member.
type MembershipEventKind int

const (
	// MemberJoined: a node claimed an id (or was already live when the
	// watch started).
	MemberJoined MembershipEventKind = iota + 1
	// MemberUpdated: a live node changed its addresses or metadata.
	MemberUpdated
	// MemberLeft: the node's lease ended (closed, expired or revoked).
	MemberLeft
)

func (k MembershipEventKind) String() string {
	switch k {
	case MemberJoined:
		return "joined"
	case MemberUpdated:
		return "updated"
	case MemberLeft:
		return "left"
	default:
		return "MembershipEventKind(" + strconv.Itoa(int(k)) + ")"
	}
}

// MembershipEvent is one change of membership. For MemberLeft, Member is the
// last record the watcher knew.
type MembershipEvent struct {
	Kind     MembershipEventKind
	Member   Member
	Revision int64 // etcd revision of the change
}

// WatchMembers returns a channel that first delivers MemberJoined for every
// live member, then every change, in etcd's order. A watch broken while
// etcd keeps the history resumes where it stopped, so no change is missed.
// If etcd has compacted history past the watch, the watcher re-lists and
// delivers the difference (a node that joined and left inside the
// compacted range is not reported), so the sequence of events always leads
// to the true member set. The channel is
// closed when ctx ends or the client closes; read it until then.
func (c *Client) WatchMembers(ctx context.Context) (<-chan MembershipEvent, error) {
	initial, rev, err := c.members(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan MembershipEvent)
	err = c.goWithClient(ctx, func(ctx context.Context) {
		defer close(out)
		known := make(map[NodeID]Member, len(initial))
		send := func(ev MembershipEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, m := range initial {
			known[m.ID] = m
			if !send(MembershipEvent{Kind: MemberJoined, Member: m, Revision: rev}) {
				return
			}
		}
		for ctx.Err() == nil {
			var werr error
			rev, werr = c.watchMembersFrom(ctx, rev, known, send)
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(werr, rpctypes.ErrCompacted) {
				// The watch broke but etcd still has the history (no
				// leader, a cut stream): resume after the last revision
				// handled, so every change is still reported. Paced,
				// because a member without a leader fails a new watch at
				// once.
				if !c.pause(ctx, watchRetryPause) {
					return
				}
				continue
			}
			// The changes after rev are compacted away: re-list and send
			// what changed while we were not looking.
			now, nowRev, err := c.members(ctx)
			if err != nil {
				c.log.Warn("coord: member watch: re-list failed, retrying", "err", err)
				if !c.pause(ctx, watchRetryPause) {
					return
				}
				continue
			}
			for _, ev := range diffMembers(known, now, nowRev) {
				if !send(ev) {
					return
				}
			}
			rev = nowRev
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// watchMembersFrom watches member keys after rev, updating known and sending
// events, and returns the last revision handled and the error that broke the
// watch (nil if it just ended).
func (c *Client) watchMembersFrom(ctx context.Context, rev int64, known map[NodeID]Member, send func(MembershipEvent) bool) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	if c.beforeWatch != nil {
		if err := c.beforeWatch(); err != nil {
			return rev, err
		}
	}
	wch := c.cli.Watch(wctx, c.membersPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			c.log.Warn("coord: member watch interrupted", "err", err, "revision", rev)
			return rev, err
		}
		for _, ev := range resp.Events {
			var out MembershipEvent
			switch ev.Type {
			case clientv3.EventTypePut:
				m, err := c.memberFromKV(ev.Kv)
				if err != nil {
					c.log.Warn("coord: skipping unreadable member record", "key", string(ev.Kv.Key), "err", err)
					continue
				}
				kind := MemberJoined
				if old, ok := known[m.ID]; ok {
					if old.Incarnation == m.Incarnation {
						kind = MemberUpdated
					} else if !send(MembershipEvent{Kind: MemberLeft, Member: old, Revision: ev.Kv.ModRevision}) {
						// A new holder without a delete in between cannot
						// come from etcd's watch, but if it did, the
						// old holder has left.
						return rev, nil
					}
				}
				known[m.ID] = m
				out = MembershipEvent{Kind: kind, Member: m, Revision: ev.Kv.ModRevision}
			case clientv3.EventTypeDelete:
				id, ok := c.idFromMemberKey(ev.Kv.Key)
				if !ok {
					continue
				}
				m, had := known[id]
				if !had {
					continue
				}
				delete(known, id)
				out = MembershipEvent{Kind: MemberLeft, Member: m, Revision: ev.Kv.ModRevision}
			}
			if !send(out) {
				return rev, nil
			}
		}
		rev = resp.Header.Revision
	}
	return rev, nil
}

func (c *Client) idFromMemberKey(key []byte) (NodeID, bool) {
	p := c.membersPrefix()
	if !bytes.HasPrefix(key, []byte(p)) {
		return 0, false
	}
	n, err := strconv.Atoi(string(key[len(p):]))
	if err != nil || n < 0 || n > MaxNodeID {
		return 0, false
	}
	return NodeID(n), true
}

// diffMembers turns the difference between known and now into events and
// updates known to now.
func diffMembers(known map[NodeID]Member, now []Member, rev int64) []MembershipEvent {
	var evs []MembershipEvent
	present := make(map[NodeID]bool, len(now))
	for _, m := range now {
		present[m.ID] = true
		old, ok := known[m.ID]
		switch {
		case !ok:
			evs = append(evs, MembershipEvent{Kind: MemberJoined, Member: m, Revision: rev})
		case old.Incarnation != m.Incarnation:
			// The id changed hands while we were not watching.
			evs = append(evs, MembershipEvent{Kind: MemberLeft, Member: old, Revision: rev})
			evs = append(evs, MembershipEvent{Kind: MemberJoined, Member: m, Revision: rev})
		case !sameMember(old, m):
			evs = append(evs, MembershipEvent{Kind: MemberUpdated, Member: m, Revision: rev})
		}
		known[m.ID] = m
	}
	for _, id := range slices.Sorted(maps.Keys(known)) {
		if !present[id] {
			evs = append(evs, MembershipEvent{Kind: MemberLeft, Member: known[id], Revision: rev})
			delete(known, id)
		}
	}
	return evs
}

func sameMember(a, b Member) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Role == b.Role && a.Lease == b.Lease &&
		maps.Equal(a.Addrs, b.Addrs) && maps.Equal(a.Meta, b.Meta) &&
		a.JoinedAt.Equal(b.JoinedAt) && a.Incarnation == b.Incarnation
}

// watchRetryPause paces re-reads after a watch broke and the re-read failed
// too (etcd down or without a leader).
const watchRetryPause = 500 * time.Millisecond

// pause waits d of real time (etcd's retry pacing, not ours to fake) or
// until ctx ends; it reports whether to go on.
func (c *Client) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
