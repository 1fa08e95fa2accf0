package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
)

// Gateway serves client sockets on one node: an http.Handler for the
// WebSocket endpoint. Every connection is served by its handler goroutine
// and one writer goroutine; one housekeeping goroutine checks idle and
// login deadlines and renews the sessions' directory leases. Close stops
// them all.
type Gateway struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // handlers and the housekeeper

	mu       sync.Mutex
	closed   bool
	conns    map[*conn]struct{}
	sessions map[account.ID]*conn

	// buffers are the writers' send buffers (*[]byte): a batch is
	// assembled in one only while it is written, so the gateway holds
	// about as many as there are writes in flight, not one per socket.
	buffers sync.Pool
}

// New starts a gateway.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{
		cfg: cfg, ctx: ctx, cancel: cancel,
		conns:    make(map[*conn]struct{}),
		sessions: make(map[account.ID]*conn),
	}
	g.buffers.New = func() any { b := make([]byte, 0, 4096); return &b }
	// The ticker is made here, not in the goroutine, so that it counts
	// from New on an injected clock too. A quarter of the shortest limit
	// it checks: a deadline is acted on at most a quarter late.
	period := min(cfg.Limits.IdleTimeout, cfg.Limits.LoginTimeout, cfg.Limits.WriteTimeout, cfg.RenewEvery) / 4
	t := cfg.Clock.NewTicker(max(period, 5*time.Millisecond))
	g.wg.Add(1)
	go g.housekeep(t)
	return g, nil
}

// Metrics returns the gateway's collectors.
func (g *Gateway) Metrics() *Metrics { return g.cfg.Metrics }

// Sessions is the number of logged-in connections.
func (g *Gateway) Sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// Accepting reports whether the gateway takes new sockets: until Close.
func (g *Gateway) Accepting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.closed
}

