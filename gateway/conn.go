package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/proto/clientpb"
)

// outItem is one server message waiting for the socket: a whole encoded
// message (raw), or a tick's batch, whose frames the writer copies behind
// a header into one buffer at write time, so that the batch leaves as one
// WebSocket frame and one write to the socket.
type outItem struct {
	raw    []byte
	tick   uint64
	frames [][]byte
	size   int
}

// conn is one client socket. The handler goroutine (ServeHTTP) reads and
// owns the session's lifecycle; one writer goroutine, started and joined
// by the handler, writes the queue. Everything else only queues.
type conn struct {
	g    *Gateway
	ws   *websocket.Conn
	done chan struct{} // closed when the socket is closed

	// lastRead is when the last message arrived (clock nanoseconds);
	// loginBy is when the login must be done by (0 once it is).
	lastRead atomic.Int64
	loginBy  atomic.Int64
	lastTick atomic.Uint64

	limiter     *rate.Limiter
	lastLimited time.Time // reader goroutine only

	mu      sync.Mutex
	queue   []outItem
	head    int
	queued  int // bytes in queue[head:]
	closing bool
	status  websocket.StatusCode
	reason  string
	drop    bool // a slow reader: the backlog is discarded, the socket cut
	wake    chan struct{}
	// spare is a frames slice the writer is done with, for the next
	// batch: in steady play one batch is in flight at a time, so two
	// slices take turns and a delivery allocates nothing.
	spare [][]byte

	// writing numbers the write in progress (0: none), for the
	// housekeeper to cut one that stalls past Limits.WriteTimeout;
	// writes counts them (writer only).
	writing atomic.Uint64
	writes  uint64
	// The write in progress when the housekeeper first saw it, and when
	// (housekeeper only).
	stalled      uint64
	stalledSince time.Time

	sess      *Session  // set once logged in; read by the gateway under g.mu
	nextRenew time.Time // housekeeper only
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) enqueueBatch(tick uint64, frames [][]byte) {
	if tick > c.lastTick.Load() {
		c.lastTick.Store(tick) // Deliver runs on the world's one goroutine: no race between load and store
	}
	size := 0
	for _, f := range frames {
		size += len(f)
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	fs := append(c.spare[:0], frames...) // frames is reused once Deliver returns: keep a copy of the slice (not of the bytes)
	c.spare = nil
	c.queue = append(c.queue, outItem{tick: tick, frames: fs, size: size})
	c.queued += size
	if c.queued > c.g.cfg.Limits.SendBudget && len(c.queue)-c.head > 1 {
		c.closeLocked(StatusSlowReader, CodeSlowReader, true)
	}
	c.mu.Unlock()
	c.signal()
}

func (c *conn) enqueueRaw(b []byte) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, outItem{raw: b, size: len(b)})
	c.queued += len(b)
	if c.queued > c.g.cfg.Limits.SendBudget && len(c.queue)-c.head > 1 {
		c.closeLocked(StatusSlowReader, CodeSlowReader, true)
	}
	c.mu.Unlock()
	c.signal()
}

// closeWith closes the socket once what is queued is written (after an
// Error naming code, when message is not empty). The first close wins.
func (c *conn) closeWith(status websocket.StatusCode, code, message string) {
	c.mu.Lock()
	if !c.closing {
		if message != "" {
			b := appendError(nil, code, message, 0)
			c.queue = append(c.queue, outItem{raw: b, size: len(b)})
			c.queued += len(b)
		}
		c.closeLocked(status, code, false)
	}
	c.mu.Unlock()
	c.signal()
}

func (c *conn) closeLocked(status websocket.StatusCode, code string, drop bool) {
	c.closing, c.status, c.reason, c.drop = true, status, code, drop
	if drop {
		clear(c.queue)
		c.queue, c.head, c.queued = c.queue[:0], 0, 0
	}
}

// maxSpareFrames caps the frames slice a connection keeps for its next
// batch: a login's burst may hold thousands of frames, steady ticks tens.
const maxSpareFrames = 1024

