package storetest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
)

// The suite's accounts and chunks: each subtest uses its own.
const (
	alice account.ID = iota + 1001
	bob
	carol
)

var (
	here  = torus.ChunkPos{X: 12, Y: 34, Slab: 0}
	there = torus.ChunkPos{X: 12, Y: 34, Slab: -1}
)

// ctx is the test's context: cancelled when the test ends, and bounded so
// that a hung store fails instead of stalling the whole run.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Run runs the single-store contract: open returns a fresh, empty store.
func Run(t *testing.T, open func(t *testing.T) worldstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s worldstore.Store)
	}{
		{"LoadNeverSaved", testLoadNeverSaved},
		{"SaveThenLoad", testSaveThenLoad},
		{"EqualEpochOverwrites", testEqualEpochOverwrites},
		{"HigherEpochOverwrites", testHigherEpochOverwrites},
		{"LowerEpochRefused", testLowerEpochRefused},
		{"FinalRefusesItsEpoch", testFinalRefusesItsEpoch},
		{"NewerEpochOverFinal", testNewerEpochOverFinal},
		{"AccountsIndependent", testAccountsIndependent},
		{"StateLimit", testStateLimit},
		{"EmptyBytesReadNil", testEmptyBytesReadNil},
		{"CallerBuffersNotKept", testCallerBuffersNotKept},
		{"InvalidArguments", testInvalidArguments},
		{"EditsOfUneditedChunk", testEditsOfUneditedChunk},
		{"AppendThenEdits", testAppendThenEdits},
		{"AppendConflict", testAppendConflict},
		{"ChunksIndependent", testChunksIndependent},
		{"ChunkFull", testChunkFull},
		{"CanceledContext", testCanceledContext},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// RunShared runs the contract that needs two handles on one store: what one
// writes the other reads, and races between them keep invariants 1 and 2.
func RunShared(t *testing.T, open func(t *testing.T) (a, b worldstore.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a, b worldstore.Store)
	}{
		{"VisibleAcrossHandles", testVisibleAcrossHandles},
		{"SaveEpochRace", testSaveEpochRace},
		{"FinalSaveRace", testFinalSaveRace},
		{"AppendOneWinnerPerRevision", testAppendOneWinner},
		{"AppendRetryLoopsLoseNothing", testAppendRetryLoops},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t)
			tc.fn(t, a, b)
		})
	}
}

func save(t *testing.T, s worldstore.Store, p worldstore.Player) {
	t.Helper()
	if err := s.SavePlayer(ctx(t), p); err != nil {
		t.Fatalf("SavePlayer(%v, epoch %d): %v", p.Account, p.Epoch, err)
	}
}

func load(t *testing.T, s worldstore.Store, id account.ID) worldstore.Player {
	t.Helper()
	p, err := s.LoadPlayer(ctx(t), id)
	if err != nil {
		t.Fatalf("LoadPlayer(%v): %v", id, err)
	}
	return p
}

func appendEdit(t *testing.T, s worldstore.Store, c torus.ChunkPos, expect uint64, e worldstore.Edit) uint64 {
	t.Helper()
	rev, err := s.AppendEdit(ctx(t), c, expect, e)
	if err != nil {
		t.Fatalf("AppendEdit(%v, %d): %v", c, expect, err)
	}
	if rev != expect+1 {
		t.Fatalf("AppendEdit(%v, %d) = revision %d, want %d", c, expect, rev, expect+1)
	}
	return rev
}

func edits(t *testing.T, s worldstore.Store, c torus.ChunkPos, since uint64) (uint64, []worldstore.RevEdit) {
	t.Helper()
	rev, es, err := s.Edits(ctx(t), c, since)
	if err != nil {
		t.Fatalf("Edits(%v, %d): %v", c, since, err)
	}
	return rev, es
}

// samePlayer compares everything but Saved.
func samePlayer(t *testing.T, got, want worldstore.Player) {
	t.Helper()
	if got.Account != want.Account || got.Epoch != want.Epoch || got.Pos != want.Pos || !bytes.Equal(got.State, want.State) || got.Final != want.Final {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
}

func wantCode(t *testing.T, err error, sentinel error, code string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want one matching %v", err, sentinel)
	}
	if got := errcode.Of(err); got != code {
		t.Fatalf("errcode.Of(%v) = %q, want %q", err, got, code)
	}
}

