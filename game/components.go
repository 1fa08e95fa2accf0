package game

import (
	"encoding/binary"
	"math"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Wire types of the synced components. The numbers are the protocol.
const (
	WirePosition outbox.ComponentType = 1 // public in range
	WirePath     outbox.ComponentType = 2 // public in range
	WireSpeed    outbox.ComponentType = 3 // public in range
	WireVisual   outbox.ComponentType = 4 // public in range
	WireHealth   outbox.ComponentType = 5 // public if unowned, else owner + party
	WireExp      outbox.ComponentType = 6 // owner only
)

// Position is where an entity stands: the runtime's built-in store,
// synced whenever a path starts or ends and, while it walks, as
// resendPosition says; clients animate from Path and Speed in between.
type Position = zone.Position

// Owner is the account that owns an entity (a player's master and pet):
// the runtime's built-in store. Not synced.
type Owner = zone.Owner

// Frozen takes an entity out of every system (a handoff in flight): the
// runtime's built-in marker.
type Frozen = zone.Frozen

// Path is where an entity is walking to.
type Path struct {
	Target torus.Pos
	Active bool
}

// Speed is how fast an entity walks, in metres per second.
type Speed struct{ MPS float64 }

// Kind says what an entity looks like.
type Kind uint8

// Kinds of entity.
const (
	KindPlayer Kind = iota + 1
	KindPet
	KindMob
	KindDen
)

// Visual is the look of an entity (public).
type Visual struct{ Kind Kind }

// Health is hit points. Only the entity's own intent system writes it.
type Health struct{ HP, Max int32 }

// Exp is experience, owner only.
type Exp struct{ Points int64 }

// Motion is movement bookkeeping (not synced): steps taken, for the
// every-8th-step position resend, and the chunk the entity was last
// indexed in; the aim of its last step, whether it walked then, and
// whether its walk was redirected since its position was last sent (see
// resendPosition).
type Motion struct {
	Steps   uint32
	Chunk   torus.ChunkPos
	Aim     torus.Pos
	Walking bool
	Steered bool
}

// Cooldown is how many ticks an entity still waits before it may act
// again; 0 means ready. It counts down in the entity's own system, one per
// tick the entity is simulated (so not while it is frozen), and is never a
// tick number: component state moved to a node whose tick counter differs
// keeps its meaning as it is.
type Cooldown uint32

// countDown spends one tick of the cooldown and reports whether it is over.
func (c *Cooldown) countDown() bool {
	if *c > 0 {
		*c--
	}
	return *c == 0
}

// Master is a player's main entity.
type Master struct {
	Pet      ecs.ID
	Home     torus.Pos
	AttackIn Cooldown
	// Manual says a client drives the player (zone.Players): it walks
	// where it is told and attacks only Target. Otherwise it is a bot.
	Manual bool
	Target ecs.ID
}

// Pet follows and heals its master.
type Pet struct {
	Master ecs.ID
	HealIn Cooldown
}

// MobState is a mob's AI state.
type MobState uint8

// Mob AI states.
const (
	Wandering MobState = iota
	Chasing
)

// Mob is a creature stocked by a den. Its AI state is never synced.
type Mob struct {
	Den      ecs.ID
	Home     torus.Pos
	State    MobState
	Target   ecs.ID
	AttackIn Cooldown
}

// Threat is a mob's damage table: who hurt it and how much, the largest
// first, at most ThreatSlots attackers (a smaller hit than every slot's
// is not remembered). The mob's owner keeps it, whichever node the
// attackers are simulated on: damage arrives as intents. The mob chases
// the top of the table, and every attacker in it gets the kill credit.
type Threat struct{ Slots [ThreatSlots]ThreatEntry }

// ThreatSlots is how many attackers a damage table remembers.
const ThreatSlots = 4

// ThreatEntry is one attacker of a damage table; Source 0 is empty.
type ThreatEntry struct {
	Source ecs.ID
	Damage int32
}

// add records damage by source and keeps the table sorted.
func (t *Threat) add(source ecs.ID, damage int32) {
	i := 0
	for i < ThreatSlots && t.Slots[i].Source != source && t.Slots[i].Source != 0 {
		i++
	}
	if i == ThreatSlots { // a new attacker: replaces the smallest if larger
		i = ThreatSlots - 1
		if t.Slots[i].Damage >= damage {
			return
		}
		t.Slots[i] = ThreatEntry{}
	}
	t.Slots[i].Source = source
	t.Slots[i].Damage += damage
	for ; i > 0 && t.Slots[i].Damage > t.Slots[i-1].Damage; i-- {
		t.Slots[i], t.Slots[i-1] = t.Slots[i-1], t.Slots[i]
	}
}

// top returns the attacker that did the most damage.
func (t *Threat) top() (ecs.ID, bool) { return t.Slots[0].Source, t.Slots[0].Source != 0 }

// Den stocks mobs near players. Column is its spawner cell key.
type Den struct {
	Column interest.Column
	Mobs   []ecs.ID
}

// components are the game's stores, registered per runtime.
type components struct {
	pos    *ecs.Store[Position]
	path   *ecs.Store[Path]
	speed  *ecs.Store[Speed]
	visual *ecs.Store[Visual]
	health *ecs.Store[Health]
	exp    *ecs.Store[Exp]
	owner  *ecs.Store[Owner]
	motion *ecs.Store[Motion]
	master *ecs.Store[Master]
	pet    *ecs.Store[Pet]
	mob    *ecs.Store[Mob]
	den    *ecs.Store[Den]
	threat *ecs.Store[Threat]
	frozen *ecs.Store[Frozen]
}

func register[T any](r *zone.Runtime, errp *error, spec zone.Spec[T]) *ecs.Store[T] {
	if *errp != nil {
		return nil
	}
	s, err := zone.Register(r, spec)
	*errp = err
	return s
}

// registerComponents registers the game's components in the order appear
// bursts list them: visual, position, path, speed, health, experience.
func registerComponents(r *zone.Runtime) (components, error) {
	c := components{pos: r.Positions(), owner: r.Owners(), frozen: r.Frozen()}
	var err error
	c.visual = register(r, &err, zone.Spec[Visual]{Name: "visual", Wire: WireVisual, Handoff: zone.FixedCodec[Visual](),
		Encode: encodeVisual, Decode: decodeVisual})
	if err == nil {
		err = r.SyncPosition(WirePosition)
	}
	c.path = register(r, &err, zone.Spec[Path]{Name: "path", Wire: WirePath, Handoff: zone.FixedCodec[Path](),
		Encode: encodePath, Decode: decodePath})
	c.speed = register(r, &err, zone.Spec[Speed]{Name: "speed", Wire: WireSpeed, Handoff: zone.FixedCodec[Speed](),
		Encode: encodeSpeed, Decode: decodeSpeed})
	// Health: public for a creature nobody owns, owner and party for a
	// player's entities.
	c.health = register(r, &err, zone.Spec[Health]{Name: "health", Wire: WireHealth, Handoff: zone.FixedCodec[Health](),
		Audience: func(e ecs.ID) outbox.Audience[zone.Subscriber] {
			if c.owner.Has(e) {
				return outbox.Party[zone.Subscriber]()
			}
			return outbox.Public[zone.Subscriber]()
		},
		Encode: encodeHealth, Decode: decodeHealth})
	c.exp = register(r, &err, zone.Spec[Exp]{Name: "exp", Wire: WireExp, Handoff: zone.FixedCodec[Exp](),
		Audience: zone.OwnerOnly,
		Encode:   func(dst []byte, v *Exp) []byte { return binary.AppendVarint(dst, v.Points) }})
	c.motion = register(r, &err, zone.Spec[Motion]{Name: "motion", Handoff: zone.FixedCodec[Motion]()})
	c.master = register(r, &err, zone.Spec[Master]{Name: "master", Handoff: zone.FixedCodec[Master]()})
	c.pet = register(r, &err, zone.Spec[Pet]{Name: "pet", Handoff: zone.FixedCodec[Pet]()})
	c.mob = register(r, &err, zone.Spec[Mob]{Name: "mob", Handoff: zone.FixedCodec[Mob]()})
	c.den = register(r, &err, zone.Spec[Den]{Name: "den", Handoff: denCodec})
	c.threat = register(r, &err, zone.Spec[Threat]{Name: "threat", Handoff: zone.FixedCodec[Threat]()})
	return c, err
}

// The wire payloads of the public components, and their decoders (what a
// peer sends for a simulation ghost).

func encodeVisual(dst []byte, v *Visual) []byte { return append(dst, byte(v.Kind)) }

func decodeVisual(b []byte) (Visual, error) {
	if len(b) != 1 {
		return Visual{}, zone.ErrMalformedState.Wrap("visual of %d bytes", len(b))
	}
	return Visual{Kind(b[0])}, nil
}

func encodePath(dst []byte, v *Path) []byte {
	if !v.Active {
		return append(dst, 0)
	}
	return zone.AppendPos(append(dst, 1), v.Target)
}

// DecodePath reads a Path payload (WirePath), as a client in Go needs to
// animate an entity; DecodeSpeed a Speed one.
func DecodePath(b []byte) (Path, error) { return decodePath(b) }

// DecodeSpeed reads a Speed payload (WireSpeed).
func DecodeSpeed(b []byte) (Speed, error) { return decodeSpeed(b) }

func decodePath(b []byte) (Path, error) {
	if len(b) == 1 && b[0] == 0 {
		return Path{}, nil
	}
	if len(b) != 13 || b[0] != 1 {
		return Path{}, zone.ErrMalformedState.Wrap("path of %d bytes", len(b))
	}
	p, err := zone.DecodePos(b[1:])
	return Path{Target: p, Active: true}, err
}

func encodeSpeed(dst []byte, v *Speed) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.MPS)))
}

