package outbox

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
)

var here = interest.ChunkPos{X: 10, Y: 10}

// setup: a player (account 1) with a pet 100 and a mob 200 at `here`;
// account 2 is in 1's party; account 3 is a stranger; all three hold `here`.
func setup(t *testing.T) (*game, *Outbox[acct, ent], map[acct]*recorder) {
	t.Helper()
	g := newGame()
	o := New[acct, ent](g)
	g.register(t, o)
	sinks := map[acct]*recorder{}
	for _, a := range []acct{1, 2, 3} {
		sinks[a] = &recorder{}
		o.Attach(a, sinks[a])
		g.hold(a, here)
	}
	g.party[1] = []acct{1, 2}
	g.party[2] = []acct{1, 2}
	g.owner[100] = 1
	for _, e := range []ent{100, 200} {
		g.set(e, tPosition, 7)
		g.set(e, tHealth, 50)
		g.set(e, tStatus, 1)
	}
	g.set(100, tInventory, 9)
	g.vis.Reindex(100, here)
	g.vis.Reindex(200, here)
	o.AddDeliveries(g.vis.Drain())
	o.Flush(1)
	return g, o, sinks
}

func TestAppearBurstCarriesWhatTheViewerMaySee(t *testing.T) {
	_, _, sinks := setup(t)
	want := map[acct][]string{
		1: { // owner: everything of the pet; the mob's public parts
			"appear 100 n4", "c 100 t1=7", "c 100 t2=9", "c 100 t3=50", "c 100 t4=1",
			"appear 200 n3", "c 200 t1=7", "c 200 t3=50", "c 200 t4=1",
		},
		2: { // party member: the pet's position and health
			"appear 100 n2", "c 100 t1=7", "c 100 t3=50",
			"appear 200 n3", "c 200 t1=7", "c 200 t3=50", "c 200 t4=1",
		},
		3: { // stranger: only the pet's position
			"appear 100 n1", "c 100 t1=7",
			"appear 200 n3", "c 200 t1=7", "c 200 t3=50", "c 200 t4=1",
		},
	}
	for a, w := range want {
		if got := decoded(t, sinks[a].last(t).bytes); !slices.Equal(got, w) {
			t.Errorf("account %d got\n%q\nwant\n%q", a, got, w)
		}
	}
}

func TestOneBatchPerSubscriberPerTick(t *testing.T) {
	g, o, sinks := setup(t)
	for range 3 {
		g.set(200, tPosition, 8)
		o.MarkDirty(200, tPosition)
		o.MarkDirty(200, tHealth)
		o.MarkDirty(100, tPosition)
	}
	st := o.Flush(2)
	for a, r := range sinks {
		if len(r.batches) != 2 || r.last(t).tick != 2 {
			t.Fatalf("account %d got %d batches", a, len(r.batches))
		}
	}
	if got := decoded(t, sinks[3].last(t).bytes); !slices.Equal(got, []string{"c 200 t1=8", "c 200 t3=50", "c 100 t1=7"}) {
		t.Fatalf("stranger got %q", got)
	}
	if st.Batches != 3 {
		t.Fatalf("stats = %+v", st)
	}
	// A tick with nothing to say delivers nothing.
	if st := o.Flush(3); st.Batches != 0 || len(sinks[1].batches) != 2 {
		t.Fatalf("empty tick delivered: %+v", st)
	}
}

