package router

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
)

var errNotFault = errors.New("not the node's fault")

// Every key of an ExecuteMulti gets what Execute would give it alone, when
// each node's behaviour is fixed (succeed, fail by its fault, fail not by
// its fault): served by the first owner (among Replicas, nodes flagged down
// before the call left out) that is not a faulty node, unless a not-fault
// node comes first.
func TestExecuteMultiMatchesPerKeyModel(t *testing.T) {
	var faults, notFaults atomic.Int64 // the model must exercise both
	defer func() {
		if faults.Load() == 0 || notFaults.Load() == 0 {
			t.Errorf("the seeds exercised %d faulty and %d not-fault calls; want both", faults.Load(), notFaults.Load())
		}
	}()
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 5))
		c := newCluster()
		opts := baseOptions(c, clock.NewFake(epoch))
		opts.Replicas = 1 + rng.IntN(4)
		opts.ShouldMarkDown = func(err error, _ Node) bool { return !errors.Is(err, errNotFault) }
		r := newRouter(t, c, opts)
		nn := 1 + rng.IntN(12)
		behave := map[string]int{} // by node id: 0 ok, 1 fault, 2 not fault
		for i := range nn {
			n := node(i + 1)
			addNodes(t, r, n)
			switch x := rng.IntN(10); {
			case x < 6:
				behave[n.ID()] = 0
			case x < 9:
				behave[n.ID()] = 1
			default:
				behave[n.ID()] = 2
			}
		}
		// Some nodes already down (flag only, mark-down queued). The lock
		// keeps the worker from publishing until the call is over.
		r.mu.Lock()
		s := r.snap.Load()
		preDown := map[string]bool{} // by node id
		if rng.IntN(3) == 0 {
			for _, cn := range s.conns {
				if rng.IntN(4) == 0 {
					preDown[cn.node.ID()] = true
					behave[cn.node.ID()] = 1
					r.markDownLater(cn, errRefused)
				}
			}
		}
		keys := make([]string, rng.IntN(300))
		for i := range keys {
			keys[i] = "key:" + strconv.Itoa(rng.IntN(400)) // duplicates likely
		}
		var mu sync.Mutex
		perNodeKey := map[string]int{}
		vals, err := ExecuteMulti(t.Context(), r, keys, func(_ context.Context, cl *client, n Node, ks []string, vs []string) error {
			mu.Lock()
			for _, k := range ks {
				perNodeKey[n.ID()+"|"+k]++
			}
			mu.Unlock()
			if preDown[n.ID()] {
				t.Errorf("seed %d: a node flagged down was called", seed)
			}
			switch behave[n.ID()] {
			case 1:
				faults.Add(1)
				return fmt.Errorf("%s: %w", n.ID(), errRefused)
			case 2:
				notFaults.Add(1)
				return errNotFault
			}
			for j, k := range ks {
				vs[j] = k + "@" + cl.node.ID()
			}
			return nil
		})
		r.mu.Unlock()
		var me *MultiError
		if err != nil && !errors.As(err, &me) {
			t.Fatalf("seed %d: err %v", seed, err)
		}
		dup := map[string]int{}
		for _, k := range keys {
			dup[k]++
		}
		for i, k := range keys {
			// A node flagged down before the call is as good as marked
			// down: the key's owners are the first Replicas of the
			// placement without the flagged nodes, as the placement the
			// worker publishes next will have them.
			var owners []string
			for _, id := range s.placement.Owners(k, len(s.live)) {
				if !preDown[id] {
					owners = append(owners, id)
				}
				if len(owners) == opts.Replicas {
					break
				}
			}
			want, wantErr := "", 0 // 0 none, 1 ExecuteError, 2 not fault, 3 no nodes
			tried := 0
			for _, id := range owners {
				tried++
				if b := behave[id]; b == 0 {
					want = k + "@" + id
					break
				} else if b == 2 {
					wantErr = 2
					break
				}
			}
			if want == "" && wantErr == 0 {
				wantErr = 1
				if tried == 0 {
					wantErr = 3
				}
			}
			var gotErr error
			if me != nil {
				gotErr = me.Errs[i]
			}
			if vals[i] != want {
				var d []string
				for _, id := range owners {
					d = append(d, fmt.Sprintf("%s behave=%d pre=%v", id, behave[id], preDown[id]))
				}
				t.Fatalf("seed %d: key %d %s: value %q, want %q wantErr %d (err %v) owners %v live %v", seed, i, k, vals[i], want, wantErr, gotErr, d, len(s.live))
			}
			switch wantErr {
			case 0:
				if gotErr != nil {
					t.Fatalf("seed %d: key %s: err %v, want nil", seed, k, gotErr)
				}
			case 1:
				var ee *ExecuteError
				if !errors.As(gotErr, &ee) || ee.Key != k {
					t.Fatalf("seed %d: key %s: err %v, want ExecuteError", seed, k, gotErr)
				}
			case 2:
				if !errors.Is(gotErr, errNotFault) {
					t.Fatalf("seed %d: key %s: err %v, want errNotFault", seed, k, gotErr)
				}
			case 3:
				if !errors.Is(gotErr, ErrNoNodes) {
					t.Fatalf("seed %d: key %s: err %v, want ErrNoNodes", seed, k, gotErr)
				}
			}
		}
		for nk, cnt := range perNodeKey {
			var k string
			for j := len(nk) - 1; j >= 0; j-- {
				if nk[j] == '|' {
					k = nk[j+1:]
					break
				}
			}
			if cnt > dup[k] {
				t.Fatalf("seed %d: %s sent %d times, listed %d", seed, nk, cnt, dup[k])
			}
		}
		if me != nil {
			f := 0
			for _, e := range me.Errs {
				if e != nil {
					f++
				}
			}
			if f != me.Failed || len(me.Errs) != len(keys) {
				t.Fatalf("seed %d: Failed %d, %d non-nil of %d", seed, me.Failed, f, len(me.Errs))
			}
		}
	}
}

