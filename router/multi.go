package router

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/shardwise/shardwise/errcode"
)

// Reply is one node's answer to a call that ran on several nodes.
type Reply[V any] struct {
	Node  Node
	Value V
}

// ExecuteAllValues runs fn on key's leader and every replica at once, like
// Router.ExecuteAll, and returns the value of every call that succeeded,
// leader first. It fails (with an *ExecuteError) only when fn failed on all
// of them; failed nodes are marked down as in Execute.
func ExecuteAllValues[C, V any](ctx context.Context, r *Router[C], key string, fn func(ctx context.Context, c C, n Node) (V, error)) ([]Reply[V], error) {
	s := r.snap.Load()
	if s.closed {
		return nil, ErrClosed
	}
	conns := s.owners(key, r.opts.Replicas, nil)
	if len(conns) == 0 {
		return nil, ErrNoNodes
	}
	vals := make([]V, len(conns))
	errs := make([]error, len(conns))
	call := func(i int) {
		errs[i] = r.attempt(ctx, conns[i], func(ctx context.Context, c C, n Node) error {
			var err error
			vals[i], err = fn(ctx, c, n)
			return err
		})
	}
	var wg sync.WaitGroup
	for i := 1; i < len(conns); i++ {
		wg.Go(func() { call(i) })
	}
	call(0)
	wg.Wait()

	var ok []Reply[V]
	var failures []NodeFailure
	for i, c := range conns {
		if errs[i] == nil {
			ok = append(ok, Reply[V]{Node: c.node, Value: vals[i]})
			continue
		}
		r.judge(ctx, c, errs[i])
		failures = append(failures, NodeFailure{Node: c.node, Err: errs[i]})
	}
	if len(ok) == 0 {
		return nil, &ExecuteError{Key: key, Failures: failures}
	}
	return ok, nil
}

// ErrSomeKeysFailed matches every *MultiError.
var ErrSomeKeysFailed = errcode.New("ROUTER.SOME_KEYS_FAILED", "router: some keys of a multi-key call failed")

// MultiError reports the keys of a multi-key call that no node served.
// Errs has one entry per key given, in the same order: nil for a key that
// was served, and otherwise what Execute would have returned for that key
// alone (an *ExecuteError when every owner failed, the error itself when it
// was not the node's fault or the ctx ended, ErrNoNodes).
type MultiError struct {
	Errs   []error
	Failed int // the number of non-nil Errs
}

func (e *MultiError) Error() string {
	for i, err := range e.Errs {
		if err != nil {
			return fmt.Sprintf("router: %d of %d keys failed; key %d: %v", e.Failed, len(e.Errs), i, err)
		}
	}
	return fmt.Sprintf("router: %d of %d keys failed", e.Failed, len(e.Errs))
}

// ErrorCode returns ErrSomeKeysFailed's code.
func (e *MultiError) ErrorCode() string { return ErrSomeKeysFailed.ErrorCode() }

// Is makes errors.Is(err, ErrSomeKeysFailed) true.
func (e *MultiError) Is(target error) bool { return target == ErrSomeKeysFailed }

