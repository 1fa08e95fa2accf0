package game

import (
	"encoding/binary"
	"math"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// outboxWorld answers the outbox's questions at flush.
type outboxWorld struct{ g *Game }

func (o outboxWorld) AppendObserversOf(dst []Subscriber, e ecs.ID) []Subscriber {
	return o.g.vis.AppendObserversOf(dst, e)
}

// AppendObserverIndices and SubscriberAt give the outbox the dense fast
// path (outbox.IndexedWorld).
func (o outboxWorld) AppendObserverIndices(dst []int32, e ecs.ID) []int32 {
	return o.g.vis.AppendObserverIndices(dst, e)
}

func (o outboxWorld) SubscriberAt(i int32) Subscriber { return o.g.vis.SubscriberAt(i) }

func (o outboxWorld) SubscriberEpoch() uint64 { return o.g.vis.SubscriberEpoch() }

func (o outboxWorld) OwnerOf(e ecs.ID) (Subscriber, bool) {
	ow, ok := o.g.c.owner.Get(e)
	if !ok {
		return Subscriber{}, false
	}
	return interest.Account(ow.Account), true
}

// AppendParty appends the other accounts of owner's party: consecutive
// accounts in groups of PartySize.
func (o outboxWorld) AppendParty(dst []Subscriber, owner Subscriber) []Subscriber {
	acct, ok := owner.Account()
	if !ok || !acct.Valid() {
		return dst
	}
	size := account.ID(o.g.cfg.PartySize)
	first := (acct-1)/size*size + 1
	for a := first; a < first+size && a <= account.ID(o.g.cfg.Players); a++ {
		if a != acct {
			dst = append(dst, interest.Account(a))
		}
	}
	return dst
}

func appendPos(dst []byte, p torus.Pos) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.X)))
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.Y)))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.Z)))
}

// encoder builds the outbox encoder of one store.
func encoder[T any](s *ecs.Store[T], wire outbox.ComponentType,
	aud func(e ecs.ID) outbox.Audience[Subscriber], payload func(dst []byte, v *T) []byte,
) outbox.Encoder[Subscriber, ecs.ID] {
	return outbox.EncoderFuncs[Subscriber, ecs.ID]{
		WireType:     wire,
		HasFunc:      s.Has,
		AudienceFunc: aud,
		PayloadFunc: func(dst []byte, e ecs.ID) []byte {
			v, ok := s.Get(e)
			if !ok {
				return dst
			}
			return payload(dst, v)
		},
	}
}

func public(ecs.ID) outbox.Audience[Subscriber] { return outbox.Public[Subscriber]() }

func (g *Game) registerEncoders() error {
	c := g.c
	owned := func(e ecs.ID) bool { return c.owner.Has(e) }
	encs := []outbox.Encoder[Subscriber, ecs.ID]{
		encoder(c.visual, WireVisual, public, func(dst []byte, v *Visual) []byte { return append(dst, byte(v.Kind)) }),
		encoder(c.pos, WirePosition, public, func(dst []byte, v *Position) []byte { return appendPos(dst, v.Pos) }),
		encoder(c.path, WirePath, public, func(dst []byte, v *Path) []byte {
			if !v.Active {
				return append(dst, 0)
			}
			return appendPos(append(dst, 1), v.Target)
		}),
		encoder(c.speed, WireSpeed, public, func(dst []byte, v *Speed) []byte {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.MPS)))
		}),
		// Health: public for a creature nobody owns, owner and party for a
		// player's entities.
		encoder(c.health, WireHealth, func(e ecs.ID) outbox.Audience[Subscriber] {
			if owned(e) {
				return outbox.Party[Subscriber]()
			}
			return outbox.Public[Subscriber]()
		}, func(dst []byte, v *Health) []byte {
			return binary.AppendUvarint(binary.AppendUvarint(dst, uint64(max(v.HP, 0))), uint64(v.Max))
		}),
		encoder(c.exp, WireExp, func(ecs.ID) outbox.Audience[Subscriber] { return outbox.Owner[Subscriber]() },
			func(dst []byte, v *Exp) []byte { return binary.AppendVarint(dst, v.Points) }),
	}
	for _, e := range encs {
		if err := g.out.Register(e); err != nil {
			return err
		}
	}
	// Boot check: every registered component with a wire type has an
	// encoder, so a new synced component cannot be forgotten.
	for _, comp := range g.w.Components() {
		meta, _ := comp.Type().Meta.(Sync)
		if meta.Wire == 0 {
			continue
		}
		found := false
		for _, e := range encs {
			found = found || e.Type() == meta.Wire
		}
		if !found {
			return ErrUnencoded.Wrap("component %q (wire %d)", comp.Type().Name, meta.Wire)
		}
	}
	return nil
}

// ErrUnencoded: a component declares a wire type but has no encoder.
var ErrUnencoded = errcode.New("GAME.UNENCODED_COMPONENT", "game: synced component has no encoder")