// Multi-key calls and single calls run while nodes are marked down and
// reconnect; with three replicas and at most one node down by hand at a
// time, plus calls that fail on random nodes, values always belong to their
// keys, and every call ends.
func TestMultiUnderChurn(t *testing.T) {
	c := newCluster()
	opts := baseOptions(c, clock.Real())
	opts.Replicas = 3
	opts.Retry = &Retry{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}
	r := newRouter(t, c, opts)
	for i := range 6 {
		addNodes(t, r, node(i+1))
	}
	var stop atomic.Bool
	var rounds atomic.Int64 // rounds of calls completed, by all callers
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for !stop.Load() {
				keys := make([]string, 1+rng.IntN(50))
				for i := range keys {
					keys[i] = "k" + strconv.Itoa(rng.IntN(1000))
				}
				failOn := node(1).ID()
				vals, err := ExecuteMulti(context.Background(), r, keys, func(_ context.Context, cl *client, n Node, ks []string, vs []string) error {
					if n.ID() == failOn && len(ks)%2 == 0 {
						return errRefused
					}
					copy(vs, ks)
					return nil
				})
				var me *MultiError
				for i, k := range keys {
					if vals[i] != k && (err == nil || !errors.As(err, &me) || me.Errs[i] == nil) {
						t.Errorf("key %s got %q, err %v", k, vals[i], err)
						return
					}
				}
				_, _ = ExecuteAllMulti(context.Background(), r, keys, func(context.Context, *client, Node, []string) error { return nil })
				_ = r.Execute(context.Background(), keys[0], func(context.Context, *client, Node) error { return nil })
				rounds.Add(1)
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		n := node(2 + rng.IntN(5))
		before := rounds.Load()
		r.MarkDown(n)
		waitFor(t, "a round of calls after the mark-down", func() bool { return rounds.Load() > before })
		waitFor(t, "the node to rejoin", func() bool { return isLive(r, n) })
	}
	stop.Store(true)
	wg.Wait()
}
