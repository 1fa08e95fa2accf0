package router

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/hashring"
)

// Defaults, applied by Options.withDefaults (the one place they are filled).
// They are the TypeScript router's, so a mixed Go/TypeScript fleet behaves
// alike.
const (
	DefaultVnodes           = 100
	DefaultReplicas         = 3
	DefaultMaxRetries       = 5
	DefaultBaseDelay        = 200 * time.Millisecond
	DefaultMaxDelay         = 10 * time.Second
	DefaultHealthInterval   = 5 * time.Second
	DefaultHealthTimeout    = 2 * time.Second
	DefaultFailureThreshold = 2
	DefaultCloseTimeout     = 10 * time.Second
)

// Node is the address of one server and its weight. RemoveNode and MarkDown
// look only at Host and Port.
type Node struct {
	Host string
	Port int
	// Vnodes is the node's weight: its number of ring points. 0 means the
	// router's Options.Vnodes. A node keeps the weight it was added with
	// across mark-downs and rejoins.
	Vnodes int
}

// ID returns "host:port", the node's identity on the ring. It is a plain
// concatenation (no brackets around IPv6 hosts) because that is the label
// the TypeScript ring hashes; changing it would move every key.
func (n Node) ID() string { return n.Host + ":" + strconv.Itoa(n.Port) }

// Validate checks the address and the weight. AddNode calls it before it
// connects, so a bad node never opens a client.
func (n Node) Validate() error {
	if n.Host == "" {
		return errcode.Config("Node.Host", n.Host, "must not be empty")
	}
	if n.Port < 1 || n.Port > 65535 {
		return errcode.Config("Node.Port", n.Port, "must be between 1 and 65535")
	}
	if n.Vnodes < 0 || n.Vnodes > hashring.MaxVNodes {
		return errcode.Config("Node.Vnodes", n.Vnodes, "must be between 0 (router default) and "+strconv.Itoa(hashring.MaxVNodes))
	}
	return nil
}

// Retry is the backoff of AddNode's connect attempts and of background
// reconnects: attempt n (from 0) waits about min(BaseDelay·2ⁿ, MaxDelay),
// with equal jitter (see Backoff).
type Retry struct {
	// MaxRetries is how many times AddNode retries a failed connect, so it
	// makes MaxRetries+1 attempts. 0 means a single attempt. Background
	// reconnects ignore it: they retry until the node is removed or the
	// router closed.
	MaxRetries int
	// BaseDelay is the nominal first delay; 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the nominal delay; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
}

// Health configures background probes. A nil *Health turns probing off, and
// nodes then leave the ring only when a call to them fails or on MarkDown.
type Health[C any] struct {
	// Check probes one node; a nil error means healthy. It must return when
	// ctx is done: ctx ends after Timeout, or when the node leaves.
	Check func(ctx context.Context, c C, n Node) error
	// Interval is the pause between the end of one probe and the start of
	// the next; 0 means DefaultHealthInterval.
	Interval time.Duration
	// Timeout bounds one probe; a probe that exceeds it is a failure.
	// 0 means DefaultHealthTimeout.
	Timeout time.Duration
	// FailureThreshold is how many consecutive failed probes mark the node
	// down; 0 means DefaultFailureThreshold.
	FailureThreshold int
}

// Options configures a Router. The zero value of every optional field means
// its default, documented on the field.
type Options[C any] struct {
	// Connect opens a client to n. Required. It must return when ctx is
	// done (AddNode's ctx, or the node's removal, or Close).
	Connect func(ctx context.Context, n Node) (C, error)
	// Disconnect closes a client. Optional. The router calls it on its own
	// goroutines, so a slow Disconnect delays neither failover nor (beyond
	// CloseTimeout) Close; only an AddNode whose node was removed (or the
	// router closed) while it connected closes that client itself before
	// returning. Its error is logged.
	Disconnect func(c C, n Node) error
	// Vnodes is the weight of a node added with Node.Vnodes == 0;
	// 0 means DefaultVnodes.
	Vnodes int
	// Replicas is how many nodes hold a key, leader included; 0 means
	// DefaultReplicas. The live node count caps it.
	Replicas int
	// Retry is the connect and reconnect backoff; nil means the defaults.
	Retry *Retry
	// Health turns on background probes; nil means off.
	Health *Health[C]
	// ShouldMarkDown tells whether an error from fn is the node's fault.
	// When it says no, the node stays, and Execute returns the error to the
	// caller instead of trying the next replica. nil means always yes.
	ShouldMarkDown func(err error, n Node) bool
	// Hash is the ring's hash; nil means hashring.SHA1, compatible with the
	// TypeScript ring. Only used by the default ring placement.
	Hash hashring.HashFunc

	// Placement builds the key → owners map of the live nodes; nil means
	// RingPlacement(Hash). RendezvousPlacement routes like economy-lab's
	// scopeRouter instead.
	Placement PlacementFunc
	// AttemptTimeout bounds each call of fn inside Execute and ExecuteAll
	// with a context deadline, so a hung node becomes a failed attempt and
	// the call moves on to the next replica. 0 means no per-attempt bound:
	// only the caller's ctx limits fn. It uses the wall clock, not Clock,
	// because drivers read ctx.Deadline() to set socket deadlines.
	AttemptTimeout time.Duration
	// CloseTimeout bounds how long Close waits for user callbacks (Connect,
	// Disconnect, Check) that ignore their context; 0 means
	// DefaultCloseTimeout. Router goroutines themselves always stop. It is
	// measured on Clock, so with a fake clock a test must advance it for
	// Close to give up on a hung callback.
	CloseTimeout time.Duration
	// Clock drives backoff, probe intervals and probe timeouts; nil means
	// the wall clock. Tests pass clock.NewFake.
	Clock clock.Clock
	// Rand is the source of backoff jitter; nil means the runtime's
	// generator. Access is serialised by the router.
	Rand rand.Source
	// Logger receives mark-down, reconnect and rejoin events; nil discards.
	Logger *slog.Logger
}

