package zone

import (
	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// SpawnPlayer brings a's player in on r (which owns pos) for session, as
// a login's spawn does, without a gateway: master and pet (0: none) with
// the module's state. For the tests of what a node that dies does with
// players (logout_test.go).
func (r *Runtime) SpawnPlayer(a account.ID, session uint64, master, pet ecs.ID, pos torus.Pos, state []byte) bool {
	return r.spawnHere(a, session, master, pet, pos, state)
}

// LogOut sends the logout of session to master, as the session's gateway
// does when its client logs out (leaveSession).
func (r *Runtime) LogOut(master ecs.ID, session uint64) {
	r.Send(Intent{Kind: intentLogout, Source: master, Target: master, Data: append(appendSession(nil, session), sessionEnd)})
}

// SaverBarrier returns once the world store has answered every save and
// load r queued before it; what their answers post runs at r's next Step.
func (r *Runtime) SaverBarrier() {
	done := make(chan struct{})
	if r.saver.queue(saveJob{who: 1, load: func(worldstore.Player, error) { close(done) }}) {
		<-done
	}
}

// AnswerTakeover answers a takeover of account a by session as r answers
// node from's: "taken", "saving" or "nothere".
func (r *Runtime) AnswerTakeover(from string, a account.ID, session uint64) string {
	m := r.answerTakeover(from, wire.Player{Fence: r.cluster.fence(), Op: wire.PlayerTakeover, Account: a, Session: session})
	switch m.Op {
	case wire.PlayerTaken:
		return "taken"
	case wire.PlayerSaving:
		return "saving"
	default:
		return "nothere"
	}
}
