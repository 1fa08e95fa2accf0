package worldstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/worldstore/storetest"
)

func TestMemoryContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) worldstore.Store {
		s := worldstore.NewMemory(nil)
		t.Cleanup(func() { s.Close() })
		return s
	})
	storetest.RunShared(t, func(t *testing.T) (a, b worldstore.Store) {
		s := worldstore.NewMemory(nil)
		t.Cleanup(func() { s.Close() })
		return s, s
	})
}

func TestMemorySavedIsItsClock(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	clk := clock.NewFake(start)
	s := worldstore.NewMemory(clk)
	defer s.Close()
	if err := s.SavePlayer(ctx, worldstore.Player{Account: 1, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := s.AppendEdit(ctx, torus.ChunkPos{}, 0, worldstore.Edit{Kind: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := s.LoadPlayer(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, es, err := s.Edits(ctx, torus.ChunkPos{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Microseconds, as sqlworld keeps them.
	want := start.Truncate(time.Microsecond)
	if !p.Saved.Equal(want) || !es[0].Saved.Equal(want.Add(time.Second)) {
		t.Fatalf("Saved = %v and %v, want %v and a second later", p.Saved, es[0].Saved, want)
	}
}

func TestValidateErrorsNameFieldAndValue(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{worldstore.ValidatePlayer(worldstore.Player{Epoch: 1}), "worldstore: invalid Player.Account: is 0 (account.None), not an account"},
		{worldstore.ValidatePlayer(worldstore.Player{Account: 1}), "worldstore: invalid Player.Epoch: is 0; session epochs start at 1"},
		{worldstore.ValidatePlayer(worldstore.Player{Account: 1, Epoch: 1 << 63}), "worldstore: invalid Player.Epoch: is 9223372036854775808, above MaxEpoch (2^63-1)"},
		{worldstore.ValidatePlayer(worldstore.Player{Account: 1, Epoch: 1, Pos: torus.Pos{X: 1.5, Y: math.NaN(), Z: math.Inf(1)}}), "worldstore: invalid Player.Pos: is (1.5, NaN, +Inf), not finite"},
		{worldstore.ValidatePlayer(worldstore.Player{Account: 1, Epoch: 1, State: make([]byte, 65537)}), "worldstore: invalid Player.State: is 65537 bytes, more than MaxStateBytes (65536)"},
		{worldstore.ValidateEdit(worldstore.Edit{}), "worldstore: invalid Edit.Kind: is 0, which is reserved"},
		{worldstore.ValidateEdit(worldstore.Edit{Kind: 1, Data: make([]byte, 1025)}), "worldstore: invalid Edit.Data: is 1025 bytes, more than MaxEditBytes (1024)"},
		{worldstore.ValidateChunk(torus.ChunkPos{X: -1, Y: 2, Slab: -3}), "worldstore: invalid chunk: is (-1, 2, slab -3), not normalised (X and Y must be ≥ 0; use torus.World.NormaliseChunk)"},
	}
	for _, tc := range tests {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("error %v\nwant  %s", tc.err, tc.want)
		}
		if !errors.Is(tc.err, worldstore.ErrInvalid) || errcode.Of(tc.err) != worldstore.CodeInvalid {
			t.Errorf("%v does not match ErrInvalid with code %s", tc.err, worldstore.CodeInvalid)
		}
	}
}

func TestErrorTexts(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&worldstore.StaleEpochError{Account: 7, Epoch: 3, Stored: 4}, "worldstore: save of account 7 with epoch 3 refused: a record of epoch 4 is stored"},
		{&worldstore.ConflictError{Chunk: torus.ChunkPos{X: 1, Y: 2, Slab: 3}, Expected: 5, Current: 6}, "worldstore: append to chunk (1, 2, slab 3) expected revision 5, current is 6"},
	}
	for _, tc := range tests {
		if tc.err.Error() != tc.want {
			t.Errorf("error %q\nwant  %q", tc.err, tc.want)
		}
	}
}