func TestEachMessageIsEncodedOncePerAudience(t *testing.T) {
	g, o, _ := setup(t)
	sinks := map[acct]*recorder{}
	for a := acct(10); a < 40; a++ { // 30 more observers
		sinks[a] = &recorder{}
		o.Attach(a, sinks[a])
		g.hold(a, here)
	}
	o.AddDeliveries(g.vis.Drain())
	o.Flush(2)
	g.payloads = 0
	o.MarkDirty(200, tPosition)
	st := o.Flush(3)
	if g.payloads != 1 || st.PayloadsEncoded != 1 || st.FramesEncoded != 1 {
		t.Fatalf("33 recipients: %d payload encodes, stats %+v; want 1", g.payloads, st)
	}
	if st.BytesDelivered != 33*st.BytesEncoded {
		t.Fatalf("delivered %d bytes, encoded %d; want 33×", st.BytesDelivered, st.BytesEncoded)
	}
	// The very same bytes, not copies.
	p := unsafe.SliceData(sinks[10].last(t).frames[0])
	for a, r := range sinks {
		if unsafe.SliceData(r.last(t).frames[0]) != p {
			t.Fatalf("account %d got a copy, not the shared frame", a)
		}
	}
	// Bursts share component frames with each other and with updates.
	g.payloads = 0
	g.vis.Reindex(300, interest.ChunkPos{X: 11, Y: 10})
	g.set(300, tPosition, 1)
	g.vis.Reindex(300, here) // appears to all 33
	g.set(200, tPosition, 2)
	o.MarkDirty(200, tPosition)
	o.MarkDirty(300, tPosition) // covered by the bursts
	o.AddDeliveries(g.vis.Drain())
	st = o.Flush(4)
	if g.payloads != 2 || st.FramesEncoded != 3 {
		t.Fatalf("33 bursts + 33 updates: %d payloads, %d frames encoded; want 2 and 3 (head, two components)", g.payloads, st.FramesEncoded)
	}
}

func TestAppearedViewerGetsNoSeparateUpdate(t *testing.T) {
	g, o, sinks := setup(t)
	g.set(300, tPosition, 4)
	g.vis.Reindex(300, here)
	o.MarkDirty(300, tPosition)
	o.MarkDirty(300, tPosition)
	o.AddDeliveries(g.vis.Drain())
	o.Flush(2)
	if got := decoded(t, sinks[3].last(t).bytes); !slices.Equal(got, []string{"appear 300 n1", "c 300 t1=4"}) {
		t.Fatalf("got %q", got)
	}
}

