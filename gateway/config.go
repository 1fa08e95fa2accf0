package gateway

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/nodename"
	"github.com/shardwise/shardwise/torus"
)

// Subprotocol is the WebSocket subprotocol of the client protocol. A
// client that offers none is served it anyway; one that offers only others
// is refused before the upgrade, HTTP 400 with CodeSubprotocol.
const Subprotocol = "shardwise.v1"

// Audience is the login token audience a gateway accepts.
const Audience = "gateway"

// DefaultResumeWindow is Config.ResumeWindow's default.
const DefaultResumeWindow = 60 * time.Second

// CheckResumeWindow reports a resume window that Config.ResumeWindow
// refuses (naming that field): whole milliseconds, within 1 s and 24 h. 0
// (the default) passes.
func CheckResumeWindow(w time.Duration) error {
	if w != 0 && (w < time.Second || w > 24*time.Hour || w%time.Millisecond != 0) {
		return errcode.Config("Config.ResumeWindow", w, "must be whole milliseconds, within 1s and 24h")
	}
	return nil
}

// Defaults of Limits.
const (
	DefaultMaxMessage   = 4 << 10
	DefaultInputRate    = 40
	DefaultInputBurst   = 80
	DefaultIdleTimeout  = 30 * time.Second
	DefaultLoginTimeout = 10 * time.Second
	DefaultSendBudget   = 4 << 20
	DefaultWriteTimeout = 5 * time.Second

	DefaultHTTPReadTimeout = 10 * time.Second
	DefaultHTTPIdleTimeout = 30 * time.Second
	DefaultMaxConnsPerAddr = 256
)

// Limits bound what one connection may cost the node.
type Limits struct {
	// MaxMessage is the largest client message accepted, in bytes; a larger
	// one closes the socket with status 1009. Default DefaultMaxMessage.
	MaxMessage int
	// InputRate and InputBurst are the token bucket every client message
	// passes (messages per second, and the burst above it). A message over
	// the rate is dropped and counted, and the client is told
	// (GATEWAY.RATE_LIMITED, at most once a second). Defaults
	// DefaultInputRate and DefaultInputBurst.
	InputRate  float64
	InputBurst int
	// IdleTimeout closes a socket that sent nothing (no input, no ping) for
	// this long. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// LoginTimeout closes a socket that has not logged in this long after
	// it connected, or whose login the directory has not answered by then.
	// Default DefaultLoginTimeout.
	LoginTimeout time.Duration
	// SendBudget is how many bytes may wait for a client to read them; a
	// client further behind is a slow reader and is disconnected (its
	// backlog dropped, never buffered without bound). One message alone in
	// the queue never counts as behind, whatever its size. Default
	// DefaultSendBudget (4 MiB: many minutes of a view at 20 kbit/s, a few
	// seconds of a login's terrain burst).
	SendBudget int
	// WriteTimeout bounds one write to the socket; a client whose TCP
	// window stays shut longer is a slow reader too. It is checked on
	// Clock by the housekeeper, every quarter of the shortest limit, and
	// a write is judged stalled only once two checks have seen it (a clock
	// that jumps cuts no write it merely caught in progress), so a stalled
	// write is cut between WriteTimeout and 1.5 times it. Default
	// DefaultWriteTimeout.
	WriteTimeout time.Duration

	// HTTPReadTimeout bounds reading one HTTP request on the gateway's
	// port, headers and body, from its first byte (or, for a connection's
	// first request, from the connection): a client that trickles a
	// request is cut. A WebSocket upgrade is bound by it only until it is
	// upgraded; the socket is then bound by IdleTimeout and LoginTimeout
	// instead. Applied by HTTPServer. Default DefaultHTTPReadTimeout.
	HTTPReadTimeout time.Duration
	// HTTPIdleTimeout closes an HTTP keep-alive connection that waits this
	// long for its next request (a page's connection after it loaded, a
	// connection refused 403 for its Origin): without it such a connection
	// holds a file descriptor for ever. Applied by HTTPServer. Default
	// DefaultHTTPIdleTimeout.
	HTTPIdleTimeout time.Duration
	// MaxConnsPerAddr caps the TCP connections open at once from one
	// remote IP address (HTTP and WebSocket alike; IPv6 by full address).
	// A connection over the cap is closed as it is accepted, before any
	// byte is read, and counted (shardwise_gateway_conns_refused_total).
	// Players behind one NAT share an address: the cap is a bound on what
	// one address may hold, not one per player. Applied by Listener.
	// Default DefaultMaxConnsPerAddr; negative: no cap (one process that
	// runs many clients over loopback, as the demo does).
	MaxConnsPerAddr int
}

