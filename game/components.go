package game

import (
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/torus"
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

// Sync is the component metadata the game registers in ecs.ComponentSpec.Meta:
// whether and how a component reaches clients, and whether a handoff
// carries it. A later handoff codec registry reads it from
// ecs.World.Components.
type Sync struct {
	// Wire is the outbox component type; 0 means not synced to clients.
	Wire outbox.ComponentType
	// HandedOver is false for components rebuilt on the target instead of
	// transferred (markers, caches).
	HandedOver bool
}

// Position is where an entity stands. Synced every 8th movement step and
// whenever a path starts or ends; clients animate from Path and Speed in
// between.
type Position struct{ torus.Pos }

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

// Owner is the account that owns an entity (a player's master and pet).
// Not synced.
type Owner struct{ Account account.ID }

// Motion is movement bookkeeping (not synced): steps taken, for the
// every-8th-step position resend, and the chunk the entity was last
// indexed in.
type Motion struct {
	Steps uint32
	Chunk torus.ChunkPos
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

// Den stocks mobs near players. Column is its spawner cell key.
type Den struct {
	Column interest.Column
	Mobs   []ecs.ID
}

// Dying carries the vanish reason of an entity being destroyed.
type Dying struct{ Reason interest.VanishReason }

// Frozen takes an entity out of every system (a handoff in flight).
type Frozen struct{}

// components are the game's stores, registered per World.
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
	dying  *ecs.Store[Dying]
	frozen *ecs.Store[Frozen]
}

func register[T any](w *ecs.World, errp *error, name string, meta Sync) *ecs.Store[T] {
	if *errp != nil {
		return nil
	}
	s, err := ecs.Register[T](w, ecs.ComponentSpec{Name: name, Meta: meta})
	*errp = err
	return s
}

func registerComponents(w *ecs.World) (components, error) {
	var err error
	c := components{
		pos:    register[Position](w, &err, "position", Sync{Wire: WirePosition, HandedOver: true}),
		path:   register[Path](w, &err, "path", Sync{Wire: WirePath, HandedOver: true}),
		speed:  register[Speed](w, &err, "speed", Sync{Wire: WireSpeed, HandedOver: true}),
		visual: register[Visual](w, &err, "visual", Sync{Wire: WireVisual, HandedOver: true}),
		health: register[Health](w, &err, "health", Sync{Wire: WireHealth, HandedOver: true}),
		exp:    register[Exp](w, &err, "exp", Sync{Wire: WireExp, HandedOver: true}),
		owner:  register[Owner](w, &err, "owner", Sync{HandedOver: true}),
		motion: register[Motion](w, &err, "motion", Sync{HandedOver: true}),
		master: register[Master](w, &err, "master", Sync{HandedOver: true}),
		pet:    register[Pet](w, &err, "pet", Sync{HandedOver: true}),
		mob:    register[Mob](w, &err, "mob", Sync{HandedOver: true}),
		den:    register[Den](w, &err, "den", Sync{HandedOver: true}),
		dying:  register[Dying](w, &err, "dying", Sync{}),
		frozen: register[Frozen](w, &err, "frozen", Sync{}),
	}
	return c, err
}
