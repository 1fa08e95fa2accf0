package sim_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/torus"
)

// Tests that pin what docs/protocol.md tells a client author, where the
// answer is a behaviour of the running cluster rather than of one
// package: each names the section it holds to.

// taped is one frame a tape client was sent: the batch it came in (its
// index among the session's batches), the tick, and whether it belongs
// to an appear burst (the head and its component frames).
type taped struct {
	batch   int
	tick    uint64
	inBurst bool
	m       outbox.Message // Payload copied
}

// tape is a client of the documented protocol that keeps every frame it
// is sent, in order: for tests of the order of frames itself, which
// sim.Client (it keeps only the world the frames describe) cannot show.
type tape struct {
	ws   *websocket.Conn
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every message
	master  uint64
	pet     uint64
	batches int
	frames  []taped
	err     error
}

func dialTape(t *testing.T, ctx context.Context, url, token string) *tape {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{gateway.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	tp := &tape{ws: ws, done: make(chan struct{}), changed: make(chan struct{})}
	t.Cleanup(func() {
		_ = ws.CloseNow()
		<-tp.done
	})
	b, err := proto.Marshal(&clientpb.ClientMessage{Body: &clientpb.ClientMessage_Login{Login: &clientpb.Login{Token: token}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, b); err != nil {
		t.Fatal(err)
	}
	go tp.read()
	return tp
}

func (tp *tape) read() {
	defer close(tp.done)
	for {
		_, b, err := tp.ws.Read(context.Background())
		tp.mu.Lock()
		if err == nil {
			err = tp.apply(b)
		}
		if err != nil {
			tp.err = err
		}
		close(tp.changed)
		tp.changed = make(chan struct{})
		tp.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// apply records one server message, under tp.mu.
func (tp *tape) apply(b []byte) error {
	var m clientpb.ServerMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		return err
	}
	if y := m.GetYou(); y != nil {
		tp.master, tp.pet = y.GetMaster(), y.GetPet()
	}
	batch := m.GetBatch()
	if batch == nil {
		return nil
	}
	n := tp.batches
	tp.batches++
	left := 0
	return outbox.DecodeBatch(batch.GetFrames(), func(fm outbox.Message) error {
		fm.Payload = slices.Clone(fm.Payload)
		in := left > 0 || fm.Kind == outbox.KindAppear
		if left > 0 {
			left--
		} else if fm.Kind == outbox.KindAppear {
			left = fm.BurstLen
		}
		tp.frames = append(tp.frames, taped{batch: n, tick: batch.GetTick(), inBurst: in, m: fm})
		return nil
	})
}

// wait waits until cond holds over what the tape holds (under its lock),
// failing the test at ctx's end or if the socket ends first.
func (tp *tape) wait(t *testing.T, ctx context.Context, what string, cond func(*tape) bool) {
	t.Helper()
	for {
		tp.mu.Lock()
		ok, err, ch := cond(tp), tp.err, tp.changed
		tp.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("%s: the socket ended: %v", what, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s: never happened", what)
		}
	}
}

// burst returns the component types of id's first appear burst, in order.
func (tp *tape) burst(id uint64) (types []outbox.ComponentType, ok bool) {
	for i, f := range tp.frames {
		if f.m.Kind != outbox.KindAppear || f.m.Entity != id {
			continue
		}
		for _, c := range tp.frames[i+1 : i+1+f.m.BurstLen] {
			types = append(types, c.m.Component)
		}
		return types, true
	}
	return nil, false
}

// updates returns the component types id was sent outside any burst.
func (tp *tape) updates(id uint64) []outbox.ComponentType {
	var types []outbox.ComponentType
	for _, f := range tp.frames {
		if !f.inBurst && f.m.Kind == outbox.KindComponent && f.m.Entity == id && !slices.Contains(types, f.m.Component) {
			types = append(types, f.m.Component)
		}
	}
	return types
}

// has reports whether id was sent a frame of component type c, in a
// burst or not.
func (tp *tape) has(id uint64, c outbox.ComponentType) bool {
	for _, f := range tp.frames {
		if f.m.Kind == outbox.KindComponent && f.m.Entity == id && f.m.Component == c {
			return true
		}
	}
	return false
}

// docs/protocol.md, "The reference game's components" (appear bursts of
// the player's own entities): the burst of a master and pet the gateway
// node simulates carries every component the owner may see, in
// registration order (Visual, Position, Path, Speed, Health, Exp); the
// burst of a master and pet another node simulates carries only the
// public ones (Visual, Position, Path, Speed), and Health and Exp come as
// separate component frames, forwarded by the simulating node.
func TestOwnBurstsOnTheGatewayNodeAndAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := newWorld(t)
	c := w.cluster(2, game.Config{Seed: 11, NoBots: true}, nil)
	zero := c.Node("zone-0").Runtime
	table := zero.Table()
	here, there := torus.Pos{X: 1000, Y: 2000}, torus.Pos{X: 1000, Y: 6000}
	if table.OwnerOf(here) != "zone-0" || table.OwnerOf(there) != "zone-1" {
		t.Fatalf("%v owned by %s, %v by %s: want zone-0 and zone-1", here, table.OwnerOf(here), there, table.OwnerOf(there))
	}
	w.save(7001, here)
	w.save(7002, there)
	url := w.serve(zero, directory.NodeID(c.Node("zone-0").Number))
	runSteps(t, c.Step)

	public := []outbox.ComponentType{game.WireVisual, game.WirePosition, game.WirePath, game.WireSpeed}
	for _, tc := range []struct {
		name         string
		account      account.ID
		master, pet  []outbox.ComponentType // the bursts
		apart        []outbox.ComponentType // the master's components sent outside its burst (at least)
		apartForPets []outbox.ComponentType
	}{
		{"simulated by the gateway node", 7001,
			append(slices.Clone(public), game.WireHealth, game.WireExp), append(slices.Clone(public), game.WireHealth), nil, nil},
		{"simulated by another node", 7002,
			public, public, []outbox.ComponentType{game.WireHealth, game.WireExp}, []outbox.ComponentType{game.WireHealth}},
	} {
		tp := dialTape(t, ctx, url, w.token(tc.account))
		tp.wait(t, ctx, tc.name+": both bursts, health and experience", func(tp *tape) bool {
			_, okm := tp.burst(tp.master)
			_, okp := tp.burst(tp.pet)
			return tp.master != 0 && okm && okp && tp.has(tp.master, game.WireHealth) && tp.has(tp.master, game.WireExp) && tp.has(tp.pet, game.WireHealth)
		})
		tp.mu.Lock()
		mb, _ := tp.burst(tp.master)
		pb, _ := tp.burst(tp.pet)
		mu, pu := tp.updates(tp.master), tp.updates(tp.pet)
		for _, f := range tp.frames {
			if f.m.Entity == tp.master && (f.m.Kind == outbox.KindAppear || !f.inBurst) {
				t.Logf("%s: batch %d tick %d: %v of the master, component %d", tc.name, f.batch, f.tick, f.m.Kind, f.m.Component)
			}
		}
		tp.mu.Unlock()
		if !slices.Equal(mb, tc.master) || !slices.Equal(pb, tc.pet) {
			t.Errorf("%s: the master's burst is %v, the pet's %v; want %v and %v", tc.name, mb, pb, tc.master, tc.pet)
		}
		for _, ct := range tc.apart {
			if !slices.Contains(mu, ct) {
				t.Errorf("%s: the master's component %d never came outside its burst (updates %v)", tc.name, ct, mu)
			}
		}
		for _, ct := range tc.apartForPets {
			if !slices.Contains(pu, ct) {
				t.Errorf("%s: the pet's component %d never came outside its burst (updates %v)", tc.name, ct, pu)
			}
		}
	}
}