func testLoadNeverSaved(t *testing.T, s worldstore.Store) {
	_, err := s.LoadPlayer(ctx(t), alice)
	wantCode(t, err, worldstore.ErrNotFound, worldstore.CodeNotFound)
}

func testSaveThenLoad(t *testing.T, s worldstore.Store) {
	p := worldstore.Player{
		Account: alice,
		Epoch:   1_700_000_000_000_001,
		Pos:     torus.Pos{X: 127999.75, Y: -0.125, Z: 1e-300},
		State:   []byte{0, 1, 2, 0xff, 'x'},
		// A caller's Saved is ignored: the store's clock sets it.
		Saved: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	save(t, s, p)
	got := load(t, s, alice)
	samePlayer(t, got, p)
	if got.Saved.IsZero() || got.Saved.Equal(p.Saved) {
		t.Fatalf("Saved = %v: the store must set it (caller gave %v)", got.Saved, p.Saved)
	}
}

func testEqualEpochOverwrites(t *testing.T, s worldstore.Store) {
	p := worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 1}, State: []byte("lvl1")}
	save(t, s, p)
	p.Pos, p.State = torus.Pos{X: 2, Y: 3, Z: 4}, []byte("lvl2")
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
}

func testHigherEpochOverwrites(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 1}, State: []byte("old")})
	p := worldstore.Player{Account: alice, Epoch: 8, Pos: torus.Pos{X: 9}, State: []byte("new")}
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
}

func testLowerEpochRefused(t *testing.T, s worldstore.Store) {
	p := worldstore.Player{Account: alice, Epoch: 8, Pos: torus.Pos{X: 9}, State: []byte("new")}
	save(t, s, p)
	err := s.SavePlayer(ctx(t), worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 1}, State: []byte("late")})
	wantCode(t, err, worldstore.ErrStaleEpoch, worldstore.CodeStaleEpoch)
	var se *worldstore.StaleEpochError
	if !errors.As(err, &se) || se.Account != alice || se.Epoch != 7 || se.Stored != 8 {
		t.Fatalf("error %#v, want *StaleEpochError{alice, 7, 8}", err)
	}
	samePlayer(t, load(t, s, alice), p)
}

// testFinalRefusesItsEpoch: a session's final save (its logout's)
// overwrites its periodic ones, and after it no save of that session
// applies, final or not: a standby that adopted the player from an older
// checkpoint cannot put it back.
func testFinalRefusesItsEpoch(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 1}, State: []byte("periodic")})
	logout := worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 2}, State: []byte("logout"), Final: true}
	save(t, s, logout)
	samePlayer(t, load(t, s, alice), logout)
	for _, final := range []bool{false, true} {
		err := s.SavePlayer(ctx(t), worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 3}, State: []byte("adopted"), Final: final})
		wantCode(t, err, worldstore.ErrStaleEpoch, worldstore.CodeStaleEpoch)
		var se *worldstore.StaleEpochError
		if !errors.As(err, &se) || se.Account != alice || se.Epoch != 7 || se.Stored != 7 || !se.Final {
			t.Fatalf("save over a final record (final %v): error %#v, want *StaleEpochError{alice, 7, 7, Final}", final, err)
		}
	}
	samePlayer(t, load(t, s, alice), logout)
	// An older session is refused as before, and not as final.
	err := s.SavePlayer(ctx(t), worldstore.Player{Account: alice, Epoch: 6})
	var se *worldstore.StaleEpochError
	if !errors.As(err, &se) || se.Stored != 7 || se.Final {
		t.Fatalf("save of an older session over a final record: %#v, want *StaleEpochError{Stored 7, not Final}", err)
	}
	samePlayer(t, load(t, s, alice), logout)
}

