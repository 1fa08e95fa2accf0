package hashring

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/shardwise/shardwise/errcode"
)

func TestNewBoundedLoadValidation(t *testing.T) {
	r := New(nil)
	for _, f := range []float64{1, 0.5, -2, math.NaN(), math.Inf(1)} {
		_, err := NewBoundedLoad(r, f)
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "factor" {
			t.Errorf("factor %v: err %v, want CONFIG.INVALID naming factor", f, err)
		}
	}
	if _, err := NewBoundedLoad(nil, 1.5); !errors.Is(err, errcode.ErrConfigInvalid) {
		t.Errorf("nil ring: %v", err)
	}
	b, err := NewBoundedLoad(r, 0)
	if err != nil || b.Factor() != DefaultLoadFactor {
		t.Fatalf("factor 0: %v, %v", b, err)
	}
}

// With every key hashing to the same leader, bounded loads still spread
// them: no node ever exceeds ⌈factor × mean⌉, the overflow goes clockwise.
func TestBoundedLoadCapsHotLeader(t *testing.T) {
	r := New(tableHash(map[string]uint32{"a-0": 100, "b-0": 200, "c-0": 300, "d-0": 400}))
	for _, id := range []string{"a", "b", "c", "d"} {
		mustAdd(t, r, id, 1)
	}
	b, err := NewBoundedLoad(r, 1.25)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		before := b.Capacity()
		id, ok := b.Acquire("hot") // hashes above every point: wraps to a
		if !ok {
			t.Fatal("Acquire on a non-empty ring failed")
		}
		if b.Load(id) > before {
			t.Fatalf("step %d: %s has load %d over capacity %d", i, id, b.Load(id), before)
		}
	}
	if b.Total() != 400 {
		t.Fatalf("total %d", b.Total())
	}
	// Capacity for the 400 held is ⌈1.25 × 400/4⌉ = 125 at the end; the
	// leader a filled first, then b, then c; d gets the rest.
	want := map[string]int{"a": 125, "b": 125, "c": 125, "d": 25}
	for id, w := range want {
		if got := b.Load(id); got != w {
			t.Errorf("load(%s) = %d, want %d", id, got, w)
		}
	}
	// Releasing on the leader makes room there again.
	for range 10 {
		b.Release("a")
	}
	if id, _ := b.Pick("hot"); id != "a" {
		t.Fatalf("after release Pick = %s, want a", id)
	}
	b.Release("nobody")
	if b.Total() != 390 {
		t.Fatalf("total %d after releases", b.Total())
	}
}

func TestBoundedLoadLightLoadFollowsRing(t *testing.T) {
	r := New(nil)
	for i := range 10 {
		mustAdd(t, r, "n"+strconv.Itoa(i), 100)
	}
	b, _ := NewBoundedLoad(r, 0)
	// With nothing held every node has room: Pick is the plain leader.
	for i := range 200 {
		k := "key:" + strconv.Itoa(i)
		leader, _ := r.Get(k)
		if id, _ := b.Pick(k); id != leader {
			t.Fatalf("Pick(%s) = %s, leader %s", k, id, leader)
		}
	}
}

// Many random keys: the max load stays within the bound at every step, and
// a released key's node goes back down.
func TestBoundedLoadBoundHolds(t *testing.T) {
	for _, factor := range []float64{1.05, 1.25, 2} {
		r := New(XXHash)
		for i := range 7 {
			mustAdd(t, r, "n"+strconv.Itoa(i), 1+i*20) // very uneven weights
		}
		b, _ := NewBoundedLoad(r, factor)
		held := []string{}
		for i := range 3000 {
			if i%5 == 4 {
				b.Release(held[0])
				held = held[1:]
				continue
			}
			limit := b.Capacity()
			id, _ := b.Acquire("k" + strconv.Itoa(i))
			held = append(held, id)
			if b.Load(id) > limit {
				t.Fatalf("factor %v step %d: load %d > capacity %d", factor, i, b.Load(id), limit)
			}
		}
		maxLoad := 0
		for _, id := range r.IDs() {
			maxLoad = max(maxLoad, b.Load(id))
		}
		mean := float64(b.Total()) / 7
		if float64(maxLoad) > math.Ceil(factor*(float64(b.Total())+1)/7)+1 {
			t.Fatalf("factor %v: max load %d, mean %.1f", factor, maxLoad, mean)
		}
	}
}

func TestBoundedLoadEmptyRingAndConcurrency(t *testing.T) {
	r := New(nil)
	b, _ := NewBoundedLoad(r, 1.5)
	if _, ok := b.Acquire("k"); ok || b.Capacity() != 0 {
		t.Fatal("Acquire on an empty ring")
	}
	for i := range 5 {
		mustAdd(t, r, "n"+strconv.Itoa(i), 50)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				id, ok := b.Acquire("g" + strconv.Itoa(g) + "-" + strconv.Itoa(i))
				if !ok {
					t.Error("Acquire failed")
					return
				}
				if i%2 == 0 {
					b.Release(id)
				}
			}
		})
	}
	wg.Wait()
	if b.Total() != 1000 {
		t.Fatalf("total %d, want 1000", b.Total())
	}
}
