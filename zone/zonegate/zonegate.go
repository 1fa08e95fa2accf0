package zonegate

import (
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/zone"
)

// World returns rt as the World of a gateway.Gateway: the players of the
// sessions the gateway serves come into rt's world from its
// Config.WorldStore (or are taken over where they already are), inputs
// reach whichever node simulates the entity, and a logout saves the
// player. The module must have called zone.Runtime.SetPlayers.
func World(rt *zone.Runtime) (gateway.World, error) {
	s, err := rt.Sessions()
	if err != nil {
		return nil, err
	}
	return world{s}, nil
}

// SetGateway gives rt the gateway whose sockets it closes when a login
// elsewhere takes a player over (nil: none).
func SetGateway(rt *zone.Runtime, g *gateway.Gateway) {
	if g == nil {
		rt.SetGateway(nil)
		return
	}
	rt.SetGateway(displacer{g})
}

// world hands a gateway's calls on to the runtime's Sessions.
type world struct {
	s *zone.Sessions
}

var _ gateway.World = world{}

func (w world) Join(s *gateway.Session) error { return w.s.Join(session{s}) }

func (w world) Input(s *gateway.Session, in gateway.Input) error {
	return w.s.Input(session{s}, in)
}

func (w world) Leave(s *gateway.Session) { w.s.Leave(session{s}) }

// session is a *gateway.Session as the runtime's zone.Session port: its
// methods but Epoch are the gateway's own. A value holding the pointer,
// so two adapters of one session are equal (the runtime's identity).
type session struct {
	*gateway.Session
}

var _ zone.Session = session{}

// Epoch is the session's directory epoch as the runtime's session number.
func (s session) Epoch() uint64 { return uint64(s.Session.Epoch()) }

// displacer is a *gateway.Gateway as the runtime's zone.Gateway port.
type displacer struct {
	g *gateway.Gateway
}

var _ zone.Gateway = displacer{}

func (d displacer) Displaced(a account.ID, newer uint64) {
	d.g.Displaced(a, directory.Epoch(newer))
}
