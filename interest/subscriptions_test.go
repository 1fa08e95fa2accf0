package interest

import (
	"math"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/torus"
)

type hookLog struct {
	events []string
}

func (l *hookLog) hooks() Hooks[uint64] {
	return Hooks[uint64]{
		FirstSubscriber: func(c ChunkPos) { l.events = append(l.events, "first "+chunkString(c)) },
		LastSubscriber:  func(c ChunkPos) { l.events = append(l.events, "last "+chunkString(c)) },
		ChunkSent:       func(s uint64, c ChunkPos) { l.events = append(l.events, "sent "+u(s)+" "+chunkString(c)) },
		ChunkUnsent:     func(s uint64, c ChunkPos) { l.events = append(l.events, "unsent "+u(s)+" "+chunkString(c)) },
	}
}

func chunkString(c ChunkPos) string {
	return "(" + i32(c.X) + "," + i32(c.Y) + "," + i32(c.Slab) + ")"
}

func newSubs(t testing.TB) (*Subscriptions[uint64], *hookLog) {
	t.Helper()
	s := NewSubscriptions[uint64](torus.Default())
	l := &hookLog{}
	s.AddHooks(l.hooks())
	return s, l
}

func TestManifestResetIsAnnouncedButNotSubscribedUntilSent(t *testing.T) {
	s, l := newSubs(t)
	a := ChunkPos{X: 10, Y: 20, Slab: 0}
	s.Apply(1, Manifest{Reset: true, Added: []ChunkPos{a}})
	if !s.IsAnnounced(1, a) {
		t.Fatal("chunk not announced after reset")
	}
	if s.IsSent(1, a) || s.SubscriberCount(a) != 0 || len(l.events) != 0 {
		t.Fatalf("announced chunk subscribed before it was sent: sent=%v count=%d hooks=%v",
			s.IsSent(1, a), s.SubscriberCount(a), l.events)
	}
	if got := s.AppendUnsent(nil, 1); !slices.Equal(got, []ChunkPos{a}) {
		t.Fatalf("unsent = %v, want [%v]", got, a)
	}
	if !s.MarkSent(1, a) {
		t.Fatal("MarkSent refused an announced chunk")
	}
	if got := s.AppendSubscribers(nil, a); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("subscribers = %v, want [1]", got)
	}
	want := []string{"first (10,20,0)", "sent 1 (10,20,0)"}
	if !slices.Equal(l.events, want) {
		t.Fatalf("hooks = %v, want %v", l.events, want)
	}
	if got := s.AppendUnsent(nil, 1); len(got) != 0 {
		t.Fatalf("unsent after MarkSent = %v", got)
	}
}

func TestWithdrawalRemovesSubscriber(t *testing.T) {
	s, l := newSubs(t)
	a := ChunkPos{X: 3, Y: 4, Slab: 1}
	s.Apply(1, Manifest{Added: []ChunkPos{a}})
	s.MarkSent(1, a)
	l.events = nil
	s.Apply(1, Manifest{Removed: []ChunkPos{a}})
	if s.IsAnnounced(1, a) || s.IsSent(1, a) || s.SubscriberCount(a) != 0 {
		t.Fatal("withdrawn chunk still held")
	}
	want := []string{"unsent 1 (3,4,1)", "last (3,4,1)"}
	if !slices.Equal(l.events, want) {
		t.Fatalf("hooks = %v, want %v", l.events, want)
	}
}

func TestSecondResetClearsOldChunk(t *testing.T) {
	s, _ := newSubs(t)
	a, b := ChunkPos{X: 1, Y: 1}, ChunkPos{X: 2, Y: 2}
	s.Apply(7, Manifest{Reset: true, Added: []ChunkPos{a}})
	s.MarkSent(7, a)
	s.Apply(7, Manifest{Reset: true, Added: []ChunkPos{b}})
	if s.IsAnnounced(7, a) || s.IsSent(7, a) || s.SubscriberCount(a) != 0 {
		t.Fatal("old chunk survived the second reset")
	}
	if !s.IsAnnounced(7, b) || s.IsSent(7, b) {
		t.Fatal("new chunk should be announced and not yet sent")
	}
	if s.AnnouncedCount(7) != 1 || s.SentCount(7) != 0 {
		t.Fatalf("announced=%d sent=%d, want 1 and 0", s.AnnouncedCount(7), s.SentCount(7))
	}
}