// next accounts for done, the item the writer has just written (its
// frames slice cleared, to be reused), and pops the next item to write, or
// reports that the queue is empty and whether the socket is to be closed.
func (c *conn) next(done outItem) (it outItem, ok, closing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued -= done.size
	if done.frames != nil && c.spare == nil && cap(done.frames) <= maxSpareFrames {
		c.spare = done.frames[:0]
	}
	if c.head < len(c.queue) {
		it = c.queue[c.head]
		c.queue[c.head] = outItem{}
		c.head++
		if c.head == len(c.queue) {
			c.queue, c.head = c.queue[:0], 0
		}
		return it, true, c.closing
	}
	return outItem{}, false, c.closing
}

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// writeLoop is the writer goroutine: it writes the queue in order and
// closes the socket when asked, then closes done.
func (c *conn) writeLoop() {
	defer close(c.done)
	m := c.g.cfg.Metrics
	var done outItem
	for {
		it, ok, closing := c.next(done)
		done = outItem{}
		if !ok {
			if closing {
				c.finish()
				return
			}
			<-c.wake
			continue
		}
		if err := c.write(it); err != nil {
			c.mu.Lock()
			if !c.closing {
				c.closeLocked(StatusSlowReader, CodeSlowReader, true)
				c.reason = "CLIENT" // the socket broke: the client went away (a stalled write was closed as a slow reader already)
			}
			c.drop = true
			c.mu.Unlock()
			c.finish()
			return
		}
		if it.raw == nil {
			m.batchesOut.Inc()
			clear(it.frames) // let go of the ticks' arenas before the slice is reused
		}
		m.bytesOut.Add(float64(it.size))
		done = it
	}
}

// maxBatchHeader bounds batchHeader's bytes: three tags and three varints.
const maxBatchHeader = 3 + 3*binary.MaxVarintLen64

// maxPooledBuffer: a send buffer larger than this (a login's burst) is
// left to the collector rather than kept in the gateway's pool.
const maxPooledBuffer = 64 << 10

// write writes one item as one WebSocket message: a batch is its header
// and frames copied into a pooled buffer, so the library writes one frame
// and flushes once (streaming the frames through a message writer made a
// continuation frame, with its locks and timeout bookkeeping, per frame).
// The write has no context deadline (the library would arm a timer per
// frame for it): the housekeeper cuts a write that stalls past
// Limits.WriteTimeout (cutIfStalled).
func (c *conn) write(it outItem) error {
	b := it.raw
	var buf *[]byte
	if b == nil {
		buf = c.g.buffers.Get().(*[]byte)
		b = slices.Grow((*buf)[:0], maxBatchHeader+it.size)
		b = batchHeader(b, it.tick, it.size)
		for _, f := range it.frames {
			b = append(b, f...)
		}
	}
	c.writes++
	c.writing.Store(c.writes)
	err := c.ws.Write(context.Background(), websocket.MessageBinary, b)
	c.writing.Store(0)
	if buf != nil && cap(b) <= maxPooledBuffer {
		*buf = b[:0]
		c.g.buffers.Put(buf)
	}
	return err
}

// cutIfStalled is the housekeeper's check of the write in progress: one
// it has seen in progress for timeout on the clock, at two of its passes,
// is stalled (the client's window stayed shut: a slow reader), and the
// socket is cut; the writer's write then fails and ends the connection.
// Two sightings, not a start time, so that a clock moved far at once
// (a fake one in a test, a host that slept) cuts no write that was only
// caught in progress. So a stalled write is cut between timeout and
// timeout plus two passes.
func (c *conn) cutIfStalled(now time.Time, timeout time.Duration) bool {
	w := c.writing.Load()
	switch {
	case w == 0:
		c.stalled = 0
		return false
	case w != c.stalled:
		c.stalled, c.stalledSince = w, now
		return false
	case now.Sub(c.stalledSince) < timeout:
		return false
	}
	c.mu.Lock()
	if !c.closing {
		c.closeLocked(StatusSlowReader, CodeSlowReader, true)
	}
	c.drop = true
	c.mu.Unlock()
	_ = c.ws.CloseNow()
	return true
}