// Connections is the number of open sockets, logged in or not.
func (g *Gateway) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// ServeHTTP upgrades the request to a WebSocket and serves it until it
// closes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		http.Error(w, CodeShutdown, http.StatusServiceUnavailable)
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	defer g.wg.Done()
	// Past the upgrade the socket's own limits (LoginTimeout,
	// IdleTimeout) bound it, not the HTTP server's read deadline
	// (HTTPServer: Limits.HTTPReadTimeout), which would cut a healthy
	// socket mid-game. http.Hijacker's contract leaves clearing it to the
	// caller ("may have read or write deadlines already set"); today's
	// net/http happens to clear both on hijack, which this does not rely
	// on. A ResponseWriter that cannot (a test's recorder) has none.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if !offersSubprotocol(r) {
		// Refused before the upgrade: a client library refuses a 101
		// that lacks the protocol it offered, before its user could see
		// a close status.
		http.Error(w, CodeSubprotocol+": offer the subprotocol "+Subprotocol+" (or none)", http.StatusBadRequest)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}, OriginPatterns: g.cfg.OriginPatterns})
	if err != nil {
		return // Accept wrote the HTTP error
	}
	ws.SetReadLimit(int64(g.cfg.Limits.MaxMessage))
	l := g.cfg.Limits
	now := g.cfg.Clock.Now()
	c := &conn{
		g: g, ws: ws, done: make(chan struct{}), wake: make(chan struct{}, 1),
		limiter: rate.NewLimiter(rate.Limit(l.InputRate), l.InputBurst),
	}
	c.lastRead.Store(now.UnixNano())
	c.loginBy.Store(now.Add(l.LoginTimeout).UnixNano())
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		_ = ws.Close(StatusShutdown, CodeShutdown)
		return
	}
	g.conns[c] = struct{}{}
	g.mu.Unlock()
	c.serve(g.ctx)
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// offersSubprotocol reports whether r offers Subprotocol, or offers no
// subprotocol at all (served anyway). Offers may come in several header
// lines, each a comma-separated list.
func offersSubprotocol(r *http.Request) bool {
	offers := r.Header.Values("Sec-WebSocket-Protocol")
	if len(offers) == 0 {
		return true
	}
	for _, line := range offers {
		for p := range strings.SplitSeq(line, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

// register makes c the account's connection here, displacing an older
// local one; false if a newer one is already here (this login lost a race
// in the directory).
func (g *Gateway) register(c *conn, s *Session) bool {
	g.mu.Lock()
	old := g.sessions[s.account]
	if old != nil && old.sess.epoch > s.epoch {
		g.mu.Unlock()
		return false
	}
	c.sess = s
	c.nextRenew = g.cfg.Clock.Now().Add(g.cfg.RenewEvery)
	g.sessions[s.account] = c
	g.cfg.Metrics.sessions.Set(float64(len(g.sessions)))
	g.mu.Unlock()
	if old != nil {
		old.closeWith(StatusDisplaced, CodeDisplaced, "gateway: a newer login of this account displaced this one")
	}
	return true
}

// displaced tells the gateway of an older session of the account that it
// lost it: here, or through Config.Displace.
func (g *Gateway) displaced(ctx context.Context, old directory.Session) {
	if old.Gateway == g.cfg.Node {
		g.Displaced(old.Account, old.Epoch+1)
		return
	}
	if g.cfg.Displace != nil {
		g.cfg.Displace(ctx, old)
	}
}

// Displaced closes the account's connection here if its session epoch is
// below newer: a login elsewhere displaced it. The zone host calls it when
// another node says so; a later lease renewal finds it too.
func (g *Gateway) Displaced(a account.ID, newer directory.Epoch) {
	g.mu.Lock()
	c := g.sessions[a]
	g.mu.Unlock()
	if c != nil && c.sess.epoch < newer {
		c.closeWith(StatusDisplaced, CodeDisplaced, "gateway: a newer login of this account displaced this one")
	}
}

// leave ends a session that was registered: the world lets go of it and
// the directory entry is released unless a newer login holds it.
func (g *Gateway) leave(c *conn, s *Session) {
	g.mu.Lock()
	if g.sessions[s.account] == c {
		delete(g.sessions, s.account)
		g.cfg.Metrics.sessions.Set(float64(len(g.sessions)))
	}
	g.mu.Unlock()
	g.cfg.World.Leave(s)
	g.release(s)
}

func (g *Gateway) release(s *Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := g.cfg.Directory.Release(ctx, s.account, s.epoch)
	if err != nil && !errors.Is(err, directory.ErrStaleEpoch) && !errors.Is(err, directory.ErrNotFound) {
		g.cfg.Logger.Warn("gateway: release session", "account", s.account, "epoch", s.epoch, "err", err)
	}
}

// issueCredential arms a fresh resume credential for s in the directory
// and hands it to the client (ResumeCredential). Failing that (the
// directory out of reach), the client has none, and after a drop logs in
// anew: logged, not fatal to the session.
func (g *Gateway) issueCredential(ctx context.Context, c *conn, s *Session) {
	cred := Credential{Account: s.account, Epoch: s.epoch}
	if _, err := io.ReadFull(g.cfg.Rand, cred.Secret[:]); err != nil {
		g.cfg.Logger.Warn("gateway: resume credential: no secret", "account", s.account, "err", err)
		return
	}
	if err := g.cfg.Directory.ArmResume(ctx, s.account, s.epoch, cred.Hash(), g.cfg.ResumeWindow); err != nil {
		g.cfg.Logger.Warn("gateway: resume credential: arm", "account", s.account, "epoch", s.epoch, "err", err)
		return
	}
	c.enqueueRaw(appendResumeCredential(nil, cred.String(), g.cfg.ResumeWindow))
}

// revokeCredential forgets s's resume credential: the client logged out.
func (g *Gateway) revokeCredential(s *Session) {
	ctx, cancel := context.WithTimeout(g.ctx, 5*time.Second)
	defer cancel()
	if err := g.cfg.Directory.RevokeResume(ctx, s.account, s.epoch); err != nil {
		g.cfg.Logger.Warn("gateway: revoke resume credential", "account", s.account, "epoch", s.epoch, "err", err)
	}
}

// housekeep closes idle sockets and logins that take too long, cuts
// writes that stall, and renews the sessions' leases, on the injected
// clock.
func (g *Gateway) housekeep(t clock.Ticker) {
	defer g.wg.Done()
	defer t.Stop()
	var conns []*conn
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C():
		}
		now := g.cfg.Clock.Now()
		g.mu.Lock()
		conns = conns[:0]
		for c := range g.conns {
			conns = append(conns, c)
		}
		g.mu.Unlock()
		for _, c := range conns {
			if c.cutIfStalled(now, g.cfg.Limits.WriteTimeout) {
				continue
			}
			if by := c.loginBy.Load(); by != 0 && now.UnixNano() >= by {
				c.closeWith(StatusLoginFailed, CodeLoginTimeout, "gateway: no login in time")
				continue
			}
			if now.Sub(time.Unix(0, c.lastRead.Load())) >= g.cfg.Limits.IdleTimeout {
				c.closeWith(StatusIdle, CodeIdle, "gateway: nothing received for the idle timeout")
				continue
			}
			g.mu.Lock()
			s, due := c.sess, c.sess != nil && !now.Before(c.nextRenew)
			if due {
				c.nextRenew = now.Add(g.cfg.RenewEvery)
			}
			g.mu.Unlock()
			if due {
				g.renew(c, s)
			}
		}
	}
}

func (g *Gateway) renew(c *conn, s *Session) {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.RenewEvery)
	defer cancel()
	_, err := g.cfg.Directory.Renew(ctx, s.account, s.epoch)
	switch {
	case err == nil:
	case errors.Is(err, directory.ErrStaleEpoch):
		c.closeWith(StatusDisplaced, CodeDisplaced, "gateway: a newer login of this account displaced this one")
	case errors.Is(err, directory.ErrNotFound):
		c.closeWith(StatusExpired, CodeExpired, "gateway: the session's lease ran out (the directory was out of reach for longer than its TTL)")
	default:
		g.cfg.Logger.Warn("gateway: renew session", "account", s.account, "epoch", s.epoch, "err", err)
	}
}

// Close closes every socket (GATEWAY.SHUTDOWN), ends every session in the
// world, and returns once every goroutine of the gateway has returned.
// Idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		g.wg.Wait()
		return nil
	}
	g.closed = true
	conns := make([]*conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.closeWith(StatusShutdown, CodeShutdown, "gateway: the node is stopping")
	}
	g.cancel()
	g.wg.Wait()
	return nil
}
