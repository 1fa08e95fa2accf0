package entityid_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/entityid"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/testseed"
)

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newGen(t *testing.T, node int, c clock.Clock) *entityid.Generator {
	t.Helper()
	g, err := entityid.NewGenerator(entityid.Config{Node: node, Clock: c})
	if err != nil {
		t.Fatalf("NewGenerator: %v", err)
	}
	return g
}

func TestEpochConstant(t *testing.T) {
	if !entityid.Epoch().Equal(epoch) {
		t.Fatalf("Epoch() = %v, want %v", entityid.Epoch(), epoch)
	}
}

func TestMakeAndDecode(t *testing.T) {
	cases := []struct {
		name      string
		millis    int64
		node, seq int
		wantErr   error
		wantUint  uint64
		checkUint bool
	}{
		{name: "zero", wantUint: 0, checkUint: true},
		{name: "seq only", seq: 5, wantUint: 5, checkUint: true},
		{name: "node only", node: 1, wantUint: 1 << 11, checkUint: true},
		{name: "ms only", millis: 1, wantUint: 1 << 19, checkUint: true},
		{name: "all max", millis: entityid.MaxMillis, node: 255, seq: 2047, wantUint: ^uint64(0), checkUint: true},
		{name: "negative ms", millis: -1, wantErr: entityid.ErrTimeOutOfRange},
		{name: "ms too big", millis: entityid.MaxMillis + 1, wantErr: entityid.ErrTimeOutOfRange},
		{name: "node too big", node: 256, wantErr: entityid.ErrPartOutOfRange},
		{name: "node negative", node: -1, wantErr: entityid.ErrPartOutOfRange},
		{name: "seq too big", seq: 2048, wantErr: entityid.ErrPartOutOfRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := entityid.Make(c.millis, c.node, c.seq)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Make err = %v, want %v", err, c.wantErr)
				}
				if errcode.Of(err) == "" {
					t.Fatalf("error %v has no code", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Make: %v", err)
			}
			if c.checkUint && uint64(id) != c.wantUint {
				t.Fatalf("id = %#x, want %#x", uint64(id), c.wantUint)
			}
			if id.Millis() != c.millis || int(id.Node()) != c.node || int(id.Seq()) != c.seq {
				t.Fatalf("decode = (%d,%d,%d), want (%d,%d,%d)", id.Millis(), id.Node(), id.Seq(), c.millis, c.node, c.seq)
			}
			if got := id.Time().UnixMilli() - epoch.UnixMilli(); got != c.millis {
				t.Fatalf("Time - epoch = %d ms, want %d", got, c.millis)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, node := range []int{-1, 256, 1000} {
		_, err := entityid.NewGenerator(entityid.Config{Node: node})
		if !errors.Is(err, errcode.ErrConfigInvalid) {
			t.Fatalf("node %d: err = %v, want config error", node, err)
		}
		var ce *errcode.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Node" || ce.Value != node {
			t.Fatalf("node %d: config error %+v does not name field and value", node, ce)
		}
	}
	for _, node := range []int{0, 7, 255} {
		if err := (entityid.Config{Node: node}).Validate(); err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
	}
}

func TestNextEncodesClockAndNode(t *testing.T) {
	fc := clock.NewFake(epoch.Add(1234*time.Millisecond + 500*time.Microsecond))
	g := newGen(t, 42, fc)
	ctx := context.Background()
	a, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.Next(ctx)
	if a.Millis() != 1234 || a.Node() != 42 || a.Seq() != 0 {
		t.Fatalf("a = (%d,%d,%d)", a.Millis(), a.Node(), a.Seq())
	}
	if b.Millis() != 1234 || b.Seq() != 1 || b <= a {
		t.Fatalf("b = (%d,%d,%d), a=%d b=%d", b.Millis(), b.Node(), b.Seq(), a, b)
	}
	fc.Advance(time.Millisecond)
	c, _ := g.Next(ctx)
	if c.Millis() != 1235 || c.Seq() != 0 || c <= b {
		t.Fatalf("c = (%d,%d,%d)", c.Millis(), c.Node(), c.Seq())
	}
}

// A clock stepped back is held at the last millisecond used: ids go on
// rising in its sequence, and once that sequence is spent Next waits until
// the clock reads the millisecond after it.
func TestClockBackwardsHoldsTheLastMillisecond(t *testing.T) {
	fc := clock.NewFake(epoch.Add(time.Hour))
	g := newGen(t, 1, fc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := first.Millis()
	fc.Set(epoch.Add(time.Hour - 3*time.Millisecond))
	last := first
	for i := 1; i <= entityid.MaxSeq; i++ {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatalf("id %d with the clock behind: %v", i, err)
		}
		if id <= last || id.Millis() != held || int(id.Seq()) != i || id.Node() != 1 {
			t.Fatalf("id %d = (%d,%d,%d) after %d, want (%d,%d,1)", i, id.Millis(), id.Seq(), id.Node(), last, held, i)
		}
		last = id
	}
	if _, err := g.TryNext(); !errors.Is(err, entityid.ErrSequenceExhausted) {
		t.Fatalf("TryNext with the held millisecond spent: %v, want ErrSequenceExhausted", err)
	}
	type result struct {
		id  entityid.ID
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := g.Next(ctx)
		done <- result{id, err}
	}()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Catching up to the held millisecond is not enough: it is spent.
	fc.Set(epoch.Add(time.Hour))
	select {
	case r := <-done:
		t.Fatalf("Next returned %v before the clock passed the held millisecond", r)
	default:
	}
	fc.Set(epoch.Add(time.Hour + time.Millisecond))
	r := <-done
	if r.err != nil || r.id.Millis() != held+1 || r.id.Seq() != 0 || r.id <= last {
		t.Fatalf("after the clock passed: (%d,%d) %v, want (%d,0)", r.id.Millis(), r.id.Seq(), r.err, held+1)
	}
}

func TestTimeOutOfRange(t *testing.T) {
	for _, at := range []time.Time{epoch.Add(-time.Millisecond), time.UnixMilli(entityid.EpochUnixMilli + entityid.MaxMillis + 1)} {
		g := newGen(t, 0, clock.NewFake(at))
		if _, err := g.Next(context.Background()); !errors.Is(err, entityid.ErrTimeOutOfRange) {
			t.Fatalf("at %v: err = %v", at, err)
		}
	}
}

func TestSequenceOverflowWaitsForNextMillisecond(t *testing.T) {
	fc := clock.NewFake(epoch.Add(10 * time.Millisecond))
	g := newGen(t, 3, fc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last entityid.ID
	for i := 0; i <= entityid.MaxSeq; i++ {
		id, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && id <= last {
			t.Fatalf("not increasing at %d", i)
		}
		last = id
	}
	if last.Seq() != entityid.MaxSeq || last.Millis() != 10 {
		t.Fatalf("last = (%d,%d)", last.Millis(), last.Seq())
	}
	if _, err := g.TryNext(); !errors.Is(err, entityid.ErrSequenceExhausted) {
		t.Fatalf("TryNext err = %v, want ErrSequenceExhausted", err)
	}
	type result struct {
		id  entityid.ID
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := g.Next(ctx)
		done <- result{id, err}
	}()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("Next returned %v before the clock moved", r)
	default:
	}
	fc.Advance(time.Millisecond)
	r := <-done
	if r.err != nil || r.id.Millis() != 11 || r.id.Seq() != 0 || r.id.Node() != 3 {
		t.Fatalf("after wait: (%d,%d,%d) err=%v", r.id.Millis(), r.id.Node(), r.id.Seq(), r.err)
	}
}

func TestOverflowWaitHonoursContext(t *testing.T) {
	fc := clock.NewFake(epoch)
	g := newGen(t, 0, fc)
	for i := 0; i <= entityid.MaxSeq; i++ {
		if _, err := g.TryNext(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Next(ctx)
		done <- err
	}()
	if err := fc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The generator is still usable and still monotonic.
	fc.Advance(time.Millisecond)
	id, err := g.Next(context.Background())
	if err != nil || id.Millis() != 1 || id.Seq() != 0 {
		t.Fatalf("id=(%d,%d) err=%v", id.Millis(), id.Seq(), err)
	}
}

// randomRun mints up to steps ids from g while moving fc at random
// (forward, standing still, sometimes backwards), checking every answer
// against the model: an id is larger than the last, carries the node, and
// its millisecond is the later of the clock's and the last one used; the
// only refusal is a spent millisecond. It returns the ids and the latest
// clock reading.
func randomRun(t *testing.T, rng *rand.Rand, g *entityid.Generator, fc *clock.Fake, steps int) (ids []entityid.ID, latest time.Time) {
	t.Helper()
	lastMs := int64(-1)
	latest = fc.Now()
	for step := 0; step < steps; step++ {
		if step > 0 { // the first id is minted at the boot reading
			switch r := rng.IntN(100); {
			case r < 10:
				fc.Advance(time.Duration(rng.Int64N(5_000_000))) // up to 5 ms
			case r < 12:
				fc.Set(fc.Now().Add(-time.Duration(rng.Int64N(3_000_000))))
			case r < 13:
				fc.Set(fc.Now().Add(-time.Duration(rng.Int64N(int64(time.Hour))))) // a big step back
			}
		}
		if fc.Now().After(latest) {
			latest = fc.Now()
		}
		wantMs := max(fc.Now().UnixMilli()-entityid.EpochUnixMilli, lastMs)
		id, err := g.TryNext()
		switch {
		case errors.Is(err, entityid.ErrSequenceExhausted):
			if wantMs != lastMs || ids[len(ids)-1].Seq() != entityid.MaxSeq {
				t.Fatalf("step %d: exhausted at ms %d (last %d, seq %d)", step, wantMs, lastMs, ids[len(ids)-1].Seq())
			}
			continue
		case err != nil:
			t.Fatalf("step %d: %v", step, err)
		}
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Fatalf("step %d: %d after %d", step, id, ids[len(ids)-1])
		}
		if id.Millis() != wantMs || id.Node() != g.Node() {
			t.Fatalf("step %d: id decodes (%d,%d), want ms %d node %d", step, id.Millis(), id.Node(), wantMs, g.Node())
		}
		if id.Time().After(latest) {
			t.Fatalf("step %d: id claims %v, later than any clock reading (%v)", step, id.Time(), latest)
		}
		ids = append(ids, id)
		lastMs = wantMs
	}
	return ids, latest
}

// TestPropertyMonotonicUnderRandomClock: within one run, ids strictly
// increase whatever the clock does, including steps back.
func TestPropertyMonotonicUnderRandomClock(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 99))
	for range 50 {
		fc := clock.NewFake(epoch.Add(time.Duration(rng.Int64N(1<<40)) * time.Millisecond))
		g := newGen(t, rng.IntN(256), fc)
		randomRun(t, rng, g, fc, 3000)
	}
}

