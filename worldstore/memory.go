package worldstore

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/torus"
)

var _ Store = (*Memory)(nil)

// Memory is the in-process Store: maps under one mutex, gone when the
// process ends. It is the store of a single-process cluster and of tests;
// it keeps every invariant of the package doc.
type Memory struct {
	clk clock.Clock

	mu      sync.Mutex
	closed  bool
	players map[account.ID]Player
	chunks  map[torus.ChunkPos][]RevEdit
}

// NewMemory returns an empty Memory store that stamps Saved times by clk
// (nil: the real clock).
func NewMemory(clk clock.Clock) *Memory {
	return &Memory{
		clk:     clock.OrReal(clk),
		players: make(map[account.ID]Player),
		chunks:  make(map[torus.ChunkPos][]RevEdit),
	}
}

// now is the store's clock at the precision sqlworld keeps (microseconds,
// UTC), so both implementations return alike times.
func (m *Memory) now() time.Time { return m.clk.Now().UTC().Truncate(time.Microsecond) }

// begin locks m for one call, after the checks every call makes first.
func (m *Memory) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// LoadPlayer implements Players.
func (m *Memory) LoadPlayer(ctx context.Context, id account.ID) (Player, error) {
	if err := ValidateAccount("account", id); err != nil {
		return Player{}, err
	}
	if err := m.begin(ctx); err != nil {
		return Player{}, err
	}
	defer m.mu.Unlock()
	p, ok := m.players[id]
	if !ok {
		return Player{}, ErrNotFound.Wrap("account %s", id)
	}
	p.State = clone(p.State)
	return p, nil
}

// SavePlayer implements Players.
func (m *Memory) SavePlayer(ctx context.Context, p Player) error {
	if err := ValidatePlayer(p); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if old, ok := m.players[p.Account]; ok {
		if se := refusesSave(old, p.Epoch); se != nil {
			return se
		}
	}
	p.State = clone(p.State)
	p.Saved = m.now()
	m.players[p.Account] = p
	return nil
}

// AppendEdit implements ChunkEdits.
func (m *Memory) AppendEdit(ctx context.Context, chunk torus.ChunkPos, expectRev uint64, e Edit) (uint64, error) {
	if err := ValidateChunk(chunk); err != nil {
		return 0, err
	}
	if err := ValidateEdit(e); err != nil {
		return 0, err
	}
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	log := m.chunks[chunk]
	// The revision is the length of the log (invariant 2).
	if cur := uint64(len(log)); cur != expectRev {
		return 0, &ConflictError{Chunk: chunk, Expected: expectRev, Current: cur}
	}
	if len(log) >= MaxEditsPerChunk {
		return 0, ErrChunkFull.Wrap("chunk %s", formatChunk(chunk))
	}
	e.Data = clone(e.Data)
	rev := expectRev + 1
	m.chunks[chunk] = append(log, RevEdit{Rev: rev, Edit: e, Saved: m.now()})
	return rev, nil
}

// Edits implements ChunkEdits.
func (m *Memory) Edits(ctx context.Context, chunk torus.ChunkPos, sinceRev uint64) (uint64, []RevEdit, error) {
	if err := ValidateChunk(chunk); err != nil {
		return 0, nil, err
	}
	if err := m.begin(ctx); err != nil {
		return 0, nil, err
	}
	defer m.mu.Unlock()
	log := m.chunks[chunk]
	rev := uint64(len(log))
	if sinceRev >= rev {
		return rev, nil, nil
	}
	out := make([]RevEdit, 0, rev-sinceRev)
	for _, re := range log[sinceRev:] {
		re.Edit.Data = clone(re.Edit.Data)
		out = append(out, re)
	}
	return rev, out, nil
}

// Close implements Store. The data stays readable by nobody: every later
// call returns ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// clone copies b; empty gives nil (invariant 5).
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}