// finish closes the socket: with the close handshake and the reason, or
// cut at once for a slow reader (whose window is shut: a close frame would
// wait for it too).
func (c *conn) finish() {
	c.mu.Lock()
	status, reason, drop := c.status, c.reason, c.drop
	c.mu.Unlock()
	c.g.cfg.Metrics.closes.WithLabelValues(reason).Inc()
	if drop {
		_ = c.ws.CloseNow()
		return
	}
	_ = c.ws.Close(status, reason)
}

// serve runs the connection: login, then messages until the socket
// closes. It returns once the writer is done. ctx bounds the calls to the
// directory and the verifier (it ends at Close); reads end when the socket
// does.
func (c *conn) serve(ctx context.Context) {
	g := c.g
	go c.writeLoop()
	defer func() {
		<-c.done
	}()
	s, err := c.login(ctx)
	if err != nil {
		g.cfg.Logger.Debug("gateway: login failed", "err", err)
		return
	}
	defer g.leave(c, s)
	for {
		_, b, err := c.ws.Read(context.Background()) // ends when the socket closes: a cancelled read would cut it without a close frame
		if err != nil {
			c.closeWith(websocket.StatusNormalClosure, "CLIENT", "")
			return
		}
		c.lastRead.Store(g.cfg.Clock.Now().UnixNano())
		if !c.allow() {
			continue
		}
		m, err := decodeClient(b)
		if err != nil {
			c.protocolError(CodeMalformed, err.Error())
			return
		}
		switch {
		case m.login != nil || m.resume != nil:
			c.protocolError(CodeOutOfOrder, "gateway: login or resume after login")
			return
		case m.ping != nil:
			g.cfg.Metrics.messagesIn.WithLabelValues("ping").Inc()
			c.enqueueRaw(appendPong(nil, m.ping.Nonce, c.lastTick.Load()))
		case m.logout:
			g.cfg.Metrics.messagesIn.WithLabelValues("logout").Inc()
			c.closeWith(websocket.StatusNormalClosure, "LOGOUT", "")
			g.revokeCredential(s) // a logout ends the session for good: no resume
			return
		case m.input != nil:
			c.input(s, *m.input)
		}
	}
}

func (c *conn) protocolError(code, message string) {
	c.g.cfg.Metrics.refused.WithLabelValues(code).Inc()
	c.closeWith(StatusProtocol, code, message)
}

// allow passes a message through the connection's rate limit; a dropped
// one is counted, and the client told at most once a second.
func (c *conn) allow() bool {
	now := c.g.cfg.Clock.Now()
	if c.limiter.AllowN(now, 1) {
		return true
	}
	c.g.cfg.Metrics.refused.WithLabelValues(CodeRateLimited).Inc()
	if now.Sub(c.lastLimited) >= time.Second {
		c.lastLimited = now
		c.enqueueRaw(appendError(nil, CodeRateLimited, "gateway: messages over the rate limit are dropped", 0))
	}
	return false
}

func (c *conn) input(s *Session, in Input) {
	m := c.g.cfg.Metrics
	master, pet := s.You()
	var err error
	switch {
	case master == 0 && pet == 0:
		err = fmt.Errorf("%w: input %d before the player's entities exist", ErrNotReady, in.Seq)
	case in.Entity == 0 || (in.Entity != master && in.Entity != pet):
		err = fmt.Errorf("%w: entity %d is neither the master %d nor the pet %d", ErrNotYours, in.Entity, master, pet)
	default:
		err = c.g.cfg.World.Input(s, in)
	}
	if err == nil {
		m.messagesIn.WithLabelValues("input").Inc()
		return
	}
	code := errcode.Of(err)
	if code == "" {
		code = CodeBadInput
	}
	m.refused.WithLabelValues(code).Inc()
	c.enqueueRaw(appendError(nil, code, err.Error(), in.Seq))
}