// testNewerEpochOverFinal: the next session writes over a final record,
// and its own saves overwrite each other until its final one.
func testNewerEpochOverFinal(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 7, Pos: torus.Pos{X: 1}, State: []byte("logout"), Final: true})
	p := worldstore.Player{Account: alice, Epoch: 8, Pos: torus.Pos{X: 9}, State: []byte("next")}
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
	p.Pos, p.State = torus.Pos{X: 10}, []byte("next, later")
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
	p.Final = true
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
}

func testAccountsIndependent(t *testing.T, s worldstore.Store) {
	a := worldstore.Player{Account: alice, Epoch: 100, Pos: torus.Pos{X: 1}, State: []byte("a")}
	b := worldstore.Player{Account: bob, Epoch: 5, Pos: torus.Pos{X: 2}, State: []byte("b")}
	save(t, s, a)
	save(t, s, b) // a lower epoch than alice's: epochs are per account
	samePlayer(t, load(t, s, alice), a)
	samePlayer(t, load(t, s, bob), b)
	if _, err := s.LoadPlayer(ctx(t), carol); !errors.Is(err, worldstore.ErrNotFound) {
		t.Fatalf("LoadPlayer(carol) = %v, want ErrNotFound", err)
	}
	// The largest account survives the store's integer columns.
	big := worldstore.Player{Account: math.MaxUint64, Epoch: worldstore.MaxEpoch, Pos: torus.Pos{Z: -3}}
	save(t, s, big)
	samePlayer(t, load(t, s, big.Account), big)
}

func testStateLimit(t *testing.T, s worldstore.Store) {
	p := worldstore.Player{Account: alice, Epoch: 1, State: bytes.Repeat([]byte{0xa5}, worldstore.MaxStateBytes)}
	save(t, s, p)
	samePlayer(t, load(t, s, alice), p)
	e := worldstore.Edit{Kind: 1, Data: bytes.Repeat([]byte{0x5a}, worldstore.MaxEditBytes)}
	appendEdit(t, s, here, 0, e)
	if _, es := edits(t, s, here, 0); len(es) != 1 || !bytes.Equal(es[0].Edit.Data, e.Data) {
		t.Fatalf("edit at MaxEditBytes did not round-trip")
	}
}

func testEmptyBytesReadNil(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 1, State: []byte{}})
	if got := load(t, s, alice); got.State != nil {
		t.Fatalf("empty State loaded as %#v, want nil", got.State)
	}
	appendEdit(t, s, here, 0, worldstore.Edit{Kind: 1, Data: []byte{}})
	if _, es := edits(t, s, here, 0); len(es) != 1 || es[0].Edit.Data != nil {
		t.Fatalf("empty Data read as %#v, want nil", es)
	}
}

func testCallerBuffersNotKept(t *testing.T, s worldstore.Store) {
	state := []byte("original")
	save(t, s, worldstore.Player{Account: alice, Epoch: 1, State: state})
	copy(state, "XXXXXXXX")
	got := load(t, s, alice)
	copy(got.State, "YYYYYYYY")
	if again := load(t, s, alice); string(again.State) != "original" {
		t.Fatalf("State = %q after the caller changed its buffers, want %q", again.State, "original")
	}

	data := []byte("marker")
	appendEdit(t, s, here, 0, worldstore.Edit{Kind: 1, Data: data})
	copy(data, "XXXXXX")
	_, es := edits(t, s, here, 0)
	copy(es[0].Edit.Data, "YYYYYY")
	if _, again := edits(t, s, here, 0); string(again[0].Edit.Data) != "marker" {
		t.Fatalf("Data = %q after the caller changed its buffers, want %q", again[0].Edit.Data, "marker")
	}
}

