package game

import (
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// Names of the kinds KindOf tells apart, the words an observer (package
// dashboard) shows.
const (
	KindNamePlayer = "player" // a player's master
	KindNamePet    = "pet"
	KindNameMob    = "mob"
	KindNameDen    = "den" // a den, whose keeper runs the shop
)

// KindOf names what entity id of the game running on rt is: KindNamePlayer,
// KindNamePet, KindNameMob or KindNameDen, or "" for an entity the game
// did not make (or a runtime without the game). It reads the public Visual
// first, so a ghost of another node's entity is named too, and falls back
// on the game's own components. Call it on rt's goroutine (a zone host's
// OnTick); its signature is dashboard.CollectorConfig.Kinds'.
func KindOf(rt *zone.Runtime, id ecs.ID) string {
	w := rt.World()
	if vs, ok := ecs.StoreOf[Visual](w); ok {
		if v, ok := vs.Get(id); ok {
			if name := v.Kind.name(); name != "" {
				return name
			}
		}
	}
	switch {
	case has[Master](w, id):
		return KindNamePlayer
	case has[Pet](w, id):
		return KindNamePet
	case has[Mob](w, id):
		return KindNameMob
	case has[Den](w, id):
		return KindNameDen
	}
	return ""
}

func has[T any](w *ecs.World, id ecs.ID) bool {
	s, ok := ecs.StoreOf[T](w)
	return ok && s.Has(id)
}

func (k Kind) name() string {
	switch k {
	case KindPlayer:
		return KindNamePlayer
	case KindPet:
		return KindNamePet
	case KindMob:
		return KindNameMob
	case KindDen:
		return KindNameDen
	}
	return ""
}