func decodeSpeed(b []byte) (Speed, error) {
	if len(b) != 4 {
		return Speed{}, zone.ErrMalformedState.Wrap("speed of %d bytes", len(b))
	}
	v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return Speed{}, zone.ErrMalformedState.Wrap("speed %v", v)
	}
	return Speed{v}, nil
}

func encodeHealth(dst []byte, v *Health) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(dst, uint64(max(v.HP, 0))), uint64(v.Max))
}

func decodeHealth(b []byte) (Health, error) {
	hp, n := uvarint(b)
	if n <= 0 || hp > math.MaxInt32 {
		return Health{}, zone.ErrMalformedState.Wrap("health hp")
	}
	mx, m := uvarint(b[n:])
	if m <= 0 || mx > math.MaxInt32 || n+m != len(b) {
		return Health{}, zone.ErrMalformedState.Wrap("health max")
	}
	return Health{HP: int32(hp), Max: int32(mx)}, nil
}

// uvarint is binary.Uvarint that also refuses a non-minimal encoding (n
// ≤ 0), so every payload has one encoding.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 0 && n != len(binary.AppendUvarint(nil, v)) {
		return 0, -1
	}
	return v, n
}

// varint is binary.Varint, refusing a non-minimal encoding.
func varint(b []byte) (int64, int) {
	v, n := binary.Varint(b)
	if n > 0 && n != len(binary.AppendVarint(nil, v)) {
		return 0, -1
	}
	return v, n
}

