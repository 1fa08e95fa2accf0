package coord

import (
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/shardwise/shardwise/errcode"
)

func TestWatchMembersSnapshotThenChangesInOrder(t *testing.T) {
	onEachEtcd(t, func(t *testing.T, eps []string) {
		ctx := testCtx(t)
		c := connect(t, eps, nil)
		early := register(t, c, RegisterConfig{Name: "early", Role: "econ"})

		events, err := c.WatchMembers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next := func() MembershipEvent {
			t.Helper()
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("event channel closed early")
				}
				return ev
			case <-ctx.Done():
				t.Fatal("no membership event")
			}
			panic("unreachable")
		}
		if ev := next(); ev.Kind != MemberJoined || ev.Member.Name != "early" || ev.Member.Incarnation != early.Incarnation() {
			t.Fatalf("snapshot event %+v, want early joined", ev)
		}

		a := register(t, c, RegisterConfig{Name: "zone-a", Role: "zone"})
		b := register(t, c, RegisterConfig{Name: "zone-b", Role: "zone"})
		if err := a.Update(ctx, map[string]string{"link": "a:1"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		want := []struct {
			kind MembershipEventKind
			name string
		}{
			{MemberJoined, "zone-a"},
			{MemberJoined, "zone-b"},
			{MemberUpdated, "zone-a"},
			{MemberLeft, "zone-b"},
		}
		var lastRev int64
		for i, w := range want {
			ev := next()
			if ev.Kind != w.kind || ev.Member.Name != w.name {
				t.Fatalf("event %d = %v %s, want %v %s", i, ev.Kind, ev.Member.Name, w.kind, w.name)
			}
			if ev.Revision <= lastRev {
				t.Fatalf("event %d revision %d not after %d", i, ev.Revision, lastRev)
			}
			lastRev = ev.Revision
		}
	})
}

func TestWatchMembersClosesWithClient(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	events, err := c.WatchMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the watch goroutine, so the channel is closed now.
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("event after Close")
		}
	default:
		t.Fatal("event channel still open after Close")
	}
	if _, err := c.WatchMembers(ctx); err == nil {
		t.Fatal("WatchMembers on a closed client succeeded")
	}
}

func TestDiffMembers(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := func(id NodeID, name string, incar int64, link string) Member {
		return Member{ID: id, Name: name, Role: "zone", Incarnation: incar, JoinedAt: at, Addrs: map[string]string{"link": link}}
	}
	known := map[NodeID]Member{
		0: m(0, "a", 10, "x"),
		1: m(1, "b", 11, "x"),
		2: m(2, "c", 12, "x"),
	}
	now := []Member{
		m(0, "a", 10, "x"), // unchanged
		m(1, "b", 11, "y"), // updated
		m(2, "d", 20, "x"), // id changed hands
		m(3, "e", 21, "x"), // new
	}
	evs := diffMembers(known, now, 30)
	type kn struct {
		k    MembershipEventKind
		name string
	}
	var got []kn
	for _, ev := range evs {
		if ev.Revision != 30 {
			t.Fatalf("event %+v revision, want 30", ev)
		}
		got = append(got, kn{ev.Kind, ev.Member.Name})
	}
	want := []kn{{MemberUpdated, "b"}, {MemberLeft, "c"}, {MemberJoined, "d"}, {MemberJoined, "e"}}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if len(known) != 4 || known[2].Name != "d" {
		t.Fatalf("known after diff = %v", known)
	}
	// And a member that vanished.
	evs = diffMembers(known, now[:2], 31)
	if len(evs) != 2 || evs[0].Kind != MemberLeft || evs[0].Member.Name != "d" || evs[1].Member.Name != "e" {
		t.Fatalf("events %+v, want d and e left", evs)
	}
}

