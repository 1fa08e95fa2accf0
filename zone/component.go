package zone

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
)

// Subscriber is who the runtime's outbox delivers to: an account (a
// client) or a node (an observer of this node's chunks).
type Subscriber = interest.Subscriber

// Position is where an entity stands. The runtime owns the store: it files
// every entity that has one under its chunk at the end of each tick it was
// marked moved (ecs.World.MarkMoved). Modules write it from their systems.
type Position struct{ torus.Pos }

// Owner is the account an entity belongs to. The runtime owns the store:
// owner-only and party audiences are routed by it. Not synced; handed
// over.
type Owner struct {
	Account account.ID
	// Session is the epoch of the client session the entity answers to
	// (0: none, a bot): its inputs, logout and takeover name a session,
	// and one naming an older session than this changes nothing.
	Session uint64
}

// Ghost marks a foreign entity made real in this world so that perception
// and area queries find it. Every query a module builds with Query1 …
// Query4 excludes it: a ghost is written only by the runtime, from what
// its owner sends.
type Ghost struct{}

// Frozen takes an entity out of every system (a handoff in flight): Query1
// … Query4 exclude it.
type Frozen struct{}

// Codec is a component's handoff encoding: everything the entity's next
// owner needs to go on simulating it.
type Codec[T any] struct {
	Append func(dst []byte, v *T) []byte
	Decode func(b []byte) (T, error)

	fixed bool // made by FixedCodec: Register checks the type's size
}

// FixedCodec is the Codec of a fixed-size type (numbers, bools, arrays and
// structs of them, no pointers, slices or strings), in little-endian
// encoding/binary layout. Register refuses it for any other type.
func FixedCodec[T any]() Codec[T] {
	raw := memoryIsEncoding[T]()
	return Codec[T]{
		fixed: true,
		Append: func(dst []byte, v *T) []byte {
			if raw {
				// Copied, not walked by reflection: every handoff and
				// checkpoint encodes every component this way.
				return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))...)
			}
			out, err := binary.Append(dst, binary.LittleEndian, v)
			if err != nil {
				panic(fmt.Sprintf("zone: FixedCodec of %T: %v", *v, err)) // refused at Register
			}
			return out
		},
		Decode: func(b []byte) (T, error) {
			var v T
			n, err := binary.Decode(b, binary.LittleEndian, &v)
			if err != nil || n != len(b) {
				return v, ErrMalformedState.Wrap("%T: %d bytes", v, len(b))
			}
			return v, nil
		},
	}
}

// AudienceFunc says who may receive an entity's component at a flush.
type AudienceFunc func(e ecs.ID) outbox.Audience[Subscriber]

// memoryIsEncoding reports whether a T's bytes in memory are its
// little-endian encoding/binary encoding: a little-endian machine, a
// fixed-size type without padding (its encoded size is its size in
// memory) and without blank fields (which binary writes as zeros,
// whatever the memory holds). Bools hold 0 or 1, as binary writes them.
func memoryIsEncoding[T any]() bool {
	var zero T
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 &&
		binary.Size(zero) == int(unsafe.Sizeof(zero)) && !hasBlankField(reflect.TypeFor[T]())
}

func hasBlankField(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return hasBlankField(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.Name == "_" || hasBlankField(f.Type) {
				return true
			}
		}
	}
	return false
}

// Spec describes a module's component type.
type Spec[T any] struct {
	// Name is unique in the world and stable across builds. Required.
	Name string
	// Wire is the outbox component type clients receive it as; 0 means
	// it is not synced.
	Wire outbox.ComponentType
	// Audience says who receives it; nil is public in range. Ignored when
	// Wire is 0.
	Audience AudienceFunc
	// Encode appends the wire payload. Required when Wire is set.
	Encode func(dst []byte, v *T) []byte
	// Decode reads a wire payload back (what Encode wrote, as another
	// node sent it). Optional: a public component with a Decode is given
	// to simulation ghosts (foreign entities in the interaction band, made
	// real so perception and area queries find them); one without is not.
	Decode func(payload []byte) (T, error)
	// Handoff is the handoff codec. Exactly one of Handoff and Local must
	// be set: a component with neither is a boot error, so a new one
	// cannot be forgotten by the handoff.
	Handoff Codec[T]
	// Local marks a component that is not handed over: rebuilt on the
	// target (markers, caches, indices).
	Local bool
}