func (l Limits) withDefaults() Limits {
	if l.MaxMessage == 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	if l.InputRate == 0 {
		l.InputRate = DefaultInputRate
	}
	if l.InputBurst == 0 {
		l.InputBurst = DefaultInputBurst
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.LoginTimeout == 0 {
		l.LoginTimeout = DefaultLoginTimeout
	}
	if l.SendBudget == 0 {
		l.SendBudget = DefaultSendBudget
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.HTTPReadTimeout == 0 {
		l.HTTPReadTimeout = DefaultHTTPReadTimeout
	}
	if l.HTTPIdleTimeout == 0 {
		l.HTTPIdleTimeout = DefaultHTTPIdleTimeout
	}
	if l.MaxConnsPerAddr == 0 {
		l.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	return l
}

// Validate reports the first invalid limit, after defaults, by its Go
// path in Config (Config.Limits.IdleTimeout).
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.MaxMessage < 64 || l.MaxMessage > 1<<20:
		return errcode.Config("Config.Limits.MaxMessage", l.MaxMessage, "must be within 64 bytes and 1 MiB")
	case !(l.InputRate > 0):
		return errcode.Config("Config.Limits.InputRate", l.InputRate, "must be above 0")
	case l.InputBurst < 1:
		return errcode.Config("Config.Limits.InputBurst", l.InputBurst, "must be at least 1")
	case l.IdleTimeout < time.Second:
		return errcode.Config("Config.Limits.IdleTimeout", l.IdleTimeout, "must be at least 1s")
	case l.LoginTimeout < 100*time.Millisecond:
		return errcode.Config("Config.Limits.LoginTimeout", l.LoginTimeout, "must be at least 100ms")
	case l.SendBudget < 64<<10:
		return errcode.Config("Config.Limits.SendBudget", l.SendBudget, "must be at least 64 KiB")
	case l.WriteTimeout < 100*time.Millisecond:
		return errcode.Config("Config.Limits.WriteTimeout", l.WriteTimeout, "must be at least 100ms")
	case l.HTTPReadTimeout < 100*time.Millisecond:
		return errcode.Config("Config.Limits.HTTPReadTimeout", l.HTTPReadTimeout, "must be at least 100ms")
	case l.HTTPIdleTimeout < 100*time.Millisecond:
		return errcode.Config("Config.Limits.HTTPIdleTimeout", l.HTTPIdleTimeout, "must be at least 100ms")
	}
	return nil
}

// Config configures a Gateway. Zero fields take the defaults documented on
// them.
type Config struct {
	// Name is the node's name, told to clients in Welcome. Required.
	Name string
	// Node is the node's number: the gateway the directory records for the
	// sessions this node serves. Required to be the node's own (0–255).
	Node directory.NodeID
	// Directory records sessions: epochs, leases, single-use token claims.
	// Required.
	Directory directory.Directory
	// Verifier checks login tokens; its audience must be Audience and its
	// SingleUse the same Directory, so a token is single use across the
	// cluster. Required.
	Verifier *logintoken.Verifier
	// World is the simulation the sessions play in. Required.
	World World
	// Geometry is the world told to clients in Welcome. Required (non-zero).
	Geometry torus.World
	// TickHz is the simulation rate told to clients. Default 20.
	TickHz int
	// Displace tells another node's gateway that its session was displaced
	// by a newer login here (the zone host sends it over the link). nil:
	// the old gateway learns it at its next lease renewal instead.
	Displace func(ctx context.Context, old directory.Session)
	// RenewEvery is how often each session's directory lease is renewed; a
	// renewal refused as stale means a newer login displaced the session.
	// Default a third of directory.DefaultLeaseTTL.
	RenewEvery time.Duration
	// ResumeWindow is how long a resume credential stays valid after its
	// session was last known alive (its last lease renewal): a client
	// whose socket dropped may Resume on any gateway within it, so after
	// a gateway's death it has between ResumeWindow-RenewEvery and
	// ResumeWindow. Whole milliseconds, within 1 s and 24 h. Default
	// DefaultResumeWindow (60 s).
	ResumeWindow time.Duration
	// Rand is where resume credentials' secrets come from. Default
	// crypto/rand.Reader; a test may give a seeded source.
	Rand io.Reader
	// Limits bound each connection.
	Limits Limits
	// OriginPatterns are the host patterns (path.Match) of web pages on
	// other origins whose browsers may connect, as in
	// websocket.AcceptOptions. Default none: same origin only (clients
	// that are not browsers send no Origin and are not affected).
	OriginPatterns []string
	// Clock drives idle checks, rate limits and renewals. Default clock.Real().
	Clock clock.Clock
	// Logger receives the gateway's records. Default: discard.
	Logger *slog.Logger
	// Metrics are the collectors to count into. Default: fresh ones, not
	// registered anywhere (Gateway.Metrics returns them).
	Metrics *Metrics
}

func (c Config) withDefaults() Config {
	if c.TickHz == 0 {
		c.TickHz = 20
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = directory.DefaultLeaseTTL / 3
	}
	if c.ResumeWindow == 0 {
		c.ResumeWindow = DefaultResumeWindow
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	c.Limits = c.Limits.withDefaults()
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	return c
}

// Validate reports the first invalid field, by its Go path (Config.Limits.IdleTimeout).
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := nodename.Check("Config.Name", c.Name); err != nil {
		return err
	}
	switch {
	case c.Directory == nil:
		return errcode.Config("Config.Directory", nil, "is required")
	case c.Verifier == nil:
		return errcode.Config("Config.Verifier", nil, "is required")
	case c.World == nil:
		return errcode.Config("Config.World", nil, "is required")
	case c.Geometry == (torus.World{}):
		return errcode.Config("Config.Geometry", c.Geometry, "is required")
	case c.TickHz < 1 || c.TickHz > 1000:
		return errcode.Config("Config.TickHz", c.TickHz, "must be within 1 and 1000")
	case c.RenewEvery < 10*time.Millisecond:
		return errcode.Config("Config.RenewEvery", c.RenewEvery, "must be at least 10ms")
	}
	if err := CheckResumeWindow(c.ResumeWindow); err != nil {
		return err
	}
	return c.Limits.Validate()
}
