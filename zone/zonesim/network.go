package zonesim

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/zone"
)

// Faults are the lossy stream's faults and the delays of both streams,
// each drawn per message from the network's PRNG.
type Faults struct {
	// Drop, Duplicate and Reorder are the chances that a replication batch
	// is lost, sent twice, or held back behind the next ones (by up to
	// MaxDelay more ticks). The receiver, like the link's, accepts only a
	// batch numbered above the last it accepted from that sender: a
	// duplicate or an overtaken batch is dropped there, and the runtime
	// sees the gap.
	Drop, Duplicate, Reorder float64
	// MaxDelay is the most ticks a message waits beyond the next tick
	// (both streams; the control stream keeps its order).
	MaxDelay int
	// SlowControl is how many ticks every control message waits beyond
	// its drawn delay (the stream stays ordered and reliable, as the
	// link's is): a slow link, or a peer that reads its control stream
	// late.
	SlowControl int
}

// flight is one message on the wire.
type flight struct {
	due     uint64 // the tick before whose steps it is delivered
	order   uint64 // sending order, the tie-break among messages due together
	from    string
	to      string
	control bool
	kind    uint32
	payload []byte
	seq     uint64
	entries []replication.Entry
}

// pair is one direction between two nodes.
type pair struct{ from, to string }

// Network is an in-memory network of zone nodes in which the harness
// decides every delivery from one seeded PRNG: it holds every message in
// flight and delivers it, at a tick it drew, when Deliver is called. It
// runs on the goroutine that steps the nodes and starts none.
//
// The control stream is ordered and reliable: a message sent while its
// pair is cut waits for the heal (the link resends after a reconnect),
// and one sent to a node the network does not know is reported not taken
// (Arrivals.Written). The replication stream is lossy: Faults, and every
// batch sent while the pair is cut is lost.
type Network struct {
	rng    *rand.Rand
	faults Faults
	tick   uint64
	order  uint64
	ends   map[string]*Endpoint
	flying []flight
	cut    map[pair]bool
	// lastCtl is, per pair, the due tick of its last control message:
	// a later one is never due before it (the stream's order).
	lastCtl map[pair]uint64
	trace   *traceHash
	stats   NetStats
	// trail, when kept, lists each message sent with its own hash, to
	// find where two runs of one seed part.
	trail     []string
	keepTrail bool
}

// NetStats count what the network did.
type NetStats struct {
	Control, Batches                        int // sent
	Dropped, Duplicated, Reordered, CutLost int // replication batches
	Overtaken                               int // delivered batches the receiver refused for their number
	NotTaken                                int // control messages to an unknown node
	ControlHeld                             int // control deliveries put off by a cut
	ControlSlowed                           int // control messages sent under Faults.SlowControl
}

// NewNetwork returns an empty network whose draws come from seed.
func NewNetwork(seed uint64, f Faults) *Network {
	return &Network{
		rng: rand.New(rand.NewPCG(seed, seed^0x5a5a5a5a5a5a5a5a)), faults: f,
		ends: make(map[string]*Endpoint), cut: make(map[pair]bool), lastCtl: make(map[pair]uint64),
		trace: newTraceHash(),
	}
}

// Endpoint returns the transport of node name, creating it.
func (n *Network) Endpoint(name string) *Endpoint {
	e := n.ends[name]
	if e == nil {
		e = &Endpoint{n: n, name: name, sent: make(map[string]uint64), accepted: make(map[string]uint64)}
		n.ends[name] = e
	}
	return e
}

// Cut cuts a and b apart both ways; Heal joins them again.
func (n *Network) Cut(a, b string) { n.cut[pair{a, b}], n.cut[pair{b, a}] = true, true }

// Heal ends a Cut.
func (n *Network) Heal(a, b string) { delete(n.cut, pair{a, b}); delete(n.cut, pair{b, a}) }

// SetFaults replaces the faults drawn for messages sent from now on.
func (n *Network) SetFaults(f Faults) { n.faults = f }

// Stats returns the network's counters.
func (n *Network) Stats() NetStats { return n.stats }

// Trace is the hash of every message sent and every record the harness
// added (Record), in order: equal on two runs of one seed.
func (n *Network) Trace() uint64 { return n.trace.Sum64() }

// Record adds a client batch to the trace (and the trail): what client
// names was delivered at tick.
func (n *Network) Record(client string, tick uint64, frames [][]byte) {
	writeRecord(n.trace, client, tick, frames)
	if n.keepTrail {
		// The record's own hash is for the trail only.
		h := newTraceHash()
		writeRecord(h, client, tick, frames)
		n.trail = append(n.trail, fmt.Sprintf("tick %d client %s at %d: %d frames %016x", n.tick, client, tick, len(frames), h.Sum64()))
	}
}