func TestMemberRecordRoundTrip(t *testing.T) {
	in := Member{
		ID: 200, Name: "zone-a", Role: "zone",
		Addrs:    map[string]string{"link": "10.0.0.1:7100"},
		Meta:     map[string]string{"build": "abc"},
		Lease:    0x1234,
		JoinedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
	b, err := encodeMember(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeMember(b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameMember(in, out) {
		t.Fatalf("round trip %+v → %+v", in, out)
	}
}

func TestDecodeMemberRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"not json", `zone`},
		{"no id", `{"name":"a","role":"zone","lease":1}`},
		{"id too big", `{"id":256,"name":"a","role":"zone","lease":1}`},
		{"negative id", `{"id":-1,"name":"a","role":"zone","lease":1}`},
		{"no name", `{"id":1,"role":"zone","lease":1}`},
		{"name with space", `{"id":1,"name":"a b","role":"zone","lease":1}`},
		{"name in capitals", `{"id":1,"name":"Zone-A","role":"zone","lease":1}`},
		{"name is a path", `{"id":1,"name":"..","role":"zone","lease":1}`},
		{"no role", `{"id":1,"name":"a","lease":1}`},
		{"unknown field", `{"id":1,"name":"a","role":"zone","lease":1,"x":1}`},
		{"trailing", `{"id":1,"name":"a","role":"zone","lease":1} {}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := decodeMember([]byte(tc.in))
			if err == nil {
				t.Fatalf("decodeMember(%s) = %+v, want an error", tc.in, m)
			}
			// A bad name is reported under the record's key, with its value.
			if strings.HasPrefix(tc.name, "name ") {
				ce := asType[*errcode.ConfigError](t, err)
				if ce.Field != "name" || !strings.Contains(tc.in, `"name":"`+ce.Value.(string)+`"`) {
					t.Fatalf("error %v: want field name and the record's value", err)
				}
			}
		})
	}
}

// FuzzDecodeMember: member records come from etcd, which anyone with access
// can write. Decoding never panics, and what decodes re-encodes to a record
// that decodes to the same member.
func FuzzDecodeMember(f *testing.F) {
	seed, _ := encodeMember(Member{ID: 3, Name: "zone-a", Role: "zone", Addrs: map[string]string{"link": "h:1"}, Lease: 7})
	f.Add(seed)
	f.Add([]byte(`{"id":0,"name":"n","role":"r","lease":0,"joined_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":255}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMember(b)
		if err != nil {
			return
		}
		again, err := encodeMember(m)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		m2, err := decodeMember(again)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err)
		}
		if !sameMember(m, m2) || !maps.Equal(m.Addrs, m2.Addrs) {
			t.Fatalf("round trip changed %+v → %+v", m, m2)
		}
		if !json.Valid(again) {
			t.Fatalf("encoded %q is not JSON", again)
		}
	})
}

// A member watch broken by compaction re-lists and reports the difference,
// including an id that changed hands while it was not looking, and then
// follows live changes again.
func TestWatchMembersAcrossCompaction(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	stay := register(t, c, RegisterConfig{Name: "stay", Role: "zone"})
	leave := register(t, c, RegisterConfig{Name: "leave", Role: "zone"})
	var (
		once sync.Once
		join *Registration
	)
	c.beforeWatch = func() error {
		once.Do(func() {
			if err := leave.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			// Takes the id leave freed: same id, new incarnation.
			r, err := c.Register(ctx, RegisterConfig{Name: "join", Role: "econ"})
			if err != nil {
				t.Errorf("register: %v", err)
				return
			}
			join = r
			t.Cleanup(func() { _ = r.Close() })
			if err := compactNow(ctx, c); err != nil {
				t.Errorf("compact: %v", err)
			}
		})
		return nil
	}
	events, err := c.WatchMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() MembershipEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event channel closed early")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no membership event")
		}
		panic("unreachable")
	}
	want := []struct {
		kind MembershipEventKind
		name string
	}{
		{MemberJoined, "stay"},
		{MemberJoined, "leave"},
		{MemberLeft, "leave"},
		{MemberJoined, "join"},
	}
	for i, w := range want {
		ev := next()
		if ev.Kind != w.kind || ev.Member.Name != w.name {
			t.Fatalf("event %d = %v %s, want %v %s", i, ev.Kind, ev.Member.Name, w.kind, w.name)
		}
	}
	if join == nil || join.ID() != leave.ID() {
		t.Fatalf("join did not take leave's id %d", leave.ID())
	}
	if err := stay.Close(); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Kind != MemberLeft || ev.Member.Name != "stay" {
		t.Fatalf("after re-watch: event %v %s, want stay left", ev.Kind, ev.Member.Name)
	}
}

// A member watch broken while etcd keeps its history (as if etcd lost its
// leader) resumes where it stopped, so even a node that joined and left
// while the watch was down is reported; a re-list would miss it.
func TestWatchMembersResumesWithoutMissingChanges(t *testing.T) {
	ctx := testCtx(t)
	c := connect(t, sharedEtcd.Endpoints(), nil)
	register(t, c, RegisterConfig{Name: "stay", Role: "zone"})
	watches := 0 // only the watch goroutine touches it
	c.beforeWatch = func() error {
		watches++
		if watches > 1 {
			return nil
		}
		r, err := c.Register(ctx, RegisterConfig{Name: "brief", Role: "zone"})
		if err != nil {
			t.Errorf("register: %v", err)
			return nil
		}
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		return rpctypes.ErrNoLeader
	}
	events, err := c.WatchMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind MembershipEventKind
		name string
	}{
		{MemberJoined, "stay"},
		{MemberJoined, "brief"},
		{MemberLeft, "brief"},
	}
	for i, w := range want {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event channel closed early")
			}
			if ev.Kind != w.kind || ev.Member.Name != w.name {
				t.Fatalf("event %d = %v %s, want %v %s", i, ev.Kind, ev.Member.Name, w.kind, w.name)
			}
		case <-ctx.Done():
			t.Fatalf("event %d (%v %s) never delivered", i, w.kind, w.name)
		}
	}
}