// Validate reports the first invalid field, naming it and its value. It
// does not change o.
func (o Options[C]) Validate() error {
	if o.Connect == nil {
		return errcode.Config("Connect", nil, "is required")
	}
	if o.Vnodes < 0 || o.Vnodes > hashring.MaxVNodes {
		return errcode.Config("Vnodes", o.Vnodes, "must be between 0 (default) and "+strconv.Itoa(hashring.MaxVNodes))
	}
	if o.Replicas < 0 {
		return errcode.Config("Replicas", o.Replicas, "must be ≥ 1, or 0 for the default")
	}
	if r := o.Retry; r != nil {
		if r.MaxRetries < 0 {
			return errcode.Config("Retry.MaxRetries", r.MaxRetries, "must be ≥ 0")
		}
		if r.BaseDelay < 0 {
			return errcode.Config("Retry.BaseDelay", r.BaseDelay, "must be > 0, or 0 for the default")
		}
		if r.MaxDelay < 0 {
			return errcode.Config("Retry.MaxDelay", r.MaxDelay, "must be > 0, or 0 for the default")
		}
		base, maxDelay := orDuration(r.BaseDelay, DefaultBaseDelay), orDuration(r.MaxDelay, DefaultMaxDelay)
		if maxDelay < base {
			return errcode.Config("Retry.MaxDelay", r.MaxDelay, "must be ≥ Retry.BaseDelay ("+base.String()+")")
		}
	}
	if h := o.Health; h != nil {
		if h.Check == nil {
			return errcode.Config("Health.Check", nil, "is required when Health is set")
		}
		if h.Interval < 0 {
			return errcode.Config("Health.Interval", h.Interval, "must be > 0, or 0 for the default")
		}
		if h.Timeout < 0 {
			return errcode.Config("Health.Timeout", h.Timeout, "must be > 0, or 0 for the default")
		}
		if h.FailureThreshold < 0 {
			return errcode.Config("Health.FailureThreshold", h.FailureThreshold, "must be ≥ 1, or 0 for the default")
		}
	}
	if o.Placement != nil && o.Hash != nil {
		return errcode.Config("Hash", "non-nil", "only applies to the default ring placement, and Placement is set; pass the hash to RingPlacement instead")
	}
	if o.AttemptTimeout < 0 {
		return errcode.Config("AttemptTimeout", o.AttemptTimeout, "must be ≥ 0")
	}
	if o.CloseTimeout < 0 {
		return errcode.Config("CloseTimeout", o.CloseTimeout, "must be > 0, or 0 for the default")
	}
	return nil
}

// withDefaults returns a copy of o with every zero optional field set to
// its default. Pointer fields are copied, so the caller's structs are never
// written.
func (o Options[C]) withDefaults() Options[C] {
	if o.Vnodes == 0 {
		o.Vnodes = DefaultVnodes
	}
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	retry := Retry{MaxRetries: DefaultMaxRetries}
	if o.Retry != nil {
		retry = *o.Retry
	}
	retry.BaseDelay = orDuration(retry.BaseDelay, DefaultBaseDelay)
	retry.MaxDelay = orDuration(retry.MaxDelay, DefaultMaxDelay)
	o.Retry = &retry
	if o.Health != nil {
		h := *o.Health
		h.Interval = orDuration(h.Interval, DefaultHealthInterval)
		h.Timeout = orDuration(h.Timeout, DefaultHealthTimeout)
		if h.FailureThreshold == 0 {
			h.FailureThreshold = DefaultFailureThreshold
		}
		o.Health = &h
	}
	if o.ShouldMarkDown == nil {
		o.ShouldMarkDown = func(error, Node) bool { return true }
	}
	if o.Placement == nil {
		o.Placement = RingPlacement(o.Hash)
	}
	o.CloseTimeout = orDuration(o.CloseTimeout, DefaultCloseTimeout)
	o.Clock = clock.OrReal(o.Clock)
	if o.Rand == nil {
		o.Rand = runtimeSource{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// runtimeSource draws from the runtime's generator, which is seeded per
// process and safe for concurrent use.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