func testInvalidArguments(t *testing.T, s worldstore.Store) {
	ok := worldstore.Player{Account: alice, Epoch: 1}
	with := func(f func(p *worldstore.Player)) worldstore.Player { p := ok; f(&p); return p }
	players := []struct {
		name  string
		p     worldstore.Player
		field string
	}{
		{"NoAccount", with(func(p *worldstore.Player) { p.Account = account.None }), "Player.Account"},
		{"EpochZero", with(func(p *worldstore.Player) { p.Epoch = 0 }), "Player.Epoch"},
		{"EpochAboveMax", with(func(p *worldstore.Player) { p.Epoch = worldstore.MaxEpoch + 1 }), "Player.Epoch"},
		{"PosNaN", with(func(p *worldstore.Player) { p.Pos.Y = math.NaN() }), "Player.Pos"},
		{"PosInf", with(func(p *worldstore.Player) { p.Pos.Z = math.Inf(-1) }), "Player.Pos"},
		{"StateTooLong", with(func(p *worldstore.Player) { p.State = make([]byte, worldstore.MaxStateBytes+1) }), "Player.State"},
	}
	for _, tc := range players {
		t.Run("SavePlayer/"+tc.name, func(t *testing.T) {
			wantInvalid(t, s.SavePlayer(ctx(t), tc.p), tc.field)
		})
	}
	if _, err := s.LoadPlayer(ctx(t), alice); !errors.Is(err, worldstore.ErrNotFound) {
		t.Fatalf("after refused saves LoadPlayer = %v, want ErrNotFound: nothing may be written", err)
	}
	t.Run("LoadPlayer/NoAccount", func(t *testing.T) {
		_, err := s.LoadPlayer(ctx(t), account.None)
		wantInvalid(t, err, "account")
	})

	edits := []struct {
		name  string
		chunk torus.ChunkPos
		e     worldstore.Edit
		field string
	}{
		{"ChunkXNegative", torus.ChunkPos{X: -1, Y: 0}, worldstore.Edit{Kind: 1}, "chunk"},
		{"ChunkYNegative", torus.ChunkPos{X: 0, Y: -1}, worldstore.Edit{Kind: 1}, "chunk"},
		{"KindZero", here, worldstore.Edit{Kind: 0}, "Edit.Kind"},
		{"DataTooLong", here, worldstore.Edit{Kind: 1, Data: make([]byte, worldstore.MaxEditBytes+1)}, "Edit.Data"},
	}
	for _, tc := range edits {
		t.Run("AppendEdit/"+tc.name, func(t *testing.T) {
			_, err := s.AppendEdit(ctx(t), tc.chunk, 0, tc.e)
			wantInvalid(t, err, tc.field)
		})
	}
	if rev, _, err := s.Edits(ctx(t), here, 0); err != nil || rev != 0 {
		t.Fatalf("after refused appends Edits = %d, %v; want revision 0: nothing may be written", rev, err)
	}
	t.Run("Edits/ChunkNegative", func(t *testing.T) {
		_, _, err := s.Edits(ctx(t), torus.ChunkPos{X: -5, Y: 2}, 0)
		wantInvalid(t, err, "chunk")
	})
}

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	wantCode(t, err, worldstore.ErrInvalid, worldstore.CodeInvalid)
	var ie *worldstore.InvalidError
	if !errors.As(err, &ie) || ie.Field != field {
		t.Fatalf("error %v, want an *InvalidError naming %s", err, field)
	}
}

func testEditsOfUneditedChunk(t *testing.T, s worldstore.Store) {
	for _, since := range []uint64{0, 1, math.MaxUint64} {
		if rev, es := edits(t, s, here, since); rev != 0 || len(es) != 0 {
			t.Fatalf("Edits(unedited, %d) = %d, %v; want 0 and none", since, rev, es)
		}
	}
}

func testAppendThenEdits(t *testing.T, s worldstore.Store) {
	want := []worldstore.Edit{
		{Kind: 1, Data: []byte("marker at 3,4"), Account: alice},
		{Kind: 2, Data: []byte("remove marker 1"), Account: bob},
		{Kind: 0xffff, Data: nil, Account: account.None}, // the world's own edit
	}
	for i, e := range want {
		appendEdit(t, s, here, uint64(i), e)
	}
	for since := uint64(0); since <= 5; since++ {
		rev, es := edits(t, s, here, since)
		if rev != 3 {
			t.Fatalf("Edits(%d) revision = %d, want 3", since, rev)
		}
		first := min(since, 3)
		if uint64(len(es)) != 3-first {
			t.Fatalf("Edits(%d) = %d edits, want %d", since, len(es), 3-first)
		}
		for i, re := range es {
			w := want[first+uint64(i)]
			if re.Rev != first+uint64(i)+1 || re.Edit.Kind != w.Kind || re.Edit.Account != w.Account || !bytes.Equal(re.Edit.Data, w.Data) {
				t.Fatalf("Edits(%d)[%d] = %+v, want revision %d with %+v", since, i, re, first+uint64(i)+1, w)
			}
			if re.Saved.IsZero() {
				t.Fatalf("Edits(%d)[%d] has no Saved time", since, i)
			}
		}
	}
}

