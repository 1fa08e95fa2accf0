package zone

import (
	"encoding/binary"

	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/internal/binread"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// The checkpoint stream's control message kinds, next to handoff's
// 0x5A10..0x5A13. They travel on the ordered control stream: a delta is
// applied only after the snapshot and the deltas before it (Seq), which
// the lossy replication stream could not promise.
const (
	// KindCheckpoint: a region's owner → the region's standby: the state
	// of the entities it simulates there, a snapshot or a delta.
	KindCheckpoint uint32 = 0x5A14
	// KindAdoptQuery: a standby about to adopt a dead node's entities →
	// every live peer: which of these does it simulate or adopt.
	KindAdoptQuery uint32 = 0x5A15
	// KindAdoptAnswer: the answer, once the peer refuses the dead node.
	KindAdoptAnswer uint32 = 0x5A16
)

// ckptVersion is the format byte the checkpoint kinds' payloads start with.
const ckptVersion = 1

// Limits the checkpoint decoders enforce.
const (
	maxCkptGone    = 1 << 16 // ids in one Checkpoint.Gone
	maxQueryIDs    = 1 << 16 // entries of one AdoptQuery or AdoptAnswer
	maxQueryDead   = 64      // dead nodes one AdoptQuery names
	minQueryEntry  = 8 + 1   // entity, tick
	minDeadName    = 1 + 1   // length, one byte
	minCkptGoneID  = 8
	minAnswerTaken = 8
)

// checkpointMsg is one KindCheckpoint payload: part of the stream of one
// region from its owner to its standby.
type checkpointMsg struct {
	Fence  wire.Fence
	Region uint32
	// Seq numbers the stream's messages 1, 2, … from its first snapshot;
	// a standby applies a delta only right after Seq-1.
	Seq uint64
	// Full: this message starts a snapshot, which replaces everything
	// the standby holds of the region (later parts of the same
	// checkpoint are deltas with the same Tick).
	Full bool
	// Tick is the owner's tick the state was taken at.
	Tick uint64
	// Gone are the entities the owner no longer simulates in the region
	// (handed over, destroyed, walked into another region).
	Gone []uint64
	// State is the new and changed entities, in the handoff codec: the
	// snapshots of a handoff.Transfer, as encoded (nil when there are
	// none). The standby keeps them so, and decodes one only to adopt it.
	State []handoff.RawSnapshot
}

func (m checkpointMsg) Append(dst []byte) []byte {
	dst = appendFence(append(dst, ckptVersion), m.Fence)
	dst = binary.AppendUvarint(dst, uint64(m.Region))
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = append(dst, boolByte(m.Full))
	dst = binary.AppendUvarint(dst, m.Tick)
	dst = binary.AppendUvarint(dst, uint64(len(m.Gone)))
	for _, id := range m.Gone {
		dst = binary.LittleEndian.AppendUint64(dst, id)
	}
	if len(m.State) == 0 {
		return binary.AppendUvarint(dst, 0)
	}
	// A handoff.Transfer (its version, count and snapshots), its length
	// first.
	count := binary.AppendUvarint(nil, uint64(len(m.State)))
	n := 1 + len(count)
	for _, s := range m.State {
		n += len(s.Bytes)
	}
	dst = append(binary.AppendUvarint(dst, uint64(n)), handoff.Version)
	dst = append(dst, count...)
	for _, s := range m.State {
		dst = append(dst, s.Bytes...)
	}
	return dst
}

// adoptQuery is one KindAdoptQuery payload.
type adoptQuery struct {
	Fence wire.Fence
	// Round names the asker's adoption round; the answer repeats it.
	Round uint64
	// Table is the version of the table that gave the asker the dead
	// nodes' regions: the peer answers once it holds it (or a newer one).
	Table uint64
	// Dead are the nodes whose regions the asker adopts: the peer answers
	// once it refuses every one of them.
	Dead []string
	// Entries are the candidates, each with the owner's tick of the
	// checkpoint it was last in (the newer claim wins between adopters).
	Entries []queryEntry
}

type queryEntry struct {
	Entity uint64
	Tick   uint64
}

func (m adoptQuery) Append(dst []byte) []byte {
	dst = appendFence(append(dst, ckptVersion), m.Fence)
	dst = binary.AppendUvarint(dst, m.Round)
	dst = binary.AppendUvarint(dst, m.Table)
	dst = binary.AppendUvarint(dst, uint64(len(m.Dead)))
	for _, d := range m.Dead {
		dst = appendSpan(dst, []byte(d))
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		dst = binary.LittleEndian.AppendUint64(dst, e.Entity)
		dst = binary.AppendUvarint(dst, e.Tick)
	}
	return dst
}

// adoptAnswer is one KindAdoptAnswer payload: the candidates of the
// query of Round that the peer holds (or adopts with a newer claim).
type adoptAnswer struct {
	Fence wire.Fence
	Round uint64
	Taken []uint64
}

func (m adoptAnswer) Append(dst []byte) []byte {
	dst = appendFence(append(dst, ckptVersion), m.Fence)
	dst = binary.AppendUvarint(dst, m.Round)
	dst = binary.AppendUvarint(dst, uint64(len(m.Taken)))
	for _, id := range m.Taken {
		dst = binary.LittleEndian.AppendUint64(dst, id)
	}
	return dst
}

func appendFence(dst []byte, f wire.Fence) []byte {
	dst = binary.AppendUvarint(dst, f.Node)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.Lease))
	return binary.AppendUvarint(dst, f.Table)
}

