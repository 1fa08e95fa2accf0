package outbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/torus"
)

type acct = uint64
type ent = uint64

// Component types of the test game, with the spec's audiences.
const (
	tPosition  ComponentType = 1 // public in range
	tInventory ComponentType = 2 // owner only
	tHealth    ComponentType = 3 // public if unowned, else owner + party
	tStatus    ComponentType = 4 // owner only if owned, else public
	tQuest     ComponentType = 5 // an explicit account set
)

var allTypes = []ComponentType{tPosition, tInventory, tHealth, tStatus, tQuest}

// game is a tiny world: real interest subscriptions and visibility, plus
// owners, parties and component values.
type game struct {
	world torus.World
	subs  *interest.Subscriptions[acct]
	vis   *interest.Visibility[acct, ent]
	owner map[ent]acct
	party map[acct][]acct // member lists, owner included
	comps map[ent]map[ComponentType]uint64
	quest map[ent][]acct

	payloads int // AppendPayload calls
}

func newGame() *game {
	w := torus.Default()
	s := interest.NewSubscriptions[acct](w)
	return &game{
		world: w, subs: s, vis: interest.NewVisibility[acct, ent](s),
		owner: map[ent]acct{}, party: map[acct][]acct{},
		comps: map[ent]map[ComponentType]uint64{}, quest: map[ent][]acct{},
	}
}

func (g *game) AppendObserversOf(dst []acct, e ent) []acct { return g.vis.AppendObserversOf(dst, e) }
func (g *game) OwnerOf(e ent) (acct, bool)                 { a, ok := g.owner[e]; return a, ok }
func (g *game) AppendParty(dst []acct, owner acct) []acct {
	for _, m := range g.party[owner] {
		if m != owner {
			dst = append(dst, m)
		}
	}
	return dst
}

func (g *game) set(e ent, t ComponentType, v uint64) {
	if g.comps[e] == nil {
		g.comps[e] = map[ComponentType]uint64{}
	}
	g.comps[e][t] = v
}

func (g *game) hold(a acct, cs ...interest.ChunkPos) {
	for _, c := range cs {
		g.subs.Announce(a, c)
		g.subs.MarkSent(a, c)
	}
}

// audienceOf is the game's declaration, shared by the encoders.
func (g *game) audienceOf(e ent, t ComponentType) Audience[acct] {
	_, owned := g.owner[e]
	switch t {
	case tPosition:
		return Public[acct]()
	case tInventory:
		return Owner[acct]()
	case tHealth:
		if owned {
			return Party[acct]()
		}
		return Public[acct]()
	case tStatus:
		if owned {
			return Owner[acct]()
		}
		return Public[acct]()
	case tQuest:
		return AccountSet(g.quest[e]...)
	}
	panic("unknown type")
}

func (g *game) payload(dst []byte, e ent, t ComponentType) []byte {
	return binary.AppendUvarint(dst, g.comps[e][t])
}

func (g *game) register(t testing.TB, o *Outbox[acct, ent]) {
	t.Helper()
	for _, ty := range allTypes {
		err := o.Register(EncoderFuncs[acct, ent]{
			WireType:     ty,
			HasFunc:      func(e ent) bool { _, ok := g.comps[e][ty]; return ok },
			AudienceFunc: func(e ent) Audience[acct] { return g.audienceOf(e, ty) },
			PayloadFunc: func(dst []byte, e ent) []byte {
				g.payloads++
				return g.payload(dst, e, ty)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// recorder is a Sink that keeps every batch it was given.
type recorder struct {
	batches []recorded
}

type recorded struct {
	tick   uint64
	frames [][]byte
	bytes  []byte
}

func (r *recorder) Deliver(tick uint64, frames [][]byte) {
	rec := recorded{tick: tick, frames: slices.Clone(frames), bytes: bytes.Join(frames, nil)}
	r.batches = append(r.batches, rec)
}

func (r *recorder) last(t testing.TB) recorded {
	t.Helper()
	if len(r.batches) == 0 {
		t.Fatal("no batch delivered")
	}
	return r.batches[len(r.batches)-1]
}

// decoded renders a batch as readable lines.
func decoded(t testing.TB, batch []byte) []string {
	t.Helper()
	var out []string
	err := DecodeBatch(batch, func(m Message) error {
		switch m.Kind {
		case KindComponent:
			v, _ := binary.Uvarint(m.Payload)
			out = append(out, fmt.Sprintf("c %d t%d=%d", m.Entity, m.Component, v))
		case KindAppear:
			out = append(out, fmt.Sprintf("appear %d n%d", m.Entity, m.BurstLen))
		case KindVanish:
			out = append(out, fmt.Sprintf("vanish %d %s", m.Entity, m.Reason))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("own batch does not decode: %v", err)
	}
	return out
}