// Unwrap returns the keys' errors, so errors.Is finds, say,
// context.DeadlineExceeded or ErrAllReplicasFailed among them.
func (e *MultiError) Unwrap() []error {
	out := make([]error, 0, e.Failed)
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// multi is the working state of one multi-key call. Keys are referred to by
// their index in the caller's slice.
type multi[C any] struct {
	r    *Router[C]
	s    *snapshot[C]
	keys []string
	// owners[i] is key i's owner list once its leader has failed (nil
	// before), next[i] the position in it of the next owner to try.
	owners [][]*conn[C]
	next   []int
	// failures[i] lists the nodes that failed key i; errs is allocated on
	// the first key that fails for good.
	failures [][]NodeFailure
	errs     []error
	failed   int
	// failedHere lists the nodes that failed in this call; they keep
	// their place in the owner lists (see snapshot.owners).
	failedHere []*conn[C]
}

// ensure allocates the failover state, which a call whose leaders all
// answer never needs.
func (m *multi[C]) ensure() {
	if m.owners == nil {
		m.owners = make([][]*conn[C], len(m.keys))
		m.next = make([]int, len(m.keys))
		m.failures = make([][]NodeFailure, len(m.keys))
	}
}

// assignment is a key bound to the node it is sent to in one round.
type assignment[C any] struct {
	key int
	c   *conn[C]
}

func (m *multi[C]) fail(i int, err error) {
	if m.errs == nil {
		m.errs = make([]error, len(m.keys))
	}
	m.errs[i] = err
	m.failed++
}

// candidate returns the next node to try for key i, or nil (and fails the
// key) when none is left. The key's owner list, made on its first call,
// keeps the places of the nodes that failed in this call, as Execute's
// failover does.
func (m *multi[C]) candidate(i int) *conn[C] {
	m.ensure()
	if m.owners[i] == nil {
		m.owners[i] = m.s.owners(m.keys[i], m.r.opts.Replicas, func(c *conn[C]) bool {
			return slices.Contains(m.failedHere, c)
		})
	}
	for m.next[i] < len(m.owners[i]) {
		c := m.owners[i][m.next[i]]
		m.next[i]++
		if !c.down.Load() && !triedOn(m.failures[i], c.node) {
			return c
		}
	}
	if len(m.failures[i]) == 0 {
		m.fail(i, ErrNoNodes)
	} else {
		m.fail(i, &ExecuteError{Key: m.keys[i], Failures: m.failures[i]})
	}
	return nil
}

func triedOn(failures []NodeFailure, n Node) bool {
	for _, f := range failures {
		if f.Node == n {
			return true
		}
	}
	return false
}

// byNode sorts assignments by node (join order, then key order) and returns
// the bounds of each node's run.
func byNode[C any](as []assignment[C], bounds []int) []int {
	slices.SortFunc(as, func(a, b assignment[C]) int {
		if c := cmp.Compare(a.c.ord, b.c.ord); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	bounds = append(bounds[:0], 0)
	for j := 1; j < len(as); j++ {
		if as[j].c != as[j-1].c {
			bounds = append(bounds, j)
		}
	}
	return append(bounds, len(as))
}

// runGroups calls call(g) for every group g, the first on this goroutine
// and the others in parallel, and waits for all of them.
func runGroups(groups int, call func(g int)) {
	var wg sync.WaitGroup
	for g := 1; g < groups; g++ {
		wg.Go(func() { call(g) })
	}
	call(0)
	wg.Wait()
}

// ExecuteMulti reads many keys with one call per node, as go-redis Ring
// pipelines and memcache GetMulti do. It groups keys by their leader and
// runs fn once per node, all nodes in parallel, with that node's keys and a
// values slice of the same length for fn to fill (values[j] belongs to
// keys[j]). It returns every key's value in the order of keys.
//
// Failover is per node: when fn fails and ShouldMarkDown blames the node,
// the node is marked down and its keys are regrouped by their next replica
// and sent again, until each key is served or its replicas are exhausted.
// An error that is not the node's fault, or one after which ctx is done,
// fails that node's keys at once, as in Execute. Keys that were not served
// have their zero value and are reported in a *MultiError; the others'
// values are valid either way.
//
// A key listed twice is sent (and returned) twice. fn must not keep keys or
// values after it returns: they are slices of the call's buffers.
func ExecuteMulti[C, V any](ctx context.Context, r *Router[C], keys []string, fn func(ctx context.Context, c C, n Node, keys []string, values []V) error) ([]V, error) {
	s := r.snap.Load()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]V, len(keys))
	m := &multi[C]{r: r, s: s, keys: keys}
	as := make([]assignment[C], 0, len(keys))
	for i, k := range keys {
		id, ok := s.placement.Leader(k)
		if !ok {
			return out, ErrNoNodes
		}
		c, ok := s.conns[id]
		if !ok || c.down.Load() {
			if c = m.candidate(i); c == nil {
				continue
			}
		}
		as = append(as, assignment[C]{key: i, c: c})
	}
	gkeys := make([]string, len(as))
	gvals := make([]V, len(as))
	var bounds []int
	var gerrs []error
	for round := 0; len(as) > 0; round++ {
		bounds = byNode(as, bounds)
		groups := len(bounds) - 1
		for j, a := range as {
			gkeys[j] = keys[a.key]
		}
		clear(gvals[:len(as)])
		gerrs = slices.Grow(gerrs[:0], groups)[:groups]
		if round > 0 {
			r.metrics.failovers.Add(float64(groups))
		}
		runGroups(groups, func(g int) {
			lo, hi := bounds[g], bounds[g+1]
			gerrs[g] = r.attemptKeys(ctx, as[lo].c, hi-lo, func(ctx context.Context, c C, n Node) error {
				return fn(ctx, c, n, gkeys[lo:hi:hi], gvals[lo:hi:hi])
			})
		})
		// Keep the served keys' values; send the failed nodes' keys on.
		retry := as[:0]
		for g := range groups {
			lo, hi := bounds[g], bounds[g+1]
			c, err := as[lo].c, gerrs[g]
			if err == nil {
				for j := lo; j < hi; j++ {
					out[as[j].key] = gvals[j]
				}
				continue
			}
			if r.judge(ctx, c, err) {
				for j := lo; j < hi; j++ {
					m.fail(as[j].key, err)
				}
				continue
			}
			// Each key moves on to its own next replica: keys that share a
			// leader need not share the node after it. retry never
			// overtakes the reads: it holds at most one entry per key
			// already looked at.
			m.failedHere = append(m.failedHere, c)
			for j := lo; j < hi; j++ {
				i := as[j].key
				m.ensure()
				m.failures[i] = append(m.failures[i], NodeFailure{Node: c.node, Err: err})
				if next := m.candidate(i); next != nil {
					retry = append(retry, assignment[C]{key: i, c: next})
				}
			}
		}
		as = retry
	}
	if m.failed > 0 {
		return out, &MultiError{Errs: m.errs, Failed: m.failed}
	}
	return out, nil
}

// ExecuteAllMulti writes many keys with one call per node. Every key goes to
// its leader and each of its replicas, as Router.ExecuteAll does for one
// key, and each node gets a single call of fn with all the keys it holds
// (as leader or as replica), all nodes in parallel: a node holding several
// of the keys gets one MSET, not one per key. acked[i] is the number of
// nodes that accepted keys[i]; compare it with the replica count you want.
//
// A key fails only when every one of its owners failed; such keys are
// reported in a *MultiError. Failed nodes are marked down as in Execute, and
// nothing is retried: as with ExecuteAll, a replica that missed a write
// stays stale. fn must not keep keys after it returns.
func ExecuteAllMulti[C any](ctx context.Context, r *Router[C], keys []string, fn func(ctx context.Context, c C, n Node, keys []string) error) (acked []int, err error) {
	s := r.snap.Load()
	if s.closed {
		return nil, ErrClosed
	}
	acked = make([]int, len(keys))
	m := &multi[C]{r: r, s: s, keys: keys}
	fast, _ := s.placement.(appendOwners)
	var buf []string
	as := make([]assignment[C], 0, len(keys)*min(r.opts.Replicas, len(s.live)))
	for i, k := range keys {
		var ids []string
		if fast != nil {
			buf = fast.AppendOwners(buf[:0], k, r.opts.Replicas)
			ids = buf
		} else {
			ids = s.placement.Owners(k, r.opts.Replicas)
		}
		start := len(as)
		for _, id := range ids {
			c, ok := s.conns[id]
			if !ok || c.down.Load() {
				// An owner failed a moment ago: take the owners the
				// next placement will have (the slow path).
				as = as[:start]
				for _, c := range s.owners(k, r.opts.Replicas, nil) {
					as = append(as, assignment[C]{key: i, c: c})
				}
				break
			}
			as = append(as, assignment[C]{key: i, c: c})
		}
		if len(as) == start {
			m.fail(i, ErrNoNodes)
		}
	}
	if len(as) > 0 {
		bounds := byNode(as, nil)
		gkeys := make([]string, len(as))
		for j, a := range as {
			gkeys[j] = keys[a.key]
		}
		gerrs := make([]error, len(bounds)-1)
		runGroups(len(gerrs), func(g int) {
			lo, hi := bounds[g], bounds[g+1]
			gerrs[g] = r.attemptKeys(ctx, as[lo].c, hi-lo, func(ctx context.Context, c C, n Node) error {
				return fn(ctx, c, n, gkeys[lo:hi:hi])
			})
		})
		for g, err := range gerrs {
			lo, hi := bounds[g], bounds[g+1]
			if err == nil {
				for j := lo; j < hi; j++ {
					acked[as[j].key]++
				}
				continue
			}
			c := as[lo].c
			r.judge(ctx, c, err)
			m.ensure()
			for j := lo; j < hi; j++ {
				i := as[j].key
				m.failures[i] = append(m.failures[i], NodeFailure{Node: c.node, Err: err})
			}
		}
	}
	for i := range keys {
		if acked[i] == 0 && (m.errs == nil || m.errs[i] == nil) {
			m.fail(i, &ExecuteError{Key: keys[i], Failures: m.failures[i]})
		}
	}
	if m.failed > 0 {
		return acked, &MultiError{Errs: m.errs, Failed: m.failed}
	}
	return acked, nil
}