func TestResetKeepsChunksStillWanted(t *testing.T) {
	s, l := newSubs(t)
	a, b := ChunkPos{X: 1, Y: 1}, ChunkPos{X: 2, Y: 2}
	s.Apply(7, Manifest{Reset: true, Added: []ChunkPos{a}})
	s.MarkSent(7, a)
	l.events = nil
	s.Apply(7, Manifest{Reset: true, Added: []ChunkPos{a, b}})
	if !s.IsSent(7, a) || len(l.events) != 0 {
		t.Fatalf("a reset that still names a chunk must not unsend it: sent=%v hooks=%v", s.IsSent(7, a), l.events)
	}
}

func TestThirtySubscribersThenForgetOneLeaves29(t *testing.T) {
	s, l := newSubs(t)
	c := ChunkPos{X: 100, Y: 100}
	for id := uint64(1); id <= 30; id++ {
		s.Announce(id, c)
		s.MarkSent(id, c)
	}
	if n := s.SubscriberCount(c); n != 30 {
		t.Fatalf("count = %d, want 30", n)
	}
	l.events = nil
	s.Forget(17)
	if n := s.SubscriberCount(c); n != 29 {
		t.Fatalf("count after forget = %d, want 29", n)
	}
	subs := s.AppendSubscribers(nil, c)
	if slices.Contains(subs, 17) || len(subs) != 29 {
		t.Fatalf("subscribers after forget = %v", subs)
	}
	if s.Len() != 29 || s.IsAnnounced(17, c) {
		t.Fatal("forgotten subscriber still known")
	}
	if !slices.Equal(l.events, []string{"unsent 17 (100,100,0)"}) {
		t.Fatalf("hooks = %v", l.events)
	}
	// The freed slot is reused by a newcomer without mixing state.
	s.Announce(99, c)
	if s.IsSent(99, c) || !s.MarkSent(99, c) || s.SubscriberCount(c) != 30 {
		t.Fatal("newcomer in a reused slot inherited state")
	}
}

func TestColumnCountsAcrossThreeSlabsAndTwoSubscribers(t *testing.T) {
	s, _ := newSubs(t)
	col := Column{X: 40, Y: 41}
	for _, sub := range []uint64{1, 2} {
		for slab := int32(-1); slab <= 1; slab++ {
			c := ChunkPos{X: col.X, Y: col.Y, Slab: slab}
			s.Announce(sub, c)
			s.MarkSent(sub, c)
			s.MarkSent(sub, c) // a repeated mark must not inflate
		}
	}
	if n := s.ColumnCount(col); n != 6 {
		t.Fatalf("column count = %d, want 6", n)
	}
	s.Unsend(1, ChunkPos{X: col.X, Y: col.Y, Slab: 0})
	if n := s.ColumnCount(col); n != 5 {
		t.Fatalf("after one unsend = %d, want 5", n)
	}
	s.Forget(2)
	if n := s.ColumnCount(col); n != 2 {
		t.Fatalf("after forget = %d, want 2", n)
	}
	// The same column named from the other side of the seam.
	if n := s.ColumnCount(Column{X: col.X - 4000, Y: col.Y + 4000}); n != 2 {
		t.Fatalf("unnormalised column lookup = %d, want 2", n)
	}
	if n := s.ColumnCount(Column{X: 41, Y: 41}); n != 0 {
		t.Fatalf("neighbour column = %d, want 0", n)
	}
}

