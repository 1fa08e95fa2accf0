package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/proto/clientpb"
	"github.com/shardwise/shardwise/terrain"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone"
)

// Entity is what a client knows of one entity: the last payload of each
// component type it was sent.
type Entity struct {
	ID         uint64
	Components map[outbox.ComponentType][]byte
	// anchor is where the entity stood at tick anchorAt (anchored: there
	// is one): its last Position, or where it had walked to by the tick
	// before its Path or Speed last changed. View.Where moves it on.
	anchor   torus.Pos
	anchorAt uint64
	anchored bool
}

// Client is one player's client over the real protocol: a WebSocket to a
// gateway, a reader goroutine that applies every Batch to the world the
// client knows (or, a lean client, only what concerns its own entities),
// and the calls a player makes. Its methods are safe for concurrent use.
type Client struct {
	ws   *websocket.Conn
	done chan struct{}
	lean bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on a change once a Wait took it
	// waited says a Wait holds changed: a change with no one waiting need
	// not close and replace it (one allocation a message, for nothing).
	waited  bool
	welcome *clientpb.Welcome
	cred    string // the last resume credential the server handed
	master  uint64
	pet     uint64
	// unnamed counts, per entity, the owner-only frames read before the
	// session's first You: the protocol lets a batch come before it (only
	// queue order holds), so they are judged against that You.
	unnamed  map[uint64]int
	entities map[uint64]*Entity
	stats    ClientStats
	errs     []*clientpb.Error
	terrain  map[[2]int32][]byte
	geo      torus.World   // from Welcome
	view     interest.View // the gateway's view (interest.DefaultView)
	closeErr error
	status   websocket.StatusCode
	reason   string
	seq      uint32
	lastTick uint64
}

// ClientStats count what a client saw.
type ClientStats struct {
	Batches  int
	Appears  int
	Vanishes int
	// Blinks counts entities that vanished out of sight while well inside
	// the client's view (at least a column inside its radius, from the
	// positions the client last had) and appeared again within blinkTicks
	// ticks (by the gateway's tick numbers, not by the batches between: a
	// quiet view gets few): what a player sees as flicker. A handoff must
	// cause none.
	Blinks int
	// EdgeReturns counts the same at the edge of the view: an entity that
	// left the held columns as the viewer stepped away and walked back
	// into them at once. Views are held by whole columns (with a release
	// margin), so this can happen and is not a blink.
	EdgeReturns int
	// BlinkLog is the first blinks seen (at most BlinkLogLen), for
	// diagnosis and for telling whose entities blinked.
	BlinkLog []Blink
	// Leaks counts owner-only component frames (the reference game's
	// experience and purse) about an entity that is neither the client's
	// master nor its pet: what another account must never be sent.
	Leaks int
	// Updates counts component frames applied.
	Updates int
	// OutOfOrder counts batches whose tick did not rise.
	OutOfOrder int
	// Bytes counts the server messages read (protobuf, before WebSocket
	// framing), Messages how many; ByKind is where the bytes went.
	Bytes, Messages int
	ByKind          ByteCounts
}

// ByteCounts is where a client's bytes went: the batches' frames by what
// they carry (each frame whole: its length prefix, kind, entity and
// payload), and the terrain. The rest of ClientStats.Bytes is the
// protobuf around the frames and the messages that are neither.
type ByteCounts struct {
	Bursts   int // appear heads and the component frames of their bursts
	Vanishes int // vanish frames
	// Updates are the other component frames, by component type (a type
	// past the end counts in the last).
	Updates [8]int
	Terrain int // Terrain messages, whole
}

// Add adds o to b.
func (b *ByteCounts) Add(o ByteCounts) {
	b.Bursts += o.Bursts
	b.Vanishes += o.Vanishes
	b.Terrain += o.Terrain
	for i := range b.Updates {
		b.Updates[i] += o.Updates[i]
	}
}

// Blink is one blink: the entity, what it looked like, and the ticks of
// the vanish and of the appear that undid it.
type Blink struct {
	Entity             uint64
	Visual             []byte // its visual payload before it vanished
	Vanished, Appeared uint64
}

// blinkTicks: an entity back in sight this soon after it vanished out of
// sight is a blink (a tenth of a second at 20 Hz).
const blinkTicks = 2