// meta is what the runtime keeps in ecs.ComponentSpec.Meta.
type meta struct {
	wire  outbox.ComponentType
	local bool
}

// Register registers a module's component on the runtime's world, with its
// encoder when it is synced. Call it from Module.Setup. Appear bursts list
// synced components in the order they were registered.
func Register[T any](r *Runtime, spec Spec[T]) (*ecs.Store[T], error) {
	var zero T
	hasCodec := spec.Handoff.Append != nil || spec.Handoff.Decode != nil
	switch {
	case spec.Local == hasCodec:
		return nil, ErrNoCodec.Wrap("component %q: set exactly one of Handoff and Local", spec.Name)
	case hasCodec && (spec.Handoff.Append == nil || spec.Handoff.Decode == nil):
		return nil, ErrNoCodec.Wrap("component %q: the handoff codec needs both Append and Decode", spec.Name)
	case spec.Wire != 0 && spec.Encode == nil:
		return nil, errcode.Config(fmt.Sprintf("Spec[%s].Encode", spec.Name), nil, "required when Wire is set")
	}
	if spec.Handoff.fixed && binary.Size(zero) < 0 {
		return nil, ErrNoCodec.Wrap("component %q: FixedCodec needs a fixed-size type, %T is not", spec.Name, zero)
	}
	s, err := ecs.Register[T](r.w, ecs.ComponentSpec{Name: spec.Name, Meta: meta{wire: spec.Wire, local: spec.Local}})
	if err != nil {
		return nil, err
	}
	if hasCodec {
		h := spec.Handoff
		r.codecs = append(r.codecs, codec{
			name: spec.Name,
			enc: func(id ecs.ID) ([]byte, bool) {
				v, ok := s.Get(id)
				if !ok {
					return nil, false
				}
				return h.Append(nil, v), true
			},
			app: func(dst []byte, id ecs.ID) ([]byte, bool) {
				v, ok := s.Get(id)
				if !ok {
					return dst, false
				}
				return h.Append(dst, v), true
			},
			dec: func(id ecs.ID, b []byte) error {
				v, err := h.Decode(b)
				if err != nil {
					return err
				}
				if p, ok := s.Get(id); ok {
					*p = v
					return nil
				}
				return s.Add(id, v)
			},
		})
		// Sorted by name, the order of a snapshot's components.
		slices.SortFunc(r.codecs, func(a, b codec) int { return strings.Compare(a.name, b.name) })
	}
	if spec.Wire != 0 {
		aud := spec.Audience
		if aud == nil {
			aud = public
		}
		enc := outbox.EncoderFuncs[Subscriber, ecs.ID]{
			WireType:     spec.Wire,
			HasFunc:      s.Has,
			AudienceFunc: aud,
			PayloadFunc: func(dst []byte, e ecs.ID) []byte {
				v, ok := s.Get(e)
				if !ok {
					return dst
				}
				return spec.Encode(dst, v)
			},
		}
		if err := r.addEncoder(s, enc); err != nil {
			return nil, err
		}
		if spec.Decode != nil {
			r.synced[len(r.synced)-1].decode = func(id ecs.ID, payload []byte) error {
				v, err := spec.Decode(payload)
				if err != nil {
					return err
				}
				if p, ok := s.Get(id); ok {
					*p = v
					return nil
				}
				return s.Add(id, v)
			}
		}
	}
	return s, nil
}