// writeRecord hashes a client batch: the client's name, the tick, and
// each frame's length and bytes, each a write of its own.
//
//go:norace
func writeRecord(w *traceHash, client string, tick uint64, frames [][]byte) {
	w.str(client)
	w.word(tick)
	for _, f := range frames {
		w.word(uint64(len(f)))
		w.Write(f)
	}
}

func (n *Network) delay() uint64 {
	if n.faults.MaxDelay <= 0 {
		return 1
	}
	return 1 + uint64(n.rng.IntN(n.faults.MaxDelay+1))
}

func (n *Network) chance(p float64) bool { return p > 0 && n.rng.Float64() < p }

// KeepTrail makes the network list every message it is sent (Trail).
func (n *Network) KeepTrail() { n.keepTrail = true }

// Trail is the messages sent, one line each with its own hash, when
// KeepTrail was called: two runs of one seed part where their trails do.
func (n *Network) Trail() []string { return n.trail }

func (n *Network) hashMsg(f *flight) {
	if n.keepTrail {
		h := newTraceHash()
		n.writeMsg(h, f)
		what := fmt.Sprintf("kind %#x", f.kind)
		if !f.control {
			what = fmt.Sprintf("batch %d (%d entries)", f.seq, len(f.entries))
		}
		n.trail = append(n.trail, fmt.Sprintf("tick %d %s→%s %s %016x", n.tick, f.from, f.to, what, h.Sum64()))
	}
	n.writeMsg(n.trace, f)
}

// writeMsg hashes a message: its ends, the tick, and its fields, each
// a write of its own.
//
//go:norace
func (n *Network) writeMsg(h *traceHash, f *flight) {
	h.str(f.from)
	h.Write([]byte{0})
	h.str(f.to)
	h.word(n.tick)
	if f.control {
		h.word(uint64(f.kind))
		h.word(uint64(len(f.payload)))
		h.Write(f.payload)
		return
	}
	h.word(f.seq)
	for _, e := range f.entries {
		h.word(e.Entity)
		h.word(e.Epoch)
		h.word(e.Sequence)
		h.word(uint64(e.Kind))
		h.word(uint64(len(e.Payload)))
		h.Write(e.Payload)
	}
}

func (n *Network) push(f flight) {
	n.order++
	f.order = n.order
	n.flying = append(n.flying, f)
}

// Deliver hands every message due by tick to its receiver, in due order
// (then sending order), and sets the network's tick: what is sent next is
// due at tick+1 at the earliest. Call it before the tick's steps.
func (n *Network) Deliver(tick uint64) {
	n.tick = tick
	slices.SortFunc(n.flying, func(a, b flight) int {
		if a.due != b.due {
			if a.due < b.due {
				return -1
			}
			return 1
		}
		if a.order < b.order {
			return -1
		}
		return 1
	})
	keep := n.flying[:0]
	var due []flight
	for _, f := range n.flying {
		switch {
		case f.due > tick:
			keep = append(keep, f)
		case f.control && n.cut[pair{f.from, f.to}]:
			// Held for the heal, in order with what follows it.
			n.stats.ControlHeld++
			keep = append(keep, f)
		default:
			due = append(due, f)
		}
	}
	n.flying = keep
	for _, f := range due {
		to := n.ends[f.to]
		if to == nil || to.arr == nil || to.closed {
			if f.control {
				n.stats.NotTaken++
				if from := n.ends[f.from]; from != nil && from.arr != nil {
					from.arr.Written(f.to, f.kind, zone.ErrTransportClosed)
				}
			}
			continue
		}
		if f.control {
			if from := n.ends[f.from]; from != nil && from.arr != nil {
				from.arr.Written(f.to, f.kind, nil)
			}
			to.arr.Control(f.from, f.kind, f.payload)
			continue
		}
		if f.seq <= to.accepted[f.from] {
			n.stats.Overtaken++
			continue
		}
		to.accepted[f.from] = f.seq
		to.arr.Replication(f.from, f.seq, f.entries)
	}
}

// Endpoint is one node's zone.Transport on a Network.
type Endpoint struct {
	n        *Network
	name     string
	arr      zone.Arrivals
	closed   bool
	sent     map[string]uint64 // per peer, the last replication batch's number
	accepted map[string]uint64 // per sender, the last batch accepted
}

var _ zone.Transport = (*Endpoint)(nil)

// ID is the node's name.
func (e *Endpoint) ID() string { return e.name }

// Open takes the runtime's arrivals.
func (e *Endpoint) Open(a zone.Arrivals) { e.arr = a }

