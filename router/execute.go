package router

import (
	"context"

	"github.com/shardwise/shardwise/errcode"
)

// Route returns the leader of key and its client. It takes no lock and does
// not allocate, except in the moment between a call seeing the leader fail
// and the placement without it being published: then it answers with the
// next live owner.
func (r *Router[C]) Route(key string) (Route[C], error) {
	s := r.snap.Load()
	if s.closed {
		return Route[C]{}, ErrClosed
	}
	id, ok := s.placement.Leader(key)
	if !ok {
		return Route[C]{}, ErrNoNodes
	}
	c, ok := s.conns[id]
	if !ok || c.down.Load() {
		// The leader failed a moment ago and its mark-down is not
		// published yet: answer with the next live owner, as the new
		// placement will.
		cs := s.owners(key, 1, nil)
		if len(cs) == 0 {
			return Route[C]{}, ErrNoNodes
		}
		c = cs[0]
	}
	c.routes.Inc()
	return Route[C]{Node: c.node, Client: c.client}, nil
}

// RouteAll returns up to count distinct owners of key, leader first. The
// live node count caps count; count < 1 is a CONFIG.INVALID error.
func (r *Router[C]) RouteAll(key string, count int) ([]Route[C], error) {
	if count < 1 {
		return nil, errcode.Config("count", count, "must be ≥ 1")
	}
	s := r.snap.Load()
	if s.closed {
		return nil, ErrClosed
	}
	cs := s.owners(key, count, nil)
	routes := make([]Route[C], 0, len(cs))
	for _, c := range cs {
		c.routes.Inc()
		routes = append(routes, Route[C]{Node: c.node, Client: c.client})
	}
	if len(routes) == 0 {
		return nil, ErrNoNodes
	}
	return routes, nil
}

// Execute runs fn on key's leader. When fn fails and ShouldMarkDown says
// the error is the node's fault, the node is marked down and fn runs on the
// next replica, in ring order, up to Replicas nodes; the caller sees an
// error only when every one of them failed (an *ExecuteError).
//
// Two failures end the call at once, with fn's error and no mark-down:
// one that ShouldMarkDown says is not the node's fault (a missing key on
// the leader is not improved by asking a replica), and one after which the
// caller's ctx is done (the caller gave up; the node did nothing wrong).
//
// In steady state (leader healthy, no AttemptTimeout) Execute takes no lock
// and allocates nothing beyond what fn does.
func (r *Router[C]) Execute(ctx context.Context, key string, fn func(ctx context.Context, c C, n Node) error) error {
	s := r.snap.Load()
	if s.closed {
		return ErrClosed
	}
	id, ok := s.placement.Leader(key)
	if !ok {
		return ErrNoNodes
	}
	c, ok := s.conns[id]
	if !ok || c.down.Load() {
		return r.failover(ctx, s, key, nil, nil, fn)
	}
	err := r.attempt(ctx, c, fn)
	if err == nil {
		return nil
	}
	return r.failover(ctx, s, key, c, err, fn)
}

// attempt runs fn once on c, bounded by AttemptTimeout when set.
func (r *Router[C]) attempt(ctx context.Context, c *conn[C], fn func(ctx context.Context, c C, n Node) error) error {
	c.routes.Inc()
	if r.opts.AttemptTimeout <= 0 {
		return fn(ctx, c.client, c.node)
	}
	actx, cancel := context.WithTimeout(ctx, r.opts.AttemptTimeout)
	defer cancel()
	return fn(actx, c.client, c.node)
}

// owners returns the connections of key's first n owners as the next
// published placement will have them: a connection flagged down by an
// earlier call (its mark-down not yet published), or an owner without a
// connection, is skipped and the walk goes on along the placement, as the
// placement without it will. A connection this call itself saw fail
// (failedHere reports it; nil means none) keeps its place instead, so a
// call's failover walks only the replicas where the key was written. It
// allocates; the read paths call it only off their steady-state path.
func (s *snapshot[C]) owners(key string, n int, failedHere func(*conn[C]) bool) []*conn[C] {
	out := make([]*conn[C], 0, n)
	for ask := n; ; {
		ids := s.placement.Owners(key, ask)
		out = out[:0]
		skipped := 0
		for _, id := range ids {
			c, ok := s.conns[id]
			if !ok || (c.down.Load() && (failedHere == nil || !failedHere(c))) {
				skipped++
				continue
			}
			if out = append(out, c); len(out) == n {
				return out
			}
		}
		if len(ids) < ask || skipped == 0 {
			return out
		}
		// Each round asks for as many more owners as it skipped, so it
		// ends after at most one round per skipped owner.
		ask = n + skipped
	}
}

// attemptKeys is attempt for a call that carries n keys: the routes
// counter counts keys, not calls.
func (r *Router[C]) attemptKeys(ctx context.Context, c *conn[C], n int, fn func(ctx context.Context, c C, n Node) error) error {
	c.routes.Add(float64(n))
	if r.opts.AttemptTimeout <= 0 {
		return fn(ctx, c.client, c.node)
	}
	actx, cancel := context.WithTimeout(ctx, r.opts.AttemptTimeout)
	defer cancel()
	return fn(actx, c.client, c.node)
}

// judge decides what a failed attempt means: whether the call must stop
// and return err as it is, and otherwise marks the node down. The
// mark-down is handed to the router's worker: the node is skipped by every
// call at once, and the call goes on without waiting for the new placement.
func (r *Router[C]) judge(ctx context.Context, c *conn[C], err error) (stop bool) {
	if ctx.Err() != nil || !r.opts.ShouldMarkDown(err, c.node) {
		return true
	}
	r.markDownLater(c, err)
	return false
}

// failover is Execute's slow path. tried is the leader's conn and err its
// failure, or nil when the leader had no client in the snapshot. It walks
// the replicas of the same snapshot: they are where the key was written.
func (r *Router[C]) failover(ctx context.Context, s *snapshot[C], key string, tried *conn[C], err error, fn func(ctx context.Context, c C, n Node) error) error {
	var failures []NodeFailure
	if tried != nil {
		if r.judge(ctx, tried, err) {
			return err
		}
		failures = append(failures, NodeFailure{Node: tried.node, Err: err})
	}
	for _, c := range s.owners(key, r.opts.Replicas, func(c *conn[C]) bool { return c == tried }) {
		if c == tried || c.down.Load() {
			continue
		}
		r.metrics.failovers.Inc()
		err := r.attempt(ctx, c, fn)
		if err == nil {
			return nil
		}
		if r.judge(ctx, c, err) {
			return err
		}
		failures = append(failures, NodeFailure{Node: c.node, Err: err})
	}
	if len(failures) == 0 {
		return ErrNoNodes
	}
	return &ExecuteError{Key: key, Failures: failures}
}

// ExecuteAll runs fn on key's leader and every replica at once and returns
// the nodes where it succeeded, leader first. It fails (with an
// *ExecuteError) only when fn failed on all of them; a partial success
// returns a nil error, and the caller can compare the number of nodes with
// the replica count it wanted. Failed nodes are marked down as in Execute.
// ExecuteAllValues does the same and returns each success's value.
func (r *Router[C]) ExecuteAll(ctx context.Context, key string, fn func(ctx context.Context, c C, n Node) error) ([]Node, error) {
	replies, err := ExecuteAllValues(ctx, r, key, func(ctx context.Context, c C, n Node) (struct{}, error) {
		return struct{}{}, fn(ctx, c, n)
	})
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, len(replies))
	for i, rep := range replies {
		nodes[i] = rep.Node
	}
	return nodes, nil
}
