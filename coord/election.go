package coord

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/nodename"
)

// CampaignConfig names an election and what the winner publishes.
type CampaignConfig struct {
	// Election names the election (nodename rules: "zone-failover").
	// Candidates of one election share its name under the client's prefix.
	// Required.
	Election string
	// Value is what Leader reports while this candidate leads: normally
	// the node's name. Required.
	Value string
	// TTL is the candidacy's own lease, whole seconds: a leader that stops
	// renewing it (dead, cut off) is replaced TTL after its last renewal.
	// Default 0: 10s, as a registration's.
	TTL time.Duration
}

// Validate reports the first field that cannot work.
func (c CampaignConfig) Validate() error {
	if err := nodename.Check("CampaignConfig.Election", c.Election); err != nil {
		return err
	}
	if c.Value == "" {
		return errcode.Config("CampaignConfig.Value", c.Value, "required: what Leader reports (the node's name)")
	}
	if c.TTL != 0 && (c.TTL < time.Second || c.TTL%time.Second != 0) {
		return errcode.Config("CampaignConfig.TTL", c.TTL, "must be 0 (the default) or a whole number of seconds, at least 1s")
	}
	return nil
}

// Leadership is a won election (Client.Campaign): held while its lease
// lives, ended by Resign, by the lease expiring (the process stalled or
// lost etcd), or by the client closing. Writes made as the leader are
// fenced by ApplyOptions.Leader, so a leader that lost its lease and does
// not know it yet cannot write.
type Leadership struct {
	c        *Client
	sess     *concurrency.Session
	el       *concurrency.Election
	election string
	value    string
	once     sync.Once
}

// electionPrefix is where the candidates of election name keep their keys.
func (c *Client) electionPrefix(name string) string { return c.prefix + "elections/" + name + "/" }

// Campaign blocks until this candidate leads the election, then returns
// its Leadership; it returns an error only when ctx ends, the client
// closes or etcd is unreachable (no candidacy is left behind then). It is
// etcd's election (client/v3/concurrency): candidates queue by the
// revision of their key, each under its own lease, and the oldest live one
// leads; a leader's key goes when its lease does, and the next one leads.
func (c *Client) Campaign(ctx context.Context, cfg CampaignConfig) (*Leadership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	// The lease is granted under ctx (NewSession would grant it under the
	// session's context, and wait for an unreachable etcd past ctx). The
	// session's context is the client's, not ctx: the leadership must
	// outlive the call that won it, and Close (or Resign) ends it.
	lease, err := c.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrUnavailable.Wrap("election %q: grant a lease: %v", cfg.Election, err)
	}
	sess, err := concurrency.NewSession(c.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(c.ctx))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		_, _ = c.cli.Revoke(rctx, lease.ID)
		cancel()
		return nil, ErrUnavailable.Wrap("election %q: start a session: %v", cfg.Election, err)
	}
	el := concurrency.NewElection(sess, c.electionPrefix(cfg.Election))
	// etcd's Campaign, when its ctx ends, resigns with the etcd client's
	// own context, which blocks while etcd is unreachable (until the
	// client closes). So it runs in a goroutine of its own, joined by
	// Close after the etcd client is closed, and Campaign returns at once
	// when ctx ends; a leadership won after that is given up there.
	done := make(chan error)
	abandon := make(chan struct{})
	if !c.goCampaign(func() {
		err := el.Campaign(ctx, cfg.Value)
		if err != nil {
			_ = sess.Close() // revokes the lease, so no candidacy is left queued
		}
		select {
		case done <- err:
		case <-abandon:
			if err == nil {
				_ = sess.Close()
			}
		}
	}) {
		_ = sess.Close()
		return nil, ErrUnavailable.Wrap("client is closed")
	}
	select {
	case err := <-done:
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, ErrUnavailable.Wrap("election %q: campaign: %v", cfg.Election, err)
		}
	case <-ctx.Done():
		close(abandon)
		return nil, ctx.Err()
	}
	l := &Leadership{c: c, sess: sess, el: el, election: cfg.Election, value: cfg.Value}
	if !c.trackLeader(l) {
		_ = sess.Close()
		return nil, ErrUnavailable.Wrap("client is closed")
	}
	c.log.Info("coord: won election", "election", cfg.Election, "value", cfg.Value, "lease", int64(sess.Lease()))
	return l, nil
}

// Done is closed when the leadership has ended (Resign, the lease lost,
// the client closed). It may close a little after etcd freed the key: a
// leader must also fence its writes (ApplyOptions.Leader).
func (l *Leadership) Done() <-chan struct{} { return l.sess.Done() }

// Value is what this leader published.
func (l *Leadership) Value() string { return l.value }

// Resign gives the leadership up at once: the next candidate leads without
// waiting for a lease to expire. Idempotent.
func (l *Leadership) Resign() error {
	var err error
	l.once.Do(func() {
		l.c.untrackLeader(l)
		// Revoking the lease deletes the key; that is the resignation.
		if cerr := l.sess.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = ErrUnavailable.Wrap("election %q: resign: %v", l.election, cerr)
		}
	})
	return err
}

// isLeader is the compare that holds only while this leadership's key is
// the one etcd created for it: a write fenced by it cannot land after the
// lease ended.
func (l *Leadership) isLeader() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.el.Key()), "=", l.el.Rev())
}

// Leader returns the value the current leader of election published, or
// ErrNoLeader.
func (c *Client) Leader(ctx context.Context, election string) (string, error) {
	if err := c.checkOpen(); err != nil {
		return "", err
	}
	resp, err := c.cli.Get(ctx, c.electionPrefix(election), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", ErrUnavailable.Wrap("election %q: read the leader: %v", election, err)
	}
	if len(resp.Kvs) == 0 {
		return "", ErrNoLeader
	}
	return string(resp.Kvs[0].Value), nil
}

// goCampaign runs f in a goroutine that Close joins after closing the etcd
// client (which is what unblocks it); false once Close has begun.
func (c *Client) goCampaign(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.campaigns.Go(f)
	return true
}

// trackLeader adds a live leadership, resigned by Close; false once Close
// has begun.
func (c *Client) trackLeader(l *Leadership) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.leaders == nil {
		c.leaders = make(map[*Leadership]struct{})
	}
	c.leaders[l] = struct{}{}
	return true
}

func (c *Client) untrackLeader(l *Leadership) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.leaders, l)
}