func TestUnsendingANeverSentChunkChangesNothing(t *testing.T) {
	s, l := newSubs(t)
	a, b := ChunkPos{X: 5, Y: 5}, ChunkPos{X: 6, Y: 5}
	s.Announce(1, a)
	s.Announce(1, b)
	s.MarkSent(1, a)
	l.events = nil
	if s.Unsend(1, b) || s.Unsend(2, a) {
		t.Fatal("Unsend reported a change")
	}
	if len(l.events) != 0 || s.SubscriberCount(a) != 1 || s.ColumnCount(ColumnOf(a)) != 1 || !s.IsAnnounced(1, b) {
		t.Fatalf("state changed: hooks=%v", l.events)
	}
}

func TestMarkSentRequiresAnnouncement(t *testing.T) {
	s, l := newSubs(t)
	a := ChunkPos{X: 5, Y: 5}
	if s.MarkSent(1, a) {
		t.Fatal("unknown subscriber marked")
	}
	s.Announce(1, ChunkPos{X: 9, Y: 9})
	if s.MarkSent(1, a) || s.SubscriberCount(a) != 0 || len(l.events) != 0 {
		t.Fatal("unannounced chunk was subscribed")
	}
}

func TestHooksOrderAcrossSubscribers(t *testing.T) {
	s, l := newSubs(t)
	c := ChunkPos{X: 1, Y: 2, Slab: 3}
	for _, sub := range []uint64{1, 2} {
		s.Announce(sub, c)
		s.MarkSent(sub, c)
	}
	s.Unsend(1, c)
	s.Withdraw(2, c)
	want := []string{
		"first (1,2,3)", "sent 1 (1,2,3)", "sent 2 (1,2,3)",
		"unsent 1 (1,2,3)", "unsent 2 (1,2,3)", "last (1,2,3)",
	}
	if !slices.Equal(l.events, want) {
		t.Fatalf("hooks =\n%v\nwant\n%v", l.events, want)
	}
}

func TestSubscriptionKeysAreNormalised(t *testing.T) {
	s, _ := newSubs(t)
	// Column −1 is column 3999; column 4000 is column 0.
	s.Announce(1, ChunkPos{X: -1, Y: 4000, Slab: -2})
	if !s.MarkSent(1, ChunkPos{X: 3999, Y: 0, Slab: -2}) {
		t.Fatal("normalised form of an announced chunk refused")
	}
	for _, c := range []ChunkPos{{X: -1, Y: 0, Slab: -2}, {X: 7999, Y: -4000, Slab: -2}} {
		if !s.IsSent(1, c) || s.SubscriberCount(c) != 1 {
			t.Fatalf("%v not found as its normalised chunk", c)
		}
	}
	if s.IsSent(1, ChunkPos{X: 3999, Y: 0, Slab: 2}) {
		t.Fatal("slabs must not wrap")
	}
	if got := s.AppendAnnounced(nil, 1); !slices.Equal(got, []ChunkPos{{X: 3999, Y: 0, Slab: -2}}) {
		t.Fatalf("stored key = %v", got)
	}
}

func TestTaggedSubscriberKeys(t *testing.T) {
	s := NewSubscriptions[Subscriber](torus.Default())
	c := ChunkPos{X: 8, Y: 8}
	// An account and a node with the same number are different subscribers.
	for _, k := range []Subscriber{Account(3), Node(3)} {
		s.Announce(k, c)
		s.MarkSent(k, c)
	}
	if n := s.SubscriberCount(c); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	s.Forget(Node(3))
	if got := s.AppendSubscribers(nil, c); !slices.Equal(got, []Subscriber{Account(3)}) {
		t.Fatalf("subscribers = %v", got)
	}
	if Account(3).String() != "account:3" || Node(4).String() != "node:4" {
		t.Fatal("String")
	}
	// The key gives back the account.ID it was made of, and only for accounts.
	if a, ok := Account(math.MaxUint64).Account(); !ok || a != math.MaxUint64 {
		t.Fatalf("Account(max).Account() = %d, %v", a, ok)
	}
	if a, ok := Node(3).Account(); ok || a != account.None {
		t.Fatalf("Node(3).Account() = %d, %v; want None, false", a, ok)
	}
}