func testAppendConflict(t *testing.T, s worldstore.Store) {
	appendEdit(t, s, here, 0, worldstore.Edit{Kind: 1, Data: []byte("first")})
	for _, expect := range []uint64{0, 2, 5, math.MaxUint64} {
		_, err := s.AppendEdit(ctx(t), here, expect, worldstore.Edit{Kind: 1, Data: []byte("lost")})
		wantCode(t, err, worldstore.ErrConflict, worldstore.CodeConflict)
		var ce *worldstore.ConflictError
		if !errors.As(err, &ce) || ce.Chunk != here || ce.Expected != expect || ce.Current != 1 {
			t.Fatalf("AppendEdit(expect %d) error %#v, want *ConflictError{%v, %d, 1}", expect, err, here, expect)
		}
	}
	if rev, es := edits(t, s, here, 0); rev != 1 || len(es) != 1 || string(es[0].Edit.Data) != "first" {
		t.Fatalf("after conflicts Edits = %d, %+v; want only the first edit", rev, es)
	}
}

func testChunksIndependent(t *testing.T, s worldstore.Store) {
	neighbour := torus.ChunkPos{X: here.X + 1, Y: here.Y, Slab: here.Slab}
	appendEdit(t, s, here, 0, worldstore.Edit{Kind: 1, Data: []byte("here")})
	appendEdit(t, s, there, 0, worldstore.Edit{Kind: 1, Data: []byte("there 1")}) // same column, slab below
	appendEdit(t, s, there, 1, worldstore.Edit{Kind: 1, Data: []byte("there 2")})
	for _, c := range []struct {
		chunk torus.ChunkPos
		rev   uint64
	}{{here, 1}, {there, 2}, {neighbour, 0}} {
		if rev, es := edits(t, s, c.chunk, 0); rev != c.rev || uint64(len(es)) != c.rev {
			t.Fatalf("Edits(%v) = %d with %d edits, want %d", c.chunk, rev, len(es), c.rev)
		}
	}
}

func testChunkFull(t *testing.T, s worldstore.Store) {
	for rev := uint64(0); rev < worldstore.MaxEditsPerChunk; rev++ {
		appendEdit(t, s, here, rev, worldstore.Edit{Kind: 1, Account: alice})
	}
	_, err := s.AppendEdit(ctx(t), here, worldstore.MaxEditsPerChunk, worldstore.Edit{Kind: 1})
	wantCode(t, err, worldstore.ErrChunkFull, worldstore.CodeChunkFull)
	// A stale expectation on a full chunk is still a conflict: the caller
	// must catch up before it learns anything else.
	_, err = s.AppendEdit(ctx(t), here, 3, worldstore.Edit{Kind: 1})
	wantCode(t, err, worldstore.ErrConflict, worldstore.CodeConflict)
	if rev, es := edits(t, s, here, 0); rev != worldstore.MaxEditsPerChunk || len(es) != worldstore.MaxEditsPerChunk {
		t.Fatalf("full chunk: Edits = %d with %d edits, want %d", rev, len(es), worldstore.MaxEditsPerChunk)
	}
	// Other chunks are not affected.
	appendEdit(t, s, there, 0, worldstore.Edit{Kind: 1})
}

func testCanceledContext(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 1})
	c, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]error{}
	_, calls["LoadPlayer"] = s.LoadPlayer(c, alice)
	calls["SavePlayer"] = s.SavePlayer(c, worldstore.Player{Account: alice, Epoch: 2})
	_, calls["AppendEdit"] = s.AppendEdit(c, here, 0, worldstore.Edit{Kind: 1})
	_, _, calls["Edits"] = s.Edits(c, here, 0)
	for name, err := range calls {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", name, err)
		}
	}
	if p := load(t, s, alice); p.Epoch != 1 {
		t.Fatalf("a cancelled SavePlayer was applied: epoch %d", p.Epoch)
	}
	if rev, _ := edits(t, s, here, 0); rev != 0 {
		t.Fatalf("a cancelled AppendEdit was applied: revision %d", rev)
	}
}