func appendSpan(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ckptReader is binread's reader with the checkpoint kinds' fields.
type ckptReader struct{ binread.Reader }

func newCkptReader(b []byte, msg string) *ckptReader {
	r := &ckptReader{binread.New(b, msg, ErrMalformedInput)}
	r.Version(ckptVersion)
	return r
}

func (r *ckptReader) fence() wire.Fence {
	return wire.Fence{Node: r.Uvarint("Fence.Node"), Lease: int64(r.U64("Fence.Lease")), Table: r.Uvarint("Fence.Table")}
}

// decodeCheckpoint reads a KindCheckpoint payload from a peer's bytes: an
// error (ErrMalformedInput, ZONE.MALFORMED_INPUT) names the field and its
// byte offset. State is appended to states[:0] (a receiver's reused
// slice), its snapshots checked as handoff.DecodeTransfer checks them,
// their bytes aliasing b.
func decodeCheckpoint(b []byte, states []handoff.RawSnapshot) (checkpointMsg, error) {
	r := newCkptReader(b, "Checkpoint")
	var m checkpointMsg
	m.Fence = r.fence()
	at := r.Offset()
	region := r.Uvarint("Region")
	if r.Err() == nil && region > 1<<31 {
		r.FailAt(at, "Region", "%d, above 2^31", region)
	}
	m.Region = uint32(region)
	at = r.Offset()
	m.Seq = r.Uvarint("Seq")
	if r.Err() == nil && m.Seq == 0 {
		r.FailAt(at, "Seq", "0, want at least 1")
	}
	at = r.Offset()
	switch f := r.Byte("Full"); f {
	case 0, 1:
		m.Full = f == 1
	default:
		r.FailAt(at, "Full", "%d, want 0 or 1", f)
	}
	m.Tick = r.Uvarint("Tick")
	if n := r.Count("Gone", 0, maxCkptGone, minCkptGoneID); n > 0 {
		m.Gone = make([]uint64, n)
		for i := range m.Gone {
			r.I = i
			m.Gone[i] = r.U64("Gone[]")
		}
	}
	at = r.Offset()
	if state := r.Span("State", 1<<30); r.Err() == nil && len(state) > 0 {
		raws, err := handoff.AppendRawSnapshots(states[:0], state)
		if err != nil {
			r.FailAt(at, "State", "%v", err)
		} else {
			m.State = raws
		}
	}
	if err := r.Finish(); err != nil {
		return checkpointMsg{}, err
	}
	return m, nil
}

// decodeAdoptQuery reads a KindAdoptQuery payload (errors as
// decodeCheckpoint's). Dead names must be node names.
func decodeAdoptQuery(b []byte) (adoptQuery, error) {
	r := newCkptReader(b, "AdoptQuery")
	var m adoptQuery
	m.Fence = r.fence()
	m.Round = r.Uvarint("Round")
	m.Table = r.Uvarint("Table")
	if n := r.Count("Dead", 1, maxQueryDead, minDeadName); n > 0 {
		m.Dead = make([]string, n)
		for i := range m.Dead {
			r.I = i
			at := r.Offset()
			m.Dead[i] = string(r.Span("Dead[]", nodename.MaxLen))
			if r.Err() == nil {
				if err := nodename.Check("Dead[]", m.Dead[i]); err != nil {
					r.FailAt(at, "Dead[]", "%q: not a node name", m.Dead[i])
				}
			}
		}
	}
	if n := r.Count("Entries", 0, maxQueryIDs, minQueryEntry); n > 0 {
		m.Entries = make([]queryEntry, n)
		for i := range m.Entries {
			r.I = i
			m.Entries[i] = queryEntry{Entity: r.U64("Entries[].Entity"), Tick: r.Uvarint("Entries[].Tick")}
		}
	}
	if err := r.Finish(); err != nil {
		return adoptQuery{}, err
	}
	return m, nil
}

// decodeAdoptAnswer reads a KindAdoptAnswer payload (errors as
// decodeCheckpoint's).
func decodeAdoptAnswer(b []byte) (adoptAnswer, error) {
	r := newCkptReader(b, "AdoptAnswer")
	var m adoptAnswer
	m.Fence = r.fence()
	m.Round = r.Uvarint("Round")
	if n := r.Count("Taken", 0, maxQueryIDs, minAnswerTaken); n > 0 {
		m.Taken = make([]uint64, n)
		for i := range m.Taken {
			r.I = i
			m.Taken[i] = r.U64("Taken[]")
		}
	}
	if err := r.Finish(); err != nil {
		return adoptAnswer{}, err
	}
	return m, nil
}
