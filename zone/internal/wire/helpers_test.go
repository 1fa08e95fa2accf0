package wire

import (
	"errors"
	"github.com/shardwise/shardwise/internal/binread/codectest"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/torus"
)

// message is what every payload type implements.
type message = codectest.Message

// codec is one payload type under test (codectest.Codec).
type codec = codectest.Codec[message]

func adapt[T message](decode func([]byte) (T, error)) func([]byte) (message, error) {
	return codectest.Adapt[message](decode)
}

var (
	fence0   = Fence{}
	fenceMax = Fence{Node: math.MaxUint64, Lease: math.MinInt64, Table: math.MaxUint64}
	fenceEtc = Fence{Node: 17, Lease: 7587891234567890123, Table: 42}
	chunkMax = torus.ChunkPos{X: math.MaxInt32, Y: math.MinInt32, Slab: -1}
)

func codecs() []codec {
	return []codec{
		{
			Name:   "Fence",
			Decode: adapt(DecodeFence),
			Samples: []message{
				fence0, fenceMax, fenceEtc, Fence{Lease: -1, Table: 127}, Fence{Lease: 1, Table: 128},
			},
			Random: func(r *rand.Rand) message { return randFence(r) },
		},
		{
			Name:   "Subscribe",
			Decode: adapt(DecodeSubscribe),
			Samples: []message{
				Subscribe{},
				Subscribe{Fence: fenceEtc, Add: []torus.ChunkPos{{X: 1, Y: 2, Slab: 0}, chunkMax}},
				Subscribe{Fence: fenceMax, Remove: []torus.ChunkPos{{}}, Resync: []torus.ChunkPos{{X: -64, Y: 63, Slab: math.MinInt32}}},
				Subscribe{Add: []torus.ChunkPos{{X: 3}}, Remove: []torus.ChunkPos{{Y: 4}}, Resync: []torus.ChunkPos{{Slab: 5}}},
			},
			Random: func(r *rand.Rand) message {
				return Subscribe{Fence: randFence(r), Add: randChunks(r), Remove: randChunks(r), Resync: randChunks(r)}
			},
		},
		{
			Name:   "Intents",
			Decode: adapt(DecodeIntents),
			Samples: []message{
				Intents{},
				Intents{Fence: fenceEtc, Tick: 1 << 40, List: []Intent{
					{Kind: 1, Source: 1<<63 | 5, Target: 9, Epoch: 3, Amount: -3, Data: []byte("hit")},
					{Kind: math.MaxUint16, Source: math.MaxUint64, Epoch: math.MaxUint64, Amount: math.MinInt64},
					{Amount: math.MaxInt64, Data: make([]byte, MaxIntentData)},
				}},
			},
			Random: func(r *rand.Rand) message {
				m := Intents{Fence: randFence(r), Tick: randU64(r)}
				for range randLen(r) {
					m.List = append(m.List, Intent{
						Kind:   uint16(randU64(r)),
						Source: randU64(r),
						Target: randU64(r),
						Epoch:  randU64(r),
						Amount: randI64(r),
						Data:   randBytes(r, MaxIntentData),
					})
				}
				return m
			},
		},
		{
			Name:   "Forward",
			Decode: adapt(DecodeForward),
			Samples: []message{
				Forward{},
				Forward{Fence: fenceEtc, Tick: 7, Frames: [][]byte{[]byte("a"), nil, []byte("ccc")}, Accounts: []AccountFrames{
					{Account: 1, Frames: []uint32{0, 2}},
					{Account: math.MaxUint64, Frames: []uint32{1, 1, 0}},
					{Account: 300},
				}},
				// Frames nobody receives are form-valid (invariant 5).
				Forward{Frames: [][]byte{[]byte("x")}},
			},
			Random: func(r *rand.Rand) message { return randForward(r, randLen(r), randLen(r)) },
		},
		{
			Name:   "Routes",
			Decode: adapt(DecodeRoutes),
			Samples: []message{
				Routes{},
				Routes{Full: true},
				Routes{Fence: fenceEtc, Version: 3, Full: true, Set: []account.ID{1, 2, math.MaxUint64}},
				Routes{Fence: fenceMax, Version: math.MaxUint64, Set: []account.ID{5}, Unset: []account.ID{6, 128}},
			},
			Random: func(r *rand.Rand) message {
				m := Routes{Fence: randFence(r), Version: randU64(r), Full: r.IntN(2) == 0, Set: randAccounts(r)}
				if !m.Full {
					m.Unset = randAccounts(r)
				}
				return m
			},
		},
		{
			Name:   "Update",
			Decode: adapt(DecodeUpdate),
			Samples: []message{
				Update{},
				Update{Chunk: chunkMax, Frames: []byte{1, 2, 3}},
				Update{Chunk: torus.ChunkPos{X: 10, Y: 20, Slab: 1}, Frames: make([]byte, 300)},
			},
			Random: func(r *rand.Rand) message {
				return Update{Chunk: randChunk(r), Frames: randBytes(r, 1000)}
			},
		},
		{
			Name:   "Snapshot",
			Decode: adapt(DecodeSnapshot),
			Samples: []message{
				Snapshot{},
				Snapshot{Chunk: chunkMax, Entries: []SnapshotEntry{
					{Entity: 1<<63 | 77, Epoch: 2, Seq: 1000, Frames: []byte("frames")},
					{},
					{Entity: math.MaxUint64, Epoch: math.MaxUint64, Seq: math.MaxUint64},
				}},
			},
			Random: func(r *rand.Rand) message {
				m := Snapshot{Chunk: randChunk(r)}
				for range randLen(r) {
					m.Entries = append(m.Entries, SnapshotEntry{
						Entity: randU64(r), Epoch: randU64(r), Seq: randU64(r), Frames: randBytes(r, 200),
					})
				}
				return m
			},
		},
		{
			Name:    "Terrain",
			Decode:  adapt(DecodeTerrain),
			Samples: []message{Terrain{}, Terrain{Fence: fenceEtc, Chunk: chunkMax, Rev: math.MaxUint64}},
			Random: func(r *rand.Rand) message {
				return Terrain{Fence: randFence(r), Chunk: randChunk(r), Rev: randU64(r)}
			},
		},
		{
			Name:    "IntentsAck",
			Decode:  adapt(DecodeIntentsAck),
			Samples: []message{IntentsAck{}, IntentsAck{Fence: fenceEtc, For: -1, Taken: math.MaxUint64}},
			Random: func(r *rand.Rand) message {
				return IntentsAck{Fence: randFence(r), For: int64(randU64(r)), Taken: randU64(r)}
			},
		},
		{
			Name:   "Player",
			Decode: adapt(DecodePlayer),
			Samples: []message{
				Player{Op: PlayerSpawn, Account: 1},
				Player{Fence: fenceEtc, Op: PlayerSpawn, Account: math.MaxUint64, Session: 1 << 52, Master: 1<<63 | 5, Pet: math.MaxUint64,
					Pos: torus.Pos{X: -1.5, Y: 1e9, Z: 3}, State: []byte("exp and pet")},
				Player{Op: PlayerTaken, Account: 300, Session: 7, Master: 9, Pet: 10, Chunk: chunkMax},
				Player{Op: PlayerNotHere, Account: 2, State: make([]byte, MaxPlayerState)},
				Player{Op: PlayerSaving, Account: 3, Session: 8},
			},
			Random: func(r *rand.Rand) message {
				return Player{
					Fence: randFence(r), Op: PlayerOp(1 + r.IntN(5)), Account: randAccount(r), Session: randU64(r),
					Master: randU64(r), Pet: randU64(r),
					Pos:   torus.Pos{X: float64(randI32(r)) / 8, Y: float64(randI32(r)), Z: float64(randI32(r)) / 3},
					Chunk: randChunk(r), State: randBytes(r, MaxPlayerState),
				}
			},
		},
	}
}

