package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway/clientinput"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// fakeSession is a client session as the runtime's Session port sees it,
// with no gateway: what the runtime tells the client is recorded. Its
// methods run on the world goroutine (the test's, which steps).
type fakeSession struct {
	account     account.ID
	epoch       uint64
	master, pet uint64
	batches     int
	failed      string
}

var _ zone.Session = (*fakeSession)(nil)

func (s *fakeSession) Account() account.ID               { return s.account }
func (s *fakeSession) Epoch() uint64                     { return s.epoch }
func (s *fakeSession) Deliver(_ uint64, frames [][]byte) { s.batches++ }
func (s *fakeSession) SetYou(master, pet uint64)         { s.master, s.pet = master, pet }
func (s *fakeSession) SendTerrain([]byte)                {}
func (s *fakeSession) Fail(message string)               { s.failed = message }
func (s *fakeSession) Superseded() bool                  { return false }

// The world side of the gateway role needs nothing of the gateway: on one
// node with no world store, a session joined through the Session port is
// given its player (SetYou) and its batches, its input is applied once
// the module accepts it (refused as clientinput.ErrBadInput otherwise),
// and its Leave logs the player out. A Leave from another value, equal
// in account and epoch but not the same session, changes nothing.
func TestSessionsWithoutAGateway(t *testing.T) {
	g, err := game.NewModule(game.Config{Seed: 9, NoBots: true})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := zone.New(g.Config().RuntimeConfig(), g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	sessions, err := rt.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	steps := func(n int) {
		for range n {
			rt.Step()
		}
	}

	s := &fakeSession{account: 4001, epoch: 2}
	if err := sessions.Join(s); err != nil {
		t.Fatal(err)
	}
	steps(3)
	if s.master == 0 || s.pet == 0 || s.failed != "" {
		t.Fatalf("after the join: master %d, pet %d, failed %q", s.master, s.pet, s.failed)
	}
	if s.batches == 0 {
		t.Fatal("the session was delivered no batch")
	}

	if err := sessions.Input(s, clientinput.Input{Seq: 1, Entity: s.master, Kind: 99}); !errors.Is(err, clientinput.ErrBadInput) {
		t.Fatalf("an input of unknown kind: %v, want clientinput.ErrBadInput", err)
	}
	p, ok := rt.Positions().Get(ecs.ID(s.master))
	if !ok {
		t.Fatal("the master is not in the world")
	}
	dest := rt.Geometry().Translate(p.Pos, torus.Pos{X: 10})
	if err := sessions.Input(s, clientinput.Input{Seq: 2, Entity: s.master, Kind: game.InputMove, Point: dest, HasPoint: true}); err != nil {
		t.Fatal(err)
	}
	steps(3)
	if n := rt.PlayerStats().Inputs; n != 1 {
		t.Fatalf("%d inputs applied, want 1", n)
	}

	sessions.Leave(&fakeSession{account: s.account, epoch: s.epoch})
	steps(3)
	if n := rt.PlayerStats().Removed; n != 0 {
		t.Fatalf("another session's Leave took %d players out", n)
	}
	sessions.Leave(s)
	steps(3)
	if n := rt.PlayerStats().Removed; n != 1 {
		t.Fatalf("%d players taken out at the session's Leave, want 1", n)
	}
	if rt.World().Alive(ecs.ID(s.master)) {
		t.Fatal("the master is still in the world after the logout")
	}
}