func public(ecs.ID) outbox.Audience[Subscriber] { return outbox.Public[Subscriber]() }

// Ready-made audiences for Spec.Audience.
var (
	// Public: everyone who sees the entity (the default).
	Public AudienceFunc = public
	// OwnerOnly: the entity's owning account, wherever it is.
	OwnerOnly AudienceFunc = func(ecs.ID) outbox.Audience[Subscriber] { return outbox.Owner[Subscriber]() }
	// OwnerAndParty: the owning account and its party (Runtime.SetParty).
	OwnerAndParty AudienceFunc = func(ecs.ID) outbox.Audience[Subscriber] { return outbox.Party[Subscriber]() }
)

// SyncPosition makes the built-in Position a synced component of wire type
// wire, its payload three little-endian float32 (x, y, z). Call it from
// Module.Setup at the point of the registration order where the position
// belongs in an appear burst. Without it positions are not sent.
func (r *Runtime) SyncPosition(wire outbox.ComponentType) error {
	err := r.addEncoder(r.pos, outbox.EncoderFuncs[Subscriber, ecs.ID]{
		WireType:     wire,
		HasFunc:      r.pos.Has,
		AudienceFunc: public,
		PayloadFunc: func(dst []byte, e ecs.ID) []byte {
			p, ok := r.pos.Get(e)
			if !ok {
				return dst
			}
			return AppendPos(dst, p.Pos)
		},
	})
	if err != nil {
		return err
	}
	r.synced[len(r.synced)-1].decode = func(id ecs.ID, payload []byte) error {
		p, err := DecodePos(payload)
		if err != nil {
			return err
		}
		if q, ok := r.pos.Get(id); ok {
			q.Pos = p
			return nil
		}
		return r.pos.Add(id, Position{Pos: p})
	}
	return nil
}

// AppendPos appends p as three little-endian float32 (x, y, z): the
// position payload of SyncPosition.
func AppendPos(dst []byte, p torus.Pos) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.X)))
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.Y)))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(p.Z)))
}

// DecodePos reads a position payload written by AppendPos; a coordinate
// that is not finite is refused.
func DecodePos(b []byte) (torus.Pos, error) {
	if len(b) != 12 {
		return torus.Pos{}, ErrMalformedState.Wrap("position payload of %d bytes, want 12", len(b))
	}
	f := func(i int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))) }
	p := torus.Pos{X: f(0), Y: f(4), Z: f(8)}
	for _, v := range []float64{p.X, p.Y, p.Z} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return torus.Pos{}, ErrMalformedState.Wrap("position %v is not finite", p)
		}
	}
	return p, nil
}

// synced is one registered encoder and the store it reads.
type synced struct {
	store ecs.Component
	wire  outbox.ComponentType
	enc   outbox.EncoderFuncs[Subscriber, ecs.ID] // the module's, for local entities
	// decode writes a payload into a simulation ghost's component; nil
	// when the component has no Decode.
	decode func(id ecs.ID, payload []byte) error
}

// addEncoder registers enc with the outbox, wrapped so that a render
// ghost's component is what its owner last sent: the stored frame's
// payload, public.
func (r *Runtime) addEncoder(store ecs.Component, enc outbox.EncoderFuncs[Subscriber, ecs.ID]) error {
	t := enc.WireType
	wrapped := outbox.EncoderFuncs[Subscriber, ecs.ID]{
		WireType: t,
		HasFunc: func(e ecs.ID) bool {
			if r.flushGhost(e) {
				_, ok := r.cluster.rep.Frame(uint64(e), t)
				return ok
			}
			return enc.HasFunc(e)
		},
		AudienceFunc: func(e ecs.ID) outbox.Audience[Subscriber] {
			if r.flushGhost(e) {
				return outbox.Public[Subscriber]()
			}
			return enc.AudienceFunc(e)
		},
		PayloadFunc: func(dst []byte, e ecs.ID) []byte {
			if r.flushGhost(e) {
				f, ok := r.cluster.rep.Frame(uint64(e), t)
				if !ok {
					return dst
				}
				m, _, err := outbox.ReadFrame(f)
				if err != nil {
					return dst
				}
				return append(dst, m.Payload...)
			}
			return enc.PayloadFunc(dst, e)
		},
	}
	if err := r.out.Register(wrapped); err != nil {
		return err
	}
	r.synced = append(r.synced, synced{store: store, wire: t, enc: enc})
	return nil
}