func codecNamed(tb testing.TB, name string) codec {
	tb.Helper()
	return codectest.Named(tb, codecs(), name)
}

// randLen is a list length: often 0, sometimes a few, rarely dozens.
func randLen(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return 0
	case 3:
		return r.IntN(64)
	}
	return 1 + r.IntN(4)
}

// randU64 favours the edges of the varint lengths.
func randU64(r *rand.Rand) uint64 {
	switch r.IntN(6) {
	case 0:
		return []uint64{0, 1, 127, 128, 16383, 16384, math.MaxUint32, math.MaxUint64}[r.IntN(8)]
	case 1:
		return r.Uint64N(1 << 14)
	}
	return r.Uint64() >> r.IntN(64)
}

func randI64(r *rand.Rand) int64 {
	if r.IntN(6) == 0 {
		return []int64{0, -1, 1, -64, 63, -65, 64, math.MinInt64, math.MaxInt64}[r.IntN(9)]
	}
	v := int64(r.Uint64() >> r.IntN(64))
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

func randI32(r *rand.Rand) int32 {
	if r.IntN(6) == 0 {
		return []int32{0, -1, 1, -64, 64, math.MinInt32, math.MaxInt32}[r.IntN(7)]
	}
	return int32(randI64(r) >> 32)
}

func randFence(r *rand.Rand) Fence {
	return Fence{Node: randU64(r), Lease: randI64(r), Table: randU64(r)}
}

func randChunk(r *rand.Rand) torus.ChunkPos {
	return torus.ChunkPos{X: randI32(r), Y: randI32(r), Slab: randI32(r)}
}

func randChunks(r *rand.Rand) []torus.ChunkPos {
	var cs []torus.ChunkPos
	for range randLen(r) {
		cs = append(cs, randChunk(r))
	}
	return cs
}

func randAccount(r *rand.Rand) account.ID { return account.ID(max(1, randU64(r))) }

func randAccounts(r *rand.Rand) []account.ID {
	var ids []account.ID
	for range randLen(r) {
		ids = append(ids, randAccount(r))
	}
	return ids
}

// randBytes returns nil or 1 to limit random bytes (canonical form).
func randBytes(r *rand.Rand, limit int) []byte {
	n := r.IntN(min(limit, 40) + 1)
	if r.IntN(20) == 0 {
		n = limit
	}
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randForward(r *rand.Rand, frames, accounts int) Forward {
	m := Forward{Fence: randFence(r), Tick: randU64(r)}
	for range frames {
		m.Frames = append(m.Frames, randBytes(r, 300))
	}
	for range accounts {
		a := AccountFrames{Account: randAccount(r)}
		if frames > 0 {
			for range randLen(r) {
				a.Frames = append(a.Frames, uint32(r.IntN(frames)))
			}
		}
		m.Accounts = append(m.Accounts, a)
	}
	return m
}

// checkMalformed fails unless err is a decoder refusal as the package
// promises it: matching ErrMalformed, with code ZONE.WIRE_MALFORMED.
func checkMalformed(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, ErrMalformed) {
		tb.Fatalf("error %v does not match ErrMalformed", err)
	}
	if code := errcode.Of(err); code != "ZONE.WIRE_MALFORMED" {
		tb.Fatalf("error %v has code %q, want ZONE.WIRE_MALFORMED", err, code)
	}
}