func testClose(t *testing.T, s worldstore.Store) {
	save(t, s, worldstore.Player{Account: alice, Epoch: 1})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]error{}
	_, calls["LoadPlayer"] = s.LoadPlayer(ctx(t), alice)
	calls["SavePlayer"] = s.SavePlayer(ctx(t), worldstore.Player{Account: alice, Epoch: 2})
	_, calls["AppendEdit"] = s.AppendEdit(ctx(t), here, 0, worldstore.Edit{Kind: 1})
	_, _, calls["Edits"] = s.Edits(ctx(t), here, 0)
	for name, err := range calls {
		if !errors.Is(err, worldstore.ErrClosed) || errcode.Of(err) != worldstore.CodeClosed {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func testVisibleAcrossHandles(t *testing.T, a, b worldstore.Store) {
	p := worldstore.Player{Account: alice, Epoch: 3, Pos: torus.Pos{X: 5}, State: []byte("via a")}
	save(t, a, p)
	samePlayer(t, load(t, b, alice), p)
	err := b.SavePlayer(ctx(t), worldstore.Player{Account: alice, Epoch: 2})
	wantCode(t, err, worldstore.ErrStaleEpoch, worldstore.CodeStaleEpoch)

	appendEdit(t, a, here, 0, worldstore.Edit{Kind: 1, Data: []byte("via a")})
	if rev, es := edits(t, b, here, 0); rev != 1 || len(es) != 1 {
		t.Fatalf("b sees revision %d with %d edits, want a's one", rev, len(es))
	}
	_, err = b.AppendEdit(ctx(t), here, 0, worldstore.Edit{Kind: 1})
	wantCode(t, err, worldstore.ErrConflict, worldstore.CodeConflict)
	appendEdit(t, b, here, 1, worldstore.Edit{Kind: 1, Data: []byte("via b")})
	if rev, _ := edits(t, a, here, 0); rev != 2 {
		t.Fatalf("a sees revision %d, want 2", rev)
	}
}

// start returns a channel that releases every goroutine waiting on it at
// once, and the function that releases it.
func start() (<-chan struct{}, func()) {
	c := make(chan struct{})
	return c, func() { close(c) }
}

func testSaveEpochRace(t *testing.T, a, b worldstore.Store) {
	const sessions = 40
	epochs := rand.Perm(sessions) // each session once, in a random order
	stores := []worldstore.Store{a, b}
	gate, open := start()
	var wg sync.WaitGroup
	errs := make([]error, sessions)
	for i, e := range epochs {
		epoch := uint64(e + 1)
		wg.Go(func() {
			<-gate
			// Each session writes its epoch into the position, so the
			// survivor's record shows whose it is.
			errs[i] = stores[i%2].SavePlayer(ctx(t), worldstore.Player{
				Account: alice, Epoch: epoch, Pos: torus.Pos{X: float64(epoch)}, State: []byte{byte(epoch)},
			})
		})
	}
	open()
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		var se *worldstore.StaleEpochError
		if !errors.As(err, &se) || se.Epoch != uint64(epochs[i]+1) || se.Stored <= se.Epoch {
			t.Fatalf("save of epoch %d: %v, want nil or a *StaleEpochError with a higher stored epoch", epochs[i]+1, err)
		}
	}
	for _, s := range stores {
		got := load(t, s, alice)
		if got.Epoch != sessions || got.Pos.X != sessions || !bytes.Equal(got.State, []byte{sessions}) {
			t.Fatalf("after the race the record is %+v, want the newest session's (epoch %d) whole", got, sessions)
		}
	}
}

// testFinalSaveRace: a session's final save races other saves of the
// same session on two handles (the logout's node and the standby that
// adopted the player): whatever the order, the final record survives.
func testFinalSaveRace(t *testing.T, a, b worldstore.Store) {
	const rounds, others = 10, 8
	stores := []worldstore.Store{a, b}
	for r := range rounds {
		acc := account.ID(2000 + r)
		epoch := uint64(r + 1)
		gate, open := start()
		var wg sync.WaitGroup
		final := worldstore.Player{Account: acc, Epoch: epoch, Pos: torus.Pos{X: -1}, State: []byte("logout"), Final: true}
		wg.Go(func() {
			<-gate
			if err := stores[r%2].SavePlayer(ctx(t), final); err != nil {
				t.Errorf("round %d: the final save: %v", r, err)
			}
		})
		for i := range others {
			wg.Go(func() {
				<-gate
				err := stores[(r+i+1)%2].SavePlayer(ctx(t), worldstore.Player{Account: acc, Epoch: epoch, Pos: torus.Pos{X: float64(i)}, State: []byte("adopted")})
				var se *worldstore.StaleEpochError
				if err != nil && (!errors.As(err, &se) || !se.Final) {
					t.Errorf("round %d: save %d: %v, want nil or a final *StaleEpochError", r, i, err)
				}
			})
		}
		open()
		wg.Wait()
		for _, s := range stores {
			samePlayer(t, load(t, s, acc), final)
		}
	}
}

func testAppendOneWinner(t *testing.T, a, b worldstore.Store) {
	const rounds, writers = 12, 6
	stores := []worldstore.Store{a, b}
	for r := range uint64(rounds) {
		gate, open := start()
		var wg sync.WaitGroup
		revs := make([]uint64, writers)
		errs := make([]error, writers)
		for w := range writers {
			wg.Go(func() {
				<-gate
				revs[w], errs[w] = stores[w%2].AppendEdit(ctx(t), here, r, worldstore.Edit{Kind: uint16(w + 1)})
			})
		}
		open()
		wg.Wait()
		winner := -1
		for w := range writers {
			if errs[w] == nil {
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both appended at revision %d", r, winner, w, r)
				}
				if revs[w] != r+1 {
					t.Fatalf("round %d: winner got revision %d, want %d", r, revs[w], r+1)
				}
				winner = w
				continue
			}
			var ce *worldstore.ConflictError
			if !errors.As(errs[w], &ce) || ce.Expected != r || ce.Current != r+1 {
				t.Fatalf("round %d: writer %d: %v, want a *ConflictError at current revision %d", r, w, errs[w], r+1)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody appended", r)
		}
		_, es := edits(t, stores[int(r)%2], here, r)
		if len(es) != 1 || es[0].Rev != r+1 || es[0].Edit.Kind != uint16(winner+1) {
			t.Fatalf("round %d: stored %+v, want the winner's (writer %d) edit at revision %d", r, es, winner, r+1)
		}
	}
}

func testAppendRetryLoops(t *testing.T, a, b worldstore.Store) {
	const writers, each = 6, 15
	stores := []worldstore.Store{a, b}
	gate, open := start()
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			<-gate
			s := stores[w%2]
			var rev uint64
			for i := 0; i < each; {
				// The data names the writer and its count, so a lost or
				// doubled edit shows.
				got, err := s.AppendEdit(ctx(t), here, rev, worldstore.Edit{Kind: uint16(w + 1), Data: []byte{byte(i)}})
				var ce *worldstore.ConflictError
				switch {
				case err == nil:
					rev = got
					i++
				case errors.As(err, &ce):
					if ce.Current <= rev {
						errs[w] = err // revisions never go back
						return
					}
					rev = ce.Current
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	open()
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	rev, es := edits(t, a, here, 0)
	if rev != writers*each || len(es) != writers*each {
		t.Fatalf("revision %d with %d edits, want %d", rev, len(es), writers*each)
	}
	next := make([]int, writers)
	for i, re := range es {
		if re.Rev != uint64(i+1) {
			t.Fatalf("edit %d has revision %d: revisions must have no gaps", i, re.Rev)
		}
		w := int(re.Edit.Kind) - 1
		if len(re.Edit.Data) != 1 || int(re.Edit.Data[0]) != next[w] {
			t.Fatalf("revision %d is writer %d's edit %v, want its edit %d: lost or doubled", re.Rev, w, re.Edit.Data, next[w])
		}
		next[w]++
	}
}