// denCodec is the handoff encoding of a Den: its column and its mobs.
var denCodec = zone.Codec[Den]{
	Append: func(dst []byte, d *Den) []byte {
		dst = binary.AppendVarint(dst, int64(d.Column.X))
		dst = binary.AppendVarint(dst, int64(d.Column.Y))
		dst = binary.AppendUvarint(dst, uint64(len(d.Mobs)))
		for _, m := range d.Mobs {
			dst = binary.AppendUvarint(dst, uint64(m))
		}
		return dst
	},
	Decode: func(b []byte) (Den, error) {
		var d Den
		x, n := varint(b)
		if n <= 0 || x != int64(int32(x)) {
			return d, zone.ErrMalformedState.Wrap("den column x")
		}
		b = b[n:]
		y, n := varint(b)
		if n <= 0 || y != int64(int32(y)) {
			return d, zone.ErrMalformedState.Wrap("den column y")
		}
		b = b[n:]
		count, n := uvarint(b)
		if n <= 0 || count > uint64(len(b)) {
			return d, zone.ErrMalformedState.Wrap("den mob count")
		}
		b = b[n:]
		d.Column = interest.Column{X: int32(x), Y: int32(y)}
		for range count {
			m, n := uvarint(b)
			if n <= 0 {
				return d, zone.ErrMalformedState.Wrap("den mob id")
			}
			b = b[n:]
			d.Mobs = append(d.Mobs, ecs.ID(m))
		}
		if len(b) != 0 {
			return d, zone.ErrMalformedState.Wrap("%d bytes after the den", len(b))
		}
		return d, nil
	},
}
