package zonesim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// scriptNet is a scenario's network: nothing is drawn, the script
// decides. Every message sent waits in flight; at the start of each tick
// (ScriptNet.deliverDue) every message sent in an earlier tick is
// delivered in sending order, except those a hold rule matches, which
// wait for a deliver or drop command. A control message across a cut
// waits for the heal; a replication batch sent across one is lost. The
// receiver of replication batches keeps the link's rule: only a batch
// numbered above the last it took from that sender is taken.
type scriptNet struct {
	tick   uint64
	order  uint64
	ends   map[string]*scriptEnd
	flying []scriptMsg
	holds  []msgRule
	cut    map[pair]bool
	names  func(id uint64) string // entity names for descriptions
}

// scriptMsg is one message in flight.
type scriptMsg struct {
	order   uint64
	sent    uint64 // the tick it was sent in
	from    string
	to      string
	control bool
	kind    uint32
	payload []byte
	seq     uint64
	entries []replication.Entry
}

// msgRule matches messages by their ends and kind; an empty field
// matches any.
type msgRule struct {
	from, to, kind string
}

func (r msgRule) matches(m scriptMsg) bool {
	return (r.from == "" || r.from == m.from) && (r.to == "" || r.to == m.to) &&
		(r.kind == "" || r.kind == msgKind(m) || r.kind == "snapshot" && hasSnapshot(m))
}

// kindNames are the message kinds a script names.
var kindNames = map[uint32]string{
	wire.KindSubscribe: "subscribe", wire.KindIntents: "intents", wire.KindForward: "forward",
	wire.KindRoutes: "routes", wire.KindPlayer: "player", wire.KindTerrain: "terrain", wire.KindIntentsAck: "intentsack",
	handoff.KindTransfer: "transfer", handoff.KindAck: "ack", handoff.KindRefuse: "refuse", zone.KindAbort: "abort",
	zone.KindCheckpoint: "checkpoint", zone.KindAdoptQuery: "adoptquery", zone.KindAdoptAnswer: "adoptanswer",
}

// knownKind reports whether a script may name kind.
func knownKind(kind string) bool {
	if kind == "" || kind == "batch" || kind == "snapshot" {
		return true
	}
	for _, k := range kindNames {
		if k == kind {
			return true
		}
	}
	return false
}

func msgKind(m scriptMsg) string {
	if !m.control {
		return "batch"
	}
	if k, ok := kindNames[m.kind]; ok {
		return k
	}
	return fmt.Sprintf("%#x", m.kind)
}

func hasSnapshot(m scriptMsg) bool {
	return !m.control && slices.ContainsFunc(m.entries, func(e replication.Entry) bool { return e.Kind == wire.EntrySnapshot })
}

func newScriptNet(names func(uint64) string) *scriptNet {
	return &scriptNet{ends: make(map[string]*scriptEnd), cut: make(map[pair]bool), names: names}
}

func (n *scriptNet) endpoint(name string) *scriptEnd {
	e := &scriptEnd{n: n, name: name, sent: make(map[string]uint64), accepted: make(map[string]uint64)}
	n.ends[name] = e
	return e
}

func (n *scriptNet) held(m scriptMsg) bool {
	return slices.ContainsFunc(n.holds, func(r msgRule) bool { return r.matches(m) })
}

// deliverDue starts tick: every message sent before it and not held (or
// cut) is delivered, in sending order.
func (n *scriptNet) deliverDue(tick uint64) {
	n.tick = tick
	var due []scriptMsg
	keep := n.flying[:0]
	for _, m := range n.flying {
		if m.sent >= tick || n.held(m) || m.control && n.cut[pair{m.from, m.to}] {
			keep = append(keep, m)
			continue
		}
		due = append(due, m)
	}
	n.flying = keep
	for _, m := range due {
		n.hand(m)
	}
}

// take removes from flight the messages r matches (at most count, all
// with count 0), in sending order.
func (n *scriptNet) take(r msgRule, count int) []scriptMsg {
	var out []scriptMsg
	keep := n.flying[:0]
	for _, m := range n.flying {
		if r.matches(m) && (count == 0 || len(out) < count) {
			out = append(out, m)
			continue
		}
		keep = append(keep, m)
	}
	n.flying = keep
	return out
}