// Dial connects to a gateway's WebSocket endpoint (ws://host:port/path)
// as a full client: it keeps the world it is shown.
func Dial(ctx context.Context, url string) (*Client, error) {
	return DialWith(ctx, url, DialOptions{})
}

// DialOptions choose what a client keeps.
type DialOptions struct {
	// Lean makes a client that keeps only what concerns its own master
	// and pet, as a bot that only walks needs: it still reads every
	// message, checks every frame of every batch (outbox.DecodeBatch:
	// lengths, kinds, whole bursts) and counts them (ClientStats), but
	// stores the components of no other entity and decodes no terrain, so
	// View.Entity knows only its own two (and, before You names them,
	// whatever it was shown), View.Terrain nothing, and no blinks are
	// counted. An entity a later You names is known from its next appear
	// or update.
	Lean bool
}

// DialWith connects to a gateway's WebSocket endpoint as opts say.
func DialWith(ctx context.Context, url string, opts DialOptions) (*Client, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{gateway.Subprotocol}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20)
	c := &Client{
		ws: ws, done: make(chan struct{}), changed: make(chan struct{}), lean: opts.Lean,
		entities: make(map[uint64]*Entity), terrain: make(map[[2]int32][]byte), view: interest.DefaultView(),
	}
	go c.read()
	return c, nil
}

// Login sends the token and waits for Welcome.
func (c *Client) Login(ctx context.Context, token string) (*clientpb.Welcome, error) {
	if err := c.send(ctx, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Login{Login: &clientpb.Login{Token: token}}}); err != nil {
		return nil, err
	}
	var w *clientpb.Welcome
	err := c.Wait(ctx, func(*View) bool {
		w = c.welcome
		return w != nil
	})
	return w, err
}

// ErrResumeRefused says a Resume was refused (4008
// GATEWAY.RESUME_REFUSED): the client must log in with a new token.
var ErrResumeRefused = errors.New("sim: resume refused")

// Resume sends a resume credential as the connection's first message (in
// place of Login) and waits for Welcome. A refusal returns an error
// matching ErrResumeRefused.
func (c *Client) Resume(ctx context.Context, credential string) (*clientpb.Welcome, error) {
	if err := c.send(ctx, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Resume{Resume: &clientpb.Resume{Credential: credential}}}); err != nil {
		return nil, err
	}
	var w *clientpb.Welcome
	err := c.Wait(ctx, func(*View) bool {
		w = c.welcome
		return w != nil
	})
	if err != nil {
		if code, _, _ := c.Closed(); code == gateway.StatusResumeRefused {
			return nil, fmt.Errorf("%w: %v", ErrResumeRefused, err)
		}
	}
	return w, err
}

// Credential is the resume credential the server last handed this
// connection ("" before any): what to Resume with on another connection
// should this one drop without a Logout.
func (c *Client) Credential() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cred
}

func (c *Client) send(ctx context.Context, m *clientpb.ClientMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageBinary, b)
}

// Input sends one input and returns its seq.
func (c *Client) Input(ctx context.Context, in *clientpb.Input) (uint32, error) {
	c.mu.Lock()
	c.seq++
	in.Seq = c.seq
	c.mu.Unlock()
	return in.Seq, c.send(ctx, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Input{Input: in}})
}

// Move asks entity to walk to (x, y), with the reference game's input kind.
func (c *Client) Move(ctx context.Context, entity uint64, x, y float64) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: entity, Kind: game.InputMove, Point: &clientpb.Point{X: x, Y: y}})
}

// Attack asks entity to attack target.
func (c *Client) Attack(ctx context.Context, entity, target uint64) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: entity, Kind: game.InputAttack, Target: target})
}

// Stop asks entity to stand still.
func (c *Client) Stop(ctx context.Context, entity uint64) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: entity, Kind: game.InputStop})
}

// Buy asks master to buy count of good from the keeper of a den within
// reach (game.InputBuy).
func (c *Client) Buy(ctx context.Context, master uint64, good game.Good, count int) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: master, Kind: game.InputBuy, Target: uint64(good) + 256*uint64(count)})
}