// isGhost reports whether e is a render ghost here: a foreign entity
// whose components are what its owner sent.
func (r *Runtime) isGhost(e ecs.ID) bool { return r.cluster != nil && r.cluster.isGhost(e) }

// ghostMemo is isGhost's answer for one entity (set: it holds one).
type ghostMemo struct {
	id         ecs.ID
	set, ghost bool
}

// flushGhost is isGhost for the outbox's questions (its encoders and its
// world). During Flush it remembers the last entity's answer: the flush
// asks up to four times per dirty component (Has, Audience, observers,
// payload) and goes through an entity's components one after another,
// while the record table is a map of every entity the node knows.
func (r *Runtime) flushGhost(e ecs.ID) bool {
	if !r.inFlush {
		return r.isGhost(e)
	}
	if !r.memo.set || r.memo.id != e {
		r.memo = ghostMemo{id: e, set: true, ghost: r.isGhost(e)}
	}
	return r.memo.ghost
}

// isSynced reports whether t is a registered wire type.
func (r *Runtime) isSynced(t outbox.ComponentType) bool {
	for _, s := range r.synced {
		if s.wire == t {
			return true
		}
	}
	return false
}

// markAllDirty queues an update of every component a ghost has, for its
// local observers.
func (r *Runtime) markAllDirty(e ecs.ID) {
	for _, s := range r.synced {
		if _, ok := r.cluster.rep.Frame(uint64(e), s.wire); ok {
			r.out.MarkDirty(e, s.wire)
		}
	}
}

// markLocalDirty queues every synced component a local entity has, for
// every audience: an adopted entity's state may be newer than the ghost
// its observers here and its owner's client last got (the source's last
// tick can change a component and freeze it at once, and its delta may
// arrive after the transfer).
func (r *Runtime) markLocalDirty(e ecs.ID) {
	for _, s := range r.synced {
		if s.enc.HasFunc(e) {
			r.out.MarkDirty(e, s.wire)
		}
	}
}

// appendBurst appends a local entity's appear burst of its public
// components, in registration order, as the outbox would send it to a
// node.
func (r *Runtime) appendBurst(dst []byte, e ecs.ID) []byte {
	// The component frames are built in scratch kept on the runtime (the
	// appear head, which counts them, goes first), so a burst costs the
	// growth of dst alone: every snapshot entry is one.
	body := r.burstBody[:0]
	n := 0
	for _, s := range r.synced {
		if !s.enc.HasFunc(e) || s.enc.AudienceFunc(e).Kind != outbox.PublicInRange {
			continue
		}
		r.burstPayload = s.enc.PayloadFunc(r.burstPayload[:0], e)
		body = outbox.AppendComponentFrame(body, uint64(e), s.wire, r.burstPayload)
		n++
	}
	r.burstBody = body
	return append(outbox.AppendAppearFrame(dst, uint64(e), n), body...)
}

// checkComponents is the boot check run after Module.Setup: every
// component is either handed over or marked local (Register enforces it
// for module components; this catches ecs.Register calls that bypassed
// it).
func (r *Runtime) checkComponents() error {
	for _, c := range r.w.Components() {
		if _, ok := c.Type().Meta.(meta); !ok {
			return ErrNoCodec.Wrap("component %q was registered without zone.Register", c.Type().Name)
		}
	}
	return nil
}