// hand gives m to its receiver now.
func (n *scriptNet) hand(m scriptMsg) {
	to, from := n.ends[m.to], n.ends[m.from]
	if to == nil || to.arr == nil || to.closed {
		if m.control && from != nil && from.arr != nil {
			from.arr.Written(m.to, m.kind, zone.ErrTransportClosed)
		}
		return
	}
	if m.control {
		if from != nil && from.arr != nil {
			from.arr.Written(m.to, m.kind, nil)
		}
		to.arr.Control(m.from, m.kind, m.payload)
		return
	}
	if m.seq <= to.accepted[m.from] {
		return // overtaken: the link takes only a higher number
	}
	to.accepted[m.from] = m.seq
	to.arr.Replication(m.from, m.seq, m.entries)
}

// describe is one message as a script prints it.
func (n *scriptNet) describe(m scriptMsg) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s→%s %s", m.from, m.to, msgKind(m))
	refs := func(rs []handoff.Ref) {
		for _, r := range rs {
			fmt.Fprintf(&b, " %s@%d", n.names(r.Entity), r.Epoch)
		}
	}
	switch {
	case !m.control:
		fmt.Fprintf(&b, " #%d", m.seq)
		for _, e := range m.entries {
			switch e.Kind {
			case wire.EntryUpdate:
				if u, err := wire.DecodeUpdate(e.Payload); err == nil {
					fmt.Fprintf(&b, " upd %s@%d%s", n.names(e.Entity), e.Epoch, chunkStr(u.Chunk))
				}
			case wire.EntrySnapshot:
				if s, err := wire.DecodeSnapshot(e.Payload); err == nil {
					fmt.Fprintf(&b, " snap%s[", chunkStr(s.Chunk))
					for i, x := range s.Entries {
						if i > 0 {
							b.WriteByte(' ')
						}
						fmt.Fprintf(&b, "%s@%d", n.names(x.Entity), x.Epoch)
					}
					b.WriteByte(']')
				}
			}
		}
	case m.kind == handoff.KindTransfer:
		if t, err := handoff.DecodeTransfer(m.payload); err == nil {
			for _, s := range t.Entities {
				fmt.Fprintf(&b, " %s@%d", n.names(s.Entity), s.Epoch)
			}
		}
	case m.kind == handoff.KindAck:
		if a, err := handoff.DecodeAck(m.payload); err == nil {
			refs(a.Entities)
		}
	case m.kind == handoff.KindRefuse || m.kind == zone.KindAbort:
		if f, err := handoff.DecodeRefuse(m.payload); err == nil {
			fmt.Fprintf(&b, " %s", f.Code)
			refs(f.Entities)
		}
	case m.kind == wire.KindSubscribe:
		if s, err := wire.DecodeSubscribe(m.payload); err == nil {
			for _, set := range []struct {
				sign   string
				chunks []chunkPos
			}{{"+", s.Add}, {"-", s.Remove}, {"~", s.Resync}} {
				if len(set.chunks) > 0 {
					fmt.Fprintf(&b, " %s%d", set.sign, len(set.chunks))
				}
			}
		}
	}
	return b.String()
}

// scriptEnd is one node's zone.Transport on a scriptNet.
type scriptEnd struct {
	n        *scriptNet
	name     string
	arr      zone.Arrivals
	closed   bool
	sent     map[string]uint64
	accepted map[string]uint64
}

var _ zone.Transport = (*scriptEnd)(nil)

func (e *scriptEnd) ID() string           { return e.name }
func (e *scriptEnd) Open(a zone.Arrivals) { e.arr = a }
func (e *scriptEnd) Close() error         { e.closed = true; return nil }
func (e *scriptEnd) push(m scriptMsg) {
	e.n.order++
	m.order = e.n.order
	e.n.flying = append(e.n.flying, m)
}
func (e *scriptEnd) msg(peer string) scriptMsg {
	return scriptMsg{sent: e.n.tick, from: e.name, to: peer}
}

func (e *scriptEnd) Send(peer string, kind uint32, payload []byte) error {
	if e.closed {
		return zone.ErrTransportClosed
	}
	m := e.msg(peer)
	m.control, m.kind, m.payload = true, kind, payload
	e.push(m)
	return nil
}

func (e *scriptEnd) Replicate(peer string, entries []replication.Entry) error {
	if e.closed {
		return zone.ErrTransportClosed
	}
	e.sent[peer]++
	if e.n.cut[pair{e.name, peer}] {
		return nil
	}
	m := e.msg(peer)
	m.seq, m.entries = e.sent[peer], entries
	e.push(m)
	return nil
}