// Offer offers master's partner (another player's master) a trade, or
// joins the one the partner offered (game.InputTradeOffer): master gives
// o's coins and its count of its good.
func (c *Client) Offer(ctx context.Context, master, partner uint64, o game.Offer) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: master, Kind: game.InputTradeOffer, Target: partner,
		Point: &clientpb.Point{X: float64(o.Coins), Y: float64(o.Good) + 256*float64(o.Count)}})
}

// Accept accepts the open trade with partner as both offers stand
// (game.InputTradeAccept).
func (c *Client) Accept(ctx context.Context, master, partner uint64) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: master, Kind: game.InputTradeAccept, Target: partner})
}

// CancelTrade cancels the open trade with partner
// (game.InputTradeCancel).
func (c *Client) CancelTrade(ctx context.Context, master, partner uint64) (uint32, error) {
	return c.Input(ctx, &clientpb.Input{Entity: master, Kind: game.InputTradeCancel, Target: partner})
}

// Ping sends a ping.
func (c *Client) Ping(ctx context.Context, nonce uint64) error {
	return c.send(ctx, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Ping{Ping: &clientpb.Ping{Nonce: nonce}}})
}

// Logout ends the session; the server closes the socket.
func (c *Client) Logout(ctx context.Context) error {
	return c.send(ctx, &clientpb.ClientMessage{Body: &clientpb.ClientMessage_Logout{Logout: &clientpb.Logout{}}})
}

// Close cuts the socket and waits for the reader. Idempotent.
func (c *Client) Close() error {
	_ = c.ws.CloseNow()
	<-c.done
	return nil
}

// Done is closed when the socket has closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// Closed returns the close status and reason once the socket closed.
func (c *Client) Closed() (websocket.StatusCode, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.reason, c.closeErr
}

// View is a consistent look at what the client knows, valid inside the
// function it is passed to.
type View struct{ c *Client }

// You returns the player's master and pet as the server named them.
func (v *View) You() (master, pet uint64) { return v.c.master, v.c.pet }

// Entity returns what the client knows of id.
func (v *View) Entity(id uint64) (*Entity, bool) {
	e, ok := v.c.entities[id]
	return e, ok
}

// Entities is the number of entities the client knows.
func (v *View) Entities() int { return len(v.c.entities) }

// Each calls fn for every entity the client knows.
func (v *View) Each(fn func(*Entity)) {
	for _, e := range v.c.entities {
		fn(e)
	}
}

// Where is where id stands at the last batch's tick as far as the client
// can tell: its last Position moved along its Path at its Speed, a tick's
// step at a time, as docs/protocol.md tells clients to animate (the server
// does not resend the position of a straight walk to clients).
func (v *View) Where(id uint64) (torus.Pos, bool) {
	e, ok := v.c.entities[id]
	if !ok || !e.anchored {
		return torus.Pos{}, false
	}
	return v.c.reckon(e, v.c.lastTick), true
}

// Position decodes id's last position as the server sent it, if the
// client knows it (Where is where it has walked since).
func (v *View) Position(id uint64) (torus.Pos, bool) {
	e, ok := v.c.entities[id]
	if !ok {
		return torus.Pos{}, false
	}
	b, ok := e.Components[game.WirePosition]
	if !ok {
		return torus.Pos{}, false
	}
	p, err := zone.DecodePos(b)
	return p, err == nil
}

// Purse decodes the player's purse (game.WirePurse, sent to its owner
// only, on its master): what it can spend, as the economy last said. A
// world without an economy sends none.
func (v *View) Purse() (game.Purse, bool) {
	e, ok := v.c.entities[v.c.master]
	if !ok || v.c.master == 0 {
		return game.Purse{}, false
	}
	b, ok := e.Components[game.WirePurse]
	if !ok {
		return game.Purse{}, false
	}
	p, err := game.DecodePurse(b)
	return p, err == nil
}

// Credential is the resume credential the client was last handed.
func (v *View) Credential() string { return v.c.cred }

// Stats returns the client's counters.
func (v *View) Stats() ClientStats { return v.c.stats }

// Errors returns the Error messages received.
func (v *View) Errors() []*clientpb.Error { return v.c.errs }

// Terrain returns the chunk column's last Terrain bytes.
func (v *View) Terrain(x, y int32) ([]byte, bool) {
	b, ok := v.c.terrain[[2]int32{x, y}]
	return b, ok
}