func TestVanishCarriesItsReason(t *testing.T) {
	g, o, sinks := setup(t)
	g.vis.Remove(200, interest.Death)
	g.vis.Reindex(100, interest.ChunkPos{X: 500, Y: 500}) // pet runs far away
	o.AddDeliveries(g.vis.Drain())
	o.Vanish(3, 999, interest.Gone)
	o.Flush(2)
	want := []string{"vanish 100 out-of-sight", "vanish 200 death", "vanish 999 gone"}
	if got := decoded(t, sinks[3].last(t).bytes); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestOwnerOnlyReachesTheOwnerOutOfSight(t *testing.T) {
	g, o, sinks := setup(t)
	g.vis.Reindex(100, interest.ChunkPos{X: 500, Y: 500})
	o.AddDeliveries(g.vis.Drain())
	o.Flush(2)
	g.set(100, tInventory, 11)
	g.set(100, tHealth, 49)
	o.MarkDirty(100, tInventory)
	o.MarkDirty(100, tHealth)
	o.MarkDirty(100, tPosition) // public: nobody sees the pet now
	o.Flush(3)
	if got := decoded(t, sinks[1].last(t).bytes); !slices.Equal(got, []string{"c 100 t2=11", "c 100 t3=49"}) {
		t.Fatalf("owner got %q", got)
	}
	if got := decoded(t, sinks[2].last(t).bytes); !slices.Equal(got, []string{"c 100 t3=49"}) {
		t.Fatalf("party member got %q", got)
	}
	if n := len(sinks[3].batches); n != 2 {
		t.Fatalf("stranger got %d batches, want 2 (setup and the vanish)", n)
	}
}

func TestAudienceIsEvaluatedAtFlush(t *testing.T) {
	g, o, sinks := setup(t)
	o.MarkDirty(200, tHealth) // the mob: public when marked…
	g.owner[200] = 2          // …tamed by account 2 before the flush
	o.Flush(2)
	if got := decoded(t, sinks[2].last(t).bytes); !slices.Equal(got, []string{"c 200 t3=50"}) {
		t.Fatalf("new owner got %q", got)
	}
	if len(sinks[3].batches) != 1 {
		t.Fatal("stranger received health of an owned entity")
	}
}

func TestAccountsAudienceAndDeduplication(t *testing.T) {
	g, o, sinks := setup(t)
	g.set(200, tQuest, 5)
	g.quest[200] = []acct{3, 3, 77} // 77 has no sink
	o.MarkDirty(200, tQuest)
	st := o.Flush(2)
	if got := decoded(t, sinks[3].last(t).bytes); !slices.Equal(got, []string{"c 200 t5=5"}) {
		t.Fatalf("account 3 got %q", got)
	}
	if len(sinks[1].batches) != 1 || st.Dropped != 1 {
		t.Fatalf("batches to 1: %d, dropped %d", len(sinks[1].batches), st.Dropped)
	}
}

func TestDetachDiscardsAndReattachWorks(t *testing.T) {
	g, o, sinks := setup(t)
	o.MarkDirty(200, tPosition)
	o.Detach(3)
	o.Flush(2)
	if len(sinks[3].batches) != 1 {
		t.Fatal("detached subscriber received a batch")
	}
	fresh := &recorder{}
	o.Attach(3, fresh)
	g.set(200, tPosition, 6)
	o.MarkDirty(200, tPosition)
	o.Flush(3)
	if got := decoded(t, fresh.last(t).bytes); !slices.Equal(got, []string{"c 200 t1=6"}) {
		t.Fatalf("reattached got %q", got)
	}
}

func TestRegisterRefusesADuplicateType(t *testing.T) {
	g := newGame()
	o := New[acct, ent](g)
	g.register(t, o)
	err := o.Register(EncoderFuncs[acct, ent]{WireType: tPosition})
	if !errors.Is(err, ErrDuplicateType) || errcode.Of(err) != "OUTBOX.DUPLICATE_TYPE" {
		t.Fatalf("err = %v", err)
	}
}

func TestDetachAndReattachWithinOneTick(t *testing.T) {
	g, o, sinks := setup(t)
	g.set(300, tPosition, 3)
	o.Appear(3, 300)     // owed to the old connection…
	o.Detach(3)          // …which drops…
	fresh := &recorder{} // …and a new one attaches in the same tick
	o.Attach(3, fresh)
	o.MarkDirty(200, tPosition) // the new connection is an observer too
	o.Flush(2)
	if len(sinks[3].batches) != 1 {
		t.Fatal("the old connection got a batch after Detach")
	}
	if got := decoded(t, fresh.last(t).bytes); !slices.Equal(got, []string{"c 200 t1=7"}) {
		t.Fatalf("new connection got %q", got)
	}
	// The freed slot is reused without mixing state.
	other := &recorder{}
	o.Attach(50, other)
	o.Appear(50, 300)
	o.Flush(3)
	if got := decoded(t, other.last(t).bytes); !slices.Equal(got, []string{"appear 300 n1", "c 300 t1=3"}) {
		t.Fatalf("account in the reused slot got %q", got)
	}
	if len(fresh.batches) != 1 {
		t.Fatal("the reattached connection got someone else's batch")
	}
}

func TestRepeatedAppearGivesOneBurst(t *testing.T) {
	g, o, sinks := setup(t)
	g.set(300, tPosition, 3)
	o.Appear(3, 300)
	o.Appear(3, 300)
	o.Attach(4, nil) // nil sink: nothing attached
	o.Appear(4, 300)
	st := o.Flush(2)
	if got := decoded(t, sinks[3].last(t).bytes); !slices.Equal(got, []string{"appear 300 n1", "c 300 t1=3"}) {
		t.Fatalf("got %q", got)
	}
	if st.Dropped != 1 {
		t.Fatalf("dropped = %d, want 1 (the appear for the sinkless account)", st.Dropped)
	}
}