// login reads the first message, checks the token (or the resume
// credential), records the session in the directory, hands the client a
// fresh resume credential and starts the session in the world.
func (c *conn) login(ctx context.Context) (*Session, error) {
	g := c.g
	m := g.cfg.Metrics
	_, b, err := c.ws.Read(context.Background())
	if err != nil {
		c.closeWith(websocket.StatusNormalClosure, "CLIENT", "")
		return nil, err
	}
	c.lastRead.Store(g.cfg.Clock.Now().UnixNano())
	c.limiter.AllowN(g.cfg.Clock.Now(), 1)
	msg, err := decodeClient(b)
	if err == nil && msg.login == nil && msg.resume == nil {
		err = errcode.New(CodeLoginRequired, "gateway: the first message must be a login or a resume")
	}
	if err != nil {
		m.logins.WithLabelValues(errcode.Of(err)).Inc()
		c.protocolError(errcode.Of(err), err.Error())
		return nil, err
	}
	var (
		acct            account.ID
		sess, displaced directory.Session
		result          = "ok"
	)
	if msg.resume != nil {
		cred := *msg.resume
		acct, result = cred.Account, "resumed"
		// One atomic step in the directory checks the credential (its
		// session still the account's newest, the secret's hash, the
		// window), spends it and issues the next epoch: of two uses
		// anywhere in the cluster, one wins.
		sess, displaced, err = g.cfg.Directory.Resume(ctx, cred.Account, cred.Epoch, cred.Hash(), g.cfg.Node)
		if errors.Is(err, directory.ErrResumeRefused) {
			m.logins.WithLabelValues(CodeResumeRefused).Inc()
			c.closeWith(StatusResumeRefused, CodeResumeRefused, "gateway: "+err.Error()+"; log in with a new token")
			return nil, err
		}
	} else {
		var claims logintoken.Claims
		claims, err = g.cfg.Verifier.Verify(ctx, msg.login.Token)
		if err != nil {
			code := errcode.Of(err)
			if !strings.HasPrefix(code, "TOKEN.") {
				// Not the token: the single-use record could not be reached.
				m.logins.WithLabelValues(CodeUnavailable).Inc()
				c.closeWith(StatusUnavailable, CodeUnavailable, "gateway: login token check: "+err.Error())
				return nil, err
			}
			m.logins.WithLabelValues(code).Inc()
			c.closeWithError(StatusLoginFailed, CodeLoginFailed, code, err.Error())
			return nil, err
		}
		if c.isClosing() {
			return nil, ErrClosed // the login timed out (or the node is stopping) meanwhile
		}
		acct = claims.Account
		sess, displaced, err = g.cfg.Directory.Connect(ctx, claims.Account, g.cfg.Node)
	}
	if err != nil {
		m.logins.WithLabelValues(CodeUnavailable).Inc()
		c.closeWith(StatusUnavailable, CodeUnavailable, "gateway: session directory: "+err.Error())
		return nil, err
	}
	if c.isClosing() {
		// Timed out while the directory answered: give the session back
		// rather than start what no Welcome announced.
		g.release(&Session{account: acct, epoch: sess.Epoch})
		return nil, ErrClosed
	}
	s := &Session{c: c, account: acct, epoch: sess.Epoch, prev: displaced}
	if !g.register(c, s) {
		m.logins.WithLabelValues(CodeDisplaced).Inc()
		c.closeWith(StatusDisplaced, CodeDisplaced, "gateway: a newer login of this account displaced this one")
		g.release(s)
		return nil, ErrClosed
	}
	if displaced.Epoch != 0 {
		g.displaced(ctx, displaced)
	}
	m.logins.WithLabelValues(result).Inc()
	c.loginBy.Store(0)
	geo := g.cfg.Geometry
	c.enqueueRaw(appendWelcome(nil, &clientpb.Welcome{
		Account: uint64(acct), SessionEpoch: uint64(sess.Epoch), Gateway: g.cfg.Name,
		World:  &clientpb.World{SizeX: geo.Width(), SizeY: geo.Height(), ChunkEdge: geo.ChunkEdge()},
		TickHz: uint32(g.cfg.TickHz),
	}))
	g.issueCredential(ctx, c, s)
	if err := g.cfg.World.Join(s); err != nil {
		c.closeWith(StatusUnavailable, CodeUnavailable, "gateway: world: "+err.Error())
		g.leave(c, s)
		return nil, err
	}
	return s, nil
}

// closeWithError closes after an Error whose code (errCode) differs from
// the close reason.
func (c *conn) closeWithError(status websocket.StatusCode, reason, errCode, message string) {
	c.enqueueRaw(appendError(nil, errCode, message, 0))
	c.closeWith(status, reason, "")
}