// Send puts a control message on the wire, due after the last one to the
// same peer.
func (e *Endpoint) Send(peer string, kind uint32, payload []byte) error {
	if e.closed {
		return zone.ErrTransportClosed
	}
	n := e.n
	p := pair{e.name, peer}
	due := n.tick + n.delay()
	if n.faults.SlowControl > 0 {
		due += uint64(n.faults.SlowControl)
		n.stats.ControlSlowed++
	}
	due = max(due, n.lastCtl[p])
	n.lastCtl[p] = due
	f := flight{due: due, from: e.name, to: peer, control: true, kind: kind, payload: payload}
	n.hashMsg(&f)
	n.stats.Control++
	n.push(f)
	return nil
}

// Replicate numbers the batch and puts it on the wire, or loses it.
func (e *Endpoint) Replicate(peer string, entries []replication.Entry) error {
	if e.closed {
		return zone.ErrTransportClosed
	}
	n := e.n
	e.sent[peer]++
	f := flight{due: n.tick + n.delay(), from: e.name, to: peer, seq: e.sent[peer], entries: entries}
	n.hashMsg(&f)
	n.stats.Batches++
	switch {
	case n.cut[pair{e.name, peer}]:
		n.stats.CutLost++
		return nil
	case n.chance(n.faults.Drop):
		n.stats.Dropped++
		return nil
	}
	if n.chance(n.faults.Reorder) {
		n.stats.Reordered++
		f.due += 1 + uint64(n.rng.IntN(max(n.faults.MaxDelay, 1)+1))
	}
	n.push(f)
	if n.chance(n.faults.Duplicate) {
		n.stats.Duplicated++
		f.due += uint64(n.rng.IntN(max(n.faults.MaxDelay, 1) + 1))
		n.push(f)
	}
	return nil
}

// Close closes the endpoint: nothing more is sent from it or delivered
// to it. Idempotent.
func (e *Endpoint) Close() error {
	e.closed = true
	return nil
}

// traceHash is the trace's hash: a word (8 bytes) per multiply, where
// FNV-1a, the trace's first hash, spent a multiply per byte in one chain
// (a tenth of the benchmark, which hashes every client batch). Each
// Write is hashed whole, its tail with its length, so the value depends
// on how the bytes were split into writes as well as on the bytes: the
// harness writes the same way on every run, and the only promise is
// that two runs of one seed give one value.
//
// The hash and the two functions that feed it (writeRecord, writeMsg)
// are //go:norace: under -race every byte of a word load was a call into
// the race detector (binary.LittleEndian.Uint64 is eight byte loads
// before the compiler joins them), and hashing was a tenth of
// TestSimulation's CPU. They only read bytes the simulation's one
// goroutine made (Network starts no goroutine); the runtime's code, and
// the rest of the harness, stay instrumented.
type traceHash struct{ h uint64 }

func newTraceHash() *traceHash { return &traceHash{h: 0xcbf29ce484222325} }

const traceMul = 0x9e3779b97f4a7c15

// word hashes v as Write hashes v's 8 little-endian bytes: the word,
// then an empty tail.
//
//go:norace
func (t *traceHash) word(v uint64) {
	h := bits.RotateLeft64((t.h^v)*traceMul, 31)
	t.h = bits.RotateLeft64(h*traceMul, 31)
}

// str hashes s as Write hashes its bytes, without converting a short one.
//
//go:norace
func (t *traceHash) str(s string) {
	var buf [32]byte
	if len(s) > len(buf) {
		t.Write([]byte(s))
		return
	}
	t.Write(buf[:copy(buf[:], s)])
}

// Write hashes b as one write.
//
//go:norace
func (t *traceHash) Write(b []byte) {
	h := t.h
	n := len(b)
	for i := 0; i+8 <= n; i += 8 {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b[i:]))*traceMul, 31)
	}
	// The tail's k bytes as one little-endian word, read by loads rather
	// than byte by byte (most writes are short frames and lengths): the
	// same word as the byte loop of traceHashNaive.
	k := n % 8
	var w uint64
	switch {
	case k == 0:
	case n >= 8: // the last 8 bytes, the tail's at the top: shift them down
		w = binary.LittleEndian.Uint64(b[n-8:]) >> (8 * (8 - k))
	case k >= 4: // two overlapping 4-byte loads; the bytes both read agree
		w = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[k-4:]))<<(8*(k-4))
	case k >= 2:
		w = uint64(binary.LittleEndian.Uint16(b)) | uint64(binary.LittleEndian.Uint16(b[k-2:]))<<(8*(k-2))
	default:
		w = uint64(b[0])
	}
	t.h = bits.RotateLeft64((h^w^uint64(k)<<59)*traceMul, 31)
}

// Sum64 is the hash so far, its bits mixed (murmur3's finaliser).
func (t *traceHash) Sum64() uint64 {
	h := t.h
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}