// Look calls fn with a consistent view.
func (c *Client) Look(fn func(*View)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(&View{c})
}

// Wait calls cond after every change until it holds, ctx ends (its
// error) or the socket closes (an error naming the close).
func (c *Client) Wait(ctx context.Context, cond func(*View) bool) error {
	for {
		c.mu.Lock()
		ok := cond(&View{c})
		ch := c.changed
		c.waited = !ok || c.waited
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-c.done:
			c.mu.Lock()
			ok := cond(&View{c})
			status, reason := c.status, c.reason
			c.mu.Unlock()
			if ok {
				return nil
			}
			return fmt.Errorf("sim: socket closed (%d %s) before the condition held", status, reason)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// maxReadBuffer: a message buffer grown past this (a login's burst) is
// let go rather than kept for the next message.
const maxReadBuffer = 256 << 10

func (c *Client) read() {
	defer close(c.done)
	// Vanished out of sight at tick: an appear within two batches is a blink.
	vanished := make(map[uint64]vanish) // what vanished out of sight lately
	var buf bytes.Buffer                // the message being read, reused
	for {
		b, err := c.readMessage(&buf)
		if err != nil {
			c.mu.Lock()
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				c.status, c.reason = ce.Code, ce.Reason
			} else {
				c.status, c.closeErr = -1, err
			}
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		c.stats.Bytes += len(b)
		c.stats.Messages++
		if err := c.apply(b, vanished); err != nil {
			c.closeErr = err
			c.mu.Unlock()
			_ = c.ws.CloseNow()
			continue
		}
		if c.waited {
			close(c.changed)
			c.changed, c.waited = make(chan struct{}), false
		}
		c.mu.Unlock()
	}
}

// readMessage reads the next message into buf and returns its bytes,
// valid until the next call: everything kept of them is copied (proto
// copies bytes fields; applyBatch copies payloads).
func (c *Client) readMessage(buf *bytes.Buffer) ([]byte, error) {
	_, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	if buf.Cap() > maxReadBuffer {
		*buf = bytes.Buffer{}
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Field numbers of proto/client.proto that a lean client reads by hand.
const (
	fieldServerBatch   = 3
	fieldServerTerrain = 4
	fieldBatchTick     = 1
	fieldBatchFrames   = 2
)

// apply applies one server message, under c.mu.
func (c *Client) apply(b []byte, vanished map[uint64]vanish) error {
	if c.lean {
		// A batch or terrain is one length-delimited field: read its
		// header by hand, with no message allocated.
		if num, typ, n := protowire.ConsumeTag(b); n > 0 && typ == protowire.BytesType && (num == fieldServerBatch || num == fieldServerTerrain) {
			body, m := protowire.ConsumeBytes(b[n:])
			if m >= 0 && n+m == len(b) {
				if num == fieldServerTerrain {
					c.stats.ByKind.Terrain += len(b)
					return nil // a bot needs no ground
				}
				if tick, frames, ok := parseBatch(body); ok {
					c.applyBatch(tick, frames, vanished)
					return nil
				}
			}
		}
	}
	var m clientpb.ServerMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("sim: undecodable server message: %w", err)
	}
	switch body := m.Body.(type) {
	case *clientpb.ServerMessage_Welcome:
		c.welcome = body.Welcome
		if w := body.Welcome.World; w != nil {
			c.geo, _ = torus.New(torus.Config{Width: int(w.SizeX), Height: int(w.SizeY), ChunkEdge: int(w.ChunkEdge)})
		}
	case *clientpb.ServerMessage_You:
		renamed := (c.master != 0 || c.pet != 0) && (body.You.Master != c.master || body.You.Pet != c.pet)
		c.master, c.pet = body.You.Master, body.You.Pet
		for id, n := range c.unnamed {
			if id != c.master && id != c.pet {
				c.stats.Leaks += n
			}
		}
		c.unnamed = nil
		if renamed {
			// The player came back under new ids (its node died with no
			// checkpoint of it): the server starts the view afresh, every
			// entity in it appears again, and sends no vanish for the old
			// one (docs/protocol.md). The ground stays: it is not resent.
			clear(c.entities)
		}
		if c.lean {
			// From now on a lean client keeps only these two.
			for id := range c.entities {
				if id != c.master && id != c.pet {
					delete(c.entities, id)
				}
			}
		}
	case *clientpb.ServerMessage_Error:
		c.errs = append(c.errs, body.Error)
	case *clientpb.ServerMessage_ResumeCredential:
		c.cred = body.ResumeCredential.Credential
	case *clientpb.ServerMessage_Terrain:
		c.stats.ByKind.Terrain += len(b)
		if ch, err := terrain.DecodeChunk(body.Terrain.Chunk); err == nil {
			c.terrain[[2]int32{ch.X, ch.Y}] = body.Terrain.Chunk
		} else {
			c.closeErr = fmt.Errorf("sim: malformed terrain: %w", err)
		}
	case *clientpb.ServerMessage_Batch:
		c.applyBatch(body.Batch.Tick, body.Batch.Frames, vanished)
	}
	return nil
}

// parseBatch reads a Batch message's fields (proto3: each at most once
// from this server, but the last wins, as in protobuf; unknown ones are
// skipped).
func parseBatch(b []byte) (tick uint64, frames []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil, false
		}
		b = b[n:]
		switch {
		case num == fieldBatchTick && typ == protowire.VarintType:
			tick, n = protowire.ConsumeVarint(b)
		case num == fieldBatchFrames && typ == protowire.BytesType:
			frames, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return 0, nil, false
		}
		b = b[n:]
	}
	return tick, frames, true
}

// vanish is an entity gone out of sight: when, whether at the view's
// edge, and its look.
type vanish struct {
	tick   uint64
	edge   bool
	visual []byte
}

// atEdge says whether id stood, as far as the client knows, within a
// column of its view's outer edge (or where the client cannot tell).
func (c *Client) atEdge(id uint64) bool {
	if c.geo == (torus.World{}) {
		return true
	}
	v := View{c}
	p, ok1 := v.Where(id)
	m, ok2 := v.Where(c.master)
	if !ok1 || !ok2 {
		return true
	}
	return c.geo.ChunkDistance(c.geo.ChunkOf(p), c.geo.ChunkOf(m)) >= c.view.Radius
}

func (c *Client) applyBatch(tick uint64, frames []byte, vanished map[uint64]vanish) {
	c.stats.Batches++
	if tick <= c.lastTick {
		c.stats.OutOfOrder++
	}
	c.lastTick = tick
	full := !c.lean
	if full {
		for id, v := range vanished {
			if tick > v.tick+blinkTicks {
				delete(vanished, id)
			}
		}
	}
	// keep says whether the client stores what it is told of id: a full
	// client everything, a lean one its own two (everything until You).
	keep := func(id uint64) bool {
		return full || (c.master == 0 && c.pet == 0) || id == c.master || id == c.pet
	}
	var burst *Entity
	left := 0
	inBurst := 0 // component frames still owed to the last appear head, for ByKind
	err := outbox.DecodeBatch(frames, func(m outbox.Message) error {
		size := frameSize(m)
		switch m.Kind {
		case outbox.KindAppear:
			c.stats.Appears++
			c.stats.ByKind.Bursts += size
			inBurst = m.BurstLen
			if full {
				if v, ok := vanished[m.Entity]; ok && tick <= v.tick+blinkTicks {
					if v.edge {
						c.stats.EdgeReturns++
					} else {
						c.stats.Blinks++
						if len(c.stats.BlinkLog) < BlinkLogLen {
							c.stats.BlinkLog = append(c.stats.BlinkLog, Blink{Entity: m.Entity, Visual: v.visual, Vanished: v.tick, Appeared: tick})
						}
					}
				}
				delete(vanished, m.Entity)
			}
			if !keep(m.Entity) {
				burst, left = nil, 0
				return nil
			}
			// An entity known only by what its owner is sent out of sight
			// (owner-only and party components, routed by account) keeps
			// those: the burst carries the visible ones.
			e := c.entities[m.Entity]
			if e == nil {
				e = &Entity{ID: m.Entity, Components: make(map[outbox.ComponentType][]byte)}
				c.entities[m.Entity] = e
			}
			burst, left = e, m.BurstLen
		case outbox.KindComponent:
			c.stats.Updates++
			if (m.Component == game.WireExp || m.Component == game.WirePurse) && m.Entity != c.master && m.Entity != c.pet {
				if c.master == 0 && c.pet == 0 {
					// No You yet: judged when it comes.
					if c.unnamed == nil {
						c.unnamed = make(map[uint64]int)
					}
					c.unnamed[m.Entity]++
				} else {
					c.stats.Leaks++
				}
			}
			if inBurst > 0 {
				inBurst--
				c.stats.ByKind.Bursts += size
			} else {
				c.stats.ByKind.Updates[min(int(m.Component), len(c.stats.ByKind.Updates)-1)] += size
			}
			if !keep(m.Entity) {
				return nil
			}
			e := burst
			if left == 0 || e == nil || e.ID != m.Entity {
				e = c.entities[m.Entity]
				if e == nil { // an owner-only update for an entity not in sight
					e = &Entity{ID: m.Entity, Components: make(map[outbox.ComponentType][]byte)}
					c.entities[m.Entity] = e
				}
			} else {
				left--
			}
			c.anchor(e, m, tick)
			e.Components[m.Component] = append([]byte(nil), m.Payload...)
		case outbox.KindVanish:
			c.stats.Vanishes++
			c.stats.ByKind.Vanishes += size
			if full && m.Reason == interest.OutOfSight {
				v := vanish{tick: tick, edge: c.atEdge(m.Entity)}
				if e := c.entities[m.Entity]; e != nil {
					v.visual = e.Components[game.WireVisual]
				}
				vanished[m.Entity] = v
			}
			delete(c.entities, m.Entity)
		}
		return nil
	})
	if err != nil {
		c.closeErr = fmt.Errorf("sim: malformed batch at tick %d: %w", tick, err)
	}
}

// anchor keeps e's dead-reckoning anchor as update m of tick arrives,
// before its payload replaces the old one. A Position is where the entity
// stood at the end of tick. A new Path or Speed took effect in tick (the
// reference game moves entities after it decides where they go), so the
// entity walked the old one until the tick before: anchor there.
func (c *Client) anchor(e *Entity, m outbox.Message, tick uint64) {
	switch m.Component {
	case game.WirePosition:
		if p, err := zone.DecodePos(m.Payload); err == nil {
			e.anchor, e.anchorAt, e.anchored = p, tick, true
		}
	case game.WirePath, game.WireSpeed:
		if e.anchored && e.anchorAt+1 < tick {
			e.anchor, e.anchorAt = c.reckon(e, tick-1), tick-1
		}
	}
}

// reckon is where e stands at tick: from its anchor, the distance its
// Speed covers in the ticks since, along its Path the shortest way on the
// torus, stopping at the target (the server's steps add up to the same).
func (c *Client) reckon(e *Entity, tick uint64) torus.Pos {
	p := e.anchor
	if tick <= e.anchorAt || c.geo == (torus.World{}) {
		return p
	}
	path, err := game.DecodePath(e.Components[game.WirePath])
	if err != nil || !path.Active {
		return p
	}
	speed, err := game.DecodeSpeed(e.Components[game.WireSpeed])
	if err != nil {
		return p
	}
	hz := 20.0
	if c.welcome != nil && c.welcome.TickHz > 0 {
		hz = float64(c.welcome.TickHz)
	}
	travel := speed.MPS / hz * float64(tick-e.anchorAt)
	d := c.geo.Delta(p, path.Target)
	dist := math.Hypot(d.X, d.Y)
	if dist <= travel {
		return path.Target
	}
	f := travel / dist
	return c.geo.Translate(p, torus.Pos{X: d.X * f, Y: d.Y * f})
}

// frameSize is the bytes of m's frame on the wire (outbox's format).
func frameSize(m outbox.Message) int {
	body := 1 + 8 // kind, entity
	switch m.Kind {
	case outbox.KindComponent:
		body += protowire.SizeVarint(uint64(m.Component)) + len(m.Payload)
	case outbox.KindAppear:
		body += protowire.SizeVarint(uint64(m.BurstLen))
	case outbox.KindVanish:
		body++
	}
	return protowire.SizeVarint(uint64(body)) + body
}