// TestRestartNeverRepeatsIds: two generators with the same node part,
// booted one after the other at different wall times (the second when its
// clock reads later than any reading of the first, as a restarted node's
// does), never mint the same id, whatever either clock does during its
// run, steps back included: every id of the second run is larger than
// every id of the first.
func TestRestartNeverRepeatsIds(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 7))
	for range 50 {
		node := rng.IntN(256)
		fc1 := clock.NewFake(epoch.Add(time.Duration(rng.Int64N(1<<40)) * time.Millisecond))
		first, latest := randomRun(t, rng, newGen(t, node, fc1), fc1, 3000)
		// The restart: at least the next millisecond, up to a minute later.
		boot := latest.Truncate(time.Millisecond).Add(time.Millisecond + time.Duration(rng.Int64N(int64(time.Minute))))
		fc2 := clock.NewFake(boot)
		second, _ := randomRun(t, rng, newGen(t, node, fc2), fc2, 3000)
		if len(first) == 0 || len(second) == 0 {
			t.Fatal("a run minted nothing")
		}
		if top := slices.Max(first); second[0] <= top {
			t.Fatalf("node %d: the run booted at %v minted %d, not above %d of the run before", node, boot, second[0], top)
		}
	}
}

func TestConcurrentNextIsUnique(t *testing.T) {
	g := newGen(t, 9, clock.Real())
	const workers, each = 4, 3000
	ids := make([][]entityid.ID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := g.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	seen := make(map[entityid.ID]bool, workers*each)
	for w := range ids {
		for i, id := range ids[w] {
			if seen[id] {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = true
			if i > 0 && id <= ids[w][i-1] {
				t.Fatalf("worker %d saw %d after %d", w, id, ids[w][i-1])
			}
		}
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 1 << 19, ^uint64(0)} {
		id := entityid.ID(v)
		got, err := entityid.Parse(id.String())
		if err != nil || got != id {
			t.Fatalf("Parse(%q) = %d, %v", id.String(), got, err)
		}
	}
	for _, s := range []string{"", "-1", "x", "18446744073709551616", " 1"} {
		if _, err := entityid.Parse(s); !errors.Is(err, entityid.ErrSyntax) {
			t.Fatalf("Parse(%q) err = %v", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "42", "18446744073709551615", "", "abc", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := entityid.Parse(s)
		if err != nil {
			if !errors.Is(err, entityid.ErrSyntax) {
				t.Fatalf("unexpected error kind %v", err)
			}
			return
		}
		again, err := entityid.Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("round trip %q -> %d -> %d, %v", s, id, again, err)
		}
	})
}

func FuzzLayout(f *testing.F) {
	f.Add(uint64(0))
	f.Add(^uint64(0))
	f.Add(uint64(1) << 19)
	f.Fuzz(func(t *testing.T, v uint64) {
		id := entityid.ID(v)
		re, err := entityid.Make(id.Millis(), int(id.Node()), int(id.Seq()))
		if err != nil || re != id {
			t.Fatalf("Make(decode(%#x)) = %#x, %v", v, uint64(re), err)
		}
		if got := id.Time().UnixMilli() - entityid.EpochUnixMilli; got != id.Millis() {
			t.Fatalf("Time disagrees with Millis: %d vs %d", got, id.Millis())
		}
	})
}

// A Next waiting out a spent millisecond does not hold the generator:
// TryNext answers at once (exhausted) instead of blocking behind it, and
// both continue correctly once the clock moves.
func TestOverflowWaitDoesNotBlockTryNext(t *testing.T) {
	fc := clock.NewFake(epoch.Add(5 * time.Millisecond))
	g := newGen(t, 2, fc)
	for i := 0; i <= entityid.MaxSeq; i++ {
		if _, err := g.TryNext(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		id  entityid.ID
		err error
	}
	waiting := make(chan result, 1)
	go func() {
		id, err := g.Next(ctx)
		waiting <- result{id, err}
	}()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tried := make(chan error, 1)
	go func() {
		_, err := g.TryNext()
		tried <- err
	}()
	select {
	case err := <-tried:
		if !errors.Is(err, entityid.ErrSequenceExhausted) {
			t.Fatalf("TryNext during the wait: %v, want ErrSequenceExhausted", err)
		}
	case <-ctx.Done():
		t.Fatal("TryNext blocked behind a Next waiting for the next millisecond")
	}
	fc.Advance(time.Millisecond)
	r := <-waiting
	if r.err != nil || r.id.Millis() != 6 || r.id.Seq() != 0 {
		t.Fatalf("waiting Next: (%d,%d) %v, want (6,0)", r.id.Millis(), r.id.Seq(), r.err)
	}
	id, err := g.TryNext()
	if err != nil || id.Millis() != 6 || id.Seq() != 1 || id <= r.id {
		t.Fatalf("TryNext after the wait: (%d,%d) %v, want (6,1)", id.Millis(), id.Seq(), err)
	}
}
