package zone

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/handoff"
)

// How the checkpoint stream is encoded and held, without allocating per
// entity: the sender encodes each entity once per checkpoint into
// buffers it keeps (ckptEnc), and the standby checks a message's
// snapshots without decoding them and keeps each record's bytes in a
// buffer it reuses (ckptIn.put), decoding a record only to adopt it.

// ckptEnc is the sender's buffers, reused from one region's checkpoint
// to the next (the world goroutine's alone).
type ckptEnc struct {
	snap  handoff.Snapshot // the entity being encoded: Components reused
	data  []byte           // its components' data, one after the other
	ends  []int            // where each component's data ends in data
	body  []byte           // the snapshots to send, encoded, one after the other
	cuts  []int            // where each snapshot ends in body
	state []handoff.RawSnapshot
	// at is the at component's data of tick atTick: the same for every
	// entity of a checkpoint.
	atTick uint64
	at     [8]byte
	// verify, set only by tests (VerifyCheckpointEncoding), sees each
	// snapshot built.
	verify func(id ecs.ID, epoch, tick uint64, b []byte, err error)
}

// ckptSnapshot is what handoffSnapshot returns of id, built in e's buffers:
// valid until the next call.
func (c *cluster) ckptSnapshot(e *ckptEnc, id ecs.ID, epoch, tick uint64) (handoff.Snapshot, error) {
	r := c.r
	e.data, e.ends = e.data[:0], e.ends[:0]
	comps := e.snap.Components[:0]
	if e.atTick != tick || e.atTick == 0 {
		e.atTick = tick
		binary.LittleEndian.PutUint64(e.at[:], r.tickMillis(tick))
	}
	atDone := false
	addAt := func() {
		comps = append(comps, handoff.Component{Name: atName})
		e.data = append(e.data, e.at[:]...)
		e.ends = append(e.ends, len(e.data))
		atDone = true
	}
	for _, cd := range r.codecs { // sorted by name, as a snapshot's components must be
		if !atDone && atName < cd.name {
			addAt()
		}
		var ok bool
		if e.data, ok = cd.app(e.data, id); ok {
			comps = append(comps, handoff.Component{Name: cd.name})
			e.ends = append(e.ends, len(e.data))
		}
	}
	if !atDone {
		addAt()
	}
	// The data is sliced once written: data moved while it grew.
	start := 0
	for i, end := range e.ends {
		comps[i].Data = nil
		if end > start {
			comps[i].Data = e.data[start:end:end]
		}
		start = end
	}
	e.snap = handoff.Snapshot{Entity: uint64(id), Epoch: epoch, Table: r.terr.Table().Version(), Components: comps}
	err := e.snap.Check()
	if e.verify != nil {
		e.verify(id, epoch, tick, e.snap.Append(nil), err)
	}
	return e.snap, err
}

// reset empties e's snapshots to send.
func (e *ckptEnc) reset() {
	e.body, e.cuts = e.body[:0], e.cuts[:0]
}

// add appends s to the snapshots to send.
func (e *ckptEnc) add(s handoff.Snapshot) {
	e.body = s.Append(e.body)
	e.cuts = append(e.cuts, len(e.body))
}

// hashLast is the state of the snapshot s that add just appended, for
// the delta: its encoded bytes less its table version and the time it
// was taken (the at component's data), so that its epoch and every
// other component count, as three writes rather than one a field.
func (e *ckptEnc) hashLast(seed maphash.Seed, s handoff.Snapshot) uint64 {
	start := 0
	if n := len(e.cuts); n > 1 {
		start = e.cuts[n-2]
	}
	b := e.body[start:]
	tableAt := 8 + uvarintLen(s.Epoch)
	off := tableAt + uvarintLen(s.Table)
	rest := off
	off += uvarintLen(uint64(len(s.Components)))
	atFrom, atTo := len(b), len(b)
	for _, c := range s.Components {
		off += uvarintLen(uint64(len(c.Name))) + len(c.Name) + uvarintLen(uint64(len(c.Data)))
		if c.Name == atName {
			atFrom, atTo = off, off+len(c.Data)
			break
		}
		off += len(c.Data)
	}
	var h maphash.Hash
	h.SetSeed(seed)
	h.Write(b[:tableAt])
	h.Write(b[rest:atFrom])
	h.Write(b[atTo:])
	return h.Sum64()
}

// dropLast takes back the snapshot add appended last (unchanged since
// the standby got it).
func (e *ckptEnc) dropLast() {
	e.cuts = e.cuts[:len(e.cuts)-1]
	end := 0
	if n := len(e.cuts); n > 0 {
		end = e.cuts[n-1]
	}
	e.body = e.body[:end]
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// states returns the snapshots added since reset, as a checkpoint
// message carries them (aliasing e's buffers until the next reset).
func (e *ckptEnc) states() []handoff.RawSnapshot {
	clear(e.state)
	e.state = e.state[:0]
	start := 0
	for _, end := range e.cuts {
		b := e.body[start:end:end]
		// An encoded snapshot starts with its entity (8 bytes) and epoch.
		epoch, _ := binary.Uvarint(b[8:])
		e.state = append(e.state, handoff.RawSnapshot{Entity: binary.LittleEndian.Uint64(b), Epoch: epoch, Bytes: b})
		start = end
	}
	return e.state
}

// put holds s as the record of its entity, its bytes copied into the
// buffer of the record it replaces, or of one dropped before: a standby
// allocates nothing per record once it holds its region.
func (in *ckptIn) put(s handoff.RawSnapshot) {
	id := ecs.ID(s.Entity)
	old, ok := in.recs[id]
	buf := old.Bytes
	if !ok && len(in.free) > 0 {
		buf = in.free[len(in.free)-1]
		in.free[len(in.free)-1] = nil
		in.free = in.free[:len(in.free)-1]
	}
	if cap(buf) < len(s.Bytes) {
		buf = make([]byte, 0, len(s.Bytes)+len(s.Bytes)/4) // room to grow a little
	}
	s.Bytes = append(buf[:0], s.Bytes...)
	in.recs[id] = s
}

// drop lets id's record go; its buffer serves the next new one.
func (in *ckptIn) drop(id ecs.ID) {
	if s, ok := in.recs[id]; ok {
		in.free = append(in.free, s.Bytes[:0])
		delete(in.recs, id)
	}
}

// clearRecs lets every record go (a snapshot starts): their buffers
// serve the snapshot's, and the ones kept from before go, so that the
// buffers held never outnumber the records of the last snapshot and the
// new entities since.
func (in *ckptIn) clearRecs() {
	clear(in.free)
	in.free = in.free[:0]
	for _, s := range in.recs {
		in.free = append(in.free, s.Bytes[:0])
	}
	clear(in.recs)
}
