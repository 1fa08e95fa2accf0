package game

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Client input kinds of the reference game (clientinput.Input.Kind): what a
// player's client may ask of its master or pet.
const (
	InputMove   uint32 = 1 // walk to Point (required)
	InputAttack uint32 = 2 // attack Target (required) whenever it is in reach; the master only
	InputStop   uint32 = 3 // stand still and attack nothing
	// InputMark places a marker of type Target (1–255; 0 removes one) on
	// the ground at Point (required), within MarkReach of the master: a
	// terrain edit (terrain.KindMarker), kept in the world store.
	InputMark uint32 = 4
)

// MarkReach is how far from its master a player may place a marker.
const MarkReach = 8.0

// players are the game's hooks for the gateway role (zone.Players): a
// player brought in by a client is Manual — no bot drives it.
func (g *Game) playerHooks() zone.Players {
	return zone.Players{
		Spawn:      g.spawnClientPlayer,
		Save:       g.savePlayer,
		Pet:        g.playerPet,
		Remove:     g.removePlayer,
		Home:       g.home,
		CheckInput: checkInput,
		Input:      g.applyInput,
	}
}

func checkInput(in clientinput.Input) error {
	if isEconomyInput(in.Kind) {
		return checkEconomyInput(in)
	}
	switch in.Kind {
	case InputMove:
		if !in.HasPoint {
			return fmt.Errorf("%w: move %d without a point", clientinput.ErrBadInput, in.Seq)
		}
	case InputAttack:
		if in.Target == 0 {
			return fmt.Errorf("%w: attack %d without a target", clientinput.ErrBadInput, in.Seq)
		}
	case InputStop:
	case InputMark:
		if !in.HasPoint || in.Target > 255 {
			return fmt.Errorf("%w: mark %d needs a point and a type 0–255, got type %d", clientinput.ErrBadInput, in.Seq, in.Target)
		}
	default:
		return fmt.Errorf("%w: input %d of unknown kind %d", clientinput.ErrBadInput, in.Seq, in.Kind)
	}
	return nil
}

func (g *Game) applyInput(id ecs.ID, in clientinput.Input) {
	if g.economyInput(id, in) {
		return
	}
	path, ok := g.c.path.Get(id)
	if !ok {
		return
	}
	m, isMaster := g.c.master.Get(id)
	switch in.Kind {
	case InputMove:
		mps := 5.0
		if s, ok := g.c.speed.Get(id); ok {
			mps = s.MPS
		}
		g.walk(id, path, in.Point, mps)
	case InputAttack:
		if isMaster {
			m.Target = ecs.ID(in.Target)
		}
	case InputMark:
		if isMaster {
			g.mark(id, in)
		}
	case InputStop:
		if path.Active {
			path.Active = false
			g.c.path.MarkDirty(id)
			g.c.pos.MarkDirty(id)
		}
		if isMaster {
			m.Target = 0
		}
	}
}

// The saved form of a player (zone.Players.Save, worldstore.Player.State):
//
//	version:byte(1) exp:varint hp:varint petHP:varint
const stateVersion = 1

func (g *Game) savePlayer(master ecs.ID) ([]byte, bool) {
	m, ok := g.c.master.Get(master)
	if !ok {
		return nil, false
	}
	var exp int64
	if e, ok := g.c.exp.Get(master); ok {
		exp = e.Points
	}
	hp, petHP := int64(100), int64(60)
	if h, ok := g.c.health.Get(master); ok {
		hp = int64(h.HP)
	}
	if h, ok := g.c.health.Get(m.Pet); ok {
		petHP = int64(h.HP)
	}
	b := []byte{stateVersion}
	b = binary.AppendVarint(b, exp)
	b = binary.AppendVarint(b, hp)
	return binary.AppendVarint(b, petHP), true
}

// playerPet names the pet of the player whose master is master.
func (g *Game) playerPet(master ecs.ID) (ecs.ID, bool) {
	m, ok := g.c.master.Get(master)
	if !ok {
		return 0, false
	}
	return m.Pet, true
}

type playerState struct{ exp, hp, petHP int64 }

// newPlayerState is a new player's state: no experience, full health.
func newPlayerState() playerState { return playerState{hp: 100, petHP: 60} }

func decodeState(b []byte) (playerState, error) {
	s := newPlayerState()
	if len(b) == 0 {
		return s, nil
	}
	if b[0] != stateVersion {
		return s, fmt.Errorf("game: player state version %d", b[0])
	}
	b = b[1:]
	for _, f := range []*int64{&s.exp, &s.hp, &s.petHP} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return s, errors.New("game: player state truncated")
		}
		*f, b = v, b[n:]
	}
	if len(b) != 0 {
		return s, errors.New("game: player state has trailing bytes")
	}
	s.hp, s.petHP = min(max(s.hp, 1), 100), min(max(s.petHP, 1), 60)
	return s, nil
}

// spawnClientPlayer brings a client's player in with the ids the gateway
// minted, from its saved state.
func (g *Game) spawnClientPlayer(a account.ID, masterID, petID ecs.ID, home torus.Pos, state []byte) error {
	st, err := decodeState(state)
	if err != nil {
		return err
	}
	return g.createPlayer(a, masterID, petID, home, st, true)
}

func (g *Game) removePlayer(master ecs.ID) {
	g.leaveTrades(master)
	if m, ok := g.c.master.Get(master); ok {
		if g.r.Simulated(m.Pet) {
			_ = g.r.Destroy(m.Pet, interest.Gone)
		} else {
			// The pet lives on another node (it crossed a border its
			// master has not): its node removes it.
			g.r.Send(zone.Intent{Kind: Dismiss, Source: master, Target: m.Pet})
		}
	}
	_ = g.r.Destroy(master, interest.Gone)
}

// mark places the marker a client asked for, if the master stands within
// reach of the point.
func (g *Game) mark(master ecs.ID, in clientinput.Input) {
	p, ok := g.c.pos.Get(master)
	if !ok || !g.geo.Within(p.Pos, in.Point, MarkReach) {
		return
	}
	at := g.geo.Normalise(in.Point)
	origin := g.geo.ChunkOrigin(g.geo.ChunkOf(at))
	cell := g.geo.ChunkEdge() / terrain.Cells
	m := terrain.Marker{
		X:    uint8(min(max(int(g.geo.DeltaX(origin.X, at.X)/cell), 0), terrain.Cells-1)),
		Y:    uint8(min(max(int(g.geo.DeltaY(origin.Y, at.Y)/cell), 0), terrain.Cells-1)),
		Type: uint8(in.Target),
	}
	var author account.ID
	if o, ok := g.c.owner.Get(master); ok {
		author = o.Account
	}
	e, err := m.Edit(author)
	if err == nil {
		err = g.r.EditTerrain(at, e)
	}
	if err != nil && !errors.Is(err, zone.ErrNoWorldStore) {
		g.r.Logger().Warn("game: marker", "master", master, "err", err)
	}
}
